// MulMat: dst[N, M] = W[K, N] x X[K, M].
//
// One token (M == 1): matrix-vector kernels. Each block first quantizes the
// activation row into shared memory (Q8 blocks of 32 with the CPU's exact
// rounding, so both backends see the same 8-bit activations), then its warps
// take weight rows. Up to three MulMats sharing an activation run in one
// launch (Q, K, V), and gate/up run as pairs that also write silu(gate) * up.
//
// Quantized weights go through the streamed kernel (k_matvec_q): lanes take
// 32-element blocks (qblocks.cuh decodes every type's device layout and
// accumulates with dp4a), each warp walks its rows in stages of about 128
// bytes per lane and issues the next stage's loads before it computes the
// current one (two stages in registers, up to 128 registers, 2 blocks per
// SM), and optionally asks L2 for a whole item's rows when it starts one.
// Offsets such as Q4_0's -8 are folded into the staged activation sums:
//     sum_i (q_i - 8) a_i = sum_i q_i a_i - 8 sum_i a_i,
// so raw quants go straight into dp4a. F32/F16/BF16 weights (and every type
// under LANTERN_CUDA_MATVEC=general) use the general kernel (k_matvec), which
// keeps the activations in f32 for the plain types.
//
// More tokens: the weight is dequantized to f16 (F16/BF16/F32 are used as
// they are), the activations converted, and cuBLAS multiplies on tensor cores.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda {
namespace {

constexpr int kMvWarps = 8;
constexpr int kMvThreads = kMvWarps * 32;
constexpr int kMvBlocksPerSM = 4;
constexpr int kRows = 2;           // rows a warp works on at once
constexpr int kStageBatch = 8;     // float4 loads in flight per thread while staging
constexpr int kMaxPrenormK = kMvThreads * 4 * kStageBatch;

struct MvParams {
    WView w[3];
    float* out[3];
    int64_t start[4];  // first row of each job in the joint row space
    int job_start[3];  // the same in 32 bits; INT_MAX for jobs that do not exist
    int n_jobs;
    const float* x;
    int64_t K;
    float* silu;        // paired mode: gate row r and up row r together; silu(g) * u here
    int64_t n_items;    // warp work items: row pairs (joint space), or rows (paired mode)
    int64_t total_rows;
    // Fused AddRmsNorm (a null: none): x = norm(a + b) * w; block 0 writes
    // the sum and the normed row to sum_out / norm_out.
    const float* a;
    const float* b;
    const float* nw;
    float eps;
    float* sum_out;
    float* norm_out;
};

// The activation row as a kernel reads it.
// Shared memory of a quantized row: q [K bytes], d [K/32 floats], s [K/16
// floats], isum [K/32 ints] (K % 32 == 0, so every array is 4-byte aligned).
struct Act {
    const int8_t* q;     // two planes: q[h * K/2 + 16b + i] = element 32b + 16h + i
    const float* d;      // scale per 32-block
    const float* s;      // d * sum of the quants, per 16-group
    const int* isum;     // sum of the quants, per 32-block
    int64_t half_k;
    const float* x;      // plain types: the f32 row
};

size_t mv_smem_bytes(DType t, int64_t K) {
    if (is_plain(t)) return static_cast<size_t>(K) * sizeof(float);
    return static_cast<size_t>(K) + static_cast<size_t>(K / 32) * 8 + static_cast<size_t>(K / 16) * 4;
}

__device__ __forceinline__ Act act_view(const uint8_t* smem, int64_t K) {
    Act a{};
    a.q = reinterpret_cast<const int8_t*>(smem);
    a.d = reinterpret_cast<const float*>(smem + K);
    a.s = a.d + K / 32;
    a.isum = reinterpret_cast<const int*>(a.s + K / 16);
    a.half_k = K / 2;
    return a;
}

__device__ __forceinline__ float4 as_float4(uint4 v) {
    return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}

__device__ __forceinline__ float4 load4(const float* p, int64_t i, bool vec) {
    if (vec) return reinterpret_cast<const float4*>(p)[i];
    return make_float4(p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]);
}

// A fused AddRmsNorm's weight is a model weight, not an earlier kernel's
// output: ask L1 for it before the grid wait, so the normalisation after
// the block reduction does not wait on a second memory round trip.
__device__ __forceinline__ void prefetch_norm_weight(const MvParams& p) {
    if (p.a == nullptr || p.nw == nullptr) return;
    const int64_t lines = (p.K * 4 + 127) / 128;
    for (int64_t i = threadIdx.x; i < lines; i += blockDim.x) {
        asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<const char*>(p.nw) + 128 * i));
    }
}

