// One 32-element block of a quantized weight in its device layout
// (weight_layout.h), for every quantized type: what a lane loads (qload),
// the block's four-byte words of quants (qword), its dot product with a
// block of the 8-bit activation (qdot) and its two groups of 16 as scaled
// quants (group16). The matrix-vector kernels, the row lookup and the
// prompt path's dequantization all read weights through these, so each
// layout is decoded in one place.
#pragma once

#include "backends/cuda/common.cuh"
#include "quant/iq4.h"

namespace lantern::cuda {

constexpr uint32_t kLow4 = 0x0F0F0F0Fu;
constexpr uint32_t kLow2 = 0x03030303u;
constexpr uint32_t kLow1 = 0x01010101u;

// A block's registers. Each type fills only the fields it has (the others
// are never read, so they cost no registers):
//   q0       16 payload bytes (the nibbles; Q8_0: bytes 0..15)
//   q1       Q8_0: bytes 16..31
//   two      the two-bit fields (word h: elements 16h .. 16h + 15; Q3_K:
//            words A and B of its three-bit packing, put_three_bits)
//   one      the one-bit fields (Q5_K; Q3_K: word C), or Q5_0/Q5_1's 32 high bits
//   sc       the K-quants' two scale bytes
//   dm       fp16 bits: d (low half) and dmin / m (high half)
struct QBlk {
    uint4 q0, q1;
    uint2 two;
    uint32_t one, sc, dm;
};

// One row of a weight: its payload and meta rows.
struct QRow {
    const uint8_t* q;
    const uint8_t* m;
};

__device__ __forceinline__ QRow q_row(const WView& w, int64_t row) {
    return {w.data + static_cast<size_t>(row) * w.row_bytes, w.meta + static_cast<size_t>(row) * w.meta_row_bytes};
}

// Where a row's fields for block b0 are (one pointer per plane; the
// K-quants' d/dmin words cover eight blocks, so their pointer is for block
// b0 & ~7). qload_at(base, c) then reads block b0 + c with c a multiple of 8
// known at compile time: every load is a base register plus an immediate
// offset, and a stage of U blocks needs one address per plane, not one per
// load (64-bit address arithmetic per load was ~60 of a Q4_0 stage's ~500
// instructions).
struct QBase {
    const uint8_t* q;    // payload: the nibbles (Q8_0: bytes 0..15), block b0
    const uint8_t* q1;   // Q8_0 bytes 16..31 / K-quant two-bit plane, block b0
    const uint8_t* one;  // K-quant one-bit plane / Q5_0's high bits, block b0
    const uint8_t* m;    // meta: scales (K-quants: scale bytes), block b0
    const uint8_t* dm;   // K-quants: d/dmin of block b0's group of eight
};

// A K-quant row's d/dmin word of superblock sb (blocks 8 sb .. 8 sb + 7):
// after the row's two scale bytes per block.
template <DType T>
__device__ __forceinline__ const uint8_t* q_dm_at(const QRow& r, size_t nb, size_t sb) {
    return r.m + 2 * nb + kq_dm_bytes(T) * sb;
}

// The bases are opaque (common.cuh): the compiler would otherwise fold base
// + immediate back into b0 + c and redo the 64-bit arithmetic per load.
// Not for rows in shared memory (Opq false): there the compiler must see
// where a pointer came from to use shared loads.
template <DType T, bool Opq = true>
__device__ __forceinline__ QBase qbase(const QRow& r, size_t nb, size_t b0) {
    auto opaque = [](const uint8_t* p) { return Opq ? cuda::opaque(p) : p; };
    QBase k;
    k.q = opaque(r.q + 16 * b0);            // a K-quant's nibble plane too (16 bytes a block)
    k.m = opaque(r.m + q32_meta(T) * b0);  // K-quants: 2 scale bytes a block, as Q4_0's d
    k.q1 = k.one = k.dm = nullptr;
    if constexpr (T == DType::Q5_0) {  // the high bits' plane, then the scales'
        k.one = opaque(r.m + 4 * b0);
        k.m = opaque(r.m + 4 * nb + 2 * b0);
    }
    if constexpr (T == DType::Q8_0) k.q1 = opaque(r.q + 16 * (nb + b0));
    if constexpr (is_kq_layout(T)) {
        constexpr size_t nib = kq_nibble_bytes(T), two = kq_two_bytes(T);
        k.q1 = opaque(r.q + nib * nb + two * b0);
        k.one = opaque(r.q + (nib + two) * nb + kq_one_bytes(T) * b0);
        k.dm = opaque(q_dm_at<T>(r, nb, b0 >> 3));
    }
    return k;
}

// A K-quant's d/dmin word (Q3_K, Q6_K: d alone) at p.
template <DType T, Ld L = Ld::Cached>
__device__ __forceinline__ uint32_t qload_dm(const uint8_t* p) {
    if constexpr (kq_dm_bytes(T) == 4) return ld32<L>(p);
    return ld16<L>(p);
}

// Block b0 + c (c % 8 == 0 or b0 % 8 + c < 8) of the row qbase describes. L:
// how it is read (Ld: Coherent for a prologue's loads, before the grid
// wait; Shared for rows a bulk copy staged). Dm: a
// K-quant's d/dmin word too (without: the caller gets it another way).
template <DType T, Ld L = Ld::Cached, bool Dm = true>
__device__ __forceinline__ QBlk qload_at(const QBase& r, size_t c) {
    QBlk k;
    if constexpr (T == DType::Q8_0) {
        k.q0 = ld128<L>(r.q + 16 * c);
        k.q1 = ld128<L>(r.q1 + 16 * c);
        k.dm = ld16<L>(r.m + 2 * c);
    } else if constexpr (T == DType::Q4_0 || T == DType::IQ4_NL) {
        k.q0 = ld128<L>(r.q + 16 * c);
        k.dm = ld16<L>(r.m + 2 * c);
    } else if constexpr (T == DType::Q4_1) {
        k.q0 = ld128<L>(r.q + 16 * c);
        k.dm = ld32<L>(r.m + 4 * c);
    } else if constexpr (T == DType::Q5_0) {
        k.q0 = ld128<L>(r.q + 16 * c);
        k.one = ld32<L>(r.one + 4 * c);
        k.dm = ld16<L>(r.m + 2 * c);
    } else if constexpr (T == DType::Q5_1) {
        k.q0 = ld128<L>(r.q + 16 * c);
        const uint2 m = ld64<L>(r.m + 8 * c);
        k.one = m.x;
        k.dm = m.y;
    } else {  // K-quants (and IQ4_XS): planes in the order nibbles, two bits, one bit
        if constexpr (kq_nibble_bytes(T) != 0) k.q0 = ld128<L>(r.q + 16 * c);
        if constexpr (kq_two_bytes(T) != 0) k.two = ld64<L>(r.q1 + 8 * c);
        if constexpr (kq_one_bytes(T) != 0) k.one = ld32<L>(r.one + 4 * c);
        k.sc = ld16<L>(r.m + 2 * c);
        if constexpr (Dm) k.dm = qload_dm<T, L>(r.dm + kq_dm_bytes(T) * (c >> 3));
    }
    return k;
}

// Q3_K and Q5_K: blocks c and c + 1 (c even, c % 8 == 0 or b0 % 8 + c < 8)
// of the row qbase describes (b0 even): Q3_K's two-bit fields one 16-byte
// load (Q5_K's nibbles two), the one-bit fields one 8-byte load, the scale
// bytes one word (both blocks keep it: qdot<T, true> reads block c + 1's
// from its high half), d (and dmin) one load.
template <DType T, Ld L = Ld::Cached>
__device__ __forceinline__ void qload_pair_at(const QBase& r, size_t c, QBlk& k0, QBlk& k1) {
    static_assert(T == DType::Q3_K || T == DType::Q5_K, "a one-bit plane of 4 bytes a block");
    if constexpr (T == DType::Q3_K) {
        const uint4 two = ld128<L>(r.q1 + 8 * c);
        k0.two = make_uint2(two.x, two.y);
        k1.two = make_uint2(two.z, two.w);
    } else {
        k0.q0 = ld128<L>(r.q + 16 * c);
        k1.q0 = ld128<L>(r.q + 16 * c + 16);
    }
    const uint2 one = ld64<L>(r.one + 4 * c);
    k0.one = one.x;
    k1.one = one.y;
    k0.sc = k1.sc = ld32<L>(r.m + 2 * c);
    k0.dm = k1.dm = qload_dm<T, L>(r.dm + kq_dm_bytes(T) * (c >> 3));
}

// Block b of a row of nb blocks.
template <DType T, Ld L = Ld::Cached>
__device__ __forceinline__ QBlk qload(const QRow& r, size_t nb, size_t b) {
    return qload_at<T, L>(qbase<T>(r, nb, b), 0);
}

// Quants of elements 16h + 4j .. 16h + 4j + 3, one per byte, before any
// offset (Q8_0: signed; the others: unsigned; IQ4_NL/IQ4_XS: indices into
// the table iq4_values maps them by).
template <DType T>
__device__ __forceinline__ uint32_t qword(const QBlk& k, int h, int j) {
    const uint32_t w[4] = {k.q0.x, k.q0.y, k.q0.z, k.q0.w};
    if constexpr (T == DType::Q8_0) {
        const uint32_t w1[4] = {k.q1.x, k.q1.y, k.q1.z, k.q1.w};
        return h == 0 ? w[j] : w1[j];
    } else if constexpr (T == DType::Q3_K) {
        // Words A, B (two) and C (one) of put_three_bits (weight_layout.cpp).
        const uint32_t a = k.two.x, b = k.two.y, c = k.one;
        if (h == 0) return ((j < 2 ? a : b) >> (3 * (j & 1))) & 0x07070707u;
        if (j < 2) return (c >> (3 * j)) & 0x07070707u;
        return (((j == 2 ? a : b) >> 6) & kLow2) | ((c >> (j == 2 ? 4 : 5)) & 0x04040404u);
    } else {
        uint32_t q = 0;
        if constexpr (T == DType::Q2_K) {
            q = ((h == 0 ? k.two.x : k.two.y) >> (2 * j)) & kLow2;
        } else {
            q = (w[j] >> (4 * h)) & kLow4;
        }
        if constexpr (T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q5_K) q |= ((k.one >> (4 * h + j)) & kLow1) << 4;
        if constexpr (T == DType::Q6_K) q |= (((h == 0 ? k.two.x : k.two.y) >> (2 * j)) & kLow2) << 4;
        return q;
    }
}

// The IQ4 table (iq4.h) as byte-permute operands: four values a word,
// little-endian, from value 4 * i + add on (the high half plus one: iq4_dot4).
constexpr uint32_t iq4_word(int i, int add = 0) {
    uint32_t w = 0;
    for (int b = 0; b < 4; ++b) w |= static_cast<uint32_t>(static_cast<uint8_t>(quant::iq4::kValues[4 * i + b] + add)) << (8 * b);
    return w;
}
constexpr uint32_t kIq4T0 = iq4_word(0), kIq4T1 = iq4_word(1), kIq4T2 = iq4_word(2), kIq4T3 = iq4_word(3);

// IQ4 table lookups by byte permutes: iq4_values16(s) gives the
// values of the four indices in bits 0..15 of s (index e in bits 4e ..
// 4e + 3) as four signed bytes: two permutes look the indices' low three
// bits up in each half of the table, a third picks the half by bit 3.
__device__ __forceinline__ uint32_t iq4_values16(uint32_t s) {
    const uint32_t lo = __byte_perm(kIq4T0, kIq4T1, s & 0x7777u), hi = __byte_perm(kIq4T2, kIq4T3, s & 0x7777u);
    return __byte_perm(lo, hi, 0x3210u | ((s >> 1) & 0x4444u));
}

// Four indices, one per byte (< 16), as their values.
__device__ __forceinline__ uint32_t iq4_values(uint32_t q) {
    return iq4_values16(__byte_perm(q | (q >> 4), 0, 0x0020));
}

// prmt in its default mode, where a selector nibble with bit 3 set gives
// the selected byte's sign (0x00 or 0xFF) rather than the byte.
__device__ __forceinline__ uint32_t prmt_signed(uint32_t a, uint32_t b, uint32_t s) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
    return d;
}

