// A tensor: a typed, strided view of memory in some backend buffer, and the
// op that produces it (Op::None for leaves: weights, inputs, KV cache).
//
// Tensors are owned by a Graph (or, for weights and caches, by the model's
// and context's own graphs that live as long as they do) and never copied.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "graph/op.h"

namespace lantern {

class Buffer;

enum TensorFlags : uint32_t {
    kTensorInput = 1u << 0,   // host fills it before each step (ids, positions)
    kTensorOutput = 1u << 1,  // host reads it after the step (logits)
    kTensorWeight = 1u << 2,  // model parameter, uploaded once
    kTensorCache = 1u << 3,   // KV cache, persistent across steps
};

struct Tensor {
    DType type = DType::F32;
    std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dim, ne[0] innermost
    std::array<size_t, kMaxDims> nb{0, 0, 0, 0};   // byte strides

    // Where the data lives. For a view, set by allocation from view_src.
    Buffer* buffer = nullptr;
    size_t offset = 0;

    // Views share their source's memory at view_offset bytes in.
    Tensor* view_src = nullptr;
    size_t view_offset = 0;

    Op op = Op::None;
    std::array<Tensor*, kMaxSrc> src{};
    std::array<int32_t, kMaxParams> params{};

    int layer = -1;  // model layer this node belongs to (-1: input/output stage)
    uint32_t flags = 0;
    const char* name = "";  // static string; with `layer` it names the node

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    size_t row_bytes() const { return dtype_row_size(type, ne[0]); }
    // Bytes spanned from the first to one past the last element.
    size_t nbytes() const;
    bool is_contiguous() const;
    bool is_view() const { return view_src != nullptr; }
    bool is_leaf() const { return op == Op::None && view_src == nullptr; }
    // The tensor whose storage this one uses (itself unless a view).
    const Tensor* storage_root() const;

    float param_f(int i) const {
        float f;
        std::memcpy(&f, &params[static_cast<size_t>(i)], 4);
        return f;
    }
    void set_param_f(int i, float f) { std::memcpy(&params[static_cast<size_t>(i)], &f, 4); }
    int32_t param_i(int i) const { return params[static_cast<size_t>(i)]; }
    void set_param_i(int i, int32_t v) { params[static_cast<size_t>(i)] = v; }

    // Contiguous strides for the current type and ne.
    void set_contiguous_strides();
};

}  // namespace lantern