// Half a 32-block of the activation (16 values), held by one thread, its
// other half by the neighbouring lane; quantized as quantize_q8_0 does on
// the CPU: d = fp16(amax / 127), q = rint(clamp(x / d)) (x / d as x * (1/d)).
// The thread writes its plane's 16 bytes and its 16-group sum, the even lane
// the scale and the block's quant sum. Two lanes per block need one shuffle
// per reduction (a float4 per lane, as before, needed three, and staging was
// half of a launch's instructions: every block of a matrix-vector launch
// stages the row). Both lanes of a pair call this.
__device__ __forceinline__ void quant_half(const float (&x)[16], int64_t hb, bool valid, int64_t K, uint8_t* smem) {
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(x[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    const float dd = __half2float(__float2half_rn(amax / 127.0f));
    const float inv = dd != 0.0f ? 1.0f / dd : 0.0f;
    uint32_t w[4];
    int sh = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint32_t word = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int q = __float2int_rn(fminf(fmaxf(x[4 * j + k] * inv, -127.0f), 127.0f));
            sh += q;
            word |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * k);
        }
        w[j] = word;
    }
    const int sum32 = sh + __shfl_xor_sync(0xffffffffu, sh, 1);
    if (!valid) return;
    const int64_t b = hb >> 1;
    const int h = static_cast<int>(hb & 1);
    reinterpret_cast<uint4*>(smem + h * (K / 2))[b] = make_uint4(w[0], w[1], w[2], w[3]);
    float* d = reinterpret_cast<float*>(smem + K);
    float* s = d + K / 32;
    s[2 * b + h] = dd * static_cast<float>(sh);
    if (h == 0) {
        d[b] = dd;
        reinterpret_cast<int*>(s + K / 16)[b] = sum32;
    }
}

template <int N>
__device__ __forceinline__ void to_floats(float4 v, float (&x)[N], int at) {
    x[at] = v.x;
    x[at + 1] = v.y;
    x[at + 2] = v.z;
    x[at + 3] = v.w;
}

// The activation row quantized into shared memory, 16 values per thread
// and round; rounds are whole warps (a warp past the row skips them).
__device__ void stage_act_q8(const MvParams& p, uint8_t* smem, float* red) {
    const int64_t nh = p.K / 16;  // half-blocks
    const int tid = threadIdx.x;
    if (p.a == nullptr) {
        const bool vec = (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
        for (int64_t base = 0; base < nh; base += kMvThreads) {
            if (base + (tid & ~31) >= nh) break;  // warp-uniform
            const int64_t hb = base + tid;
            const bool valid = hb < nh;
            float x[16];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                to_floats(valid ? load4(p.x, 4 * hb + c, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), x, 4 * c);
            }
            quant_half(x, hb, valid, p.K, smem);
        }
        return;
    }
    // Fused AddRmsNorm: K <= kMaxPrenormK = 2 rounds, the row in registers.
    constexpr int kRounds = kMaxPrenormK / 16 / kMvThreads;
    float x[kRounds][16];
    float ss = 0.0f;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
        const int64_t hb = r * kMvThreads + tid;
        if (hb >= nh) continue;
        const float4* a = reinterpret_cast<const float4*>(p.a) + 4 * hb;
        const float4* b = reinterpret_cast<const float4*>(p.b) + 4 * hb;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float4 x0 = a[c], x1 = b[c];
            const float4 v = make_float4(x0.x + x1.x, x0.y + x1.y, x0.z + x1.z, x0.w + x1.w);
            to_floats(v, x[r], 4 * c);
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            if (blockIdx.x == 0) reinterpret_cast<float4*>(p.sum_out)[4 * hb + c] = v;
        }
    }
    ss = block_sum(ss, red);
    const float rn = 1.0f / sqrtf(ss / static_cast<float>(p.K) + p.eps);
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
        const int64_t hb = r * kMvThreads + tid;
        if (r * kMvThreads + (tid & ~31) >= nh) break;  // warp-uniform
        const bool valid = hb < nh;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            float4 w = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            if (valid && p.nw != nullptr) w = reinterpret_cast<const float4*>(p.nw)[4 * hb + c];
            const float4 y = make_float4(x[r][4 * c] * rn * w.x, x[r][4 * c + 1] * rn * w.y,
                                         x[r][4 * c + 2] * rn * w.z, x[r][4 * c + 3] * rn * w.w);
            to_floats(y, x[r], 4 * c);
            if (valid && blockIdx.x == 0) reinterpret_cast<float4*>(p.norm_out)[4 * hb + c] = y;
        }
        quant_half(x[r], hb, valid, p.K, smem);
    }
}

