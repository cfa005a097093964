// The K-quants (Q2_K .. Q6_K) in one common unpacked form.
//
// Each super-block of 256 elements is unpacked into unsigned quants q[256],
// one signed scale per 16-element group and one "min" multiplier per group.
// The dequantizer (quant_k.cpp) and every dot-product tile (dot_k.cpp) work on
// that form only, so the bit layouts live in exactly one place: the unpack_*
// functions below (inline: they run once per super-block in the tiles'
// inner loops). Each is its block's description in blocks.h written over
// 32-byte rows of quants (one AVX2 register each, or plain arrays). In terms of it, the published formulas are, for group g = e / 16:
//   kOffset == 0 (Q2_K, Q4_K, Q5_K): value[e] = (d * sc[g]) * q[e] - dm * mn[g]
//   kOffset != 0 (Q3_K, Q6_K):       value[e] = (d * sc[g]) * (q[e] - kOffset)
// and for the second kind mn[g] = kOffset * sc[g], dm = d, so that both kinds
// have  dot(value, a) = d * sum_g sc[g] * sum(q * a) - dm * sum_g mn[g] * sum(a),
// the group sums sum(a) being Q8_K's bsums.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/simd.h"

namespace lantern::quant::kquant {

struct Unpacked {
    alignas(64) uint8_t q[kQKK];        // unsigned quants, < 64
    alignas(64) int16_t scx[kQKK / 2];  // scx[j] = sc[j / 8]: the scale of elements 2j, 2j + 1
    alignas(32) int16_t mn[kQKK / 16];  // per group
    float d;
    float dm;
    int16_t scale(int g) const { return scx[8 * g]; }
};

// The eight 6-bit scales and mins of Q4_K/Q5_K's 12 scale bytes S:
//   j < 4:  sc = S[j] & 63,  m = S[j + 4] & 63
//   j >= 4: sc = (S[j + 4] & 0xF) | (S[j - 4] >> 6) << 4,
//           m  = (S[j + 4] >> 4) | (S[j] >> 6) << 4
// computed four at a time in little-endian 32-bit words: byte j of
// sc[0], sc[1] is the scale of sub-block j, j + 4 (likewise m).
inline void scales_mins_k4(const uint8_t* scales, uint32_t (&sc)[2], uint32_t (&m)[2]) {
    uint32_t w[3];
    std::memcpy(w, scales, 12);
    constexpr uint32_t kLow6 = 0x3F3F3F3F, kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
    sc[0] = w[0] & kLow6;
    sc[1] = (w[2] & kLow4) | ((w[0] >> 6) & kLow2) << 4;
    m[0] = w[1] & kLow6;
    m[1] = ((w[2] >> 4) & kLow4) | ((w[1] >> 6) & kLow2) << 4;
}

inline constexpr int kOffsetQ3_K = 4;
inline constexpr int kOffsetQ6_K = 32;


// 32 bytes of quants, with the few byte-wise operations the unpackers need;
// one AVX2 register, two NEON registers, or a plain array.
#if LANTERN_SIMD_X86
struct Bytes32 {
    __m256i v;
};
inline Bytes32 load32(const uint8_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
inline void store32(uint8_t* p, Bytes32 x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x.v); }
// (x >> shift) & mask in every byte (16-bit shifts: the mask drops the bits
// that crossed from the neighbouring byte).
inline Bytes32 bits(Bytes32 x, int shift, uint8_t mask) {
    return {_mm256_and_si256(_mm256_srli_epi16(x.v, shift), _mm256_set1_epi8(static_cast<char>(mask)))};
}
// x << shift in every byte; the caller's bytes have no bits that would cross.
inline Bytes32 shl(Bytes32 x, int shift) { return {_mm256_slli_epi16(x.v, shift)}; }
inline Bytes32 operator|(Bytes32 a, Bytes32 b) { return {_mm256_or_si256(a.v, b.v)}; }
#elif LANTERN_SIMD_WIDTH == 128
struct Bytes32 {
    uint8x16_t lo, hi;
};
inline Bytes32 load32(const uint8_t* p) { return {vld1q_u8(p), vld1q_u8(p + 16)}; }
inline void store32(uint8_t* p, Bytes32 x) {
    vst1q_u8(p, x.lo);
    vst1q_u8(p + 16, x.hi);
}
inline Bytes32 bits(Bytes32 x, int shift, uint8_t mask) {
    const int8x16_t right = vdupq_n_s8(static_cast<int8_t>(-shift));
    const uint8x16_t m = vdupq_n_u8(mask);
    return {vandq_u8(vshlq_u8(x.lo, right), m), vandq_u8(vshlq_u8(x.hi, right), m)};
}
inline Bytes32 shl(Bytes32 x, int shift) {
    const int8x16_t left = vdupq_n_s8(static_cast<int8_t>(shift));
    return {vshlq_u8(x.lo, left), vshlq_u8(x.hi, left)};
}
inline Bytes32 operator|(Bytes32 a, Bytes32 b) { return {vorrq_u8(a.lo, b.lo), vorrq_u8(a.hi, b.hi)}; }
#else
struct Bytes32 {
    uint8_t v[32];
};
inline Bytes32 load32(const uint8_t* p) {
    Bytes32 x;
    std::memcpy(x.v, p, 32);
    return x;
}
inline void store32(uint8_t* p, Bytes32 x) { std::memcpy(p, x.v, 32); }
inline Bytes32 bits(Bytes32 x, int shift, uint8_t mask) {
    for (uint8_t& b : x.v) b = static_cast<uint8_t>((b >> shift) & mask);
    return x;
}
inline Bytes32 shl(Bytes32 x, int shift) {
    for (uint8_t& b : x.v) b = static_cast<uint8_t>(b << shift);
    return x;
}
inline Bytes32 operator|(Bytes32 a, Bytes32 b) {
    for (int i = 0; i < 32; ++i) a.v[i] |= b.v[i];
    return a;
}
#endif

// a then b at p. One 64-byte store with AVX-512, so that the dot product's
// 64-byte loads are forwarded from a single store.
inline void store64(uint8_t* p, Bytes32 a, Bytes32 b) {
#if LANTERN_SIMD_WIDTH == 512
    _mm512_storeu_si512(p, _mm512_inserti64x4(_mm512_castsi256_si512(a.v), b.v, 1));
#else
    store32(p, a);
    store32(p + 32, b);
#endif
}

// Sets u's group scales and min multipliers: sc[g] is byte g of the four
// little-endian words sc (int8); mn[g] is byte g of the words mn (unsigned)
// when offset == 0, and offset * sc[g] otherwise. (Built from words in
// registers: going through a byte array would stall on store forwarding.)
inline void set_groups(const uint32_t (&sc)[4], const uint32_t (&mn)[4], int offset, Unpacked& u) {
#if LANTERN_SIMD_X86
    const __m128i s = _mm_setr_epi32(static_cast<int>(sc[0]), static_cast<int>(sc[1]), static_cast<int>(sc[2]),
                                     static_cast<int>(sc[3]));
    for (int i = 0; i < 8; i += 2) {
        // [sc[2i] x 8, sc[2i + 1] x 8] as int16, and the same for i + 1.
        Bytes32 wide[2];
        for (int k = 0; k < 2; ++k) {
            const long long g = 2 * (i + k);
            const __m128i pick = _mm_set_epi64x(0x0101010101010101ll * (g + 1), 0x0101010101010101ll * g);
            wide[k].v = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s, pick));
        }
        store64(reinterpret_cast<uint8_t*>(u.scx + 16 * i), wide[0], wide[1]);
    }
    __m256i m;
    if (offset != 0) {
        m = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(s), _mm256_set1_epi16(static_cast<short>(offset)));
    } else {
        m = _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(mn[0]), static_cast<int>(mn[1]),
                                                static_cast<int>(mn[2]), static_cast<int>(mn[3])));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.mn), m);
