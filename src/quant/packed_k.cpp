// Packed Q4_K, Q5_K and Q6_K (packed.h): 8 rows interleaved, against Q8_K
// activations (Q4_K's with their 32-element sums precomputed).
//
// Q4_K:
// Group super-block (1,184 bytes against the file's 8 x 144):
//   d[r], dmin[r]      row r's super-block scales (fp16);
//   sc[8 s + r]        row r's 6-bit scale of sub-block s, a byte;
//   mn[8 s + r]        its 6-bit min, a byte;
//   qs[256 j + 32 k + 4 r + t] = row r's file byte qs[32 j + 4 k + t],
// so the low nibbles of the 32 bytes at qs + 256 j + 32 k are elements 4k ..
// 4k+3 of sub-block 2j of each row (lane r), the high nibbles those of 2j+1.
//
// Per sub-block and activation row: 8 vpmaddubsw summed as int16 (nibbles <=
// 15 against |a| <= 128: 8 pairs stay under 32,767), then one vpmaddwd by
// the rows' scales (both int16 halves of lane r hold row r's) adds them into
// the super-block's int32 sums. The mins: vpmaddwd of two sub-blocks' mins
// (row r's pair in lane r) by the activation's two 32-element sums.
// Q5_K adds qh[32 k + 4 r + t] = row r's qh[4 k + t], k < 8 (after qs).
// Where the CPU has VNNI (block there, and block2) each sub-block's products
// are summed as int32 instead (vpdpbusd) and multiplied by the rows' scales
// (vpmulld).
//
// Q6_K group super-block (1,680 bytes, as 8 file blocks):
//   d[r]                row r's scale (fp16);
//   sc[8 s + r]         row r's int8 scale of 16-element group s;
//   ql[32 k + 4 r + t] = row r's ql[4 k + t], k < 32;
//   qh[32 k + 4 r + t] = row r's qh[4 k + t], k < 16.
// Elements 128h + 32g + 4m .. +3 (h < 2, g < 4, m < 8) of row r are lane r
// of ql run 16h + 8(g & 1) + m (low nibbles for g < 2, else high) with bits
// 2g, 2g+1 of qh run 8h + m above them. Quants reach 63, so two vpmaddubsw
// at most are summed as int16 before vpmaddwd takes the group's scale; the
// offset 32 comes off as 32 * sum over groups of scale * the activation's
// 16-element sum (Q8_K's bsums). With VNNI each group is summed as int32
// by vpdpbusd and takes its scales by vpmulld.
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

// Q8_K without its 16-element sums, with the 32-element ones.
struct ActBlock {
    float d;
    int16_t sums[kQKK / 32];
    int8_t qs[kQKK];
};

struct GroupQ4_K {
    uint16_t d[kPackRows];
    uint16_t dmin[kPackRows];
    uint8_t sc[8 * kPackRows];
    uint8_t mn[8 * kPackRows];
    uint8_t qs[kPackRows * kQKK / 2];
};
struct GroupQ5_K {
    uint16_t d[kPackRows];
    uint16_t dmin[kPackRows];
    uint8_t sc[8 * kPackRows];
    uint8_t mn[8 * kPackRows];
    uint8_t qs[kPackRows * kQKK / 2];
    uint8_t qh[kPackRows * kQKK / 8];
};

void act_from_float(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<ActBlock*>(dst);
    for (int64_t b = 0; b < n / kQKK; ++b) {
        BlockQ8_K q;
        quantize_q8_K(src + b * kQKK, &q, kQKK);
        out[b].d = q.d;
        for (int s = 0; s < kQKK / 32; ++s) out[b].sums[s] = static_cast<int16_t>(q.bsums[2 * s] + q.bsums[2 * s + 1]);
        std::memcpy(out[b].qs, q.qs, kQKK);
    }
}

