// Causal attention over the KV cache, f16 or Q8_0 (keys and values alike).
//
// Few tokens (decode): flash-decoding. A block takes one KV head, one or two
// of the query heads that share it (its loops are unrolled over them), one
// token and one split of the token's key range, so a long context is spread
// over many blocks. Keys are scored two threads per key (half a row each)
// into shared memory in tiles of 128, the softmax is kept online, and V rows
// are accumulated with the threads spread over dimension pairs; a tile's K
// and V loads are all in flight at once, the first tile's (for one token)
// before the grid wait.
// The launch has enough splits for the cache's capacity; a token uses only as
// many as give each split a tile of keys (read on the device, so a short
// context skips the partials). With several splits each block writes (max,
// sum, unnormalised output); the last block of a (token, head group) to
// finish combines them (an arrival counter, reset by that block), so decode
// needs no second launch.
//
// Many tokens (prompt): a tiled kernel. A block takes 32 queries of one head,
// four threads per query (each a quarter of the head's dimensions); K and V
// tiles of 32 cells are staged in shared memory as f32, scores of a tile are
// computed and masked per query (causal, window, sequence), and the tile is
// folded into an online softmax.
//
// A Q8_0 cache (blocks of an f16 scale and 32 signed bytes, 34 bytes, so
// rows are only 2-byte aligned) is read in 16-bit words: a decode thread
// keeps its half row's quants and scales where an f16 half row would be,
// and a V pair as its two quants beside its block's scale. Decoding scores
// keys by integer dot products (dp4a) against Q quantized the same way, in
// blocks of 32 with a float scale (as llama.cpp's quantized-cache kernels
// do): 8 dp4a a block where widening each quant took 32 conversions and 32
// FMAs. The one-token launch that also rotates Q and K and writes both
// cache rows quantizes those rows as the unfused RoPE + cache write does
// (full rotary) and reads the token's own row from shared memory in the
// same words.
//
// Positions and sequence ids are read on the device: the same launch serves
// every decode step.
#include <algorithm>
#include <climits>
#include <cmath>

