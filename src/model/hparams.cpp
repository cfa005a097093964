#include "model/hparams.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "model/arch.h"

namespace lantern {
namespace {

int64_t require_int(const gguf::File& f, const std::string& key) {
    std::optional<int64_t> v = f.get_int(key);
    if (!v) throw Error(ErrorCode::Format, f.path() + ": missing metadata key '" + key + "'");
    if (*v <= 0) throw Error(ErrorCode::Format, f.path() + ": '" + key + "' must be positive");
    return *v;
}

// A key that must hold a non-negative number when present.
float non_negative(const gguf::File& f, const std::string& key, float fallback) {
    const double v = f.get_float(key).value_or(fallback);
    if (!std::isfinite(v) || v < 0.0) throw Error(ErrorCode::Format, f.path() + ": '" + key + "' must be a non-negative number");
    return static_cast<float>(v);
}

// Rope scaling: the type defaults to linear when only a factor is given;
// a factor of 0 means no scaling.
void read_rope_scaling(const gguf::File& f, const std::string& a, HParams& hp) {
    const std::optional<std::string> type = f.get_string(a + "rope.scaling.type");
    const double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
    const std::string t = type.value_or("linear");
    if (t == "linear" || t == "yarn") {
        if (factor > 0.0) {
            hp.rope_scaling = t == "yarn" ? RopeScaling::Yarn : RopeScaling::Linear;
            hp.rope_freq_scale = static_cast<float>(1.0 / factor);
        }
    } else if (t == "longrope" || t == "su") {
        hp.rope_scaling = RopeScaling::LongRope;
    } else if (t != "none") {
        throw Error(ErrorCode::Unsupported, f.path() + ": rope scaling type '" + t + "' is not supported");
    }
    hp.rope_scale = hp.rope_freq_scale;
    const double attn_factor = f.get_float(a + "rope.scaling.attn_factor").value_or(0.0);
    hp.rope_attn_factor = attn_factor > 0.0 ? static_cast<float>(attn_factor) : 1.0f;
    hp.n_ctx_orig = f.get_int(a + "rope.scaling.original_context_length").value_or(0);
    if (hp.n_ctx_orig <= 0) hp.n_ctx_orig = hp.n_ctx_train;
    hp.yarn_ext_factor = non_negative(f, a + "rope.scaling.yarn_ext_factor", 1.0f);
    hp.yarn_attn_factor = non_negative(f, a + "rope.scaling.yarn_attn_factor", 1.0f);
    hp.yarn_beta_fast = non_negative(f, a + "rope.scaling.yarn_beta_fast", 32.0f);
    hp.yarn_beta_slow = non_negative(f, a + "rope.scaling.yarn_beta_slow", 1.0f);
}

// Which layers attend through a window. gemma3: the file's pattern (an int n:
// layer il is local iff il % n < n - 1; or a bool per layer), default 6, as
// llama.cpp hard-codes it. gemma2: the even layers. llama/mistral: every
// layer when the file carries a window. qwen2, qwen3, smollm3 and phi3 ignore
// the key (as llama.cpp does).
void read_sliding_window(const gguf::File& f, const std::string& a, HParams& hp) {
    hp.sliding_layers.assign(static_cast<size_t>(hp.n_layer), false);
    const int64_t window = f.get_int(a + "attention.sliding_window").value_or(0);
    if (window <= 0) return;
    if (hp.arch == "gemma3") {
        if (const gguf::Array* pattern = f.get_array(a + "attention.sliding_window_pattern")) {
            for (size_t il = 0; il < hp.sliding_layers.size() && il < pattern->size(); ++il) {
                hp.sliding_layers[il] = pattern->int_at(il) != 0;
            }
        } else {
            const int64_t n = f.get_int(a + "attention.sliding_window_pattern").value_or(6);
            for (int64_t il = 0; il < hp.n_layer; ++il) {
                hp.sliding_layers[static_cast<size_t>(il)] = n <= 0 || il % n < n - 1;
            }
        }
    } else if (hp.arch == "gemma2") {
        for (int64_t il = 0; il < hp.n_layer; il += 2) hp.sliding_layers[static_cast<size_t>(il)] = true;
    } else if (hp.arch == "llama" || hp.arch == "mistral") {
        hp.sliding_layers.assign(static_cast<size_t>(hp.n_layer), true);
    } else {
        return;
    }
    hp.sliding_window = window;
}

}  // namespace

float HParams::attention_scale() const {
    if (query_scale > 0.0f) return query_scale;
    return 1.0f / std::sqrt(static_cast<float>(head_dim));
}

int64_t HParams::n_ctx_max() const {
    if (rope_scaling != RopeScaling::Linear && rope_scaling != RopeScaling::Yarn) return n_ctx_train;
    const double scaled = std::round(static_cast<double>(n_ctx_orig) / rope_freq_scale);
    return std::max<int64_t>(n_ctx_train, static_cast<int64_t>(std::min(scaled, double(INT32_MAX))));
}

bool HParams::is_sliding(int64_t il) const {
    return sliding_window > 0 && il >= 0 && static_cast<size_t>(il) < sliding_layers.size() &&
           sliding_layers[static_cast<size_t>(il)];
}

HParams read_hparams(const gguf::File& f) {
    HParams hp;
    std::optional<std::string> arch = f.get_string("general.architecture");
    if (!arch) throw Error(ErrorCode::Format, f.path() + ": missing metadata key 'general.architecture'");
    hp.arch = *arch;
    if (find_architecture(hp.arch) == nullptr) {
        throw Error(ErrorCode::Unsupported, f.path() + ": architecture '" + hp.arch +
                                                "' is not supported (supported: " + supported_architectures() + ")");
    }
    const std::string a = hp.arch + ".";
    hp.n_embd = require_int(f, a + "embedding_length");
    hp.n_layer = require_int(f, a + "block_count");
    // Every layer has tensors of its own: a count past the model's tensors
    // (all parts' for a split file, which open_other_parts checks) is damage,
    // and would size per-layer tables before any tensor is looked up.
    const int64_t n_tensors = std::max<int64_t>(static_cast<int64_t>(f.tensors().size()),
                                                f.get_int("split.tensors.count").value_or(0));
    if (hp.n_layer > n_tensors) {
        throw Error(ErrorCode::Format, f.path() + ": " + a + "block_count (" + std::to_string(hp.n_layer) +
                                           ") is more than the model's " + std::to_string(n_tensors) + " tensors");
    }
    hp.n_head = require_int(f, a + "attention.head_count");
    hp.n_ff = require_int(f, a + "feed_forward_length");
    hp.n_head_kv = f.get_int(a + "attention.head_count_kv").value_or(hp.n_head);
    hp.n_ctx_train = f.get_int(a + "context_length").value_or(2048);
    hp.head_dim = f.get_int(a + "attention.key_length").value_or(hp.n_embd / hp.n_head);
    const int64_t head_dim_v = f.get_int(a + "attention.value_length").value_or(hp.head_dim);
    hp.n_rot = f.get_int(a + "rope.dimension_count").value_or(hp.head_dim);
    hp.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    hp.rope_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
    // gemma3's local layers: 10000 unless the file says; gemma2's: the one base.
    hp.rope_base_local = static_cast<float>(
        f.get_float(a + "rope.freq_base_swa").value_or(hp.arch == "gemma3" ? 10000.0 : hp.rope_base));
    read_rope_scaling(f, a, hp);
    const bool granite = hp.arch == "granite" || hp.arch == "granitemoe";
    hp.rope_mode = hp.arch == "llama" || hp.arch == "mistral" || hp.arch == "smollm3" || granite ? RopeMode::Normal
                                                                                                : RopeMode::Neox;
    if (hp.arch == "smollm3") hp.no_rope_every = 4;
    read_sliding_window(f, a, hp);
    hp.attn_softcap = static_cast<float>(f.get_float(a + "attn_logit_softcapping").value_or(0.0));
    hp.final_softcap = static_cast<float>(f.get_float(a + "final_logit_softcapping").value_or(0.0));
    if (granite) {
        hp.embedding_scale = non_negative(f, a + "embedding_scale", 0.0f);
        hp.residual_scale = non_negative(f, a + "residual_scale", 0.0f);
        hp.logit_scale = non_negative(f, a + "logit_scale", 0.0f);
        hp.query_scale = non_negative(f, a + "attention.scale", 0.0f);
    }
    if (hp.arch == "gemma3" || hp.arch == "gemma2") {
        // query_pre_attn_scalar: the file's attention.scale if any; the 27B
        // models (Gemma 3: 62 layers, Gemma 2: 46) scale by n_embd / n_head
        // instead of head_dim.
        if (std::optional<double> s = f.get_float(a + "attention.scale")) {
            hp.query_scale = static_cast<float>(*s);
        } else if (hp.n_layer == (hp.arch == "gemma3" ? 62 : 46)) {
            hp.query_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head));
        }
    }

    hp.n_expert = f.get_int(a + "expert_count").value_or(0);
    if (hp.n_expert > 0) {
        hp.n_expert_used = require_int(f, a + "expert_used_count");
        hp.n_ff_exp = f.get_int(a + "expert_feed_forward_length").value_or(hp.n_ff);
        // Qwen2-MoE leaves the chosen experts' weights as softmax gave them.
        hp.expert_weights_norm = f.get_bool(a + "expert_weights_norm").value_or(hp.arch != "qwen2moe");
        hp.n_ff_shexp = f.get_int(a + "expert_shared_feed_forward_length").value_or(hp.n_ff);
        if (hp.n_expert_used > hp.n_expert) {
            throw Error(ErrorCode::Format, f.path() + ": expert_used_count (" + std::to_string(hp.n_expert_used) +
                                               ") is more than expert_count (" + std::to_string(hp.n_expert) + ")");
        }
        // 1 is softmax, the only gating these architectures use.
        if (f.get_int(a + "expert_gating_func").value_or(1) != 1) {
            throw Error(ErrorCode::Unsupported, f.path() + ": expert gating other than softmax is not supported");
        }
        if (f.get_int(a + "expert_shared_count").value_or(0) > 0) {
            throw Error(ErrorCode::Unsupported, f.path() + ": shared experts are not supported");
        }
    } else if (hp.arch == "qwen3moe" || hp.arch == "qwen2moe") {
        throw Error(ErrorCode::Format, f.path() + ": missing metadata key '" + a + "expert_count'");
    }

    if (const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens")) {
        hp.n_vocab = static_cast<int64_t>(tokens->size());
    }
    hp.n_vocab = f.get_int(a + "vocab_size").value_or(hp.n_vocab);

    if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
        throw Error(ErrorCode::Format, f.path() + ": head_count (" + std::to_string(hp.n_head) +
                                           ") is not a multiple of head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
    }
    if (head_dim_v != hp.head_dim) {
        throw Error(ErrorCode::Unsupported, f.path() + ": attention.value_length (" + std::to_string(head_dim_v) +
                                                ") differs from key_length (" + std::to_string(hp.head_dim) + ")");
    }
    if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
        throw Error(ErrorCode::Format, f.path() + ": rope.dimension_count must be even and at most the head size");
    }
    return hp;
}

}  // namespace lantern
