// Packed Q4_K (packed.h): 8 rows interleaved, against Q8_K activations whose
// 32-element sums come precomputed.
//
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
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/kquant.h"
#include "quant/packed.h"
#include "quant/packed_tile.h"

namespace lantern::quant {

#if LANTERN_SIMD_WIDTH == 256
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

size_t act_row_bytes(int64_t cols) { return static_cast<size_t>(cols / kQKK) * sizeof(ActBlock); }

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

void fill_q4_K(GroupQ4_K& out, const BlockQ4_K& in, int r) {
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
}

// Lane r: row r's byte of sub-block s, zero-extended into both int16 halves.
inline __m256i scale_pairs(const uint8_t* bytes8) {
    int64_t v;
    std::memcpy(&v, bytes8, sizeof v);
    const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                          4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(v), pick);
}

// Lane r: row r's bytes of sub-blocks 2p and 2p + 1 (16 bytes at p), as int16.
inline __m256i min_pairs(const uint8_t* bytes16) {
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes16)));
    const __m256i pick = _mm256_setr_epi8(0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1,  //
                                          4, -1, 12, -1, 5, -1, 13, -1, 6, -1, 14, -1, 7, -1, 15, -1);
    return _mm256_shuffle_epi8(both, pick);
}

// Each group super-block is 1,184 bytes read in one stream: 4 ahead, about
// the distance dot_legacy.cpp's AVX2 tiles prefetch.
constexpr size_t kPrefetchBytes = 4 * sizeof(GroupQ4_K);

struct Q4_KTile {
    template <int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by) {
        const int64_t nb = n / kQKK;
        const auto* w = static_cast<const GroupQ4_K*>(group);
        const ActBlock* a[NC];
        for (int c = 0; c < NC; ++c) a[c] = row_at<ActBlock>(y, by, c);
        const __m256i low = _mm256_set1_epi8(0x0F);
        __m256 acc[NC];
        for (__m256& v : acc) v = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const GroupQ4_K& g = w[b];
            prefetch_ahead(&g, kPrefetchBytes, sizeof(GroupQ4_K));
            __m256i isum[NC];
            for (__m256i& v : isum) v = _mm256_setzero_si256();
            for (int j = 0; j < 4; ++j) {
                __m256i lo16[NC], hi16[NC];
                for (int c = 0; c < NC; ++c) lo16[c] = hi16[c] = _mm256_setzero_si256();
                for (int k = 0; k < 8; ++k) {
                    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 256 * j + 32 * k));
                    const __m256i lo = _mm256_and_si256(packed, low);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
                    for (int c = 0; c < NC; ++c) {
                        const int8_t* q = a[c][b].qs + 64 * j + 4 * k;
                        lo16[c] = _mm256_add_epi16(lo16[c], _mm256_maddubs_epi16(lo, packed::splat_word(q)));
                        hi16[c] = _mm256_add_epi16(hi16[c], _mm256_maddubs_epi16(hi, packed::splat_word(q + 32)));
                    }
                }
                const __m256i sc_lo = scale_pairs(g.sc + 8 * (2 * j)), sc_hi = scale_pairs(g.sc + 8 * (2 * j + 1));
                for (int c = 0; c < NC; ++c) {
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(lo16[c], sc_lo),
                                                                         _mm256_madd_epi16(hi16[c], sc_hi)));
                }
            }
            __m256i mins[4];
            for (int p = 0; p < 4; ++p) mins[p] = min_pairs(g.mn + 16 * p);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
            const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.dmin)));
            for (int c = 0; c < NC; ++c) {
                const ActBlock& ab = a[c][b];
                __m256i msum = _mm256_madd_epi16(mins[0], packed::splat_word(ab.sums));
                for (int p = 1; p < 4; ++p) msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins[p], packed::splat_word(ab.sums + 2 * p)));
                const __m256 da = _mm256_set1_ps(ab.d);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, da), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(mw, da), acc[c]);
            }
        }
        for (int c = 0; c < NC; ++c) _mm256_storeu_ps(s + static_cast<size_t>(c) * ldc, acc[c]);
    }
};

}  // namespace

const PackedOps kPackedQ4_K = {packed::bytes<GroupQ4_K, kQKK>, packed::pack<BlockQ4_K, GroupQ4_K, kQKK, fill_q4_K>,
                               act_from_float, act_row_bytes, packed::dot<Q4_KTile>, 4};

#endif  // LANTERN_SIMD_WIDTH == 256

}  // namespace lantern::quant