template <class Group, class Block>
void fill_k(Group& out, const Block& in, int r) {
    out.d[r] = in.d;
    out.dmin[r] = in.dmin;
    uint32_t sc[2], mn[2];
    kquant::scales_mins_k4(in.scales, sc, mn);
    for (int s = 0; s < 8; ++s) {
        out.sc[8 * s + r] = static_cast<uint8_t>(sc[s / 4] >> (8 * (s % 4)));
        out.mn[8 * s + r] = static_cast<uint8_t>(mn[s / 4] >> (8 * (s % 4)));
    }
    for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 8; ++k) std::memcpy(out.qs + 256 * j + 32 * k + 4 * r, in.qs + 32 * j + 4 * k, 4);
    }
    if constexpr (std::is_same_v<Group, GroupQ5_K>) {
        for (int k = 0; k < 8; ++k) std::memcpy(out.qh + 32 * k + 4 * r, in.qh + 4 * k, 4);
    }
}

// Q4_K, and Q5_K with the fifth bit of sub-block s, element 4k + t in bit s
// of byte t of its qh run k. Its quants reach 31, so its int16 sums take 4
// products, not 8.
template <class G>
struct KTile {
    using Group = G;
    using Act = ActBlock;
    static constexpr int kElems = kQKK;
    // A group super-block (1,184 or 1,440 bytes) is read in one stream: 4
    // ahead, about the distance dot_legacy.cpp's AVX2 tiles prefetch.
    static constexpr size_t kPrefetchBytes = 4 * sizeof(Group);
    static constexpr bool kFifth = std::is_same_v<Group, GroupQ5_K>;
    static constexpr int kRunsPerSum = kFifth ? 4 : 8;

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        const __m256i low = _mm256_set1_epi8(0x0F);
        __m256i isum[NC];
        for (__m256i& v : isum) v = _mm256_setzero_si256();
#if LANTERN_PACKED_VNNI
        // As block2: a sub-block's products summed as int32, then scaled.
        for (int s = 0; s < 8; ++s) {
            const int j = s / 2;
            __m256i sum32[NC];
            for (__m256i& v : sum32) v = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 256 * j + 32 * k));
                __m256i q = _mm256_and_si256(s % 2 == 0 ? packed : _mm256_srli_epi16(packed, 4), low);
                if constexpr (kFifth) {
                    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qh + 32 * k));
                    q = _mm256_or_si256(q, packed::bit_to_16(qh, s));
                }
                for (int c = 0; c < NC; ++c) {
                    sum32[c] = packed::dot_u8s8(sum32[c], q, packed::splat_word(a[c]->qs + 32 * s + 4 * k));
                }
            }
            const __m256i sc = packed::bytes8_to_i32(g.sc + 8 * s);
            for (int c = 0; c < NC; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum32[c], sc));
        }
#else
        for (int j = 0; j < 4; ++j) {
            const __m256i sc_lo = packed::scale_pairs(g.sc + 8 * (2 * j));
            const __m256i sc_hi = packed::scale_pairs(g.sc + 8 * (2 * j + 1));
            for (int k0 = 0; k0 < 8; k0 += kRunsPerSum) {
                __m256i lo16[NC], hi16[NC];
                for (int c = 0; c < NC; ++c) lo16[c] = hi16[c] = _mm256_setzero_si256();
                for (int k = k0; k < k0 + kRunsPerSum; ++k) {
                    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 256 * j + 32 * k));
                    __m256i lo = _mm256_and_si256(packed, low);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
                    if constexpr (kFifth) {
                        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qh + 32 * k));
                        lo = _mm256_or_si256(lo, packed::bit_to_16(qh, 2 * j));
                        hi = _mm256_or_si256(hi, packed::bit_to_16(qh, 2 * j + 1));
                    }
                    for (int c = 0; c < NC; ++c) {
                        const int8_t* q = a[c]->qs + 64 * j + 4 * k;
                        lo16[c] = _mm256_add_epi16(lo16[c], _mm256_maddubs_epi16(lo, packed::splat_word(q)));
                        hi16[c] = _mm256_add_epi16(hi16[c], _mm256_maddubs_epi16(hi, packed::splat_word(q + 32)));
                    }
                }
                for (int c = 0; c < NC; ++c) {
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(lo16[c], sc_lo),
                                                                         _mm256_madd_epi16(hi16[c], sc_hi)));
                }
            }
        }
