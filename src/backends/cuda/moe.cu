// Mixture-of-experts feed-forward (Op::MoeFfn) on the device, in three
// launches that read the routing from device memory, so that a captured
// decode step replays whichever experts the next token picks:
//   k_moe_route  a block per token: router logits, softmax, the n_used
//                largest (ties to the lower index), their weights
//   k_moe_up     a warp per (token, expert slot, hidden row):
//                silu(gate . x) * (up . x)
//   k_moe_down   a warp per (token, output row): the slots' down rows .
//                hidden, added by weight
// Weights are read 16 values at a time through unpack16 (quant_unpack.cuh),
// the row lookup's path: correct for every device type, not the streamed
// matrix-vector kernels' speed (a first version; decode only reads the
// chosen experts' rows).
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

// Values 16 g .. 16 g + 15 of a row, as floats.
template <DType T>
__device__ __forceinline__ void values16(const WView& w, int64_t row, int64_t g, float (&v)[16]) {
    if constexpr (T == DType::F32) {
        const float* p = reinterpret_cast<const float*>(w.data + row * w.row_bytes) + 16 * g;
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = __ldg(p + i);
    } else if constexpr (T == DType::F16 || T == DType::BF16) {
        const uint16_t* p = reinterpret_cast<const uint16_t*>(w.data + row * w.row_bytes) + 16 * g;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(p + i));
            v[i] = T == DType::F16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
        }
    } else {
        group_values(unpack16<T>(w, row, g), v);
    }
}

// Row `row` of w . x (x: K floats), summed over the warp; every lane gets it.
template <DType T>
__device__ __forceinline__ float row_dot(const WView& w, int64_t row, const float* __restrict__ x, int lane) {
    float acc = 0.0f;
    for (int64_t g = lane; g < w.K / 16; g += 32) {
        float v[16];
        values16<T>(w, row, g, v);
#pragma unroll
        for (int i = 0; i < 16; ++i) acc += v[i] * x[16 * g + i];
    }
    return warp_sum(acc);
}

template <DType R>
__global__ void __launch_bounds__(kWarps * 32) k_moe_route(const uint8_t* x, size_t x_nb1, const WView router,
                                                           MoeDims d, int32_t* ids, float* weights) {
    pdl_enter();
    __shared__ float logits[kMaxExperts];
    const int64_t t = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float* xr = reinterpret_cast<const float*>(x + t * x_nb1);
    for (int64_t e = warp; e < d.E; e += kWarps) {
        const float s = row_dot<R>(router, e, xr, lane);
        if (lane == 0) logits[e] = s;
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

template <DType G>
__global__ void __launch_bounds__(kWarps * 32) k_moe_up(const uint8_t* x, size_t x_nb1, const WView gate, const WView up,
                                                        MoeDims d, const int32_t* ids, float* hidden) {
    pdl_enter();
    const int64_t p = blockIdx.y;  // the (token, slot) pair
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (n >= d.F) return;
    const int lane = threadIdx.x % 32;
    const float* xr = reinterpret_cast<const float*>(x + (p / d.k) * x_nb1);
    const int64_t row = static_cast<int64_t>(ids[p]) * d.F + n;
    const float g = row_dot<G>(gate, row, xr, lane);
    const float u = row_dot<G>(up, row, xr, lane);
    if (lane == 0) hidden[p * d.F + n] = silu_f(g) * u;
}

template <DType W>
__global__ void __launch_bounds__(kWarps * 32) k_moe_down(const WView down, MoeDims d, const int32_t* ids,
                                                          const float* weights, const float* hidden, uint8_t* y,
                                                          size_t y_nb1) {
    pdl_enter();
    const int64_t t = blockIdx.y;
    const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (n >= d.D) return;
    const int lane = threadIdx.x % 32;
    float acc = 0.0f;
    for (int j = 0; j < d.k; ++j) {
        const int64_t p = t * d.k + j;
        acc += weights[p] * row_dot<W>(down, static_cast<int64_t>(ids[p]) * d.D + n, hidden + p * d.F, lane);
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
        check(launch(ctx, k_moe_route<R>, dim3(static_cast<unsigned>(d.T)), block, 0, xp, x.nb[1], router, d, ids,
                     weights),
              "k_moe_route", node);
    });
    dispatch_weight(node.src[2]->type, [&]<DType G>() {
        check(launch(ctx, k_moe_up<G>, dim3(blocks_for(d.F, kWarps), static_cast<unsigned>(P)), block, 0, xp, x.nb[1],
                     gate, up, d, static_cast<const int32_t*>(ids), hidden),
              "k_moe_up", node);
    });
    dispatch_weight(node.src[4]->type, [&]<DType W>() {
        check(launch(ctx, k_moe_down<W>, dim3(blocks_for(d.D, kWarps), static_cast<unsigned>(d.T)), block, 0, down, d,
                     static_cast<const int32_t*>(ids), static_cast<const float*>(weights),
                     static_cast<const float*>(hidden), ptr<uint8_t>(node), node.nb[1]),
              "k_moe_down", node);
    });
}

}  // namespace lantern::cuda
