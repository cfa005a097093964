// Mixture-of-experts feed-forward (Op::MoeFfn) on the device, in four
// launches that read the routing from device memory, so that a captured
// decode step replays whichever experts the next token picks:
//   k_moe_logits a warp per (token, expert, slice): the router's logits
//   k_moe_topk   a block per token: softmax, the n_used largest (ties to
//                the lower index), their weights
//   k_moe_up     per (token, expert slot): silu(gate . x) * (up . x) for
//                every hidden row
//   k_moe_down   per token: each output row's down rows of its slots .
//                hidden, added by weight
// The expert launches' warps stream their rows with the next stage's loads
// in flight (below). Prompts with enough pairs per expert take grouped
// GEMMs after the routing instead (moe_prompt.cu).
// Weights are read a block at a time (qblocks.cuh): quantized ones summed
// against 8-bit activations by dp4a, plain ones in floats.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/moe.cuh"
#include "backends/cuda/matvec.cuh"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda {
namespace {

using moe::align256;
using moe::kMaxExperts;
using moe::kMaxUsed;
using MoeDims = moe::Dims;

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

// An activation row as the sums read it, in quads (float4): quad i of unit
// u (units of 16 or 32 values: 4 or 8 quads) at q[i * si + u * su]. In
// global memory the row is as it is (si 1, su quads per unit). Staged in
// shared memory it is transposed (si units, su 1): the lanes of a warp
// take consecutive units, so their reads of one quad are consecutive; as
// the row lies, they are 64 or 128 bytes apart and every shared read
// replays 8 ways on the same banks (the first kernels' shared-memory pipe
// was 92% busy at 13% of DRAM bandwidth).
struct XRow {
    const float4* q;
    int64_t si, su;
};

template <DType T>
constexpr int64_t unit_values() {
    return is_plain(T) ? 16 : 32;
}

template <DType T>
__device__ __forceinline__ XRow global_row(const float* x) {
    return {reinterpret_cast<const float4*>(x), 1, unit_values<T>() / 4};
}

// The 16 values v . quads i0 .. i0 + 3 of unit u.
__device__ __forceinline__ float dot16(const float (&v)[16], const XRow& x, int64_t u, int i0) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float4 a = x.q[(i0 + i) * x.si + u * x.su];
        acc += v[4 * i] * a.x + v[4 * i + 1] * a.y + v[4 * i + 2] * a.z + v[4 * i + 3] * a.w;
    }
    return acc;
}

// What a lane holds of A units of a row whose loads are issued before
// their sums: quantized blocks (32 values each) or plain groups (16 values
// each, as floats).
template <DType T, int A>
struct Ahead {
    QBlk k[A];
};
template <int A>
struct Ahead<DType::F32, A> {
    float v[A][16];
};
template <int A>
struct Ahead<DType::F16, A> {
    float v[A][16];
};
template <int A>
struct Ahead<DType::BF16, A> {
    float v[A][16];
};

// Units u0, u0 + 32, ... (A of them, those below `units`) of a row.
template <DType T, int A>
__device__ __forceinline__ void load_ahead(const WView& w, int64_t row, int64_t u0, int64_t units, Ahead<T, A>& a) {
#pragma unroll
    for (int u = 0; u < A; ++u) {
        const int64_t unit = u0 + 32 * u;
        if (unit >= units) continue;
        if constexpr (is_plain(T)) {
            plain16<T>(w, row, unit, a.v[u]);
        } else {
            a.k[u] = qload<T>(q_row(w, row), static_cast<size_t>(w.blocks), static_cast<size_t>(unit));
        }
    }
}

template <DType T, int A>
__device__ __forceinline__ float sum_ahead(const Ahead<T, A>& a, int64_t u0, int64_t units, const XRow& x) {
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < A; ++u) {
        const int64_t unit = u0 + 32 * u;
        if (unit >= units) continue;
        if constexpr (is_plain(T)) {
            acc += dot16(a.v[u], x, unit, 0);
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v[16];
                group_values(group16<T>(a.k[u], h), v);
                acc += dot16(v, x, unit, 4 * h);
            }
        }
    }
    return acc;
}

// Units a lane loads ahead per stage of the expert launches (two stages
// held: one in flight while the other is summed). The router launch takes
// one at a time: its 1,024 threads' registers hold no more without spilling.
template <DType T>
constexpr int stage_units() {
    return is_plain(T) ? 1 : 2;
}

