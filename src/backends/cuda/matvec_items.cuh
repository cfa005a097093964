// A matrix-vector warp item's rows and the stores of its sums, for the
// kernels that take their items as row pairs (matvec_stream.cu,
// matvec_bulk.cu).
#pragma once

#include "backends/cuda/matvec.cuh"

namespace lantern::cuda::mv {

// The two rows of a lane's pair; q[s] null: slot s has no row (or no item).
struct QRows {
    QRow r[kRows];
};

// The launch's modes (uniform branches): paired (gate and up, row `pair`
// of each job), one job (rows 2 pair + s) and jobs side by side (slot_of).
// The first two need no per-lane job: p.w[job] with a job that varies by
// lane is an indexed load from the parameters, and slot_of with it was
// ~80 of a one-stage item's ~430 instructions.
__device__ __forceinline__ QRows q_rows(const MvParams& p, int pair) {
    QRows r;
    // Every job has the same K and type, so the same row sizes.
    const auto row_bytes = static_cast<uint32_t>(p.w[0].row_bytes), meta_bytes = static_cast<uint32_t>(p.w[0].meta_row_bytes);
    auto set = [&](int s, const WView& w, int row, bool valid) {
        const auto rw = static_cast<uint32_t>(row);
        r.r[s].q = valid ? w.data + static_cast<size_t>(rw) * row_bytes : nullptr;
        r.r[s].m = w.meta + static_cast<size_t>(rw) * meta_bytes;
    };
    const int total = static_cast<int>(p.total_rows);
    if (p.silu != nullptr) {
        set(0, p.w[0], pair, pair < total);
        set(1, p.w[1], pair, pair < total);
    } else if (p.n_jobs == 1) {
        set(0, p.w[0], kRows * pair, kRows * pair < total);
        set(1, p.w[0], kRows * pair + 1, kRows * pair + 1 < total);
    } else {
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            const Slot sl = slot_of(p, pair, s);
            set(s, p.w[sl.job], sl.row, sl.valid);
        }
    }
    return r;
}

// Sums over the W lanes of a group (aligned), both rows of its pair at once: the first exchange swaps halves, so lanes
// j < W / 2 go on with row 0 and the others with row 1, and each further
// step sums one value (log2 W + 1 shuffles for both rows, not 2 log2 W).
// Returns the sum of row hi = (j >= W / 2) to every lane of that half.
template <int W>
__device__ __forceinline__ float pair_sum(const float (&acc)[kRows], bool hi) {
    float v = (hi ? acc[1] : acc[0]) + __shfl_xor_sync(0xffffffffu, hi ? acc[0] : acc[1], W / 2);
#pragma unroll
    for (int o = W / 4; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Stores a pair's sums (pair_sum): lane j = 0 row 0 (and in paired mode
// row 1, from lane W / 2, and the product), lane j = W / 2 row 1 otherwise.
template <int W, int Warps>
__device__ __forceinline__ void q_store(const MvParams& p, const float* red, int pair, float sum, int j) {
    sum *= act_scale<true, Warps>(p, red);
    if (p.silu != nullptr) {  // uniform: every lane takes part in the shuffle
        const float other = __shfl_xor_sync(0xffffffffu, sum, W / 2);
        if (j != 0 || pair >= static_cast<int>(p.total_rows)) return;
        p.out[0][pair] = sum;
        p.out[1][pair] = other;
        p.silu[pair] = silu_f(sum) * other;
        return;
    }
    if (j % (W / 2) != 0) return;
    const int s = j == 0 ? 0 : 1;
    if (p.n_jobs == 1) {
        if (kRows * pair + s < static_cast<int>(p.total_rows)) p.out[0][kRows * pair + s] = sum;
        return;
    }
    const Slot sl = slot_of(p, pair, s);
    if (sl.valid) p.out[sl.job][sl.row] = sum;
}

}  // namespace lantern::cuda::mv
