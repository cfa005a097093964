// The prompt path of Op::MoeFfn, after moe.cu's routing: grouped GEMMs.
// The (token, slot) pairs are grouped by expert on the device and the host
// reads how many each expert got (one wait per MoE layer); then each expert
// in use runs like a dense prompt MulMat (matmul.cu): its matrices
// dequantized to f16 (plain types used in place), cuBLAS on tensor cores
// over the expert's gathered activation rows, silu(gate) * up between, and
// at the end each token's down results added by weight in slot order.
// Each expert's weights are read once per step, not once per pair as the
// per-pair kernels read them.
//
// A stream being captured cannot wait for the counts: the backend runs
// such prompt steps unrecorded even under LANTERN_GRAPHS_PREFILL, and a
// capture that still reaches here (a caller's) takes the per-pair kernels,
// whose results agree with this path's within the op tolerances.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/moe.cuh"
#include "backends/cuda/quant_unpack.cuh"

namespace lantern::cuda::moe {
namespace {

// At least this many tokens, and on average two pairs per expert: below,
// dequantizing every expert in use costs more than reading rows per pair.
constexpr int64_t kMinTokens = 8;
constexpr int kSortThreads = 1024;
constexpr int kChunk = 12288;  // pair ids staged in shared memory at a time

// order[i] (i < P): the pairs grouped by expert, in pair order within an
// expert (the results never depend on thread timing); at[p]: where pair p
// went; offsets[e] .. offsets[e + 1]: expert e's rows of order. One block;
// warp w takes experts w, w + 32, ... and finds its pairs by ballots over
// the staged ids, in two passes: count, then place.
__global__ void __launch_bounds__(kSortThreads) k_moe_sort(const int32_t* ids, int P, int E, int32_t* order,
                                                           int32_t* at, int32_t* offsets) {
    pdl_enter();
    __shared__ uint16_t staged[kChunk];
    __shared__ int32_t next[kMaxExperts + 1];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int e = threadIdx.x; e <= E; e += blockDim.x) next[e] = 0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int c0 = 0; c0 < P; c0 += kChunk) {
            const int n = min(kChunk, P - c0);
            __syncthreads();
            for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = static_cast<uint16_t>(ids[c0 + i]);
            __syncthreads();
            for (int e = warp; e < E; e += warps) {
                int to = next[e];
                for (int i0 = 0; i0 < n; i0 += 32) {
                    const int i = i0 + lane;
                    const bool mine = i < n && staged[i] == e;
                    const unsigned m = __ballot_sync(0xffffffffu, mine);
                    if (pass == 1 && mine) {
                        const int slot = to + __popc(m & ((1u << lane) - 1u));
                        order[slot] = c0 + i;
                        at[c0 + i] = slot;
                    }
                    to += __popc(m);
                }
                __syncwarp();
                if (lane == 0) next[e] = to;
            }
        }
        __syncthreads();
        if (pass == 1) break;
        if (threadIdx.x == 0) {  // counts -> where each expert's rows start
            int sum = 0;
            for (int e = 0; e < E; ++e) {
                const int c = next[e];
                next[e] = sum;
                sum += c;
            }
            next[E] = sum;
        }
        __syncthreads();
        for (int e = threadIdx.x; e <= E; e += blockDim.x) offsets[e] = next[e];
    }
}

// xs row i = the activation row of pair order[i]'s token.
template <class H>
__global__ void k_moe_gather(const uint8_t* x, size_t x_nb1, Dims d, const int32_t* order, H* xs) {
    pdl_enter();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= d.T * d.k * d.D) return;
    const int64_t r = i / d.D, c = i % d.D;
    xs[i] = to_act<H>(reinterpret_cast<const float*>(x + (order[r] / d.k) * x_nb1)[c]);
}

// h [rows][F] = silu(gate) * up from gu rows [gate F | up F].
template <class H>
__global__ void k_moe_silu(const float* gu, int64_t rows, int64_t F, H* h) {
    pdl_enter();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * F) return;
    const float* g = gu + (i / F) * 2 * F + i % F;
    h[i] = to_act<H>(silu_f(g[0]) * g[F]);
}

