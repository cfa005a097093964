#include "backends/cuda/cuda_graph.h"

#include "backends/cuda/cuda_error.h"

namespace lantern::cuda {

std::unique_ptr<CudaGraph> CudaGraph::capture(cudaStream_t stream, const std::function<void()>& enqueue) {
    std::unique_ptr<CudaGraph> g(new CudaGraph());
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
        enqueue();
    } catch (...) {
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(stream, &partial);
        if (partial != nullptr) cudaGraphDestroy(partial);
        cudaGetLastError();
        throw;
    }
    check(cudaStreamEndCapture(stream, &g->graph_), "cudaStreamEndCapture");
    check(cudaGraphGetNodes(g->graph_, nullptr, &g->nodes_), "cudaGraphGetNodes");
    check(cudaGraphInstantiate(&g->exec_, g->graph_, 0), "cudaGraphInstantiate");
    return g;
}

CudaGraph::~CudaGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

void CudaGraph::launch(cudaStream_t stream) const { check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch"); }

}  // namespace lantern::cuda
