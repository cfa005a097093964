// Each architecture against the independent Python float64 reference, on
// small synthetic models made by tests/reference/make_tiny_model.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>

#include "api/model_impl.h"
#include "backends/registry.h"
#include "gguf/gguf.h"
#include "lantern/lantern.h"
#include "model/quantize.h"
#include "op_harness.h"
#include "quant/packed.h"
#include "test_util.h"

namespace lantern::test {
namespace {

struct ArchCase {
    std::string arch;
    std::string type;
    double tolerance;        // normalised MSE per position
    std::string extra = "";  // more make_tiny_model.py options
    int n_ctx = 64;          // context of both runs (phi3: selects the rope factor set)
    std::string label = "";  // test name suffix
};

std::string run(const std::string& cmd) {
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return cmd;
}

class ArchReference : public ::testing::TestWithParam<ArchCase> {};

// The model's logits for 20 tokens (a prompt of 12, then one token at a
// time) against reference_forward.py's on the same file.
void expect_matches_reference(const ArchCase& c, const std::string& model, const std::string& stem);

TEST_P(ArchReference, LogitsMatch) {
    const ArchCase& c = GetParam();
    const std::string stem = "tiny-" + c.arch + "-" + c.type + c.label;
    const std::string model = temp_path(stem + ".gguf").string();
    const std::string ref_dir = (source_dir() / "tests" / "reference").string();
    run("python3 " + ref_dir + "/make_tiny_model.py " + c.arch + " '" + model + "' --type " + c.type + " " + c.extra +
        " > /dev/null");
    expect_matches_reference(c, model, stem);
}

// Types the Python writer has no encoder for (IQ4_NL, IQ4_XS): the wide f32
// model quantized by `lantern quantize`; the reference decodes the file with
// the gguf package's own dequantizer, so the bytes are checked against the
// format too. Tolerance as for the other 4-bit types (measured 1.9e-4 and
// 4.1e-4).
TEST(ArchReferenceLanternQuantized, LogitsMatch) {
    const std::string ref_dir = (source_dir() / "tests" / "reference").string();
    const std::string f32 = temp_path("tiny-llama-wide-f32.gguf").string();
    run("python3 " + ref_dir + "/make_tiny_model.py llama '" + f32 + "' --wide > /dev/null");
    for (const char* type : {"iq4_nl", "iq4_xs"}) {
        SCOPED_TRACE(type);
        const std::string stem = std::string("tiny-llama-") + type;
        QuantizeOptions o;
        o.input_path = f32;
        o.output_path = temp_path(stem + ".gguf").string();
        parse_quantize_type(type, o);
        o.n_threads = 2;
        const QuantizeReport r = quantize_model(o);
        EXPECT_GE(r.quantized, 7);
        expect_matches_reference(ArchCase{"llama", type, 2e-3}, o.output_path, stem);
    }
    std::remove(f32.c_str());
}

void expect_matches_reference(const ArchCase& c, const std::string& model, const std::string& stem) {
    const std::string logits = temp_path(stem + ".bin").string();
    const std::string ref_dir = (source_dir() / "tests" / "reference").string();
    std::vector<int32_t> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 5) % 250);
    const std::string list = comma_list(tokens);
    run("python3 " + ref_dir + "/reference_forward.py '" + model + "' --tokens " + list + " --out '" + logits +
        "' --n-ctx " + std::to_string(c.n_ctx) + " > /dev/null");

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
    Context ctx(*m, ContextParams{.n_ctx = c.n_ctx, .n_batch = 12});
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
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
        double num = 0, den = 0;
        for (int64_t v = 0; v < V; ++v) {
            const double d = double(got[static_cast<size_t>(t * V + v)]) - ref[static_cast<size_t>(t * V + v)];
            num += d * d;
            den += double(ref[static_cast<size_t>(t * V + v)]) * ref[static_cast<size_t>(t * V + v)];
        }
        EXPECT_LE(num / den, c.tolerance) << c.arch << " " << c.type << " position " << t;
        worst = std::max(worst, num / den);
    }
    ::testing::Test::RecordProperty("worst_nmse", std::to_string(worst));
    std::printf("[ nmse     ] %s %s%s: worst position %.3g (tolerance %.0e)\n", c.arch.c_str(), c.type.c_str(),
                c.label.c_str(), worst, c.tolerance);
    std::remove(model.c_str());
    std::remove(logits.c_str());
}

