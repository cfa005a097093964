// Dot-product tiles of the 32-element weight types against Q8_0 / Q8_1
// activations.
//
// Per block pair the integer dot sum(u * a) is taken with u unsigned and a
// signed (vpdpbusd, or vpmaddubsw + vpmaddwd without VNNI); the weights'
// offset is folded in by starting that sum at -offset * sum(a), computed once
// per activation block. Q8_0 weights are made unsigned with u = q ^ 0x80
// (offset 128) when VNNI is there, and multiplied with the sign trick
// otherwise. The int32 lanes become floats scaled by d_w * d_a; Q4_1/Q5_1 add
// m_w * d_a * sum(a), with sum(a) taken from the quants (Q8_1's stored
// s = d_a * sum(a) is rounded to fp16, so the kernels do not use it).
//
// A step covers one block per 256-bit piece of a vector (two with AVX-512);
// each weight step is unpacked once and used for all NC activation rows.
#include <type_traits>

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
    using VF = simd::VF;
    using VI = simd::VI;

    // Each row's weights are prefetched this far ahead (prefetch_ahead). The
    // 2-core Xeon (AVX-512), tg of synthetic tinyllama 1.1B, two threads,
    // same session: Q4_0 23.7 -> 30.2 t/s, Q8_0 15.5 -> 20.3 (256 bytes:
    // Q4_0 28.1; 384: 29.3; 768: 27.5; 1,024: 26.4); SmolLM2-135M Q4_1
    // 66 -> 78 t/s on one thread; prompt speed unchanged. A 2-core AMD EPYC
    // with AVX2 wants it much further: its rows are 1-3 KB, so 4 KB ahead is
    // the next tile's rows (tinyllama Q4_0, alternated binaries: 512 bytes
    // 15.4-19.4 t/s, 1,024 15.6-17.8, 4,096 23.1-29.4, 8,192 27.0-29.0,
    // 16,384 24.9-29.7; SmolLM2 Q4_1 108-111 -> 115-124). The AVX-512 and
    // NEON tiers keep the Xeon's 512 (NEON unmeasured).
#if LANTERN_SIMD_WIDTH == 256
    static constexpr size_t kPrefetchBytes = 4096;
#else
    static constexpr size_t kPrefetchBytes = 512;
#endif

    // The constant subtracted from u through the activation sums.
    static constexpr int kCorrection = W::kSigned ? (LANTERN_SIMD_VNNI ? 128 : 0) : W::kOffset;

    // One step of kPieces activation blocks: quants, scales, -kCorrection * sum
    // of the quants per int32 lane and (for Q4_1/Q5_1) d * sum per lane.
    struct ActStep {
        VI q, corr;
        VF d, s;
    };
    // One step of kPieces weight blocks: quants as unsigned bytes (signed for
    // Q8_0 without VNNI), scales and mins.
    struct WeightStep {
        VI q;
        VF d, m;
    };

    // Blocks p[0 .. kPieces); in the tail only p[0], whose copy in the second
    // piece gets weight scale (and min) 0 so that it adds nothing.
    template <bool kTail>
    static ActStep load_act(const Act* p) {
        ActStep a;
        const void* q[kPieces];
        for (int i = 0; i < kPieces; ++i) q[i] = p[kTail ? 0 : i].qs;
        a.q = simd::load_pieces(q);
        a.d = kTail ? splat_tail([](const Act& b) { return fp16_to_f32(b.d); }, p, false)
                    : simd::splat_fp16_pieces<sizeof(Act)>(&p->d);
        if constexpr (W::kHasMin) {
            // d * sum(a), from the quants rather than Q8_1's fp16 s (which is
            // rounded): the lanes of a piece add up to the block's sum.
            const VI sums = simd::dot_u8s8(simd::zero_i(), simd::splat_i8(1), a.q);
            a.s = simd::mul_f(a.d, simd::cvt_f(sums));
        }
        if constexpr (kCorrection != 0) {
            const VI k = simd::splat_i8(static_cast<int8_t>(kCorrection));
            a.corr = simd::sub_i32(simd::zero_i(), simd::dot_u8s8(simd::zero_i(), k, a.q));
        }
        return a;
    }

    template <bool kTail>
    static WeightStep load_weights(const Block* p) {
        WeightStep w;
        const Block* blocks[kPieces];
        for (int i = 0; i < kPieces; ++i) blocks[i] = &p[kTail ? 0 : i];
        w.q = W::load(blocks);
        if constexpr (W::kSigned && kCorrection != 0) w.q = simd::xor_i(w.q, simd::splat_i8(-128));
        w.d = kTail ? splat_tail([](const Block& b) { return scale_of<W>(b); }, p, true)
                    : simd::splat_fp16_pieces<sizeof(Block)>(&p->d);
        if constexpr (W::kHasMin) {
            w.m = kTail ? splat_tail([](const Block& b) { return min_of<W>(b); }, p, true)
                        : simd::splat_fp16_pieces<sizeof(Block)>(&p->m);
        }
        return w;
    }

    // f(p[0]) in piece 0; in the others f(p[0]) again, or 0 when `dead`.
    template <class F, class B>
    static VF splat_tail(F f, const B* p, bool dead) {
        float v[kPieces];
        for (int i = 0; i < kPieces; ++i) v[i] = (i > 0 && dead) ? 0.0f : f(p[0]);
        return simd::splat_pieces(v);
    }

    static void accumulate(VF& acc, const WeightStep& w, const ActStep& a) {
        VI dot;
        if constexpr (kCorrection != 0) {
            dot = simd::dot_u8s8(a.corr, w.q, a.q);
        } else if constexpr (W::kSigned) {
            dot = simd::dot_s8s8(simd::zero_i(), w.q, a.q);
        } else {
            dot = simd::dot_u8s8(simd::zero_i(), w.q, a.q);
        }
        acc = simd::fmadd_f(simd::cvt_f(dot), simd::mul_f(w.d, a.d), acc);
        if constexpr (W::kHasMin) acc = simd::fmadd_f(w.m, a.s, acc);
    }

    template <int NR, int NC, bool kTail>
    static inline void step(VF (&acc)[NR][NC], const Block* const (&w)[NR], const Act* const (&a)[NC], int64_t b) {
        // The weights stay in registers while the activations stream past:
        // NR * NC accumulators + 2 NR weight vectors + one activation step.
        WeightStep ws[NR];
        for (int r = 0; r < NR; ++r) {
            prefetch_ahead(w[r] + b, kPrefetchBytes, kPieces * sizeof(Block));
            ws[r] = load_weights<kTail>(w[r] + b);
        }
        for (int c = 0; c < NC; ++c) {
            const ActStep as = load_act<kTail>(a[c] + b);
            for (int r = 0; r < NR; ++r) accumulate(acc[r][c], ws[r], as);
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
            if constexpr (W::kHasMin) {
                int asum = 0;
                for (int j = 0; j < kQK; ++j) asum += a[b].qs[j];
                sum += min_of<W>(w[b]) * (fp16_to_f32(a[b].d) * static_cast<float>(asum));
            }
        }
        return sum;
    }
