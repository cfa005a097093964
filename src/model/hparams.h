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
    // Linear rope scaling: 1 / {arch}.rope.scaling.factor when the type is
    // "linear" or absent (a factor without a type is linear); 1 for "none"
    // and for phi3's "longrope"/"su" (their factor tensors carry the scaling).
    float rope_scale = 1.0f;
    // {arch}.rope.scaling.attn_factor: multiplies the rotated dimensions
    // (phi3 longrope writes it).
    float rope_attn_factor = 1.0f;
    // {arch}.rope.scaling.original_context_length (default n_ctx_train): phi3
    // uses its long rope factors when the context is longer than this.
    int64_t n_ctx_orig = 0;
    RopeMode rope_mode = RopeMode::Normal;  // Neox for qwen2, qwen3, phi3, gemma3 (smollm3: normal)

    // Sliding-window attention (gemma3's local layers; llama/mistral files
    // that carry the key window every layer).
    int64_t sliding_window = 0;        // {arch}.attention.sliding_window (0: none)
    std::vector<bool> sliding_layers;  // per layer: windowed ("local")
    float rope_base_local = 10000.0f;  // gemma3 local layers: {arch}.rope.freq_base_swa (default 10000)

    float attn_softcap = 0.0f;         // {arch}.attn_logit_softcapping (0: off)
    float final_softcap = 0.0f;        // {arch}.final_logit_softcapping (0: off)
    float query_scale = 0.0f;          // attention scale override (0: 1/sqrt(head_dim))
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
    bool expert_weights_norm = true;

    // Attention scale used by the attention op.
    float attention_scale() const;
    // Whether layer il attends through a sliding window.
    bool is_sliding(int64_t il) const;
    // Whether layer il rotates Q and K (all but smollm3's NoPE layers).
    bool uses_rope(int64_t il) const { return no_rope_every <= 0 || (il + 1) % no_rope_every != 0; }
};

// Reads and checks the hyperparameters; throws Error(Format/Unsupported)
// naming the missing or inconsistent key.
HParams read_hparams(const gguf::File& f);

}  // namespace lantern
