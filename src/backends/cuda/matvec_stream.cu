// The streamed matrix-vector kernel (k_matvec_q) for the quantized types:
// each warp walks its rows in stages of blocks, the next stage's loads issued
// before the current stage's dot products (qblocks.cuh decodes the blocks).
#include <algorithm>

#include "backends/cuda/matvec_items.cuh"

#if defined(LANTERN_CUDA_MV_TRACE)
#include <cstdio>
#include <vector>
#endif

namespace lantern::cuda::mv {

// Diagnostics (cmake -DLANTERN_CUDA_MV_TRACE=ON): each warp of k_matvec_q
// stamps the global timer at its entry, after the grid wait, after the
// activation's staging, after each of its first three steps (and the last
// of the rest) and at its end; dump_matvec_trace() prints the last launch's
// stamps (percentiles over the warps, from the first entry) when the backend
// closes. Without the option the stamps are no code at all.
#if defined(LANTERN_CUDA_MV_TRACE)
constexpr int kTraceWarps = 8192;
__device__ unsigned long long g_mv_trace[kTraceWarps][8];
__device__ __forceinline__ void mv_trace(int k) {
    const unsigned w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if ((threadIdx.x & 31) != 0 || w >= kTraceWarps) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    g_mv_trace[w][k < 7 ? k : 6] = t;
}

void dump_matvec_trace() {
    static unsigned long long h[kTraceWarps][8];
    if (cudaMemcpyFromSymbol(h, g_mv_trace, sizeof(h)) != cudaSuccess) return;
    unsigned long long t0 = ~0ull;
    for (const auto& w : h) {
        if (w[0] != 0) t0 = std::min(t0, w[0]);
    }
    const char* names[8] = {"entry", "waited", "staged", "step 1", "step 2", "step 3", "step 4+", "end"};
    for (int k = 0; k < 8; ++k) {
        std::vector<double> v;
        for (const auto& w : h) {
            if (w[0] != 0 && w[k] >= t0) v.push_back(static_cast<double>(w[k] - t0) * 1e-3);
        }
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        auto at = [&](double f) { return v[static_cast<size_t>(f * static_cast<double>(v.size() - 1))]; };
        std::fprintf(stderr, "[ trace ] k_matvec_q %-7s warps %5zu  min %7.2f  p10 %7.2f  p50 %7.2f  p90 %7.2f  max %7.2f us\n",
                     names[k], v.size(), v.front(), at(0.1), at(0.5), at(0.9), v.back());
    }
}
#else
__device__ __forceinline__ void mv_trace(int) {}
void dump_matvec_trace() {}
#endif

namespace {

// A warp's work is a sequence of stages: item (a row pair, matvec.cuh's
// slots), then U blocks per lane of each of its two rows, lane l taking
// blocks c + l + 32u (U = kQUnits, or fewer for short rows: units_per_stage;
// narrower lane groups and Q3_K's pairs of blocks: below). Each lane holds
// two stages of raw blocks; q_step() issues the loads of the next stage
// (possibly the next item's first) before it computes the current one, so
// a warp always has a stage in flight while it works, and finishes an item
// (warp sums, stores) with the next one's loads already issued. About 128
// bytes per lane and stage:
// Q4_0/Q4_1 four 16-byte blocks per row, Q8_0 two blocks of two 16-byte
// planes per row. On the H100 this beat 64 bytes with 3 blocks per SM by 4%
// (7B Q4_0), 9% (7B Q8_0) and 4% (tinyllama) in GPU time per decode step,
// and lost 2.5% on smollm2's 576-wide rows (2026-11-22). The other types
// take as many blocks per stage as keep a stage near 48 registers (two
// stages and the rest within 128); Q4_K takes four since its d/dmin words
// come by shuffle (kSharedDm).

// Every block stages the whole activation row from L2 after the grid wait,
// all blocks of the launch at once: that read is bound by L2 serving the
// same few kilobytes to every block, not by its latency (H100, 7B Q4_0
// decode with half the blocks skipping it as a timing test: GPU time per
// step -120 us of the -172 us that skipping it everywhere gave). So a block
// is as large as an SM holds at 128 registers a thread, 16 warps, and each
// SM stages the row once: 7B Q4_0 1,822 -> 1,768 us per step, Q8_0 2,942 ->
// 2,865, tinyllama Q4_0 515 -> 495, Q4_K 536 -> 514, smollm2 411 -> 403
// (against two blocks of 8 warps per SM, same call). The general kernel
// keeps 8: at 16 its tinyllama F16 step took 1,221 -> 1,269 us.
constexpr int kQWarps = 16;
constexpr int kQThreads = kQWarps * 32;
constexpr int kQBlocksPerSM = 1;  // __launch_bounds__: at most 128 registers

template <DType T>
constexpr int kQUnits =
    T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q2_K || T == DType::Q3_K || T == DType::Q4_K ||
            T == DType::IQ4_NL || T == DType::IQ4_XS
        ? 4
    : T == DType::Q8_0 || T == DType::Q6_K                                                          ? 2
                                                                                                    : 3;

// The K-quants' d/dmin word covers a superblock of eight blocks: stages of
// three or four units load each once (lane j of a group the j-th of the
// stage's superblocks) and pass it by shuffle, not once per unit and row
// (U - 1 fewer registers per row and buffer, which let Q4_K take four
// units without spilling). H100, 2026-11-22: 7B Q4_K decode step 2,058 ->
// 1,886 us with Q4_K at four units (2,005 with four units alone, 1,970
// with the shuffle alone); op bench Q4_K 4096 x 11008 73 -> 78% of the
// copy. With two units it cost time (tinyllama Q6_K 614 -> 641 us, Q4_K
// +11 us), and Q2_K lost 63 -> 56% in the op bench with it.
//
// Q3_K with an even U takes its blocks in pairs (kPaired): lane j of W has
// blocks c + 2j + (u & 1) + 2W (u >> 1) of a stage from block c, so a
// pair's fields are three loads, not six (qload_pair_at), and its d one
// load where the shared word took a shuffle per unit. H100, same call: op
// bench Q3_K 4096 x 11008 69 -> 70-71% of the copy, 11008 x 4096 52 -> 56%,
// 4096 x 32000 81 -> 85%; tinyllama Q3_K decode step 510 -> 486 us. Q2_K
// (two loads a block, not four) gained 1% on 4096 x 11008 and lost 3% on
// 4096 x 32000 and 1% of tinyllama's step. Q5_K pairs its blocks in rows
// of several stages only: 7B Q5_K step 2,259 -> 2,228 us, where pairs in
// rows of one stage cost tinyllama's 548 -> 553.
template <DType T, int U, bool Single>
constexpr bool kPaired = U % 2 == 0 && (T == DType::Q3_K || (T == DType::Q5_K && !Single));
template <DType T, int U>
constexpr bool kSharedDm = is_kq_layout(T) && T != DType::Q2_K && U >= 3 && !kPaired<T, U, false>;

// A paired lane's first block of the stage at b0 (which includes j = b0 % W,
// as QPos's does): c + 2j, even as nb is.
template <int W>
__device__ __forceinline__ int pair_first(int b0) {
    return b0 + (b0 & (W - 1));
}

// Rows too short for a stage can share a warp: with W lanes per row pair
// (32, 16 or 8), a warp item is 32 / W row pairs, lane l taking pair l / W
// and, of its rows, blocks l % W + W u (lanes_per_pair below says when).
// (The pair's rows: q_rows, matvec_items.cuh.)

// Asks L2 for the pair's rows (payload and meta), 128-byte lines spread
// over its W lanes (this one: j): later stages then wait on L2, not HBM.
template <int W>
__device__ __forceinline__ void q_prefetch(const MvParams& p, const QRows& r, int j) {
    if (!p.l2_prefetch) return;
    const unsigned row_bytes = static_cast<unsigned>(p.w[0].row_bytes);  // every job: same K and type
    const unsigned meta_bytes = static_cast<unsigned>(p.w[0].meta_row_bytes);
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        if (r.r[s].q == nullptr) continue;
        // Not unrolled: most rows take a line or two per lane, and unrolled
        // the two loops were ~120 instructions per warp (H100 profile, Q2_K;
        // op bench Q2_K 64 -> 65% of the copy, 7B Q4_0 decode step -6 us).
        // Unrolled again for the rows of several stages, Q5_K's 4096 x 11008
        // gained 0.4% and the 7B step lost 17 us.
#pragma unroll 1
        for (unsigned off = static_cast<unsigned>(j) * 128; off < row_bytes; off += W * 128) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(r.r[s].q + off));
        }
#pragma unroll 1
        for (unsigned off = static_cast<unsigned>(j) * 128; off < meta_bytes; off += W * 128) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(r.r[s].m + off));
        }
    }
}

