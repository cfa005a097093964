#include "model/weight_types.h"

#include "quant/quant.h"

namespace lantern {

std::optional<uint32_t> llama_file_type(DType t) {
    switch (t) {
        case DType::F32: return 0;
        case DType::F16: return 1;
        case DType::Q4_0: return 2;
        case DType::Q4_1: return 3;
        case DType::Q8_0: return 7;
        case DType::Q5_0: return 8;
        case DType::Q5_1: return 9;
        case DType::Q2_K: return 10;
        case DType::Q3_K: return 12;  // Q3_K_M
        case DType::Q4_K: return 15;  // Q4_K_M
        case DType::Q5_K: return 17;  // Q5_K_M
        case DType::Q6_K: return 18;
        case DType::IQ4_NL: return 25;
        case DType::IQ4_XS: return 30;
        case DType::BF16: return 32;
        default: return std::nullopt;
    }
}

namespace {

DType fallback_type(DType t) {
    switch (t) {
        case DType::Q2_K:
        case DType::Q3_K: return DType::Q4_0;
        case DType::Q4_K: return DType::Q5_0;
        case DType::Q5_K: return DType::Q5_1;
        case DType::Q6_K: return DType::Q8_0;
        case DType::IQ4_XS: return DType::IQ4_NL;
        default: return t;
    }
}

}  // namespace

std::optional<DType> weight_row_type(DType requested, int64_t row_length) {
    if (row_length % dtype_block_size(requested) == 0) return requested;
    const DType fb = fallback_type(requested);
    if (row_length % dtype_block_size(fb) == 0) return fb;
    return std::nullopt;
}

bool has_quantizer(DType t) {
    if (t == DType::F32) return true;
    const quant::TypeOps* ops = quant::type_ops(t);
    return ops != nullptr && ops->from_float != nullptr;
}

}  // namespace lantern
