// The non-linear 4-bit types IQ4_NL and IQ4_XS (blocks.h): their value
// table and the IQ4_XS block scales, shared by the dequantizers, the
// quantizers (quant_iq4.cpp) and the dot products (dot_iq4.cpp).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace lantern::quant::iq4 {

// The sixteen values a 4-bit quant stands for (the GGUF format's table):
// denser near zero, where most weights are.
alignas(16) inline constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

// Block b's signed scale (ls - 32) of an IQ4_XS super-block.
inline int xs_scale(const BlockIQ4_XS& x, int b) {
    const int lo = (x.scales_l[b / 2] >> (4 * (b % 2))) & 0xF;
    const int hi = (x.scales_h >> (2 * b)) & 3;
    return (lo | hi << 4) - 32;
}

}  // namespace lantern::quant::iq4
