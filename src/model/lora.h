// LoRA adapters in llama.cpp's GGUF adapter format: general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, and for each adapted weight NAME
// of the base model a pair NAME.lora_a [n_in, r] and NAME.lora_b [r, n_out].
// The adapted product is W x + s B (A x) with s = scale * alpha / r (scale
// alone when alpha is 0 or absent), built into every step's graph next to
// the base product (linear() in model/arch.h), so that it runs on whichever
// backend runs that layer.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "model/hparams.h"
#include "model/weights.h"

namespace lantern {

namespace gguf {
class File;
}
class Buffer;
class CpuBackend;

// An adapter's file and its leaves; they must outlive the graphs built
// with them (the model owns its adapters).
struct LoraAdapter {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<Buffer> mapping;
    std::unique_ptr<WeightTable> table;
    // A's in F32 with the scale multiplied in (for float A's: one op less
    // per adapted product), and the buffer holding them.
    std::deque<Tensor> scaled_a;
    std::unique_ptr<Buffer> scaled;
};

// Opens the adapter at `path` for the model whose weights are `base`
// (architecture hp.arch) and adds its updates, scaled by `scale`, to
// `weights.lora`. Error(Format) names a tensor without its pair, one the
// model does not have, or a shape that does not fit; Error(Unsupported) an
// adapter of the token embeddings or of expert tensors.
std::unique_ptr<LoraAdapter> load_lora(const std::string& path, float scale, const WeightTable& base,
                                       const HParams& hp, CpuBackend& host, ModelWeights& weights);

}  // namespace lantern
