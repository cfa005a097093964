// The TypeOps table: every type the CPU has kernels for, in one place.
#include <array>
#include <string>

#include "lantern/error.h"
#include "quant/kernels.h"
#include "quant/simd.h"

namespace lantern::quant {
namespace {

constexpr TypeOps ops(ToFloatFn to_float, FromFloatFn from_float, FromFloatFn from_float_ref,
                      DType vec_dot_type, const DotKernel* dot) {
    TypeOps t;
    t.to_float = to_float;
    t.from_float = from_float;
    t.from_float_ref = from_float_ref;
    t.vec_dot_type = vec_dot_type;
    if (dot != nullptr) {
        t.vec_dot = dot->fn;
        t.max_nr = dot->max_nr;
        t.max_nc = dot->max_nc;
        t.wide_nr = dot->wide_nr;
    }
    return t;
}

struct Entry {
    DType type;
    TypeOps ops;
};

// Built on first use (not at static initialization, so type_ops works from
// any other static initializer). Weight types without a vectorised quantizer
// use the reference one for both: they are quantized offline, not per token.
const std::array<Entry, 17>& table() {
    static const std::array<Entry, 17> kTable = {{
        {DType::F32, ops(f32_to_float, f32_from_float, f32_from_float, DType::F32, &kDotF32)},
        {DType::F16, ops(f16_to_float, f16_from_float, f16_from_float_ref, DType::F32, &kDotF16)},
        {DType::BF16, ops(bf16_to_float, bf16_from_float, bf16_from_float_ref, DType::F32, &kDotBF16)},
        {DType::Q4_0, ops(dequant_q4_0, quantize_q4_0_ref, quantize_q4_0_ref, DType::Q8_0, &kDotQ4_0)},
        {DType::Q4_1, ops(dequant_q4_1, quantize_q4_1_ref, quantize_q4_1_ref, DType::Q8_1, &kDotQ4_1)},
        {DType::Q5_0, ops(dequant_q5_0, quantize_q5_0_ref, quantize_q5_0_ref, DType::Q8_0, &kDotQ5_0)},
        {DType::Q5_1, ops(dequant_q5_1, quantize_q5_1_ref, quantize_q5_1_ref, DType::Q8_1, &kDotQ5_1)},
        {DType::Q8_0, ops(dequant_q8_0, quantize_q8_0, quantize_q8_0_ref, DType::Q8_0, &kDotQ8_0)},
        {DType::Q8_1, ops(dequant_q8_1, quantize_q8_1, quantize_q8_1_ref, DType::Q8_1, nullptr)},
        {DType::Q2_K, ops(dequant_q2_K, quantize_q2_K_ref, quantize_q2_K_ref, DType::Q8_K, &kDotQ2_K)},
        {DType::Q3_K, ops(dequant_q3_K, quantize_q3_K_ref, quantize_q3_K_ref, DType::Q8_K, &kDotQ3_K)},
        {DType::Q4_K, ops(dequant_q4_K, quantize_q4_K_ref, quantize_q4_K_ref, DType::Q8_K, &kDotQ4_K)},
        {DType::Q5_K, ops(dequant_q5_K, quantize_q5_K_ref, quantize_q5_K_ref, DType::Q8_K, &kDotQ5_K)},
        {DType::Q6_K, ops(dequant_q6_K, quantize_q6_K_ref, quantize_q6_K_ref, DType::Q8_K, &kDotQ6_K)},
        {DType::Q8_K, ops(dequant_q8_K, quantize_q8_K, quantize_q8_K_ref, DType::Q8_K, nullptr)},
        {DType::IQ4_NL, ops(dequant_iq4_nl, quantize_iq4_nl_ref, quantize_iq4_nl_ref, DType::Q8_0, &kDotIQ4_NL)},
        {DType::IQ4_XS, ops(dequant_iq4_xs, quantize_iq4_xs_ref, quantize_iq4_xs_ref, DType::Q8_K, &kDotIQ4_XS)},
    }};
    return kTable;
}

const TypeOps& require(DType t) {
    const TypeOps* ops = type_ops(t);
    if (ops == nullptr) {
        throw Error(ErrorCode::Unsupported,
                    std::string("no CPU kernels for tensor type ") + dtype_name(t));
    }
    return *ops;
}

}  // namespace

const TypeOps* type_ops(DType t) {
    for (const Entry& e : table()) {
        if (e.type == t) return &e.ops;
    }
    return nullptr;
}

const char* kernel_set() {
#if LANTERN_SIMD_WIDTH == 512
    return LANTERN_SIMD_VNNI ? "AVX-512 VNNI" : "AVX-512";
#elif LANTERN_SIMD_WIDTH == 256
    return LANTERN_SIMD_VNNI ? "AVX2 VNNI" : "AVX2";
#elif LANTERN_SIMD_WIDTH == 128 && defined(__ARM_FEATURE_DOTPROD)
    return "NEON SDOT";
#elif LANTERN_SIMD_WIDTH == 128
    return "NEON";
#else
    return "scalar";
#endif
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    require(t).to_float(src, dst, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    require(t).from_float(src, dst, n);
}

}  // namespace lantern::quant
