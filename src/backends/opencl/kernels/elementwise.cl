// Row-wise elementwise ops: add, mul (with broadcast), SiLU x up, GELU x up,
// sigmoid-gated rows, scale, logit soft-capping, type-converting copies, and the gated activation
// with 8-bit output.
//
// Launch: global (ne0, rows of dst), one work-item per element. A source row
// matching dst row (i1, i2, i3) is (i1 % ne1, i2 % ne2, i3 % ne3) of that
// source, as on the CPU.

#define OP_ADD 0
#define OP_MUL 1
#define OP_SILU_MUL 2
#define OP_GELU_MUL 3
#define OP_SIGMOID_GATE 4

inline float silu_f(float x) { return x / (1.0f + exp(-x)); }

inline float gelu_tanh_f(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const float u = k * (x + 0.044715f * x * x * x);
    const float t = 1.0f - 2.0f / (exp(2.0f * u) + 1.0f);
    return 0.5f * x * (1.0f + t);
}

inline float apply_binary(int op, float x, float y) {
    switch (op) {
        case OP_ADD: return x + y;
        case OP_MUL: return x * y;
        case OP_SILU_MUL: return silu_f(x) * y;
        case OP_SIGMOID_GATE: return x / (1.0f + exp(-y));
        default: return gelu_tanh_f(x) * y;
    }
}

// Byte offset of row (i1, i2, i3) of a tensor with strides nb1..3.
inline ulong row_offset(long i1, long i2, long i3, ulong nb1, ulong nb2, ulong nb3) {
    return (ulong)i1 * nb1 + (ulong)i2 * nb2 + (ulong)i3 * nb3;
}

kernel void binary_f32(int op,
                       const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3, int a_ne1, int a_ne2, int a_ne3,
                       const global uchar* b, ulong b_off, ulong b_nb1, ulong b_nb2, ulong b_nb3, int b_ne1, int b_ne2, int b_ne3,
                       global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3,
                       int ne0, int ne1, int ne2) {
    const int i0 = get_global_id(0);
    const long r = get_global_id(1);
    if (i0 >= ne0) return;
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const float x = LT_CPTR(float, a, a_off + row_offset(i1 % a_ne1, i2 % a_ne2, i3 % a_ne3, a_nb1, a_nb2, a_nb3))[i0];
    // The gate is one value per row.
    const float y = LT_CPTR(float, b, b_off + row_offset(i1 % b_ne1, i2 % b_ne2, i3 % b_ne3, b_nb1, b_nb2, b_nb3))[op == OP_SIGMOID_GATE ? 0 : i0];
    LT_PTR(float, d, d_off + row_offset(i1, i2, i3, d_nb1, d_nb2, d_nb3))[i0] = apply_binary(op, x, y);
}

kernel void scale_f32(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3,
                      global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3,
                      int ne0, int ne1, int ne2, float s) {
    const int i0 = get_global_id(0);
    const long r = get_global_id(1);
    if (i0 >= ne0) return;
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const float x = LT_CPTR(float, a, a_off + row_offset(i1, i2, i3, a_nb1, a_nb2, a_nb3))[i0];
    LT_PTR(float, d, d_off + row_offset(i1, i2, i3, d_nb1, d_nb2, d_nb3))[i0] = x * s;
}

// Logit soft-capping: dst = cap * tanh(src / cap).
kernel void softcap_f32(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3,
                        global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3,
                        int ne0, int ne1, int ne2, float cap) {
    const int i0 = get_global_id(0);
    const long r = get_global_id(1);
    if (i0 >= ne0) return;
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const float x = LT_CPTR(float, a, a_off + row_offset(i1, i2, i3, a_nb1, a_nb2, a_nb3))[i0];
    LT_PTR(float, d, d_off + row_offset(i1, i2, i3, d_nb1, d_nb2, d_nb3))[i0] = cap * tanh(x * (1.0f / cap));
}

// Types: DType ids 0 (f32), 1 (f16), 30 (bf16).
kernel void copy_any(const global uchar* a, ulong a_off, ulong a_nb1, ulong a_nb2, ulong a_nb3, int a_type,
                     global uchar* d, ulong d_off, ulong d_nb1, ulong d_nb2, ulong d_nb3, int d_type,
                     int ne0, int ne1, int ne2) {
    const int i0 = get_global_id(0);
    const long r = get_global_id(1);
    if (i0 >= ne0) return;
    const long i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / ((long)ne1 * ne2);
    const global uchar* src = a + a_off + row_offset(i1, i2, i3, a_nb1, a_nb2, a_nb3);
    global uchar* dst = d + d_off + row_offset(i1, i2, i3, d_nb1, d_nb2, d_nb3);
    if (a_type == d_type && a_type != 0) {  // 16-bit types: copy the bits
        ((global ushort*)dst)[i0] = ((const global ushort*)src)[i0];
        return;
    }
    const float v = load_plain(src, i0, a_type);
    if (d_type == 1) {
        vstore_half_rte(v, i0, (global half*)dst);
    } else if (d_type == 30) {
        ((global ushort*)dst)[i0] = f32_to_bf16(v);
    } else {
        ((global float*)dst)[i0] = v;
    }
}

// dst = act(gate) * up for 2-D rows of K (K % 32 == 0), and the result's
// 8-bit blocks for the next matrix product. Launch: global (K / 32, rows).
kernel void glu_q8(int gelu,
                   const global uchar* g, ulong g_off, ulong g_nb1,
                   const global uchar* u, ulong u_off, ulong u_nb1,
                   global uchar* d, ulong d_off, ulong d_nb1,
                   global uchar* q, ulong q_off, ulong ds_off, int K) {
    const int blk = get_global_id(0);
    const long row = get_global_id(1);
    if (blk >= K / 32) return;
    const global float* gr = LT_CPTR(float, g, g_off + row * g_nb1) + blk * 32;
    const global float* ur = LT_CPTR(float, u, u_off + row * u_nb1) + blk * 32;
    global float* dr = LT_PTR(float, d, d_off + row * d_nb1) + blk * 32;
    for (int j = 0; j < 32; ++j) dr[j] = apply_binary(gelu ? OP_GELU_MUL : OP_SILU_MUL, gr[j], ur[j]);
    q8_quantize_block(dr, LT_PTR(char, q, q_off + row * K) + blk * 32,
                      LT_PTR(float2, q, ds_off) + row * (K / 32) + blk);
}

// Bytes [off, off + n) of a buffer set to `value`, 16 per work-item (64-bit
// offsets: NVIDIA's clEnqueueFillBuffer faulted on buffers past 2 GiB).
kernel void fill_bytes(global uchar* d, ulong off, ulong n, uint value) {
    const ulong at = (ulong)get_global_id(0) * 16;
    if (at >= n) return;
    global uchar* p = d + off + at;
    const ulong end = min(n - at, (ulong)16);
    for (ulong i = 0; i < end; ++i) p[i] = (uchar)value;
}
