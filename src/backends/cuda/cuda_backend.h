// The CUDA backend: device buffers from a pool, weights repacked at upload,
// one stream, kernels dispatched from one op table, fused launches for the
// layer patterns (cuda_fusion.h), and decode steps recorded as CUDA graphs
// and replayed while every node matches (GraphCache, shared with the other
// GPU backends).
//
// Host transfers: small inputs are held back. A recorded step copies them in
// its first kernel from host memory it owns (CudaGraph's GraphInputs), so a
// replay costs a memcpy and no copy call; otherwise they are sent together
// by one cudaMemcpyBatchAsync before the next launch, read, or synchronize.
// Larger ones go through a pinned staging area. Outputs land in the staging
// area and reach the caller's memory in synchronize(), or go straight into
// the caller's memory when it was pinned (pin_host: the context's logits).
// A replayed decode step thus costs one graph launch and one read of the
// logits.
//
// Environment: LANTERN_GRAPHS / LANTERN_GRAPHS_PREFILL / LANTERN_GRAPH_CACHE_SIZE
// (graph_cache.h); LANTERN_CUDA_SYNC=1 synchronises after every launch and
// names the failing op (graphs off); LANTERN_CUDA_PDL=0 launches kernels
// without programmatic dependent launch. README lists the LANTERN_CUDA_* tuning switches.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_fusion.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/cuda_pool.h"
#include "backends/graph_cache.h"

namespace lantern::cuda {

class CudaBackend final : public Backend {
public:
    // Throws Error(Backend) when the device is absent or fails to start.
    explicit CudaBackend(int device);
    ~CudaBackend() override;

    const char* name() const override { return "cuda"; }
    std::string description() const override { return description_; }
    bool is_host() const override { return false; }
    size_t alignment() const override { return 256; }

    std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) override;
    bool supports(const Tensor& node) const override;
    size_t weight_bytes(const Tensor& w) const override;
    void upload_weight(const Tensor& w, const void* host) override;

    void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) override;
    void set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n) override;
    void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n) override;
    void synchronize() override;
    void pin_host(void* p, size_t n) override;
    void unpin_host(void* p) override;
    BackendStats stats() const override;
    // Fused launches span up to 4 nodes (cuda_fusion.h).
    int fusion_window() const override { return 4; }

    // Kernel launches of the last planned step (fusion included).
    size_t last_launch_count() const { return launches_.size(); }
    // Of those, the launches whose fused add + RMSNorm reads its residual
    // before the grid wait (Launch::residual_settled).
    size_t last_settled_count() const {
        size_t n = 0;
        for (const Launch& l : launches_) n += l.residual_settled ? 1 : 0;
        return n;
    }
    const GraphConfig& graph_config() const { return graph_config_; }
    int device() const { return device_; }

    // Blocking copies and fills of device memory (used by CudaBuffer).
    void copy_to_device(void* dst, const void* src, size_t n);
    void copy_to_host(void* dst, const void* src, size_t n);
    void fill_device(void* dst, uint8_t value, size_t n);
    DevicePool& pool() { return pool_; }

private:
    struct Region {
        DevicePool::Block block;
        size_t size = 0;
    };
    void init();
    void release();  // frees what init() made (also after a failed init)
    void reserve(const WorkspaceNeeds& needs);
    bool grow(Region& r, size_t bytes, bool zero);
    void run(const std::vector<Launch>& launches);
    void plan(const std::vector<Tensor*>& nodes);  // launches_ for nodes, workspaces grown
    void replay(CudaGraph& g);                     // its inputs from the held writes, then the launch
    void* staging_slot(size_t n);
    void flush_writes();  // sends the held-back small inputs
    void clear_held();
    const void** held_sources();  // held_src_, made from held_bytes_ and held_at_
    // Waits for the stream (not sending held inputs, not finishing staged
    // reads: synchronize() does both around it) and counts the wait in syncs_.
    void drain();
    uint64_t syncs_ = 0;

    int device_;
    DevicePool pool_;  // first: outlives every block below
    std::string description_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    Ctx ctx_;
    Region cublas_ws_, dequant_, act_, attn_partial_, attn_counters_, moe_;

    GraphConfig graph_config_;
    GraphCache<CudaGraph> graphs_;
    bool debug_sync_ = false;
    uint64_t eager_steps_ = 0;
    std::vector<Launch> launches_;

    // LANTERN_CUDA_TIMING=1: GPU time of each replayed step between two
    // events, read at the next step (when the host has already waited for
    // it) and printed at exit, beside where the host's time between two
    // replays goes: inside compute() (graph lookup and launch), in the
    // input and output copy calls, in synchronize() (waiting, then copying
    // out of the staging area), and elsewhere (the caller). Approximate:
    // steady decoding, every step a replay.
    struct ReplayTiming {
        cudaEvent_t begin = nullptr, end = nullptr;
        bool pending = false;
        uint64_t steps = 0;
        double total_ms = 0, min_ms = 1e30;
        std::chrono::steady_clock::time_point last_replay{};
        uint64_t replays = 0;
        double period_us = 0, compute_us = 0, lookup_us = 0, launch_us = 0, copy_us = 0, sync_us = 0, verify_us = 0;
    };
    // Adds the host time until it leaves scope to one of ReplayTiming's sums;
    // reads no clock unless timing (from the first replay on).
    class HostSpan {
    public:
        explicit HostSpan(double* acc)
            : acc_(acc), t0_(acc != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
        ~HostSpan() {
            if (acc_ != nullptr) {
                *acc_ += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
            }
        }
        HostSpan(const HostSpan&) = delete;
        HostSpan& operator=(const HostSpan&) = delete;

    private:
        double* acc_;
        std::chrono::steady_clock::time_point t0_;
    };
    double* host_sum(double ReplayTiming::*sum) const {
        return timing_ && timing_->replays > 0 ? &(timing_.get()->*sum) : nullptr;
    }
    std::unique_ptr<ReplayTiming> timing_;
    void collect_timing();

    // Pinned staging for host transfers, reset by synchronize().
    uint8_t* staging_ = nullptr;
    size_t staging_used_ = 0;
    struct PendingRead {
        void* dst;
        size_t offset;
        size_t n;
    };
    std::vector<PendingRead> pending_reads_;
    // Small inputs not sent yet: their bytes, in order, and where they go,
    // kept in the arrays cudaMemcpyBatchAsync takes (reused every step).
    static constexpr size_t kHeldWriteMax = 16 * 1024;
    std::vector<uint8_t> held_bytes_;
    std::vector<void*> held_dst_;
    std::vector<size_t> held_at_;  // offsets into held_bytes_ (it may move while filling)
    std::vector<size_t> held_size_;
    std::vector<const void*> held_src_;  // held_bytes_ + held_at_, made when sending
    // Host ranges registered by pin_host: reads into them skip the staging.
    struct Pinned {
        uint8_t* p;
        size_t n;
    };
    std::vector<Pinned> pinned_;
    bool is_pinned(const void* p, size_t n) const;
};

}  // namespace lantern::cuda
