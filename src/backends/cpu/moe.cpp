// Mixture-of-experts feed-forward (Op::MoeFfn) on the CPU.
//
// Each token is routed to its n_used experts; the (token, expert) pairs are
// then grouped by expert, so that an expert's rows are read once for all the
// tokens that chose it and multiplied with the weight type's own tiled dot
// products (vec_dot over several activation rows), as a dense matrix
// multiply does: a prompt's tokens share the experts they have in common.
// Experts the backend holds packed (quant/packed.h, slice e of the 3-D
// tensor at e * packed_bytes(rows, cols)) go through the packed tiles, with
// the rows converted to the packed kernels' activation format.
//
//   1. router logits by the router's own dot products (a small matrix product)
//   2. softmax, the n_used largest per token, their weights
//   3. the pairs sorted by expert; their activation rows gathered in order
//   4. gate and up products per expert, then silu(gate) * up
//   5. those rows in down's activation type; down products per expert
//   6. each token's output: its experts' rows added by weight
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace lantern::cpu {
namespace {

constexpr int64_t kRowBlock = 16;  // weight rows per work item (a multiple of quant::kPackRows)
static_assert(kRowBlock % quant::kPackRows == 0);

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

// Where each part of the work lives in the kernel's scratch.
struct MoeScratch {
    int64_t D, T, E, F, k, P;
    size_t x_row, h_row;  // bytes of a gathered input row (gate's activation type) and of a hidden row (down's)
    bool h_float;  // hidden rows are f32 (down's vec_dot_type is F32): read as they are
    size_t x_router_row;  // bytes of an input row in the router's activation type (0: f32, read in place)
    size_t x_router, logits, ids, weights, offsets, order, slot, xg, gate, up, hq, y, total;

    // Rows are laid out for either format (the file layout's activation
    // type, or the packed kernels' when this CPU packs the type), so that the
    // scratch's size does not depend on which weights the backend packed.
    explicit MoeScratch(const Tensor& dst) {
        const Tensor& x = *dst.src[0];
        const Tensor& gate_w = *dst.src[2];
        D = x.ne[0], T = x.ne[1], E = dst.src[1]->ne[1], F = gate_w.ne[1], k = dst.param_i(0), P = T * k;
        const DType gt = quant::type_ops(gate_w.type)->vec_dot_type;
        const DType dt = quant::type_ops(dst.src[4]->type)->vec_dot_type;
        h_float = dt == DType::F32;
        x_row = gt == DType::F32 ? static_cast<size_t>(D) * sizeof(float) : dtype_row_size(gt, D);
        h_row = h_float ? static_cast<size_t>(F) * sizeof(float) : dtype_row_size(dt, F);
        if (const quant::PackedOps* po = quant::packed_ops(gate_w.type)) x_row = std::max(x_row, po->act_row_bytes(D));
        if (const quant::PackedOps* po = quant::packed_ops(dst.src[4]->type)) h_row = std::max(h_row, po->act_row_bytes(F));
        size_t off = 0;
        auto take = [&](size_t n) {
            const size_t at = off;
            off = align64(off + n);
            return at;
        };
        const auto p = static_cast<size_t>(P);
        const DType rt = quant::type_ops(dst.src[1]->type)->vec_dot_type;
        x_router_row = rt == DType::F32 ? 0 : dtype_row_size(rt, D);
        x_router = take(static_cast<size_t>(T) * x_router_row);
        logits = take(static_cast<size_t>(T * E) * sizeof(float));
        ids = take(p * sizeof(int32_t));
        weights = take(p * sizeof(float));
        offsets = take(static_cast<size_t>(E + 1) * sizeof(int32_t));  // expert e's pairs: [offsets[e], offsets[e + 1])
        order = take(p * sizeof(int32_t));                              // sorted position -> pair
        slot = take(p * sizeof(int32_t));                               // pair -> sorted position
        xg = take(p * x_row);
        gate = take(p * static_cast<size_t>(F) * sizeof(float));  // then silu(gate) * up
        up = take(p * static_cast<size_t>(F) * sizeof(float));
        hq = take(h_float ? 0 : p * h_row);
        y = take(p * static_cast<size_t>(D) * sizeof(float));
        total = off;
    }
};

bool weights_ok(const Tensor& w) {
    const quant::TypeOps* ops = quant::type_ops(w.type);
    if (ops == nullptr || ops->vec_dot == nullptr) return false;
    if (ops->vec_dot_type != DType::F32) {
        const quant::TypeOps* act = quant::type_ops(ops->vec_dot_type);
        if (act == nullptr || act->from_float == nullptr) return false;
    }
    return w.nb[0] == dtype_type_size(w.type) && w.ne[3] == 1;
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// out[c * ldc + r] = row (first + r) of expert e's matrix w . activation row
// c, for the rows [first, last) and the expert's `count` gathered rows.
void expert_product(const quant::TypeOps& ops, const Tensor& w, int64_t e, int64_t first, int64_t last,
                    const uint8_t* act, size_t act_row, int64_t count, float* out, size_t ldc) {
    const uint8_t* base = static_cast<const uint8_t*>(tensor_address(w)) + static_cast<size_t>(e) * w.nb[2];
    const int max_nr = count == 1 ? ops.wide_nr : ops.max_nr;
    for (int64_t c = 0; c < count; c += ops.max_nc) {
        const int nc = static_cast<int>(std::min<int64_t>(ops.max_nc, count - c));
        for (int64_t n = first; n < last; n += max_nr) {
            const int nr = static_cast<int>(std::min<int64_t>(max_nr, last - n));
            ops.vec_dot(w.ne[0], out + static_cast<size_t>(c) * ldc + n, ldc, base + n * w.nb[1], w.nb[1],
                        act + static_cast<size_t>(c) * act_row, act_row, nr, nc);
        }
    }
}

// The same from expert e's packed slice (`packed`: the whole 3-D tensor's
// packed copy); first and last are multiples of kPackRows.
void packed_expert_product(const quant::PackedOps& ops, const Tensor& w, const void* packed, int64_t e, int64_t first,
                           int64_t last, const uint8_t* act, size_t act_row, int64_t count, float* out, size_t ldc) {
    const int64_t K = w.ne[0];
    const uint8_t* base = static_cast<const uint8_t*>(packed) + static_cast<size_t>(e) * ops.packed_bytes(w.ne[1], K) +
                          static_cast<size_t>(first / quant::kPackRows) * ops.packed_bytes(quant::kPackRows, K);
    quant::packed_product(ops, K, last - first, base, act, act_row, count, out + first, ldc);
}

// Expert products of one weight tensor, packed or as in the file.
struct ExpertWeights {
    const Tensor& w;
    const void* packed;  // null: the file's layout
    const quant::TypeOps& ops;
    const quant::PackedOps* pops;

    ExpertWeights(const Tensor& t, const void* p)
        : w(t), packed(p), ops(*quant::type_ops(t.type)), pops(p != nullptr ? quant::packed_ops(t.type) : nullptr) {}

    // An f32 row into this tensor's activation format.
    void convert(const float* x, uint8_t* to, int64_t n) const {
        if (pops != nullptr) {
            pops->act_from_float(x, to, n);
        } else if (ops.vec_dot_type == DType::F32) {
            std::memcpy(to, x, static_cast<size_t>(n) * sizeof(float));
        } else {
            quant::type_ops(ops.vec_dot_type)->from_float(x, to, n);
        }
    }
    void product(int64_t e, int64_t first, int64_t last, const uint8_t* act, size_t act_row, int64_t count, float* out,
                 size_t ldc) const {
        if (pops != nullptr) {
            packed_expert_product(*pops, w, packed, e, first, last, act, act_row, count, out, ldc);
        } else {
            expert_product(ops, w, e, first, last, act, act_row, count, out, ldc);
        }
    }
};

// Calls fn(e, first, last) for this thread's share of (expert, row block)
// items over rows [0, rows) of every expert some pair chose. An item costs
// as many rows as its expert's pairs, so thread ith takes item ith, then
// whichever is next (ThreadPool::claim), not every nth.
//
// An expert with many pairs takes kRowBlock rows per item, which stay in
// cache while its activation rows pass over them. One with a few (every
// expert while decoding) is bound by memory: its items are as long as about
// four items per thread allow, so that each is a long stream. Items of 16
// rows (18 KB of a 2,048-column Q4_K expert) left the hardware prefetchers
// too little to run ahead on: a 2-layer qwen3moe decoded 290 tokens/s with
// them and 473 with whole experts (bench/RESULTS.md).
template <class Fn>
void each_expert_block(const KernelContext& ctx, const int32_t* offsets, int64_t E, int64_t rows, Fn&& fn) {
    constexpr int32_t kFewPairs = 4;
    int64_t used = 0;
    for (int64_t e = 0; e < E; ++e) used += offsets[e + 1] != offsets[e] ? 1 : 0;
    const int64_t stream = std::max(kRowBlock, used * rows / (4 * ctx.nth) / kRowBlock * kRowBlock);
    int64_t item = 0, mine = ctx.ith;
    for (int64_t e = 0; e < E; ++e) {
        const int32_t count = offsets[e + 1] - offsets[e];
        if (count == 0) continue;
        const int64_t block = count <= kFewPairs ? stream : kRowBlock;
        for (int64_t first = 0; first < rows; first += block, ++item) {
            if (item != mine) continue;
            fn(e, first, std::min(rows, first + block));
            mine = ctx.next_item();
        }
    }
}

}  // namespace

bool moe_ffn_accepts(const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && dst.type == DType::F32 &&
           dst.nb[0] == sizeof(float) && weights_ok(*dst.src[1]) && dst.src[1]->ne[2] == 1 &&
           weights_ok(*dst.src[2]) && weights_ok(*dst.src[3]) && weights_ok(*dst.src[4]) &&
           dst.src[2]->type == dst.src[3]->type;
}

size_t moe_ffn_scratch(const Tensor& dst, int /*nth*/) { return MoeScratch(dst).total; }

void moe_ffn(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& x = *dst.src[0];
    const Tensor& router = *dst.src[1];
    const Tensor& gate = *dst.src[2];
    const Tensor& up = *dst.src[3];
    const Tensor& down = *dst.src[4];
    const MoeScratch s(dst);
    const int64_t D = s.D, T = s.T, E = s.E, F = s.F, k = s.k, P = s.P;
    // Gate and up share their activation rows: packed only both or neither.
    const bool gate_up_packed = ctx.packed[2] != nullptr && ctx.packed[3] != nullptr;
    const ExpertWeights gw(gate, gate_up_packed ? ctx.packed[2] : nullptr);
    const ExpertWeights uw(up, gate_up_packed ? ctx.packed[3] : nullptr);
    const ExpertWeights dw(down, ctx.packed[4]);
    auto f32 = [&](size_t off) { return reinterpret_cast<float*>(ctx.scratch + off); };
    auto i32 = [&](size_t off) { return reinterpret_cast<int32_t*>(ctx.scratch + off); };
    float* logits = f32(s.logits);
    int32_t* ids = i32(s.ids);
    float* weights = f32(s.weights);
    int32_t* offsets = i32(s.offsets);
    int32_t* order = i32(s.order);
    int32_t* slot = i32(s.slot);
    uint8_t* xg = ctx.scratch + s.xg;
    float* g = f32(s.gate);
    float* u = f32(s.up);
    float* y = f32(s.y);
    int64_t b = 0, e = 0;

    // 1. Router logits: the router's rows against every token's, by the
    // router type's tiles (the inputs first in its activation type).
    const quant::TypeOps& rops = *quant::type_ops(router.type);
    const uint8_t* xr = static_cast<const uint8_t*>(tensor_address(x));
    size_t xr_row = x.nb[1];
    if (s.x_router_row != 0) {
        uint8_t* to = ctx.scratch + s.x_router;
        split_range(T, ctx.ith, ctx.nth, b, e);
        for (int64_t t = b; t < e; ++t) {
            quant::type_ops(rops.vec_dot_type)->from_float(reinterpret_cast<const float*>(row_ptr(x, t)),
                                                           to + static_cast<size_t>(t) * s.x_router_row, D);
        }
        xr = to, xr_row = s.x_router_row;
        ctx.barrier();
    }
    split_range(E, ctx.ith, ctx.nth, b, e);
    for (int64_t t = 0; t < T; t += rops.max_nc) {
        const int nc = static_cast<int>(std::min<int64_t>(rops.max_nc, T - t));
        for (int64_t n = b; n < e; n += rops.max_nr) {
            const int nr = static_cast<int>(std::min<int64_t>(rops.max_nr, e - n));
            rops.vec_dot(D, logits + t * E + n, static_cast<size_t>(E), row_ptr(router, n), router.nb[1],
                         xr + static_cast<size_t>(t) * xr_row, xr_row, nr, nc);
        }
    }
    ctx.barrier();

    // 2. Per token the softmax's n_used largest (ties to the lower index)
    // and their weights.
    split_range(T, ctx.ith, ctx.nth, b, e);
    for (int64_t t = b; t < e; ++t) {
        float* p = logits + t * E;
        const float m = *std::max_element(p, p + E);
        float sum = 0.0f;
        for (int64_t i = 0; i < E; ++i) {
            p[i] = std::exp(p[i] - m);
            if (!(p[i] >= 0.0f)) p[i] = 0.0f;  // NaN logits: still n_used experts, all valid ids
            sum += p[i];
        }
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

    // 3. The pairs by expert (one thread: P is small), then each pair's input
    // row gathered into its sorted place, in gate's activation type.
    if (ctx.ith == 0) {
        std::fill(offsets, offsets + E + 1, 0);
        for (int64_t p = 0; p < P; ++p) ++offsets[ids[p] + 1];
        for (int64_t i = 0; i < E; ++i) offsets[i + 1] += offsets[i];
        std::vector<int32_t> next(offsets, offsets + E);
        for (int64_t p = 0; p < P; ++p) {
            const int32_t at = next[static_cast<size_t>(ids[p])]++;
            order[at] = static_cast<int32_t>(p);
            slot[p] = at;
        }
    }
    ctx.barrier();
    split_range(P, ctx.ith, ctx.nth, b, e);
    for (int64_t i = b; i < e; ++i) {
        gw.convert(reinterpret_cast<const float*>(row_ptr(x, order[i] / k)), xg + static_cast<size_t>(i) * s.x_row, D);
    }
    ctx.barrier();

    // 4. Gate and up, expert by expert, then silu(gate) * up in place.
    each_expert_block(ctx, offsets, E, F, [&](int64_t ex, int64_t first, int64_t last) {
        const int64_t at = offsets[ex], count = offsets[ex + 1] - at;
        const uint8_t* act = xg + static_cast<size_t>(at) * s.x_row;
        gw.product(ex, first, last, act, s.x_row, count, g + at * F, static_cast<size_t>(F));
        uw.product(ex, first, last, act, s.x_row, count, u + at * F, static_cast<size_t>(F));
        for (int64_t c = at; c < at + count; ++c) {
            for (int64_t n = first; n < last; ++n) g[c * F + n] = silu(g[c * F + n]) * u[c * F + n];
        }
    });
    ctx.barrier();

    // 5. The hidden rows in down's activation type; down, expert by expert.
    const uint8_t* h = reinterpret_cast<const uint8_t*>(g);
    if (!s.h_float) {
        uint8_t* hq = ctx.scratch + s.hq;
        split_range(P, ctx.ith, ctx.nth, b, e);
        for (int64_t i = b; i < e; ++i) {
            dw.convert(g + i * F, hq + static_cast<size_t>(i) * s.h_row, F);
        }
        h = hq;
        ctx.barrier();
    }
    each_expert_block(ctx, offsets, E, D, [&](int64_t ex, int64_t first, int64_t last) {
        const int64_t at = offsets[ex], count = offsets[ex + 1] - at;
        dw.product(ex, first, last, h + static_cast<size_t>(at) * s.h_row, s.h_row, count, y + at * D,
                   static_cast<size_t>(D));
    });
    ctx.barrier();

    // 6. Each token's experts added by weight.
    split_range(T, ctx.ith, ctx.nth, b, e);
    for (int64_t t = b; t < e; ++t) {
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, t));
        std::fill(out, out + D, 0.0f);
        for (int64_t j = 0; j < k; ++j) {
            const float w = weights[t * k + j];
            const float* yr = y + static_cast<int64_t>(slot[t * k + j]) * D;
            for (int64_t n = 0; n < D; ++n) out[n] += w * yr[n];
        }
    }
}

}  // namespace lantern::cpu
