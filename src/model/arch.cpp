#include "model/arch.h"

#include <array>

namespace lantern {
namespace {

// mistral: real Mistral GGUFs say "llama"; files that say "mistral" are the
// same graph (hparams.cpp gives both the same conventions).
constexpr std::array<Architecture, 12> kArchitectures = {{
    {"llama", bind_llama, build_llama},
    {"mistral", bind_llama, build_llama},
    {"qwen2", bind_llama, build_llama},
    {"qwen2moe", bind_llama, build_llama},
    {"qwen3", bind_llama, build_llama},
    {"qwen3moe", bind_llama, build_llama},
    {"smollm3", bind_llama, build_llama},
    {"granite", bind_llama, build_llama},
    {"granitemoe", bind_llama, build_llama},
    {"phi3", bind_phi3, build_phi3},
    {"gemma2", bind_gemma3, build_gemma3},
    {"gemma3", bind_gemma3, build_gemma3},
}};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
    for (const Architecture& a : kArchitectures) {
        if (name == a.name) return &a;
    }
    return nullptr;
}

std::string supported_architectures() {
    std::string s;
    for (const Architecture& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

Tensor* linear(Graph& g, const ModelWeights& w, Tensor* weight, Tensor* x) {
    return linear_group(g, w, {weight}, x)[0];
}

std::vector<Tensor*> linear_group(Graph& g, const ModelWeights& w, std::initializer_list<Tensor*> weights, Tensor* x) {
    std::vector<Tensor*> ys;
    for (Tensor* weight : weights) ys.push_back(g.mul_mat(weight, x));
    if (w.lora.empty()) return ys;
    struct Pending {
        size_t i;
        const LoraDelta* d;
        Tensor* ax;
    };
    std::vector<Pending> pending;
    size_t i = 0;
    for (Tensor* weight : weights) {
        if (auto it = w.lora.find(weight); it != w.lora.end()) {
            for (const LoraDelta& d : it->second) {
                if (d.scale != 0.0f) pending.push_back({i, &d, g.mul_mat(d.a, x)});
            }
        }
        ++i;
    }
    for (const Pending& p : pending) {
        if (p.d->scale == 1.0f) {
            ys[p.i] = g.mul_mat_add(p.d->b, p.ax, ys[p.i]);
        } else {  // a quantized A, not prescaled (model/lora.cpp)
            ys[p.i] = g.add(ys[p.i], g.scale(g.mul_mat(p.d->b, p.ax), p.d->scale));
        }
    }
    return ys;
}

Tensor* add_norm(Graph& g, Tensor*& x, Tensor* delta, Tensor* norm, float eps) {
    Tensor* f = g.add_rms_norm(x, delta, norm, eps);
    x = g.fused_slice(f, 0);
    return g.fused_slice(f, 1);
}

Tensor* attend(Graph& g, const HParams& hp, const KvCache& kv, const StepInputs& in, int64_t il, Tensor* q,
               Tensor* k, Tensor* v, const RopeArgs& rope) {
    const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv, T = q->ne[2];
    const int n_ctx_seq = static_cast<int>(kv.n_ctx_seq);
    Tensor* q_roped = q;
    Tensor* k_rows = nullptr;
    if (hp.uses_rope(il)) {
        Tensor* qk = g.rope_qk(q, k, in.pos, rope.factors, static_cast<int>(hp.n_rot), hp.rope_mode, rope.base,
                               rope.scale, rope.attn_factor);
        q_roped = g.rope_qk_part(qk, false);
        k_rows = g.view(qk, {hd * n_kv, T}, {qk->nb[0], qk->nb[2]}, static_cast<size_t>(n_head) * qk->nb[1], "k_roped");
    } else {
        // A NoPE layer: K as it is, its rows contiguous for the cache.
        k_rows = g.reshape(k->is_contiguous() ? k : g.copy(k, DType::F32), {hd * n_kv, T});
    }
    Tensor* k_all = g.kv_store(k_rows, kv.k[static_cast<size_t>(il)], in.pos, in.seq, n_ctx_seq);
    Tensor* v_all = g.kv_store(v, kv.v[static_cast<size_t>(il)], in.pos, in.seq, n_ctx_seq);
    const int window = hp.is_sliding(il) ? static_cast<int>(hp.sliding_window) : 0;
    return g.attention(q_roped, k_all, v_all, in.pos, in.seq, static_cast<int>(n_kv), n_ctx_seq,
                       hp.attention_scale(), hp.attn_softcap, window);
}

Tensor* keep_output_rows(Graph& g, const HParams& hp, const StepInputs& in, int64_t il, Tensor*& x, Tensor* attn) {
    if (in.out_ids == nullptr || il != hp.n_layer - 1) return attn;
    x = g.get_rows(x, in.out_ids);
    return g.get_rows(attn, in.out_ids);
}

Tensor* output_head(Graph& g, const HParams& hp, const ModelWeights& w, const StepInputs& in, Tensor* x,
                    Tensor* last) {
    g.set_layer(static_cast<int>(hp.n_layer));
    Tensor* f = g.add_rms_norm(x, last, w.output_norm, hp.rms_eps);
    Tensor* normed = g.fused_slice(f, 1);
    if (in.embeddings) {
        // A contiguous tensor of its own (the norm's slice is a view).
        normed = g.copy(normed, DType::F32);
        g.mark_output(normed);
        return normed;
    }
    Tensor* logits = linear(g, w, w.output, normed);
    if (hp.logit_scale > 0.0f) logits = g.scale(logits, 1.0f / hp.logit_scale);
    if (hp.final_softcap > 0.0f) logits = g.softcap(logits, hp.final_softcap);
    g.mark_output(logits);
    return logits;
}

Tensor* row_slice(Graph& g, Tensor* p, int64_t first, int64_t rows, const char* name) {
    return g.view(p, {rows, p->ne[1]}, {p->nb[0], p->nb[1]}, static_cast<size_t>(first) * p->nb[0], name);
}

Tensor* head_slice(Graph& g, Tensor* p, int64_t first, int64_t hd, int64_t heads, const char* name) {
    return g.view(p, {hd, heads, p->ne[1]}, {p->nb[0], static_cast<size_t>(hd) * p->nb[0], p->nb[1]},
                  static_cast<size_t>(first) * p->nb[0], name);
}

}  // namespace lantern