#endif
        __m256i mins[4];
        for (int p = 0; p < 4; ++p) mins[p] = packed::min_pairs(g.mn + 16 * p);
        const __m256 dw = packed::load_fp16x8(g.d);
        const __m256 mw = packed::load_fp16x8(g.dmin);
        for (int c = 0; c < NC; ++c) {
            const __m256i msum = packed::pair_sums<4>(mins, a[c]->sums);
            const __m256 da = _mm256_set1_ps(a[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, da), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(mw, da), acc[c]);
        }
    }

#if LANTERN_PACKED_512
    // With VNNI each run's products go straight to int32 (vpdpbusd), summed
    // over a sub-block's 8 runs, and the rows' scales multiply the int32
    // sums (vpmulld): half the instructions of the int16 sums. One
    // sub-block at a time (its runs loaded again for the next), so that the
    // 8 activation rows' sums stay in registers.
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        const __m512i low = _mm512_set1_epi8(0x0F);
        __m512i isum[NC];
        for (__m512i& v : isum) v = _mm512_setzero_si512();
        // Sub-block s: the low (even s) or high nibbles of runs 256 (s / 2) + 32 k.
        for (int s = 0; s < 8; ++s) {
            const int j = s / 2;
            __m512i sum32[NC];
            for (__m512i& v : sum32) v = _mm512_setzero_si512();
            for (int k = 0; k < 8; ++k) {
                const __m512i packed = packed::load_pair(g0.qs + 256 * j + 32 * k, g1.qs + 256 * j + 32 * k);
                __m512i q = _mm512_and_si512(s % 2 == 0 ? packed : _mm512_srli_epi16(packed, 4), low);
                if constexpr (kFifth) {
                    q = _mm512_or_si512(q, packed::bit_to_16(packed::load_pair(g0.qh + 32 * k, g1.qh + 32 * k), s));
                }
                for (int c = 0; c < NC; ++c) {
                    sum32[c] = _mm512_dpbusd_epi32(sum32[c], q, packed::splat_word512(a[c]->qs + 32 * s + 4 * k));
                }
            }
            const __m512i sc = packed::bytes_to_i32(g0.sc + 8 * s, g1.sc + 8 * s);
            for (int c = 0; c < NC; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(sum32[c], sc));
        }
        __m512i mins[4];
        for (int p = 0; p < 4; ++p) mins[p] = packed::join(packed::min_pairs(g0.mn + 16 * p), packed::min_pairs(g1.mn + 16 * p));
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        const __m512 mw = packed::load_fp16x8_pair(g0.dmin, g1.dmin);
        for (int c = 0; c < NC; ++c) {
            const __m512i msum = packed::pair_sums<4>(mins, a[c]->sums);
            const __m512 da = _mm512_set1_ps(a[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(dw, da), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(mw, da), acc[c]);
        }
    }
#endif
};

struct GroupQ6_K {
    uint16_t d[kPackRows];
    int8_t sc[16 * kPackRows];
    uint8_t ql[kPackRows * kQKK / 2];
    uint8_t qh[kPackRows * kQKK / 4];
};
static_assert(sizeof(GroupQ6_K) == kPackRows * sizeof(BlockQ6_K));

void fill_q6_K(GroupQ6_K& out, const BlockQ6_K& in, int r) {
    out.d[r] = in.d;
    for (int s = 0; s < 16; ++s) out.sc[8 * s + r] = in.scales[s];
    for (int k = 0; k < 32; ++k) std::memcpy(out.ql + 32 * k + 4 * r, in.ql + 4 * k, 4);
    for (int k = 0; k < 16; ++k) std::memcpy(out.qh + 32 * k + 4 * r, in.qh + 4 * k, 4);
}

