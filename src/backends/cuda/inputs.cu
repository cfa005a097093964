// The first kernel of a recorded step: copies the step's small inputs
// (token ids, positions, sequence ids) from page-locked host memory mapped
// into the device's address space to their tensors. The host writes that
// memory and launches the graph: no copy call per step (cudaMemcpyBatchAsync
// cost 5-9 us of host time on the H100's host, with the GPU idle).
#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) k_load_inputs(const InputCopies c) {
    pdl_enter_early();
    // Volatile loads: host memory is read again at every replay, never from
    // a cache. Each is a PCIe round trip, so a thread's first word of every
    // input is loaded before any is stored (a decode step's inputs are one
    // word each): loads and stores in turn waited on one round trip per
    // input. Longer inputs (prompts) and unaligned ones follow.
    auto words = [&](int e) {
        const bool w = c.size[e] % 4 == 0 && reinterpret_cast<uintptr_t>(c.dst[e]) % 4 == 0;
        return w ? c.size[e] / 4 : 0u;
    };
    const uint32_t t = threadIdx.x;
    uint32_t first[InputCopies::kMax];
#pragma unroll
    for (int e = 0; e < InputCopies::kMax; ++e) {
        if (e < c.n && t < words(e)) first[e] = reinterpret_cast<const volatile uint32_t*>(c.src + c.at[e])[t];
    }
#pragma unroll
    for (int e = 0; e < InputCopies::kMax; ++e) {
        if (e < c.n && t < words(e)) reinterpret_cast<uint32_t*>(c.dst[e])[t] = first[e];
    }
    for (int e = 0; e < c.n; ++e) {
        const uint8_t* src = c.src + c.at[e];
        uint8_t* dst = c.dst[e];
        const uint32_t nw = words(e);
        if (nw != 0) {
            const volatile uint32_t* s = reinterpret_cast<const volatile uint32_t*>(src);
            for (uint32_t i = t + kThreads; i < nw; i += kThreads) reinterpret_cast<uint32_t*>(dst)[i] = s[i];
        } else {
            const volatile uint8_t* s = src;
            for (uint32_t i = t; i < c.size[e]; i += kThreads) dst[i] = s[i];
        }
    }
}

}  // namespace

void run_load_inputs(const Ctx& ctx, const InputCopies& copies) {
    check(launch(ctx, k_load_inputs, dim3(1), dim3(kThreads), 0, copies), "launch k_load_inputs");
}

}  // namespace lantern::cuda