#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {
namespace {

constexpr int kDecodeMaxTokens = 8;
// Query heads per decode block, at most. More blocks with fewer heads each
// shorten a block's serial work; on the H100 (tg128, GPU time per step) a
// cap of 2 beat 8 by 16 us (smollm2, 3 heads per KV head) and 34 us
// (tinyllama, 8), and 1 by 3-6 us.
constexpr int kMaxGroup = 2;
constexpr int kTile = 128;        // keys per decode tile
constexpr int kThreads = 128;     // prompt kernel
constexpr int kDecThreads = 256;  // decode kernel: two threads per key of a tile

struct AttnParams {
    const float* q;
    int64_t q_nb1, q_nb2;  // floats between heads, tokens
    const __half* k;
    const __half* v;
    int64_t kv_row;        // halves per cache row (Q8_0: bytes)
    int64_t n_cells;
    const int32_t* pos;
    const int32_t* seq;
    float* out;
    int64_t out_nb1;       // floats per token
    int n_head, n_kv, group, n_ctx, T;
    float scale, softcap;
    int window;
    int n_splits, hblocks;
    float* partial;
    int* counters;
    // Fused RopeQK + the two KvStores before this attention (one token; q
    // null: not fused). The kernel reads the unrotated rows, rotates them,
    // writes the RopeQK output, and the block whose split holds the token's
    // own position writes its KV head's new K and V cache rows before it
    // reads them.
    struct Rope {
        const float* q;    // unrotated Q heads, token 0
        const float* k;    // unrotated K heads
        const float* v;    // the V row (f32)
        int64_t q_nb1, k_nb1;  // floats between heads
        float* dst;        // RopeQK output: Q heads, then K heads
        int64_t dst_nb1;
        int n_rot;
        bool neox;
        double attn_factor;
        const float* factors;
        // scale * base^(-2j / n_rot), from the host (the CPU's expression):
        // a kernel's own double pow would cost microseconds on one warp.
        double inv_freq[64];
    } rope;
};

struct KeyRange {
    int64_t base;  // first cell of the token's sequence
    int lo, hi;    // positions, inclusive
    bool valid;
};

__device__ __forceinline__ KeyRange key_range(const AttnParams& p, int t) {
    KeyRange r;
    const int pp = min(max(p.pos[t], 0), p.n_ctx - 1);
    r.hi = pp;
    r.lo = p.window > 0 ? max(0, pp - p.window + 1) : 0;
    r.base = static_cast<int64_t>(p.seq[t]) * p.n_ctx;
    r.valid = r.base >= 0 && r.base + p.n_ctx <= p.n_cells;
    return r;
}

__device__ __forceinline__ void half8_to_float(const uint4 raw, float (&f)[8]) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 v = __half22float2(h[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}

constexpr int kQ8Bytes = 34;  // a Q8_0 block: f16 scale, 32 quants

__device__ __forceinline__ float half_bits_to_float(uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// Values [e, e + 8) of a Q8_0 row (e a multiple of 8) as floats.
__device__ __forceinline__ void q8_8_to_float(const uint8_t* row, int e, float (&f)[8]) {
    const uint8_t* blk = row + (e >> 5) * kQ8Bytes;
    const auto* w = reinterpret_cast<const unsigned short*>(blk);  // 2-byte aligned
    const float d = half_bits_to_float(__ldg(w));
    const int at = 1 + ((e & 31) >> 1);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned short two = __ldg(w + at + i);
        f[2 * i] = static_cast<float>(static_cast<int8_t>(two & 0xFF)) * d;
        f[2 * i + 1] = static_cast<float>(static_cast<int8_t>(two >> 8)) * d;
    }
}

// Element indices of rotated pair j (j < n_rot / 2) or passed-through pair.
__device__ __forceinline__ int2 pair_index(int j, int n_rot, bool neox) {
    const int half_rot = n_rot / 2;
    if (j >= half_rot) return make_int2(n_rot + 2 * (j - half_rot), n_rot + 2 * (j - half_rot) + 1);
    return neox ? make_int2(j, j + half_rot) : make_int2(2 * j, 2 * j + 1);
}

// The fused prologue (Rope: one token): rope_angle before the grid wait,
// rope_load (this thread's loads of the unrotated rows, an earlier kernel's
// output) right after it, then rope_apply. Thread tid takes Q pairs tid,
// tid + kDecThreads, ... of the block's heads and K/V pair tid (tid < HD / 2);
// all of them are dimension pair tid % (HD / 2), so one angle per thread and
// no shared table.
template <int HD, int G>
struct RopeRegs {
    static constexpr int kQ = (G * (HD / 2) + kDecThreads - 1) / kDecThreads;  // Q pairs per thread at most
    float2 q[kQ];
    float2 k, v;
};

template <int HD, int G>
__device__ __forceinline__ RopeRegs<HD, G> rope_load(const AttnParams& p, int kvh, int h0, int ng) {
    const AttnParams::Rope& r = p.rope;
    const int tid = threadIdx.x;
    const int2 ix = pair_index(tid % (HD / 2), r.n_rot, r.neox);
    RopeRegs<HD, G> o{};
#pragma unroll
    for (int u = 0; u < RopeRegs<HD, G>::kQ; ++u) {
        const int w = tid + u * kDecThreads;
        if (w < ng * (HD / 2)) {
            const float* x = r.q + (h0 + w / (HD / 2)) * r.q_nb1;
            o.q[u] = make_float2(x[ix.x], x[ix.y]);
        }
    }
    if (tid < HD / 2) {
        const float* x = r.k + kvh * r.k_nb1;
        o.k = make_float2(x[ix.x], x[ix.y]);
        o.v = make_float2(r.v[kvh * HD + ix.x], r.v[kvh * HD + ix.y]);
    }
    return o;
}

// This thread's rotation (pair tid % (HD / 2)) at the token's position: a
// step input, so it is computed before the grid wait.
template <int HD>
__device__ __forceinline__ float2 rope_angle(const AttnParams& p) {
    const AttnParams::Rope& r = p.rope;
    const int j = threadIdx.x % (HD / 2);
    if (j >= r.n_rot / 2) return make_float2(1.0f, 0.0f);  // dimensions past n_rot pass through
    double f = r.inv_freq[j];
    if (r.factors != nullptr) f /= static_cast<double>(r.factors[j]);
    // The angle in double (positions reach 1e5 and more), reduced to one
    // turn, then single-precision sincos: within a few 1e-8 of the CPU.
    double a = static_cast<double>(p.pos[0]) * f;
    a -= 6.283185307179586 * rint(a * 0.15915494309189535);
    float sf, cf;
    sincosf(static_cast<float>(a), &sf, &cf);
    const float af = static_cast<float>(r.attn_factor);
    return make_float2(cf * af, sf * af);
}

// Q8: the cache rows are written as Q8_0 blocks, quantized across the
// threads holding a block (full rotary, as the unfused RopeStore: NeoX
// pairs' halves are blocks of a warp, interleaved pairs of a half warp),
// and kept in kown/vown (blocks as in the cache) for this block's reads.
template <int HD, int G, bool Q8>
__device__ void rope_apply(const AttnParams& p, const RopeRegs<HD, G>& in, float2 angle, float (&qs)[G][HD],
                           __half (&knew)[HD], __half (&vnew)[HD], uint8_t* kown, uint8_t* vown, int kvh, int h0,
                           int ng, bool first, bool owner) {
    const AttnParams::Rope& r = p.rope;
    const int tid = threadIdx.x;
    const int2 ix = pair_index(tid % (HD / 2), r.n_rot, r.neox);
    const int32_t pos = p.pos[0];
    // Read before the stores below: they might alias it for all the compiler
    // knows, and after them it was an L2 round trip before the barrier.
    const int64_t cell = static_cast<int64_t>(p.seq[0]) * p.n_ctx + pos;
    const float cs = angle.x, sn = angle.y;
    auto rotate = [&](float2 x) { return make_float2(x.x * cs - x.y * sn, x.x * sn + x.y * cs); };
#pragma unroll
    for (int u = 0; u < RopeRegs<HD, G>::kQ; ++u) {
        const int w = tid + u * kDecThreads;
        if (w >= ng * (HD / 2)) break;
        const int g = w / (HD / 2);
        const float2 y = rotate(in.q[u]);
        qs[g][ix.x] = y.x;
        qs[g][ix.y] = y.y;
        if (first) {
            float* d = r.dst + (h0 + g) * r.dst_nb1;
            d[ix.x] = y.x;
            d[ix.y] = y.y;
        }
    }
    if (!owner || tid >= HD / 2) return;
    const float2 y = rotate(in.k);
    float* d = r.dst + (p.n_head + kvh) * r.dst_nb1;
    d[ix.x] = y.x;
    d[ix.y] = y.y;
    if constexpr (Q8) {
        // Whole warps (tid < HD / 2, `owner` block-wide) take part in the reductions.
        const bool in_cell = pos >= 0 && pos < p.n_ctx && cell >= 0 && cell < p.n_cells;
        const int64_t at = cell * p.kv_row + kvh * HD / 32 * kQ8Bytes;
        uint8_t* kg = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(p.k)) + at;
        uint8_t* vg = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(p.v)) + at;
        auto put = [&](uint8_t* own, uint8_t* row, int i, float x, float amax) {
            const int b = (i >> 5) * kQ8Bytes;
            q8_put(own + b, i & 31, x, amax);
            if (in_cell) q8_put(row + b, i & 31, x, amax);
        };
        float k0, k1, v0, v1;
        if (r.neox) {
            k0 = group_max(fabsf(y.x), 0xFFFFFFFFu, 32);
            k1 = group_max(fabsf(y.y), 0xFFFFFFFFu, 32);
            v0 = group_max(fabsf(in.v.x), 0xFFFFFFFFu, 32);
            v1 = group_max(fabsf(in.v.y), 0xFFFFFFFFu, 32);
        } else {
            const unsigned mask = 0xFFFFu << (tid & 16);
            k0 = k1 = group_max(fmaxf(fabsf(y.x), fabsf(y.y)), mask, 16);
            v0 = v1 = group_max(fmaxf(fabsf(in.v.x), fabsf(in.v.y)), mask, 16);
        }
        put(kown, kg, ix.x, y.x, k0);
        put(kown, kg, ix.y, y.y, k1);
        put(vown, vg, ix.x, in.v.x, v0);
        put(vown, vg, ix.y, in.v.y, v1);
        return;
    }
    knew[ix.x] = __float2half_rn(y.x);
    knew[ix.y] = __float2half_rn(y.y);
    vnew[ix.x] = __float2half_rn(in.v.x);
    vnew[ix.y] = __float2half_rn(in.v.y);
    // Same cell test as the unfused KvStore.
    if (pos >= 0 && pos < p.n_ctx && cell >= 0 && cell < p.n_cells) {
        __half* kr = const_cast<__half*>(p.k) + cell * p.kv_row + kvh * HD;
        kr[ix.x] = knew[ix.x];
        kr[ix.y] = knew[ix.y];
        __half* vr = const_cast<__half*>(p.v) + cell * p.kv_row + kvh * HD;
        vr[ix.x] = vnew[ix.x];
        vr[ix.y] = vnew[ix.y];
    }
}

