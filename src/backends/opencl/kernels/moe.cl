// Mixture-of-experts feed-forward (Op::MoeFfn), in launches that read the
// routing from device memory (a recorded step replays whatever experts the
// next token picks):
//   moe_route         a group per token: router logits (plain rows), softmax,
//                     the k largest (ties to the lower index), their weights
//   moe_up_T          per (token, slot) pair: silu(gate . x) * (up . x) for
//                     every hidden row of the slot's expert
//   moe_down_T        per token: each output row's down rows of its slots .
//                     hidden, added by weight in slot order
// Quantized experts (T a block-32 type) meet 8-bit activations (the token's
// row, then the hidden rows quantized by quantize_q8) in exact integer block
// sums, as the matrix-vector kernels do; plain ones (moe_*_plain) f32 rows.
// Rows are taken as in matvec.cl: LT_MV_TPR work-items per row take its
// blocks in turn, LT_MV_WG / LT_MV_TPR rows per group.
//
// ids and weights: k ints and k floats per token.

#define MOE_MAX_E 1024
#define MOE_SLOTS (LT_MV_WG / LT_MV_TPR)

// Sums v over each row slot's work-items (all of the group call it); lane 0
// of the slot gets the total.
#if LT_NV_PTX && LT_MV_TPR == 32
#define MOE_SLOT_SUM(v, red) v = warp_sum32(v);
#else
#define MOE_SLOT_SUM(v, red)                                         \
    red[lid] = v;                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                    \
    for (int h_ = LT_MV_TPR / 2; h_ > 0; h_ >>= 1) {                 \
        if (lane < h_) red[lid] += red[lid + h_];                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                \
    }                                                                \
    v = red[lid];                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

inline float moe_silu(float x) { return x / (1.0f + exp(-x)); }

// Launch: global (LT_RED_WG, T), groups of LT_RED_WG.
kernel void moe_route(const global uchar* x, ulong x_off, ulong x_nb1, const global uchar* r, ulong r_off,
                      ulong r_nb1, int r_type, int D, int E, int k, int norm, global uchar* out, ulong ids_off,
                      ulong w_off) {
    local float logits[MOE_MAX_E];
    local float tmp[LT_RED_WG];
    const int t = get_group_id(1), lid = get_local_id(0);
    const global float* xr = LT_CPTR(float, x, x_off + (ulong)t * x_nb1);
    for (int e = 0; e < E; ++e) {
        const global uchar* row = r + r_off + (ulong)e * r_nb1;
        float s = 0.0f;
        for (int i = lid; i < D; i += LT_RED_WG) s += xr[i] * load_plain(row, i, r_type);
        s = wg_sum(s, tmp);
        if (lid == 0) logits[e] = s;
    }
    if (lid != 0) return;
    float m = logits[0];
    for (int e = 1; e < E; ++e) m = fmax(m, logits[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) {
        logits[e] = exp(logits[e] - m);
        sum += logits[e];
    }
    global int* ids = LT_PTR(int, out, ids_off) + t * k;
    global float* wts = LT_PTR(float, out, w_off) + t * k;
    float total = 0.0f;
    for (int j = 0; j < k; ++j) {
        int best = 0;  // every logit is >= 0 but the taken ones (-1)
        for (int e = 1; e < E; ++e) {
            if (logits[e] > logits[best]) best = e;
        }
        ids[j] = best;
        wts[j] = logits[best] / sum;
        total += wts[j];
        logits[best] = -1.0f;  // taken
    }
    if (norm) {
        for (int j = 0; j < k; ++j) wts[j] /= total;
    }
}

// Launch: global (ceil(F / MOE_SLOTS) * LT_MV_WG, P), groups of LT_MV_WG.
#define LT_MOE_UP(T)                                                                                    \
    kernel __attribute__((reqd_work_group_size(LT_MV_WG, 1, 1))) void moe_up_##T(                      \
        const global uchar* wg, ulong gqs, ulong gqh, ulong gsc, const global uchar* wu, ulong uqs,     \
        ulong uqh, ulong usc, const global uchar* act, ulong aq_off, ulong ads_off, const global uchar* rb, \
        ulong ids_off, int D, int F, int k, global uchar* h, ulong h_off) {                            \
        local float red[LT_MV_WG];                                                                      \
        const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;               \
        const int p = get_group_id(1), row = get_group_id(0) * MOE_SLOTS + slot, nb = D / 32;          \
        const int e = LT_CPTR(int, rb, ids_off)[p];                                                     \
        const global uchar* aq = act + aq_off + (size_t)(p / k) * D;                                    \
        const global float2* ads = LT_CPTR(float2, act, ads_off) + (size_t)(p / k) * nb;               \
        const size_t r0 = ((size_t)e * F + min(row, F - 1)) * nb;                                       \
        float sg = 0.0f, su = 0.0f;                                                                     \
        for (int b = lane; b < nb; b += LT_MV_TPR) {                                                    \
            const global uint4* a_ = (const global uint4*)(aq + (size_t)b * 32);                       \
            const uint4 a0 = a_[0], a1 = a_[1];                                                         \
            const float2 s = ads[b];                                                                    \
            sg += wdot_##T(wg + gqs, LT_CPTR(uint, wg, gqh), LT_CPTR(ushort, wg, gsc), r0 + b, a0, a1, s); \
            su += wdot_##T(wu + uqs, LT_CPTR(uint, wu, uqh), LT_CPTR(ushort, wu, usc), r0 + b, a0, a1, s); \
        }                                                                                               \
        MOE_SLOT_SUM(sg, red)                                                                           \
        MOE_SLOT_SUM(su, red)                                                                           \
        if (lane == 0 && row < F) LT_PTR(float, h, h_off)[(size_t)p * F + row] = moe_silu(sg) * su;    \
    }

