// Hyperparameters of a model, read from GGUF metadata ("{arch}.*" keys).
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
    float rope_scale = 1.0f;      // 1 / {arch}.rope.scaling.factor for linear scaling
    RopeMode rope_mode = RopeMode::Normal;
    // Gemma 3
    float rope_base_local = 10000.0f;  // rope base of sliding-window layers
    int64_t sliding_window = 0;        // {arch}.attention.sliding_window (0: none)
    int64_t sliding_pattern = 0;       // every n-th layer is global (gemma3: 6)
    float attn_softcap = 0.0f;         // {arch}.attn_logit_softcapping
    float final_softcap = 0.0f;        // {arch}.final_logit_softcapping
    float query_scale = 0.0f;          // attention scale override (0: 1/sqrt(head_dim))

    // Attention scale used by the attention op.
    float attention_scale() const;
    // Whether layer il attends through a sliding window.
    bool is_sliding(int64_t il) const;
};

// Reads and checks the hyperparameters; throws Error(Format/Unsupported)
// naming the missing or inconsistent key.
HParams read_hparams(const gguf::File& f);

// Architectures whose graph Lantern can build.
bool architecture_supported(const std::string& arch);

}  // namespace lantern