template <int HD, int G, bool Rope, bool Q8>
__global__ void __launch_bounds__(kDecThreads, Q8 ? 3 : 2) k_attn_decode(const AttnParams p) {
    constexpr int DP = HD / 2;             // dimension pairs
    constexpr int NSL = kDecThreads / DP;  // key slices of the V phase
    constexpr int KV = kTile / NSL;        // V rows per thread and tile
    __shared__ __align__(16) float qs[G][HD];
    __shared__ float sc[G][kTile];
    __shared__ float st_m[G], st_l[G], st_a[G];
    __shared__ float red[NSL][G][HD];
    __shared__ __align__(16) __half knew[HD], vnew[HD];  // Rope: the token's own K and V rows
    __shared__ __align__(16) uint8_t kown[Q8 ? HD / 32 * kQ8Bytes : 1], vown[Q8 ? HD / 32 * kQ8Bytes : 1];  // as Q8_0
    __shared__ __align__(16) int8_t qi[G][Q8 ? HD : 16];  // Q8: Q's quants
    __shared__ float qd[G][Q8 ? HD / 32 : 1];              // and their scales
    __shared__ int is_last;

    const int tid = threadIdx.x;
    const int kvh = blockIdx.x / p.hblocks, hb = blockIdx.x % p.hblocks;
    const int h0 = kvh * p.group + hb * G;
    const int ng = min(G, p.group - hb * G);
    const int t = blockIdx.y, split = blockIdx.z;
    const int dp = tid % DP, sl = tid / DP;
    const int warp = tid >> 5, lane = tid & 31;
    // The launch has splits for the longest context; a shorter one uses only
    // as many as give each at least a tile of keys (one: no partials).
    KeyRange kr{};
    int ns = 1, jb = 0, je = 0;
    auto plan = [&] {
        kr = key_range(p, t);
        const int len = kr.hi - kr.lo + 1;
        ns = max(1, min(p.n_splits, (len + kTile - 1) / kTile));
        const int chunk = (len + ns - 1) / ns;
        jb = kr.lo + split * chunk;
        je = min(kr.hi + 1, jb + chunk);
    };
    // A tile's K rows (threads 2k and 2k + 1: key j0 + k, a half row each)
    // and V pairs (thread (dp, sl): keys j0 + sl + NSL u), all in flight at
    // once (the first tile's before the grid wait, the others' before the
    // scores); the row `skip` is left out (the token's own, taken from
    // shared memory). ~115-125 registers with the 128-wide head: a block
    // still leaves room for a matrix-vector block on its SM. Q8_0 (72-80
    // registers, a few bytes spilled with 128-wide heads in pairs) fits
    // three blocks on an SM: the loop is latency-bound, and the third block
    // took llama2-7b's one-token launch at depth 4,096 from 72 to 50 us (H200).
    constexpr int KC = HD / 16;  // 16-byte chunks of a half row
    // Q8_0: kraw's first HD / 8 words hold the half row's quants, the next
    // HD / 64 its blocks' scales (f16 bits).
    constexpr int QW = HD / 8, NB = HD / 64;
    constexpr int KR = Q8 ? (QW + NB + 3) / 4 : KC;  // kraw's 16-byte words
    const int kk = tid >> 1, kh = tid & 1;
    uint4 kraw[KR];
    __half2 vv[KV];
    // Q8: the half row's blocks at `half_row` (the cache, or kown) into kraw.
    // A block is 4-byte aligned or 2 past it: nine 32-bit loads (the last a
    // 16-bit one, so as not to read past the block) either way.
    auto q8_half = [&](const uint8_t* half_row) {
        uint32_t* raw = reinterpret_cast<uint32_t*>(kraw);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const uint8_t* blk = half_row + b * kQ8Bytes;
            if ((reinterpret_cast<uintptr_t>(blk) & 2) == 0) {
                const uint32_t* w = reinterpret_cast<const uint32_t*>(blk);
                uint32_t x[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) x[i] = w[i];
                const uint32_t tail = reinterpret_cast<const unsigned short*>(blk)[16];
                raw[QW + b] = x[0] & 0xFFFFu;
#pragma unroll
                for (int i = 0; i < 7; ++i) raw[b * 8 + i] = __funnelshift_r(x[i], x[i + 1], 16);
                raw[b * 8 + 7] = __funnelshift_r(x[7], tail, 16);
            } else {
                const uint32_t* w = reinterpret_cast<const uint32_t*>(blk - 2);
                raw[QW + b] = w[0] >> 16;
#pragma unroll
                for (int i = 0; i < 8; ++i) raw[b * 8 + i] = w[1 + i];
            }
        }
    };
    // Q8 rows are loaded whole, the token's own too (replaced after).
    auto load_k = [&](int j0, int n, int skip) {
        if constexpr (Q8) {
            if (kk < n) {
                q8_half(reinterpret_cast<const uint8_t*>(p.k) + (kr.base + j0 + kk) * p.kv_row +
                        (kvh * HD + kh * (HD / 2)) / 32 * kQ8Bytes);
            }
            return;
        }
        if (kk < n && j0 + kk != skip) {
            const uint4* krow =
                reinterpret_cast<const uint4*>(p.k + (kr.base + j0 + kk) * p.kv_row + kvh * HD) + kh * KC;
#pragma unroll
            for (int c = 0; c < KR; ++c) kraw[c] = krow[c];
        }
    };
    // One opaque base for all of them: with the address rebuilt from the row
    // index for each of the 32 loads, they took ~560 instructions per thread
    // (128-wide heads), most of a short context's work. __ldcg: the opaque
    // pointer is generic to the compiler, and an L2 load is coherent.
    auto load_v = [&](int j0, int n, int skip) {
        if constexpr (Q8) {
            // Pair dp's two quants and its block's scale, in one word.
            const uint8_t* base = reinterpret_cast<const uint8_t*>(p.v) + (kr.base + j0 + sl) * p.kv_row +
                                  (kvh * HD + 2 * dp) / 32 * kQ8Bytes;
            const int at = 1 + ((2 * dp) & 31) / 2;
#pragma unroll
            for (int u = 0; u < KV; ++u) {
                const int j = sl + u * NSL;
                uint32_t word = 0;
                if (j < n) {
                    const auto* w = reinterpret_cast<const unsigned short*>(base + u * NSL * p.kv_row);
                    word = __ldcg(w + at) | static_cast<uint32_t>(__ldcg(w)) << 16;
                }
                vv[u] = *reinterpret_cast<const __half2*>(&word);
            }
            return;
        }
        const __half2* vb = opaque(reinterpret_cast<const __half2*>(p.v + (kr.base + j0 + sl) * p.kv_row + kvh * HD) + dp);
        const int64_t stride = NSL * p.kv_row / 2;  // half2s between its keys
#pragma unroll
        for (int u = 0; u < KV; ++u) {
            const int j = sl + u * NSL;
            vv[u] = j < n && j0 + j != skip ? __ldcg(vb + u * stride) : __floats2half2_rn(0.0f, 0.0f);
        }
    };
    // Rope (one token): every cache row but the token's own was written by an
    // earlier step, so the first tile's K and V rows are loaded before the
    // grid wait, while the previous kernel finishes (positions and sequences
    // are step inputs, copied before the step's first kernel).
    float2 angle{};
    if constexpr (Rope) {
        angle = rope_angle<HD>(p);
        plan();
        if (split < ns && kr.valid) {
            load_k(jb, min(kTile, je - jb), kr.hi);
            load_v(jb, min(kTile, je - jb), kr.hi);
        }
    }
    pdl_enter();
    RopeRegs<HD, G> rope_in{};
    if constexpr (Rope) {
        rope_in = rope_load<HD, G>(p, kvh, h0, ng);
    } else {
        plan();
    }
    if (split >= ns) return;

    if constexpr (Rope) {
        // Every block whose split holds the position writes its KV head's new
        // rows (blocks of other query heads of that KV head too: the same
        // values), and keeps them in shared memory for its own reads.
        rope_apply<HD, G, Q8>(p, rope_in, angle, qs, knew, vnew, kown, vown, kvh, h0, ng, split == 0,
                              jb <= kr.hi && kr.hi < je);
        for (int i = tid; i < (G - ng) * HD; i += kDecThreads) qs[ng + i / HD][i % HD] = 0.0f;
    } else {
        for (int i = tid; i < G * HD; i += kDecThreads) {
            const int g = i / HD, d = i % HD;
            qs[g][d] = g < ng ? p.q[(h0 + g) * p.q_nb1 + t * p.q_nb2 + d] : 0.0f;
        }
    }
    if (tid < G) {
        st_m[tid] = -INFINITY;
        st_l[tid] = 0.0f;
    }
    float acc[G][2];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = 0.0f;
    // Orders the prologue's shared-memory writes (Q, the token's own K and V
    // rows) before the reads below. Cache rows are read with plain loads, not
    // the read-only path: the unfused KvStore wrote them in this step.
    __syncthreads();
    if constexpr (Q8) {
        // Q in blocks of 32 as 8-bit quants and a float scale, for the keys'
        // integer dot products: a warp a block.
        for (int blk = warp; blk < G * (HD / 32); blk += kDecThreads / 32) {
            const int g = blk / (HD / 32), d = (blk % (HD / 32)) * 32 + lane;
            const float x = qs[g][d];
            const float amax = warp_max(fabsf(x));
            const float scale = amax / 127.0f;
            qi[g][d] = static_cast<int8_t>(amax > 0.0f ? __float2int_rn(x * (127.0f / amax)) : 0);
            if (lane == 0) qd[g][d / 32] = scale;
        }
        __syncthreads();
    }

    if (kr.valid) {
        for (int j0 = jb; j0 < je; j0 += kTile) {
            const int n = min(kTile, je - j0);
            const int own = Rope ? kr.hi : -1;
            const bool held = Rope && j0 == jb;  // loaded before the grid wait
            if (!held) {
                load_k(j0, n, own);
                load_v(j0, n, own);
            }
            if (Rope && kk < n && j0 + kk == own) {
                if constexpr (Q8) {
                    q8_half(kown + kh * (HD / 2) / 32 * kQ8Bytes);
                } else {
#pragma unroll
                    for (int c = 0; c < KR; ++c) kraw[c] = reinterpret_cast<const uint4*>(knew)[kh * KC + c];
                }
            }
            {
                // Both threads of a key take part in the shuffle, in range or not.
                float dot[G];
#pragma unroll
                for (int g = 0; g < G; ++g) dot[g] = 0.0f;
                if (Q8 && kk < n) {
                    // Integer dot products of the block's quants with Q's
                    // (dp4a), then both scales once.
                    const uint32_t* raw = reinterpret_cast<const uint32_t*>(kraw);
#pragma unroll
                    for (int b = 0; b < NB; ++b) {
                        const int d = kh * (HD / 2) + b * 32;
                        const float sd = half_bits_to_float(raw[QW + b]);
#pragma unroll
                        for (int g = 0; g < G; ++g) {
                            if (g < ng) {
                                const int4 qa = *reinterpret_cast<const int4*>(&qi[g][d]);
                                const int4 qb = *reinterpret_cast<const int4*>(&qi[g][d + 16]);
                                int sum = __dp4a(static_cast<int>(raw[b * 8 + 0]), qa.x, 0);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 1]), qa.y, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 2]), qa.z, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 3]), qa.w, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 4]), qb.x, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 5]), qb.y, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 6]), qb.z, sum);
                                sum = __dp4a(static_cast<int>(raw[b * 8 + 7]), qb.w, sum);
                                dot[g] += static_cast<float>(sum) * sd * qd[g][d / 32];
                            }
                        }
                    }
                } else if (kk < n) {
#pragma unroll
                    for (int c = 0; c < KR; ++c) {
                        float kf[8];
                        half8_to_float(kraw[c], kf);
                        const int d = 8 * (kh * KC + c);
#pragma unroll
                        for (int g = 0; g < G; ++g) {
                            if (g < ng) {
                                const float4 qa = *reinterpret_cast<const float4*>(&qs[g][d]);
                                const float4 qb = *reinterpret_cast<const float4*>(&qs[g][d + 4]);
                                dot[g] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] +
                                          qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
                            }
                        }
                    }
                }
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], 1);
                    if (g < ng && kh == 0 && kk < n) {
                        float s = dot[g] * p.scale;
                        if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
                        sc[g][kk] = s;
                    }
                }
            }
            __syncthreads();
            for (int g = warp; g < ng; g += kDecThreads / 32) {
                float mx = -INFINITY;
                for (int j = lane; j < n; j += 32) mx = fmaxf(mx, sc[g][j]);
                mx = warp_max(mx);
                const float m_old = st_m[g], m_new = fmaxf(m_old, mx);
                float sum = 0.0f;
                for (int j = lane; j < n; j += 32) {
                    const float e = expf(sc[g][j] - m_new);
                    sc[g][j] = e;
                    sum += e;
                }
                sum = warp_sum(sum);
                if (lane == 0) {
                    const float a = expf(m_old - m_new);
                    st_a[g] = a;
                    st_l[g] = st_l[g] * a + sum;
                    st_m[g] = m_new;
                }
            }
            __syncthreads();
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (g < ng) {
                    acc[g][0] *= st_a[g];
                    acc[g][1] *= st_a[g];
                }
            }
            if constexpr (Rope) {
#pragma unroll
                for (int u = 0; u < KV; ++u) {
                    if (j0 + sl + u * NSL != own) continue;
                    if constexpr (Q8) {  // as load_v composes it: the pair's quants, the block's scale
                        const auto* w = reinterpret_cast<const unsigned short*>(vown + (2 * dp) / 32 * kQ8Bytes);
                        const uint32_t word = w[1 + ((2 * dp) & 31) / 2] | static_cast<uint32_t>(w[0]) << 16;
                        vv[u] = *reinterpret_cast<const __half2*>(&word);
                    } else {
                        vv[u] = reinterpret_cast<const __half2*>(vnew)[dp];
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < KV; ++u) {
                const int j = sl + u * NSL;
                if (j >= n) break;
                float2 vf;
                float vs = 1.0f;  // Q8_0: the block's scale, folded into the weight
                if constexpr (Q8) {
                    const uint32_t word = *reinterpret_cast<const uint32_t*>(&vv[u]);
                    vs = half_bits_to_float(word >> 16);
                    vf = make_float2(static_cast<float>(static_cast<int8_t>(word)),
                                     static_cast<float>(static_cast<int8_t>(word >> 8)));
                } else {
                    vf = __half22float2(vv[u]);
                }
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (g < ng) {
                        const float pj = Q8 ? sc[g][j] * vs : sc[g][j];
                        acc[g][0] += pj * vf.x;
                        acc[g][1] += pj * vf.y;
                    }
                }
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
        red[sl][g][2 * dp] = acc[g][0];
        red[sl][g][2 * dp + 1] = acc[g][1];
    }
    __syncthreads();

    float* out = p.out + t * p.out_nb1;
    if (ns == 1) {
        for (int i = tid; i < ng * HD; i += kDecThreads) {
            const int g = i / HD, d = i % HD;
            float o = 0.0f;
#pragma unroll
            for (int s = 0; s < NSL; ++s) o += red[s][g][d];
            const float l = st_l[g];
            out[(h0 + g) * HD + d] = (kr.valid && l > 0.0f) ? o / l : 0.0f;
        }
        return;
    }

    // Several splits: publish this split's part, the last block combines.
    constexpr int PS = HD + 2;
    for (int i = tid; i < ng * HD; i += kDecThreads) {
        const int g = i / HD, d = i % HD;
        float o = 0.0f;
#pragma unroll
        for (int s = 0; s < NSL; ++s) o += red[s][g][d];
        float* part = p.partial + ((static_cast<int64_t>(t) * p.n_head + h0 + g) * p.n_splits + split) * PS;
        part[2 + d] = o;
        if (d == 0) {
            part[0] = st_m[g];
            part[1] = st_l[g];
        }
    }
    __threadfence();
    __syncthreads();
    const int ci = t * gridDim.x + blockIdx.x;
    if (tid == 0) is_last = atomicAdd(&p.counters[ci], 1) == ns - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int i = tid; i < ng * HD; i += kDecThreads) {
        const int g = i / HD, d = i % HD;
        const float* ph = p.partial + (static_cast<int64_t>(t) * p.n_head + h0 + g) * p.n_splits * PS;
        float M = -INFINITY;
        for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(ph + s * PS));
        float L = 0.0f, O = 0.0f;
        for (int s = 0; s < ns; ++s) {
            const float ls = __ldcg(ph + s * PS + 1);
            if (ls > 0.0f) {
                const float w = expf(__ldcg(ph + s * PS) - M);
                L += ls * w;
                O += __ldcg(ph + s * PS + 2 + d) * w;
            }
        }
        out[(h0 + g) * HD + d] = (kr.valid && L > 0.0f) ? O / L : 0.0f;
    }
    if (tid == 0) p.counters[ci] = 0;
}

