// KV-cache writes and causal attention over the cache.
//
// The cache of a layer holds n_seq slots of n_ctx_seq cells; the token at
// (seq s, position p) lives in cell s * n_ctx_seq + p. Positions and sequence
// ids are read from the step's input tensors, so the graph is the same at
// every decode position.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/cpu_math.h"
#include "core/half.h"
#include "quant/simd.h"

namespace lantern::cpu {

namespace {

bool cache_type_ok(DType t) { return t == DType::F16 || t == DType::F32; }

}  // namespace

bool kv_store_accepts(const Tensor& dst) {
    return dst.src[0]->type == DType::F32 && cache_type_ok(dst.src[1]->type) && dst.src[2]->type == DType::I32 &&
           dst.src[3]->type == DType::I32;
}

void kv_store(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& src = *dst.src[0];
    const Tensor& cache = *dst.src[1];
    const int32_t* pos = data_at<const int32_t>(*dst.src[2]);
    const int32_t* seq = data_at<const int32_t>(*dst.src[3]);
    const int64_t n_ctx_seq = dst.param_i(0);
    const int64_t D = src.ne[0];
    int64_t begin, end;
    split_range(src.ne[1], ctx.ith, ctx.nth, begin, end);
    for (int64_t t = begin; t < end; ++t) {
        const int64_t cell = static_cast<int64_t>(seq[t]) * n_ctx_seq + pos[t];
        if (pos[t] < 0 || pos[t] >= n_ctx_seq || cell < 0 || cell >= cache.ne[1]) continue;  // validated upstream
        const float* in = reinterpret_cast<const float*>(row_ptr(src, t));
        uint8_t* out = row_ptr_mut(cache, cell);
        if (cache.type == DType::F16) {
            auto* o = reinterpret_cast<uint16_t*>(out);
            for (int64_t i = 0; i < D; ++i) o[i] = f32_to_fp16(in[i]);
        } else {
            std::memcpy(out, in, static_cast<size_t>(D) * sizeof(float));
        }
    }
}

bool attention_accepts(const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && cache_type_ok(dst.src[1]->type) &&
           dst.src[2]->type == dst.src[1]->type && dst.src[3]->type == DType::I32 && dst.src[4]->type == DType::I32;
}

// Attention is computed block by block, flash-attention style: queries are
// grouped into blocks of up to kQueryBlock consecutive positions of one
// sequence, and for each KV head and query block the keys are visited in
// blocks of kKeyBlock. Each key block is converted to f32 once (K transposed)
// and serves every query of the block and every query head sharing the KV
// head. Softmax is online: a running maximum and sum per query row, the
// accumulator rescaled once per key block.
//
// Scores and the weighted sum of values are register tiles: a tile of
// kScoreRows query rows x kScoreKeys keys takes, per dimension, one load
// of each key vector and one broadcast per row (so every load feeds
// several FMAs), and a tile of kSumRows rows x kSumVecs vectors of the head
// dimension stays in registers over a block's keys (its rescale folded in).
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;
#if LANTERN_SIMD_WIDTH == 512
constexpr int kW = quant::simd::kFloats;
constexpr int kScoreRows = 4, kSumRows = 4;
#elif LANTERN_SIMD_WIDTH > 0
constexpr int kW = quant::simd::kFloats;
constexpr int kScoreRows = 2, kSumRows = 2;
#else
constexpr int kW = 1;
constexpr int kScoreRows = 2, kSumRows = 2;
#endif
constexpr int kScoreKeys = 4 * kW;  // keys per score tile: four vectors
constexpr int kSumVecs = 4;         // vectors of the head dimension per sum tile
static_assert(kKeyBlock % kScoreKeys == 0);

#if LANTERN_SIMD_WIDTH == 0
// One float as a vector, for the tiers without SIMD.
struct VF1 {
    float v;
};
inline VF1 load(const float* p) { return {*p}; }
inline void store(float* p, VF1 x) { *p = x.v; }
inline VF1 splat(float x) { return {x}; }
inline VF1 zero() { return {0.0f}; }
inline VF1 fmadd(VF1 a, VF1 b, VF1 c) { return {a.v * b.v + c.v}; }
inline VF1 mul(VF1 a, VF1 b) { return {a.v * b.v}; }
using Vec = VF1;
#else
namespace simd = quant::simd;
using VF = simd::VF;
inline VF load(const float* p) { return simd::load_f(p); }
inline void store(float* p, VF x) { simd::store_f(p, x); }
inline VF splat(float x) { return simd::splat_f(x); }
inline VF zero() { return simd::zero_f(); }
inline VF fmadd(VF a, VF b, VF c) { return simd::fmadd_f(a, b, c); }
inline VF mul(VF a, VF b) { return simd::mul_f(a, b); }
using Vec = VF;
#endif

struct QueryBlock {
    int64_t begin, end;  // tokens [begin, end): one sequence, consecutive positions
};

std::vector<QueryBlock> query_blocks(const int32_t* pos, const int32_t* seq, int64_t T) {
    std::vector<QueryBlock> blocks;
    for (int64_t t = 0; t < T;) {
        int64_t e = t + 1;
        while (e < T && e - t < kQueryBlock && seq[e] == seq[t] && pos[e] == pos[e - 1] + 1) ++e;
        blocks.push_back({t, e});
        t = e;
    }
    return blocks;
}

// Per-thread scratch in floats: kt and v of a key block, the scores, the
// accumulators, the scaled queries, each row's maximum, sum and rescale, and
// one converted key row.
size_t scratch_floats(int64_t hd, int64_t group) {
    const int64_t rows = kQueryBlock * group;
    return static_cast<size_t>(2 * kKeyBlock * hd + rows * kKeyBlock + 2 * rows * hd + 3 * rows + hd + 64);
}

#if LANTERN_SIMD_WIDTH == 512
// r[i] (row i of a 16 x 16 block) becomes column i.
inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    // u[4q + m], lane k: column 4k + m of rows 4q .. 4q + 3.
    for (int q = 0; q < 4; ++q) {
        u[4 * q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), v1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
        r[m] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[8 + m] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[4 + m] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}
#endif

// Rows [first, first + n) of a cache, converted to f32: transposed into
// kt[d * kKeyBlock + j] for K, row-major into v[j * hd + d] for V.
void load_keys(const Tensor& cache, int64_t first, int64_t n, int64_t col, int64_t hd, float* kt, float* tmp) {
    const size_t elt = dtype_type_size(cache.type);
#if LANTERN_SIMD_WIDTH == 512
    // 16 keys x 16 dimensions at a time, transposed in registers.
    if (hd % 16 == 0) {
        for (int64_t j0 = 0; j0 < kKeyBlock; j0 += 16) {
            for (int64_t d0 = 0; d0 < hd; d0 += 16) {
                __m512 r[16];
                for (int64_t i = 0; i < 16; ++i) {
                    if (j0 + i >= n) {
                        r[i] = _mm512_setzero_ps();
                        continue;
                    }
                    const uint8_t* row = row_ptr(cache, first + j0 + i) + static_cast<size_t>(col + d0) * elt;
                    r[i] = cache.type == DType::F16
                               ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)))
                               : _mm512_loadu_ps(reinterpret_cast<const float*>(row));
                }
                transpose16(r);
                for (int64_t c = 0; c < 16; ++c) _mm512_storeu_ps(kt + (d0 + c) * kKeyBlock + j0, r[c]);
            }
        }
        return;
    }
