#include "model/hparams.h"

#include <cmath>

#include "gguf/gguf.h"
#include "lantern/error.h"

namespace lantern {
namespace {

int64_t require_int(const gguf::File& f, const std::string& key) {
    std::optional<int64_t> v = f.get_int(key);
    if (!v) throw Error(ErrorCode::Format, f.path() + ": missing metadata key '" + key + "'");
    if (*v <= 0) throw Error(ErrorCode::Format, f.path() + ": '" + key + "' must be positive");
    return *v;
}

}  // namespace

bool architecture_supported(const std::string& arch) {
    return arch == "llama" || arch == "mistral" || arch == "qwen2";
}

float HParams::attention_scale() const {
    if (query_scale > 0.0f) return query_scale;
    return 1.0f / std::sqrt(static_cast<float>(head_dim));
}

bool HParams::is_sliding(int64_t il) const {
    if (sliding_window <= 0) return false;
    if (sliding_pattern <= 0) return true;
    return (il + 1) % sliding_pattern != 0;
}

HParams read_hparams(const gguf::File& f) {
    HParams hp;
    std::optional<std::string> arch = f.get_string("general.architecture");
    if (!arch) throw Error(ErrorCode::Format, f.path() + ": missing metadata key 'general.architecture'");
    hp.arch = *arch;
    if (!architecture_supported(hp.arch)) {
        throw Error(ErrorCode::Unsupported, f.path() + ": architecture '" + hp.arch + "' is not supported");
    }
    const std::string a = hp.arch + ".";
    hp.n_embd = require_int(f, a + "embedding_length");
    hp.n_layer = require_int(f, a + "block_count");
    hp.n_head = require_int(f, a + "attention.head_count");
    hp.n_ff = require_int(f, a + "feed_forward_length");
    hp.n_head_kv = f.get_int(a + "attention.head_count_kv").value_or(hp.n_head);
    hp.n_ctx_train = f.get_int(a + "context_length").value_or(2048);
    hp.head_dim = f.get_int(a + "attention.key_length").value_or(hp.n_embd / hp.n_head);
    hp.n_rot = f.get_int(a + "rope.dimension_count").value_or(hp.head_dim);
    hp.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    hp.rope_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));

    const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
    const double factor = f.get_float(a + "rope.scaling.factor").value_or(1.0);
    if (scaling == "linear" && factor > 0.0) {
        hp.rope_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none" && scaling != "linear") {
        throw Error(ErrorCode::Unsupported, f.path() + ": rope scaling type '" + scaling + "' is not supported");
    }
    hp.rope_mode = hp.arch == "qwen2" ? RopeMode::Neox : RopeMode::Normal;

    if (const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens")) {
        hp.n_vocab = static_cast<int64_t>(tokens->size());
    }
    hp.n_vocab = f.get_int(a + "vocab_size").value_or(hp.n_vocab);

    if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
        throw Error(ErrorCode::Format, f.path() + ": head_count (" + std::to_string(hp.n_head) +
                                           ") is not a multiple of head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
    }
    if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
        throw Error(ErrorCode::Format, f.path() + ": rope.dimension_count must be even and at most the head size");
    }
    return hp;
}

}  // namespace lantern
