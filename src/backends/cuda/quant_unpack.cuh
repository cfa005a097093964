// Unpacking the device weight layouts (weight_layout.h), 16 elements at a time.
//
// unpack16<T>(w, row, g) returns group g (elements 16g .. 16g + 15) of a row
// as four words of signed 8-bit quants q and two floats with
//     value[i] = scale * q[i] - mn
// (qblocks.cuh's group16 of the group's block). GetRows and the GEMM path
// dequantize through it.
#pragma once

#include "backends/cuda/qblocks.cuh"

namespace lantern::cuda {

template <DType T>
__device__ __forceinline__ Group16 unpack16(const WView& w, int64_t row, int64_t g) {
    return group16<T>(qload<T>(q_row(w, row), static_cast<size_t>(w.blocks), static_cast<size_t>(g >> 1)),
                      static_cast<int>(g & 1));
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
        case DType::IQ4_NL: fn.template operator()<DType::IQ4_NL>(); break;
        case DType::IQ4_XS: fn.template operator()<DType::IQ4_XS>(); break;
        default: break;
    }
}

// ... or for any device weight type, F32/F16/BF16 included.
template <class Fn>
__host__ void dispatch_weight(DType t, Fn&& fn) {
    switch (t) {
        case DType::F32: fn.template operator()<DType::F32>(); break;
        case DType::F16: fn.template operator()<DType::F16>(); break;
        case DType::BF16: fn.template operator()<DType::BF16>(); break;
        default: dispatch_quant(t, fn);
    }
}

// Calls fn.template operator()<T>() for every quantized device weight type
// (for_each_quant) or every device weight type (for_each_weight): a
// kernel family's one-time set-up per instantiation.
template <class Fn>
__host__ void for_each_quant(Fn&& fn) {
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
        dispatch_quant(t, fn);
    }
}
template <class Fn>
__host__ void for_each_weight(Fn&& fn) {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) dispatch_weight(t, fn);
    for_each_quant(fn);
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
    // Every row of every matrix (a 3-D expert tensor [K, N, E] is N * E
    // rows), as the upload lays it out (cuda_backend.cpp's layout_of).
    const WeightLayout l = weight_layout(t.type, t.ne[0], t.ne[1] * t.ne[2] * t.ne[3]);
    v.blocks = l.blocks;
    v.row_bytes = l.row_bytes;
    v.meta = v.data + l.meta_offset;
    v.meta_row_bytes = l.meta_row_bytes;
    return v;
}

}  // namespace lantern::cuda
