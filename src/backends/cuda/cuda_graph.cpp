#include "backends/cuda/cuda_graph.h"

#include <cstring>

#include "backends/cuda/cuda_error.h"

namespace lantern::cuda {

GraphInputs::GraphInputs(void* const* dst, const size_t* size, size_t n) {
    if (n == 0 || n > static_cast<size_t>(InputCopies::kMax)) return;
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        copies_.dst[i] = static_cast<uint8_t*>(dst[i]);
        copies_.at[i] = static_cast<uint32_t>(total);
        copies_.size[i] = static_cast<uint32_t>(size[i]);
        total += (size[i] + 15) / 16 * 16;
    }
    check(cudaHostAlloc(reinterpret_cast<void**>(&host_), total, cudaHostAllocMapped), "cudaHostAlloc (graph inputs)");
    void* dev = nullptr;
    if (const cudaError_t err = cudaHostGetDevicePointer(&dev, host_, 0); err != cudaSuccess) {
        cudaFreeHost(host_);
        host_ = nullptr;
        check(err, "cudaHostGetDevicePointer (graph inputs)");
    }
    copies_.src = static_cast<const uint8_t*>(dev);
    copies_.n = static_cast<int>(n);
}

GraphInputs::~GraphInputs() {
    if (host_ != nullptr) cudaFreeHost(host_);
}

bool GraphInputs::same_layout(void* const* dst, const size_t* size, size_t n) const {
    if (n != static_cast<size_t>(copies_.n)) return false;
    for (size_t i = 0; i < n; ++i) {
        if (dst[i] != copies_.dst[i] || size[i] != copies_.size[i]) return false;
    }
    return true;
}

void GraphInputs::fill(const void* const* src) {
    for (int i = 0; i < copies_.n; ++i) std::memcpy(host_ + copies_.at[i], src[i], copies_.size[i]);
}

std::unique_ptr<CudaGraph> CudaGraph::capture(cudaStream_t stream, const std::function<void()>& enqueue,
                                              std::unique_ptr<GraphInputs> inputs) {
    std::unique_ptr<CudaGraph> g(new CudaGraph());
    g->inputs_ = inputs ? std::move(inputs) : std::make_unique<GraphInputs>();
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
