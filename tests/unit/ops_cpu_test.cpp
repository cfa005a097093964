// Every op on the CPU backend against the scalar double-precision reference,
// and the unfused defaults of the fused ops against the fused kernels.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/scheduler.h"
#include "op_harness.h"
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

}  // namespace
}  // namespace lantern::test
