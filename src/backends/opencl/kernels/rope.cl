// Rotary position embedding, alone and fused with the KV-cache writes.
//
// The rotation itself (rope_apply) is in common.cl: decode attention
// applies it too.
//
// Launch: global (head_dim / 2, heads, tokens); each work-item moves two
// elements: one rotated pair, or two pass-through dimensions.

kernel void rope_f32(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2,
                     global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2,
                     const global uchar* posb, ulong pos_off,
                     const global uchar* ffb, ulong ff_off, int has_ff,
                     const global uchar* ifb, ulong if_off,
                     int hd, int n_rot, int neox, float attn_factor) {
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const long t = get_global_id(2);
    if (i >= hd / 2) return;
    const float pos = (float)LT_CPTR(int, posb, pos_off)[t];
    int2 idx;
    const float2 y = rope_apply(LT_CPTR(float, a, a_off + h * a_nb1 + t * a_nb2), i, n_rot, neox, pos, attn_factor,
                                LT_CPTR(float, ifb, if_off), LT_CPTR(float, ffb, ff_off), has_ff, &idx);
    global float* out = LT_PTR(float, d, d_off + h * d_nb1 + t * d_nb2);
    out[idx.x] = y.x;
    out[idx.y] = y.y;
}

inline void cache_store2(global uchar* row, int e0, float v0, float v1, int f16) {
    if (f16) {
        vstore_half_rte(v0, e0, (global half*)row);
        vstore_half_rte(v1, e0 + 1, (global half*)row);
    } else {
        ((global float*)row)[e0] = v0;
        ((global float*)row)[e0 + 1] = v1;
    }
}

// RopeQK into dst [hd, n_q + n_k, T], and optionally (do_kv) the KV-cache
// writes that follow it: the rotated K rows into kc and the V rows into vc at
// cell seq[t] * n_ctx_seq + pos[t] (cells out of range are skipped, as on the
// CPU). Heads [0, n_q) are q, [n_q, n_q + n_k) k, then n_k heads of v rows.
kernel void rope_qk_kv(const global uchar* qb, ulong q_off, ulong q_nb1, ulong q_nb2,
                       const global uchar* kb, ulong k_off, ulong k_nb1, ulong k_nb2,
                       global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2,
                       const global uchar* posb, ulong pos_off,
                       const global uchar* ffb, ulong ff_off, int has_ff,
                       const global uchar* ifb, ulong if_off,
                       int hd, int n_q, int n_k, int n_rot, int neox, float attn_factor, int do_kv,
                       const global uchar* seqb, ulong seq_off, int n_ctx_seq, int n_cells, int cache_f16,
                       global uchar* kc, ulong kc_off, ulong kc_nb1,
                       const global uchar* vb, ulong v_off, ulong v_nb1,
                       global uchar* vc, ulong vc_off, ulong vc_nb1) {
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const long t = get_global_id(2);
    if (i >= hd / 2) return;
    const int p = LT_CPTR(int, posb, pos_off)[t];
    long cell = -1;
    if (do_kv) {
        cell = (long)LT_CPTR(int, seqb, seq_off)[t] * n_ctx_seq + p;
        if (p < 0 || p >= n_ctx_seq || cell < 0 || cell >= n_cells) cell = -1;
    }
    if (h >= n_q + n_k) {  // a V head: copy into the cache
        if (cell < 0) return;
        const int vh = h - n_q - n_k;
        const global float* v = LT_CPTR(float, vb, v_off + t * v_nb1) + vh * hd;
        cache_store2(vc + vc_off + cell * vc_nb1, vh * hd + 2 * i, v[2 * i], v[2 * i + 1], cache_f16);
        return;
    }
    const int is_k = h >= n_q;
    const global float* x = is_k ? LT_CPTR(float, kb, k_off + (h - n_q) * k_nb1 + t * k_nb2)
                                 : LT_CPTR(float, qb, q_off + h * q_nb1 + t * q_nb2);
    int2 idx;
    const float2 y = rope_apply(x, i, n_rot, neox, (float)p, attn_factor, LT_CPTR(float, ifb, if_off), LT_CPTR(float, ffb, ff_off),
                                has_ff, &idx);
    global float* out = LT_PTR(float, d, d_off + h * d_nb1 + t * d_nb2);
    out[idx.x] = y.x;
    out[idx.y] = y.y;
    if (is_k && cell >= 0) {
        global uchar* row = kc + kc_off + cell * kc_nb1;
        const int base = (h - n_q) * hd;
        if (cache_f16) {
            vstore_half_rte(y.x, base + idx.x, (global half*)row);
            vstore_half_rte(y.y, base + idx.y, (global half*)row);
        } else {
            ((global float*)row)[base + idx.x] = y.x;
            ((global float*)row)[base + idx.y] = y.y;
        }
    }
}
