// Pieces of the layouts the GPU backends repack quantized weights into
// (their weight_layout.h): a 32-element block's two-bit fields ordered so
// that a shift and a mask give four consecutive values, one per byte, and a
// K-quant block's two scale bytes.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "quant/kquant.h"

namespace lantern::quant {

// 32 values (< 4) into 8 bytes: bits 2j of byte k of word h hold
// v[16h + 4j + k], so that (word h >> 2j) & 0x03030303 holds v[16h + 4j ..
// 16h + 4j + 3].
inline void put_two_bits(const uint8_t* v, uint8_t* o) {
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
            uint8_t b = 0;
            for (int j = 0; j < 4; ++j) b = static_cast<uint8_t>(b | v[16 * h + 4 * j + k] << (2 * j));
            o[4 * h + k] = b;
        }
    }
}

// The two scale bytes of 32-element block i (0..7) of a K-quant super-block
// `blk` that kquant::unpack made `u` of: Q4_K, Q5_K its 6-bit scale and min;
// Q2_K its two groups of 16 as scale | min << 4 (GGUF's bytes); Q3_K, Q6_K
// its two groups' signed scales (Q3_K's 6 bits minus 32).
template <DType T, class Block>
void put_scale_bytes(const kquant::Unpacked& u, const Block& blk, int i, uint8_t* s) {
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        s[0] = static_cast<uint8_t>(u.scale(2 * i));
        s[1] = static_cast<uint8_t>(u.mn[2 * i]);
    } else if constexpr (T == DType::Q2_K) {
        s[0] = blk.scales[2 * i];
        s[1] = blk.scales[2 * i + 1];
    } else {
        s[0] = static_cast<uint8_t>(static_cast<int8_t>(u.scale(2 * i)));
        s[1] = static_cast<uint8_t>(static_cast<int8_t>(u.scale(2 * i + 1)));
    }
}

}  // namespace lantern::quant
