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
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/simd.h"

namespace lantern::cpu {

namespace {

// f16 and f32 caches are read directly; the other types the context allows
// (bf16 and the 32-element block types) are converted a row at a time.
bool plain_cache(DType t) { return t == DType::F16 || t == DType::F32; }

bool cache_type_ok(const Tensor& cache) {
    if (plain_cache(cache.type)) return true;
    const quant::TypeOps* ops = quant::type_ops(cache.type);
    return ops != nullptr && ops->to_float != nullptr && ops->from_float != nullptr &&
           dtype_block_size(cache.type) <= 32 && cache.ne[0] % dtype_block_size(cache.type) == 0;
}


}  // namespace

bool kv_store_accepts(const Tensor& dst) {
    return dst.src[0]->type == DType::F32 && cache_type_ok(*dst.src[1]) && dst.src[2]->type == DType::I32 &&
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
        } else if (cache.type == DType::F32) {
            std::memcpy(out, in, static_cast<size_t>(D) * sizeof(float));
        } else {
            quant::quantize_row(cache.type, in, out, D);
        }
    }
}

bool attention_accepts(const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    const int64_t hd = q.ne[0];
    auto heads_whole = [hd](const Tensor& c) { return hd % dtype_block_size(c.type) == 0; };
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && cache_type_ok(*dst.src[1]) &&
           cache_type_ok(*dst.src[2]) && heads_whole(*dst.src[1]) && heads_whole(*dst.src[2]) &&
           dst.src[3]->type == DType::I32 && dst.src[4]->type == DType::I32;
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

// Keys are transposed in registers, kT keys x kT dimensions at a time, on
// the x86 tiers (one scalar store per element made the transposition the
// decode step's bottleneck at depth): KeyVec holds one key's kT dimensions,
// key_vec loads them from an f16 or f32 cache row, transpose turns rows
// into columns.
#if LANTERN_SIMD_WIDTH == 256
constexpr int kT = 8;
using KeyVec = __m256;
// Elements [col, col + kT) of a cache row; a Q8_0 row's run lies within one
// block (col is a multiple of kT, blocks hold 32).
inline KeyVec key_vec(const uint8_t* row, int64_t col, DType type) {
    if (type == DType::Q8_0) {
        const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(row)[col >> 5];
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + (col & 31)));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(fp16_to_f32(blk.d)));
    }
    return type == DType::F16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + col * 2)))
                              : _mm256_loadu_ps(reinterpret_cast<const float*>(row) + col);
}
inline KeyVec zero_key() { return _mm256_setzero_ps(); }
inline void store_key(float* p, KeyVec v) { _mm256_storeu_ps(p, v); }
// r[i] (row i of an 8 x 8 block) becomes column i.
inline void transpose(KeyVec (&r)[kT]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    // u[4q + m], 128-bit lane k: column 4k + m of rows 4q .. 4q + 3.
    for (int q = 0; q < 2; ++q) {
        u[4 * q] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
        r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
        r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
    }
}
#elif LANTERN_SIMD_WIDTH == 512
constexpr int kT = 16;
using KeyVec = __m512;
inline KeyVec key_vec(const uint8_t* row, int64_t col, DType type) {
    if (type == DType::Q8_0) {
        const auto& blk = reinterpret_cast<const quant::BlockQ8_0*>(row)[col >> 5];
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + (col & 31)));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(fp16_to_f32(blk.d)));
    }
    return type == DType::F16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + col * 2)))
                              : _mm512_loadu_ps(reinterpret_cast<const float*>(row) + col);
}
inline KeyVec zero_key() { return _mm512_setzero_ps(); }
inline void store_key(float* p, KeyVec v) { _mm512_storeu_ps(p, v); }
// r[i] (row i of a 16 x 16 block) becomes column i.
inline void transpose(KeyVec (&r)[kT]) {
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
#if LANTERN_SIMD_X86
    if (hd % kT == 0 && (plain_cache(cache.type) || cache.type == DType::Q8_0)) {
        for (int64_t j0 = 0; j0 < kKeyBlock; j0 += kT) {
            for (int64_t d0 = 0; d0 < hd; d0 += kT) {
                KeyVec r[kT];
                for (int64_t i = 0; i < kT; ++i) {
                    r[i] = j0 + i < n ? key_vec(row_ptr(cache, first + j0 + i), col + d0, cache.type) : zero_key();
                }
                transpose(r);
                for (int64_t c = 0; c < kT; ++c) store_key(kt + (d0 + c) * kKeyBlock + j0, r[c]);
            }
        }
        return;
    }
#endif
    for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = row_ptr(cache, first + j) + dtype_row_size(cache.type, col);
        const float* f = reinterpret_cast<const float*>(row);
        if (cache.type == DType::F16) {
            fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), tmp, hd);
            f = tmp;
        } else if (cache.type != DType::F32) {
            quant::dequantize_row(cache.type, row, tmp, hd);
            f = tmp;
        }
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = f[d];
    }
    for (int64_t j = n; j < kKeyBlock; ++j) {
        for (int64_t d = 0; d < hd; ++d) kt[d * kKeyBlock + j] = 0.0f;
    }
}

