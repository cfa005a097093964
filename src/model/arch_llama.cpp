// llama, mistral, qwen2, qwen2moe, qwen3, qwen3moe, smollm3, granite, granitemoe:
// embedding (granite: scaled), per layer
// RMSNorm -> Q/K/V (+ biases, qwen2) -> per-head RMSNorm of Q and K (qwen3,
// qwen3moe) -> RoPE (normal; neox for qwen2 and qwen3; Llama 3 frequency
// factors; none on smollm3's every fourth layer) -> KV cache -> attention ->
// output projection -> residual -> RMSNorm -> SwiGLU FFN, or a mixture of
// SwiGLU experts (Mixtral, qwen3moe, granitemoe; qwen2moe adds a shared
// SwiGLU expert gated per token by a sigmoid) -> residual, then the final
// norm and the output head (granite: divided by its logit scale). Granite
// also scales both branch outputs before their residual adds. A head's size is the file's key_length (Qwen3: 128 for any
// width), not necessarily n_embd / n_head.
//
// Each residual add is fused with the RMSNorm that follows it (AddRmsNorm):
// the CPU and GPU backends rely on that for speed.
#include "model/arch.h"

#include "lantern/error.h"

namespace lantern {

ModelWeights bind_llama(const WeightTable& w, const HParams& hp) {
    ModelWeights m = bind_common_weights(w, hp);
    const int64_t e = hp.n_embd, q = hp.n_head * hp.head_dim, kv = hp.n_head_kv * hp.head_dim;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        LayerWeights& l = m.layers[static_cast<size_t>(il)];
        const std::string p = "blk." + std::to_string(il) + ".";
        l.attn_norm = w.require(p + "attn_norm.weight", {e});
        l.wq = w.require(p + "attn_q.weight", {e, q});
        l.wk = w.require(p + "attn_k.weight", {e, kv});
        l.wv = w.require(p + "attn_v.weight", {e, kv});
        l.wo = w.require(p + "attn_output.weight", {q, e});
        l.bq = w.optional(p + "attn_q.bias", {q});
        l.bk = w.optional(p + "attn_k.bias", {kv});
        l.bv = w.optional(p + "attn_v.bias", {kv});
        if (hp.arch == "qwen3" || hp.arch == "qwen3moe") {
            l.q_norm = w.require(p + "attn_q_norm.weight", {hp.head_dim});
            l.k_norm = w.require(p + "attn_k_norm.weight", {hp.head_dim});
        }
        l.ffn_norm = w.require(p + "ffn_norm.weight", {e});
        if (hp.n_expert > 0) {
            const int64_t f = hp.n_ff_exp, x = hp.n_expert;
            l.ffn_gate_inp = w.require(p + "ffn_gate_inp.weight", {e, x});
            l.ffn_gate_exps = w.require(p + "ffn_gate_exps.weight", {e, f, x});
            l.ffn_up_exps = w.require(p + "ffn_up_exps.weight", {e, f, x});
            l.ffn_down_exps = w.require(p + "ffn_down_exps.weight", {f, e, x});
            if (hp.arch == "qwen2moe") {
                const int64_t s = hp.n_ff_shexp;
                l.ffn_gate_inp_shexp = w.require(p + "ffn_gate_inp_shexp.weight", {e});
                l.ffn_gate_shexp = w.require(p + "ffn_gate_shexp.weight", {e, s});
                l.ffn_up_shexp = w.require(p + "ffn_up_shexp.weight", {e, s});
                l.ffn_down_shexp = w.require(p + "ffn_down_shexp.weight", {s, e});
            }
        } else {
            if (w.find(p + "ffn_gate_exps.weight") != nullptr) {
                throw Error(ErrorCode::Format, "the file has expert tensors (" + p +
                                                   "ffn_gate_exps.weight) but no " + hp.arch + ".expert_count");
            }
            l.ffn_gate = w.require(p + "ffn_gate.weight", {e, hp.n_ff});
            l.ffn_up = w.require(p + "ffn_up.weight", {e, hp.n_ff});
            l.ffn_down = w.require(p + "ffn_down.weight", {hp.n_ff, e});
        }
        l.rope_freqs = w.optional(p + "rope_freqs.weight", {hp.n_rot / 2});
    }
    return m;
}

Tensor* build_llama(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in) {
    const int64_t T = in.tokens->ne[0];
    const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;

    g.set_layer(-1);
    Tensor* x = g.get_rows(w.tok_embd, in.tokens);  // [n_embd, T]
    if (hp.embedding_scale > 0.0f) x = g.scale(x, hp.embedding_scale);
    const auto residual = [&](Tensor* branch) {
        return hp.residual_scale > 0.0f ? g.scale(branch, hp.residual_scale) : branch;
    };

    g.set_layer(0);
    Tensor* cur = g.rms_norm(x, w.layers[0].attn_norm, hp.rms_eps);
    Tensor* last_ffn = nullptr;

    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w.layers[static_cast<size_t>(il)];
        g.set_layer(static_cast<int>(il));
        if (il > 0) {
            // Residual of the previous layer's FFN, fused with this layer's norm.
            cur = add_norm(g, x, last_ffn, l.attn_norm, hp.rms_eps);
        }

        // Attention.
        const std::vector<Tensor*> qkv = linear_group(g, w, {l.wq, l.wk, l.wv}, cur);
        Tensor *q = qkv[0], *k = qkv[1], *v = qkv[2];
        if (l.bq != nullptr) q = g.add(q, l.bq);
        if (l.bk != nullptr) k = g.add(k, l.bk);
        if (l.bv != nullptr) v = g.add(v, l.bv);
        const RopeArgs rope{l.rope_freqs != nullptr ? l.rope_freqs : w.rope_freqs, hp.rope_base, hp.rope_scale,
                            hp.rope_attn_factor};
        Tensor* qh = g.reshape(q, {hd, n_head, T});
        Tensor* kh = g.reshape(k, {hd, n_kv, T});
        if (l.q_norm != nullptr) qh = g.rms_norm(qh, l.q_norm, hp.rms_eps);
        if (l.k_norm != nullptr) kh = g.rms_norm(kh, l.k_norm, hp.rms_eps);
        Tensor* attn = keep_output_rows(g, hp, in, il, x, attend(g, hp, kv, in, il, qh, kh, v, rope));
        Tensor* o = residual(linear(g, w, l.wo, attn));

        cur = add_norm(g, x, o, l.ffn_norm, hp.rms_eps);

        // Feed-forward (SwiGLU), or a mixture of SwiGLU experts.
        if (l.ffn_gate_exps != nullptr) {
            Tensor* moe = g.moe_ffn(cur, l.ffn_gate_inp, l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps,
                                    static_cast<int>(hp.n_expert_used), hp.expert_weights_norm);
            if (l.ffn_gate_shexp != nullptr) {
                const std::vector<Tensor*> gu = linear_group(g, w, {l.ffn_gate_shexp, l.ffn_up_shexp}, cur);
                Tensor* shared = linear(g, w, l.ffn_down_shexp, g.silu_mul(gu[0], gu[1]));
                moe = g.add(moe, g.sigmoid_gate(shared, g.mul_mat(l.ffn_gate_inp_shexp, cur)));
            }
            last_ffn = residual(moe);
            continue;
        }
        const std::vector<Tensor*> gate_up = linear_group(g, w, {l.ffn_gate, l.ffn_up}, cur);
        last_ffn = residual(linear(g, w, l.ffn_down, g.silu_mul(gate_up[0], gate_up[1])));
    }
    return output_head(g, hp, w, in, x, last_ffn);
}

}  // namespace lantern
