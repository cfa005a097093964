// Row reductions: RMSNorm, add + RMSNorm (one pass: the sum is written and
// normalised from registers), softmax. One block per row.
#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 16;  // rows up to 4096 stay in registers; longer rows are re-read

struct RowMap {  // row r -> (i1, i2, i3) byte offset
    int64_t ne1, ne2;
    size_t nb1, nb2, nb3;
    __device__ size_t at(int64_t r) const {
        // Row 0 (a decode step's only row) without the 64-bit divisions: four
        // maps of them were most of a one-row launch's instructions.
        if (r == 0) return 0;
        return (r % ne1) * nb1 + ((r / ne1) % ne2) * nb2 + (r / (ne1 * ne2)) * nb3;
    }
};

RowMap map_of(const Tensor& t, const Tensor& shape) {
    return RowMap{shape.ne[1], shape.ne[2], t.nb[1], t.nb[2], t.nb[3]};
}

// y = x * rsqrt(mean(x^2) + eps) * w; with `b`, x = a + b is first written to `sum`.
__global__ void __launch_bounds__(kThreads) k_rms_norm(const uint8_t* a, RowMap ma, const uint8_t* b, RowMap mb,
                                                       float* sum, RowMap ms, float* y, RowMap my, const float* w,
                                                       bool w_early, int64_t n, float eps) {
    __shared__ float scratch[32];
    // A model weight (w_early) is not an earlier kernel's output: it is read
    // before the grid wait, so the normalisation after the block sum does not
    // wait on memory (the first layer's RmsNorm is its own launch, and the
    // Q/K/V launch behind it loads its weights at the same time).
    float wv[kMaxPerThread];
    auto load_w = [&] {
#pragma unroll
        for (int k = 0; k < kMaxPerThread; ++k) {
            const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
            wv[k] = w != nullptr && i < n ? __uint_as_float(ld_co_u32(reinterpret_cast<const uint8_t*>(w + i))) : 1.0f;
        }
    };
    if (w_early) {
        load_w();
        pdl_enter_early();
    } else {
        pdl_enter();
        load_w();
    }
    const int64_t r = blockIdx.x;
    const float* xa = reinterpret_cast<const float*>(a + ma.at(r));
    const float* xb = b != nullptr ? reinterpret_cast<const float*>(b + mb.at(r)) : nullptr;
    float* out_sum = sum != nullptr ? reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(sum) + ms.at(r)) : nullptr;
    float* out = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(y) + my.at(r));
    // Every load before the first store: out_sum may alias a or b for all
    // the compiler knows, and a store between them made each element its
    // own memory round trip (sixteen per 4,096-wide row, not one).
    float v[kMaxPerThread], vb[kMaxPerThread];
#pragma unroll
    for (int k = 0; k < kMaxPerThread; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
        v[k] = i < n ? xa[i] : 0.0f;
        vb[k] = i < n && xb != nullptr ? xb[i] : 0.0f;
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxPerThread; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
        v[k] += vb[k];
        ss += v[k] * v[k];
        if (xb != nullptr && i < n) out_sum[i] = v[k];
    }
    for (int64_t i = threadIdx.x + static_cast<int64_t>(kMaxPerThread) * kThreads; i < n; i += kThreads) {
        float x = xa[i];
        if (xb != nullptr) {
            x += xb[i];
            out_sum[i] = x;
        }
        ss += x * x;
    }
    ss = block_sum(ss, scratch);
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
#pragma unroll
    for (int k = 0; k < kMaxPerThread; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
        if (i < n) out[i] = v[k] * rs * wv[k];
    }
    for (int64_t i = threadIdx.x + static_cast<int64_t>(kMaxPerThread) * kThreads; i < n; i += kThreads) {
        const float x = xb != nullptr ? out_sum[i] : xa[i];
        out[i] = w != nullptr ? x * rs * w[i] : x * rs;
    }
}