// The routing, in two launches. k_moe_logits: a warp per (token, expert,
// slice of moe::kRouteSlice values) of the router, spread over the SMs (one
// block per token held Qwen3-30B-A3B's 1 MB router on one SM), each lane
// one batch of loads: f32 rows four float4 of consecutive floats, other
// types units (load_ahead). The slices' partial sums go to memory; the
// next launch adds them in order (no atomics: the same sums every run).
// (Its last block to finish doing the top k instead, found by an arrival
// counter, was slower: H100 op bench, Qwen3-30B-A3B-shaped layer 22.4 us
// against 22.3, Mixtral's 80.9 against 80.5: the fence, the atomic and the
// reload cost more than the second launch, which starts early.)
constexpr int kLogitWarps = 8;

template <DType R>
__global__ void __launch_bounds__(kLogitWarps * 32) k_moe_logits(const uint8_t* x, size_t x_nb1, const WView router,
                                                                 MoeDims d, float* parts) {
    pdl_enter();
    const int64_t S = moe::route_slices(d);
    const int64_t t = blockIdx.y, item = static_cast<int64_t>(blockIdx.x) * kLogitWarps + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (item >= d.E * S) return;
    const int64_t e = item / S, slice = item % S;
    const float* xr = reinterpret_cast<const float*>(x + t * x_nb1);
    float acc = 0.0f;
    if constexpr (R == DType::F32) {
        const uint8_t* row = router.data + static_cast<size_t>(e) * router.row_bytes;
        const int64_t n4 = min(d.D, (slice + 1) * moe::kRouteSlice) / 4;
        uint4 w[4];
        float4 a[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {  // the slice's 128 float4, four per lane, loads first
            const int64_t i = slice * (moe::kRouteSlice / 4) + lane + 32 * u;
            w[u] = i < n4 ? ld_u128(row + 16 * i) : make_uint4(0, 0, 0, 0);
            a[u] = i < n4 ? reinterpret_cast<const float4*>(xr)[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            acc += __uint_as_float(w[u].x) * a[u].x + __uint_as_float(w[u].y) * a[u].y +
                   __uint_as_float(w[u].z) * a[u].z + __uint_as_float(w[u].w) * a[u].w;
        }
    } else {
        const XRow xg = global_row<R>(xr);
        constexpr int64_t per = moe::kRouteSlice / unit_values<R>();
        const int64_t last = min(d.D / unit_values<R>(), (slice + 1) * per);
        for (int64_t u0 = slice * per + lane; u0 < last; u0 += 32 * 2) {
            Ahead<R, 2> a;
            load_ahead<R, 2>(router, e, u0, last, a);
            acc += sum_ahead<R, 2>(a, u0, last, xg);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) parts[(t * d.E + e) * S + slice] = acc;
}

// The token's logits: the slices of expert e added in order into ws[e]
// (shared, E floats), by every thread of the block, each thread's loads
// four slices at a time, not a round trip per slice. Ends with the block's
// barrier.
__device__ __forceinline__ void route_logits(const float* parts, const MoeDims& d, int64_t t, float* ws) {
    const int64_t S = moe::route_slices(d);
    for (int64_t e = threadIdx.x; e < d.E; e += blockDim.x) {
        const float* p = parts + (t * d.E + e) * S;
        float v = 0.0f;
        int64_t s = 0;
        for (; s + 4 <= S; s += 4) {
            const float a = __ldcg(p + s), b = __ldcg(p + s + 1), c = __ldcg(p + s + 2), f = __ldcg(p + s + 3);
            v += a;
            v += b;
            v += c;
            v += f;
        }
        for (; s < S; ++s) v += __ldcg(p + s);
        ws[e] = v;
    }
    __syncthreads();
}

// softmax over the token's logits in ws, then k rounds of the warp's
// largest weight (ties to the lower index; NaN weights after every number,
// so that the chosen are always experts), renormalised when asked. Lane j
// writes the j-th chosen.
__device__ __forceinline__ void route_topk(const MoeDims& d, int64_t t, float* ws, int32_t* ids, float* weights) {
    const int lane = threadIdx.x % 32;
    const int E = static_cast<int>(d.E);
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, ws[e]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int e = lane; e < E; e += 32) {
        const float ex = expf(ws[e] - m);
        sum += ex;
        ws[e] = isnan(ex) ? -1.0f : ex;  // the ranking key; taken: -inf
    }
    sum = warp_sum(sum);
    __syncwarp();
    float total = 0.0f, mine = 0.0f;
    int mine_id = 0;
    for (int r = 0; r < d.k; ++r) {
        float best = -INFINITY;
        int bi = E;
        for (int e = lane; e < E; e += 32) {
            const float o = ws[e];
            if (o > best) best = o, bi = e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
        }
        const float w = best >= 0.0f ? best / sum : NAN;
        total += w;
        if (lane == r) mine = w, mine_id = bi;
        if (bi % 32 == lane) ws[bi] = -INFINITY;
        __syncwarp();
    }
    if (lane < d.k) {
        ids[t * d.k + lane] = mine_id;
        weights[t * d.k + lane] = d.norm ? mine / total : mine;
    }
}

// k_moe_topk: a block of kTopkThreads per token; the logits by the whole
// block, the choice by its first warp. (A thread per expert ranking each
// against all, two block reductions and a reread of the chosen weights
// took 6.3 us for one token of 128 experts: ncu, H100.)
constexpr int kTopkThreads = 128;

__global__ void __launch_bounds__(kTopkThreads) k_moe_topk(const float* parts, MoeDims d, int32_t* ids,
                                                         float* weights) {
    pdl_enter();
    __shared__ float ws[moe::kMaxExperts];
    route_logits(parts, d, blockIdx.x, ws);
    if (threadIdx.x < 32) route_topk(d, blockIdx.x, ws, ids, weights);
}

// Stages `rows` rows of n floats (n a multiple of the unit) from src into
// shared memory, each transposed (XRow), with every thread of the block;
// the view of row 0 (row r: q + r * n / 4).
template <DType T>
__device__ __forceinline__ XRow stage(const float* __restrict__ src, int64_t n, int64_t rows, float4* smem) {
    constexpr int64_t Q = unit_values<T>() / 4;
    const int64_t units = n / unit_values<T>(), quads = n / 4;
    for (int64_t i = threadIdx.x; i < rows * quads; i += blockDim.x) {
        const int64_t r = i / quads, q = i % quads;
        smem[r * quads + (q % Q) * units + q / Q] = reinterpret_cast<const float4*>(src)[i];
    }
    __syncthreads();
    return {smem, units, 1};
}

// Row r of rows of n floats that `first` views (staged or not).
template <DType T>
__device__ __forceinline__ XRow row_of(const XRow& first, int64_t n, int64_t r) {
    return {first.q + r * (n / 4), first.si, first.su};
}

// The expert launches: one block of kStreamWarps warps per SM (at most 128
// registers a thread), blockIdx.y the (token, slot) pair (up) or the token
// (down). Each warp walks its rows (every gridDim.x * kStreamWarps-th) in
// stages of stage_units<T>() units per lane of two rows, the next stage's
// loads (possibly the next row's) issued before the current stage's sums,
// so that a warp keeps loads in flight while it works and each block
// stages its activation once. (One warp per row pair, every block
// staging, held the first kernels to 0.45-0.53 TB/s on the H100.)
constexpr int kStreamWarps = 16;
constexpr int kStreamThreads = kStreamWarps * 32;

// How an expert launch reads its activation rows (the token's row for up,
// the slots' hidden rows for down): staged in shared memory, quantized to
// 8 bits with the CPU's rounding for the quantized weight types (dp4a
// sums, as the dense matrix-vector kernels take them: the float sums left
// these launches bound by instruction issue), as f32 (transposed, XRow)
// for the plain ones; read from global memory when the rows do not fit.
enum InMode : int { kInGlobal = 0, kInF32 = 1, kInQ8 = 2 };

// Shared bytes of one row of n values (n % 32 == 0) in each staged mode.
__host__ __device__ constexpr int64_t q8_row_bytes(int64_t n) { return n + n / 32 * 8 + n / 16 * 4; }

struct XIn {
    XRow f;
    mv::Act q;
};

// Stages `rows` rows of n floats from src (every thread of the block).
template <DType T, int M>
__device__ __forceinline__ void stage_rows(const float* src, int64_t n, int64_t rows, uint8_t* smem) {
    if constexpr (M == kInQ8) {
        // Every row's half-blocks in rounds of a thread each, each round one
        // L2 round trip: a round per row held the down launch's eight 768-wide
        // hidden rows (Qwen3-30B-A3B) to eight trips of 48 threads. A row's
        // half-block count is even, so the lanes that share a block of 32
        // (quant_half) share a row.
        const int64_t nh = n / 16, total = rows * nh;
        const bool vec = (reinterpret_cast<uintptr_t>(src) & 15) == 0;
        for (int64_t base = 0; base < total; base += kStreamThreads) {
            if (base + (threadIdx.x & ~31) >= total) break;  // warp-uniform
            const int64_t i = base + threadIdx.x;
            const bool valid = i < total;
            const int64_t r = valid ? i / nh : 0, hb = valid ? i % nh : 0;
            float v[16];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                mv::to_floats(valid ? mv::load4(src + r * n, 4 * hb + c, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), v,
                              4 * c);
            }
            mv::quant_half<false>(v, hb, valid, n, smem + r * q8_row_bytes(n));
        }
        __syncthreads();
    } else if constexpr (M == kInF32) {
        stage<T>(src, n, rows, reinterpret_cast<float4*>(smem));
    }
}

// Row r of the rows of n floats at src, as staged.
template <DType T, int M>
__device__ __forceinline__ XIn in_row(const uint8_t* smem, const float* src, int64_t n, int64_t r) {
    XIn x{};
    if constexpr (M == kInQ8) {
        x.q = mv::act_view(smem + r * q8_row_bytes(n), n);
    } else if constexpr (M == kInF32) {
        x.f = {reinterpret_cast<const float4*>(smem) + r * (n / 4), n / unit_values<T>(), 1};
    } else {
        x.f = global_row<T>(src + r * n);
    }
    return x;
}

template <DType T, int A, int M>
__device__ __forceinline__ float sum_in(const Ahead<T, A>& a, int64_t u0, int64_t units, const XIn& x) {
    if constexpr (M == kInQ8) {
        float acc = 0.0f;
#pragma unroll
        for (int u = 0; u < A; ++u) {
            const int64_t unit = u0 + 32 * u;
            if (unit < units) acc += qdot<T>(a.k[u], mv::act_blk(x.q, unit));
        }
        return acc;
    } else {
        return sum_ahead<T, A>(a, u0, units, x.f);
    }
}

template <DType G, int M>
__global__ void __launch_bounds__(kStreamThreads, 1) k_moe_up(const uint8_t* x, size_t x_nb1, const WView gate,
                                                              const WView up, MoeDims d, const int32_t* ids,
                                                              float* hidden) {
    pdl_enter();
    extern __shared__ float4 smem4[];
    uint8_t* smem = reinterpret_cast<uint8_t*>(smem4);
    constexpr int A = stage_units<G>();
    const int64_t p = blockIdx.y;  // the (token, slot) pair
    const float* xp = reinterpret_cast<const float*>(x + (p / d.k) * x_nb1);
    const int lane = threadIdx.x % 32;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kStreamWarps;
    int64_t n = static_cast<int64_t>(blockIdx.x) * kStreamWarps + threadIdx.x / 32;
    const bool rows = n < d.F;  // warp-uniform
    const int64_t base = static_cast<int64_t>(ids[p]) * d.F;
    const int64_t units = d.D / unit_values<G>();
    int64_t c0 = 0;  // the stage's first unit (lane j takes c0 + j + 32 u)
    // The first stage's loads go out before the activation is staged, so
    // that their round trip and the staging's overlap.
    Ahead<G, A> g, u;
    if (rows) {
        load_ahead<G, A>(gate, base + n, lane, units, g);
        load_ahead<G, A>(up, base + n, lane, units, u);
    }
    stage_rows<G, M>(xp, d.D, 1, smem);
    const XIn xr = in_row<G, M>(smem, xp, d.D, 0);
    if (!rows) return;
    float sg = 0.0f, su = 0.0f;
    for (;;) {
        int64_t nn = n, nc = c0 + 32 * A;
        if (nc >= units) nn += stride, nc = 0;
        const bool more = nn < d.F;
        Ahead<G, A> g2, u2;
        if (more) {
            load_ahead<G, A>(gate, base + nn, nc + lane, units, g2);
            load_ahead<G, A>(up, base + nn, nc + lane, units, u2);
        }
        sg += sum_in<G, A, M>(g, c0 + lane, units, xr);
        su += sum_in<G, A, M>(u, c0 + lane, units, xr);
        if (nn != n) {
            sg = warp_sum(sg);
            su = warp_sum(su);
            if (lane == 0) hidden[p * d.F + n] = silu_f(sg) * su;
            sg = su = 0.0f;
        }
        if (!more) break;
        g = g2, u = u2, n = nn, c0 = nc;
    }
}

// Output row n of token t: the sum over its slots j of weight j times down
// row (expert j, n) . hidden row j, two slots' rows per stage.
template <DType W, int M>
__global__ void __launch_bounds__(kStreamThreads, 1) k_moe_down(const WView down, MoeDims d, const int32_t* ids,
                                                                const float* weights, const float* hidden, uint8_t* y,
                                                                size_t y_nb1) {
    pdl_enter();
    extern __shared__ float4 smem4[];
    uint8_t* smem = reinterpret_cast<uint8_t*>(smem4);
    constexpr int A = stage_units<W>();
    const int64_t t = blockIdx.y;
    const float* hp = hidden + t * d.k * d.F;  // the token's slots' hidden rows, one after another
    const int lane = threadIdx.x % 32;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kStreamWarps;
    int64_t n = static_cast<int64_t>(blockIdx.x) * kStreamWarps + threadIdx.x / 32;
    const bool rows = n < d.D;  // warp-uniform
    const int32_t* id = ids + t * d.k;
    const float* wt = weights + t * d.k;
    const int64_t units = d.F / unit_values<W>();
    // Stage (n, slots j and j + 1, units from c0); the second slot only
    // while j + 1 < k. The first one's loads go out before the hidden rows
    // are staged (as k_moe_up's).
    int j = 0;
    int64_t c0 = 0;
    auto row = [&](int slot, int64_t r) { return static_cast<int64_t>(id[slot]) * d.D + r; };
    Ahead<W, A> a, b;
    if (rows) {
        load_ahead<W, A>(down, row(0, n), lane, units, a);
        if (d.k > 1) load_ahead<W, A>(down, row(1, n), lane, units, b);
    }
    stage_rows<W, M>(hp, d.F, d.k, smem);
    if (!rows) return;
    float sa = 0.0f, sb = 0.0f, acc = 0.0f;
    for (;;) {
        int64_t nn = n, nc = c0 + 32 * A;
        int nj = j;
        if (nc >= units) {
            nc = 0;
            nj += 2;
            if (nj >= d.k) nj = 0, nn += stride;
        }
        const bool more = nn < d.D;
        Ahead<W, A> a2, b2;
        if (more) {
            load_ahead<W, A>(down, row(nj, nn), nc + lane, units, a2);
            if (nj + 1 < d.k) load_ahead<W, A>(down, row(nj + 1, nn), nc + lane, units, b2);
        }
        sa += sum_in<W, A, M>(a, c0 + lane, units, in_row<W, M>(smem, hp, d.F, j));
        if (j + 1 < d.k) sb += sum_in<W, A, M>(b, c0 + lane, units, in_row<W, M>(smem, hp, d.F, j + 1));
        if (nj != j || nn != n) {  // the slots' rows are done: their weighted share, per lane
            acc += wt[j] * sa + (j + 1 < d.k ? wt[j + 1] * sb : 0.0f);
            sa = sb = 0.0f;
        }
        if (nn != n) {
            acc = warp_sum(acc);
            if (lane == 0) reinterpret_cast<float*>(y + t * y_nb1)[n] = acc;
            acc = 0.0f;
        }
        if (!more) break;
        a = a2, b = b2, n = nn, j = nj, c0 = nc;
    }
}

// The staged mode for `rows` rows of n values of weight type T within
// max_smem bytes, and its shared bytes.
template <DType T>
std::pair<int, size_t> in_mode(int64_t n, int64_t rows, int max_smem) {
    const auto bytes = static_cast<size_t>(rows * (is_plain(T) ? n * 4 : q8_row_bytes(n)));
    if (bytes > static_cast<size_t>(max_smem)) return {kInGlobal, 0};
    return {is_plain(T) ? kInF32 : kInQ8, bytes};
}

// The expert launches of weight type T in its staged mode, or the global one.
template <DType T>
auto up_kernel(int m) {
    return m == kInGlobal ? k_moe_up<T, kInGlobal> : k_moe_up<T, is_plain(T) ? kInF32 : kInQ8>;
}
template <DType T>
auto down_kernel(int m) {
    return m == kInGlobal ? k_moe_down<T, kInGlobal> : k_moe_down<T, is_plain(T) ? kInF32 : kInQ8>;
}

bool weight_ok(const Tensor& w) {
    if (!is_device_weight_type(w.type) || w.ne[0] % 32 != 0 || w.ne[3] != 1) return false;
    if (is_plain(w.type)) return w.nb[0] == dtype_type_size(w.type) && w.nb[2] == w.nb[1] * static_cast<size_t>(w.ne[1]);
    return (w.storage_root()->flags & kTensorWeight) != 0 && w.view_src == nullptr;
}

}  // namespace

