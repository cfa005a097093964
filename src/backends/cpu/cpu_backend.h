// The CPU backend: host buffers, a thread pool, and the op table.
#pragma once

#include <array>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/thread_pool.h"

namespace lantern {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads);

    const char* name() const override { return "cpu"; }
    std::string description() const override;
    bool is_host() const override { return true; }
    size_t alignment() const override { return 64; }

    std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) override;
    // A buffer over memory the caller owns (the mapped model file): weights
    // are read in place, never copied.
    std::unique_ptr<Buffer> wrap(const void* data, size_t size);

    bool supports(const Tensor& node) const override;
    void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) override;
    BackendStats stats() const override;

    int threads() const { return pool_->size(); }
    void set_threads(int n);

    // Keeps a copy of weight `w` (a whole contiguous tensor, host-resident)
    // in the layout of quant/packed.h if its type and shape have one on this
    // CPU; matrix products (and MoE experts, slice by slice of a 3-D `w`)
    // that read `w` then use it. Returns whether it did. Called at load,
    // before any compute().
    bool pack_weight(const Tensor& w);
    size_t packed_bytes() const;
    // The sources [first, last) of a node of `op` that the CPU's kernels
    // read from packed copies: a matrix product's weights (src[0]), MoE's
    // gate, up and down experts (src[2..4]); none for other ops.
    static std::pair<size_t, size_t> packed_sources(Op op);

private:
    std::unique_ptr<ThreadPool> pool_;
    std::vector<uint8_t> scratch_;
    std::unordered_map<const Tensor*, std::unique_ptr<Buffer>> packed_;
    std::vector<std::array<const void*, kMaxSrc>> node_packed_;  // per node of compute(): its sources' packed copies
    BackendStats stats_;
};

}  // namespace lantern
