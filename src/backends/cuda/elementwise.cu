// Row-wise elementwise ops (add, mul with broadcast over rows; scale;
// softcap; SiLU x up; GELU x up; sigmoid-gated rows), type-converting copies, and row lookup (GetRows) in every
// weight layout. One block per destination row.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda {
namespace {

constexpr int kThreads = 256;

struct Dims {
    int64_t ne[4];
    size_t nb[4];
};

Dims dims_of(const Tensor& t) {
    Dims d;
    for (int i = 0; i < 4; ++i) {
        d.ne[i] = t.ne[static_cast<size_t>(i)];
        d.nb[i] = t.nb[static_cast<size_t>(i)];
    }
    return d;
}

// Byte offset of row (i1, i2, i3) of `d`, broadcasting dims where it is smaller.
__device__ __forceinline__ size_t row_at(const Dims& d, int64_t i1, int64_t i2, int64_t i3) {
    return (i1 % d.ne[1]) * d.nb[1] + (i2 % d.ne[2]) * d.nb[2] + (i3 % d.ne[3]) * d.nb[3];
}

enum class Bin { Add, Mul, SiluMul, GeluMul, Scale, Softcap, SigmoidGate };

template <Bin OP>
__global__ void __launch_bounds__(kThreads) k_binary(const uint8_t* a, Dims da, const uint8_t* b, Dims db, uint8_t* y,
                                                     Dims dy, float param) {
    pdl_enter();
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % dy.ne[1], i2 = (r / dy.ne[1]) % dy.ne[2], i3 = r / (dy.ne[1] * dy.ne[2]);
    const float* xa = reinterpret_cast<const float*>(a + row_at(da, i1, i2, i3));
    const float* xb = (OP == Bin::Scale || OP == Bin::Softcap) ? nullptr : reinterpret_cast<const float*>(b + row_at(db, i1, i2, i3));
    float* out = reinterpret_cast<float*>(y + row_at(dy, i1, i2, i3));
    // blockIdx.y: this block's span of the row.
    const int64_t span = (dy.ne[0] + gridDim.y - 1) / gridDim.y;
    const int64_t end = min(dy.ne[0], span * (blockIdx.y + 1));
    for (int64_t i = span * blockIdx.y + threadIdx.x; i < end; i += blockDim.x) {
        const float x = xa[i];
        float v;
        if constexpr (OP == Bin::Add) v = x + xb[i];
        if constexpr (OP == Bin::Mul) v = x * xb[i];
        if constexpr (OP == Bin::SiluMul) v = silu_f(x) * xb[i];
        if constexpr (OP == Bin::GeluMul) v = gelu_tanh_f(x) * xb[i];
        if constexpr (OP == Bin::Scale) v = x * param;
        if constexpr (OP == Bin::Softcap) v = param * tanhf(x / param);
        if constexpr (OP == Bin::SigmoidGate) v = x / (1.0f + __expf(-xb[0]));
        out[i] = v;
    }
}

template <Bin OP>
void run_binary(const Ctx& ctx, const Tensor& node, float param = 0.0f) {
    const int64_t rows = node.n_rows();
    if (rows == 0) return;
    const Tensor& a = *node.src[0];
    const Tensor* b = (OP == Bin::Scale || OP == Bin::Softcap) ? &a : node.src[1];
    // A long row (a decode step's one token) is split over blocks: one block
    // per row took 5-11 us for an FFN row on an H100.
    const int64_t spans = std::min<int64_t>((node.ne[0] + 4 * kThreads - 1) / (4 * kThreads), 65535);
    check(launch(ctx, k_binary<OP>, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(spans)), dim3(kThreads), 0,
                 ptr<const uint8_t>(a),
                 dims_of(a), ptr<const uint8_t>(*b), dims_of(*b), ptr<uint8_t>(node), dims_of(node), param),
          "k_binary", node);
}

