#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "model/weight_types.h"
#include "quant/quant.h"

namespace lantern {
namespace {

[[noreturn]] void invalid(const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, "synthetic model: " + what);
}

// --- weight types ---------------------------------------------------------------

DType weight_type(DType requested, int64_t row_length) {
    const std::optional<DType> t = weight_row_type(requested, row_length);
    if (!t) {
        invalid("rows of " + std::to_string(row_length) + " elements do not split into " +
                dtype_name(requested) + " blocks");
    }
    return *t;
}

void check_quantizer(DType t) {
    if (!has_quantizer(t)) {
        throw Error(ErrorCode::Unsupported,
                    std::string("synthetic model: no quantizer for ") + dtype_name(t));
    }
}

// --- random rows ------------------------------------------------------------------

uint64_t mix(uint64_t z) {  // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

enum class Init { Weight, Norm };

// Row `row` of tensor number `stream`: each value is a sum of four 16-bit
// uniforms from one 64-bit draw, scaled to mean 0 and std 1 (Irwin-Hall:
// close to normal, bounded by +-3.5 std), then to the tensor's distribution.
void fill_row(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t row, Init init) {
    constexpr float kMean = 4 * 32767.5f;
    constexpr float kInvStd = 1.0f / 37837.23f;  // 65536 * sqrt(4 / 12)
    const float scale = init == Init::Weight ? 0.02f : 0.01f;
    const float offset = init == Init::Weight ? 0.0f : 1.0f;
    uint64_t state = mix(seed ^ mix((stream << 32) ^ row));
    for (int64_t i = 0; i < n; ++i) {
        state += 0x9e3779b97f4a7c15ull;
        const uint64_t r = mix(state);
        const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                             ((r >> 32) & 0xffff) + (r >> 48));
        out[i] = offset + scale * (sum - kMean) * kInvStd;
    }
}

// --- the model --------------------------------------------------------------------

struct TensorPlan {
    std::string name;
    DType type;
    std::vector<int64_t> shape;  // {row length, rows}
    Init init;
};

void check_shape(const SynthShape& s) {
    const std::string what = "shape '" + s.name + "': ";
    if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 ||
        s.n_ctx <= 0) {
        invalid(what + "every size must be positive");
    }
    if (s.head_dim < 0) invalid(what + "head_dim must not be negative");
    if (s.head_dim == 0 && s.n_embd % s.n_head != 0) invalid(what + "n_embd is not a multiple of n_head");
    if (s.n_head % s.n_head_kv != 0) invalid(what + "n_head is not a multiple of n_head_kv");
    if (s.head_size() % 2 != 0) invalid(what + "the head size must be even (rope)");
    if (s.arch != "llama" && s.arch != "qwen3moe") invalid(what + "architecture '" + s.arch + "' (llama or qwen3moe)");
    if (s.arch == "qwen3moe" && s.n_expert == 0) invalid(what + "qwen3moe needs experts");
    if (s.n_layer > 9999) invalid(what + "too many layers");
    if (s.n_expert < 0 || (s.n_expert > 0 && (s.n_expert_used < 1 || s.n_expert_used > s.n_expert))) {
        invalid(what + "experts used must be between 1 and the number of experts");
    }
}

bool has_qk_norm(const SynthShape& s) { return s.arch == "qwen3moe"; }

std::vector<TensorPlan> plan_tensors(const SynthShape& s, int64_t n_vocab, DType type) {
    const int64_t n_embd_q = s.head_size() * s.n_head, n_embd_kv = s.head_size() * s.n_head_kv;
    auto weight = [&](std::string name, int64_t cols, int64_t rows) {
        return TensorPlan{std::move(name), weight_type(type, cols), {cols, rows}, Init::Weight};
    };
    auto norm = [&](std::string name, int64_t n = 0) {
        return TensorPlan{std::move(name), DType::F32, {n > 0 ? n : s.n_embd}, Init::Norm};
    };
    std::vector<TensorPlan> plan;
    plan.push_back(weight("token_embd.weight", s.n_embd, n_vocab));
    for (int64_t il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        plan.push_back(norm(p + "attn_norm.weight"));
        plan.push_back(weight(p + "attn_q.weight", s.n_embd, n_embd_q));
        plan.push_back(weight(p + "attn_k.weight", s.n_embd, n_embd_kv));
        plan.push_back(weight(p + "attn_v.weight", s.n_embd, n_embd_kv));
        plan.push_back(weight(p + "attn_output.weight", n_embd_q, s.n_embd));
        if (has_qk_norm(s)) {
            plan.push_back(norm(p + "attn_q_norm.weight", s.head_size()));
            plan.push_back(norm(p + "attn_k_norm.weight", s.head_size()));
        }
        plan.push_back(norm(p + "ffn_norm.weight"));
        if (s.n_expert > 0) {
            auto experts = [&](std::string name, int64_t cols, int64_t rows) {
                return TensorPlan{std::move(name), weight_type(type, cols), {cols, rows, s.n_expert}, Init::Weight};
            };
            plan.push_back(TensorPlan{p + "ffn_gate_inp.weight", DType::F32, {s.n_embd, s.n_expert}, Init::Weight});
            plan.push_back(experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff));
            plan.push_back(experts(p + "ffn_down_exps.weight", s.n_ff, s.n_embd));
            plan.push_back(experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff));
            continue;
        }
        plan.push_back(weight(p + "ffn_gate.weight", s.n_embd, s.n_ff));
        plan.push_back(weight(p + "ffn_down.weight", s.n_ff, s.n_embd));
        plan.push_back(weight(p + "ffn_up.weight", s.n_embd, s.n_ff));
    }
    plan.push_back(norm("output_norm.weight"));
    plan.push_back(weight("output.weight", s.n_embd, n_vocab));
    return plan;
}

}  // namespace

