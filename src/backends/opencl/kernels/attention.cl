// KV-cache writes and causal attention over the cache.
//
// The cache of a layer holds n_seq slots of n_ctx_seq cells; the token at
// (seq s, position p) lives in cell s * n_ctx_seq + p, a row of
// head_dim * n_head_kv values. A cache's type is its DType id: 0 f32, 1 f16,
// 8 q8_0 (blocks of 32 values: a half scale d, then 32 int8 q; value d * q;
// 34 bytes, so rows are only 2-byte aligned). K and V may differ in type.
// Token t attends to cells seq[t] * n_ctx_seq + [lo, pos[t]], lo = 0 or
// pos[t] - window + 1.
//
// attn_decode: one work-group per (head, token), LT_RED_WG work-items; the
//   cells are taken in chunks of LT_RED_WG with an online softmax (running
//   max and sum), so any context length works.
// attn_prefill (_64): work-groups of 128 per (head, tile of 16 tokens, or
//   32 for heads of up to 64 values, split of the tile's cells); key tiles
//   of 32 cells are staged in local memory and shared by the tile's
//   queries; only cells some query of the tile attends to are walked.
// Both can write their output rows as 8-bit blocks for the next product.

#define LT_CACHE_F16 1
#define LT_CACHE_Q8 8
#define LT_Q8_BLOCK_BYTES 34

// Byte offset of K/V head `kvh` (head_dim hd) in a cache row.
inline ulong cache_col(int kvh, int hd, int type) {
    if (type == LT_CACHE_Q8) return (ulong)kvh * (hd / 32) * LT_Q8_BLOCK_BYTES;
    return (ulong)kvh * hd * (type == LT_CACHE_F16 ? 2 : 4);
}

// Element e of a cache row, as a float.
inline float cache_load(const global uchar* row, int e, int type) {
    if (type == LT_CACHE_Q8) {
        const global uchar* blk = row + (e >> 5) * LT_Q8_BLOCK_BYTES;
        return vload_half(0, (const global half*)blk) * (float)((const global char*)blk)[2 + (e & 31)];
    }
    return type == LT_CACHE_F16 ? vload_half(e, (const global half*)row) : ((const global float*)row)[e];
}
// Elements e .. e + 3 of a cache row (e a multiple of 4), as floats.
inline float4 cache_load4(const global uchar* row, int e, int type) {
    if (type == LT_CACHE_Q8) {
        const global uchar* blk = row + (e >> 5) * LT_Q8_BLOCK_BYTES;
        return vload_half(0, (const global half*)blk) * convert_float4(vload4(0, (const global char*)(blk + 2 + (e & 31))));
    }
    return type == LT_CACHE_F16 ? vload_half4(e >> 2, (const global half*)row) : vload4(e >> 2, (const global float*)row);
}
inline void cache_store(global uchar* row, int e, float v, int type) {
    if (type == LT_CACHE_F16) {
        vstore_half_rte(v, e, (global half*)row);
    } else {
        ((global float*)row)[e] = v;
    }
}

// The 32 values v[] as one Q8_0 block, quantized as the 8-bit activations
// are (common.cl: as the CPU quantizes Q8_0); written to blk when `write`.
// v[] becomes the values the block holds (d * q).
inline void q8_0_block(float* v, global uchar* blk, int write) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(v[j]));
    const float d = q8_scale(amax);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    if (write) vstore_half_rte(d, 0, (global half*)blk);
    global char* q = (global char*)(blk + 2);
    for (int j = 0; j < 32; ++j) {
        const char c = q8_quant(v[j], inv);
        if (write) q[j] = c;
        v[j] = d * (float)c;
    }
}

// Rows of D values into cells: one work-item per value (f16, f32), or per
// block of 32 (q8_0: global size D / 32).
kernel void kv_store(const global uchar* a, ulong a_off, ulong a_nb1,
                     global uchar* c, ulong c_off, ulong c_nb1, int type,
                     const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off,
                     int D, int n_ctx_seq, int n_cells) {
    const int i = get_global_id(0);
    const long t = get_global_id(1);
    if (i >= (type == LT_CACHE_Q8 ? D / 32 : D)) return;
    const int p = LT_CPTR(int, posb, pos_off)[t];
    const long cell = (long)LT_CPTR(int, seqb, seq_off)[t] * n_ctx_seq + p;
    if (p < 0 || p >= n_ctx_seq || cell < 0 || cell >= n_cells) return;  // validated upstream
    const global float* src = LT_CPTR(float, a, a_off + t * a_nb1);
    global uchar* row = c + c_off + cell * c_nb1;
    if (type == LT_CACHE_Q8) {
        float v[32];
        for (int j = 0; j < 32; ++j) v[j] = src[i * 32 + j];
        q8_0_block(v, row + i * LT_Q8_BLOCK_BYTES, 1);
    } else {
        cache_store(row, i, src[i], type);
    }
}

