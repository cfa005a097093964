// Packed Q2_K and Q3_K (packed.h): 8 rows interleaved, against Q8_K
// activations. Both keep their 2-bit quants in the file's order, in 4-byte
// runs: element 128h + 32j + 4m + t (h < 2, j < 4, m < 8, t < 4) of row r is
// bits 2j, 2j+1 of byte qs[32 (8h + m) + 4r + t], so one load, shift and mask
// gives four quants of each of the 8 rows, all in 16-element group
// 8h + 2j + m / 4.
//
// Q2_K group super-block (672 bytes, as 8 file blocks):
//   d[r], dmin[r]   row r's super-block scales (fp16);
//   scales[8g + r]  row r's scales[g] (scale in the low nibble, min above);
//   qs              as above.
// Per group and activation row: 4 vpmaddubsw summed as int16 (q <= 3), one
// vpmaddwd by the rows' scales (with VNNI: vpdpbusd to int32, then
// vpmulld); the mins go against Q8_K's group sums.
//
// Q3_K group super-block (912 bytes against the file's 8 x 110):
//   d[r]            row r's scale (fp16);
//   sc[8g + r]      row r's signed scale of group g (sc - 32), a byte;
//   hm[32m + 4r + t] = row r's hmask[4m + t], m < 8 (bit 4h + j: the third
//                   bit of element 128h + 32j + 4m + t);
//   qs              as above.
// The quants with their third bit (0 .. 7) stand for q - 4: the offset comes
// off as 4 * sum over groups of scale * group sum.
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/kquant.h"
#include "quant/packed.h"
#include "quant/packed_tile.h"

namespace lantern::quant {

#if LANTERN_SIMD_X86
namespace {

struct GroupQ2_K {
    uint16_t d[kPackRows];
    uint16_t dmin[kPackRows];
    uint8_t scales[16 * kPackRows];
    uint8_t qs[kPackRows * kQKK / 4];
};
static_assert(sizeof(GroupQ2_K) == kPackRows * sizeof(BlockQ2_K));

struct GroupQ3_K {
    uint16_t d[kPackRows];
    int8_t sc[16 * kPackRows];
    uint8_t hm[kPackRows * kQKK / 8];
    uint8_t qs[kPackRows * kQKK / 4];
};

template <class Group, class Block>
void fill_qs(Group& out, const Block& in, int r) {
    for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 8; ++m) std::memcpy(out.qs + 32 * (8 * h + m) + 4 * r, in.qs + 32 * h + 4 * m, 4);
    }
}

void fill_q2_K(GroupQ2_K& out, const BlockQ2_K& in, int r) {
    out.d[r] = in.d;
    out.dmin[r] = in.dmin;
    for (int g = 0; g < 16; ++g) out.scales[8 * g + r] = in.scales[g];
    fill_qs(out, in, r);
}

void fill_q3_K(GroupQ3_K& out, const BlockQ3_K& in, int r) {
    out.d[r] = in.d;
    uint32_t sc[4];
    kquant::scales_q3_K(in.scales, sc);
    for (int g = 0; g < 16; ++g) out.sc[8 * g + r] = static_cast<int8_t>(sc[g / 4] >> (8 * (g % 4)));
    for (int m = 0; m < 8; ++m) std::memcpy(out.hm + 32 * m + 4 * r, in.hmask + 4 * m, 4);
    fill_qs(out, in, r);
}

inline __m256i load_run(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The quants of elements 128h + 32j + 4m .. +3 of the group's 8 rows: 0 .. 3
// for Q2_K, 0 .. 7 with Q3_K's third bit. 16-bit shifts: what crosses over
// from the neighbouring byte never lands on the bits kept.
template <class Group>
inline __m256i quants(const Group& g, int h, int j, int m) {
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(load_run(g.qs + 32 * (8 * h + m)), 2 * j), _mm256_set1_epi8(3));
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return q;
    } else {
        const __m256i hm = load_run(g.hm + 32 * m);
        const int bit = 4 * h + j;  // to bit 2
        const __m256i moved = bit >= 2 ? _mm256_srli_epi16(hm, bit - 2) : _mm256_slli_epi16(hm, 2 - bit);
        return _mm256_or_si256(q, _mm256_and_si256(moved, _mm256_set1_epi8(4)));
    }
}