// acc + the dot product of the table values of four indices (bits 0..15
// of s as iq4_values16 reads them; sx: s ^ 0x8888) with four signed bytes
// x, in two permutes where the lookup above takes three and two masks: one
// of the table's low half (T0..T7), which for an index i >= 8 gives the sign
// of the negative T[i - 8], -1; one of its high half plus one (T8 + 1 ..
// T15 + 1) by the index with bit 3 flipped, which for i < 8 gives the sign
// of a positive byte, 0. The two bytes sum to T[i] either way, so two dot
// products with x add up to the one with the values.
__device__ __forceinline__ int iq4_dot4(uint32_t s, uint32_t sx, int x, int acc) {
    constexpr uint32_t hi0 = iq4_word(2, 1), hi1 = iq4_word(3, 1);
    return __dp4a(static_cast<int>(prmt_signed(kIq4T0, kIq4T1, s)), x,
                  __dp4a(static_cast<int>(prmt_signed(hi0, hi1, sx)), x, acc));
}

// A block of the activation as the dot product reads it: the 8-bit
// quants of elements 0..15 (lo) and 16..31 (hi), the scale, d * sum of each
// half's quants (s0, s1) and the halves' integer sums as two int16 (isum:
// low half elements 0..15), the form __dp2a_lo takes (|sum| <= 16 * 127).
struct ActBlk {
    int4 lo, hi;
    float d, s0, s1;
    int isum;
};