// Where token t looks: its first cell, and the range [lo, p] of positions.
// Returns 0 when the sequence's cells lie outside the cache.
inline int attn_range(const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off, long t,
                      int n_ctx_seq, int n_cells, int window, long* base, int* lo, int* p) {
    *p = clamp(LT_CPTR(int, posb, pos_off)[t], 0, n_ctx_seq - 1);
    *lo = window > 0 ? max(0, *p - window + 1) : 0;
    *base = (long)LT_CPTR(int, seqb, seq_off)[t] * n_ctx_seq;
    return *base >= 0 && *base + n_ctx_seq <= n_cells;
}

inline float softcap_score(float s, float softcap) { return softcap > 0.0f ? softcap * tanh(s / softcap) : s; }

#define ATT_MAX_HD 256

// The 8-bit blocks of head h's output row (just written by this group).
inline void attn_out_q8(global float* out, int h, long t, int hd, int n_head, global uchar* oq, ulong oq_off,
                        ulong ods_off) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    const int K = hd * n_head;
    for (int blk = get_local_id(0); blk < hd / 32; blk += LT_RED_WG) {
        const int col = h * hd + blk * 32;
        q8_quantize_block(out + blk * 32, LT_PTR(char, oq, oq_off + t * K) + col,
                          LT_PTR(float2, oq, ods_off) + t * (K / 32) + col / 32);
    }
}

// Long ranges are split across work-groups (flash-decoding): the launch has
// n_split groups per (head, token), fixed when the step is recorded; the
// positions are read at run time, so each token's range [lo, p] is dealt out
// here: split_min cells a split at least, the splits without cells exit.
// Splits are whole multiples of `align` cells (prompts: key tiles).
// Returns how many splits have cells; split s takes [*c0, *c1]. With one,
// split 0 writes the output; with more, each writes its partial softmax (its
// max, its sum and its unnormalised output row) to `part`, and the last of
// them to finish (a counter per (token, head)) adds them up and writes it.
inline int attn_split(int lo, int p, int s, int n_split, int split_min, int align, int* c0, int* c1) {
    const int n = p - lo + 1;
    const int want = clamp((n + split_min - 1) / split_min, 1, n_split);
    const int per = ((n + want - 1) / want + align - 1) / align * align;
    *c0 = lo + s * per;
    *c1 = min(p, *c0 + per - 1);
    return (n + per - 1) / per;
}

// The partials of (t, h): n_split of m, l, then hd floats.
inline global float* attn_parts(global uchar* part, ulong part_off, long t, int h, int n_head, int n_split, int hd) {
    return LT_PTR(float, part, part_off) + (t * n_head + h) * n_split * (hd + 2);
}