template <DType T, int W, int U, bool Single, Ld L = Ld::Cached>
__device__ __forceinline__ void q_load(const QRows& r, int nb, int b0, QBlk (&o)[kRows][U]) {
    // One base per row and plane (qbase), the stage's blocks at immediate
    // offsets. A full stage of two rows (most stages) loads without a test
    // per load. That pays for the types with four loads per block (H100 op
    // bench, 4096 x 11008: Q6_K 69 -> 80% of the copy, Q5_K 55 -> 67%, Q3_K
    // 44 -> 57%; tinyllama Q6_K decode step 717 -> 663 us); with two or three
    // it cost time (decode step: 7B Q4_0 and Q8_0 +1%, tinyllama Q4_K +2.6%).
    // A block not loaded gets scales of 0, so q_dot adds 0 for it.
    constexpr bool kFullPath = T == DType::Q3_K || T == DType::Q5_K || T == DType::Q6_K;
    if constexpr (kPaired<T, U, Single>) {
        const int first = pair_first<W>(b0);
        const bool full = kFullPath && r.r[0].q != nullptr && r.r[1].q != nullptr && first + 2 * W * (U / 2 - 1) < nb;
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            const QBase base = qbase<T>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(first));
#pragma unroll
            for (int v = 0; v < U / 2; ++v) {
                if (full || (r.r[s].q != nullptr && first + 2 * W * v < nb)) {
                    qload_pair_at<T, L>(base, static_cast<size_t>(2 * W * v), o[s][2 * v], o[s][2 * v + 1]);
                } else {
                    o[s][2 * v].dm = o[s][2 * v + 1].dm = 0;
                }
            }
        }
        return;
    }
    const bool full = kFullPath && r.r[0].q != nullptr && r.r[1].q != nullptr && b0 + W * (U - 1) < nb;
    constexpr bool kShared = kSharedDm<T, U>;
    // The stage's d/dmin words: lane j of the group takes superblock
    // (b0 - j) / 8 + j; q_dot hands each unit its word (dm_lane).
    const int j = b0 & (W - 1), sb = ((b0 - j) >> 3) + j;
    const bool loads_dm = j < W * U / 8 && sb < nb / 8;
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        const QBase base = qbase<T>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(b0));
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (full || (r.r[s].q != nullptr && b0 + W * u < nb)) {
                o[s][u] = qload_at<T, L, !kShared>(base, static_cast<size_t>(W * u));
            } else {
                o[s][u].dm = 0;
            }
        }
        if constexpr (kShared) {
            o[s][0].dm = r.r[s].q != nullptr && loads_dm
                             ? qload_dm<T, L>(q_dm_at<T>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(sb)))
                             : 0u;
        }
    }
}

