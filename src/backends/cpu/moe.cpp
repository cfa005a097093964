// Mixture-of-experts feed-forward (Op::MoeFfn): each token is routed to its
// n_used experts, whose SwiGLU rows run with the weight types' own dot
// products, one activation column at a time (a decode step's shape; a
// prompt's tokens each take their experts' rows again, which is correct but
// not the tiled speed of a dense matrix multiply).
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_kernel.h"
#include "quant/quant.h"

namespace lantern::cpu {
namespace {

constexpr int kMaxTile = 16;  // weight rows per vec_dot call, at most

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

// Where each part of the work lives in the kernel's scratch.
struct MoeScratch {
    int64_t D, T, E, F, k;
    size_t xq_row, hq_row;  // bytes of an activation row in gate's / down's vec_dot_type (0: f32 rows as they are)
    size_t router, logits, ids, weights, xq, hidden, hq, total;

    explicit MoeScratch(const Tensor& dst) {
        const Tensor& x = *dst.src[0];
        const Tensor& gate = *dst.src[2];
        D = x.ne[0], T = x.ne[1], E = dst.src[1]->ne[1], F = gate.ne[1], k = dst.param_i(0);
        const DType gt = quant::type_ops(gate.type)->vec_dot_type;
        const DType dt = quant::type_ops(dst.src[4]->type)->vec_dot_type;
        xq_row = gt == DType::F32 ? 0 : dtype_row_size(gt, D);
        hq_row = dt == DType::F32 ? 0 : dtype_row_size(dt, F);
        size_t off = 0;
        auto take = [&](size_t n) {
            const size_t at = off;
            off = align64(off + n);
            return at;
        };
        const auto P = static_cast<size_t>(T * k);
        router = take(static_cast<size_t>(E * D) * sizeof(float));
        logits = take(static_cast<size_t>(T * E) * sizeof(float));
        ids = take(P * sizeof(int32_t));
        weights = take(P * sizeof(float));
        xq = take(static_cast<size_t>(T) * xq_row);
        hidden = take(P * static_cast<size_t>(F) * sizeof(float));
        hq = take(P * hq_row);
        total = off;
    }
};

bool weights_ok(const Tensor& w) {
    const quant::TypeOps* ops = quant::type_ops(w.type);
    if (ops == nullptr || ops->vec_dot == nullptr || ops->max_nr > kMaxTile) return false;
    if (ops->vec_dot_type != DType::F32) {
        const quant::TypeOps* act = quant::type_ops(ops->vec_dot_type);
        if (act == nullptr || act->from_float == nullptr) return false;
    }
    return w.nb[0] == dtype_type_size(w.type) && w.ne[3] == 1;
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

bool moe_ffn_accepts(const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const quant::TypeOps* router = quant::type_ops(dst.src[1]->type);
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && dst.type == DType::F32 &&
           dst.nb[0] == sizeof(float) && router != nullptr && router->to_float != nullptr &&
           dst.src[1]->nb[0] == dtype_type_size(dst.src[1]->type) && weights_ok(*dst.src[2]) &&
           weights_ok(*dst.src[3]) && weights_ok(*dst.src[4]) && dst.src[2]->type == dst.src[3]->type;
}

size_t moe_ffn_scratch(const Tensor& dst, int /*nth*/) { return MoeScratch(dst).total; }

void moe_ffn(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const Tensor& router = *dst.src[1];
    const Tensor& gate = *dst.src[2];
    const Tensor& up = *dst.src[3];
    const Tensor& down = *dst.src[4];
    const MoeScratch s(dst);
    const int64_t D = s.D, T = s.T, E = s.E, F = s.F, k = s.k, P = T * k;
    const quant::TypeOps& gops = *quant::type_ops(gate.type);
    const quant::TypeOps& dops = *quant::type_ops(down.type);
    auto at = [&](size_t off) { return ctx.scratch + off; };
    float* r = reinterpret_cast<float*>(at(s.router));
    float* logits = reinterpret_cast<float*>(at(s.logits));
    int32_t* ids = reinterpret_cast<int32_t*>(at(s.ids));
    float* weights = reinterpret_cast<float*>(at(s.weights));
    float* hidden = reinterpret_cast<float*>(at(s.hidden));
    int64_t b = 0, e = 0;

    // The router as floats, and each token's row in gate's activation type.
    split_range(E, ctx.ith, ctx.nth, b, e);
    const quant::TypeOps& rops = *quant::type_ops(router.type);
    for (int64_t i = b; i < e; ++i) rops.to_float(row_ptr(router, i), r + i * D, D);
    if (s.xq_row != 0) {
        const quant::TypeOps& act = *quant::type_ops(gops.vec_dot_type);
        split_range(T, ctx.ith, ctx.nth, b, e);
        for (int64_t t = b; t < e; ++t) {
            act.from_float(reinterpret_cast<const float*>(row_ptr(x, t)), at(s.xq) + static_cast<size_t>(t) * s.xq_row, D);
        }
    }
    ctx.barrier();

    // Router logits, then per token the softmax's n_used largest.
    split_range(T * E, ctx.ith, ctx.nth, b, e);
    for (int64_t i = b; i < e; ++i) {
        const float* xr = reinterpret_cast<const float*>(row_ptr(x, i / E));
        const float* rr = r + (i % E) * D;
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) acc += xr[d] * rr[d];
        logits[i] = acc;
    }
    ctx.barrier();
    split_range(T, ctx.ith, ctx.nth, b, e);
    for (int64_t t = b; t < e; ++t) {
        float* p = logits + t * E;
        const float m = *std::max_element(p, p + E);
        float sum = 0.0f;
        for (int64_t i = 0; i < E; ++i) sum += p[i] = std::exp(p[i] - m);
        float chosen = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
            int64_t best = -1;
            for (int64_t i = 0; i < E; ++i) {
                if (p[i] >= 0.0f && (best < 0 || p[i] > p[best])) best = i;
            }
            ids[t * k + j] = static_cast<int32_t>(best);
            weights[t * k + j] = p[best] / sum;
            chosen += p[best] / sum;
            p[best] = -1.0f;  // taken
        }
        if (dst.param_i(1) != 0) {
            for (int64_t j = 0; j < k; ++j) weights[t * k + j] /= chosen;
        }
    }
    ctx.barrier();