// Attention of query head h of token t (its values in local q[]) over cells
// base + [c0, c1] of the cache, split s of ns (attn_split; `parts` and
// `counter` serve ns > 1). Cell `cur` (-1: none) is taken from kcur / vcur
// instead of the cache: the current token's K and V when this launch also
// writes them. The group that completes (t, h) writes its output row, and
// its 8-bit blocks when want_q8.
//
// Scores: a cell per work-item, LT_RED_WG cells a chunk, online softmax. The
// weighted V sums: dimension lid % hd, every (LT_RED_WG / hd)-th cell of the
// chunk from lid / hd on, the groups' sums added at the end (heads wider
// than the group: dimensions lid and lid + LT_RED_WG, every cell).
inline void attn_decode_head(const local float* q, local float* pr, local float* tmp,
                             const local float* kcur, const local float* vcur, long cur,
                             const global uchar* kb, ulong k_off, ulong k_nb1,
                             const global uchar* vb, ulong v_off, ulong v_nb1, int kt, int vt,
                             long base, int c0, int c1, int s, int ns, global float* parts,
                             volatile global int* counter, global float* out, int h, long t, int hd, int n_head, int n_head_kv, float scale, float softcap,
                             global uchar* oq, ulong oq_off, ulong ods_off, int want_q8) {
    const int lid = get_local_id(0);
    const int kvh = h / (n_head / n_head_kv);
    const int wide = hd > LT_RED_WG;
    const int G = wide ? 1 : LT_RED_WG / hd;
    const int dim = wide ? lid : lid % hd, g = wide ? 0 : lid / hd;
    const int active = g < G;
    float acc0 = 0.0f, acc1 = 0.0f;
    float m = LT_NEG_BIG, l = 0.0f;
    const ulong kcol = cache_col(kvh, hd, kt), vcol = cache_col(kvh, hd, vt);
    for (int j0 = c0; j0 <= c1; j0 += LT_RED_WG) {
        const int j = j0 + lid;
        float s = LT_NEG_BIG;
        if (j <= c1) {
            const global uchar* krow = kb + k_off + (base + j) * k_nb1 + kcol;
            float dot = 0.0f;
            if (base + j == cur) {
                for (int e = 0; e < hd; ++e) dot += q[e] * kcur[e];
            } else if (kt == LT_CACHE_Q8) {
                for (int b = 0; b < hd / 32; ++b) {
                    const global uchar* blk = krow + b * LT_Q8_BLOCK_BYTES;
                    const global char* kq = (const global char*)(blk + 2);
                    const local float* qq = q + b * 32;
                    float part_dot = 0.0f;
                    for (int e = 0; e < 32; e += 4) {
                        const float4 kk = convert_float4(vload4(0, kq + e));
                        part_dot += qq[e] * kk.x + qq[e + 1] * kk.y + qq[e + 2] * kk.z + qq[e + 3] * kk.w;
                    }
                    dot += vload_half(0, (const global half*)blk) * part_dot;
                }
            } else if (kt == LT_CACHE_F16) {
                int e = 0;
                for (; e + 4 <= hd; e += 4) {
                    const float4 kk = vload_half4(e / 4, (const global half*)krow);
                    dot += q[e] * kk.x + q[e + 1] * kk.y + q[e + 2] * kk.z + q[e + 3] * kk.w;
                }
                for (; e < hd; ++e) dot += q[e] * vload_half(e, (const global half*)krow);
            } else {
                for (int e = 0; e < hd; ++e) dot += q[e] * ((const global float*)krow)[e];
            }
            s = softcap_score(dot * scale, softcap);
        }
        const float m_new = fmax(m, wg_max(s, tmp));
        const float e = j <= c1 ? exp(s - m_new) : 0.0f;
        pr[lid] = e;
        const float csum = wg_sum(e, tmp);  // its barriers also publish pr[]
        const float f = exp(m - m_new);
        l = l * f + csum;
        m = m_new;
        const int n = min(LT_RED_WG, c1 - j0 + 1);
        const global uchar* vrow = vb + v_off + (base + j0) * v_nb1 + vcol;
        const int jc = (int)(cur - base - j0);  // the chunk's current cell (may lie outside it)
        if (active) {
            float a = acc0 * f;
            for (int jj = g; jj < n; jj += G) a += pr[jj] * (jj == jc ? vcur[dim] : cache_load(vrow + jj * v_nb1, dim, vt));
            acc0 = a;
        }
        if (lid + LT_RED_WG < hd) {
            const int e1 = lid + LT_RED_WG;
            float a = acc1 * f;
            for (int jj = 0; jj < n; ++jj) a += pr[jj] * (jj == jc ? vcur[e1] : cache_load(vrow + jj * v_nb1, e1, vt));
            acc1 = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);  // pr[] is rewritten by the next chunk
    }
    // The cell groups' sums of each dimension (one group when wide; the
    // barrier unconditional: PoCL wrote out of bounds with it under if (G > 1)).
    tmp[lid] = active ? acc0 : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!wide && lid < hd) {
        float a = 0.0f;
        for (int k = 0; k < G; ++k) a += tmp[k * hd + lid];
        acc0 = a;
    }
    const int split = ns > 1;
    if (split) {
        global float* mine = parts + s * (hd + 2);
        if (lid == 0) {
            mine[0] = m;
            mine[1] = l;
        }
        if (lid < hd) mine[2 + lid] = acc0;
        if (lid + LT_RED_WG < hd) mine[2 + lid + LT_RED_WG] = acc1;
    }
    // Every work-item's partial is fenced device-wide before the group is
    // counted; the last group of (t, h) sets the counter back for the next
    // launch. (The barriers are unconditional, as above.)
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        int last = 1;
        if (split) {
            last = atomic_inc(counter) == ns - 1;
            if (last) atomic_xchg(counter, 0);
        }
        tmp[0] = last ? 1.0f : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tmp[0] == 0.0f) return;
    if (split) {  // volatile loads: not from a cache line this group held before the others wrote
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        const volatile global float* pp = parts;
        float mx = LT_NEG_BIG;
        for (int k = 0; k < ns; ++k) mx = fmax(mx, pp[k * (hd + 2)]);
        float lsum = 0.0f, a0 = 0.0f, a1 = 0.0f;
        for (int k = 0; k < ns; ++k) {
            const volatile global float* pk = pp + k * (hd + 2);
            const float w = exp(pk[0] - mx);
            lsum += w * pk[1];
            if (lid < hd) a0 += w * pk[2 + lid];
            if (lid + LT_RED_WG < hd) a1 += w * pk[2 + lid + LT_RED_WG];
        }
        l = lsum;
        acc0 = a0;
        acc1 = a1;
    }
    const float inv = 1.0f / l;
    if (lid < hd) out[lid] = acc0 * inv;
    if (lid + LT_RED_WG < hd) out[lid + LT_RED_WG] = acc1 * inv;
    if (want_q8) attn_out_q8(out, h, t, hd, n_head, oq, oq_off, ods_off);
}