// The activation row into shared memory: quantized (stage_act_q8) for the
// quantized weight types, as f32 for the plain ones. All loads of a batch are
// issued before any is used (one round trip per batch).
template <bool Quant>
__device__ void stage_act(const MvParams& p, uint8_t* smem, float* red) {
    if constexpr (Quant) {
        stage_act_q8(p, smem, red);
        return;
    }
    auto put4 = [&](float4 v, int64_t i, bool valid) {
        if (valid) reinterpret_cast<float4*>(smem)[i] = v;
    };
    const int64_t nv = p.K / 4;
    const int tid = threadIdx.x;
    if (p.a == nullptr) {
        const bool vec = (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
        for (int64_t base = 0; base < nv; base += kMvThreads * kStageBatch) {
            float4 v[kStageBatch];
#pragma unroll
            for (int k = 0; k < kStageBatch; ++k) {
                const int64_t i = base + tid + k * kMvThreads;
                v[k] = i < nv ? load4(p.x, i, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int k = 0; k < kStageBatch; ++k) {
                const int64_t i = base + tid + k * kMvThreads;
                put4(v[k], i, i < nv);
            }
        }
        return;
    }
    // Fused AddRmsNorm: K <= kMaxPrenormK, so the row fits in registers.
    float4 v[kStageBatch];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
        const int64_t i = tid + k * kMvThreads;
        v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < nv) {
            const float4 x0 = reinterpret_cast<const float4*>(p.a)[i];
            const float4 x1 = reinterpret_cast<const float4*>(p.b)[i];
            v[k] = make_float4(x0.x + x1.x, x0.y + x1.y, x0.z + x1.z, x0.w + x1.w);
            ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
            if (blockIdx.x == 0) reinterpret_cast<float4*>(p.sum_out)[i] = v[k];
        }
    }
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(p.K) + p.eps);
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
        const int64_t i = tid + k * kMvThreads;
        const bool valid = i < nv;
        float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (valid) {
            const float4 w = p.nw != nullptr ? reinterpret_cast<const float4*>(p.nw)[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            y = make_float4(v[k].x * r * w.x, v[k].y * r * w.y, v[k].z * r * w.z, v[k].w * r * w.w);
            if (blockIdx.x == 0) reinterpret_cast<float4*>(p.norm_out)[i] = y;
        }
        put4(y, i, valid);
    }
}

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

__device__ __forceinline__ ActBlk act_blk(const Act& a, int64_t b) {
    ActBlk r;
    r.lo = *reinterpret_cast<const int4*>(a.q + 16 * b);
    r.hi = *reinterpret_cast<const int4*>(a.q + a.half_k + 16 * b);
    r.d = a.d[b];
    r.s0 = a.s[2 * b];
    r.s1 = a.s[2 * b + 1];
    r.isum = a.isum[b];
    return r;
}

// Co: coherent loads (before the grid wait: common.cuh).
template <DType T, bool Co = false>
__device__ __forceinline__ Raw<T> load_unit(const WView& w, int64_t row, int64_t u) {
    if constexpr (!is_plain(T)) {
        return qload<T, Co>(q_row(w, row), static_cast<size_t>(w.blocks), static_cast<size_t>(u));
    } else {
        PlainRaw r;
        const uint8_t* prow = w.data + static_cast<size_t>(row) * w.row_bytes;
        auto l128 = [](const uint8_t* p) { return Co ? ld_co_u128(p) : ld_u128(p); };
        if constexpr (T == DType::F32) {
            const float4 p0 = as_float4(l128(prow + 32 * u));
            const float4 p1 = as_float4(l128(prow + 32 * u + 16));
            r.v[0] = p0.x; r.v[1] = p0.y; r.v[2] = p0.z; r.v[3] = p0.w;
            r.v[4] = p1.x; r.v[5] = p1.y; r.v[6] = p1.z; r.v[7] = p1.w;
        } else {
            const uint4 p = l128(prow + 16 * u);
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

// Work item `item`, slot s (of kRows): which job and row, if any.
struct Slot {
    int job;
    int row;
    bool valid;
};

// 32-bit and branch-free: rows and items fit in int, and a warp computes
// this for every item it starts.
__device__ __forceinline__ Slot slot_of(const MvParams& p, int64_t item, int s) {
    Slot r;
    const int it = static_cast<int>(item);
    if (p.silu != nullptr) {
        r.job = s;
        r.row = it;
        r.valid = it < static_cast<int>(p.total_rows);
        return r;
    }
    const int jr = it * kRows + s;
    r.valid = jr < static_cast<int>(p.total_rows);
    r.job = (jr >= p.job_start[1] ? 1 : 0) + (jr >= p.job_start[2] ? 1 : 0);
    r.row = jr - p.job_start[r.job];
    return r;
}

// Loads units c0 + 32u (u < U) of both slots' rows.
template <DType T, bool Co = false>
__device__ __forceinline__ void load_chunk(const MvParams& p, const Slot (&sl)[kRows], int64_t c0, int64_t units,
                                           Raw<T> (&raw)[kRows][kUnroll<T>]) {
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
#pragma unroll
        for (int u = 0; u < kUnroll<T>; ++u) {
            const int64_t unit = c0 + 32 * u;
            if (sl[s].valid && unit < units) raw[s][u] = load_unit<T, Co>(p.w[sl[s].job], sl[s].row, unit);
        }
    }
}

template <DType T>
__global__ void __launch_bounds__(kMvThreads) k_matvec(const MvParams p) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float red[32];
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
    if (item < p.n_items) load_chunk<T, true>(p, sl, lane, units, raw);
    prefetch_norm_weight(p);

    pdl_enter();
    stage_act<!is_plain(T)>(p, smem, red);
    __syncthreads();
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
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = warp_sum(acc[s]);
        if (lane == 0) {
            if (p.silu != nullptr) {
                p.out[0][item] = acc[0];
                p.out[1][item] = acc[1];
                p.silu[item] = silu_f(acc[0]) * acc[1];
            } else {
#pragma unroll
                for (int s = 0; s < kRows; ++s) {
                    if (cur[s].valid) p.out[cur[s].job][cur[s].row] = acc[s];
                }
            }
        }
    }
}

