// Every op on the CUDA backend against the CPU backend (the common harness's
// cases, compared as the OpenCL backend's are: gpu_compare.h), and the cases the harness does not
// reach: the prompt attention kernel, flash-decoding with several splits,
// matrix-vector shapes with several blocks per lane for every weight type,
// and the fused launches (Q/K/V, gate/up/SiLU, RoPE + KV writes).
// Skipped when no CUDA device is present (CI compiles, the device runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "cuda_test_util.h"
#include "gpu_compare.h"
#include "op_harness.h"
#include "test_util.h"

namespace lantern::test {
namespace {

constexpr uint32_t kSeed = 1234;

class CudaOps : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaOps, MatchesCpu) {
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
    auto cases = make_op_cases(kSeed);
    ASSERT_LT(GetParam(), cases.size());
    OpCase& c = *cases[GetParam()];
    expect_matches_cpu(c, *gpu, "recorded");
    // A recorded step (above) cannot wait on the host, so MoE prompts take
    // their grouped GEMMs (moe_prompt.cu) only in a prompt step run as it
    // comes: the same case once more that way.
    if (uses_op(c, Op::MoeFfn)) expect_matches_cpu(c, *gpu, "as a prompt step", ComputeHints{.prefill = true});
}

// Case names, made once (building the cases quantizes their weights).
std::vector<std::string> names_of(const std::vector<std::unique_ptr<OpCase>>& cases) {
    std::vector<std::string> names;
    for (const auto& c : cases) names.push_back(c->name);
    return names;
}
const std::vector<std::string>& harness_names() {
    static const std::vector<std::string> names = names_of(make_op_cases(kSeed));
    return names;
}

INSTANTIATE_TEST_SUITE_P(AllCases, CudaOps, ::testing::Range<size_t>(0, harness_names().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return harness_names()[info.param]; });

// --- cases beyond the harness ------------------------------------------------

using CaseFn = std::unique_ptr<OpCase> (*)();

std::unique_ptr<OpCase> new_case(const char* name, double tol) {
    auto c = std::make_unique<OpCase>();
    c->name = name;
    c->tolerance = tol;
    return c;
}

// Attention over one prompt of T tokens (causal), or two interleaved
// sequences, with the prompt kernel (T > 8) or flash-decoding with splits.
std::unique_ptr<OpCase> attention_case(const char* name, int64_t hd, int64_t n_head, int64_t n_kv,
                                       const std::vector<int32_t>& pos, const std::vector<int32_t>& seq, int n_ctx,
                                       int window, float softcap, uint32_t seed, DType cache = DType::F16) {
    auto c = new_case(name, 5e-4);
    CaseLeaves b{*c, std::mt19937(seed)};
    const int64_t T = static_cast<int64_t>(pos.size());
    Tensor* q = b.leaf(DType::F32, {hd, n_head, T}, "q", -2.0f, 2.0f);
    Tensor* kc = b.leaf(cache, {hd * n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* vc = b.leaf(cache, {hd * n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
    c->outputs.push_back(c->graph.attention(q, kc, vc, b.ints(pos, "pos"), b.ints(seq, "seq"), static_cast<int>(n_kv),
                                            n_ctx, 1.0f / std::sqrt(static_cast<float>(hd)), softcap, window));
    return c;
}

std::vector<int32_t> iota(int n, int from = 0) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = from + i;
    return v;
}

std::unique_ptr<OpCase> attn_prompt_hd64() {
    return attention_case("attn_prompt_hd64_gqa", 64, 8, 2, iota(70, 5), std::vector<int32_t>(70, 1), 128, 0, 0.0f, 1);
}
std::unique_ptr<OpCase> attn_prompt_hd128() {
    return attention_case("attn_prompt_hd128", 128, 4, 4, iota(40), std::vector<int32_t>(40, 0), 64, 0, 0.0f, 2);
}
std::unique_ptr<OpCase> attn_prompt_two_seqs_window_softcap() {
    std::vector<int32_t> pos, seq;
    for (int i = 0; i < 24; ++i) {
        pos.push_back(i / 2);
        seq.push_back(i % 2);
    }
    return attention_case("attn_prompt_two_seqs_window_softcap", 64, 4, 1, pos, seq, 32, 6, 20.0f, 3);
}
std::unique_ptr<OpCase> attn_decode_splits_hd128() {
    return attention_case("attn_decode_splits_hd128", 128, 32, 32, {1500}, {0}, 2048, 0, 0.0f, 4);
}
std::unique_ptr<OpCase> attn_decode_splits_gqa12() {
    // 12 query heads per KV head: two head blocks of up to 8.
    return attention_case("attn_decode_splits_gqa12", 64, 24, 2, {3000, 17}, {1, 0}, 4096, 0, 0.0f, 5);
}
// The same kernels over Q8_0 caches (quants and scales read as 16-bit words).
std::unique_ptr<OpCase> attn_prompt_hd64_q8() {
    return attention_case("attn_prompt_hd64_gqa_q8_0", 64, 8, 2, iota(70, 5), std::vector<int32_t>(70, 1), 128, 0, 0.0f,
                          6, DType::Q8_0);
}
std::unique_ptr<OpCase> attn_prompt_hd128_q8() {
    return attention_case("attn_prompt_hd128_q8_0", 128, 4, 4, iota(40), std::vector<int32_t>(40, 0), 64, 0, 0.0f, 7,
                          DType::Q8_0);
}
std::unique_ptr<OpCase> attn_decode_splits_hd128_q8() {
    return attention_case("attn_decode_splits_hd128_q8_0", 128, 32, 32, {1500}, {0}, 2048, 0, 0.0f, 8, DType::Q8_0);
}
std::unique_ptr<OpCase> attn_decode_splits_gqa12_q8() {
    return attention_case("attn_decode_splits_gqa12_q8_0", 64, 24, 2, {3000, 17}, {1, 0}, 4096, 0, 0.0f, 9,
                          DType::Q8_0);
}

// Matrix-vector shapes with several blocks per lane and ragged tails.
std::unique_ptr<OpCase> matvec_case(DType t, int64_t K, int64_t N, int64_t M, uint32_t seed) {
    auto c = new_case("", 5e-4);
    c->name = std::string("mul_mat_") + dtype_name(t) + "_" + std::to_string(K) + "x" + std::to_string(N) + "x" +
              std::to_string(M);
    CaseLeaves b{*c, std::mt19937(seed)};
    Tensor* w = b.weight(t, {K, N}, "w");
    Tensor* x = b.leaf(DType::F32, {K, M}, "x");
    c->outputs.push_back(c->graph.mul_mat(w, x));
    return c;
}

// gate/up on one activation and silu(gate) * up (one launch on a GPU).
std::unique_ptr<OpCase> gate_up_case(DType t, int64_t K, int64_t F, uint32_t seed) {
    auto c = new_case("", 5e-4);
    c->name = std::string("gate_up_") + dtype_name(t) + "_" + std::to_string(K) + "x" + std::to_string(F);
    CaseLeaves b{*c, std::mt19937(seed)};
    Graph& g = c->graph;
    Tensor* x = b.leaf(DType::F32, {K, 1}, "x");
    Tensor* gate = g.mul_mat(b.weight(t, {K, F}, "w_gate"), x);
    Tensor* up = g.mul_mat(b.weight(t, {K, F}, "w_up"), x);
    c->outputs = {gate, up, g.silu_mul(gate, up)};
    return c;
}

// A LoRA adapter's decode products (model/lora.h): A's of Q, K and V on one
// activation (few rows of a long K: the block-per-row-pair kernel, one
// launch for the three), then each B on its A's output (rows of K = rank:
// the thread-per-row kernel), and the add into the base product.
std::unique_ptr<OpCase> lora_case(DType t, int64_t K, int64_t r, int64_t N, uint32_t seed) {
    auto c = new_case("", 5e-4);
    c->name = std::string("lora_") + dtype_name(t) + "_" + std::to_string(K) + "_r" + std::to_string(r) + "_" +
              std::to_string(N);
    CaseLeaves b{*c, std::mt19937(seed)};
    Graph& g = c->graph;
    Tensor* x = b.leaf(DType::F32, {K, 1}, "x");
    Tensor* base = b.leaf(DType::F32, {N, 1}, "base");
    Tensor* ax[3];
    for (int i = 0; i < 3; ++i) ax[i] = g.mul_mat(b.weight(t, {K, r + 8 * i}, "lora_a"), x);
    for (int i = 0; i < 3; ++i) {
        Tensor* bx = g.mul_mat(b.weight(t, {r + 8 * i, N - 7 * i}, "lora_b"), ax[i]);
        c->outputs.push_back(ax[i]);
        c->outputs.push_back(i == 0 ? g.add(base, bx) : bx);
    }
    return c;
}

// A layer's fusable patterns: Q/K/V on one activation, RoPE + both cache
// writes, gate/up + SiLU (decode shapes, f16 caches).
// hd, n_head and n_kv vary the decode attention's heads per block (its
// one-token launch does the RoPE and the cache writes).
// Q8_0 caches: full rotary (the fused RoPE + cache write quantizes blocks
// across the threads that hold them), NeoX or interleaved pairs.
std::unique_ptr<OpCase> fused_layer(DType t, int64_t T, int64_t hd = 64, int64_t n_head = 4, int64_t n_kv = 2,
                                    DType cache = DType::F16, RopeMode mode = RopeMode::Normal) {
    auto c = new_case("", 5e-4);
    c->name = std::string("fused_layer_") + dtype_name(t) + "_t" + std::to_string(T);
    if (hd != 64 || n_head != 4 || n_kv != 2) {
        c->name += "_hd" + std::to_string(hd) + "_h" + std::to_string(n_head) + "_kv" + std::to_string(n_kv);
    }
    if (cache != DType::F16) c->name += std::string("_") + dtype_name(cache);
    if (mode == RopeMode::Neox) c->name += "_neox";
    const int n_rot = cache == DType::F16 ? 64 : static_cast<int>(hd);
    CaseLeaves b{*c, std::mt19937(77 + static_cast<uint32_t>(T))};
    Graph& g = c->graph;
    const int64_t E = 256, F = 512;
    const int n_ctx = 32;
    Tensor* x = b.leaf(DType::F32, {E, T}, "x");
    Tensor* q = g.mul_mat(b.weight(t, {E, hd * n_head}, "wq"), x);
    Tensor* k = g.mul_mat(b.weight(t, {E, hd * n_kv}, "wk"), x);
    Tensor* v = g.mul_mat(b.weight(t, {E, hd * n_kv}, "wv"), x);
    std::vector<int32_t> pos, seq;
    for (int64_t i = 0; i < T; ++i) {
        pos.push_back(static_cast<int32_t>(9 + i));
        seq.push_back(static_cast<int32_t>(i % 2));
    }
    Tensor* tp = b.ints(pos, "pos");
    Tensor* ts = b.ints(seq, "seq");
    Tensor* qk = g.rope_qk(g.reshape(q, {hd, n_head, T}), g.reshape(k, {hd, n_kv, T}), tp, nullptr, n_rot, mode,
                           10000.0f, 1.0f);
    Tensor* k_rows = g.view(qk, {hd * n_kv, T}, {qk->nb[0], qk->nb[2]}, static_cast<size_t>(n_head) * qk->nb[1], "k_roped");
    Tensor* kc = b.leaf(cache, {hd * n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* vc = b.leaf(cache, {hd * n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
    Tensor* k_all = g.kv_store(k_rows, kc, tp, ts, n_ctx);
    Tensor* v_all = g.kv_store(v, vc, tp, ts, n_ctx);
    // Random weights make scores of std ~28 at 0.125, a softmax near one-hot.
    // Quantized caches round the CPU's and the GPU's roped keys (an ulp apart)
    // differently at a block's .5 boundaries, and in such a softmax one flip
    // between near-tied keys moves the output by 1e-3 (t5, NeoX, heads of 64,
    // measured): they attend at a scale whose softmax is smooth.
    const float scale = cache == DType::F16 ? 0.125f : 0.01f;
    Tensor* attn = g.attention(g.rope_qk_part(qk, false), k_all, v_all, tp, ts, static_cast<int>(n_kv), n_ctx, scale,
                               0.0f, 0);
    Tensor* gate = g.mul_mat(b.weight(t, {E, F}, "w_gate"), x);
    Tensor* up = g.mul_mat(b.weight(t, {E, F}, "w_up"), x);
    Tensor* act = g.silu_mul(gate, up);
    c->outputs = {q, k, v, qk, attn, gate, up, act, k_all, v_all};
    return c;
}

// AddRmsNorm of one row fused into the matrix-vector launches that read its
// normed slice (Q/K/V, then wo-like, then gate/up/SiLU).
std::unique_ptr<OpCase> prenorm_chain(DType t) {
    auto c = new_case("", 5e-4);
    c->name = std::string("prenorm_chain_") + dtype_name(t);
    CaseLeaves b{*c, std::mt19937(91)};
    Graph& g = c->graph;
    const int64_t E = 512, F = 1024;
    Tensor* res = b.leaf(DType::F32, {E, 1}, "residual");
    Tensor* add = b.leaf(DType::F32, {E, 1}, "ffn_out");
    Tensor* f1 = g.add_rms_norm(res, add, b.weight(DType::F32, {E}, "attn_norm"), 1e-5f);
    Tensor* x1 = g.fused_slice(f1, 1);
    Tensor* q = g.mul_mat(b.weight(t, {E, E}, "wq"), x1);
    Tensor* k = g.mul_mat(b.weight(t, {E, 128}, "wk"), x1);
    Tensor* v = g.mul_mat(b.weight(t, {E, 128}, "wv"), x1);
    Tensor* f2 = g.add_rms_norm(g.fused_slice(f1, 0), q, b.weight(DType::F32, {E}, "ffn_norm"), 1e-5f);
    Tensor* x2 = g.fused_slice(f2, 1);
    Tensor* gate = g.mul_mat(b.weight(t, {E, F}, "w_gate"), x2);
    Tensor* up = g.mul_mat(b.weight(t, {E, F}, "w_up"), x2);
    Tensor* act = g.silu_mul(gate, up);
    c->outputs = {f1, q, k, v, f2, gate, up, act};
    return c;
}

// The first layer's RmsNorm (no residual yet) and the Q/K/V products that
// read it, in one launch (cuda_fusion.h).
std::unique_ptr<OpCase> norm_qkv(DType t) {
    auto c = new_case("", 5e-4);
    c->name = std::string("norm_qkv_") + dtype_name(t);
    CaseLeaves b{*c, std::mt19937(93)};
    Graph& g = c->graph;
    const int64_t E = 1024;
    Tensor* x = b.leaf(DType::F32, {E, 1}, "embedding");
    Tensor* n = g.rms_norm(x, b.weight(DType::F32, {E}, "attn_norm"), 1e-5f);
    Tensor* q = g.mul_mat(b.weight(t, {E, E}, "wq"), n);
    Tensor* k = g.mul_mat(b.weight(t, {E, 256}, "wk"), n);
    Tensor* v = g.mul_mat(b.weight(t, {E, 256}, "wv"), n);
    c->outputs = {n, q, k, v};
    return c;
}

struct Extra {
    std::string name;  // as the case names itself
    std::function<std::unique_ptr<OpCase>()> make;
};

// The extra cases, each built on demand (building quantizes the weights, so
// registering the tests must not).
const std::vector<Extra>& extras() {
    static const std::vector<Extra> list = [] {
        std::vector<Extra> f;
        const std::pair<const char*, CaseFn> attn[] = {
            {"attn_prompt_hd64_gqa", attn_prompt_hd64},
            {"attn_prompt_hd128", attn_prompt_hd128},
            {"attn_prompt_two_seqs_window_softcap", attn_prompt_two_seqs_window_softcap},
            {"attn_decode_splits_hd128", attn_decode_splits_hd128},
            {"attn_decode_splits_gqa12", attn_decode_splits_gqa12},
            {"attn_prompt_hd64_gqa_q8_0", attn_prompt_hd64_q8},
            {"attn_prompt_hd128_q8_0", attn_prompt_hd128_q8},
            {"attn_decode_splits_hd128_q8_0", attn_decode_splits_hd128_q8},
            {"attn_decode_splits_gqa12_q8_0", attn_decode_splits_gqa12_q8}};
        for (const auto& [name, fn] : attn) f.push_back({name, fn});
        uint32_t seed = 100;
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                        DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                        DType::IQ4_XS}) {
            const std::string ty = dtype_name(t);
            const uint32_t s1 = ++seed, s2 = ++seed;
            f.push_back({"mul_mat_" + ty + "_5120x300x1", [t, s1] { return matvec_case(t, 5120, 300, 1, s1); }});
            f.push_back({"mul_mat_" + ty + "_1024x70x64", [t, s2] { return matvec_case(t, 1024, 70, 64, s2); }});
        }
        for (DType t : {DType::F32, DType::F16, DType::BF16}) {
            const uint32_t s1 = ++seed, s2 = ++seed;
            f.push_back({std::string("lora_") + dtype_name(t) + "_5632_r16_2048",
                         [t, s1] { return lora_case(t, 5632, 16, 2048, s1); }});
            f.push_back({std::string("lora_") + dtype_name(t) + "_1024_r8_5001",
                         [t, s2] { return lora_case(t, 1024, 8, 5001, s2); }});
        }
        // The streamed kernel: several stages per warp and items per block
        // (4096 x 4000); 576-wide rows pad their meta rows; an odd row count
        // (1536 x 301); a 256-wide K-quant row has 8 blocks.
        for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
            const std::string ty = dtype_name(t);
            const uint32_t s1 = ++seed, s2 = ++seed;
            const int64_t narrow = dtype_block_size(t) == 256 ? 256 : 576;
            f.push_back({"mul_mat_" + ty + "_4096x4000x1", [t, s1] { return matvec_case(t, 4096, 4000, 1, s1); }});
            f.push_back({"mul_mat_" + ty + "_" + std::to_string(narrow) + "x1000x1",
                         [t, s2, narrow] { return matvec_case(t, narrow, 1000, 1, s2); }});
            const uint32_t s3 = ++seed;
            f.push_back({"mul_mat_" + ty + "_1536x301x1", [t, s3] { return matvec_case(t, 1536, 301, 1, s3); }});
        }
        // More row pairs than an H100's matrix-vector warps: short rows share
        // a warp (576-wide: 8 lanes per pair, 2048-wide: 16), alone and as
        // gate/up/SiLU pairs; odd row counts leave pairs without rows. Q3_K:
        // d words passed by shuffle within groups of 8 and 16 lanes (Q4_K
        // keeps 32 lanes a pair); Q2_K: run items of 8 and 16 lanes.
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q3_K, DType::Q2_K, DType::IQ4_XS}) {
            const std::string ty = dtype_name(t);
            const int64_t narrow = dtype_block_size(t) == 256 ? 512 : 576;
            const uint32_t s1 = ++seed, s2 = ++seed, s3 = ++seed;
            f.push_back({"mul_mat_" + ty + "_" + std::to_string(narrow) + "x20001x1",
                         [t, s1, narrow] { return matvec_case(t, narrow, 20001, 1, s1); }});
            f.push_back({"mul_mat_" + ty + "_2048x6001x1", [t, s2] { return matvec_case(t, 2048, 6001, 1, s2); }});
            f.push_back({"gate_up_" + ty + "_" + std::to_string(narrow) + "x9001",
                         [t, s3, narrow] { return gate_up_case(t, narrow, 9001, s3); }});
        }
        // Gate/up pairs at the 7B's width (more items than an H100's warps:
        // a part-full last round), and an odd row count with an odd block
        // count per row (a last stage of one block).
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K}) {
            const std::string ty = dtype_name(t);
            const int64_t odd_k = dtype_block_size(t) == 256 ? 4352 : 4128;
            const uint32_t s1 = ++seed, s2 = ++seed;
            f.push_back({"gate_up_" + ty + "_4096x2200", [t, s1] { return gate_up_case(t, 4096, 2200, s1); }});
            f.push_back({"mul_mat_" + ty + "_" + std::to_string(odd_k) + "x4401x1",
                         [t, s2, odd_k] { return matvec_case(t, odd_k, 4401, 1, s2); }});
        }
        // Launches of four rounds or more on an H100 (132 SMs), which take
        // fewer blocks with the same rounds each (matvec_stream.cu): rows
        // alone (Q4_0, 6,500 pairs: 102 blocks) and gate/up pairs at the
        // 7B's width (Q2_K run items, 11,008 pairs: 115 blocks).
        {
            const uint32_t s1 = ++seed, s2 = ++seed;
            f.push_back({"mul_mat_q4_0_4096x13000x1", [s1] { return matvec_case(DType::Q4_0, 4096, 13000, 1, s1); }});
            f.push_back({"gate_up_q2_K_4096x11008", [s2] { return gate_up_case(DType::Q2_K, 4096, 11008, s2); }});
        }
        // Q3_K's paired blocks over rows of several stages, the last part-full
        // (344 blocks: stages of 128); Q5_K's (120 blocks: stages of 64).
        // Q4_0: rows of three stages with every unit of a lane (four-unit
        // types), and an activation of two staging rounds (stage_act_q8).
        for (DType t : {DType::Q3_K, DType::Q2_K, DType::Q4_0}) {
            const uint32_t s1 = ++seed;
            f.push_back({std::string("mul_mat_") + dtype_name(t) + "_11008x300x1",
                         [t, s1] { return matvec_case(t, 11008, 300, 1, s1); }});
        }
        {
            const uint32_t s1 = ++seed;
            f.push_back({"mul_mat_q5_K_3840x300x1", [s1] { return matvec_case(DType::Q5_K, 3840, 300, 1, s1); }});
        }
        // The bulk-copy kernel's types (4,096-wide rows: its default for
        // them): gate/up pairs, and Q/K/V side by side behind a norm.
        for (DType t : {DType::Q5_0, DType::Q5_K, DType::Q6_K}) {
            const uint32_t s1 = ++seed;
            f.push_back({std::string("gate_up_") + dtype_name(t) + "_4096x2200", [t, s1] { return gate_up_case(t, 4096, 2200, s1); }});
        }
        f.push_back({"norm_qkv_q5_K", [] { return norm_qkv(DType::Q5_K); }});
        // Q2_K: run items stage the normed row in their order.
        for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q6_K, DType::BF16, DType::Q2_K, DType::Q3_K}) {
            f.push_back({std::string("prenorm_chain_") + dtype_name(t), [t] { return prenorm_chain(t); }});
            f.push_back({std::string("norm_qkv_") + dtype_name(t), [t] { return norm_qkv(t); }});
        }
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16}) {
            for (int64_t T : {1, 3, 12}) {
                f.push_back({std::string("fused_layer_") + dtype_name(t) + "_t" + std::to_string(T),
                             [t, T] { return fused_layer(t, T); }});
            }
        }
        // One query head per KV head at 128 wide (llama2-7b), 3 (smollm2), 8.
        f.push_back({"fused_layer_q4_0_t1_hd128_h2_kv2", [] { return fused_layer(DType::Q4_0, 1, 128, 2, 2); }});
        f.push_back({"fused_layer_q4_0_t1_hd64_h6_kv2", [] { return fused_layer(DType::Q4_0, 1, 64, 6, 2); }});
        f.push_back({"fused_layer_q4_0_t1_hd64_h8_kv1", [] { return fused_layer(DType::Q4_0, 1, 64, 8, 1); }});
        for (const auto& [T, hd, mode] : {std::tuple{int64_t{1}, int64_t{64}, RopeMode::Normal},
                                          std::tuple{int64_t{1}, int64_t{128}, RopeMode::Neox},
                                          std::tuple{int64_t{5}, int64_t{64}, RopeMode::Neox},
                                          std::tuple{int64_t{3}, int64_t{128}, RopeMode::Normal},
                                          std::tuple{int64_t{5}, int64_t{64}, RopeMode::Normal},
                                          std::tuple{int64_t{5}, int64_t{128}, RopeMode::Neox},
                                          std::tuple{int64_t{2}, int64_t{64}, RopeMode::Neox},
                                          std::tuple{int64_t{1}, int64_t{128}, RopeMode::Normal},
                                          std::tuple{int64_t{1}, int64_t{64}, RopeMode::Neox}}) {
            const auto fn = [T, hd, mode] { return fused_layer(DType::Q4_0, T, hd, 4, 2, DType::Q8_0, mode); };
            f.push_back({fn()->name, fn});
        }
        // One token over Q8_0 caches: the fused RoPE + cache writes + attention
        // launch, a query head per block (2 of 2) and a group split over
        // blocks (6 of 2).
        for (const auto& [hd, n_head, mode] : {std::tuple{int64_t{128}, int64_t{2}, RopeMode::Neox},
                                               std::tuple{int64_t{64}, int64_t{6}, RopeMode::Normal}}) {
            const auto fn = [hd, n_head, mode] { return fused_layer(DType::Q4_0, 1, hd, n_head, 2, DType::Q8_0, mode); };
            f.push_back({fn()->name, fn});
        }
        for (int64_t T : {1, 5}) {
            const auto fn = [T] { return fused_layer(DType::Q4_0, T, 64, 4, 2, DType::F16, RopeMode::Neox); };
            f.push_back({fn()->name, fn});
        }
        return f;
    }();
    return list;
}

