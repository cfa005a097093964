// Synthetic models: the file has the llama layout, the vocabulary, and sane
// random weights; the output does not depend on the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "lantern/lantern.h"
#include "model/synth.h"
#include "quant/quant.h"
#include "test_util.h"

namespace lantern {
namespace {

namespace fs = std::filesystem;

struct TempFile {
    fs::path path;
    explicit TempFile(const std::string& name) : path(test::temp_path(name)) {}
    ~TempFile() { fs::remove(path); }
};

std::string vocab_path() {
    return (test::testdata_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string();
}

SynthShape tiny_shape() {
    SynthShape s;
    s.name = "tiny";
    s.n_embd = 256;  // a multiple of 256, so the K-quants need no fallback
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 512;
    s.n_ctx = 128;
    s.rope_base = 50000.0f;
    s.rms_eps = 1e-6f;
    return s;
}

SynthOptions tiny_options(DType type, const fs::path& out) {
    SynthOptions o;
    o.shape = tiny_shape();
    o.type = type;
    o.vocab_path = vocab_path();
    o.output_path = out.string();
    o.seed = 7;
    o.n_threads = 2;
    return o;
}

std::vector<float> tensor_values(const gguf::TensorInfo& t) {
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    const int64_t cols = t.shape[0];
    const size_t row_bytes = dtype_row_size(t.type, cols);
    for (int64_t r = 0; r < t.n_elements() / cols; ++r) {
        quant::dequantize_row(t.type, t.data + r * row_bytes, v.data() + r * cols, cols);
    }
    return v;
}

std::vector<uint8_t> file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SynthTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(SynthTypeTest, TinyModelHasLlamaLayoutVocabAndSaneWeights) {
    const DType type = GetParam();
    TempFile out(std::string("synth-") + dtype_name(type) + ".gguf");
    write_synthetic_model(tiny_options(type, out.path));

    const auto f = gguf::File::open(out.path.string());
    const auto vocab = gguf::File::open(vocab_path());
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_int("llama.embedding_length"), 256);
    EXPECT_EQ(f->get_int("llama.block_count"), 2);
    EXPECT_EQ(f->get_int("llama.attention.head_count"), 4);
    EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 2);
    EXPECT_EQ(f->get_int("llama.feed_forward_length"), 512);
    EXPECT_EQ(f->get_int("llama.context_length"), 128);
    EXPECT_EQ(f->get_int("llama.rope.dimension_count"), 64);
    EXPECT_EQ(f->get_int("llama.vocab_size"), 32000);
    EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.rope.freq_base")), 50000.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
    // llama_ftype numbering (K-quants as the "_M" mixes).
    const std::map<DType, int64_t> ftype = {
        {DType::F32, 0},   {DType::F16, 1},   {DType::Q4_0, 2},  {DType::Q4_1, 3},  {DType::Q8_0, 7},
        {DType::Q5_0, 8},  {DType::Q5_1, 9},  {DType::Q2_K, 10}, {DType::Q3_K, 12}, {DType::Q4_K, 15},
        {DType::Q5_K, 17}, {DType::Q6_K, 18}, {DType::BF16, 32}};
    EXPECT_EQ(f->get_int("general.file_type"), ftype.at(type));
    EXPECT_EQ(f->get_int("general.quantization_version").has_value(), dtype_is_quantized(type));

    // Every tokenizer key of the vocabulary, unchanged.
    int copied = 0;
    for (const auto& [key, value] : vocab->metadata()) {
        if (key.rfind("tokenizer.", 0) != 0) continue;
        const gguf::Value* v = f->find(key);
        ASSERT_NE(v, nullptr) << key;
        EXPECT_TRUE(*v == value) << key;
        ++copied;
    }
    EXPECT_GE(copied, 8);

    struct Expect {
        std::string name;
        std::vector<int64_t> shape;
        bool norm;
    };
    std::vector<Expect> expected = {{"token_embd.weight", {256, 32000}, false}};
    for (int il = 0; il < 2; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        expected.push_back({p + "attn_norm.weight", {256}, true});
        expected.push_back({p + "attn_q.weight", {256, 256}, false});
        expected.push_back({p + "attn_k.weight", {256, 128}, false});
        expected.push_back({p + "attn_v.weight", {256, 128}, false});
        expected.push_back({p + "attn_output.weight", {256, 256}, false});
        expected.push_back({p + "ffn_norm.weight", {256}, true});
        expected.push_back({p + "ffn_gate.weight", {256, 512}, false});
        expected.push_back({p + "ffn_down.weight", {512, 256}, false});
        expected.push_back({p + "ffn_up.weight", {256, 512}, false});
    }
    expected.push_back({"output_norm.weight", {256}, true});
    expected.push_back({"output.weight", {256, 32000}, false});
    ASSERT_EQ(f->tensors().size(), expected.size());

