// Row reductions: RMSNorm, the fused add + RMSNorm, and softmax.
//
// Launch: one work-group of LT_RED_WG work-items per row. The sum of squares
// and the softmax sums go through wg_sum / wg_max (subgroups where the device
// has them, local memory otherwise). Norm kernels can also write the normed
// row as 8-bit blocks for the matrix product that reads it (want_q8).

// Quantizes the row just written at `row` (K values) into 8-bit blocks.
inline void quantize_row_q8(const global float* row, global uchar* q, ulong q_off, ulong ds_off, long r, int K) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int blk = get_local_id(0); blk < K / 32; blk += get_local_size(0)) {
        q8_quantize_block(row + blk * 32, LT_PTR(char, q, q_off + r * K) + blk * 32,
                          LT_PTR(float2, q, ds_off) + r * (K / 32) + blk);
    }
}

LT_REDUCTION_ATTR
kernel void rms_norm_f32(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3,
                         const global uchar* w, ulong w_off, int has_w,
                         global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3,
                         int ne0, int ne1, int ne2, float eps,
                         global uchar* q, ulong q_off, ulong ds_off, int want_q8) {
    local float tmp[LT_RED_WG];
    const long r = get_group_id(0);
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const global float* x = LT_CPTR(float, a, a_off + i1 * a_nb1 + i2 * a_nb2 + i3 * a_nb3);
    global float* y = LT_PTR(float, d, d_off + i1 * d_nb1 + i2 * d_nb2 + i3 * d_nb3);
    const global float* wt = LT_CPTR(float, w, w_off);
    float ss = 0.0f;
    for (int i = get_local_id(0); i < ne0; i += LT_RED_WG) ss += x[i] * x[i];
    ss = wg_sum(ss, tmp);
    const float scale = 1.0f / sqrt(ss / (float)ne0 + eps);
    store_scaled_row(y, x, wt, has_w, scale, ne0, get_local_id(0), LT_RED_WG);
    if (want_q8) quantize_row_q8(y, q, q_off, ds_off, r, ne0);
}

// dst [K, M, 2]: slice 0 = a + b, slice 1 = rms_norm(slice 0) * w.
LT_REDUCTION_ATTR
kernel void add_rms_norm_f32(const global uchar* a, ulong a_off, ulong a_nb1,
                             const global uchar* b, ulong b_off, ulong b_nb1,
                             const global uchar* w, ulong w_off, int has_w,
                             global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2,
                             int ne0, float eps,
                             global uchar* q, ulong q_off, ulong ds_off, int want_q8) {
    local float tmp[LT_RED_WG];
    const long r = get_group_id(0);
    const global float* x0 = LT_CPTR(float, a, a_off + r * a_nb1);
    const global float* x1 = LT_CPTR(float, b, b_off + r * b_nb1);
    global float* sum = LT_PTR(float, d, d_off + r * d_nb1);
    global float* y = LT_PTR(float, d, d_off + d_nb2 + r * d_nb1);
    const global float* wt = LT_CPTR(float, w, w_off);
    float ss = 0.0f;
    // Eight elements' loads before their stores (store_scaled_row says why).
    for (int i0 = get_local_id(0); i0 < ne0; i0 += 8 * LT_RED_WG) {
        float s[8];
        for (int u = 0; u < 8; ++u) {
            const int i = i0 + u * LT_RED_WG;
            s[u] = i < ne0 ? x0[i] + x1[i] : 0.0f;
        }
        for (int u = 0; u < 8; ++u) {
            if (i0 + u * LT_RED_WG < ne0) sum[i0 + u * LT_RED_WG] = s[u];
            ss += s[u] * s[u];
        }
    }
    ss = wg_sum(ss, tmp);
    const float scale = 1.0f / sqrt(ss / (float)ne0 + eps);
    // Each item reads back only the sums it wrote itself.
    store_scaled_row(y, sum, wt, has_w, scale, ne0, get_local_id(0), LT_RED_WG);
    if (want_q8) quantize_row_q8(y, q, q_off, ds_off, r, ne0);
}

LT_REDUCTION_ATTR
kernel void soft_max_f32(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3,
                         global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3,
                         int ne0, int ne1, int ne2, float s) {
    local float tmp[LT_RED_WG];
    const long r = get_group_id(0);
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const global float* x = LT_CPTR(float, a, a_off + i1 * a_nb1 + i2 * a_nb2 + i3 * a_nb3);
    global float* y = LT_PTR(float, d, d_off + i1 * d_nb1 + i2 * d_nb2 + i3 * d_nb3);
    float mx = LT_NEG_BIG;
    for (int i = get_local_id(0); i < ne0; i += LT_RED_WG) mx = fmax(mx, x[i] * s);
    mx = wg_max(mx, tmp);
    float sum = 0.0f;
    for (int i = get_local_id(0); i < ne0; i += LT_RED_WG) {
        const float e = exp(x[i] * s - mx);
        y[i] = e;
        sum += e;
    }
    sum = wg_sum(sum, tmp);
    const float inv = 1.0f / sum;
    for (int i = get_local_id(0); i < ne0; i += LT_RED_WG) y[i] *= inv;
}
