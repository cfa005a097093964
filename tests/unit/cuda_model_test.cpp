// A whole model on CUDA: greedy output equal to the CPU's, graphs on and off
// giving identical logits, layer splits (-ngl) agreeing, and one graph
// capture serving 1,000 decode steps.
//
// The model is the default model when present (scripts/setup.sh), else a
// synthetic model of its shape and type (smollm2-135m, Q4_1; the vocabulary
// from LANTERN_TESTDATA/vocab), written once per run. Skipped without a CUDA
// device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "api/model_impl.h"
#if defined(LANTERN_HAVE_CUDA)
#include "backends/cuda/cuda_backend.h"
#endif
#include "cuda_test_util.h"
#include "lantern/lantern.h"
#include "model/synth.h"
#include "op_harness.h"
#include "reference_util.h"
#include "gpu_compare.h"
#include "test_util.h"

namespace lantern::test {
namespace {

struct TempModel {
    std::string path;
    bool owned = false;
    ~TempModel() {
        if (owned) std::filesystem::remove(path);
    }
};

const std::string& model_path() {
    static TempModel m = [] {
        TempModel t;
        if (std::filesystem::exists(default_model_path())) {
            t.path = default_model_path().string();
            return t;
        }
        t.path = temp_path("cuda-smollm2-135m-q4_1.gguf").string();
        SynthOptions o;
        o.shape = synth_shape("smollm2-135m");
        o.type = DType::Q4_1;
        o.vocab_path = (testdata_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string();
        o.output_path = t.path;
        o.seed = 7;
        write_synthetic_model(o);
        t.owned = true;
        return t;
    }();
    return m.path;
}

std::unique_ptr<Model> load(const std::string& backend, int ngl) {
    ModelParams p;
    p.backend = backend;
    p.n_gpu_layers = ngl;
    return Model::load(model_path(), p);
}

std::vector<int32_t> prompt_of(const Model& m) { return m.tokenize("The capital of France is", true, false); }

int32_t argmax(const float* l, int n) {
    int32_t best = 0;
    for (int32_t v = 1; v < n; ++v) {
        if (l[v] > l[best]) best = v;
    }
    return best;
}

// Decodes the prompt, then `steps` tokens one at a time: greedy when `forced`
// is empty, else the forced tokens. Returns every step's logits.
std::vector<std::vector<float>> run(Model& m, Context& ctx, const std::vector<int32_t>& prompt, int steps,
                                    const std::vector<int32_t>& forced = {}) {
    const int V = m.n_vocab();
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size());
    ctx.decode(b);
    std::vector<std::vector<float>> out;
    for (int i = 0; i <= steps; ++i) {
        out.emplace_back(ctx.logits(0), ctx.logits(0) + V);
        if (i == steps) break;
        const int32_t next = forced.empty() ? argmax(ctx.logits(0), V) : forced[static_cast<size_t>(i)];
        Batch one;
        one.add(next, ctx.sequence_length(0), 0, true);
        ctx.decode(one);
    }
    return out;
}


BackendStats gpu_stats(Model& m) { return m.impl().gpu->stats(); }



#define REQUIRE_CUDA() \
    if (cuda_backend() == nullptr) GTEST_SKIP() << "no CUDA device"

bool using_default_model() { return std::filesystem::exists(default_model_path()); }

// The 64 greedy tokens against the CPU's (expect_greedy_agrees): equal up to
// the CPU's first near tie, and, fed the CPU's tokens, equal at every other
// position. On the default model the H100s gave all 64 equal; an H200 took
// the other token at step 5, where the CPU's two best logits are 0.0025
// apart (prompts are multiplied in F16 here, with 8-bit activations on the
// CPU), which is why ties are set aside as on OpenCL.
// The synthetic stand-in has random weights, whose logits have near-ties
// (top-2 gaps of 1e-3 where the two backends' logits differ by ~1e-2,
// normalised MSE ~3e-4 after 30 layers): there the tie bound is 0.05 and the
// logits stay within 1e-3 normalised MSE.
TEST(CudaModel, GreedyMatchesCpuFor64Tokens) {
    REQUIRE_CUDA();
    auto cpu = load("cpu", 0);
    auto gpu = load("cuda", 999);
    const auto prompt = prompt_of(*cpu);
    const ContextParams cp{.n_ctx = 256};
    const Generation want = greedy(*cpu, 64, prompt, nullptr, cp);
    const bool real = using_default_model();
    const GreedyBounds bounds = real ? GreedyBounds{} : GreedyBounds{.tie = 0.05f, .step_nmse = 1e-3, .mean_nmse = 1e-3};
    const int compared = expect_greedy_agrees(*gpu, want, prompt, 64, "cuda", bounds, cp);
    EXPECT_GE(compared, real ? 48 : 16);
    EXPECT_EQ(gpu->info().backend, "cuda");
}

// The default model's decode path (one token per step, teacher-forced
// along the CPU's greedy continuation) against the float64 reference at
// every position, held to the CPU's own bounds (model_test.cpp: 3e-2 per
// position, 1e-2 on average); both backends' errors are printed.
TEST(CudaModel, DecodeLogitsMatchTheFloat64Reference) {
    REQUIRE_CUDA();
    if (!using_default_model()) GTEST_SKIP() << "needs the default model";
    auto cpu = load("cpu", 0);
    auto gpu = load("cuda", 999);
    const auto prompt = prompt_of(*cpu);
    const int V = cpu->n_vocab();
    constexpr int kSteps = 32;
    Context ccpu(*cpu, ContextParams{.n_ctx = 256});
    const auto want = run(*cpu, ccpu, prompt, kSteps);
    std::vector<int32_t> tokens = prompt, forced;
    for (int i = 0; i < kSteps; ++i) forced.push_back(argmax(want[static_cast<size_t>(i)].data(), V));
    tokens.insert(tokens.end(), forced.begin(), forced.end());
    Context cgpu(*gpu, ContextParams{.n_ctx = 256});
    const auto got = run(*gpu, cgpu, prompt, kSteps, forced);
    const std::vector<float> ref = reference_logits(default_model_path().string(), tokens, V);
    ASSERT_EQ(ref.size(), tokens.size() * static_cast<size_t>(V));
    double sum_gpu = 0, sum_cpu = 0, worst_gpu = 0, worst_cpu = 0;
    for (int i = 0; i <= kSteps; ++i) {
        const size_t at = (prompt.size() - 1 + static_cast<size_t>(i)) * static_cast<size_t>(V);
        const std::vector<float> r(ref.begin() + static_cast<std::ptrdiff_t>(at),
                                   ref.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(V)));
        const double eg = nmse(got[static_cast<size_t>(i)], r), ec = nmse(want[static_cast<size_t>(i)], r);
        EXPECT_LE(eg, 3e-2) << "step " << i << " (the CPU: " << ec << ")";
        sum_gpu += eg;
        sum_cpu += ec;
        worst_gpu = std::max(worst_gpu, eg);
        worst_cpu = std::max(worst_cpu, ec);
    }
    const double n = kSteps + 1;
    std::printf("[ cuda ] decode vs float64 reference: mean %.3g, worst %.3g (the CPU: mean %.3g, worst %.3g)\n",
                sum_gpu / n, worst_gpu, sum_cpu / n, worst_cpu);
    EXPECT_LE(sum_gpu / n, 1e-2);
}

TEST(CudaModel, GraphsOnAndOffGiveIdenticalLogits) {
    REQUIRE_CUDA();
    std::vector<std::vector<float>> eager, graphed;
    BackendStats off_stats, on_stats;
    std::vector<int32_t> forced;
    for (int i = 0; i < 24; ++i) forced.push_back(100 + 37 * i);
    {
        ScopedEnv env("LANTERN_GRAPHS", "0");
        auto m = load("cuda", 999);
        Context ctx(*m, ContextParams{.n_ctx = 512});
        eager = run(*m, ctx, prompt_of(*m), 24, forced);
        off_stats = gpu_stats(*m);
    }
    {
        ScopedEnv env("LANTERN_GRAPHS", "1");
        auto m = load("cuda", 999);
        Context ctx(*m, ContextParams{.n_ctx = 512});
        graphed = run(*m, ctx, prompt_of(*m), 24, forced);
        on_stats = gpu_stats(*m);
    }
    ASSERT_EQ(eager.size(), graphed.size());
    for (size_t i = 0; i < eager.size(); ++i) {
        EXPECT_EQ(std::memcmp(eager[i].data(), graphed[i].data(), eager[i].size() * sizeof(float)), 0)
            << "step " << i << " (nmse " << nmse(graphed[i], eager[i]) << ")";
    }
    EXPECT_EQ(off_stats.graph_captures, 0u);
    EXPECT_EQ(off_stats.eager_steps, 25u);
    EXPECT_EQ(on_stats.graph_captures, 1u);
    EXPECT_EQ(on_stats.graph_replays, 23u);
    EXPECT_EQ(on_stats.eager_steps, 1u);  // the prompt
}

TEST(CudaModel, LayerSplitsAgree) {
    REQUIRE_CUDA();
    auto cpu_only = load("cuda", 0);
    const int n_layer = cpu_only->info().n_layer;
    // Fed tokens: the all-CPU greedy continuation on the default model (a
    // real text, where the model is confident); arbitrary ids on the
    // synthetic one (random weights: no text to follow).
    std::vector<int32_t> forced;
    if (using_default_model()) {
        Context cg(*cpu_only, ContextParams{.n_ctx = 128});
        const auto g = run(*cpu_only, cg, prompt_of(*cpu_only), 8);
        for (int i = 0; i < 8; ++i) forced.push_back(argmax(g[static_cast<size_t>(i)].data(), cpu_only->n_vocab()));
    } else {
        for (int i = 0; i < 8; ++i) forced.push_back(200 + 91 * i);
    }
    Context c0(*cpu_only, ContextParams{.n_ctx = 128});
    const auto ref = run(*cpu_only, c0, prompt_of(*cpu_only), 8, forced);
    EXPECT_EQ(cpu_only->info().n_gpu_layers, 0);
    for (int ngl : {n_layer / 2, n_layer + 1}) {
        SCOPED_TRACE("ngl " + std::to_string(ngl));
        auto m = load("cuda", ngl);
        EXPECT_EQ(m->info().n_gpu_layers, std::min(ngl, n_layer));
        Context ctx(*m, ContextParams{.n_ctx = 128});
        const auto got = run(*m, ctx, prompt_of(*m), 8, forced);
        for (size_t i = 0; i < ref.size(); ++i) {
            // On the default model each split is within the reference
            // test's 3e-2 of the float64 logits (measured: CUDA 0.018, CPU
            // 0.014 at worst), not always on the same side: they differ by
            // up to 0.04 (step 6 here). Two results each within 3e-2 of the
            // truth can differ by up to 0.12; 6e-2 is the bound used. The top
            // token is compared where the all-CPU run's top two differ by
            // more than 0.25 (as the OpenCL model test does).
            const float margin = top2_margin(ref[i]);
            EXPECT_LE(nmse(got[i], ref[i]), using_default_model() ? 6e-2 : 1e-3) << "step " << i;
            if (using_default_model() && margin <= 0.25f) continue;
            EXPECT_EQ(argmax(got[i].data(), m->n_vocab()), argmax(ref[i].data(), m->n_vocab()))
                << "step " << i << " (top-2 margin " << margin << ", nmse " << nmse(got[i], ref[i]) << ")";
        }
        const BackendStats s = gpu_stats(*m);
        EXPECT_EQ(s.graph_captures, 1u) << "one decode shape";
    }
}

// A sequence's state saved from a CUDA context (every layer on the device,
// decode steps recorded) and loaded into another CUDA context and into a
// CPU one: each continues, fed the same tokens, as the saved one does.
TEST(CudaModel, SequenceStateLoadsOnTheDeviceAndTheCpu) {
    REQUIRE_CUDA();
    auto dev = load("cuda", 99);
    auto cpu = load("cpu", 0);
    const std::vector<int32_t> prompt = prompt_of(*dev);
    const int n = static_cast<int>(prompt.size());
    const std::vector<int32_t> forced = {prompt.back(), 200, 291, 382, 473};
    // From the state: the last prompt token again (at n - 1), then the rest.
    auto continue_from = [&](Model& m, Context& ctx) {
        std::vector<std::vector<float>> out;
        for (size_t i = 0; i < forced.size(); ++i) {
            Batch one;
            one.add(forced[i], n - 1 + static_cast<int>(i), 0, true);
            ctx.decode(one);
            out.emplace_back(ctx.logits(0), ctx.logits(0) + m.n_vocab());
        }
        return out;
    };
    Context a(*dev, ContextParams{.n_ctx = 64});
    run(*dev, a, prompt, 3);  // steps recorded before the save
    a.clear_sequence(0);
    Batch b;
    for (int i = 0; i < n; ++i) b.add(prompt[static_cast<size_t>(i)], i, 0, i + 1 == n);
    a.decode(b);
    const std::vector<uint8_t> state = a.save_sequence(0, prompt);
    const auto want = continue_from(*dev, a);
    Context d(*dev, ContextParams{.n_ctx = 64});
    run(*dev, d, {1, 2, 3}, 2);  // d holds another text, and recorded steps, before the load
    EXPECT_EQ(d.load_sequence(0, state), prompt);
    const auto got = continue_from(*dev, d);
    Context c(*cpu, ContextParams{.n_ctx = 64});
    c.load_sequence(0, state);
    const auto on_cpu = continue_from(*cpu, c);
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(nmse(got[i], want[i]), 1e-6) << "cuda -> cuda, step " << i;
        EXPECT_LE(nmse(on_cpu[i], want[i]), using_default_model() ? 6e-2 : 1e-3) << "cuda -> cpu, step " << i;
    }
}