template <DType T>
void launch_matvec(const Ctx& ctx, const MvParams& p, const Tensor& node) {
    const size_t smem = mv_smem_bytes(T, p.K);
    const int64_t groups = (p.n_items + kMvWarps - 1) / kMvWarps;
    const int64_t grid = std::min<int64_t>(groups, static_cast<int64_t>(ctx.sm_count) * kMvBlocksPerSM);
    check(launch(ctx, k_matvec<T>, dim3(static_cast<unsigned>(grid)), dim3(kMvThreads), smem, p), "k_matvec", node);
}

// --- quantized weights: the streamed kernel ----------------------------------
//
// A warp's work is a sequence of stages: item (a row pair, as above), then
// 32 * kQUnits blocks of each of its two rows, lane l taking blocks
// c + l + 32u. Each lane holds two stages of raw blocks; step() issues the
// loads of the next stage (possibly the next item's first) before it
// computes the current one, so a warp always has a stage in flight while it
// works, and finishes an item (warp sums, stores) with the next one's loads
// already issued. About 128 bytes per lane and stage: Q4_0/Q4_1 four 16-byte
// blocks per row, Q8_0 two blocks of two 16-byte planes per row. On the H100
// this beat 64 bytes with 3 blocks per SM by 4% (7B Q4_0), 9% (7B Q8_0) and
// 4% (tinyllama) in GPU time per decode step, and lost 2.5% on smollm2's
// 576-wide rows (2026-11-22). The other types take as many blocks per stage
// as keep a stage near 48 registers (two stages and the rest within 128).

constexpr int kQBlocksPerSM = 2;  // __launch_bounds__: at most 128 registers

template <DType T>
constexpr int kQUnits = T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q3_K || T == DType::Q2_K ? 4
                       : T == DType::Q8_0 || T == DType::Q6_K                               ? 2
                                                                                            : 3;

// Rows too short for a stage can share a warp: with W lanes per row pair
// (32, 16 or 8), a warp item is 32 / W row pairs, lane l taking pair l / W
// and, of its rows, blocks l % W + W u (lanes_per_pair below says when).
//
// The two rows of a lane's pair; q[s] null: slot s has no row (or no item).
struct QRows {
    QRow r[kRows];
};

__device__ __forceinline__ QRows q_rows(const MvParams& p, int pair) {
    QRows r;
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        const Slot sl = slot_of(p, pair, s);
        const WView& w = p.w[sl.job];
        const auto row = static_cast<uint32_t>(sl.row);
        r.r[s].q = sl.valid ? w.data + static_cast<size_t>(row) * static_cast<uint32_t>(w.row_bytes) : nullptr;
        r.r[s].m = w.meta + static_cast<size_t>(row) * static_cast<uint32_t>(w.meta_row_bytes);
    }
    return r;
}

// Asks L2 for the pair's rows (payload and meta), 128-byte lines spread
// over its W lanes (this one: j): later stages then wait on L2, not HBM.
template <int W>
__device__ __forceinline__ void q_prefetch(const MvParams& p, const QRows& r, int j) {
    const unsigned row_bytes = static_cast<unsigned>(p.w[0].row_bytes);  // every job: same K and type
    const unsigned meta_bytes = static_cast<unsigned>(p.w[0].meta_row_bytes);
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        if (r.r[s].q == nullptr) continue;
        for (unsigned off = static_cast<unsigned>(j) * 128; off < row_bytes; off += W * 128) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(r.r[s].q + off));
        }
        for (unsigned off = static_cast<unsigned>(j) * 128; off < meta_bytes; off += W * 128) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(r.r[s].m + off));
        }
    }
}