#if LANTERN_PACKED_512
// quants() of two groups (rows 0..7 from g0, 8..15 from g1).
template <class Group>
inline __m512i quants2(const Group& g0, const Group& g1, int h, int j, int m) {
    const size_t run = 32 * (8 * h + m);
    const __m512i q =
        _mm512_and_si512(_mm512_srli_epi16(packed::load_pair(g0.qs + run, g1.qs + run), 2 * j), _mm512_set1_epi8(3));
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return q;
    } else {
        const __m512i hm = packed::load_pair(g0.hm + 32 * m, g1.hm + 32 * m);
        const int bit = 4 * h + j;  // to bit 2
        const __m512i moved = bit >= 2 ? _mm512_srli_epi16(hm, bit - 2) : _mm512_slli_epi16(hm, 2 - bit);
        return _mm512_or_si512(q, _mm512_and_si512(moved, _mm512_set1_epi8(4)));
    }
}
#endif

// Row r's scale of group gi in int32 lane r.
template <class Group>
inline __m256i group_scales32(const Group& g, int gi) {
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return _mm256_and_si256(packed::bytes8_to_i32(g.scales + 8 * gi), _mm256_set1_epi32(0x0F));
    } else {
        return packed::sbytes8_to_i32(g.sc + 8 * gi);
    }
}

#if LANTERN_PACKED_512
// Rows 0..7 (g0) and 8..15 (g1)'s scales of group gi as int32 lanes.
template <class Group>
inline __m512i group_scales2(const Group& g0, const Group& g1, int gi) {
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return _mm512_and_si512(packed::bytes_to_i32(g0.scales + 8 * gi, g1.scales + 8 * gi), _mm512_set1_epi32(0x0F));
    } else {
        return packed::sbytes_to_i32(g0.sc + 8 * gi, g1.sc + 8 * gi);
    }
}
#endif

// Row r's scale of group gi in both int16 halves of lane r.
template <class Group>
inline __m256i group_scales(const Group& g, int gi) {
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return _mm256_and_si256(packed::scale_pairs(g.scales + 8 * gi), _mm256_set1_epi16(0x0F));
    } else {
        return packed::signed_scale_pairs(g.sc + 8 * gi);
    }
}

// Lane r: row r's mins (Q2_K) or scales (Q3_K) of groups 2p, 2p + 1.
template <class Group>
inline __m256i offset_pairs(const Group& g, int p) {
    if constexpr (std::is_same_v<Group, GroupQ2_K>) {
        return _mm256_srli_epi16(packed::min_pairs(g.scales + 16 * p), 4);
    } else {
        return packed::signed_pairs(g.sc + 16 * p);
    }
}

template <class G>
struct LowKTile {
    using Group = G;
    using Act = BlockQ8_K;
    static constexpr int kElems = kQKK;
    static constexpr size_t kPrefetchBytes = 4 * sizeof(Group);

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        __m256i isum[NC];
        for (__m256i& v : isum) v = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 4; ++j) {
                for (int half = 0; half < 2; ++half) {
#if LANTERN_PACKED_VNNI
                    // As block2: the group's products summed as int32, then scaled.
                    __m256i sum32[NC];
                    for (__m256i& v : sum32) v = _mm256_setzero_si256();
                    for (int m = 4 * half; m < 4 * half + 4; ++m) {
                        const __m256i q = quants(g, h, j, m);
                        for (int c = 0; c < NC; ++c) {
                            sum32[c] = packed::dot_u8s8(sum32[c], q, packed::splat_word(a[c]->qs + 128 * h + 32 * j + 4 * m));
                        }
                    }
                    const __m256i sc = group_scales32(g, 8 * h + 2 * j + half);
                    for (int c = 0; c < NC; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum32[c], sc));
#else
                    // Group 8h + 2j + half: runs m = 4 half .. 4 half + 3.
                    __m256i s16[NC];
                    for (__m256i& v : s16) v = _mm256_setzero_si256();
                    for (int m = 4 * half; m < 4 * half + 4; ++m) {
                        const __m256i q = quants(g, h, j, m);
                        for (int c = 0; c < NC; ++c) {
                            const int8_t* act = a[c]->qs + 128 * h + 32 * j + 4 * m;
                            s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(q, packed::splat_word(act)));
                        }
                    }
                    const __m256i sc = group_scales(g, 8 * h + 2 * j + half);
                    for (int c = 0; c < NC; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], sc));