// Quants (0 .. 63) of elements 128h + 32g + 4m .. +3 of the group's 8 rows.
inline __m256i q6_quants(const GroupQ6_K& g, int h, int gi, int m) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.ql + 32 * (16 * h + 8 * (gi & 1) + m)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qh + 32 * (8 * h + m)));
    const __m256i nibbles = _mm256_and_si256(gi < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    __m256i high;  // bits 2gi, 2gi + 1 of qh to bits 4, 5
    switch (gi) {
        case 0: high = _mm256_slli_epi16(qh, 4); break;
        case 1: high = _mm256_slli_epi16(qh, 2); break;
        case 2: high = qh; break;
        default: high = _mm256_srli_epi16(qh, 2); break;
    }
    return _mm256_or_si256(nibbles, _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
}

#if LANTERN_PACKED_512
// q6_quants of two groups (rows 0..7 from g0, 8..15 from g1), gi a constant.
template <int GI>
inline __m512i q6_quants2(const GroupQ6_K& g0, const GroupQ6_K& g1, int h, int m) {
    const size_t lo_run = 32 * (16 * h + 8 * (GI & 1) + m), hi_run = 32 * (8 * h + m);
    const __m512i ql = packed::load_pair(g0.ql + lo_run, g1.ql + lo_run);
    const __m512i qh = packed::load_pair(g0.qh + hi_run, g1.qh + hi_run);
    const __m512i nibbles = _mm512_and_si512(GI < 2 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0F));
    const __m512i high = GI == 0   ? _mm512_slli_epi16(qh, 4)
                         : GI == 1 ? _mm512_slli_epi16(qh, 2)
                         : GI == 2 ? qh
                                   : _mm512_srli_epi16(qh, 2);
    return _mm512_or_si512(nibbles, _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
}
#endif

struct Q6_KTile {
    using Group = GroupQ6_K;
    using Act = BlockQ8_K;
    static constexpr int kElems = kQKK;
    static constexpr size_t kPrefetchBytes = 3 * sizeof(GroupQ6_K);

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        __m256i isum[NC];
        for (__m256i& v : isum) v = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            for (int gi = 0; gi < 4; ++gi) {
                for (int half = 0; half < 2; ++half) {
#if LANTERN_PACKED_VNNI
                    // As block2: the group's products summed as int32, then scaled.
                    __m256i sum32[NC];
                    for (__m256i& v : sum32) v = _mm256_setzero_si256();
                    for (int m = 4 * half; m < 4 * half + 4; ++m) {
                        const __m256i q = q6_quants(g, h, gi, m);
                        for (int c = 0; c < NC; ++c) {
                            sum32[c] = packed::dot_u8s8(sum32[c], q, packed::splat_word(a[c]->qs + 128 * h + 32 * gi + 4 * m));
                        }
                    }
                    const __m256i sc = packed::sbytes8_to_i32(g.sc + 8 * (8 * h + 2 * gi + half));
                    for (int c = 0; c < NC; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum32[c], sc));
#else
                    const __m256i sc = packed::signed_scale_pairs(g.sc + 8 * (8 * h + 2 * gi + half));
                    for (int m = 4 * half; m < 4 * half + 4; m += 2) {
                        const __m256i q0 = q6_quants(g, h, gi, m), q1 = q6_quants(g, h, gi, m + 1);
                        for (int c = 0; c < NC; ++c) {
                            const int8_t* act = a[c]->qs + 128 * h + 32 * gi + 4 * m;
                            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(q0, packed::splat_word(act)),
                                                                 _mm256_maddubs_epi16(q1, packed::splat_word(act + 4)));
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16, sc));
                        }
                    }
