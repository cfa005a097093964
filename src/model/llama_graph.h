// The compute graph of one step of a llama-family model (llama, mistral,
// qwen2): embedding, per layer RMSNorm -> Q/K/V -> RoPE -> KV cache ->
// attention -> output projection -> residual -> RMSNorm -> SwiGLU FFN ->
// residual, then the final norm and the output head.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace lantern {

// Per-layer KV cache leaves, each [head_dim * n_head_kv, n_seq * n_ctx_seq].
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
};

// Builds the step into g and returns the logits [n_vocab, n_out] (marked as
// the graph's output).
Tensor* build_llama_graph(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv,
                          const StepInputs& in);

}  // namespace lantern
