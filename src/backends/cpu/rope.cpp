// Rotary position embedding, alone and on Q and K together.
//
// For pair i of n_rot/2: theta = pos * freq_scale * base^(-2i/n_rot) / ff[i]
// (ff: optional frequency factors, Llama 3 style). Normal mode rotates
// (x[2i], x[2i+1]); NeoX mode rotates (x[i], x[i + n_rot/2]). The rotated
// pairs are scaled by attn_factor; dimensions past n_rot pass through.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_kernel.h"

namespace lantern::cpu {
namespace {

struct RopeParams {
    int n_rot;
    bool neox;
    float base;
    float scale;
    float attn_factor;
    const float* factors;
};

RopeParams params_of(const Tensor& dst, const Tensor* factors) {
    return RopeParams{dst.param_i(0), dst.param_i(1) == static_cast<int32_t>(RopeMode::Neox), dst.param_f(2),
                      dst.param_f(3), dst.param_f(5), factors != nullptr ? data_at<const float>(*factors) : nullptr};
}

// Angle per unit of position for each pair.
std::vector<double> inverse_frequencies(const RopeParams& p) {
    std::vector<double> f(static_cast<size_t>(p.n_rot / 2));
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = p.scale * std::pow(static_cast<double>(p.base), -2.0 * static_cast<double>(i) / p.n_rot);
        if (p.factors != nullptr) f[i] /= p.factors[i];
    }
    return f;
}

void cos_sin(const std::vector<double>& inv_freq, int32_t pos, double attn_factor, float* c, float* s) {
    for (size_t i = 0; i < inv_freq.size(); ++i) {
        const double theta = static_cast<double>(pos) * inv_freq[i];
        c[i] = static_cast<float>(std::cos(theta) * attn_factor);
        s[i] = static_cast<float>(std::sin(theta) * attn_factor);
    }
}

void rotate(const RopeParams& p, const float* c, const float* s, const float* x, float* y, int64_t hd) {
    const int half = p.n_rot / 2;
    if (p.neox) {
        for (int i = 0; i < half; ++i) {
            const float x0 = x[i], x1 = x[i + half];
            y[i] = x0 * c[i] - x1 * s[i];
            y[i + half] = x0 * s[i] + x1 * c[i];
        }
    } else {
        for (int i = 0; i < half; ++i) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            y[2 * i] = x0 * c[i] - x1 * s[i];
            y[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
    }
    for (int64_t i = p.n_rot; i < hd; ++i) y[i] = x[i];
}

// Rotates src [hd, heads, T] into dst heads [head0, head0 + heads).
void rope_into(const KernelContext& ctx, const Tensor& src, const Tensor& dst, int64_t head0, const RopeParams& p,
               const int32_t* pos, int64_t work_offset, int64_t work_total) {
    const int64_t hd = src.ne[0], heads = src.ne[1], T = src.ne[2];
    const std::vector<double> inv_freq = inverse_frequencies(p);
    std::vector<float> c(inv_freq.size()), s(inv_freq.size());
    // Threads split the (token, head) pairs of all parts jointly.
    int64_t begin, end;
    split_range(work_total, ctx.ith, ctx.nth, begin, end);
    int64_t last_t = -1;
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t w = work_offset + t * heads + h;
            if (w < begin || w >= end) continue;
            if (t != last_t) {
                cos_sin(inv_freq, pos[t], p.attn_factor, c.data(), s.data());
                last_t = t;
            }
            rotate(p, c.data(), s.data(), reinterpret_cast<const float*>(row_ptr(src, h, t)),
                   reinterpret_cast<float*>(row_ptr_mut(dst, head0 + h, t)), hd);
        }
    }
}

}  // namespace

void rope(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const RopeParams p = params_of(dst, dst.src[2]);
    rope_into(ctx, x, dst, 0, p, data_at<const int32_t>(*dst.src[1]), 0, x.ne[1] * x.ne[2]);
}

void rope_qk(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    const Tensor& k = *dst.src[1];
    const RopeParams p = params_of(dst, dst.src[3]);
    const int32_t* pos = data_at<const int32_t>(*dst.src[2]);
    const int64_t nq = q.ne[1] * q.ne[2], nk = k.ne[1] * k.ne[2];
    rope_into(ctx, q, dst, 0, p, pos, 0, nq + nk);
    rope_into(ctx, k, dst, q.ne[1], p, pos, nq, nq + nk);
}

}  // namespace lantern::cpu