    // Each (token, expert) pair's hidden units: silu(gate . x) * (up . x).
    split_range(F, ctx.ith, ctx.nth, b, e);
    const auto* gbase = static_cast<const uint8_t*>(tensor_address(gate));
    const auto* ubase = static_cast<const uint8_t*>(tensor_address(up));
    float sg[kMaxTile], su[kMaxTile];
    for (int64_t p = 0; p < P; ++p) {
        const int64_t t = p / k, ex = ids[p];
        const void* y = s.xq_row != 0 ? static_cast<const void*>(at(s.xq) + static_cast<size_t>(t) * s.xq_row)
                                      : static_cast<const void*>(row_ptr(x, t));
        const uint8_t* wg = gbase + static_cast<size_t>(ex) * gate.nb[2];
        const uint8_t* wu = ubase + static_cast<size_t>(ex) * up.nb[2];
        float* h = hidden + p * F;
        for (int64_t n = b; n < e; n += gops.max_nr) {
            const int nr = static_cast<int>(std::min<int64_t>(gops.max_nr, e - n));
            gops.vec_dot(D, sg, kMaxTile, wg + n * gate.nb[1], gate.nb[1], y, 0, nr, 1);
            gops.vec_dot(D, su, kMaxTile, wu + n * up.nb[1], up.nb[1], y, 0, nr, 1);
            for (int i = 0; i < nr; ++i) h[n + i] = silu(sg[i]) * su[i];
        }
    }
    ctx.barrier();
    if (s.hq_row != 0) {
        const quant::TypeOps& act = *quant::type_ops(dops.vec_dot_type);
        split_range(P, ctx.ith, ctx.nth, b, e);
        for (int64_t p = b; p < e; ++p) act.from_float(hidden + p * F, at(s.hq) + static_cast<size_t>(p) * s.hq_row, F);
        ctx.barrier();
    }

    // dst[:, t] = sum over the token's experts of weight * (down . hidden).
    split_range(D, ctx.ith, ctx.nth, b, e);
    const auto* dbase = static_cast<const uint8_t*>(tensor_address(down));
    float sd[kMaxTile];
    for (int64_t t = 0; t < T; ++t) {
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, t));
        for (int64_t n = b; n < e; ++n) out[n] = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t p = t * k + j;
            const uint8_t* wd = dbase + static_cast<size_t>(ids[p]) * down.nb[2];
            const void* y = s.hq_row != 0 ? static_cast<const void*>(at(s.hq) + static_cast<size_t>(p) * s.hq_row)
                                          : static_cast<const void*>(hidden + p * F);
            for (int64_t n = b; n < e; n += dops.max_nr) {
                const int nr = static_cast<int>(std::min<int64_t>(dops.max_nr, e - n));
                dops.vec_dot(F, sd, kMaxTile, wd + n * down.nb[1], down.nb[1], y, 0, nr, 1);
                for (int i = 0; i < nr; ++i) out[n + i] += weights[p] * sd[i];
            }
        }
    }
}

}  // namespace lantern::cpu
