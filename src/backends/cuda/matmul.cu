// MulMat: dst[N, M] = W[K, N] x X[K, M].
//
// One token (M == 1): matrix-vector kernels. Each block first quantizes the
// activation row into shared memory (Q8 blocks of 32 with the CPU's exact
// rounding, so both backends see the same 8-bit activations), then its warps
// take weight rows. Up to three MulMats sharing an activation run in one
// launch (Q, K, V), and gate/up run as pairs that also write silu(gate) * up.
//
// Quantized weights go through the streamed kernel (k_matvec_q,
// matvec_stream.cu; the staging and launch parameters are matvec.cuh's): lanes take
// 32-element blocks (qblocks.cuh decodes every type's device layout and
// accumulates with dp4a), each warp walks its rows in stages of about 128
// bytes per lane and issues the next stage's loads before it computes the
// current one (two stages in registers, up to 128 registers, one block of
// 16 warps per SM), and optionally asks L2 for a whole item's rows when it starts one.
// Offsets such as Q4_0's -8 are folded into the staged activation sums:
//     sum_i (q_i - 8) a_i = sum_i q_i a_i - 8 sum_i a_i,
// so raw quants go straight into dp4a. F32/F16/BF16 weights (and every type
// under LANTERN_CUDA_MATVEC=general) use the general kernel (k_matvec,
// matvec_general.cu), which keeps the activations in f32 for the plain types.
// This file plans those launches (run_mul_mat_group) and runs the prompt path.
//
// More tokens: the weight is dequantized to f16 (F16/BF16/F32 are used as
// they are), the activations converted, and cuBLAS multiplies on tensor cores.
#include <algorithm>
#include <limits>

#include "backends/cuda/matvec.cuh"
#include "graph/fusion.h"

namespace lantern::cuda {
namespace {

using namespace mv;

// --- prompt path: dequantize + cuBLAS ----------------------------------------

template <DType T>
__global__ void k_dequant_f16(const WView w, int64_t N, __half* __restrict__ out) {
    pdl_enter();
    const int64_t groups = w.K / 16;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= N * groups) return;
    const int64_t row = i / groups, g = i % groups;
    float v[16];
    group_values(unpack16<T>(w, row, g), v);
    __align__(16) __half h[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) h[k] = __float2half_rn(v[k]);
    uint4* dst = reinterpret_cast<uint4*>(out + row * w.K + 16 * g);
    dst[0] = reinterpret_cast<const uint4*>(h)[0];
    dst[1] = reinterpret_cast<const uint4*>(h)[1];
}

// x [K, M] (rows nb1 bytes apart) -> out [M][K] contiguous f16 or bf16.
template <class H>
__global__ void k_convert_act(const uint8_t* __restrict__ x, size_t nb1, int64_t K, int64_t M, H* __restrict__ out) {
    pdl_enter();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= K * M) return;
    const int64_t m = i / K, k = i % K;
    out[i] = to_act<H>(reinterpret_cast<const float*>(x + m * nb1)[k]);
}

bool use_matvec(const Tensor& node) {
    const Tensor& w = *node.src[0];
    return node.src[1]->ne[1] == 1 && (!is_plain(w.type) || w.ne[0] % 8 == 0) &&
           mv_smem_bytes(w.type, w.ne[0]) <= 200 * 1024;
}

void run_gemm(const Ctx& ctx, const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    const int64_t K = w.ne[0], N = w.ne[1], M = x.ne[1];
    const int64_t ldc = static_cast<int64_t>(node.nb[1] / sizeof(float));
    float* C = ptr<float>(node);
    if (w.type == DType::F32) {
        gemm_nt(ctx, N, M, K, CUDA_R_32F, tensor_address(w), static_cast<int64_t>(w.nb[1] / 4), tensor_address(x),
                static_cast<int64_t>(x.nb[1] / 4), C, ldc, node);
        return;
    }
    const bool bf = w.type == DType::BF16;
    const void* A = tensor_address(w);
    int64_t lda = K;
    if (!is_plain(w.type)) {
        dequant_f16(ctx, w.type, weight_view(w), N, ctx.ws.dequant, node);
        A = ctx.ws.dequant;
    } else {
        lda = static_cast<int64_t>(w.nb[1] / 2);
    }
    const unsigned grid = blocks_for(K * M, 256);
    const uint8_t* xp = static_cast<const uint8_t*>(tensor_address(x));
    if (bf) {
        check(launch(ctx, k_convert_act<__nv_bfloat16>, dim3(grid), dim3(256), 0, xp, x.nb[1], K, M,
                     static_cast<__nv_bfloat16*>(ctx.ws.act)),
              "k_convert_act", node);
    } else {
        check(launch(ctx, k_convert_act<__half>, dim3(grid), dim3(256), 0, xp, x.nb[1], K, M,
                     static_cast<__half*>(ctx.ws.act)),
              "k_convert_act", node);
    }
    gemm_nt(ctx, N, M, K, bf ? CUDA_R_16BF : CUDA_R_16F, A, lda, ctx.ws.act, K, C, ldc, node);
}

