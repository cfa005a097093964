// Packed IQ4_NL and IQ4_XS (packed.h): 8 rows interleaved, against Q8_0
// with its blocks' sums (IQ4_NL) and Q8_K (IQ4_XS) activations.
//
// Both keep their nibbles as Q4_0 does, in 4-byte runs: for each 32-element
// block, qs[32 k + 4 r + t] = row r's file byte qs[4 k + t] of that block
// (k < 4), so the low nibbles of a run are elements 4k .. 4k+3 of each row
// (lane r), its high nibbles 16 + 4k .. 16 + 4k+3.
//   IQ4_NL group block (144 bytes, as 8 file blocks): d[r], then the runs.
//   IQ4_XS group super-block (1,104 bytes against the file's 8 x 136): d[r],
//   sc[8 b + r] row r's signed scale of block b (ls - 32), then the runs of
//   blocks 0 .. 7.
//
// A nibble is looked up in the value table (one byte shuffle), biased by
// 128 where the CPU has VNNI (see kBiased), and each product goes to int32
// on its own. IQ4_NL's activations carry their blocks' sums (Q8Sum).
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/iq4.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/packed_tile.h"

namespace lantern::quant {

#if LANTERN_SIMD_X86
namespace {

struct GroupIQ4_NL {
    uint16_t d[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
static_assert(sizeof(GroupIQ4_NL) == kPackRows * sizeof(BlockIQ4_NL));

struct GroupIQ4_XS {
    uint16_t d[kPackRows];
    int8_t sc[8 * kPackRows];
    uint8_t qs[kPackRows * kQKK / 2];
};

// Row r's runs of one 32-element block (16 file bytes at in) into out.
void fill_block_runs(uint8_t* out, const uint8_t* in, int r) {
    for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 4 * r, in + 4 * k, 4);
}

void fill_iq4_nl(GroupIQ4_NL& out, const BlockIQ4_NL& in, int r) {
    out.d[r] = in.d;
    fill_block_runs(out.qs, in.qs, r);
}

void fill_iq4_xs(GroupIQ4_XS& out, const BlockIQ4_XS& in, int r) {
    out.d[r] = in.d;
    for (int b = 0; b < 8; ++b) {
        out.sc[8 * b + r] = static_cast<int8_t>(iq4::xs_scale(in, b));
        fill_block_runs(out.qs + 128 * b, in.qs + 16 * b, r);
    }
}

// The value table plus 128 (1 .. 241): with VNNI a looked-up value times an
// activation quant is one u8 x s8 product (vpdpbusd), and 128 times the
// activation block's sum comes off. Without VNNI the signed values take the
// sign trick (u8 x s8 pairs of vpmaddubsw would saturate).
struct BiasedTable {
    alignas(16) uint8_t v[16];
};
constexpr BiasedTable biased_table() {
    BiasedTable t{};
    for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(iq4::kValues[i] + 128);
    return t;
}
constexpr BiasedTable kBiased = biased_table();

// The int32 dot of one packed 32-element block (runs at qs) with the
// activation block's 32 quants at a[c], whose sum is asum[c], for NC
// activation rows: lane r of sums[c] gets row r's.
template <int NC>
inline void block_sums(const uint8_t* qs, const int8_t* const (&a)[NC], const int32_t (&asum)[NC],
                       __m256i (&sums)[NC]) {
    const __m256i low = _mm256_set1_epi8(0x0F);
#if LANTERN_PACKED_VNNI
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.v)));
    for (int c = 0; c < NC; ++c) sums[c] = _mm256_set1_epi32(-128 * asum[c]);
#else
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(iq4::kValues)));
    for (__m256i& v : sums) v = _mm256_setzero_si256();
    (void)asum;
#endif
    for (int k = 0; k < 4; ++k) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
        const __m256i values[2] = {_mm256_shuffle_epi8(table, _mm256_and_si256(packed, low)),
                                   _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low))};
        for (int half = 0; half < 2; ++half) {
#if LANTERN_PACKED_VNNI
            for (int c = 0; c < NC; ++c) {
                sums[c] = packed::dot_u8s8(sums[c], values[half], packed::splat_word(a[c] + 16 * half + 4 * k));
            }
#else
            const __m256i mag = _mm256_sign_epi8(values[half], values[half]);
            for (int c = 0; c < NC; ++c) {
                const __m256i act = packed::splat_word(a[c] + 16 * half + 4 * k);
                sums[c] = packed::dot_u8s8(sums[c], mag, _mm256_sign_epi8(act, values[half]));
            }
#endif
        }
    }
}

#if LANTERN_PACKED_512
// block_sums for two groups' blocks (runs at qs0 and qs1): lanes 0..7 get
// rows 0..7 of the first, 8..15 those of the second.
template <int NC>
inline void block_sums2(const uint8_t* qs0, const uint8_t* qs1, const int8_t* const (&a)[NC],
                        const int32_t (&asum)[NC], __m512i (&sums)[NC]) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.v)));
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < NC; ++c) sums[c] = _mm512_set1_epi32(-128 * asum[c]);
    for (int k = 0; k < 4; ++k) {
        const __m512i packed = packed::load_pair(qs0 + 32 * k, qs1 + 32 * k);
        const __m512i values[2] = {_mm512_shuffle_epi8(table, _mm512_and_si512(packed, low)),
                                   _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(packed, 4), low))};
        for (int half = 0; half < 2; ++half) {
            for (int c = 0; c < NC; ++c) {
                sums[c] = _mm512_dpbusd_epi32(sums[c], values[half], packed::splat_word512(a[c] + 16 * half + 4 * k));
            }
        }
    }
}
#endif

