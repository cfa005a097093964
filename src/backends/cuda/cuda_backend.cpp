#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/moe.cuh"
#include "backends/cuda/weight_layout.h"
#include "backends/op_table.h"
#include "lantern/error.h"

namespace lantern::cuda {
namespace {

constexpr size_t kStagingBytes = size_t{16} << 20;
constexpr size_t kCublasWorkspace = size_t{32} << 20;

// The CUDA op table: what the backend supports is exactly what it dispatches.
const OpTable<Kernel>& ops() {
    static const OpTable<Kernel> table = {
        {Op::GetRows, accepts_get_rows, {run_get_rows, nullptr}},
        {Op::MulMat, accepts_mul_mat, {run_mul_mat, need_mul_mat}},
        {Op::RmsNorm, accepts_rms_norm, {run_rms_norm, nullptr}},
        {Op::Add, accepts_f32_binary, {run_add, nullptr}},
        {Op::Mul, accepts_f32_binary, {run_mul, nullptr}},
        {Op::Scale, accepts_f32_unary, {run_scale, nullptr}},
        {Op::Softcap, accepts_f32_unary, {run_softcap, nullptr}},
        {Op::SigmoidGate, accepts_sigmoid_gate, {run_sigmoid_gate, nullptr}},
        {Op::SiluMul, accepts_f32_binary, {run_silu_mul, nullptr}},
        {Op::GeluMul, accepts_f32_binary, {run_gelu_mul, nullptr}},
        {Op::SoftMax, accepts_soft_max, {run_soft_max, nullptr}},
        {Op::Rope, accepts_rope, {run_rope, nullptr}},
        {Op::Copy, accepts_copy, {run_copy, nullptr}},
        {Op::KvStore, accepts_kv_store, {run_kv_store, nullptr}},
        {Op::Attention, accepts_attention, {run_attention, need_attention}},
        {Op::AddRmsNorm, accepts_add_rms_norm, {run_add_rms_norm, nullptr}},
        {Op::RopeQK, accepts_rope_qk, {run_rope_qk, nullptr}},
        {Op::MoeFfn, accepts_moe_ffn, {run_moe_ffn, need_moe_ffn}},
        {Op::MulMatAdd, accepts_mul_mat_add, {run_mul_mat_add, need_mul_mat}},
    };
    return table;
}

class CudaBuffer final : public Buffer {
public:
    CudaBuffer(CudaBackend& b, size_t size, DevicePool::Block block)
        : Buffer(b, size, block.ptr), owner_(b), block_(block) {}
    ~CudaBuffer() override { owner_.pool().release(block_); }
    void write(size_t offset, const void* src, size_t n) override {
        owner_.copy_to_device(static_cast<uint8_t*>(base()) + offset, src, n);
    }
    void read(size_t offset, void* dst, size_t n) const override {
        owner_.copy_to_host(dst, static_cast<const uint8_t*>(base()) + offset, n);
    }
    void fill(size_t offset, uint8_t value, size_t n) override {
        owner_.fill_device(static_cast<uint8_t*>(base()) + offset, value, n);
    }

private:
    CudaBackend& owner_;
    DevicePool::Block block_;
};

bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// A switch that is on unless the variable is "0".
bool env_not_off(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || std::strcmp(v, "0") != 0;
}

// A non-negative number from the environment (capped at 2^20), if set;
// anything else is an error naming the variable and what it wants.
std::optional<int64_t> env_count(const char* name, const char* what) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0) {
        throw Error(ErrorCode::InvalidArgument, std::string("cuda: ") + name + " must be " + what + ", not '" + v + "'");
    }
    return std::min<int64_t>(n, int64_t{1} << 20);
}

bool is_repacked(const Tensor& w) { return is_device_weight_type(w.type) && !is_plain(w.type); }

WeightLayout layout_of(const Tensor& w) { return weight_layout(w.type, w.ne[0], w.ne[1] * w.ne[2] * w.ne[3]); }

}  // namespace

