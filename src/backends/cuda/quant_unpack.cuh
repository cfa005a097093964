// Unpacking the device weight layouts (weight_layout.h), 16 elements at a time.
//
// unpack16<T>(w, row, g) returns group g (elements 16g .. 16g + 15) of a row
// as four words of signed 8-bit quants q and two floats with
//     value[i] = scale * q[i] - mn.
// Every quantized type fits this form: offsets (Q4_0's 8, Q6_K's 32, ...) are
// folded into q, Q4_1/Q5_1's additive min into mn = -m. Matrix-vector
// kernels dot q with 8-bit activations (dp4a); GetRows and the GEMM path
// dequantize through it.
#pragma once

#include "backends/cuda/common.cuh"

namespace lantern::cuda {

struct Group16 {
    uint32_t q[4];
    float scale;
    float mn;
};

constexpr uint32_t kLow4 = 0x0F0F0F0Fu;

template <DType T>
__device__ __forceinline__ Group16 unpack16(const WView& w, int64_t row, int64_t g) {
    Group16 r;
    r.mn = 0.0f;
    const uint8_t* prow = w.data + static_cast<size_t>(row) * w.row_bytes;
    if constexpr (is_q32(T)) {
        const int64_t b = g >> 1;
        const int h = static_cast<int>(g & 1);
        const uint8_t* m = w.meta + static_cast<size_t>(row) * w.meta_row_bytes + static_cast<size_t>(b) * q32_meta(T);
        if constexpr (T == DType::Q8_0) {
            const uint4 v = ld_u128(prow + static_cast<size_t>(h * w.blocks + b) * 16);
            r.q[0] = v.x; r.q[1] = v.y; r.q[2] = v.z; r.q[3] = v.w;
            r.scale = half_bits_to_float(ld_u16(m));
        } else {
            const uint4 v = ld_u128(prow + static_cast<size_t>(b) * 16);
            const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
            const int sh = 4 * h;
            uint32_t qh = 0;
            if constexpr (T == DType::Q5_0 || T == DType::Q5_1) qh = ld_u32(m);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t q = (w4[i] >> sh) & kLow4;
                if constexpr (T == DType::Q5_0 || T == DType::Q5_1) q |= spread4((qh >> (16 * h + 4 * i)) & 0xFu) << 4;
                if constexpr (T == DType::Q4_0) q = __vsub4(q, 0x08080808u);
                if constexpr (T == DType::Q5_0) q = __vsub4(q, 0x10101010u);
                r.q[i] = q;
            }
            if constexpr (T == DType::Q4_0) {
                r.scale = half_bits_to_float(ld_u16(m));
            } else if constexpr (T == DType::Q4_1) {
                const uint32_t dm = ld_u32(m);
                r.scale = half_bits_to_float(static_cast<uint16_t>(dm));
                r.mn = -half_bits_to_float(static_cast<uint16_t>(dm >> 16));
            } else if constexpr (T == DType::Q5_0) {
                r.scale = half_bits_to_float(ld_u16(m + 4));
            } else {  // Q5_1
                const uint32_t dm = ld_u32(m + 4);
                r.scale = half_bits_to_float(static_cast<uint16_t>(dm));
                r.mn = -half_bits_to_float(static_cast<uint16_t>(dm >> 16));
            }
        }
    } else {
        const int64_t sb = g >> 4;
        const int gi = static_cast<int>(g & 15);
        const uint8_t* blk = prow + static_cast<size_t>(sb) * kquant_stride(T);
        if constexpr (T == DType::Q2_K) {
            // scales[16] @0, qs[64] @16, d @80, dmin @82
            const int hh = gi >> 3, j = (gi & 7) >> 1, k0 = 16 * (gi & 1);
            const uint8_t* qs = blk + 16 + 32 * hh + k0;
#pragma unroll
            for (int i = 0; i < 4; ++i) r.q[i] = (ld_u32(qs + 4 * i) >> (2 * j)) & 0x03030303u;
            const uint32_t dd = ld_u32(blk + 80);
            const uint32_t sc = blk[gi];
            r.scale = half_bits_to_float(static_cast<uint16_t>(dd)) * static_cast<float>(sc & 0xF);
            r.mn = half_bits_to_float(static_cast<uint16_t>(dd >> 16)) * static_cast<float>(sc >> 4);
        } else if constexpr (T == DType::Q3_K) {
            // hmask[32] @0, qs[64] @32, scales[12] @96, d @108
            const int hh = gi >> 3, j = (gi & 7) >> 1, k0 = 16 * (gi & 1);
            const uint8_t* qs = blk + 32 + 32 * hh + k0;
            const uint8_t* hm = blk + k0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t low = (ld_u32(qs + 4 * i) >> (2 * j)) & 0x03030303u;
                const uint32_t hb = (ld_u32(hm + 4 * i) >> (4 * hh + j)) & 0x01010101u;
                r.q[i] = __vsub4(low | (hb << 2), 0x04040404u);
            }
            const uint8_t* S = blk + 96;
            const uint32_t low4 = gi < 8 ? (S[gi] & 0xFu) : (S[gi - 8] >> 4);
            const uint32_t high2 = (S[8 + (gi & 3)] >> (2 * (gi >> 2))) & 3u;
            const int sc = static_cast<int>(low4 | (high2 << 4)) - 32;
            r.scale = half_bits_to_float(ld_u16(blk + 108)) * static_cast<float>(sc);
        } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
            // d @0, dmin @2, scales[12] @4, (Q5_K: qh[32] @16,) qs[128] @16 / @48
            const int s = gi >> 1;
            const size_t qs_at = (T == DType::Q4_K ? 16 : 48) + 32 * (s >> 1) + 16 * (gi & 1);
            const uint4 v = ld_u128(blk + qs_at);
            const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
            uint32_t hw[4] = {0, 0, 0, 0};
            if constexpr (T == DType::Q5_K) {
                const uint4 h = ld_u128(blk + 16 + 16 * (gi & 1));
                hw[0] = h.x; hw[1] = h.y; hw[2] = h.z; hw[3] = h.w;
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t q = (w4[i] >> (4 * (s & 1))) & kLow4;
                if constexpr (T == DType::Q5_K) q |= ((hw[i] >> s) & 0x01010101u) << 4;
                r.q[i] = q;
            }
            const uint8_t* S = blk + 4;
            uint32_t sc, mm;
            if (s < 4) {
                sc = S[s] & 63u;
                mm = S[s + 4] & 63u;
            } else {
                sc = (S[s + 4] & 0xFu) | ((S[s - 4] >> 6) << 4);
                mm = (S[s + 4] >> 4) | ((S[s] >> 6) << 4);
            }
            const uint32_t dd = ld_u32(blk);
            r.scale = half_bits_to_float(static_cast<uint16_t>(dd)) * static_cast<float>(sc);
            r.mn = half_bits_to_float(static_cast<uint16_t>(dd >> 16)) * static_cast<float>(mm);
        } else {  // Q6_K: ql[128] @0, qh[64] @128, scales[16] @192, d @208
            const int hh = gi >> 3, gg = (gi & 7) >> 1, l0 = 16 * (gi & 1);
            const uint8_t* ql = blk + 64 * hh + 32 * (gg & 1) + l0;
            const uint8_t* qh = blk + 128 + 32 * hh + l0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t lo = (ld_u32(ql + 4 * i) >> (4 * (gg >> 1))) & kLow4;
                const uint32_t hi = ((ld_u32(qh + 4 * i) >> (2 * gg)) & 0x03030303u) << 4;
                r.q[i] = __vsub4(lo | hi, 0x20202020u);
            }
            const int8_t sc = static_cast<int8_t>(blk[192 + gi]);
            r.scale = half_bits_to_float(ld_u16(blk + 208)) * static_cast<float>(sc);
        }
    }
    return r;
}

