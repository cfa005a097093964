#include "backends/cuda/cuda_fusion.h"

#include "backends/backend.h"
#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {
namespace {

// Bytes [begin, end) of a tensor in its buffer.
struct Range {
    const Buffer* buffer;
    size_t begin, end;
};
Range range_of(const Tensor& t) { return Range{t.buffer, t.offset, t.offset + t.nbytes()}; }
bool overlap(const Range& a, const Range& b) { return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end; }

// The outputs of a fused launch must not alias each other or its input
// (a fused kernel writes all of them while reading the input).
bool disjoint(std::initializer_list<const Tensor*> ts) {
    for (auto i = ts.begin(); i != ts.end(); ++i) {
        for (auto j = i + 1; j != ts.end(); ++j) {
            if (overlap(range_of(**i), range_of(**j))) return false;
        }
    }
    return true;
}


bool is_gate_up_silu(const Tensor& gate, const Tensor& up, const Tensor& silu) {
    return silu.op == Op::SiluMul && can_group_mul_mat(gate, up) && gate.src[0]->ne[1] == up.src[0]->ne[1] &&
           same_address(*silu.src[0], gate) && same_address(*silu.src[1], up) && silu.src[0]->ne == gate.ne &&
           silu.src[1]->ne == up.ne && silu.ne == gate.ne && silu.is_contiguous() &&
           disjoint({&gate, &up, &silu, gate.src[1]});
}

// The launch for the nodes starting at i (without a leading AddRmsNorm).
Launch plan_one(const std::vector<Tensor*>& nodes, size_t i, bool fuse_attention) {
    const size_t n = nodes.size();
    const Tensor& a = *nodes[i];
    Launch l;
    l.nodes[0] = &a;
    if (a.op == Op::RopeQK && i + 3 < n && fuse_attention &&
        can_fuse_rope_store_attention(a, *nodes[i + 1], *nodes[i + 2], *nodes[i + 3])) {
        l.kind = Launch::Kind::RopeStoreAttention;
        l.count = l.n = 4;
        l.nodes = {&a, nodes[i + 1], nodes[i + 2], nodes[i + 3]};
    } else if (a.op == Op::RopeQK && i + 2 < n && can_fuse_rope_store(a, *nodes[i + 1], *nodes[i + 2])) {
        l.kind = Launch::Kind::RopeStore;
        l.count = l.n = 3;
        l.nodes = {&a, nodes[i + 1], nodes[i + 2], nullptr};
    } else if (a.op == Op::MulMat && i + 2 < n && is_gate_up_silu(a, *nodes[i + 1], *nodes[i + 2])) {
        l.kind = Launch::Kind::GateUpSilu;
        l.count = l.n = 3;
        l.nodes = {&a, nodes[i + 1], nodes[i + 2]};
    } else if (a.op == Op::MulMat) {
        size_t j = i + 1;
        while (j < n && j - i < 3 && can_group_mul_mat(a, *nodes[j])) {
            bool ok = disjoint({nodes[j], a.src[1]});
            for (size_t k = i; k < j && ok; ++k) ok = disjoint({nodes[j], nodes[k]});
            if (!ok) break;
            l.nodes[j - i] = nodes[j];
            ++j;
        }
        l.count = l.n = static_cast<int>(j - i);
        if (l.count > 1 && disjoint({&a, a.src[1]})) {
            l.kind = Launch::Kind::MatVecGroup;
        } else {
            l.count = l.n = 1;
            l.nodes = {&a, nullptr, nullptr, nullptr};
        }
    }
    return l;
}

// Whether launch `l` writes any of t's bytes (its nodes' outputs and a fused
// norm's).
bool writes(const Launch& l, const Tensor* t) {
    if (l.norm != nullptr && !disjoint({l.norm, t})) return true;
    for (int k = 0; k < l.n; ++k) {
        if (!disjoint({l.nodes[static_cast<size_t>(k)], t})) return true;
    }
    return false;
}

// Whether AddRmsNorm (or RmsNorm) `norm` can run inside launch `l` (which
// follows it).
bool takes_norm(const Tensor& norm, const Launch& l) {
    const bool matvec = l.kind == Launch::Kind::MatVecGroup || l.kind == Launch::Kind::GateUpSilu ||
                        (l.kind == Launch::Kind::Single && l.nodes[0]->op == Op::MulMat);
    if (!matvec || !can_prenorm(norm, *l.nodes[0])) return false;
    // The launch reads norm's row inputs (an RmsNorm's weight is its src[1])
    // and writes norm's output and its own outputs.
    const int n_in = norm.op == Op::RmsNorm ? 1 : 2;
    for (int i = 0; i < n_in; ++i) {
        if (!disjoint({&norm, norm.src[i]}) || writes(l, norm.src[i])) return false;
    }
    return !writes(l, &norm);
}

}  // namespace

void plan_launches(const std::vector<Tensor*>& nodes, std::vector<Launch>& out, bool fuse_attention) {
    out.clear();
    const size_t n = nodes.size();
    for (size_t i = 0; i < n;) {
        const Tensor& a = *nodes[i];
        if ((a.op == Op::AddRmsNorm || a.op == Op::RmsNorm) && i + 1 < n) {
            Launch next = plan_one(nodes, i + 1, fuse_attention);
            if (takes_norm(a, next)) {
                if (next.kind == Launch::Kind::Single) next.kind = Launch::Kind::MatVecGroup;
                next.norm = &a;
                next.count += 1;
                out.push_back(next);
                i += static_cast<size_t>(next.count);
                continue;
            }
        }
        const Launch l = plan_one(nodes, i, fuse_attention);
        out.push_back(l);
        i += static_cast<size_t>(l.count);
    }
    for (size_t k = 1; k < out.size(); ++k) {
        Launch& l = out[k];
        if (l.norm == nullptr || l.norm->op != Op::AddRmsNorm) continue;
        const Launch& prev = out[k - 1];
        // Kernels that let the next one start before their own grid wait
        // (pdl_enter_early: the step's input, row lookup and row-0 norm
        // kernels) are Single launches of other ops.
        if (prev.kind == Launch::Kind::Single && prev.nodes[0]->op != Op::MulMat) continue;
        l.residual_settled = !writes(prev, l.norm->src[0]);
    }
}

}  // namespace lantern::cuda
