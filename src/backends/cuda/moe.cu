// Mixture-of-experts feed-forward (Op::MoeFfn) on the device, in three
// launches that read the routing from device memory, so that a captured
// decode step replays whichever experts the next token picks:
//   k_moe_route  a block per token: router logits, softmax, the n_used
//                largest (ties to the lower index), their weights
//   k_moe_up     a warp per (token, expert slot, hidden row):
//                silu(gate . x) * (up . x)
//   k_moe_down   a warp per (token, output row): the slots' down rows .
//                hidden, added by weight
// Weights are read a block at a time (qblocks.cuh) and summed in floats,
// several blocks' loads in flight per lane: every device type, not the
// streamed matrix-vector kernels' speed (bench/RESULTS.md has the figures).
#include <cuda_runtime.h>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxExperts = 1024;
constexpr int kMaxUsed = 32;

struct MoeDims {
    int64_t D, F, E, T;
    int k;
    bool norm;
};

// Values 16 g .. 16 g + 15 of a plain-typed row, as floats.
template <DType T>
__device__ __forceinline__ void plain16(const WView& w, int64_t row, int64_t g, float (&v)[16]) {
    const uint8_t* p = w.data + row * w.row_bytes;
    if constexpr (T == DType::F32) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4 f = ld_u128(p + 64 * g + 16 * i);
            v[4 * i] = __uint_as_float(f.x), v[4 * i + 1] = __uint_as_float(f.y);
            v[4 * i + 2] = __uint_as_float(f.z), v[4 * i + 3] = __uint_as_float(f.w);
        }
    } else {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const uint4 q = ld_u128(p + 32 * g + 16 * i);
            const uint32_t word[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const auto h = static_cast<uint16_t>(word[j / 2] >> (16 * (j % 2)));
                v[8 * i + j] = T == DType::F16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
            }
        }
    }
}

__device__ __forceinline__ float dot16(const float (&v)[16], const float* __restrict__ x) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float4 a = *reinterpret_cast<const float4*>(x + 4 * i);
        acc += v[4 * i] * a.x + v[4 * i + 1] * a.y + v[4 * i + 2] * a.z + v[4 * i + 3] * a.w;
    }
    return acc;
}

constexpr int kAhead = 4;  // units per lane whose loads are issued before their sums

// What a lane holds of kAhead units of a row: quantized blocks (32 values
// each) or plain groups (16 values each, as floats).
template <DType T>
struct Ahead {
    QBlk k[kAhead];
};
template <>
struct Ahead<DType::F32> {
    float v[kAhead][16];
};
template <>
struct Ahead<DType::F16> {
    float v[kAhead][16];
};
template <>
struct Ahead<DType::BF16> {
    float v[kAhead][16];
};

template <DType T>
constexpr int64_t unit_values() {
    return is_plain(T) ? 16 : 32;
}

template <DType T>
__device__ __forceinline__ void load_ahead(const WView& w, int64_t row, int64_t u0, int64_t units, Ahead<T>& a) {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
        const int64_t unit = u0 + 32 * u;
        if (unit >= units) continue;
        if constexpr (is_plain(T)) {
            plain16<T>(w, row, unit, a.v[u]);
        } else {
            a.k[u] = qload<T>(q_row(w, row), static_cast<size_t>(w.blocks), static_cast<size_t>(unit));
        }
    }
}

template <DType T>
__device__ __forceinline__ float sum_ahead(const Ahead<T>& a, int64_t u0, int64_t units, const float* __restrict__ x) {
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
        const int64_t unit = u0 + 32 * u;
        if (unit >= units) continue;
        if constexpr (is_plain(T)) {
            acc += dot16(a.v[u], x + 16 * unit);
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v[16];
                group_values(group16<T>(a.k[u], h), v);
                acc += dot16(v, x + 32 * unit + 16 * h);
            }
        }
    }
    return acc;
}

// Row ra of wa . xa and row rb of wb . xb (when Two), summed over the warp:
// each lane takes every 32nd unit of a row, kAhead of them (of both rows)
// loaded before any is summed, so that a warp keeps its loads in flight
// together (one load at a time per lane held these launches to a tenth of
// the bandwidth). xa, xb: 16-byte aligned.
template <DType T, bool Two>
__device__ __forceinline__ float2 rows_dot(const WView& wa, int64_t ra, const float* __restrict__ xa, const WView& wb,
                                           int64_t rb, const float* __restrict__ xb, int lane) {
    const int64_t units = wa.K / unit_values<T>();
    float sa = 0.0f, sb = 0.0f;
    for (int64_t u0 = lane; u0 < units; u0 += 32 * kAhead) {
        Ahead<T> a, b;
        load_ahead<T>(wa, ra, u0, units, a);
        if constexpr (Two) load_ahead<T>(wb, rb, u0, units, b);
        sa += sum_ahead<T>(a, u0, units, xa);
        if constexpr (Two) sb += sum_ahead<T>(b, u0, units, xb);
    }
    return make_float2(warp_sum(sa), Two ? warp_sum(sb) : 0.0f);
}

constexpr int kRouteWarps = 32;

