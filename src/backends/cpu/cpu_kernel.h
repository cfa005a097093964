// What a CPU kernel receives, and the declarations of the kernels in this
// folder (one file per op family). Every kernel is called on all threads of
// the pool at once with the same node; it splits the work by (ith, nth).
//
// Kernels honour the strides of their sources and destination in dims 1..3
// (rows are contiguous in dim 0), so fused-op defaults that write into views
// and strided views of Q/K work unchanged.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/thread_pool.h"
#include "backends/backend.h"

namespace lantern::cpu {

struct KernelContext {
    int ith = 0;
    int nth = 1;
    uint8_t* scratch = nullptr;  // scratch_bytes(node, nth) bytes shared by all threads
    ThreadPool* pool = nullptr;
    // packed[i]: the node's weights src[i] in quant/packed.h's layout, when
    // the backend holds a packed copy of them (CpuBackend::pack_weight);
    // else null. A 3-D tensor's slices are packed one after another.
    std::array<const void*, kMaxSrc> packed{};
    void barrier() const { pool->barrier(); }
    // The next work item for a thread that started with item ith (items
    // dealt on demand; ThreadPool::claim says when the count restarts).
    int64_t next_item() const { return nth + pool->claim(); }
};

using KernelFn = void (*)(const KernelContext& ctx, const Tensor& dst);
using ScratchFn = size_t (*)(const Tensor& dst, int nth);

struct Kernel {
    KernelFn run = nullptr;
    ScratchFn scratch = nullptr;  // null: none
};

template <class T>
inline T* data_at(const Tensor& t) {
    return reinterpret_cast<T*>(tensor_address(t));
}
inline const uint8_t* row_ptr(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return static_cast<const uint8_t*>(tensor_address(t)) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
inline uint8_t* row_ptr_mut(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return static_cast<uint8_t*>(tensor_address(t)) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
// [begin, end) of n items for thread ith of nth.
inline void split_range(int64_t n, int ith, int nth, int64_t& begin, int64_t& end) {
    const int64_t per = (n + nth - 1) / nth;
    begin = per * ith < n ? per * ith : n;
    end = begin + per < n ? begin + per : n;
}

// elementwise.cpp
void add(const KernelContext&, const Tensor&);
void mul(const KernelContext&, const Tensor&);
void scale(const KernelContext&, const Tensor&);
void silu_mul(const KernelContext&, const Tensor&);
void gelu_mul(const KernelContext&, const Tensor&);
void softcap(const KernelContext&, const Tensor&);
void sigmoid_gate(const KernelContext&, const Tensor&);
void copy(const KernelContext&, const Tensor&);
bool copy_accepts(const Tensor&);
// norm.cpp
void rms_norm(const KernelContext&, const Tensor&);
void add_rms_norm(const KernelContext&, const Tensor&);
void soft_max(const KernelContext&, const Tensor&);
// rope.cpp
void rope(const KernelContext&, const Tensor&);
void rope_qk(const KernelContext&, const Tensor&);
// matmul.cpp
void mul_mat(const KernelContext&, const Tensor&);
// MulMatAdd: the product (mul_mat's sources, accepts and scratch), then src2 added.
void mul_mat_add(const KernelContext&, const Tensor&);
size_t mul_mat_scratch(const Tensor&, int nth);
bool mul_mat_accepts(const Tensor&);
void get_rows(const KernelContext&, const Tensor&);
bool get_rows_accepts(const Tensor&);
// moe.cpp
void moe_ffn(const KernelContext&, const Tensor&);
size_t moe_ffn_scratch(const Tensor&, int nth);
bool moe_ffn_accepts(const Tensor&);
// attention.cpp
void kv_store(const KernelContext&, const Tensor&);
bool kv_store_accepts(const Tensor&);
void attention(const KernelContext&, const Tensor&);
size_t attention_scratch(const Tensor&, int nth);
bool attention_accepts(const Tensor&);

}  // namespace lantern::cpu
