// How weights are stored on the device, and the view kernels read them by.
//
// Weights are repacked at upload so that each lane of a matrix-vector kernel
// issues full 16-byte loads (GPU-NOTES.md: reading the 18-byte GGUF blocks in
// place starves the memory system):
//   Q4_0, Q4_1, Q5_0, Q5_1   payload: per row, the 16 quant bytes of each
//                            32-element block, contiguous ([N][blocks][16]);
//                            meta: per row, per block, the scales (and Q5's
//                            32 high bits): Q4_0 {d}, Q4_1 {d, m},
//                            Q5_1 {qh, d, m}; Q5_0: every block's qh, then
//                            every block's d (its 22 bytes a block, not 24:
//                            the row padded to 4 bytes), qh laid out
//                            as the K-quants' one-bit plane below (bit 4h + j
//                            of byte k: element 16h + 4j + k; GGUF has bit e
//                            for element e), so a word of four quants takes
//                            its high bits with a shift and a mask.
//   Q8_0                     payload: per row two planes, bytes 0..15 of every
//                            block, then bytes 16..31 ([N][2][blocks][16]);
//                            meta: {d} per block.
//   Q2_K .. Q6_K             re-cut into 32-element blocks like the above:
//                            payload: per row, up to three bit planes, each
//                            [blocks][n] bytes: the low nibbles (Q4_0's byte
//                            order: byte i holds elements i and 16 + i;
//                            Q4_K, Q5_K, Q6_K), two bits (bits 2j of byte k of
//                            word h: element 16h + 4j + k; Q2_K, Q3_K and
//                            Q6_K's high bits), one bit (bit 4h + j of byte k;
//                            Q5_K's high bit), in that order; Q3_K's three
//                            bits fill its two- and one-bit planes' 12 bytes
//                            as put_three_bits (weight_layout.cpp) says;
//                            meta: per row, two scale bytes per block (Q4_K,
//                            Q5_K: the sub-block's 6-bit scale and min; Q2_K:
//                            its two groups' packed scale bytes; Q3_K, Q6_K:
//                            its two groups' signed scales), then per
//                            super-block {d, dmin} (Q3_K, Q6_K: {d}).
//                            The quants and scales are the CPU unpacker's
//                            (kquant.h): a value is d * sc * q - dmin * m, or
//                            d * sc * (q - 4) for Q3_K and d * sc * (q - 32)
//                            for Q6_K. Q3_K, Q4_K and Q5_K grow by 4 bytes
//                            per super-block (their 6-bit scales become
//                            bytes); Q2_K and Q6_K keep their size.
//   IQ4_NL                   as Q4_0 (its blocks are Q4_0's, with table
//                            indices for nibbles).
//   IQ4_XS                   as the K-quants: one plane of nibbles (Q4_0's
//                            byte order); meta: per block its signed scale
//                            ls - 32 and a zero byte, then per super-block
//                            {d}. A value is d * sc * table[q] (iq4.h);
//                            4 bytes per super-block over the GGUF size.
//   F32, F16, BF16           unchanged.
// The meta array starts 256-byte aligned after the payload.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace lantern::cuda {

constexpr bool is_plain(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
constexpr bool is_q32(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
           t == DType::IQ4_NL;
}
// The types laid out as the K-quants (bit planes, scale bytes, a d word per
// super-block).
constexpr bool is_kq_layout(DType t) { return is_kquant(t) || t == DType::IQ4_XS; }
// The non-linear types: a quant is an index into iq4.h's table.
constexpr bool is_iq4(DType t) { return t == DType::IQ4_NL || t == DType::IQ4_XS; }
// Every weight type the device kernels read.
constexpr bool is_device_weight_type(DType t) { return is_plain(t) || is_q32(t) || is_kq_layout(t); }

// Payload bytes per 32-element block (Q*_0/Q*_1/Q8_0).
constexpr size_t q32_payload(DType t) { return t == DType::Q8_0 ? 32 : 16; }
// Meta bytes per 32-element block.
constexpr size_t q32_meta(DType t) {
    return t == DType::Q4_1 ? 4 : t == DType::Q5_0 ? 6 : t == DType::Q5_1 ? 8 : 2;
}
// K-quant bit planes per 32-element block: bytes of low nibbles, of two-bit
// fields, of one-bit fields.
constexpr size_t kq_nibble_bytes(DType t) {
    return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::IQ4_XS ? 16 : 0;
}
constexpr size_t kq_two_bytes(DType t) { return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q6_K ? 8 : 0; }
constexpr size_t kq_one_bytes(DType t) { return t == DType::Q3_K || t == DType::Q5_K ? 4 : 0; }
// Bytes of {d, dmin} per super-block (Q3_K, Q6_K and IQ4_XS have no dmin).
constexpr size_t kq_dm_bytes(DType t) { return t == DType::Q3_K || t == DType::Q6_K || t == DType::IQ4_XS ? 2 : 4; }

struct WeightLayout {
    DType type = DType::F32;
    int64_t K = 0;            // elements per row
    int64_t N = 0;            // rows
    int64_t blocks = 0;       // quant blocks per row (0 for plain types)
    size_t row_bytes = 0;     // payload bytes per row
    size_t meta_offset = 0;   // where the meta array starts (0: none)
    size_t meta_row_bytes = 0;
    size_t total = 0;         // bytes of the whole device copy
};

// Layout of a [K, N] weight of type t on the device (t: is_device_weight_type).
WeightLayout weight_layout(DType t, int64_t K, int64_t N);
// Writes the device layout of `gguf` (N rows of GGUF bytes) into out[0, total).
void repack_weight(const WeightLayout& l, const void* gguf, uint8_t* out);

// What a kernel reads a weight (or a plain-typed table) through.
struct WView {
    const uint8_t* data = nullptr;
    const uint8_t* meta = nullptr;
    int64_t K = 0;
    int64_t blocks = 0;
    size_t row_bytes = 0;
    size_t meta_row_bytes = 0;
};

}  // namespace lantern::cuda