// The lane holding the d/dmin word of unit u's superblock (q_load): for
// lane j of a group of W, unit u is block base + j + W u (base = b0 - j, a
// multiple of W U and so of 8), in superblock base / 8 + j / 8 + (W / 8) u,
// whose word lane j / 8 + (W / 8) u of the group loaded.
template <int W>
__device__ __forceinline__ int dm_lane(int u) {
    const int lane = static_cast<int>(threadIdx.x & 31);
    return (lane & ~(W - 1)) + ((lane & (W - 1)) >> 3) + (W / 8) * u;
}

// Blocks b0 + W u of both rows into acc. The activation block is read once
// for both rows. One straight run of code with no test per unit or row, so
// the scheduler interleaves the stage's dot products (with a branch per
// unit and row they ran one after another: H100, tinyllama decode step
// 556 -> 519 us with the loads below). A block past the row has scales 0
// (q_load) and reads the row's last activation block, so it adds 0. Units
// past the row for a whole warp are rare (units_per_stage); skipping them
// by a warp-uniform branch cost more than it saved (code generation: op
// bench Q4_0 84 -> 81%, Q2_K 64 -> 54%; Q5_0/Q5_1 gained 8%).
template <DType T, int W, int U, bool Single>
__device__ __forceinline__ void q_dot(const QBlk (&w)[kRows][U], const Act& a, int nb, int b0, float (&acc)[kRows]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int b = kPaired<T, U, Single> ? pair_first<W>(b0) + (u & 1) + 2 * W * (u >> 1) : b0 + W * u;
        const ActBlk ab = act_blk(a, min(b, nb - 1));
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            QBlk k = w[s][u];
            if constexpr (kSharedDm<T, U>) k.dm = __shfl_sync(0xffffffffu, w[s][0].dm, dm_lane<W>(u));
            acc[s] += kPaired<T, U, Single> && (u & 1) != 0 ? qdot<T, true>(k, ab) : qdot<T>(k, ab);
        }
    }
}