template <int HD, bool Q8>
__global__ void __launch_bounds__(kThreads) k_attn_prefill(const AttnParams p) {
    constexpr int BQ = 32, BK = 32, PARTS = 4, CH = HD / 16;
    __shared__ __align__(16) float ks[BK][HD];
    __shared__ __align__(16) float vs[BK][HD];
    __shared__ int s_min, s_max;

    pdl_enter();
    const int tid = threadIdx.x, qi = tid / PARTS, part = tid % PARTS;
    const int h = blockIdx.y, kvh = h / p.group;
    const int t = blockIdx.x * BQ + qi;
    bool active = t < p.T;
    int c_lo = 0, c_hi = -1;
    if (active) {
        const KeyRange kr = key_range(p, t);
        active = kr.valid;
        c_lo = static_cast<int>(kr.base) + kr.lo;
        c_hi = static_cast<int>(kr.base) + kr.hi;
    }
    float4 q[CH], o[CH];
#pragma unroll
    for (int i = 0; i < CH; ++i) {
        o[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        q[i] = o[i];
        if (active) {
            const float* qp = p.q + h * p.q_nb1 + t * p.q_nb2 + 4 * (part + 4 * i);
            q[i] = make_float4(qp[0] * p.scale, qp[1] * p.scale, qp[2] * p.scale, qp[3] * p.scale);
        }
    }
    float m = -INFINITY, l = 0.0f;
    if (tid == 0) {
        s_min = INT_MAX;
        s_max = -1;
    }
    __syncthreads();
    if (active && part == 0) {
        atomicMin(&s_min, c_lo);
        atomicMax(&s_max, c_hi);
    }
    __syncthreads();
    const int cmin = s_min, cmax = s_max;

    for (int c0 = cmin; c0 <= cmax; c0 += BK) {
        for (int i = tid; i < BK * HD / 8; i += kThreads) {
            const int j = i / (HD / 8), c = i % (HD / 8);
            const int cell = c0 + j;
            float kf[8], vf[8];
            if (cell <= cmax && Q8) {
                const int64_t off = cell * p.kv_row;
                q8_8_to_float(reinterpret_cast<const uint8_t*>(p.k) + off, kvh * HD + 8 * c, kf);
                q8_8_to_float(reinterpret_cast<const uint8_t*>(p.v) + off, kvh * HD + 8 * c, vf);
            } else if (cell <= cmax) {
                const int64_t off = cell * p.kv_row + kvh * HD + 8 * c;
                half8_to_float(__ldg(reinterpret_cast<const uint4*>(p.k + off)), kf);
                half8_to_float(__ldg(reinterpret_cast<const uint4*>(p.v + off)), vf);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) kf[e] = vf[e] = 0.0f;
            }
            float4* kd = reinterpret_cast<float4*>(&ks[j][8 * c]);
            float4* vd = reinterpret_cast<float4*>(&vs[j][8 * c]);
            kd[0] = make_float4(kf[0], kf[1], kf[2], kf[3]);
            kd[1] = make_float4(kf[4], kf[5], kf[6], kf[7]);
            vd[0] = make_float4(vf[0], vf[1], vf[2], vf[3]);
            vd[1] = make_float4(vf[4], vf[5], vf[6], vf[7]);
        }
        __syncthreads();
        float s[BK];
#pragma unroll
        for (int j = 0; j < BK; ++j) {
            float d = 0.0f;
#pragma unroll
            for (int i = 0; i < CH; ++i) {
                const float4 kk = *reinterpret_cast<const float4*>(&ks[j][4 * (part + 4 * i)]);
                d += q[i].x * kk.x + q[i].y * kk.y + q[i].z * kk.z + q[i].w * kk.w;
            }
            d += __shfl_xor_sync(0xffffffffu, d, 1);
            d += __shfl_xor_sync(0xffffffffu, d, 2);
            if (p.softcap > 0.0f) d = p.softcap * tanhf(d / p.softcap);
            const int cell = c0 + j;
            s[j] = (active && cell >= c_lo && cell <= c_hi) ? d : -INFINITY;
        }
        float mt = m;
#pragma unroll
        for (int j = 0; j < BK; ++j) mt = fmaxf(mt, s[j]);
        if (mt > -INFINITY) {
            const float a = expf(m - mt);
            l *= a;
#pragma unroll
            for (int i = 0; i < CH; ++i) {
                o[i].x *= a;
                o[i].y *= a;
                o[i].z *= a;
                o[i].w *= a;
            }
#pragma unroll
            for (int j = 0; j < BK; ++j) {
                const float pj = expf(s[j] - mt);
                l += pj;
#pragma unroll
                for (int i = 0; i < CH; ++i) {
                    const float4 vv = *reinterpret_cast<const float4*>(&vs[j][4 * (part + 4 * i)]);
                    o[i].x += pj * vv.x;
                    o[i].y += pj * vv.y;
                    o[i].z += pj * vv.z;
                    o[i].w += pj * vv.w;
                }
            }
            m = mt;
        }
        __syncthreads();
    }
    if (t < p.T) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int i = 0; i < CH; ++i) {
            float* op = p.out + t * p.out_nb1 + h * HD + 4 * (part + 4 * i);
            op[0] = o[i].x * inv;
            op[1] = o[i].y * inv;
            op[2] = o[i].z * inv;
            op[3] = o[i].w * inv;
        }
    }
}