// Tolerances (normalised MSE per position; the worst position of each case
// is printed as "[ nmse ]"):
// - f32 weights: only float32 arithmetic and the f16 KV cache separate
//   Lantern from the float64 reference; measured 6e-8..1e-7 for llama,
//   mistral and phi3, 3.5e-7 for gemma3 (6 layers, per-head norms) and
//   5.7e-7 for qwen2 (biased K rounded to f16). Bound 1e-6, 2e-6 for the two
//   larger ones. A wrong convention (rope mode, base, window, scale, norm)
//   costs 1e-2 or more.
// - f16 weights: activations are rounded to f16 for the products; 5e-7.
// - quantized weights are decoded identically on both sides, but Lantern
//   rounds activations to 8 bits for the quantized dot products (as llama.cpp
//   does): 2e-4..3e-4 on the 2-layer models (bound 1e-3), 4.5e-4..8e-4
//   for the K-quants and qwen2 (bound 2e-3), 1.2e-3..1.4e-3 on
//   the 6-layer gemma3 (bound 5e-3); f16 weights on that same model give
//   5e-7, so the difference is the activation rounding.
// The K-quant models are the 256-wide variants (K-quant rows need multiples
// of 256).
INSTANTIATE_TEST_SUITE_P(
    Tiny, ArchReference,
    ::testing::Values(
        // llama: Llama 3 rope frequency factors, normal rope, separate output;
        // and a plain variant with a SentencePiece vocabulary.
        ArchCase{"llama", "f32", 1e-6}, ArchCase{"llama", "f16", 1e-5}, ArchCase{"llama", "q8_0", 1e-3},
        ArchCase{"llama", "q4_0", 1e-3}, ArchCase{"llama", "q4_k", 2e-3},
        ArchCase{"llama", "f32", 1e-6, "--plain --tokenizer llama", 64, "_plain_spm"},
        // mistral (written as "llama", as real Mistral files are): a sliding
        // window of 8 on every layer and linear rope scaling 2; and the same
        // model named "mistral".
        ArchCase{"mistral", "f32", 1e-6}, ArchCase{"mistral", "q5_1", 1e-3},
        ArchCase{"mistral", "f32", 1e-6, "--arch-name mistral", 64, "_named"},
        // qwen2: Q/K/V biases, neox rope, tied output.
        ArchCase{"qwen2", "f32", 2e-6}, ArchCase{"qwen2", "q8_0", 2e-3}, ArchCase{"qwen2", "q5_k", 2e-3},
        // YaRN 4 over an original context of 256: qwen2 with the default
        // correction range, llama with its Llama 3 factors and the file's
        // betas 16 / 2 (the default range would cost 6e-4 at position 19).
        ArchCase{"qwen2", "f32", 2e-6, "--yarn 4", 64, "_yarn"}, ArchCase{"qwen2", "q8_0", 2e-3, "--yarn 4", 64, "_yarn"},
        ArchCase{"llama", "f32", 1e-6, "--yarn 4 --yarn-betas 16 2", 64, "_yarn"},
        // qwen3: per-head Q/K norms before neox rope, head_dim != n_embd /
        // n_head, tied output, no biases.
        ArchCase{"qwen3", "f32", 2e-6}, ArchCase{"qwen3", "q8_0", 2e-3}, ArchCase{"qwen3", "q4_k", 2e-3},
        // Mixtures of experts: Mixtral (written as "llama", 2 of 4 experts)
        // and qwen3moe (3 of 8, experts half as wide as n_ff). Only 32- and
        // 16-bit weights: routing is discontinuous, and the 8-bit activations
        // of quantized products move these random models' closest choices
        // (router logits 0.0007 apart at one position) to another expert now
        // and then, as they would llama.cpp's. The quantized expert products
        // are checked in the op test, against the same routing.
        ArchCase{"mixtral", "f32", 1e-6}, ArchCase{"mixtral", "f16", 1e-5},
        ArchCase{"qwen3moe", "f32", 2e-6}, ArchCase{"qwen3moe", "f16", 1e-5},
        // granite: llama with an embedding scale, a residual scale on both
        // branches, its own attention scale and a logit divisor; granitemoe
        // the same over 2 of 4 experts, tied output.
        // qwen2moe: qwen2 with 2 of 8 experts, weights not renormalised, and a
        // shared expert behind a per-token sigmoid gate.
        ArchCase{"qwen2moe", "f32", 2e-6}, ArchCase{"qwen2moe", "f16", 1e-5}, ArchCase{"qwen2moe", "q8_0", 2e-3},
        ArchCase{"granite", "f32", 1e-6}, ArchCase{"granite", "q4_0", 1e-3}, ArchCase{"granitemoe", "f32", 1e-6},
        ArchCase{"granitemoe", "f16", 1e-5},
        // smollm3: 4 layers, the last without rope; tied output.
        ArchCase{"smollm3", "f32", 2e-6}, ArchCase{"smollm3", "q4_0", 2e-3},
        // phi3: fused QKV and gate|up, partial rotary, longrope factors (short
        // at n_ctx 64, long at 300 > the original 256) and attn_factor.
        ArchCase{"phi3", "f32", 1e-6}, ArchCase{"phi3", "f32", 1e-6, "", 300, "_long_ctx"},
        ArchCase{"phi3", "q4_1", 1e-3}, ArchCase{"phi3", "q6_k", 2e-3},
        // gemma2: the even layers local (window 4), no Q/K norms, attention
        // and output soft-capping (as published, 50 / 30, and low enough to
        // bite, 5 / 3), GeGLU, post norms, embedding scale.
        ArchCase{"gemma2", "f32", 2e-6}, ArchCase{"gemma2", "f32", 2e-6, "--softcap-low", 64, "_softcap_low"},
        ArchCase{"gemma2", "q8_0", 5e-3}, ArchCase{"gemma2", "q4_k", 5e-3},
        // gemma3: 5 local layers (window 4) and 1 global, Q/K norms, GeGLU,
        // post norms, embedding scale, head_dim != n_embd / n_head; logit
        // soft-capping as a variant.
        ArchCase{"gemma3", "f32", 2e-6}, ArchCase{"gemma3", "f32", 2e-6, "--softcap", 64, "_softcap"},
        ArchCase{"gemma3", "f16", 1e-5}, ArchCase{"gemma3", "q8_0", 5e-3}, ArchCase{"gemma3", "q4_k", 5e-3}),
    [](const ::testing::TestParamInfo<ArchCase>& info) {
        return info.param.arch + "_" + info.param.type + info.param.label;
    });

