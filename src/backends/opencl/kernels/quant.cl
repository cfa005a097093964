// Activation quantization (f32 rows -> 8-bit blocks) and row lookup from
// tables of any supported type.

// Rows of K f32 values (strided) into 8-bit blocks. Launch: global (K / 32, rows).
kernel void quantize_q8(const global uchar* a, ulong a_off, ulong a_nb1,
                        global uchar* q, ulong q_off, ulong ds_off, int K) {
    const int blk = get_global_id(0);
    const long row = get_global_id(1);
    if (blk >= K / 32) return;
    q8_quantize_block(LT_CPTR(float, a, a_off + row * a_nb1) + blk * 32, LT_PTR(char, q, q_off + row * K) + blk * 32,
                      LT_PTR(float2, q, ds_off) + row * (K / 32) + blk);
}

// dst[K, M] = rows ids[M] of a plain table (f32, f16, bf16; rows strided).
// Launch: global (K, M).
kernel void get_rows_plain(const global uchar* t, ulong t_off, ulong t_nb1, int type, int n_rows,
                           const global uchar* idb, ulong id_off,
                           global uchar* d, ulong d_off, ulong d_nb1, int K) {
    const int i = get_global_id(0);
    const long r = get_global_id(1);
    if (i >= K) return;
    const int id = LT_CPTR(int, idb, id_off)[r];
    global float* out = LT_PTR(float, d, d_off + r * d_nb1);
    // The context validates ids; never read out of bounds.
    out[i] = (id < 0 || id >= n_rows) ? 0.0f : load_plain(t + t_off + (ulong)id * t_nb1, i, type);
}

// The same from a repacked quantized table (regions qs/qh/sc, see common.cl).
#define LT_GET_ROWS(T)                                                                                  \
    kernel void get_rows_##T(const global uchar* w, ulong qs_off, ulong qh_off, ulong sc_off, int n_rows, \
                             const global uchar* idb, ulong id_off,                                     \
                             global uchar* d, ulong d_off, ulong d_nb1, int K) {                        \
        const int i = get_global_id(0);                                                                 \
        const long r = get_global_id(1);                                                                \
        if (i >= K) return;                                                                             \
        const int id = LT_CPTR(int, idb, id_off)[r];                                                    \
        global float* out = LT_PTR(float, d, d_off + r * d_nb1);                                        \
        if (id < 0 || id >= n_rows) {                                                                   \
            out[i] = 0.0f;                                                                              \
            return;                                                                                     \
        }                                                                                               \
        const size_t blk = (size_t)id * (K / 32) + i / 32;                                              \
        out[i] = wdeq_##T(w + qs_off, LT_CPTR(uint, w, qh_off), LT_CPTR(ushort, w, sc_off), blk, i % 32);  \
    }
LT_GET_ROWS(q4_0)
LT_GET_ROWS(q4_1)
LT_GET_ROWS(q5_0)
LT_GET_ROWS(q5_1)
LT_GET_ROWS(q8_0)
LT_GET_ROWS(q2_K)
LT_GET_ROWS(q3_K)
LT_GET_ROWS(q4_K)
LT_GET_ROWS(q5_K)
LT_GET_ROWS(q6_K)
LT_GET_ROWS(iq4_nl)
LT_GET_ROWS(iq4_xs)