// Run items (Q2_K: kRunType): lane j of a stage of W U blocks takes U
// consecutive blocks, U j .. U j + U - 1, all in one superblock (U is 1, 2
// or 4). Its fields are then a few wide loads per row (at four units: the
// two-bit fields two 16-byte loads, the scale bytes two words, d/dmin one,
// where single blocks took 12), d/dmin is converted once per row, and the
// activation's run shares one scale (quant_half), so the run's integer
// sums add up in the dot products' accumulators and take one float
// product per row. The activation is staged with unit u of every lane side
// by side (act_slot). H100, same calls, against single blocks: GPU time per
// decode step 7B Q2_K 1,420 -> 1,375 us (twice), tinyllama Q2_K 446 -> 449;
// op bench 4096 x 11008 7.31 -> 7.22 us, 4096 x 32000 16.97 -> 17.33; with
// the weights in L2 (LANTERN_CUDA_BENCH_L2) 5.90 -> 5.50 us: the launch is
// not bound by its instructions. Q3_K's runs (its one-bit words a third
// load) were a wash: 7B Q3_K step 1,630 -> 1,604 us on one H100, 1,599 ->
// 1,622 on another. Runs of two blocks at four units (each load
// instruction one contiguous span) were no better.
template <DType T>
constexpr bool kRunType = T == DType::Q2_K;

template <int U>
struct RunRow {
    uint32_t two[2 * U];       // two-bit fields, unit u: two[2u], two[2u + 1]
    uint32_t sc[(U + 1) / 2];  // scale bytes, two units a word
    uint32_t dm;               // d/dmin; 0 where the run is past the row
};

template <DType T, int W, int U, Ld L = Ld::Cached>
__device__ __forceinline__ void run_load(const QRows& r, int nb, int b0, RunRow<U> (&o)[kRows]) {
    static_assert(kRunType<T> && (U == 1 || U == 2 || U == 4), "runs within a superblock, in whole loads");
    const int j = b0 & (W - 1), first = b0 - j + U * j;  // b0 includes j
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        // nb is a multiple of 8, so a run is in the row whole or not at all.
        if (r.r[s].q == nullptr || first >= nb) {
            o[s].dm = 0;
            continue;
        }
        const uint8_t* two = r.r[s].q + 8 * first;
        const uint8_t* sc = r.r[s].m + 2 * first;
        uint32_t* t = o[s].two;
        if constexpr (U == 4) {
            const uint4 t0 = ld128<L>(two), t1 = ld128<L>(two + 16);
            t[0] = t0.x, t[1] = t0.y, t[2] = t0.z, t[3] = t0.w;
            t[4] = t1.x, t[5] = t1.y, t[6] = t1.z, t[7] = t1.w;
            // Meta rows are 4-byte aligned only.
            o[s].sc[0] = ld32<L>(sc);
            o[s].sc[1] = ld32<L>(sc + 4);
        } else if constexpr (U == 2) {
            const uint4 t0 = ld128<L>(two);
            t[0] = t0.x, t[1] = t0.y, t[2] = t0.z, t[3] = t0.w;
            o[s].sc[0] = ld32<L>(sc);
        } else {
            const uint2 t0 = ld64<L>(two);
            t[0] = t0.x, t[1] = t0.y;
            o[s].sc[0] = ld16<L>(sc);
        }
        o[s].dm = qload_dm<T, L>(q_dm_at<T>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(first >> 3)));
    }
}