    int64_t params = 0;
    for (const Expect& e : expected) {
        const gguf::TensorInfo* t = f->find_tensor(e.name);
        ASSERT_NE(t, nullptr) << e.name;
        EXPECT_EQ(t->shape, e.shape) << e.name;
        EXPECT_EQ(t->type, e.norm ? DType::F32 : type) << e.name;
        params += t->n_elements();

        const std::vector<float> v = tensor_values(*t);
        double sum = 0, sum2 = 0;
        size_t zeros = 0;
        for (float x : v) {
            ASSERT_TRUE(std::isfinite(x)) << e.name;
            sum += x;
            sum2 += static_cast<double>(x) * x;
            zeros += x == 0.0f;
        }
        const double mean = sum / static_cast<double>(v.size());
        const double sd = std::sqrt(sum2 / static_cast<double>(v.size()) - mean * mean);
        if (e.norm) {
            EXPECT_NEAR(mean, 1.0, 0.01) << e.name;
            EXPECT_GT(sd, 0.0) << e.name;
        } else {
            EXPECT_NEAR(mean, 0.0, 0.005) << e.name;
            EXPECT_NEAR(sd, 0.02, 0.005) << e.name;
        }
        EXPECT_LT(zeros, v.size() / 2) << e.name;
    }
    EXPECT_EQ(params, synth_parameter_count(tiny_shape(), 32000));
}

INSTANTIATE_TEST_SUITE_P(Synth, SynthTypeTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Synth, OutputIsIndependentOfThreadCountAndFollowsTheSeed) {
    TempFile a("synth-a.gguf"), b("synth-b.gguf"), c("synth-c.gguf");
    SynthOptions o = tiny_options(DType::Q8_0, a.path);
    o.n_threads = 1;
    write_synthetic_model(o);
    o.output_path = b.path.string();
    o.n_threads = 3;
    write_synthetic_model(o);
    o.output_path = c.path.string();
    o.seed = 8;
    write_synthetic_model(o);
    EXPECT_EQ(file_bytes(a.path), file_bytes(b.path));
    EXPECT_NE(file_bytes(a.path), file_bytes(c.path));
}

TEST(Synth, KQuantRowsThatDoNotSplitIntoSuperBlocksFallBack) {
    TempFile out("synth-q4k.gguf");
    SynthOptions o = tiny_options(DType::Q4_K, out.path);
    o.shape.n_embd = 96;  // not a multiple of 256: those rows fall back to Q5_0
    o.shape.n_head = 3;
    o.shape.n_head_kv = 1;
    o.shape.n_ff = 256;   // ffn_down rows have 256 elements: Q4_K
    write_synthetic_model(o);
    const auto f = gguf::File::open(out.path.string());
    EXPECT_EQ(f->get_int("general.file_type"), 15);
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::Q5_0);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, DType::Q4_K);
}

TEST(Synth, RejectsBadOptions) {
    auto expect_code = [](auto&& fn, ErrorCode code, const char* text) {
        try {
            fn();
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), code) << e.what();
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
        }
    };
    TempFile out("synth-bad.gguf");
    expect_code([] { synth_shape("gpt-5"); }, ErrorCode::InvalidArgument, "llama2-7b");
    expect_code([&] {
        SynthOptions o = tiny_options(DType::IQ2_XXS, out.path);
        write_synthetic_model(o);
    }, ErrorCode::InvalidArgument, "iq2_xxs");
    expect_code([&] {
        SynthOptions o = tiny_options(DType::F16, out.path);
        o.shape.n_head = 5;
        write_synthetic_model(o);
    }, ErrorCode::InvalidArgument, "n_head");
    expect_code([&] {
        SynthOptions o = tiny_options(DType::F16, out.path);
        o.vocab_path = "/nonexistent/vocab.gguf";
        write_synthetic_model(o);
    }, ErrorCode::Io, "/nonexistent/vocab.gguf");
    EXPECT_FALSE(fs::exists(out.path));
}

// The model loads and a 4-token prompt gives finite logits.
void expect_runs(const fs::path& path) {
    ModelParams mp;
    mp.n_threads = 2;
    auto model = Model::load(path.string(), mp);
    Context ctx(*model, ContextParams{.n_ctx = 32});
    Batch b;
    for (int i = 0; i < 4; ++i) b.add(100 + i, i, 0, i == 3);
    ctx.decode(b);
    for (int v = 0; v < model->n_vocab(); ++v) ASSERT_TRUE(std::isfinite(ctx.logits(0)[v])) << path;
}

