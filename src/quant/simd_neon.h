// The NEON tier of simd.h (AArch64). A "vector" here is a pair of 128-bit
// registers, so that it holds one 32-element block (one piece) as the AVX2
// tier's does: every kernel written against simd.h compiles unchanged.
//
// The integer dot products take SDOT where the target has it
// (__ARM_FEATURE_DOTPROD: ARMv8.2-A and later, e.g. -march=armv8.2-a+dotprod
// for Cortex-A76 / Neoverse N1 / Apple M1), widening multiplies otherwise.
// SDOT multiplies signed bytes, so dot_u8s8 here needs u < 128; its callers
// pass quants below 64 and constants up to 16 (the Q8_0 offset of 128 is
// taken only with VNNI, which this tier does not claim).
//
// Comparisons follow x86's operand order where NaNs meet them (max_f and
// min_f return the second operand unless the first compares greater or
// smaller), so quantization treats NaN lanes alike on every tier.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace lantern::quant::simd {

struct VI {
    int32x4_t lo, hi;
};
struct VF {
    float32x4_t lo, hi;
};
inline constexpr int kBytes = 32;

namespace neon {

inline int8x16_t s8(int32x4_t v) { return vreinterpretq_s8_s32(v); }
inline uint8x16_t u8(int32x4_t v) { return vreinterpretq_u8_s32(v); }
inline int32x4_t i32(int8x16_t v) { return vreinterpretq_s32_s8(v); }
inline int32x4_t i32(uint8x16_t v) { return vreinterpretq_s32_u8(v); }
inline int32x4_t i32(int16x8_t v) { return vreinterpretq_s32_s16(v); }

// acc + sum of four a * b products per int32 lane (signed bytes).
inline int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(a, b));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
#endif
}

// vpmaddubsw on 16 bytes: saturated int16 sums of the pairs u[2i] s[2i] +
// u[2i + 1] s[2i + 1], u unsigned and s signed.
inline int16x8_t maddubs16(uint8x16_t u, int8x16_t s) {
    const int16x8_t lo = vmulq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(u))), vmovl_s8(vget_low_s8(s)));
    const int16x8_t hi = vmulq_s16(vreinterpretq_s16_u16(vmovl_high_u8(u)), vmovl_high_s8(s));
    return vqaddq_s16(vuzp1q_s16(lo, hi), vuzp2q_s16(lo, hi));
}

// vpmaddwd on eight int16: int32 sums of the pairs a[2i] b[2i] + a[2i + 1] b[2i + 1].
inline int32x4_t madd8(int16x8_t a, int16x8_t b) {
    return vpaddq_s32(vmull_s16(vget_low_s16(a), vget_low_s16(b)), vmull_high_s16(a, b));
}

// x86's maxps / minps: a when it compares greater (smaller), else b.
inline float32x4_t max4(float32x4_t a, float32x4_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
inline float32x4_t min4(float32x4_t a, float32x4_t b) { return vbslq_f32(vcltq_f32(a, b), a, b); }

}  // namespace neon

