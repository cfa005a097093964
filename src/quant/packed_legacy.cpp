// Packed Q4_0, Q4_1 and Q8_0 (packed.h): 8 rows interleaved, against
// activations quantized as Q8_0 blocks (Q8_1's d and quants are the same)
// that also carry their quants' sum.
//
// Group block b of a packed matrix (as large as the 8 file blocks):
//   d[r] (and Q4_1's m[r])  row r's block scale (and min), fp16, r < 8;
//   Q4_0, Q4_1: qs[32 k + 4 r + t] = row r's file byte qs[4 k + t], k < 4,
//     t < 4, so the low nibbles of the 32 bytes at qs + 32 k are elements
//     4k .. 4k+3 of each row (lane r), their high nibbles 16 + 4k .. 16 + 4k+3;
//   Q8_0: qs[32 k + 4 r + t] = row r's qs[4 k + t], k < 8.
//
// Per group block and activation row: the nibble types take 8 u8 x s8
// products (vpmaddubsw) summed as int16 (q <= 15, |a| <= 127: 8 pairs stay
// under 32,767) and one vpmaddwd to int32; Q4_0 subtracts 8 * sum(a) for its
// offset, Q4_1 adds m * d_a * sum(a). Q8_0's signed pairs reach 32,258, so
// each of its 8 products goes to int32 on its own (the sign trick: |w| times
// a with w's sign). Then one fused multiply-add scales the 8 rows' sums.
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/packed_tile.h"

namespace lantern::quant {

#if LANTERN_SIMD_WIDTH == 256
namespace {

// Q8_0 with d widened to f32 and the sum of its quants.
struct ActBlock {
    float d;
    int32_t sum;
    int8_t qs[kQK];
};

size_t act_row_bytes(int64_t cols) { return static_cast<size_t>(cols / kQK) * sizeof(ActBlock); }

void act_from_float(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<ActBlock*>(dst);
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

struct GroupQ4_0 {
    uint16_t d[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ4_1 {
    uint16_t d[kPackRows];
    uint16_t m[kPackRows];
    uint8_t qs[kPackRows * kQK / 2];
};
struct GroupQ8_0 {
    uint16_t d[kPackRows];
    int8_t qs[kPackRows * kQK];
};
static_assert(sizeof(GroupQ4_0) == kPackRows * sizeof(BlockQ4_0));
static_assert(sizeof(GroupQ4_1) == kPackRows * sizeof(BlockQ4_1));
static_assert(sizeof(GroupQ8_0) == kPackRows * sizeof(BlockQ8_0));

// Row r's quants in 4-byte runs: run k at qs + 32 k + 4 r.
template <class Group, class Block>
void fill_runs(Group& out, const Block& in, int r) {
    out.d[r] = in.d;
    if constexpr (std::is_same_v<Group, GroupQ4_1>) out.m[r] = in.m;
    for (size_t k = 0; k < sizeof(in.qs) / 4; ++k) std::memcpy(out.qs + 32 * k + 4 * r, in.qs + 4 * k, 4);
}

inline __m256 load_fp16x8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The group's blocks are read in one stream; prefetched as far ahead as the
// AVX2 tiles of dot_legacy.cpp prefetch theirs.
constexpr size_t kPrefetchBytes = 4096;

// Q4_0 and Q4_1.
template <class Group>
struct NibbleTile {
    static constexpr bool kMin = std::is_same_v<Group, GroupQ4_1>;

    template <int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by) {
        const int64_t nb = n / kQK;
        const auto* w = static_cast<const Group*>(group);
        const ActBlock* a[NC];
        for (int c = 0; c < NC; ++c) a[c] = row_at<ActBlock>(y, by, c);
        const __m256i low = _mm256_set1_epi8(0x0F);
        __m256 acc[NC];
        for (__m256& v : acc) v = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            prefetch_ahead(w + b, kPrefetchBytes, sizeof(Group));
            __m256i q[8];
            for (int k = 0; k < 4; ++k) {
                const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * k));
                q[k] = _mm256_and_si256(packed, low);
                q[4 + k] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
            }
            const __m256 dw = load_fp16x8(w[b].d);
            for (int c = 0; c < NC; ++c) {
                const ActBlock& ab = a[c][b];
                const int offset = kMin ? 0 : 8;
#if LANTERN_SIMD_VNNI
                __m256i sum = _mm256_set1_epi32(-offset * ab.sum);
                for (int k = 0; k < 8; ++k) sum = simd::dot_u8s8(sum, q[k], packed::splat_word(ab.qs + 4 * k));
#else
                __m256i sum16 = _mm256_maddubs_epi16(q[0], packed::splat_word(ab.qs));
                for (int k = 1; k < 8; ++k) {
                    sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(q[k], packed::splat_word(ab.qs + 4 * k)));
                }
                __m256i sum = _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
                if constexpr (!kMin) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(offset * ab.sum));
#endif
                const __m256 da = _mm256_set1_ps(ab.d);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, da), acc[c]);
                if constexpr (kMin) {
                    acc[c] = _mm256_fmadd_ps(load_fp16x8(w[b].m), _mm256_set1_ps(ab.d * static_cast<float>(ab.sum)), acc[c]);
                }
            }
        }
        for (int c = 0; c < NC; ++c) _mm256_storeu_ps(s + static_cast<size_t>(c) * ldc, acc[c]);
    }
};

