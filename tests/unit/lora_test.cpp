// LoRA adapters (model/lora.h): a base model with an adapter gives the logits
// of the same model with the update merged into its weights, on the CPU and
// on each GPU backend; adapters that do not fit the model are named errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "core/half.h"
#include "gguf/gguf.h"
#include "lantern/lantern.h"
#include "test_util.h"

namespace lantern::test {
namespace {

constexpr int64_t kRank = 4;
constexpr float kAlpha = 8.0f;  // s = scale * alpha / rank

// A[n_in, r] and B[r, n_out] for one weight, row-major as GGUF stores them
// (A: r rows of n_in, B: n_out rows of r).
struct Pair {
    std::vector<float> a, b;
    int64_t n_in = 0, n_out = 0;
};

class LoraAdapterTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        base_ = new std::string(temp_path("lora-base.gguf").string());
        const std::string cmd = "python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() +
                                " --type f32 llama '" + *base_ + "' > /dev/null";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        auto f = gguf::File::open(*base_);
        uint32_t seed = 1;
        for (const gguf::TensorInfo& t : f->tensors()) {
            const bool adapted = t.name.find("attn_q") != std::string::npos || t.name.find("attn_v") != std::string::npos ||
                                 t.name.find("attn_output") != std::string::npos || t.name.find("ffn_gate") != std::string::npos ||
                                 t.name.find("ffn_down") != std::string::npos || t.name == "output.weight";
            if (!adapted) continue;
            Pair p;
            p.n_in = t.shape[0];
            p.n_out = t.shape[1];
            p.a = random_floats(static_cast<size_t>(kRank * p.n_in), seed++, -0.3f, 0.3f);
            p.b = random_floats(static_cast<size_t>(p.n_out * kRank), seed++, -0.3f, 0.3f);
            (*pairs_)[t.name] = std::move(p);
        }
    }
    static void TearDownTestSuite() {
        std::remove(base_->c_str());
        delete base_;
        pairs_->clear();
    }

