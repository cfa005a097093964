// Every op of the op harness on the OpenCL backend (PoCL in CI) against the
// CPU backend, recorded (command buffers where offered) and eager; plus the
// fused launches of a llama layer, the tensor-core matrix kernels through
// their emulation, and the backend's parts (memory pool, program cache,
// device list, forced build failures).
//
// Device: the first OpenCL device, or LANTERN_OPENCL_PLATFORM /
// LANTERN_OPENCL_DEVICE (the device check sets them to NVIDIA's).
// Compiled programs are cached under the build directory
// (LANTERN_OPENCL_CACHE_DIR overrides), so each test process builds little.
#if defined(LANTERN_HAVE_OPENCL)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/device.h"
#include "backends/opencl/memory_pool.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/opencl/opencl_registry.h"
#include "backends/opencl/program_cache.h"
#include "core/half.h"
#include "gpu_compare.h"
#include "op_harness.h"
#include "quant/quant.h"
#include "test_util.h"

namespace lantern::test {
namespace {

constexpr uint32_t kSeed = 1234;

// Test processes share one program cache in the build tree.
const bool kCacheDirSet = [] {
    const std::string dir = std::string(LANTERN_BINARY_DIR) + "/opencl-test-cache";
    setenv("LANTERN_OPENCL_CACHE_DIR", dir.c_str(), 0);
    return true;
}();

std::unique_ptr<Backend> opencl() { return make_opencl_backend(0); }

class OpenclOps : public ::testing::TestWithParam<size_t> {};

TEST_P(OpenclOps, MatchesCpuRecorded) {
    auto cases = make_op_cases(kSeed);
    std::unique_ptr<Backend> gpu = opencl();
    expect_matches_cpu(*cases[GetParam()], *gpu, "recorded");
    // The same case again replays the recording.
    if (!HasFatalFailure() && !IsSkipped()) expect_matches_cpu(*cases[GetParam()], *gpu, "recorded again");
}

TEST_P(OpenclOps, MatchesCpuEager) {
    auto cases = make_op_cases(kSeed);
    ScopedEnv eager("LANTERN_GRAPHS", "0");
    std::unique_ptr<Backend> gpu = opencl();
    expect_matches_cpu(*cases[GetParam()], *gpu, "eager");
}

INSTANTIATE_TEST_SUITE_P(AllCases, OpenclOps, ::testing::Range<size_t>(0, op_case_names(kSeed).size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                             return op_case_names(kSeed)[info.param];
                         });

// ---- cases of this file ------------------------------------------------------------------

// One llama layer as the model builds it, in one compute call, so that the
// backend's fusions apply: add + norm (8-bit output), Q/K/V products in one
// launch, RoPE with the KV-cache writes, attention, output product, add +
// norm, gate/up/SiLU in one launch, down product; then the next layer's add +
// norm and Q/K/V products. With one token each add + norm after a product is
// split between the launches around it, and RoPE and the cache writes join
// the attention launch. `cache`: the KV caches' type (f16 or q8_0).
std::unique_ptr<OpCase> llama_layer_case(DType wtype, int64_t T, uint32_t seed, DType cache = DType::F16) {
    auto c = std::make_unique<OpCase>();
    c->name = std::string("llama_layer_") + dtype_name(wtype) + "_t" + std::to_string(T);
    if (cache != DType::F16) c->name += std::string("_cache_") + dtype_name(cache);
    c->tolerance = 5e-4;
    CaseLeaves L{*c, std::mt19937(seed)};
    Graph& g = c->graph;
    // K-quant and IQ4_XS rows are whole 256-element super-blocks (the down product's too).
    const bool super_blocks = dtype_block_size(wtype) == 256;
    const int64_t D = 256, hd = 64, n_head = 4, n_kv = 2, F = super_blocks ? 512 : 384, n_ctx = 48;
    Tensor* x = L.leaf(DType::F32, {D, T}, "x");
    Tensor* res = L.leaf(DType::F32, {D, T}, "res");
    Tensor* attn_norm = L.weight(DType::F32, {D}, "attn_norm");
    Tensor* ffn_norm = L.weight(DType::F32, {D}, "ffn_norm");
    Tensor* wq = L.weight(wtype, {D, hd * n_head}, "wq");
    Tensor* wk = L.weight(wtype, {D, hd * n_kv}, "wk");
    Tensor* wv = L.weight(wtype, {D, hd * n_kv}, "wv");
    Tensor* wo = L.weight(wtype, {hd * n_head, D}, "wo");
    Tensor* wg = L.weight(wtype, {D, F}, "wg");
    Tensor* wu = L.weight(wtype, {D, F}, "wu");
    Tensor* wd = L.weight(wtype, {F, D}, "wd");
    Tensor* kc = L.leaf(cache, {hd * n_kv, n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* vc = L.leaf(cache, {hd * n_kv, n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
    std::vector<int32_t> pos, seq;
    for (int64_t t = 0; t < T; ++t) {
        pos.push_back(static_cast<int32_t>(20 + t));  // cells before 20 hold earlier (random) tokens
        seq.push_back(0);
    }
    Tensor* tp = L.ints(pos, "pos");
    Tensor* ts = L.ints(seq, "seq");

    Tensor* f = g.add_rms_norm(x, res, attn_norm, 1e-5f);
    Tensor* resid = g.fused_slice(f, 0);
    Tensor* cur = g.fused_slice(f, 1);
    Tensor* q = g.mul_mat(wq, cur);
    Tensor* k = g.mul_mat(wk, cur);
    Tensor* v = g.mul_mat(wv, cur);
    Tensor* qk = g.rope_qk(g.reshape(q, {hd, n_head, T}), g.reshape(k, {hd, n_kv, T}), tp, nullptr, static_cast<int>(hd),
                           RopeMode::Normal, 10000.0f, 1.0f);
    Tensor* q_roped = g.rope_qk_part(qk, false);
    Tensor* k_rows = g.view(qk, {hd * n_kv, T}, {qk->nb[0], qk->nb[2]}, static_cast<size_t>(n_head) * qk->nb[1], "k_roped");
    Tensor* k_all = g.kv_store(k_rows, kc, tp, ts, static_cast<int>(n_ctx));
    Tensor* v_all = g.kv_store(v, vc, tp, ts, static_cast<int>(n_ctx));
    Tensor* attn = g.attention(q_roped, k_all, v_all, tp, ts, static_cast<int>(n_kv), static_cast<int>(n_ctx),
                               1.0f / std::sqrt(static_cast<float>(hd)), 0.0f, 0);
    Tensor* o = g.mul_mat(wo, attn);
    Tensor* f2 = g.add_rms_norm(resid, o, ffn_norm, 1e-5f);
    Tensor* cur2 = g.fused_slice(f2, 1);
    Tensor* gate = g.mul_mat(wg, cur2);
    Tensor* up = g.mul_mat(wu, cur2);
    Tensor* down = g.mul_mat(wd, g.silu_mul(gate, up));
    Tensor* f3 = g.add_rms_norm(g.fused_slice(f2, 0), down, attn_norm, 1e-5f);
    Tensor* cur3 = g.fused_slice(f3, 1);
    Tensor* q3 = g.mul_mat(wq, cur3);
    Tensor* k3 = g.mul_mat(wk, cur3);
    Tensor* v3 = g.mul_mat(wv, cur3);
    c->outputs = {qk, k_all, v_all, attn, f2, down, f3, q3, k3, v3};
    return c;
}

class OpenclLayer : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(OpenclLayer, FusedLaunchesMatchCpu) {
    const auto [type, T] = GetParam();
    auto c = llama_layer_case(type, T, 77);
    std::unique_ptr<Backend> gpu = opencl();
    expect_matches_cpu(*c, *gpu, "recorded");
    {
        ScopedEnv eager("LANTERN_GRAPHS", "0");
        std::unique_ptr<Backend> gpu_eager = opencl();
        expect_matches_cpu(*c, *gpu_eager, "eager");
    }
    if (T == 1) {  // one row: the add + RMSNorm is split between products unless switched off
        ScopedEnv fuse_norm("LANTERN_OPENCL_FUSE_NORM", "0");
        std::unique_ptr<Backend> gpu_norm = opencl();
        expect_matches_cpu(*c, *gpu_norm, "norm unfused");
        // Both norms after a product are split: two launches fewer.
        if (type != DType::F16) {
            EXPECT_EQ(gpu->stats().step_launches + 2, gpu_norm->stats().step_launches);
        }
        // add + norm, Q/K/V, RoPE + cache writes + attention, output product
        // + add + norm, gate/up/SiLU, down + add + norm, Q/K/V.
        if (type != DType::F16) {
            EXPECT_EQ(gpu->stats().step_launches, 7u);
        }
    }
}

// One token's RoPE, cache writes and attention over q8_0 caches from float
// leaves (no products), so that CPU and device agree to rounding: the
// current cell must be read back as its blocks hold it (8-bit values), not
// as computed (which moves the output by ~1e-5).
std::unique_ptr<OpCase> rope_attention_q8_case(int pos) {
    auto c = std::make_unique<OpCase>();
    c->name = "rope_attention_q8_0_pos" + std::to_string(pos);
    c->tolerance = 1e-9;
    CaseLeaves L{*c, std::mt19937(91 + static_cast<uint32_t>(pos))};
    Graph& g = c->graph;
    const int64_t hd = 64, n_head = 4, n_kv = 2, n_ctx = 16;
    Tensor* q = L.leaf(DType::F32, {hd, n_head, 1}, "q");
    Tensor* k = L.leaf(DType::F32, {hd, n_kv, 1}, "k");
    Tensor* v = L.leaf(DType::F32, {hd * n_kv, 1}, "v");
    Tensor* kc = L.leaf(DType::Q8_0, {hd * n_kv, n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* vc = L.leaf(DType::Q8_0, {hd * n_kv, n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* tp = L.ints({pos}, "pos");
    Tensor* ts = L.ints({0}, "seq");
    Tensor* qk = g.rope_qk(q, k, tp, nullptr, static_cast<int>(hd), RopeMode::Normal, 10000.0f, 1.0f);
    Tensor* k_rows = g.view(qk, {hd * n_kv, 1}, {qk->nb[0], qk->nb[2]}, static_cast<size_t>(n_head) * qk->nb[1], "k_roped");
    Tensor* k_all = g.kv_store(k_rows, kc, tp, ts, static_cast<int>(n_ctx));
    Tensor* v_all = g.kv_store(v, vc, tp, ts, static_cast<int>(n_ctx));
    Tensor* attn = g.attention(g.rope_qk_part(qk, false), k_all, v_all, tp, ts, static_cast<int>(n_kv),
                               static_cast<int>(n_ctx), 0.3f, 0.0f, 0);
    c->outputs = {attn, k_all, v_all};
    return c;
}

// Q8_0 caches are held on the device: the layer's launches are those of f16
// caches (one token: RoPE, both cache writes and attention in one launch,
// which quantizes the new rows into blocks and reads them back as the cache
// holds them); prompts write them with their own stores and attend tiled.
TEST(OpenclLayerCaches, Q8_0CachesTakeTheLaunchesOfF16Ones) {
    for (const int64_t T : {int64_t{1}, int64_t{3}, int64_t{20}}) {
        SCOPED_TRACE("T = " + std::to_string(T));
        std::unique_ptr<Backend> f16 = opencl();
        std::unique_ptr<Backend> q8 = opencl();
        auto c16 = llama_layer_case(DType::Q4_0, T, 78);
        auto c8 = llama_layer_case(DType::Q4_0, T, 78, DType::Q8_0);
        expect_matches_cpu(*c16, *f16, "f16 caches");
        expect_matches_cpu(*c8, *q8, "q8_0 caches");
        const size_t rope_kv_split = T > 1 ? 2 : 0;  // rope_qk_kv writes plain caches only
        EXPECT_EQ(q8->stats().step_launches, f16->stats().step_launches + rope_kv_split);
        if (T == 1) {
            EXPECT_EQ(q8->stats().step_launches, 7u);
        }
    }
    for (const int pos : {0, 1, 5}) {  // at 0 the output is the current V row itself
        auto c = rope_attention_q8_case(pos);
        std::unique_ptr<Backend> gpu = opencl();
        expect_matches_cpu(*c, *gpu, "one launch");
        EXPECT_EQ(gpu->stats().step_launches, 1u) << c->name;
    }
    // q8_0 keys with q8_0 or f16 values, on the op cases' stores and attention.
    auto cases = make_op_cases(kSeed);
    size_t held = 0;
    std::unique_ptr<Backend> gpu = opencl();
    for (auto& c : cases) {
        if (c->name.rfind("kv_store_q8_0", 0) != 0 && c->name.rfind("attention_cache_q8_0", 0) != 0) continue;
        const CaseResult r = run_case(*c, *gpu);
        EXPECT_TRUE(r.supported) << c->name;
        held += r.supported;
    }
    EXPECT_EQ(held, 4u);
}

// Decode attention over long ranges, split across work-groups in one launch:
// each split writes its partial softmax and the last to finish adds them.
// Splits are forced here (LANTERN_OPENCL_ATTN_GROUPS / _SPLIT_MIN: on a
// GPU the launch asks for two groups per compute unit, 128 cells each at
// least). Tokens of one step sit at different depths, so each deals out its
// own range: one split only (position 3), a few, all of them, windowed.
// Four tokens at different depths of two sequences, or with `prompt` two
// prompts of 20 tokens (sequence 0 at positions 600.., sequence 1 at 100..:
// the tiled kernel's second tile holds both).
std::unique_ptr<OpCase> long_attention_case(DType cache, int64_t hd, int64_t n_head, int64_t n_kv, int window,
                                            uint32_t seed, bool prompt = false) {
    auto c = std::make_unique<OpCase>();
    c->name = std::string("attention_long_") + (prompt ? "prompt_" : "") + dtype_name(cache) + "_hd" +
              std::to_string(hd) + "_h" + std::to_string(n_head) + "_kv" + std::to_string(n_kv) +
              (window > 0 ? "_window" : "");
    c->tolerance = 1e-10;  // f16 and q8_0 values are read exactly: only the sums' order differs (~1e-14)
    CaseLeaves L{*c, std::mt19937(seed)};
    const int n_ctx = 700;
    std::vector<int32_t> pos = {3, 150, 699, 420}, seq = {0, 1, 0, 1};
    if (prompt) {
        pos.clear();
        seq.clear();
        for (int s = 0; s < 2; ++s) {
            for (int i = 0; i < 20; ++i) {
                pos.push_back((s == 0 ? 600 : 100) + i);
                seq.push_back(s);
            }
        }
    }
    const int64_t T = static_cast<int64_t>(pos.size());
    Tensor* q = L.leaf(DType::F32, {hd, n_head, T}, "q", -2.0f, 2.0f);
    Tensor* kc = L.leaf(cache, {hd * n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* vc = L.leaf(cache, {hd * n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
    c->outputs.push_back(c->graph.attention(q, kc, vc, L.ints(pos, "pos"), L.ints(seq, "seq"), static_cast<int>(n_kv),
                                            n_ctx, 1.0f / std::sqrt(static_cast<float>(hd)), 0.0f, window));
    return c;
}

TEST(OpenclAttention, LongRangesSplitAcrossGroups) {
    ScopedEnv groups("LANTERN_OPENCL_ATTN_GROUPS", "512");
    ScopedEnv min_cells("LANTERN_OPENCL_ATTN_SPLIT_MIN", "16");
    uint32_t seed = 300;
    for (DType cache : {DType::F16, DType::Q8_0}) {
        for (const auto& [hd, n_head, n_kv, window] :
             {std::tuple{64, 4, 2, 0}, std::tuple{128, 8, 2, 0}, std::tuple{64, 2, 2, 100}, std::tuple{256, 2, 1, 0}}) {
            auto c = long_attention_case(cache, hd, n_head, n_kv, window, ++seed);
            std::unique_ptr<Backend> gpu = opencl();
            expect_matches_cpu(*c, *gpu, "split");
            EXPECT_EQ(gpu->stats().step_launches, 1u) << c->name;
        }
    }
    // Prompts: the tiled kernel's ranges (the union of a tile's queries'
    // ranges, up to ~800 cells) in splits of whole key tiles.
    ScopedEnv prompt_groups("LANTERN_OPENCL_PREFILL_GROUPS", "4096");
    for (DType cache : {DType::F16, DType::Q8_0}) {
        for (const auto& [hd, n_head, n_kv, window] :
             {std::tuple{64, 4, 2, 0}, std::tuple{128, 8, 2, 0}, std::tuple{64, 2, 2, 100}}) {
            auto c = long_attention_case(cache, hd, n_head, n_kv, window, ++seed, true);
            std::unique_ptr<Backend> gpu = opencl();
            expect_matches_cpu(*c, *gpu, "split");
            EXPECT_EQ(gpu->stats().step_launches, 1u) << c->name;
        }
    }
    // One token's fused RoPE + cache writes + attention, split the same way
    // (its 16 cells in splits of 4).
    ScopedEnv few_cells("LANTERN_OPENCL_ATTN_SPLIT_MIN", "4");
    for (const int pos : {1, 5}) {
        auto c = rope_attention_q8_case(pos);
        std::unique_ptr<Backend> gpu = opencl();
        expect_matches_cpu(*c, *gpu, "split");
        EXPECT_EQ(gpu->stats().step_launches, 1u) << c->name;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, OpenclLayer,
                         ::testing::Combine(::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                                              DType::Q8_0, DType::F16),
                                            ::testing::Values<int64_t>(1, 3, 20)),
                         [](const auto& info) {
                             return std::string(dtype_name(std::get<0>(info.param))) + "_t" +
                                    std::to_string(std::get<1>(info.param));
                         });
INSTANTIATE_TEST_SUITE_P(KQuants, OpenclLayer,
                         ::testing::Combine(::testing::Values(DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                                              DType::Q6_K),
                                            ::testing::Values<int64_t>(1, 20)),
                         [](const auto& info) {
                             return std::string(dtype_name(std::get<0>(info.param))) + "_t" +
                                    std::to_string(std::get<1>(info.param));
                         });
INSTANTIATE_TEST_SUITE_P(IQ4, OpenclLayer,
                         ::testing::Combine(::testing::Values(DType::IQ4_NL, DType::IQ4_XS),
                                            ::testing::Values<int64_t>(1, 20)),
                         [](const auto& info) {
                             return std::string(dtype_name(std::get<0>(info.param))) + "_t" +
                                    std::to_string(std::get<1>(info.param));
                         });

std::unique_ptr<OpCase> matmul_case(DType wtype, int64_t K, int64_t N, int64_t M, uint32_t seed) {
    auto c = std::make_unique<OpCase>();
    c->name = std::string("mul_mat_") + dtype_name(wtype) + "_" + std::to_string(K) + "x" + std::to_string(N) + "x" +
              std::to_string(M);
    c->tolerance = 5e-4;
    CaseLeaves L{*c, std::mt19937(seed)};
    Tensor* w = L.weight(wtype, {K, N}, "w");
    Tensor* x = L.leaf(DType::F32, {K, M}, "x");
    c->outputs.push_back(c->graph.mul_mat(w, x));
    return c;
}

// The tensor-core kernels (inline PTX on NVIDIA) built with the mma emulated
// by its documented fragment layout: tests their tiling on any device.
TEST(OpenclMma, EmulatedTensorCoreKernelsMatchCpu) {
    ScopedEnv emulate("LANTERN_OPENCL_MMA_EMULATE", "1");
    std::unique_ptr<Backend> gpu = opencl();
    auto& ocl = static_cast<ocl::OpenClBackend&>(*gpu);
    ASSERT_TRUE(ocl.programs().available(ocl::ProgramId::MatmulNv));
    uint32_t seed = 5;
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL}) {
        for (auto [K, N, M] : {std::tuple<int64_t, int64_t, int64_t>{96, 130, 70}, {256, 64, 9}}) {
            auto c = matmul_case(t, K, N, M, ++seed);
            expect_matches_cpu(*c, *gpu, "mma emulated");
        }
    }
    // The K-quants with one scale per block take them too (the others the
    // generic tiles: one scale per group of 16), and IQ4_XS.
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
        for (auto [K, N, M] : {std::tuple<int64_t, int64_t, int64_t>{512, 130, 70}, {256, 64, 9}}) {
            auto c = matmul_case(t, K, N, M, ++seed);
            expect_matches_cpu(*c, *gpu, "mma emulated");
        }
    }
}

TEST(OpenclMatmul, LargerTilesMatchCpu) {
    std::unique_ptr<Backend> gpu = opencl();
    uint32_t seed = 50;
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16, DType::F32}) {
        for (auto [K, N, M] : {std::tuple<int64_t, int64_t, int64_t>{320, 200, 130}, {64, 33, 8}, {1024, 70, 2}}) {
            auto c = matmul_case(t, K, N, M, ++seed);
            expect_matches_cpu(*c, *gpu, "recorded");
        }
    }
    for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
        for (auto [K, N, M] : {std::tuple<int64_t, int64_t, int64_t>{512, 200, 130}, {256, 33, 8}, {1024, 70, 2}}) {
            auto c = matmul_case(t, K, N, M, ++seed);
            expect_matches_cpu(*c, *gpu, "recorded");
        }
    }
}

// ---- the backend's parts --------------------------------------------------------------

TEST(OpenclBackend, ListsDevicesWithTheirLimits) {
    const std::vector<DeviceInfo> devices = list_opencl_devices();
    ASSERT_FALSE(devices.empty()) << "built with OpenCL but no device found (scripts/setup.sh installs PoCL)";
    for (size_t i = 0; i < devices.size(); ++i) {
        EXPECT_EQ(devices[i].backend, "opencl");
        EXPECT_EQ(devices[i].index, static_cast<int>(i));
        EXPECT_NE(devices[i].details.find("compute units"), std::string::npos) << devices[i].details;
        EXPECT_NE(devices[i].details.find("MiB"), std::string::npos) << devices[i].details;
        EXPECT_NE(devices[i].details.find("extensions:"), std::string::npos) << devices[i].details;
    }
    // Past the last index (without the platform override the device check sets).
    ScopedEnv no_platform("LANTERN_OPENCL_PLATFORM", "");
    EXPECT_THROW(make_opencl_backend(static_cast<int>(devices.size())), Error);
}

TEST(OpenclBackend, PoolReusesSizeClassesAndCounts) {
    EXPECT_EQ(ocl::MemoryPool::size_class(1), 4096u);
    EXPECT_EQ(ocl::MemoryPool::size_class(65536), 65536u);
    EXPECT_EQ(ocl::MemoryPool::size_class(65537), 65536u + 16384u);
    EXPECT_EQ(ocl::MemoryPool::size_class(1000000), 1048576u);
    EXPECT_LE(ocl::MemoryPool::size_class(3000000), 3000000u * 5 / 4);

    std::unique_ptr<Backend> gpu = opencl();
    const BackendStats s0 = gpu->stats();
    const void* first;
    {
        std::unique_ptr<Buffer> a = gpu->alloc(100000, BufferKind::Compute);
        first = a->base();
        const BackendStats s1 = gpu->stats();
        EXPECT_EQ(s1.mem_in_use - s0.mem_in_use, 100000u);
        EXPECT_GE(s1.mem_reserved - s0.mem_reserved, 100000u);
    }
    const BackendStats s2 = gpu->stats();
    EXPECT_EQ(s2.mem_in_use, s0.mem_in_use);
    EXPECT_GE(s2.mem_peak, s0.mem_in_use + 100000u);
    // A request of the same class gets the cached block back.
    std::unique_ptr<Buffer> b = gpu->alloc(99000, BufferKind::Compute);
    EXPECT_EQ(b->base(), first);
    EXPECT_EQ(gpu->stats().mem_reserved, s2.mem_reserved);
    // Transfers round-trip.
    std::vector<uint8_t> in(99000), out(99000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
    b->write(0, in.data(), in.size());
    b->read(0, out.data(), out.size());
    EXPECT_EQ(in, out);
    b->fill(10, 0x5A, 100);
    b->read(0, out.data(), out.size());
    EXPECT_EQ(out[9], in[9]);
    EXPECT_EQ(out[10], 0x5A);
    EXPECT_EQ(out[109], 0x5A);
    EXPECT_EQ(out[110], in[110]);
}

TEST(OpenclBackend, ProgramsComeFromTheDiskCacheTheSecondTime) {
    const std::filesystem::path dir = temp_path("opencl-cache");
    std::filesystem::remove_all(dir);
    ScopedEnv cache("LANTERN_OPENCL_CACHE_DIR", dir.c_str());
    for (int round = 0; round < 2; ++round) {
        std::unique_ptr<Backend> gpu = opencl();
        auto& ocl = static_cast<ocl::OpenClBackend&>(*gpu);
        ASSERT_TRUE(ocl.programs().available(ocl::ProgramId::Elementwise));
        const auto& n = ocl.programs().counters();
        if (round == 0) {
            EXPECT_EQ(n.from_source, 1);
        } else {
            EXPECT_EQ(n.from_disk, 1);
            EXPECT_EQ(n.from_source, 0);
        }
    }
    EXPECT_FALSE(std::filesystem::is_empty(dir));
    std::filesystem::remove_all(dir);
}

TEST(OpenclBackend, ABrokenProgramLeavesItsOpsToTheCpu) {
    ScopedEnv fail("LANTERN_OPENCL_FAIL", "norm");
    std::unique_ptr<Backend> gpu = opencl();
    Graph g;
    Tensor* x = g.new_tensor(DType::F32, {64, 2}, "x");
    Tensor* w = g.new_tensor(DType::F32, {64}, "w");
    Tensor* n = g.rms_norm(x, w, 1e-5f);
    Tensor* s = g.scale(x, 2.0f);
    testing::internal::CaptureStderr();
    EXPECT_FALSE(gpu->supports(*n));
    EXPECT_FALSE(gpu->supports(*n));
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(gpu->supports(*s));
    // Logged once, naming the file.
    EXPECT_NE(log.find("kernels/norm.cl"), std::string::npos) << log;
    EXPECT_EQ(log.find("kernels/norm.cl"), log.rfind("kernels/norm.cl")) << log;
}

}  // namespace
}  // namespace lantern::test

#endif  // LANTERN_HAVE_OPENCL
