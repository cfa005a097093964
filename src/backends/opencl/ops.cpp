// The OpenCL op table, and the step planner that fuses what it can.
#include "backends/opencl/ops.h"

#include <algorithm>

#include "backends/opencl/weight_layout.h"

namespace lantern::ocl {
namespace {

template <ProgramId P>
bool needs(ProgramCache& programs, const Tensor&) {
    return programs.available(P);
}

}  // namespace

const OpTable<OpRun>& op_table() {
    static const OpTable<OpRun> table = {
        {Op::GetRows, get_rows_accepts, {run_get_rows, needs<ProgramId::Quant>}},
        {Op::MulMat, mul_mat_accepts, {run_mul_mat, mul_mat_ready}},
        {Op::RmsNorm, rms_norm_accepts, {run_rms_norm, needs<ProgramId::Norm>}},
        {Op::Add, elementwise_accepts, {run_add, needs<ProgramId::Elementwise>}},
        {Op::Mul, elementwise_accepts, {run_mul, needs<ProgramId::Elementwise>}},
        {Op::Scale, elementwise_accepts, {run_scale, needs<ProgramId::Elementwise>}},
        {Op::Softcap, elementwise_accepts, {run_softcap, needs<ProgramId::Elementwise>}},
        {Op::SigmoidGate, elementwise_accepts, {run_sigmoid_gate, needs<ProgramId::Elementwise>}},
        {Op::SiluMul, elementwise_accepts, {run_silu_mul, needs<ProgramId::Elementwise>}},
        {Op::GeluMul, elementwise_accepts, {run_gelu_mul, needs<ProgramId::Elementwise>}},
        {Op::SoftMax, elementwise_accepts, {run_soft_max, needs<ProgramId::Norm>}},
        {Op::Rope, rope_accepts, {run_rope, needs<ProgramId::Rope>}},
        {Op::Copy, copy_accepts, {run_copy, needs<ProgramId::Elementwise>}},
        {Op::KvStore, kv_store_accepts, {run_kv_store, needs<ProgramId::Attention>}},
        {Op::Attention, attention_accepts, {run_attention, needs<ProgramId::Attention>}},
        {Op::AddRmsNorm, add_rms_norm_accepts, {run_add_rms_norm, needs<ProgramId::Norm>}},
        {Op::RopeQK, rope_qk_accepts, {run_rope_qk, needs<ProgramId::Rope>}},
        {Op::MoeFfn, moe_ffn_accepts, {run_moe_ffn, moe_ffn_ready}},
        {Op::MulMatAdd, mul_mat_add_accepts, {run_mul_mat_add, mul_mat_add_ready}},
    };
    return table;
}

bool same_data(const Tensor& a, const Tensor& b) {
    return a.buffer == b.buffer && a.offset == b.offset && a.type == b.type && a.ne == b.ne && a.nb == b.nb;
}

bool rows_uniform(const Tensor& t) {
    return t.nb[2] == t.nb[1] * static_cast<size_t>(t.ne[1]) && t.nb[3] == t.nb[2] * static_cast<size_t>(t.ne[2]);
}

ActKey act_key(const Tensor& t) { return ActKey{mem_of(t), t.offset, t.ne[0], t.n_rows(), t.nb[1]}; }

void dispatch_nodes(Dispatch& d, const std::vector<Tensor*>& nodes) {
    // Inputs of block-32 products: their producers in this step also write
    // the 8-bit form.
    for (const Tensor* n : nodes) {
        if (n->op == Op::MulMat && is_block32(n->src[0]->type)) d.want_q8(act_key(*n->src[1]));
        if (n->op == Op::MoeFfn && is_block32(n->src[2]->type)) d.want_q8(act_key(*n->src[0]));
    }
    const size_t count = nodes.size();
    const bool fuse = d.backend().fusion();
    const bool fuse_norm = fuse && d.backend().norm_fusion();
    for (size_t i = 0; i < count;) {
        const Tensor& node = *nodes[i];
        // The launch starting here: a fused pattern of nodes [i, i + n), or node i.
        enum class Kind { Single, Glu, Group, RopeKv, RopeAttn, ProdNorm } kind = Kind::Single;
        size_t n = 1;
        if (fuse_norm && node.op == Op::MulMat && i + 2 < count &&
            prod_norm_fusable(d, node, *nodes[i + 1], std::vector<const Tensor*>(nodes.begin() + i + 2,
                                                                              nodes.begin() + std::min(count, i + 5)))) {
            // A one-row product, then the add + RMSNorm of its result: the
            // first half of the norm joins the product, the second half the
            // products that read the normed row (the next launch).
            kind = Kind::ProdNorm;
            n = 2;
        } else if (fuse && node.op == Op::MulMat) {
            if (i + 2 < count && glu_fusable(node, *nodes[i + 1], *nodes[i + 2])) {
                kind = Kind::Glu;
                n = 3;
            } else {
                while (i + n < count && n < 3 && mul_mat_groupable(node, *nodes[i + n])) ++n;
                if (n > 1) kind = Kind::Group;
            }
        } else if (fuse && node.op == Op::RopeQK && i + 3 < count &&
                   rope_attention_fusable(node, *nodes[i + 1], *nodes[i + 2], *nodes[i + 3])) {
            kind = Kind::RopeAttn;
            n = 4;
        } else if (fuse && node.op == Op::RopeQK && i + 2 < count && rope_kv_fusable(node, *nodes[i + 1], *nodes[i + 2])) {
            kind = Kind::RopeKv;
            n = 3;
        }
        // 8-bit forms of bytes these nodes overwrite are stale from here on.
        for (size_t j = i; j < i + n; ++j) {
            d.overwritten(mem_of(*nodes[j]), nodes[j]->offset, nodes[j]->offset + nodes[j]->nbytes());
        }
        switch (kind) {
            case Kind::Glu: run_glu_fused(d, node, *nodes[i + 1], *nodes[i + 2]); break;
            case Kind::Group: run_mul_mat_group(d, std::vector<const Tensor*>(nodes.begin() + i, nodes.begin() + i + n)); break;
            case Kind::RopeKv: run_rope_qk_kv(d, node, *nodes[i + 1], *nodes[i + 2]); break;
            case Kind::RopeAttn: run_rope_attention(d, node, *nodes[i + 1], *nodes[i + 2], *nodes[i + 3]); break;
            case Kind::ProdNorm: run_prod_norm(d, node, *nodes[i + 1]); break;
            case Kind::Single: op_table().find(node.op)->run.run(d, node); break;
        }
        i += n;
    }
}

// ---- Args and Dispatch -------------------------------------------------------------

Args& Args::set(size_t n, const void* p) {
    check(clSetKernelArg(k_, i_, n, p), "clSetKernelArg");
    ++i_;
    return *this;
}

cl_kernel Dispatch::kernel(ProgramId program, const char* name) {
    if (rec_ == nullptr) return b_.programs().kernel(program, name);
    rec_->kernels.push_back(b_.programs().new_kernel(program, name));
    return rec_->kernels.back().get();
}

void Dispatch::launch(cl_kernel k, cl_uint dims, const size_t* global, const size_t* local) {
    ++launches_;
    if (rec_ == nullptr) {
        check(clEnqueueNDRangeKernel(b_.queue(), k, dims, nullptr, global, local, 0, nullptr, nullptr),
              "clEnqueueNDRangeKernel");
        return;
    }
    Recording::Launch l{k, dims, {1, 1, 1}, {0, 0, 0}};
    for (cl_uint i = 0; i < dims; ++i) {
        l.global[i] = global[i];
        l.local[i] = local != nullptr ? local[i] : 0;
    }
    rec_->launches.push_back(l);
}

OpenClBackend::Scratch Dispatch::scratch(size_t bytes) { return b_.scratch(bytes, keep_); }

Q8Act& Dispatch::make_q8(const ActKey& k, int64_t K, int64_t rows) {
    const size_t q_bytes = static_cast<size_t>(K * rows);
    const size_t ds_bytes = static_cast<size_t>(K / 32 * rows) * 2 * sizeof(float);
    const OpenClBackend::Scratch s = scratch(q_bytes + 256 + ds_bytes);
    Q8Act& q = q8_[k];
    q = Q8Act{s.mem, s.offset, s.offset + (q_bytes + 255) / 256 * 256};
    return q;
}

void Dispatch::overwritten(cl_mem mem, size_t begin, size_t end) {
    for (auto it = q8_.begin(); it != q8_.end();) {
        const ActKey& k = it->first;
        const size_t k_end = k.offset + static_cast<size_t>(k.rows - 1) * k.nb1 + static_cast<size_t>(k.ne0) * 4;
        if (k.mem == mem && k.offset < end && begin < k_end) {
            it = q8_.erase(it);
        } else {
            ++it;
        }
    }
}

const Q8Act* Dispatch::find_q8(const ActKey& k) const {
    auto it = q8_.find(k);
    return it == q8_.end() ? nullptr : &it->second;
}

}  // namespace lantern::ocl
