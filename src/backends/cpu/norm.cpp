// Row reductions: RMSNorm, the fused add + RMSNorm, and softmax.
#include <cmath>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/cpu_math.h"

namespace lantern::cpu {
namespace {

void norm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    if (w != nullptr) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
    }
}

template <class Fn>
void rows_of(const KernelContext& ctx, const Tensor& shape, Fn&& fn) {
    const int64_t rows = shape.ne[1] * shape.ne[2] * shape.ne[3];
    int64_t begin, end;
    split_range(rows, ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        fn(r % shape.ne[1], (r / shape.ne[1]) % shape.ne[2], r / (shape.ne[1] * shape.ne[2]));
    }
}

}  // namespace

void rms_norm(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const float* w = dst.src[1] != nullptr ? data_at<const float>(*dst.src[1]) : nullptr;
    const float eps = dst.param_f(0);
    rows_of(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        norm_row(reinterpret_cast<const float*>(row_ptr(x, i1, i2, i3)), w,
                 reinterpret_cast<float*>(row_ptr_mut(dst, i1, i2, i3)), dst.ne[0], eps);
    });
}

// dst [K, M, 2]: slice 0 = a + b, slice 1 = rms_norm(slice 0) * w.
void add_rms_norm(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const float* w = dst.src[2] != nullptr ? data_at<const float>(*dst.src[2]) : nullptr;
    const float eps = dst.param_f(0);
    const int64_t n = dst.ne[0];
    int64_t begin, end;
    split_range(dst.ne[1], ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        const float* x0 = reinterpret_cast<const float*>(row_ptr(a, r));
        const float* x1 = reinterpret_cast<const float*>(row_ptr(b, r));
        float* sum = reinterpret_cast<float*>(row_ptr_mut(dst, r, 0));
        for (int64_t i = 0; i < n; ++i) sum[i] = x0[i] + x1[i];
        norm_row(sum, w, reinterpret_cast<float*>(row_ptr_mut(dst, r, 1)), n, eps);
    }
}

void soft_max(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const float s = dst.param_f(0);
    const int64_t n = dst.ne[0];
    rows_of(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const float* in = reinterpret_cast<const float*>(row_ptr(x, i1, i2, i3));
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, i1, i2, i3));
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, in[i] * s);
        float sum = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
            out[i] = fast_exp(in[i] * s - mx);
            sum += out[i];
        }
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < n; ++i) out[i] *= inv;
    });
}

}  // namespace lantern::cpu