void init_moe_kernels(int max_smem) {
    for_each_weight([&]<DType T>() {
        raise_smem_limit(up_kernel<T>(kInQ8), max_smem);
        raise_smem_limit(down_kernel<T>(kInQ8), max_smem);
    });
}

bool accepts_moe_ffn(const Tensor& node) {
    const Tensor& x = *node.src[0];
    const MoeDims d = moe::dims_of(node);
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && node.type == DType::F32 &&
           node.nb[0] == sizeof(float) && d.E <= kMaxExperts && d.k <= kMaxUsed && weight_ok(*node.src[1]) &&
           weight_ok(*node.src[2]) && weight_ok(*node.src[3]) && weight_ok(*node.src[4]);
}

// The routing, then the per-pair path's hidden rows [P, F] f32; the
// prompt path's scratch when it may run (either may: a captured step takes
// the per-pair kernels).
void need_moe_ffn(const Tensor& node, int /*sm_count*/, WorkspaceNeeds& needs) {
    const MoeDims d = moe::dims_of(node);
    const auto P = static_cast<size_t>(d.pairs());
    needs.moe = std::max(needs.moe, moe::routing_bytes(d) + align256(P * static_cast<size_t>(d.F) * sizeof(float)));
    moe::need_prompt(node, d, needs);
}