// Launch: global (ceil(D / MOE_SLOTS) * LT_MV_WG, T), groups of LT_MV_WG.
#define LT_MOE_DOWN(T)                                                                                  \
    kernel __attribute__((reqd_work_group_size(LT_MV_WG, 1, 1))) void moe_down_##T(                    \
        const global uchar* w, ulong qs, ulong qh, ulong sc, const global uchar* act, ulong aq_off,     \
        ulong ads_off, const global uchar* rb, ulong ids_off, ulong w_off, int D, int F, int k,        \
        global uchar* y, ulong y_off, ulong y_nb1) {                                                    \
        local float red[LT_MV_WG];                                                                      \
        const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;               \
        const int t = get_group_id(1), row = get_group_id(0) * MOE_SLOTS + slot, nb = F / 32;          \
        float acc = 0.0f;                                                                               \
        for (int j = 0; j < k; ++j) {                                                                   \
            const int p = t * k + j;                                                                    \
            const int e = LT_CPTR(int, rb, ids_off)[p];                                                 \
            const global uchar* aq = act + aq_off + (size_t)p * F;                                      \
            const global float2* ads = LT_CPTR(float2, act, ads_off) + (size_t)p * nb;                 \
            const size_t r0 = ((size_t)e * D + min(row, D - 1)) * nb;                                   \
            float s = 0.0f;                                                                             \
            for (int b = lane; b < nb; b += LT_MV_TPR) {                                                \
                const global uint4* a_ = (const global uint4*)(aq + (size_t)b * 32);                   \
                s += wdot_##T(w + qs, LT_CPTR(uint, w, qh), LT_CPTR(ushort, w, sc), r0 + b, a_[0], a_[1], ads[b]); \
            }                                                                                           \
            acc += LT_CPTR(float, rb, w_off)[p] * s;                                                    \
        }                                                                                               \
        MOE_SLOT_SUM(acc, red)                                                                          \
        if (lane == 0 && row < D) LT_PTR(float, y, y_off + (ulong)t * y_nb1)[row] = acc;                \
    }

