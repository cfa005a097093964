// The scheduler's offload paths, in CI without a GPU: a fake device backend
// runs the CPU kernels on host memory while presenting itself as a device,
// so layers placed on it get weight replicas, their own KV cache and copies
// between backends, as on a GPU. Same kernels, same order: the logits must
// equal the CPU's exactly.
#include <gtest/gtest.h>

#include "api/model_impl.h"
#include "lantern/lantern.h"
#include "op_harness.h"
#include "test_util.h"

namespace lantern::test {
namespace {

const std::vector<int32_t> kPrompt = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};

// Logits of the prompt (last row) and of 4 greedy decode steps.
// The fake device runs the CPU's kernels on the file's layout: the CPU's
// packed tiles (quant/packed.h) would sum in another order.
// `cache`, when given, gets the context's cache_summary().
std::vector<std::vector<float>> run(int ngl, std::vector<Op> hidden = {}, int* device_nodes = nullptr,
                                    std::string* cache = nullptr) {
    ScopedEnv unpacked("LANTERN_CPU_REPACK", "0");
    ModelParams p;
    p.n_threads = 2;
    auto model = Model::load(default_model_path().string(), p);
    Model::Impl& m = model->impl();
    if (ngl > 0) {
        m.gpu = make_fake_device(*m.cpu, std::move(hidden));
        m.n_gpu_layers = ngl;
        plan_weights(m);
        m.store.upload(nullptr);
        if (device_nodes != nullptr) *device_nodes = static_cast<int>(m.store.bytes_on(m.gpu.get()) > 0);
    }
    Context ctx(*model, ContextParams{.n_ctx = 64});
    if (cache != nullptr) *cache = ctx.cache_summary();
    std::vector<std::vector<float>> out;
    Batch b;
    for (size_t i = 0; i < kPrompt.size(); ++i) b.add(kPrompt[i], static_cast<int>(i), 0, i + 1 == kPrompt.size());
    ctx.decode(b);
    for (int step = 0; step < 5; ++step) {
        const float* l = ctx.logits(0);
        out.emplace_back(l, l + model->n_vocab());
        int32_t best = 0;
        for (int32_t v = 1; v < model->n_vocab(); ++v) {
            if (l[v] > l[best]) best = v;
        }
        Batch next;
        next.add(best, ctx.sequence_length(0), 0, true);
        ctx.decode(next);
    }
    return out;
}

TEST(Offload, EveryLayerCountMatchesTheCpu) {
    const auto cpu = run(0);
    for (int ngl : {1, 15, 30, 31}) {
        int on_device = 0;
        std::string cache;
        const auto off = run(ngl, {}, &on_device, &cache);
        EXPECT_EQ(on_device, 1) << "no weights went to the device with -ngl " << ngl;
        if (ngl >= 30) {
            EXPECT_NE(cache.find(", 0.0 MiB of it in host memory"), std::string::npos) << cache;
        }
        ASSERT_EQ(off.size(), cpu.size());
        for (size_t i = 0; i < cpu.size(); ++i) EXPECT_EQ(off[i], cpu[i]) << "-ngl " << ngl << " step " << i;
    }
}

// Ops the device lacks run on the CPU; fused ops it lacks use their
// unfused defaults on the device. A device that cannot attend keeps no
// cache: each layer's cache lives where its attention runs (here the
// host), so no step copies a whole cache across.
TEST(Offload, MissingOpsFallBack) {
    const auto cpu = run(0);
    std::string cache;
    const auto fallback = run(31, {Op::Attention, Op::SiluMul}, nullptr, &cache);
    const std::string total = cache.substr(0, cache.find(':'));
    EXPECT_NE(cache.find(", " + total + " of it in host memory"), std::string::npos) << cache;

    const auto unfused = run(31, {Op::AddRmsNorm, Op::RopeQK});
    for (size_t i = 0; i < cpu.size(); ++i) {
        EXPECT_EQ(fallback[i], cpu[i]) << "step " << i;
        // The unfused default computes the same sums in the same order.
        EXPECT_LE(nmse(unfused[i], cpu[i]), 1e-10) << "step " << i;
    }
}

}  // namespace
}  // namespace lantern::test