CudaBackend::CudaBackend(int device)
    : device_(device), pool_(device), graph_config_(GraphConfig::from_env()), graphs_(graph_config_.capacity) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
        cudaGetLastError();
        throw Error(ErrorCode::Backend, "cuda: no device " + std::to_string(device) + " (" + std::to_string(count) +
                                            " present)");
    }
    try {
        init();
    } catch (...) {
        release();
        throw;
    }
}

void CudaBackend::init() {
    check(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    description_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                   std::to_string(prop.multiProcessorCount) + " SMs, " +
                   std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorCode::Backend, "cuda: cublasCreate failed");
    cublasSetStream(cublas_, stream_);
    grow(cublas_ws_, kCublasWorkspace, false);
    if (cublasSetWorkspace(cublas_, cublas_ws_.block.ptr, cublas_ws_.size) != CUBLAS_STATUS_SUCCESS) {
        throw Error(ErrorCode::Backend, "cuda: cublasSetWorkspace failed");
    }
    check(cudaMallocHost(reinterpret_cast<void**>(&staging_), kStagingBytes), "cudaMallocHost");
    check(cudaMallocHost(reinterpret_cast<void**>(&ctx_.host_moe), (moe::kMaxExperts + 1) * sizeof(int32_t)),
          "cudaMallocHost");
    init_matmul_kernels(static_cast<int>(prop.sharedMemPerBlockOptin));

    ctx_.stream = stream_;
    ctx_.cublas = cublas_;
    ctx_.sm_count = prop.multiProcessorCount;
    ctx_.max_smem = static_cast<int>(prop.sharedMemPerBlockOptin);
    debug_sync_ = env_flag("LANTERN_CUDA_SYNC");
    if (env_flag("LANTERN_CUDA_TIMING")) {
        timing_ = std::make_unique<ReplayTiming>();
        check(cudaEventCreate(&timing_->begin), "cudaEventCreate");
        check(cudaEventCreate(&timing_->end), "cudaEventCreate");
    }
    ctx_.pdl = env_not_off("LANTERN_CUDA_PDL");
    ctx_.bulk = env_not_off("LANTERN_CUDA_BULK");
    ctx_.runs = env_not_off("LANTERN_CUDA_RUNS");
    ctx_.moe_gemm = env_not_off("LANTERN_CUDA_MOE_GEMM");
    ctx_.fuse_attention = env_not_off("LANTERN_CUDA_FUSE_ATTENTION");
    if (const auto n = env_count("LANTERN_CUDA_BALANCE", "a number of rounds (0: off)")) {
        ctx_.balance_rounds = static_cast<int>(*n);
    }
    if (const auto mb = env_count("LANTERN_CUDA_PREFETCH_MB", "a size in MiB (0: no limit)")) ctx_.prefetch_limit = *mb << 20;
    if (const char* mv = std::getenv("LANTERN_CUDA_MATVEC"); mv != nullptr && *mv != '\0') {
        if (std::strcmp(mv, "general") == 0) {
            ctx_.matvec = MatVecKernel::General;
        } else if (std::strcmp(mv, "streamed") == 0) {
            ctx_.matvec = MatVecKernel::Streamed;
        } else if (std::strcmp(mv, "prefetch") == 0) {
            ctx_.matvec = MatVecKernel::StreamedPrefetch;
        } else if (std::strcmp(mv, "bulk") == 0) {
            ctx_.matvec = MatVecKernel::Bulk;
        } else {
            throw Error(ErrorCode::InvalidArgument,
                        std::string("cuda: LANTERN_CUDA_MATVEC must be general, streamed, prefetch or bulk, not '") + mv + "'");
        }
    }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::collect_timing() {
    if (!timing_ || !timing_->pending) return;
    timing_->pending = false;
    float ms = 0;
    if (cudaEventSynchronize(timing_->end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, timing_->begin, timing_->end) != cudaSuccess) {
        return;
    }
    ++timing_->steps;
    timing_->total_ms += ms;
    timing_->min_ms = std::min(timing_->min_ms, static_cast<double>(ms));
}

void CudaBackend::release() {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    mv::dump_matvec_trace();
    if (timing_) {
        collect_timing();
        if (timing_->steps > 0) {
            std::fprintf(stderr, "cuda: %llu replayed steps, GPU time per step %.1f us (min %.1f us)\n",
                         static_cast<unsigned long long>(timing_->steps), 1e3 * timing_->total_ms / timing_->steps,
                         1e3 * timing_->min_ms);
        }
        if (timing_->replays > 1) {
            const double n = static_cast<double>(timing_->replays);
            const double period = timing_->period_us / (n - 1), comp = timing_->compute_us / n,
                         copy = timing_->copy_us / n, sync = timing_->sync_us / n;
            std::fprintf(stderr,
                         "cuda: host, per step between replays: %.1f us = compute() %.1f (graph lookup %.1f, "
                         "cudaGraphLaunch %.1f) + copy calls %.1f + synchronize() %.1f (matching the keyed step "
                         "%.1f) + elsewhere %.1f\n",
                         period, comp, timing_->lookup_us / n, timing_->launch_us / n, copy, sync,
                         timing_->verify_us / n, period - comp - copy - sync);
        }
        cudaEventDestroy(timing_->begin);
        cudaEventDestroy(timing_->end);
        timing_.reset();
    }
    graphs_.clear();
    for (const Pinned& r : pinned_) cudaHostUnregister(r.p);
    pinned_.clear();
    for (Region* r : {&cublas_ws_, &dequant_, &act_, &attn_partial_, &attn_counters_, &moe_}) {
        pool_.release(r->block);
        *r = Region{};
    }
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (staging_ != nullptr) cudaFreeHost(staging_);
    if (ctx_.host_moe != nullptr) cudaFreeHost(ctx_.host_moe);
    ctx_.host_moe = nullptr;
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cublas_ = nullptr;
    staging_ = nullptr;
    stream_ = nullptr;
    cudaGetLastError();
}

std::unique_ptr<Buffer> CudaBackend::alloc(size_t size, BufferKind /*kind*/) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    return std::make_unique<CudaBuffer>(*this, size, pool_.allocate(size == 0 ? 1 : size));
}