template <DType T, int W, int U>
__device__ __forceinline__ void run_dot(const RunRow<U> (&w)[kRows], const Act& a, int nb, int b0, float (&acc)[kRows]) {
    const int j = b0 & (W - 1), stage = b0 - j;
    // A lane past the row reads the stage's first slots (finite; its d is 0).
    const int a0 = stage + U * j < nb ? stage + j : stage;
    const float ad = a.d[a0];
    int isc[kRows] = {0, 0}, imn[kRows] = {0, 0};
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int slot = a0 + W * u;
        const int4 lo = *reinterpret_cast<const int4*>(a.q + 16 * slot);
        const int4 hi = *reinterpret_cast<const int4*>(a.q + a.half_k + 16 * slot);
        const int isum = a.isum[slot];
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            QBlk k;
            k.two = make_uint2(w[s].two[2 * u], w[s].two[2 * u + 1]);
            const int2 q = qsums16<T>(k, lo, hi);
            const int v = static_cast<int>(__byte_perm(q.x, q.y, 0x5410));
            // Scales in the low nibbles, mins in the high ones (qdot).
            const uint32_t scw = w[s].sc[u / 2];
            const int sc = static_cast<int>(scw & 0x0F0F0F0Fu), mn = static_cast<int>((scw >> 4) & 0x0F0F0F0Fu);
            if ((u & 1) == 0) {
                isc[s] = __dp2a_lo(v, sc, isc[s]);
                imn[s] = __dp2a_lo(isum, mn, imn[s]);
            } else {
                isc[s] = __dp2a_hi(v, sc, isc[s]);
                imn[s] = __dp2a_hi(isum, mn, imn[s]);
            }
        }
    }
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        acc[s] += ad * (fp16_lo(w[s].dm) * static_cast<float>(isc[s]) - fp16_hi(w[s].dm) * static_cast<float>(imn[s]));
    }
}

// Where a lane is: its warp item, the first block of the stage (j
// included), its pair's rows (bit s of `valid`: slot s has a row).
struct QPos {
    int steps;  // taken so far (mv_trace)
    int item;
    int b0;
    unsigned valid;
    QRows rows;
};

__device__ __forceinline__ unsigned q_valid(const QRows& r) {
    return (r.r[0].q != nullptr ? 1u : 0u) | (r.r[1].q != nullptr ? 2u : 0u);
}

// One stage: computes `cur` (at pos) after issuing the loads of the next
// stage into `nxt`. False when the warp has no stage left (warp-uniform:
// a lane whose pair has no rows still takes part in the sums). Single: the
// launch's rows are one stage each (W U >= nb), so every stage is an item's
// last and starts at block j, and the compiler keeps what depends on the
// stage's blocks (the activation's addresses, which units are in the row)
// out of the loop.
template <DType T, int W, int U, bool Prefetch, bool Single, bool Run, class Buf>
__device__ __forceinline__ bool q_step(const MvParams& p, const Act& a, const float* red, int nb, int step, int g, int j,
                                       QPos& pos, const Buf& cur, Buf& nxt, float (&acc)[kRows]) {
    constexpr int G = 32 / W;
    if (pos.item * G >= p.n_items) return false;
    QPos next = pos;
    next.b0 += W * U;
    const bool last = Single || next.b0 >= nb + j;  // b0 includes j
    if (last) {
        next.item += step;
        next.b0 = j;
        next.rows = q_rows(p, next.item * G + g);
        next.valid = q_valid(next.rows);
        if constexpr (Prefetch) q_prefetch<W>(p, next.rows, j);
    }
    if constexpr (Run) {
        run_load<T, W, U>(next.rows, nb, Single ? j : next.b0, nxt);
        run_dot<T, W, U>(cur, a, nb, Single ? j : pos.b0, acc);
    } else {
        q_load<T, W, U, Single>(next.rows, nb, Single ? j : next.b0, nxt);
        q_dot<T, W, U, Single>(cur, a, nb, Single ? j : pos.b0, acc);
    }
    mv_trace(3 + pos.steps);
    ++next.steps;
    if (last) {
        const float sum = pair_sum<W>(acc, j >= W / 2);
        if (pos.valid != 0) q_store<W, kQWarps>(p, red, pos.item * G + g, sum, j);
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = 0.0f;
    }
    pos = next;
    return true;
}

// The activation staged (stage_act), and its view. Q3_K stages the row
// as nb whole blocks (its length from the 32-bit block count, not p.K):
// the same values, but ptxas then schedules its kernels better. H100, same
// call: op bench Q3_K 4096 x 11008 71 -> 75% of the copy (twice), 4096 x
// 32000 83 -> 86%, tinyllama Q3_K decode step 489 -> 474 us. For the other
// types it was a wash or a loss (Q5_1 4096 x 11008 84 -> 82%, tinyllama
// Q4_0 step 472 -> 475 us), and their code here is left as it was.
template <DType T, int AW, int AU>
__device__ __forceinline__ Act q_stage(const MvParams& p, uint8_t* smem, float* red, int nb) {
    if constexpr (T == DType::Q3_K) {
        const int64_t ks = static_cast<int64_t>(nb) * 32;
        stage_act_q8_as<kQWarps, AW, AU>(p, smem, red, p.x, ks);
        mv_trace(2);
        return act_view(smem, act_k(ks, AW, AU));
    } else {
        stage_act<true, kQWarps, AW, AU>(p, smem, red);
        mv_trace(2);
        return act_view(smem, act_k(p.K, AW, AU));
    }
}

