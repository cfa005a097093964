// Synthetic models: llama-architecture (or qwen3moe) GGUF files with random
// weights and a real vocabulary, for benchmarks and tests without
// downloading weights.
//
// The file has the tensors, names and metadata of a llama GGUF as llama.cpp
// writes them, so both Lantern and llama.cpp load it (head_dim: the shape's,
// or n_embd / n_head; n_embd_q = head_dim * n_head, n_embd_kv = head_dim *
// n_head_kv):
//   token_embd.weight         [n_embd, n_vocab]   requested type
//   blk.N.attn_norm.weight    [n_embd]            f32
//   blk.N.attn_q.weight       [n_embd, n_embd_q]  requested type (so are k, v, output, ffn_*)
//   blk.N.attn_k.weight       [n_embd, n_embd_kv]
//   blk.N.attn_v.weight       [n_embd, n_embd_kv]
//   blk.N.attn_output.weight  [n_embd_q, n_embd]
//   blk.N.attn_q_norm.weight  [head_dim]          f32, qwen3moe only (so is attn_k_norm)
//   blk.N.ffn_norm.weight     [n_embd]            f32
//   blk.N.ffn_gate.weight     [n_embd, n_ff]
//   blk.N.ffn_up.weight       [n_embd, n_ff]
//   blk.N.ffn_down.weight     [n_ff, n_embd]
//   output_norm.weight        [n_embd]            f32
//   output.weight             [n_embd, n_vocab]   (untied)
// A mixture of experts (n_expert > 0, Mixtral's and Qwen3-MoE's layout) has
// instead of the three ffn_* matrices
//   blk.N.ffn_gate_inp.weight  [n_embd, n_expert]        f32 (the router)
//   blk.N.ffn_gate_exps.weight [n_embd, n_ff, n_expert]  requested type (so are up, down)
//   blk.N.ffn_up_exps.weight   [n_embd, n_ff, n_expert]
//   blk.N.ffn_down_exps.weight [n_ff, n_embd, n_expert]
// A 2-D weight whose rows do not split into the requested type's blocks (a
// K-quant with n_embd 576) takes a fallback type with 32-element blocks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace lantern {

struct SynthShape {
    std::string name;
    int64_t n_embd = 0;
    int64_t n_layer = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t n_ff = 0;
    int64_t n_ctx = 0;  // written as {arch}.context_length
    float rope_base = 10000.0f;
    float rms_eps = 1e-5f;
    int64_t n_expert = 0;       // experts per layer (0: a dense FFN); n_ff is then each one's width
    int64_t n_expert_used = 0;  // experts per token
    std::string arch = "llama";  // or qwen3moe (per-head Q/K norms)
    int64_t head_dim = 0;        // 0: n_embd / n_head
    int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// The published shapes: smollm2-135m, tinyllama-1.1b, llama2-7b, llama3-8b,
// mixtral-8x7b (a mixture of 8 experts, 2 per token) and qwen3moe-30b-a3b
// (Qwen3-30B-A3B: 128 experts of 768, 8 per token, heads of 128).
const std::vector<SynthShape>& synth_shapes();
// The shape called `name`; throws Error(InvalidArgument) listing the names.
const SynthShape& synth_shape(std::string_view name);

struct SynthOptions {
    SynthShape shape;          // synth_shape("llama2-7b"), or any consistent custom shape
    DType type = DType::Q4_0;  // of the 2-D weights: f32, f16, bf16, q4_0, q4_1, q5_0,
                               // q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K
    std::string vocab_path;    // a GGUF whose tokenizer.* keys are copied (a vocab-only file will do)
    std::string output_path;
    uint64_t seed = 1;
    int n_threads = 0;         // 0: all hardware threads
};

// Number of weights (all tensors) of `shape` with a vocabulary of n_vocab.
int64_t synth_parameter_count(const SynthShape& shape, int64_t n_vocab);

// Writes the model. Weights are deterministic in (seed, tensor, row), whatever
// the thread count: 2-D weights ~ N(0, 0.02^2) (approximately: a sum of four
// uniforms), norm weights 1 +- a little. Tensors are produced one at a time
// while the file is written, so memory holds one tensor at most.
// Throws Error: InvalidArgument for an inconsistent shape or a type without a
// llama file type, Io/Format for the vocabulary file, Unsupported when the
// quantizer lacks the type, Io when the output cannot be written.
void write_synthetic_model(const SynthOptions& options);

}  // namespace lantern