template <DType T, int W, int U, bool Co = false>
__device__ __forceinline__ void q_load(const QRows& r, int nb, int b0, QBlk (&o)[kRows][U]) {
    // A full stage of two rows (most stages) without a test per load: each
    // row and plane needs one address and the loads immediate offsets. It
    // pays for the types with four loads per block (H100 op bench, 4096 x
    // 11008: Q6_K 69 -> 80% of the copy, Q5_K 55 -> 67%, Q3_K 44 -> 57%;
    // tinyllama Q6_K decode step 717 -> 663 us); with two or three it cost
    // time (decode step: 7B Q4_0 and Q8_0 +1%, tinyllama Q4_K +2.6%).
    constexpr bool kFullPath = T == DType::Q3_K || T == DType::Q5_K || T == DType::Q6_K;
    if (kFullPath && r.r[0].q != nullptr && r.r[1].q != nullptr && b0 + W * (U - 1) < nb) {
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                o[s][u] = qload<T, Co>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(b0) + W * u);
            }
        }
        return;
    }
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (r.r[s].q == nullptr || b0 + W * u >= nb) continue;
            o[s][u] = qload<T, Co>(r.r[s], static_cast<size_t>(nb), static_cast<size_t>(b0) + W * u);
        }
    }
}

// Blocks b0 + W u of both rows into acc. The activation block is read once
// for both rows.
template <DType T, int W, int U>
__device__ __forceinline__ void q_dot(const QBlk (&w)[kRows][U], unsigned rows, const Act& a, int nb, int b0,
                                      float (&acc)[kRows]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int b = b0 + W * u;
        if (b >= nb) continue;
        const ActBlk ab = act_blk(a, b);
#pragma unroll
        for (int s = 0; s < kRows; ++s) {
            if (rows & (1u << s)) acc[s] += qdot<T>(w[s][u], ab);
        }
    }
}

// Sum over the W lanes of a group (aligned): every lane gets its group's.
template <int W>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Where a lane is: its warp item, the first block of the stage (j
// included), its pair's rows (bit s of `valid`: slot s has a row).
struct QPos {
    int item;
    int b0;
    unsigned valid;
    QRows rows;
};

__device__ __forceinline__ unsigned q_valid(const QRows& r) {
    return (r.r[0].q != nullptr ? 1u : 0u) | (r.r[1].q != nullptr ? 2u : 0u);
}

__device__ __forceinline__ void q_store(const MvParams& p, int pair, const float (&acc)[kRows]) {
    if (p.silu != nullptr) {
        if (pair >= static_cast<int>(p.total_rows)) return;
        p.out[0][pair] = acc[0];
        p.out[1][pair] = acc[1];
        p.silu[pair] = silu_f(acc[0]) * acc[1];
        return;
    }
#pragma unroll
    for (int s = 0; s < kRows; ++s) {
        const Slot sl = slot_of(p, pair, s);
        if (sl.valid) p.out[sl.job][sl.row] = acc[s];
    }
}

// One stage: computes `cur` (at pos) after issuing the loads of the next
// stage into `nxt`. False when the warp has no stage left (warp-uniform:
// a lane whose pair has no rows still takes part in the sums).
template <DType T, int W, int U, bool Prefetch>
__device__ __forceinline__ bool q_step(const MvParams& p, const Act& a, int nb, int step, int g, int j, QPos& pos,
                                       const QBlk (&cur)[kRows][U], QBlk (&nxt)[kRows][U], float (&acc)[kRows]) {
    constexpr int G = 32 / W;
    if (pos.item * G >= p.n_items) return false;
    QPos next = pos;
    next.b0 += W * U;
    const bool last = next.b0 >= nb + j;  // b0 includes j
    if (last) {
        next.item += step;
        next.b0 = j;
        next.rows = q_rows(p, next.item * G + g);
        next.valid = q_valid(next.rows);
        if constexpr (Prefetch) q_prefetch<W>(p, next.rows, j);
    }
    q_load<T, W, U>(next.rows, nb, next.b0, nxt);
    q_dot<T, W, U>(cur, pos.valid, a, nb, pos.b0, acc);
    if (last) {
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = group_sum<W>(acc[s]);
        if (j == 0 && pos.valid != 0) q_store(p, pos.item * G + g, acc);
#pragma unroll
        for (int s = 0; s < kRows; ++s) acc[s] = 0.0f;
    }
    pos = next;
    return true;
}

template <DType T, int W, int U, bool Prefetch>
__global__ void __launch_bounds__(kMvThreads, kQBlocksPerSM) k_matvec_q(const MvParams p) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float red[32];
    constexpr int G = 32 / W;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane / W, j = lane % W;
    const int nb = static_cast<int>(p.K / 32);
    const int step = static_cast<int>(gridDim.x) * kMvWarps;

    // The first item's weights do not depend on earlier kernels: ask L2 for
    // them while the previous kernel finishes and the activation is staged
    // (a prefetch holds no registers; staging needs them). Even when the
    // first stage below covers the whole item this pays: without it the 7B
    // Q4_0 decode step took 2.3% longer (H100, 2026-11-22).
    QPos pos;
    pos.item = static_cast<int>(blockIdx.x) * kMvWarps + warp;
    pos.b0 = j;
    pos.rows = q_rows(p, pos.item * G + g);
    pos.valid = q_valid(pos.rows);
    q_prefetch<W>(p, pos.rows, j);
    prefetch_norm_weight(p);
    // The first stage itself is loaded before the wait too: the registers
    // are free until the activation is staged, and the dot products after
    // the wait then start without a memory round trip. Coherent loads: ptxas
    // moves __ldg ones after the wait (until 2026-11-22 they were). Q8_0
    // keeps __ldg (so its loads still follow the wait): with coherent ones
    // its 7B decode step took 1.1% longer on two of three H100s (0.5% less
    // on the third), while tinyllama's Q4_0 and Q4_K steps took 6-9% and
    // the 7B Q4_0's 3% less.
    QBlk buf0[kRows][U], buf1[kRows][U];
    q_load<T, W, U, T != DType::Q8_0>(pos.rows, nb, pos.b0, buf0);

    pdl_enter();
    stage_act<true>(p, smem, red);
    __syncthreads();
    const Act a = act_view(smem, p.K);

    float acc[kRows] = {0.0f, 0.0f};
    while (q_step<T, W, U, Prefetch>(p, a, nb, step, g, j, pos, buf0, buf1, acc) &&
           q_step<T, W, U, Prefetch>(p, a, nb, step, g, j, pos, buf1, buf0, acc)) {
    }
}

