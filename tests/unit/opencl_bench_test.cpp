// The OpenCL op micro-benchmark (LANTERN_OPENCL_BENCH=1; skipped otherwise):
// the device's copy bandwidth as the ceiling (the driver's buffer copy and
// this backend's copy kernel), then the products of a decode step on
// llama2-7b and tinyllama shapes - µs per launch, GB/s of weight bytes and
// the share of the copy bandwidth - the fused launches (Q/K/V, gate/up/SiLU),
// prompt-sized products (TFLOP/s) and attention. Weights rotate through
// enough copies (>= 256 MB) that L2 (50 MB on the H100) cannot serve them.
// Each benchmarked case is also checked against the CPU.
#if defined(LANTERN_HAVE_OPENCL)

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/opencl/opencl_registry.h"
#include "op_harness.h"
#include "quant/quant.h"
#include "test_util.h"

namespace lantern::test {
namespace {

const bool kCacheDirSet = [] {
    const std::string dir = std::string(LANTERN_BINARY_DIR) + "/opencl-test-cache";
    setenv("LANTERN_OPENCL_CACHE_DIR", dir.c_str(), 0);
    return true;
}();

// LANTERN_OPENCL_BENCH=1: everything; =matvec: the Q4_0 matrix-vector rows only
// (for comparing LANTERN_OPENCL_MV_TPR settings).
std::string mode() {
    const char* v = std::getenv("LANTERN_OPENCL_BENCH");
    return v != nullptr ? v : "";
}

using Clock = std::chrono::steady_clock;

// Bytes read + written per second by clEnqueueCopyBuffer of 1 GiB (best of 10).
double driver_copy_bandwidth(ocl::OpenClBackend& b) {
    const size_t n = size_t{1} << 30;
    auto src = b.alloc(n, BufferKind::Compute);
    auto dst = b.alloc(n, BufferKind::Compute);
    src->fill(0, 1, n);
    dst->fill(0, 2, n);
    double best = 1e30;
    for (int i = 0; i < 12; ++i) {
        const auto t0 = Clock::now();
        clEnqueueCopyBuffer(b.queue(), static_cast<cl_mem>(src->base()), static_cast<cl_mem>(dst->base()), 0, 0, n, 0,
                            nullptr, nullptr);
        clFinish(b.queue());
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (i >= 2) best = std::min(best, s);
    }
    return 2.0 * static_cast<double>(n) / best;
}

int copies_for(double bytes) { return std::max(2, static_cast<int>(256e6 / bytes) + 1); }

// Runs `c` on the CPU and the backend (checking the outputs), then times it.
double time_case(OpCase& c, Backend& gpu, int runs, bool check = true) {
    if (check) {
        CpuBackend cpu(8);
        const CaseResult want = run_case(c, cpu);
        const CaseResult got = run_case(c, gpu);
        EXPECT_TRUE(got.supported) << c.name;
        if (!got.supported) return 0;
        EXPECT_TRUE(got.guards_intact) << c.name;
        for (size_t i = 0; i < got.outputs.size(); ++i) {
            EXPECT_LE(nmse(got.outputs[i], want.outputs[i]), c.tolerance) << c.name << " output " << i;
        }
    }
    return run_case(c, gpu, runs).seconds_per_run;
}

void row(const std::string& name, double us, double gbs, double copy) {
    std::printf("[ bench ] %-34s %9.2f us %8.0f GB/s %5.0f%% of copy\n", name.c_str(), us, gbs, 100.0 * gbs * 1e9 / copy);
}

TEST(OpenclOpBench, DecodeAndPromptOps) {
    if (mode() != "1" && mode() != "matvec") GTEST_SKIP() << "set LANTERN_OPENCL_BENCH=1";
    const bool all = mode() == "1";
    std::unique_ptr<Backend> gpu = make_opencl_backend(0);
    auto& ocl = static_cast<ocl::OpenClBackend&>(*gpu);
    std::printf("[ bench ] device: %s\n", gpu->description().c_str());
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // every row out at once, even if the run is cut short
    std::printf("[ bench ] programs: matvec groups of %zu, %zu work-items x %zu rows per slot, %zu blocks ahead, tensor-core kernels %s\n",
                ocl.programs().shape().mv_wg, ocl.programs().shape().mv_tpr, ocl.programs().shape().mv_rpt, ocl.programs().shape().mv_u,
                ocl.programs().available(ocl::ProgramId::MatmulNv) ? "yes" : "no");

    const double copy = driver_copy_bandwidth(ocl);
    std::printf("[ bench ] clEnqueueCopyBuffer 1 GiB: %.0f GB/s (read + write)\n", copy / 1e9);
    if (all) {
        OpCase c;
        c.name = "copy kernel f32 1 GiB";
        CaseLeaves L{c, std::mt19937(1)};
        Tensor* x = L.leaf(DType::F32, {65536, 4096}, "x");
        c.outputs.push_back(c.graph.copy(x, DType::F32));
        const double s = time_case(c, *gpu, 10, false);
        std::printf("[ bench ] copy kernel 1 GiB: %.0f GB/s (read + write)\n", 2.0 * 1073741824.0 / s / 1e9);
    }

    struct Shape {
        const char* what;
        int64_t K, N;
    };
    const Shape shapes[] = {{"7b q/o", 4096, 4096},       {"7b gate/up", 4096, 11008}, {"7b down", 11008, 4096},
                            {"7b output", 4096, 32000},   {"tiny q/o", 2048, 2048},    {"tiny k/v", 2048, 256},
                            {"tiny gate/up", 2048, 5632}, {"tiny down", 5632, 2048}};
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_1, DType::F16}) {
        if (!all && t != DType::Q4_0) continue;
        for (const Shape& s : shapes) {
            if (t != DType::Q4_0 && s.what[0] == 't') continue;
            const double one = static_cast<double>(dtype_row_size(t, s.K)) * static_cast<double>(s.N);
            const int copies = copies_for(one);
            OpCase c;
            c.name = std::string(dtype_name(t)) + " " + s.what + " " + std::to_string(s.K) + "x" + std::to_string(s.N);
            c.tolerance = 5e-4;
            CaseLeaves L{c, std::mt19937(2)};
            for (int i = 0; i < copies; ++i) {
                Tensor* w = L.repeated_weight(t, s.K, s.N, "w");
                Tensor* x = L.leaf(DType::F32, {s.K, 1}, "x");  // own input: no grouping
                c.outputs.push_back(c.graph.mul_mat(w, x));
            }
            const double sec = time_case(c, *gpu, 10, all);
            row(c.name, sec / copies * 1e6, one * copies / sec / 1e9, copy);
        }
    }