#endif
    for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = row_ptr(cache, first + j) + static_cast<size_t>(col) * elt;
        const float* f = reinterpret_cast<const float*>(row);
        if (cache.type == DType::F16) {
            fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), tmp, hd);
            f = tmp;
        }
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = f[d];
    }
    for (int64_t j = n; j < kKeyBlock; ++j) {
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = 0.0f;
    }
}

void load_values(const Tensor& cache, int64_t first, int64_t n, int64_t col, int64_t hd, float* v) {
    const size_t elt = dtype_type_size(cache.type);
    for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = row_ptr(cache, first + j) + static_cast<size_t>(col) * elt;
        if (cache.type == DType::F16) {
            fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), v + j * hd, hd);
        } else {
            std::memcpy(v + j * hd, row, static_cast<size_t>(hd) * sizeof(float));
        }
    }
}

// sc[r * kKeyBlock + k0 + j] = q row r . key k0 + j, for R rows of q (row r
// at q + r * hd) and kScoreKeys keys.
template <int R>
void score_tile(const float* q, int64_t hd, const float* kt, int64_t k0, float* sc) {
    constexpr int V = kScoreKeys / kW;
    Vec s[R][V];
    for (auto& row : s) {
        for (Vec& x : row) x = zero();
    }
    for (int64_t d = 0; d < hd; ++d) {
        Vec k[V];
        for (int v = 0; v < V; ++v) k[v] = load(kt + d * kKeyBlock + k0 + v * kW);
        for (int r = 0; r < R; ++r) {
            const Vec x = splat(q[r * hd + d]);
            for (int v = 0; v < V; ++v) s[r][v] = fmadd(x, k[v], s[r][v]);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V; ++v) store(sc + r * kKeyBlock + k0 + v * kW, s[r][v]);
    }
}

