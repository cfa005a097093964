// F32, F16 and BF16: row conversions and the float dot-product tiles.
//
// All three take f32 activations (vec_dot_type F32): the weights are widened
// to f32 as they are loaded (vcvtph2ps for F16, a 16-bit shift for BF16) and
// multiplied in f32 with FMA. Rounding the activations to F16/BF16 instead
// would lose 3 to 16 bits of every activation; widening the weights costs one
// conversion per weight vector, which a tile reuses for all its NC rows.
#include <cstring>

#include "core/half.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/tile.h"

namespace lantern::quant {
namespace {

// How each weight type becomes f32.
struct F32Weights {
    using T = float;
    static float scalar(float v) { return v; }
#if LANTERN_SIMD_WIDTH
    static simd::VF load(const float* p) { return simd::load_f(p); }
#endif
};

struct F16Weights {
    using T = uint16_t;
    static float scalar(uint16_t v) { return fp16_to_f32(v); }
#if LANTERN_SIMD_WIDTH == 512
    static simd::VF load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
#elif LANTERN_SIMD_WIDTH == 256
    static simd::VF load(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
#elif LANTERN_SIMD_WIDTH == 128
    static simd::VF load(const uint16_t* p) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
        return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
    }
#endif
};

struct BF16Weights {
    using T = uint16_t;
    static float scalar(uint16_t v) { return bf16_to_f32(v); }
#if LANTERN_SIMD_WIDTH == 512
    static simd::VF load(const uint16_t* p) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
#elif LANTERN_SIMD_WIDTH == 256
    static simd::VF load(const uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
#elif LANTERN_SIMD_WIDTH == 128
    static simd::VF load(const uint16_t* p) {
        const uint16x8_t w = vld1q_u16(p);
        return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(w), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(w, 16))};
    }
#endif
};

// NR weight rows x NC f32 activation rows. Small tiles keep several partial
// sums per pair (kUnroll) so that the FMA latency is hidden.
template <class W>
struct PlainTile {
    template <int NR, int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* x, size_t bx, const void* y, size_t by) {
        using T = typename W::T;
        const T* w[NR];
        const float* a[NC];
        for (int r = 0; r < NR; ++r) w[r] = row_at<T>(x, bx, r);
        for (int c = 0; c < NC; ++c) a[c] = row_at<float>(y, by, c);
        int64_t i = 0;
        float sum[NR][NC] = {};
#if LANTERN_SIMD_WIDTH
        using simd::VF;
        constexpr int kUnroll = NR * NC >= 8 ? 1 : NR * NC >= 4 ? 2 : 4;
        constexpr int kStep = kUnroll * simd::kFloats;
        VF acc[kUnroll][NR][NC];
        for (auto& u : acc)
            for (auto& rr : u)
                for (VF& v : rr) v = simd::zero_f();
        for (; i + kStep <= n; i += kStep) {
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t k = i + u * simd::kFloats;
                VF av[NC];
                for (int c = 0; c < NC; ++c) av[c] = simd::load_f(a[c] + k);
                for (int r = 0; r < NR; ++r) {
                    const VF wv = W::load(w[r] + k);
                    for (int c = 0; c < NC; ++c) acc[u][r][c] = simd::fmadd_f(wv, av[c], acc[u][r][c]);
                }
            }
        }
        for (int r = 0; r < NR; ++r) {
            for (int c = 0; c < NC; ++c) {
                VF t = acc[0][r][c];
                for (int u = 1; u < kUnroll; ++u) t = simd::add_f(t, acc[u][r][c]);
                sum[r][c] = simd::hsum_f(t);
            }
        }
#endif
        for (int r = 0; r < NR; ++r) {
            for (int c = 0; c < NC; ++c) {
                float t = sum[r][c];
                for (int64_t k = i; k < n; ++k) t += W::scalar(w[r][k]) * a[c][k];
                s[static_cast<size_t>(c) * ldc + r] = t;
            }
        }
    }
};

#if LANTERN_SIMD_WIDTH == 512
constexpr int kMaxNR = 4, kMaxNC = 4;  // 16 accumulators + 4 activations + 1 weight of 32 zmm
#elif LANTERN_SIMD_WIDTH
constexpr int kMaxNR = 2, kMaxNC = 4;  // 8 + 4 + 1 of 16 ymm (of 32 NEON registers, two each)
#else
constexpr int kMaxNR = 2, kMaxNC = 2;
#endif

template <class W>
using PlainDot = TiledDot<PlainTile<W>, kMaxNR, kMaxNC>;

}  // namespace

void f32_from_float(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f32_to_float(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f16_to_float(const void* src, float* dst, int64_t n) {
    fp16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
}
void f16_from_float(const float* src, void* dst, int64_t n) {
    f32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
}
void f16_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_fp16(src[i]);
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
    bf16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
}
void bf16_from_float(const float* src, void* dst, int64_t n) {
    f32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
}
void bf16_from_float_ref(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
}

const DotKernel kDotF32 = {&PlainDot<F32Weights>::vec_dot, kMaxNR, kMaxNC, kMaxNR};
const DotKernel kDotF16 = {&PlainDot<F16Weights>::vec_dot, kMaxNR, kMaxNC, kMaxNR};
const DotKernel kDotBF16 = {&PlainDot<BF16Weights>::vec_dot, kMaxNR, kMaxNC, kMaxNR};

}  // namespace lantern::quant
