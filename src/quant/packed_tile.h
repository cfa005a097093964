// What the packed layouts' files (packed_legacy.cpp, packed_k.cpp) share: the
// walk that packs a matrix group by group, the activation-word broadcast, and
// the dispatch from a tile's width to its compiled shape. x86 (AVX2 and
// AVX-512 tiers): the kernels are written in 256-bit AVX2 intrinsics, and
// the AVX-512 VNNI tier adds 512-bit tiles of two groups (walk2, dot2).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/simd.h"
#include "quant/tile.h"

#if LANTERN_SIMD_X86
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define LANTERN_PACKED_VNNI 1
#else
#define LANTERN_PACKED_VNNI 0
#endif
// 512-bit tiles of two groups (PackedOps::dot2): AVX-512 with VNNI.
// LANTERN_PACKED_DOT2(Tile, NC) is PackedOps::dot2 and max_nc2 for a tile
// that has a block2 (NC activation rows at most), or null and 0 without them.
#if LANTERN_SIMD_WIDTH == 512 && LANTERN_SIMD_VNNI
#define LANTERN_PACKED_512 1
#define LANTERN_PACKED_DOT2(Tile, NC) packed::dot2<Tile, NC>, NC
#else
#define LANTERN_PACKED_512 0
#define LANTERN_PACKED_DOT2(Tile, NC) nullptr, 0
#endif

namespace lantern::quant::packed {

// PackedOps::packed_bytes for groups `Group` of kPackRows blocks of kElems
// elements.
template <class Group, int kElems>
size_t bytes(int64_t rows, int64_t cols) {
    return static_cast<size_t>(rows / kPackRows) * static_cast<size_t>(cols / kElems) * sizeof(Group);
}

// PackedOps::pack: rows of file blocks `Block` (kElems elements each) into
// consecutive `Group`s, one per kPackRows rows and block index, where
// Fill(group, block, r) stores row r's block into its group.
template <class Block, class Group, int kElems, void (*Fill)(Group&, const Block&, int)>
void pack(const void* src, size_t row_stride, int64_t rows, int64_t cols, void* dst) {
    auto* out = static_cast<Group*>(dst);
    for (int64_t g = 0; g < rows / kPackRows; ++g) {
        const Block* in[kPackRows];
        for (int r = 0; r < kPackRows; ++r) in[r] = row_at<Block>(src, row_stride, static_cast<int>(g * kPackRows + r));
        for (int64_t b = 0; b < cols / kElems; ++b, ++out) {
            for (int r = 0; r < kPackRows; ++r) Fill(*out, in[r][b], r);
        }
    }
}

// acc + sum of four u8 * s8 products per int32 lane (vpdpbusd where the
// CPU has it for 256-bit vectors; else vpmaddubsw, whose int16 pairs must
// not saturate, and vpmaddwd). simd::dot_u8s8 of the AVX2 tier, for 256-bit
// vectors in the AVX-512 tier too (whose simd:: vectors are 512-bit).
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// The 4 bytes at p in every 32-bit lane.
inline __m256i splat_word(const void* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// Bit `bit` of each byte of x moved to bit 4 (the fifth bit of a 5-bit
// quant), the rest cleared. 16-bit shifts: what crosses over from the
// neighbouring byte never lands on bit 4.
inline __m256i bit_to_16(__m256i x, int bit) {
    const __m256i moved = bit <= 4 ? _mm256_slli_epi16(x, 4 - bit) : _mm256_srli_epi16(x, bit - 4);
    return _mm256_and_si256(moved, _mm256_set1_epi8(0x10));
}

// Eight fp16 scales (one per row of a group) as floats.
inline __m256 load_fp16x8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Activations of the 32-element types: Q8_0 with d widened to f32 and the
// sum of its quants (for the offsets of Q4_0 and Q5_0, the mins of Q4_1 and
// Q5_1, and the bias of Q8_0's and IQ4_NL's stored quants).
struct Q8Sum {
    float d;
    int32_t sum;
    int8_t qs[kQK];
};

inline void q8_sum_from_float(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<Q8Sum*>(dst);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ8_0 q;
        quantize_q8_0(src + b * kQK, &q, kQK);
        int32_t sum = 0;
        for (int8_t v : q.qs) sum += v;
        out[b].d = fp16_to_f32(q.d);
        out[b].sum = sum;
        std::memcpy(out[b].qs, q.qs, kQK);
    }
}

// PackedOps::act_row_bytes for activations in blocks `Act` of kElems.
template <class Act, int kElems>
size_t act_bytes(int64_t cols) {
    return static_cast<size_t>(cols / kElems) * sizeof(Act);
}

// Eight bytes (row r's at p[r]) as int32 lanes, unsigned and signed.
inline __m256i bytes8_to_i32(const uint8_t* p) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
}
inline __m256i sbytes8_to_i32(const int8_t* p) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(v));
}

