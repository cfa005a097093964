// The 32-element weight types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) described once,
// as traits that the dequantizer (quant_legacy.cpp) and the dot-product tiles
// (dot_legacy.cpp) are written against.
//
// Each trait gives the stored quants of a block as integers u[0..32):
//   no min (kHasMin false): value = (u - kOffset) * d
//   with min:               value = u * d + m
// Q8_0 stores signed quants (kSigned, kOffset 0); the others unsigned ones.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/iq4.h"
#include "quant/simd.h"

namespace lantern::quant::legacy {

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Nibbles of a 16-byte array as 32 quants: low nibbles first.
inline void unpack_nibbles(const uint8_t* qs, int* u) {
    for (int j = 0; j < kQK / 2; ++j) {
        u[j] = qs[j] & 0xF;
        u[j + kQK / 2] = qs[j] >> 4;
    }
}

inline void add_fifth_bits(const uint8_t* qh, int* u) {
    const uint32_t bits = load_u32(qh);
    for (int j = 0; j < kQK; ++j) u[j] |= static_cast<int>((bits >> j) & 1u) << 4;
}

#if LANTERN_SIMD_WIDTH
using simd::kPieces;
// One block per piece of a vector (simd.h).
template <class B>
using Pieces = const B* const (&)[kPieces];

template <class B>
inline simd::VI load_nibbles(Pieces<B> b) {
    const void* q[kPieces];
    for (int i = 0; i < kPieces; ++i) q[i] = b[i]->qs;
    return simd::load_nibble_pieces(q);
}
template <class B>
inline simd::VI load_nibbles_and_fifth_bits(Pieces<B> b) {
    const void* h[kPieces];
    for (int i = 0; i < kPieces; ++i) h[i] = b[i]->qh;
    return simd::or_i(load_nibbles<B>(b), simd::bit_pieces(h, 0x10));
}
#endif

struct Q4_0 {
    using Block = BlockQ4_0;
    using Act = BlockQ8_0;
    static constexpr int kOffset = 8;
    static constexpr bool kHasMin = false;
    static constexpr bool kSigned = false;
    static void unpack(const Block& b, int* u) { unpack_nibbles(b.qs, u); }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) { return load_nibbles<Block>(b); }
#endif
};

struct Q4_1 {
    using Block = BlockQ4_1;
    using Act = BlockQ8_1;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = true;
    static constexpr bool kSigned = false;
    static void unpack(const Block& b, int* u) { unpack_nibbles(b.qs, u); }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) { return load_nibbles<Block>(b); }
#endif
};

struct Q5_0 {
    using Block = BlockQ5_0;
    using Act = BlockQ8_0;
    static constexpr int kOffset = 16;
    static constexpr bool kHasMin = false;
    static constexpr bool kSigned = false;
    static void unpack(const Block& b, int* u) {
        unpack_nibbles(b.qs, u);
        add_fifth_bits(b.qh, u);
    }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) { return load_nibbles_and_fifth_bits<Block>(b); }
#endif
};

struct Q5_1 {
    using Block = BlockQ5_1;
    using Act = BlockQ8_1;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = true;
    static constexpr bool kSigned = false;
    static void unpack(const Block& b, int* u) {
        unpack_nibbles(b.qs, u);
        add_fifth_bits(b.qh, u);
    }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) { return load_nibbles_and_fifth_bits<Block>(b); }
#endif
};

struct Q8_0 {
    using Block = BlockQ8_0;
    using Act = BlockQ8_0;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = false;
    static constexpr bool kSigned = true;
    static void unpack(const Block& b, int* u) {
        for (int j = 0; j < kQK; ++j) u[j] = b.qs[j];
    }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) {
        const void* q[kPieces];
        for (int i = 0; i < kPieces; ++i) q[i] = b[i]->qs;
        return simd::load_pieces(q);
    }
#endif
};

// IQ4_NL: Q4_0's layout with each nibble an index into iq4::kValues (signed
// values, like Q8_0's quants).
struct IQ4_NL {
    using Block = BlockIQ4_NL;
    using Act = BlockQ8_0;
    static constexpr int kOffset = 0;
    static constexpr bool kHasMin = false;
    static constexpr bool kSigned = true;
    static void unpack(const Block& b, int* u) {
        unpack_nibbles(b.qs, u);
        for (int j = 0; j < kQK; ++j) u[j] = iq4::kValues[u[j]];
    }
#if LANTERN_SIMD_WIDTH
    static simd::VI load(Pieces<Block> b) { return simd::lut16(iq4::kValues, load_nibbles<Block>(b)); }
#endif
};

// The block's scale and (for min types) min as floats.
template <class W>
inline float scale_of(const typename W::Block& b) {
    return fp16_to_f32(b.d);
}
template <class W>
inline float min_of(const typename W::Block& b) {
    if constexpr (W::kHasMin) {
        return fp16_to_f32(b.m);
    } else {
        return 0.0f;
    }
}

}  // namespace lantern::quant::legacy
