#include "backends/cuda/weight_layout.h"

#include <cstring>

#include "quant/bit_planes.h"
#include "quant/blocks.h"
#include "quant/iq4.h"
#include "quant/kquant.h"

namespace lantern::cuda {

WeightLayout weight_layout(DType t, int64_t K, int64_t N) {
    WeightLayout l;
    l.type = t;
    l.K = K;
    l.N = N;
    if (is_plain(t)) {
        l.row_bytes = dtype_row_size(t, K);
        l.total = l.row_bytes * static_cast<size_t>(N);
        return l;
    }
    l.blocks = K / dtype_block_size(t);
    if (is_q32(t)) {
        l.row_bytes = static_cast<size_t>(l.blocks) * q32_payload(t);
        l.meta_row_bytes = (static_cast<size_t>(l.blocks) * q32_meta(t) + 3) / 4 * 4;
        l.meta_offset = (l.row_bytes * static_cast<size_t>(N) + 255) / 256 * 256;
        l.total = l.meta_offset + l.meta_row_bytes * static_cast<size_t>(N);
    } else {
        // Here blocks are 32-element blocks, as for the types above.
        l.blocks = K / 32;
        l.row_bytes = static_cast<size_t>(l.blocks) * (kq_nibble_bytes(t) + kq_two_bytes(t) + kq_one_bytes(t));
        // Rounded to 4: the streamed kernel reads Q3_K's scale bytes a pair
        // of blocks (a word) at a time, and its rows with K = 256 have 18.
        l.meta_row_bytes = (static_cast<size_t>(l.blocks) * 2 + static_cast<size_t>(K / 256) * kq_dm_bytes(t) + 3) / 4 * 4;
        l.meta_offset = (l.row_bytes * static_cast<size_t>(N) + 255) / 256 * 256;
        l.total = l.meta_offset + l.meta_row_bytes * static_cast<size_t>(N);
    }
    return l;
}

namespace {

template <class Block, class Fn>
void for_blocks(const WeightLayout& l, const void* gguf, Fn&& fn) {
    const auto* in = static_cast<const Block*>(gguf);
    for (int64_t r = 0; r < l.N; ++r) {
        for (int64_t b = 0; b < l.blocks; ++b) fn(r, b, in[r * l.blocks + b]);
    }
}

// 32 values (< 16) as Q4_0's 16 bytes: byte i = v[i] | v[16 + i] << 4.
void put_nibbles(const uint8_t* v, uint8_t* o) {
    for (int i = 0; i < 16; ++i) o[i] = static_cast<uint8_t>(v[i] | v[16 + i] << 4);
}

// 32 values (< 2): bit 4h + j of byte k holds v[16h + 4j + k].
void put_one_bit(const uint8_t* v, uint8_t* o) {
    for (int k = 0; k < 4; ++k) {
        uint8_t b = 0;
        for (int h = 0; h < 2; ++h) {
            for (int j = 0; j < 4; ++j) b = static_cast<uint8_t>(b | v[16 * h + 4 * j + k] << (4 * h + j));
        }
        o[k] = b;
    }
}

// Q3_K's 32 three-bit quants (< 8) in its two planes' 12 bytes as three
// words A, B (the two-bit plane) and C (the one-bit plane), byte k of each:
//   A: q[k] | q[4 + k] << 3 | (q[24 + k] & 3) << 6
//   B: q[8 + k] | q[12 + k] << 3 | (q[28 + k] & 3) << 6
//   C: q[16 + k] | q[20 + k] << 3 | (q[24 + k] >> 2) << 6 | (q[28 + k] >> 2) << 7
// so that six of a block's eight words of quants (qword) are a shift and a
// mask, and the other two four operations (about 17 in all, where separate
// two- and one-bit fields took ~40).
void put_three_bits(const uint8_t* q, uint8_t* two, uint8_t* one) {
    for (int k = 0; k < 4; ++k) {
        two[k] = static_cast<uint8_t>(q[k] | q[4 + k] << 3 | (q[24 + k] & 3) << 6);
        two[4 + k] = static_cast<uint8_t>(q[8 + k] | q[12 + k] << 3 | (q[28 + k] & 3) << 6);
        one[k] = static_cast<uint8_t>(q[16 + k] | q[20 + k] << 3 | (q[24 + k] >> 2) << 6 | (q[28 + k] >> 2) << 7);
    }
}

// Q5_0/Q5_1's high bits (GGUF: bit e of the little-endian qh, element e) as
// put_one_bit's plane.
void put_high_plane(uint8_t* o, const uint8_t* qh) {
    uint8_t v[32];
    for (int e = 0; e < 32; ++e) v[e] = static_cast<uint8_t>((qh[e / 8] >> (e % 8)) & 1);
    put_one_bit(v, o);
}

// Calls fn(blk, sb, row, meta, dm) for each GGUF super-block of a weight
// laid out as the K-quants: the block, its index in its row, and the row's
// payload, scale bytes (two a block) and d/dmin words.
template <class Block, class Fn>
void for_superblocks(const WeightLayout& l, const void* gguf, uint8_t* out, Fn&& fn) {
    const auto* in = static_cast<const Block*>(gguf);
    const int64_t n_sb = l.K / quant::kQKK;
    for (int64_t r = 0; r < l.N; ++r) {
        uint8_t* row = out + static_cast<size_t>(r) * l.row_bytes;
        uint8_t* meta = out + l.meta_offset + static_cast<size_t>(r) * l.meta_row_bytes;
        uint8_t* dm = meta + 2 * static_cast<size_t>(l.blocks);
        for (int64_t sb = 0; sb < n_sb; ++sb) fn(in[r * n_sb + sb], sb, row, meta, dm);
    }
}

// A K-quant weight into the planes of weight_layout.h. The quants and
// scales come from the CPU's unpacker, so the bit layout of each GGUF block
// is read in one place (kquant.h); d and dmin are copied as their fp16 bits.
template <DType t, class KQ>
void repack_kquant(const WeightLayout& l, const void* gguf, uint8_t* out) {
    constexpr size_t nib = kq_nibble_bytes(t), two = kq_two_bytes(t), one = kq_one_bytes(t);
    quant::kquant::Unpacked u;
    for_superblocks<typename KQ::Block>(l, gguf, out, [&](const auto& blk, int64_t sb, uint8_t* row, uint8_t* meta, uint8_t* dm) {
        KQ::unpack(blk, u);
        std::memcpy(dm + sb * kq_dm_bytes(t), &blk.d, 2);
        if constexpr (t != DType::Q3_K && t != DType::Q6_K) std::memcpy(dm + sb * 4 + 2, &blk.dmin, 2);
        for (int i = 0; i < 8; ++i) {
            const int64_t b = sb * 8 + i;
            const uint8_t* q = u.q + 32 * i;
            if constexpr (t == DType::Q3_K) {
                put_three_bits(q, row + 8 * b, row + two * l.blocks + 4 * b);
            } else if constexpr (nib == 0) {  // Q2_K: the two bits alone
                quant::put_two_bits(q, row + 8 * b);
            } else {
                // The nibble; the rest of each quant goes to the next plane.
                uint8_t lo[32], hi[32];
                for (int e = 0; e < 32; ++e) {
                    lo[e] = static_cast<uint8_t>(q[e] & 0xF);
                    hi[e] = static_cast<uint8_t>(q[e] >> 4);
                }
                put_nibbles(lo, row + 16 * b);
                if constexpr (two != 0) quant::put_two_bits(hi, row + nib * l.blocks + 8 * b);
                if constexpr (one != 0) put_one_bit(hi, row + nib * l.blocks + 4 * b);
            }
            // Scale bytes of the block: its two groups of 16.
            quant::put_scale_bytes<t>(u, blk, i, meta + 2 * b);
        }
    });
}

// IQ4_XS: nibbles as they are (each block's 16 bytes are Q4_0's order),
// the six-bit scales as signed bytes, d as its fp16 bits.
void repack_iq4_xs(const WeightLayout& l, const void* gguf, uint8_t* out) {
    for_superblocks<quant::BlockIQ4_XS>(l, gguf, out, [&](const quant::BlockIQ4_XS& blk, int64_t sb, uint8_t* row,
                                                          uint8_t* meta, uint8_t* dm) {
        std::memcpy(row + 128 * sb, blk.qs, 128);
        std::memcpy(dm + 2 * sb, &blk.d, 2);
        for (int i = 0; i < 8; ++i) {
            meta[2 * (sb * 8 + i)] = static_cast<uint8_t>(static_cast<int8_t>(quant::iq4::xs_scale(blk, i)));
        }
    });
}

}  // namespace

void repack_weight(const WeightLayout& l, const void* gguf, uint8_t* out) {
    using namespace quant;
    if (is_plain(l.type)) {
        std::memcpy(out, gguf, l.total);
        return;
    }
    std::memset(out, 0, l.total);
    uint8_t* meta = out + l.meta_offset;
    auto payload = [&](int64_t r, int64_t b) { return out + static_cast<size_t>(r) * l.row_bytes + static_cast<size_t>(b) * 16; };
    auto meta_at = [&](int64_t r, int64_t b) {
        return meta + static_cast<size_t>(r) * l.meta_row_bytes + static_cast<size_t>(b) * q32_meta(l.type);
    };
    switch (l.type) {
        case DType::Q4_0:
            for_blocks<BlockQ4_0>(l, gguf, [&](int64_t r, int64_t b, const BlockQ4_0& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                std::memcpy(meta_at(r, b), &x.d, 2);
            });
            break;
        case DType::IQ4_NL:
            for_blocks<BlockIQ4_NL>(l, gguf, [&](int64_t r, int64_t b, const BlockIQ4_NL& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                std::memcpy(meta_at(r, b), &x.d, 2);
            });
            break;
        case DType::Q4_1:
            for_blocks<BlockQ4_1>(l, gguf, [&](int64_t r, int64_t b, const BlockQ4_1& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                std::memcpy(meta_at(r, b), &x.d, 2);
                std::memcpy(meta_at(r, b) + 2, &x.m, 2);
            });
            break;
        case DType::Q5_0:
            for_blocks<BlockQ5_0>(l, gguf, [&](int64_t r, int64_t b, const BlockQ5_0& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                uint8_t* m = meta_at(r, 0);  // the row's meta: two planes
                put_high_plane(m + 4 * b, x.qh);
                std::memcpy(m + 4 * l.blocks + 2 * b, &x.d, 2);
            });
            break;
        case DType::Q5_1:
            for_blocks<BlockQ5_1>(l, gguf, [&](int64_t r, int64_t b, const BlockQ5_1& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                put_high_plane(meta_at(r, b), x.qh);
                std::memcpy(meta_at(r, b) + 4, &x.d, 2);
                std::memcpy(meta_at(r, b) + 6, &x.m, 2);
            });
            break;
        case DType::Q8_0:
            for_blocks<BlockQ8_0>(l, gguf, [&](int64_t r, int64_t b, const BlockQ8_0& x) {
                uint8_t* row = out + static_cast<size_t>(r) * l.row_bytes;
                std::memcpy(row + static_cast<size_t>(b) * 16, x.qs, 16);
                std::memcpy(row + static_cast<size_t>(l.blocks + b) * 16, x.qs + 16, 16);
                std::memcpy(meta_at(r, b), &x.d, 2);
            });
            break;
        case DType::Q2_K: repack_kquant<DType::Q2_K, quant::kquant::Q2_K>(l, gguf, out); break;
        case DType::Q3_K: repack_kquant<DType::Q3_K, quant::kquant::Q3_K>(l, gguf, out); break;
        case DType::Q4_K: repack_kquant<DType::Q4_K, quant::kquant::Q4_K>(l, gguf, out); break;
        case DType::Q5_K: repack_kquant<DType::Q5_K, quant::kquant::Q5_K>(l, gguf, out); break;
        case DType::Q6_K: repack_kquant<DType::Q6_K, quant::kquant::Q6_K>(l, gguf, out); break;
        case DType::IQ4_XS: repack_iq4_xs(l, gguf, out); break;
        default: break;
    }
}

}  // namespace lantern::cuda