// Lanes per row pair: 32, or narrower while the launch has more pairs than
// its warps can take at once and the narrower stage still covers a row. A
// launch that fits in one round keeps 32: there each warp's chain of
// loads and sums is the time, and more pairs per warp only lengthen it
// (H100, 2026-11-22: narrowing every launch of smollm2, 576-wide rows, cost
// 1.3% of its decode step; narrowing tinyllama's saved 1.8%).
template <DType T>
int lanes_per_pair(int64_t nb, int64_t pairs, int64_t warps) {
    int w = 32;
    while (w > 8 && pairs * w / 32 > warps && (w / 2) * kQUnits<T> >= nb) w /= 2;
    return w;
}

// Blocks per lane and stage for a launch with lanes_per_pair W: the type's
// kQUnits, or fewer when a row has few blocks (with W = 32: 1 for up to 32
// blocks, 2 for up to 64). The stage's unrolled loads and sums then hold
// no predicated-off units: smollm2's 576-wide rows (18 blocks) used one of
// four, and a small launch's time is its warps' instruction chain.
template <DType T>
int units_per_stage(int64_t nb, int W) {
    if (W == 32 && nb <= 32 && kQUnits<T> > 1) return 1;
    if (W == 32 && nb <= 64 && kQUnits<T> > 2) return 2;
    return kQUnits<T>;
}

template <DType T>
void launch_matvec_q(const Ctx& ctx, const MvParams& p, const Tensor& node) {
    const size_t smem = mv_smem_bytes(T, p.K);
    const int64_t warps = static_cast<int64_t>(ctx.sm_count) * kQBlocksPerSM * kMvWarps;
    const bool pf = ctx.matvec == MatVecKernel::StreamedPrefetch;
    const int W = pf ? 32 : lanes_per_pair<T>(p.K / 32, p.n_items, warps);
    const int U = pf ? kQUnits<T> : units_per_stage<T>(p.K / 32, W);
    const int64_t items = (p.n_items + 32 / W - 1) / (32 / W);  // warp items
    const int64_t groups = (items + kMvWarps - 1) / kMvWarps;
    const int64_t grid = std::min<int64_t>(groups, static_cast<int64_t>(ctx.sm_count) * kQBlocksPerSM);
    auto go = [&](auto kernel) {
        check(launch(ctx, kernel, dim3(static_cast<unsigned>(grid)), dim3(kMvThreads), smem, p), "k_matvec_q", node);
    };
    constexpr int D = kQUnits<T>;
    if (pf) {
        go(k_matvec_q<T, 32, D, true>);
    } else if (W == 8) {
        go(k_matvec_q<T, 8, D, false>);
    } else if (W == 16) {
        go(k_matvec_q<T, 16, D, false>);
    } else if (U == 1) {
        go(k_matvec_q<T, 32, 1, false>);
    } else if (U == 2 && D > 2) {
        go(k_matvec_q<T, 32, std::min(2, D), false>);
    } else {
        go(k_matvec_q<T, 32, D, false>);
    }
}

template <class Fn>
void dispatch_weight(DType t, Fn&& fn) {
    switch (t) {
        case DType::F32: fn.template operator()<DType::F32>(); break;
        case DType::F16: fn.template operator()<DType::F16>(); break;
        case DType::BF16: fn.template operator()<DType::BF16>(); break;
        default: dispatch_quant(t, fn);
    }
}

// --- prompt path: dequantize + cuBLAS ----------------------------------------

