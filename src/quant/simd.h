// The vector primitives the quantized kernels are written in: one set per
// instruction tier, chosen at compile time, so that each kernel is written
// once and compiles to AVX-512, AVX2 or NEON (or to its scalar fallback when
// LANTERN_SIMD_WIDTH is 0).
//
//   512: AVX-512 F/BW/VL/DQ + FMA + F16C. A vector holds 64 bytes, i.e. two
//        32-element blocks ("pieces") of int8 quants, or 16 floats.
//   256: AVX2 + FMA + F16C. One piece of 32 bytes, or 8 floats.
//   128: AArch64 NEON (simd_neon.h): one piece in a pair of registers.
// LANTERN_SIMD_X86 is set for the first two: code written in x86 intrinsics
// rather than these primitives tests it.
// LANTERN_SIMD_VNNI additionally selects vpdpbusd (AVX512-VNNI or AVX-VNNI)
// for the u8 x s8 dot products instead of vpmaddubsw + vpmaddwd.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__)
#define LANTERN_SIMD_WIDTH 512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LANTERN_SIMD_WIDTH 256
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define LANTERN_SIMD_WIDTH 128
#else
#define LANTERN_SIMD_WIDTH 0
#endif
#define LANTERN_SIMD_X86 (LANTERN_SIMD_WIDTH == 512 || LANTERN_SIMD_WIDTH == 256)

#if LANTERN_SIMD_WIDTH == 512 && defined(__AVX512VNNI__)
#define LANTERN_SIMD_VNNI 1
#elif LANTERN_SIMD_WIDTH == 256 && (defined(__AVXVNNI__) || defined(__AVX512VNNI__))
#define LANTERN_SIMD_VNNI 1
#else
#define LANTERN_SIMD_VNNI 0
#endif

#if LANTERN_SIMD_WIDTH == 128
#include "quant/simd_neon.h"
#elif LANTERN_SIMD_X86
// GCC 12's AVX-512 headers initialise their "undefined" vectors from
// themselves, which -Wuninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace lantern::quant::simd {

#if LANTERN_SIMD_WIDTH == 512

using VI = __m512i;
using VF = __m512;
inline constexpr int kBytes = 64;

inline VI load_i(const void* p) { return _mm512_loadu_si512(p); }
inline void store_i(void* p, VI v) { _mm512_storeu_si512(p, v); }
inline VF load_f(const float* p) { return _mm512_loadu_ps(p); }
inline void store_f(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline VI zero_i() { return _mm512_setzero_si512(); }
inline VF zero_f() { return _mm512_setzero_ps(); }
inline VI splat_i8(int8_t v) { return _mm512_set1_epi8(v); }
inline VF splat_f(float v) { return _mm512_set1_ps(v); }
inline VI splat_i32(int32_t v) { return _mm512_set1_epi32(v); }
// 16 bytes at p, zero-extended to int32.
inline VI widen_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VI add_i32(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI sub_i32(VI a, VI b) { return _mm512_sub_epi32(a, b); }
inline VI or_i(VI a, VI b) { return _mm512_or_si512(a, b); }
inline VI xor_i(VI a, VI b) { return _mm512_xor_si512(a, b); }
inline VF add_f(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF mul_f(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF fmadd_f(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline VF max_f(VF a, VF b) { return _mm512_max_ps(a, b); }
inline VF min_f(VF a, VF b) { return _mm512_min_ps(a, b); }
inline VF abs_f(VF v) { return _mm512_abs_ps(v); }
inline VF cvt_f(VI v) { return _mm512_cvtepi32_ps(v); }
// Rounds with the current rounding mode (nearest even by default).
inline VI cvt_round_i32(VF v) { return _mm512_cvtps_epi32(v); }
inline VI maddubs(VI u, VI s) { return _mm512_maddubs_epi16(u, s); }
inline VI madd(VI a, VI b) { return _mm512_madd_epi16(a, b); }

// acc + sum of four u8 * s8 products per int32 lane. Without VNNI the pair
// sums go through int16: the caller guarantees 2 * max(u) * max|s| < 32768.
inline VI dot_u8s8(VI acc, VI u, VI s) {
#if LANTERN_SIMD_VNNI
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}
// As dot_u8s8 for two signed operands with |w|, |a| <= 127.
inline VI dot_s8s8(VI acc, VI w, VI a) {
    const VI a_signed = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), _mm512_setzero_si512(), a);
    return dot_u8s8(acc, _mm512_abs_epi8(w), a_signed);
}

inline float hsum_f(VF v) { return _mm512_reduce_add_ps(v); }
inline int32_t hsum_i32(VI v) { return _mm512_reduce_add_epi32(v); }
inline float hmax_f(VF v) { return _mm512_reduce_max_ps(v); }
// The 8 floats of v in the low half, zeros above.
inline VF widen_f(__m256 v) { return _mm512_insertf32x8(_mm512_setzero_ps(), v, 0); }

// 16 int32 -> 16 int8 (saturating) at dst.
inline void store_i32_as_i8(int8_t* dst, VI v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtsepi32_epi8(v));
}

// ---- pieces: a vector made of one 32-element block per 256-bit half ------
inline constexpr int kPieces = 2;

// 32 bytes from each p[i].
inline VI load_pieces(const void* const (&p)[kPieces]) {
    const __m256i lo = _mm256_loadu_si256(static_cast<const __m256i*>(p[0]));
    const __m256i hi = _mm256_loadu_si256(static_cast<const __m256i*>(p[1]));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
// 16 bytes from each p[i], as 32 nibbles: the low nibbles, then the high ones.
inline VI load_nibble_pieces(const void* const (&p)[kPieces]) {
    const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p[0])));
    const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p[1])));
    const VI both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const VI shift = _mm512_set_epi32(4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(both, shift), _mm512_set1_epi8(0x0F));
}
// Bytes idx (each 0..15) looked up in a 16-byte table (16-byte aligned).
inline VI lut16(const int8_t* table, VI idx) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table))), idx);
}
// Byte j of piece i = (bit j of the little-endian uint32 at p[i]) ? value : 0.
inline VI bit_pieces(const void* const (&p)[kPieces], int8_t value) {
    uint32_t lo, hi;
    std::memcpy(&lo, p[0], 4);
    std::memcpy(&hi, p[1], 4);
    return _mm512_maskz_mov_epi8(static_cast<__mmask64>(hi) << 32 | lo, _mm512_set1_epi8(value));
}
// v[i] in every float lane of piece i.
inline VF splat_pieces(const float (&v)[kPieces]) {
    return _mm512_insertf32x8(_mm512_set1_ps(v[0]), _mm256_set1_ps(v[1]), 1);
}
// The fp16 values at p and p + kStride bytes, as floats in every lane of
// piece 0 and piece 1 respectively. Reads 32 bytes from p (64 when the second
// value lies beyond them): p and p + kStride are two adjacent blocks' fields,
// so the caller ensures p + kStride + 32 (+32) is readable.
template <int kStride>
inline VF splat_fp16_pieces(const void* p) {
    static_assert(kStride % 2 == 0 && kStride + 2 <= 64);
    constexpr short k1 = kStride / 2;
    if constexpr (kStride + 2 <= 32) {
        const __m256i raw = _mm256_loadu_si256(static_cast<const __m256i*>(p));
        const __m256i idx = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, k1, k1, k1, k1, k1, k1, k1, k1);
        return _mm512_cvtph_ps(_mm256_permutexvar_epi16(idx, raw));
    } else {
        const __m512i raw = _mm512_loadu_si512(p);
        const __m512i idx = _mm512_setr_epi64(0, 0, k1 * 0x0001000100010001ll, k1 * 0x0001000100010001ll, 0, 0, 0, 0);
        return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, raw)));
    }
}