bool f32_rows(const Tensor& t) {
    return t.type == DType::F32 && t.nb[0] == 4 && t.nb[1] % 4 == 0 && t.nb[2] % 4 == 0 && t.nb[3] % 4 == 0;
}

// --- copies ------------------------------------------------------------------

__device__ __forceinline__ float load_as_float(const uint8_t* row, int64_t i, DType t) {
    if (t == DType::F16) return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    if (t == DType::BF16) return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    return reinterpret_cast<const float*>(row)[i];
}

__global__ void __launch_bounds__(kThreads) k_copy(const uint8_t* a, Dims da, DType ta, uint8_t* y, Dims dy, DType ty) {
    pdl_enter();
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % dy.ne[1], i2 = (r / dy.ne[1]) % dy.ne[2], i3 = r / (dy.ne[1] * dy.ne[2]);
    const uint8_t* in = a + i1 * da.nb[1] + i2 * da.nb[2] + i3 * da.nb[3];
    uint8_t* out = y + i1 * dy.nb[1] + i2 * dy.nb[2] + i3 * dy.nb[3];
    for (int64_t i = threadIdx.x; i < dy.ne[0]; i += blockDim.x) {
        const float v = load_as_float(in, i, ta);
        if (ty == DType::F16) {
            reinterpret_cast<__half*>(out)[i] = __float2half_rn(v);
        } else if (ty == DType::BF16) {
            reinterpret_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
        } else {
            reinterpret_cast<float*>(out)[i] = v;
        }
    }
}

// --- row lookup --------------------------------------------------------------

template <DType T>
__global__ void __launch_bounds__(kThreads) k_get_rows_q(const WView w, int64_t n_rows, const int32_t* ids,
                                                         uint8_t* y, size_t y_nb1) {
    pdl_enter_early();
    const int64_t r = blockIdx.x;
    const int32_t id = ids[r];
    float* out = reinterpret_cast<float*>(y + r * y_nb1);
    const int64_t groups = w.K / 16;
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
        float v[16];
        if (id < 0 || id >= n_rows) {
#pragma unroll
            for (int i = 0; i < 16; ++i) v[i] = 0.0f;
        } else {
            group_values(unpack16<T>(w, id, g), v);
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) out[16 * g + i] = v[i];
    }
}

__global__ void __launch_bounds__(kThreads) k_get_rows_plain(const uint8_t* table, size_t nb1, int64_t n_rows,
                                                             DType t, int64_t K, const int32_t* ids, uint8_t* y,
                                                             size_t y_nb1) {
    pdl_enter_early();
    const int64_t r = blockIdx.x;
    const int32_t id = ids[r];
    float* out = reinterpret_cast<float*>(y + r * y_nb1);
    const bool ok = id >= 0 && id < n_rows;
    const uint8_t* row = table + (ok ? id : 0) * nb1;
    // kBatch loads before their stores: `out` may alias the table for all
    // the compiler knows, so one element per iteration was one memory round
    // trip each (sixteen per 4,096-wide row).
    constexpr int kBatch = 8;
    const int64_t step = blockDim.x;
    auto copy = [&](auto load) {
        for (int64_t i0 = threadIdx.x; i0 < K; i0 += kBatch * step) {
            float v[kBatch];
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {
                const int64_t i = i0 + k * step;
                v[k] = ok && i < K ? load(i) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {
                if (i0 + k * step < K) out[i0 + k * step] = v[k];
            }
        }
    };
    if (t == DType::F16) {
        copy([&](int64_t i) { return load_as_float(row, i, DType::F16); });
    } else if (t == DType::BF16) {
        copy([&](int64_t i) { return load_as_float(row, i, DType::BF16); });
    } else {
        copy([&](int64_t i) { return load_as_float(row, i, DType::F32); });
    }
}

}  // namespace