bool CudaBackend::supports(const Tensor& node) const { return ops().supports(node); }

size_t CudaBackend::weight_bytes(const Tensor& w) const {
    if (is_repacked(w) && w.ne[0] % dtype_block_size(w.type) == 0) return layout_of(w).total;
    return w.nbytes();
}

void CudaBackend::upload_weight(const Tensor& w, const void* host) {
    if (!is_repacked(w) || w.ne[0] % dtype_block_size(w.type) != 0) {
        copy_to_device(tensor_address(w), host, w.nbytes());
        return;
    }
    const WeightLayout l = layout_of(w);
    std::vector<uint8_t> packed(l.total);
    repack_weight(l, host, packed.data());
    copy_to_device(tensor_address(w), packed.data(), packed.size());
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t n) {
    if (n == 0) return;
    flush_writes();
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)");
    synchronize();
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t n) {
    if (n == 0) return;
    flush_writes();
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
    synchronize();
}

void CudaBackend::fill_device(void* dst, uint8_t value, size_t n) {
    if (n == 0) return;
    flush_writes();
    check(cudaMemsetAsync(dst, value, n, stream_), "cudaMemsetAsync");
    synchronize();
}

void* CudaBackend::staging_slot(size_t n) {
    const size_t rounded = (n + 255) / 256 * 256;
    if (staging_used_ + rounded > kStagingBytes) synchronize();
    void* p = staging_ + staging_used_;
    staging_used_ += rounded;
    return p;
}