#endif
                }
            }
        }
        __m256i pairs[8];
        for (int p = 0; p < 8; ++p) pairs[p] = packed::signed_pairs(g.sc + 16 * p);
        const __m256 dw = packed::load_fp16x8(g.d);
        for (int c = 0; c < NC; ++c) {
            const __m256i offset = packed::pair_sums<8>(pairs, a[c]->bsums);
            const __m256i sum = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(offset, 5));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a[c]->d)), acc[c]);
        }
    }

#if LANTERN_PACKED_512
    // The two 16-element groups 8h + 2GI, 8h + 2GI + 1 of 16 rows: each
    // group's int32 sums (vpdpbusd), then its scales (vpmulld).
    template <int GI, int NC>
    static void groups2(const Group& g0, const Group& g1, const Act* const (&a)[NC], int h, __m512i (&isum)[NC]) {
        for (int half = 0; half < 2; ++half) {
            __m512i sum32[NC];
            for (__m512i& v : sum32) v = _mm512_setzero_si512();
            for (int m = 4 * half; m < 4 * half + 4; ++m) {
                const __m512i q = q6_quants2<GI>(g0, g1, h, m);
                for (int c = 0; c < NC; ++c) {
                    sum32[c] = _mm512_dpbusd_epi32(sum32[c], q, packed::splat_word512(a[c]->qs + 128 * h + 32 * GI + 4 * m));
                }
            }
            const int s = 8 * (8 * h + 2 * GI + half);
            const __m512i sc = packed::sbytes_to_i32(g0.sc + s, g1.sc + s);
            for (int c = 0; c < NC; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(sum32[c], sc));
        }
    }

    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        __m512i isum[NC];
        for (__m512i& v : isum) v = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
            groups2<0>(g0, g1, a, h, isum);
            groups2<1>(g0, g1, a, h, isum);
            groups2<2>(g0, g1, a, h, isum);
            groups2<3>(g0, g1, a, h, isum);
        }
        __m512i pairs[8];
        for (int p = 0; p < 8; ++p) pairs[p] = packed::join(packed::signed_pairs(g0.sc + 16 * p), packed::signed_pairs(g1.sc + 16 * p));
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        for (int c = 0; c < NC; ++c) {
            const __m512i offset = packed::pair_sums<8>(pairs, a[c]->bsums);
            const __m512i sum = _mm512_sub_epi32(isum[c], _mm512_slli_epi32(offset, 5));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(a[c]->d)), acc[c]);
        }
    }
#endif
};

}  // namespace

const PackedOps kPackedQ4_K = {packed::bytes<GroupQ4_K, kQKK>,
                               packed::pack<BlockQ4_K, GroupQ4_K, kQKK, fill_k<GroupQ4_K, BlockQ4_K>>,
                               act_from_float, packed::act_bytes<ActBlock, kQKK>, packed::dot<KTile<GroupQ4_K>>, 4,
                               LANTERN_PACKED_DOT2(KTile<GroupQ4_K>, 8)};
const PackedOps kPackedQ5_K = {packed::bytes<GroupQ5_K, kQKK>,
                               packed::pack<BlockQ5_K, GroupQ5_K, kQKK, fill_k<GroupQ5_K, BlockQ5_K>>,
                               act_from_float, packed::act_bytes<ActBlock, kQKK>, packed::dot<KTile<GroupQ5_K>>, 4,
                               LANTERN_PACKED_DOT2(KTile<GroupQ5_K>, 8)};
const PackedOps kPackedQ6_K = {packed::bytes<GroupQ6_K, kQKK>, packed::pack<BlockQ6_K, GroupQ6_K, kQKK, fill_q6_K>,
                               quantize_q8_K, packed::act_bytes<BlockQ8_K, kQKK>, packed::dot<Q6_KTile>, 4,
                               LANTERN_PACKED_DOT2(Q6_KTile, 8)};

#endif  // LANTERN_SIMD_X86

}  // namespace lantern::quant