template <DType T>
__global__ void k_dequant_f16(const WView w, int64_t N, __half* __restrict__ out) {
    pdl_enter();
    const int64_t groups = w.K / 16;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= N * groups) return;
    const int64_t row = i / groups, g = i % groups;
    float v[16];
    group_values(unpack16<T>(w, row, g), v);
    __align__(16) __half h[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) h[k] = __float2half_rn(v[k]);
    uint4* dst = reinterpret_cast<uint4*>(out + row * w.K + 16 * g);
    dst[0] = reinterpret_cast<const uint4*>(h)[0];
    dst[1] = reinterpret_cast<const uint4*>(h)[1];
}

// x [K, M] (rows nb1 bytes apart) -> out [M][K] contiguous f16 or bf16.
template <class H>
__global__ void k_convert_act(const uint8_t* __restrict__ x, size_t nb1, int64_t K, int64_t M, H* __restrict__ out) {
    pdl_enter();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= K * M) return;
    const int64_t m = i / K, k = i % K;
    const float v = reinterpret_cast<const float*>(x + m * nb1)[k];
    if constexpr (std::is_same_v<H, __half>) {
        out[i] = __float2half_rn(v);
    } else {
        out[i] = __float2bfloat16_rn(v);
    }
}

bool use_matvec(const Tensor& node) {
    const Tensor& w = *node.src[0];
    return node.src[1]->ne[1] == 1 && (!is_plain(w.type) || w.ne[0] % 8 == 0) &&
           mv_smem_bytes(w.type, w.ne[0]) <= 200 * 1024;
}

void run_gemm(const Ctx& ctx, const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    const int64_t K = w.ne[0], N = w.ne[1], M = x.ne[1];
    const float alpha = 1.0f, beta = 0.0f;
    const int ldc = static_cast<int>(node.nb[1] / sizeof(float));
    float* C = ptr<float>(node);
    if (w.type == DType::F32) {
        check(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                           static_cast<int>(K), &alpha, tensor_address(w), CUDA_R_32F, static_cast<int>(w.nb[1] / 4),
                           tensor_address(x), CUDA_R_32F, static_cast<int>(x.nb[1] / 4), &beta, C, CUDA_R_32F, ldc,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx", node);
        return;
    }
    const bool bf = w.type == DType::BF16;
    const void* A = tensor_address(w);
    int lda = static_cast<int>(K);
    if (!is_plain(w.type)) {
        const WView v = weight_view(w);
        __half* deq = static_cast<__half*>(ctx.ws.dequant);
        dispatch_quant(w.type, [&]<DType T>() {
            check(launch(ctx, k_dequant_f16<T>, dim3(blocks_for(N * (K / 16), 256)), dim3(256), 0, v, N, deq),
                  "k_dequant_f16", node);
        });
        A = deq;
    } else {
        lda = static_cast<int>(w.nb[1] / 2);
    }
    const unsigned grid = blocks_for(K * M, 256);
    const uint8_t* xp = static_cast<const uint8_t*>(tensor_address(x));
    if (bf) {
        check(launch(ctx, k_convert_act<__nv_bfloat16>, dim3(grid), dim3(256), 0, xp, x.nb[1], K, M,
                     static_cast<__nv_bfloat16*>(ctx.ws.act)),
              "k_convert_act", node);
    } else {
        check(launch(ctx, k_convert_act<__half>, dim3(grid), dim3(256), 0, xp, x.nb[1], K, M,
                     static_cast<__half*>(ctx.ws.act)),
              "k_convert_act", node);
    }
    const cudaDataType_t ab = bf ? CUDA_R_16BF : CUDA_R_16F;
    check(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                       static_cast<int>(K), &alpha, A, ab, lda, ctx.ws.act, ab, static_cast<int>(K), &beta, C,
                       CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx", node);
}

bool same_view(const Tensor& a, const Tensor& b) {
    return a.buffer == b.buffer && a.offset == b.offset && a.ne == b.ne && a.nb == b.nb && a.type == b.type;
}

}  // namespace

void init_matmul_kernels(int max_smem) {
    // The dynamic limit excludes the kernel's static shared memory.
    auto raise = [&]<DType T>() {
        cudaFuncAttributes attr{};
        check(cudaFuncGetAttributes(&attr, k_matvec<T>), "cudaFuncGetAttributes (k_matvec)");
        check(cudaFuncSetAttribute(k_matvec<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   max_smem - static_cast<int>(attr.sharedSizeBytes)),
              "cudaFuncSetAttribute (k_matvec)");
    };
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                    DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        dispatch_weight(t, raise);
    }
    auto raise_q = [&](auto kernel) {
        cudaFuncAttributes attr{};
        check(cudaFuncGetAttributes(&attr, kernel), "cudaFuncGetAttributes (k_matvec_q)");
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   max_smem - static_cast<int>(attr.sharedSizeBytes)),
              "cudaFuncSetAttribute (k_matvec_q)");
    };
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        dispatch_quant(t, [&]<DType T>() {
            constexpr int D = kQUnits<T>;
            raise_q(k_matvec_q<T, 8, D, false>);
            raise_q(k_matvec_q<T, 16, D, false>);
            raise_q(k_matvec_q<T, 32, D, false>);
            raise_q(k_matvec_q<T, 32, 1, false>);
            raise_q(k_matvec_q<T, 32, std::min(2, D), false>);
            raise_q(k_matvec_q<T, 32, D, true>);
        });
    }
}

