// The default model end to end on the CPU: greedy continuation of a chat
// prompt, and logits against the independent Python float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "lantern/lantern.h"
#include "reference_util.h"
#include "test_util.h"

namespace lantern::test {
namespace {

// "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
const std::vector<int32_t> kChatPrompt = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};

std::unique_ptr<Model> load_default(const std::string& backend = "cpu", int ngl = 0) {
    ModelParams p;
    p.backend = backend;
    p.n_gpu_layers = ngl;
    p.n_threads = 2;
    return Model::load(default_model_path().string(), p);
}

std::vector<int32_t> greedy(Model& m, Context& ctx, const std::vector<int32_t>& prompt, int n) {
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size());
    ctx.decode(b);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const float* l = ctx.logits(0);
        int32_t best = 0;
        for (int32_t v = 1; v < m.n_vocab(); ++v) {
            if (l[v] > l[best]) best = v;
        }
        out.push_back(best);
        if (m.is_end_of_generation(best)) break;
        Batch next;
        next.add(best, ctx.sequence_length(0), 0, true);
        ctx.decode(next);
    }
    return out;
}

TEST(DefaultModel, AnswersChatPromptGreedily) {
    auto m = load_default();
    Context ctx(*m, ContextParams{.n_ctx = 256});
    const std::vector<int32_t> out = greedy(*m, ctx, kChatPrompt, 12);
    // "The capital of France is Paris.<|im_end|>"
    const std::vector<int32_t> want = {504, 3575, 282, 4649, 314, 7042, 30, 2};
    EXPECT_EQ(out, want) << m->detokenize(out);
}

// Tolerance: the weights are identical (both decode the file), but Lantern
// quantizes activations to 8 bits for the Q4_1/Q8_0 dot products (as
// llama.cpp does) and keeps the KV cache in f16; over 30 layers that measures
// 1e-3..1.2e-2 normalised MSE per position (2e-4 on a 2-layer model; 5e-8 with
// f32 weights, see ArchReference). We allow 3e-2 per position and 1e-2 on
// average, and the top token must agree wherever the reference's top two
// logits differ by more than 0.5.
TEST(DefaultModel, LogitsMatchPythonReference) {
    auto m = load_default();
    const std::vector<float> ref = reference_logits(default_model_path().string(), kChatPrompt, m->n_vocab());
    expect_logits_match(*m, kChatPrompt, ref, 3e-2, 1e-2, "SmolLM2-135M Q4_1");
}

}  // namespace
}  // namespace lantern::test
