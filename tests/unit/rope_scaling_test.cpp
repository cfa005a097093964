// Rope overrides and YaRN (model/rope_scaling.h). The YaRN files' logits are
// checked against the float64 reference in arch_test.cpp (ArchReference
// *_yarn); here: the overrides give what the same keys in the file give, the
// multipliers' shape, the context the scaling allows, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "lantern/lantern.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"
#include "test_util.h"

namespace lantern::test {
namespace {

class RopeScalingTest : public ::testing::Test {
protected:
    // Tiny models of one seed, so that the files differ in their rope keys
    // only: "<arch>" without scaling, "<arch>-yarn" with YaRN 4 over 256.
    static void SetUpTestSuite() {
        files_ = new std::map<std::string, std::string>;
        for (const auto& [name, args] : std::map<std::string, std::string>{
                 {"qwen2", "qwen2"},
                 {"qwen2-yarn", "qwen2 --yarn 4"},
                 {"llama", "llama"},
                 {"llama-yarn-betas", "llama --yarn 4 --yarn-betas 16 2"},
                 {"gemma3", "gemma3 --plain"}}) {
            const std::string path = temp_path("rope-" + name + ".gguf").string();
            const std::string arch = args.substr(0, args.find(' '));
            const std::string extra = args.size() > arch.size() ? args.substr(arch.size()) : "";
            const std::string cmd = "python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " " +
                                    arch + " '" + path + "'" + extra + " > /dev/null";
            ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
            (*files_)[name] = path;
        }
    }
    static void TearDownTestSuite() {
        for (const auto& [name, path] : *files_) std::remove(path.c_str());
        delete files_;
    }

    static std::vector<float> logits(const std::string& name, const RopeOverrides& rope = {}) {
        ModelParams p;
        p.n_threads = 2;
        p.rope = rope;
        auto m = Model::load(files_->at(name), p);
        Context ctx(*m, ContextParams{.n_ctx = 64});
        Batch b;
        for (int i = 0; i < 20; ++i) b.add((i * 37 + 5) % 250, i, 0, true);
        ctx.decode(b);
        std::vector<float> out;
        for (int i = 0; i < 20; ++i) out.insert(out.end(), ctx.logits(i), ctx.logits(i) + m->n_vocab());
        return out;
    }

