// Dequantization of the K-quants, through kquant.h's unpacked form.
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/kernels.h"
#include "quant/kquant.h"
#include "quant/simd.h"

namespace lantern::quant {

namespace {

// y[0..16) = (dl * (q - kOffset)) for the offset types, fma(dl, q, -ml) for the others.
template <int kOffset>
inline void dequant_group(const uint8_t* q, float dl, float ml, float* y) {
#if LANTERN_SIMD_WIDTH
    for (int e = 0; e < 16; e += simd::kFloats) {
        const simd::VI v = simd::widen_u8(q + e);
        if constexpr (kOffset != 0) {
            const simd::VF f = simd::cvt_f(simd::sub_i32(v, simd::splat_i32(kOffset)));
            simd::store_f(y + e, simd::mul_f(simd::splat_f(dl), f));
        } else {
            simd::store_f(y + e, simd::fmadd_f(simd::splat_f(dl), simd::cvt_f(v), simd::splat_f(-ml)));
        }
    }
#else
    for (int e = 0; e < 16; ++e) {
        if constexpr (kOffset != 0) {
            y[e] = dl * static_cast<float>(q[e] - kOffset);
        } else {
            y[e] = std::fma(dl, static_cast<float>(q[e]), -ml);
        }
    }
#endif
}

template <class K>
void dequant(const void* src, float* dst, int64_t n) {
    const auto* in = static_cast<const typename K::Block*>(src);
    kquant::Unpacked u;
    for (int64_t b = 0; b < n / kQKK; ++b) {
        K::unpack(in[b], u);
        float* y = dst + b * kQKK;
        for (int g = 0; g < 16; ++g) {
            const float dl = u.d * static_cast<float>(u.scale(g));
            const float ml = u.dm * static_cast<float>(u.mn[g]);
            dequant_group<K::kOffset>(u.q + 16 * g, dl, ml, y + 16 * g);
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
