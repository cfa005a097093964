#include "model/lora.h"

#include <cmath>
#include <map>

#include "backends/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "lantern/error.h"
#include "quant/quant.h"

namespace lantern {
namespace {

[[noreturn]] void bad(const std::string& path, ErrorCode code, const std::string& what) {
    throw Error(code, path + ": LoRA adapter: " + what);
}

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every weight the graphs multiply by through linear(): the ones an
// adapter may update.
bool is_adaptable(const ModelWeights& w, const Tensor* t) {
    if (t == w.output) return true;
    for (const LayerWeights& l : w.layers) {
        for (const Tensor* m : {l.wq, l.wk, l.wv, l.wqkv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_gate_up, l.ffn_down}) {
            if (m == t) return true;
        }
    }
    return false;
}

// s B (A x) = B ((s A) x): a float A of the adapter's `deltas` is copied
// to F32 with s multiplied in, so the step has no scale op for it.
void prescale(LoraAdapter& adapter, CpuBackend& host, std::vector<LoraDelta>& deltas) {
    std::vector<LoraDelta*> todo;
    size_t bytes = 0;
    for (LoraDelta& d : deltas) {
        const bool is_float = d.a->type == DType::F32 || d.a->type == DType::F16 || d.a->type == DType::BF16;
        if (!is_float || d.scale == 1.0f || d.scale == 0.0f) continue;
        todo.push_back(&d);
        bytes += static_cast<size_t>(d.a->ne[0] * d.a->ne[1]) * sizeof(float);
    }
    if (todo.empty()) return;
    adapter.scaled = host.alloc(bytes, BufferKind::Weights);
    size_t offset = 0;
    for (LoraDelta* d : todo) {
        const int64_t n_in = d->a->ne[0], r = d->a->ne[1];
        std::vector<float> rows(static_cast<size_t>(n_in * r));
        const uint8_t* src = static_cast<const uint8_t*>(adapter.table->host_data(d->a));
        const size_t row_bytes = dtype_row_size(d->a->type, n_in);
        for (int64_t i = 0; i < r; ++i) {
            quant::dequantize_row(d->a->type, src + static_cast<size_t>(i) * row_bytes, rows.data() + i * n_in, n_in);
        }
        for (float& v : rows) v *= d->scale;
        adapter.scaled->write(offset, rows.data(), rows.size() * sizeof(float));
        Tensor& t = adapter.scaled_a.emplace_back(*d->a);
        t.type = DType::F32;
        t.set_contiguous_strides();
        t.buffer = adapter.scaled.get();
        t.offset = offset;
        offset += rows.size() * sizeof(float);
        d->a = &t;
        d->scale = 1.0f;
    }
}

}  // namespace

std::unique_ptr<LoraAdapter> load_lora(const std::string& path, float scale, const WeightTable& base,
                                       const HParams& hp, CpuBackend& host, ModelWeights& weights) {
    auto adapter = std::make_unique<LoraAdapter>();
    adapter->file = gguf::File::open(path);
    const gguf::File& f = *adapter->file;
    if (f.get_string("general.type").value_or("") != "adapter" || f.get_string("adapter.type").value_or("") != "lora") {
        bad(path, ErrorCode::Format, "general.type is not \"adapter\" with adapter.type \"lora\" (is it a model?)");
    }
    if (const auto arch = f.get_string("general.architecture"); arch && *arch != hp.arch) {
        bad(path, ErrorCode::Format, "it is for architecture '" + *arch + "', the model is '" + hp.arch + "'");
    }
    const double alpha = f.get_float("adapter.lora.alpha").value_or(0.0);
    if (!std::isfinite(alpha) || !std::isfinite(scale)) bad(path, ErrorCode::InvalidArgument, "alpha or scale is not finite");

    adapter->mapping = host.wrap(f.base(), f.size());
    adapter->table = std::make_unique<WeightTable>(f, *adapter->mapping);
    adapter->table->realign(host);

    // Pair NAME.lora_a with NAME.lora_b.
    std::map<std::string, std::pair<Tensor*, Tensor*>> pairs;
    for (const Tensor& t : adapter->table->all()) {
        const std::string name = t.name;
        const bool is_a = ends_with(name, ".lora_a"), is_b = ends_with(name, ".lora_b");
        if (!is_a && !is_b) bad(path, ErrorCode::Format, "tensor '" + name + "' is neither a .lora_a nor a .lora_b");
        auto& [a, b] = pairs[name.substr(0, name.size() - 7)];
        (is_a ? a : b) = adapter->table->find(name);
    }
    if (pairs.empty()) bad(path, ErrorCode::Format, "it has no tensors");
    std::vector<const Tensor*> targets;
    std::vector<LoraDelta> deltas;
    for (const auto& [target, ab] : pairs) {
        const auto [a, b] = ab;
        if (a == nullptr || b == nullptr) {
            bad(path, ErrorCode::Format, "'" + target + (a == nullptr ? ".lora_b' has no .lora_a" : ".lora_a' has no .lora_b"));
        }
        const Tensor* w = base.find(target);
        if (w == nullptr) bad(path, ErrorCode::Format, "it adapts '" + target + "', which the model does not have");
        if (w == weights.tok_embd && w != weights.output) {
            bad(path, ErrorCode::Unsupported, "adapting the token embeddings ('" + target + "') is not supported");
        }
        if (!is_adaptable(weights, w)) {
            bad(path, ErrorCode::Unsupported, "adapting '" + target + "' is not supported (only attention, FFN and output matrices)");
        }
        const int64_t n_in = w->ne[0], n_out = w->ne[1], r = a->ne[1];
        const bool fits = a->ne[0] == n_in && b->ne[0] == r && b->ne[1] == n_out && a->ne[2] == 1 && a->ne[3] == 1 &&
                          b->ne[2] == 1 && b->ne[3] == 1 && w->ne[2] == 1;
        if (!fits) {
            bad(path, ErrorCode::Format,
                "'" + target + "' is [" + std::to_string(n_in) + ", " + std::to_string(n_out) + "] but its lora_a is [" +
                    std::to_string(a->ne[0]) + ", " + std::to_string(a->ne[1]) + "] and lora_b [" + std::to_string(b->ne[0]) +
                    ", " + std::to_string(b->ne[1]) + "] (expected [" + std::to_string(n_in) + ", r] and [r, " +
                    std::to_string(n_out) + "])");
        }
        const float s = alpha != 0.0 ? static_cast<float>(scale * alpha / static_cast<double>(r)) : scale;
        targets.push_back(w);
        deltas.push_back(LoraDelta{a, b, s});
    }
    prescale(*adapter, host, deltas);
    for (size_t i = 0; i < deltas.size(); ++i) weights.lora[targets[i]].push_back(deltas[i]);
    return adapter;
}

}  // namespace lantern