    // Writes an adapter of `pairs` (F32, or A and B in F16) with `edit`
    // applied to its metadata; returns its path.
    static std::string write_adapter(const std::string& name, const std::map<std::string, Pair>& pairs,
                                     const std::vector<std::pair<std::string, std::optional<gguf::Value>>>& edit = {},
                                     DType type = DType::F32) {
        gguf::Writer w;
        std::vector<std::pair<std::string, std::optional<gguf::Value>>> kv = {
            {"general.architecture", gguf::Value(std::string("llama"))},
            {"general.type", gguf::Value(std::string("adapter"))},
            {"adapter.type", gguf::Value(std::string("lora"))},
            {"adapter.lora.alpha", gguf::Value(kAlpha)}};
        for (const auto& e : edit) {
            auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& k) { return k.first == e.first; });
            if (it != kv.end()) it->second = e.second;
            else kv.push_back(e);
        }
        for (const auto& [k, v] : kv) {
            if (v) w.set(k, *v);
        }
        for (const auto& [target, p] : pairs) {
            const int64_t r = static_cast<int64_t>(p.a.size()) / p.n_in;
            add(w, target + ".lora_a", type, {p.n_in, r}, p.a);
            add(w, target + ".lora_b", type, {r, p.n_out}, p.b);
        }
        const std::string path = temp_path(name).string();
        w.write(path);
        return path;
    }

    static void add(gguf::Writer& w, const std::string& name, DType type, std::vector<int64_t> shape,
                    const std::vector<float>& v) {
        if (type == DType::F32) {
            w.add_tensor(name, type, std::move(shape), v.data(), v.size() * sizeof(float));
            return;
        }
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_fp16(v[i]);
        w.add_tensor(name, type, std::move(shape), h.data(), h.size() * sizeof(uint16_t));
    }

    // The base model with W + s B A in place of each adapted W (in double).
    static std::string write_merged(const std::string& name, float s) {
        auto f = gguf::File::open(*base_);
        gguf::Writer w;
        for (const auto& [key, value] : f->metadata()) w.set(key, value);
        std::vector<std::vector<float>> keep;
        for (const gguf::TensorInfo& t : f->tensors()) {
            auto it = pairs_->find(t.name);
            if (it == pairs_->end()) {
                w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
                continue;
            }
            const Pair& p = it->second;
            std::vector<float>& m = keep.emplace_back(static_cast<size_t>(p.n_in * p.n_out));
            std::memcpy(m.data(), t.data, m.size() * sizeof(float));
            for (int64_t o = 0; o < p.n_out; ++o) {
                for (int64_t i = 0; i < p.n_in; ++i) {
                    double d = 0;
                    for (int64_t k = 0; k < kRank; ++k) d += double(p.b[o * kRank + k]) * p.a[k * p.n_in + i];
                    m[static_cast<size_t>(o * p.n_in + i)] += static_cast<float>(s * d);
                }
            }
            w.add_tensor(t.name, t.type, t.shape, m.data(), m.size() * sizeof(float));
        }
        const std::string path = temp_path(name).string();
        w.write(path);
        return path;
    }

    static std::vector<float> logits(const std::string& model, const std::vector<LoraAdapterParams>& adapters,
                                     const std::string& backend = "cpu") {
        ModelParams p;
        p.n_threads = 2;
        p.backend = backend;
        p.n_gpu_layers = backend == "cpu" ? 0 : 99;
        p.lora_adapters = adapters;
        auto m = Model::load(model, p);
        EXPECT_EQ(m->info().description.ends_with(" + LoRA"), !adapters.empty()) << m->info().description;
        Context ctx(*m, ContextParams{.n_ctx = 64});
        const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3, 250, 17};
        Batch b;
        for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int>(i), 0, true);
        ctx.decode(b);
        std::vector<float> out;
        for (int i = 0; i < ctx.n_outputs(); ++i) out.insert(out.end(), ctx.logits(i), ctx.logits(i) + m->n_vocab());
        // One more token alone: a decode step of its own.
        b.clear();
        b.add(11, static_cast<int>(tokens.size()), 0, true);
        ctx.decode(b);
        out.insert(out.end(), ctx.logits(0), ctx.logits(0) + m->n_vocab());
        return out;
    }

    // Largest |x - y| over the largest |y|. The base and merged models differ
    // by more than 0.05 in it; the order of summation alone moves it ~3e-5.
    static double relative_diff(const std::vector<float>& x, const std::vector<float>& y) {
        EXPECT_EQ(x.size(), y.size());
        double d = 0, m = 0;
        for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
            d = std::max(d, std::fabs(double(x[i]) - y[i]));
            m = std::max(m, std::fabs(double(y[i])));
        }
        return d / m;
    }

    static std::string* base_;
    static std::map<std::string, Pair>* pairs_;
};

std::string* LoraAdapterTest::base_ = nullptr;
std::map<std::string, Pair>* LoraAdapterTest::pairs_ = new std::map<std::string, Pair>();

TEST_F(LoraAdapterTest, AppliesLikeTheMergedWeights) {
    const std::string adapter = write_adapter("lora.gguf", *pairs_);
    const std::string merged = write_merged("lora-merged.gguf", 0.5f * kAlpha / kRank);
    const std::vector<float> want = logits(merged, {});
    const std::vector<float> base = logits(*base_, {});
    EXPECT_GT(relative_diff(base, want), 0.05) << "the update changes too little to test";
    EXPECT_LT(relative_diff(logits(*base_, {{adapter, 0.5f}}), want), 2e-4);
    // Two adapters add up; scale 0 is the base model.
    EXPECT_LT(relative_diff(logits(*base_, {{adapter, 0.25f}, {adapter, 0.25f}}), want), 2e-4);
    EXPECT_EQ(logits(*base_, {{adapter, 0.0f}}), base);
    // A and B in F16: the merged weights of the rounded A and B.
    const std::string f16 = write_adapter("lora-f16.gguf", *pairs_, {}, DType::F16);
    EXPECT_LT(relative_diff(logits(*base_, {{f16, 0.5f}}), want), 2e-3);
    std::remove(adapter.c_str());
    std::remove(merged.c_str());
    std::remove(f16.c_str());
}

