// Matrix-vector products for generation: dst[n, m] = sum_k W[k, n] * x[k, m]
// for few activation rows (M <= 8).
//
// Work-items that share a row take its 32-element blocks in turn, so that
// they read neighbouring 16-byte quant payloads (the repacked layout keeps a
// row's payloads contiguous and its scales apart); partial sums meet in local
// memory. One launch can serve up to three matrices that read the same
// activations (Q, K and V): work-groups are dealt to the matrices in order.
//
// Quantized weights meet 8-bit activations (see common.cl) in exact integer
// block sums, as the CPU computes them; f32/f16/bf16 weights meet f32
// activations. mv_glu_* computes gate and up rows together and writes
// act(gate) * up, with its 8-bit blocks for the down projection.
//
// Kernels: mv_<type>_1 (M = 1), mv_<type>_8 (M <= 8), mv_glu_<type>_<1|8>,
// and the halves of an add + RMSNorm split around one-row products:
// mva_<type>_1, mvs_<type>_1, mvs_glu_<type>_1.

// Work-group shapes. One activation row (M = 1, generation), block-32
// weights: LT_MV_TPR work-items (a warp on NVIDIA) share a slot of rows and
// take its blocks in turn, so a slot reads LT_MV_TPR neighbouring 16-byte
// payloads of each row; each work-item loads LT_MV_U blocks of each of its
// rows before it computes any (many loads in flight: the H100 reached a
// third of its bandwidth with one block in flight per work-item) and reads
// a block's activations once for all its rows. Plain products: groups of
// LT_MV_WG, LT_MV_RPT rows per slot. Gated (gate and up, LT_MVG_RPT rows of
// each per slot, LT_MVG_U blocks ahead) and add + RMSNorm products
// (LT_MVA_RPT rows per slot): groups of 32 rows, one 8-bit block of the
// result. A slot's partial sums meet through warp shuffles on NVIDIA
// (LT_MV_TPR = 32), else a tree in local memory. Up to 8 rows: groups of
// 32 rows, LT_MV8_TPR work-items per row.
#define MV1_SLOTS (LT_MV_WG / LT_MV_TPR)
#define MVG_WG (32 / LT_MVG_RPT * LT_MV_TPR)
#define MVA_WG (32 / LT_MVA_RPT * LT_MV_TPR)
#define MV8_WG (32 * LT_MV8_TPR)
#define MV8_R 32

inline float silu_g(float x) { return x / (1.0f + exp(-x)); }
inline float gelu_g(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (2.0f - 2.0f / (exp(2.0f * u) + 1.0f));
}

// Picks matrix (w, qs, ...) of work-group g among three (R rows per group);
// g becomes the group's index within its matrix.
#define MV_PICK(g, R)                                                                \
    const int g0_ = (n0 + (R) - 1) / (R), g1_ = (n1 + (R) - 1) / (R);                \
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

// ---- quantized weights x 8-bit activations ---------------------------------------------
//
// The activations are 8-bit blocks in global memory, made by their producer
// or by quantize_q8 (ACT = GLOBAL), or blocks of a row whose RMSNorm scale
// is still to be applied (ACT = SCALED, one row): the add + RMSNorm before
// the product is split between the launch that makes its input and this
// one. The product before it (mva_*, OUT = ADDNORM) writes the sum
// s = x + r, quantizes u = s * w (w: the norm's weight) and leaves each
// group's sum of squares of s in parts[]. Here every group adds up the
// parts, scales its results by scale = 1 / sqrt(sum / K + eps) (the blocks
// are linear in it), and group 0 writes the normed row s * scale * w for
// other readers. No group repeats another's work. The quants of u can differ
// by one from those of the normed row where the fp16 block scales round
// differently.

#define MV_ACT_ARGS_GLOBAL const global uchar *act, ulong aq_off, ulong ads_off
#define MV_ACT_SETUP_GLOBAL(red, WG)                            \
    const global uchar* aq = act + aq_off;                      \
    const global float2* ads = LT_CPTR(float2, act, ads_off);