bool same_view(const Tensor& a, const Tensor& b) {
    return a.buffer == b.buffer && a.offset == b.offset && a.ne == b.ne && a.nb == b.nb && a.type == b.type;
}

}  // namespace

void dequant_f16(const Ctx& ctx, DType t, const WView& w, int64_t n, void* out, const Tensor& node) {
    dispatch_quant(t, [&]<DType T>() {
        check(launch(ctx, k_dequant_f16<T>, dim3(blocks_for(n * (w.K / 16), 256)), dim3(256), 0, w, n,
                     static_cast<__half*>(out)),
              "k_dequant_f16", node);
    });
}

void gemm_nt(const Ctx& ctx, int64_t N, int64_t M, int64_t K, cudaDataType_t ab, const void* A, int64_t lda,
             const void* B, int64_t ldb, float* C, int64_t ldc, const Tensor& node) {
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                       static_cast<int>(K), &alpha, A, ab, static_cast<int>(lda), B, ab, static_cast<int>(ldb), &beta, C,
                       CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx", node);
}

void init_matmul_kernels(int max_smem) {
    mv::init_matvec_general(max_smem);
    mv::init_matvec_streamed(max_smem);
    mv::init_matvec_bulk(max_smem);
    init_moe_kernels(max_smem);
}

bool accepts_mul_mat(const Tensor& node) {
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    return (w.storage_root()->flags & kTensorWeight) && w.view_src == nullptr && is_device_weight_type(w.type) &&
           w.ne[2] == 1 && w.ne[3] == 1 && w.nb[0] == dtype_type_size(w.type) && x.type == DType::F32 &&
           x.nb[0] == sizeof(float) && x.ne[2] == 1 && x.ne[3] == 1 && node.type == DType::F32 &&
           node.nb[0] == sizeof(float) && node.ne[2] == 1 && node.ne[3] == 1 &&
           (is_plain(w.type) || w.ne[0] % 32 == 0);
}

void need_mul_mat(const Tensor& node, int /*sm_count*/, WorkspaceNeeds& needs) {
    if (use_matvec(node)) return;
    const Tensor& w = *node.src[0];
    const size_t K = static_cast<size_t>(w.ne[0]), N = static_cast<size_t>(w.ne[1]);
    const size_t M = static_cast<size_t>(node.src[1]->ne[1]);
    if (w.type == DType::F32) return;
    if (!is_plain(w.type)) needs.dequant = std::max(needs.dequant, K * N * 2);
    needs.act = std::max(needs.act, K * M * 2);
}

void run_mul_mat(const Ctx& ctx, const Tensor& node) {
    if (!use_matvec(node)) {
        run_gemm(ctx, node);
        return;
    }
    const Tensor* mats[1] = {&node};
    run_mul_mat_group(ctx, mats, 1, nullptr, nullptr);
}

bool accepts_mul_mat_add(const Tensor& node) {
    const Tensor& acc = *node.src[2];
    return accepts_mul_mat(node) && acc.type == DType::F32 && acc.is_contiguous() && node.is_contiguous();
}

void run_mul_mat_add(const Ctx& ctx, const Tensor& node) {
    if (use_matvec(node)) {  // the general kernels add it as they write
        const Tensor* mats[1] = {&node};
        run_mul_mat_group(ctx, mats, 1, nullptr, nullptr, false, ptr<const float>(*node.src[2]));
        return;
    }
    MulMatAddHalves h;  // node = product, then node += addend
    split_mul_mat_add(node, h);
    run_gemm(ctx, h.product);
    run_add(ctx, h.sum);
}

