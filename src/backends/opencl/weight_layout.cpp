#include "backends/opencl/weight_layout.h"

#include <cstring>

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
        case DType::Q4_0: return {18, 2, 0, 2, 16};
        case DType::Q4_1: return {20, 4, 0, 4, 16};
        case DType::Q5_0: return {22, 2, 2, 6, 16};
        case DType::Q5_1: return {24, 4, 4, 8, 16};
        default: return {34, 2, 0, 2, 32};  // Q8_0
    }
}

}  // namespace

bool is_block32(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}

QuantLayout quant_layout(const Tensor& w) {
    const GgufBlock g = gguf_block(w.type);
    QuantLayout l;
    l.blocks = static_cast<size_t>(w.n_elements() / 32);
    l.qs_bytes = g.qs_bytes;
    l.qs = 0;
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
    const GgufBlock g = gguf_block(w.type);
    const QuantLayout l = quant_layout(w);
    std::vector<uint8_t> out(l.total, 0);
    for (size_t i = 0; i < l.blocks; ++i) {
        const uint8_t* b = src + i * g.size;
        std::memcpy(out.data() + l.sc + i * g.scale_bytes, b, g.scale_bytes);
        if (g.qh_at != 0) std::memcpy(out.data() + l.qh + i * 4, b + g.qh_at, 4);
        std::memcpy(out.data() + l.qs + i * g.qs_bytes, b + g.qs_at, g.qs_bytes);
    }
    return out;
}

}  // namespace lantern::ocl
