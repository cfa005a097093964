// gemma3: embeddings scaled by sqrt(n_embd); per layer
//   RMSNorm -> Q/K/V -> per-head RMSNorm of Q and K -> NeoX rope -> KV cache
//   -> attention (sliding window on local layers) -> output projection ->
//   post-attention RMSNorm -> residual -> RMSNorm -> GeGLU FFN
//   (gelu_tanh(gate) * up) -> post-FFN RMSNorm -> residual;
// then the final norm and the tied output head (final soft-capping if the
// file asks for it).
//
// Local (sliding-window) layers rotate with rope.freq_base_swa (10000 by
// default) and no scaling; global layers (every 6th by default) with the
// file's base and linear scaling. The attention scale is 1/sqrt(key_length)
// (or the file's attention.scale): key_length need not be n_embd / n_head.
// Norm weights are used as stored: the GGUF converter has already added
// Gemma's "+ 1".
//
// gemma2 is the same graph without the Q/K norms: every other layer local
// (the even ones), one rope base for all, attention logits soft-capped
// (attn_logit_softcapping) as well as the output.
#include <cmath>

#include "model/arch.h"

namespace lantern {

ModelWeights bind_gemma3(const WeightTable& w, const HParams& hp) {
    ModelWeights m = bind_common_weights(w, hp);
    const int64_t e = hp.n_embd, hd = hp.head_dim, q = hp.n_head * hd, kv = hp.n_head_kv * hd;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        LayerWeights& l = m.layers[static_cast<size_t>(il)];
        const std::string p = "blk." + std::to_string(il) + ".";
        l.attn_norm = w.require(p + "attn_norm.weight", {e});
        l.wq = w.require(p + "attn_q.weight", {e, q});
        l.wk = w.require(p + "attn_k.weight", {e, kv});
        l.wv = w.require(p + "attn_v.weight", {e, kv});
        if (hp.arch == "gemma3") {
            l.q_norm = w.require(p + "attn_q_norm.weight", {hd});
            l.k_norm = w.require(p + "attn_k_norm.weight", {hd});
        }
        l.wo = w.require(p + "attn_output.weight", {q, e});
        l.post_attn_norm = w.require(p + "post_attention_norm.weight", {e});
        l.ffn_norm = w.require(p + "ffn_norm.weight", {e});
        l.ffn_gate = w.require(p + "ffn_gate.weight", {e, hp.n_ff});
        l.ffn_up = w.require(p + "ffn_up.weight", {e, hp.n_ff});
        l.ffn_down = w.require(p + "ffn_down.weight", {hp.n_ff, e});
        l.post_ffw_norm = w.require(p + "post_ffw_norm.weight", {e});
    }
    return m;
}

Tensor* build_gemma3(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in) {
    const int64_t T = in.tokens->ne[0];
    const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;

    g.set_layer(-1);
    Tensor* x = g.scale(g.get_rows(w.tok_embd, in.tokens), std::sqrt(static_cast<float>(hp.n_embd)));

    g.set_layer(0);
    Tensor* cur = g.rms_norm(x, w.layers[0].attn_norm, hp.rms_eps);
    Tensor* last_ffn = nullptr;

    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w.layers[static_cast<size_t>(il)];
        g.set_layer(static_cast<int>(il));
        if (il > 0) {
            cur = add_norm(g, x, last_ffn, l.attn_norm, hp.rms_eps);
        }

        // Attention, with Q and K normalised per head before rope (gemma3).
        const std::vector<Tensor*> qk = linear_group(g, w, {l.wq, l.wk}, cur);
        Tensor* q = g.reshape(qk[0], {hd, n_head, T});
        Tensor* k = g.reshape(qk[1], {hd, n_kv, T});
        if (l.q_norm != nullptr) q = g.rms_norm(q, l.q_norm, hp.rms_eps);
        if (l.k_norm != nullptr) k = g.rms_norm(k, l.k_norm, hp.rms_eps);
        Tensor* v = linear(g, w, l.wv, cur);
        const bool local = hp.is_sliding(il);
        const RopeArgs rope{w.rope_freqs, local ? hp.rope_base_local : hp.rope_base, local ? 1.0f : hp.rope_scale,
                            hp.rope_attn_factor};
        Tensor* o = linear(g, w, l.wo, keep_output_rows(g, hp, in, il, x, attend(g, hp, kv, in, il, q, k, v, rope)));
        o = g.rms_norm(o, l.post_attn_norm, hp.rms_eps);

        cur = add_norm(g, x, o, l.ffn_norm, hp.rms_eps);

        // Feed-forward (GeGLU), normalised before the residual.
        const std::vector<Tensor*> gate_up = linear_group(g, w, {l.ffn_gate, l.ffn_up}, cur);
        last_ffn = g.rms_norm(linear(g, w, l.ffn_down, g.gelu_mul(gate_up[0], gate_up[1])), l.post_ffw_norm, hp.rms_eps);
    }
    return output_head(g, hp, w, in, x, last_ffn);
}

}  // namespace lantern