bool can_group_mul_mat(const Tensor& a, const Tensor& b) {
    return a.op == Op::MulMat && b.op == Op::MulMat && use_matvec(a) && use_matvec(b) &&
           a.src[0]->type == b.src[0]->type && a.src[0]->ne[0] == b.src[0]->ne[0] && same_view(*a.src[1], *b.src[1]);
}

bool can_prenorm(const Tensor& norm, const Tensor& mm) {
    const bool plain = norm.op == Op::RmsNorm;
    if ((!plain && norm.op != Op::AddRmsNorm) || mm.op != Op::MulMat || !use_matvec(mm) || norm.ne[1] != 1) return false;
    const Tensor& x = *mm.src[1];
    const int64_t K = norm.ne[0];
    auto aligned = [](const Tensor* t) { return t == nullptr || reinterpret_cast<uintptr_t>(tensor_address(*t)) % 16 == 0; };
    if (plain) {  // x is the normed row itself
        const Tensor& in = *norm.src[0];
        return x.buffer == norm.buffer && x.offset == norm.offset && x.ne[0] == K && K % 32 == 0 &&
               K <= kMaxPrenormK && in.type == DType::F32 && in.nb[0] == sizeof(float) && in.ne[0] == K &&
               aligned(&norm) && aligned(&in) && aligned(norm.src[1]);
    }
    return x.buffer == norm.buffer && x.offset == norm.offset + norm.nb[2] && x.ne[0] == K && K % 32 == 0 &&
           K <= kMaxPrenormK && aligned(&norm) && aligned(norm.src[0]) && aligned(norm.src[1]) &&
           aligned(norm.src[2]) && norm.nb[2] % 16 == 0;
}

void run_mul_mat_group(const Ctx& ctx, const Tensor* const* mats, int n, const Tensor* silu, const Tensor* norm,
                       bool residual_settled, const float* acc) {
    MvParams p{};
    p.acc = acc;
    p.n_jobs = n;
    p.x = ptr<const float>(*mats[0]->src[1]);
    p.K = mats[0]->src[0]->ne[0];
    int64_t rows = 0;
    for (int j = 0; j < n; ++j) {
        p.w[j] = weight_view(*mats[j]->src[0]);
        p.out[j] = ptr<float>(*mats[j]);
        p.start[j] = rows;
        rows += mats[j]->src[0]->ne[1];
    }
    p.start[n] = rows;
    for (int j = 0; j < 3; ++j) p.job_start[j] = j < n ? static_cast<int>(p.start[j]) : std::numeric_limits<int>::max();
    p.total_rows = rows;
    p.n_items = (rows + kRows - 1) / kRows;
    if (silu != nullptr) {
        p.silu = ptr<float>(*silu);
        p.total_rows = mats[0]->src[0]->ne[1];
        p.n_items = p.total_rows;
    }
    if (norm != nullptr) {
        // RmsNorm (x, w): its output is the normed row. AddRmsNorm (a, b, w):
        // slice 0 the sum, slice 1 the normed row.
        const bool add = norm->op == Op::AddRmsNorm;
        const Tensor* w = norm->src[add ? 2 : 1];
        p.a = ptr<const float>(*norm->src[0]);
        p.b = add ? ptr<const float>(*norm->src[1]) : nullptr;
        p.nw = w != nullptr ? ptr<const float>(*w) : nullptr;
        p.eps = norm->param_f(0);
        p.sum_out = add ? ptr<float>(*norm) : nullptr;
        p.norm_out = reinterpret_cast<float*>(ptr<uint8_t>(*norm) + (add ? norm->nb[2] : 0));
        p.a_settled = add && residual_settled;
    }
    const DType t = mats[0]->src[0]->type;
    if (!is_plain(t) && ctx.matvec != MatVecKernel::General && acc == nullptr) {
        if (!launch_matvec_bulk(ctx, p, t, *mats[0])) launch_matvec_streamed(ctx, p, t, *mats[0]);
    } else {
        launch_matvec_general(ctx, p, t, *mats[0]);
    }
}

}  // namespace lantern::cuda
