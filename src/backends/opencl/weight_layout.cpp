#include "backends/opencl/weight_layout.h"

#include <cstring>

#include "quant/bit_planes.h"
#include "quant/blocks.h"
#include "quant/iq4.h"
#include "quant/kquant.h"

namespace lantern::ocl {
namespace {

constexpr size_t kRegionAlign = 256;

size_t align_up(size_t x) { return (x + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

// Where the fields sit in one GGUF block (bytes), and their sizes.
struct GgufBlock {
    size_t size;
    size_t scale_bytes;  // d, or d and m
    size_t qh_at;        // 0: none
    size_t qs_at;
    size_t qs_bytes;
};

GgufBlock gguf_block(DType t) {
    switch (t) {
        case DType::Q4_0:
        case DType::IQ4_NL: return {18, 2, 0, 2, 16};
        case DType::Q4_1: return {20, 4, 0, 4, 16};
        case DType::Q5_0: return {22, 2, 2, 6, 16};
        case DType::Q5_1: return {24, 4, 4, 8, 16};
        default: return {34, 2, 0, 2, 32};  // Q8_0
    }
}

// Types whose scales are 20-byte super-block records (the K-quants, IQ4_XS).
bool has_records(DType t) { return is_kquant(t) || t == DType::IQ4_XS; }

// Their planes per 32-element block: low bits (qs), high bits (qh).
size_t kq_low_bytes(DType t) { return t == DType::Q2_K || t == DType::Q3_K ? 8 : 16; }
size_t kq_high_bytes(DType t) { return t == DType::Q6_K ? 8 : t == DType::Q5_K || t == DType::Q3_K ? 4 : 0; }
constexpr size_t kRecordBytes = 20;  // a super-block's scale bytes, d and dmin

// 32 values (< 2) as a little-endian uint32, bit e for v[e].
void put_bits(const uint8_t* v, uint8_t* o) {
    uint32_t w = 0;
    for (int e = 0; e < 32; ++e) w |= static_cast<uint32_t>(v[e] & 1) << e;
    std::memcpy(o, &w, 4);
}

template <DType T, class KQ>
void repack_kquant(const uint8_t* src, const QuantLayout& l, uint8_t* out) {
    const auto* in = reinterpret_cast<const typename KQ::Block*>(src);
    const size_t n_sb = l.blocks / 8;
    quant::kquant::Unpacked u;
    for (size_t sb = 0; sb < n_sb; ++sb) {
        typename KQ::Block blk;
        std::memcpy(&blk, in + sb, sizeof(blk));
        KQ::unpack(blk, u);
        uint8_t* rec = out + l.sc + sb * kRecordBytes;
        std::memcpy(rec + 16, &blk.d, 2);
        if constexpr (T == DType::Q2_K || T == DType::Q4_K || T == DType::Q5_K) std::memcpy(rec + 18, &blk.dmin, 2);
        for (size_t i = 0; i < 8; ++i) {
            const size_t b = sb * 8 + i;
            const uint8_t* q = u.q + 32 * i;
            uint8_t lo[32], hi[32];
            constexpr int low_bits = T == DType::Q2_K || T == DType::Q3_K ? 2 : 4;
            for (int e = 0; e < 32; ++e) {
                lo[e] = static_cast<uint8_t>(q[e] & ((1 << low_bits) - 1));
                hi[e] = static_cast<uint8_t>(q[e] >> low_bits);
            }
            uint8_t* qs = out + l.qs + b * l.qs_bytes;
            if constexpr (low_bits == 2) {
                quant::put_two_bits(lo, qs);
            } else {
                for (int k = 0; k < 16; ++k) qs[k] = static_cast<uint8_t>(lo[k] | lo[16 + k] << 4);
            }
            if constexpr (T == DType::Q6_K) quant::put_two_bits(hi, out + l.qh + b * 8);
            if constexpr (T == DType::Q5_K || T == DType::Q3_K) put_bits(hi, out + l.qh + b * 4);
            quant::put_scale_bytes<T>(u, blk, static_cast<int>(i), rec + 2 * i);
        }
    }
}

// IQ4_XS: the nibbles as they are; the record's scale bytes (ls - 32, 0) and d.
void repack_iq4_xs(const uint8_t* src, const QuantLayout& l, uint8_t* out) {
    const auto* in = reinterpret_cast<const quant::BlockIQ4_XS*>(src);
    for (size_t sb = 0; sb < l.blocks / 8; ++sb) {
        quant::BlockIQ4_XS blk;
        std::memcpy(&blk, in + sb, sizeof(blk));
        uint8_t* rec = out + l.sc + sb * kRecordBytes;
        std::memcpy(rec + 16, &blk.d, 2);
        for (int i = 0; i < 8; ++i) {
            rec[2 * i] = static_cast<uint8_t>(static_cast<int8_t>(quant::iq4::xs_scale(blk, i)));
            std::memcpy(out + l.qs + (sb * 8 + static_cast<size_t>(i)) * 16, blk.qs + 16 * i, 16);
        }
    }
}

}  // namespace

bool is_block32(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
           t == DType::IQ4_NL || has_records(t);
}

bool has_group16_scales(DType t) { return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q6_K; }

QuantLayout quant_layout(const Tensor& w) {
    QuantLayout l;
    l.blocks = static_cast<size_t>(w.n_elements() / 32);
    l.qs = 0;
    if (has_records(w.type)) {
        l.qs_bytes = kq_low_bytes(w.type);
        size_t end = align_up(l.blocks * l.qs_bytes);
        l.qh = end;
        if (kq_high_bytes(w.type) != 0) end = align_up(end + l.blocks * kq_high_bytes(w.type));
        l.sc = end;
        l.total = end + l.blocks / 8 * kRecordBytes;
        return l;
    }
    const GgufBlock g = gguf_block(w.type);
    l.qs_bytes = g.qs_bytes;
    size_t end = align_up(l.blocks * g.qs_bytes);
    l.qh = end;
    if (g.qh_at != 0) end = align_up(end + l.blocks * 4);
    l.sc = end;
    l.total = end + l.blocks * g.scale_bytes;
    return l;
}

size_t stored_weight_bytes(const Tensor& w) { return is_block32(w.type) ? quant_layout(w).total : w.nbytes(); }

std::vector<uint8_t> repack_weight(const Tensor& w, const void* host) {
    const auto* src = static_cast<const uint8_t*>(host);
    if (!is_block32(w.type)) return std::vector<uint8_t>(src, src + w.nbytes());
    const QuantLayout l = quant_layout(w);
    std::vector<uint8_t> out(l.total, 0);
    switch (w.type) {
        case DType::Q2_K: repack_kquant<DType::Q2_K, quant::kquant::Q2_K>(src, l, out.data()); return out;
        case DType::Q3_K: repack_kquant<DType::Q3_K, quant::kquant::Q3_K>(src, l, out.data()); return out;
        case DType::Q4_K: repack_kquant<DType::Q4_K, quant::kquant::Q4_K>(src, l, out.data()); return out;
        case DType::Q5_K: repack_kquant<DType::Q5_K, quant::kquant::Q5_K>(src, l, out.data()); return out;
        case DType::Q6_K: repack_kquant<DType::Q6_K, quant::kquant::Q6_K>(src, l, out.data()); return out;
        case DType::IQ4_XS: repack_iq4_xs(src, l, out.data()); return out;
        default: break;
    }
    const GgufBlock g = gguf_block(w.type);
    for (size_t i = 0; i < l.blocks; ++i) {
        const uint8_t* b = src + i * g.size;
        std::memcpy(out.data() + l.sc + i * g.scale_bytes, b, g.scale_bytes);
        if (g.qh_at != 0) std::memcpy(out.data() + l.qh + i * 4, b + g.qh_at, 4);
        std::memcpy(out.data() + l.qs + i * g.qs_bytes, b + g.qs_at, g.qs_bytes);
    }
    return out;
}

}  // namespace lantern::ocl