// Reads into pinned host memory go straight there (no staging copy), land
// by synchronize(), and unpinned memory keeps working through the staging.
TEST(CudaBackend, ReadsIntoPinnedHostMemory) {
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
    Graph g;
    Tensor* t = g.new_tensor(DType::F32, {1000}, "t");
    std::unique_ptr<Buffer> buf = gpu->alloc(t->nbytes(), BufferKind::Compute);
    t->buffer = buf.get();
    std::vector<float> src(1000);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
    buf->write(0, src.data(), t->nbytes());
    std::vector<float> pinned(1500, -1.0f), plain(1000, -1.0f);
    gpu->pin_host(pinned.data(), pinned.size() * sizeof(float));
    gpu->get_tensor_async(*t, pinned.data() + 200, 0, t->nbytes());
    gpu->get_tensor_async(*t, plain.data(), 0, t->nbytes());
    gpu->synchronize();
    gpu->unpin_host(pinned.data());
    for (size_t i = 0; i < src.size(); ++i) {
        ASSERT_EQ(pinned[200 + i], src[i]) << i;
        ASSERT_EQ(plain[i], src[i]) << i;
    }
    EXPECT_EQ(pinned[199], -1.0f);
    EXPECT_EQ(pinned[1200], -1.0f);
}

// Small inputs are held back and sent in one batch: they land in the order
// they were written (a later write to the same bytes wins), the caller may
// reuse its memory at once, and a read, a blocking copy or a synchronize
// sends them first.
TEST(CudaBackend, HeldInputWritesLandInOrder) {
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
    Graph g;
    Tensor* t = g.new_tensor(DType::I32, {64}, "t");
    std::unique_ptr<Buffer> buf = gpu->alloc(t->nbytes(), BufferKind::Compute);
    t->buffer = buf.get();
    std::vector<int32_t> a(64), b(8);
    for (int i = 0; i < 64; ++i) a[static_cast<size_t>(i)] = 1000 + i;
    for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = -i;
    gpu->set_tensor_async(*t, a.data(), 0, t->nbytes());
    gpu->set_tensor_async(*t, b.data(), 16 * sizeof(int32_t), b.size() * sizeof(int32_t));
    std::fill(a.begin(), a.end(), 7);  // ours again once the calls return
    std::fill(b.begin(), b.end(), 7);
    std::vector<int32_t> back(64, 0);
    gpu->get_tensor_async(*t, back.data(), 0, t->nbytes());
    gpu->synchronize();
    for (int i = 0; i < 64; ++i) {
        const int32_t want = i >= 16 && i < 24 ? -(i - 16) : 1000 + i;
        ASSERT_EQ(back[static_cast<size_t>(i)], want) << i;
    }
    // A blocking read of the buffer also sees held writes.
    const int32_t one = 42;
    gpu->set_tensor_async(*t, &one, 63 * sizeof(int32_t), sizeof(one));
    int32_t last = 0;
    buf->read(63 * sizeof(int32_t), &last, sizeof(last));
    EXPECT_EQ(last, 42);
}

