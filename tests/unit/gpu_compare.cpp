#include "gpu_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "quant/quant.h"

namespace lantern::test {
namespace {

bool cpu_q8k(DType t) {
    const quant::TypeOps* ops = quant::type_ops(t);
    return ops != nullptr && ops->vec_dot_type == DType::Q8_K;
}

// Whether a case multiplies by (or looks up rows of) such weights.
bool has_q8k_weights(const OpCase& c) {
    for (const Tensor* n : c.graph.nodes()) {
        if ((n->op == Op::MulMat || n->op == Op::GetRows) && cpu_q8k(n->src[0]->type)) return true;
        if (n->op == Op::MoeFfn && (cpu_q8k(n->src[2]->type) || cpu_q8k(n->src[4]->type))) return true;
    }
    return false;
}

}  // namespace

void expect_matches_cpu(OpCase& c, Backend& gpu, const std::string& mode, ComputeHints hints) {
    SCOPED_TRACE(c.name + " (" + mode + ")");
    CpuBackend cpu(2);
    const bool q8k = has_q8k_weights(c);
    const CaseResult want = run_case(c, cpu);
    const CaseResult got = run_case(c, gpu, 0, hints);
    ASSERT_TRUE(want.supported);
    ASSERT_TRUE(got.supported) << c.name << " is not supported by the " << gpu.name() << " backend";
    std::vector<std::vector<float>> exact;
    if (q8k) {
        std::unique_ptr<Backend> ref = make_reference_backend();
        exact = run_case(c, *ref).outputs;
        ASSERT_EQ(exact.size(), got.outputs.size());
    }
    EXPECT_TRUE(got.guards_intact) << c.name << " wrote outside its output";
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t i = 0; i < got.outputs.size(); ++i) {
        if (q8k) {
            const double bound = std::max(c.tolerance, nmse(want.outputs[i], exact[i]));
            EXPECT_LE(nmse(got.outputs[i], exact[i]), bound) << c.name << " output " << i << " (against the reference)";
        } else {
            EXPECT_LE(nmse(got.outputs[i], want.outputs[i]), c.tolerance) << c.name << " output " << i;
        }
        double mag = 0;
        for (float v : got.outputs[i]) mag += std::abs(v);
        EXPECT_GT(mag, 0.0) << c.name << " output " << i << " is all zeros";
    }
}

}  // namespace lantern::test