    // Fused launches of a 7b decode step: Q/K/V in one, gate/up/SiLU in one.
    for (int fused = 0; fused < 2; ++fused) {
        const int64_t K = 4096, N = fused == 0 ? 4096 : 11008;
        const double one = 3.0 * dtype_row_size(DType::Q4_0, K) * static_cast<double>(N) * (fused == 0 ? 1.0 : 2.0 / 3.0);
        const int copies = copies_for(one);
        OpCase c;
        c.name = fused == 0 ? "q4_0 7b qkv (one launch)" : "q4_0 7b gate+up+silu (one launch)";
        c.tolerance = 5e-4;
        CaseLeaves L{c, std::mt19937(3)};
        for (int i = 0; i < copies; ++i) {
            Tensor* x = L.leaf(DType::F32, {K, 1}, "x");
            if (fused == 0) {
                for (int j = 0; j < 3; ++j) c.outputs.push_back(c.graph.mul_mat(L.repeated_weight(DType::Q4_0, K, N, "w"), x));
            } else {
                Tensor* g = c.graph.mul_mat(L.repeated_weight(DType::Q4_0, K, N, "wg"), x);
                Tensor* u = c.graph.mul_mat(L.repeated_weight(DType::Q4_0, K, N, "wu"), x);
                c.outputs.push_back(c.graph.silu_mul(g, u));
            }
        }
        const double sec = time_case(c, *gpu, 10, all);
        row(c.name, sec / copies * 1e6, one * copies / sec / 1e9, copy);
    }
    if (!all) return;

    // Prompt-sized products (M = 512).
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16}) {
        for (const Shape& s : {Shape{"7b gate/up", 4096, 11008}, Shape{"7b q/o", 4096, 4096}}) {
            OpCase c;
            c.name = std::string(dtype_name(t)) + " " + s.what + " x512";
            c.tolerance = 5e-4;
            CaseLeaves L{c, std::mt19937(4)};
            c.outputs.push_back(c.graph.mul_mat(L.repeated_weight(t, s.K, s.N, "w"), L.leaf(DType::F32, {s.K, 512}, "x")));
            const double sec = time_case(c, *gpu, 5, t == DType::Q4_0);
            std::printf("[ bench ] %-34s %9.1f us %8.1f TFLOP/s\n", c.name.c_str(), sec * 1e6,
                        2.0 * s.K * s.N * 512 / sec / 1e12);
        }
    }

    // Attention of a 7b layer (32 heads of 128, f16 cache): one token at
    // context 512 and 4096, and a 512-token prompt.
    for (auto [T, ctx] : {std::pair<int64_t, int>{1, 512}, {1, 4096}, {512, 512}}) {
        OpCase c;
        c.name = "attention 7b t" + std::to_string(T) + " ctx" + std::to_string(ctx);
        c.tolerance = 5e-4;
        CaseLeaves L{c, std::mt19937(5)};
        const int64_t hd = 128, H = 32;
        Tensor* q = L.leaf(DType::F32, {hd, H, T}, "q");
        Tensor* kc = c.graph.copy(L.leaf(DType::F32, {hd * H, ctx}, "k"), DType::F16);
        Tensor* vc = c.graph.copy(L.leaf(DType::F32, {hd * H, ctx}, "v"), DType::F16);
        std::vector<int32_t> pos(static_cast<size_t>(T)), seq(static_cast<size_t>(T), 0);
        for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(ctx - T + t);
        Tensor* tp = c.graph.new_tensor(DType::I32, {T}, "pos");
        Tensor* ts = c.graph.new_tensor(DType::I32, {T}, "seq");
        std::vector<uint8_t> pb(pos.size() * 4), sb(seq.size() * 4);
        std::memcpy(pb.data(), pos.data(), pb.size());
        std::memcpy(sb.data(), seq.data(), sb.size());
        c.leaves.emplace_back(tp, pb);
        c.leaves.emplace_back(ts, sb);
        c.outputs.push_back(c.graph.attention(q, kc, vc, tp, ts, static_cast<int>(H), ctx, 1.0f / std::sqrt(128.0f), 0.0f, 0));
        const double sec = time_case(c, *gpu, 5, T == 1);
        std::printf("[ bench ] %-34s %9.1f us (with two f32->f16 cache copies)\n", c.name.c_str(), sec * 1e6);
    }
}

}  // namespace
}  // namespace lantern::test

#endif  // LANTERN_HAVE_OPENCL
