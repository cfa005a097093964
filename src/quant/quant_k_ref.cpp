// Reference quantizers of the K-quants.
//
// Each group of 16 or 32 elements gets a float scale (and, for Q2_K/Q4_K/Q5_K,
// a non-negative min): 16 starting points (the group's range stretched over
// slightly fewer or more levels) are refined together by a few least-squares
// rounds of "round to the nearest level, then refit", and the fit of least
// squared error wins. The group scales and mins are then quantized against
// the super-block's d / dmin, and the elements re-rounded with the scales as
// stored. The results are valid blocks of the published layouts; they are
// not byte-identical to llama.cpp's quantizer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "quant/kernels.h"
#include "quant/kquant.h"

namespace lantern::quant {
namespace {

int nearest(float v) { return static_cast<int>(std::nearbyint(v)); }
int round_clamp(float v, int lo, int hi) { return std::clamp(nearest(v), lo, hi); }

// The group fits try kCandidates starting scales at once, one per float lane
// (plain loops over the candidates, which the compiler vectorises), and
// refine each by least squares: round every element to its nearest level,
// refit the scale (and min) to those levels, repeat. Only the sums of q, q^2
// and x q are accumulated; the squared error follows from them.
constexpr int kCandidates = 16;
constexpr int kRounds = 2;

struct GroupStats {
    float sx = 0, sxx = 0;  // sum of x, of x^2
};
GroupStats stats_of(const float* x, int n) {
    GroupStats g;
    for (int i = 0; i < n; ++i) {
        g.sx += x[i];
        g.sxx += x[i] * x[i];
    }
    return g;
}

// x ~= scale * q - min with q in [0, top], scale > 0, min >= 0 (the lowest
// level is -min <= 0, as the formats subtract dmin * m with m >= 0).
struct ScaleMin {
    float scale = 0.0f;
    float min = 0.0f;
};

// Starts from [min(0, min x), max x] spread over top - 1.4 .. top + 1.6 levels.
ScaleMin fit_with_min(const float* x, int n, int top) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (hi <= lo) return {0.0f, -lo};
    const GroupStats g = stats_of(x, n);
    const float fn = static_cast<float>(n), ftop = static_cast<float>(top);
    float scale[kCandidates], min[kCandidates], best_err[kCandidates], best_scale[kCandidates], best_min[kCandidates];
    for (int c = 0; c < kCandidates; ++c) {
        scale[c] = (hi - lo) / (ftop + 0.2f * static_cast<float>(c - 7));
        min[c] = -lo;
        best_err[c] = std::numeric_limits<float>::infinity();
        best_scale[c] = scale[c];
        best_min[c] = min[c];
    }
    for (int round = 0; round <= kRounds; ++round) {
        float inverse[kCandidates], sq[kCandidates] = {}, sqq[kCandidates] = {}, sxq[kCandidates] = {};
        for (int c = 0; c < kCandidates; ++c) inverse[c] = 1.0f / scale[c];
        for (int i = 0; i < n; ++i) {
            for (int c = 0; c < kCandidates; ++c) {
                const float q = std::min(std::max(std::rint((x[i] + min[c]) * inverse[c]), 0.0f), ftop);
                sq[c] += q;
                sqq[c] += q * q;
                sxq[c] += x[i] * q;
            }
        }
        for (int c = 0; c < kCandidates; ++c) {
            // Error of the current fit: sum of (scale q - min - x)^2.
            const float s = scale[c], m = min[c];
            const float err = s * s * sqq[c] + fn * m * m + g.sxx - 2 * s * m * sq[c] - 2 * s * sxq[c] + 2 * m * g.sx;
            if (err < best_err[c]) {
                best_err[c] = err;
                best_scale[c] = s;
                best_min[c] = m;
            }
            // Refit x = s q + t over these levels, with t = -min <= 0.
            const float det = fn * sqq[c] - sq[c] * sq[c];
            float ns = det > 0 ? (fn * sxq[c] - sq[c] * g.sx) / det : s;
            float nt = det > 0 ? (g.sx - ns * sq[c]) / fn : -m;
            if (nt > 0) {
                nt = 0;
                ns = sqq[c] > 0 ? sxq[c] / sqq[c] : s;
            }
            if (ns > 0) {
                scale[c] = ns;
                min[c] = -nt;
            }
        }
    }
    int pick = 0;
    for (int c = 1; c < kCandidates; ++c) {
        if (best_err[c] < best_err[pick]) pick = c;
    }
    return {best_scale[pick], best_min[pick]};
}

// x ~= scale * q with q in [-half, half - 1]; the scale may be negative so
// that the element of largest magnitude can use the extra level -half.
// Starts from that element on levels -half - 0.4 .. -half + 2.6.
float fit_symmetric(const float* x, int n, int half) {
    float amax = 0.0f, extreme = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            extreme = x[i];
        }
    }
    if (amax == 0.0f) return 0.0f;
    const GroupStats g = stats_of(x, n);
    const float lo = static_cast<float>(-half), hi = static_cast<float>(half - 1);
    float scale[kCandidates], best_err[kCandidates], best_scale[kCandidates];
    for (int c = 0; c < kCandidates; ++c) {
        scale[c] = extreme / (lo + 0.2f * static_cast<float>(c - 2));
        best_err[c] = std::numeric_limits<float>::infinity();
        best_scale[c] = scale[c];
    }
    for (int round = 0; round <= kRounds; ++round) {
        float inverse[kCandidates], sqq[kCandidates] = {}, sxq[kCandidates] = {};
        for (int c = 0; c < kCandidates; ++c) inverse[c] = 1.0f / scale[c];
        for (int i = 0; i < n; ++i) {
            for (int c = 0; c < kCandidates; ++c) {
                const float q = std::min(std::max(std::rint(x[i] * inverse[c]), lo), hi);
                sqq[c] += q * q;
                sxq[c] += x[i] * q;
            }
        }
        for (int c = 0; c < kCandidates; ++c) {
            const float s = scale[c];
            const float err = s * s * sqq[c] - 2 * s * sxq[c] + g.sxx;
            if (err < best_err[c]) {
                best_err[c] = err;
                best_scale[c] = s;
            }
            if (sqq[c] > 0 && sxq[c] != 0) scale[c] = sxq[c] / sqq[c];
        }
    }
    int pick = 0;
    for (int c = 1; c < kCandidates; ++c) {
        if (best_err[c] < best_err[pick]) pick = c;
    }
    return best_scale[pick];
}

