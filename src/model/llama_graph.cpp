#include "model/llama_graph.h"

namespace lantern {

Tensor* build_llama_graph(Graph& g, const HParams& hp, const ModelWeights& w, const KvCache& kv,
                          const StepInputs& in) {
    const int64_t T = in.tokens->ne[0];
    const int64_t hd = hp.head_dim, n_head = hp.n_head, n_kv = hp.n_head_kv;
    const int n_ctx_seq = static_cast<int>(kv.n_ctx_seq);

    g.set_layer(-1);
    Tensor* x = g.get_rows(w.tok_embd, in.tokens);  // [n_embd, T]

    g.set_layer(0);
    Tensor* cur = g.rms_norm(x, w.layers[0].attn_norm, hp.rms_eps);
    Tensor* last_ffn = nullptr;

    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w.layers[static_cast<size_t>(il)];
        g.set_layer(static_cast<int>(il));
        if (il > 0) {
            // Residual of the previous layer's FFN, fused with this layer's norm.
            Tensor* f = g.add_rms_norm(x, last_ffn, l.attn_norm, hp.rms_eps);
            x = g.fused_slice(f, 0);
            cur = g.fused_slice(f, 1);
        }

        // Attention.
        Tensor* q = g.mul_mat(l.wq, cur);
        Tensor* k = g.mul_mat(l.wk, cur);
        Tensor* v = g.mul_mat(l.wv, cur);
        if (l.bq != nullptr) q = g.add(q, l.bq);
        if (l.bk != nullptr) k = g.add(k, l.bk);
        if (l.bv != nullptr) v = g.add(v, l.bv);

        Tensor* qk = g.rope_qk(g.reshape(q, {hd, n_head, T}), g.reshape(k, {hd, n_kv, T}), in.pos, w.rope_freqs,
                               static_cast<int>(hp.n_rot), hp.rope_mode, hp.rope_base, hp.rope_scale);
        Tensor* q_roped = g.rope_qk_part(qk, false);
        Tensor* k_rows = g.view(qk, {hd * n_kv, T}, {qk->nb[0], qk->nb[2]}, static_cast<size_t>(n_head) * qk->nb[1],
                                "k_roped");

        Tensor* k_all = g.kv_store(k_rows, kv.k[static_cast<size_t>(il)], in.pos, in.seq, n_ctx_seq);
        Tensor* v_all = g.kv_store(v, kv.v[static_cast<size_t>(il)], in.pos, in.seq, n_ctx_seq);
        const int window = hp.is_sliding(il) ? static_cast<int>(hp.sliding_window) : 0;
        Tensor* attn = g.attention(q_roped, k_all, v_all, in.pos, in.seq, static_cast<int>(n_kv), n_ctx_seq,
                                   hp.attention_scale(), hp.attn_softcap, window);
        Tensor* o = g.mul_mat(l.wo, attn);

        Tensor* f = g.add_rms_norm(x, o, l.ffn_norm, hp.rms_eps);
        x = g.fused_slice(f, 0);
        cur = g.fused_slice(f, 1);

        // Feed-forward (SwiGLU).
        Tensor* gate = g.mul_mat(l.ffn_gate, cur);
        Tensor* up = g.mul_mat(l.ffn_up, cur);
        last_ffn = g.mul_mat(l.ffn_down, g.silu_mul(gate, up));
    }

    g.set_layer(static_cast<int>(hp.n_layer));
    Tensor* f = g.add_rms_norm(x, last_ffn, w.output_norm, hp.rms_eps);
    Tensor* normed = g.fused_slice(f, 1);
    if (in.out_ids != nullptr) normed = g.get_rows(normed, in.out_ids);
    Tensor* logits = g.mul_mat(w.output, normed);
    g.mark_output(logits);
    return logits;
}

}  // namespace lantern
