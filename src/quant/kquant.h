// The K-quants (Q2_K .. Q6_K) in one common unpacked form.
//
// Each super-block of 256 elements is unpacked into unsigned quants q[256],
// one signed scale per 16-element group and one "min" multiplier per group.
// The dequantizer (quant_k.cpp) and every dot-product tile (dot_k.cpp) work on
// that form only, so the bit layouts live in exactly one place: the unpack_*
// functions. In terms of it, the published formulas are, for group g = e / 16:
//   kOffset == 0 (Q2_K, Q4_K, Q5_K): value[e] = (d * sc[g]) * q[e] - dm * mn[g]
//   kOffset != 0 (Q3_K, Q6_K):       value[e] = (d * sc[g]) * (q[e] - kOffset)
// and for the second kind mn[g] = kOffset * sc[g], dm = d, so that both kinds
// have  dot(value, a) = d * sum_g sc[g] * sum(q * a) - dm * sum_g mn[g] * sum(a),
// the group sums sum(a) being Q8_K's bsums.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace lantern::quant::kquant {

struct Unpacked {
    alignas(64) uint8_t q[kQKK];        // unsigned quants, < 64
    alignas(64) int16_t scx[kQKK / 2];  // scx[j] = sc[j / 8]: the scale of elements 2j, 2j + 1
    alignas(32) int16_t mn[kQKK / 16];  // per group
    float d;
    float dm;
    int16_t scale(int g) const { return scx[8 * g]; }
};

// The 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K's 12 scale bytes.
inline void scale_min_k4(const uint8_t* scales, int j, int& sc, int& m) {
    if (j < 4) {
        sc = scales[j] & 63;
        m = scales[j + 4] & 63;
    } else {
        sc = (scales[j + 4] & 0xF) | (scales[j - 4] >> 6) << 4;
        m = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4;
    }
}

void unpack_q2_K(const BlockQ2_K& b, Unpacked& u);
void unpack_q3_K(const BlockQ3_K& b, Unpacked& u);
void unpack_q4_K(const BlockQ4_K& b, Unpacked& u);
void unpack_q5_K(const BlockQ5_K& b, Unpacked& u);
void unpack_q6_K(const BlockQ6_K& b, Unpacked& u);

struct Q2_K {
    using Block = BlockQ2_K;
    static constexpr int kOffset = 0;
    static void unpack(const Block& b, Unpacked& u) { unpack_q2_K(b, u); }
};
struct Q3_K {
    using Block = BlockQ3_K;
    static constexpr int kOffset = 4;
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
    static constexpr int kOffset = 32;
    static void unpack(const Block& b, Unpacked& u) { unpack_q6_K(b, u); }
};

}  // namespace lantern::quant::kquant