void load_values(const Tensor& cache, int64_t first, int64_t n, int64_t col, int64_t hd, float* v) {
    for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = row_ptr(cache, first + j) + dtype_row_size(cache.type, col);
        if (cache.type == DType::F16) {
            fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), v + j * hd, hd);
        } else if (cache.type == DType::F32) {
            std::memcpy(v + j * hd, row, static_cast<size_t>(hd) * sizeof(float));
        } else {
#if LANTERN_SIMD_X86
            if (cache.type == DType::Q8_0 && hd % kT == 0) {
                for (int64_t d = 0; d < hd; d += kT) store_key(v + j * hd + d, key_vec(row, d, cache.type));
                continue;
            }
#endif
            quant::dequantize_row(cache.type, row, v + j * hd, hd);
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

// The op's parameters, and one item's work: a query block's rows against
// one KV head's keys, visited a key block at a time.
struct Attention {
    const Tensor& q;
    const Tensor& kc;
    const Tensor& vc;
    const int32_t* pos;
    const int32_t* seq;
    int64_t hd, n_head_kv, n_ctx_seq, window, group;
    float scale, softcap;

    explicit Attention(const Tensor& dst)
        : q(*dst.src[0]), kc(*dst.src[1]), vc(*dst.src[2]), pos(data_at<const int32_t>(*dst.src[3])),
          seq(data_at<const int32_t>(*dst.src[4])), hd(q.ne[0]), n_head_kv(dst.param_i(0)),
          n_ctx_seq(dst.param_i(1)), window(dst.param_i(4)), group(q.ne[1] / n_head_kv), scale(dst.param_f(2)),
          softcap(dst.param_f(3)) {}

    int64_t max_rows() const { return kQueryBlock * group; }

    // The key blocks a query block reads: from its first query's window
    // start to its last query's position (none for a bad sequence id).
    struct Keys {
        int64_t base, k_lo, p_last, n_blocks;
    };
    Keys keys(const QueryBlock& qb) const {
        const int64_t base = static_cast<int64_t>(seq[qb.begin]) * n_ctx_seq;
        const int64_t p_first = std::clamp<int64_t>(pos[qb.begin], 0, n_ctx_seq - 1);
        const int64_t p_last = std::clamp<int64_t>(pos[qb.end - 1], 0, n_ctx_seq - 1);
        const int64_t k_lo = window > 0 ? std::max<int64_t>(0, p_first - window + 1) : 0;
        const bool bad_seq = base < 0 || base + n_ctx_seq > kc.ne[1];
        return {base, k_lo, p_last, bad_seq ? 0 : (p_last - k_lo) / kKeyBlock + 1};
    }

    // Per-thread scratch (scratch_floats of it).
    struct Scratch {
        float *kt, *vb, *sc, *acc, *qs, *mx, *sum, *rescale, *tmp;
    };
    Scratch scratch(float* at) const {
        Scratch w;
        w.kt = at;
        w.vb = w.kt + kKeyBlock * hd;
        w.sc = w.vb + kKeyBlock * hd;         // [rows][kKeyBlock] scores, then probabilities
        w.acc = w.sc + max_rows() * kKeyBlock;  // [rows][hd]
        w.qs = w.acc + max_rows() * hd;        // [rows][hd] the queries times the scale
        w.mx = w.qs + max_rows() * hd;         // [rows] running maximum
        w.sum = w.mx + max_rows();             // [rows] running sum
        w.rescale = w.sum + max_rows();        // [rows] this key block's rescale of acc
        w.tmp = w.rescale + max_rows();        // [hd] one converted key row
        return w;
    }

    // w.acc, w.mx and w.sum of query block qb's rows against key blocks
    // [b0, b1) of its keys k, KV head kvh.
    void run(const Scratch& w, const QueryBlock& qb, const Keys& k, int64_t kvh, int64_t b0, int64_t b1) const {
        const int64_t rows = (qb.end - qb.begin) * group;
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = qb.begin + r / group, h = kvh * group + r % group;
            const float* qv = reinterpret_cast<const float*>(row_ptr(q, h, t));
            for (int64_t d = 0; d < hd; ++d) w.qs[r * hd + d] = qv[d] * scale;
        }
        std::fill(w.acc, w.acc + rows * hd, 0.0f);
        std::fill(w.mx, w.mx + rows, -INFINITY);
        std::fill(w.sum, w.sum + rows, 0.0f);
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t k0 = k.k_lo + b * kKeyBlock;
            const int64_t nk = std::min(kKeyBlock, k.p_last + 1 - k0);
            load_keys(kc, k.base + k0, nk, kvh * hd, hd, w.kt, w.tmp);
            load_values(vc, k.base + k0, nk, kvh * hd, hd, w.vb);
            scores(w.qs, rows, hd, w.kt, w.sc);
            for (int64_t r = 0; r < rows; ++r) softmax_row(w, qb.begin + r / group, r, k0, nk);
            int64_t r = 0;
            for (; r + kSumRows <= rows; r += kSumRows) {
                sums<kSumRows>(w.acc + r * hd, w.sc + r * kKeyBlock, w.rescale + r, w.vb, nk, hd);
            }
            for (; r < rows; ++r) sums<1>(w.acc + r * hd, w.sc + r * kKeyBlock, w.rescale + r, w.vb, nk, hd);
        }
    }

    // Row r (token t) of a key block's scores: mask, softcap, the online
    // softmax's update. The row's visible keys are one range [j_lo, j_hi)
    // of the block; a row with none keeps its accumulator (rescale 1,
    // probabilities 0).
    void softmax_row(const Scratch& w, int64_t t, int64_t r, int64_t k0, int64_t nk) const {
        const int64_t p = std::clamp<int64_t>(pos[t], 0, n_ctx_seq - 1);
        const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        const int64_t j_lo = std::clamp<int64_t>(lo - k0, 0, nk), j_hi = std::clamp<int64_t>(p + 1 - k0, 0, nk);
        float* s = w.sc + r * kKeyBlock;
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
            w.rescale[r] = 1.0f;
            return;
        }
        const float m_new = std::max(w.mx[r], block_max);
        w.rescale[r] = fast_exp(w.mx[r] - m_new);
        float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
        for (int64_t j = j_lo; j < j_hi; ++j) {
            s[j] = fast_exp(s[j] - m_new);  // -inf and NaN give 0
            block_sum += s[j];
        }
        w.sum[r] = w.sum[r] * w.rescale[r] + block_sum;
        w.mx[r] = m_new;
    }

    // Query block qb's output rows for KV head kvh from `parts` partial
    // results (acc, mx and sum of the same rows over disjoint key ranges,
    // part i's at acc[i], mx[i], sum[i]).
    void finish(const Tensor& dst, const QueryBlock& qb, int64_t kvh, int parts, const float* const* acc,
                const float* const* mx, const float* const* sum) const {
        const int64_t rows = (qb.end - qb.begin) * group;
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = qb.begin + r / group, h = kvh * group + r % group;
            float* out = reinterpret_cast<float*>(row_ptr_mut(dst, t)) + h * hd;
            float m = -INFINITY;
            for (int i = 0; i < parts; ++i) m = std::max(m, mx[i][r]);
            float total = 0.0f;
            std::fill(out, out + hd, 0.0f);
            for (int i = 0; i < parts; ++i) {
                if (mx[i][r] == -INFINITY) continue;  // no visible key in that part
                const float f = parts == 1 ? 1.0f : fast_exp(mx[i][r] - m);
                total += f * sum[i][r];
                const float* a = acc[i] + r * hd;
                for (int64_t d = 0; d < hd; ++d) out[d] += f * a[d];
            }
            const float inv = total > 0.0f ? 1.0f / total : 0.0f;
            for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
        }
    }
};

