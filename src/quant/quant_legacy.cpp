// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: dequantization and reference quantizers.
//
// Dequantization is the published formula, operation for operation:
// (u - offset) * d for the types without a min, fma(u, d, m) for Q4_1/Q5_1
// (the reference's u * d + m, fused as GCC compiles it on FMA machines).
#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/legacy.h"

namespace lantern::quant {
namespace {

using namespace legacy;

template <class W>
void dequant(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const typename W::Block*>(src);
    for (int64_t b = 0; b < n / kQK; ++b) {
        int u[kQK];
        W::unpack(in[b], u);
        const float d = scale_of<W>(in[b]);
        float* y = dst + b * kQK;
        if constexpr (W::kHasMin) {
            const float m = min_of<W>(in[b]);
            for (int j = 0; j < kQK; ++j) y[j] = std::fma(static_cast<float>(u[j]), d, m);
        } else {
            for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(u[j] - W::kOffset) * d;
        }
    }
}

// Stores 32 quants of kBits (4 or 5) bits: nibbles in qs, fifth bits in qh.
template <int kBits, class Block>
void pack(const int* u, Block& out) {
    for (int j = 0; j < kQK / 2; ++j) {
        out.qs[j] = static_cast<uint8_t>((u[j] & 0xF) | (u[j + kQK / 2] & 0xF) << 4);
    }
    if constexpr (kBits == 5) {
        uint32_t bits = 0;
        for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((u[j] >> 4) & 1) << j;
        std::memcpy(out.qh, &bits, 4);
    }
}

int round_clamp(float v, int lo, int hi) {
    return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

// Levels -2^(kBits-1) .. 2^(kBits-1) - 1. The element of largest magnitude
// maps to the bottom level exactly, which uses the extra negative level.
template <int kBits, class Block>
void quantize_symmetric(const float* src, void* dst, int64_t n) {
    constexpr int kHalf = 1 << (kBits - 1);
    auto* out = static_cast<Block*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float* x = src + b * kQK;
        float amax = 0.0f, extreme = 0.0f;
        for (int j = 0; j < kQK; ++j) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                extreme = x[j];
            }
        }
        out[b].d = f32_to_fp16(extreme / -kHalf);
        const float d = fp16_to_f32(out[b].d);
        const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        int u[kQK];
        for (int j = 0; j < kQK; ++j) u[j] = round_clamp(x[j] * inverse, -kHalf, kHalf - 1) + kHalf;
        pack<kBits>(u, out[b]);
    }
}

// Levels 0 .. 2^kBits - 1 spanning [min, max] of the block.
template <int kBits, class Block>
void quantize_with_min(const float* src, void* dst, int64_t n) {
    constexpr int kTop = (1 << kBits) - 1;
    auto* out = static_cast<Block*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float* x = src + b * kQK;
        const auto [lo, hi] = std::minmax_element(x, x + kQK);
        out[b].d = f32_to_fp16((*hi - *lo) / kTop);
        out[b].m = f32_to_fp16(*lo);
        const float d = fp16_to_f32(out[b].d), m = fp16_to_f32(out[b].m);
        const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        int u[kQK];
        for (int j = 0; j < kQK; ++j) u[j] = round_clamp((x[j] - m) * inverse, 0, kTop);
        pack<kBits>(u, out[b]);
    }
}

}  // namespace

void dequant_q4_0(const void* src, float* dst, int64_t n) { dequant<Q4_0>(src, dst, n); }
void dequant_q4_1(const void* src, float* dst, int64_t n) { dequant<Q4_1>(src, dst, n); }
void dequant_q5_0(const void* src, float* dst, int64_t n) { dequant<Q5_0>(src, dst, n); }
void dequant_q5_1(const void* src, float* dst, int64_t n) { dequant<Q5_1>(src, dst, n); }
void dequant_q8_0(const void* src, float* dst, int64_t n) { dequant<Q8_0>(src, dst, n); }

void quantize_q4_0_ref(const float* src, void* dst, int64_t n) {
    quantize_symmetric<4, BlockQ4_0>(src, dst, n);
}
void quantize_q5_0_ref(const float* src, void* dst, int64_t n) {
    quantize_symmetric<5, BlockQ5_0>(src, dst, n);
}
void quantize_q4_1_ref(const float* src, void* dst, int64_t n) {
    quantize_with_min<4, BlockQ4_1>(src, dst, n);
}
void quantize_q5_1_ref(const float* src, void* dst, int64_t n) {
    quantize_with_min<5, BlockQ5_1>(src, dst, n);
}

}  // namespace lantern::quant
