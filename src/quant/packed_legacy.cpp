// Packed Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (packed.h): 8 rows interleaved,
// against activations quantized as Q8_0 blocks (Q8_1's d and quants are the
// same) that also carry their quants' sum.
//
// Group block b of a packed matrix (as large as the 8 file blocks):
//   d[r] (and m[r])  row r's block scale (and min), fp16, r < 8;
//   Q4_0, Q4_1: qs[32 k + 4 r + t] = row r's file byte qs[4 k + t], k < 4,
//     t < 4, so the low nibbles of the 32 bytes at qs + 32 k are elements
//     4k .. 4k+3 of each row (lane r), their high nibbles 16 + 4k .. 16 + 4k+3;
//   Q5_0, Q5_1: as Q4_0, and qh[r] the fifth bits reordered (fill_runs);
//   Q8_0: qs[32 k + 4 r + t] = row r's qs[4 k + t] + 128, k < 8.
//
// Per group block and activation row: the nibble types take 8 u8 x s8
// products (vpmaddubsw) summed as int16 (q <= 15, |a| <= 127: 8 pairs stay
// under 32,767; 4 for the 5-bit types) and vpmaddwd to int32; Q4_0 and Q5_0
// subtract 8 or 16 * sum(a) for their offsets, Q4_1 and Q5_1 add
// m * d_a * sum(a). Q8_0 keeps q + 128 (Q8_0Tile) and subtracts
// 128 * sum(a). Then one fused multiply-add scales the 8 rows' sums.
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/packed_tile.h"