bool accepts_f32_binary(const Tensor& node) {
    return f32_rows(node) && f32_rows(*node.src[0]) && f32_rows(*node.src[1]) && node.src[0]->ne[0] == node.ne[0] &&
           node.src[1]->ne[0] == node.ne[0];
}

bool accepts_f32_unary(const Tensor& node) { return f32_rows(node) && f32_rows(*node.src[0]); }

bool accepts_sigmoid_gate(const Tensor& node) {
    return f32_rows(node) && f32_rows(*node.src[0]) && node.src[1]->type == DType::F32 && node.src[1]->nb[1] % 4 == 0 &&
           node.src[1]->nb[2] % 4 == 0 && node.src[1]->nb[3] % 4 == 0;
}

bool accepts_copy(const Tensor& node) {
    const Tensor& a = *node.src[0];
    return is_plain(node.type) && is_plain(a.type) && a.nb[0] == dtype_type_size(a.type) &&
           node.nb[0] == dtype_type_size(node.type) && a.ne == node.ne;
}

bool accepts_get_rows(const Tensor& node) {
    const Tensor& t = *node.src[0];
    const bool table_ok =
        is_plain(t.type) ? t.nb[0] == dtype_type_size(t.type)
                         : (is_device_weight_type(t.type) && (t.storage_root()->flags & kTensorWeight) &&
                            t.view_src == nullptr && t.ne[0] % 32 == 0);
    return table_ok && t.ne[2] == 1 && t.ne[3] == 1 && node.src[1]->type == DType::I32 && node.type == DType::F32 &&
           node.nb[0] == sizeof(float);
}

void run_add(const Ctx& ctx, const Tensor& node) { run_binary<Bin::Add>(ctx, node); }
void run_mul(const Ctx& ctx, const Tensor& node) { run_binary<Bin::Mul>(ctx, node); }
void run_silu_mul(const Ctx& ctx, const Tensor& node) { run_binary<Bin::SiluMul>(ctx, node); }
void run_gelu_mul(const Ctx& ctx, const Tensor& node) { run_binary<Bin::GeluMul>(ctx, node); }
void run_scale(const Ctx& ctx, const Tensor& node) { run_binary<Bin::Scale>(ctx, node, node.param_f(0)); }
void run_softcap(const Ctx& ctx, const Tensor& node) { run_binary<Bin::Softcap>(ctx, node, node.param_f(0)); }
void run_sigmoid_gate(const Ctx& ctx, const Tensor& node) { run_binary<Bin::SigmoidGate>(ctx, node); }

void run_copy(const Ctx& ctx, const Tensor& node) {
    const int64_t rows = node.n_rows();
    if (rows == 0) return;
    const Tensor& a = *node.src[0];
    check(launch(ctx, k_copy, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, ptr<const uint8_t>(a), dims_of(a),
                 a.type, ptr<uint8_t>(node), dims_of(node), node.type),
          "k_copy", node);
}

void run_get_rows(const Ctx& ctx, const Tensor& node) {
    const Tensor& t = *node.src[0];
    const int64_t M = node.ne[1];
    if (M == 0) return;
    const int32_t* ids = ptr<const int32_t>(*node.src[1]);
    if (is_plain(t.type)) {
        check(launch(ctx, k_get_rows_plain, dim3(static_cast<unsigned>(M)), dim3(kThreads), 0, ptr<const uint8_t>(t),
                     t.nb[1], t.ne[1], t.type, t.ne[0], ids, ptr<uint8_t>(node), node.nb[1]),
              "k_get_rows", node);
    } else {
        const WView w = weight_view(t);
        dispatch_quant(t.type, [&]<DType T>() {
            check(launch(ctx, k_get_rows_q<T>, dim3(static_cast<unsigned>(M)), dim3(kThreads), 0, w, t.ne[1], ids,
                         ptr<uint8_t>(node), node.nb[1]),
                  "k_get_rows", node);
        });
    }
}

}  // namespace lantern::cuda
