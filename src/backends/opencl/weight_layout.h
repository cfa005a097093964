// How the OpenCL backend stores weights: plain types as GGUF has them, the
// 32-element quantized types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) repacked into
// separate regions so that kernels load whole 16-byte quant payloads:
//
//   qs: every block's quants, blocks in row order (16 bytes; Q8_0: 32)
//   qh: every block's fifth bits as one uint32 (Q5_0, Q5_1 only)
//   sc: every block's scale d as fp16, or d and m as two fp16 (Q4_1, Q5_1)
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

// The 32-element block types the backend repacks and has kernels for.
bool is_block32(DType t);

struct QuantLayout {
    size_t blocks = 0;    // blocks in the tensor
    size_t qs_bytes = 0;  // quant bytes per block
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