#else  // LANTERN_SIMD_WIDTH == 256

using VI = __m256i;
using VF = __m256;
inline constexpr int kBytes = 32;

inline VI load_i(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store_i(void* p, VI v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline VF load_f(const float* p) { return _mm256_loadu_ps(p); }
inline void store_f(float* p, VF v) { _mm256_storeu_ps(p, v); }
inline VI zero_i() { return _mm256_setzero_si256(); }
inline VF zero_f() { return _mm256_setzero_ps(); }
inline VI splat_i8(int8_t v) { return _mm256_set1_epi8(v); }
inline VF splat_f(float v) { return _mm256_set1_ps(v); }
inline VI splat_i32(int32_t v) { return _mm256_set1_epi32(v); }
inline VI widen_u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline VI add_i32(VI a, VI b) { return _mm256_add_epi32(a, b); }
inline VI sub_i32(VI a, VI b) { return _mm256_sub_epi32(a, b); }
inline VI or_i(VI a, VI b) { return _mm256_or_si256(a, b); }
inline VI xor_i(VI a, VI b) { return _mm256_xor_si256(a, b); }
inline VF add_f(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF mul_f(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF fmadd_f(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF max_f(VF a, VF b) { return _mm256_max_ps(a, b); }
inline VF min_f(VF a, VF b) { return _mm256_min_ps(a, b); }
inline VF abs_f(VF v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
inline VF cvt_f(VI v) { return _mm256_cvtepi32_ps(v); }
inline VI cvt_round_i32(VF v) { return _mm256_cvtps_epi32(v); }
inline VI maddubs(VI u, VI s) { return _mm256_maddubs_epi16(u, s); }
inline VI madd(VI a, VI b) { return _mm256_madd_epi16(a, b); }

inline VI dot_u8s8(VI acc, VI u, VI s) {
#if LANTERN_SIMD_VNNI && defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif LANTERN_SIMD_VNNI
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline VI dot_s8s8(VI acc, VI w, VI a) {
    return dot_u8s8(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

inline float hsum_f(VF v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline int32_t hsum_i32(VI v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}
inline float hmax_f(VF v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline VF widen_f(__m256 v) { return v; }

// 8 int32 -> 8 int8 (saturating) at dst.
inline void store_i32_as_i8(int8_t* dst, VI v) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(w, w));
}

inline constexpr int kPieces = 1;

inline VI load_pieces(const void* const (&p)[kPieces]) { return load_i(p[0]); }
inline VI load_nibble_pieces(const void* const (&p)[kPieces]) {
    const VI both = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p[0])));
    const VI shift = _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(both, shift), _mm256_set1_epi8(0x0F));
}
inline VI lut16(const int8_t* table, VI idx) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table))), idx);
}
inline VI bit_pieces(const void* const (&p)[kPieces], int8_t value) {
    uint32_t bits;
    std::memcpy(&bits, p[0], 4);
    // Byte j takes byte j / 8 of the word, then keeps bit j % 8 of it.
    const VI spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const VI bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const VI set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(value));
}
inline VF splat_pieces(const float (&v)[kPieces]) { return _mm256_set1_ps(v[0]); }
template <int kStride>
inline VF splat_fp16_pieces(const void* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

#endif

inline constexpr int kFloats = kBytes / 4;  // floats (or int32) per vector

}  // namespace lantern::quant::simd

#endif  // LANTERN_SIMD_X86
