// The operations a compute graph is made of, and the layout of each op's
// sources and parameters. Every backend's op table refers to these.
//
// Shapes are written innermost first (ne[0] is contiguous), as in GGUF.
// "rows" are ne[0]-vectors; ne[1..3] index rows.
#pragma once

#include <cstdint>

namespace lantern {

enum class Op : uint8_t {
    None,  // a leaf (weight, input, KV cache) or a view of another tensor

    // --- primitive ops -----------------------------------------------------
    // dst[K, M] f32 = rows ids[M] of src0[K, N] (any type, dequantized).
    // src1: ids, i32 [M].
    GetRows,
    // dst[N, M] f32 = src0[K, N] (weights, any type) x src1[K, M] f32.
    // dst[n, m] = sum_k src0[k, n] * src1[k, m]; src1's rows may be strided.
    MulMat,
    // dst = src0 * rsqrt(mean(src0^2) + eps) [* src1 broadcast over rows].
    // params: f[0] = eps. src1 (weight [K] f32) optional.
    RmsNorm,
    // dst = src0 + src1, src1 broadcast over rows when it has fewer.
    Add,
    // dst = src0 * src1, broadcast as Add.
    Mul,
    // dst = src0 * f[0]
    Scale,
    // dst = silu(src0) * src1 (same shape).
    SiluMul,
    // dst = gelu_tanh(src0) * src1 (same shape).
    GeluMul,
    // Row softmax: dst = softmax(src0 * f[0]).
    SoftMax,
    // Rotary embedding. src0 [head_dim, n_heads, n_tokens] f32, src1 positions
    // i32 [n_tokens], src2 optional frequency factors f32 [n_rot/2].
    // params: i[0] n_rot, i[1] mode (RopeMode), f[2] freq_base, f[3] freq_scale,
    // f[5] attn_factor (i[4] is RopeQK's; unused here).
    // Pair i at position p turns by theta = p * freq_scale * base^(-2i/n_rot) / ff[i];
    // the rotated dims are multiplied by attn_factor (cos and sin scaled, as
    // phi3's longrope asks); dims from n_rot on pass through unscaled.
    Rope,
    // dst = src0 converted to dst's type (f32 <-> f16/bf16), same shape,
    // src0 may be strided.
    Copy,
    // Writes rows of src0 [D, n_tokens] f32 into the cache src1 [D, n_cells]
    // (f16 or f32) at cell seq[t] * n_ctx_seq + pos[t]. src2 positions i32
    // [n_tokens], src3 sequence ids i32 [n_tokens]. params: i[0] n_ctx_seq.
    // dst is a view of the whole cache (the op writes in place) so that
    // attention can depend on it.
    KvStore,
    // Causal attention over the KV cache, read through device memory so that
    // a decode step's graph is the same at every position.
    // src0 q [head_dim, n_head, n_tokens] f32 (may be strided),
    // src1 k cache [head_dim * n_head_kv, n_cells], src2 v cache (same),
    // src3 positions i32 [n_tokens], src4 sequence ids i32 [n_tokens].
    // Token t attends to cells seq[t]*n_ctx_seq + [lo, pos[t]] where lo is 0,
    // or pos[t] - window + 1 when a sliding window is set.
    // dst [head_dim * n_head, n_tokens] f32.
    // params: i[0] n_head_kv, i[1] n_ctx_seq, f[2] scale, f[3] softcap (0 = off),
    // i[4] sliding window (0 = off).
    Attention,
    // Logit soft-capping: dst = f[0] * tanh(src0 / f[0]), f[0] > 0 (Gemma's
    // final_logit_softcapping). Same shape; src0 rows may be strided.
    Softcap,
    // Gated rows: dst row r = src0 row r * sigmoid(src1[0] of row r); src1
    // [1, rows] (may be a strided view). Qwen2-MoE's shared expert, gated
    // per token.
    SigmoidGate,
    // Mixture-of-experts feed-forward (Mixtral, Qwen3-MoE). src0 x [D, T] f32,
    // src1 router [D, E], src2 gate [D, F, E], src3 up [D, F, E], src4 down
    // [F, D, E] (any weight types; gate and up alike). Per token: p =
    // softmax(router x); the n_used experts of largest p (ties to the lower
    // index) with weights w = their p, divided by the sum of the n_used when
    // asked; dst[:, t] = sum_e w_e down_e (silu(gate_e x) * up_e x).
    // dst [D, T] f32. params: i[0] n_used, i[1] 1: normalise the weights.
    MoeFfn,

    // --- fused ops (each has an unfused default in graph/fusion.cpp) ---------
    // dst [K, M, 2]: slice 0 = src0 + src1, slice 1 = rms_norm(slice 0) * src2.
    // params as RmsNorm.
    AddRmsNorm,
    // src0 q [hd, n_head, T], src1 k [hd, n_head_kv, T], src2 positions,
    // src3 optional frequency factors. dst [hd, n_head + n_head_kv, T]:
    // heads [0, n_head) = rope(q), the rest = rope(k). params as Rope, with
    // i[4] = n_head.
    RopeQK,
    // dst [N, M] = src0 [K, N] x src1 [K, M] (as MulMat) + src2 [N, M] f32: a
    // product added into another (a LoRA adapter's B product into the base
    // product) without a pass of its own.
    MulMatAdd,

    Count
};

enum class RopeMode : int32_t {
    Normal = 0,  // rotate pairs (x[2i], x[2i+1]) - llama
    Neox = 2,    // rotate pairs (x[i], x[i + n_rot/2]) - neox, qwen2, gemma
};

const char* op_name(Op op);

// Number of sources an op reads at most (unused trailing sources are null).
constexpr int kMaxSrc = 5;
constexpr int kMaxDims = 4;
constexpr int kMaxParams = 8;

}  // namespace lantern
