// The model's parameters as graph leaves over the memory-mapped file.
#pragma once

#include <deque>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/tensor.h"
#include "model/hparams.h"

namespace lantern {
namespace gguf {
class File;
}
class Buffer;

struct LayerWeights {
    Tensor* attn_norm = nullptr;  // [n_embd]
    Tensor* wq = nullptr;         // [n_embd, n_head * head_dim]
    Tensor* wk = nullptr;         // [n_embd, n_head_kv * head_dim]
    Tensor* wv = nullptr;         // [n_embd, n_head_kv * head_dim]
    Tensor* wo = nullptr;         // [n_head * head_dim, n_embd]
    Tensor* bq = nullptr;         // qwen2 biases, optional
    Tensor* bk = nullptr;
    Tensor* bv = nullptr;
    Tensor* ffn_norm = nullptr;   // [n_embd]
    Tensor* ffn_gate = nullptr;   // [n_embd, n_ff]
    Tensor* ffn_up = nullptr;     // [n_embd, n_ff]
    Tensor* ffn_down = nullptr;   // [n_ff, n_embd]
};

struct ModelWeights {
    Tensor* tok_embd = nullptr;     // [n_embd, n_vocab]
    Tensor* output_norm = nullptr;  // [n_embd]
    Tensor* output = nullptr;       // [n_embd, n_vocab]; tok_embd when tied
    Tensor* rope_freqs = nullptr;   // [n_rot / 2] Llama 3 frequency factors, optional
    std::vector<LayerWeights> layers;
};

// One leaf per tensor of the file, reading its bytes in place.
class WeightTable {
public:
    // `mapping` is a host buffer spanning the whole file.
    WeightTable(const gguf::File& file, Buffer& mapping);

    Tensor* find(const std::string& name) const;
    // The tensor, checked against the expected shape; Error(Format) naming
    // the tensor when it is missing or shaped otherwise.
    Tensor* require(const std::string& name, std::initializer_list<int64_t> shape) const;
    Tensor* optional(const std::string& name, std::initializer_list<int64_t> shape) const;
    // Host bytes of a leaf (inside the mapping).
    const void* host_data(const Tensor* t) const;
    const std::deque<Tensor>& all() const { return tensors_; }

private:
    const gguf::File& file_;
    std::deque<Tensor> tensors_;
    std::unordered_map<std::string, Tensor*> by_name_;
};

// Finds the llama-family tensors (llama, mistral, qwen2) for `hp`.
ModelWeights bind_llama_weights(const WeightTable& table, const HParams& hp);

}  // namespace lantern