template <DType T, int W, int U, bool Prefetch, bool Single, bool Run = false>
__global__ void __launch_bounds__(kQThreads, kQBlocksPerSM) k_matvec_q(const MvParams p) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ __align__(16) float red[32];
    constexpr int G = 32 / W;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane / W, j = lane % W;
    const int nb = static_cast<int>(p.K / 32);
    const int step = static_cast<int>(gridDim.x) * kQWarps;

    // The first item's weights do not depend on earlier kernels: ask L2 for
    // them while the previous kernel finishes and the activation is staged
    // (a prefetch holds no registers; staging needs them). Even when the
    // first stage below covers the whole item this pays: without it the 7B
    // Q4_0 decode step took 2.3% longer (H100, 2026-11-22).
    mv_trace(0);
    QPos pos;
    pos.steps = 0;
    pos.item = static_cast<int>(blockIdx.x) * kQWarps + warp;
    pos.b0 = j;
    pos.rows = q_rows(p, pos.item * G + g);
    pos.valid = q_valid(pos.rows);
    // The first stage itself is loaded before the wait too: the registers
    // are free until the activation is staged, and the dot products after
    // the wait then start without a memory round trip. Coherent loads: ptxas
    // moves __ldg ones after the wait (until 2026-11-22 they were). For Q8_0
    // they cost 1.1% of the 7B decode step on two of three H100s with the
    // fourth session's kernels and save 0.3% with the fifth's (2,955 ->
    // 2,947 us, twice in one call); tinyllama's Q4_0 and Q4_K steps took
    // 6-9% and the 7B Q4_0's 3% less with them.
    using Buf = std::conditional_t<Run, RunRow<U>[kRows], QBlk[kRows][U]>;
    Buf buf0, buf1;
    // Its loads go out before the prefetches (7B Q4_0 decode step 1,731 ->
    // 1,724 us, op bench Q4_0 4096 x 11008 84 -> 85-86%; Q5_K 75 -> 74%).
    if constexpr (Run) {
        run_load<T, W, U, Ld::Coherent>(pos.rows, nb, pos.b0, buf0);
    } else {
        q_load<T, W, U, Single, Ld::Coherent>(pos.rows, nb, pos.b0, buf0);
    }
    q_prefetch<W>(p, pos.rows, j);
    prefetch_norm_inputs(p);

    pdl_enter();
    mv_trace(1);
    constexpr int AW = Run ? W : 1, AU = Run ? U : 1;  // the staged row's order (act_slot)
    const Act a = q_stage<T, AW, AU>(p, smem, red, nb);

    float acc[kRows] = {0.0f, 0.0f};
    while (q_step<T, W, U, Prefetch, Single, Run>(p, a, red, nb, step, g, j, pos, buf0, buf1, acc) &&
           q_step<T, W, U, Prefetch, Single, Run>(p, a, red, nb, step, g, j, pos, buf1, buf0, acc)) {
    }
    mv_trace(7);
}

// Lanes per row pair: 32, or narrower while the launch has more pairs than
// its warps can take at once and the narrower stage still covers a row. A
// launch that fits in one round keeps 32: there each warp's chain of
// loads and sums is the time, and more pairs per warp only lengthen it
// (H100, 2026-11-22: narrowing every launch of smollm2, 576-wide rows, cost
// 1.3% of its decode step; narrowing tinyllama's saved 1.8%).
//
// Not for Q4_K: at four units its tinyllama gate/up rows (64 blocks) would
// take 16 lanes, and that cost 2% of the decode step (H100, 2026-11-22:
// 551 -> 541 us with 32; the three-unit Q4_K before did not narrow them).
template <DType T>
int lanes_per_pair(int64_t nb, int64_t pairs, int64_t warps) {
    constexpr bool kNarrow = T != DType::Q4_K;
    int w = 32;
    while (kNarrow && w > 8 && pairs * w / 32 > warps && (w / 2) * kQUnits<T> >= nb) w /= 2;
    return w;
}