LT_MOE_UP(q4_0)
LT_MOE_UP(q4_1)
LT_MOE_UP(q5_0)
LT_MOE_UP(q5_1)
LT_MOE_UP(q8_0)
LT_MOE_UP(q2_K)
LT_MOE_UP(q3_K)
LT_MOE_UP(q4_K)
LT_MOE_UP(q5_K)
LT_MOE_UP(q6_K)
LT_MOE_UP(iq4_nl)
LT_MOE_UP(iq4_xs)
LT_MOE_DOWN(q4_0)
LT_MOE_DOWN(q4_1)
LT_MOE_DOWN(q5_0)
LT_MOE_DOWN(q5_1)
LT_MOE_DOWN(q8_0)
LT_MOE_DOWN(q2_K)
LT_MOE_DOWN(q3_K)
LT_MOE_DOWN(q4_K)
LT_MOE_DOWN(q5_K)
LT_MOE_DOWN(q6_K)
LT_MOE_DOWN(iq4_nl)
LT_MOE_DOWN(iq4_xs)

// Plain experts (f32, f16, bf16: DType ids as load_plain takes them), rows
// nb1 bytes apart and the experts contiguous; f32 activations.
kernel __attribute__((reqd_work_group_size(LT_MV_WG, 1, 1))) void moe_up_plain(
    const global uchar* wg, ulong g_off, ulong g_nb1, int g_type, const global uchar* wu, ulong u_off, ulong u_nb1,
    int u_type, const global uchar* x, ulong x_off, ulong x_nb1, const global uchar* rb, ulong ids_off, int D, int F,
    int k, global uchar* h, ulong h_off) {
    local float red[LT_MV_WG];
    const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;
    const int p = get_group_id(1), row = get_group_id(0) * MOE_SLOTS + slot;
    const int e = LT_CPTR(int, rb, ids_off)[p];
    const global float* xr = LT_CPTR(float, x, x_off + (ulong)(p / k) * x_nb1);
    const ulong r = (ulong)e * F + min(row, F - 1);
    const global uchar* gr = wg + g_off + r * g_nb1;
    const global uchar* ur = wu + u_off + r * u_nb1;
    float sg = 0.0f, su = 0.0f;
    for (int i = lane; i < D; i += LT_MV_TPR) {
        sg += xr[i] * load_plain(gr, i, g_type);
        su += xr[i] * load_plain(ur, i, u_type);
    }
    MOE_SLOT_SUM(sg, red)
    MOE_SLOT_SUM(su, red)
    if (lane == 0 && row < F) LT_PTR(float, h, h_off)[(size_t)p * F + row] = moe_silu(sg) * su;
}

kernel __attribute__((reqd_work_group_size(LT_MV_WG, 1, 1))) void moe_down_plain(
    const global uchar* w, ulong w_off0, ulong w_nb1, int w_type, const global uchar* hb, ulong h_off,
    const global uchar* rb, ulong ids_off, ulong wt_off, int D, int F, int k, global uchar* y, ulong y_off,
    ulong y_nb1) {
    local float red[LT_MV_WG];
    const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;
    const int t = get_group_id(1), row = get_group_id(0) * MOE_SLOTS + slot;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
        const int p = t * k + j;
        const int e = LT_CPTR(int, rb, ids_off)[p];
        const global float* hr = LT_CPTR(float, hb, h_off) + (size_t)p * F;
        const global uchar* wr = w + w_off0 + ((ulong)e * D + min(row, D - 1)) * w_nb1;
        float s = 0.0f;
        for (int i = lane; i < F; i += LT_MV_TPR) s += hr[i] * load_plain(wr, i, w_type);
        acc += LT_CPTR(float, rb, wt_off)[p] * s;
    }
    MOE_SLOT_SUM(acc, red)
    if (lane == 0 && row < D) LT_PTR(float, y, y_off + (ulong)t * y_nb1)[row] = acc;
}
