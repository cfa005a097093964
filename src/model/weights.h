// The model's parameters as graph leaves over the memory-mapped file.
#pragma once

#include <deque>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/tensor.h"
#include "model/hparams.h"

namespace lantern {
namespace gguf {
class File;
}
class Backend;
class Buffer;

// One layer's tensors. Which are set depends on the architecture; shapes
// are GGUF's (innermost first), q = n_head * head_dim, kv = n_head_kv * head_dim.
struct LayerWeights {
    Tensor* attn_norm = nullptr;  // [n_embd]
    Tensor* wq = nullptr;         // [n_embd, q]
    Tensor* wk = nullptr;         // [n_embd, kv]
    Tensor* wv = nullptr;         // [n_embd, kv]
    Tensor* wqkv = nullptr;       // [n_embd, q + 2 kv] phi3: rows Q | K | V (wq/wk/wv null)
    Tensor* wo = nullptr;         // [q, n_embd]
    Tensor* bq = nullptr;         // [q] qwen2 biases, optional
    Tensor* bk = nullptr;         // [kv]
    Tensor* bv = nullptr;         // [kv]
    Tensor* q_norm = nullptr;     // [head_dim] gemma3, qwen3: per-head RMSNorm of Q
    Tensor* k_norm = nullptr;     // [head_dim] ... and of K
    Tensor* post_attn_norm = nullptr;  // [n_embd] gemma3, on the attention output
    Tensor* ffn_norm = nullptr;   // [n_embd]
    Tensor* ffn_gate = nullptr;   // [n_embd, n_ff]
    Tensor* ffn_up = nullptr;     // [n_embd, n_ff]
    Tensor* ffn_gate_up = nullptr;  // [n_embd, 2 n_ff] phi3: rows gate | up (gate/up null)
    Tensor* ffn_down = nullptr;   // [n_ff, n_embd]
    Tensor* ffn_gate_inp = nullptr;   // [n_embd, n_expert] mixture of experts: the router
    Tensor* ffn_gate_exps = nullptr;  // [n_embd, n_ff_exp, n_expert]
    Tensor* ffn_up_exps = nullptr;    // [n_embd, n_ff_exp, n_expert]
    Tensor* ffn_down_exps = nullptr;  // [n_ff_exp, n_embd, n_expert]
    Tensor* ffn_gate_inp_shexp = nullptr;  // [n_embd] qwen2moe: the shared expert's gate
    Tensor* ffn_gate_shexp = nullptr;      // [n_embd, n_ff_shexp]
    Tensor* ffn_up_shexp = nullptr;        // [n_embd, n_ff_shexp]
    Tensor* ffn_down_shexp = nullptr;      // [n_ff_shexp, n_embd]
    Tensor* post_ffw_norm = nullptr;  // [n_embd] gemma3, on the FFN output
    Tensor* rope_freqs = nullptr;  // [n_rot / 2] per-layer frequency factors, optional
};

// A LoRA adapter's low-rank update of one weight matrix W [n_in, n_out]:
// W x + scale * B (A x), with A [n_in, r] and B [r, n_out] (model/lora.h).
struct LoraDelta {
    Tensor* a = nullptr;
    Tensor* b = nullptr;
    float scale = 1.0f;
};

struct ModelWeights {
    Tensor* tok_embd = nullptr;     // [n_embd, n_vocab]
    Tensor* output_norm = nullptr;  // [n_embd]
    Tensor* output = nullptr;       // [n_embd, n_vocab]; tok_embd when tied
    Tensor* rope_freqs = nullptr;   // [n_rot / 2] Llama 3 frequency factors, optional
    Tensor* rope_factors_short = nullptr;  // [n_rot / 2] phi3 longrope, optional
    Tensor* rope_factors_long = nullptr;   // [n_rot / 2]
    std::vector<LayerWeights> layers;
    // The adapters' updates, by the weight they update (empty: none).
    std::unordered_map<const Tensor*, std::vector<LoraDelta>> lora;
};

// One leaf per tensor of the file, reading its bytes in place.
class WeightTable {
public:
    // `mapping` is a host buffer spanning the whole file.
    WeightTable(const gguf::File& file, Buffer& mapping);
    // A model split across files (gguf/split.h): each part with the host
    // buffer spanning it; the first part names the model in errors.
    explicit WeightTable(const std::vector<std::pair<const gguf::File*, Buffer*>>& parts);

    Tensor* find(const std::string& name) const;
    // The tensor, checked against the expected shape; Error(Format) naming
    // the tensor when it is missing or shaped otherwise.
    Tensor* require(const std::string& name, std::initializer_list<int64_t> shape) const;
    Tensor* optional(const std::string& name, std::initializer_list<int64_t> shape) const;
    // Host bytes of a leaf (inside the mapping, or the realigned copy).
    const void* host_data(const Tensor* t) const;
    // Kernels load weights as whole elements (floats, halves, a block's
    // scales), which needs aligned addresses; a file written with a small
    // general.alignment (any power of two is accepted) can place a tensor
    // elsewhere. Copies every tensor not on a kAlignment boundary into one
    // buffer of `host` and points its leaf there; returns the bytes copied.
    size_t realign(Backend& host);
    static constexpr size_t kAlignment = 32;
    const std::deque<Tensor>& all() const { return tensors_; }

private:
    const gguf::File& file_;
    std::deque<Tensor> tensors_;
    std::unordered_map<std::string, Tensor*> by_name_;
    std::unique_ptr<Buffer> realigned_;
};

// The tensors every architecture shares: token_embd, output_norm, output
// (tied to token_embd when absent), and rope_freqs. Layers are left empty.
ModelWeights bind_common_weights(const WeightTable& table, const HParams& hp);

}  // namespace lantern
