// The general matrix-vector kernel (k_matvec): every weight type, F32/F16/
// BF16 through it always, the quantized types under LANTERN_CUDA_MATVEC=general.
// A warp takes a row pair per item and its lanes units of a row (a 32-element
// block of a quantized type through qblocks.cuh, or 8 plain elements),
// loading the next item's first chunk before the current one's sums.
#include <algorithm>

#include "backends/cuda/matvec.cuh"

namespace lantern::cuda::mv {
namespace {

// --- one unit of a row per lane: a 32-element block (quantized types,
// qblocks.cuh) or 8 elements (F32/F16/BF16) -----------------------------------

template <DType T>
constexpr int kUnroll = 4;  // units per lane, row and chunk (one batch of loads)

template <DType T>
__device__ __forceinline__ int64_t units_per_row(int64_t K) {
    if constexpr (is_plain(T)) return K / 8;
    return K / 32;
}

struct PlainRaw {
    float v[8];
};

template <DType T>
using Raw = std::conditional_t<is_plain(T), PlainRaw, QBlk>;


// L: Ld::Coherent for the loads before the grid wait (common.cuh).
template <DType T, Ld L = Ld::Cached>
__device__ __forceinline__ Raw<T> load_unit(const WView& w, int64_t row, int64_t u) {
    if constexpr (!is_plain(T)) {
        return qload<T, L>(q_row(w, row), static_cast<size_t>(w.blocks), static_cast<size_t>(u));
    } else {
        PlainRaw r;
        const uint8_t* prow = w.data + static_cast<size_t>(row) * w.row_bytes;
        if constexpr (T == DType::F32) {
            const float4 p0 = as_float4(ld128<L>(prow + 32 * u));
            const float4 p1 = as_float4(ld128<L>(prow + 32 * u + 16));
            r.v[0] = p0.x; r.v[1] = p0.y; r.v[2] = p0.z; r.v[3] = p0.w;
            r.v[4] = p1.x; r.v[5] = p1.y; r.v[6] = p1.z; r.v[7] = p1.w;
        } else {
            const uint4 p = ld128<L>(prow + 16 * u);
            const uint32_t pw[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if constexpr (T == DType::F16) {
                    r.v[2 * i] = half_bits_to_float(static_cast<uint16_t>(pw[i]));
                    r.v[2 * i + 1] = half_bits_to_float(static_cast<uint16_t>(pw[i] >> 16));
                } else {
                    r.v[2 * i] = bf16_bits_to_float(static_cast<uint16_t>(pw[i]));
                    r.v[2 * i + 1] = bf16_bits_to_float(static_cast<uint16_t>(pw[i] >> 16));
                }
            }
        }
        return r;
    }
}

template <DType T>
__device__ __forceinline__ float dot_unit(const Raw<T>& r, const Act& a, int64_t u) {
    if constexpr (!is_plain(T)) {
        return qdot<T>(r, act_blk(a, u));
    } else {
        const float4 x0 = *reinterpret_cast<const float4*>(a.x + 8 * u);
        const float4 x1 = *reinterpret_cast<const float4*>(a.x + 8 * u + 4);
        return r.v[0] * x0.x + r.v[1] * x0.y + r.v[2] * x0.z + r.v[3] * x0.w + r.v[4] * x1.x + r.v[5] * x1.y +
               r.v[6] * x1.z + r.v[7] * x1.w;
    }
}

// Loads units c0 + 32u (u < U) of both slots' rows.
template <DType T, Ld L = Ld::Cached>
__device__ __forceinline__ void load_chunk(const MvParams& p, const Slot (&sl)[kRows], int64_t c0, int64_t units,
                                           Raw<T> (&raw)[kRows][kUnroll<T>]) {
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
#pragma unroll
        for (int u = 0; u < kUnroll<T>; ++u) {
            const int64_t unit = c0 + 32 * u;
            if (sl[s].valid && unit < units) raw[s][u] = load_unit<T, L>(p.w[sl[s].job], sl[s].row, unit);
        }
    }
}

template <DType T>
__global__ void __launch_bounds__(kMvThreads) k_matvec(const MvParams p) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ __align__(16) float red[32];
    constexpr int U = kUnroll<T>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t units = units_per_row<T>(p.K);
    const int64_t step = static_cast<int64_t>(gridDim.x) * kMvWarps;
    int64_t item = static_cast<int64_t>(blockIdx.x) * kMvWarps + warp;

    // The first weights are independent of earlier kernels: load them while
    // the previous kernel finishes and the activation is staged.
    Raw<T> raw[kRows][U];
    Slot sl[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) sl[s] = slot_of(p, item, s);
    if (item < p.n_items) load_chunk<T, Ld::Coherent>(p, sl, lane, units, raw);
    prefetch_norm_inputs(p);

    pdl_enter();
    stage_act<!is_plain(T), kMvWarps>(p, smem, red);
    Act a{};
    if constexpr (is_plain(T)) {
        a.x = reinterpret_cast<const float*>(smem);
    } else {
        a = act_view(smem, p.K);
    }

