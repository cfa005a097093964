// The matrix-vector launches' shared parts (matvec_general.cu, matvec_stream.cu,
// run_mul_mat_group in matmul.cu): the launch parameters, the activation
// staged into shared memory (quantized to 8 bits with the CPU's rounding, or
// f32 for the plain weight types, optionally after a fused add + RMSNorm),
// and which job and row a warp's work item is.
#pragma once

#include <climits>
#include <type_traits>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda::mv {

// The general kernel's blocks (k_matvec; the streamed kernel's: kQWarps).
// Its grid is the blocks an SM holds at its ~125 registers, two: at four
// (two waves, every block staging the row) the tinyllama F16 decode step
// took 1,219 us, at two 1,187 (H100, same call; op bench F16 81 -> 82-84%).
// Unlike the streamed kernel's, one block of 16 warps per SM was slower
// than two of 8 (tinyllama F16 1,187 -> 1,211 us, smollm2 F16 483 -> 517).
constexpr int kMvWarps = 8;
constexpr int kMvThreads = kMvWarps * 32;
constexpr int kMvBlocksPerSM = 2;
constexpr int kRows = 2;           // rows a warp works on at once
constexpr int kStageBatch = 8;     // float4 loads in flight per thread while staging
constexpr int kMaxPrenormK = kMvThreads * 4 * kStageBatch;  // the general kernel's registers (plain types' staging)

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
    // the sum and the normed row to sum_out / norm_out. A fused RmsNorm
    // (the first layer's): b and sum_out null, x = norm(a) * w.
    const float* a;
    const float* b;
    const float* nw;
    float eps;
    float* sum_out;
    float* norm_out;
    bool a_settled;  // a may be read before the grid wait (Launch::residual_settled)
    const float* acc;  // MulMatAdd (one job, the general kernels): out[row] = product + acc[row]
    bool l2_prefetch;  // the streamed kernel asks L2 for an item's rows (q_prefetch)
};

// The activation row as a kernel reads it.
// Shared memory of a quantized row: q [K bytes], d [K/32 floats], s [K/16
// floats], isum [K/32 words] (K % 32 == 0, so every array is 4-byte aligned).
struct Act {
    const int8_t* q;     // two planes: q[h * K/2 + 16b + i] = element 32b + 16h + i
    const float* d;      // scale per 32-block
    const float* s;      // d * sum of the quants, per 16-group
    const int* isum;     // per 32-block: each 16-group's sum of the quants, int16 (low half: elements 0..15)
    int64_t half_k;
    const float* x;      // plain types: the f32 row
};

inline size_t mv_smem_bytes(DType t, int64_t K) {
    if (is_plain(t)) return static_cast<size_t>(K) * sizeof(float);
    return static_cast<size_t>(K) + static_cast<size_t>(K / 32) * 8 + static_cast<size_t>(K / 16) * 4;
}

// Where block b of the activation sits in shared memory. Identity, except
// for the kernels whose lanes take runs of U consecutive blocks (the run
// items of matvec_stream.cu: of a stage of W U blocks, lane j has blocks
// U j .. U j + U - 1): there the stage's block U j + u is at W u + j, so
// the lanes' reads of one unit are consecutive (conflict-free), and the
// row takes whole stages (act_k).
template <int W, int U>
__device__ __forceinline__ int64_t act_slot(int64_t b) {
    if constexpr (U == 1) {
        return b;
    } else {
        constexpr int S = W * U;
        const int64_t r = b % S;
        return b - r + (r % U) * W + r / U;
    }
}

// The staged row's length: K, or for run items whole stages of W U blocks.
__host__ __device__ constexpr int64_t act_k(int64_t K, int W, int U) {
    if (U == 1) return K;
    const int64_t S = static_cast<int64_t>(W) * U * 32;
    return (K + S - 1) / S * S;
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
// the block reduction does not wait on a second memory round trip. The
// same for the residual when it is settled (p.a_settled): the staging then
// waits on L2 for the new sum's other input alone.
__device__ __forceinline__ void prefetch_norm_inputs(const MvParams& p) {
    if (p.a == nullptr) return;
    const int64_t lines = (p.K * 4 + 127) / 128;
    for (int64_t i = threadIdx.x; i < lines; i += blockDim.x) {
        if (p.nw != nullptr) asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<const char*>(p.nw) + 128 * i));
        if (p.a_settled) asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<const char*>(p.a) + 128 * i));
    }
}

