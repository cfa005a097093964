// Each architecture against the independent Python float64 reference, on
// small synthetic models made by tests/reference/make_tiny_model.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "lantern/lantern.h"
#include "test_util.h"

namespace lantern::test {
namespace {

struct ArchCase {
    std::string arch;
    std::string type;
    double tolerance;  // normalised MSE per position
};

std::string run(const std::string& cmd) {
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return cmd;
}

class ArchReference : public ::testing::TestWithParam<ArchCase> {};

// f32 weights: only the f16 KV cache separates Lantern from float64 (NMSE
// ~5e-8 measured); quantized weights add 8-bit activation rounding.
TEST_P(ArchReference, LogitsMatch) {
    const ArchCase& c = GetParam();
    const std::string model = temp_path("tiny-" + c.arch + "-" + c.type + ".gguf").string();
    const std::string logits = temp_path("tiny-" + c.arch + "-" + c.type + ".bin").string();
    const std::string ref_dir = (source_dir() / "tests" / "reference").string();
    run("python3 " + ref_dir + "/make_tiny_model.py " + c.arch + " '" + model + "' --type " + c.type + " > /dev/null");

    std::vector<int32_t> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 5) % 250);
    std::string list;
    for (int32_t t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
    run("python3 " + ref_dir + "/reference_forward.py '" + model + "' --tokens " + list + " --out '" + logits +
        "' > /dev/null");

    ModelParams p;
    p.n_threads = 2;
    auto m = Model::load(model, p);
    const int64_t V = m->n_vocab(), T = static_cast<int64_t>(tokens.size());
    std::vector<float> ref(static_cast<size_t>(V * T));
    std::ifstream in(logits, std::ios::binary);
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * sizeof(float)));
    ASSERT_TRUE(in.good());

    // Two passes (prompt of 12, then one token at a time) so both the batched
    // and the decode paths are compared.
    Context ctx(*m, ContextParams{.n_ctx = 64, .n_batch = 12});
    std::vector<float> got;
    Batch b;
    for (int64_t i = 0; i < 12; ++i) b.add(tokens[static_cast<size_t>(i)], static_cast<int>(i), 0, true);
    ctx.decode(b);
    for (int i = 0; i < 12; ++i) got.insert(got.end(), ctx.logits(i), ctx.logits(i) + V);
    for (int64_t i = 12; i < T; ++i) {
        Batch one;
        one.add(tokens[static_cast<size_t>(i)], static_cast<int>(i), 0, true);
        ctx.decode(one);
        got.insert(got.end(), ctx.logits(0), ctx.logits(0) + V);
    }
    for (int64_t t = 0; t < T; ++t) {
        double num = 0, den = 0;
        for (int64_t v = 0; v < V; ++v) {
            const double d = double(got[static_cast<size_t>(t * V + v)]) - ref[static_cast<size_t>(t * V + v)];
            num += d * d;
            den += double(ref[static_cast<size_t>(t * V + v)]) * ref[static_cast<size_t>(t * V + v)];
        }
        EXPECT_LE(num / den, c.tolerance) << c.arch << " " << c.type << " position " << t;
    }
    std::remove(model.c_str());
    std::remove(logits.c_str());
}

INSTANTIATE_TEST_SUITE_P(Tiny, ArchReference,
                         ::testing::Values(ArchCase{"llama", "f32", 1e-6}, ArchCase{"llama", "q8_0", 1e-3},
                                           ArchCase{"llama", "q4_0", 1e-3}, ArchCase{"llama", "f16", 1e-5}),
                         [](const ::testing::TestParamInfo<ArchCase>& info) {
                             return info.param.arch + "_" + info.param.type;
                         });

}  // namespace
}  // namespace lantern::test
