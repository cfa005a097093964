// Tensor-core matrix products for prompt processing on NVIDIA devices, through
// inline PTX: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 computes one
// 16 x 8 tile of exact integer block sums per 32-element block, which is
// then scaled by d_w * d_a (plus m_w * d_a * sum_a), as the CPU does.
//
// A work-group of 4 warps computes 128 weight rows x 64 activation rows;
// warp (wn, wm) owns 64 x 32 of it: 4 x 4 mma tiles. Two blocks (64 of k)
// are staged per step in local memory, rows padded to 12 words so that the
// fragment reads (lane = 4 * g + t reads word t of row g) hit distinct banks.
//
// Fragment layout (PTX ISA, mma.m16n8k32 with .s8): g = lane / 4, t = lane % 4;
// A (16 x 32, row-major): reg0 = row g, k 4t..4t+3; reg1 = row g + 8, same k;
// reg2/reg3 = the same rows at k + 16. B (32 x 8): reg0 = column g, k 4t..4t+3;
// reg1 = k + 16. C: c0, c1 = row g, columns 2t, 2t + 1; c2, c3 = row g + 8.
//
// LT_MMA_EMULATE builds the same kernel with the mma done through local
// memory by the documented layout, so the tiling can be tested on any device.
//
// Launch: global (128 * ceil(N / 128), ceil(M / 64)), local (128).

#define NV_BN 128
#define NV_BM 64
#define NV_KB 2
#define NV_S 12