    static std::map<std::string, std::string>* files_;
};
std::map<std::string, std::string>* RopeScalingTest::files_ = nullptr;

TEST_F(RopeScalingTest, OverridesGiveWhatTheFileKeysGive) {
    RopeOverrides yarn;
    yarn.scaling = "yarn";
    yarn.freq_scale = 0.25f;
    yarn.yarn_orig_ctx = 256;
    const std::vector<float> plain = logits("qwen2");
    const std::vector<float> keyed = logits("qwen2-yarn");
    EXPECT_EQ(logits("qwen2", yarn), keyed);
    EXPECT_NE(plain, keyed);

    // The correction range from the file's betas, or given.
    RopeOverrides betas = yarn;
    betas.yarn_beta_fast = 16.0f;
    betas.yarn_beta_slow = 2.0f;
    EXPECT_EQ(logits("llama", betas), logits("llama-yarn-betas"));
    EXPECT_NE(logits("llama", yarn), logits("llama-yarn-betas"));

    // Scaling off: the file's YaRN is not applied.
    RopeOverrides none;
    none.scaling = "none";
    EXPECT_EQ(logits("qwen2-yarn", none), plain);
}

TEST_F(RopeScalingTest, YarnWithoutExtrapolationIsLinearScaling) {
    RopeOverrides linear;
    linear.scaling = "linear";
    linear.freq_scale = 0.25f;
    RopeOverrides yarn = linear;
    yarn.scaling = "yarn";
    yarn.yarn_orig_ctx = 256;
    yarn.yarn_ext_factor = 0.0f;
    const std::vector<float> a = logits("qwen2", linear), b = logits("qwen2", yarn);
    ASSERT_EQ(a.size(), b.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(a[i]) * a[i];
    }
    // Same angles, as factors or as the op's scale: float rounding only.
    EXPECT_LT(num / den, 1e-10);
}

TEST(RopeScalingMath, MultipliersRampFromTrainedToInterpolated) {
    HParams hp;
    hp.n_rot = 128;
    hp.rope_base = 10000.0f;
    hp.n_ctx_orig = 4096;
    hp.rope_scaling = RopeScaling::Yarn;
    hp.rope_freq_scale = 0.25f;
    const std::vector<float> m = yarn_frequency_multipliers(hp);
    ASSERT_EQ(m.size(), 64u);
    // Pairs that turn more than 32 times over 4,096 positions keep their
    // frequency; those under one turn are interpolated by the scale; the
    // ramp between falls monotonically. For this shape the range is pairs
    // 20..46 (128 ln(4096 / (2 pi r)) / (2 ln 10000), r = 32 and 1).
    EXPECT_FLOAT_EQ(m[0], 1.0f);
    EXPECT_FLOAT_EQ(m[20], 1.0f);
    EXPECT_LT(m[21], 1.0f);
    EXPECT_GT(m[45], 0.25f);
    EXPECT_FLOAT_EQ(m[46], 0.25f);
    EXPECT_FLOAT_EQ(m[63], 0.25f);
    for (size_t i = 1; i < m.size(); ++i) EXPECT_LE(m[i], m[i - 1]) << i;
    EXPECT_NEAR(yarn_magnitude(hp), 1.0 + 0.1 * std::log(4.0), 1e-6);
    hp.yarn_attn_factor = 0.5f;
    EXPECT_NEAR(yarn_magnitude(hp), 0.5 * (1.0 + 0.1 * std::log(4.0)), 1e-6);
    hp.yarn_ext_factor = 0.0f;
    for (float v : yarn_frequency_multipliers(hp)) EXPECT_FLOAT_EQ(v, 0.25f);
    EXPECT_FLOAT_EQ(yarn_magnitude(hp), 0.5f);
}

TEST_F(RopeScalingTest, ScaledContextIsTheOriginalTimesTheFactor) {
    ModelParams p;
    p.n_threads = 1;
    auto plain = Model::load(files_->at("qwen2"), p);
    EXPECT_EQ(plain->info().n_ctx_max, plain->info().n_ctx_train);
    auto yarn = Model::load(files_->at("qwen2-yarn"), p);
    EXPECT_EQ(yarn->info().n_ctx_max, std::max(yarn->info().n_ctx_train, 256 * 4));
    p.rope.scaling = "linear";
    p.rope.freq_scale = 0.125f;
    p.rope.yarn_orig_ctx = 1000;
    EXPECT_EQ(Model::load(files_->at("qwen2"), p)->info().n_ctx_max, 8000);
}

TEST_F(RopeScalingTest, BadOverridesAreNamedErrors) {
    struct Case {
        RopeOverrides rope;
        std::string file;
        ErrorCode code;
        std::string message;
    };
    std::vector<Case> cases;
    auto add = [&](auto edit, std::string file, ErrorCode code, std::string message) {
        RopeOverrides r;
        edit(r);
        cases.push_back({r, std::move(file), code, std::move(message)});
    };
    add([](RopeOverrides& r) { r.scaling = "cubic"; }, "qwen2", ErrorCode::InvalidArgument,
        "scaling 'cubic' is not one of none, linear, yarn");
    add([](RopeOverrides& r) { r.freq_scale = -1.0f; }, "qwen2", ErrorCode::InvalidArgument, "freq_scale");
    add([](RopeOverrides& r) { r.freq_base = NAN; }, "qwen2", ErrorCode::InvalidArgument, "freq_base");
    add([](RopeOverrides& r) { r.yarn_orig_ctx = -5; }, "qwen2", ErrorCode::InvalidArgument, "yarn_orig_ctx");
    add([](RopeOverrides& r) { r.yarn_beta_fast = 0.0f; }, "qwen2-yarn", ErrorCode::InvalidArgument,
        "yarn_beta_fast must be positive");
    add([](RopeOverrides& r) { r.yarn_ext_factor = INFINITY; }, "qwen2-yarn", ErrorCode::InvalidArgument,
        "yarn_ext_factor must be a number");
    add([](RopeOverrides& r) { r.scaling = "yarn", r.freq_scale = 0.5f; }, "gemma3", ErrorCode::Unsupported,
        "YaRN rope scaling is not supported for gemma3");
    for (const Case& c : cases) {
        ModelParams p;
        p.n_threads = 1;
        p.rope = c.rope;
        try {
            Model::load(files_->at(c.file), p);
            ADD_FAILURE() << "loaded: " << c.message;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), c.code) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace lantern::test