#endif
};

// Tile shapes. AVX-512: 16 accumulators + 8 weight vectors + one activation
// step fit the 32 zmm. AVX2 spills some of its 16 ymm at 4 x 4 but still
// measured faster than 2 x 3, 2 x 4 or 3 x 2 (the weight unpacking is shared
// by more columns). With one activation row AVX-512 takes 8 rows a call for
// Q4_0 and Q8_0 (8 accumulators + 16 weight vectors + one activation step),
// so each activation step serves twice the rows. 2-core Xeon, synthetic
// tinyllama, tg with two threads, runs alternated: Q4_0 27.2-29.3 ->
// 29.7-30.8 t/s, Q8_0 19.6-19.8 -> 20.5-21.0; one thread Q4_0 15.5-15.6 ->
// 16.2. Q4_1 at 8 rows (a third weight vector per row, so spills) cost
// SmolLM2 15%, Q5_0 (its fifth bits' unpacking) 26.2 -> 25.7, and 8 rows
// for the prompt tiles cost pp 5-8%.
#if LANTERN_SIMD_WIDTH == 512
constexpr int kNR = 4, kNC = 4, kDecodeNR = 8;
#elif LANTERN_SIMD_WIDTH == 128
// NEON: a vector is two of its 32 registers, so 2 x 4 accumulators (and four
// rows for Q4_0/Q8_0 with one activation row). Unmeasured: no ARM machine yet.
constexpr int kNR = 2, kNC = 4, kDecodeNR = 4;
#elif LANTERN_SIMD_WIDTH
constexpr int kNR = 4, kNC = 4, kDecodeNR = 4;
#else
constexpr int kNR = 2, kNC = 2, kDecodeNR = 2;
#endif

template <class W>
constexpr DotKernel dot_kernel() {
    constexpr int nr = std::is_same_v<W, Q4_0> || std::is_same_v<W, Q8_0> ? kDecodeNR : kNR;
    return {&TiledDot<LegacyTile<W>, nr, kNC>::vec_dot, nr, kNC, kNR};
}

}  // namespace

const DotKernel kDotQ4_0 = dot_kernel<Q4_0>();
const DotKernel kDotQ4_1 = dot_kernel<Q4_1>();
const DotKernel kDotQ5_0 = dot_kernel<Q5_0>();
const DotKernel kDotQ5_1 = dot_kernel<Q5_1>();
const DotKernel kDotQ8_0 = dot_kernel<Q8_0>();
const DotKernel kDotIQ4_NL = dot_kernel<IQ4_NL>();

}  // namespace lantern::quant
