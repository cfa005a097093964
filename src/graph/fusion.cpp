#include "graph/fusion.h"

#include "lantern/error.h"

namespace lantern {
namespace {

// A primitive node whose output is a view into `root` at `offset` with the
// given shape and root's strides.
Tensor* node_into(Graph& g, Op op, Tensor* root, std::initializer_list<int64_t> ne, size_t offset,
                  std::initializer_list<Tensor*> srcs, const char* name) {
    Tensor* t = g.make_node(op, root->type, ne, srcs, name);
    t->nb = root->nb;
    t->view_src = root;
    t->view_offset = offset;
    t->layer = root->layer;
    return t;
}

}  // namespace

void split_mul_mat_add(const Tensor& node, MulMatAddHalves& out) {
    out.product = node;
    out.product.op = Op::MulMat;
    out.product.src[2] = nullptr;
    out.sum = node;
    out.sum.op = Op::Add;
    out.sum.src = {};
    out.sum.src[0] = &out.product;
    out.sum.src[1] = node.src[2];
}

bool is_fused_op(Op op) { return op == Op::AddRmsNorm || op == Op::RopeQK || op == Op::MulMatAdd; }

std::vector<Tensor*> expand_fused(Graph& g, Tensor* fused) {
    switch (fused->op) {
        case Op::AddRmsNorm: {
            const int64_t k = fused->ne[0], m = fused->ne[1];
            Tensor* sum = node_into(g, Op::Add, fused, {k, m}, 0, {fused->src[0], fused->src[1]}, "residual");
            Tensor* norm = node_into(g, Op::RmsNorm, fused, {k, m}, fused->nb[2], {sum, fused->src[2]}, "normed");
            norm->params = fused->params;
            return {sum, norm};
        }
        case Op::RopeQK: {
            const int64_t hd = fused->ne[0], n_q = fused->param_i(4), n_k = fused->ne[1] - n_q, t = fused->ne[2];
            Tensor* q = node_into(g, Op::Rope, fused, {hd, n_q, t}, 0,
                                  {fused->src[0], fused->src[2], fused->src[3]}, "q_roped");
            Tensor* k = node_into(g, Op::Rope, fused, {hd, n_k, t}, static_cast<size_t>(n_q) * fused->nb[1],
                                  {fused->src[1], fused->src[2], fused->src[3]}, "k_roped");
            q->params = fused->params;
            k->params = fused->params;
            return {q, k};
        }
        case Op::MulMatAdd: {
            // The product into the node's storage, then the addend added there.
            const int64_t n = fused->ne[0], m = fused->ne[1];
            Tensor* product = node_into(g, Op::MulMat, fused, {n, m}, 0, {fused->src[0], fused->src[1]}, "product");
            Tensor* sum = node_into(g, Op::Add, fused, {n, m}, 0, {product, fused->src[2]}, "sum");
            return {product, sum};
        }
        default:
            throw Error(ErrorCode::InvalidArgument, std::string("expand_fused: '") + op_name(fused->op) +
                                                        "' is not a fused op");
    }
}

}  // namespace lantern
