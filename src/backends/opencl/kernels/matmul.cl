// Tiled matrix-matrix products for prompt processing:
// dst[n, m] = sum_k W[k, n] * x[k, m], output tiles of 64 weight rows x 64
// activation rows per work-group of 256 (16 x 16 work-items, 4 x 4 outputs
// each, rows n = tn + 16 i and m = tm + 16 j so that local reads spread over
// the banks).
//
// mm_<quantized type>: per 32-element block, the weights' quants (as signed
// bytes) and the 8-bit activations are staged in local memory; each output
// takes the integer block sum and adds it times d_w * d_a (plus m_w * d_a *
// sum_a for Q4_1/Q5_1 and the K-quants' mins), as the CPU does. Q2_K, Q3_K
// and Q6_K have a scale per group of 16: their steps are the groups.
// mm_<f32|f16|bf16>: weights widened to f32, 16 columns of k per step.
//
// Launch: global (16 * 16 * ceil(N / 64), ceil(M / 64)), local (256).

#define MM_T 64
#define MM_WORDS 8   // 32 int8 per block row
#define MM_PAD 9

#define LT_MM_Q8(T, H)                                                                              \
    kernel __attribute__((reqd_work_group_size(256, 1, 1))) void mm_##T(                             \
        const global uchar* w, ulong qs_off, ulong qh_off, ulong sc_off, const global uchar* act,     \
        ulong aq_off, ulong ads_off, global uchar* d, ulong d_off, ulong d_nb1, int N, int K, int M) {  \
        local uint lw[MM_T * MM_PAD];                                                                 \
        local uint la[MM_T * MM_PAD];                                                                 \
        local float lwd[MM_T], lwm[MM_T], lad[MM_T], las[MM_T];                                       \
        const int tid = get_local_id(0), tn = tid % 16, tm = tid / 16;                                \
        const int n0 = get_group_id(0) * MM_T, m0 = get_group_id(1) * MM_T;                           \
        const int nb = K / 32;                                                                        \
        const global uchar* wqs = w + qs_off;                                                         \
        const global uint* wqh = LT_CPTR(uint, w, qh_off);                                            \
        const global ushort* wsc = LT_CPTR(ushort, w, sc_off);                                        \
        const global uint* aq = LT_CPTR(uint, act, aq_off);                                           \
        const global float2* ads = LT_CPTR(float2, act, ads_off);                                     \
        float acc[4][4];                                                                              \
        for (int i = 0; i < 4; ++i)                                                                   \
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;                                             \
        /* Steps of a block (H = 1) or of a group of 16 (H = 2: a scale each). */                    \
        for (int st = 0; st < nb * (H); ++st) {                                                       \
            const int b = st / (H), h = st % (H), w0 = h * MM_WORDS / (H);                            \
            for (int e = tid; e < MM_T * MM_WORDS / (H); e += 256) {                                  \
                const int rr = e / (MM_WORDS / (H)), k = e % (MM_WORDS / (H));                        \
                const int n = n0 + rr, m = m0 + rr;                                                   \
                lw[rr * MM_PAD + k] = n < N ? wword_##T(wqs, wqh, (size_t)n * nb + b, w0 + k) : 0u;   \
                la[rr * MM_PAD + k] = m < M ? aq[((size_t)m * K + b * 32) / 4 + w0 + k] : 0u;         \
            }                                                                                         \
            if (tid < MM_T) {                                                                         \
                const int n = n0 + tid;                                                               \
                const float2 dm = n < N ? wscaleh_##T(wsc, (size_t)n * nb + b, h) : (float2)(0.0f, 0.0f); \
                lwd[tid] = dm.x;                                                                      \
                lwm[tid] = dm.y;                                                                      \
            } else if (tid < 2 * MM_T) {                                                              \
                const int m = m0 + tid - MM_T;                                                        \
                float2 s = m < M ? ads[(size_t)m * nb + b] : (float2)(0.0f, 0.0f);                    \
                if ((H) == 2 && m < M) {                                                              \
                    /* The group's own sum of quants (for the min term). */                           \
                    const global uint* a4 = aq + ((size_t)m * K + b * 32) / 4 + w0;                   \
                    int t = 0;                                                                        \
                    for (int k = 0; k < 4; ++k) t = dot4_ss(0x01010101u, a4[k], t);                   \
                    s.y = (float)t;                                                                   \
                }                                                                                     \
                lad[tid - MM_T] = s.x;                                                                \
                las[tid - MM_T] = s.x * s.y;                                                          \
            }                                                                                         \
            barrier(CLK_LOCAL_MEM_FENCE);                                                             \
            int isum[4][4];                                                                           \
            for (int i = 0; i < 4; ++i)                                                               \
                for (int j = 0; j < 4; ++j) isum[i][j] = 0;                                           \
            for (int k = 0; k < MM_WORDS / (H); ++k) {                                                \
                uint wv[4], av[4];                                                                    \
                for (int i = 0; i < 4; ++i) wv[i] = lw[(tn + 16 * i) * MM_PAD + k];                   \
                for (int j = 0; j < 4; ++j) av[j] = la[(tm + 16 * j) * MM_PAD + k];                   \
                for (int i = 0; i < 4; ++i)                                                           \
                    for (int j = 0; j < 4; ++j) isum[i][j] = dot4_ss(wv[i], av[j], isum[i][j]);       \
            }                                                                                         \
            for (int i = 0; i < 4; ++i) {                                                             \
                const float wd = lwd[tn + 16 * i], wm = lwm[tn + 16 * i];                             \
                for (int j = 0; j < 4; ++j) {                                                         \
                    acc[i][j] += (float)isum[i][j] * (wd * lad[tm + 16 * j]) + wm * las[tm + 16 * j];  \
                }                                                                                     \
            }                                                                                         \
            barrier(CLK_LOCAL_MEM_FENCE);                                                             \
        }                                                                                             \
        for (int j = 0; j < 4; ++j) {                                                                 \
            const int m = m0 + tm + 16 * j;                                                           \
            if (m >= M) continue;                                                                     \
            global float* out = LT_PTR(float, d, d_off + (ulong)m * d_nb1);                           \
            for (int i = 0; i < 4; ++i) {                                                             \
                const int n = n0 + tn + 16 * i;                                                       \
                if (n < N) out[n] = acc[i][j];                                                        \
            }                                                                                         \
        }                                                                                             \
    }

