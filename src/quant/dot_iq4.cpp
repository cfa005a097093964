// IQ4_XS's dot-product tile against Q8_K activations (IQ4_NL's is
// dot_legacy.cpp's LegacyTile).
//
// With one activation row (decoding) on x86 the products come straight from
// the blocks (dot_direct). Otherwise each weight super-block is unpacked once into its 256 table values
// (signed bytes, a 16-entry byte shuffle per 16 nibbles) and eight block
// scales, then multiplied with the NC activation super-blocks: per block
// of 32 an exact integer dot, times the block's scale, added up in int32
// (|value| <= 127, |scale| <= 32: a super-block's sum stays below 2^25) and
// scaled once by d_w * d_a.
#include "core/half.h"
#include "quant/iq4.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/tile.h"

namespace lantern::quant {
namespace {

constexpr int kBlocks = kQKK / kQK;

// The super-block's values into q[256] and its block scales into sc[8].
inline void unpack_xs(const BlockIQ4_XS& w, int8_t* q, int* sc) {
    for (int b = 0; b < kBlocks; ++b) sc[b] = iq4::xs_scale(w, b);
#if LANTERN_SIMD_X86
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(iq4::kValues));
    const __m128i low = _mm_set1_epi8(0x0F);
    for (int b = 0; b < kBlocks; ++b) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * b));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm_shuffle_epi8(table, _mm_and_si128(x, low)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16),
                         _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(x, 4), low)));
    }
#elif LANTERN_SIMD_WIDTH == 128
    const int8x16_t table = vld1q_s8(iq4::kValues);
    for (int b = 0; b < kBlocks; ++b) {
        const uint8x16_t x = vld1q_u8(w.qs + 16 * b);
        vst1q_s8(q + 32 * b, vqtbl1q_s8(table, vandq_u8(x, vdupq_n_u8(0x0F))));
        vst1q_s8(q + 32 * b + 16, vqtbl1q_s8(table, vshrq_n_u8(x, 4)));
    }
#else
    for (int b = 0; b < kBlocks; ++b) {
        for (int j = 0; j < kQK / 2; ++j) {
            q[32 * b + j] = iq4::kValues[w.qs[16 * b + j] & 0xF];
            q[32 * b + 16 + j] = iq4::kValues[w.qs[16 * b + j] >> 4];
        }
    }
#endif
}

// sum over the blocks b of sc[b] * (q . a over block b).
inline int superblock_dot(const int8_t* q, const int* sc, const int8_t* a) {
#if LANTERN_SIMD_X86
    __m256i acc = _mm256_setzero_si256();
    for (int b = 0; b < kBlocks; ++b) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * b));
        // |w| * (x with w's sign): no value is 0, and |w| <= 127 keeps the
        // pair sums within int16.
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(static_cast<short>(sc[b]))));
    }
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xB1)));
#elif LANTERN_SIMD_WIDTH == 128
    int32x4_t acc = vdupq_n_s32(0);
    for (int b = 0; b < kBlocks; ++b) {
        int32x4_t d = simd::neon::dot4(vdupq_n_s32(0), vld1q_s8(q + 32 * b), vld1q_s8(a + 32 * b));
        d = simd::neon::dot4(d, vld1q_s8(q + 32 * b + 16), vld1q_s8(a + 32 * b + 16));
        acc = vmlaq_n_s32(acc, d, sc[b]);
    }
    return vaddvq_s32(acc);
#else
    int sum = 0;
    for (int b = 0; b < kBlocks; ++b) {
        int s = 0;
        for (int j = 0; j < kQK; ++j) s += q[32 * b + j] * a[32 * b + j];
        sum += sc[b] * s;
    }
    return sum;
#endif
}

#if LANTERN_SIMD_X86
// acc + d_w * d_a * (the super-block's dot), straight from the block (one
// activation row, decoding): each block's 16 bytes of nibbles become its 32
// values in one 256-bit shuffle (low nibbles in the low lane, high in the
// high), so the 256 values are never stored and read back as unpack_xs's
// are. AVX2, on AVX-512 machines too (a 32-byte block's width).
inline __m256 dot_direct(const BlockIQ4_XS& w, const BlockQ8_K& a, __m256 acc) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(iq4::kValues)));
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256i isum = _mm256_setzero_si256();
    for (int b = 0; b < kBlocks; ++b) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * b));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), low);
        const __m256i v = _mm256_shuffle_epi8(table, nib);
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * b));
        // As superblock_dot: |v| times y with v's sign.
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(static_cast<short>(iq4::xs_scale(w, b)))));
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(fp16_to_f32(w.d) * a.d), acc);
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif

// IQ4_XS weights are prefetched this many super-blocks ahead: on AVX2 about
// 4 KB, into the next tile's rows, as the other tiles do (dot_legacy.cpp).
// 2-core AMD EPYC, tinyllama IQ4_XS, tg64 on two threads, alternated: 2
// blocks 18.9-20.6 t/s, 32 blocks 23.4-26.8 (llama.cpp there: 25.6).
#if LANTERN_SIMD_WIDTH == 256
constexpr int kPrefetchBlocks = 32;
#else
constexpr int kPrefetchBlocks = 2;
#endif

struct XsTile {
    template <int NR, int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* x, size_t bx, const void* y, size_t by) {
        const int64_t nb = n / kQKK;
        const BlockIQ4_XS* w[NR];
        const BlockQ8_K* a[NC];
        for (int r = 0; r < NR; ++r) w[r] = row_at<BlockIQ4_XS>(x, bx, r);
        for (int c = 0; c < NC; ++c) a[c] = row_at<BlockQ8_K>(y, by, c);
#if LANTERN_SIMD_X86
        if constexpr (NC == 1) {
            __m256 acc[NR];
            for (__m256& v : acc) v = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; ++i) {
                for (int r = 0; r < NR; ++r) {
                    prefetch_ahead(w[r] + i, kPrefetchBlocks * sizeof(BlockIQ4_XS), sizeof(BlockIQ4_XS));
                    acc[r] = dot_direct(w[r][i], a[0][i], acc[r]);
                }
            }
            for (int r = 0; r < NR; ++r) s[r] = hsum(acc[r]);
            return;
        }
#endif
        float acc[NR][NC] = {};
        alignas(32) int8_t q[NR][kQKK];
        int sc[NR][kBlocks];
        for (int64_t i = 0; i < nb; ++i) {
            for (int r = 0; r < NR; ++r) {
                prefetch_ahead(w[r] + i, kPrefetchBlocks * sizeof(BlockIQ4_XS), sizeof(BlockIQ4_XS));
                unpack_xs(w[r][i], q[r], sc[r]);
            }
            for (int c = 0; c < NC; ++c) {
                for (int r = 0; r < NR; ++r) {
                    acc[r][c] += fp16_to_f32(w[r][i].d) * a[c][i].d *
                                 static_cast<float>(superblock_dot(q[r], sc[r], a[c][i].qs));
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < NC; ++c) s[static_cast<size_t>(c) * ldc + r] = acc[r][c];
    }
};

}  // namespace

const DotKernel kDotIQ4_XS = {&TiledDot<XsTile, 4, 4>::vec_dot, 4, 4, 4};

}  // namespace lantern::quant
