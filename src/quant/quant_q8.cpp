// The activation types: Q8_0 (also a weight type), Q8_1 and Q8_K.
//
// Every activation row of a quantized matrix multiply goes through one of
// these, so each has a vectorised quantizer that gives exactly the bytes of
// its scalar reference: both take the block's absolute maximum, derive the
// same scale, multiply by the same float inverse, clamp to [-127, 127] and
// round to nearest even.
#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/simd.h"

namespace lantern::quant {
namespace {

// Q8_0/Q8_1: the scale is stored as fp16 and the quants are made with the
// stored (rounded) scale, so that dequantization reproduces them best.
struct HalfScale {
    uint16_t d;      // fp16
    float inverse;   // 1 / fp16_to_f32(d), or 0
};
HalfScale half_scale(float amax) {
    const uint16_t d = f32_to_fp16(amax / 127.0f);
    const float df = fp16_to_f32(d);
    return {d, df != 0.0f ? 1.0f / df : 0.0f};
}

// Q8_K keeps its scale in f32 (0 when 1 / d overflows: subnormal inputs).
float inverse_of(float d) {
    const float inverse = 1.0f / d;
    return d != 0.0f && std::isfinite(inverse) ? inverse : 0.0f;
}

// Clamps like vmaxps / vminps with the bound second, so a NaN becomes -127
// in both versions.
int8_t quantize_one(float x, float inverse) {
    float v = x * inverse;
    v = v > -127.0f ? v : -127.0f;
    v = v < 127.0f ? v : 127.0f;
    return static_cast<int8_t>(std::nearbyint(v));
}

// NaNs are skipped (as vmaxps does with the NaN first).
float abs_max(const float* x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
    return amax;
}

#if LANTERN_SIMD_WIDTH
using simd::VF;
using simd::VI;
constexpr int kF = simd::kFloats;

// Quantizes `count` vectors v[] with `inverse` into dst; returns the vector
// sum of the quants (lanes add up to their total).
template <int Count>
VI quantize_vectors(const VF (&v)[Count], float inverse, int8_t* dst) {
    const VF inv = simd::splat_f(inverse), lo = simd::splat_f(-127.0f), hi = simd::splat_f(127.0f);
    VI sum = simd::zero_i();
    for (int i = 0; i < Count; ++i) {
        const VI q = simd::cvt_round_i32(simd::min_f(simd::max_f(simd::mul_f(v[i], inv), lo), hi));
        simd::store_i32_as_i8(dst + i * kF, q);
        sum = simd::add_i32(sum, q);
    }
    return sum;
}

template <int Count>
float load_abs_max(const float* x, VF (&v)[Count]) {
    VF m = simd::zero_f();
    for (int i = 0; i < Count; ++i) {
        v[i] = simd::load_f(x + i * kF);
        m = simd::max_f(simd::abs_f(v[i]), m);  // a NaN lane keeps m
    }
    return simd::hmax_f(m);
}
#endif

}  // namespace

// ---- Q8_0 ---------------------------------------------------------------------

void quantize_q8_0_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<BlockQ8_0*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float* x = src + b * kQK;
        const HalfScale sc = half_scale(abs_max(x, kQK));
        out[b].d = sc.d;
        for (int j = 0; j < kQK; ++j) out[b].qs[j] = quantize_one(x[j], sc.inverse);
    }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
#if LANTERN_SIMD_WIDTH
    auto* out = static_cast<BlockQ8_0*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        VF v[kQK / kF];
        const HalfScale sc = half_scale(load_abs_max(src + b * kQK, v));
        out[b].d = sc.d;
        quantize_vectors(v, sc.inverse, out[b].qs);
    }
#else
    quantize_q8_0_ref(src, dst, n);
#endif
}

// ---- Q8_1 ---------------------------------------------------------------------

void quantize_q8_1_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<BlockQ8_1*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float* x = src + b * kQK;
        const HalfScale sc = half_scale(abs_max(x, kQK));
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            out[b].qs[j] = quantize_one(x[j], sc.inverse);
            sum += out[b].qs[j];
        }
        out[b].d = sc.d;
        out[b].s = f32_to_fp16(fp16_to_f32(sc.d) * static_cast<float>(sum));
    }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
#if LANTERN_SIMD_WIDTH
    auto* out = static_cast<BlockQ8_1*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        VF v[kQK / kF];
        const HalfScale sc = half_scale(load_abs_max(src + b * kQK, v));
        const int sum = simd::hsum_i32(quantize_vectors(v, sc.inverse, out[b].qs));
        out[b].d = sc.d;
        out[b].s = f32_to_fp16(fp16_to_f32(sc.d) * static_cast<float>(sum));
    }
#else
    quantize_q8_1_ref(src, dst, n);
#endif
}

void dequant_q8_1(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const BlockQ8_1*>(src);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float d = fp16_to_f32(in[b].d);
        for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = static_cast<float>(in[b].qs[j]) * d;
    }
}

// ---- Q8_K ---------------------------------------------------------------------

void quantize_q8_K_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<BlockQ8_K*>(dst);
    for (int64_t b = 0; b < n / kQKK; ++b) {
        const float* x = src + b * kQKK;
        const float d = abs_max(x, kQKK) / 127.0f;
        const float inverse = inverse_of(d);
        out[b].d = d;
        for (int g = 0; g < kQKK / 16; ++g) {
            int sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; ++j) {
                out[b].qs[j] = quantize_one(x[j], inverse);
                sum += out[b].qs[j];
            }
            out[b].bsums[g] = static_cast<int16_t>(sum);
        }
    }
}

void quantize_q8_K(const float* src, void* dst, int64_t n) {
#if LANTERN_SIMD_WIDTH
    constexpr int kPerGroup = 16 / kF;  // vectors per 16-element group (1 or 2)
    auto* out = static_cast<BlockQ8_K*>(dst);
    for (int64_t b = 0; b < n / kQKK; ++b) {
        VF v[kQKK / kF];
        const float d = load_abs_max(src + b * kQKK, v) / 127.0f;
        const float inverse = inverse_of(d);
        out[b].d = d;
        for (int g = 0; g < kQKK / 16; ++g) {
            VF group[kPerGroup];
            for (int i = 0; i < kPerGroup; ++i) group[i] = v[g * kPerGroup + i];
            const VI sum = quantize_vectors(group, inverse, out[b].qs + 16 * g);
            out[b].bsums[g] = static_cast<int16_t>(simd::hsum_i32(sum));
        }
    }
#else
    quantize_q8_K_ref(src, dst, n);
#endif
}

void dequant_q8_K(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const BlockQ8_K*>(src);
    for (int64_t b = 0; b < n / kQKK; ++b) {
        for (int j = 0; j < kQKK; ++j) dst[b * kQKK + j] = in[b].d * static_cast<float>(in[b].qs[j]);
    }
}

}  // namespace lantern::quant
