// Host side of kernels/elementwise.cl: add, mul, SiLU/GELU x up, sigmoid
// gate, scale, softcap, copy.
#include "backends/opencl/ops.h"

namespace lantern::ocl {
namespace {

enum BinaryOp { kAdd = 0, kMul = 1, kSiluMul = 2, kGeluMul = 3, kSigmoidGate = 4 };

bool f32_rows(const Tensor* t) { return t == nullptr || (t->type == DType::F32 && t->nb[0] == sizeof(float)); }

Args& strides(Args& a, const Tensor& t) { return a.u64(t.nb[1]).u64(t.nb[2]).u64(t.nb[3]); }

void run_binary(Dispatch& d, const Tensor& node, BinaryOp op) {
    const Tensor& a = *node.src[0];
    const Tensor& b = *node.src[1];
    // act(gate) * up feeding a quantized product: write its 8-bit blocks too.
    if ((op == kSiluMul || op == kGeluMul) && node.ne[0] % 32 == 0 && node.ne[2] == 1 && node.ne[3] == 1 &&
        a.ne == node.ne && b.ne == node.ne && d.wanted(act_key(node))) {
        const Q8Act q = d.make_q8(act_key(node), node.ne[0], node.ne[1]);
        cl_kernel k = d.kernel(ProgramId::Elementwise, "glu_q8");
        Args(k).i32(op == kGeluMul).tensor(a).u64(a.nb[1]).tensor(b).u64(b.nb[1]).tensor(node).u64(node.nb[1])
            .mem(q.mem).u64(q.q).u64(q.ds).i32(node.ne[0]);
        const size_t g[2] = {static_cast<size_t>(node.ne[0] / 32), static_cast<size_t>(node.ne[1])};
        d.launch(k, 2, g, nullptr);
        return;
    }
    cl_kernel k = d.kernel(ProgramId::Elementwise, "binary_f32");
    Args args(k);
    args.i32(op).tensor(a);
    strides(args, a).i32(a.ne[1]).i32(a.ne[2]).i32(a.ne[3]).tensor(b);
    strides(args, b).i32(b.ne[1]).i32(b.ne[2]).i32(b.ne[3]).tensor(node);
    strides(args, node).i32(node.ne[0]).i32(node.ne[1]).i32(node.ne[2]);
    const size_t g[2] = {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.n_rows())};
    d.launch(k, 2, g, nullptr);
}

bool plain_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace

bool elementwise_accepts(const Tensor& node) {
    return f32_rows(&node) && f32_rows(node.src[0]) && f32_rows(node.src[1]);
}

bool copy_accepts(const Tensor& node) {
    const Tensor& a = *node.src[0];
    return plain_type(node.type) && plain_type(a.type) && a.nb[0] == dtype_type_size(a.type) &&
           node.nb[0] == dtype_type_size(node.type);
}

void run_add(Dispatch& d, const Tensor& node) { run_binary(d, node, kAdd); }
void run_mul(Dispatch& d, const Tensor& node) { run_binary(d, node, kMul); }
void run_silu_mul(Dispatch& d, const Tensor& node) { run_binary(d, node, kSiluMul); }
void run_gelu_mul(Dispatch& d, const Tensor& node) { run_binary(d, node, kGeluMul); }
void run_sigmoid_gate(Dispatch& d, const Tensor& node) { run_binary(d, node, kSigmoidGate); }

namespace {

// dst = f(src0, param f[0]) row by row: scale, softcap.
void run_unary(Dispatch& d, const Tensor& node, const char* kernel) {
    const Tensor& a = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Elementwise, kernel);
    Args args(k);
    args.tensor(a);
    strides(args, a).tensor(node);
    strides(args, node).i32(node.ne[0]).i32(node.ne[1]).i32(node.ne[2]).f32(node.param_f(0));
    const size_t g[2] = {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.n_rows())};
    d.launch(k, 2, g, nullptr);
}

}  // namespace

void run_scale(Dispatch& d, const Tensor& node) { run_unary(d, node, "scale_f32"); }
void run_softcap(Dispatch& d, const Tensor& node) { run_unary(d, node, "softcap_f32"); }

void run_copy(Dispatch& d, const Tensor& node) {
    const Tensor& a = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Elementwise, "copy_any");
    Args args(k);
    args.tensor(a);
    strides(args, a).i32(static_cast<int>(a.type)).tensor(node);
    strides(args, node).i32(static_cast<int>(node.type)).i32(node.ne[0]).i32(node.ne[1]).i32(node.ne[2]);
    const size_t g[2] = {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.n_rows())};
    d.launch(k, 2, g, nullptr);
}

}  // namespace lantern::ocl