struct Shape {
    int hd, n_head, n_kv, group, T, n_ctx, hblocks, splits;
    int heads;  // query heads per decode block: the group, at most kMaxGroup
};

Shape shape_of(const Tensor& node, int sm_count) {
    Shape s;
    const Tensor& q = *node.src[0];
    s.hd = static_cast<int>(q.ne[0]);
    s.n_head = static_cast<int>(q.ne[1]);
    s.T = static_cast<int>(q.ne[2]);
    s.n_kv = node.param_i(0);
    s.n_ctx = node.param_i(1);
    s.group = s.n_head / s.n_kv;
    // The kernel's loops over a block's heads are unrolled: a block sized for
    // 8 heads ran the 7B's one head per KV head at ~11 us (ncu, H100).
    s.heads = std::min(s.group, kMaxGroup);
    s.hblocks = (s.group + s.heads - 1) / s.heads;
    s.splits = 1;
    if (s.T <= kDecodeMaxTokens) {
        const int base = s.n_kv * s.hblocks * s.T;
        const int want = (2 * sm_count + base - 1) / base;
        const int by_len = (s.n_ctx + kTile - 1) / kTile;
        s.splits = std::clamp(std::min(want, by_len), 1, 64);
    }
    return s;
}

}  // namespace

bool accepts_attention(const Tensor& node) {
    const Tensor& q = *node.src[0];
    const Tensor& k = *node.src[1];
    const Tensor& v = *node.src[2];
    const int64_t hd = q.ne[0];
    // f16 rows 16-byte aligned (read as uint4), or Q8_0 rows (2-byte words).
    const bool f16 = k.type == DType::F16 && v.type == DType::F16 && k.nb[0] == 2 && v.nb[0] == 2 && k.nb[1] % 16 == 0;
    const bool q8 = k.type == DType::Q8_0 && v.type == DType::Q8_0 && k.nb[1] % 2 == 0 &&
                    k.nb[1] == dtype_row_size(DType::Q8_0, k.ne[0]);
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && q.ne[3] == 1 && (hd == 64 || hd == 128) &&
           (f16 || q8) && k.nb[1] == v.nb[1] &&
           k.ne[1] == v.ne[1] && k.ne[1] < INT_MAX / 2 && k.nb[1] / 2 * kTile < INT_MAX && node.src[3]->type == DType::I32 &&
           node.src[4]->type == DType::I32 && node.type == DType::F32 && node.nb[0] == sizeof(float) &&
           q.nb[1] % sizeof(float) == 0 && q.nb[2] % sizeof(float) == 0;
}