// The 16 values of a group as floats.
__device__ __forceinline__ void group_values(const Group16& g, float (&out)[16]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const int8_t q = static_cast<int8_t>((g.q[i >> 2] >> (8 * (i & 3))) & 0xFFu);
        out[i] = g.scale * static_cast<float>(q) - g.mn;
    }
}

// Calls fn.template operator()<T>() for the device weight type t.
template <class Fn>
__host__ void dispatch_quant(DType t, Fn&& fn) {
    switch (t) {
        case DType::Q4_0: fn.template operator()<DType::Q4_0>(); break;
        case DType::Q4_1: fn.template operator()<DType::Q4_1>(); break;
        case DType::Q5_0: fn.template operator()<DType::Q5_0>(); break;
        case DType::Q5_1: fn.template operator()<DType::Q5_1>(); break;
        case DType::Q8_0: fn.template operator()<DType::Q8_0>(); break;
        case DType::Q2_K: fn.template operator()<DType::Q2_K>(); break;
        case DType::Q3_K: fn.template operator()<DType::Q3_K>(); break;
        case DType::Q4_K: fn.template operator()<DType::Q4_K>(); break;
        case DType::Q5_K: fn.template operator()<DType::Q5_K>(); break;
        case DType::Q6_K: fn.template operator()<DType::Q6_K>(); break;
        default: break;
    }
}

// The view of a weight (device layout) or of a plain-typed tensor.
inline WView weight_view(const Tensor& t) {
    WView v;
    v.data = static_cast<const uint8_t*>(tensor_address(t));
    v.K = t.ne[0];
    if (is_plain(t.type)) {
        v.row_bytes = t.nb[1];
        return v;
    }
    const WeightLayout l = weight_layout(t.type, t.ne[0], t.ne[1]);
    v.blocks = l.blocks;
    v.row_bytes = l.row_bytes;
    v.meta = v.data + l.meta_offset;
    v.meta_row_bytes = l.meta_row_bytes;
    return v;
}

}  // namespace lantern::cuda