void CudaBackend::set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n) {
    if (n == 0) return;
    const HostSpan span(host_sum(&ReplayTiming::copy_us));
    uint8_t* dst = static_cast<uint8_t*>(tensor_address(t)) + offset;
    if (n <= kHeldWriteMax) {
        held_dst_.push_back(dst);
        held_at_.push_back(held_bytes_.size());
        held_size_.push_back(n);
        const auto* b = static_cast<const uint8_t*>(data);
        held_bytes_.insert(held_bytes_.end(), b, b + n);
        return;
    }
    if (n > kStagingBytes / 4) {
        // Pageable source: the copy has left `data` when the call returns.
        check(cudaMemcpyAsync(dst, data, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (input)");
        return;
    }
    void* slot = staging_slot(n);
    std::memcpy(slot, data, n);
    check(cudaMemcpyAsync(dst, slot, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (input)");
}

void CudaBackend::flush_writes() {
    if (held_dst_.empty()) return;
    const HostSpan span(host_sum(&ReplayTiming::copy_us));
    const size_t count = held_dst_.size();
    const void** src = held_sources();
    // The driver reads the sources during the call (they are ours and are
    // reused right after); the writes still happen in stream order.
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
    size_t attr_at = 0;
    const cudaError_t err =
        cudaMemcpyBatchAsync(held_dst_.data(), src, held_size_.data(), count, &attr, &attr_at, 1, stream_);
    if (err != cudaSuccess) {
        // A driver without batched copies: one call each (pageable sources,
        // so each has left our memory when its call returns).
        cudaGetLastError();
        for (size_t i = 0; i < count; ++i) {
            check(cudaMemcpyAsync(held_dst_[i], src[i], held_size_[i], cudaMemcpyHostToDevice, stream_),
                  "cudaMemcpyAsync (input)");
        }
    }
    clear_held();
}

const void** CudaBackend::held_sources() {
    held_src_.resize(held_dst_.size());
    for (size_t i = 0; i < held_dst_.size(); ++i) held_src_[i] = held_bytes_.data() + held_at_[i];
    return held_src_.data();
}

void CudaBackend::clear_held() {
    held_dst_.clear();
    held_at_.clear();
    held_size_.clear();
    held_bytes_.clear();
}

bool CudaBackend::is_pinned(const void* p, size_t n) const {
    const auto* b = static_cast<const uint8_t*>(p);
    return std::any_of(pinned_.begin(), pinned_.end(), [&](const Pinned& r) { return b >= r.p && b + n <= r.p + r.n; });
}

void CudaBackend::pin_host(void* p, size_t n) {
    if (p == nullptr || n == 0 || is_pinned(p, n)) return;
    check(cudaSetDevice(device_), "cudaSetDevice");
    if (cudaHostRegister(p, n, cudaHostRegisterDefault) != cudaSuccess) {
        cudaGetLastError();  // a hint only: reads of this memory keep going through the staging area
        return;
    }
    pinned_.push_back(Pinned{static_cast<uint8_t*>(p), n});
}

void CudaBackend::unpin_host(void* p) {
    const auto it = std::find_if(pinned_.begin(), pinned_.end(), [&](const Pinned& r) { return r.p == p; });
    if (it == pinned_.end()) return;
    synchronize();  // queued reads may still target it
    cudaHostUnregister(p);
    cudaGetLastError();
    pinned_.erase(it);
}

void CudaBackend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n) {
    if (n == 0) return;
    flush_writes();
    const HostSpan span(host_sum(&ReplayTiming::copy_us));
    const uint8_t* src = static_cast<const uint8_t*>(tensor_address(t)) + offset;
    if (n > kStagingBytes / 4 || is_pinned(data, n)) {
        // Pageable memory: the copy has landed when the call returns; pinned:
        // when synchronize() returns.
        check(cudaMemcpyAsync(data, src, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (output)");
        return;
    }
    void* slot = staging_slot(n);
    check(cudaMemcpyAsync(slot, src, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (output)");
    pending_reads_.push_back(PendingRead{data, static_cast<size_t>(static_cast<uint8_t*>(slot) - staging_), n});
}

void CudaBackend::synchronize() {
    flush_writes();
    const HostSpan span(host_sum(&ReplayTiming::sync_us));
    {
        // While the device runs a keyed replay (GraphCache::lookup).
        const HostSpan in_verify(host_sum(&ReplayTiming::verify_us));
        graphs_.verify();
    }
    drain();
    for (const PendingRead& r : pending_reads_) std::memcpy(r.dst, staging_ + r.offset, r.n);
    pending_reads_.clear();
    staging_used_ = 0;
}

void CudaBackend::drain() {
    const cudaError_t err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) {
        pending_reads_.clear();
        staging_used_ = 0;
        fail("cudaStreamSynchronize (queued work)", cudaGetErrorString(err),
             "set LANTERN_CUDA_SYNC=1 to find the failing op");
    }
    ++syncs_;
}

BackendStats CudaBackend::stats() const {
    BackendStats s = graphs_.stats();
    s.eager_steps = eager_steps_;
    s.mem_in_use = pool_.in_use();
    s.mem_peak = pool_.peak();
    s.mem_reserved = pool_.reserved();
    return s;
}

bool CudaBackend::grow(Region& r, size_t bytes, bool zero) {
    if (bytes <= r.size) return false;
    if (r.block.ptr != nullptr) {
        // Queued (or recorded) work may still use the old region (the held
        // inputs stay held: the step being planned may record them).
        drain();
        pool_.release(r.block);
        r = Region{};
    }
    r.block = pool_.allocate(bytes);
    r.size = r.block.size;
    if (zero) check(cudaMemsetAsync(r.block.ptr, 0, r.size, stream_), "cudaMemsetAsync (workspace)");
    return true;
}

void CudaBackend::reserve(const WorkspaceNeeds& needs) {
    bool grew = grow(dequant_, needs.dequant, false);
    grew |= grow(act_, needs.act, false);
    grew |= grow(attn_partial_, needs.attn_partial, false);
    grew |= grow(attn_counters_, needs.attn_counters, true);
    grew |= grow(moe_, needs.moe, false);
    if (grew) {
        // Recorded graphs point at the old regions.
        graphs_.clear();
        ctx_.ws.dequant = dequant_.block.ptr;
        ctx_.ws.act = act_.block.ptr;
        ctx_.ws.attn_partial = static_cast<float*>(attn_partial_.block.ptr);
        ctx_.ws.attn_counters = static_cast<int*>(attn_counters_.block.ptr);
        ctx_.ws.moe = moe_.block.ptr;
    }
}

void CudaBackend::run(const std::vector<Launch>& launches) {
    for (const Launch& l : launches) {
        switch (l.kind) {
            case Launch::Kind::Single: ops().find(l.nodes[0]->op)->run.run(ctx_, *l.nodes[0]); break;
            case Launch::Kind::MatVecGroup:
                run_mul_mat_group(ctx_, l.nodes.data(), l.n, nullptr, l.norm, l.residual_settled);
                break;
            case Launch::Kind::GateUpSilu:
                run_mul_mat_group(ctx_, l.nodes.data(), 2, l.nodes[2], l.norm, l.residual_settled);
                break;
            case Launch::Kind::RopeStore: run_rope_qk_store(ctx_, *l.nodes[0], *l.nodes[1], *l.nodes[2]); break;
            case Launch::Kind::RopeStoreAttention:
                run_rope_store_attention(ctx_, *l.nodes[0], *l.nodes[1], *l.nodes[2], *l.nodes[3]);
                break;
        }
        if (debug_sync_) check(cudaStreamSynchronize(stream_), "kernel execution", *l.nodes[0]);
    }
}

void CudaBackend::compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) {
    if (nodes.empty()) return;
    check(cudaSetDevice(device_), "cudaSetDevice");
    bool record = graph_config_.wants(hints) && !debug_sync_;
    if (record && hints.prefill) {
        // A mixture of experts' prompt GEMMs wait on the host for their
        // counts per expert, which a recording cannot: such a prompt step
        // runs as it comes even under LANTERN_GRAPHS_PREFILL (recorded, it
        // would take the per-pair kernels, many times slower).
        for (const Tensor* n : nodes) {
            if (n->op == Op::MoeFfn && moe::prompt_wanted(ctx_, *n)) record = false;
        }
    }
    if (!record) {
        flush_writes();  // first: the copies run while the host plans the step
        plan(nodes);
        run(launches_);
        ++eager_steps_;
        return;
    }
    {
        const HostSpan in_compute(host_sum(&ReplayTiming::compute_us));
        CudaGraph* found = nullptr;
        {
            const HostSpan in_lookup(host_sum(&ReplayTiming::lookup_us));
            found = graphs_.lookup(nodes, hints.step_key);
        }
        // A recording that copies its inputs takes only writes that go where
        // its own went; else a new one is recorded (rare: a step's inputs are
        // the same tensors every time).
        if (found != nullptr &&
            (found->inputs().empty() ||
             found->inputs().same_layout(held_dst_.data(), held_size_.data(), held_dst_.size()))) {
            replay(*found);
            return;
        }
    }
    plan(nodes);
    auto inputs = std::make_unique<GraphInputs>(held_dst_.data(), held_size_.data(), held_dst_.size());
    if (inputs->empty()) flush_writes();
    const InputCopies copies = inputs->copies();
    std::unique_ptr<CudaGraph> g = CudaGraph::capture(
        stream_,
        [&] {
            if (copies.n > 0) run_load_inputs(ctx_, copies);
            run(launches_);
        },
        std::move(inputs));
    // The recording this insert evicts may still be running, reading its
    // inputs' host memory: that memory is freed with it.
    if (graphs_.size() >= graphs_.capacity()) drain();
    replay(*graphs_.insert(nodes, std::move(g), hints.step_key));
}

void CudaBackend::plan(const std::vector<Tensor*>& nodes) {
    plan_launches(nodes, launches_, ctx_.fuse_attention);
    WorkspaceNeeds needs;
    // A fused launch needs what its nodes would need on their own (the
    // attention of RopeStoreAttention its partials, say).
    for (const Launch& l : launches_) {
        for (int i = 0; i < l.n; ++i) {
            const Kernel& k = ops().find(l.nodes[static_cast<size_t>(i)]->op)->run;
            if (k.need != nullptr) k.need(*l.nodes[static_cast<size_t>(i)], ctx_.sm_count, needs);
        }
    }
    reserve(needs);
}

void CudaBackend::replay(CudaGraph& g) {
    GraphInputs& in = g.inputs();
    if (in.empty()) {
        flush_writes();
    } else {
        if (in.launched_at == syncs_) drain();  // its last replay may not have read the memory yet
        in.fill(held_sources());
        clear_held();
    }
    if (timing_) {
        const auto t0 = std::chrono::steady_clock::now();
        collect_timing();
        if (timing_->replays > 0) {
            timing_->period_us += std::chrono::duration<double, std::micro>(t0 - timing_->last_replay).count();
        }
        ++timing_->replays;
        timing_->last_replay = t0;
        check(cudaEventRecord(timing_->begin, stream_), "cudaEventRecord");
    }
    {
        const HostSpan in_launch(host_sum(&ReplayTiming::launch_us));
        g.launch(stream_);
    }
    in.launched_at = syncs_;
    if (timing_) {
        check(cudaEventRecord(timing_->end, stream_), "cudaEventRecord");
        timing_->pending = true;
    }
}

}  // namespace lantern::cuda

namespace lantern {

std::unique_ptr<Backend> make_cuda_backend(int index) { return std::make_unique<cuda::CudaBackend>(index); }

std::vector<DeviceInfo> list_cuda_devices() {
    std::vector<DeviceInfo> out;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.backend = "cuda";
        d.index = i;
        d.name = prop.name;
        d.details = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                    std::to_string(prop.multiProcessorCount) + " SMs, " + std::to_string(prop.totalGlobalMem >> 20) +
                    " MiB, L2 " + std::to_string(prop.l2CacheSize >> 20) + " MiB";
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace lantern