namespace lantern::quant {

#if LANTERN_SIMD_X86
namespace {

using ActBlock = packed::Q8Sum;
constexpr auto act_from_float = packed::q8_sum_from_float;

struct GroupQ4_0 {
    uint16_t d[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ4_1 {
    uint16_t d[kPackRows];
    uint16_t m[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ5_0 {
    uint16_t d[kPackRows];
    uint32_t qh[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ5_1 {
    uint16_t d[kPackRows];
    uint16_t m[kPackRows];
    uint32_t qh[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ8_0 {
    uint16_t d[kPackRows];
    uint8_t qs[kPackRows * kQK];  // q + 128
};
static_assert(sizeof(GroupQ4_0) == kPackRows * sizeof(BlockQ4_0));
static_assert(sizeof(GroupQ4_1) == kPackRows * sizeof(BlockQ4_1));
static_assert(sizeof(GroupQ5_0) == kPackRows * sizeof(BlockQ5_0));
static_assert(sizeof(GroupQ5_1) == kPackRows * sizeof(BlockQ5_1));
static_assert(sizeof(GroupQ8_0) == kPackRows * sizeof(BlockQ8_0));

template <class Group>
constexpr bool kHasMin = std::is_same_v<Group, GroupQ4_1> || std::is_same_v<Group, GroupQ5_1>;
template <class Group>
constexpr bool kHasFifth = std::is_same_v<Group, GroupQ5_0> || std::is_same_v<Group, GroupQ5_1>;

// Row r's quants in 4-byte runs: run k at qs + 32 k + 4 r. The 5-bit types'
// fifth bits are reordered so that byte t of qh[r] holds in bit k that of
// element 4k + t (run k's low nibble) and in bit 4 + k that of 16 + 4k + t.
template <class Group, class Block>
void fill_runs(Group& out, const Block& in, int r) {
    out.d[r] = in.d;
    if constexpr (kHasMin<Group>) out.m[r] = in.m;
    for (size_t k = 0; k < sizeof(in.qs) / 4; ++k) std::memcpy(out.qs + 32 * k + 4 * r, in.qs + 4 * k, 4);
    if constexpr (std::is_same_v<Group, GroupQ8_0>) {
        for (int k = 0; k < 8; ++k) {
            for (int t = 0; t < 4; ++t) out.qs[32 * k + 4 * r + t] ^= 0x80;
        }
    }
    if constexpr (kHasFifth<Group>) {
        uint32_t h, bits = 0;
        std::memcpy(&h, in.qh, sizeof h);
        for (int t = 0; t < 4; ++t) {
            for (int k = 0; k < 4; ++k) {
                bits |= ((h >> (4 * k + t)) & 1u) << (8 * t + k);
                bits |= ((h >> (16 + 4 * k + t)) & 1u) << (8 * t + 4 + k);
            }
        }
        out.qh[r] = bits;
    }
}

// The group's blocks are read in one stream; prefetched as far ahead as the
// AVX2 tiles of dot_legacy.cpp prefetch theirs.
constexpr size_t kPrefetchLegacy = 4096;

// Q4_0, Q4_1, Q5_0 and Q5_1. The 5-bit quants reach 31, so their int16
// sums take 4 products, not 8.
template <class G>
struct NibbleTile {
    using Group = G;
    using Act = ActBlock;
    static constexpr int kElems = kQK;
    static constexpr size_t kPrefetchBytes = kPrefetchLegacy;
    static constexpr bool kMin = kHasMin<Group>, kFifth = kHasFifth<Group>;
    static constexpr int kOffset = kMin ? 0 : kFifth ? 16 : 8;

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        const __m256i low = _mm256_set1_epi8(0x0F);
        __m256i q[8];
        for (int k = 0; k < 4; ++k) {
            const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * k));
            q[k] = _mm256_and_si256(packed, low);
            q[4 + k] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
        }
        if constexpr (kFifth) {
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qh));
            for (int k = 0; k < 8; ++k) q[k] = _mm256_or_si256(q[k], packed::bit_to_16(qh, k));
        }
        const __m256 dw = packed::load_fp16x8(g.d);
        for (int c = 0; c < NC; ++c) {
            const ActBlock& ab = *a[c];
#if LANTERN_PACKED_VNNI
            __m256i sum = _mm256_set1_epi32(-kOffset * ab.sum);
            for (int k = 0; k < 8; ++k) sum = packed::dot_u8s8(sum, q[k], packed::splat_word(ab.qs + 4 * k));
#else
            constexpr int kPerSum = kFifth ? 4 : 8;
            __m256i sum = _mm256_setzero_si256();
            for (int k0 = 0; k0 < 8; k0 += kPerSum) {
                __m256i sum16 = _mm256_maddubs_epi16(q[k0], packed::splat_word(ab.qs + 4 * k0));
                for (int k = k0 + 1; k < k0 + kPerSum; ++k) {
                    sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(q[k], packed::splat_word(ab.qs + 4 * k)));
                }
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(sum16, _mm256_set1_epi16(1)));
            }
            if constexpr (kOffset != 0) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(kOffset * ab.sum));
#endif
            const __m256 da = _mm256_set1_ps(ab.d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, da), acc[c]);
            if constexpr (kMin) {
                const __m256 m = packed::load_fp16x8(g.m);
                acc[c] = _mm256_fmadd_ps(m, _mm256_set1_ps(ab.d * static_cast<float>(ab.sum)), acc[c]);
            }
        }
    }

#if LANTERN_PACKED_512
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        const __m512i low = _mm512_set1_epi8(0x0F);
        __m512i q[8];
        for (int k = 0; k < 4; ++k) {
            const __m512i packed = packed::load_pair(g0.qs + 32 * k, g1.qs + 32 * k);
            q[k] = _mm512_and_si512(packed, low);
            q[4 + k] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
        }
        if constexpr (kFifth) {
            const __m512i qh = packed::load_pair(g0.qh, g1.qh);
            for (int k = 0; k < 8; ++k) q[k] = _mm512_or_si512(q[k], packed::bit_to_16(qh, k));
        }
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        for (int c = 0; c < NC; ++c) {
            const ActBlock& ab = *a[c];
            __m512i sum = _mm512_set1_epi32(-kOffset * ab.sum);
            for (int k = 0; k < 8; ++k) sum = simd::dot_u8s8(sum, q[k], packed::splat_word512(ab.qs + 4 * k));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(ab.d)), acc[c]);
            if constexpr (kMin) {
                const __m512 m = packed::load_fp16x8_pair(g0.m, g1.m);
                acc[c] = _mm512_fmadd_ps(m, _mm512_set1_ps(ab.d * static_cast<float>(ab.sum)), acc[c]);
            }
        }
    }
#endif
};

// Q8_0's quants are stored as q + 128 (0 .. 255, any int8 q), so that with
// VNNI each product is one u8 x s8 vpdpbusd, and 128 * sum(a) comes off.
// Without VNNI the bias is undone and the sign trick used instead (u8 x s8
// pairs of vpmaddubsw would saturate).
struct Q8_0Tile {
    using Group = GroupQ8_0;
    using Act = ActBlock;
    static constexpr int kElems = kQK;
    static constexpr size_t kPrefetchBytes = kPrefetchLegacy;

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        __m256i sum[NC];
        for (int c = 0; c < NC; ++c) sum[c] = _mm256_set1_epi32(LANTERN_PACKED_VNNI ? -128 * a[c]->sum : 0);
        for (int k = 0; k < 8; ++k) {
            const __m256i biased = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * k));