// acc[r * hd + d0 + ...] = acc * rescale[r] + sum over keys j < nk of
// p[r * kKeyBlock + j] * v[j * hd + d0 + ...], for R rows and C vectors.
template <int R, int C>
void sum_tile(float* acc, const float* p, const float* rescale, const float* v, int64_t nk, int64_t hd, int64_t d0) {
    Vec a[R][C];
    for (int r = 0; r < R; ++r) {
        const Vec f = splat(rescale[r]);
        for (int c = 0; c < C; ++c) a[r][c] = mul(load(acc + r * hd + d0 + c * kW), f);
    }
    for (int64_t j = 0; j < nk; ++j) {
        Vec x[C];
        for (int c = 0; c < C; ++c) x[c] = load(v + j * hd + d0 + c * kW);
        for (int r = 0; r < R; ++r) {
            const Vec w = splat(p[r * kKeyBlock + j]);
            for (int c = 0; c < C; ++c) a[r][c] = fmadd(w, x[c], a[r][c]);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) store(acc + r * hd + d0 + c * kW, a[r][c]);
    }
}

// Scores of `rows` query rows against a key block (all kKeyBlock columns;
// the keys past the block's end are zeros).
void scores(const float* q, int64_t rows, int64_t hd, const float* kt, float* sc) {
    int64_t r = 0;
    for (; r + kScoreRows <= rows; r += kScoreRows) {
        for (int64_t k0 = 0; k0 < kKeyBlock; k0 += kScoreKeys) score_tile<kScoreRows>(q + r * hd, hd, kt, k0, sc + r * kKeyBlock);
    }
    for (; r < rows; ++r) {
        for (int64_t k0 = 0; k0 < kKeyBlock; k0 += kScoreKeys) score_tile<1>(q + r * hd, hd, kt, k0, sc + r * kKeyBlock);
    }
}

// The weighted sums of R rows over the whole head dimension: tiles of
// kSumVecs vectors, then single vectors, then (hd not a multiple of the
// vector) single floats.
template <int R>
void sums(float* acc, const float* p, const float* rescale, const float* v, int64_t nk, int64_t hd) {
    int64_t d = 0;
    for (; d + kSumVecs * kW <= hd; d += kSumVecs * kW) sum_tile<R, kSumVecs>(acc, p, rescale, v, nk, hd, d);
    for (; d + kW <= hd; d += kW) sum_tile<R, 1>(acc, p, rescale, v, nk, hd, d);
    for (; d < hd; ++d) {
        for (int r = 0; r < R; ++r) {
            float a = acc[r * hd + d] * rescale[r];
            for (int64_t j = 0; j < nk; ++j) a += p[r * kKeyBlock + j] * v[j * hd + d];
            acc[r * hd + d] = a;
        }
    }
}

}  // namespace

size_t attention_scratch(const Tensor& dst, int nth) {
    const int64_t hd = dst.src[0]->ne[0], group = dst.src[0]->ne[1] / dst.param_i(0);
    return scratch_floats(hd, group) * sizeof(float) * static_cast<size_t>(nth);
}