// --- every architecture offloaded to a device ------------------------------------

// Every position's logits: a prompt of the first 8 tokens, then one token at a time.
std::vector<std::vector<float>> prompt_then_steps(Model& model, const std::vector<int32_t>& tokens, int n_ctx) {
    Context ctx(model, ContextParams{.n_ctx = n_ctx, .n_batch = 8});
    std::vector<std::vector<float>> out;
    size_t next = 0;
    while (next < tokens.size()) {
        const size_t end = next == 0 ? 8 : next + 1;
        Batch b;
        for (; next < end; ++next) b.add(tokens[next], static_cast<int>(next), 0, true);
        ctx.decode(b);
        for (int r = 0; r < ctx.n_outputs(); ++r) out.emplace_back(ctx.logits(r), ctx.logits(r) + model.n_vocab());
    }
    return out;
}

// Each architecture with every layer and the output on the fake device
// backend (CPU kernels presented as a device: weight replicas, device KV
// cache, copies between backends): the logits must equal the CPU's exactly.
// phi3 also at a context past its original one, where the long rope factors
// must have been uploaded too.
TEST(ArchOffload, EveryArchitectureMatchesTheCpu) {
    const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3, 250, 17, 18, 19, 20, 21};
    struct Case {
        std::string arch;
        int n_ctx;
        std::string extra = "";  // make_tiny_model.py options (default --softcap)
    };
    for (const Case& c : {Case{"llama", 64}, Case{"mistral", 64}, Case{"qwen2", 64}, Case{"qwen3", 64}, Case{"smollm3", 64},
                          Case{"mixtral", 64}, Case{"qwen3moe", 64}, Case{"gemma2", 64}, Case{"phi3", 64},
                          Case{"phi3", 300}, Case{"gemma3", 64}, Case{"llama", 64, "--yarn 4"},
                          Case{"granite", 64}, Case{"granitemoe", 64}, Case{"qwen2moe", 64}}) {
        const std::string path = temp_path("offload-" + c.arch + ".gguf").string();
        run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " " + c.arch + " '" + path +
            "' " + (c.extra.empty() ? "--softcap" : c.extra) + " > /dev/null");
        auto logits = [&](bool offload) {
            ModelParams p;
            p.n_threads = 2;
            auto model = Model::load(path, p);
            Model::Impl& m = model->impl();
            if (offload) {
                m.gpu = make_fake_device(*m.cpu);
                m.n_gpu_layers = static_cast<int>(m.hp.n_layer) + 1;
                plan_weights(m);
                m.store.upload(nullptr);
            }
            return prompt_then_steps(*model, tokens, c.n_ctx);
        };
        const std::vector<std::vector<float>> cpu = logits(false);
        EXPECT_EQ(cpu.size(), tokens.size()) << c.arch;
        EXPECT_EQ(logits(true), cpu) << c.arch << " n_ctx " << c.n_ctx << " " << c.extra;
        std::remove(path.c_str());
    }
}