inline VI load_i(const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return {neon::i32(vld1q_u8(b)), neon::i32(vld1q_u8(b + 16))};
}
inline void store_i(void* p, VI v) {
    auto* b = static_cast<uint8_t*>(p);
    vst1q_u8(b, neon::u8(v.lo));
    vst1q_u8(b + 16, neon::u8(v.hi));
}
inline VF load_f(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline void store_f(float* p, VF v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
inline VI zero_i() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
inline VF zero_f() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
inline VI splat_i8(int8_t v) { return {neon::i32(vdupq_n_s8(v)), neon::i32(vdupq_n_s8(v))}; }
inline VF splat_f(float v) { return {vdupq_n_f32(v), vdupq_n_f32(v)}; }
inline VI splat_i32(int32_t v) { return {vdupq_n_s32(v), vdupq_n_s32(v)}; }
// 8 bytes at p, zero-extended to int32.
inline VI widen_u8(const uint8_t* p) {
    const uint16x8_t w = vmovl_u8(vld1_u8(p));
    return {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))), vreinterpretq_s32_u32(vmovl_high_u16(w))};
}
inline VI add_i32(VI a, VI b) { return {vaddq_s32(a.lo, b.lo), vaddq_s32(a.hi, b.hi)}; }
inline VI sub_i32(VI a, VI b) { return {vsubq_s32(a.lo, b.lo), vsubq_s32(a.hi, b.hi)}; }
inline VI or_i(VI a, VI b) { return {vorrq_s32(a.lo, b.lo), vorrq_s32(a.hi, b.hi)}; }
inline VI xor_i(VI a, VI b) { return {veorq_s32(a.lo, b.lo), veorq_s32(a.hi, b.hi)}; }
inline VF add_f(VF a, VF b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
inline VF mul_f(VF a, VF b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
// a * b + c, fused.
inline VF fmadd_f(VF a, VF b, VF c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
inline VF max_f(VF a, VF b) { return {neon::max4(a.lo, b.lo), neon::max4(a.hi, b.hi)}; }
inline VF min_f(VF a, VF b) { return {neon::min4(a.lo, b.lo), neon::min4(a.hi, b.hi)}; }
inline VF abs_f(VF v) { return {vabsq_f32(v.lo), vabsq_f32(v.hi)}; }
inline VF cvt_f(VI v) { return {vcvtq_f32_s32(v.lo), vcvtq_f32_s32(v.hi)}; }
// Rounds to nearest even, as the x86 tiers do in the default rounding mode.
inline VI cvt_round_i32(VF v) { return {vcvtnq_s32_f32(v.lo), vcvtnq_s32_f32(v.hi)}; }
inline VI maddubs(VI u, VI s) {
    return {neon::i32(neon::maddubs16(neon::u8(u.lo), neon::s8(s.lo))),
            neon::i32(neon::maddubs16(neon::u8(u.hi), neon::s8(s.hi)))};
}
inline VI madd(VI a, VI b) {
    return {neon::madd8(vreinterpretq_s16_s32(a.lo), vreinterpretq_s16_s32(b.lo)),
            neon::madd8(vreinterpretq_s16_s32(a.hi), vreinterpretq_s16_s32(b.hi))};
}

// acc + sum of four u8 * s8 products per int32 lane; u < 128 (above).
inline VI dot_u8s8(VI acc, VI u, VI s) {
    return {neon::dot4(acc.lo, neon::s8(u.lo), neon::s8(s.lo)), neon::dot4(acc.hi, neon::s8(u.hi), neon::s8(s.hi))};
}
// As dot_u8s8 for two signed operands.
inline VI dot_s8s8(VI acc, VI w, VI a) { return dot_u8s8(acc, w, a); }

inline float hsum_f(VF v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }
inline int32_t hsum_i32(VI v) { return vaddvq_s32(vaddq_s32(v.lo, v.hi)); }
inline float hmax_f(VF v) { return vmaxvq_f32(vmaxq_f32(v.lo, v.hi)); }

// 8 int32 -> 8 int8 (saturating) at dst.
inline void store_i32_as_i8(int8_t* dst, VI v) {
    vst1_s8(dst, vqmovn_s16(vcombine_s16(vqmovn_s32(v.lo), vqmovn_s32(v.hi))));
}

inline constexpr int kPieces = 1;

inline VI load_pieces(const void* const (&p)[kPieces]) { return load_i(p[0]); }
// 16 bytes at p[0] as 32 nibbles: the low nibbles, then the high ones.
inline VI load_nibble_pieces(const void* const (&p)[kPieces]) {
    const uint8x16_t x = vld1q_u8(static_cast<const uint8_t*>(p[0]));
    return {neon::i32(vandq_u8(x, vdupq_n_u8(0x0F))), neon::i32(vshrq_n_u8(x, 4))};
}
// Bytes idx (each 0..15) looked up in a 16-byte table.
inline VI lut16(const int8_t* table, VI idx) {
    const int8x16_t t = vld1q_s8(table);
    return {neon::i32(vqtbl1q_s8(t, neon::u8(idx.lo))), neon::i32(vqtbl1q_s8(t, neon::u8(idx.hi)))};
}
// Byte j = (bit j of the little-endian uint32 at p[0]) ? value : 0.
inline VI bit_pieces(const void* const (&p)[kPieces], int8_t value) {
    uint32_t bits;
    std::memcpy(&bits, p[0], 4);
    const uint8x16_t word = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    // Byte j takes byte j / 8 of the word, then keeps bit j % 8 of it.
    const uint8x16_t pick_lo = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    const uint8x16_t pick_hi = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vdupq_n_u8(static_cast<uint8_t>(value));
    return {neon::i32(vandq_u8(vtstq_u8(vqtbl1q_u8(word, pick_lo), bit), v)),
            neon::i32(vandq_u8(vtstq_u8(vqtbl1q_u8(word, pick_hi), bit), v))};
}
inline VF splat_pieces(const float (&v)[kPieces]) { return splat_f(v[0]); }
// The fp16 value at p in every lane (the stride is the x86 tiers' concern).
template <int kStride>
inline VF splat_fp16_pieces(const void* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)));
    return {f, f};
}

inline constexpr int kFloats = kBytes / 4;  // floats (or int32) per vector

}  // namespace lantern::quant::simd