__global__ void __launch_bounds__(kThreads) k_soft_max(const uint8_t* x, RowMap mx, float* y, RowMap my, int64_t n,
                                                       float scale) {
    __shared__ float scratch[32];
    pdl_enter();
    const int64_t r = blockIdx.x;
    const float* in = reinterpret_cast<const float*>(x + mx.at(r));
    float* out = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(y) + my.at(r));
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, in[i] * scale);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const float e = expf(in[i] * scale - m);
        out[i] = e;
        s += e;
    }
    s = block_sum(s, scratch);
    const float inv = 1.0f / s;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) out[i] *= inv;
}

bool f32_rows(const Tensor& t) {
    return t.type == DType::F32 && t.nb[0] == 4 && t.nb[1] % 4 == 0 && t.nb[2] % 4 == 0 && t.nb[3] % 4 == 0;
}

bool weight_ok(const Tensor* w, int64_t n) {
    return w == nullptr || (w->type == DType::F32 && w->nb[0] == 4 && w->ne[0] == n);
}

// Whether a norm's weight is a model weight (no kernel writes it).
bool is_model_weight(const Tensor* w) { return w != nullptr && (w->storage_root()->flags & kTensorWeight) != 0; }

}  // namespace

bool accepts_rms_norm(const Tensor& node) {
    return f32_rows(node) && f32_rows(*node.src[0]) && weight_ok(node.src[1], node.ne[0]);
}

bool accepts_add_rms_norm(const Tensor& node) {
    return f32_rows(node) && f32_rows(*node.src[0]) && f32_rows(*node.src[1]) && weight_ok(node.src[2], node.ne[0]);
}

bool accepts_soft_max(const Tensor& node) { return f32_rows(node) && f32_rows(*node.src[0]); }

void run_rms_norm(const Ctx& ctx, const Tensor& node) {
    const Tensor& x = *node.src[0];
    const int64_t rows = node.n_rows();
    if (rows == 0) return;
    const float* w = node.src[1] != nullptr ? ptr<const float>(*node.src[1]) : nullptr;
    check(launch(ctx, k_rms_norm, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, ptr<const uint8_t>(x),
                 map_of(x, node), static_cast<const uint8_t*>(nullptr), RowMap{}, static_cast<float*>(nullptr),
                 RowMap{}, ptr<float>(node), map_of(node, node), w, is_model_weight(node.src[1]), node.ne[0],
                 node.param_f(0)),
          "k_rms_norm", node);
}

// dst [K, M, 2]: slice 0 = a + b, slice 1 = rms_norm(slice 0) * w.
void run_add_rms_norm(const Ctx& ctx, const Tensor& node) {
    const Tensor& a = *node.src[0];
    const Tensor& b = *node.src[1];
    const int64_t rows = node.ne[1];
    if (rows == 0) return;
    const float* w = node.src[2] != nullptr ? ptr<const float>(*node.src[2]) : nullptr;
    float* base = ptr<float>(node);
    float* normed = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(base) + node.nb[2]);
    const RowMap m2{node.ne[1], 1, node.nb[1], 0, 0};
    check(launch(ctx, k_rms_norm, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, ptr<const uint8_t>(a),
                 RowMap{node.ne[1], 1, a.nb[1], 0, 0}, ptr<const uint8_t>(b), RowMap{node.ne[1], 1, b.nb[1], 0, 0},
                 base, m2, normed, m2, w, is_model_weight(node.src[2]), node.ne[0], node.param_f(0)),
          "k_add_rms_norm", node);
}

void run_soft_max(const Ctx& ctx, const Tensor& node) {
    const Tensor& x = *node.src[0];
    const int64_t rows = node.n_rows();
    if (rows == 0) return;
    check(launch(ctx, k_soft_max, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, ptr<const uint8_t>(x),
                 map_of(x, node), ptr<float>(node), map_of(node, node), node.ne[0], node.param_f(0)),
          "k_soft_max", node);
}

}  // namespace lantern::cuda
