// K-quant bit layouts (the unpack_* functions of kquant.h) and dequantization.
//
// The element numbering of every format is documented on its block struct in
// blocks.h; each unpacker below is that description written as a loop.
#include <cmath>

#include "core/half.h"
#include "quant/kernels.h"
#include "quant/kquant.h"

namespace lantern::quant {
namespace kquant {
namespace {

void set_group(Unpacked& u, int g, int sc, int mn) {
    for (int j = 0; j < 8; ++j) u.scx[8 * g + j] = static_cast<int16_t>(sc);
    u.mn[g] = static_cast<int16_t>(mn);
}

}  // namespace

void unpack_q2_K(const BlockQ2_K& b, Unpacked& u) {
    for (int e = 0; e < kQKK; ++e) {
        const int h = e / 128, j = e % 128 / 32, k = e % 32;
        u.q[e] = static_cast<uint8_t>((b.qs[32 * h + k] >> 2 * j) & 3);
    }
    for (int g = 0; g < 16; ++g) set_group(u, g, b.scales[g] & 0xF, b.scales[g] >> 4);
    u.d = fp16_to_f32(b.d);
    u.dm = fp16_to_f32(b.dmin);
}

void unpack_q3_K(const BlockQ3_K& b, Unpacked& u) {
    for (int e = 0; e < kQKK; ++e) {
        const int h = e / 128, j = e % 128 / 32, k = e % 32;
        const int low = (b.qs[32 * h + k] >> 2 * j) & 3;
        const int high = (b.hmask[k] >> (4 * h + j)) & 1;
        u.q[e] = static_cast<uint8_t>(low | high << 2);
    }
    for (int g = 0; g < 16; ++g) {
        const int low = g < 8 ? b.scales[g] & 0xF : b.scales[g - 8] >> 4;
        const int high = (b.scales[8 + g % 4] >> 2 * (g / 4)) & 3;
        const int sc = (low | high << 4) - 32;
        set_group(u, g, sc, Q3_K::kOffset * sc);
    }
    u.d = fp16_to_f32(b.d);
    u.dm = u.d;
}

void unpack_q4_K(const BlockQ4_K& b, Unpacked& u) {
    for (int s = 0; s < 8; ++s) {
        for (int k = 0; k < 32; ++k) u.q[32 * s + k] = (b.qs[32 * (s / 2) + k] >> 4 * (s & 1)) & 0xF;
        int sc, m;
        scale_min_k4(b.scales, s, sc, m);
        set_group(u, 2 * s, sc, m);
        set_group(u, 2 * s + 1, sc, m);
    }
    u.d = fp16_to_f32(b.d);
    u.dm = fp16_to_f32(b.dmin);
}

void unpack_q5_K(const BlockQ5_K& b, Unpacked& u) {
    for (int s = 0; s < 8; ++s) {
        for (int k = 0; k < 32; ++k) {
            const int low = (b.qs[32 * (s / 2) + k] >> 4 * (s & 1)) & 0xF;
            const int high = (b.qh[k] >> s) & 1;
            u.q[32 * s + k] = static_cast<uint8_t>(low | high << 4);
        }
        int sc, m;
        scale_min_k4(b.scales, s, sc, m);
        set_group(u, 2 * s, sc, m);
        set_group(u, 2 * s + 1, sc, m);
    }
    u.d = fp16_to_f32(b.d);
    u.dm = fp16_to_f32(b.dmin);
}

void unpack_q6_K(const BlockQ6_K& b, Unpacked& u) {
    for (int e = 0; e < kQKK; ++e) {
        const int h = e / 128, g = e % 128 / 32, l = e % 32;
        const int low = (b.ql[64 * h + 32 * (g & 1) + l] >> 4 * (g / 2)) & 0xF;
        const int high = (b.qh[32 * h + l] >> 2 * g) & 3;
        u.q[e] = static_cast<uint8_t>(low | high << 4);
    }
    for (int g = 0; g < 16; ++g) set_group(u, g, b.scales[g], Q6_K::kOffset * b.scales[g]);
    u.d = fp16_to_f32(b.d);
    u.dm = u.d;
}

}  // namespace kquant

namespace {

template <class K>
void dequant(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const typename K::Block*>(src);
    kquant::Unpacked u;
    for (int64_t b = 0; b < n / kQKK; ++b) {
        K::unpack(in[b], u);
        float* y = dst + b * kQKK;
        for (int g = 0; g < 16; ++g) {
            const float dl = u.d * static_cast<float>(u.scale(g));
            if constexpr (K::kOffset != 0) {
                for (int e = 16 * g; e < 16 * g + 16; ++e) y[e] = dl * static_cast<float>(u.q[e] - K::kOffset);
            } else {
                const float ml = u.dm * static_cast<float>(u.mn[g]);
                for (int e = 16 * g; e < 16 * g + 16; ++e) y[e] = std::fma(dl, static_cast<float>(u.q[e]), -ml);
            }
        }
    }
}

}  // namespace

void dequant_q2_K(const void* src, float* dst, int64_t n) { dequant<kquant::Q2_K>(src, dst, n); }
void dequant_q3_K(const void* src, float* dst, int64_t n) { dequant<kquant::Q3_K>(src, dst, n); }
void dequant_q4_K(const void* src, float* dst, int64_t n) { dequant<kquant::Q4_K>(src, dst, n); }
void dequant_q5_K(const void* src, float* dst, int64_t n) { dequant<kquant::Q5_K>(src, dst, n); }
void dequant_q6_K(const void* src, float* dst, int64_t n) { dequant<kquant::Q6_K>(src, dst, n); }

}  // namespace lantern::quant
