// Byte layouts of the quantized blocks, exactly as GGUF stores them
// (little endian; `uint16_t` scales are IEEE fp16 bit patterns).
//
// Each struct is one block; a row is an array of blocks. Element numbering
// inside a block is documented on each struct, because every kernel and every
// test depends on it.
#pragma once

#include <bit>
#include <cstdint>

#include "core/dtype.h"

namespace lantern::quant {

inline constexpr int kQK = 32;    // elements per block of the 32-element types
inline constexpr int kQKK = 256;  // elements per K-quant super-block

// value[j] = (q[j] - 8) * d, q[j] = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4.
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// value[j] = q[j] * d + m, nibbles as Q4_0.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};

// value[j] = (q[j] - 16) * d with q[j] = nibble as Q4_0 | (bit j of qh) << 4,
// qh read as a little-endian uint32.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// value[j] = q[j] * d + m, q as Q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// value[j] = qs[j] * d.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};

// value[j] = qs[j] * d; s = d * sum(qs) (both fp16). Activation type only.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[kQK];
};

// 16 groups of 16: value[e] = d * (scales[g] & 0xF) * q - dmin * (scales[g] >> 4)
// with g = e / 16 and, for e = 128h + 32j + k, q = (qs[32h + k] >> 2j) & 3.
struct BlockQ2_K {
    uint8_t scales[kQKK / 16];
    uint8_t qs[kQKK / 4];
    uint16_t d;
    uint16_t dmin;
};

// 16 groups of 16: value[e] = d * (sc[g] - 32) * (q - (hbit ? 0 : 4)), g = e / 16,
// and for e = 128h + 32j + k: q = (qs[32h + k] >> 2j) & 3, hbit = hmask[k] bit (4h + j).
// sc[g] is 6 bits: low 4 = g < 8 ? scales[g] & 0xF : scales[g - 8] >> 4,
// high 2 = (scales[8 + g % 4] >> 2 * (g / 4)) & 3.
struct BlockQ3_K {
    uint8_t hmask[kQKK / 8];
    uint8_t qs[kQKK / 4];
    uint8_t scales[12];
    uint16_t d;
};

// 8 groups of 32: value[e] = d * sc[s] * q - dmin * m[s] with s = e / 32, k = e % 32,
// q = nibble (s odd: high) of qs[32 * (s / 2) + k]. sc/m are 6 bits packed in
// `scales` (see scales_mins_k4 in kquant.h).
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[kQKK / 2];
};

// As Q4_K with a fifth bit: q |= (bit s of qh[k]) << 4.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[kQKK / 8];
    uint8_t qs[kQKK / 2];
};

// 16 groups of 16: value[e] = d * scales[e / 16] * (q - 32). For e = 128h + 32g + l:
// q = nibble (g >= 2: high) of ql[64h + 32 * (g & 1) + l] | ((qh[32h + l] >> 2g) & 3) << 4.
struct BlockQ6_K {
    uint8_t ql[kQKK / 2];
    uint8_t qh[kQKK / 4];
    int8_t scales[kQKK / 16];
    uint16_t d;
};

// Activation type of the K-quants: value[e] = d * qs[e]; bsums[g] = sum of qs[16g..16g+15].
struct BlockQ8_K {
    float d;
    int8_t qs[kQKK];
    int16_t bsums[kQKK / 16];
};

// The non-linear 4-bit types: a quant indexes kIQ4Values (iq4.h), not an
// even grid. IQ4_NL: value[j] = d * kIQ4Values[q[j]], nibbles as Q4_0.
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// IQ4_XS: eight blocks of 32 sharing d; block b (elements 32b .. 32b + 31)
// has the 6-bit scale ls = (scales_l[b / 2] >> 4 (b % 2)) & 0xF |
// ((scales_h >> 2b) & 3) << 4 and value = d * (ls - 32) * kIQ4Values[q],
// its nibbles at qs[16b .. 16b + 15] as Q4_0's.
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQKK / 64];
    uint8_t qs[kQKK / 2];
};

// The structs alias file bytes directly, and the kernels read multi-byte
// fields (fp16 scales, Q5's qh, packed scale words) as native integers.
static_assert(std::endian::native == std::endian::little, "GGUF blocks are little endian");
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(alignof(BlockQ4_0) == 2, "blocks are packed arrays of 16-bit fields");

// Block struct of each quantized DType, for templates.
template <DType T> struct BlockOf;
template <> struct BlockOf<DType::Q4_0> { using type = BlockQ4_0; };
template <> struct BlockOf<DType::Q4_1> { using type = BlockQ4_1; };
template <> struct BlockOf<DType::Q5_0> { using type = BlockQ5_0; };
template <> struct BlockOf<DType::Q5_1> { using type = BlockQ5_1; };
template <> struct BlockOf<DType::Q8_0> { using type = BlockQ8_0; };
template <> struct BlockOf<DType::Q8_1> { using type = BlockQ8_1; };
template <> struct BlockOf<DType::Q2_K> { using type = BlockQ2_K; };
template <> struct BlockOf<DType::Q3_K> { using type = BlockQ3_K; };
template <> struct BlockOf<DType::Q4_K> { using type = BlockQ4_K; };
template <> struct BlockOf<DType::Q5_K> { using type = BlockQ5_K; };
template <> struct BlockOf<DType::Q6_K> { using type = BlockQ6_K; };
template <> struct BlockOf<DType::Q8_K> { using type = BlockQ8_K; };
template <> struct BlockOf<DType::IQ4_NL> { using type = BlockIQ4_NL; };
template <> struct BlockOf<DType::IQ4_XS> { using type = BlockIQ4_XS; };

}  // namespace lantern::quant
