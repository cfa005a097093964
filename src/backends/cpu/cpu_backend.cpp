#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/cpu/cpu_kernel.h"
#include "backends/op_table.h"
#include "lantern/error.h"

namespace lantern {
namespace {

using cpu::Kernel;

// The CPU op table: what the CPU supports is exactly what it can dispatch.
const OpTable<Kernel>& ops() {
    static const OpTable<Kernel> table = {
        {Op::GetRows, cpu::get_rows_accepts, {cpu::get_rows, nullptr}},
        {Op::MulMat, cpu::mul_mat_accepts, {cpu::mul_mat, cpu::mul_mat_scratch}},
        {Op::RmsNorm, nullptr, {cpu::rms_norm, nullptr}},
        {Op::Add, nullptr, {cpu::add, nullptr}},
        {Op::Mul, nullptr, {cpu::mul, nullptr}},
        {Op::Scale, nullptr, {cpu::scale, nullptr}},
        {Op::SiluMul, nullptr, {cpu::silu_mul, nullptr}},
        {Op::GeluMul, nullptr, {cpu::gelu_mul, nullptr}},
        {Op::SoftMax, nullptr, {cpu::soft_max, nullptr}},
        {Op::Rope, nullptr, {cpu::rope, nullptr}},
        {Op::Copy, cpu::copy_accepts, {cpu::copy, nullptr}},
        {Op::KvStore, cpu::kv_store_accepts, {cpu::kv_store, nullptr}},
        {Op::Attention, cpu::attention_accepts, {cpu::attention, cpu::attention_scratch}},
        {Op::Softcap, nullptr, {cpu::softcap, nullptr}},
        {Op::SigmoidGate, nullptr, {cpu::sigmoid_gate, nullptr}},
        {Op::MoeFfn, cpu::moe_ffn_accepts, {cpu::moe_ffn, cpu::moe_ffn_scratch}},
        {Op::AddRmsNorm, nullptr, {cpu::add_rms_norm, nullptr}},
        {Op::RopeQK, nullptr, {cpu::rope_qk, nullptr}},
        {Op::MulMatAdd, cpu::mul_mat_accepts, {cpu::mul_mat_add, cpu::mul_mat_scratch}},
    };
    return table;
}

class HostBuffer final : public Buffer {
public:
    HostBuffer(Backend& b, size_t size, void* base, bool owned) : Buffer(b, size, base), owned_(owned) {}
    ~HostBuffer() override {
        if (owned_) std::free(base());
    }
    void write(size_t offset, const void* src, size_t n) override {
        std::memcpy(static_cast<uint8_t*>(base()) + offset, src, n);
    }
    void read(size_t offset, void* dst, size_t n) const override {
        std::memcpy(dst, static_cast<const uint8_t*>(base()) + offset, n);
    }
    void fill(size_t offset, uint8_t value, size_t n) override {
        std::memset(static_cast<uint8_t*>(base()) + offset, value, n);
    }

private:
    bool owned_;
};

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "CPU";
}

}  // namespace

CpuBackend::CpuBackend(int n_threads) : pool_(std::make_unique<ThreadPool>(n_threads)) {}

std::string CpuBackend::description() const { return cpu_model_name(); }

void CpuBackend::set_threads(int n) {
    if (n != pool_->size()) pool_ = std::make_unique<ThreadPool>(n);
}

std::unique_ptr<Buffer> CpuBackend::alloc(size_t size, BufferKind /*kind*/) {
    const size_t rounded = (size + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) throw Error(ErrorCode::OutOfMemory, "cpu: cannot allocate " + std::to_string(size) + " bytes");
    return std::make_unique<HostBuffer>(*this, size, p, true);
}

std::unique_ptr<Buffer> CpuBackend::wrap(const void* data, size_t size) {
    return std::make_unique<HostBuffer>(*this, size, const_cast<void*>(data), false);
}

bool CpuBackend::supports(const Tensor& node) const { return ops().supports(node); }

void CpuBackend::compute(const std::vector<Tensor*>& nodes, const ComputeHints& /*hints*/) {
    const int nth = pool_->size();
    // Scratch: the largest any node asks for (nodes run one after another).
    size_t need = 0;
    for (const Tensor* n : nodes) {
        const Kernel& k = ops().find(n->op)->run;
        if (k.scratch != nullptr) need = std::max(need, k.scratch(*n, nth));
    }
    if (scratch_.size() < need) scratch_.resize(need + need / 4);

    ThreadPool* pool = pool_.get();
    uint8_t* scratch = scratch_.data();
    pool->run([&](int ith, int n_threads) {
        cpu::KernelContext ctx{ith, n_threads, scratch, pool};
        for (size_t i = 0; i < nodes.size(); ++i) {
            ops().find(nodes[i]->op)->run.run(ctx, *nodes[i]);
            if (i + 1 < nodes.size()) pool->barrier();
        }
    });
    ++stats_.eager_steps;
}

}  // namespace lantern