void need_attention(const Tensor& node, int sm_count, WorkspaceNeeds& needs) {
    const Shape s = shape_of(node, sm_count);
    if (s.splits <= 1) return;
    const size_t part = static_cast<size_t>(s.T) * s.n_head * s.splits * (s.hd + 2) * sizeof(float);
    needs.attn_partial = std::max(needs.attn_partial, part);
    needs.attn_counters = std::max(needs.attn_counters, static_cast<size_t>(s.T) * s.n_kv * s.hblocks * sizeof(int));
}

namespace {

AttnParams params_of(const Ctx& ctx, const Tensor& node, const Shape& s) {
    const Tensor& q = *node.src[0];
    const Tensor& k = *node.src[1];
    AttnParams p{};
    p.q = ptr<const float>(q);
    p.q_nb1 = static_cast<int64_t>(q.nb[1] / sizeof(float));
    p.q_nb2 = static_cast<int64_t>(q.nb[2] / sizeof(float));
    p.k = ptr<const __half>(k);
    p.v = ptr<const __half>(*node.src[2]);
    p.kv_row = static_cast<int64_t>(k.type == DType::Q8_0 ? k.nb[1] : k.nb[1] / 2);
    p.n_cells = k.ne[1];
    p.pos = ptr<const int32_t>(*node.src[3]);
    p.seq = ptr<const int32_t>(*node.src[4]);
    p.out = ptr<float>(node);
    p.out_nb1 = static_cast<int64_t>(node.nb[1] / sizeof(float));
    p.n_head = s.n_head;
    p.n_kv = s.n_kv;
    p.group = s.group;
    p.n_ctx = s.n_ctx;
    p.T = s.T;
    p.scale = node.param_f(2);
    p.softcap = node.param_f(3);
    p.window = node.param_i(4);
    p.n_splits = s.splits;
    p.hblocks = s.hblocks;
    p.partial = ctx.ws.attn_partial;
    p.counters = ctx.ws.attn_counters;
    return p;
}

template <bool Rope, bool Q8>
void launch_decode(const Ctx& ctx, const AttnParams& p, const Shape& s, const Tensor& node) {
    const dim3 grid(static_cast<unsigned>(s.n_kv * s.hblocks), static_cast<unsigned>(s.T),
                    static_cast<unsigned>(s.splits));
    static_assert(kMaxGroup == 2, "instantiate k_attn_decode for each heads-per-block value");
    auto go = [&]<int HD>() {
        return s.heads == 1 ? launch(ctx, k_attn_decode<HD, 1, Rope, Q8>, grid, dim3(kDecThreads), 0, p)
                            : launch(ctx, k_attn_decode<HD, 2, Rope, Q8>, grid, dim3(kDecThreads), 0, p);
    };
    check(s.hd == 64 ? go.template operator()<64>() : go.template operator()<128>(), "k_attn_decode", node);
}


}  // namespace