// A recorded step copies its held inputs in its first kernel, from host
// memory of its own: every replay computes with that replay's inputs, and a
// step whose inputs reached the device some other way (a blocking write,
// nothing held) is recorded anew rather than replayed with the last held
// bytes.
TEST(CudaBackend, RecordedStepCopiesItsInputs) {
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
    if (const char* v = std::getenv("LANTERN_GRAPHS"); v != nullptr && std::string(v) == "0") {
        GTEST_SKIP() << "graphs are off (LANTERN_GRAPHS=0)";
    }
    Graph g;
    Tensor* x = g.new_tensor(DType::F32, {64}, "x");
    Tensor* c = g.new_tensor(DType::F32, {64}, "c");
    Tensor* y = g.add(x, c);
    std::unique_ptr<Buffer> buf = gpu->alloc(3 * 256, BufferKind::Compute);
    for (Tensor* t : {x, c, y}) t->buffer = buf.get();
    c->offset = 256;
    y->offset = 512;
    std::vector<float> cv(64), xv(64), back(64);
    for (int i = 0; i < 64; ++i) cv[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i);
    buf->write(256, cv.data(), c->nbytes());
    ComputeHints hints;
    hints.step_key = gpu->new_step_key();
    const BackendStats before = gpu->stats();
    auto step = [&](float base, bool held) {
        for (int i = 0; i < 64; ++i) xv[static_cast<size_t>(i)] = base + static_cast<float>(i);
        if (held) {
            gpu->set_tensor_async(*x, xv.data(), 0, x->nbytes());
        } else {
            buf->write(0, xv.data(), x->nbytes());
        }
        std::fill(xv.begin(), xv.end(), -1.0f);  // held bytes are the backend's own copy
        gpu->compute({y}, hints);
        gpu->get_tensor_async(*y, back.data(), 0, y->nbytes());
        gpu->synchronize();
        for (int i = 0; i < 64; ++i) {
            ASSERT_EQ(back[static_cast<size_t>(i)], base + static_cast<float>(i) + cv[static_cast<size_t>(i)])
                << "base " << base << ", element " << i;
        }
    };
    for (float base : {1.0f, 100.0f, -50.0f}) step(base, true);
    EXPECT_EQ(gpu->stats().graph_captures - before.graph_captures, 1u);
    EXPECT_EQ(gpu->stats().graph_replays - before.graph_replays, 2u);
    step(7.0f, false);  // nothing held: a new recording, not the last held bytes
    EXPECT_EQ(gpu->stats().graph_captures - before.graph_captures, 2u);
    step(9.0f, true);
    step(-3.0f, true);
}

