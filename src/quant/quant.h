// CPU kernels for each tensor type: conversion to and from f32, and the dot
// products a matrix multiply is made of.
//
// A matrix multiply W[K, N] x X[K, M] on the CPU first converts each column of
// X (a K-row of f32) into W's `vec_dot_type`, then calls `vec_dot` on tiles of
// up to max_nr weight rows by max_nc activation rows. The pairs are:
//   Q4_0, Q5_0, Q8_0 x Q8_0     Q4_1, Q5_1 x Q8_1     Q2_K .. Q6_K x Q8_K
//   F32, F16, BF16 x F32 (the weights are widened to f32 as they are loaded:
//   rounding the activations to 16 bits would cost accuracy, and the
//   conversion is shared by the tile's columns).
// Tiles are 4 x 4 with AVX-512 (up to 8 x 1 for Q4_0 and Q8_0), smaller
// with AVX2, NEON and in the scalar build; read max_nr / max_nc / wide_nr rather
// than assuming them. vec_dot takes any K that is a multiple of both types'
// block sizes, any row strides, and unaligned rows.
// All functions are pure and may be called from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace lantern::quant {

// dst[0..n) = src row dequantized. n is a multiple of the block size.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
// dst = src[0..n) quantized. n is a multiple of the block size.
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
// For r < nr, c < nc:
//   s[c * ldc + r] = dot(row r of the weights, row c of the activations)
// where weight row r starts at (const char*)x + r * bx and activation row c
// (already in vec_dot_type) at (const char*)y + c * by; both have n elements.
using VecDotFn = void (*)(int64_t n, float* s, size_t ldc, const void* x, size_t bx,
                          const void* y, size_t by, int nr, int nc);

struct TypeOps {
    ToFloatFn to_float = nullptr;
    FromFloatFn from_float = nullptr;      // fast (vectorised) quantization
    FromFloatFn from_float_ref = nullptr;  // plain scalar reference
    DType vec_dot_type = DType::F32;
    VecDotFn vec_dot = nullptr;
    int max_nr = 1;  // largest tile vec_dot takes in one call
    int max_nc = 1;
    // Rows per call for tiles of several activation rows (<= max_nr): a
    // kernel may take more rows only when there is one activation row
    // (decoding), where it has the registers to spare.
    int wide_nr = 1;
};

// Kernels of a type, or nullptr when the CPU has none for it.
const TypeOps* type_ops(DType t);

// The instruction set these kernels were compiled for: "AVX-512 VNNI",
// "AVX-512", "AVX2 VNNI", "AVX2", "NEON SDOT", "NEON" or "scalar".
const char* kernel_set();

// Convenience wrappers over type_ops (throw Error(Unsupported) when missing).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace lantern::quant