TEST(CudaModel, ThousandDecodeStepsCaptureOnce) {
    REQUIRE_CUDA();
    auto m = load("cuda", 999);
    Context ctx(*m, ContextParams{.n_ctx = 1100});
    std::vector<int32_t> forced;
    for (int i = 0; i < 1000; ++i) forced.push_back((7 + 131 * i) % m->n_vocab());
    const auto logits = run(*m, ctx, prompt_of(*m), 1000, forced);
    const BackendStats s = gpu_stats(*m);
    EXPECT_EQ(s.graph_captures, 1u);
    EXPECT_EQ(s.graph_misses, 1u);
    EXPECT_EQ(s.graph_replays, 999u);
    EXPECT_EQ(s.graph_evictions, 0u);
    EXPECT_EQ(s.eager_steps, 1u);
    for (float v : logits.back()) ASSERT_TRUE(std::isfinite(v));
    EXPECT_GT(s.mem_peak, 0u);
    EXPECT_GE(s.mem_reserved, s.mem_in_use);
    const PerfStats p = ctx.perf();
    ASSERT_EQ(p.backend_stats.size(), 2u);
    std::printf("[ cuda ] %s\n", p.backend_stats[1].second.c_str());
#if defined(LANTERN_HAVE_CUDA)
    // Kernels per decode step: 5 per layer when every fusion applies, plus
    // the input stages.
    const auto* cb = dynamic_cast<const cuda::CudaBackend*>(m->impl().gpu.get());
    ASSERT_NE(cb, nullptr);
    const int n_layer = m->info().n_layer;
    std::printf("[ cuda ] %zu kernel launches per decode step (%d layers)\n", cb->last_launch_count(), n_layer);
    // A layer: add+norm+QKV (the first layer: norm+QKV), RoPE+cache writes+
    // attention, wo, add+norm+gate/up/SiLU, down; before them the inputs and
    // the token rows, after them add+norm+output.
    EXPECT_LE(cb->last_launch_count(), static_cast<size_t>(5 * n_layer + 2));
    // Every add + RMSNorm's residual was written two launches or more before
    // it (gate/up: by Q/K/V's launch, or the token rows; Q/K/V and the
    // output: by the gate/up launch), behind a launch that waits first: all
    // 2 n_layer of them read it before their grid wait.
    EXPECT_EQ(cb->last_settled_count(), static_cast<size_t>(2 * n_layer));
#endif
}