// Key ranges are split into parts when there are fewer items (query block,
// KV head) than threads, as when decoding with few KV heads: about two
// parts per thread, each part's partial result kept for the merge.
int64_t key_parts(int64_t items, int nth) { return items < nth ? (2 * nth + items - 1) / items : 1; }

size_t partial_floats(const Attention& a) { return static_cast<size_t>(a.max_rows() * (a.hd + 2)); }

}  // namespace

size_t attention_scratch(const Tensor& dst, int nth) {
    const Attention a(dst);
    // The fewest items the tokens can make (blocks of kQueryBlock); with
    // fewer items than threads, items x parts < 3 nth.
    const int64_t fewest = (dst.src[0]->ne[2] + kQueryBlock - 1) / kQueryBlock * a.n_head_kv;
    const size_t partials = fewest < nth ? partial_floats(a) * 3 * static_cast<size_t>(nth) : 0;
    return (scratch_floats(a.hd, a.group) * static_cast<size_t>(nth) + partials) * sizeof(float);
}

void attention(const KernelContext& ctx, const Tensor& dst) {
    const Attention a(dst);
    const int64_t T = a.q.ne[2];
    float* const scratch = reinterpret_cast<float*>(ctx.scratch);
    const Attention::Scratch w = a.scratch(scratch + scratch_floats(a.hd, a.group) * static_cast<size_t>(ctx.ith));

    // Units (query block, KV head, key part) are dealt on demand, the last
    // query blocks first: in a causal prompt they see the most keys, and a
    // static split left one thread three times the other's share.
    const std::vector<QueryBlock> blocks = query_blocks(a.pos, a.seq, T);
    const int64_t items = static_cast<int64_t>(blocks.size()) * a.n_head_kv;
    const int64_t parts = key_parts(items, ctx.nth);
    float* const partials = scratch + scratch_floats(a.hd, a.group) * static_cast<size_t>(ctx.nth);
    const size_t part_size = partial_floats(a);
    for (int64_t unit = ctx.ith; unit < items * parts; unit = ctx.next_item()) {
        const int64_t item = items - 1 - unit / parts, part = unit % parts;
        const QueryBlock& qb = blocks[static_cast<size_t>(item / a.n_head_kv)];
        const int64_t kvh = item % a.n_head_kv;
        const Attention::Keys k = a.keys(qb);
        a.run(w, qb, k, kvh, k.n_blocks * part / parts, k.n_blocks * (part + 1) / parts);
        if (parts == 1) {
            const float* acc[] = {w.acc};
            const float* mx[] = {w.mx};
            const float* sum[] = {w.sum};
            a.finish(dst, qb, kvh, 1, acc, mx, sum);
            continue;
        }
        const int64_t rows = (qb.end - qb.begin) * a.group;
        float* keep = partials + static_cast<size_t>(item * parts + part) * part_size;
        std::copy(w.acc, w.acc + rows * a.hd, keep);
        std::copy(w.mx, w.mx + rows, keep + a.max_rows() * a.hd);
        std::copy(w.sum, w.sum + rows, keep + a.max_rows() * a.hd + a.max_rows());
    }
    if (parts == 1) return;
    // The parts of each item merged, items shared out among the threads.
    ctx.barrier();
    int64_t begin, end;
    split_range(items, ctx.ith, ctx.nth, begin, end);
    std::vector<const float*> acc(static_cast<size_t>(parts)), mx(acc.size()), sum(acc.size());
    for (int64_t item = begin; item < end; ++item) {
        for (int64_t part = 0; part < parts; ++part) {
            const float* keep = partials + static_cast<size_t>(item * parts + part) * part_size;
            acc[static_cast<size_t>(part)] = keep;
            mx[static_cast<size_t>(part)] = keep + a.max_rows() * a.hd;
            sum[static_cast<size_t>(part)] = keep + a.max_rows() * a.hd + a.max_rows();
        }
        a.finish(dst, blocks[static_cast<size_t>(item / a.n_head_kv)], item % a.n_head_kv, static_cast<int>(parts),
                 acc.data(), mx.data(), sum.data());
    }
}

}  // namespace lantern::cpu
