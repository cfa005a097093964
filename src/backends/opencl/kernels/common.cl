// Helpers every Lantern OpenCL program starts with: the host prepends this
// file to each kernel file (program_cache.cpp). Written in OpenCL C 1.2.
//
// Defines the host sets from the device's capabilities:
//   LT_RED_WG     work-group size of the row-reduction kernels (power of two)
//   LT_SUBGROUPS  1: sub_group_reduce_* usable (cl_khr_subgroups or cl_intel_subgroups)
//   LT_QCOM_SG    1: Qualcomm; reduction kernels ask for half-wave subgroups
//   LT_NV_PTX     1: NVIDIA; inline PTX (dp4a, mma) usable
//   LT_MMA_EMULATE 1: test builds emulate the PTX mma through local memory
//   LT_MV_WG, LT_MV_TPR, LT_MV_RPT, LT_MV_U  one-row matrix-vector kernels: group
//                 size, work-items per row slot, rows per slot, blocks per work-item
//                 and row loaded ahead (matvec.cl)
//   LT_MVG_RPT, LT_MVG_U  the gated one-row kernels: gate and up rows per slot,
//                 blocks loaded ahead (groups of 32 rows)
//   LT_MVA_RPT    one-row products that end in an add + RMSNorm: rows per slot (groups of 32 rows)
//   LT_MV8_TPR    matrix-vector kernels for 2..8 rows: work-items per row (groups of 32 rows)
//
// Tensors are passed as (buffer, byte offset) pairs; strides are in bytes.
// Half-precision data goes through vload_half / vstore_half, so devices
// without cl_khr_fp16 work.

#ifndef LT_RED_WG
#define LT_RED_WG 256
#endif
#ifndef LT_SUBGROUPS
#define LT_SUBGROUPS 0
#endif
#ifndef LT_QCOM_SG
#define LT_QCOM_SG 0
#endif
#ifndef LT_NV_PTX
#define LT_NV_PTX 0
#endif
#ifndef LT_MMA_EMULATE
#define LT_MMA_EMULATE 0
#endif
#ifndef LT_MV_WG
#define LT_MV_WG 256
#endif
#ifndef LT_MV_TPR
#define LT_MV_TPR 32
#endif
#ifndef LT_MV_RPT
#define LT_MV_RPT 2
#endif
#ifndef LT_MV_U
#define LT_MV_U 4
#endif
#ifndef LT_MVG_RPT
#define LT_MVG_RPT 4
#endif
#ifndef LT_MVG_U
#define LT_MVG_U 2
#endif
#ifndef LT_MVA_RPT
#define LT_MVA_RPT 1
#endif
#ifndef LT_MV8_TPR
#define LT_MV8_TPR 8
#endif


#if LT_SUBGROUPS && defined(cl_khr_subgroups)
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#elif LT_SUBGROUPS && defined(cl_intel_subgroups)
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#endif

#if LT_QCOM_SG
#pragma OPENCL EXTENSION cl_qcom_reqd_sub_group_size : enable
#define LT_REDUCTION_ATTR __attribute__((qcom_reqd_sub_group_size("half")))
#else
#define LT_REDUCTION_ATTR
#endif

// Typed pointer `off` bytes into a buffer.
#define LT_PTR(T, base, off) ((global T*)((global uchar*)(base) + (off)))
#define LT_CPTR(T, base, off) ((const global T*)((const global uchar*)(base) + (off)))

// Stands for -infinity: fast math lets the compiler assume finite values.
#define LT_NEG_BIG (-3.0e38f)

// ---- row stores --------------------------------------------------------------------
// y[i] = src[i] * scale (times wt[i] when has_w) for this work-item's
// elements i = first, first + step, ... below n. Eight elements' loads go
// before their stores: y may alias src and wt for all the compiler knows,
// and a store between the loads made each element its own round trip
// (sixteen per 4,096-wide row).
inline void store_scaled_row(global float* y, const global float* src, const global float* wt, int has_w,
                             float scale, int n, int first, int step) {
    for (int i0 = first; i0 < n; i0 += 8 * step) {
        float v[8];
        for (int u = 0; u < 8; ++u) {
            const int i = i0 + u * step;
            v[u] = i < n ? (has_w ? src[i] * scale * wt[i] : src[i] * scale) : 0.0f;
        }
        for (int u = 0; u < 8; ++u) {
            if (i0 + u * step < n) y[i0 + u * step] = v[u];
        }
    }
}

// ---- reductions over a work-group (1-D launches) ----------------------------------
// Every work-item passes one value and gets the total. `tmp` holds at least
// get_local_size(0) floats; the local size is a power of two.

