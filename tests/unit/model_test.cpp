// The default model end to end on the CPU: greedy continuation of a chat
// prompt, and logits against the independent Python float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "lantern/lantern.h"
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

TEST(DefaultModel, LogitsMatchPythonReference) {
    const std::string model = default_model_path().string();
    const std::string out = temp_path("ref_logits.bin").string();
    std::string tokens;
    for (int32_t t : kChatPrompt) tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
    const std::string cache = (std::filesystem::path(LANTERN_BINARY_DIR) / "reference-cache").string();
    const std::string cmd = "python3 " + (source_dir() / "tests/reference/reference_forward.py").string() + " '" +
                            model + "' --tokens " + tokens + " --out '" + out + "' --cache-dir '" + cache +
                            "' > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

    auto m = load_default();
    const int64_t V = m->n_vocab(), T = static_cast<int64_t>(kChatPrompt.size());
    std::vector<float> ref(static_cast<size_t>(V * T));
    std::ifstream in(out, std::ios::binary);
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(float)));
    ASSERT_TRUE(in.good()) << "reference output is short";
    std::remove(out.c_str());

    Context ctx(*m, ContextParams{.n_ctx = 64});
    Batch b;
    for (int64_t i = 0; i < T; ++i) b.add(kChatPrompt[static_cast<size_t>(i)], static_cast<int>(i), 0, true);
    ctx.decode(b);
    ASSERT_EQ(ctx.n_outputs(), T);
    // Tolerance: the weights are identical (both decode the file), but Lantern
    // quantizes activations to 8 bits for the Q4_1/Q8_0 dot products (as
    // llama.cpp does) and keeps the KV cache in f16; over 30 layers that
    // measures 1e-3..1.2e-2 normalised MSE per position (2e-4 on a 2-layer
    // model; 5e-8 with f32 weights, see ArchReference). We allow 3e-2 per
    // position and 1e-2 on average, and the top token must agree wherever the
    // reference's top two logits differ by more than 0.5.
    double total = 0;
    for (int64_t t = 0; t < T; ++t) {
        const float* got = ctx.logits(static_cast<int>(t));
        const float* want = ref.data() + t * V;
        double num = 0, den = 0;
        int64_t arg_got = 0, arg_want = 0;
        for (int64_t v = 0; v < V; ++v) {
            num += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
            den += double(want[v]) * want[v];
            if (got[v] > got[arg_got]) arg_got = v;
            if (want[v] > want[arg_want]) arg_want = v;
        }
        float second = -INFINITY;
        for (int64_t v = 0; v < V; ++v) {
            if (v != arg_want) second = std::max(second, want[v]);
        }
        EXPECT_LE(num / den, 3e-2) << "position " << t;
        total += num / den;
        if (want[arg_want] - second > 0.5f) EXPECT_EQ(arg_got, arg_want) << "position " << t;
    }
    EXPECT_LE(total / static_cast<double>(T), 1e-2);
}

}  // namespace
}  // namespace lantern::test