LT_MM_Q8(q4_0, 1)
LT_MM_Q8(q4_1, 1)
LT_MM_Q8(q5_0, 1)
LT_MM_Q8(q5_1, 1)
LT_MM_Q8(q8_0, 1)
LT_MM_Q8(q2_K, 2)
LT_MM_Q8(q3_K, 2)
LT_MM_Q8(q4_K, 1)
LT_MM_Q8(q5_K, 1)
LT_MM_Q8(q6_K, 2)
LT_MM_Q8(iq4_nl, 1)
LT_MM_Q8(iq4_xs, 1)

// ---- f32 / f16 / bf16 weights -----------------------------------------------------------

#define MM_KF 16

inline float wload_plain(const global uchar* row, int e, int type) { return load_plain(row, e, type); }

// w_nb1: bytes per weight row; type: DType id (0, 1, 30).
kernel __attribute__((reqd_work_group_size(256, 1, 1))) void mm_plain(
    const global uchar* w, ulong w_off, ulong w_nb1, int type, const global uchar* act, ulong a_off, ulong a_nb1,
    global uchar* d, ulong d_off, ulong d_nb1, int N, int K, int M) {
    local float lw[MM_T * (MM_KF + 1)];
    local float la[MM_T * (MM_KF + 1)];
    const int tid = get_local_id(0), tn = tid % 16, tm = tid / 16;
    const int n0 = get_group_id(0) * MM_T, m0 = get_group_id(1) * MM_T;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += MM_KF) {
        for (int e = tid; e < MM_T * MM_KF; e += 256) {
            const int rr = e / MM_KF, k = e % MM_KF;
            const int n = n0 + rr, m = m0 + rr, kk = k0 + k;
            lw[rr * (MM_KF + 1) + k] = (n < N && kk < K) ? load_plain(w + w_off + (ulong)n * w_nb1, kk, type) : 0.0f;
            la[rr * (MM_KF + 1) + k] = (m < M && kk < K) ? LT_CPTR(float, act, a_off + (ulong)m * a_nb1)[kk] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < MM_KF; ++k) {
            float wv[4], av[4];
            for (int i = 0; i < 4; ++i) wv[i] = lw[(tn + 16 * i) * (MM_KF + 1) + k];
            for (int j = 0; j < 4; ++j) av[j] = la[(tm + 16 * j) * (MM_KF + 1) + k];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fma(wv[i], av[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < 4; ++j) {
        const int m = m0 + tm + 16 * j;
        if (m >= M) continue;
        global float* out = LT_PTR(float, d, d_off + (ulong)m * d_nb1);
        for (int i = 0; i < 4; ++i) {
            const int n = n0 + tn + 16 * i;
            if (n < N) out[n] = acc[i][j];
        }
    }
}