    for (; item < p.n_items; item += step) {
        float acc[kRows];
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = 0.0f;
        for (int64_t c0 = lane; c0 < units; c0 += 32 * U) {
            if (c0 != lane) load_chunk<T>(p, sl, c0, units, raw);
#pragma unroll
            for (int s = 0; s < kRows; ++s) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if (sl[s].valid && c0 + 32 * u < units) acc[s] += dot_unit<T>(raw[s][u], a, c0 + 32 * u);
                }
            }
        }
        // Prefetch the next item's first chunk before the reductions.
        Slot cur[kRows];
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            cur[s] = sl[s];
            sl[s] = slot_of(p, item + step, s);
        }
        if (item + step < p.n_items) load_chunk<T>(p, sl, lane, units, raw);
        const float scale = act_scale<!is_plain(T), kMvWarps>(p, red);
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = warp_sum(acc[s]) * scale;
        if (lane == 0) {
            if (p.silu != nullptr) {
                p.out[0][item] = acc[0];
                p.out[1][item] = acc[1];
                p.silu[item] = silu_f(acc[0]) * acc[1];
            } else {
#pragma unroll
                for (int s = 0; s < kRows; ++s) {
                    if (cur[s].valid) p.out[cur[s].job][cur[s].row] = acc[s] + (p.acc != nullptr ? p.acc[cur[s].row] : 0.0f);
                }
            }
        }
    }
}

// --- shapes the warp-per-row-pair kernel serves badly (LoRA adapters' A and
// B, plain types only, no fused norm or SiLU) ----------------------------------

// Few rows of a long row (an adapter's A: rank 16 of K 2048-11008): a warp per
// row pair left most SMs idle and walked each row alone (10 us for 16 rows of
// 5632 on an H100). Here a block takes a row pair and its threads split it.
template <DType T>
__global__ void __launch_bounds__(kMvThreads) k_matvec_wide(const MvParams p) {
    __shared__ float red[32];
    constexpr int U = 4;  // units per thread loaded before the grid wait
    const int64_t units = units_per_row<T>(p.K);
    Slot sl[kRows];
    Raw<T> raw[kRows][U];
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        sl[s] = slot_of(p, blockIdx.x, s);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t unit = threadIdx.x + static_cast<int64_t>(u) * kMvThreads;
            if (sl[s].valid && unit < units) raw[s][u] = load_unit<T, Ld::Coherent>(p.w[sl[s].job], sl[s].row, unit);
        }
    }
    pdl_enter();
    Act a{};
    a.x = p.x;
    float acc[kRows];
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        acc[s] = 0.0f;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t unit = threadIdx.x + static_cast<int64_t>(u) * kMvThreads;
            if (sl[s].valid && unit < units) acc[s] += dot_unit<T>(raw[s][u], a, unit);
        }
        for (int64_t unit = threadIdx.x + U * kMvThreads; sl[s].valid && unit < units; unit += kMvThreads) {
            acc[s] += dot_unit<T>(load_unit<T>(p.w[sl[s].job], sl[s].row, unit), a, unit);
        }
    }
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        const float total = block_sum(acc[s], red);
        if (threadIdx.x == 0 && sl[s].valid) {
            p.out[sl[s].job][sl[s].row] = total + (p.acc != nullptr ? p.acc[sl[s].row] : 0.0f);
        }
    }
}

// Short rows (an adapter's B: K = rank, 8-64): a thread per row.
constexpr int64_t kNarrowMaxK = 64;

template <DType T>
__global__ void __launch_bounds__(kMvThreads) k_matvec_narrow(const MvParams p) {
    constexpr int U = static_cast<int>(kNarrowMaxK / 8);
    const int jr = static_cast<int>(blockIdx.x) * kMvThreads + static_cast<int>(threadIdx.x);
    const bool valid = jr < static_cast<int>(p.total_rows);
    const int job = (jr >= p.job_start[1] ? 1 : 0) + (jr >= p.job_start[2] ? 1 : 0);
    const int row = jr - p.job_start[job];
    const int64_t units = units_per_row<T>(p.K);
    Raw<T> raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (valid && u < units) raw[u] = load_unit<T, Ld::Coherent>(p.w[job], row, u);
    }
    pdl_enter();
    if (!valid) return;
    Act a{};
    a.x = p.x;
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (u < units) acc += dot_unit<T>(raw[u], a, u);
    }
    p.out[job][row] = acc + (p.acc != nullptr ? p.acc[row] : 0.0f);
}

template <DType T>
void launch_matvec(const Ctx& ctx, const MvParams& p, const Tensor& node) {
    const size_t smem = mv_smem_bytes(T, p.K);
    const int64_t groups = (p.n_items + kMvWarps - 1) / kMvWarps;
    if constexpr (is_plain(T)) {
        // Both read the activation in place, 16 bytes at a time.
        const bool plain_x = p.a == nullptr && p.silu == nullptr && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
        if (plain_x && p.K <= kNarrowMaxK) {
            const int64_t blocks = (p.total_rows + kMvThreads - 1) / kMvThreads;
            check(launch(ctx, k_matvec_narrow<T>, dim3(static_cast<unsigned>(blocks)), dim3(kMvThreads), 0, p),
                  "k_matvec_narrow", node);
            return;
        }
        if (plain_x && p.K >= 1024 && 2 * groups <= ctx.sm_count) {
            check(launch(ctx, k_matvec_wide<T>, dim3(static_cast<unsigned>(p.n_items)), dim3(kMvThreads), 0, p),
                  "k_matvec_wide", node);
            return;
        }
    }
    const int64_t grid = std::min<int64_t>(groups, static_cast<int64_t>(ctx.sm_count) * kMvBlocksPerSM);
    check(launch(ctx, k_matvec<T>, dim3(static_cast<unsigned>(grid)), dim3(kMvThreads), smem, p), "k_matvec", node);
}

}  // namespace

void launch_matvec_general(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node) {
    dispatch_weight(t, [&]<DType T>() { launch_matvec<T>(ctx, p, node); });
}

void init_matvec_general(int max_smem) {
    for_each_weight([&]<DType T>() { raise_smem_limit(k_matvec<T>, max_smem); });
}

}  // namespace lantern::cuda::mv