#if LT_MMA_EMULATE
inline int4 mma_s8(uint4 a, uint2 b, local uint* scratch) {
    const int lid = get_local_id(0), lane = lid % 32;
    local uint* frag = scratch + (lid / 32) * 32 * 6;
    frag[lane * 6 + 0] = a.x;
    frag[lane * 6 + 1] = a.y;
    frag[lane * 6 + 2] = a.z;
    frag[lane * 6 + 3] = a.w;
    frag[lane * 6 + 4] = b.x;
    frag[lane * 6 + 5] = b.y;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane / 4, t = lane % 4;
    int c[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        int s = 0;
        for (int k = 0; k < 32; ++k) {
            const int la = (row % 8) * 4 + (k % 16) / 4;
            const int ra = (row >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0);
            const int lb = col * 4 + (k % 16) / 4;
            const int rb = k >= 16 ? 1 : 0;
            const int av = (int)(char)(uchar)((frag[la * 6 + ra] >> (8 * (k % 4))) & 0xFFu);
            const int bv = (int)(char)(uchar)((frag[lb * 6 + 4 + rb] >> (8 * (k % 4))) & 0xFFu);
            s += av * bv;
        }
        c[e] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return (int4)(c[0], c[1], c[2], c[3]);
}
#define MMA(a, b) mma_s8(a, b, emul)
#else
inline int4 mma_s8(uint4 a, uint2 b) {
    int c0, c1, c2, c3;
    __asm__("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(c0), "=r"(c1), "=r"(c2), "=r"(c3)
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(0), "r"(0), "r"(0), "r"(0));
    return (int4)(c0, c1, c2, c3);
}
#define MMA(a, b) mma_s8(a, b)
#endif

// Exact int -> float for |x| < 2^22 without the conversion unit.
inline float int_to_float_small(int x) { return as_float(x + 0x4B400000) - 12582912.0f; }

#define LT_MM_NV(T)                                                                                  \
    kernel __attribute__((reqd_work_group_size(128, 1, 1))) void mm_nv_##T(                            \
        const global uchar* w, ulong qs_off, ulong qh_off, ulong sc_off, const global uchar* act,      \
        ulong aq_off, ulong ads_off, global uchar* d, ulong d_off, ulong d_nb1, int N, int K, int M) {   \
        local uint lw[NV_KB * NV_BN * NV_S];                                                           \
        local uint la[NV_KB * NV_BM * NV_S];                                                           \
        local float lwd[NV_KB * NV_BN], lwm[NV_KB * NV_BN], lad[NV_KB * NV_BM], las[NV_KB * NV_BM];    \
        MM_NV_EMUL_SCRATCH                                                                             \
        const int tid = get_local_id(0), lane = tid % 32, warp = tid / 32;                             \
        const int g = lane / 4, t4 = lane % 4;                                                         \
        const int wn = (warp % 2) * 64, wm = (warp / 2) * 32;                                          \
        const int n0 = get_group_id(0) * NV_BN, m0 = get_group_id(1) * NV_BM;                          \
        const int nb = K / 32;                                                                         \
        const global uchar* wqs = w + qs_off;                                                          \
        const global uint* wqh = LT_CPTR(uint, w, qh_off);                                             \
        const global ushort* wsc = LT_CPTR(ushort, w, sc_off);                                         \
        const global uint4* aq = LT_CPTR(uint4, act, aq_off);                                          \
        const global float2* ads = LT_CPTR(float2, act, ads_off);                                      \
        float acc[4][4][4];                                                                            \
        for (int i = 0; i < 4; ++i)                                                                    \
            for (int j = 0; j < 4; ++j)                                                                \
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;                                       \
        for (int b0 = 0; b0 < nb; b0 += NV_KB) {                                                       \
            /* Stage: work-item tid takes weight row tid of both blocks, and */                        \
            /* activation row tid % 64 of block tid / 64. */                                           \
            {                                                                                          \
                const int n = n0 + tid;                                                                \
                for (int kb = 0; kb < NV_KB; ++kb) {                                                   \
                    const int b = b0 + kb;                                                             \
                    uint words[8];                                                                     \
                    float2 dm = (float2)(0.0f, 0.0f);                                                  \
                    if (n < N && b < nb) {                                                             \
                        wunpack_##T(wqs, wqh, (size_t)n * nb + b, words);                              \
                        dm = wscale_##T(wsc, (size_t)n * nb + b);                                      \
                    } else {                                                                           \
                        for (int k = 0; k < 8; ++k) words[k] = 0u;                                     \
                    }                                                                                  \
                    local uint* dst = lw + (kb * NV_BN + tid) * NV_S;                                  \
                    for (int k = 0; k < 8; ++k) dst[k] = words[k];                                     \
                    lwd[kb * NV_BN + tid] = dm.x;                                                      \
                    lwm[kb * NV_BN + tid] = dm.y;                                                      \
                }                                                                                      \
                const int r = tid % NV_BM, kb = tid / NV_BM, m = m0 + r, b = b0 + kb;                  \
                uint4 q0 = (uint4)(0u), q1 = (uint4)(0u);                                              \
                float2 s = (float2)(0.0f, 0.0f);                                                       \
                if (m < M && b < nb) {                                                                 \
                    const size_t at = ((size_t)m * K + (size_t)b * 32) / 16;                           \
                    q0 = aq[at];                                                                       \
                    q1 = aq[at + 1];                                                                   \
                    s = ads[(size_t)m * nb + b];                                                       \
                }                                                                                      \
                local uint* dst = la + (kb * NV_BM + r) * NV_S;                                        \
                dst[0] = q0.x; dst[1] = q0.y; dst[2] = q0.z; dst[3] = q0.w;                            \
                dst[4] = q1.x; dst[5] = q1.y; dst[6] = q1.z; dst[7] = q1.w;                            \
                lad[kb * NV_BM + r] = s.x;                                                             \
                las[kb * NV_BM + r] = s.x * s.y;                                                       \
            }                                                                                          \
            barrier(CLK_LOCAL_MEM_FENCE);                                                              \
            for (int kb = 0; kb < NV_KB; ++kb) {                                                       \
                const local uint* W = lw + kb * NV_BN * NV_S;                                          \
                const local uint* A = la + kb * NV_BM * NV_S;                                          \
                uint4 fa[4];                                                                           \
                uint2 fb[4];                                                                           \
                float wd[4][2], wmn[4][2], ad[4][2], asum[4][2];                                         \
                for (int i = 0; i < 4; ++i) {                                                          \
                    const int r0 = wn + 16 * i + g;                                                    \
                    fa[i] = (uint4)(W[r0 * NV_S + t4], W[(r0 + 8) * NV_S + t4], W[r0 * NV_S + 4 + t4],  \
                                    W[(r0 + 8) * NV_S + 4 + t4]);                                      \
                    wd[i][0] = lwd[kb * NV_BN + r0];                                                   \
                    wd[i][1] = lwd[kb * NV_BN + r0 + 8];                                               \
                    wmn[i][0] = lwm[kb * NV_BN + r0];                                                  \
                    wmn[i][1] = lwm[kb * NV_BN + r0 + 8];                                              \
                }                                                                                      \
                for (int j = 0; j < 4; ++j) {                                                          \
                    const int c0 = wm + 8 * j + g;                                                     \
                    fb[j] = (uint2)(A[c0 * NV_S + t4], A[c0 * NV_S + 4 + t4]);                         \
                    const int col = wm + 8 * j + 2 * t4;                                               \
                    ad[j][0] = lad[kb * NV_BM + col];                                                  \
                    ad[j][1] = lad[kb * NV_BM + col + 1];                                              \
                    asum[j][0] = las[kb * NV_BM + col];                                                  \
                    asum[j][1] = las[kb * NV_BM + col + 1];                                              \
                }                                                                                      \
                for (int i = 0; i < 4; ++i) {                                                          \
                    for (int j = 0; j < 4; ++j) {                                                      \
                        const int4 c = MMA(fa[i], fb[j]);                                              \
                        acc[i][j][0] += int_to_float_small(c.x) * (wd[i][0] * ad[j][0]) + wmn[i][0] * asum[j][0]; \
                        acc[i][j][1] += int_to_float_small(c.y) * (wd[i][0] * ad[j][1]) + wmn[i][0] * asum[j][1]; \
                        acc[i][j][2] += int_to_float_small(c.z) * (wd[i][1] * ad[j][0]) + wmn[i][1] * asum[j][0]; \
                        acc[i][j][3] += int_to_float_small(c.w) * (wd[i][1] * ad[j][1]) + wmn[i][1] * asum[j][1]; \
                    }                                                                                  \
                }                                                                                      \
            }                                                                                          \
            barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        }                                                                                              \
        for (int i = 0; i < 4; ++i) {                                                                  \
            for (int j = 0; j < 4; ++j) {                                                              \
                for (int e = 0; e < 4; ++e) {                                                          \
                    const int n = n0 + wn + 16 * i + g + (e >= 2 ? 8 : 0);                             \
                    const int m = m0 + wm + 8 * j + 2 * t4 + (e & 1);                                  \
                    if (n < N && m < M) LT_PTR(float, d, d_off + (ulong)m * d_nb1)[n] = acc[i][j][e];  \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
    }

#if LT_MMA_EMULATE
#define MM_NV_EMUL_SCRATCH local uint emul[128 * 6];
#else
#define MM_NV_EMUL_SCRATCH
#endif

LT_MM_NV(q4_0)
LT_MM_NV(q4_1)
LT_MM_NV(q5_0)
LT_MM_NV(q5_1)
LT_MM_NV(q8_0)
LT_MM_NV(q4_K)
LT_MM_NV(q5_K)
LT_MM_NV(iq4_nl)
LT_MM_NV(iq4_xs)