// --- the last layer on the wanted rows only ---------------------------------------

// A prompt step that wants one row's logits runs its last layer's products
// past the attention (output projection, feed-forward or experts) on that
// row alone, in every architecture's builder (model/arch.h,
// keep_output_rows); the layers before run on every token.
TEST(ArchGraph, LastLayerRunsOnTheWantedRowsOnly) {
    for (const std::string arch : {"llama", "phi3", "gemma3", "qwen3moe"}) {
        SCOPED_TRACE(arch);
        const std::string path = temp_path("rows-" + arch + ".gguf").string();
        run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " " + arch + " '" + path +
            "' > /dev/null");
        ModelParams p;
        p.n_threads = 1;
        auto model = Model::load(path, p);
        Model::Impl& m = model->impl();
        constexpr int64_t T = 6;
        Graph g;
        KvCache kv;
        kv.n_ctx_seq = 64;
        kv.n_seq = 1;
        const int64_t row = m.hp.head_dim * m.hp.n_head_kv;
        for (int64_t il = 0; il < m.hp.n_layer; ++il) {
            kv.k.push_back(g.new_tensor(DType::F16, {row, kv.n_ctx_seq}, "cache_k"));
            kv.v.push_back(g.new_tensor(DType::F16, {row, kv.n_ctx_seq}, "cache_v"));
        }
        const std::vector<int32_t> zeros(T, 0), last = {T - 1};
        StepInputs in;
        in.tokens = g.input(DType::I32, {T}, "tokens", zeros.data(), T * sizeof(int32_t));
        in.pos = g.input(DType::I32, {T}, "positions", zeros.data(), T * sizeof(int32_t));
        in.seq = g.input(DType::I32, {T}, "sequences", zeros.data(), T * sizeof(int32_t));
        in.out_ids = g.input(DType::I32, {1}, "out_ids", last.data(), sizeof(int32_t));
        const Tensor* logits = m.build(g, kv, in);
        EXPECT_EQ(logits->ne[1], 1);
        const int last_layer = static_cast<int>(m.hp.n_layer) - 1;
        bool past_attention = false;
        int one_row = 0;
        for (const Tensor* n : g.nodes()) {
            if (n->layer == last_layer && n->op == Op::Attention) past_attention = true;
            const bool product = n->op == Op::MulMat || n->op == Op::MulMatAdd || n->op == Op::MoeFfn;
            if (!product || n->layer < 0 || n->layer > last_layer) continue;
            if (n->layer == last_layer && past_attention) {
                EXPECT_EQ(n->ne[1], 1) << "layer " << n->layer << " " << n->name;
                ++one_row;
            } else {
                EXPECT_EQ(n->ne[1], T) << "layer " << n->layer << " " << n->name;
            }
        }
        EXPECT_GE(one_row, 2);  // the output projection and the feed-forward at least
        std::remove(path.c_str());
    }
}

// --- weights packed for the CPU at load ---------------------------------------------

