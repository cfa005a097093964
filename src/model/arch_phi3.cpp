// phi3: the llama layer with fused weights and Phi-3's rope.
//   attn_qkv [n_embd, q + 2 kv]: one product, rows Q | K | V, split by views.
//   ffn_up [n_embd, 2 n_ff]: one product, rows gate | up, split by views.
//   NeoX rope over the first rope.dimension_count dims of each head (partial
//   rotary); longrope frequency factors: rope_factors_long when the context
//   is longer than rope.scaling.original_context_length, else the short
//   ones; rope.scaling.attn_factor scales the rotated dims.
// Files with separate attn_q/attn_k/attn_v or ffn_gate/ffn_up also load.
// No sliding window (llama.cpp disables phi3's, and so does the reference).
#include "model/arch.h"

namespace lantern {

ModelWeights bind_phi3(const WeightTable& w, const HParams& hp) {
    ModelWeights m = bind_common_weights(w, hp);
    m.rope_factors_short = w.optional("rope_factors_short.weight", {hp.n_rot / 2});
    m.rope_factors_long = w.optional("rope_factors_long.weight", {hp.n_rot / 2});
    const int64_t e = hp.n_embd, q = hp.n_head * hp.head_dim, kv = hp.n_head_kv * hp.head_dim;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        LayerWeights& l = m.layers[static_cast<size_t>(il)];
        const std::string p = "blk." + std::to_string(il) + ".";
        l.attn_norm = w.require(p + "attn_norm.weight", {e});
        l.wqkv = w.optional(p + "attn_qkv.weight", {e, q + 2 * kv});
        if (l.wqkv == nullptr) {
            l.wq = w.require(p + "attn_q.weight", {e, q});
            l.wk = w.require(p + "attn_k.weight", {e, kv});
            l.wv = w.require(p + "attn_v.weight", {e, kv});
        }
        l.wo = w.require(p + "attn_output.weight", {q, e});
        l.ffn_norm = w.require(p + "ffn_norm.weight", {e});
        l.ffn_gate = w.optional(p + "ffn_gate.weight", {e, hp.n_ff});
        if (l.ffn_gate != nullptr) {
            l.ffn_up = w.require(p + "ffn_up.weight", {e, hp.n_ff});
        } else {
            l.ffn_gate_up = w.require(p + "ffn_up.weight", {e, 2 * hp.n_ff});
        }
        l.ffn_down = w.require(p + "ffn_down.weight", {hp.n_ff, e});
    }
    return m;
}

namespace {

// rope_freqs if the file has it, else the longrope set for this context.
Tensor* rope_factors(const HParams& hp, const ModelWeights& w, int64_t n_ctx) {
    if (w.rope_freqs != nullptr) return w.rope_freqs;
    const bool use_long = hp.n_ctx_orig > 0 && n_ctx > hp.n_ctx_orig;
    Tensor* first = use_long ? w.rope_factors_long : w.rope_factors_short;
    return first != nullptr ? first : (use_long ? w.rope_factors_short : w.rope_factors_long);
}

}  // namespace

Tensor* build_phi3(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv, const StepInputs& in) {
    const int64_t T = in.tokens->ne[0];
    const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv, n_ff = hp.n_ff;
    const RopeArgs rope{rope_factors(hp, w, kv.n_ctx_seq), hp.rope_base, hp.rope_scale, hp.rope_attn_factor};

    g.set_layer(-1);
    Tensor* x = g.get_rows(w.tok_embd, in.tokens);  // [n_embd, T]

    g.set_layer(0);
    Tensor* cur = g.rms_norm(x, w.layers[0].attn_norm, hp.rms_eps);
    Tensor* last_ffn = nullptr;

    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w.layers[static_cast<size_t>(il)];
        g.set_layer(static_cast<int>(il));
        if (il > 0) {
            cur = add_norm(g, x, last_ffn, l.attn_norm, hp.rms_eps);
        }

        // Attention: Q, K, V as views of one product when the weight is fused.
        Tensor *q, *k, *v;
        if (l.wqkv != nullptr) {
            Tensor* qkv = linear(g, w, l.wqkv, cur);  // [q + 2 kv, T]
            q = head_slice(g, qkv, 0, hd, n_head, "q");
            k = head_slice(g, qkv, n_head * hd, hd, n_kv, "k");
            v = row_slice(g, qkv, (n_head + n_kv) * hd, n_kv * hd, "v");
        } else {
            const std::vector<Tensor*> ys = linear_group(g, w, {l.wq, l.wk, l.wv}, cur);
            q = g.reshape(ys[0], {hd, n_head, T});
            k = g.reshape(ys[1], {hd, n_kv, T});
            v = ys[2];
        }
        Tensor* o = linear(g, w, l.wo, keep_output_rows(g, hp, in, il, x, attend(g, hp, kv, in, il, q, k, v, rope)));

        cur = add_norm(g, x, o, l.ffn_norm, hp.rms_eps);

        // Feed-forward (SwiGLU); the gate is the first half of a fused product.
        Tensor *gate, *up;
        if (l.ffn_gate_up != nullptr) {
            Tensor* gu = linear(g, w, l.ffn_gate_up, cur);  // [2 n_ff, T]
            gate = row_slice(g, gu, 0, n_ff, "gate");
            up = row_slice(g, gu, n_ff, n_ff, "up");
        } else {
            const std::vector<Tensor*> ys = linear_group(g, w, {l.ffn_gate, l.ffn_up}, cur);
            gate = ys[0];
            up = ys[1];
        }
        last_ffn = linear(g, w, l.ffn_down, g.silu_mul(gate, up));
    }
    return output_head(g, hp, w, in, x, last_ffn);
}

}  // namespace lantern