#define MV_ACT_FETCH_GLOBAL(m, b)                                                                  \
    const global uint4* a_ = (const global uint4*)(aq + (size_t)(m) * K + (size_t)(b) * 32);          \
    const uint4 a0 = a_[0], a1 = a_[1];                                                              \
    const float2 s = ads[(m) * nb + (b)];
#define MV_ACT_FINISH_GLOBAL(red, WG) const float act_scale = 1.0f;

#define MV_ACT_ARGS_SCALED                                                                          \
    MV_ACT_ARGS_GLOBAL, const global uchar *parts, ulong parts_off, int n_parts, float eps,            \
        const global uchar *ns, ulong ns_off, const global uchar *nw, ulong nw_off, int has_w,       \
        global uchar *nn, ulong nn_off
#define MV_ACT_SETUP_SCALED(red, WG) MV_ACT_SETUP_GLOBAL(red, WG)
#define MV_ACT_FETCH_SCALED(m, b) MV_ACT_FETCH_GLOBAL(m, b)
// After the main loop: the scale, needed only by the items that store
// results (each slot adds up the parts itself: no barrier; see
// MV_PARTS_SCALE), and group 0's normed row.
#define MV_ACT_FINISH_SCALED(red, WG)                                                               \
    float act_scale = 1.0f;                                                                          \
    MV_PARTS_SCALE                                                                                   \
    if (get_group_id(0) == 0) {                                                                      \
        const float sc0 = lane == 0 ? act_scale : 0.0f;                                              \
        red[lid] = sc0;                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
        const float sc = red[0];                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
        store_scaled_row(LT_PTR(float, nn, nn_off), LT_CPTR(float, ns, ns_off), LT_CPTR(float, nw, nw_off), \
                         has_w, sc, K, lid, (WG));                                                   \
    }

// Result stores of the 2..8-row kernels.
#define MV_OUT_PLAIN(MAXM, RPT, WG)                                                                     \
    if (lane == 0) {                                                                                 \
        for (int j = 0; j < RPT; ++j) {                                                              \
            if (row0 + j >= n) break;                                                                \
            for (int m = 0; m < MAXM && m < M; ++m) {                                                \
                LT_PTR(float, d, o + m * st)[row0 + j] = act_scale * red[(m * RPT + j) * WG + lid];  \
            }                                                                                        \
        }                                                                                            \
    }

// Sums the TPR partials of each slot in place (a tree over local memory):
// afterwards red[k * WG + slot * TPR] holds sum k of the slot, k < COUNT.
#define MV_TREE(red, COUNT, WG, TPR)                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                    \
    for (int h_ = (TPR) / 2; h_ > 0; h_ >>= 1) {                                                     \
        if (lane < h_) {                                                                             \
            for (int k_ = 0; k_ < (COUNT); ++k_) red[k_ * (WG) + lid] += red[k_ * (WG) + lid + h_];  \
        }                                                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    }

