// Which weight types have a packed layout on this CPU tier (packed.h).
#include "quant/packed.h"

#include <algorithm>

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

void packed_product(const PackedOps& ops, int64_t cols, int64_t rows, const void* w, const void* y, size_t by,
                    int64_t nc, float* s, size_t ldc) {
    const size_t group_bytes = ops.packed_bytes(kPackRows, cols);
    const bool wide = ops.dot2 != nullptr && nc > 1;
    const int step = wide ? ops.max_nc2 : ops.max_nc;
    const auto* wg = static_cast<const uint8_t*>(w);
    const auto* act = static_cast<const uint8_t*>(y);
    for (int64_t c0 = 0; c0 < nc; c0 += step) {
        const int n_c = static_cast<int>(std::min<int64_t>(step, nc - c0));
        for (int64_t r = 0; r < rows;) {
            const uint8_t* group = wg + static_cast<size_t>(r / kPackRows) * group_bytes;
            if (wide && r + 2 * kPackRows <= rows) {
                ops.dot2(cols, s + c0 * ldc + r, ldc, group, act + c0 * by, by, n_c);
                r += 2 * kPackRows;
                continue;
            }
            for (int c = 0; c < n_c; c += ops.max_nc) {
                ops.dot(cols, s + (c0 + c) * ldc + r, ldc, group, act + (c0 + c) * by, by,
                        std::min(ops.max_nc, n_c - c));
            }
            r += kPackRows;
        }
    }
}

bool can_pack(DType t, int64_t rows, int64_t cols) {
    return packed_ops(t) != nullptr && rows > 0 && rows % kPackRows == 0 && cols > 0 &&
           cols % dtype_block_size(t) == 0;
}

}  // namespace lantern::quant