struct IQ4_NLTile {
    using Group = GroupIQ4_NL;
    using Act = packed::Q8Sum;
    static constexpr int kElems = kQK;
    static constexpr size_t kPrefetchBytes = 4096;

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        const int8_t* qa[NC];
        int32_t asum[NC];
        for (int c = 0; c < NC; ++c) qa[c] = a[c]->qs, asum[c] = a[c]->sum;
        __m256i sum[NC];
        block_sums<NC>(g.qs, qa, asum, sum);
        const __m256 dw = packed::load_fp16x8(g.d);
        for (int c = 0; c < NC; ++c) {
            const __m256 da = _mm256_set1_ps(a[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_mul_ps(dw, da), acc[c]);
        }
    }

#if LANTERN_PACKED_512
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        const int8_t* qa[NC];
        int32_t asum[NC];
        for (int c = 0; c < NC; ++c) qa[c] = a[c]->qs, asum[c] = a[c]->sum;
        __m512i sum[NC];
        block_sums2<NC>(g0.qs, g1.qs, qa, asum, sum);
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        for (int c = 0; c < NC; ++c) {
            const __m512 da = _mm512_set1_ps(a[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c]), _mm512_mul_ps(dw, da), acc[c]);
        }
    }
#endif
};

struct IQ4_XSTile {
    using Group = GroupIQ4_XS;
    using Act = BlockQ8_K;
    static constexpr int kElems = kQKK;
    static constexpr size_t kPrefetchBytes = 4 * sizeof(GroupIQ4_XS);

    template <int NC>
    static void block(const Group& g, const Act* const (&a)[NC], __m256 (&acc)[NC]) {
        // |block sum| <= 32 * 127 * 127 and |scale| <= 32: eight blocks stay
        // below 2^28.
        __m256i isum[NC];
        for (__m256i& v : isum) v = _mm256_setzero_si256();
        for (int blk = 0; blk < 8; ++blk) {
            const int8_t* qa[NC];
            int32_t asum[NC];
            for (int c = 0; c < NC; ++c) qa[c] = a[c]->qs + 32 * blk, asum[c] = a[c]->bsums[2 * blk] + a[c]->bsums[2 * blk + 1];
            __m256i sum[NC];
            block_sums<NC>(g.qs + 128 * blk, qa, asum, sum);
            const __m256i sc = packed::sbytes8_to_i32(g.sc + 8 * blk);
            for (int c = 0; c < NC; ++c) isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum[c], sc));
        }
        const __m256 dw = packed::load_fp16x8(g.d);
        for (int c = 0; c < NC; ++c) {
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, _mm256_set1_ps(a[c]->d)), acc[c]);
        }
    }

#if LANTERN_PACKED_512
    template <int NC>
    static void block2(const Group& g0, const Group& g1, const Act* const (&a)[NC], __m512 (&acc)[NC]) {
        __m512i isum[NC];
        for (__m512i& v : isum) v = _mm512_setzero_si512();
        for (int blk = 0; blk < 8; ++blk) {
            const int8_t* qa[NC];
            int32_t asum[NC];
            for (int c = 0; c < NC; ++c) qa[c] = a[c]->qs + 32 * blk, asum[c] = a[c]->bsums[2 * blk] + a[c]->bsums[2 * blk + 1];
            __m512i sum[NC];
            block_sums2<NC>(g0.qs + 128 * blk, g1.qs + 128 * blk, qa, asum, sum);
            const __m512i sc = packed::sbytes_to_i32(g0.sc + 8 * blk, g1.sc + 8 * blk);
            for (int c = 0; c < NC; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(sum[c], sc));
        }
        const __m512 dw = packed::load_fp16x8_pair(g0.d, g1.d);
        for (int c = 0; c < NC; ++c) {
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(dw, _mm512_set1_ps(a[c]->d)), acc[c]);
        }
    }
#endif
};

}  // namespace

const PackedOps kPackedIQ4_NL = {packed::bytes<GroupIQ4_NL, kQK>,
                                 packed::pack<BlockIQ4_NL, GroupIQ4_NL, kQK, fill_iq4_nl>, packed::q8_sum_from_float,
                                 packed::act_bytes<packed::Q8Sum, kQK>, packed::dot<IQ4_NLTile>, 4,
                                 LANTERN_PACKED_DOT2(IQ4_NLTile, 8)};
const PackedOps kPackedIQ4_XS = {packed::bytes<GroupIQ4_XS, kQKK>,
                                 packed::pack<BlockIQ4_XS, GroupIQ4_XS, kQKK, fill_iq4_xs>, quantize_q8_K,
                                 packed::act_bytes<BlockQ8_K, kQKK>, packed::dot<IQ4_XSTile>, 4,
                                 LANTERN_PACKED_DOT2(IQ4_XSTile, 8)};

#endif  // LANTERN_SIMD_X86

}  // namespace lantern::quant
