// A compute graph: the tensors of one step and the nodes to run, in order.
//
// The model builds a new Graph for every step (cheap: a few hundred nodes).
// Nodes are kept in creation order, which is a valid execution order since a
// node can only name tensors that already exist. Leaves from outside (weights,
// KV cache) are referenced by pointer and owned elsewhere.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <vector>

#include "graph/tensor.h"

namespace lantern {

class Graph {
public:
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // Nodes (op != None) in execution order.
    const std::vector<Tensor*>& nodes() const { return nodes_; }
    std::vector<Tensor*>& mutable_nodes() { return nodes_; }
    // Input leaves created with input(), with their host data.
    const std::vector<Tensor*>& inputs() const { return inputs_; }
    const std::vector<uint8_t>& input_data(const Tensor* t) const;
    // Replaces an input's bytes (same size) so the graph can run again.
    void set_input_data(const Tensor* t, const void* data, size_t nbytes);
    const std::vector<Tensor*>& outputs() const { return outputs_; }

    // Layer stamped on nodes created from now on.
    void set_layer(int layer) { layer_ = layer; }
    int layer() const { return layer_; }

    // --- leaves and views ----------------------------------------------------
    Tensor* new_tensor(DType type, std::initializer_list<int64_t> ne, const char* name);
    // An input leaf whose bytes the host provides for this step.
    Tensor* input(DType type, std::initializer_list<int64_t> ne, const char* name,
                  const void* data, size_t nbytes);
    void mark_output(Tensor* t);
    // View of `src` with the given shape and strides, `offset` bytes in.
    Tensor* view(Tensor* src, std::initializer_list<int64_t> ne,
                 std::initializer_list<size_t> nb, size_t offset, const char* name = "view");
    // A copy of `proto` owned by this graph (not appended to nodes()).
    Tensor* add_tensor(const Tensor& proto);
    // Same data, new shape (src must be contiguous).
    Tensor* reshape(Tensor* src, std::initializer_list<int64_t> ne);

    // --- ops (see graph/op.h for the contract of each) -------------------------
    Tensor* get_rows(Tensor* table, Tensor* ids);
    Tensor* mul_mat(Tensor* w, Tensor* x);
    Tensor* rms_norm(Tensor* x, Tensor* w, float eps);
    Tensor* add(Tensor* a, Tensor* b);
    Tensor* mul(Tensor* a, Tensor* b);
    Tensor* scale(Tensor* x, float s);
    Tensor* silu_mul(Tensor* gate, Tensor* up);
    Tensor* gelu_mul(Tensor* gate, Tensor* up);
    Tensor* soft_max(Tensor* x, float scale);
    Tensor* rope(Tensor* x, Tensor* pos, Tensor* freq_factors, int n_rot, RopeMode mode,
                 float freq_base, float freq_scale, float attn_factor = 1.0f);
    Tensor* copy(Tensor* src, DType type);
    Tensor* kv_store(Tensor* src, Tensor* cache, Tensor* pos, Tensor* seq, int n_ctx_seq);
    Tensor* attention(Tensor* q, Tensor* k_cache, Tensor* v_cache, Tensor* pos, Tensor* seq,
                      int n_head_kv, int n_ctx_seq, float scale, float softcap, int window);
    Tensor* softcap(Tensor* x, float cap);
    Tensor* sigmoid_gate(Tensor* x, Tensor* gate);
    Tensor* moe_ffn(Tensor* x, Tensor* router, Tensor* gate, Tensor* up, Tensor* down, int n_used, bool norm_weights);
    // Fused: returns the fused node; use add_rms_norm_sum / _norm for its halves.
    Tensor* add_rms_norm(Tensor* a, Tensor* b, Tensor* w, float eps);
    Tensor* rope_qk(Tensor* q, Tensor* k, Tensor* pos, Tensor* freq_factors, int n_rot,
                    RopeMode mode, float freq_base, float freq_scale, float attn_factor = 1.0f);
    // w x + acc (acc contiguous, the product's shape).
    Tensor* mul_mat_add(Tensor* w, Tensor* x, Tensor* acc);

    // Halves of an AddRmsNorm node: the sum (new residual) and the normed value.
    Tensor* fused_slice(Tensor* fused, int slice);
    // Q or K heads of a RopeQK node as a [hd, heads, T] view.
    Tensor* rope_qk_part(Tensor* fused, bool k_part);

    // A new node of `op` with contiguous output; used by the builders above and
    // by fusion defaults. Appends to nodes().
    Tensor* new_node(Op op, DType type, std::initializer_list<int64_t> ne,
                     std::initializer_list<Tensor*> srcs, const char* name);
    // Creates a node without appending it (the caller places it).
    Tensor* make_node(Op op, DType type, std::initializer_list<int64_t> ne,
                      std::initializer_list<Tensor*> srcs, const char* name);

private:
    Tensor* alloc_tensor();

    std::deque<Tensor> storage_;  // stable addresses
    std::vector<Tensor*> nodes_;
    std::vector<Tensor*> inputs_;
    std::vector<std::vector<uint8_t>> input_bytes_;
    std::vector<Tensor*> outputs_;
    int layer_ = -1;
};

}  // namespace lantern