// The per-row bytes of a group's scales as int16 lanes for vpmaddwd, from
// bytes stored r-minor (byte r: row r). Lane r: bytes8[r], zero-extended
// into both int16 halves.
inline __m256i scale_pairs(const uint8_t* bytes8) {
    int64_t v;
    std::memcpy(&v, bytes8, sizeof v);
    const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                          4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(v), pick);
}

// Lane r: bytes16[r] and bytes16[8 + r], zero-extended to int16.
inline __m256i min_pairs(const uint8_t* bytes16) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m256i pick = _mm256_setr_epi8(0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1,  //
                                          4, -1, 12, -1, 5, -1, 13, -1, 6, -1, 14, -1, 7, -1, 15, -1);
    return _mm256_shuffle_epi8(both, pick);
}

// Lane r: bytes8[r] as int8, sign-extended into both int16 halves.
inline __m256i signed_scale_pairs(const int8_t* bytes8) {
    int64_t v;
    std::memcpy(&v, bytes8, sizeof v);
    const __m256i pick = _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,  //
                                          -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(_mm256_set1_epi64x(v), pick), 8);
}

// Lane r: bytes16[r] and bytes16[8 + r] as int8, sign-extended to int16.
inline __m256i signed_pairs(const int8_t* bytes16) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m256i pick = _mm256_setr_epi8(-1, 0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11,  //
                                          -1, 4, -1, 12, -1, 5, -1, 13, -1, 6, -1, 14, -1, 7, -1, 15);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(both, pick), 8);
}

// Lane r: sum over p < P of pairs[p]'s two int16 halves times the
// activation's group sums sums[2p], sums[2p + 1] (the K-quants' mins or
// offsets against Q8_K's bsums).
template <int P>
inline __m256i pair_sums(const __m256i (&pairs)[P], const int16_t* sums) {
    __m256i total = _mm256_madd_epi16(pairs[0], splat_word(sums));
    for (int p = 1; p < P; ++p) total = _mm256_add_epi32(total, _mm256_madd_epi16(pairs[p], splat_word(sums + 2 * p)));
    return total;
}

// PackedOps::dot for a tile `Kernel` that names its group block (Group),
// activation block (Act, kElems elements each), how far ahead to prefetch
// the group's stream (kPrefetchBytes), and
//   template <int NC> static void block(const Group& g,
//       const Act* const (&a)[NC], __m256 (&acc)[NC]);
// which adds one block's products into acc[c] (lane r: weight row r against
// activation row c). Compiled for NC = 1 .. 4.
template <class Kernel, int NC>
void walk(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by) {
    using Group = typename Kernel::Group;
    using Act = typename Kernel::Act;
    const auto* w = static_cast<const Group*>(group);
    const Act* rows[NC];
    for (int c = 0; c < NC; ++c) rows[c] = row_at<Act>(y, by, c);
    __m256 acc[NC];
    for (__m256& v : acc) v = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / Kernel::kElems; ++b) {
        prefetch_ahead(w + b, Kernel::kPrefetchBytes, sizeof(Group));
        const Act* a[NC];
        for (int c = 0; c < NC; ++c) a[c] = rows[c] + b;
        Kernel::template block<NC>(w[b], a, acc);
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(s + static_cast<size_t>(c) * ldc, acc[c]);
}