// One block per token. The router's rows are cut into K-slices so that all
// kRouteWarps warps have one (a few experts would leave most idle), their
// sums met in shared memory; then one thread takes the softmax's largest.
template <DType R>
__global__ void __launch_bounds__(kRouteWarps * 32) k_moe_route(const uint8_t* x, size_t x_nb1, const WView router,
                                                                MoeDims d, int32_t* ids, float* weights) {
    pdl_enter();
    __shared__ float logits[kMaxExperts];
    const int64_t t = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t e = threadIdx.x; e < d.E; e += blockDim.x) logits[e] = 0.0f;
    __syncthreads();
    const float* xr = reinterpret_cast<const float*>(x + t * x_nb1);
    const int64_t slices = d.E >= kRouteWarps ? 1 : kRouteWarps / d.E;
    const int64_t unit = unit_values<R>(), units = d.D / unit;
    const int64_t per = (units + slices - 1) / slices;
    for (int64_t item = warp; item < d.E * slices; item += kRouteWarps) {
        const int64_t e = item / slices, first = (item % slices) * per, last = min(units, first + per);
        WView w = router;  // the slice as a row of its own
        w.K = (last - first) * unit;
        float acc = 0.0f;
        if (first < last) {
            if constexpr (is_plain(R)) {
                w.data += static_cast<size_t>(first) * unit * (R == DType::F32 ? 4 : 2);
                acc = rows_dot<R, false>(w, e, xr + first * unit, w, e, nullptr, lane).x;
            } else {
                // A quantized row's slice starts at block `first`: read it as a
                // whole row and keep only the slice's units.
                float part = 0.0f;
                for (int64_t u0 = first + lane; u0 < last; u0 += 32) {
                    const QBlk k = qload<R>(q_row(router, e), static_cast<size_t>(router.blocks), static_cast<size_t>(u0));
                    Ahead<R> a;
                    a.k[0] = k;
                    part += sum_ahead<R>(a, 0, 1, xr + 32 * u0);
                }
                acc = warp_sum(part);
            }
        }
        if (lane == 0) atomicAdd(&logits[e], acc);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    float m = logits[0];
    for (int64_t e = 1; e < d.E; ++e) m = fmaxf(m, logits[e]);
    float sum = 0.0f;
    for (int64_t e = 0; e < d.E; ++e) sum += logits[e] = expf(logits[e] - m);
    float chosen[kMaxUsed];
    float total = 0.0f;
    for (int j = 0; j < d.k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < d.E; ++e) {
            if (logits[e] >= 0.0f && (best < 0 || logits[e] > logits[best])) best = e;
        }
        ids[t * d.k + j] = static_cast<int32_t>(best);
        chosen[j] = logits[best] / sum;
        total += chosen[j];
        logits[best] = -1.0f;  // taken
    }
    for (int j = 0; j < d.k; ++j) weights[t * d.k + j] = d.norm ? chosen[j] / total : chosen[j];
}

// Copies n floats from src into shared memory (every thread of the block).
__device__ __forceinline__ const float* stage(const float* __restrict__ src, int64_t n, float* smem) {
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
        reinterpret_cast<float4*>(smem)[i] = reinterpret_cast<const float4*>(src)[i];
    }
    __syncthreads();
    return smem;
}

// S: the block stages its activation in shared memory first (the sums then
// wait on shared loads, not on global ones; when it fits).
template <DType G, bool S>
__global__ void __launch_bounds__(kWarps * 32) k_moe_up(const uint8_t* x, size_t x_nb1, const WView gate, const WView up,
                                                        MoeDims d, const int32_t* ids, float* hidden) {
    pdl_enter();
    extern __shared__ float4 smem4[];
    const int64_t p = blockIdx.y;  // the (token, slot) pair
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    const float* xr = reinterpret_cast<const float*>(x + (p / d.k) * x_nb1);
    if constexpr (S) xr = stage(xr, d.D, reinterpret_cast<float*>(smem4));
    if (n >= d.F) return;
    const int lane = threadIdx.x % 32;
    const int64_t row = static_cast<int64_t>(ids[p]) * d.F + n;
    const float2 gu = rows_dot<G, true>(gate, row, xr, up, row, xr, lane);  // gate and up loads in flight together
    if (lane == 0) hidden[p * d.F + n] = silu_f(gu.x) * gu.y;
}

template <DType W, bool S>
__global__ void __launch_bounds__(kWarps * 32) k_moe_down(const WView down, MoeDims d, const int32_t* ids,
                                                          const float* weights, const float* hidden, uint8_t* y,
                                                          size_t y_nb1) {
    pdl_enter();
    extern __shared__ float4 smem4[];
    const int64_t t = blockIdx.y;
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    const float* h = hidden + t * d.k * d.F;  // the token's slots' hidden rows, one after another
    if constexpr (S) h = stage(h, d.k * d.F, reinterpret_cast<float*>(smem4));
    if (n >= d.D) return;
    const int lane = threadIdx.x % 32;
    float acc = 0.0f;
    int j = 0;
    for (; j + 1 < d.k; j += 2) {  // two experts' rows in flight together
        const int64_t p = t * d.k + j;
        const float2 s = rows_dot<W, true>(down, static_cast<int64_t>(ids[p]) * d.D + n, h + j * d.F, down,
                                           static_cast<int64_t>(ids[p + 1]) * d.D + n, h + (j + 1) * d.F, lane);
        acc += weights[p] * s.x + weights[p + 1] * s.y;
    }
    if (j < d.k) {
        const int64_t p = t * d.k + j;
        acc += weights[p] * rows_dot<W, false>(down, static_cast<int64_t>(ids[p]) * d.D + n, h + j * d.F, down, 0, nullptr, lane).x;
    }
    if (lane == 0) reinterpret_cast<float*>(y + t * y_nb1)[n] = acc;
}