// A mixture of experts: Mixtral's layout and keys, and a model that runs.
TEST(Synth, MixtureOfExperts) {
    TempFile out("synth-moe.gguf");
    SynthOptions o = tiny_options(DType::Q4_K, out.path);
    o.shape.n_expert = 4;
    o.shape.n_expert_used = 2;
    write_synthetic_model(o);
    auto f = gguf::File::open(out.path.string());
    EXPECT_EQ(f->get_int("llama.expert_count"), 4);
    EXPECT_EQ(f->get_int("llama.expert_used_count"), 2);
    EXPECT_EQ(f->find_tensor("blk.1.ffn_gate_inp.weight")->type, DType::F32);
    EXPECT_EQ(f->find_tensor("blk.1.ffn_down_exps.weight")->shape, (std::vector<int64_t>{512, 256, 4}));
    EXPECT_EQ(f->find_tensor("blk.1.ffn_up_exps.weight")->type, DType::Q4_K);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_gate.weight"), nullptr);
    int64_t params = 0;
    for (const gguf::TensorInfo& t : f->tensors()) params += t.n_elements();
    EXPECT_EQ(params, synth_parameter_count(o.shape, 32000));
    // Every expert's rows are random, not the first expert's repeated.
    const std::vector<float> v = tensor_values(*f->find_tensor("blk.0.ffn_up_exps.weight"));
    EXPECT_NE(std::vector<float>(v.begin(), v.begin() + 256), std::vector<float>(v.begin() + 512 * 256, v.begin() + 513 * 256));
    expect_runs(out.path);
    o.shape.n_expert_used = 5;
    EXPECT_THROW(write_synthetic_model(o), Error);
}

// Qwen3-MoE's layout: heads wider than n_embd / n_head, per-head Q/K norms,
// the qwen3moe keys; the model loads with those heads and runs.
TEST(Synth, Qwen3MoeLayout) {
    TempFile out("synth-qwen3moe.gguf");
    SynthOptions o = tiny_options(DType::Q8_0, out.path);
    o.shape.arch = "qwen3moe";
    o.shape.head_dim = 128;  // 4 heads of 128 on a 256-wide model
    o.shape.n_ff = 128;
    o.shape.n_expert = 8;
    o.shape.n_expert_used = 3;
    write_synthetic_model(o);
    auto f = gguf::File::open(out.path.string());
    EXPECT_EQ(f->get_string("general.architecture"), "qwen3moe");
    EXPECT_EQ(f->get_int("qwen3moe.attention.key_length"), 128);
    EXPECT_EQ(f->get_int("qwen3moe.expert_feed_forward_length"), 128);
    EXPECT_EQ(f->get_int("qwen3moe.expert_used_count"), 3);
    EXPECT_FALSE(f->get_int("llama.block_count").has_value());
    EXPECT_EQ(f->find_tensor("blk.1.attn_q.weight")->shape, (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(f->find_tensor("blk.1.attn_k.weight")->shape, (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(f->find_tensor("blk.1.attn_output.weight")->shape, (std::vector<int64_t>{512, 256}));
    EXPECT_EQ(f->find_tensor("blk.0.attn_k_norm.weight")->shape, (std::vector<int64_t>{128}));
    int64_t params = 0;
    for (const gguf::TensorInfo& t : f->tensors()) params += t.n_elements();
    EXPECT_EQ(params, synth_parameter_count(o.shape, 32000));
    expect_runs(out.path);
    o.shape.n_expert = 0;
    o.shape.n_expert_used = 0;
    EXPECT_THROW(write_synthetic_model(o), Error);  // qwen3moe without experts
    o.shape.arch = "gpt2";
    EXPECT_THROW(write_synthetic_model(o), Error);
}

TEST(Synth, PublishedShapes) {
    EXPECT_EQ(synth_shapes().size(), 6u);
    // Qwen3-30B-A3B with its 151,936-token vocabulary: 30.5B (30,532,122,624).
    EXPECT_EQ(synth_parameter_count(synth_shape("qwen3moe-30b-a3b"), 151936), 30532122624);
    // Mixtral 8x7B: 46.7B.
    EXPECT_EQ(synth_parameter_count(synth_shape("mixtral-8x7b"), 32000), 46702792704);
    const SynthShape& l2 = synth_shape("llama2-7b");
    EXPECT_EQ(l2.n_ff, 11008);
    // Llama 2 7B's published parameter count.
    EXPECT_EQ(synth_parameter_count(l2, 32000), 6738415616);
    const SynthShape& l3 = synth_shape("llama3-8b");
    EXPECT_EQ(l3.n_head_kv, 8);
    EXPECT_EQ(l3.rope_base, 500000.0f);
    // Llama 3 8B with its 128256-token vocabulary: 8.03B.
    EXPECT_EQ(synth_parameter_count(l3, 128256), 8030261248);
    // SmolLM2-135M with an untied output matrix and its 49152-token vocabulary.
    EXPECT_EQ(synth_parameter_count(synth_shape("smollm2-135m"), 49152), 162826560);
    EXPECT_EQ(synth_shape("tinyllama-1.1b").n_layer, 22);
}

}  // namespace
}  // namespace lantern