// A Q4_0 model loads with its matrix products' weights (and a MoE model's
// experts) packed where this CPU packs Q4_0 (quant/packed.h),
// LANTERN_CPU_REPACK=0 keeps them as in the file, and the two give the same
// logits (equal here: with rows of two and four blocks the two orders of
// the sums round alike).
TEST(CpuRepack, LoadPacksTheProductsWeights) {
    if (quant::packed_ops(DType::Q4_0) == nullptr) GTEST_SKIP() << "no packed Q4_0 on this CPU";
    for (const std::string arch : {"llama", "qwen3moe"}) {
        SCOPED_TRACE(arch);
        const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3, 250, 17, 18, 19};
        const std::string path = temp_path("repack-" + arch + ".gguf").string();
        run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " " + arch + " '" + path +
            "' --type q4_0 > /dev/null");
        // The load's progress reports, in order, end at 1 and count the packing.
        struct Progress {
            std::vector<float> seen;
            bool ordered() const { return std::is_sorted(seen.begin(), seen.end()) && !seen.empty() && seen.back() == 1.0f; }
        };
        size_t expert_bytes = 0;  // the file's bytes of the experts (Q4_0 packs to as many)
        auto logits = [&](bool repack, size_t& packed, Progress& progress) {
            ScopedEnv setting("LANTERN_CPU_REPACK", repack ? "1" : "0");
            ModelParams p;
            p.n_threads = 2;
            p.progress = [&](float f) { progress.seen.push_back(f); };
            auto model = Model::load(path, p);
            packed = model->impl().cpu->stats().packed_weights;
            expert_bytes = 0;
            for (const LayerWeights& l : model->impl().weights.layers) {
                for (const Tensor* w : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) {
                    expert_bytes += w != nullptr ? w->nbytes() : 0;
                }
            }
            return prompt_then_steps(*model, tokens, 64);
        };
        size_t packed = 0, unpacked = 0;
        Progress with, without;
        const auto a = logits(true, packed, with), b = logits(false, unpacked, without);
        EXPECT_GT(packed, expert_bytes);
        if (arch == "qwen3moe") {
            EXPECT_GT(expert_bytes, 0u);
        }
        EXPECT_EQ(unpacked, 0u);
        EXPECT_TRUE(with.ordered());
        EXPECT_TRUE(without.ordered());
        EXPECT_GT(with.seen.size(), without.seen.size());  // a report per packed matrix
        ASSERT_EQ(a.size(), tokens.size());
        ASSERT_EQ(b.size(), tokens.size());
        for (size_t t = 0; t < a.size(); ++t) EXPECT_LE(nmse(a[t], b[t]), 1e-10) << "position " << t;
        std::remove(path.c_str());
    }
}

// Resident kB of the mapping that holds `p` (/proc/self/smaps), or -1.
long mapped_rss_kb(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    const auto addr = reinterpret_cast<uintptr_t>(p);
    while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
            inside = addr >= lo && addr < hi;
        } else if (inside && line.rfind("Rss:", 0) == 0) {
            return std::stol(line.substr(4));
        }
    }
    return -1;
}

// The packed weights' mapped pages are handed back at load: the process does
// not hold both copies (the default model: Q4_1 products, a Q8_0 table).
TEST(CpuRepack, PackedWeightsLeaveTheMapping) {
    if (quant::packed_ops(DType::Q4_1) == nullptr) GTEST_SKIP() << "no packed Q4_1 on this CPU";
    long rss_kb[2] = {-1, -1};
    for (bool repack : {false, true}) {
        ScopedEnv setting("LANTERN_CPU_REPACK", repack ? "1" : "0");
        ModelParams p;
        p.n_threads = 2;
        auto model = Model::load(default_model_path().string(), p);
        rss_kb[repack ? 1 : 0] = mapped_rss_kb(model->impl().file->base());
        if (repack) {
            EXPECT_GT(model->impl().cpu->stats().packed_weights, size_t{80} << 20);
        }
    }
    EXPECT_GT(rss_kb[0], 80 * 1024) << "the load reads every page of the 94 MB file";
    EXPECT_LT(rss_kb[1], rss_kb[0] / 8) << "resident kB of the mapping: packed " << rss_kb[1] << ", unpacked " << rss_kb[0];
}

// --- every architecture on every GPU backend built in ----------------------------