bool accepts_mul_mat(const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    return (w.storage_root()->flags & kTensorWeight) && w.view_src == nullptr && is_device_weight_type(w.type) &&
           w.ne[2] == 1 && w.ne[3] == 1 && w.nb[0] == dtype_type_size(w.type) && x.type == DType::F32 &&
           x.nb[0] == sizeof(float) && x.ne[2] == 1 && x.ne[3] == 1 && node.type == DType::F32 &&
           node.nb[0] == sizeof(float) && node.ne[2] == 1 && node.ne[3] == 1 &&
           (is_plain(w.type) || w.ne[0] % 32 == 0);
}

void need_mul_mat(const Tensor& node, int /*sm_count*/, WorkspaceNeeds& needs) {
    if (use_matvec(node)) return;
    const Tensor& w = *node.src[0];
    const size_t K = static_cast<size_t>(w.ne[0]), N = static_cast<size_t>(w.ne[1]);
    const size_t M = static_cast<size_t>(node.src[1]->ne[1]);
    if (w.type == DType::F32) return;
    if (!is_plain(w.type)) needs.dequant = std::max(needs.dequant, K * N * 2);
    needs.act = std::max(needs.act, K * M * 2);
}

void run_mul_mat(const Ctx& ctx, const Tensor& node) {
    if (!use_matvec(node)) {
        run_gemm(ctx, node);
        return;
    }
    const Tensor* mats[1] = {&node};
    run_mul_mat_group(ctx, mats, 1, nullptr, nullptr);
}

bool can_group_mul_mat(const Tensor& a, const Tensor& b) {
    return a.op == Op::MulMat && b.op == Op::MulMat && use_matvec(a) && use_matvec(b) &&
           a.src[0]->type == b.src[0]->type && a.src[0]->ne[0] == b.src[0]->ne[0] && same_view(*a.src[1], *b.src[1]);
}

bool can_prenorm(const Tensor& norm, const Tensor& mm) {
    if (norm.op != Op::AddRmsNorm || mm.op != Op::MulMat || !use_matvec(mm) || norm.ne[1] != 1) return false;
    const Tensor& x = *mm.src[1];
    const int64_t K = norm.ne[0];
    auto aligned = [](const Tensor* t) { return t == nullptr || reinterpret_cast<uintptr_t>(tensor_address(*t)) % 16 == 0; };
    return x.buffer == norm.buffer && x.offset == norm.offset + norm.nb[2] && x.ne[0] == K && K % 32 == 0 &&
           K <= kMaxPrenormK && aligned(&norm) && aligned(norm.src[0]) && aligned(norm.src[1]) &&
           aligned(norm.src[2]) && norm.nb[2] % 16 == 0;
}

void run_mul_mat_group(const Ctx& ctx, const Tensor* const* mats, int n, const Tensor* silu, const Tensor* norm) {
    MvParams p{};
    p.n_jobs = n;
    p.x = ptr<const float>(*mats[0]->src[1]);
    p.K = mats[0]->src[0]->ne[0];
    int64_t rows = 0;
    for (int j = 0; j < n; ++j) {
        p.w[j] = weight_view(*mats[j]->src[0]);
        p.out[j] = ptr<float>(*mats[j]);
        p.start[j] = rows;
        rows += mats[j]->src[0]->ne[1];
    }
    p.start[n] = rows;
    for (int j = 0; j < 3; ++j) p.job_start[j] = j < n ? static_cast<int>(p.start[j]) : std::numeric_limits<int>::max();
    p.total_rows = rows;
    p.n_items = (rows + kRows - 1) / kRows;
    if (silu != nullptr) {
        p.silu = ptr<float>(*silu);
        p.total_rows = mats[0]->src[0]->ne[1];
        p.n_items = p.total_rows;
    }
    if (norm != nullptr) {
        p.a = ptr<const float>(*norm->src[0]);
        p.b = ptr<const float>(*norm->src[1]);
        p.nw = norm->src[2] != nullptr ? ptr<const float>(*norm->src[2]) : nullptr;
        p.eps = norm->param_f(0);
        p.sum_out = ptr<float>(*norm);
        p.norm_out = reinterpret_cast<float*>(ptr<uint8_t>(*norm) + norm->nb[2]);
    }
    dispatch_weight(mats[0]->src[0]->type, [&]<DType T>() {
        if constexpr (!is_plain(T)) {
            if (ctx.matvec != MatVecKernel::General) {
                launch_matvec_q<T>(ctx, p, *mats[0]);
                return;
            }
        }
        launch_matvec<T>(ctx, p, *mats[0]);
    });
}

}  // namespace lantern::cuda