// dot(a, b) + c of four unsigned bytes of a with four signed bytes of b.
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// The types with a scale per group of 16 (Q2_K, Q3_K, Q6_K): each half's
// integer sum of q * a (elements 0..15: x, 16..31: y), before offsets and
// scales.
template <DType T>
__device__ __forceinline__ int2 qsums16(const QBlk& k, const int4& alo, const int4& ahi) {
    const int lo[4] = {alo.x, alo.y, alo.z, alo.w};
    const int hi[4] = {ahi.x, ahi.y, ahi.z, ahi.w};
    int v0 = 0, v1 = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        v0 = __dp4a(static_cast<int>(qword<T>(k, 0, j)), lo[j], v0);
        v1 = __dp4a(static_cast<int>(qword<T>(k, 1, j)), hi[j], v1);
    }
    return make_int2(v0, v1);
}

// Offsets subtracted from a type's quants (0: none, or the type has a min).
template <DType T>
constexpr int q_offset() {
    return T == DType::Q4_0 ? 8 : T == DType::Q5_0 ? 16 : T == DType::Q3_K ? 4 : T == DType::Q6_K ? 32 : 0;
}

__device__ __forceinline__ float fp16_lo(uint32_t v) { return half_bits_to_float(static_cast<uint16_t>(v)); }
__device__ __forceinline__ float fp16_hi(uint32_t v) { return half_bits_to_float(static_cast<uint16_t>(v >> 16)); }

