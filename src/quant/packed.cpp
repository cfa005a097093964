// Which weight types have a packed layout on this CPU tier (packed.h).
#include "quant/packed.h"

#include "quant/kernels.h"
#include "quant/simd.h"

namespace lantern::quant {

const PackedOps* packed_ops(DType t) {
#if LANTERN_SIMD_X86
    switch (t) {
        case DType::Q4_0: return &kPackedQ4_0;
        case DType::Q4_1: return &kPackedQ4_1;
        case DType::Q5_0: return &kPackedQ5_0;
        case DType::Q5_1: return &kPackedQ5_1;
        case DType::Q8_0: return &kPackedQ8_0;
        case DType::Q2_K: return &kPackedQ2_K;
        case DType::Q3_K: return &kPackedQ3_K;
        case DType::Q4_K: return &kPackedQ4_K;
        case DType::Q5_K: return &kPackedQ5_K;
        case DType::Q6_K: return &kPackedQ6_K;
        case DType::IQ4_NL: return &kPackedIQ4_NL;
        case DType::IQ4_XS: return &kPackedIQ4_XS;
        default: return nullptr;
    }
#else
    (void)t;
    return nullptr;
#endif
}

bool can_pack(DType t, int64_t rows, int64_t cols) {
    return packed_ops(t) != nullptr && rows > 0 && rows % kPackRows == 0 && cols > 0 &&
           cols % dtype_block_size(t) == 0;
}

}  // namespace lantern::quant