const std::vector<SynthShape>& synth_shapes() {
    // Hyperparameters as published for each model family.
    static const std::vector<SynthShape> shapes = {
        {"smollm2-135m", 576, 30, 9, 3, 1536, 8192, 100000.0f, 1e-5f},
        {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 2048, 10000.0f, 1e-5f},
        {"llama2-7b", 4096, 32, 32, 32, 11008, 4096, 10000.0f, 1e-5f},
        {"llama3-8b", 4096, 32, 32, 8, 14336, 8192, 500000.0f, 1e-5f},
        {"mixtral-8x7b", 4096, 32, 32, 8, 14336, 32768, 1000000.0f, 1e-5f, 8, 2},
        {"qwen3moe-30b-a3b", 2048, 48, 32, 4, 768, 40960, 1000000.0f, 1e-6f, 128, 8, "qwen3moe", 128},
    };
    return shapes;
}

const SynthShape& synth_shape(std::string_view name) {
    std::string names;
    for (const SynthShape& s : synth_shapes()) {
        if (s.name == name) return s;
        names += (names.empty() ? "" : ", ") + s.name;
    }
    invalid("unknown shape '" + std::string(name) + "' (known: " + names + ")");
}

int64_t synth_parameter_count(const SynthShape& s, int64_t n_vocab) {
    const int64_t n_embd_q = s.head_size() * s.n_head, n_embd_kv = s.head_size() * s.n_head_kv;
    const int64_t per_layer = 2 * s.n_embd                        // norms
                              + (has_qk_norm(s) ? 2 * s.head_size() : 0)  // per-head Q/K norms
                              + 2 * s.n_embd * n_embd_q           // q, output
                              + 2 * s.n_embd * n_embd_kv          // k, v
                              + 3 * s.n_embd * s.n_ff * std::max<int64_t>(s.n_expert, 1)  // gate, up, down
                              + s.n_embd * s.n_expert;            // the router
    return 2 * n_vocab * s.n_embd + s.n_layer * per_layer + s.n_embd;
}

void write_synthetic_model(const SynthOptions& o) {
    const SynthShape& s = o.shape;
    check_shape(s);
    const std::optional<uint32_t> file_type = llama_file_type(o.type);
    if (!file_type) {
        invalid(std::string("type ") + dtype_name(o.type) + " has no llama file type");
    }

    const std::unique_ptr<gguf::File> vocab = gguf::File::open(o.vocab_path);
    const gguf::Array* tokens = vocab->get_array("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->elem_type != gguf::ValueType::STRING || tokens->size() == 0) {
        throw Error(ErrorCode::Format,
                    o.vocab_path + ": no string array 'tokenizer.ggml.tokens' to take the vocabulary from");
    }
    const auto n_vocab = static_cast<int64_t>(tokens->size());

    const std::vector<TensorPlan> plan = plan_tensors(s, n_vocab, o.type);
    for (const TensorPlan& t : plan) check_quantizer(t.type);

    gguf::Writer w;
    const std::string a = s.arch + ".";
    w.set("general.architecture", s.arch);
    w.set("general.name", "synthetic " + s.name);
    w.set("general.file_type", *file_type);
    if (dtype_is_quantized(o.type)) w.set("general.quantization_version", uint32_t{2});
    w.set(a + "vocab_size", static_cast<uint32_t>(n_vocab));
    w.set(a + "context_length", static_cast<uint32_t>(s.n_ctx));
    w.set(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
    w.set(a + "block_count", static_cast<uint32_t>(s.n_layer));
    w.set(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.set(a + "rope.dimension_count", static_cast<uint32_t>(s.head_size()));
    w.set(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
    w.set(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
    if (s.head_dim > 0) {
        w.set(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
        w.set(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    }
    w.set(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
    w.set(a + "rope.freq_base", s.rope_base);
    if (s.n_expert > 0) {
        w.set(a + "expert_count", static_cast<uint32_t>(s.n_expert));
        w.set(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
        w.set(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff));
    }
    for (const auto& [key, value] : vocab->metadata()) {
        if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    }

    const int n_threads =
        o.n_threads > 0 ? o.n_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (size_t i = 0; i < plan.size(); ++i) {
        const TensorPlan& t = plan[i];
        const uint64_t seed = o.seed;
        w.add_tensor(t.name, t.type, t.shape, [&t, i, seed, n_threads](uint8_t* dst, size_t) {
            const int64_t cols = t.shape[0];
            const int64_t rows = t.shape.size() > 1 ? t.shape[1] * (t.shape.size() > 2 ? t.shape[2] : 1) : 1;
            const size_t row_bytes = dtype_row_size(t.type, cols);
            parallel_for(rows, n_threads, [&](int64_t r0, int64_t r1) {
                std::vector<float> row(static_cast<size_t>(cols));
                for (int64_t r = r0; r < r1; ++r) {
                    fill_row(row.data(), cols, seed, i, static_cast<uint64_t>(r), t.init);
                    uint8_t* out = dst + static_cast<size_t>(r) * row_bytes;
                    if (t.type == DType::F32) {
                        std::memcpy(out, row.data(), row_bytes);
                    } else {
                        quant::quantize_row(t.type, row.data(), out, cols);
                    }
                }
            });
        });
    }
    w.write(o.output_path);
}

}  // namespace lantern