// y row t = sum over its slots j (in order) of weight * ys row at[t k + j].
__global__ void k_moe_combine(const float* ys, const int32_t* at, const float* weights, Dims d, uint8_t* y,
                              size_t y_nb1) {
    pdl_enter();
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= d.T * d.D) return;
    const int64_t t = i / d.D, n = i % d.D;
    float acc = 0.0f;
    for (int j = 0; j < d.k; ++j) acc += weights[t * d.k + j] * ys[static_cast<int64_t>(at[t * d.k + j]) * d.D + n];
    reinterpret_cast<float*>(y + t * y_nb1)[n] = acc;
}

// The GEMM operand type a weight runs in: f32 and bf16 as they are, f16
// for F16 and every quantized type (dequantized).
enum class Act { F32, F16, BF16 };
Act act_of(DType t) { return t == DType::F32 ? Act::F32 : t == DType::BF16 ? Act::BF16 : Act::F16; }
size_t act_bytes(Act a) { return a == Act::F32 ? 4 : 2; }
cudaDataType_t cuda_type(Act a) { return a == Act::F32 ? CUDA_R_32F : a == Act::BF16 ? CUDA_R_16BF : CUDA_R_16F; }

template <class Fn>
void with_act(Act a, Fn&& fn) {
    switch (a) {
        case Act::F32: fn.template operator()<float>(); break;
        case Act::F16: fn.template operator()<__half>(); break;
        case Act::BF16: fn.template operator()<__nv_bfloat16>(); break;
    }
}

// Expert e's [rows, K] matrix of w as a GEMM's A: plain types in place,
// quantized ones dequantized into ctx.ws.dequant (the previous GEMM that
// read it is ahead in the stream).
const void* expert_matrix(const Ctx& ctx, const Tensor& node, const Tensor& w, int64_t e, int64_t& lda) {
    const int64_t rows = w.ne[1];
    WView v = weight_view(w);
    if (is_plain(w.type)) {
        lda = static_cast<int64_t>(w.nb[1] / dtype_type_size(w.type));
        return v.data + static_cast<size_t>(e) * w.nb[2];
    }
    v.data += static_cast<size_t>(e * rows) * v.row_bytes;
    v.meta += static_cast<size_t>(e * rows) * v.meta_row_bytes;
    dequant_f16(ctx, w.type, v, rows, ctx.ws.dequant, node);
    lda = w.ne[0];
    return ctx.ws.dequant;
}

// The scratch after the routing, each part 256-byte aligned.
struct Scratch {
    int32_t *order, *at, *offsets;
    uint8_t* xs;  // [P][D] in the gate's operand type
    float* gu;    // [T][2F]: an expert's gate and up results (at most T rows)
    uint8_t* h;   // [T][F] in the down matrix's operand type
    float* ys;    // [P][D]: each pair's down result
    size_t total;
};

Scratch carve(uint8_t* base, const Tensor& node, const Dims& d) {
    const auto P = static_cast<size_t>(d.pairs()), D = static_cast<size_t>(d.D), F = static_cast<size_t>(d.F),
               T = static_cast<size_t>(d.T);
    Scratch s{};
    size_t at = 0;
    auto take = [&](size_t bytes) {
        uint8_t* p = base == nullptr ? nullptr : base + at;
        at += align256(bytes);
        return p;
    };
    s.order = reinterpret_cast<int32_t*>(take(P * 4));
    s.at = reinterpret_cast<int32_t*>(take(P * 4));
    s.offsets = reinterpret_cast<int32_t*>(take((static_cast<size_t>(d.E) + 1) * 4));
    s.xs = take(P * D * act_bytes(act_of(node.src[2]->type)));
    s.gu = reinterpret_cast<float*>(take(T * 2 * F * sizeof(float)));
    s.h = take(T * F * act_bytes(act_of(node.src[4]->type)));
    s.ys = reinterpret_cast<float*>(take(P * D * sizeof(float)));
    s.total = at;
    return s;
}

}  // namespace

