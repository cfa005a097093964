#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/cpu/cpu_kernel.h"
#include "backends/op_table.h"
#include "lantern/error.h"
#include "quant/packed.h"

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

bool CpuBackend::pack_weight(const Tensor& w) {
    if (packed_.count(&w) != 0) return true;
    // A 3-D tensor's slices (experts) packed whole groups at a time are one
    // packed matrix of all their rows: slice e starts at e * packed_bytes(ne[1], ne[0]).
    const int64_t cols = w.ne[0], rows = w.ne[1] * w.ne[2];
    if (w.ne[3] != 1 || !w.is_contiguous() || !quant::can_pack(w.type, w.ne[1], cols)) return false;
    const quant::PackedOps& ops = *quant::packed_ops(w.type);
    std::unique_ptr<Buffer> buffer = alloc(ops.packed_bytes(rows, cols), BufferKind::Weights);
    // Groups of rows split over the threads (a load packs hundreds of MB).
    const int64_t groups = rows / quant::kPackRows;
    const size_t group_bytes = ops.packed_bytes(quant::kPackRows, cols);
    const auto* src = static_cast<const uint8_t*>(tensor_address(w));
    auto* dst = static_cast<uint8_t*>(buffer->base());
    pool_->run([&](int ith, int nth) {
        int64_t begin, end;
        cpu::split_range(groups, ith, nth, begin, end);
        if (begin < end) {
            ops.pack(src + static_cast<size_t>(begin * quant::kPackRows) * w.nb[1], w.nb[1],
                     (end - begin) * quant::kPackRows, cols, dst + static_cast<size_t>(begin) * group_bytes);
        }
    });
    packed_.emplace(&w, std::move(buffer));
    return true;
}

BackendStats CpuBackend::stats() const {
    BackendStats s = stats_;
    s.packed_weights = packed_bytes();
    return s;
}

std::pair<size_t, size_t> CpuBackend::packed_sources(Op op) {
    switch (op) {
        case Op::MulMat:
        case Op::MulMatAdd: return {0, 1};
        case Op::MoeFfn: return {2, 5};
        default: return {0, 0};
    }
}

size_t CpuBackend::packed_bytes() const {
    size_t n = 0;
    for (const auto& [w, buffer] : packed_) n += buffer->size();
    return n;
}

void CpuBackend::compute(const std::vector<Tensor*>& nodes, const ComputeHints& /*hints*/) {
    const int nth = pool_->size();
    // Scratch: the largest any node asks for (nodes run one after another).
    size_t need = 0;
    for (const Tensor* n : nodes) {
        const Kernel& k = ops().find(n->op)->run;
        if (k.scratch != nullptr) need = std::max(need, k.scratch(*n, nth));
    }
    if (scratch_.size() < need) scratch_.resize(need + need / 4);

    // Packed weights of the matrix products and MoE experts.
    node_packed_.assign(nodes.size(), {});
    if (!packed_.empty()) {
        for (size_t i = 0; i < nodes.size(); ++i) {
            const auto [first, last] = packed_sources(nodes[i]->op);
            for (size_t s = first; s < last; ++s) {
                if (auto it = packed_.find(nodes[i]->src[s]); it != packed_.end()) node_packed_[i][s] = it->second->base();
            }
        }
    }

    ThreadPool* pool = pool_.get();
    uint8_t* scratch = scratch_.data();
    pool->run([&](int ith, int n_threads) {
        cpu::KernelContext ctx{ith, n_threads, scratch, pool};
        for (size_t i = 0; i < nodes.size(); ++i) {
            ctx.packed = node_packed_[i];
            ops().find(nodes[i]->op)->run.run(ctx, *nodes[i]);
            if (i + 1 < nodes.size()) pool->barrier();
        }
    });
    ++stats_.eager_steps;
}

}  // namespace lantern