// Half a 32-block of the activation (16 values), held by one thread, its
// other half by the neighbouring lane; quantized as quantize_q8_0 does on
// the CPU: d = fp16(amax / 127), q = rint(clamp(x / d)) (x / d as x * (1/d)).
// Exact: d stays f32 (the fused AddRmsNorm's row, quantized before it is
// scaled by 1/rms, whose magnitude fp16 may not hold). The thread writes
// its plane's 16 bytes and its 16-group sum, the even lane the scale and
// the block's quant sum. Two lanes per block need one shuffle per reduction
// (a float4 per lane, as before, needed three, and staging was half of a
// launch's instructions: every block of a matrix-vector launch stages the
// row). Both lanes of a pair call this.
//
// W, U (run items, act_slot): the block goes to its slot, and its scale is
// that of the U consecutive blocks of its run (2 U lanes), so the run's
// integer sums add up before any float product: coarser than blocks of 32,
// finer than the Q8_K blocks of 256 the CPU quantizes a K-quant product's
// input in. K here: the staged length (act_k).
template <bool Exact = false, int W = 1, int U = 1>
__device__ __forceinline__ void quant_half(const float (&x)[16], int64_t hb, bool valid, int64_t K, uint8_t* smem) {
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(x[i]));
#pragma unroll
    for (int o = 1; o < 2 * U; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float dd = Exact ? amax / 127.0f : __half2float(__float2half_rn(amax / 127.0f));
    const float inv = dd != 0.0f ? 1.0f / dd : 0.0f;
    uint32_t w[4];
    int sh = 0;
    if (__fmul_rn(amax, inv) < 127.5f) {
        // No value needs the clamp (|x| inv < 127.5 for every x), so each
        // rounds by one add: x inv + 1.5 * 2^23 has the nearest integer
        // (ties to even, as rint) in its low mantissa bits, its low byte the
        // quant's. Four bytes a word by byte permutes, their sum by a dot
        // product: no float-to-int conversions (quarter rate) and no clamp.
        // (The product is rounded on its own, __fmul_rn, as x * (1/d) is.)
        const float kRound = 12582912.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t b[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) b[k] = __float_as_uint(__fadd_rn(__fmul_rn(x[4 * j + k], inv), kRound));
            w[j] = __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
            sh = __dp4a(static_cast<int>(w[j]), 0x01010101, sh);
        }
    } else {
        // Tiny blocks (d an fp16 subnormal, far from amax / 127) saturate.
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
    }
    const int other = __shfl_xor_sync(0xffffffffu, sh, 1);
    if (!valid) return;
    const int64_t b = act_slot<W, U>(hb >> 1);
    const int h = static_cast<int>(hb & 1);
    reinterpret_cast<uint4*>(smem + h * (K / 2))[b] = make_uint4(w[0], w[1], w[2], w[3]);
    float* d = reinterpret_cast<float*>(smem + K);
    float* s = d + K / 32;
    s[2 * b + h] = dd * static_cast<float>(sh);
    if (h == 0) {
        d[b] = dd;
        const uint32_t halves = (static_cast<uint32_t>(sh) & 0xFFFFu) | (static_cast<uint32_t>(other) << 16);
        reinterpret_cast<int*>(s + K / 16)[b] = static_cast<int>(halves);
    }
}

template <int N>
__device__ __forceinline__ void to_floats(float4 v, float (&x)[N], int at) {
    x[at] = v.x;
    x[at + 1] = v.y;
    x[at + 2] = v.z;
    x[at + 3] = v.w;
}

// 1/rms of a fused AddRmsNorm's row from the warps' sums of squares (red:
// 16-byte aligned, one per warp of the block). Every item's store computes
// it (act_scale), so it is Warps / 4 vector loads and an approximate
// reciprocal square root (within 2 ulp), not a division with its slow path.
template <int Warps>
__device__ __forceinline__ float rms_scale(const MvParams& p, const float* red) {
    static_assert(Warps % 4 == 0, "whole float4 of partial sums");
    float4 v[Warps / 4];
#pragma unroll
    for (int i = 0; i < Warps / 4; ++i) v[i] = reinterpret_cast<const float4*>(red)[i];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < Warps / 4; ++i) ss += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    return rsqrtf(ss / static_cast<float>(p.K) + p.eps);
}