bool prompt_wanted(const Ctx& ctx, const Tensor& node) {
    const Dims d = dims_of(node);
    if (!ctx.moe_gemm || d.T < kMinTokens || d.pairs() < 2 * d.E || ctx.host_moe == nullptr) return false;
    return act_of(node.src[2]->type) == act_of(node.src[3]->type);  // one gathered activation for both
}

bool prompt_path(const Ctx& ctx, const Tensor& node) {
    if (!prompt_wanted(ctx, node)) return false;
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(ctx.stream, &st) == cudaSuccess && st == cudaStreamCaptureStatusNone;
}

void need_prompt(const Tensor& node, const Dims& d, WorkspaceNeeds& needs) {
    if (d.T < kMinTokens || d.pairs() < 2 * d.E) return;
    needs.moe = std::max(needs.moe, routing_bytes(d) + carve(nullptr, node, d).total);
    for (int i = 2; i <= 4; ++i) {
        const Tensor& w = *node.src[i];
        if (!is_plain(w.type)) needs.dequant = std::max(needs.dequant, static_cast<size_t>(w.ne[0] * w.ne[1]) * 2);
    }
}

void run_prompt(const Ctx& ctx, const Tensor& node, const Dims& d, const int32_t* ids, const float* weights,
                uint8_t* scratch) {
    const Scratch s = carve(scratch, node, d);
    const int64_t P = d.pairs();
    check(launch(ctx, k_moe_sort, dim3(1), dim3(kSortThreads), 0, ids, static_cast<int>(P), static_cast<int>(d.E),
                 s.order, s.at, s.offsets),
          "k_moe_sort", node);
    check(cudaMemcpyAsync(ctx.host_moe, s.offsets, static_cast<size_t>(d.E + 1) * 4, cudaMemcpyDeviceToHost, ctx.stream),
          "cudaMemcpyAsync (experts' pair counts)", node);
    check(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize (experts' pair counts)", node);

    const Tensor& x = *node.src[0];
    const Tensor &gate = *node.src[2], &up = *node.src[3], &down = *node.src[4];
    const Act ga = act_of(gate.type), da = act_of(down.type);
    with_act(ga, [&]<class H>() {
        check(launch(ctx, k_moe_gather<H>, dim3(blocks_for(P * d.D, 256)), dim3(256), 0, ptr<const uint8_t>(x), x.nb[1],
                     d, static_cast<const int32_t*>(s.order), reinterpret_cast<H*>(s.xs)),
              "k_moe_gather", node);
    });
    for (int64_t e = 0; e < d.E; ++e) {
        const int64_t first = ctx.host_moe[e], rows = ctx.host_moe[e + 1] - first;
        if (rows == 0) continue;
        const uint8_t* xe = s.xs + static_cast<size_t>(first * d.D) * act_bytes(ga);
        int64_t lda = 0;
        const void* A = expert_matrix(ctx, node, gate, e, lda);
        gemm_nt(ctx, d.F, rows, d.D, cuda_type(ga), A, lda, xe, d.D, s.gu, 2 * d.F, node);
        A = expert_matrix(ctx, node, up, e, lda);
        gemm_nt(ctx, d.F, rows, d.D, cuda_type(ga), A, lda, xe, d.D, s.gu + d.F, 2 * d.F, node);
        with_act(da, [&]<class H>() {
            check(launch(ctx, k_moe_silu<H>, dim3(blocks_for(rows * d.F, 256)), dim3(256), 0,
                         static_cast<const float*>(s.gu), rows, d.F, reinterpret_cast<H*>(s.h)),
                  "k_moe_silu", node);
        });
        A = expert_matrix(ctx, node, down, e, lda);
        gemm_nt(ctx, d.D, rows, d.F, cuda_type(da), A, lda, s.h, d.F, s.ys + first * d.D, d.D, node);
    }
    check(launch(ctx, k_moe_combine, dim3(blocks_for(d.T * d.D, 256)), dim3(256), 0, static_cast<const float*>(s.ys),
                 static_cast<const int32_t*>(s.at), weights, d, ptr<uint8_t>(node), node.nb[1]),
          "k_moe_combine", node);
}

}  // namespace lantern::cuda::moe
