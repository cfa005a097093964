// Dot-product tiles of the K-quants against Q8_K activations.
//
// Each weight super-block is unpacked once (kquant.h) and then multiplied with
// the NC activation super-blocks: vpmaddubsw of the unsigned quants with the
// int8 activations gives int16 pair sums (< 2 * 63 * 127, no saturation),
// vpmaddwd with the per-pair scales scx turns them into scaled int32 sums, and
// the min / offset term comes from the activations' bsums in one more vpmaddwd.
// With one activation row (decoding) each type instead takes the same
// products straight from its blocks (dot_direct; AVX-512 every type, AVX2
// Q4_K and Q5_K): the unpacked super-block would be read once, and writing
// and reading it back was most of the work.
#include <cstring>
#include <type_traits>

#include "quant/kernels.h"
#include "quant/kquant.h"
#include "quant/simd.h"
#include "quant/tile.h"

namespace lantern::quant {
namespace {

using kquant::Unpacked;

#if LANTERN_SIMD_X86
// acc + factor * (the activation's sums per 16 elements . per_group, 16
// int16): the mins' or the offset's term of a super-block.
inline simd::VF add_group_term(const BlockQ8_K& a, __m256i per_group, float factor, simd::VF acc) {
    const __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), per_group);
    return simd::fmadd_f(simd::widen_f(_mm256_cvtepi32_ps(sums)), simd::splat_f(factor), acc);
}

// acc + the dot of one unpacked super-block with one activation super-block,
// spread over the lanes.
inline simd::VF dot_superblock(const Unpacked& w, const BlockQ8_K& a, simd::VF acc) {
    using simd::VI;
    VI isum = simd::zero_i();
    for (int p = 0; p < kQKK; p += simd::kBytes) {
        const VI pairs = simd::maddubs(simd::load_i(w.q + p), simd::load_i(a.qs + p));
        isum = simd::add_i32(isum, simd::madd(pairs, simd::load_i(w.scx + p / 2)));
    }
    acc = simd::fmadd_f(simd::cvt_f(isum), simd::splat_f(w.d * a.d), acc);
    return add_group_term(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(w.mn)), -w.dm * a.d, acc);
}

// Q4_K/Q5_K's eight sub-block mins (bytes of mn, scales_mins_k4) as the
// sixteen groups' int16 (each min twice).
inline __m256i sub_block_mins(const uint32_t (&mn)[2]) {
    const __m128i m8 = _mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0]));
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(m8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
}
#elif LANTERN_SIMD_WIDTH == 128
// NEON: each 16-element group's integer dot (quants < 64, so signed bytes
// serve) times its scale, in four int32 lanes; the mins' term from the
// activation's bsums in the other half of the vector.
inline simd::VF dot_superblock(const Unpacked& w, const BlockQ8_K& a, simd::VF acc) {
    int32x4_t isum = vdupq_n_s32(0);
    for (int g = 0; g < kQKK / 16; ++g) {
        const int8x16_t q = vreinterpretq_s8_u8(vld1q_u8(w.q + 16 * g));
        isum = vmlaq_n_s32(isum, simd::neon::dot4(vdupq_n_s32(0), q, vld1q_s8(a.qs + 16 * g)), w.scale(g));
    }
    int32x4_t msum = vdupq_n_s32(0);
    for (int g = 0; g < kQKK / 16; g += 8) {
        const int16x8_t mn = vld1q_s16(w.mn + g), bs = vld1q_s16(a.bsums + g);
        msum = vmlal_s16(msum, vget_low_s16(mn), vget_low_s16(bs));
        msum = vmlal_high_s16(msum, mn, bs);
    }
    acc.lo = vfmaq_n_f32(acc.lo, vcvtq_f32_s32(isum), w.d * a.d);
    acc.hi = vfmaq_n_f32(acc.hi, vcvtq_f32_s32(msum), -w.dm * a.d);
    return acc;
}
#else
inline float dot_superblock(const Unpacked& w, const BlockQ8_K& a) {
    int isum = 0, msum = 0;
    for (int g = 0; g < kQKK / 16; ++g) {
        int gsum = 0;
        for (int e = 16 * g; e < 16 * g + 16; ++e) gsum += w.q[e] * a.qs[e];
        isum += gsum * w.scale(g);
        msum += w.mn[g] * a.bsums[g];
    }
    return a.d * (w.d * static_cast<float>(isum) - w.dm * static_cast<float>(msum));
}
#endif

#if LANTERN_SIMD_WIDTH == 512
// The 32 bytes at p in both halves of a vector.
inline __m512i twice(const uint8_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
}

