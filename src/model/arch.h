// The architectures Lantern runs, as one table from general.architecture to
// {bind the weights, build one step's graph}. Each architecture's graph lives
// in its own file (arch_llama.cpp, arch_phi3.cpp, arch_gemma3.cpp); the
// pieces they share (RoPE + KV cache + attention, the output head) are here.
//
// Adding an architecture: a file with its bind/build pair and one row in the
// table in arch.cpp (and its conventions in hparams.cpp, if any).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace lantern {

// Per-layer KV cache leaves, each [head_dim * n_head_kv, n_seq * n_ctx_seq];
// the token at (seq s, position p) lives in cell s * n_ctx_seq + p.
struct KvCache {
    std::vector<Tensor*> k;
    std::vector<Tensor*> v;
    int64_t n_ctx_seq = 0;
    int64_t n_seq = 0;
};

// Inputs of one step (graph leaves created by the caller).
struct StepInputs {
    Tensor* tokens = nullptr;   // i32 [T]
    Tensor* pos = nullptr;      // i32 [T]
    Tensor* seq = nullptr;      // i32 [T]
    Tensor* out_ids = nullptr;  // i32 [n_out] rows whose logits are wanted; null = all T
    bool embeddings = false;    // the output is the normed hidden state [n_embd, n_out], not logits
};

using BindWeightsFn = ModelWeights (*)(const WeightTable& table, const HParams& hp);
// Builds the step into g and returns the logits [n_vocab, n_out] (marked as
// the graph's output).
using BuildGraphFn = Tensor* (*)(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv,
                                 const StepInputs& in);

struct Architecture {
    const char* name;  // general.architecture
    BindWeightsFn bind;
    BuildGraphFn build;
};

// The table's entry for `name`, or null.
const Architecture* find_architecture(std::string_view name);
// "llama, mistral, ..." for error messages.
std::string supported_architectures();

// --- the architectures (one file each) ----------------------------------------
// llama, mistral, qwen2, qwen3, smollm3: arch_llama.cpp
ModelWeights bind_llama(const WeightTable& table, const HParams& hp);
Tensor* build_llama(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in);
// phi3: arch_phi3.cpp
ModelWeights bind_phi3(const WeightTable& table, const HParams& hp);
Tensor* build_phi3(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in);
// gemma3: arch_gemma3.cpp
ModelWeights bind_gemma3(const WeightTable& table, const HParams& hp);
Tensor* build_gemma3(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in);

// --- shared pieces of the graphs -----------------------------------------------

// How one layer rotates Q and K.
struct RopeArgs {
    Tensor* factors = nullptr;  // [n_rot / 2] frequency factors, optional
    float base = 10000.0f;
    float scale = 1.0f;
    float attn_factor = 1.0f;
};

// weight x, plus each LoRA adapter's scale * B (A x) for that weight
// (ModelWeights::lora).
Tensor* linear(Graph& g, const ModelWeights& w, Tensor* weight, Tensor* x);
// The same for weights that share x (Q, K, V; gate, up), in that order. The
// base products come first and then the adapters' A x products, each run
// together, so that a backend can give each run one launch (CUDA's grouped
// matrix-vector kernel).
std::vector<Tensor*> linear_group(Graph& g, const ModelWeights& w, std::initializer_list<Tensor*> weights, Tensor* x);

// The residual stream's next step: x += delta, and x normed by `norm`, as
// one fused AddRmsNorm (x is updated; the normed row is returned).
Tensor* add_norm(Graph& g, Tensor*& x, Tensor* delta, Tensor* norm, float eps);

// RoPE on q [hd, n_head, T] and k [hd, n_head_kv, T] (either may be a
// strided view; none on a NoPE layer, HParams::uses_rope), K and v
// [hd * n_head_kv, T] into layer il's cache, then attention with the
// layer's window. Returns [hd * n_head, T].
Tensor* attend(Graph& g, const HParams& hp, const KvCache& kv, const StepInputs& in, int64_t il, Tensor* q,
               Tensor* k, Tensor* v, const RopeArgs& rope);

// Layer il's attention output `attn` [*, T], and the residual stream x,
// cut to the rows whose outputs the step wants (in.out_ids) when il is the
// last layer: its attention has read every token's K and V, and nothing
// after it mixes tokens, so its output projection and feed-forward need
// only those rows (a prompt's last token, usually). Otherwise attn as it is.
// Every architecture calls it between attend() and its output projection.
Tensor* keep_output_rows(Graph& g, const HParams& hp, const StepInputs& in, int64_t il, Tensor*& x, Tensor* attn);

// The last layer's residual x + last (fused with the final RMSNorm) of the
// wanted rows (keep_output_rows), the output projection, and the final
// soft-capping if any. Marks and returns the logits [n_vocab, n_out].
Tensor* output_head(Graph& g, const HParams& hp, const ModelWeights& w, const StepInputs& in, Tensor* x,
                    Tensor* last);

// Views into a product p [n, T] (contiguous), for fused weights: rows
// [first, first + rows) as [rows, T], or as heads [hd, heads, T].
Tensor* row_slice(Graph& g, Tensor* p, int64_t first, int64_t rows, const char* name);
Tensor* head_slice(Graph& g, Tensor* p, int64_t first, int64_t hd, int64_t heads, const char* name);

}  // namespace lantern
