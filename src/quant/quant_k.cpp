// Dequantization of the K-quants, through kquant.h's unpacked form.
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/kernels.h"
#include "quant/kquant.h"
#include "quant/simd.h"

namespace lantern::quant {

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