// Token t's range and split s's share of it (attn_split); 0 when this group
// has nothing to do (a split without cells; a token outside the cache, whose
// zero row split 0 writes).
inline int attn_decode_plan(const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off, long t,
                            int s, int n_ctx_seq, int n_cells, int window, int n_split, int split_min,
                            global float* out, int h, int hd, int n_head,
                            global uchar* oq, ulong oq_off, ulong ods_off, int want_q8,
                            long* base, int* c0, int* c1, int* ns) {
    int lo, p;
    if (!attn_range(posb, pos_off, seqb, seq_off, t, n_ctx_seq, n_cells, window, base, &lo, &p)) {
        if (s != 0) return 0;
        for (int e = get_local_id(0); e < hd; e += LT_RED_WG) out[e] = 0.0f;
        if (want_q8) attn_out_q8(out, h, t, hd, n_head, oq, oq_off, ods_off);
        return 0;
    }
    *ns = attn_split(lo, p, s, n_split, split_min, 1, c0, c1);
    return s < *ns;
}

// Launch: (n_head * LT_RED_WG, T, n_split), groups of LT_RED_WG.
LT_REDUCTION_ATTR
kernel void attn_decode(const global uchar* qb, ulong q_off, ulong q_nb1, ulong q_nb2,
                        const global uchar* kb, ulong k_off, ulong k_nb1,
                        const global uchar* vb, ulong v_off, ulong v_nb1, int kt, int vt,
                        const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off,
                        global uchar* d, ulong d_off, ulong d_nb1,
                        int hd, int n_head, int n_head_kv, int n_ctx_seq, int n_cells, float scale, float softcap,
                        int window, global uchar* oq, ulong oq_off, ulong ods_off, int want_q8,
                        global uchar* part, ulong part_off, global uchar* cnt, ulong cnt_off, int n_split,
                        int split_min) {
    local float q[ATT_MAX_HD];
    local float pr[LT_RED_WG];
    local float tmp[LT_RED_WG];
    const int h = get_group_id(0);
    const long t = get_group_id(1);
    const int s = get_group_id(2);
    const int lid = get_local_id(0);
    global float* out = LT_PTR(float, d, d_off + t * d_nb1) + h * hd;
    long base;
    int c0, c1, ns;
    if (!attn_decode_plan(posb, pos_off, seqb, seq_off, t, s, n_ctx_seq, n_cells, window, n_split, split_min, out, h,
                          hd, n_head, oq, oq_off, ods_off, want_q8, &base, &c0, &c1, &ns)) {
        return;
    }
    const global float* qv = LT_CPTR(float, qb, q_off + h * q_nb1 + t * q_nb2);
    for (int e = lid; e < hd; e += LT_RED_WG) q[e] = qv[e];
    barrier(CLK_LOCAL_MEM_FENCE);
    attn_decode_head(q, pr, tmp, q, q, -1, kb, k_off, k_nb1, vb, v_off, v_nb1, kt, vt, base, c0, c1, s, ns,
                     attn_parts(part, part_off, t, h, n_head, n_split, hd), LT_PTR(int, cnt, cnt_off) + t * n_head + h,
                     out, h, t, hd, n_head, n_head_kv, scale, softcap, oq, oq_off, ods_off, want_q8);
}

