// The CUDA op micro-benchmark (run with LANTERN_CUDA_BENCH=1; skipped
// otherwise): device-to-device copy bandwidth as the ceiling, then
// matrix-vector products of every weight type on large matrices (GB/s of
// weight bytes, and the share of the copy bandwidth), and a prompt-sized GEMM.
// Weights rotate through enough copies (>= 256 MB) that L2 (50 MB) cannot
// serve them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "cuda_test_util.h"

#if defined(LANTERN_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace lantern::test {
namespace {

bool env_is_one(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::string(v) == "1";
}

bool bench_enabled() { return env_is_one("LANTERN_CUDA_BENCH"); }

#if defined(LANTERN_HAVE_CUDA)
// LANTERN_CUDA_BENCH_ONLY=<text>: only the matrix-vector cases whose name
// contains it (e.g. "q4_0 11008x4096"), for profiling one kernel.
bool bench_selected(const std::string& name) {
    const char* v = std::getenv("LANTERN_CUDA_BENCH_ONLY");
    return v == nullptr || name.find(v) != std::string::npos;
}

// Bytes read + written per second by cudaMemcpy device to device (median of 20).
double copy_bandwidth(Backend& gpu) {
    const size_t n = size_t{1} << 30;
    auto a = gpu.alloc(n, BufferKind::Compute);
    auto b = gpu.alloc(n, BufferKind::Compute);
    a->fill(0, 1, n);
    b->fill(0, 2, n);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int i = 0; i < 22; ++i) {
        cudaEventRecord(e0);
        cudaMemcpy(b->base(), a->base(), n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (i >= 2) ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms.begin(), ms.end());
    return 2.0 * static_cast<double>(n) / (ms[ms.size() / 2] * 1e-3);
}

// A case of `copies` MulMats [K, N] x [K, M], each with its own activation
// and its own weight (shared: all of them one weight, which then stays in
// L2 after the first launch). Weights: 64 quantized random rows, repeated.
std::unique_ptr<OpCase> matmul_case(DType t, int64_t K, int64_t N, int64_t M, int copies, bool shared = false) {
    auto c = std::make_unique<OpCase>();
    c->name = std::string(dtype_name(t)) + " " + std::to_string(K) + "x" + std::to_string(N);
    if (M > 1) c->name = "gemm " + c->name;
    CaseLeaves b{*c, std::mt19937(5)};
    Tensor* one = shared ? b.repeated_weight(t, K, N, "w") : nullptr;
    for (int i = 0; i < copies; ++i) {
        Tensor* w = shared ? one : b.repeated_weight(t, K, N, "w");
        Tensor* x = b.leaf(DType::F32, {K, M}, "x");
        c->outputs.push_back(c->graph.mul_mat(w, x));
        c->bytes += static_cast<double>(w->nbytes());
        c->flops += 2.0 * static_cast<double>(K * N * M);
    }
    return c;
}

// A decode layer's fused matrix-vector launches, `copies` of each with
// their own weights: Q/K/V side by side or gate/up + SiLU, with or without
// the add + RMSNorm in front (the decode graph has it in front of both).
std::unique_ptr<OpCase> layer_launch_case(DType t, bool gate_up, bool norm, int copies) {
    auto c = std::make_unique<OpCase>();
    const int64_t K = 4096, N = gate_up ? 11008 : 4096;
    c->name = std::string(norm ? "norm+" : "") + (gate_up ? "gate/up " : "q/k/v ") + dtype_name(t);
    CaseLeaves b{*c, std::mt19937(6)};
    for (int i = 0; i < copies; ++i) {
        Tensor* x = nullptr;
        if (norm) {
            Tensor* f = c->graph.add_rms_norm(b.leaf(DType::F32, {K, 1}, "residual"), b.leaf(DType::F32, {K, 1}, "add"),
                                              b.weight(DType::F32, {K}, "norm"), 1e-5f);
            x = c->graph.fused_slice(f, 1);
            c->outputs.push_back(f);
        } else {
            x = b.leaf(DType::F32, {K, 1}, "x");
        }
        const int n_mats = gate_up ? 2 : 3;
        std::vector<Tensor*> out;
        for (int m = 0; m < n_mats; ++m) {
            Tensor* w = b.repeated_weight(t, K, N, "w");
            out.push_back(c->graph.mul_mat(w, x));
            c->bytes += static_cast<double>(w->nbytes());
        }
        if (gate_up) out.push_back(c->graph.silu_mul(out[0], out[1]));
        for (Tensor* o : out) c->outputs.push_back(o);
    }
    return c;
}

// A MoE FFN, `copies` layers with their own weights and activations, T
// tokens each: Mixtral's (D 4096, F 14336, 8 experts, 2 per token) or with
// `small`, Qwen3-30B-A3B's (D 2048, F 768, 128 experts, 8 per token). bytes:
// what one token's experts and the router read; flops: the experts'
// products for all T tokens.
std::unique_ptr<OpCase> moe_case(DType t, int64_t T, int copies, bool small = false) {
    auto c = std::make_unique<OpCase>();
    const int64_t D = small ? 2048 : 4096, F = small ? 768 : 14336, E = small ? 128 : 8, k = small ? 8 : 2;
    c->name = std::string("moe ") + (small ? "128x768 " : "") + dtype_name(t) + " T" + std::to_string(T);
    CaseLeaves b{*c, std::mt19937(7)};
    for (int i = 0; i < copies; ++i) {
        Tensor* x = b.leaf(DType::F32, {D, T}, "x");
        Tensor* router = b.weight(DType::F32, {D, E}, "router");
        Tensor* gate = b.picked_rows_weight(t, {D, F, E}, "gate_exps");
        Tensor* up = b.picked_rows_weight(t, {D, F, E}, "up_exps");
        Tensor* down = b.picked_rows_weight(t, {F, D, E}, "down_exps");
        c->outputs.push_back(c->graph.moe_ffn(x, router, gate, up, down, static_cast<int>(k), true));
        c->bytes += static_cast<double>(router->nbytes()) +
                    static_cast<double>(k) * static_cast<double>(gate->nbytes() + up->nbytes() + down->nbytes()) /
                        static_cast<double>(E);
        c->flops += 2.0 * static_cast<double>(T * k * 3 * D * F);
    }
    return c;
}
#endif

TEST(CudaOpBench, MatVecBandwidth) {
    if (!bench_enabled()) GTEST_SKIP() << "set LANTERN_CUDA_BENCH=1";
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
#if defined(LANTERN_HAVE_CUDA)
    const double copy = copy_bandwidth(*gpu);
    std::printf("[ bench ] device-to-device copy: %.0f GB/s (read + write)\n", copy / 1e9);
    struct Shape {
        int64_t K, N;
    };
    // LANTERN_CUDA_BENCH_COPIES=n: n launches (and weight copies) per run
    // instead. Each run is one graph replay, and the gap between replays
    // (no programmatic dependent launch across them) is shared by its
    // launches: with 1 it is most of what is timed.
    // LANTERN_CUDA_BENCH_L2=1: the run's launches all read one weight, from
    // L2 after the first, which times the kernels without HBM.
    const char* nc = std::getenv("LANTERN_CUDA_BENCH_COPIES");
    const bool shared = env_is_one("LANTERN_CUDA_BENCH_L2");
    std::printf("[ bench ] %-22s %10s %10s %8s\n", "matrix-vector", "us/matvec", "GB/s", "of copy");
    double q4_large = 0;
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::F16, DType::BF16}) {
        // The 7B's matrices, then a 70B's FFN pair (Llama 2/3 70B: D 8192,
        // F 28672), where a launch's fixed costs (launch, grid wait, the
        // activation's staging) are a small share of its transfer.
        for (Shape s : {Shape{4096, 4096}, Shape{4096, 11008}, Shape{11008, 4096}, Shape{4096, 32000}, Shape{8192, 28672},
                        Shape{28672, 8192}}) {
            if (!bench_selected(std::string(dtype_name(t)) + " " + std::to_string(s.K) + "x" + std::to_string(s.N))) {
                continue;
            }
            const double one = static_cast<double>(dtype_row_size(t, s.K)) * static_cast<double>(s.N);
            const int copies = nc != nullptr ? std::max(1, std::atoi(nc)) : std::max(2, static_cast<int>(256e6 / one) + 1);
            auto c = matmul_case(t, s.K, s.N, 1, copies, shared);
            const CaseResult r = run_case(*c, *gpu, 20);
            ASSERT_TRUE(r.supported) << c->name;
            const double gbs = c->bytes / r.seconds_per_run / 1e9;
            std::printf("[ bench ] %-22s %10.2f %10.0f %7.0f%%\n", c->name.c_str(), r.seconds_per_run / copies * 1e6,
                        gbs, 100.0 * gbs * 1e9 / copy);
            if (t == DType::Q4_0 && s.N == 11008) q4_large = gbs * 1e9 / copy;
        }
    }
    // The 7B's fused launches in isolation (the graph's trace gave gate/up
    // 1.96 TB/s and Q/K/V 2.5): whether the paired rows or the norm in
    // front cost the difference.
    std::printf("[ bench ] %-22s %10s %10s %8s\n", "layer launch (7B)", "us/launch", "GB/s", "of copy");
    for (bool gate_up : {false, true}) {
        for (bool norm : {false, true}) {
            const int copies = gate_up ? 6 : 10;
            auto c = layer_launch_case(DType::Q4_0, gate_up, norm, copies);
            if (!bench_selected(c->name)) continue;
            const CaseResult r = run_case(*c, *gpu, 20);
            ASSERT_TRUE(r.supported) << c->name;
            const double gbs = c->bytes / r.seconds_per_run / 1e9;
            std::printf("[ bench ] %-22s %10.2f %10.0f %7.0f%%\n", c->name.c_str(), r.seconds_per_run / copies * 1e6,
                        gbs, 100.0 * gbs * 1e9 / copy);
        }
    }
    std::printf("[ bench ] %-22s %10s %10s\n", "prompt GEMM (M=512)", "ms", "TFLOP/s");
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16}) {
        auto c = matmul_case(t, 4096, 11008, 512, 2);
        if (!bench_selected(c->name)) continue;
        const CaseResult r = run_case(*c, *gpu, 10);
        ASSERT_TRUE(r.supported);
        std::printf("[ bench ] %-22s %10.3f %10.1f\n", c->name.c_str(), r.seconds_per_run / 2 * 1e3,
                    c->flops / r.seconds_per_run / 1e12);
    }
    // The MoE FFN: a decode step's launches, then a prompt's grouped GEMMs
    // (as a prompt step: recorded steps take the per-pair kernels).
    std::printf("[ bench ] %-22s %10s %10s %8s\n", "MoE FFN", "us/layer", "GB/s", "of copy");
    for (auto [t, small] : {std::pair{DType::Q4_0, false}, std::pair{DType::Q4_K, false}, std::pair{DType::Q4_K, true}}) {
        auto c = moe_case(t, 1, 4, small);
        if (!bench_selected(c->name)) continue;
        const CaseResult r = run_case(*c, *gpu, 20);
        ASSERT_TRUE(r.supported) << c->name;
        const double gbs = c->bytes / r.seconds_per_run / 1e9;
        std::printf("[ bench ] %-22s %10.2f %10.0f %7.0f%%\n", c->name.c_str(), r.seconds_per_run / 4 * 1e6, gbs,
                    100.0 * gbs * 1e9 / copy);
    }
    std::printf("[ bench ] %-22s %10s %10s\n", "MoE FFN prompt", "ms/layer", "TFLOP/s");
    for (int64_t T : {16, 512}) {
        auto c = moe_case(DType::Q4_0, T, 2);
        if (!bench_selected(c->name)) continue;
        const CaseResult r = run_case(*c, *gpu, 5, ComputeHints{.prefill = true});
        ASSERT_TRUE(r.supported) << c->name;
        std::printf("[ bench ] %-22s %10.3f %10.1f\n", c->name.c_str(), r.seconds_per_run / 2 * 1e3,
                    c->flops / r.seconds_per_run / 1e12);
    }
    if (q4_large > 0) std::printf("[ bench ] Q4_0 4096x11008 matvec reaches %.0f%% of the copy bandwidth\n", 100.0 * q4_large);
#endif
}

}  // namespace
}  // namespace lantern::test
