// The OpenCL backend: one device, one in-order queue, a memory pool, the
// programs of kernels/*.cl, and the op table (ops.cpp) that both declares
// what runs here and dispatches it.
//
// compute() only enqueues. Nodes are dispatched through a plan (plan.cpp)
// that fuses what the graph lays out one op at a time: Q/K/V products that
// share an input, gate/up products with their SiLU, RoPE with the KV-cache
// writes (and, for one token, with attention), the add + RMSNorm between
// one-row products split between their launches; producers of a quantized
// product's input also write its 8-bit form.
//
// Recorded steps: while graphs are enabled (graph_cache.h, LANTERN_GRAPHS),
// a step's launches are kept - each with a kernel object of its own whose
// arguments stay set - and the step replays while its nodes keep the
// properties they were recorded with. On devices with cl_khr_command_buffer
// (PoCL) the launches are recorded into a command buffer and replayed with
// one call; elsewhere (NVIDIA) they are re-enqueued one by one, which still
// saves planning and argument setting. Results are the same either way.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "backends/graph_cache.h"
#include "backends/opencl/cl_api.h"
#include "backends/opencl/device.h"
#include "backends/opencl/memory_pool.h"
#include "backends/opencl/program_cache.h"

namespace lantern::ocl {

// A step's launches, kept for replay.
struct Recording {
    struct Launch {
        cl_kernel kernel;  // one of `kernels`
        cl_uint dims;
        size_t global[3];
        size_t local[3];
    };
    std::vector<KernelHandle> kernels;
    std::vector<Launch> launches;
    std::vector<std::shared_ptr<PoolBlock>> keep;  // scratch the launches use
    cl_command_buffer command_buffer = nullptr;
    const CommandBufferApi* api = nullptr;
    EventHandle last_replay;  // without simultaneous use: wait before enqueueing again

    Recording() = default;
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
    ~Recording();
};

class OpenClBackend final : public Backend {
public:
    explicit OpenClBackend(const DeviceCaps& caps);
    ~OpenClBackend() override;

    const char* name() const override { return "opencl"; }
    std::string description() const override;
    bool is_host() const override { return false; }
    size_t alignment() const override { return alignment_; }

    std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) override;
    bool supports(const Tensor& node) const override;
    size_t weight_bytes(const Tensor& w) const override;
    void upload_weight(const Tensor& w, const void* host) override;
    void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) override;
    void set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n) override;
    void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n) override;
    void synchronize() override;
    BackendStats stats() const override;
    // Fused launches span up to 4 nodes (RoPE, the two cache writes and
    // attention): inputs of a group stay intact until its last node.
    int fusion_window() const override { return 3; }

    // For the dispatch code and tests.
    const DeviceCaps& caps() const { return caps_; }
    cl_context context() const { return context_.get(); }
    cl_command_queue queue() const { return queue_.get(); }
    ProgramCache& programs() const { return *programs_; }
    MemoryPool& pool() { return *pool_; }
    bool command_buffers() const { return cb_api_.loaded(); }
    // Whether compute() fuses node patterns (LANTERN_OPENCL_FUSE=0: off, for debugging).
    bool fusion() const { return fusion_; }
    // Whether an add + RMSNorm between one-row products is split between
    // their launches (LANTERN_OPENCL_FUSE_NORM=0: its own launch): the
    // product before it adds and sums squares per group, the products after
    // it apply the scale (matvec.cl).
    bool norm_fusion() const { return norm_fusion_; }

    // Scratch shared by all steps (grows; in-order queue makes reuse safe).
    struct Scratch {
        cl_mem mem;
        size_t offset;
    };
    Scratch scratch(size_t bytes, std::vector<std::shared_ptr<PoolBlock>>& keep);
    void reset_scratch() { scratch_used_ = 0; }

    // inv_freq[i] = freq_scale * base^(-2i / n_rot), i < n_rot / 2, computed in
    // double precision and kept on the device.
    cl_mem rope_table(int n_rot, float base, float freq_scale);

    // kAttnCounters zeroed ints for split decode attention (attention.cl:
    // the last split of each (token, head) to finish combines, and sets its
    // counter back to zero). Launches run in order, so every launch shares them.
    static constexpr size_t kAttnCounters = 8192;
    cl_mem attn_counters();

private:
    void replay(Recording& r);
    void record(Recording& r);

    DeviceCaps caps_;
    size_t alignment_ = 256;
    ContextHandle context_;
    QueueHandle queue_;
    CommandBufferApi cb_api_;
    std::unique_ptr<MemoryPool> pool_;
    std::unique_ptr<ProgramCache> programs_;
    GraphConfig graphs_;
    std::unique_ptr<GraphCache<Recording>> cache_;
    std::shared_ptr<PoolBlock> scratch_block_;
    size_t scratch_used_ = 0;
    std::map<std::tuple<int, float, float>, std::unique_ptr<PoolBlock>> rope_tables_;
    std::unique_ptr<PoolBlock> attn_counters_;
    uint64_t eager_steps_ = 0;
    uint64_t step_launches_ = 0;  // kernel launches of the last step
    bool fusion_ = true;
    bool norm_fusion_ = true;
};

// Factories of backends/registry.cpp.
std::unique_ptr<Backend> make_backend(int index);

}  // namespace lantern::ocl