// Super-block scale for non-negative group values quantized to [0, top]:
// stores fp16(max / top) and returns the group values as integers.
template <int N>
uint16_t quantize_unsigned_scales(const float (&v)[N], int top, int (&out)[N]) {
    const float vmax = *std::max_element(v, v + N);
    const uint16_t dh = f32_to_fp16(vmax / static_cast<float>(top));
    const float d = fp16_to_f32(dh);
    for (int i = 0; i < N; ++i) out[i] = d > 0 ? round_clamp(v[i] / d, 0, top) : 0;
    return dh;
}

// Super-block scale for signed group scales quantized to [-half, half - 1].
template <int N>
uint16_t quantize_signed_scales(const float (&v)[N], int half, int (&out)[N]) {
    float amax = 0.0f, extreme = 0.0f;
    for (float s : v) {
        if (std::fabs(s) > amax) {
            amax = std::fabs(s);
            extreme = s;
        }
    }
    const uint16_t dh = f32_to_fp16(extreme / static_cast<float>(-half));
    const float d = fp16_to_f32(dh);
    for (int i = 0; i < N; ++i) out[i] = d != 0 ? round_clamp(v[i] / d, -half, half - 1) : 0;
    return dh;
}

// Groups with a min (Q2_K: 16 of 16, Q4_K / Q5_K: 8 of 32), quants in [0, top].
template <int kGroups>
struct MinQuant {
    static constexpr int kSize = kQKK / kGroups;
    uint16_t d, dmin;
    int sc[kGroups], m[kGroups];
    uint8_t q[kQKK];

    MinQuant(const float* x, int top, int scale_top) {
        float scales[kGroups], mins[kGroups];
        for (int g = 0; g < kGroups; ++g) {
            const ScaleMin f = fit_with_min(x + g * kSize, kSize, top);
            scales[g] = f.scale;
            mins[g] = f.min;
        }
        d = quantize_unsigned_scales(scales, scale_top, sc);
        dmin = quantize_unsigned_scales(mins, scale_top, m);
        const float df = fp16_to_f32(d), mf = fp16_to_f32(dmin);
        for (int g = 0; g < kGroups; ++g) {
            const float scale = df * static_cast<float>(sc[g]), min = mf * static_cast<float>(m[g]);
            const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
            for (int i = g * kSize; i < (g + 1) * kSize; ++i) {
                q[i] = static_cast<uint8_t>(round_clamp((x[i] + min) * inverse, 0, top));
            }
        }
    }
};

// 16 symmetric groups of 16 (Q3_K, Q6_K): quants stored as q + half in [0, 2 half).
template <int kHalf, int kScaleHalf>
struct SymmetricQuant {
    uint16_t d;
    int sc[16];
    uint8_t u[kQKK];

    explicit SymmetricQuant(const float* x) {
        float scales[16];
        for (int g = 0; g < 16; ++g) scales[g] = fit_symmetric(x + 16 * g, 16, kHalf);
        d = quantize_signed_scales(scales, kScaleHalf, sc);
        const float df = fp16_to_f32(d);
        for (int g = 0; g < 16; ++g) {
            const float scale = df * static_cast<float>(sc[g]);
            const float inverse = scale != 0 ? 1.0f / scale : 0.0f;
            for (int i = 16 * g; i < 16 * g + 16; ++i) {
                u[i] = static_cast<uint8_t>(round_clamp(x[i] * inverse, -kHalf, kHalf - 1) + kHalf);
            }
        }
    }
};