void run_attention(const Ctx& ctx, const Tensor& node) {
    const Shape s = shape_of(node, ctx.sm_count);
    const AttnParams p = params_of(ctx, node, s);
    const bool q8 = node.src[1]->type == DType::Q8_0;
    if (s.T <= kDecodeMaxTokens) {
        if (q8) {
            launch_decode<false, true>(ctx, p, s, node);
        } else {
            launch_decode<false, false>(ctx, p, s, node);
        }
    } else {
        const dim3 grid(static_cast<unsigned>((s.T + 31) / 32), static_cast<unsigned>(s.n_head));
        auto go = [&]<int HD>() {
            return q8 ? launch(ctx, k_attn_prefill<HD, true>, grid, dim3(kThreads), 0, p)
                      : launch(ctx, k_attn_prefill<HD, false>, grid, dim3(kThreads), 0, p);
        };
        check(s.hd == 64 ? go.template operator()<64>() : go.template operator()<128>(), "k_attn_prefill", node);
    }
}

bool can_fuse_rope_store_attention(const Tensor& rope, const Tensor& ks, const Tensor& vs, const Tensor& attn) {
    if (attn.op != Op::Attention || !accepts_attention(attn) || !can_fuse_rope_store(rope, ks, vs)) return false;
    // f16 or Q8_0 rows, both caches alike (can_fuse_rope_store holds Q8_0 to full rotary).
    if (ks.src[1]->type != vs.src[1]->type || (ks.src[1]->type != DType::F16 && ks.src[1]->type != DType::Q8_0)) {
        return false;
    }
    const Tensor& q = *attn.src[0];
    const int64_t hd = rope.ne[0], n_q = rope.param_i(4);
    // One token (a multi-token step may read cells another block writes),
    // Q read as rope's Q heads, K and V through the stores just fused, the
    // same positions, sequences and context.
    return rope.ne[2] == 1 && q.ne[2] == 1 && q.ne[0] == hd && q.ne[1] == n_q && same_address(q, rope) &&
           q.nb[1] == rope.nb[1] && attn.src[1] == &ks && attn.src[2] == &vs && same_address(*ks.src[1], ks) &&
           same_address(*vs.src[1], vs) && same_address(*attn.src[3], *rope.src[2]) &&
           same_address(*attn.src[4], *ks.src[3]) && attn.param_i(1) == ks.param_i(0) &&
           ks.src[1]->nb[1] == vs.src[1]->nb[1] && vs.src[0]->ne[0] == ks.src[0]->ne[0] &&
           rope.src[0]->ne[0] == hd && rope.src[1]->ne[0] == hd && rope.param_i(0) <= hd;
}

