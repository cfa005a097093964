// Row-wise elementwise ops: add, mul (with broadcast), scale, SiLU x up,
// GELU x up, logit soft-capping, sigmoid-gated rows, and type-converting
// copies.
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/cpu_math.h"
#include "core/half.h"

namespace lantern::cpu {
namespace {

// Calls fn(dst_row, i1, i2, i3) for this thread's share of dst's rows.
template <class Fn>
void for_rows(const KernelContext& ctx, const Tensor& dst, Fn&& fn) {
    const int64_t rows = dst.n_rows();
    int64_t begin, end;
    split_range(rows, ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        const int64_t i1 = r % dst.ne[1];
        const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
        const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
        fn(reinterpret_cast<float*>(row_ptr_mut(dst, i1, i2, i3)), i1, i2, i3);
    }
}

// Source row matching dst row (i1, i2, i3), broadcasting dims of size 1 or
// dims that divide dst's.
inline const float* bcast_row(const Tensor& s, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const float*>(row_ptr(s, i1 % s.ne[1], i2 % s.ne[2], i3 % s.ne[3]));
}

template <class Op>
void binary(const KernelContext& ctx, const Tensor& dst, Op op) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const int64_t n = dst.ne[0];
    for_rows(ctx, dst, [&](float* y, int64_t i1, int64_t i2, int64_t i3) {
        const float* x0 = bcast_row(a, i1, i2, i3);
        const float* x1 = bcast_row(b, i1, i2, i3);
        for (int64_t i = 0; i < n; ++i) y[i] = op(x0[i], x1[i]);
    });
}

}  // namespace

void add(const KernelContext& ctx, const Tensor& dst) {
    binary(ctx, dst, [](float x, float y) { return x + y; });
}

void mul(const KernelContext& ctx, const Tensor& dst) {
    binary(ctx, dst, [](float x, float y) { return x * y; });
}

void sigmoid_gate(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& g = *dst.src[1];
    const int64_t n = dst.ne[0];
    for_rows(ctx, dst, [&](float* y, int64_t i1, int64_t i2, int64_t i3) {
        const float* x = bcast_row(a, i1, i2, i3);
        const float s = 1.0f / (1.0f + std::exp(-bcast_row(g, i1, i2, i3)[0]));
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
    });
}

void silu_mul(const KernelContext& ctx, const Tensor& dst) {
    binary(ctx, dst, [](float g, float u) { return silu(g) * u; });
}

void gelu_mul(const KernelContext& ctx, const Tensor& dst) {
    binary(ctx, dst, [](float g, float u) { return gelu_tanh(g) * u; });
}

void softcap(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const float cap = dst.param_f(0), inv = 1.0f / cap;
    const int64_t n = dst.ne[0];
    for_rows(ctx, dst, [&](float* y, int64_t i1, int64_t i2, int64_t i3) {
        const float* x = reinterpret_cast<const float*>(row_ptr(a, i1, i2, i3));
        for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(x[i] * inv);
    });
}

void scale(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const float s = dst.param_f(0);
    const int64_t n = dst.ne[0];
    for_rows(ctx, dst, [&](float* y, int64_t i1, int64_t i2, int64_t i3) {
        const float* x = reinterpret_cast<const float*>(row_ptr(a, i1, i2, i3));
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
    });
}

bool copy_accepts(const Tensor& dst) {
    auto plain = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; };
    return plain(dst.type) && plain(dst.src[0]->type) && dst.src[0]->nb[0] == dtype_type_size(dst.src[0]->type);
}

void copy(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const int64_t n = dst.ne[0];
    const int64_t rows = dst.n_rows();
    int64_t begin, end;
    split_range(rows, ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        const int64_t i1 = r % dst.ne[1];
        const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
        const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
        const uint8_t* src = row_ptr(a, i1, i2, i3);
        uint8_t* out = row_ptr_mut(dst, i1, i2, i3);
        if (a.type == dst.type) {
            std::memcpy(out, src, dst.row_bytes());
            continue;
        }
        for (int64_t i = 0; i < n; ++i) {
            float v;
            switch (a.type) {
                case DType::F16: v = fp16_to_f32(reinterpret_cast<const uint16_t*>(src)[i]); break;
                case DType::BF16: v = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[i]); break;
                default: v = reinterpret_cast<const float*>(src)[i]; break;
            }
            switch (dst.type) {
                case DType::F16: reinterpret_cast<uint16_t*>(out)[i] = f32_to_fp16(v); break;
                case DType::BF16: reinterpret_cast<uint16_t*>(out)[i] = f32_to_bf16(v); break;
                default: reinterpret_cast<float*>(out)[i] = v; break;
            }
        }
    }
}

}  // namespace lantern::cpu
