// How the OpenCL backend stores weights: plain types as GGUF has them, the
// quantized types repacked into separate regions so that kernels load whole
// quant payloads at their natural alignment. Every quantized type is cut
// into 32-element blocks (a K-quant or IQ4_XS super-block is eight of
// them); block i of a matrix (i = row * blocks_per_row + b) has
//
//   qs: its low bits, blocks in row order: 16 bytes of nibbles (byte j:
//       element j low, j + 16 high; Q8_0: its 32 bytes), or for Q2_K and
//       Q3_K 8 bytes of two-bit fields (bits 2j of byte k of word h:
//       element 16h + 4j + k, so a shift and a mask give four of them)
//   qh: its high bits: Q5_0, Q5_1, Q5_K (fifth) and Q3_K (third) as one
//       uint32, bit e for element e; Q6_K's two high bits as qs's two-bit
//       fields (8 bytes)
//   sc: the 32-element types' scale d (half), or d and m (two halves: Q4_1,
//       Q5_1); the K-quants' and IQ4_XS's 20-byte super-block records: each
//       of its eight blocks' two scale bytes, then d and dmin (halves; Q3_K,
//       Q6_K and IQ4_XS: d, then 0). The scale bytes: Q4_K, Q5_K the block's
//       6-bit scale and min; Q2_K its two groups of 16 as scale | min << 4;
//       Q3_K, Q6_K its two groups' signed scales; IQ4_XS its signed scale
//       ls - 32, then 0.
//
// A K-quant value is d * sc * q - dmin * m, d * sc * (q - 4) (Q3_K) or
// d * sc * (q - 32) (Q6_K), with the CPU unpacker's quants and scales
// (quant/kquant.h), so the GGUF bit layouts are read in one place. IQ4_NL
// and IQ4_XS keep their 4-bit table indices (quant/iq4.h) as Q4_0 keeps
// its quants.
//
// Each region starts at a multiple of 256 bytes from the tensor's offset.
// GGUF's 18/20/22/24/34-byte blocks put payloads at odd alignments; loading
// them in place costs most of the bandwidth (GPU-NOTES.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/tensor.h"

namespace lantern::ocl {

// The quantized types the backend repacks into 32-element blocks and has
// kernels for (the legacy 32-element types, the K-quants, IQ4_NL, IQ4_XS).
bool is_block32(DType t);
// Types whose blocks have a scale per group of 16 (Q2_K, Q3_K, Q6_K): the
// prompt kernels' tensor-core variant takes one scale per block.
bool has_group16_scales(DType t);

struct QuantLayout {
    size_t blocks = 0;    // blocks in the tensor
    size_t qs_bytes = 0;  // low-bit bytes per block
    size_t qs = 0, qh = 0, sc = 0;  // region offsets from the tensor's offset
    size_t total = 0;     // bytes the tensor takes
};

// Layout of a weight of a block-32 type. Precondition: is_block32(w.type).
QuantLayout quant_layout(const Tensor& w);

// Bytes a weight takes in the backend (repacked or as is).
size_t stored_weight_bytes(const Tensor& w);

// The bytes to upload for `w` from its GGUF bytes (repacked for block-32 types).
std::vector<uint8_t> repack_weight(const Tensor& w, const void* host);

}  // namespace lantern::ocl