#else
    int8_t scale[16];
    uint8_t min[16];
    std::memcpy(scale, sc, 16);
    std::memcpy(min, mn, 16);
    for (int g = 0; g < 16; ++g) {
        for (int j = 0; j < 8; ++j) u.scx[8 * g + j] = scale[g];
        u.mn[g] = static_cast<int16_t>(offset != 0 ? offset * scale[g] : min[g]);
    }
#endif
}

// Bytes [a, b, c, d] of w as [a, a, b, b] (lo) and [c, c, d, d] (hi).
inline void duplicate_bytes(uint32_t w, uint32_t& lo, uint32_t& hi) {
    lo = (w & 0xFF) * 0x0101u | ((w >> 8) & 0xFF) * 0x01010000u;
    hi = ((w >> 16) & 0xFF) * 0x0101u | (w >> 24) * 0x01010000u;
}

// Element 128h + 32j + k: bits 2j of qs[32h + k].
// Q2_K's sixteen scales and mins as bytes of four little-endian words (byte
// g % 4 of word g / 4: group g): scales[g]'s low nibble is the scale, its
// high nibble the min.
inline void scales_mins_q2_K(const uint8_t* scales, uint32_t (&sc)[4], uint32_t (&mn)[4]) {
    uint32_t w[4];
    std::memcpy(w, scales, 16);
    for (int i = 0; i < 4; ++i) {
        sc[i] = w[i] & 0x0F0F0F0F;
        mn[i] = (w[i] >> 4) & 0x0F0F0F0F;
    }
}

