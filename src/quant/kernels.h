// The per-type kernels behind quant.h's TypeOps table (quant_table.cpp).
// Signatures are quant.h's ToFloatFn / FromFloatFn; n is always a multiple of
// the type's block size. Functions ending in _ref are plain scalar code, the
// specification the vectorised ones are tested against.
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace lantern::quant {

// A vec_dot tile function and the largest tile it takes.
struct DotKernel {
    VecDotFn fn;
    int max_nr;
    int max_nc;
    int wide_nr;  // TypeOps::wide_nr
};

// ---- quant_plain.cpp: F32, F16, BF16 -----------------------------------
void f32_from_float(const float* src, void* dst, int64_t n);
void f32_to_float(const void* src, float* dst, int64_t n);
void f16_to_float(const void* src, float* dst, int64_t n);
void f16_from_float(const float* src, void* dst, int64_t n);
void f16_from_float_ref(const float* src, void* dst, int64_t n);
void bf16_to_float(const void* src, float* dst, int64_t n);
void bf16_from_float(const float* src, void* dst, int64_t n);
void bf16_from_float_ref(const float* src, void* dst, int64_t n);
extern const DotKernel kDotF32;   // x f32
extern const DotKernel kDotF16;   // x f32
extern const DotKernel kDotBF16;  // x f32

// ---- quant_q8.cpp: the activation types Q8_0, Q8_1, Q8_K ------------------
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q8_0_ref(const float* src, void* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);
void quantize_q8_1_ref(const float* src, void* dst, int64_t n);
void quantize_q8_K(const float* src, void* dst, int64_t n);
void quantize_q8_K_ref(const float* src, void* dst, int64_t n);
void dequant_q8_1(const void* src, float* dst, int64_t n);
void dequant_q8_K(const void* src, float* dst, int64_t n);

// ---- quant_legacy.cpp: the 32-element weight types ------------------------
void dequant_q4_0(const void* src, float* dst, int64_t n);
void dequant_q4_1(const void* src, float* dst, int64_t n);
void dequant_q5_0(const void* src, float* dst, int64_t n);
void dequant_q5_1(const void* src, float* dst, int64_t n);
void dequant_q8_0(const void* src, float* dst, int64_t n);
void quantize_q4_0_ref(const float* src, void* dst, int64_t n);
void quantize_q4_1_ref(const float* src, void* dst, int64_t n);
void quantize_q5_0_ref(const float* src, void* dst, int64_t n);
void quantize_q5_1_ref(const float* src, void* dst, int64_t n);

// ---- dot_legacy.cpp -------------------------------------------------------
extern const DotKernel kDotQ4_0;  // x Q8_0
extern const DotKernel kDotQ4_1;  // x Q8_1
extern const DotKernel kDotQ5_0;  // x Q8_0
extern const DotKernel kDotQ5_1;  // x Q8_1
extern const DotKernel kDotQ8_0;  // x Q8_0

// ---- quant_k.cpp (dequantize) and quant_k_ref.cpp (quantize) ---------------
void dequant_q2_K(const void* src, float* dst, int64_t n);
void dequant_q3_K(const void* src, float* dst, int64_t n);
void dequant_q4_K(const void* src, float* dst, int64_t n);
void dequant_q5_K(const void* src, float* dst, int64_t n);
void dequant_q6_K(const void* src, float* dst, int64_t n);
void quantize_q2_K_ref(const float* src, void* dst, int64_t n);
void quantize_q3_K_ref(const float* src, void* dst, int64_t n);
void quantize_q4_K_ref(const float* src, void* dst, int64_t n);
void quantize_q5_K_ref(const float* src, void* dst, int64_t n);
void quantize_q6_K_ref(const float* src, void* dst, int64_t n);

// ---- quant_iq4.cpp and dot_iq4.cpp (IQ4_NL's tile is dot_legacy.cpp's) -------
void dequant_iq4_nl(const void* src, float* dst, int64_t n);
void dequant_iq4_xs(const void* src, float* dst, int64_t n);
void quantize_iq4_nl_ref(const float* src, void* dst, int64_t n);
void quantize_iq4_xs_ref(const float* src, void* dst, int64_t n);
extern const DotKernel kDotIQ4_NL;  // x Q8_0
extern const DotKernel kDotIQ4_XS;  // x Q8_K

// ---- dot_k.cpp --------------------------------------------------------------
extern const DotKernel kDotQ2_K;  // x Q8_K
extern const DotKernel kDotQ3_K;  // x Q8_K
extern const DotKernel kDotQ4_K;  // x Q8_K
extern const DotKernel kDotQ5_K;  // x Q8_K
extern const DotKernel kDotQ6_K;  // x Q8_K

// ---- packed_*.cpp: packed layouts (x86 tiers only) ---------------------------
struct PackedOps;
extern const PackedOps kPackedQ4_0;
extern const PackedOps kPackedQ4_1;
extern const PackedOps kPackedQ5_0;
extern const PackedOps kPackedQ5_1;
extern const PackedOps kPackedQ8_0;
extern const PackedOps kPackedQ2_K;
extern const PackedOps kPackedQ3_K;
extern const PackedOps kPackedQ4_K;
extern const PackedOps kPackedQ5_K;
extern const PackedOps kPackedQ6_K;
extern const PackedOps kPackedIQ4_NL;
extern const PackedOps kPackedIQ4_XS;

}  // namespace lantern::quant
