// Host side of kernels/rope.cl: RoPE, RoPE on Q and K, and RoPE on Q and K
// fused with the KV-cache writes that follow it in a llama layer.
#include "backends/opencl/ops.h"

namespace lantern::ocl {
namespace {

bool f32_rows(const Tensor* t) { return t == nullptr || (t->type == DType::F32 && t->nb[0] == sizeof(float)); }

bool mode_known(const Tensor& node) {
    const int32_t m = node.param_i(1);
    return m == static_cast<int32_t>(RopeMode::Normal) || m == static_cast<int32_t>(RopeMode::Neox);
}

bool rope_params_ok(const Tensor& node, const Tensor* factors) {
    const int n_rot = node.param_i(0);
    return mode_known(node) && n_rot > 0 && n_rot % 2 == 0 && n_rot <= node.ne[0] && node.ne[0] % 2 == 0 &&
           (factors == nullptr || (factors->type == DType::F32 && factors->nb[0] == 4 && factors->ne[0] >= n_rot / 2));
}

// Arguments shared by both kernels after the tensors: positions, frequency
// factors, the inv_freq table.
void rope_tables(Dispatch& d, Args& args, const Tensor& node, const Tensor& pos, const Tensor* factors) {
    const cl_mem table = d.backend().rope_table(node.param_i(0), node.param_f(2), node.param_f(3));
    args.tensor(pos).tensor(factors != nullptr ? *factors : pos).i32(factors != nullptr).mem(table).u64(0);
}

void launch_rope(Dispatch& d, cl_kernel k, int64_t hd, int64_t heads, int64_t tokens) {
    const size_t g[3] = {static_cast<size_t>(hd / 2), static_cast<size_t>(heads), static_cast<size_t>(tokens)};
    d.launch(k, 3, g, nullptr);
}

void rope_qk(Dispatch& d, const Tensor& node, const Tensor* kv_k, const Tensor* kv_v) {
    const Tensor& q = *node.src[0];
    const Tensor& k = *node.src[1];
    const int64_t hd = node.ne[0], n_q = q.ne[1], n_k = k.ne[1];
    const bool kv = kv_k != nullptr;
    cl_kernel kern = d.kernel(ProgramId::Rope, "rope_qk_kv");
    Args args(kern);
    args.tensor(q).u64(q.nb[1]).u64(q.nb[2]).tensor(k).u64(k.nb[1]).u64(k.nb[2]).tensor(node).u64(node.nb[1]).u64(node.nb[2]);
    rope_tables(d, args, node, *node.src[2], node.src[3]);
    args.i32(hd).i32(n_q).i32(n_k).i32(node.param_i(0)).i32(node.param_i(1) == static_cast<int32_t>(RopeMode::Neox));
    args.f32(node.param_f(5)).i32(kv);
    if (kv) {
        const Tensor& kc = *kv_k;  // the cache view the store writes (its node)
        const Tensor& vc = *kv_v;
        const Tensor& v = *kv_v->src[0];
        args.tensor(*kv_k->src[3]).i32(kv_k->param_i(0)).i32(kc.ne[1]).i32(kc.type == DType::F16)
            .tensor(kc).u64(kc.nb[1]).tensor(v).u64(v.nb[1]).tensor(vc).u64(vc.nb[1]);
    } else {
        // Unused cache arguments still need valid buffers.
        args.tensor(node).i32(1).i32(0).i32(0).tensor(node).u64(0).tensor(node).u64(0).tensor(node).u64(0);
    }
    launch_rope(d, kern, hd, n_q + n_k + (kv ? n_k : 0), node.ne[2]);
}

}  // namespace

bool rope_accepts(const Tensor& node) {
    return f32_rows(&node) && f32_rows(node.src[0]) && node.src[1]->type == DType::I32 && rope_params_ok(node, node.src[2]);
}

bool rope_qk_accepts(const Tensor& node) {
    return f32_rows(&node) && f32_rows(node.src[0]) && f32_rows(node.src[1]) && node.src[2]->type == DType::I32 &&
           rope_params_ok(node, node.src[3]);
}

void run_rope(Dispatch& d, const Tensor& node) {
    const Tensor& a = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Rope, "rope_f32");
    Args args(k);
    args.tensor(a).u64(a.nb[1]).u64(a.nb[2]).tensor(node).u64(node.nb[1]).u64(node.nb[2]);
    rope_tables(d, args, node, *node.src[1], node.src[2]);
    args.i32(node.ne[0]).i32(node.param_i(0)).i32(node.param_i(1) == static_cast<int32_t>(RopeMode::Neox))
        .f32(node.param_f(5));
    launch_rope(d, k, node.ne[0], node.ne[1], node.ne[2]);
}

void run_rope_qk(Dispatch& d, const Tensor& node) { rope_qk(d, node, nullptr, nullptr); }

bool rope_kv_matches(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v) {
    if (rope.op != Op::RopeQK || kv_k.op != Op::KvStore || kv_v.op != Op::KvStore) return false;
    if (!rope_qk_accepts(rope) || !kv_store_accepts(kv_k) || !kv_store_accepts(kv_v)) return false;
    const Tensor& k = *rope.src[1];
    const int64_t hd = rope.ne[0], n_q = rope.param_i(4), n_k = k.ne[1], T = rope.ne[2];
    const Tensor& krows = *kv_k.src[0];
    const Tensor& vrows = *kv_v.src[0];
    const Tensor& kc = kv_k;
    const Tensor& vc = kv_v;
    // The K store's rows are exactly the rotated K heads of `rope`.
    const bool k_is_rope = krows.buffer == rope.buffer && krows.offset == rope.offset + static_cast<size_t>(n_q) * rope.nb[1] &&
                           krows.ne[0] == hd * n_k && krows.ne[1] == T && krows.nb[1] == rope.nb[2] &&
                           rope.nb[1] == static_cast<size_t>(hd) * sizeof(float);
    return k_is_rope && vrows.ne[0] == hd * n_k && vrows.ne[1] == T && kc.ne[0] == hd * n_k && vc.ne[0] == hd * n_k &&
           kv_k.param_i(0) == kv_v.param_i(0) && same_data(*kv_k.src[2], *rope.src[2]) &&
           same_data(*kv_v.src[2], *rope.src[2]) && same_data(*kv_k.src[3], *kv_v.src[3]) && kc.ne[1] == vc.ne[1];
}

bool rope_kv_fusable(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v) {
    // rope_qk_kv writes values one by one: plain caches of one type.
    const bool plain = kv_k.type == DType::F16 || kv_k.type == DType::F32;
    return plain && kv_k.type == kv_v.type && rope_kv_matches(rope, kv_k, kv_v);
}

void run_rope_qk_kv(Dispatch& d, const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v) {
    rope_qk(d, rope, &kv_k, &kv_v);
}

}  // namespace lantern::ocl