inline void unpack_q2_K(const BlockQ2_K& b, Unpacked& u) {
    for (int h = 0; h < 2; ++h) {
        const Bytes32 q = load32(b.qs + 32 * h);
        for (int j = 0; j < 4; j += 2) store64(u.q + 128 * h + 32 * j, bits(q, 2 * j, 3), bits(q, 2 * j + 2, 3));
    }
    uint32_t sc[4], mn[4];
    scales_mins_q2_K(b.scales, sc, mn);
    set_groups(sc, mn, 0, u);
    u.d = fp16_to_f32(b.d);
    u.dm = fp16_to_f32(b.dmin);
}

// Q3_K's sixteen signed scales (sc - 32) from its 12 scale bytes S, as
// int8 bytes of four little-endian words (byte g % 4 of word g / 4: group
// g). The 6-bit scale of group g: low 4 bits in nibble g / 8 of S[g % 8],
// high 2 bits at bits 2 (g / 4) of S[8 + g % 4].
inline void scales_q3_K(const uint8_t* scales, uint32_t (&sc)[4]) {
    uint32_t w[3];
    std::memcpy(w, scales, 12);
    constexpr uint32_t kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
    const uint32_t v[4] = {
        (w[0] & kLow4) | (w[2] & kLow2) << 4,
        (w[1] & kLow4) | ((w[2] >> 2) & kLow2) << 4,
        ((w[0] >> 4) & kLow4) | ((w[2] >> 4) & kLow2) << 4,
        ((w[1] >> 4) & kLow4) | ((w[2] >> 6) & kLow2) << 4,
    };
    // Bytewise v - 32 without borrows between bytes (each v < 64).
    for (int i = 0; i < 4; ++i) sc[i] = ((v[i] | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
}

// As Q2_K, plus bit (4h + j) of hmask[k] as the third bit.
inline void unpack_q3_K(const BlockQ3_K& b, Unpacked& u) {
    const Bytes32 hmask = load32(b.hmask);
    for (int h = 0; h < 2; ++h) {
        const Bytes32 q = load32(b.qs + 32 * h);
        Bytes32 rows[4];
        for (int j = 0; j < 4; ++j) rows[j] = bits(q, 2 * j, 3) | shl(bits(hmask, 4 * h + j, 1), 2);
        store64(u.q + 128 * h, rows[0], rows[1]);
        store64(u.q + 128 * h + 64, rows[2], rows[3]);
    }
    uint32_t sc[4];
    const uint32_t none[4] = {};
    scales_q3_K(b.scales, sc);
    set_groups(sc, none, kOffsetQ3_K, u);
    u.d = fp16_to_f32(b.d);
    u.dm = u.d;
}

// Sub-blocks 2p and 2p + 1 are the low and high nibbles of qs[32p .. 32p + 32);
// each sub-block's scale and min covers two groups of 16.
template <class Block>
inline void unpack_k4_scales(const Block& b, Unpacked& u) {
    uint32_t scales[2], mins[2];
    scales_mins_k4(b.scales, scales, mins);
    uint32_t sc[4], mn[4];
    duplicate_bytes(scales[0], sc[0], sc[1]);
    duplicate_bytes(scales[1], sc[2], sc[3]);
    duplicate_bytes(mins[0], mn[0], mn[1]);
    duplicate_bytes(mins[1], mn[2], mn[3]);
    set_groups(sc, mn, 0, u);
    u.d = fp16_to_f32(b.d);
    u.dm = fp16_to_f32(b.dmin);
}

inline void unpack_q4_K(const BlockQ4_K& b, Unpacked& u) {
    for (int p = 0; p < 4; ++p) {
        const Bytes32 q = load32(b.qs + 32 * p);
        store64(u.q + 64 * p, bits(q, 0, 0xF), bits(q, 4, 0xF));
    }
    unpack_k4_scales(b, u);
}

// As Q4_K, plus bit s of qh[k] as the fifth bit of element 32s + k.
inline void unpack_q5_K(const BlockQ5_K& b, Unpacked& u) {
    const Bytes32 qh = load32(b.qh);
    for (int p = 0; p < 4; ++p) {
        const Bytes32 q = load32(b.qs + 32 * p);
        store64(u.q + 64 * p, bits(q, 0, 0xF) | shl(bits(qh, 2 * p, 1), 4),
                bits(q, 4, 0xF) | shl(bits(qh, 2 * p + 1, 1), 4));
    }
    unpack_k4_scales(b, u);
}

// Element 128h + 32g + l: nibble g / 2 of ql[64h + 32(g & 1) + l], and bits
// 2g of qh[32h + l] as bits 4..5.
inline void unpack_q6_K(const BlockQ6_K& b, Unpacked& u) {
    for (int h = 0; h < 2; ++h) {
        const Bytes32 low[2] = {load32(b.ql + 64 * h), load32(b.ql + 64 * h + 32)};
        const Bytes32 high = load32(b.qh + 32 * h);
        Bytes32 rows[4];
        for (int g = 0; g < 4; ++g) rows[g] = bits(low[g & 1], 4 * (g / 2), 0xF) | shl(bits(high, 2 * g, 3), 4);
        store64(u.q + 128 * h, rows[0], rows[1]);
        store64(u.q + 128 * h + 64, rows[2], rows[3]);
    }
    uint32_t sc[4];
    const uint32_t none[4] = {};
    std::memcpy(sc, b.scales, 16);
    set_groups(sc, none, kOffsetQ6_K, u);
    u.d = fp16_to_f32(b.d);
    u.dm = u.d;
}


struct Q2_K {
    using Block = BlockQ2_K;
    static constexpr int kOffset = 0;
    static void unpack(const Block& b, Unpacked& u) { unpack_q2_K(b, u); }
};
struct Q3_K {
    using Block = BlockQ3_K;
    static constexpr int kOffset = kOffsetQ3_K;
    static void unpack(const Block& b, Unpacked& u) { unpack_q3_K(b, u); }
};
struct Q4_K {
    using Block = BlockQ4_K;
    static constexpr int kOffset = 0;
    static void unpack(const Block& b, Unpacked& u) { unpack_q4_K(b, u); }
};
struct Q5_K {
    using Block = BlockQ5_K;
    static constexpr int kOffset = 0;
    static void unpack(const Block& b, Unpacked& u) { unpack_q5_K(b, u); }
};
struct Q6_K {
    using Block = BlockQ6_K;
    static constexpr int kOffset = kOffsetQ6_K;
    static void unpack(const Block& b, Unpacked& u) { unpack_q6_K(b, u); }
};

}  // namespace lantern::quant::kquant