// One token: RoPE on Q and K, the KV-cache writes and attn_decode in one
// launch (rope_qk_kv then attn_decode, fused). The group of query head h
// rotates its head and its K/V head's current key into local memory (as the
// cache holds them: rounded to f16, or to a q8_0 cache's blocks) and reads the
// current cell from there; split 0's first group of each K/V head writes the
// rotated K and the V row to the caches and the rotated K head to dst, split
// 0's group of each head its rotated Q head, for other readers. Cells before
// the current one were written by earlier steps, so no group waits for
// another. Launch: (n_head * LT_RED_WG, n_split).
LT_REDUCTION_ATTR
kernel void attn_decode_rope(const global uchar* qb, ulong q_off, ulong q_nb1,
                             const global uchar* knb, ulong kn_off, ulong kn_nb1,
                             const global uchar* vnb, ulong vn_off,
                             global uchar* rd, ulong rd_off, ulong rd_nb1,
                             const global uchar* ffb, ulong ff_off, int has_ff, const global uchar* ifb, ulong if_off,
                             int n_rot, int neox, float attn_factor,
                             global uchar* kb, ulong k_off, ulong k_nb1,
                             global uchar* vb, ulong v_off, ulong v_nb1, int kt, int vt,
                             const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off,
                             global uchar* d, ulong d_off,
                             int hd, int n_head, int n_head_kv, int n_ctx_seq, int n_cells, float scale, float softcap,
                             int window, global uchar* oq, ulong oq_off, ulong ods_off, int want_q8,
                             global uchar* part, ulong part_off, global uchar* cnt, ulong cnt_off, int n_split,
                             int split_min) {
    local float q[ATT_MAX_HD];
    local float kcur[ATT_MAX_HD];
    local float vcur[ATT_MAX_HD];
    local float pr[LT_RED_WG];
    local float tmp[LT_RED_WG];
    const int h = get_group_id(0);
    const int split = get_group_id(1);
    const int lid = get_local_id(0);
    const int group = n_head / n_head_kv, kvh = h / group;
    const int first = split == 0;
    const int writer = first && h % group == 0;
    const int pos = LT_CPTR(int, posb, pos_off)[0];
    const long cell = (long)LT_CPTR(int, seqb, seq_off)[0] * n_ctx_seq + pos;
    const int stored = pos >= 0 && pos < n_ctx_seq && cell >= 0 && cell < n_cells;  // as kv_store decides
    const global float* ifr = LT_CPTR(float, ifb, if_off);
    const global float* ff = LT_CPTR(float, ffb, ff_off);
    global float* rq = LT_PTR(float, rd, rd_off + h * rd_nb1);
    global float* rk = LT_PTR(float, rd, rd_off + (n_head + kvh) * rd_nb1);
    const global float* vn = LT_CPTR(float, vnb, vn_off) + kvh * hd;
    global uchar* krow = kb + k_off + cell * k_nb1;
    global uchar* vrow = vb + v_off + cell * v_nb1;
    global float* out = LT_PTR(float, d, d_off) + h * hd;
    long base;
    int c0, c1, ns;
    const int work = attn_decode_plan(posb, pos_off, seqb, seq_off, 0, split, n_ctx_seq, n_cells, window, n_split,
                                      split_min, out, h, hd, n_head, oq, oq_off, ods_off, want_q8, &base, &c0, &c1, &ns);
    if (!work && !first) return;  // split 0 writes the rotated rows and the caches in any case
    // The current cell from local memory only where this launch writes it:
    // in the last split's range.
    const long cur = stored ? cell : -1;
    const int own = work && cur >= 0 && base + c1 == cur;
    for (int i = lid; i < hd / 2; i += LT_RED_WG) {
        int2 idx;
        const float2 yq = rope_apply(LT_CPTR(float, qb, q_off + h * q_nb1), i, n_rot, neox, (float)pos, attn_factor,
                                     ifr, ff, has_ff, &idx);
        q[idx.x] = yq.x;
        q[idx.y] = yq.y;
        if (first) {
            rq[idx.x] = yq.x;
            rq[idx.y] = yq.y;
        }
        const float2 yk = rope_apply(LT_CPTR(float, knb, kn_off + kvh * kn_nb1), i, n_rot, neox, (float)pos,
                                     attn_factor, ifr, ff, has_ff, &idx);
        const float2 v2 = (float2)(vn[2 * i], vn[2 * i + 1]);
        const int kh = kt == LT_CACHE_F16, vh = vt == LT_CACHE_F16;
        kcur[idx.x] = kh ? round_to_half(yk.x) : yk.x;
        kcur[idx.y] = kh ? round_to_half(yk.y) : yk.y;
        vcur[2 * i] = vh ? round_to_half(v2.x) : v2.x;
        vcur[2 * i + 1] = vh ? round_to_half(v2.y) : v2.y;
        if (writer) {
            rk[idx.x] = yk.x;
            rk[idx.y] = yk.y;
            if (stored && kt != LT_CACHE_Q8) {
                cache_store(krow, kvh * hd + idx.x, yk.x, kt);
                cache_store(krow, kvh * hd + idx.y, yk.y, kt);
            }
            if (stored && vt != LT_CACHE_Q8) {
                cache_store(vrow, kvh * hd + 2 * i, v2.x, vt);
                cache_store(vrow, kvh * hd + 2 * i + 1, v2.y, vt);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // Q8_0 caches: each block of the head quantized by one work-item, which
    // the writer group also stores; the group reading the current cell reads
    // it back as the cache holds it.
    for (int b = (own || (writer && stored)) ? lid : 2 * (hd / 32); b < 2 * (hd / 32); b += LT_RED_WG) {
        const int is_v = b >= hd / 32, blk = is_v ? b - hd / 32 : b;
        if ((is_v ? vt : kt) != LT_CACHE_Q8) continue;
        local float* cur = (is_v ? vcur : kcur) + blk * 32;
        float v[32];
        for (int j = 0; j < 32; ++j) v[j] = cur[j];
        global uchar* row = is_v ? vrow : krow;
        q8_0_block(v, row + cache_col(kvh, hd, LT_CACHE_Q8) + blk * LT_Q8_BLOCK_BYTES, writer && stored);
        for (int j = 0; j < 32; ++j) cur[j] = v[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // (unconditional: PoCL mishandles some barriers under uniform branches)
    if (!work) return;
    attn_decode_head(q, pr, tmp, kcur, vcur, cur, kb, k_off, k_nb1, vb, v_off, v_nb1, kt, vt, base, c0, c1, split, ns,
                     attn_parts(part, part_off, 0, h, n_head, n_split, hd), LT_PTR(int, cnt, cnt_off) + h, out, h, 0,
                     hd, n_head, n_head_kv, scale, softcap, oq, oq_off, ods_off, want_q8);
}

#define PQ 32   // most queries per work-group (heads of up to 64 values; 16 for wider ones)
#define PQW (PQ / 16)  // most of them per work-item
#define PK 32   // cells per key tile
#define PHD 128 // largest head_dim of the tiled kernel
#define PWG 128

// pqw queries' scores against four cells of a key tile, unscaled, into
// sc[u * PK / 8 + r]: query rows q, q + 16 rows, ..., key rows k, k + 8 rows,
// ... (`stride` float4s apart), n float4s each; each key float4 read once
// for the queries, each query float4 once for the keys.
inline void prefill_scores(const int n, const int pqw, const local float4* q, const local float4* k, const int stride,
                           float* sc) {
    for (int i = 0; i < pqw * PK / 8; ++i) sc[i] = 0.0f;
    for (int c = 0; c < n; ++c) {
        float4 kv[PK / 8];
        for (int r = 0; r < PK / 8; ++r) kv[r] = k[8 * r * stride + c];
        for (int u = 0; u < pqw; ++u) {
            const float4 qv = q[16 * u * stride + c];
            for (int r = 0; r < PK / 8; ++r) sc[u * (PK / 8) + r] += dot(qv, kv[r]);
        }
    }
}

// One (head, tile of pq queries, split) of attn_prefill for heads of at
// most phd values (a multiple of 32, and a constant where the kernels below
// call it: the loops over a row's phd / 4 float4s unroll), hd a multiple
// of 4 (its rows are read in float4s). The local arrays
// are the caller's, in float4s: qs [pq][phd / 4 + 1], ks [PK][phd / 4 + 1],
// vs [PK][phd / 4], ps [pq][PK + 1] floats, red_m / red_l [pq / 16][PWG]. Values past hd are staged as 0.
// Rows of float4s read by 8 work-items side by side: the padded rows of qs
// and ks put a query's / key's float4 c of the 8 in 8 different bank groups.
inline void attn_prefill_tile(const int phd, const int pq, local float4* qs, local float4* ks, local float4* vs, local float* ps,
                              local long* q_first, local long* q_last, local float* red_m, local float* red_l,
                              local long* span, local int* last_group,
                              const global uchar* qb, ulong q_off, ulong q_nb1, ulong q_nb2,
                              const global uchar* kb, ulong k_off, ulong k_nb1,
                              const global uchar* vb, ulong v_off, ulong v_nb1, int kt, int vt,
                              const global uchar* posb, ulong pos_off, const global uchar* seqb, ulong seq_off,
                              global uchar* d, ulong d_off, ulong d_nb1,
                              int hd, int n_head, int n_head_kv, int n_ctx_seq, int n_cells, float scale, float softcap,
                              int window, global uchar* oq, ulong oq_off, ulong ods_off, int want_q8, int T,
                              global uchar* part, ulong part_off, global uchar* cnt, ulong cnt_off, int n_split, int split_min) {
    const int h = get_group_id(0);
    const int pqw = pq / 16;
    const long t0 = (long)get_group_id(1) * pq;
    const int tid = get_local_id(0);
    const int kvh = h / (n_head / n_head_kv);
    const ulong kcol = cache_col(kvh, hd, kt), vcol = cache_col(kvh, hd, vt);

    if (tid < pq) {
        const long t = t0 + tid;
        long base;
        int lo, p;
        if (t < T && attn_range(posb, pos_off, seqb, seq_off, t, n_ctx_seq, n_cells, window, &base, &lo, &p)) {
            q_first[tid] = base + lo;
            q_last[tid] = base + p;
        } else {
            q_first[tid] = 1;  // empty range
            q_last[tid] = 0;
        }
    }
    const int row4 = phd / 4 + 1;  // qs and ks rows, float4s
    for (int e = tid; e < pq * phd; e += PWG) {
        const int qi = e / phd, c = e % phd;
        const long t = t0 + qi;
        ((local float*)qs)[qi * 4 * row4 + c] = t < T && c < hd ? LT_CPTR(float, qb, q_off + h * q_nb1 + t * q_nb2)[c] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        long first = LONG_MAX, last = -1;
        for (int i = 0; i < pq; ++i) {
            if (q_first[i] <= q_last[i]) {
                first = min(first, q_first[i]);
                last = max(last, q_last[i]);
            }
        }
        span[0] = first;
        span[1] = last;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The tile's cells, split s of ns (attn_split, in whole key tiles); a
    // split without cells exits. A tile without cells (past T, outside the
    // cache) is one split, which writes zeros.
    const int s = get_group_id(2);
    long begin = span[0], last = span[1];
    int ns = 1;
    if (last >= begin && n_split > 1) {
        int c0, c1;  // relative to span[0]: a tile's range lies within the cache
        ns = attn_split(0, (int)(span[1] - span[0]), s, n_split, split_min, PK, &c0, &c1);
        begin = span[0] + c0;
        last = span[0] + c1;
    }
    if (s >= ns) return;  // uniform: span[] and s are the group's

    // Output ownership: queries qi + 16u (u < pqw), qi = tid / 8, dimensions
    // 4 dg + 32 c + (0..3); of each key tile their cells dg + 8r. A query's
    // running max m and sum l are kept alike by its 8 work-items, which
    // share a tile's max and sum through red_m / red_l.
    const int qi = tid / 8, dg = tid % 8;
    long f0[PQW], l0[PQW];
    float m[PQW], l[PQW];
    float4 acc[PQW][PHD / 32];
    for (int u = 0; u < pqw; ++u) {
        f0[u] = q_first[qi + 16 * u];
        l0[u] = min(q_last[qi + 16 * u], last);
        m[u] = LT_NEG_BIG;
        l[u] = 0.0f;
        for (int c = 0; c < phd / 32; ++c) acc[u][c] = 0.0f;
    }

    for (long c0 = begin; c0 <= last; c0 += PK) {
        // Stage K and V rows of cells [c0, c0 + PK).
        for (int e = tid; e < PK * phd / 4; e += PWG) {
            const int kj = e / (phd / 4), c4 = e % (phd / 4), c = 4 * c4;
            const long cell = c0 + kj;
            float4 kv = 0.0f, vv = 0.0f;
            if (cell <= last && c < hd) {  // hd is a multiple of 4
                kv = cache_load4(kb + k_off + cell * k_nb1 + kcol, c, kt);
                vv = cache_load4(vb + v_off + cell * v_nb1 + vcol, c, vt);
            }
            ks[kj * row4 + c4] = kv;
            vs[kj * (phd / 4) + c4] = vv;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float sc[PQW * PK / 8];
        prefill_scores(phd / 4, pqw, qs + qi * row4, ks + dg * row4, row4, sc);
        for (int u = 0; u < pqw; ++u) {
            float mx = LT_NEG_BIG;
            for (int r = 0; r < PK / 8; ++r) {
                const long cell = c0 + dg + 8 * r;
                float* x = sc + u * (PK / 8) + r;
                *x = cell >= f0[u] && cell <= l0[u] ? softcap_score(*x * scale, softcap) : LT_NEG_BIG;
                mx = fmax(mx, *x);
            }
            red_m[u * PWG + tid] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float f[PQW];
        for (int u = 0; u < pqw; ++u) {
            float m_new = m[u];
            for (int k = 0; k < 8; ++k) m_new = fmax(m_new, red_m[u * PWG + qi * 8 + k]);
            float sum = 0.0f;
            for (int r = 0; r < PK / 8; ++r) {
                const long cell = c0 + dg + 8 * r;
                const float e = cell >= f0[u] && cell <= l0[u] ? exp(sc[u * (PK / 8) + r] - m_new) : 0.0f;
                ps[(qi + 16 * u) * (PK + 1) + dg + 8 * r] = e;
                sum += e;
            }
            red_l[u * PWG + tid] = sum;
            f[u] = exp(m[u] - m_new);
            m[u] = m_new;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int u = 0; u < pqw; ++u) {
            float tile_sum = 0.0f;
            for (int k = 0; k < 8; ++k) tile_sum += red_l[u * PWG + qi * 8 + k];
            l[u] = l[u] * f[u] + tile_sum;
            for (int c = 0; c < phd / 32; ++c) acc[u][c] *= f[u];
        }
        for (int kj = 0; kj < PK; ++kj) {
            const local float4* v = vs + kj * (phd / 4) + dg;
            float4 vv[PHD / 32];
            for (int c = 0; c < phd / 32; ++c) vv[c] = v[8 * c];
            for (int u = 0; u < pqw; ++u) {
                const float pj = ps[(qi + 16 * u) * (PK + 1) + kj];
                for (int c = 0; c < phd / 32; ++c) acc[u][c] += pj * vv[c];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);  // ks, vs, ps and red_m are rewritten by the next tile
    }

    // Split: each query's partial softmax (m, l, then hd unnormalised sums).
    // The last split of (tile, head) to finish (a counter, set back to 0 by
    // it) adds them up, as attn_decode_head does.
    global float* parts =
        LT_PTR(float, part, part_off) + ((long)get_group_id(1) * n_head + h) * n_split * pq * (PHD + 2);
    if (ns > 1) {
        for (int u = 0; u < pqw; ++u) {
            global float* mine = parts + (s * pq + qi + 16 * u) * (PHD + 2);
            if (dg == 0) {
                mine[0] = m[u];
                mine[1] = l[u];
            }
            for (int c = 0; c < phd / 32; ++c) vstore4(acc[u][c], 0, mine + 2 + 4 * dg + 32 * c);
        }
    }
    // (The barriers unconditional: PoCL mishandles some under uniform branches.)
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        int done = 1;
        if (ns > 1) {
            volatile global int* counter = LT_PTR(int, cnt, cnt_off) + get_group_id(1) * n_head + h;
            done = atomic_inc(counter) == ns - 1;
            if (done) atomic_xchg(counter, 0);
        }
        *last_group = done;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!*last_group) return;
    if (ns > 1) {
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        for (int u = 0; u < pqw; ++u) {
            const volatile global float* pp = parts + (qi + 16 * u) * (PHD + 2);  // volatile: other groups wrote it
            float mx = LT_NEG_BIG;
            for (int k = 0; k < ns; ++k) mx = fmax(mx, pp[k * pq * (PHD + 2)]);
            float lsum = 0.0f;
            for (int c = 0; c < phd / 32; ++c) acc[u][c] = 0.0f;
            for (int k = 0; k < ns; ++k) {
                const volatile global float* pk = pp + k * pq * (PHD + 2);
                const float w = exp(pk[0] - mx);
                lsum += w * pk[1];
                for (int c = 0; c < phd / 32; ++c) {
                    const int col = 4 * dg + 32 * c;
                    acc[u][c] += w * (float4)(pk[2 + col], pk[3 + col], pk[4 + col], pk[5 + col]);
                }
            }
            l[u] = lsum;
        }
    }

    for (int u = 0; u < pqw; ++u) {
        const long t = t0 + qi + 16 * u;
        if (t >= T) continue;
        global float* out = LT_PTR(float, d, d_off + t * d_nb1) + h * hd;
        const float inv = l[u] > 0.0f ? 1.0f / l[u] : 0.0f;
        for (int c = 0; c < phd / 32; ++c) {
            const float a[4] = {acc[u][c].x, acc[u][c].y, acc[u][c].z, acc[u][c].w};
            for (int j = 0; j < 4; ++j) {
                const int col = 4 * dg + 32 * c + j;
                if (col < hd) out[col] = a[j] * inv;
            }
        }
    }
    if (want_q8) {
        barrier(CLK_GLOBAL_MEM_FENCE);
        const int K = hd * n_head;
        for (int e = tid; e < pq * (hd / 32); e += PWG) {
            const int qq = e / (hd / 32), blk = e % (hd / 32);
            const long tt = t0 + qq;
            if (tt >= T) continue;
            const int col = h * hd + blk * 32;
            q8_quantize_block(LT_PTR(float, d, d_off + tt * d_nb1) + col, LT_PTR(char, oq, oq_off + tt * K) + col,
                              LT_PTR(float2, oq, ods_off) + tt * (K / 32) + col / 32);
        }
    }
}

// The tiled kernels, one per largest head width (attn_prefill_tile's phd):
// attn_prefill up to PHD values in tiles of 16 queries, attn_prefill_64 up
// to 64 in tiles of PQ (two queries a work-item: each K/V value staged and
// read from local memory serves twice the queries; at 128 values that many
// would pass NVIDIA's 48 KB of local memory). Launch: (n_head * PWG, tiles,
// n_split).
#define LT_ATTN_PREFILL(name, phd, pq)                                                                                 \
    kernel __attribute__((reqd_work_group_size(PWG, 1, 1))) void name(                                                 \
        const global uchar* qb, ulong q_off, ulong q_nb1, ulong q_nb2, const global uchar* kb, ulong k_off,            \
        ulong k_nb1, const global uchar* vb, ulong v_off, ulong v_nb1, int kt, int vt, const global uchar* posb,       \
        ulong pos_off, const global uchar* seqb, ulong seq_off, global uchar* d, ulong d_off, ulong d_nb1, int hd,     \
        int n_head, int n_head_kv, int n_ctx_seq, int n_cells, float scale, float softcap, int window,                 \
        global uchar* oq, ulong oq_off, ulong ods_off, int want_q8, int T, global uchar* part, ulong part_off,         \
        global uchar* cnt, ulong cnt_off, int n_split, int split_min) {                                                \
        local float4 qs[pq * (phd / 4 + 1)];                                                                           \
        local float4 ks[PK * (phd / 4 + 1)];                                                                           \
        local float4 vs[PK * phd / 4];                                                                                 \
        local float ps[pq * (PK + 1)];                                                                                 \
        local long q_first[pq]; /* absolute cells [q_first, q_last] each query attends to */                           \
        local long q_last[pq];                                                                                         \
        local float red_m[pq / 16 * PWG], red_l[pq / 16 * PWG];                                                        \
        local long span[2];                                                                                            \
        local int last_group;                                                                                          \
        attn_prefill_tile(phd, pq, qs, ks, vs, ps, q_first, q_last, red_m, red_l, span, &last_group, qb, q_off, q_nb1, \
                          q_nb2, kb, k_off, k_nb1, vb, v_off, v_nb1, kt, vt, posb, pos_off, seqb, seq_off, d, d_off,   \
                          d_nb1, hd, n_head, n_head_kv, n_ctx_seq, n_cells, scale, softcap, window, oq, oq_off,        \
                          ods_off, want_q8, T, part, part_off, cnt, cnt_off, n_split, split_min);                      \
    }

LT_ATTN_PREFILL(attn_prefill, PHD, 16)
LT_ATTN_PREFILL(attn_prefill_64, 64, PQ)
