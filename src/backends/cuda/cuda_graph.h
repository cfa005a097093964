// One recorded step: a CUDA graph captured from the backend's stream and its
// executable instance. All capture and replay goes through this class; the
// backend decides when (GraphCache says whether a recording still matches).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

namespace lantern::cuda {

class CudaGraph {
public:
    // Records what `enqueue` puts on `stream` (which must be idle of other
    // captures). If `enqueue` throws, the capture is ended and discarded and
    // the exception propagates.
    static std::unique_ptr<CudaGraph> capture(cudaStream_t stream, const std::function<void()>& enqueue);
    ~CudaGraph();
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;

    void launch(cudaStream_t stream) const;
    size_t node_count() const { return nodes_; }

private:
    CudaGraph() = default;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
    size_t nodes_ = 0;
};

}  // namespace lantern::cuda