#define LT_MV_Q8(T, NAME, MAXM, WG, TPR, RPT, ACT)                                                  \
    kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void NAME(                                 \
        MV_MATRIX_ARGS(0), MV_MATRIX_ARGS(1), MV_MATRIX_ARGS(2), MV_ACT_ARGS_##ACT, int K, int M) {    \
        local float red[MAXM * RPT * WG];                                                             \
        const int lid = get_local_id(0), slot = lid / (TPR), lane = lid % (TPR);                      \
        int g = get_group_id(0);                                                                      \
        MV_PICK(g, (WG) / (TPR) * (RPT))                                                              \
        const int row0 = g * ((WG) / (TPR) * (RPT)) + slot * (RPT);                                   \
        const int nb = K / 32;                                                                        \
        const global uchar* wqs = w + qs;                                                             \
        const global uint* wqh = LT_CPTR(uint, w, qh);                                                \
        const global ushort* wsc = LT_CPTR(ushort, w, sc);                                            \
        MV_ACT_SETUP_##ACT(red, WG)                                                                   \
        float acc[MAXM][RPT];                                                                         \
        for (int m = 0; m < MAXM; ++m)                                                                \
            for (int j = 0; j < RPT; ++j) acc[m][j] = 0.0f;                                           \
        for (int b = lane; b < nb; b += (TPR)) {                                                      \
            for (int m = 0; m < MAXM; ++m) {                                                          \
                if (m >= M) break;                                                                    \
                MV_ACT_FETCH_##ACT(m, b)                                                              \
                for (int j = 0; j < RPT; ++j) {                                                       \
                    if (row0 + j < n) acc[m][j] += wdot_##T(wqs, wqh, wsc, (size_t)(row0 + j) * nb + b, a0, a1, s); \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        MV_ACT_FINISH_##ACT(red, WG)                                                                  \
        for (int m = 0; m < MAXM; ++m)                                                                \
            for (int j = 0; j < RPT; ++j) red[(m * RPT + j) * WG + lid] = acc[m][j];                  \
        MV_TREE(red, MAXM * RPT, WG, TPR)                                                             \
        MV_OUT_PLAIN(MAXM, RPT, WG)                                                                   \
    }

// The gated kernels' arguments: the gate and up matrices (payload, high
// bits and scales at offsets into each buffer), the activation, the gate,
// up and act(gate) * up outputs, and the 8-bit blocks of the last.
#define MV_GLU_ARGS(ACT)                                                                              \
    const global uchar *wg, ulong gqs, ulong gqh, ulong gsc, const global uchar *wu, ulong uqs,        \
        ulong uqh, ulong usc, MV_ACT_ARGS_##ACT, global uchar *go, ulong go_off, ulong go_st,          \
        global uchar *uo, ulong uo_off, ulong uo_st, global uchar *ho, ulong ho_off, ulong ho_st, int n, \
        int K, int M, int gelu, global uchar *hq, ulong hq_off, ulong hds_off, int want_q8
// Their blocks per row and the planes of both matrices.
#define MV_GLU_POINTERS                                               \
    const int nb = K / 32;                                            \
    const global uchar* gqs_p = wg + gqs;                             \
    const global uchar* uqs_p = wu + uqs;                             \
    const global uint* gqh_p = LT_CPTR(uint, wg, gqh);                \
    const global uint* uqh_p = LT_CPTR(uint, wu, uqh);                \
    const global ushort* gsc_p = LT_CPTR(ushort, wg, gsc);            \
    const global ushort* usc_p = LT_CPTR(ushort, wu, usc);

// gate and up rows together, act(gate) * up, and its 8-bit blocks: each work-
// group holds 32 rows (one block of the output).
#define LT_MV_GLU(T, NAME, MAXM, WG, TPR, RPT, ACT)                                                 \
    kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void NAME(                                 \
        MV_GLU_ARGS(ACT)) {                                                                          \
        local float red_g[MAXM * RPT * WG];                                                           \
        local float red_u[MAXM * RPT * WG];                                                           \
        const int lid = get_local_id(0), slot = lid / (TPR), lane = lid % (TPR);                      \
        const int g = get_group_id(0);                                                                \
        const int row0 = g * 32 + slot * (RPT);                                                       \
        MV_GLU_POINTERS                                                                               \
        MV_ACT_SETUP_##ACT(red_g, WG)                                                                 \
        float ag[MAXM][RPT], au[MAXM][RPT];                                                           \
        for (int m = 0; m < MAXM; ++m)                                                                \
            for (int j = 0; j < RPT; ++j) ag[m][j] = au[m][j] = 0.0f;                                 \
        for (int b = lane; b < nb; b += (TPR)) {                                                      \
            for (int m = 0; m < MAXM; ++m) {                                                          \
                if (m >= M) break;                                                                    \
                MV_ACT_FETCH_##ACT(m, b)                                                              \
                for (int j = 0; j < RPT; ++j) {                                                       \
                    if (row0 + j < n) {                                                               \
                        const size_t i = (size_t)(row0 + j) * nb + b;                                 \
                        ag[m][j] += wdot_##T(gqs_p, gqh_p, gsc_p, i, a0, a1, s);                      \
                        au[m][j] += wdot_##T(uqs_p, uqh_p, usc_p, i, a0, a1, s);                      \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        MV_ACT_FINISH_##ACT(red_g, WG)                                                                \
        for (int m = 0; m < MAXM; ++m) {                                                              \
            for (int j = 0; j < RPT; ++j) {                                                           \
                red_g[(m * RPT + j) * WG + lid] = ag[m][j];                                           \
                red_u[(m * RPT + j) * WG + lid] = au[m][j];                                           \
            }                                                                                         \
        }                                                                                             \
        MV_TREE(red_g, MAXM * RPT, WG, TPR)                                                           \
        MV_TREE(red_u, MAXM * RPT, WG, TPR)                                                           \
        if (lane == 0) {                                                                              \
            for (int j = 0; j < RPT; ++j) {                                                           \
                const int row = row0 + j;                                                             \
                if (row >= n) break;                                                                  \
                for (int m = 0; m < MAXM && m < M; ++m) {                                             \
                    const float sg = act_scale * red_g[(m * RPT + j) * WG + lid];                     \
                    const float su = act_scale * red_u[(m * RPT + j) * WG + lid];                     \
                    LT_PTR(float, go, go_off + m * go_st)[row] = sg;                                  \
                    LT_PTR(float, uo, uo_off + m * uo_st)[row] = su;                                  \
                    LT_PTR(float, ho, ho_off + m * ho_st)[row] = (gelu ? gelu_g(sg) : silu_g(sg)) * su; \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        if (want_q8) {                                                                                \
            barrier(CLK_GLOBAL_MEM_FENCE);                                                            \
            if (lid < M) {                                                                            \
                q8_quantize_block(LT_PTR(float, ho, ho_off + lid * ho_st) + g * 32,                    \
                                  LT_PTR(char, hq, hq_off + (size_t)lid * n) + g * 32,                \
                                  LT_PTR(float2, hq, hds_off) + (size_t)lid * (n / 32) + g);          \
            }                                                                                         \
        }                                                                                             \
    }

// ---- one activation row ---------------------------------------------------------------
//
// Each work-item holds its slot's rows as block indices (rows past n repeat
// the last row and are not stored: no per-row tests in the loop) and walks
// blocks lane, lane + TPR, ... in stages of U: all of a stage's weight loads
// first, then the dot products.

// Sums v[0..COUNT) over each slot's work-items; the slot's first work-item
// (lane 0) gets the totals.
#if LT_NV_PTX && LT_MV_TPR == 32
#define MV1_SUM(v, COUNT, red, WG) \
    for (int k_ = 0; k_ < (COUNT); ++k_) v[k_] = warp_sum32(v[k_]);
#else
#define MV1_SUM(v, COUNT, red, WG)                                               \
    for (int k_ = 0; k_ < (COUNT); ++k_) red[k_ * (WG) + lid] = v[k_];            \
    MV_TREE(red, COUNT, WG, LT_MV_TPR)                                            \
    for (int k_ = 0; k_ < (COUNT); ++k_) v[k_] = red[k_ * (WG) + lid];
#endif

// NVIDIA: a warp's lanes hold one value each of an 8-bit block; q8_quantize_warp
// writes the block as q8_quantize_block does (the same amax, d and quants:
// max and integer sums are exact in any order) in a few shuffles instead of
// one work-item's 32-step loops while the rest of the group waits.
#if LT_NV_PTX && LT_MV_TPR == 32
#define MV1_WARP 1
inline float warp_max32(float v) {
    for (int m = 16; m > 0; m >>= 1) {
        uint r;
        __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
        v = fmax(v, as_float(r));
    }
    return v;
}
inline int warp_isum32(int v) {
    for (int m = 16; m > 0; m >>= 1) {
        int r;
        __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
        v += r;
    }
    return v;
}
inline void q8_quantize_warp(float x, int lane, global char* q, global float2* ds) {
    const float d = q8_scale(warp_max32(fabs(x)));
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    const char c = q8_quant(x, inv);
    const int sum = warp_isum32((int)c);
    q[lane] = c;
    if (lane == 0) *ds = (float2)(d, (float)sum);
}
// The RMSNorm scale from the parts (SCALED): each warp adds them up in
// parallel, every lane getting the scale.
#define MV_PARTS_SCALE                                                                              \
    {                                                                                                \
        const global float* pp = LT_CPTR(float, parts, parts_off);                                   \
        float ss = 0.0f;                                                                             \
        for (int i = lane; i < n_parts; i += 32) ss += pp[i];                                        \
        act_scale = 1.0f / sqrt(warp_sum32(ss) / (float)K + eps);                                    \
    }
#else
#define MV1_WARP 0
#define MV_PARTS_SCALE                                                                              \
    if (lane == 0) {                                                                                 \
        const global float* pp = LT_CPTR(float, parts, parts_off);                                   \
        float4 s4 = (float4)(0.0f);                                                                  \
        int i = 0;                                                                                   \
        for (; i + 4 <= n_parts; i += 4) s4 += vload4(0, pp + i);                                    \
        float ss = (s4.x + s4.y) + (s4.z + s4.w);                                                    \
        for (; i < n_parts; ++i) ss += pp[i];                                                        \
        act_scale = 1.0f / sqrt(ss / (float)K + eps);                                               \
    }
#endif

// The row indices of a slot's rows (RPT of them from row0, n rows in all).
#define MV1_ROWS(rb, RPT)                                                        \
    size_t rb[RPT];                                                              \
    for (int j = 0; j < (RPT); ++j) rb[j] = (size_t)min(row0 + j, n - 1) * nb;

// Result stores. PLAIN: the rows. ADDNORM (32 rows per group, n a multiple
// of 32): also s = x + r into so, its 8-bit blocks of s * w (one per group)
// into uq, and the group's sum of squares of s into parts[g].
#define MV1_OUT_ARGS_PLAIN
#define MV1_OUT_PLAIN(RPT)                                                                          \
    if (lane == 0) {                                                                                 \
        for (int j = 0; j < (RPT); ++j) {                                                            \
            if (row0 + j < n) LT_PTR(float, d, o)[row0 + j] = act_scale * acc[j];                    \
        }                                                                                            \
    }
#define MV1_OUT_ARGS_ADDNORM                                                                        \
    , const global uchar *rx, ulong rx_off, const global uchar *rw, ulong rw_off, int r_has_w,       \
        global uchar *so, ulong so_off, global uchar *uq, ulong uq_off, ulong uds_off, global uchar *parts, \
        ulong parts_off
#define MV1_OUT_ADDNORM(RPT)                                                                        \
    if (lane == 0) {                                                                                 \
        /* The residual and norm weight loads before the stores (which may */                       \
        /* alias them for all the compiler knows: one round trip each). */                          \
        float rx_[RPT], rw_[RPT];                                                                    \
        for (int j = 0; j < (RPT); ++j) {                                                            \
            rx_[j] = LT_CPTR(float, rx, rx_off)[row0 + j];                                           \
            rw_[j] = r_has_w ? LT_CPTR(float, rw, rw_off)[row0 + j] : 1.0f;                          \
        }                                                                                            \
        for (int j = 0; j < (RPT); ++j) {                                                            \
            const int row = row0 + j;                                                                \
            const float v = act_scale * acc[j];                                                      \
            LT_PTR(float, d, o)[row] = v;                                                            \
            const float sum = rx_[j] + v;                                                            \
            LT_PTR(float, so, so_off)[row] = sum;                                                    \
            lrow[slot * (RPT) + j] = r_has_w ? sum * rw_[j] : sum;                                   \
            lrow[32 + slot * (RPT) + j] = sum * sum;                                                 \
        }                                                                                            \
    }                                                                                                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                    \
    MV1_ADDNORM_TAIL

#if MV1_WARP
#define MV1_ADDNORM_TAIL                                                                            \
    if (lid < 32) {                                                                                  \
        const float ss = warp_sum32(lrow[32 + lid]);                                                 \
        if (lid == 0) LT_PTR(float, parts, parts_off)[g] = ss;                                       \
        q8_quantize_warp(lrow[lid], lid, LT_PTR(char, uq, uq_off) + g * 32, LT_PTR(float2, uq, uds_off) + g); \
    }
#else
#define MV1_ADDNORM_TAIL                                                                            \
    if (lid == 0) {                                                                                  \
        float ss = 0.0f;                                                                             \
        for (int i = 0; i < 32; ++i) ss += lrow[32 + i];                                             \
        LT_PTR(float, parts, parts_off)[g] = ss;                                                     \
        q8_quantize_block_l2g(lrow, LT_PTR(char, uq, uq_off) + g * 32, LT_PTR(float2, uq, uds_off) + g); \
    }
#endif

// One stage of U blocks per row from b0: the weight loads, then the dot
// products. CHECK = 0 in whole stages (no bounds tests), 1 in the last.
#define MV1_STAGE(T, RPT, U, ACT, CHECK)                                                            \
    lt_wblk wb[U][RPT];                                                                               \
    for (int u = 0; u < (U); ++u) {                                                                   \
        const int b = b0 + u * LT_MV_TPR;                                                             \
        if (!(CHECK) || b < nb) {                                                                     \
            for (int j = 0; j < (RPT); ++j) wb[u][j] = wload_##T(wqs, wqh, wsc, rb[j] + b);            \
        }                                                                                             \
    }                                                                                                 \
    for (int u = 0; u < (U); ++u) {                                                                   \
        const int b = b0 + u * LT_MV_TPR;                                                             \
        if (!(CHECK) || b < nb) {                                                                     \
            MV_ACT_FETCH_##ACT(0, b)                                                                  \
            for (int j = 0; j < (RPT); ++j) acc[j] += wdotb_##T(wb[u][j], a0, a1, s);                 \
        }                                                                                             \
    }

#define LT_MV1(T, NAME, WG, RPT, U, ACT, OUT)                                                       \
    kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void NAME(                                 \
        MV_MATRIX_ARGS(0), MV_MATRIX_ARGS(1), MV_MATRIX_ARGS(2), MV_ACT_ARGS_##ACT, int K,            \
        int M MV1_OUT_ARGS_##OUT) {                                                                   \
        local float red[(RPT) * (WG)];                                                                \
        local float lrow[64];                                                                         \
        const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;              \
        int g = get_group_id(0);                                                                      \
        MV_PICK(g, (WG) / LT_MV_TPR * (RPT))                                                          \
        const int row0 = g * ((WG) / LT_MV_TPR * (RPT)) + slot * (RPT);                               \
        const int nb = K / 32;                                                                        \
        const global uchar* wqs = w + qs;                                                             \
        const global uint* wqh = LT_CPTR(uint, w, qh);                                                \
        const global ushort* wsc = LT_CPTR(ushort, w, sc);                                            \
        MV_ACT_SETUP_##ACT(red, WG)                                                                   \
        MV1_ROWS(rb, RPT)                                                                             \
        float acc[RPT];                                                                               \
        for (int j = 0; j < (RPT); ++j) acc[j] = 0.0f;                                                \
        int b0 = lane;                                                                                \
        for (; b0 + ((U) - 1) * LT_MV_TPR < nb; b0 += LT_MV_TPR * (U)) {                             \
            MV1_STAGE(T, RPT, U, ACT, 0)                                                              \
        }                                                                                             \
        if (b0 < nb) {                                                                                \
            MV1_STAGE(T, RPT, U, ACT, 1)                                                              \
        }                                                                                             \
        MV_ACT_FINISH_##ACT(red, WG)                                                                  \
        MV1_SUM(acc, RPT, red, WG)                                                                    \
        MV1_OUT_##OUT(RPT)                                                                            \
    }

#if MV1_WARP
#define MV1_GLU_Q8_TAIL \
    if (lid < 32) q8_quantize_warp(lrow[lid], lid, LT_PTR(char, hq, hq_off) + g * 32, LT_PTR(float2, hq, hds_off) + g);
#else
#define MV1_GLU_Q8_TAIL \
    if (lid == 0) q8_quantize_block_l2g(lrow, LT_PTR(char, hq, hq_off) + g * 32, LT_PTR(float2, hq, hds_off) + g);
#endif

// MV1_STAGE for gate and up rows.
#define MV1_GLU_STAGE(T, RPT, U, ACT, CHECK)                                                        \
    lt_wblk wgb[U][RPT], wub[U][RPT];                                                                 \
    for (int u = 0; u < (U); ++u) {                                                                   \
        const int b = b0 + u * LT_MV_TPR;                                                             \
        if (!(CHECK) || b < nb) {                                                                     \
            for (int j = 0; j < (RPT); ++j) {                                                         \
                wgb[u][j] = wload_##T(gqs_p, gqh_p, gsc_p, rb[j] + b);                                \
                wub[u][j] = wload_##T(uqs_p, uqh_p, usc_p, rb[j] + b);                                \
            }                                                                                         \
        }                                                                                             \
    }                                                                                                 \
    for (int u = 0; u < (U); ++u) {                                                                   \
        const int b = b0 + u * LT_MV_TPR;                                                             \
        if (!(CHECK) || b < nb) {                                                                     \
            MV_ACT_FETCH_##ACT(0, b)                                                                  \
            for (int j = 0; j < (RPT); ++j) {                                                         \
                acc[j] += wdotb_##T(wgb[u][j], a0, a1, s);                                            \
                acc[(RPT) + j] += wdotb_##T(wub[u][j], a0, a1, s);                                    \
            }                                                                                         \
        }                                                                                             \
    }

// gate and up rows together (RPT of each per slot, 32 per group), act(gate) *
// up, and its 8-bit block (want_q8, n a multiple of 32).
#define LT_MV1_GLU(T, NAME, RPT, U, ACT)                                                            \
    kernel __attribute__((reqd_work_group_size(MVG_WG, 1, 1))) void NAME(                             \
        MV_GLU_ARGS(ACT)) {                                                                          \
        local float red[2 * (RPT) * MVG_WG];                                                          \
        local float lrow[32];                                                                         \
        const int lid = get_local_id(0), slot = lid / LT_MV_TPR, lane = lid % LT_MV_TPR;              \
        const int g = get_group_id(0);                                                                \
        const int row0 = g * 32 + slot * (RPT);                                                       \
        MV_GLU_POINTERS                                                                               \
        MV_ACT_SETUP_##ACT(red, MVG_WG)                                                               \
        MV1_ROWS(rb, RPT)                                                                             \
        float acc[2 * (RPT)]; /* gate rows, then up rows */                                           \
        for (int j = 0; j < 2 * (RPT); ++j) acc[j] = 0.0f;                                            \
        int b0 = lane;                                                                                \
        for (; b0 + ((U) - 1) * LT_MV_TPR < nb; b0 += LT_MV_TPR * (U)) {                             \
            MV1_GLU_STAGE(T, RPT, U, ACT, 0)                                                          \
        }                                                                                             \
        if (b0 < nb) {                                                                                \
            MV1_GLU_STAGE(T, RPT, U, ACT, 1)                                                          \
        }                                                                                             \
        MV_ACT_FINISH_##ACT(red, MVG_WG)                                                              \
        MV1_SUM(acc, 2 * (RPT), red, MVG_WG)                                                          \
        if (lane == 0) {                                                                              \
            for (int j = 0; j < (RPT); ++j) {                                                         \
                const int row = row0 + j;                                                             \
                if (row < n) {                                                                        \
                    const float sg = act_scale * acc[j];                                              \
                    const float su = act_scale * acc[(RPT) + j];                                      \
                    const float h = (gelu ? gelu_g(sg) : silu_g(sg)) * su;                            \
                    LT_PTR(float, go, go_off)[row] = sg;                                              \
                    LT_PTR(float, uo, uo_off)[row] = su;                                              \
                    LT_PTR(float, ho, ho_off)[row] = h;                                               \
                    lrow[slot * (RPT) + j] = h;                                                       \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        if (want_q8) {                                                                                \
            barrier(CLK_LOCAL_MEM_FENCE);                                                             \
            MV1_GLU_Q8_TAIL                                                                           \
        }                                                                                             \
    }

// mv_T_1: one row; mvs_*: one row, the RMSNorm scale still to apply; mva_T_1:
// one row, ending in the first half of an add + RMSNorm (see above);
// mv_T_8, mv_glu_T_8: up to 8 rows.
#define LT_MV_ALL(T)                                                                    \
    LT_MV1(T, mv_##T##_1, LT_MV_WG, LT_MV_RPT, LT_MV_U, GLOBAL, PLAIN)                  \
    LT_MV1(T, mvs_##T##_1, LT_MV_WG, LT_MV_RPT, LT_MV_U, SCALED, PLAIN)                 \
    LT_MV1(T, mva_##T##_1, MVA_WG, LT_MVA_RPT, LT_MV_U, GLOBAL, ADDNORM)                \
    LT_MV1_GLU(T, mv_glu_##T##_1, LT_MVG_RPT, LT_MVG_U, GLOBAL)                         \
    LT_MV1_GLU(T, mvs_glu_##T##_1, LT_MVG_RPT, LT_MVG_U, SCALED)                        \
    LT_MV_Q8(T, mv_##T##_8, 8, MV8_WG, LT_MV8_TPR, 1, GLOBAL)                           \
    LT_MV_GLU(T, mv_glu_##T##_8, 8, MV8_WG, LT_MV8_TPR, 1, GLOBAL)
LT_MV_ALL(q4_0)
LT_MV_ALL(q4_1)
LT_MV_ALL(q5_0)
LT_MV_ALL(q5_1)
LT_MV_ALL(q8_0)
LT_MV_ALL(q2_K)
LT_MV_ALL(q3_K)
LT_MV_ALL(q4_K)
LT_MV_ALL(q5_K)
LT_MV_ALL(q6_K)
LT_MV_ALL(iq4_nl)
LT_MV_ALL(iq4_xs)

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
// Groups of 32 rows, LT_MV8_TPR work-items per row.
#define LT_MV_F(T, MAXM)                                                                           \
    kernel __attribute__((reqd_work_group_size(MV8_WG, 1, 1))) void mv_##T##_##MAXM(                 \
        MV_MATRIX_ARGS(0), MV_MATRIX_ARGS(1), MV_MATRIX_ARGS(2), const global uchar* act, ulong a_off, \
        ulong a_nb1, int K, int M) {                                                                 \
        local float red[MAXM * MV8_WG];                                                              \
        const int lid = get_local_id(0), r = lid / LT_MV8_TPR, lane = lid % LT_MV8_TPR;              \
        int g = get_group_id(0);                                                                     \
        MV_PICK(g, MV8_R)                                                                            \
        const int row = g * MV8_R + r;                                                               \
        float acc[MAXM];                                                                             \
        for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;                                                \
        if (row < n) {                                                                               \
            const global uchar* wr = w + qs + (ulong)row * qh;                                       \
            int e = 4 * lane;                                                                        \
            for (; e + 4 <= K; e += 4 * LT_MV8_TPR) {                                                \
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
        for (int m = 0; m < MAXM; ++m) red[m * MV8_WG + lid] = acc[m];                               \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
        if (lane == 0 && row < n) {                                                                  \
            for (int m = 0; m < MAXM && m < M; ++m) {                                                \
                float sum = 0.0f;                                                                    \
                for (int l = 0; l < LT_MV8_TPR; ++l) sum += red[m * MV8_WG + r * LT_MV8_TPR + l];     \
                LT_PTR(float, d, o + m * st)[row] = sum;                                             \
            }                                                                                        \
        }                                                                                            \
    }

LT_MV_F(f32, 1)
LT_MV_F(f32, 8)
LT_MV_F(f16, 1)
LT_MV_F(f16, 8)
LT_MV_F(bf16, 1)
LT_MV_F(bf16, 8)
