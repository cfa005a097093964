// What the CUDA kernels receive, and the host entry point of each kernel
// family (one .cu file each). Entry points only enqueue on ctx.stream; they
// check every launch and name the node on failure.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/weight_layout.h"

namespace lantern::cuda {

// Device scratch a step uses besides its tensors. Sized from the node list
// before a step runs (and before it is captured), so captured graphs keep
// valid pointers; it only grows, and growing drops every captured graph.
struct WorkspaceNeeds {
    size_t dequant = 0;        // one weight matrix dequantized to f16 (prompt GEMMs)
    size_t act = 0;            // one GEMM's activations in f16/bf16
    size_t attn_partial = 0;   // flash-decoding partial results
    size_t attn_counters = 0;  // flash-decoding arrival counters (kept at zero between uses)
    size_t moe = 0;            // a mixture of experts' routing and hidden rows
};

struct Workspace {
    void* dequant = nullptr;
    void* act = nullptr;
    float* attn_partial = nullptr;
    int* attn_counters = nullptr;
    void* moe = nullptr;
};

// Which matrix-vector kernel quantized weights use (F32/F16/BF16 have only
// the general one). LANTERN_CUDA_MATVEC=general|streamed|prefetch chooses at
// backend creation; all three give the same integer sums.
enum class MatVecKernel {
    General,           // row pairs, loads of the next item after the current one's dot products
    Streamed,          // k_matvec_q: the next stage's loads before the current stage's work
    StreamedPrefetch,  // k_matvec_q, and each item's rows requested into L2 when it starts
    Bulk,              // k_matvec_bulk for every launch it can take (matvec_bulk.cu)
};
// Streamed is the default: on the H100 (2026-11-22, GPU time per decode
// step) it beat StreamedPrefetch by 1-2% on every benchmark shape and
// General by 10% (tinyllama) to 27% (7B Q8_0); General only tied on
// smollm2's 576-wide rows.

struct Ctx {
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    int sm_count = 0;
    int max_smem = 0;  // shared memory a block may opt in to (bytes)
    bool pdl = true;  // programmatic dependent launch between our kernels
    MatVecKernel matvec = MatVecKernel::Streamed;
    bool bulk = true;  // Streamed: k_matvec_bulk for the types it is faster for
    bool runs = true;  // Q2_K: k_matvec_q's run items (matvec_stream.cu; LANTERN_CUDA_RUNS=0: off)
    // k_matvec_q launches of one-stage rows and this many rounds or more
    // spread their items evenly over fewer blocks (matvec_stream.cu;
    // LANTERN_CUDA_BALANCE=N, 0: off).
    int balance_rounds = 4;
    // k_matvec_q launches of multi-stage rows whose first items hold more
    // bytes than this skip the prologue's L2 prefetch (matvec_stream.cu;
    // LANTERN_CUDA_PREFETCH_MB=N, 0: never skip).
    int64_t prefetch_limit = int64_t{8} << 20;
    // MoE prompts as grouped GEMMs when they qualify (moe_prompt.cu;
    // LANTERN_CUDA_MOE_GEMM=0: the per-pair kernels always).
    bool moe_gemm = true;
    // One token's RoPE + cache writes + attention in one launch
    // (attention.cu; LANTERN_CUDA_FUSE_ATTENTION=0: two).
    bool fuse_attention = true;
    Workspace ws;
    // Page-locked host memory for the MoE prompt path's pair counts per
    // expert (moe_prompt.cu; moe::kMaxExperts + 1 ints).
    int32_t* host_moe = nullptr;
};

// A recorded step's inputs (inputs.cu): n copies of size[i] bytes from
// src + at[i] (page-locked host memory the device reads, 16-byte aligned
// offsets) to dst[i] (device memory).
struct InputCopies {
    static constexpr int kMax = 8;
    int n = 0;
    const uint8_t* src = nullptr;
    uint8_t* dst[kMax] = {};
    uint32_t at[kMax] = {};
    uint32_t size[kMax] = {};
};
void run_load_inputs(const Ctx& ctx, const InputCopies& copies);

// Whether two tensors start at the same bytes of the same buffer.
inline bool same_address(const Tensor& a, const Tensor& b) { return a.buffer == b.buffer && a.offset == b.offset; }

// --- one op-table entry per op ----------------------------------------------
using AcceptsFn = bool (*)(const Tensor& node);
using RunFn = void (*)(const Ctx& ctx, const Tensor& node);
using NeedFn = void (*)(const Tensor& node, int sm_count, WorkspaceNeeds& needs);
struct Kernel {
    RunFn run = nullptr;
    NeedFn need = nullptr;  // null: no workspace
};

// Once per device: raise the dynamic shared-memory limit of the kernels that
// may need more than 48 KiB to `max_smem` bytes.
void init_matmul_kernels(int max_smem);
// The last streamed matrix-vector launch's timeline on stderr, in builds with
// -DLANTERN_CUDA_MV_TRACE=ON (matvec_stream.cu); otherwise nothing.
namespace mv {
void dump_matvec_trace();
}

// elementwise.cu
bool accepts_f32_binary(const Tensor& node);  // Add, Mul, SiluMul, GeluMul
bool accepts_f32_unary(const Tensor& node);   // Scale, Softcap
bool accepts_sigmoid_gate(const Tensor& node);
bool accepts_copy(const Tensor& node);
bool accepts_get_rows(const Tensor& node);
void run_add(const Ctx&, const Tensor&);
void run_mul(const Ctx&, const Tensor&);
void run_scale(const Ctx&, const Tensor&);
void run_softcap(const Ctx&, const Tensor&);
void run_sigmoid_gate(const Ctx&, const Tensor&);
void run_silu_mul(const Ctx&, const Tensor&);
void run_gelu_mul(const Ctx&, const Tensor&);
void run_copy(const Ctx&, const Tensor&);
void run_get_rows(const Ctx&, const Tensor&);

// norm.cu
bool accepts_rms_norm(const Tensor& node);
bool accepts_add_rms_norm(const Tensor& node);
bool accepts_soft_max(const Tensor& node);
void run_rms_norm(const Ctx&, const Tensor&);
void run_add_rms_norm(const Ctx&, const Tensor&);
void run_soft_max(const Ctx&, const Tensor&);

// rope.cu: RoPE, RoPE on Q and K, KV-cache writes, and RoPE on Q and K fused
// with the writes of the roped K rows and the V rows into the caches.
bool accepts_rope(const Tensor& node);
bool accepts_rope_qk(const Tensor& node);
bool accepts_kv_store(const Tensor& node);
void run_rope(const Ctx&, const Tensor&);
void run_rope_qk(const Ctx&, const Tensor&);
void run_kv_store(const Ctx&, const Tensor&);
// `rope` (RopeQK) followed by `k_store` (KvStore of rope's K heads) and
// `v_store` (KvStore of V with the same positions and sequences).
bool can_fuse_rope_store(const Tensor& rope, const Tensor& k_store, const Tensor& v_store);
// A Rope/RopeQK node's parameters (params f[5], the attention factor, reads
// 0 as 1: graphs made before it existed).
struct RopeSpec {
    int n_rot;
    bool neox;
    double base, scale, attn_factor;
};
RopeSpec rope_spec(const Tensor& node);
void run_rope_qk_store(const Ctx&, const Tensor& rope, const Tensor& k_store, const Tensor& v_store);

// attention.cu: flash-decoding for few tokens, tiled causal attention for
// prompts.
bool accepts_attention(const Tensor& node);
void need_attention(const Tensor& node, int sm_count, WorkspaceNeeds& needs);
void run_attention(const Ctx&, const Tensor&);
// RopeQK, its two KvStores and the Attention reading them, for one token, in
// the attention launch (each block rotates its Q heads and writes the new K
// and V rows it then reads).
bool can_fuse_rope_store_attention(const Tensor& rope, const Tensor& k_store, const Tensor& v_store,
                                   const Tensor& attn);
void run_rope_store_attention(const Ctx&, const Tensor& rope, const Tensor& k_store, const Tensor& v_store,
                              const Tensor& attn);

// moe.cu: a mixture of experts' FFN (router, top experts, SwiGLU, weighted sum).
bool accepts_moe_ffn(const Tensor& node);
void need_moe_ffn(const Tensor& node, int sm_count, WorkspaceNeeds& needs);
void run_moe_ffn(const Ctx&, const Tensor&);
// Once per device: the shared-memory limit of the MoE kernels that stage
// their activations (moe.cu).
void init_moe_kernels(int max_smem);

// matmul.cu: matrix-vector kernels (one token) with the activation quantized
// inside the kernel; dequantize + cuBLAS for more tokens.
bool accepts_mul_mat(const Tensor& node);
void need_mul_mat(const Tensor& node, int sm_count, WorkspaceNeeds& needs);
void run_mul_mat(const Ctx&, const Tensor&);
// The prompt path's two steps, shared with the MoE prompt path (moe_prompt.cu):
// rows [0, n) of the quantized weight w (type t) as f16, row-major [n][w.K],
// at out; and C = A B^T in cuBLAS's terms: C [N, M] f32 (column j at
// C + j ldc) from A [N][K] and B [M][K] of type ab (rows lda and ldb
// elements apart), f16/bf16 on tensor cores, f32 in f32.
void dequant_f16(const Ctx&, DType t, const WView& w, int64_t n, void* out, const Tensor& node);
void gemm_nt(const Ctx&, int64_t N, int64_t M, int64_t K, cudaDataType_t ab, const void* A, int64_t lda,
             const void* B, int64_t ldb, float* C, int64_t ldc, const Tensor& node);
// Whether MulMats a and b can share one matrix-vector launch (same
// activation, same weight type and K, one token each).
bool can_group_mul_mat(const Tensor& a, const Tensor& b);
// Up to 3 grouped MulMats in one launch (Q, K, V). With `silu` (a SiluMul of
// mats[0] and mats[1]'s outputs, n == 2), the launch also writes silu(gate) * up.
// With `norm` (an AddRmsNorm of one row whose normed slice is the MulMats'
// activation), the launch computes the sum and the norm itself and writes
// both slices of `norm` too.
// residual_settled: Launch::residual_settled (cuda_fusion.h).
void run_mul_mat_group(const Ctx&, const Tensor* const* mats, int n, const Tensor* silu, const Tensor* norm,
                       bool residual_settled = false, const float* acc = nullptr);
// MulMatAdd: the product with src2 added (one token: inside the
// matrix-vector kernel; prompts: the GEMM, then an add in place).
bool accepts_mul_mat_add(const Tensor& node);
void run_mul_mat_add(const Ctx&, const Tensor&);
// Whether AddRmsNorm or RmsNorm `norm` can be computed inside the launch of
// `mm`'s group.
bool can_prenorm(const Tensor& norm, const Tensor& mm);

}  // namespace lantern::cuda