// Per-64-bit-lane counts: lo in the first half of a vector, hi in the second.
inline __m512i halves(int lo, int hi) { return _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo); }

// dot_superblock for Q4_K and Q5_K without Unpacked, for tiles of one
// activation row: the quants, the scales and the mins stay in registers
// (there the unpacked super-block is read once, and its stores and loads
// were most of the work). 2-core Xeon, synthetic tinyllama Q4_K, tg: two
// threads 21.5 -> 26.6 t/s, one thread 11.1 -> 14.1 (Q5_K, two threads:
// 19.8 -> 24.3); Gemma 3 270M Q4_K_M 56.5 -> 59.1. Chunk j of 64 elements
// is the low then the high nibbles of qs[32j .. 32j + 31], that is
// sub-blocks 2j and 2j + 1 (Q5_K: bit 2j, then 2j + 1, of qh[0 .. 31] above
// them).
template <class Block>
inline simd::VF dot_q45_K(const Block& w, const BlockQ8_K& a, simd::VF acc) {
    uint32_t sc[2], mn[2];
    kquant::scales_mins_k4(w.scales, sc, mn);
    const __m512i scales = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))));
    __m512i high = _mm512_setzero_si512();
    if constexpr (std::is_same_v<Block, BlockQ5_K>) high = twice(w.qh);
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
        __m512i q = _mm512_and_si512(_mm512_srlv_epi64(twice(w.qs + 32 * j), halves(0, 4)), _mm512_set1_epi8(0x0F));
        if constexpr (std::is_same_v<Block, BlockQ5_K>) {
            const __m512i bit = _mm512_and_si512(_mm512_srlv_epi64(high, halves(2 * j, 2 * j + 1)), _mm512_set1_epi8(0x01));
            q = _mm512_or_si512(q, _mm512_slli_epi64(bit, 4));
        }
        const __m512i pairs = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a.qs + 64 * j));
        // int16 lanes 0..15 take sub-block 2j's scale, 16..31 sub-block 2j + 1's.
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * j)),
                                               _mm256_set1_epi16(static_cast<short>(2 * j + 1)), 1);
        isum = _mm512_add_epi32(isum, _mm512_madd_epi16(pairs, _mm512_permutexvar_epi16(idx, scales)));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(fp16_to_f32(w.d) * a.d), acc);
    return add_group_term(a, sub_block_mins(mn), -fp16_to_f32(w.dmin) * a.d, acc);
}

// For chunk k (64 elements) of a type with a scale per 16 elements: int16
// lane l (elements 2l, 2l + 1 of the chunk) takes scale 4k + l / 8.
inline __m512i lane_scale(int k) {
    const __m512i quarter = _mm512_set_epi64(0x0003000300030003ll, 0x0003000300030003ll, 0x0002000200020002ll,
                                             0x0002000200020002ll, 0x0001000100010001ll, 0x0001000100010001ll, 0, 0);
    return _mm512_add_epi16(quarter, _mm512_set1_epi16(static_cast<short>(4 * k)));
}

// The same for Q2_K and Q3_K. Chunk 2h + c of 64 elements: bits 4c, 4c + 1
// (first 32) or 4c + 2, 4c + 3 (last 32) of qs[32h .. 32h + 31] (Q3_K:
// with bit 4h + 2c, or 4h + 2c + 1, of hmask[0 .. 31] above them); a scale
// per 16 elements (Q2_K: unsigned, with a min; Q3_K: signed, the offset 4
// through the activation's sums). Synthetic tinyllama, tg with two threads:
// Q2_K 27.4-31.4 -> 38.4-39.7 t/s, Q3_K 23.1-23.6 -> 29.8-32.0.
template <class Block>
inline simd::VF dot_q23_K(const Block& w, const BlockQ8_K& a, simd::VF acc) {
    constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_K>;
    uint32_t sc[4], mn[4] = {};
    if constexpr (kQ3) {
        kquant::scales_q3_K(w.scales, sc);
    } else {
        kquant::scales_mins_q2_K(w.scales, sc, mn);
    }
    const __m128i sc8 = _mm_setr_epi32(static_cast<int>(sc[0]), static_cast<int>(sc[1]), static_cast<int>(sc[2]),
                                       static_cast<int>(sc[3]));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);  // Q2_K's are < 16: the same as unsigned
    const __m512i scales = _mm512_castsi256_si512(sc16);
    __m512i hmask = _mm512_setzero_si512();
    if constexpr (kQ3) hmask = twice(w.hmask);
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        const __m512i both = twice(w.qs + 32 * h);
        for (int c = 0; c < 2; ++c) {
            __m512i q = _mm512_and_si512(_mm512_srlv_epi64(both, halves(4 * c, 4 * c + 2)), _mm512_set1_epi8(0x03));
            if constexpr (kQ3) {
                const int b0 = 4 * h + 2 * c;
                const __m512i bit = _mm512_and_si512(_mm512_srlv_epi64(hmask, halves(b0, b0 + 1)), _mm512_set1_epi8(0x01));
                q = _mm512_or_si512(q, _mm512_slli_epi64(bit, 2));
            }
            const int k = 2 * h + c;
            const __m512i pairs = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a.qs + 64 * k));
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(pairs, _mm512_permutexvar_epi16(lane_scale(k), scales)));
        }
    }
    const float d = fp16_to_f32(w.d) * a.d;
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
    if constexpr (kQ3) {
        return add_group_term(a, _mm256_slli_epi16(sc16, 2), -d, acc);  // sc * (q - 4)
    } else {
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(mn[0]), static_cast<int>(mn[1]),
                                                                static_cast<int>(mn[2]), static_cast<int>(mn[3])));
        return add_group_term(a, m16, -fp16_to_f32(w.dmin) * a.d, acc);
    }
}

