#include "backends/cuda/weight_layout.h"

#include <cstring>

#include "quant/blocks.h"

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
        l.meta_row_bytes = static_cast<size_t>(l.blocks) * q32_meta(t);
        l.meta_offset = (l.row_bytes * static_cast<size_t>(N) + 255) / 256 * 256;
        l.total = l.meta_offset + l.meta_row_bytes * static_cast<size_t>(N);
    } else {
        l.row_bytes = static_cast<size_t>(l.blocks) * kquant_stride(t);
        l.total = l.row_bytes * static_cast<size_t>(N);
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
                std::memcpy(meta_at(r, b), x.qh, 4);
                std::memcpy(meta_at(r, b) + 4, &x.d, 2);
            });
            break;
        case DType::Q5_1:
            for_blocks<BlockQ5_1>(l, gguf, [&](int64_t r, int64_t b, const BlockQ5_1& x) {
                std::memcpy(payload(r, b), x.qs, 16);
                std::memcpy(meta_at(r, b), x.qh, 4);
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
        default: {  // K-quants: blocks padded to kquant_stride
            const size_t in_size = dtype_type_size(l.type), stride = kquant_stride(l.type);
            const auto* in = static_cast<const uint8_t*>(gguf);
            const size_t n = static_cast<size_t>(l.N) * static_cast<size_t>(l.blocks);
            for (size_t i = 0; i < n; ++i) std::memcpy(out + i * stride, in + i * in_size, in_size);
        }
    }
}

}  // namespace lantern::cuda