// Blocks per lane and stage for a launch with lanes_per_pair W: the type's
// kQUnits, or fewer when a row has few blocks (with W = 32: 1 for up to 32
// blocks, 2 for up to 64). The stage's unrolled loads and sums then hold
// no predicated-off units: smollm2's 576-wide rows (18 blocks) used one of
// four, and a small launch's time is its warps' instruction chain.
//
// And the fewest units that take as many stages as the type's own (q_dot
// computes every unit of a stage): a 4,096-wide row (128 blocks) is two
// stages either way for the types of three units per stage, the second a
// third full with three; tinyllama's 5,632-wide down rows (176 blocks) are
// two stages of three units for the four-unit types.
template <DType T>
int units_per_stage(int64_t nb, int W) {
    constexpr int D = kQUnits<T>;
    if (W == 32 && nb <= 32 && D > 1) return 1;
    if (W == 32 && nb <= 64 && D > 2) return 2;
    auto stages = [&](int64_t u) { return (nb + W * u - 1) / (W * u); };
    if (W == 32) {
        for (int u = 2; u < D; ++u) {
            if (stages(u) == stages(D)) return u;
        }
    }
    return D;
}

template <DType T>
void launch_matvec_q(const Ctx& ctx, const MvParams& params, const Tensor& node) {
    MvParams p = params;
    const int64_t warps = static_cast<int64_t>(ctx.sm_count) * kQBlocksPerSM * kQWarps;
    const bool pf = ctx.matvec == MatVecKernel::StreamedPrefetch;
    const int64_t nb = p.K / 32;
    const int W = pf ? 32 : lanes_per_pair<T>(nb, p.n_items, warps);
    const bool run = kRunType<T> && ctx.runs;
    int U = pf ? kQUnits<T> : units_per_stage<T>(nb, W);
    if (run && U == 3) U = 4;  // runs divide a superblock
    const size_t smem = mv_smem_bytes(T, run ? act_k(p.K, W, U) : p.K);
    const int64_t items = (p.n_items + 32 / W - 1) / (32 / W);  // warp items
    const int64_t groups = (items + kQWarps - 1) / kQWarps;
    // A launch of several rounds whose groups do not fill the last one
    // (the 7B's gate/up: 688 groups of 16 warp items on 132 SMs, 5.2
    // rounds) takes as few blocks as still need that many rounds (115, each
    // with 6), when its rows are one stage each: H100, same call, GPU time
    // per decode step 7B Q4_0 1,724 -> 1,687 us (twice), Q4_1 1,852 -> 1,813,
    // Q3_K 1,606 -> 1,584, Q4_K 1,903 -> 1,886, Q2_K 1,381 -> 1,350;
    // tinyllama Q4_0 and smollm2 (no launch of 4 rounds but their output
    // matrices) unchanged. Rows of two stages lost (7B Q8_0 2,774 -> 2,817
    // us), and so did launches of 2 or 3 rounds (tinyllama's gate/up, 2
    // rounds: 478 -> 490 us; the op bench's 4096 x 11008, 3 rounds: Q2_K
    // 7.23 -> 7.53 us, Q4_K 79 -> 75% of the copy).
    int64_t grid = std::min<int64_t>(groups, static_cast<int64_t>(ctx.sm_count) * kQBlocksPerSM);
    const int64_t rounds = (groups + grid - 1) / grid;
    if (ctx.balance_rounds > 0 && rounds >= ctx.balance_rounds && W * U >= nb) grid = (groups + rounds - 1) / rounds;
    // The prologue asks L2 for the first item's whole rows (q_prefetch),
    // except where those rows take several stages and the grid's first
    // items hold more than ctx.prefetch_limit bytes: there the requests,
    // issued by every warp at once, queue in front of the first stages'
    // loads, which the warps wait on first, and later stages are better
    // loaded when the warp reaches them. H100, same call, op bench 11008 x
    // 4096 (three stages, one round, 25 MB in Q4_0) with the prefetch / the
    // first stage's alone: Q4_0 66 -> 74% of the copy, Q8_0 76 -> 85%, Q4_K
    // 62 -> 71%, Q6_K 68 -> 73%, Q2_K 51 -> 55%; GPU time per decode step 7B
    // Q4_0 1,702 -> 1,669 us, Q8_0 2,775 -> 2,658 (its 4,096-wide rows are two
    // stages too). With the prefetch limited to two stages the op bench lost
    // 1-6 points of that and the 7B Q8_0 36 us. Tinyllama's down rows (two
    // stages, a 6.5 MB launch) lost 5 us a step without the prefetch: on
    // small launches it is in L2 before the staging ends.
    {
        const int64_t first_items = std::min<int64_t>(p.n_items, grid * kQWarps * (32 / W));
        const double first_bytes = static_cast<double>(first_items) * kRows *
                                   static_cast<double>(p.w[0].row_bytes + p.w[0].meta_row_bytes);
        p.l2_prefetch = W * U >= nb || ctx.prefetch_limit == 0 || first_bytes <= static_cast<double>(ctx.prefetch_limit);
    }
    auto go_kernel = [&](auto kernel) {
        check(launch(ctx, kernel, dim3(static_cast<unsigned>(grid)), dim3(kQThreads), smem, p), "k_matvec_q", node);
    };
    auto go = [&]<int WW, int UU, bool PF, bool SG>() {
        if constexpr (kRunType<T> && UU != 3) {
            if (run) {
                go_kernel(k_matvec_q<T, WW, UU, PF, SG, true>);
                return;
            }
        }
        go_kernel(k_matvec_q<T, WW, UU, PF, SG, false>);
    };
    constexpr int D = kQUnits<T>;
    // Rows of one stage take the Single kernel (q_step), except the other
    // types' rows over 64 blocks: with it the 7B Q4_0 decode step (4,096-
    // wide rows) took 1,753 us where it takes 1,731, though the op bench
    // and the layer launches on their own were as fast or faster; with it
    // for every row of one stage but the single-round launches', 1,778.
    // The rest gain (H100, same call, GPU time per step): smollm2 Q4_0
    // 397 -> 386 us, tinyllama Q4_0 482 -> 475, Q4_K 510 -> 492; op bench
    // 4096 x 11008 Q2_K 65 -> 68% of the copy, Q3_K 66 -> 69%.
    const bool single = W * U >= nb && (is_kq_layout(T) || nb <= 64);
    auto full = [&]<int UU>() {
        if (single) {
            go.template operator()<32, UU, false, true>();
        } else {
            go.template operator()<32, UU, false, false>();
        }
    };
    if (pf) {
        go.template operator()<32, D, true, false>();
    } else if (W == 8) {
        go.template operator()<8, D, false, true>();
    } else if (W == 16) {
        go.template operator()<16, D, false, true>();
    } else if (U == 1) {
        go.template operator()<32, 1, false, true>();
    } else if (U == 2) {  // only when D >= 2 (units_per_stage)
        full.template operator()<std::min(2, D)>();
    } else if (U == 3) {  // only when D >= 3
        full.template operator()<std::min(3, D)>();
    } else {
        full.template operator()<D>();
    }
}

}  // namespace

