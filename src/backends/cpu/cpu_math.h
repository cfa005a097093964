// Scalar math written so that GCC vectorises loops over it (no libm calls),
// and small vector helpers shared by the CPU kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"

namespace lantern::cpu {

// e^x with about 2 ulp of error over the range that matters (|x| < 87);
// lower inputs flush to 0, higher saturate to +inf, NaN gives 0 (a NaN
// must not reach the float-to-int conversion below: undefined behaviour).
inline float fast_exp(float x) {
    x = !(x >= -87.0f) ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float y = x * 1.44269504088896341f;  // log2(e)
    const float n = (y + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23 trick)
    const float f = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // x - n*ln2, split
    // e^f on [-ln2/2, ln2/2]: degree-6 Taylor/minimax-ish polynomial.
    float p = 1.3888889e-03f;
    p = p * f + 8.3333333e-03f;
    p = p * f + 4.1666667e-02f;
    p = p * f + 1.6666667e-01f;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    int32_t bits;
    std::memcpy(&bits, &p, 4);
    bits += static_cast<int32_t>(n) << 23;
    float r;
    std::memcpy(&r, &bits, 4);
    return x <= -87.0f ? 0.0f : r;
}

inline float silu(float x) { return x / (1.0f + fast_exp(-x)); }

// GELU, tanh approximation (as Gemma's GeGLU uses).
inline float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const float u = k * (x + 0.044715f * x * x * x);
    // tanh(u) = 1 - 2 / (e^{2u} + 1)
    const float t = 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f);
    return 0.5f * x * (1.0f + t);
}

inline float dot_f32(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

}  // namespace lantern::cpu