// The activation row quantized into shared memory, 16 values per thread
// and round; rounds are whole warps (a warp past the row skips them).
// With a fused AddRmsNorm the row quantized is (a + b) * w, not yet scaled
// by 1/rms: the block reduction of the squares then runs beside the
// quantization, behind the barrier both need, where the scaled row waited
// for it (two barriers and a reduction before the first dot product of
// every block). The launch multiplies its sums by act_scale. Ends with the
// block's barrier. W, U: a run kernel's row (quant_half).
template <int Warps, int W = 1, int U = 1>
inline __device__ void stage_act_q8(const MvParams& p, uint8_t* smem, float* red) {
    constexpr int kThreads = Warps * 32;
    const int64_t nh = p.K / 16;  // half-blocks
    const int64_t ks = act_k(p.K, W, U);
    const int tid = threadIdx.x;
    if (p.a == nullptr) {
        // One round per iteration: each round is its own L2 round trip
        // (three for an 11,008-wide row). Three rounds' loads at once cost
        // the one-round rows more than they saved (H100, same calls: op bench
        // 4096 x 11008 Q4_K 80 -> 73-74% of the copy, Q2_K 67 -> 64%; 7B
        // Q4_0 decode step within noise; tinyllama +7 us), in one kernel or as
        // a second instantiation for long rows (7B decode step +100 us: two
        // large kernels alternating in the step).
        const bool vec = (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
        for (int64_t base = 0; base < nh; base += kThreads) {
            if (base + (tid & ~31) >= nh) break;  // warp-uniform
            const int64_t hb = base + tid;
            const bool valid = hb < nh;
            float x[16];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                to_floats(valid ? load4(p.x, 4 * hb + c, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), x, 4 * c);
            }
            quant_half<false, W, U>(x, hb, valid, ks, smem);
        }
        __syncthreads();
        return;
    }
    // Fused AddRmsNorm: K <= kMaxPrenormK, one or two rounds, the row in registers.
    constexpr int kRounds = (kMaxPrenormK / 16 + kThreads - 1) / kThreads;
    float x[kRounds][16];
    float ss = 0.0f;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
        const int64_t hb = r * kThreads + tid;
        if (r * kThreads + (tid & ~31) >= nh) break;  // warp-uniform
        const bool valid = hb < nh;
        const int64_t at = valid ? 4 * hb : 0;
        const float4* a = reinterpret_cast<const float4*>(p.a) + at;
        const float4* b = reinterpret_cast<const float4*>(p.b) + at;
        const float4* w = reinterpret_cast<const float4*>(p.nw) + at;
        // Every load of the round before the first store: sum_out may alias
        // a or b for all the compiler knows, so a store between them made
        // each float4 its own L2 round trip (four per launch, not one).
        // (The weight, in L1 since prefetch_norm_inputs, is read after.)
        float4 x0[4], x1[4];
        const bool add = p.b != nullptr;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            x0[c] = a[c];
            x1[c] = add ? b[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float4 v = make_float4(x0[c].x + x1[c].x, x0[c].y + x1[c].y, x0[c].z + x1[c].z, x0[c].w + x1[c].w);
            if (valid) ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            if (valid && add && blockIdx.x == 0) reinterpret_cast<float4*>(p.sum_out)[4 * hb + c] = v;
            to_floats(v, x[r], 4 * c);
        }
        if (p.nw != nullptr) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const float4 wc = w[c];
                x[r][4 * c] *= wc.x;
                x[r][4 * c + 1] *= wc.y;
                x[r][4 * c + 2] *= wc.z;
                x[r][4 * c + 3] *= wc.w;
            }
        }
        quant_half<true, W, U>(x[r], hb, valid, ks, smem);
    }
    ss = warp_sum(ss);
    if ((tid & 31) == 0) red[tid >> 5] = ss;
    __syncthreads();
    if (blockIdx.x == 0) {  // the normed row, for the node's other readers
        const float rn = rms_scale<Warps>(p, red);
#pragma unroll
        for (int r = 0; r < kRounds; ++r) {
            const int64_t hb = r * kThreads + tid;
            if (hb >= nh) break;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                reinterpret_cast<float4*>(p.norm_out)[4 * hb + c] =
                    make_float4(x[r][4 * c] * rn, x[r][4 * c + 1] * rn, x[r][4 * c + 2] * rn, x[r][4 * c + 3] * rn);
            }
        }
    }
}

// stage_act_q8 with the row's length K handed over: the streamed kernel's
// Q3_K launches, which pass it from the 32-bit block count (matvec_stream.cu
// says why). The rounds are stage_act_q8's, written out again on purpose:
// moving them into a helper that both call changed the code ptxas gave
// every other type's kernels, some for the worse (H100 op bench, Q4_K 4096
// x 32000 85 -> 83% of the copy).
template <int Warps, int W = 1, int U = 1>
inline __device__ void stage_act_q8_as(const MvParams& p, uint8_t* smem, float* red, const float* row, int64_t K) {
    if (p.a != nullptr) {
        stage_act_q8<Warps, W, U>(p, smem, red);
        return;
    }
    constexpr int kThreads = Warps * 32;
    const int tid = threadIdx.x;
    const int64_t nh = K / 16, ks = act_k(K, W, U);
    const bool vec = (reinterpret_cast<uintptr_t>(row) & 15) == 0;
    for (int64_t base = 0; base < nh; base += kThreads) {
        if (base + (tid & ~31) >= nh) break;  // warp-uniform
        const int64_t hb = base + tid;
        const bool valid = hb < nh;
        float x[16];
#pragma unroll
        for (int c = 0; c < 4; ++c) to_floats(valid ? load4(row, 4 * hb + c, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f), x, 4 * c);
        quant_half<false, W, U>(x, hb, valid, ks, smem);
    }
    __syncthreads();
}

