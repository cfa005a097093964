// Small device helpers shared by the kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "backends/backend.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/weight_layout.h"

namespace lantern::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Quantizes x into its Q8_0 block (block bytes at `blk`, x its element
// `at`), given the block's largest magnitude; the element-0 holder writes
// the scale. As k_kv_store_q8 (and the CPU) quantize.
__device__ __forceinline__ void q8_put(uint8_t* blk, int at, float x, float amax) {
    const __half dh = __float2half_rn(amax / 127.0f);
    const float d = __half2float(dh);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    blk[2 + at] = static_cast<uint8_t>(static_cast<int8_t>(__float2int_rn(fminf(fmaxf(x * inverse, -127.0f), 127.0f))));
    if (at == 0) *reinterpret_cast<__half*>(blk) = dh;
}

// The largest of v over `width` lanes (a power of two) of `mask`.
__device__ __forceinline__ float group_max(float v, unsigned mask, int width) {
    for (int o = width / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(mask, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the total. `scratch` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(t);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : -INFINITY;
    return warp_max(t);
}

__device__ __forceinline__ float half_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }
__device__ __forceinline__ uint16_t ld_u16(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }
__device__ __forceinline__ uint4 ld_u128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint2 ld_u64(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }

// Coherent loads for a kernel's prologue. ptxas moves non-coherent loads
// (__ldg, LDG.CONSTANT) past griddepcontrol.wait, so weights meant to be in
// flight while the previous kernel finishes must be read with these (as
// volatile asm they also keep their place before the wait's asm).
__device__ __forceinline__ uint4 ld_co_u128(const uint8_t* p) {
    uint4 r;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ uint2 ld_co_u64(const uint8_t* p) {
    uint2 r;
    asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
__device__ __forceinline__ uint32_t ld_co_u32(const uint8_t* p) {
    uint32_t r;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ uint16_t ld_co_u16(const uint8_t* p) {
    uint16_t r;
    asm volatile("ld.global.u16 %0, [%1];" : "=h"(r) : "l"(p));
    return r;
}

// Where a kernel reads weight bytes from: through the non-coherent cache
// (Cached, __ldg), with coherent loads (Coherent, for a prologue), or from
// shared memory (Shared: bytes a bulk copy put there; p must point into it).
enum class Ld { Cached, Coherent, Shared };

template <Ld L>
__device__ __forceinline__ uint4 ld128(const uint8_t* p) {
    if constexpr (L == Ld::Shared) return *reinterpret_cast<const uint4*>(p);
    return L == Ld::Coherent ? ld_co_u128(p) : ld_u128(p);
}
template <Ld L>
__device__ __forceinline__ uint2 ld64(const uint8_t* p) {
    if constexpr (L == Ld::Shared) return *reinterpret_cast<const uint2*>(p);
    return L == Ld::Coherent ? ld_co_u64(p) : ld_u64(p);
}
template <Ld L>
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
    if constexpr (L == Ld::Shared) return *reinterpret_cast<const uint32_t*>(p);
    return L == Ld::Coherent ? ld_co_u32(p) : ld_u32(p);
}
template <Ld L>
__device__ __forceinline__ uint32_t ld16(const uint8_t* p) {
    if constexpr (L == Ld::Shared) return *reinterpret_cast<const unsigned short*>(p);
    return L == Ld::Coherent ? ld_co_u16(p) : ld_u16(p);
}

// p, hidden from the compiler's arithmetic: loads at p + constant then use
// one register and immediate offsets (otherwise the compiler may rebuild
// each address from the index expression that gave p, in 64 bits).
template <class T>
__device__ __forceinline__ const T* opaque(const T* p) {
    asm("mov.b64 %0, %0;" : "+l"(p));
    return p;
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float gelu_tanh_f(float x) {
    const float k = 0.7978845608028654f;
    const float u = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

// v as a GEMM operand: float, __half or __nv_bfloat16 (rounded to nearest).
template <class H>
__device__ __forceinline__ H to_act(float v) {
    if constexpr (std::is_same_v<H, float>) {
        return v;
    } else if constexpr (std::is_same_v<H, __half>) {
        return __float2half_rn(v);
    } else {
        return __float2bfloat16_rn(v);
    }
}

// Programmatic dependent launch (Hopper). Kernels are launched so that the
// next kernel of the stream may start while this one runs (launch()); every
// kernel calls pdl_wait() in every block before it reads anything an earlier
// kernel wrote (and before any early exit, so completion stays transitive),
// then pdl_trigger() to let the next kernel start its prologue. Both are
// no-ops for a kernel launched without the attribute.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" :::); }
__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_trigger();
}
// The same for the small kernels that open a step (its inputs, the row
// lookup, the first RmsNorm): the next kernel may launch before this one
// waits, so that the first matrix-vector launch's blocks are resident, and
// their weights in flight, from the step's start. Completion stays
// transitive: a kernel that launched early still waits for this one, which
// waited for its own predecessor.
__device__ __forceinline__ void pdl_enter_early() {
    pdl_trigger();
    pdl_wait();
}

// Launches kernel<<<grid, block, smem, ctx.stream>>>(args...) allowing
// programmatic dependent launch (unless ctx.pdl is off).
template <class Ctx, class... KArgs, class... Args>
cudaError_t launch(const Ctx& ctx, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = ctx.stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = ctx.pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Lets `kernel` use up to max_smem bytes of shared memory in all (the
// dynamic limit excludes its static shared memory).
template <class Kernel>
void raise_smem_limit(Kernel kernel, int max_smem) {
    cudaFuncAttributes attr{};
    check(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes");
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               max_smem - static_cast<int>(attr.sharedSizeBytes)),
          "cudaFuncSetAttribute (shared memory limit)");
}

// 1-D launch size: ceil(n / per) blocks.
inline unsigned blocks_for(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

template <class T>
inline T* ptr(const Tensor& t) {
    return reinterpret_cast<T*>(tensor_address(t));
}

}  // namespace lantern::cuda