// Each architecture whole on each GPU backend this binary has and finds a
// device for (OpenCL: PoCL in CI; CUDA on the GPU machine): a prompt of 8
// and 4 single tokens (the one-token fused paths), logits within 1e-4
// normalised MSE of the CPU's at every position (the backends' own
// roundings; a wrong convention costs 1e-2 or more). The NoPE layers of
// smollm3 and the Q/K norms of qwen3 and gemma3 run through each backend's
// graph this way.
TEST(ArchOnGpu, EveryArchitectureAgreesWithTheCpu) {
    const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3, 250, 17, 18, 19, 20, 21};
    int ran = 0;
    for (const BackendFactory& f : gpu_backend_factories()) {
        if (f.devices().empty()) continue;
        for (const std::string spec : {"llama", "mistral", "qwen2", "qwen3", "smollm3", "mixtral", "qwen3moe", "phi3",
                                       "gemma2", "gemma3", "qwen2 --yarn 4", "granite", "granitemoe", "qwen2moe"}) {
            const std::string arch = spec.substr(0, spec.find(' '));
            const std::string extra = spec.size() > arch.size() ? spec.substr(arch.size()) : "";
            const std::string path = temp_path(std::string("gpu-") + f.name + "-" + arch + ".gguf").string();
            run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " " + arch + " '" + path +
                "'" + extra + " > /dev/null");
            auto logits = [&](const std::string& backend) {
                ModelParams p;
                p.n_threads = 2;
                p.backend = backend;
                p.n_gpu_layers = backend == "cpu" ? 0 : 99;
                auto model = Model::load(path, p);
                return prompt_then_steps(*model, tokens, 64);
            };
            const auto cpu = logits("cpu");
            const auto gpu = logits(f.name);
            ASSERT_EQ(gpu.size(), cpu.size());
            double worst = 0.0;
            for (size_t t = 0; t < cpu.size(); ++t) worst = std::max(worst, nmse(gpu[t], cpu[t]));
            std::printf("[ nmse     ] %s %s against the CPU: worst position %.3g\n", f.name, spec.c_str(), worst);
            EXPECT_LE(worst, 1e-4) << f.name << " " << spec;
            std::remove(path.c_str());
            ++ran;
        }
    }
    if (ran == 0) GTEST_SKIP() << "no GPU backend with a device";
}

// --- hyperparameter conventions on edited copies of a tiny model ---------------

// A copy of `src` with `edit` applied to its metadata (key -> value; a null
// value removes the key).
std::string edited_copy(const std::string& src, const std::string& name,
                        const std::vector<std::pair<std::string, std::optional<gguf::Value>>>& edit) {
    auto f = gguf::File::open(src);
    gguf::Writer w;
    for (const auto& [key, value] : f->metadata()) {
        bool removed = false;
        for (const auto& [k, v] : edit) removed |= k == key && !v.has_value();
        if (!removed) w.set(key, value);
    }
    for (const auto& [k, v] : edit) {
        if (v.has_value()) w.set(k, *v);
    }
    for (const gguf::TensorInfo& t : f->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
    const std::string out = temp_path(name).string();
    w.write(out);
    return out;
}

std::vector<float> all_logits(const std::string& path, const std::vector<int32_t>& tokens) {
    ModelParams p;
    p.n_threads = 2;
    auto m = Model::load(path, p);
    Context ctx(*m, ContextParams{.n_ctx = 64});
    Batch b;
    for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int>(i), 0, true);
    ctx.decode(b);
    std::vector<float> out;
    for (int i = 0; i < ctx.n_outputs(); ++i) out.insert(out.end(), ctx.logits(i), ctx.logits(i) + m->n_vocab());
    return out;
}

class ArchHParams : public ::testing::Test {
protected:
    void SetUp() override {
        // mistral: linear rope scaling 2 and a sliding window of 8, as "llama".
        model_ = temp_path("hparams-mistral.gguf").string();
        run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " mistral '" + model_ +
            "' > /dev/null");
    }
    void TearDown() override { std::remove(model_.c_str()); }
    std::string model_;
};

// A rope scaling factor without a type is linear (as llama.cpp and the
// reference read it): the same logits as with the type written out, and
// other logits than without the factor.
TEST_F(ArchHParams, RopeScalingFactorWithoutTypeIsLinear) {
    const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3, 250, 17, 18, 19, 20, 21};
    const std::string no_type = edited_copy(model_, "no-type.gguf", {{"llama.rope.scaling.type", std::nullopt}});
    const std::string no_factor = edited_copy(model_, "no-factor.gguf", {{"llama.rope.scaling.type", std::nullopt},
                                                                          {"llama.rope.scaling.factor", std::nullopt}});
    const std::vector<float> with = all_logits(model_, tokens);
    EXPECT_EQ(all_logits(no_type, tokens), with);
    EXPECT_NE(all_logits(no_factor, tokens), with);
    std::remove(no_type.c_str());
    std::remove(no_factor.c_str());
}