void launch_matvec_streamed(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node) {
    dispatch_quant(t, [&]<DType T>() { launch_matvec_q<T>(ctx, p, node); });
}

void init_matvec_streamed(int max_smem) {
    for_each_quant([&]<DType T>() {
        constexpr int D = kQUnits<T>;
        // Every instantiation launch_matvec_q may take (Run: no three-unit ones).
        auto raise = [&]<bool Run>() {
            raise_smem_limit(k_matvec_q<T, 8, D, false, true, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 16, D, false, true, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 32, D, false, true, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 32, D, false, false, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 32, 1, false, true, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 32, std::min(2, D), false, true, Run>, max_smem);
            raise_smem_limit(k_matvec_q<T, 32, std::min(2, D), false, false, Run>, max_smem);
            if constexpr (!Run) {
                raise_smem_limit(k_matvec_q<T, 32, std::min(3, D), false, true, Run>, max_smem);
                raise_smem_limit(k_matvec_q<T, 32, std::min(3, D), false, false, Run>, max_smem);
            }
            raise_smem_limit(k_matvec_q<T, 32, D, true, false, Run>, max_smem);
        };
        raise.template operator()<false>();
        if constexpr (kRunType<T>) {
            static_assert(D == 4, "run items of 1, 2 or 4 blocks");
            raise.template operator()<true>();
        }
    });
}

}  // namespace lantern::cuda::mv