bool weight_ok(const Tensor& w) {
    if (!is_device_weight_type(w.type) || w.ne[0] % 32 != 0 || w.ne[3] != 1) return false;
    if (is_plain(w.type)) return w.nb[0] == dtype_type_size(w.type) && w.nb[2] == w.nb[1] * static_cast<size_t>(w.ne[1]);
    return (w.storage_root()->flags & kTensorWeight) != 0 && w.view_src == nullptr;
}

MoeDims dims_of(const Tensor& node) {
    return {node.src[0]->ne[0], node.src[2]->ne[1], node.src[1]->ne[1], node.src[0]->ne[1], node.param_i(0),
            node.param_i(1) != 0};
}

// ids [P] i32, weights [P] f32, hidden [P, F] f32, each 256-byte aligned.
size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

}  // namespace

void init_moe_kernels(int max_smem) {
    for_each_weight([&]<DType T>() {
        raise_smem_limit(k_moe_up<T, true>, max_smem);
        raise_smem_limit(k_moe_down<T, true>, max_smem);
    });
}

bool accepts_moe_ffn(const Tensor& node) {
    const Tensor& x = *node.src[0];
    const MoeDims d = dims_of(node);
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && node.type == DType::F32 &&
           node.nb[0] == sizeof(float) && d.E <= kMaxExperts && d.k <= kMaxUsed && weight_ok(*node.src[1]) &&
           weight_ok(*node.src[2]) && weight_ok(*node.src[3]) && weight_ok(*node.src[4]);
}

void need_moe_ffn(const Tensor& node, int /*sm_count*/, WorkspaceNeeds& needs) {
    const MoeDims d = dims_of(node);
    const auto P = static_cast<size_t>(d.T * d.k);
    const size_t bytes = 2 * align256(P * 4) + align256(P * static_cast<size_t>(d.F) * sizeof(float));
    needs.moe = std::max(needs.moe, bytes);
}

void run_moe_ffn(const Ctx& ctx, const Tensor& node) {
    const MoeDims d = dims_of(node);
    if (d.T == 0) return;
    const auto P = static_cast<size_t>(d.T * d.k);
    auto* base = static_cast<uint8_t*>(ctx.ws.moe);
    auto* ids = reinterpret_cast<int32_t*>(base);
    auto* weights = reinterpret_cast<float*>(base + align256(P * 4));
    auto* hidden = reinterpret_cast<float*>(base + 2 * align256(P * 4));
    const Tensor& x = *node.src[0];
    const uint8_t* xp = ptr<const uint8_t>(x);
    const WView router = weight_view(*node.src[1]), gate = weight_view(*node.src[2]), up = weight_view(*node.src[3]),
                down = weight_view(*node.src[4]);
    const dim3 block(kWarps * 32);
    dispatch_weight(node.src[1]->type, [&]<DType R>() {
        check(launch(ctx, k_moe_route<R>, dim3(static_cast<unsigned>(d.T)), dim3(kRouteWarps * 32), 0, xp, x.nb[1], router, d, ids,
                     weights),
              "k_moe_route", node);
    });
    const size_t up_smem = static_cast<size_t>(d.D) * sizeof(float);
    const size_t down_smem = static_cast<size_t>(d.k * d.F) * sizeof(float);
    dispatch_weight(node.src[2]->type, [&]<DType G>() {
        const bool s = up_smem <= static_cast<size_t>(ctx.max_smem);
        check(launch(ctx, s ? k_moe_up<G, true> : k_moe_up<G, false>, dim3(blocks_for(d.F, kWarps), static_cast<unsigned>(P)),
                     block, s ? up_smem : 0, xp, x.nb[1], gate, up, d, static_cast<const int32_t*>(ids), hidden),
              "k_moe_up", node);
    });
    dispatch_weight(node.src[4]->type, [&]<DType W>() {
        const bool s = down_smem <= static_cast<size_t>(ctx.max_smem);
        check(launch(ctx, s ? k_moe_down<W, true> : k_moe_down<W, false>, dim3(blocks_for(d.D, kWarps), static_cast<unsigned>(d.T)),
                     block, s ? down_smem : 0, down, d, static_cast<const int32_t*>(ids), static_cast<const float*>(weights),
                     static_cast<const float*>(hidden), ptr<uint8_t>(node), node.nb[1]),
              "k_moe_down", node);
    });
}

}  // namespace lantern::cuda