// LANTERN_GRAPHS_PREFILL records prompt steps, but not those with a
// mixture of experts' grouped GEMMs (they wait on the host for the count
// of pairs per expert, which a recording cannot): those run as they come,
// through the GEMMs. A dense prompt step is still recorded.
TEST(CudaBackend, MoePromptStepsRunUnrecordedUnderPrefillGraphs) {
    if (cuda_backend() == nullptr) GTEST_SKIP() << "no CUDA device";
    ScopedEnv prefill("LANTERN_GRAPHS_PREFILL", "1");
    std::unique_ptr<Backend> gpu;
    for (const BackendFactory& f : gpu_backend_factories()) {
        if (std::string(f.name) == "cuda") gpu = f.create(0);
    }
    ASSERT_NE(gpu, nullptr);
    auto cases = make_op_cases(kSeed);
    auto named = [&](const std::string& name) -> OpCase& {
        for (auto& c : cases) {
            if (c->name == name) return *c;
        }
        throw std::runtime_error("no case " + name);
    };
    const ComputeHints prompt{.prefill = true};
    BackendStats before = gpu->stats();
    expect_matches_cpu(named("moe_ffn_q4_K_T24"), *gpu, "as a prompt step", prompt);
    EXPECT_EQ(gpu->stats().graph_captures, before.graph_captures);
    EXPECT_EQ(gpu->stats().eager_steps, before.eager_steps + 1);
    before = gpu->stats();
    expect_matches_cpu(named("mul_mat_f16_512x37x5"), *gpu, "as a prompt step", prompt);
    EXPECT_EQ(gpu->stats().graph_captures, before.graph_captures + 1);
}

class CudaExtraOps : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaExtraOps, MatchesCpu) {
    Backend* gpu = cuda_backend();
    if (gpu == nullptr) GTEST_SKIP() << "no CUDA device";
    ASSERT_LT(GetParam(), extras().size());
    const Extra& e = extras()[GetParam()];
    auto c = e.make();
    EXPECT_EQ(c->name, e.name);
    expect_matches_cpu(*c, *gpu, "recorded");
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaExtraOps, ::testing::Range<size_t>(0, extras().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return extras()[info.param].name; });

}  // namespace
}  // namespace lantern::test
