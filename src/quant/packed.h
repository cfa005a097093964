// Weight matrices rearranged once, at load, for the CPU's widest tiles.
//
// dot_legacy.cpp's tiles read each weight row's blocks in file order, so
// every (weight row, activation row) pair keeps its own vector accumulator
// and each block's integer dot is converted, scaled and added lane by lane:
// on AVX2 that float work costs as much as the integer work. A packed matrix
// interleaves kPackRows rows: for each block index, the rows' scales, then
// their quants in 4-byte runs. One vector then holds four weights of each of
// the 8 rows, one broadcast activation word multiplies all of them, and the
// 8 rows' block sums land in the lanes of one vector that is scaled once.
//
// The kernels are 256-bit AVX2 code and run on both x86 tiers: packed, a
// 2-core AVX2 EPYC took prompts 1.3-2.2x and generation 1.1-1.9x faster,
// and a 16-core AVX-512 VNNI Xeon prompts 1.2-2.5x and generation 1.0-1.7x
// faster than the AVX-512 tiles on the file's layout (bench/RESULTS.md).
// Where the CPU has AVX-512 VNNI, dot2 takes two groups (16 rows) at once
// in 512-bit vectors and up to 8 activation rows per pass, for prompts
// (1.4-2.0x on a 2-core Zen 5 EPYC, 1.2-1.9x on the 16-core Xeon; decoding
// keeps dot, see packed_product), every product one vpdpbusd (1.2-1.7x
// more on the Zen 5). Elsewhere (NEON, scalar) packed_ops() is
// null and matrices stay as loaded. MoE experts (3-D tensors) are packed
// slice by slice, one after another.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "quant/quant.h"

namespace lantern::quant {

inline constexpr int kPackRows = 8;

struct PackedOps {
    // Bytes of the packed copy of a matrix of `rows` rows of `cols` elements.
    size_t (*packed_bytes)(int64_t rows, int64_t cols);
    // Packs rows [0, rows) (row r at src + r * row_stride, in the file's
    // layout) into dst. rows is a multiple of kPackRows.
    void (*pack)(const void* src, size_t row_stride, int64_t rows, int64_t cols, void* dst);
    // Activation rows in the format `dot` reads, and their size in bytes.
    FromFloatFn act_from_float;
    size_t (*act_row_bytes)(int64_t cols);
    // For r < kPackRows, c < nc (nc <= max_nc):
    //   s[c * ldc + r] = dot(weight row g * kPackRows + r, activation row c)
    // where `group` is the packed matrix plus g * packed_bytes(kPackRows, cols)
    // and activation row c starts at (const char*)y + c * by.
    void (*dot)(int64_t cols, float* s, size_t ldc, const void* group, const void* y, size_t by, int nc);
    int max_nc;
    // Null, or `dot` for two consecutive groups at once (16 rows: s[c * ldc
    // + r], r < 2 * kPackRows) in 512-bit vectors, where the CPU has them,
    // for nc <= max_nc2 activation rows.
    void (*dot2)(int64_t cols, float* s, size_t ldc, const void* group, const void* y, size_t by, int nc) = nullptr;
    int max_nc2 = 0;
};

// s[c * ldc + r] = dot(row r of the packed matrix w, activation row c) for
// rows r < rows (a multiple of kPackRows) and c < nc, activation row c at
// (const char*)y + c * by: the widest tiles this CPU has. dot2 only where
// nc > 1: decoding is bound by memory, and two groups' streams read at
// once lost there (tinyllama Q4_0 68 -> 57 tokens/s on a Zen 5 EPYC).
void packed_product(const PackedOps& ops, int64_t cols, int64_t rows, const void* w, const void* y, size_t by,
                    int64_t nc, float* s, size_t ldc);

// The packed kernels for weights of type t, or null (none on this CPU tier).
const PackedOps* packed_ops(DType t);

// Whether a `rows` x `cols` matrix of type t is packed on this CPU.
bool can_pack(DType t, int64_t rows, int64_t cols);

}  // namespace lantern::quant
