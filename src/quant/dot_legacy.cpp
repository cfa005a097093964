// Dot-product tiles of the 32-element weight types against Q8_0 / Q8_1
// activations.
//
// Per block pair the integer dot sum(u * a) is taken with u unsigned and a
// signed (vpdpbusd, or vpmaddubsw + vpmaddwd without VNNI); the weights'
// offset is folded in by starting that sum at -offset * sum(a), computed once
// per activation block. Q8_0 weights are made unsigned with u = q ^ 0x80
// (offset 128) when VNNI is there, and multiplied with the sign trick
// otherwise. The int32 lanes become floats scaled by d_w * d_a; Q4_1/Q5_1 add
// m_w * s_a, where the activation's s = d_a * sum(a) is stored in its block.
//
// A step covers one block per 256-bit piece of a vector (two with AVX-512);
// each weight step is unpacked once and used for all NC activation rows.
#include "quant/kernels.h"
#include "quant/legacy.h"
#include "quant/tile.h"

namespace lantern::quant {
namespace {

using namespace legacy;

template <class W>
struct LegacyTile {
    using Block = typename W::Block;
    using Act = typename W::Act;

    template <int NR, int NC>
    static void run(int64_t n, float* s, size_t ldc, const void* x, size_t bx, const void* y, size_t by) {
        const int64_t nb = n / kQK;
        const Block* w[NR];
        const Act* a[NC];
        for (int r = 0; r < NR; ++r) w[r] = row_at<Block>(x, bx, r);
        for (int c = 0; c < NC; ++c) a[c] = row_at<Act>(y, by, c);
#if LANTERN_SIMD_WIDTH
        simd::VF acc[NR][NC];
        for (auto& rr : acc)
            for (simd::VF& v : rr) v = simd::zero_f();
        int64_t b = 0;
        for (; b + kPieces <= nb; b += kPieces) step<NR, NC, false>(acc, w, a, b);
        if (b < nb) step<NR, NC, true>(acc, w, a, b);  // odd block count with two pieces
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < NC; ++c) s[static_cast<size_t>(c) * ldc + r] = simd::hsum_f(acc[r][c]);
#else
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < NC; ++c) s[static_cast<size_t>(c) * ldc + r] = dot_scalar(w[r], a[c], nb);
#endif
    }

private:
#if LANTERN_SIMD_WIDTH
    // The constant subtracted from u through the activation sums.
    static constexpr int kCorrection = W::kSigned ? (LANTERN_SIMD_VNNI ? 128 : 0) : W::kOffset;

    // Blocks b .. b + kPieces - 1; in the tail only block b, whose copy in the
    // second piece gets weight scale (and min) 0.
    template <int NR, int NC, bool kTail>
    static inline void step(simd::VF (&acc)[NR][NC], const Block* const (&w)[NR], const Act* const (&a)[NC],
                            int64_t b) {
        using simd::VF;
        using simd::VI;
        VI aq[NC], corr[NC];
        VF ad[NC], as[NC];
        for (int c = 0; c < NC; ++c) {
            const void* q[kPieces];
            float d[kPieces], sum[kPieces];
            for (int i = 0; i < kPieces; ++i) {
                const Act& blk = a[c][b + (kTail ? 0 : i)];
                q[i] = blk.qs;
                d[i] = fp16_to_f32(blk.d);
                if constexpr (W::kHasMin) sum[i] = fp16_to_f32(blk.s);
            }
            aq[c] = simd::load_pieces(q);
            ad[c] = simd::splat_pieces(d);
            if constexpr (W::kHasMin) as[c] = simd::splat_pieces(sum);
            if constexpr (kCorrection != 0) {
                const VI k = simd::splat_i8(static_cast<int8_t>(kCorrection));
                corr[c] = simd::sub_i32(simd::zero_i(), simd::dot_u8s8(simd::zero_i(), k, aq[c]));
            }
        }
        for (int r = 0; r < NR; ++r) {
            const Block* blocks[kPieces];
            float d[kPieces], m8[kPieces];
            for (int i = 0; i < kPieces; ++i) {
                blocks[i] = &w[r][b + (kTail ? 0 : i)];
                const bool dead = kTail && i > 0;
                d[i] = dead ? 0.0f : scale_of<W>(*blocks[i]);
                // The min term is added on all 8 lanes of a piece: 1/8 each.
                if constexpr (W::kHasMin) m8[i] = dead ? 0.0f : 0.125f * min_of<W>(*blocks[i]);
            }
            VI wq = W::load(blocks);
            if constexpr (W::kSigned && kCorrection != 0) wq = simd::xor_i(wq, simd::splat_i8(-128));
            const VF wd = simd::splat_pieces(d);
            VF wm = simd::zero_f();
            if constexpr (W::kHasMin) wm = simd::splat_pieces(m8);
            for (int c = 0; c < NC; ++c) {
                VI dot;
                if constexpr (kCorrection != 0) {
                    dot = simd::dot_u8s8(corr[c], wq, aq[c]);
                } else if constexpr (W::kSigned) {
                    dot = simd::dot_s8s8(simd::zero_i(), wq, aq[c]);
                } else {
                    dot = simd::dot_u8s8(simd::zero_i(), wq, aq[c]);
                }
                acc[r][c] = simd::fmadd_f(simd::cvt_f(dot), simd::mul_f(wd, ad[c]), acc[r][c]);
                if constexpr (W::kHasMin) acc[r][c] = simd::fmadd_f(wm, as[c], acc[r][c]);
            }
        }
    }
#else
    static float dot_scalar(const Block* w, const Act* a, int64_t nb) {
        float sum = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
            int u[kQK];
            W::unpack(w[b], u);
            int isum = 0;
            for (int j = 0; j < kQK; ++j) isum += (u[j] - W::kOffset) * a[b].qs[j];
            sum += static_cast<float>(isum) * (scale_of<W>(w[b]) * fp16_to_f32(a[b].d));
            if constexpr (W::kHasMin) sum += min_of<W>(w[b]) * fp16_to_f32(a[b].s);
        }
        return sum;
    }
#endif
};

// Tile shapes. AVX-512: NR x NC accumulators + NC activation vectors (+ their
// scales and corrections) must fit 32 zmm; AVX2 has 16 ymm.
#if LANTERN_SIMD_WIDTH == 512
constexpr int kNR = 4, kNC = 4;
#elif LANTERN_SIMD_WIDTH == 256
constexpr int kNR = 2, kNC = 3;
#else
constexpr int kNR = 2, kNC = 2;
#endif

template <class W>
constexpr DotKernel dot_kernel() {
    return {&TiledDot<LegacyTile<W>, kNR, kNC>::vec_dot, kNR, kNC};
}

}  // namespace

const DotKernel kDotQ4_0 = dot_kernel<Q4_0>();
const DotKernel kDotQ4_1 = dot_kernel<Q4_1>();
const DotKernel kDotQ5_0 = dot_kernel<Q5_0>();
const DotKernel kDotQ5_1 = dot_kernel<Q5_1>();
const DotKernel kDotQ8_0 = dot_kernel<Q8_0>();

}  // namespace lantern::quant