void run_rope_store_attention(const Ctx& ctx, const Tensor& rope, const Tensor& /*ks*/, const Tensor& vs,
                              const Tensor& attn) {
    const Shape s = shape_of(attn, ctx.sm_count);
    AttnParams p = params_of(ctx, attn, s);
    AttnParams::Rope& r = p.rope;
    const Tensor& q = *rope.src[0];
    const Tensor& k = *rope.src[1];
    r.q = ptr<const float>(q);
    r.q_nb1 = static_cast<int64_t>(q.nb[1] / 4);
    r.k = ptr<const float>(k);
    r.k_nb1 = static_cast<int64_t>(k.nb[1] / 4);
    r.v = ptr<const float>(*vs.src[0]);
    r.dst = ptr<float>(rope);
    r.dst_nb1 = static_cast<int64_t>(rope.nb[1] / 4);
    const RopeSpec spec = rope_spec(rope);
    r.n_rot = spec.n_rot;
    r.neox = spec.neox;
    for (int j = 0; j < r.n_rot / 2; ++j) r.inv_freq[j] = spec.scale * std::pow(spec.base, -2.0 * j / r.n_rot);
    r.attn_factor = spec.attn_factor;
    r.factors = rope.src[3] != nullptr ? ptr<const float>(*rope.src[3]) : nullptr;
    if (attn.src[1]->type == DType::Q8_0) {
        launch_decode<true, true>(ctx, p, s, attn);
    } else {
        launch_decode<true, false>(ctx, p, s, attn);
    }
}

}  // namespace lantern::cuda