struct Q8_0Tile {
    template <int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* group, const void* y, size_t by) {
        const int64_t nb = n / kQK;
        const auto* w = static_cast<const GroupQ8_0*>(group);
        const ActBlock* a[NC];
        for (int c = 0; c < NC; ++c) a[c] = row_at<ActBlock>(y, by, c);
        __m256 acc[NC];
        for (__m256& v : acc) v = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            prefetch_ahead(w + b, kPrefetchBytes, sizeof(GroupQ8_0));
            __m256i sum[NC];
            for (__m256i& v : sum) v = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * k));
                const __m256i mag = _mm256_sign_epi8(q, q);
                for (int c = 0; c < NC; ++c) {
                    sum[c] = simd::dot_u8s8(sum[c], mag, _mm256_sign_epi8(packed::splat_word(a[c][b].qs + 4 * k), q));
                }
            }
            const __m256 dw = load_fp16x8(w[b].d);
            for (int c = 0; c < NC; ++c) {
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]), _mm256_mul_ps(dw, _mm256_set1_ps(a[c][b].d)), acc[c]);
            }
        }
        for (int c = 0; c < NC; ++c) _mm256_storeu_ps(s + static_cast<size_t>(c) * ldc, acc[c]);
    }
};

}  // namespace

const PackedOps kPackedQ4_0 = {packed::bytes<GroupQ4_0, kQK>,
                               packed::pack<BlockQ4_0, GroupQ4_0, kQK, fill_runs<GroupQ4_0, BlockQ4_0>>,
                               act_from_float, act_row_bytes, packed::dot<NibbleTile<GroupQ4_0>>, 4};
const PackedOps kPackedQ4_1 = {packed::bytes<GroupQ4_1, kQK>,
                               packed::pack<BlockQ4_1, GroupQ4_1, kQK, fill_runs<GroupQ4_1, BlockQ4_1>>,
                               act_from_float, act_row_bytes, packed::dot<NibbleTile<GroupQ4_1>>, 4};
const PackedOps kPackedQ8_0 = {packed::bytes<GroupQ8_0, kQK>,
                               packed::pack<BlockQ8_0, GroupQ8_0, kQK, fill_runs<GroupQ8_0, BlockQ8_0>>,
                               act_from_float, act_row_bytes, packed::dot<Q8_0Tile>, 4};

#endif  // LANTERN_SIMD_WIDTH == 256

}  // namespace lantern::quant
