// Host side of kernels/norm.cl: RMSNorm, add + RMSNorm, softmax.
#include "backends/opencl/ops.h"

namespace lantern::ocl {
namespace {

bool f32_rows(const Tensor* t) { return t == nullptr || (t->type == DType::F32 && t->nb[0] == sizeof(float)); }
bool f32_vector(const Tensor* t, int64_t n) {
    return t == nullptr || (t->type == DType::F32 && t->nb[0] == sizeof(float) && t->ne[0] == n);
}

// Buffer arguments of the 8-bit output: made when a product in this step
// reads the rows `key` names.
Q8Act q8_output(Dispatch& d, const ActKey& key, int64_t K, int64_t rows, bool& want) {
    want = K % 32 == 0 && d.wanted(key);
    return want ? d.make_q8(key, K, rows) : Q8Act{};
}

void launch_rows(Dispatch& d, cl_kernel k, int64_t rows) {
    const size_t wg = d.shape().reduction;
    d.launch1(k, static_cast<size_t>(rows) * wg, wg);
}

}  // namespace

bool rms_norm_accepts(const Tensor& node) {
    return f32_rows(&node) && f32_rows(node.src[0]) && f32_vector(node.src[1], node.ne[0]);
}

bool add_rms_norm_accepts(const Tensor& node) {
    return f32_rows(&node) && f32_rows(node.src[0]) && f32_rows(node.src[1]) && f32_vector(node.src[2], node.ne[0]) &&
           node.ne[2] == 2 && node.ne[3] == 1;
}

void run_rms_norm(Dispatch& d, const Tensor& node) {
    const Tensor& a = *node.src[0];
    const Tensor* w = node.src[1];
    bool want = false;
    const Q8Act q = rows_uniform(node) ? q8_output(d, act_key(node), node.ne[0], node.n_rows(), want) : Q8Act{};
    cl_kernel k = d.kernel(ProgramId::Norm, "rms_norm_f32");
    Args(k).tensor(a).u64(a.nb[1]).u64(a.nb[2]).u64(a.nb[3])
        .tensor(w != nullptr ? *w : a).i32(w != nullptr)
        .tensor(node).u64(node.nb[1]).u64(node.nb[2]).u64(node.nb[3])
        .i32(node.ne[0]).i32(node.ne[1]).i32(node.ne[2]).f32(node.param_f(0))
        .mem(want ? q.mem : mem_of(node)).u64(q.q).u64(q.ds).i32(want);
    launch_rows(d, k, node.n_rows());
}

void run_add_rms_norm(Dispatch& d, const Tensor& node) {
    const Tensor& a = *node.src[0];
    const Tensor& b = *node.src[1];
    const Tensor* w = node.src[2];
    // The normed half (slice 1) as the products read it: a [K, M] view.
    const ActKey normed{mem_of(node), node.offset + node.nb[2], node.ne[0], node.ne[1], node.nb[1]};
    bool want = false;
    const Q8Act q = q8_output(d, normed, node.ne[0], node.ne[1], want);
    cl_kernel k = d.kernel(ProgramId::Norm, "add_rms_norm_f32");
    Args(k).tensor(a).u64(a.nb[1]).tensor(b).u64(b.nb[1])
        .tensor(w != nullptr ? *w : a).i32(w != nullptr)
        .tensor(node).u64(node.nb[1]).u64(node.nb[2])
        .i32(node.ne[0]).f32(node.param_f(0))
        .mem(want ? q.mem : mem_of(node)).u64(q.q).u64(q.ds).i32(want);
    launch_rows(d, k, node.ne[1]);
}

void run_soft_max(Dispatch& d, const Tensor& node) {
    const Tensor& a = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Norm, "soft_max_f32");
    Args(k).tensor(a).u64(a.nb[1]).u64(a.nb[2]).u64(a.nb[3])
        .tensor(node).u64(node.nb[1]).u64(node.nb[2]).u64(node.nb[3])
        .i32(node.ne[0]).i32(node.ne[1]).i32(node.ne[2]).f32(node.param_f(0));
    launch_rows(d, k, node.n_rows());
}

}  // namespace lantern::ocl