// The activation row into shared memory: quantized (stage_act_q8) for the
// quantized weight types, as f32 for the plain ones. All loads of a batch are
// issued before any is used (one round trip per batch). Ends with the
// block's barrier.
template <bool Quant, int Warps, int W = 1, int U = 1>
inline __device__ void stage_act(const MvParams& p, uint8_t* smem, float* red) {
    constexpr int kThreads = Warps * 32;
    if constexpr (Quant) {
        stage_act_q8<Warps, W, U>(p, smem, red);
        return;
    }
    auto put4 = [&](float4 v, int64_t i, bool valid) {
        if (valid) reinterpret_cast<float4*>(smem)[i] = v;
    };
    const int64_t nv = p.K / 4;
    const int tid = threadIdx.x;
    if (p.a == nullptr) {
        const bool vec = (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
        for (int64_t base = 0; base < nv; base += kThreads * kStageBatch) {
            float4 v[kStageBatch];
#pragma unroll
            for (int k = 0; k < kStageBatch; ++k) {
                const int64_t i = base + tid + k * kThreads;
                v[k] = i < nv ? load4(p.x, i, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int k = 0; k < kStageBatch; ++k) {
                const int64_t i = base + tid + k * kThreads;
                put4(v[k], i, i < nv);
            }
        }
        __syncthreads();
        return;
    }
    // Fused AddRmsNorm: K <= kMaxPrenormK, so the row fits in registers.
    // One float4 of a and of b per load round trip (the sum's store between
    // them, which may alias them for all the compiler knows). Holding every
    // load at once took the f32/f16/bf16 kernels from 125 to 153 registers,
    // one block per SM (H100 op bench, f16 4096 x 11008: 80 -> 56% of the
    // copy); storing the sums after the reduction still spilled.
    float4 v[kStageBatch];
    float ss = 0.0f;
    const bool add = p.b != nullptr;
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
        const int64_t i = tid + k * kThreads;
        v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < nv) {
            const float4 x0 = reinterpret_cast<const float4*>(p.a)[i];
            const float4 x1 = add ? reinterpret_cast<const float4*>(p.b)[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            v[k] = make_float4(x0.x + x1.x, x0.y + x1.y, x0.z + x1.z, x0.w + x1.w);
            ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
            if (add && blockIdx.x == 0) reinterpret_cast<float4*>(p.sum_out)[i] = v[k];
        }
    }
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(p.K) + p.eps);
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
        const int64_t i = tid + k * kThreads;
        const bool valid = i < nv;
        float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (valid) {
            const float4 w = p.nw != nullptr ? reinterpret_cast<const float4*>(p.nw)[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            y = make_float4(v[k].x * r * w.x, v[k].y * r * w.y, v[k].z * r * w.z, v[k].w * r * w.w);
            if (blockIdx.x == 0) reinterpret_cast<float4*>(p.norm_out)[i] = y;
        }
        put4(y, i, valid);
    }
    __syncthreads();
}

// What a launch multiplies its sums by, after stage_act: a quantized row
// with a fused AddRmsNorm was staged unscaled (stage_act_q8), so its 1/rms;
// 1 otherwise. Computed from the warps' partial sums where a sum is stored
// (Warps / 4 shared vector loads per item), not held in a register through
// the loop: that made the 7B Q4_0 decode step 11 us longer (H100).
template <bool Quant, int Warps>
__device__ __forceinline__ float act_scale(const MvParams& p, const float* red) {
    if (!Quant || p.a == nullptr) return 1.0f;
    return rms_scale<Warps>(p, red);
}

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



// One token's product through the general kernel (row pairs, every weight
// type) or the streamed one (quantized types): matvec_general.cu and
// matvec_stream.cu.
void launch_matvec_general(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node);
void launch_matvec_streamed(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node);
// The bulk-copy kernel (matvec_bulk.cu), where it takes the launch (false:
// use another): always under LANTERN_CUDA_MATVEC=bulk when the rows allow,
// by default for the types and widths it is faster at.
bool launch_matvec_bulk(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node);
// Raise the kernels' dynamic shared-memory limit to max_smem (once per device).
void init_matvec_general(int max_smem);
void init_matvec_streamed(int max_smem);
void init_matvec_bulk(int max_smem);

}  // namespace lantern::cuda::mv