// A short run for compute-sanitizer (scripts/device-cuda.sh): prompt, a few
// decode steps, a second sequence.
TEST(CudaModel, ShortDecode) {
    REQUIRE_CUDA();
    auto m = load("cuda", 999);
    Context ctx(*m, ContextParams{.n_ctx = 300, .n_seq = 2});
    const auto out = run(*m, ctx, prompt_of(*m), 6);
    for (float v : out.back()) ASSERT_TRUE(std::isfinite(v));
    Batch b;
    for (int i = 0; i < 12; ++i) b.add(100 + i, i, 1, i == 11);
    ctx.decode(b);
    for (int v = 0; v < m->n_vocab(); ++v) ASSERT_TRUE(std::isfinite(ctx.logits(0)[v]));
}

// A q8_0 KV cache lives on the device (its own write and attention
// kernels); a type the device does not hold (bf16) keeps the cache in host
// memory and attention on the CPU. Both agree with the CPU.
TEST(CudaModel, CacheTypesHeldAndUnheld) {
    REQUIRE_CUDA();
    expect_cache_type_agrees("cuda", "q8_0", true);
    expect_cache_type_agrees("cuda", "bf16", false);
#if defined(LANTERN_HAVE_CUDA)
    // Q8_0 caches take the fused launches f16 ones do (RoPE, both cache
    // writes and attention in one): a decode step is as many kernels.
    auto m = load("cuda", 999);
    const auto* cb = dynamic_cast<const cuda::CudaBackend*>(m->impl().gpu.get());
    ASSERT_NE(cb, nullptr);
    std::vector<size_t> launches;
    for (const char* type : {"f16", "q8_0"}) {
        ContextParams cp{.n_ctx = 64};
        cp.cache_type_k = cp.cache_type_v = type;
        greedy(*m, 3, prompt_of(*m), nullptr, cp);
        launches.push_back(cb->last_launch_count());
    }
    EXPECT_EQ(launches[1], launches[0]) << "kernels per decode step: f16 " << launches[0] << ", q8_0 " << launches[1];
#endif
}

}  // namespace
}  // namespace lantern::test
