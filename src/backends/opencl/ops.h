// The OpenCL op table and the host entry points of each op family
// (ops_<family>.cpp, one per kernels/<family>.cl).
//
// Every entry point takes the node (and, for fused launches, its partners),
// sets the kernel's arguments from the tensors' buffers, byte offsets and
// strides, and launches through the Dispatch. Every accepts() predicate
// states exactly what its kernels handle (types, strides, sizes).
#pragma once

#include <vector>

#include "backends/op_table.h"
#include "backends/opencl/dispatch.h"

namespace lantern::ocl {

struct OpRun {
    void (*run)(Dispatch& d, const Tensor& node) = nullptr;
    // Whether the programs the node needs could be built.
    bool (*ready)(ProgramCache& programs, const Tensor& node) = nullptr;
};

// The table: what the backend supports is exactly what it can dispatch.
const OpTable<OpRun>& op_table();

// Dispatches `nodes` in order, fusing the patterns it recognises
// (see opencl_backend.h). Precondition: every node is supported.
void dispatch_nodes(Dispatch& d, const std::vector<Tensor*>& nodes);

// Whether two tensors are the same bytes seen the same way.
bool same_data(const Tensor& a, const Tensor& b);

// ---- ops_elementwise.cpp
bool elementwise_accepts(const Tensor& node);
bool copy_accepts(const Tensor& node);
void run_add(Dispatch& d, const Tensor& node);
void run_mul(Dispatch& d, const Tensor& node);
void run_silu_mul(Dispatch& d, const Tensor& node);
void run_gelu_mul(Dispatch& d, const Tensor& node);
void run_scale(Dispatch& d, const Tensor& node);
void run_softcap(Dispatch& d, const Tensor& node);
void run_sigmoid_gate(Dispatch& d, const Tensor& node);
void run_copy(Dispatch& d, const Tensor& node);

// ---- ops_norm.cpp
bool rms_norm_accepts(const Tensor& node);
bool add_rms_norm_accepts(const Tensor& node);
void run_rms_norm(Dispatch& d, const Tensor& node);
void run_add_rms_norm(Dispatch& d, const Tensor& node);
void run_soft_max(Dispatch& d, const Tensor& node);

// ---- ops_rope.cpp
bool rope_accepts(const Tensor& node);
bool rope_qk_accepts(const Tensor& node);
void run_rope(Dispatch& d, const Tensor& node);
void run_rope_qk(Dispatch& d, const Tensor& node);
// RopeQK followed by the two KvStore nodes that write its K part and the V
// rows into the caches (any cache types the stores accept).
bool rope_kv_matches(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v);
// The same, in one launch of rope_qk_kv (f16 or f32 caches of one type).
bool rope_kv_fusable(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v);
void run_rope_qk_kv(Dispatch& d, const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v);

// ---- ops_attention.cpp
bool kv_store_accepts(const Tensor& node);
bool attention_accepts(const Tensor& node);
void run_kv_store(Dispatch& d, const Tensor& node);
void run_attention(Dispatch& d, const Tensor& node);
// RopeQK, its two KvStore nodes (as rope_kv_matches) and the Attention that
// reads them, for one token: one launch.
bool rope_attention_fusable(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v, const Tensor& attn);
void run_rope_attention(Dispatch& d, const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v, const Tensor& attn);

// ---- ops_moe.cpp: a mixture of experts' FFN (router, top experts, SwiGLU,
// weighted sum), routed on the device.
bool moe_ffn_accepts(const Tensor& node);
bool moe_ffn_ready(ProgramCache& programs, const Tensor& node);
void run_moe_ffn(Dispatch& d, const Tensor& node);

// ---- ops_matmul.cpp
bool get_rows_accepts(const Tensor& node);
bool mul_mat_accepts(const Tensor& node);
bool mul_mat_ready(ProgramCache& programs, const Tensor& node);
void run_get_rows(Dispatch& d, const Tensor& node);
void run_mul_mat(Dispatch& d, const Tensor& node);
// MulMatAdd: the product, then src2 added in place.
bool mul_mat_add_accepts(const Tensor& node);
bool mul_mat_add_ready(ProgramCache& p, const Tensor& node);
void run_mul_mat_add(Dispatch& d, const Tensor& node);
// Products that can share one matrix-vector launch (same input, same weight
// type and row length, few rows).
bool mul_mat_groupable(const Tensor& a, const Tensor& b);
void run_mul_mat_group(Dispatch& d, const std::vector<const Tensor*>& nodes);
// gate = W_g x, up = W_u x, act(gate) * up in one launch.
bool glu_fusable(const Tensor& gate, const Tensor& up, const Tensor& glu);
void run_glu_fused(Dispatch& d, const Tensor& gate, const Tensor& up, const Tensor& glu);
// A one-row product whose result feeds an add + RMSNorm whose normed half
// feeds block-32 products (among `next`, the nodes after the norm): the
// product's launch does the add and the norm's first half, the launch of the
// products reading the normed row its second half (see matvec.cl).
bool prod_norm_fusable(const Dispatch& d, const Tensor& prod, const Tensor& norm, const std::vector<const Tensor*>& next);
void run_prod_norm(Dispatch& d, const Tensor& prod, const Tensor& norm);
// The 8-bit form of a block-32 product's input rows, made or found.
Q8Act q8_input(Dispatch& d, const Tensor& x);

}  // namespace lantern::ocl
