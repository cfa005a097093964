// Every op on the CPU backend against the scalar double-precision reference,
// and the unfused defaults of the fused ops against the fused kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/scheduler.h"
#include "op_harness.h"
#include "quant/packed.h"
#include "test_util.h"

namespace lantern::test {
namespace {

constexpr uint32_t kSeed = 1234;

class CpuOps : public ::testing::TestWithParam<size_t> {};

TEST_P(CpuOps, MatchesReference) {
    auto cases = make_op_cases(kSeed);
    ASSERT_LT(GetParam(), cases.size());
    OpCase& c = *cases[GetParam()];
    SCOPED_TRACE(c.name);
    std::unique_ptr<Backend> ref = make_reference_backend();
    CpuBackend cpu(2);
    const CaseResult want = run_case(c, *ref);
    const CaseResult got = run_case(c, cpu);
    ASSERT_TRUE(want.supported);
    ASSERT_TRUE(got.supported) << c.name << " is not supported by the CPU backend";
    EXPECT_TRUE(got.guards_intact) << c.name << " wrote outside its output";
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t i = 0; i < got.outputs.size(); ++i) {
        const double e = nmse(got.outputs[i], want.outputs[i]);
        EXPECT_LE(e, c.tolerance) << c.name << " output " << i;
        // Random inputs: an all-zero output would mean nothing was computed.
        double mag = 0;
        for (float v : want.outputs[i]) mag += std::abs(v);
        EXPECT_GT(mag, 0.0) << c.name;
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, CpuOps, ::testing::Range<size_t>(0, op_case_names(kSeed).size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return op_case_names(kSeed)[info.param]; });

// The scheduler replaces a fused op the backend lacks by its unfused default.
TEST(FusedDefaults, MatchFusedKernels) {
    CpuBackend cpu(2);
    std::unique_ptr<Backend> plain = make_masked_backend(cpu, {Op::AddRmsNorm, Op::RopeQK, Op::MulMatAdd});
    auto run = [&](Backend& b) {
        Graph g;
        const std::vector<float> a = random_floats(96 * 3, 1), c = random_floats(96 * 3, 2), w = random_floats(96, 3);
        const std::vector<float> q = random_floats(64 * 4 * 3, 4), k = random_floats(64 * 2 * 3, 5);
        const std::vector<int32_t> pos = {0, 7, 300};
        Tensor* ta = g.input(DType::F32, {96, 3}, "a", a.data(), a.size() * 4);
        Tensor* tc = g.input(DType::F32, {96, 3}, "c", c.data(), c.size() * 4);
        Tensor* tw = g.input(DType::F32, {96}, "w", w.data(), w.size() * 4);
        Tensor* f = g.add_rms_norm(ta, tc, tw, 1e-5f);
        Tensor* tq = g.input(DType::F32, {64, 4, 3}, "q", q.data(), q.size() * 4);
        Tensor* tk = g.input(DType::F32, {64, 2, 3}, "k", k.data(), k.size() * 4);
        Tensor* tp = g.input(DType::I32, {3}, "pos", pos.data(), pos.size() * 4);
        Tensor* r = g.rope_qk(tq, tk, tp, nullptr, 64, RopeMode::Neox, 10000.0f, 1.0f);
        const std::vector<float> lb = random_floats(16 * 40, 6), x = random_floats(16 * 3, 7), base = random_floats(40 * 3, 8);
        Tensor* sum = g.mul_mat_add(g.input(DType::F32, {16, 40}, "lora_b", lb.data(), lb.size() * 4),
                                    g.input(DType::F32, {16, 3}, "x", x.data(), x.size() * 4),
                                    g.input(DType::F32, {40, 3}, "base", base.data(), base.size() * 4));
        // Consumers of the halves, so the views are read after the defaults ran.
        Tensor* out1 = g.scale(g.fused_slice(f, 1), 1.0f);
        Tensor* out0 = g.scale(g.fused_slice(f, 0), 1.0f);
        Tensor* out2 = g.scale(g.rope_qk_part(r, true), 1.0f);
        Tensor* out3 = g.scale(sum, 1.0f);
        for (Tensor* o : {out0, out1, out2, out3}) g.mark_output(o);
        Scheduler sched(b, nullptr, 1, 0, nullptr);
        sched.compute(g, ComputeHints{});
        std::vector<std::vector<float>> outs;
        for (Tensor* o : {out0, out1, out2, out3}) {
            std::vector<float> v(static_cast<size_t>(o->n_elements()));
            sched.read_output(*o, v.data(), v.size() * 4);
            outs.push_back(v);
        }
        return outs;
    };
    const auto fused = run(cpu);
    const auto unfused = run(*plain);
    ASSERT_EQ(fused.size(), unfused.size());
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_LE(nmse(unfused[i], fused[i]), 1e-12) << "output " << i;
}

// Attention over several key blocks, against the reference: a prompt of 37
// consecutive positions deep into one sequence (query blocks of 16 and a
// remainder, rows left over by the register tiles) and a decode row of
// another; head sizes whose vectors leave remainders (72, 80), a window and
// a softcap crossing key blocks, and an f32 cache.
TEST(CpuAttention, LongRangesMatchReference) {
    struct Shape {
        int64_t hd, n_head, n_kv;
        int window;
        float softcap;
        DType cache;
    };
    for (Shape sh : {Shape{64, 8, 2, 0, 0.0f, DType::F16}, Shape{72, 6, 2, 0, 0.0f, DType::F16},
                     Shape{80, 3, 1, 100, 0.0f, DType::F16}, Shape{128, 4, 4, 0, 30.0f, DType::F32}}) {
        SCOPED_TRACE("hd " + std::to_string(sh.hd) + " heads " + std::to_string(sh.n_head) + "/" + std::to_string(sh.n_kv));
        OpCase c;
        CaseLeaves b{c, std::mt19937(static_cast<uint32_t>(sh.hd * 7 + sh.n_head))};
        const int n_ctx = 200;
        std::vector<int32_t> pos, seq;
        for (int32_t p = 120; p < 157; ++p) pos.push_back(p), seq.push_back(0);
        pos.push_back(170), seq.push_back(1);
        const auto T = static_cast<int64_t>(pos.size());
        Tensor* q = b.leaf(DType::F32, {sh.hd, sh.n_head, T}, "q", -2.0f, 2.0f);
        Tensor* kc = b.leaf(sh.cache, {sh.hd * sh.n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
        Tensor* vc = b.leaf(sh.cache, {sh.hd * sh.n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
        c.outputs.push_back(c.graph.attention(q, kc, vc, b.ints(pos, "pos"), b.ints(seq, "seq"), static_cast<int>(sh.n_kv),
                                              n_ctx, 1.0f / std::sqrt(static_cast<float>(sh.hd)), sh.softcap, sh.window));
        std::unique_ptr<Backend> ref = make_reference_backend();
        CpuBackend cpu(2);
        const CaseResult want = run_case(c, *ref);
        const CaseResult got = run_case(c, cpu);
        ASSERT_TRUE(want.supported);
        ASSERT_TRUE(got.supported);
        EXPECT_TRUE(got.guards_intact);
        EXPECT_LE(nmse(got.outputs[0], want.outputs[0]), 1e-9);
    }
}

// Decoding with fewer (query block, KV head) items than threads: each
// item's keys are split into parts run on several threads and merged, some
// parts empty (more parts than key blocks), with and without a window.
TEST(CpuAttention, SplitKeyRangesMatchReference) {
    struct Shape {
        int64_t n_head, n_kv;
        int32_t position;
        int window;
        int threads;
    };
    for (Shape sh : {Shape{4, 1, 170, 0, 2}, Shape{8, 2, 299, 0, 4}, Shape{8, 2, 299, 150, 4}, Shape{6, 3, 40, 0, 8}}) {
        SCOPED_TRACE("heads " + std::to_string(sh.n_head) + "/" + std::to_string(sh.n_kv) + " at " +
                     std::to_string(sh.position) + ", " + std::to_string(sh.threads) + " threads");
        OpCase c;
        CaseLeaves b{c, std::mt19937(static_cast<uint32_t>(sh.position + sh.threads))};
        const int64_t hd = 64;
        const int n_ctx = 320;
        Tensor* q = b.leaf(DType::F32, {hd, sh.n_head, 1}, "q", -2.0f, 2.0f);
        Tensor* kc = b.leaf(DType::F16, {hd * sh.n_kv, n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
        Tensor* vc = b.leaf(DType::F16, {hd * sh.n_kv, n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
        c.outputs.push_back(c.graph.attention(q, kc, vc, b.ints({sh.position}, "pos"), b.ints({0}, "seq"),
                                              static_cast<int>(sh.n_kv), n_ctx, 0.125f, 0.0f, sh.window));
        std::unique_ptr<Backend> ref = make_reference_backend();
        CpuBackend cpu(sh.threads);
        const CaseResult want = run_case(c, *ref);
        const CaseResult got = run_case(c, cpu);
        ASSERT_TRUE(got.supported);
        EXPECT_TRUE(got.guards_intact);
        EXPECT_LE(nmse(got.outputs[0], want.outputs[0]), 1e-9);
    }
}

// Whether any matrix product or MoE expert tensor of the case reads a weight
// the CPU packs.
bool packs_a_weight(const OpCase& c) {
    auto packable = [](const Tensor& w) { return (w.flags & kTensorWeight) && quant::can_pack(w.type, w.ne[1], w.ne[0]); };
    for (const Tensor* n : c.graph.nodes()) {
        if ((n->op == Op::MulMat || n->op == Op::MulMatAdd) && packable(*n->src[0])) return true;
        if (n->op == Op::MoeFfn && (packable(*n->src[2]) || packable(*n->src[4]))) return true;
    }
    return false;
}

// Every matrix-product and MoE case again with its weights packed where
// this CPU packs them (quant/packed.h): the packed tiles against the
// reference.
TEST(CpuPacked, MatrixProductCasesMatchReference) {
    std::unique_ptr<Backend> ref = make_reference_backend();
    int packed_cases = 0, packed_moe = 0;
    for (auto& cp : make_op_cases(kSeed)) {
        OpCase& c = *cp;
        if (!uses_op(c, Op::MulMat) && !uses_op(c, Op::MulMatAdd) && !uses_op(c, Op::MoeFfn)) continue;
        SCOPED_TRACE(c.name);
        CpuBackend cpu(2);
        const CaseResult want = run_case(c, *ref);
        const CaseResult got = run_case(c, cpu, 0, {}, [&](Tensor& w) { cpu.pack_weight(w); });
        ASSERT_TRUE(got.supported);
        EXPECT_TRUE(got.guards_intact);
        const bool expect_packed = packs_a_weight(c);
        EXPECT_EQ(cpu.packed_bytes() > 0, expect_packed);
        packed_cases += expect_packed ? 1 : 0;
        packed_moe += expect_packed && uses_op(c, Op::MoeFfn) ? 1 : 0;
        ASSERT_EQ(got.outputs.size(), want.outputs.size());
        for (size_t i = 0; i < got.outputs.size(); ++i) EXPECT_LE(nmse(got.outputs[i], want.outputs[i]), c.tolerance);
    }
    if (quant::packed_ops(DType::Q4_0) != nullptr) {
        EXPECT_GT(packed_cases, 0);
        EXPECT_GT(packed_moe, 0);
    }
}

// MoE experts packed against the same experts as in the file, for every
// packed type, a decode token and a prompt whose tokens share experts. The
// integer sums are the same; the hidden rows' float order may round a
// quantized value the other way, so the bar is loose for that and tight
// against a wrong slice or activation format (nmse ~1).
TEST(CpuPacked, ExpertsMatchUnpacked) {
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
        if (quant::packed_ops(t) == nullptr) GTEST_SKIP() << "no packed layout for " << dtype_name(t) << " on this CPU";
        for (int64_t T : {1, 7}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " T=" + std::to_string(T));
            OpCase c;
            CaseLeaves b{c, std::mt19937(static_cast<uint32_t>(T) * 31 + static_cast<uint32_t>(t))};
            const int64_t D = 256, F = 512, E = 5;  // rows of several work items per expert
            Tensor* x = b.leaf(DType::F32, {D, T}, "x");
            Tensor* router = b.weight(DType::F32, {D, E}, "router");
            Tensor* gate = b.picked_rows_weight(t, {D, F, E}, "gate_exps");
            Tensor* up = b.picked_rows_weight(t, {D, F, E}, "up_exps");
            Tensor* down = b.picked_rows_weight(t, {F, D, E}, "down_exps");
            c.outputs.push_back(c.graph.moe_ffn(x, router, gate, up, down, 2, true));
            CpuBackend plain(2), packed(2);
            const CaseResult want = run_case(c, plain);
            int n_packed = 0;
            const CaseResult got = run_case(c, packed, 0, {}, [&](Tensor& w) { n_packed += packed.pack_weight(w) ? 1 : 0; });
            EXPECT_EQ(n_packed, 3);  // gate, up and down; not the f32 router
            ASSERT_TRUE(got.supported);
            EXPECT_TRUE(got.guards_intact);
            EXPECT_LE(nmse(got.outputs[0], want.outputs[0]), 1e-6);
        }
    }
}

// Packed against unpacked for every tile width (1 .. 8 activation rows at
// once and remainders), several row blocks, an odd block count, an odd group count
// in the last row block (the 512-bit tiles take groups in pairs), and
// batched activations: the same integer sums, so only the float order
// differs.
TEST(CpuPacked, EveryTileShapeMatchesUnpacked) {
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                    DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
        const int64_t K = dtype_block_size(t) == 32 ? 288 : 768;  // 9 blocks, 3 super-blocks
        if (quant::packed_ops(t) == nullptr) {
            GTEST_SKIP() << "no packed layout for " << dtype_name(t) << " on this CPU";
        }
        for (int64_t M : {1, 2, 3, 6, 7, 12, 13, 67}) {
            for (int64_t batches : {1, 2}) {
                SCOPED_TRACE(std::string(dtype_name(t)) + " M=" + std::to_string(M) + " batches=" + std::to_string(batches));
                OpCase c;
                CaseLeaves b{c, std::mt19937(static_cast<uint32_t>(M * 10 + batches))};
                Tensor* w = b.weight(t, {K, 88}, "w");
                Tensor* x = b.leaf(DType::F32, {K, M, batches}, "x");
                c.outputs.push_back(c.graph.mul_mat(w, x));
                CpuBackend plain(2), packed(2);
                const CaseResult want = run_case(c, plain);
                const CaseResult got = run_case(c, packed, 0, {}, [&](Tensor& wt) { EXPECT_TRUE(packed.pack_weight(wt)); });
                EXPECT_EQ(plain.packed_bytes(), 0u);
                EXPECT_GT(packed.packed_bytes(), 0u);
                ASSERT_TRUE(got.supported);
                EXPECT_TRUE(got.guards_intact);
                EXPECT_LE(nmse(got.outputs[0], want.outputs[0]), 1e-11);
            }
        }
    }
}

// Rows that are not a whole number of groups stay unpacked, in a matrix or
// in each slice of a 3-D tensor (whose slices pack one after another).
TEST(CpuPacked, PacksWholeGroupsOnly) {
    if (quant::packed_ops(DType::Q4_0) == nullptr) GTEST_SKIP() << "no packed Q4_0 on this CPU";
    OpCase c;
    CaseLeaves b{c, std::mt19937(5)};
    Tensor* odd = b.weight(DType::Q4_0, {64, 12}, "odd");
    Tensor* odd_experts = b.weight(DType::Q4_0, {64, 12, 2}, "odd_experts");  // 24 rows, but 12 a slice
    Tensor* experts = b.weight(DType::Q4_0, {64, 16, 3}, "experts");
    CpuBackend cpu(1);
    std::unique_ptr<Buffer> buf = cpu.alloc(odd->nbytes() + odd_experts->nbytes() + experts->nbytes(), BufferKind::Weights);
    odd->buffer = odd_experts->buffer = experts->buffer = buf.get();
    odd->offset = 0;
    odd_experts->offset = odd->nbytes();
    experts->offset = odd_experts->offset + odd_experts->nbytes();
    EXPECT_FALSE(cpu.pack_weight(*odd));
    EXPECT_FALSE(cpu.pack_weight(*odd_experts));
    EXPECT_EQ(cpu.packed_bytes(), 0u);
    EXPECT_TRUE(cpu.pack_weight(*experts));
    EXPECT_EQ(cpu.packed_bytes(), 3 * quant::packed_ops(DType::Q4_0)->packed_bytes(16, 64));
}

}  // namespace
}  // namespace lantern::test
