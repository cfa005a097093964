// Hyperparameters of a model, read from GGUF metadata ("{arch}.*" keys).
//
// One struct serves every architecture; read_hparams() resolves the
// per-architecture conventions (rope mode, which layers use a sliding
// window, attention scale) so the graph builders only read fields. The
// conventions follow tests/reference/reference_forward.py, which documents
// each of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/op.h"

namespace lantern {
namespace gguf {
class File;
}

// {arch}.rope.scaling.type.
enum class RopeScaling { None, Linear, Yarn, LongRope };

struct HParams {
    std::string arch;          // general.architecture
    int64_t n_vocab = 0;
    int64_t n_ctx_train = 0;   // {arch}.context_length
    int64_t n_embd = 0;        // {arch}.embedding_length
    int64_t n_layer = 0;       // {arch}.block_count
    int64_t n_head = 0;        // {arch}.attention.head_count
    int64_t n_head_kv = 0;     // {arch}.attention.head_count_kv (default n_head)
    int64_t n_ff = 0;          // {arch}.feed_forward_length
    int64_t head_dim = 0;      // {arch}.attention.key_length (default n_embd / n_head)
    int64_t n_rot = 0;         // {arch}.rope.dimension_count (default head_dim)
    float rms_eps = 1e-5f;     // {arch}.attention.layer_norm_rms_epsilon
    float rope_base = 10000.0f;   // {arch}.rope.freq_base
    // {arch}.rope.scaling.type: "linear" when only a factor is given, None
    // without one; phi3's "longrope"/"su" carry their scaling in factor
    // tensors.
    RopeScaling rope_scaling = RopeScaling::None;
    // 1 / {arch}.rope.scaling.factor under linear or YaRN scaling, else 1.
    float rope_freq_scale = 1.0f;
    // The rope op's frequency scale: rope_freq_scale, but under YaRN
    // apply_yarn() (model/rope_scaling.h) moves the scaling into per-pair
    // frequency factors and sets this to 1.
    float rope_scale = 1.0f;
    // Multiplies the rotated dimensions: {arch}.rope.scaling.attn_factor
    // (phi3 longrope writes it), times YaRN's magnitude once applied.
    float rope_attn_factor = 1.0f;
    // {arch}.rope.scaling.original_context_length (default n_ctx_train): phi3
    // uses its long rope factors past it; YaRN's correction range and the
    // scaled context (n_ctx_max) start from it.
    int64_t n_ctx_orig = 0;
    // YaRN ({arch}.rope.scaling.yarn_*, else llama.cpp's defaults): the
    // share of extrapolation kept in the high-frequency pairs (1 under YaRN),
    // a multiplier on its magnitude 1 + 0.1 ln(factor), and the correction
    // range in rotations per original context.
    float yarn_ext_factor = 1.0f;
    float yarn_attn_factor = 1.0f;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    RopeMode rope_mode = RopeMode::Normal;  // Neox for qwen2, qwen3, phi3, gemma3 (smollm3, granite: normal)

    // Sliding-window attention (gemma3's local layers; llama/mistral files
    // that carry the key window every layer).
    int64_t sliding_window = 0;        // {arch}.attention.sliding_window (0: none)
    std::vector<bool> sliding_layers;  // per layer: windowed ("local")
    float rope_base_local = 10000.0f;  // gemma3 local layers: {arch}.rope.freq_base_swa (default 10000)

    float attn_softcap = 0.0f;         // {arch}.attn_logit_softcapping (0: off)
    float final_softcap = 0.0f;        // {arch}.final_logit_softcapping (0: off)
    float query_scale = 0.0f;          // attention scale override (0: 1/sqrt(head_dim))
    // granite, granitemoe: the embeddings are multiplied by embedding_scale,
    // each block's attention and FFN outputs by residual_scale before their
    // residual adds, and the logits divided by logit_scale ({arch}.*; 0: off).
    float embedding_scale = 0.0f;
    float residual_scale = 0.0f;
    float logit_scale = 0.0f;
    // smollm3: every n-th layer (il + 1 a multiple of it) attends without
    // RoPE ("NoPE"); 4, fixed by the architecture (no GGUF key). 0: none.
    int64_t no_rope_every = 0;

    // Mixture of experts (Mixtral as "llama", qwen3moe): the FFN is n_expert
    // experts of n_ff_exp hidden units, n_expert_used of them per token,
    // chosen by softmax; their weights renormalised to sum to 1 unless the
    // file says {arch}.expert_weights_norm false.
    int64_t n_expert = 0;       // {arch}.expert_count (0: a dense FFN)
    int64_t n_expert_used = 0;  // {arch}.expert_used_count
    int64_t n_ff_exp = 0;       // {arch}.expert_feed_forward_length (default n_ff)
    bool expert_weights_norm = true;  // {arch}.expert_weights_norm (qwen2moe: false)
    // qwen2moe's shared expert beside the routed ones, gated per token by
    // sigmoid(ffn_gate_inp_shexp x): {arch}.expert_shared_feed_forward_length
    // (default n_ff).
    int64_t n_ff_shexp = 0;

    // Attention scale used by the attention op.
    float attention_scale() const;
    // The longest context the rope settings are for: n_ctx_train, or
    // n_ctx_orig / rope_scale under linear or YaRN scaling when longer.
    int64_t n_ctx_max() const;
    // Whether layer il attends through a sliding window.
    bool is_sliding(int64_t il) const;
    // Whether layer il rotates Q and K (all but smollm3's NoPE layers).
    bool uses_rope(int64_t il) const { return no_rope_every <= 0 || (il + 1) % no_rope_every != 0; }
};

// Reads and checks the hyperparameters; throws Error(Format/Unsupported)
// naming the missing or inconsistent key.
HParams read_hparams(const gguf::File& f);

}  // namespace lantern