TEST_F(ArchHParams, UnsupportedRopeScalingAndArchitecture) {
    struct Case {
        std::vector<std::pair<std::string, std::optional<gguf::Value>>> edit;
        std::string message;
    };
    const Case cases[] = {
        {{{"llama.rope.scaling.type", gguf::Value(std::string("dynamic"))}}, "rope scaling type 'dynamic' is not supported"},
        {{{"general.architecture", gguf::Value(std::string("gpt2"))}},
         "architecture 'gpt2' is not supported (supported: llama, mistral, qwen2, qwen2moe, qwen3, qwen3moe, smollm3, "
         "granite, granitemoe, phi3, gemma2, gemma3)"},
    };
    for (const Case& c : cases) {
        const std::string path = edited_copy(model_, "unsupported.gguf", c.edit);
        try {
            Model::load(path, ModelParams{});
            ADD_FAILURE() << "loaded: " << c.message;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
        }
        std::remove(path.c_str());
    }
}

// A block count past the file's tensors is damage, refused before any
// per-layer table is sized by it (a fuzzed file asked for 100 GB).
TEST_F(ArchHParams, BlockCountPastTheTensorsIsAFormatError) {
    const std::string path =
        edited_copy(model_, "many-blocks.gguf", {{"llama.block_count", gguf::Value(uint32_t(2000000000))}});
    try {
        Model::load(path, ModelParams{});
        ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Format) << e.what();
        EXPECT_NE(std::string(e.what()).find("llama.block_count (2000000000) is more than the model's"), std::string::npos)
            << e.what();
    }
    std::remove(path.c_str());
}

// A file packed with general.alignment 1 places tensors at odd addresses;
// the loader copies those to aligned memory, so the kernels read whole
// elements where they expect them and the logits are the aligned file's.
TEST_F(ArchHParams, PackedFileLoadsAlignedAndGivesTheSameLogits) {
    const std::vector<int32_t> tokens = {5, 42, 7, 99, 100, 3};
    const std::string packed = edited_copy(model_, "packed.gguf", {{"general.alignment", gguf::Value(uint32_t{1})},
                                                                  {"general.name", gguf::Value(std::string("odd"))}});
    size_t odd = 0;
    for (const gguf::TensorInfo& t : gguf::File::open(packed)->tensors()) odd += reinterpret_cast<uintptr_t>(t.data) % 4 != 0;
    ASSERT_GT(odd, 0u) << "every tensor of the packed file happens to be aligned";
    EXPECT_EQ(all_logits(packed, tokens), all_logits(model_, tokens));
    const auto m = Model::load(packed, ModelParams{});
    for (const Tensor& t : m->impl().table->all()) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(m->impl().table->host_data(&t)) % WeightTable::kAlignment, 0u) << t.name;
    }
    std::remove(packed.c_str());
}

// A mixture of experts' metadata: what cannot be right is a format error
// naming the key, what this engine does not do is said so.
TEST(ArchMoe, MetadataIsChecked) {
    const std::string model = temp_path("hparams-mixtral.gguf").string();
    run("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " mixtral '" + model +
        "' > /dev/null");
    struct Case {
        std::vector<std::pair<std::string, std::optional<gguf::Value>>> edit;
        ErrorCode code;
        std::string message;
    };
    const Case cases[] = {
        {{{"llama.expert_used_count", gguf::Value(uint32_t{5})}}, ErrorCode::Format,
         "expert_used_count (5) is more than expert_count (4)"},
        {{{"llama.expert_used_count", std::nullopt}}, ErrorCode::Format, "missing metadata key 'llama.expert_used_count'"},
        {{{"llama.expert_gating_func", gguf::Value(uint32_t{2})}}, ErrorCode::Unsupported,
         "expert gating other than softmax is not supported"},
        {{{"llama.expert_shared_count", gguf::Value(uint32_t{1})}}, ErrorCode::Unsupported, "shared experts are not supported"},
        {{{"llama.expert_count", std::nullopt}}, ErrorCode::Format,
         "the file has expert tensors (blk.0.ffn_gate_exps.weight) but no llama.expert_count"},
    };
    for (const Case& c : cases) {
        const std::string path = edited_copy(model, "moe-edited.gguf", c.edit);
        try {
            Model::load(path, ModelParams{});
            ADD_FAILURE() << "loaded: " << c.message;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), c.code) << e.what();
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
        }
        std::remove(path.c_str());
    }
    std::remove(model.c_str());
}

}  // namespace
}  // namespace lantern::test
