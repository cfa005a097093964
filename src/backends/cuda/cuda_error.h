// Checked CUDA and cuBLAS calls. Every failure becomes an
// Error(ErrorCode::Backend) naming the call and, where one is running, the op
// and its shapes; nothing is swallowed and nothing exits.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "graph/tensor.h"

namespace lantern::cuda {

// "MulMat 'name' (layer 3): dst f32 [4096, 1, 1, 1], src0 q4_0 [4096, 4096, 1, 1], ..."
std::string describe(const Tensor& node);

[[noreturn]] void fail(const char* call, const std::string& detail, const std::string& context);

inline void check(cudaError_t err, const char* call) {
    if (err != cudaSuccess) fail(call, cudaGetErrorString(err), {});
}
inline void check(cudaError_t err, const char* call, const Tensor& node) {
    if (err != cudaSuccess) fail(call, cudaGetErrorString(err), describe(node));
}
void check(cublasStatus_t st, const char* call, const Tensor& node);

}  // namespace lantern::cuda
