// One recorded step: a CUDA graph captured from the backend's stream and its
// executable instance, and the page-locked host memory its first kernel
// reads the step's inputs from. All capture and replay goes through this
// class; the backend decides when (GraphCache says whether a recording still
// matches).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {

// Where a recording's inputs go and the host memory they come from: the
// recording copies them in its first kernel (run_load_inputs), so that a
// replay costs the host a memcpy into this memory and the graph launch.
// Empty (no memory, nothing copied) for a step with no small inputs, or
// with more than InputCopies::kMax.
class GraphInputs {
public:
    GraphInputs() = default;
    GraphInputs(void* const* dst, const size_t* size, size_t n);
    ~GraphInputs();
    GraphInputs(const GraphInputs&) = delete;
    GraphInputs& operator=(const GraphInputs&) = delete;

    bool empty() const { return copies_.n == 0; }
    // Whether a step's writes go where this recording's do (same count,
    // destinations and sizes).
    bool same_layout(void* const* dst, const size_t* size, size_t n) const;
    // The bytes of the next replay's inputs (src[i]: copies().size[i] bytes).
    void fill(const void* const* src);
    const InputCopies& copies() const { return copies_; }

    // The backend's synchronisation count when the recording was last
    // launched: while it is unchanged, that replay may still read the memory.
    uint64_t launched_at = ~uint64_t{0};

private:
    InputCopies copies_;
    uint8_t* host_ = nullptr;
};

class CudaGraph {
public:
    // Records what `enqueue` puts on `stream` (which must be idle of other
    // captures). If `enqueue` throws, the capture is ended and discarded and
    // the exception propagates.
    static std::unique_ptr<CudaGraph> capture(cudaStream_t stream, const std::function<void()>& enqueue,
                                              std::unique_ptr<GraphInputs> inputs);
    ~CudaGraph();
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;

    void launch(cudaStream_t stream) const;
    size_t node_count() const { return nodes_; }
    GraphInputs& inputs() { return *inputs_; }

private:
    CudaGraph() = default;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
    size_t nodes_ = 0;
    std::unique_ptr<GraphInputs> inputs_;
};

}  // namespace lantern::cuda
