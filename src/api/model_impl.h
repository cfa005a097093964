// What a loaded model holds (behind lantern::Model).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <map>
#include <mutex>

#include "backends/cpu/cpu_backend.h"
#include "chat/chat_template.h"
#include "backends/weight_store.h"
#include "gguf/gguf.h"
#include "lantern/lantern.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "model/lora.h"
#include "model/rope_scaling.h"
#include "model/weights.h"
#include "sampling/token_texts.h"
#include "tokenizer/tokenizer.h"

namespace lantern {

struct Model::Impl {
    std::unique_ptr<gguf::File> file;  // the model's (first) file: the metadata
    std::vector<std::unique_ptr<gguf::File>> parts;  // a split model's other files (gguf/split.h)
    HParams hp;
    std::unique_ptr<Tokenizer> tokenizer;
    std::optional<std::string> chat_template;  // tokenizer.chat_template
    // Parsed templates by override ("" = the file's own), so a chat turn or a
    // server request does not parse the template again. Guarded: the server
    // renders from several threads.
    mutable std::mutex chat_mutex;
    mutable std::map<std::string, ChatTemplate> chat_templates;

    std::unique_ptr<CpuBackend> cpu;
    std::unique_ptr<Backend> gpu;  // null when everything runs on the CPU
    int n_gpu_layers = 0;

    const Architecture* arch = nullptr;  // bind/build for hp.arch (model/arch.h)
    std::unique_ptr<Buffer> mapping;  // the file, as a host buffer
    std::vector<std::unique_ptr<Buffer>> part_mappings;  // and each other part
    std::unique_ptr<WeightTable> table;
    std::vector<std::unique_ptr<LoraAdapter>> adapters;  // ModelParams::lora_adapters (weights.lora)
    ModelWeights weights;
    std::unique_ptr<RopeFactorTensors> rope_factors;  // YaRN's (weights.rope_freqs), if any
    WeightStore store;

    ModelInfo info;
    bool vocab_only = false;

    // Every token's text and end flag, made on the first call and shared
    // by every sampler after it (thread-safe: the server's requests ask
    // from several threads).
    SharedTokenTexts token_texts() const;
    mutable std::once_flag token_texts_once;
    mutable SharedTokenTexts token_texts_;

    // Builds one step's graph with the architecture's builder (model/arch.h).
    Tensor* build(Graph& g, const KvCache& kv, const StepInputs& in) const {
        return arch->build(g, hp, weights, kv, in);
    }
};

// Asks m.store for a replica of every weight that a node placed on m.gpu
// reads (given m.n_gpu_layers), for a one-token and a many-token step, and
// returns the weights of the matrix products and MoE experts left on the
// CPU (those CpuBackend::pack_weight may pack). Model::load calls it before
// uploading; tests use it with their own backend.
std::vector<const Tensor*> plan_weights(Model::Impl& m);

}  // namespace lantern