#endif
                }
            }
        }
        __m256i pairs[8];
        for (int p = 0; p < 8; ++p) pairs[p] = offset_pairs(g, p);
        const __m256 dw = packed::load_fp16x8(g.d);
        __m256 mw = _mm256_setzero_ps();
        if constexpr (std::is_same_v<Group, GroupQ2_K>) mw = packed::load_fp16x8(g.dmin);
        for (int c = 0; c < NC; ++c) {
            const __m256 da = _mm256_set1_ps(a[c]->d);
            const __m256i offsets = packed::pair_sums<8>(pairs, a[c]->bsums);
            if constexpr (std::is_same_v<Group, GroupQ2_K>) {
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, da), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offsets), _mm256_mul_ps(mw, da), acc[c]);
            } else {
                const __m256i sum = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(offsets, 2));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, da), acc[c]);
            }
        }
    }

#if LANTERN_PACKED_512
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        __m512i isum[NC];
        for (__m512i& v : isum) v = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 4; ++j) {
                for (int half = 0; half < 2; ++half) {
                    // Group 8h + 2j + half: its int32 sums (vpdpbusd), then its scales.
                    __m512i sum32[NC];
                    for (__m512i& v : sum32) v = _mm512_setzero_si512();
                    for (int m = 4 * half; m < 4 * half + 4; ++m) {
                        const __m512i q = quants2(g0, g1, h, j, m);
                        for (int c = 0; c < NC; ++c) {
                            const int8_t* act = a[c]->qs + 128 * h + 32 * j + 4 * m;
                            sum32[c] = _mm512_dpbusd_epi32(sum32[c], q, packed::splat_word512(act));
                        }
                    }
                    const __m512i sc = group_scales2(g0, g1, 8 * h + 2 * j + half);
                    for (int c = 0; c < NC; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(sum32[c], sc));
                }
            }
        }
        __m512i pairs[8];
        for (int p = 0; p < 8; ++p) pairs[p] = packed::join(offset_pairs(g0, p), offset_pairs(g1, p));
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        __m512 mw = _mm512_setzero_ps();
        if constexpr (std::is_same_v<Group, GroupQ2_K>) mw = packed::load_fp16x8_pair(g0.dmin, g1.dmin);
        for (int c = 0; c < NC; ++c) {
            const __m512 da = _mm512_set1_ps(a[c]->d);
            const __m512i offsets = packed::pair_sums<8>(pairs, a[c]->bsums);
            if constexpr (std::is_same_v<Group, GroupQ2_K>) {
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(dw, da), acc[c]);
                acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offsets), _mm512_mul_ps(mw, da), acc[c]);
            } else {
                const __m512i sum = _mm512_sub_epi32(isum[c], _mm512_slli_epi32(offsets, 2));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, da), acc[c]);
            }
        }
    }
#endif
};

}  // namespace

const PackedOps kPackedQ2_K = {packed::bytes<GroupQ2_K, kQKK>, packed::pack<BlockQ2_K, GroupQ2_K, kQKK, fill_q2_K>,
                               quantize_q8_K, packed::act_bytes<BlockQ8_K, kQKK>,
                               packed::dot<LowKTile<GroupQ2_K>>, 4, LANTERN_PACKED_DOT2(LowKTile<GroupQ2_K>, 4)};
const PackedOps kPackedQ3_K = {packed::bytes<GroupQ3_K, kQKK>, packed::pack<BlockQ3_K, GroupQ3_K, kQKK, fill_q3_K>,
                               quantize_q8_K, packed::act_bytes<BlockQ8_K, kQKK>,
                               packed::dot<LowKTile<GroupQ3_K>>, 4, LANTERN_PACKED_DOT2(LowKTile<GroupQ3_K>, 8)};

#endif  // LANTERN_SIMD_X86

}  // namespace lantern::quant