// The same for Q6_K. Chunk 2h + c of 64 elements: nibble c of ql[64h ..
// 64h + 63] with bits 4c, 4c + 1 (first 32) or 4c + 2, 4c + 3 (last 32) of
// qh[32h .. 32h + 31] above it (unpack_q6_K's layout); a signed scale per
// 16 elements, and the offset 32 through the activation's sums. Synthetic
// tinyllama Q6_K, tg: two threads 20.3 -> 22.5 t/s, one thread 10.7 -> 11.8.
inline simd::VF dot_q6_K(const BlockQ6_K& w, const BlockQ8_K& a, simd::VF acc) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
    const __m512i scales = _mm512_castsi256_si512(sc16);
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        const __m512i low = _mm512_loadu_si512(w.ql + 64 * h);
        const __m512i high = twice(w.qh + 32 * h);
        for (int c = 0; c < 2; ++c) {
            const __m512i nib = _mm512_and_si512(_mm512_srli_epi64(low, 4 * c), _mm512_set1_epi8(0x0F));
            const __m512i top = _mm512_and_si512(_mm512_srlv_epi64(high, halves(4 * c, 4 * c + 2)), _mm512_set1_epi8(0x03));
            const __m512i q = _mm512_or_si512(nib, _mm512_slli_epi64(top, 4));
            const int k = 2 * h + c;
            const __m512i pairs = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a.qs + 64 * k));
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(pairs, _mm512_permutexvar_epi16(lane_scale(k), scales)));
        }
    }
    const float d = fp16_to_f32(w.d) * a.d;
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
    return add_group_term(a, _mm256_slli_epi16(sc16, 5), -d, acc);  // sc * (q - 32)
}

// The direct dot product of each type (tiles of one activation row).
inline simd::VF dot_direct(const BlockQ2_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q23_K(w, a, acc); }
inline simd::VF dot_direct(const BlockQ3_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q23_K(w, a, acc); }
inline simd::VF dot_direct(const BlockQ4_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q45_K(w, a, acc); }
inline simd::VF dot_direct(const BlockQ5_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q45_K(w, a, acc); }
inline simd::VF dot_direct(const BlockQ6_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q6_K(w, a, acc); }
template <class K>
constexpr bool kDirect = true;
#elif LANTERN_SIMD_WIDTH == 256
// AVX2: Q4_K and Q5_K as above, a sub-block of 32 elements per vector (its
// scale broadcast). Haswell code on the 2-core Xeon, synthetic tinyllama,
// tg with two threads: Q4_K 22.1 -> 24.5 t/s, Q5_K 17.7 -> 19.8.
template <class Block>
inline simd::VF dot_q45_K(const Block& w, const BlockQ8_K& a, simd::VF acc) {
    uint32_t sc[2], mn[2];
    kquant::scales_mins_k4(w.scales, sc, mn);
    uint8_t scale[8];
    std::memcpy(scale, sc, 8);
    __m256i high = _mm256_setzero_si256();
    if constexpr (std::is_same_v<Block, BlockQ5_K>) high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * j));
        for (int h = 0; h < 2; ++h) {  // sub-block 2j + h
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(packed, 4 * h), _mm256_set1_epi8(0x0F));
            if constexpr (std::is_same_v<Block, BlockQ5_K>) {
                const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(high, 2 * j + h), _mm256_set1_epi8(0x01));
                q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
            }
            const __m256i pairs = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * j + 32 * h)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(scale[2 * j + h])));
        }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(fp16_to_f32(w.d) * a.d), acc);
    return add_group_term(a, sub_block_mins(mn), -fp16_to_f32(w.dmin) * a.d, acc);
}