#if LANTERN_PACKED_VNNI
            for (int c = 0; c < NC; ++c) sum[c] = packed::dot_u8s8(sum[c], biased, packed::splat_word(a[c]->qs + 4 * k));
#else
            const __m256i q = _mm256_xor_si256(biased, _mm256_set1_epi8(-128));
            const __m256i mag = _mm256_sign_epi8(q, q);
            for (int c = 0; c < NC; ++c) {
                sum[c] = packed::dot_u8s8(sum[c], mag, _mm256_sign_epi8(packed::splat_word(a[c]->qs + 4 * k), q));
            }
#endif
        }
        const __m256 dw = packed::load_fp16x8(g.d);
        for (int c = 0; c < NC; ++c) {
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_mul_ps(dw, _mm256_set1_ps(a[c]->d)), acc[c]);
        }
    }

#if LANTERN_PACKED_512
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        __m512i sum[NC];
        for (int c = 0; c < NC; ++c) sum[c] = _mm512_set1_epi32(-128 * a[c]->sum);
        for (int k = 0; k < 8; ++k) {
            const __m512i biased = packed::load_pair(g0.qs + 32 * k, g1.qs + 32 * k);
            for (int c = 0; c < NC; ++c) sum[c] = _mm512_dpbusd_epi32(sum[c], biased, packed::splat_word512(a[c]->qs + 4 * k));
        }
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        for (int c = 0; c < NC; ++c) {
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c]), _mm512_mul_ps(dw, _mm512_set1_ps(a[c]->d)), acc[c]);
        }
    }
#endif
};

}  // namespace

const PackedOps kPackedQ4_0 = {packed::bytes<GroupQ4_0, kQK>,
                               packed::pack<BlockQ4_0, GroupQ4_0, kQK, fill_runs<GroupQ4_0, BlockQ4_0>>,
                               act_from_float, packed::act_bytes<ActBlock, kQK>, packed::dot<NibbleTile<GroupQ4_0>>, 4,
                               LANTERN_PACKED_DOT2(NibbleTile<GroupQ4_0>, 8)};
const PackedOps kPackedQ4_1 = {packed::bytes<GroupQ4_1, kQK>,
                               packed::pack<BlockQ4_1, GroupQ4_1, kQK, fill_runs<GroupQ4_1, BlockQ4_1>>,
                               act_from_float, packed::act_bytes<ActBlock, kQK>, packed::dot<NibbleTile<GroupQ4_1>>, 4,
                               LANTERN_PACKED_DOT2(NibbleTile<GroupQ4_1>, 8)};
const PackedOps kPackedQ5_0 = {packed::bytes<GroupQ5_0, kQK>,
                               packed::pack<BlockQ5_0, GroupQ5_0, kQK, fill_runs<GroupQ5_0, BlockQ5_0>>,
                               act_from_float, packed::act_bytes<ActBlock, kQK>, packed::dot<NibbleTile<GroupQ5_0>>, 4,
                               LANTERN_PACKED_DOT2(NibbleTile<GroupQ5_0>, 8)};
const PackedOps kPackedQ5_1 = {packed::bytes<GroupQ5_1, kQK>,
                               packed::pack<BlockQ5_1, GroupQ5_1, kQK, fill_runs<GroupQ5_1, BlockQ5_1>>,
                               act_from_float, packed::act_bytes<ActBlock, kQK>, packed::dot<NibbleTile<GroupQ5_1>>, 4,
                               LANTERN_PACKED_DOT2(NibbleTile<GroupQ5_1>, 8)};
const PackedOps kPackedQ8_0 = {packed::bytes<GroupQ8_0, kQK>,
                               packed::pack<BlockQ8_0, GroupQ8_0, kQK, fill_runs<GroupQ8_0, BlockQ8_0>>,
                               act_from_float, packed::act_bytes<ActBlock, kQK>, packed::dot<Q8_0Tile>, 4,
                               LANTERN_PACKED_DOT2(Q8_0Tile, 8)};

#endif  // LANTERN_SIMD_X86

}  // namespace lantern::quant
