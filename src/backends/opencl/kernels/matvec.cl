// Matrix-vector products for generation: dst[n, m] = sum_k W[k, n] * x[k, m]
// for few activation rows (M <= 8).
//
// A work-group computes 32 weight rows; LT_MV_TPR work-items share a row and
// take its 32-element blocks in turn, so that the work-items of a row read
// neighbouring 16-byte quant payloads (the repacked layout keeps a row's
// payloads contiguous and its scales apart). Partial sums meet in local
// memory. One launch can serve up to three matrices that read the same
// activations (Q, K and V): work-groups are dealt to the matrices in order.
//
// Quantized weights meet 8-bit activations (see common.cl) in exact integer
// block sums, as the CPU computes them; f32/f16/bf16 weights meet f32
// activations. mv_glu_* computes gate and up rows together and writes
// act(gate) * up, with its 8-bit blocks for the down projection.
//
// Kernels: mv_<type>_1 (M = 1), mv_<type>_8 (M <= 8), mv_glu_<type>_<1|8>.

#define MV_R 32
#define MV_WG (MV_R * LT_MV_TPR)

inline float silu_g(float x) { return x / (1.0f + exp(-x)); }
inline float gelu_g(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (2.0f - 2.0f / (exp(2.0f * u) + 1.0f));
}

// Picks matrix (w, qs, ...) of work-group g among three; g becomes the
// group's index within its matrix.
#define MV_PICK(g)                                                                   \
    const int g0_ = (n0 + MV_R - 1) / MV_R, g1_ = (n1 + MV_R - 1) / MV_R;            \
    const global uchar* w = w0;                                                      \
    ulong qs = qs0, qh = qh0, sc = sc0, o = o0, st = st0;                            \
    global uchar* d = d0;                                                            \
    int n = n0;                                                                      \
    if (g >= g0_ + g1_) {                                                            \
        g -= g0_ + g1_;                                                              \
        w = w2; qs = qs2; qh = qh2; sc = sc2; d = d2; o = o2; st = st2; n = n2;      \
    } else if (g >= g0_) {                                                           \
        g -= g0_;                                                                    \
        w = w1; qs = qs1; qh = qh1; sc = sc1; d = d1; o = o1; st = st1; n = n1;      \
    }

#define MV_MATRIX_ARGS(i) \
    const global uchar *w##i, ulong qs##i, ulong qh##i, ulong sc##i, global uchar *d##i, ulong o##i, ulong st##i, int n##i

// Sums the LT_MV_TPR partials of each row and stores row `row` of output m
// at d + o + m * st.
#define MV_REDUCE_STORE(MAXM, acc, red, d, o, st)                                      \
    for (int m = 0; m < MAXM; ++m) red[m * MV_WG + lid] = acc[m];                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    if (lane == 0 && row < n) {                                                        \
        for (int m = 0; m < MAXM && m < M; ++m) {                                      \
            float s = 0.0f;                                                            \
            for (int l = 0; l < LT_MV_TPR; ++l) s += red[m * MV_WG + r * LT_MV_TPR + l]; \
            LT_PTR(float, d, o + m * st)[row] = s;                                     \
        }                                                                              \
    }

// ---- quantized weights x 8-bit activations ---------------------------------------------