void attention(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    const Tensor& kc = *dst.src[1];
    const Tensor& vc = *dst.src[2];
    const int32_t* pos = data_at<const int32_t>(*dst.src[3]);
    const int32_t* seq = data_at<const int32_t>(*dst.src[4]);
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const int64_t n_head_kv = dst.param_i(0), n_ctx_seq = dst.param_i(1);
    const float scale = dst.param_f(2), softcap = dst.param_f(3);
    const int64_t window = dst.param_i(4);
    const int64_t group = n_head / n_head_kv;
    const int64_t max_rows = kQueryBlock * group;

    float* kt = reinterpret_cast<float*>(ctx.scratch) + scratch_floats(hd, group) * static_cast<size_t>(ctx.ith);
    float* vb = kt + kKeyBlock * hd;
    float* sc = vb + kKeyBlock * hd;            // [rows][kKeyBlock] scores, then probabilities
    float* acc = sc + max_rows * kKeyBlock;     // [rows][hd]
    float* qs = acc + max_rows * hd;            // [rows][hd] the queries times the scale
    float* mx = qs + max_rows * hd;             // [rows] running maximum
    float* sum = mx + max_rows;                 // [rows] running sum
    float* rescale = sum + max_rows;            // [rows] this key block's rescale of acc
    float* tmp = rescale + max_rows;            // [hd] one converted key row

    // Items (query block, KV head) are dealt on demand, the last query
    // blocks first: in a causal prompt they see the most keys, and a static
    // split left one thread three times the other's share.
    const std::vector<QueryBlock> blocks = query_blocks(pos, seq, T);
    const int64_t items = static_cast<int64_t>(blocks.size()) * n_head_kv;
    for (int64_t item = ctx.ith; item < items; item = ctx.next_item()) {
        const int64_t reversed = items - 1 - item;
        const QueryBlock qb = blocks[static_cast<size_t>(reversed / n_head_kv)];
        const int64_t kvh = reversed % n_head_kv;
        const int64_t nq = qb.end - qb.begin, rows = nq * group;
        const int64_t base = static_cast<int64_t>(seq[qb.begin]) * n_ctx_seq;
        const bool bad_seq = base < 0 || base + n_ctx_seq > kc.ne[1];
        // Key range of the block: from the first query's window start to the
        // last query's position.
        const int64_t p_first = std::clamp<int64_t>(pos[qb.begin], 0, n_ctx_seq - 1);
        const int64_t p_last = std::clamp<int64_t>(pos[qb.end - 1], 0, n_ctx_seq - 1);
        const int64_t k_lo = window > 0 ? std::max<int64_t>(0, p_first - window + 1) : 0;

        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = qb.begin + r / group, h = kvh * group + r % group;
            const float* qv = reinterpret_cast<const float*>(row_ptr(q, h, t));
            for (int64_t d = 0; d < hd; ++d) qs[r * hd + d] = qv[d] * scale;
        }
        std::fill(acc, acc + rows * hd, 0.0f);
        std::fill(mx, mx + rows, -INFINITY);
        std::fill(sum, sum + rows, 0.0f);
        for (int64_t k0 = k_lo; !bad_seq && k0 <= p_last; k0 += kKeyBlock) {
            const int64_t nk = std::min(kKeyBlock, p_last + 1 - k0);
            load_keys(kc, base + k0, nk, kvh * hd, hd, kt, tmp);
            load_values(vc, base + k0, nk, kvh * hd, hd, vb);
            scores(qs, rows, hd, kt, sc);
            // Per row: mask, softcap, the online softmax's update. A row's
            // visible keys are one range [j_lo, j_hi) of the block; a row
            // with none keeps its accumulator (rescale 1, probabilities 0).
            for (int64_t r = 0; r < rows; ++r) {
                const int64_t t = qb.begin + r / group;
                const int64_t p = std::clamp<int64_t>(pos[t], 0, n_ctx_seq - 1);
                const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
                const int64_t j_lo = std::clamp<int64_t>(lo - k0, 0, nk), j_hi = std::clamp<int64_t>(p + 1 - k0, 0, nk);
                float* s = sc + r * kKeyBlock;
                if (softcap > 0.0f) {
                    for (int64_t j = j_lo; j < j_hi; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
                }
                float block_max = -INFINITY;  // NaN scores are passed over (and weigh 0 below)
#pragma omp simd reduction(max : block_max)
                for (int64_t j = j_lo; j < j_hi; ++j) block_max = s[j] > block_max ? s[j] : block_max;
                std::fill(s, s + j_lo, 0.0f);
                std::fill(s + j_hi, s + nk, 0.0f);
                if (block_max == -INFINITY) {
                    std::fill(s + j_lo, s + j_hi, 0.0f);
                    rescale[r] = 1.0f;
                    continue;
                }
                const float m_new = std::max(mx[r], block_max);
                rescale[r] = fast_exp(mx[r] - m_new);
                float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
                for (int64_t j = j_lo; j < j_hi; ++j) {
                    s[j] = fast_exp(s[j] - m_new);  // -inf and NaN give 0
                    block_sum += s[j];
                }
                sum[r] = sum[r] * rescale[r] + block_sum;
                mx[r] = m_new;
            }
            int64_t r = 0;
            for (; r + kSumRows <= rows; r += kSumRows) {
                sums<kSumRows>(acc + r * hd, sc + r * kKeyBlock, rescale + r, vb, nk, hd);
            }
            for (; r < rows; ++r) sums<1>(acc + r * hd, sc + r * kKeyBlock, rescale + r, vb, nk, hd);
        }
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = qb.begin + r / group, h = kvh * group + r % group;
            float* out = reinterpret_cast<float*>(row_ptr_mut(dst, t)) + h * hd;
            const float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
            for (int64_t d = 0; d < hd; ++d) out[d] = acc[r * hd + d] * inv;
        }
    }
}

}  // namespace lantern::cpu
