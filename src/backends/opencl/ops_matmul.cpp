// Host side of kernels/matvec.cl, matmul.cl, matmul_nv.cl and quant.cl:
// matrix products, activation quantization and row lookup.
//
// Products with block-32 weights read 8-bit activations: made by the
// producer of the rows when it knew (norms, attention, the gated
// activation), else by quantize_q8 here, once per step and input.
// M <= 8 rows: matrix-vector kernels (several products of one input share a
// launch); more: tiled kernels, the tensor-core ones on NVIDIA.
#include <algorithm>
#include <string>

#include "backends/opencl/ops.h"
#include "backends/opencl/weight_layout.h"
#include "graph/fusion.h"

namespace lantern::ocl {
namespace {

constexpr int64_t kMatvecMaxRows = 8;
constexpr int64_t kMv8Rows = 32;  // weight rows per work-group of the 2..8-row kernels (MV8_R)

// Whether the tensor-core prompt kernels (matmul_nv.cl) take `t`: they are
// built and take one scale per block.
bool mma_takes(ProgramCache& p, DType t) { return p.available(ProgramId::MatmulNv) && !has_group16_scales(t); }

bool plain_weight(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool is_weight(const Tensor& t) { return (t.storage_root()->flags & kTensorWeight) != 0 && t.view_src == nullptr; }

int64_t rows_of(const Tensor& x) { return x.ne[1] * x.ne[2] * x.ne[3]; }

// One matrix's arguments of a matvec launch: (w, qs, qh, sc, d, d_off, d_stride, n).
void matrix_args(Args& a, const Tensor* node) {
    const Tensor& w = *node->src[0];
    if (is_block32(w.type)) {
        const QuantLayout l = quant_layout(w);
        a.mem(mem_of(w)).u64(w.offset + l.qs).u64(w.offset + l.qh).u64(w.offset + l.sc);
    } else {
        a.mem(mem_of(w)).u64(w.offset).u64(w.nb[1]).u64(0);
    }
    a.tensor(*node).u64(node->nb[1]).i32(w.ne[1]);
}

// The 8-bit input arguments of a block-32 product; for blocks still to be
// scaled by their RMSNorm (MV_ACT_ARGS_SCALED in matvec.cl) also the sums of
// squares and the norm's sum half, weight and normed half.
void q8_args(Args& args, const Q8Act& q) {
    args.mem(q.mem).u64(q.q).u64(q.ds);
    if (q.norm == nullptr) return;
    const Tensor& norm = *q.norm;
    const Tensor* w = norm.src[2];
    args.mem(q.parts_mem).u64(q.parts).i32(q.n_parts).f32(norm.param_f(0)).tensor(norm)
        .tensor(w != nullptr ? *w : norm).i32(w != nullptr).mem(mem_of(norm)).u64(norm.offset + norm.nb[2]);
}

// The normed half of a one-row add + RMSNorm, as the products read it.
ActKey normed_key(const Tensor& norm) { return ActKey{mem_of(norm), norm.offset + norm.nb[2], norm.ne[0], 1, norm.nb[1]}; }

// `add_norm`: the add + RMSNorm whose first half ends this product (null: none).
void launch_matvec(Dispatch& d, const std::vector<const Tensor*>& nodes, const Tensor* add_norm = nullptr) {
    const Tensor& first = *nodes[0];
    const Tensor& w = *first.src[0];
    const Tensor& x = *first.src[1];
    const int64_t K = w.ne[0], M = rows_of(x);
    const Q8Act q = is_block32(w.type) ? q8_input(d, x) : Q8Act{};
    const char* kind = add_norm != nullptr ? "mva_" : q.norm != nullptr ? "mvs_" : "mv_";
    const std::string name = std::string(kind) + dtype_name(w.type) + (M == 1 ? "_1" : "_8");
    cl_kernel k = d.kernel(ProgramId::Matvec, name.c_str());
    Args args(k);
    // Rows per group and group size: the one-row kernels of block-32 weights
    // have their own shape, those ending in an add + RMSNorm 32 rows (one
    // 8-bit block); the rest take 32 rows per group.
    const LaunchShape& sh = d.shape();
    const bool one = M == 1 && is_block32(w.type);
    const int64_t rows = add_norm != nullptr ? 32 : one ? static_cast<int64_t>(sh.mv_rows()) : kMv8Rows;
    const size_t wg = add_norm != nullptr ? sh.mva_wg() : one ? sh.mv_wg : kMv8Rows * sh.mv8_tpr;
    size_t groups = 0;
    for (size_t i = 0; i < 3; ++i) {
        // Unused slots repeat the first matrix with no rows.
        if (i < nodes.size()) {
            matrix_args(args, nodes[i]);
            groups += static_cast<size_t>((nodes[i]->src[0]->ne[1] + rows - 1) / rows);
        } else {
            args.mem(mem_of(w)).u64(0).u64(0).u64(0).tensor(first).u64(0).i32(0);
        }
    }
    if (is_block32(w.type)) {
        q8_args(args, q);
    } else {
        args.tensor(x).u64(x.nb[1]);
    }
    args.i32(K).i32(M);
    if (add_norm != nullptr) {
        // MV_OUT_ARGS_ADDNORM: the residual, the norm's weight, its sum half,
        // the 8-bit blocks of sum * weight and one sum of squares per group.
        const Tensor& r = *add_norm->src[0];
        const Tensor* nw = add_norm->src[2];
        const int64_t N = w.ne[1];
        const OpenClBackend::Scratch parts = d.scratch(static_cast<size_t>(N / 32) * sizeof(float));
        Q8Act& u = d.make_q8(normed_key(*add_norm), N, 1);
        u.norm = add_norm;
        u.parts_mem = parts.mem;
        u.parts = parts.offset;
        u.n_parts = static_cast<int>(N / 32);
        args.tensor(r).tensor(nw != nullptr ? *nw : r).i32(nw != nullptr).tensor(*add_norm).mem(u.mem).u64(u.q)
            .u64(u.ds).mem(parts.mem).u64(parts.offset);
    }
    d.launch1(k, groups * wg, wg);
}

void launch_matmul(Dispatch& d, const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    const int64_t N = w.ne[1], K = w.ne[0], M = rows_of(x);
    if (!is_block32(w.type)) {
        cl_kernel k = d.kernel(ProgramId::Matmul, "mm_plain");
        Args(k).tensor(w).u64(w.nb[1]).i32(static_cast<int>(w.type)).tensor(x).u64(x.nb[1]).tensor(node)
            .u64(node.nb[1]).i32(N).i32(K).i32(M);
        const size_t g[2] = {static_cast<size_t>((N + 63) / 64) * 256, static_cast<size_t>((M + 63) / 64)};
        const size_t l[2] = {256, 1};
        d.launch(k, 2, g, l);
        return;
    }
    const Q8Act q = q8_input(d, x);
    const QuantLayout lay = quant_layout(w);
    const bool mma = mma_takes(d.programs(), w.type);
    const std::string name = std::string(mma ? "mm_nv_" : "mm_") + dtype_name(w.type);
    cl_kernel k = d.kernel(mma ? ProgramId::MatmulNv : ProgramId::Matmul, name.c_str());
    Args(k).mem(mem_of(w)).u64(w.offset + lay.qs).u64(w.offset + lay.qh).u64(w.offset + lay.sc)
        .mem(q.mem).u64(q.q).u64(q.ds).tensor(node).u64(node.nb[1]).i32(N).i32(K).i32(M);
    const size_t tile_n = mma ? 128 : 64, group = mma ? 128 : 256;
    const size_t g[2] = {static_cast<size_t>((N + tile_n - 1) / tile_n) * group, static_cast<size_t>((M + 63) / 64)};
    const size_t l[2] = {group, 1};
    d.launch(k, 2, g, l);
}

}  // namespace

bool get_rows_accepts(const Tensor& node) {
    const Tensor& t = *node.src[0];
    const bool table_ok = is_block32(t.type) ? (is_weight(t) && t.ne[2] == 1 && t.ne[3] == 1)
                                             : (plain_weight(t.type) && t.nb[0] == dtype_type_size(t.type));
    return table_ok && node.src[1]->type == DType::I32 && node.type == DType::F32 && node.nb[0] == sizeof(float) &&
           node.ne[2] == 1 && node.ne[3] == 1;
}

bool mul_mat_accepts(const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    const bool w_ok = is_block32(w.type) ? (is_weight(w) && w.ne[0] % 32 == 0)
                                         : (plain_weight(w.type) && w.nb[0] == dtype_type_size(w.type));
    return w_ok && w.ne[2] == 1 && w.ne[3] == 1 && x.type == DType::F32 && x.nb[0] == sizeof(float) &&
           rows_uniform(x) && node.type == DType::F32 && node.nb[0] == sizeof(float) && rows_uniform(node);
}

bool mul_mat_ready(ProgramCache& p, const Tensor& node) {
    const bool quantized = is_block32(node.src[0]->type);
    if (quantized && !p.available(ProgramId::Quant)) return false;
    if (rows_of(*node.src[1]) <= kMatvecMaxRows) return p.available(ProgramId::Matvec);
    return p.available(ProgramId::Matmul) || (quantized && mma_takes(p, node.src[0]->type));
}

void run_get_rows(Dispatch& d, const Tensor& node) {
    const Tensor& t = *node.src[0];
    const Tensor& ids = *node.src[1];
    const int64_t K = node.ne[0];
    cl_kernel k;
    if (is_block32(t.type)) {
        const QuantLayout l = quant_layout(t);
        k = d.kernel(ProgramId::Quant, (std::string("get_rows_") + dtype_name(t.type)).c_str());
        Args(k).mem(mem_of(t)).u64(t.offset + l.qs).u64(t.offset + l.qh).u64(t.offset + l.sc).i32(t.ne[1])
            .tensor(ids).tensor(node).u64(node.nb[1]).i32(K);
    } else {
        k = d.kernel(ProgramId::Quant, "get_rows_plain");
        Args(k).tensor(t).u64(t.nb[1]).i32(static_cast<int>(t.type)).i32(t.ne[1]).tensor(ids).tensor(node)
            .u64(node.nb[1]).i32(K);
    }
    const size_t g[2] = {static_cast<size_t>(K), static_cast<size_t>(node.ne[1])};
    d.launch(k, 2, g, nullptr);
}

Q8Act q8_input(Dispatch& d, const Tensor& x) {
    const ActKey key = act_key(x);
    if (const Q8Act* made = d.find_q8(key)) return *made;
    const int64_t K = x.ne[0], M = rows_of(x);
    const Q8Act q = d.make_q8(key, K, M);
    cl_kernel k = d.kernel(ProgramId::Quant, "quantize_q8");
    Args(k).tensor(x).u64(x.nb[1]).mem(q.mem).u64(q.q).u64(q.ds).i32(K);
    const size_t g[2] = {static_cast<size_t>(K / 32), static_cast<size_t>(M)};
    d.launch(k, 2, g, nullptr);
    return q;
}

void run_mul_mat(Dispatch& d, const Tensor& node) {
    if (rows_of(*node.src[1]) <= kMatvecMaxRows) {
        launch_matvec(d, {&node});
    } else {
        launch_matmul(d, node);
    }
}

bool mul_mat_add_accepts(const Tensor& node) {
    const Tensor& acc = *node.src[2];
    return mul_mat_accepts(node) && acc.type == DType::F32 && acc.is_contiguous() && node.is_contiguous();
}

bool mul_mat_add_ready(ProgramCache& p, const Tensor& node) {
    return mul_mat_ready(p, node) && p.available(ProgramId::Elementwise);
}

void run_mul_mat_add(Dispatch& d, const Tensor& node) {
    MulMatAddHalves h;  // node = product, then node += addend
    split_mul_mat_add(node, h);
    run_mul_mat(d, h.product);
    run_add(d, h.sum);
}

bool mul_mat_groupable(const Tensor& a, const Tensor& b) {
    if (a.op != Op::MulMat || b.op != Op::MulMat || !mul_mat_accepts(a) || !mul_mat_accepts(b)) return false;
    const Tensor& wa = *a.src[0];
    const Tensor& wb = *b.src[0];
    return wa.type == wb.type && wa.ne[0] == wb.ne[0] && same_data(*a.src[1], *b.src[1]) &&
           rows_of(*a.src[1]) <= kMatvecMaxRows;
}

void run_mul_mat_group(Dispatch& d, const std::vector<const Tensor*>& nodes) { launch_matvec(d, nodes); }

bool glu_fusable(const Tensor& gate, const Tensor& up, const Tensor& glu) {
    if (glu.op != Op::SiluMul && glu.op != Op::GeluMul) return false;
    if (!mul_mat_groupable(gate, up) || !is_block32(gate.src[0]->type)) return false;
    // One kernel reads x while it writes act(gate) * up: they must not share bytes
    // (the allocator may reuse x's bytes for the last node once `up` has read it).
    const Tensor& x = *gate.src[1];
    const bool apart = glu.buffer != x.buffer || glu.offset >= x.offset + x.nbytes() || x.offset >= glu.offset + glu.nbytes();
    return apart && gate.src[0]->ne[1] == up.src[0]->ne[1] && same_data(*glu.src[0], gate) &&
           same_data(*glu.src[1], up) && glu.ne == gate.ne && glu.type == DType::F32 && glu.nb[0] == sizeof(float) &&
           rows_uniform(glu);
}

namespace {

void launch_glu(Dispatch& d, const Tensor& gate, const Tensor& up, const Tensor& glu) {
    const Tensor& wg = *gate.src[0];
    const Tensor& wu = *up.src[0];
    const Tensor& x = *gate.src[1];
    const int64_t N = wg.ne[1], K = wg.ne[0], M = rows_of(x);
    const Q8Act q = q8_input(d, x);
    const bool want = N % 32 == 0 && d.wanted(act_key(glu));
    const Q8Act h = want ? d.make_q8(act_key(glu), N, M) : Q8Act{};
    const QuantLayout lg = quant_layout(wg), lu = quant_layout(wu);
    const std::string name = std::string(q.norm != nullptr ? "mvs_glu_" : "mv_glu_") + dtype_name(wg.type) + (M == 1 ? "_1" : "_8");
    cl_kernel k = d.kernel(ProgramId::Matvec, name.c_str());
    Args args(k);
    args.mem(mem_of(wg)).u64(wg.offset + lg.qs).u64(wg.offset + lg.qh).u64(wg.offset + lg.sc)
        .mem(mem_of(wu)).u64(wu.offset + lu.qs).u64(wu.offset + lu.qh).u64(wu.offset + lu.sc);
    q8_args(args, q);
    args.tensor(gate).u64(gate.nb[1]).tensor(up).u64(up.nb[1]).tensor(glu).u64(glu.nb[1])
        .i32(N).i32(K).i32(M).i32(glu.op == Op::GeluMul)
        .mem(want ? h.mem : mem_of(glu)).u64(h.q).u64(h.ds).i32(want);
    // 32 output rows per group (one 8-bit block of the result).
    const size_t wg_size = M == 1 ? d.shape().mvg_wg() : kMv8Rows * d.shape().mv8_tpr;
    d.launch1(k, static_cast<size_t>((N + kMv8Rows - 1) / kMv8Rows) * wg_size, wg_size);
}

bool overlaps(const Tensor& a, const Tensor& b) {
    return a.buffer == b.buffer && a.offset < b.offset + b.nbytes() && b.offset < a.offset + a.nbytes();
}

}  // namespace

void run_glu_fused(Dispatch& d, const Tensor& gate, const Tensor& up, const Tensor& glu) {
    launch_glu(d, gate, up, glu);
}

bool prod_norm_fusable(const Dispatch& d, const Tensor& prod, const Tensor& norm, const std::vector<const Tensor*>& next) {
    if (prod.op != Op::MulMat || norm.op != Op::AddRmsNorm || !mul_mat_accepts(prod) || !add_rms_norm_accepts(norm)) {
        return false;
    }
    const Tensor& w = *prod.src[0];
    const int64_t N = w.ne[1];
    if (!is_block32(w.type) || rows_of(*prod.src[1]) != 1 || N % 32 != 0 || norm.ne[0] != N || norm.ne[1] != 1 ||
        !same_data(*norm.src[1], prod)) {
        return false;
    }
    // Its own input must not be waiting for a norm's scale as well.
    const Q8Act* in_q8 = d.find_q8(act_key(*prod.src[1]));
    if (in_q8 != nullptr && in_q8->norm != nullptr) return false;
    // The next launch reads the normed row's 8-bit blocks: a one-row block-32
    // product of exactly that row.
    const ActKey normed = normed_key(norm);
    const Tensor& first = *next[0];
    if (first.op != Op::MulMat || !mul_mat_accepts(first) || !is_block32(first.src[0]->type)) return false;
    const ActKey in = act_key(*first.src[1]);
    if (in.mem != normed.mem || in.offset != normed.offset || in.ne0 != N || in.rows != 1) return false;
    // Groups read the residual while others write the sums, and the next
    // launch's group 0 writes the normed half while others write results.
    if (overlaps(prod, *norm.src[0]) || overlaps(norm, *norm.src[0]) || overlaps(norm, prod)) return false;
    for (const Tensor* t : next) {
        if (overlaps(*t, norm)) return false;
    }
    return true;
}

void run_prod_norm(Dispatch& d, const Tensor& prod, const Tensor& norm) { launch_matvec(d, {&prod}, &norm); }

}  // namespace lantern::ocl