#if LANTERN_PACKED_512
// walk for two consecutive groups (16 rows) in 512-bit vectors: a tile's
//   template <int NC> static void block2(const Group& g0, const Group& g1,
//       const Act* const (&a)[NC], __m512 (&acc)[NC]);
// takes rows 0..7 from g0 (low half) and 8..15 from g1 (high half).
template <class Kernel, int NC>
void walk2(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by) {
    using Group = typename Kernel::Group;
    using Act = typename Kernel::Act;
    const int64_t blocks = n / Kernel::kElems;
    const auto* w0 = static_cast<const Group*>(group);
    const Group* w1 = w0 + blocks;
    const Act* rows[NC];
    for (int c = 0; c < NC; ++c) rows[c] = row_at<Act>(y, by, c);
    __m512 acc[NC];
    for (__m512& v : acc) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
        prefetch_ahead(w0 + b, Kernel::kPrefetchBytes, sizeof(Group));
        prefetch_ahead(w1 + b, Kernel::kPrefetchBytes, sizeof(Group));
        const Act* a[NC];
        for (int c = 0; c < NC; ++c) a[c] = rows[c] + b;
        Kernel::template block2<NC>(w0[b], w1[b], a, acc);
    }
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(s + static_cast<size_t>(c) * ldc, acc[c]);
}

// PackedOps::dot2 for nc <= MaxNC activation rows.
template <class Kernel, int MaxNC, int NC = 1>
void dot2(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by, int nc) {
    if constexpr (NC < MaxNC) {
        if (nc > NC) {
            dot2<Kernel, MaxNC, NC + 1>(n, s, ldc, group, y, by, nc);
            return;
        }
    }
    walk2<Kernel, NC>(n, s, ldc, group, y, by);
}

// The same 32 bytes' offsets of two groups as one 512-bit vector.
inline __m512i load_pair(const void* lo, const void* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                              _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// Two groups' 256-bit lanes side by side (rows 0..7, then 8..15).
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// The 4 bytes at p in every 32-bit lane.
inline __m512i splat_word512(const void* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

// bit_to_16 on 512-bit vectors.
inline __m512i bit_to_16(__m512i x, int bit) {
    const __m512i moved = bit <= 4 ? _mm512_slli_epi16(x, 4 - bit) : _mm512_srli_epi16(x, bit - 4);
    return _mm512_and_si512(moved, _mm512_set1_epi8(0x10));
}

// pair_sums on two groups' pairs (512-bit).
template <int P>
inline __m512i pair_sums(const __m512i (&pairs)[P], const int16_t* sums) {
    __m512i total = _mm512_madd_epi16(pairs[0], splat_word512(sums));
    for (int p = 1; p < P; ++p) total = _mm512_add_epi32(total, _mm512_madd_epi16(pairs[p], splat_word512(sums + 2 * p)));
    return total;
}

// Sixteen unsigned bytes, eight from each group (row r's at lo[r] and
// hi[r]), as int32 lanes.
inline __m512i bytes_to_i32(const uint8_t* lo, const uint8_t* hi) {
    int64_t a, b;
    std::memcpy(&a, lo, sizeof a);
    std::memcpy(&b, hi, sizeof b);
    return _mm512_cvtepu8_epi32(_mm_set_epi64x(b, a));
}

// bytes_to_i32 for signed bytes.
inline __m512i sbytes_to_i32(const int8_t* lo, const int8_t* hi) {
    int64_t a, b;
    std::memcpy(&a, lo, sizeof a);
    std::memcpy(&b, hi, sizeof b);
    return _mm512_cvtepi8_epi32(_mm_set_epi64x(b, a));
}

// Sixteen fp16 scales, eight from each group, as floats.
inline __m512 load_fp16x8_pair(const uint16_t* lo, const uint16_t* hi) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}
#endif

template <class Kernel>
void dot(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by, int nc) {
    switch (nc) {
        case 1: walk<Kernel, 1>(n, s, ldc, group, y, by); break;
        case 2: walk<Kernel, 2>(n, s, ldc, group, y, by); break;
        case 3: walk<Kernel, 3>(n, s, ldc, group, y, by); break;
        default: walk<Kernel, 4>(n, s, ldc, group, y, by); break;
    }
}

}  // namespace lantern::quant::packed
#endif