void run_moe_ffn(const Ctx& ctx, const Tensor& node) {
    const MoeDims d = moe::dims_of(node);
    if (d.T == 0) return;
    const auto P = static_cast<size_t>(d.pairs());
    auto* base = static_cast<uint8_t*>(ctx.ws.moe);
    auto* ids = reinterpret_cast<int32_t*>(base);
    auto* weights = reinterpret_cast<float*>(base + align256(P * 4));
    auto* hidden = reinterpret_cast<float*>(base + moe::routing_bytes(d));
    const Tensor& x = *node.src[0];
    const uint8_t* xp = ptr<const uint8_t>(x);
    const WView router = weight_view(*node.src[1]), gate = weight_view(*node.src[2]), up = weight_view(*node.src[3]),
                down = weight_view(*node.src[4]);
    auto* logits = reinterpret_cast<float*>(base + 2 * align256(P * 4));
    dispatch_weight(node.src[1]->type, [&]<DType R>() {
        check(launch(ctx, k_moe_logits<R>, dim3(blocks_for(d.E * moe::route_slices(d), kLogitWarps), static_cast<unsigned>(d.T)),
                     dim3(kLogitWarps * 32), 0, xp, x.nb[1], router, d, logits),
              "k_moe_logits", node);
    });
    check(launch(ctx, k_moe_topk, dim3(static_cast<unsigned>(d.T)), dim3(kTopkThreads), 0,
                 static_cast<const float*>(logits), d, ids, weights),
          "k_moe_topk", node);
    if (moe::prompt_path(ctx, node)) {
        moe::run_prompt(ctx, node, d, ids, weights, base + moe::routing_bytes(d));
        return;
    }
    // A block per SM, split between the pairs (up) or the tokens (down):
    // no more blocks than SMs while there are fewer groups than SMs (a
    // second wave of 4 blocks doubled the up launch of Qwen3-30B-A3B's 8
    // pairs, 17 blocks each on 132 SMs).
    const auto per = [&](int64_t rows, int64_t groups) {
        const int64_t want = ctx.sm_count / groups, most = (rows + kStreamWarps - 1) / kStreamWarps;
        return static_cast<unsigned>(std::max<int64_t>(1, std::min(want, most)));
    };
    const dim3 block(kStreamThreads);
    dispatch_weight(node.src[2]->type, [&]<DType G>() {
        const auto [m, smem] = in_mode<G>(d.D, 1, ctx.max_smem);
        check(launch(ctx, up_kernel<G>(m), dim3(per(d.F, P), static_cast<unsigned>(P)), block, smem, xp, x.nb[1], gate,
                     up, d, static_cast<const int32_t*>(ids), hidden),
              "k_moe_up", node);
    });
    dispatch_weight(node.src[4]->type, [&]<DType W>() {
        const auto [m, smem] = in_mode<W>(d.F, d.k, ctx.max_smem);
        check(launch(ctx, down_kernel<W>(m), dim3(per(d.D, d.T), static_cast<unsigned>(d.T)), block, smem, down, d,
                     static_cast<const int32_t*>(ids), static_cast<const float*>(weights),
                     static_cast<const float*>(hidden), ptr<uint8_t>(node), node.nb[1]),
              "k_moe_down", node);
    });
}

}  // namespace lantern::cuda