// dot(weight block, activation block) in f32. Integer sums are exact; the
// float expression per type:
//   Q4_0, Q5_0, Q8_0  d * da * (sum q a - offset * (i0 + i1))
//   Q4_1, Q5_1        d * da * sum q a + m * (s0 + s1)
//   Q4_K, Q5_K        (d * sc) * da * sum q a - (dmin * m) * (s0 + s1)
//   Q2_K              da * (d * (sc0 v0 + sc1 v1) - dmin * (m0 i0 + m1 i1))
//   Q3_K              d * da * (sc0 v0 + sc1 v1 - offset * (sc0 i0 + sc1 i1))
//   Q6_K              d * (da * (sc0 v0 + sc1 v1) - offset * (sc0 s0 + sc1 s1))
//   IQ4_NL, IQ4_XS    d (* sc) * da * sum table[q] a
// with v0, v1 the integer sums of each half (q a) and i0, i1 the halves'
// activation sums. The integer pairs are two-way dot products (__dp2a_lo:
// a word of two int16 with two bytes) where both fit in 16 bits: Q2_K and
// Q3_K are bound by instruction issue (H100 profile, sixth session); op
// bench 4096 x 11008, same call: Q2_K 62 -> 66% of the copy, Q3_K 61 ->
// 62%. Q6_K's sums pass 16 bits; its offset term in integers (sc0 * v0 +
// sc1 * v1 - 32 * dp2a) lost 83 -> 82%, so it keeps the float one.
//
// Hi (Q3_K, Q5_K): the block's scale bytes are bytes 2 and 3 of k.sc (the
// second block of qload_pair_at; Q3_K reads them by __dp2a_hi where the
// others take __dp2a_lo).
template <DType T, bool Hi = false>
__device__ __forceinline__ float qdot(const QBlk& k, const ActBlk& a) {
    const int lo[4] = {a.lo.x, a.lo.y, a.lo.z, a.lo.w};
    const int hi[4] = {a.hi.x, a.hi.y, a.hi.z, a.hi.w};
    if constexpr (is_iq4(T)) {
        // Word j's low 16 bits are the indices of elements 4j, 4j + 16,
        // 4j + 1, 4j + 17 as they lie (byte i: element 4j + i low, 4j + 16 + i
        // high), its high 16 bits those of 4j + 2, 4j + 18, 4j + 3, 4j + 19:
        // the activation's bytes are put in that order (two permutes a word,
        // shared by a stage's rows) rather than the nibbles unpacked.
        const uint32_t w[4] = {k.q0.x, k.q0.y, k.q0.z, k.q0.w};
        int v = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t wx = w[j] ^ 0x88888888u;
            v = iq4_dot4(w[j], wx, static_cast<int>(__byte_perm(lo[j], hi[j], 0x5140)), v);
            v = iq4_dot4(w[j] >> 16, wx >> 16, static_cast<int>(__byte_perm(lo[j], hi[j], 0x7362)), v);
        }
        float d = fp16_lo(k.dm) * a.d;
        if constexpr (T == DType::IQ4_XS) d *= static_cast<float>(static_cast<int8_t>(k.sc & 0xFFu));
        return d * static_cast<float>(v);
    } else if constexpr (T == DType::Q2_K || T == DType::Q3_K || T == DType::Q6_K) {
        // A scale per group of 16.
        const int2 v = qsums16<T>(k, a.lo, a.hi);
        const int v0 = v.x, v1 = v.y;
        const float d = fp16_lo(k.dm);
        if constexpr (T == DType::Q2_K) {
            // |v| <= 16 * 3 * 127: both halves' sums in one word.
            const int sc = static_cast<int>(k.sc & 0x0F0Fu), m = static_cast<int>((k.sc >> 4) & 0x0F0Fu);
            const int isc = __dp2a_lo(static_cast<int>(__byte_perm(v0, v1, 0x5410)), sc, 0);
            const int imn = __dp2a_lo(a.isum, m, 0);
            return a.d * (d * static_cast<float>(isc) - fp16_hi(k.dm) * static_cast<float>(imn));
        } else if constexpr (T == DType::Q3_K) {
            // |v| <= 16 * 7 * 127; the scales are signed bytes 0 and 1 of sc
            // (2 and 3: Hi).
            auto dp2a = [](int x, int y) { return Hi ? __dp2a_hi(x, y, 0) : __dp2a_lo(x, y, 0); };
            const int sc = static_cast<int>(k.sc);
            const int isc = dp2a(static_cast<int>(__byte_perm(v0, v1, 0x5410)), sc);
            return d * a.d * static_cast<float>(isc - q_offset<T>() * dp2a(a.isum, sc));
        } else {
            const int sc0 = static_cast<int8_t>(k.sc & 0xFFu), sc1 = static_cast<int8_t>(k.sc >> 8);
            return d * (a.d * static_cast<float>(sc0 * v0 + sc1 * v1) -
                        static_cast<float>(q_offset<T>()) *
                            (static_cast<float>(sc0) * a.s0 + static_cast<float>(sc1) * a.s1));
        }
    } else {
        // -offset * (i0 + i1): the offset as two signed bytes.
        constexpr int kNegOff = ((-q_offset<T>()) & 0xFF) * 0x0101;
        int v = q_offset<T>() != 0 ? __dp2a_lo(a.isum, kNegOff, 0) : 0;
        constexpr bool kNibbles = T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q4_K;
        if constexpr (kNibbles) {
            // Nibbles only: the high ones stay in place (16 q, unsigned), so
            // each word takes two masks instead of a mask, a shift and a mask
            // (v16 = 16 v, exact in float: |v16| < 2^20).
            const uint32_t w[4] = {k.q0.x, k.q0.y, k.q0.z, k.q0.w};
            int vh = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                v = __dp4a(static_cast<int>(w[j] & kLow4), lo[j], v);
                vh = dp4a_us(w[j] & ~kLow4, hi[j], vh);
            }
            v = 16 * v + vh;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                v = __dp4a(static_cast<int>(qword<T>(k, 0, j)), lo[j], v);
                v = __dp4a(static_cast<int>(qword<T>(k, 1, j)), hi[j], v);
            }
        }
        const float fv = kNibbles ? static_cast<float>(v) * 0.0625f : static_cast<float>(v);
        if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
            const uint32_t w = Hi ? k.sc >> 16 : k.sc;
            const float sc = static_cast<float>(w & 0xFFu), m = static_cast<float>((w >> 8) & 0xFFu);
            return fp16_lo(k.dm) * sc * a.d * fv - fp16_hi(k.dm) * m * (a.s0 + a.s1);
        } else {
            float x = fp16_lo(k.dm) * a.d * fv;
            if constexpr (T == DType::Q4_1 || T == DType::Q5_1) x += fp16_hi(k.dm) * (a.s0 + a.s1);
            return x;
        }
    }
}