inline float wg_sum(float v, local float* tmp) {
#if LT_SUBGROUPS
    v = sub_group_reduce_add(v);
    if (get_sub_group_local_id() == 0) tmp[get_sub_group_id()] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = 0.0f;
    const uint n = get_num_sub_groups();
    for (uint i = 0; i < n; ++i) r += tmp[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
#else
    const uint l = get_local_id(0);
    tmp[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) tmp[l] += tmp[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = tmp[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
#endif
}

inline float wg_max(float v, local float* tmp) {
#if LT_SUBGROUPS
    v = sub_group_reduce_max(v);
    if (get_sub_group_local_id() == 0) tmp[get_sub_group_id()] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = LT_NEG_BIG;
    const uint n = get_num_sub_groups();
    for (uint i = 0; i < n; ++i) r = fmax(r, tmp[i]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
#else
    const uint l = get_local_id(0);
    tmp[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) tmp[l] = fmax(tmp[l], tmp[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = tmp[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
#endif
}

// ---- number formats --------------------------------------------------------------

inline float bf16_to_f32(ushort h) { return as_float((uint)h << 16); }

// Round to nearest even; NaN stays NaN (as the CPU's f32_to_bf16).
inline ushort f32_to_bf16(float f) {
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 64u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

// v rounded to the nearest fp16 value (ties to even).
inline float round_to_half(float v) {
    ushort h;
    vstore_half_rte(v, 0, (private half*)&h);
    return vload_half(0, (private half*)&h);
}

// Loads element i of a row of type `type` (0 f32, 1 f16, 30 bf16: DType ids).
inline float load_plain(const global uchar* row, long i, int type) {
    if (type == 1) return vload_half(i, (const global half*)row);
    if (type == 30) return bf16_to_f32(((const global ushort*)row)[i]);
    return ((const global float*)row)[i];
}

// ---- 8-bit activations ---------------------------------------------------------
// Rows feeding a quantized matrix product are quantized in blocks of 32 as
// the CPU quantizes them for its Q8_0/Q8_1 dot products: d = half(amax / 127),
// q = round-to-even(clamp(x / d, -127, 127)). A row of K values is K int8
// quants (row stride K bytes) and K / 32 float2 (d, sum of the block's q).

// The block's scale from its largest magnitude, and one value's quant.
inline float q8_scale(float amax) { return round_to_half(amax / 127.0f); }
inline char q8_quant(float x, float inv) { return (char)rint(clamp(x * inv, -127.0f, 127.0f)); }

#define LT_Q8_QUANTIZE_BLOCK(NAME, XSPACE, SPACE)                                                   \
    inline void NAME(const XSPACE float* x, SPACE char* q, SPACE float2* ds) {                        \
        float v[32];                                                                                  \
        float amax = 0.0f;                                                                            \
        for (int j = 0; j < 32; ++j) {                                                                \
            v[j] = x[j];                                                                              \
            amax = fmax(amax, fabs(v[j]));                                                            \
        }                                                                                             \
        const float d = q8_scale(amax);                                                               \
        const float inv = d != 0.0f ? 1.0f / d : 0.0f;                                                \
        int sum = 0;                                                                                  \
        for (int j = 0; j < 32; j += 4) {                                                             \
            char4 c;                                                                                  \
            c.x = q8_quant(v[j + 0], inv);                                                            \
            c.y = q8_quant(v[j + 1], inv);                                                            \
            c.z = q8_quant(v[j + 2], inv);                                                            \
            c.w = q8_quant(v[j + 3], inv);                                                            \
            sum += (int)c.x + (int)c.y + (int)c.z + (int)c.w;                                         \
            vstore4(c, j / 4, q);                                                                     \
        }                                                                                             \
        *ds = (float2)(d, (float)sum);                                                                \
    }
LT_Q8_QUANTIZE_BLOCK(q8_quantize_block, global, global)
LT_Q8_QUANTIZE_BLOCK(q8_quantize_block_l2g, local, global)

// ---- 4-way byte dot products -------------------------------------------------------
// dot4_us: a holds 4 unsigned bytes, b 4 signed bytes; dot4_ss: both signed.
// Byte 0 (the lowest) of a meets byte 0 of b.

#if LT_NV_PTX
inline int dot4_us(uint a, uint b, int c) {
    int d;
    __asm__("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
inline int dot4_ss(uint a, uint b, int c) {
    int d;
    __asm__("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#else
inline int dot4_us(uint a, uint b, int c) {
    const uchar4 x = as_uchar4(a);
    const char4 y = as_char4(b);
    return c + (int)x.x * (int)y.x + (int)x.y * (int)y.y + (int)x.z * (int)y.z + (int)x.w * (int)y.w;
}
inline int dot4_ss(uint a, uint b, int c) {
    const char4 x = as_char4(a);
    const char4 y = as_char4(b);
    return c + (int)x.x * (int)y.x + (int)x.y * (int)y.y + (int)x.z * (int)y.z + (int)x.w * (int)y.w;
}
#endif

// Sum over the 32 work-items of a warp (NVIDIA: consecutive local ids of a
// 1-D group), every one getting the total; the whole warp must call it.
#if LT_NV_PTX
inline float warp_sum32(float v) {
    for (int m = 16; m > 0; m >>= 1) {
        uint r;
        __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
        v += as_float(r);
    }
    return v;
}
#endif

// Four bytes x (each 0..255 - o, o <= 128) minus o per byte, as signed bytes.
#define LT_BYTES_MINUS(x, o4) ((((x) | 0x80808080u) - (o4)) ^ 0x80808080u)

// Spreads bits 0..3 of h to bit 4 of bytes 0..3.
inline uint spread_high_bits(uint h) {
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// ---- repacked 32-element weight blocks ------------------------------------------------
// Quantized weights are repacked at upload (weight_layout.h): block i of a
// matrix (i = row * blocks_per_row + b) keeps its quants at qs + i * QS bytes
// (QS = 16 for 4/5-bit types, 32 for Q8_0), the fifth bits of Q5_x at qh[i],
// and its scale d (half) or scale and min (d, m: two halves) at sc. Nibbles
// keep GGUF's order: byte j holds element j (low) and j + 16 (high).
//
// Per type T:
//   wdot_T(qs, qh, sc, i, a0, a1, ads)  block i against 8-bit activations (8 words
//                                   a0, a1) with (d, sum) ads: the float contribution,
//                                   computed as the CPU does (integer block sum,
//                                   then * (d_w * d_a), then + m_w * d_a * sum)
//   wword_T(qs, qh, i, k)           elements 4k..4k+3 as signed bytes (Q4_1/Q5_1:
//                                   the unsigned quants, < 32)
//   wscale_T(sc, i)                 (d, m) with m = 0 for the _0 types
//   wscaleh_T(sc, i, h)             (d, m) of elements 16h .. 16h + 15 (the K-quants
//                                   with groups of 16 have two per block)

#define QS_q4_0 16
#define QS_q4_1 16
#define QS_q5_0 16
#define QS_q5_1 16
#define QS_q8_0 32

inline float2 wscale_q4_0(const global ushort* sc, size_t i) { return (float2)(vload_half(i, (const global half*)sc), 0.0f); }
inline float2 wscale_q5_0(const global ushort* sc, size_t i) { return wscale_q4_0(sc, i); }
inline float2 wscale_q8_0(const global ushort* sc, size_t i) { return wscale_q4_0(sc, i); }
inline float2 wscale_q4_1(const global ushort* sc, size_t i) {
    return (float2)(vload_half(2 * i, (const global half*)sc), vload_half(2 * i + 1, (const global half*)sc));
}
inline float2 wscale_q5_1(const global ushort* sc, size_t i) { return wscale_q4_1(sc, i); }

inline uint nibbles_q4(const global uchar* qs, size_t i, int k) {
    const uint w = ((const global uint*)(qs + i * 16))[k & 3];
    return k < 4 ? (w & 0x0F0F0F0Fu) : ((w >> 4) & 0x0F0F0F0Fu);
}
inline uint quants_q5(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return nibbles_q4(qs, i, k) | spread_high_bits(qh[i] >> (4 * k));
}

inline uint wword_q4_0(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return LT_BYTES_MINUS(nibbles_q4(qs, i, k), 0x08080808u);
}
inline uint wword_q4_1(const global uchar* qs, const global uint* qh, size_t i, int k) { return nibbles_q4(qs, i, k); }
inline uint wword_q5_0(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return LT_BYTES_MINUS(quants_q5(qs, qh, i, k), 0x10101010u);
}
inline uint wword_q5_1(const global uchar* qs, const global uint* qh, size_t i, int k) { return quants_q5(qs, qh, i, k); }
inline uint wword_q8_0(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return ((const global uint*)(qs + i * 32))[k];
}

// Integer dot of a 4/5-bit block's unsigned quants (u[j]) with activations.
inline int idot_u4(uint4 w, uint4 a0, uint4 a1) {
    int s = 0;
    s = dot4_us(w.x & 0x0F0F0F0Fu, a0.x, s);
    s = dot4_us(w.y & 0x0F0F0F0Fu, a0.y, s);
    s = dot4_us(w.z & 0x0F0F0F0Fu, a0.z, s);
    s = dot4_us(w.w & 0x0F0F0F0Fu, a0.w, s);
    s = dot4_us((w.x >> 4) & 0x0F0F0F0Fu, a1.x, s);
    s = dot4_us((w.y >> 4) & 0x0F0F0F0Fu, a1.y, s);
    s = dot4_us((w.z >> 4) & 0x0F0F0F0Fu, a1.z, s);
    s = dot4_us((w.w >> 4) & 0x0F0F0F0Fu, a1.w, s);
    return s;
}
inline int idot_u5(uint4 w, uint h, uint4 a0, uint4 a1) {
    int s = 0;
    s = dot4_us((w.x & 0x0F0F0F0Fu) | spread_high_bits(h), a0.x, s);
    s = dot4_us((w.y & 0x0F0F0F0Fu) | spread_high_bits(h >> 4), a0.y, s);
    s = dot4_us((w.z & 0x0F0F0F0Fu) | spread_high_bits(h >> 8), a0.z, s);
    s = dot4_us((w.w & 0x0F0F0F0Fu) | spread_high_bits(h >> 12), a0.w, s);
    s = dot4_us(((w.x >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 16), a1.x, s);
    s = dot4_us(((w.y >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 20), a1.y, s);
    s = dot4_us(((w.z >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 24), a1.z, s);
    s = dot4_us(((w.w >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 28), a1.w, s);
    return s;
}

// A block's raw data, loaded ahead of its dot product: the quants (q1: Q8_0's
// second 16 bytes), Q5_x's fifth bits, the scale d and min m (m = 0 for the
// _0 types). wload_T(qs, qh, sc, i) loads block i; wdotb_T(blk, a0, a1, ads)
// is wdot_T's arithmetic on it.
typedef struct {
    uint4 q0, q1;
    uint h;
    float2 dm;
    float2 dm2;  // K-quants with groups of 16: see wload_q2_K
} lt_wblk;

#define LT_DEFINE_WLOAD(T, Q1, H)                                                                   \
    inline lt_wblk wload_##T(const global uchar* qs, const global uint* qh, const global ushort* sc,  \
                             size_t i) {                                                            \
        lt_wblk w;                                                                                  \
        w.q0 = ((const global uint4*)qs)[(Q1) ? 2 * i : i];                                         \
        w.q1 = (Q1) ? ((const global uint4*)qs)[2 * i + 1] : (uint4)(0u);                           \
        w.h = (H) ? qh[i] : 0u;                                                                     \
        w.dm = wscale_##T(sc, i);                                                                   \
        w.dm2 = (float2)(0.0f);                                                                     \
        return w;                                                                                   \
    }
LT_DEFINE_WLOAD(q4_0, 0, 0)
LT_DEFINE_WLOAD(q4_1, 0, 0)
LT_DEFINE_WLOAD(q5_0, 0, 1)
LT_DEFINE_WLOAD(q5_1, 0, 1)
LT_DEFINE_WLOAD(q8_0, 1, 0)

inline float wdotb_q4_0(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    const int s = idot_u4(w.q0, a0, a1) - 8 * (int)ads.y;
    return (float)s * (w.dm.x * ads.x);
}
inline float wdotb_q4_1(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    return (float)idot_u4(w.q0, a0, a1) * (w.dm.x * ads.x) + w.dm.y * (ads.x * ads.y);
}
inline float wdotb_q5_0(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    const int s = idot_u5(w.q0, w.h, a0, a1) - 16 * (int)ads.y;
    return (float)s * (w.dm.x * ads.x);
}
inline float wdotb_q5_1(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    return (float)idot_u5(w.q0, w.h, a0, a1) * (w.dm.x * ads.x) + w.dm.y * (ads.x * ads.y);
}
inline float wdotb_q8_0(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    int s = 0;
    s = dot4_ss(w.q0.x, a0.x, s);
    s = dot4_ss(w.q0.y, a0.y, s);
    s = dot4_ss(w.q0.z, a0.z, s);
    s = dot4_ss(w.q0.w, a0.w, s);
    s = dot4_ss(w.q1.x, a1.x, s);
    s = dot4_ss(w.q1.y, a1.y, s);
    s = dot4_ss(w.q1.z, a1.z, s);
    s = dot4_ss(w.q1.w, a1.w, s);
    return (float)s * (w.dm.x * ads.x);
}

// ---- K-quants, as 32-element blocks (weight_layout.h) ---------------------------------
// A block's quants q (wword_T: Q3_K and Q6_K signed, q - 4 and q - 32; the
// others unsigned) and per group of 16 (h = 0, 1) a scale and an offset:
// value = q * d + m (wscaleh_T). Q4_K and Q5_K have one scale per block and
// take Q4_1's and Q5_1's arithmetic.

#define QS_q2_K 8
#define QS_q3_K 8
#define QS_q4_K 16
#define QS_q5_K 16
#define QS_q6_K 16

// Block i's two scale bytes, and its super-block's (d, dmin), from the
// super-block's 20-byte record (eight scale pairs, then d and dmin).
inline uint kq_scales(const global ushort* sc, size_t i) { return sc[(i >> 3) * 10 + (i & 7)]; }
inline float2 kq_dmin(const global ushort* sc, size_t i) {
    const global half* r = (const global half*)(sc + (i >> 3) * 10 + 8);
    return (float2)(vload_half(0, r), vload_half(1, r));
}
// Elements 4k .. 4k + 3 of a block's two-bit fields (its 8-byte plane at p),
// one per byte.
inline uint two_bits(uint2 p, int k) { return ((k < 4 ? p.x : p.y) >> (2 * (k & 3))) & 0x03030303u; }
inline uint2 plane8(const global void* p, size_t i) { return ((const global uint2*)p)[i]; }
// Word k (elements 4k .. 4k + 3) of a block's nibbles q.
inline uint nibble_word(uint4 q, int k) {
    const uint w = (k & 3) == 0 ? q.x : (k & 3) == 1 ? q.y : (k & 3) == 2 ? q.z : q.w;
    return k < 4 ? (w & 0x0F0F0F0Fu) : ((w >> 4) & 0x0F0F0F0Fu);
}
// Q3_K's third bits (bit e: element e) of elements 4k .. 4k + 3 at bit 2 of each byte.
inline uint third_bits(uint h, int k) { return spread_high_bits(h >> (4 * k)) >> 2; }

inline float2 wscaleh_q4_K(const global ushort* sc, size_t i, int h) {
    const uint p = kq_scales(sc, i);
    const float2 dm = kq_dmin(sc, i);
    return (float2)(dm.x * (float)(p & 0xFFu), -dm.y * (float)(p >> 8));
}
inline float2 wscaleh_q5_K(const global ushort* sc, size_t i, int h) { return wscaleh_q4_K(sc, i, h); }
inline float2 wscaleh_q2_K(const global ushort* sc, size_t i, int h) {
    const uint b = (kq_scales(sc, i) >> (8 * h)) & 0xFFu;
    const float2 dm = kq_dmin(sc, i);
    return (float2)(dm.x * (float)(b & 15u), -dm.y * (float)(b >> 4));
}
// Groups' signed scales times d (Q3_K, Q6_K).
inline float2 kq_signed_scales(const global ushort* sc, size_t i) {
    const uint p = kq_scales(sc, i);
    const float d = kq_dmin(sc, i).x;
    return (float2)(d * (float)(char)(uchar)(p & 0xFFu), d * (float)(char)(uchar)(p >> 8));
}
inline float2 wscaleh_q3_K(const global ushort* sc, size_t i, int h) {
    const float2 s = kq_signed_scales(sc, i);
    return (float2)(h == 0 ? s.x : s.y, 0.0f);
}
inline float2 wscaleh_q6_K(const global ushort* sc, size_t i, int h) { return wscaleh_q3_K(sc, i, h); }
// One (d, m) per block: the types without groups of 16.
inline float2 wscale_q4_K(const global ushort* sc, size_t i) { return wscaleh_q4_K(sc, i, 0); }
inline float2 wscale_q5_K(const global ushort* sc, size_t i) { return wscaleh_q5_K(sc, i, 0); }

inline uint wword_q4_K(const global uchar* qs, const global uint* qh, size_t i, int k) { return nibbles_q4(qs, i, k); }
inline uint wword_q5_K(const global uchar* qs, const global uint* qh, size_t i, int k) { return quants_q5(qs, qh, i, k); }
inline uint wword_q2_K(const global uchar* qs, const global uint* qh, size_t i, int k) { return two_bits(plane8(qs, i), k); }
inline uint wword_q3_K(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return LT_BYTES_MINUS(two_bits(plane8(qs, i), k) | third_bits(qh[i], k), 0x04040404u);
}
inline uint wword_q6_K(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return LT_BYTES_MINUS(nibbles_q4(qs, i, k) | two_bits(plane8(qh, i), k) << 4, 0x20202020u);
}

// The loads: Q4_K, Q5_K as Q4_1, Q5_1 (dm = (d * sc, -dmin * m)). Q2_K: the
// two-bit plane in q0.xy, dm the groups' d * sc, dm2 their dmin * m; Q3_K:
// q0.xy and its third bits in h, dm the groups' d * sc; Q6_K: the nibbles
// in q0, the high bits in q1.xy, dm as Q3_K's.
inline lt_wblk wload_q4_K(const global uchar* qs, const global uint* qh, const global ushort* sc, size_t i) {
    lt_wblk w;
    w.q0 = ((const global uint4*)qs)[i];
    w.q1 = (uint4)(0u);
    w.h = 0u;
    w.dm = wscale_q4_K(sc, i);
    w.dm2 = (float2)(0.0f);
    return w;
}
inline lt_wblk wload_q5_K(const global uchar* qs, const global uint* qh, const global ushort* sc, size_t i) {
    lt_wblk w = wload_q4_K(qs, qh, sc, i);
    w.h = qh[i];
    return w;
}
inline lt_wblk wload_q2_K(const global uchar* qs, const global uint* qh, const global ushort* sc, size_t i) {
    lt_wblk w;
    const uint2 t = plane8(qs, i);
    w.q0 = (uint4)(t.x, t.y, 0u, 0u);
    w.q1 = (uint4)(0u);
    w.h = 0u;
    const uint p = kq_scales(sc, i);
    const float2 dm = kq_dmin(sc, i);
    w.dm = (float2)(dm.x * (float)(p & 15u), dm.x * (float)((p >> 8) & 15u));
    w.dm2 = (float2)(dm.y * (float)((p >> 4) & 15u), dm.y * (float)(p >> 12));
    return w;
}
inline lt_wblk wload_q3_K(const global uchar* qs, const global uint* qh, const global ushort* sc, size_t i) {
    lt_wblk w;
    const uint2 t = plane8(qs, i);
    w.q0 = (uint4)(t.x, t.y, 0u, 0u);
    w.q1 = (uint4)(0u);
    w.h = qh[i];
    w.dm = kq_signed_scales(sc, i);
    w.dm2 = (float2)(0.0f);
    return w;
}
inline lt_wblk wload_q6_K(const global uchar* qs, const global uint* qh, const global ushort* sc, size_t i) {
    lt_wblk w;
    w.q0 = ((const global uint4*)qs)[i];
    const uint2 t = plane8(qh, i);
    w.q1 = (uint4)(t.x, t.y, 0u, 0u);
    w.h = 0u;
    w.dm = kq_signed_scales(sc, i);
    w.dm2 = (float2)(0.0f);
    return w;
}

inline float wdotb_q4_K(lt_wblk w, uint4 a0, uint4 a1, float2 ads) { return wdotb_q4_1(w, a0, a1, ads); }
inline float wdotb_q5_K(lt_wblk w, uint4 a0, uint4 a1, float2 ads) { return wdotb_q5_1(w, a0, a1, ads); }
// Groups of 16: integer sums per group of a block's eight words of quants
// (q, from wword's order: words 0..3 against a0, 4..7 against a1; Q2_K's
// unsigned), then d_a * (dm.x s0 + dm.y s1), less Q2_K's mins times the
// groups' activation sums (the second group's: the block's sum less the
// first's).
inline int2 group_sums(const uint* q, uint4 a0, uint4 a1, int is_unsigned) {
    const uint a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    int2 s = (int2)(0, 0);
    for (int k = 0; k < 4; ++k) {
        s.x = is_unsigned ? dot4_us(q[k], a[k], s.x) : dot4_ss(q[k], a[k], s.x);
        s.y = is_unsigned ? dot4_us(q[4 + k], a[4 + k], s.y) : dot4_ss(q[4 + k], a[4 + k], s.y);
    }
    return s;
}
inline float wdotb_q2_K(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    uint q[8];
    for (int k = 0; k < 8; ++k) q[k] = two_bits(w.q0.xy, k);
    const int2 s = group_sums(q, a0, a1, 1);
    int n0 = 0;
    n0 = dot4_ss(0x01010101u, a0.x, n0);
    n0 = dot4_ss(0x01010101u, a0.y, n0);
    n0 = dot4_ss(0x01010101u, a0.z, n0);
    n0 = dot4_ss(0x01010101u, a0.w, n0);
    const float f0 = (float)n0, f1 = ads.y - f0;
    return ads.x * (w.dm.x * (float)s.x + w.dm.y * (float)s.y - (w.dm2.x * f0 + w.dm2.y * f1));
}
inline float wdotb_q3_K(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    uint q[8];
    for (int k = 0; k < 8; ++k) q[k] = LT_BYTES_MINUS(two_bits(w.q0.xy, k) | third_bits(w.h, k), 0x04040404u);
    const int2 s = group_sums(q, a0, a1, 0);
    return ads.x * (w.dm.x * (float)s.x + w.dm.y * (float)s.y);
}
inline float wdotb_q6_K(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    uint q[8];
    for (int k = 0; k < 8; ++k) q[k] = LT_BYTES_MINUS(nibble_word(w.q0, k) | two_bits(w.q1.xy, k) << 4, 0x20202020u);
    const int2 s = group_sums(q, a0, a1, 0);
    return ads.x * (w.dm.x * (float)s.x + w.dm.y * (float)s.y);
}

// ---- the non-linear 4-bit types, as 32-element blocks (weight_layout.h) -----------------
// A 4-bit quant indexes a table of 16 signed values (quant/iq4.h); the
// integer dot products take the value as the weight's signed 8-bit quant.
// IQ4_NL: value = d * table[q], d per block as Q4_0's; IQ4_XS: value =
// d * s * table[q], s its block's signed scale (first byte of the block's
// pair in the K-quant super-block record), d the record's.

// The table, bytes in order: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
#define LT_IQ4_TABLE ((uint4)(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u))

// iq4_values: four indices (one per byte, each < 16) as their table values.
// idot_iq4: the integer dot of a block's 16 bytes of nibbles with activations.
#if LT_NV_PTX
inline uint byte_perm(uint lo, uint hi, uint sel) {
    uint d;
    __asm__("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(sel));
    return d;
}
// The values of the four indices in bits 0..15 (index e in bits 4e..4e+3):
// two byte permutes look their low three bits up in each half of the
// table, a third picks the half by the fourth bit.
inline uint iq4_values16(uint s) {
    const uint4 t = LT_IQ4_TABLE;
    const uint lo = byte_perm(t.x, t.y, s & 0x7777u), hi = byte_perm(t.z, t.w, s & 0x7777u);
    return byte_perm(lo, hi, 0x3210u | ((s >> 1) & 0x4444u));
}
inline uint iq4_values(uint q) {
    const uint p = q | (q >> 4);  // bytes 0 and 2: two indices each
    return iq4_values16((p & 0xFFu) | ((p >> 8) & 0xFF00u));
}
// Each 16 bits of a quant word are four indices as they stand: elements
// j, j + 16, j + 1, j + 17 (byte j: j low, j + 16 high). The activations
// are put in that order instead (one permute per word, shared by a row slot's rows).
inline int idot_iq4(uint4 w, uint4 a0, uint4 a1) {
    const uint q[4] = {w.x, w.y, w.z, w.w}, x[4] = {a0.x, a0.y, a0.z, a0.w}, y[4] = {a1.x, a1.y, a1.z, a1.w};
    int s = 0;
    for (int c = 0; c < 4; ++c) {
        s = dot4_ss(iq4_values16(q[c]), byte_perm(x[c], y[c], 0x5140u), s);
        s = dot4_ss(iq4_values16(q[c] >> 16), byte_perm(x[c], y[c], 0x7362u), s);
    }
    return s;
}
#else
inline uint iq4_values(uint q) { return as_uint(shuffle(as_char16(LT_IQ4_TABLE), as_uchar4(q))); }
inline int idot_iq4(uint4 w, uint4 a0, uint4 a1) {
    int s = 0;
    s = dot4_ss(iq4_values(w.x & 0x0F0F0F0Fu), a0.x, s);
    s = dot4_ss(iq4_values(w.y & 0x0F0F0F0Fu), a0.y, s);
    s = dot4_ss(iq4_values(w.z & 0x0F0F0F0Fu), a0.z, s);
    s = dot4_ss(iq4_values(w.w & 0x0F0F0F0Fu), a0.w, s);
    s = dot4_ss(iq4_values((w.x >> 4) & 0x0F0F0F0Fu), a1.x, s);
    s = dot4_ss(iq4_values((w.y >> 4) & 0x0F0F0F0Fu), a1.y, s);
    s = dot4_ss(iq4_values((w.z >> 4) & 0x0F0F0F0Fu), a1.z, s);
    s = dot4_ss(iq4_values((w.w >> 4) & 0x0F0F0F0Fu), a1.w, s);
    return s;
}
#endif

inline float2 wscale_iq4_nl(const global ushort* sc, size_t i) { return wscale_q4_0(sc, i); }
inline float2 wscale_iq4_xs(const global ushort* sc, size_t i) {
    return (float2)(kq_dmin(sc, i).x * (float)(char)(uchar)(kq_scales(sc, i) & 0xFFu), 0.0f);
}
inline uint wword_iq4_nl(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return iq4_values(nibbles_q4(qs, i, k));
}
inline uint wword_iq4_xs(const global uchar* qs, const global uint* qh, size_t i, int k) {
    return wword_iq4_nl(qs, qh, i, k);
}
LT_DEFINE_WLOAD(iq4_nl, 0, 0)
LT_DEFINE_WLOAD(iq4_xs, 0, 0)

inline float wdotb_iq4_nl(lt_wblk w, uint4 a0, uint4 a1, float2 ads) {
    return (float)idot_iq4(w.q0, a0, a1) * (w.dm.x * ads.x);
}
inline float wdotb_iq4_xs(lt_wblk w, uint4 a0, uint4 a1, float2 ads) { return wdotb_iq4_nl(w, a0, a1, ads); }

#define LT_DEFINE_WDOT(T)                                                                           \
    inline float wdot_##T(const global uchar* qs, const global uint* qh, const global ushort* sc,    \
                          size_t i, uint4 a0, uint4 a1, float2 ads) {                               \
        return wdotb_##T(wload_##T(qs, qh, sc, i), a0, a1, ads);                                    \
    }
LT_DEFINE_WDOT(q4_0)
LT_DEFINE_WDOT(q4_1)
LT_DEFINE_WDOT(q5_0)
LT_DEFINE_WDOT(q5_1)
LT_DEFINE_WDOT(q8_0)
LT_DEFINE_WDOT(q2_K)
LT_DEFINE_WDOT(q3_K)
LT_DEFINE_WDOT(q4_K)
LT_DEFINE_WDOT(q5_K)
LT_DEFINE_WDOT(q6_K)
LT_DEFINE_WDOT(iq4_nl)
LT_DEFINE_WDOT(iq4_xs)

// The types with one (d, m) per block, for either group of 16.
#define LT_DEFINE_WSCALEH(T) \
    inline float2 wscaleh_##T(const global ushort* sc, size_t i, int h) { return wscale_##T(sc, i); }
LT_DEFINE_WSCALEH(q4_0)
LT_DEFINE_WSCALEH(q4_1)
LT_DEFINE_WSCALEH(q5_0)
LT_DEFINE_WSCALEH(q5_1)
LT_DEFINE_WSCALEH(q8_0)
LT_DEFINE_WSCALEH(iq4_nl)
LT_DEFINE_WSCALEH(iq4_xs)

// Element j (0..31) of block i, dequantized: wdeq_T(qs, qh, sc, i, j).
#define LT_DEFINE_DEQUANT(T)                                                                        \
    inline float wdeq_##T(const global uchar* qs, const global uint* qh, const global ushort* sc,    \
                          size_t i, int j) {                                                        \
        const uint w = wword_##T(qs, qh, i, j / 4);                                                 \
        const int q = (int)(char)(uchar)((w >> (8 * (j % 4))) & 0xFFu);                             \
        const float2 dm = wscaleh_##T(sc, i, j / 16);                                               \
        return (float)q * dm.x + dm.y;                                                              \
    }
LT_DEFINE_DEQUANT(q4_0)
LT_DEFINE_DEQUANT(q4_1)
LT_DEFINE_DEQUANT(q5_0)
LT_DEFINE_DEQUANT(q5_1)
LT_DEFINE_DEQUANT(q8_0)
LT_DEFINE_DEQUANT(q2_K)
LT_DEFINE_DEQUANT(q3_K)
LT_DEFINE_DEQUANT(q4_K)
LT_DEFINE_DEQUANT(q5_K)
LT_DEFINE_DEQUANT(q6_K)
LT_DEFINE_DEQUANT(iq4_nl)
LT_DEFINE_DEQUANT(iq4_xs)

// All 32 elements of block i as 8 words of signed bytes (as wword_T, one load).
inline void wunpack_q4(const global uchar* qs, size_t i, uint o4, uint* out) {
    const uint4 w = ((const global uint4*)qs)[i];
    out[0] = LT_BYTES_MINUS(w.x & 0x0F0F0F0Fu, o4);
    out[1] = LT_BYTES_MINUS(w.y & 0x0F0F0F0Fu, o4);
    out[2] = LT_BYTES_MINUS(w.z & 0x0F0F0F0Fu, o4);
    out[3] = LT_BYTES_MINUS(w.w & 0x0F0F0F0Fu, o4);
    out[4] = LT_BYTES_MINUS((w.x >> 4) & 0x0F0F0F0Fu, o4);
    out[5] = LT_BYTES_MINUS((w.y >> 4) & 0x0F0F0F0Fu, o4);
    out[6] = LT_BYTES_MINUS((w.z >> 4) & 0x0F0F0F0Fu, o4);
    out[7] = LT_BYTES_MINUS((w.w >> 4) & 0x0F0F0F0Fu, o4);
}
inline void wunpack_q5(const global uchar* qs, const global uint* qh, size_t i, uint o4, uint* out) {
    const uint4 w = ((const global uint4*)qs)[i];
    const uint h = qh[i];
    out[0] = LT_BYTES_MINUS((w.x & 0x0F0F0F0Fu) | spread_high_bits(h), o4);
    out[1] = LT_BYTES_MINUS((w.y & 0x0F0F0F0Fu) | spread_high_bits(h >> 4), o4);
    out[2] = LT_BYTES_MINUS((w.z & 0x0F0F0F0Fu) | spread_high_bits(h >> 8), o4);
    out[3] = LT_BYTES_MINUS((w.w & 0x0F0F0F0Fu) | spread_high_bits(h >> 12), o4);
    out[4] = LT_BYTES_MINUS(((w.x >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 16), o4);
    out[5] = LT_BYTES_MINUS(((w.y >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 20), o4);
    out[6] = LT_BYTES_MINUS(((w.z >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 24), o4);
    out[7] = LT_BYTES_MINUS(((w.w >> 4) & 0x0F0F0F0Fu) | spread_high_bits(h >> 28), o4);
}
inline void wunpack_q4_0(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q4(qs, i, 0x08080808u, out); }
inline void wunpack_q4_1(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q4(qs, i, 0u, out); }
inline void wunpack_q5_0(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q5(qs, qh, i, 0x10101010u, out); }
inline void wunpack_q5_1(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q5(qs, qh, i, 0u, out); }
inline void wunpack_q4_K(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q4(qs, i, 0u, out); }
inline void wunpack_q5_K(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_q5(qs, qh, i, 0u, out); }
inline void wunpack_q8_0(const global uchar* qs, const global uint* qh, size_t i, uint* out) {
    const uint4 w0 = ((const global uint4*)qs)[2 * i];
    const uint4 w1 = ((const global uint4*)qs)[2 * i + 1];
    out[0] = w0.x; out[1] = w0.y; out[2] = w0.z; out[3] = w0.w;
    out[4] = w1.x; out[5] = w1.y; out[6] = w1.z; out[7] = w1.w;
}
inline void wunpack_iq4_nl(const global uchar* qs, const global uint* qh, size_t i, uint* out) {
    wunpack_q4(qs, i, 0u, out);
    for (int k = 0; k < 8; ++k) out[k] = iq4_values(out[k]);
}
inline void wunpack_iq4_xs(const global uchar* qs, const global uint* qh, size_t i, uint* out) { wunpack_iq4_nl(qs, qh, i, out); }

// ---- rotary position embedding (rope.cl, attention.cl) -----------------------------
// For pair i of n_rot / 2: theta = pos * inv_freq[i] / ff[i], where the host
// computes inv_freq[i] = freq_scale * base^(-2i / n_rot) in double precision
// (a float pow under fast math is not accurate enough at large positions).
// Normal mode rotates (x[2i], x[2i+1]), NeoX mode (x[i], x[i + n_rot/2]);
// the rotated pairs are scaled by attn_factor; dimensions past n_rot pass
// through.

// cos/sin of theta = pos * f with the argument reduced to [-pi, pi] first:
// approximate sin/cos (fast math) are only accurate there.
inline float2 rope_cos_sin(float pos, float f) {
    const float x = pos * f;
    const float e = fma(pos, f, -x);  // rounding error of the product
    const float k = rint(x * 0.15915494309189535f);
    float r = fma(-k, 6.28318548202514648f, x);  // 2 pi = 6.28318548202514648 - 1.7484556e-7
    r = fma(k, 1.7484556e-07f, r) + e;
    return (float2)(cos(r), sin(r));
}

// Element indices (e0, e1) handled by work-item i, and whether they rotate.
inline int2 rope_pair(int i, int n_rot, int neox, int* rotates) {
    const int half_rot = n_rot / 2;
    if (i < half_rot) {
        *rotates = 1;
        return neox ? (int2)(i, i + half_rot) : (int2)(2 * i, 2 * i + 1);
    }
    *rotates = 0;
    const int k = n_rot + 2 * (i - half_rot);
    return (int2)(k, k + 1);
}

inline float2 rope_apply(const global float* x, int i, int n_rot, int neox, float pos, float attn_factor,
                         const global float* inv_freq, const global float* ff, int has_ff, int2* idx) {
    int rotates;
    *idx = rope_pair(i, n_rot, neox, &rotates);
    const float x0 = x[(*idx).x], x1 = x[(*idx).y];
    if (!rotates) return (float2)(x0, x1);
    const float f = has_ff ? inv_freq[i] / ff[i] : inv_freq[i];
    const float2 cs = rope_cos_sin(pos, f) * attn_factor;
    return (float2)(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
}