inline simd::VF dot_direct(const BlockQ4_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q45_K(w, a, acc); }
inline simd::VF dot_direct(const BlockQ5_K& w, const BlockQ8_K& a, simd::VF acc) { return dot_q45_K(w, a, acc); }
template <class K>
constexpr bool kDirect = std::is_same_v<K, kquant::Q4_K> || std::is_same_v<K, kquant::Q5_K>;
#endif

// Weights are prefetched kPrefetchAhead super-blocks ahead (prefetch_ahead,
// tile.h): Q6_K from DRAM 3.8 -> 5.9 GB/s. A 2-core AMD EPYC with AVX2
// wants about 4 KB ahead, into the next tile's rows, as the 32-element
// types do (dot_legacy.cpp): tinyllama Q4_K, two threads, alternated
// binaries: 4 super-blocks 18.3-18.9 t/s, 16 20.7-21.9, 32 23.6-27.0
// (llama.cpp on the same machine: 27.3-28.0).
#if LANTERN_SIMD_WIDTH == 256
constexpr int kPrefetchAhead = 32;
#else
constexpr int kPrefetchAhead = 4;
#endif

template <class K>
struct KTile {
    using Block = typename K::Block;

    template <int NR, int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* x, size_t bx, const void* y, size_t by) {
        const int64_t nb = n / kQKK;
        const Block* w[NR];
        const BlockQ8_K* a[NC];
        for (int r = 0; r < NR; ++r) w[r] = row_at<Block>(x, bx, r);
        for (int c = 0; c < NC; ++c) a[c] = row_at<BlockQ8_K>(y, by, c);
        Unpacked u;
#if LANTERN_SIMD_WIDTH
        simd::VF acc[NR][NC];
        for (auto& rr : acc)
            for (simd::VF& v : rr) v = simd::zero_f();
        for (int64_t b = 0; b < nb; ++b) {
            for (int r = 0; r < NR; ++r) {
                prefetch_ahead(w[r] + b, kPrefetchAhead * sizeof(Block), sizeof(Block));
#if LANTERN_SIMD_WIDTH == 512 || LANTERN_SIMD_WIDTH == 256
                if constexpr (NC == 1 && kDirect<K>) {
                    acc[r][0] = dot_direct(w[r][b], a[0][b], acc[r][0]);
                    continue;
                }
#endif
                K::unpack(w[r][b], u);
                for (int c = 0; c < NC; ++c) acc[r][c] = dot_superblock(u, a[c][b], acc[r][c]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < NC; ++c) s[static_cast<size_t>(c) * ldc + r] = simd::hsum_f(acc[r][c]);
#else
        float acc[NR][NC] = {};
        for (int64_t b = 0; b < nb; ++b) {
            for (int r = 0; r < NR; ++r) {
                K::unpack(w[r][b], u);
                for (int c = 0; c < NC; ++c) acc[r][c] += dot_superblock(u, a[c][b]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < NC; ++c) s[static_cast<size_t>(c) * ldc + r] = acc[r][c];
#endif
    }
};

// 4 x 4: one vector accumulator per pair; the unpacked super-block lives in
// L1, so the shape is bound by accumulators only (AVX2 measured 4 x 4 a little
// faster than 2 x 4 despite spilling some of them). NEON's vectors take two
// of its 32 registers: 2 x 4 keeps the accumulators in half of them
// (unmeasured: no ARM machine yet).
#if LANTERN_SIMD_WIDTH == 128
constexpr int kNR = 2, kNC = 4;
#elif LANTERN_SIMD_WIDTH
constexpr int kNR = 4, kNC = 4;
#else
constexpr int kNR = 2, kNC = 2;
#endif

template <class K>
constexpr DotKernel dot_kernel() {
    return {&TiledDot<KTile<K>, kNR, kNC>::vec_dot, kNR, kNC, kNR};
}

}  // namespace

const DotKernel kDotQ2_K = dot_kernel<kquant::Q2_K>();
const DotKernel kDotQ3_K = dot_kernel<kquant::Q3_K>();
const DotKernel kDotQ4_K = dot_kernel<kquant::Q4_K>();
const DotKernel kDotQ5_K = dot_kernel<kquant::Q5_K>();
const DotKernel kDotQ6_K = dot_kernel<kquant::Q6_K>();

}  // namespace lantern::quant