// Each GPU backend built in and present runs the adapted layers itself and
// agrees with the CPU.
TEST_F(LoraAdapterTest, GpuBackendsAgreeWithTheCpu) {
    const std::string adapter = write_adapter("lora-gpu.gguf", *pairs_);
    const std::vector<float> cpu = logits(*base_, {{adapter, 0.5f}});
    int ran = 0;
    for (const std::string& backend : available_backends()) {
        if (backend == "cpu") continue;
        bool present = false;
        for (const DeviceInfo& d : list_devices()) present |= d.backend == backend;
        if (!present) continue;
        ++ran;
        EXPECT_LT(relative_diff(logits(*base_, {{adapter, 0.5f}}, backend), cpu), 2e-3) << backend;
    }
    std::remove(adapter.c_str());
    if (ran == 0) GTEST_SKIP() << "no GPU device";
}

TEST_F(LoraAdapterTest, AdaptersThatDoNotFitAreNamedErrors) {
    std::map<std::string, Pair> one = {*pairs_->find("blk.0.attn_q.weight")};
    std::map<std::string, Pair> wrong_shape = one;
    wrong_shape.begin()->second.n_out = 32;  // A fits, B is [4, 32] for a [64, 64] weight
    wrong_shape.begin()->second.b.resize(32 * kRank);
    std::map<std::string, Pair> unknown = {{"blk.9.attn_q.weight", one.begin()->second}};
    std::map<std::string, Pair> embeddings = {{"token_embd.weight", pairs_->at("output.weight")}};
    struct Case {
        std::string path;
        ErrorCode code;
        std::string message;
    };
    const Case cases[] = {
        {*base_, ErrorCode::Format, "general.type is not \"adapter\""},
        {write_adapter("lora-arch.gguf", one, {{"general.architecture", gguf::Value(std::string("qwen2"))}}),
         ErrorCode::Format, "it is for architecture 'qwen2', the model is 'llama'"},
        {write_adapter("lora-type.gguf", one, {{"adapter.type", gguf::Value(std::string("control_vector"))}}),
         ErrorCode::Format, "adapter.type \"lora\""},
        {write_adapter("lora-shape.gguf", wrong_shape), ErrorCode::Format,
         "'blk.0.attn_q.weight' is [64, 64] but its lora_a is [64, 4] and lora_b [4, 32]"},
        {write_adapter("lora-unknown.gguf", unknown), ErrorCode::Format,
         "it adapts 'blk.9.attn_q.weight', which the model does not have"},
        {write_adapter("lora-embd.gguf", embeddings), ErrorCode::Unsupported,
         "adapting the token embeddings ('token_embd.weight') is not supported"},
        {write_adapter("lora-empty.gguf", {}), ErrorCode::Format, "it has no tensors"},
    };
    for (const Case& c : cases) {
        try {
            logits(*base_, {{c.path, 1.0f}});
            ADD_FAILURE() << "loaded: " << c.message;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), c.code) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.path), std::string::npos) << e.what();
        }
        if (c.path != *base_) std::remove(c.path.c_str());
    }
    // A lone half of a pair.
    gguf::Writer w;
    w.set("general.type", gguf::Value(std::string("adapter")));
    w.set("adapter.type", gguf::Value(std::string("lora")));
    const Pair& p = one.begin()->second;
    w.add_tensor("blk.0.attn_q.weight.lora_a", DType::F32, {p.n_in, kRank}, p.a.data(), p.a.size() * sizeof(float));
    const std::string half = temp_path("lora-half.gguf").string();
    w.write(half);
    try {
        logits(*base_, {{half, 1.0f}});
        ADD_FAILURE() << "loaded a lone lora_a";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'blk.0.attn_q.weight.lora_a' has no .lora_b"), std::string::npos) << e.what();
    }
    std::remove(half.c_str());
}

}  // namespace
}  // namespace lantern::test
