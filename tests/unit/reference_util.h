// Lantern's logits against the independent Python float64 reference
// (tests/reference/reference_forward.py), for the real-model tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "lantern/lantern.h"
#include "test_util.h"

namespace lantern::test {

inline int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

// The reference's logits [tokens.size() * n_vocab] for `tokens` (every
// position); dequantized weights are cached under the build directory.
inline std::vector<float> reference_logits(const std::string& model, const std::vector<int32_t>& tokens,
                                           int64_t n_vocab) {
    const std::string out = temp_path("reference-logits.bin").string();
    const std::string list = comma_list(tokens);
    const std::string cache = (std::filesystem::path(LANTERN_BINARY_DIR) / "reference-cache").string();
    const std::string cmd = "python3 " + (source_dir() / "tests/reference/reference_forward.py").string() + " '" +
                            model + "' --tokens " + list + " --out '" + out + "' --cache-dir '" + cache +
                            "' > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> ref(static_cast<size_t>(n_vocab) * tokens.size());
    std::ifstream in(out, std::ios::binary);
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(float)));
    EXPECT_TRUE(in.good()) << "the reference's output is short";
    std::remove(out.c_str());
    return ref;
}

// Decodes `tokens` in one batch with logits at every position and checks
// them against `ref`: normalised MSE at most `per_position` everywhere and
// `mean` on average, and the same top token wherever the reference's top two
// logits differ by more than 0.5. Prints the measured errors.
inline void expect_logits_match(Model& m, const std::vector<int32_t>& tokens, const std::vector<float>& ref,
                                double per_position, double mean, const char* label) {
    const int64_t V = m.n_vocab(), T = static_cast<int64_t>(tokens.size());
    Context ctx(m, ContextParams{.n_ctx = static_cast<int>(T) + 8});
    Batch b;
    for (int64_t i = 0; i < T; ++i) b.add(tokens[static_cast<size_t>(i)], static_cast<int>(i), 0, true);
    ctx.decode(b);
    ASSERT_EQ(ctx.n_outputs(), T);
    double total = 0, worst = 0;
    for (int64_t t = 0; t < T; ++t) {
        const float* got = ctx.logits(static_cast<int>(t));
        const float* want = ref.data() + t * V;
        double num = 0, den = 0;
        for (int64_t v = 0; v < V; ++v) {
            num += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
            den += double(want[v]) * want[v];
        }
        const int32_t top = argmax(want, V);
        float second = -INFINITY;
        for (int64_t v = 0; v < V; ++v) {
            if (v != top) second = std::max(second, want[v]);
        }
        EXPECT_LE(num / den, per_position) << label << " position " << t;
        if (want[top] - second > 0.5f) {
            EXPECT_EQ(argmax(got, V), top) << label << " position " << t;
        }
        total += num / den;
        worst = std::max(worst, num / den);
    }
    std::printf("[ nmse     ] %s: mean %.3g, worst position %.3g\n", label, total / static_cast<double>(T), worst);
    EXPECT_LE(total / static_cast<double>(T), mean) << label;
}

}  // namespace lantern::test