// Q4_K / Q5_K's 12 bytes of 6-bit scales and mins (inverse of scales_mins_k4).
void pack_scale_min_k4(const int (&sc)[8], const int (&m)[8], uint8_t* out) {
    for (int j = 0; j < 4; ++j) {
        out[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
        out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
    }
}

template <class Block, class Quantize>
void for_each_superblock(const float* src, void* dst, int64_t n, Quantize quantize) {
    auto* out = static_cast<Block*>(dst);
    for (int64_t b = 0; b < n / kQKK; ++b) {
        std::memset(&out[b], 0, sizeof(Block));
        quantize(src + b * kQKK, out[b]);
    }
}

}  // namespace

void quantize_q2_K_ref(const float* src, void* dst, int64_t n) {
    for_each_superblock<BlockQ2_K>(src, dst, n, [](const float* x, BlockQ2_K& b) {
        const MinQuant<16> mq(x, 3, 15);
        b.d = mq.d;
        b.dmin = mq.dmin;
        for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(mq.sc[g] | mq.m[g] << 4);
        for (int e = 0; e < kQKK; ++e) {
            const int h = e / 128, j = e % 128 / 32, k = e % 32;
            b.qs[32 * h + k] |= static_cast<uint8_t>(mq.q[e] << 2 * j);
        }
    });
}

void quantize_q3_K_ref(const float* src, void* dst, int64_t n) {
    for_each_superblock<BlockQ3_K>(src, dst, n, [](const float* x, BlockQ3_K& b) {
        const SymmetricQuant<4, 32> sq(x);
        b.d = sq.d;
        for (int g = 0; g < 16; ++g) {
            const int v = sq.sc[g] + 32;
            b.scales[g % 8] |= static_cast<uint8_t>((v & 0xF) << 4 * (g / 8));
            b.scales[8 + g % 4] |= static_cast<uint8_t>((v >> 4) << 2 * (g / 4));
        }
        for (int e = 0; e < kQKK; ++e) {
            const int h = e / 128, j = e % 128 / 32, k = e % 32;
            b.qs[32 * h + k] |= static_cast<uint8_t>((sq.u[e] & 3) << 2 * j);
            b.hmask[k] |= static_cast<uint8_t>((sq.u[e] >> 2) << (4 * h + j));
        }
    });
}

void quantize_q4_K_ref(const float* src, void* dst, int64_t n) {
    for_each_superblock<BlockQ4_K>(src, dst, n, [](const float* x, BlockQ4_K& b) {
        const MinQuant<8> mq(x, 15, 63);
        b.d = mq.d;
        b.dmin = mq.dmin;
        pack_scale_min_k4(mq.sc, mq.m, b.scales);
        for (int e = 0; e < kQKK; ++e) {
            const int s = e / 32, k = e % 32;
            b.qs[32 * (s / 2) + k] |= static_cast<uint8_t>(mq.q[e] << 4 * (s & 1));
        }
    });
}

void quantize_q5_K_ref(const float* src, void* dst, int64_t n) {
    for_each_superblock<BlockQ5_K>(src, dst, n, [](const float* x, BlockQ5_K& b) {
        const MinQuant<8> mq(x, 31, 63);
        b.d = mq.d;
        b.dmin = mq.dmin;
        pack_scale_min_k4(mq.sc, mq.m, b.scales);
        for (int e = 0; e < kQKK; ++e) {
            const int s = e / 32, k = e % 32;
            b.qs[32 * (s / 2) + k] |= static_cast<uint8_t>((mq.q[e] & 0xF) << 4 * (s & 1));
            b.qh[k] |= static_cast<uint8_t>((mq.q[e] >> 4) << s);
        }
    });
}

void quantize_q6_K_ref(const float* src, void* dst, int64_t n) {
    for_each_superblock<BlockQ6_K>(src, dst, n, [](const float* x, BlockQ6_K& b) {
        const SymmetricQuant<32, 128> sq(x);
        b.d = sq.d;
        for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(sq.sc[g]);
        for (int e = 0; e < kQKK; ++e) {
            const int h = e / 128, g = e % 128 / 32, l = e % 32;
            b.ql[64 * h + 32 * (g & 1) + l] |= static_cast<uint8_t>((sq.u[e] & 0xF) << 4 * (g / 2));
            b.qh[32 * h + l] |= static_cast<uint8_t>((sq.u[e] >> 4) << 2 * g);
        }
    });
}

}  // namespace lantern::quant
