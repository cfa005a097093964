// Unfused defaults of the fused ops.
//
// A backend that has no kernel for a fused op (AddRmsNorm, RopeQK) inherits
// this default: the scheduler replaces the node by primitive nodes that write
// into views of the fused node's own storage, so every consumer of the fused
// node reads the same bytes either way.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace lantern {

bool is_fused_op(Op op);

// Primitive nodes equivalent to `fused` (not appended to g.nodes(); the
// caller puts them where the fused node was). `fused` stays as the storage
// they write into.
std::vector<Tensor*> expand_fused(Graph& g, Tensor* fused);

// A MulMatAdd node as the two nodes a backend without an added store runs
// after each other: `product` (a MulMat writing the node's bytes) and `sum`
// (an Add of product and the addend, in place). sum reads product by
// address: fill the struct where it stays.
struct MulMatAddHalves {
    Tensor product;
    Tensor sum;
};
void split_mul_mat_add(const Tensor& node, MulMatAddHalves& out);

}  // namespace lantern