// Half h of a block (elements 16h .. 16h + 15) as signed 8-bit quants q
// with value[i] = scale * q[i] - mn.
struct Group16 {
    uint32_t q[4];
    float scale;
    float mn;
};

template <DType T>
__device__ __forceinline__ Group16 group16(const QBlk& k, int h) {
    Group16 g;
    constexpr int off = q_offset<T>();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const uint32_t q = qword<T>(k, h, j);
        g.q[j] = is_iq4(T) ? iq4_values(q) : off != 0 ? __vsub4(q, 0x01010101u * off) : q;
    }
    const float d = fp16_lo(k.dm);
    g.scale = d;
    g.mn = 0.0f;
    if constexpr (T == DType::Q4_1 || T == DType::Q5_1) g.mn = -fp16_hi(k.dm);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
        g.scale = d * static_cast<float>(k.sc & 0xFFu);
        g.mn = fp16_hi(k.dm) * static_cast<float>(k.sc >> 8);
    }
    if constexpr (T == DType::Q2_K) {
        const uint32_t s = (k.sc >> (8 * h)) & 0xFFu;
        g.scale = d * static_cast<float>(s & 0xFu);
        g.mn = fp16_hi(k.dm) * static_cast<float>(s >> 4);
    }
    if constexpr (T == DType::Q3_K || T == DType::Q6_K) {
        g.scale = d * static_cast<float>(static_cast<int8_t>((k.sc >> (8 * h)) & 0xFFu));
    }
    if constexpr (T == DType::IQ4_XS) g.scale = d * static_cast<float>(static_cast<int8_t>(k.sc & 0xFFu));
    return g;
}

}  // namespace lantern::cuda