#define LT_MV_Q8(T, MAXM)                                                                          \
    kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1))) void mv_##T##_##MAXM(                  \
        MV_MATRIX_ARGS(0), MV_MATRIX_ARGS(1), MV_MATRIX_ARGS(2), const global uchar* act, ulong aq_off, \
        ulong ads_off, int K, int M) {                                                               \
        local float red[MAXM * MV_WG];                                                               \
        const int lid = get_local_id(0), r = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;                \
        int g = get_group_id(0);                                                                     \
        MV_PICK(g)                                                                                   \
        const int row = g * MV_R + r;                                                                \
        const int nb = K / 32;                                                                       \
        float acc[MAXM];                                                                             \
        for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;                                                \
        if (row < n) {                                                                               \
            const global uchar* wqs = w + qs;                                                        \
            const global uint* wqh = LT_CPTR(uint, w, qh);                                           \
            const global ushort* wsc = LT_CPTR(ushort, w, sc);                                       \
            const global uint* aq = LT_CPTR(uint, act, aq_off);                                      \
            const global float2* ads = LT_CPTR(float2, act, ads_off);                                \
            const size_t i0 = (size_t)row * nb;                                                      \
            for (int b = lane; b < nb; b += LT_MV_TPR) {                                             \
                for (int m = 0; m < MAXM; ++m) {                                                     \
                    if (m < M) acc[m] += wdot_##T(wqs, wqh, wsc, i0 + b, aq + (m * K + b * 32) / 4,   \
                                                  ads[m * nb + b]);                                  \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        MV_REDUCE_STORE(MAXM, acc, red, d, o, st)                                                    \
    }

#define LT_MV_GLU(T, MAXM)                                                                         \
    kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1))) void mv_glu_##T##_##MAXM(              \
        const global uchar* wg, ulong gqs, ulong gqh, ulong gsc, const global uchar* wu, ulong uqs,  \
        ulong uqh, ulong usc, const global uchar* act, ulong aq_off, ulong ads_off, global uchar* go, \
        ulong go_off, ulong go_st, global uchar* uo, ulong uo_off, ulong uo_st, global uchar* ho,      \
        ulong ho_off, ulong ho_st, int n, int K, int M, int gelu, global uchar* hq, ulong hq_off,     \
        ulong hds_off, int want_q8) {                                                                \
        local float red_g[MAXM * MV_WG];                                                             \
        local float red_u[MAXM * MV_WG];                                                             \
        const int lid = get_local_id(0), r = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;                \
        const int g = get_group_id(0);                                                               \
        const int row = g * MV_R + r;                                                                \
        const int nb = K / 32;                                                                       \
        float ag[MAXM], au[MAXM];                                                                    \
        for (int m = 0; m < MAXM; ++m) ag[m] = au[m] = 0.0f;                                         \
        if (row < n) {                                                                               \
            const global uint* aq = LT_CPTR(uint, act, aq_off);                                      \
            const global float2* ads = LT_CPTR(float2, act, ads_off);                                \
            const size_t i0 = (size_t)row * nb;                                                      \
            for (int b = lane; b < nb; b += LT_MV_TPR) {                                             \
                for (int m = 0; m < MAXM; ++m) {                                                     \
                    if (m < M) {                                                                     \
                        const global uint* a = aq + (m * K + b * 32) / 4;                            \
                        const float2 s = ads[m * nb + b];                                            \
                        ag[m] += wdot_##T(wg + gqs, LT_CPTR(uint, wg, gqh), LT_CPTR(ushort, wg, gsc), i0 + b, a, s); \
                        au[m] += wdot_##T(wu + uqs, LT_CPTR(uint, wu, uqh), LT_CPTR(ushort, wu, usc), i0 + b, a, s); \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        for (int m = 0; m < MAXM; ++m) {                                                             \
            red_g[m * MV_WG + lid] = ag[m];                                                          \
            red_u[m * MV_WG + lid] = au[m];                                                          \
        }                                                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
        if (lane == 0 && row < n) {                                                                  \
            for (int m = 0; m < MAXM && m < M; ++m) {                                                \
                float sg = 0.0f, su = 0.0f;                                                          \
                for (int l = 0; l < LT_MV_TPR; ++l) {                                                \
                    sg += red_g[m * MV_WG + r * LT_MV_TPR + l];                                      \
                    su += red_u[m * MV_WG + r * LT_MV_TPR + l];                                      \
                }                                                                                    \
                LT_PTR(float, go, go_off + m * go_st)[row] = sg;                                     \
                LT_PTR(float, uo, uo_off + m * uo_st)[row] = su;                                     \
                LT_PTR(float, ho, ho_off + m * ho_st)[row] = (gelu ? gelu_g(sg) : silu_g(sg)) * su;  \
            }                                                                                        \
        }                                                                                            \
        if (want_q8) {                                                                               \
            barrier(CLK_GLOBAL_MEM_FENCE);                                                           \
            if (lid < M) {                                                                           \
                q8_quantize_block(LT_PTR(float, ho, ho_off + lid * ho_st) + g * 32,                   \
                                  LT_PTR(char, hq, hq_off + lid * n) + g * 32,                       \
                                  LT_PTR(float2, hq, hds_off) + lid * (n / 32) + g);                 \
            }                                                                                        \
        }                                                                                            \
    }

#define LT_MV_ALL(T) LT_MV_Q8(T, 1) LT_MV_Q8(T, 8) LT_MV_GLU(T, 1) LT_MV_GLU(T, 8)
LT_MV_ALL(q4_0)
LT_MV_ALL(q4_1)
LT_MV_ALL(q5_0)
LT_MV_ALL(q5_1)
LT_MV_ALL(q8_0)

// ---- f32 / f16 / bf16 weights x f32 activations -----------------------------------------

inline float4 wload4_f32(const global uchar* row, int e) { return vload4(0, (const global float*)row + e); }
inline float4 wload4_f16(const global uchar* row, int e) { return vload_half4(0, (const global half*)row + e); }
inline float4 wload4_bf16(const global uchar* row, int e) {
    const ushort4 u = vload4(0, (const global ushort*)row + e);
    return (float4)(bf16_to_f32(u.x), bf16_to_f32(u.y), bf16_to_f32(u.z), bf16_to_f32(u.w));
}
inline float wload1_f32(const global uchar* row, int e) { return ((const global float*)row)[e]; }
inline float wload1_f16(const global uchar* row, int e) { return vload_half(e, (const global half*)row); }
inline float wload1_bf16(const global uchar* row, int e) { return bf16_to_f32(((const global ushort*)row)[e]); }

// Here qs is the offset of the matrix and qh its row stride in bytes (sc unused).
#define LT_MV_F(T, MAXM)                                                                           \
    kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1))) void mv_##T##_##MAXM(                  \
        MV_MATRIX_ARGS(0), MV_MATRIX_ARGS(1), MV_MATRIX_ARGS(2), const global uchar* act, ulong a_off, \
        ulong a_nb1, int K, int M) {                                                                 \
        local float red[MAXM * MV_WG];                                                               \
        const int lid = get_local_id(0), r = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;                \
        int g = get_group_id(0);                                                                     \
        MV_PICK(g)                                                                                   \
        const int row = g * MV_R + r;                                                                \
        float acc[MAXM];                                                                             \
        for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;                                                \
        if (row < n) {                                                                               \
            const global uchar* wr = w + qs + (ulong)row * qh;                                       \
            int e = 4 * lane;                                                                        \
            for (; e + 4 <= K; e += 4 * LT_MV_TPR) {                                                 \
                const float4 wv = wload4_##T(wr, e);                                                 \
                for (int m = 0; m < MAXM; ++m) {                                                     \
                    if (m < M) {                                                                     \
                        const float4 x = vload4(0, LT_CPTR(float, act, a_off + m * a_nb1) + e);       \
                        acc[m] += dot(wv, x);                                                        \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
            if (lane == 0) {                                                                         \
                for (int t = K & ~3; t < K; ++t) {                                                   \
                    for (int m = 0; m < MAXM; ++m) {                                                 \
                        if (m < M) acc[m] += wload1_##T(wr, t) * LT_CPTR(float, act, a_off + m * a_nb1)[t]; \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        MV_REDUCE_STORE(MAXM, acc, red, d, o, st)                                                    \
    }

LT_MV_F(f32, 1)
LT_MV_F(f32, 8)
LT_MV_F(f16, 1)
LT_MV_F(f16, 8)
LT_MV_F(bf16, 1)
LT_MV_F(bf16, 8)
