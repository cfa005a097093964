// The scheduler's step keys (ComputeHints::step_key): a kept plan's splits
// reach their backend with the same key at every compute, and a new plan
// (another graph, or the same graph built again) with keys never used
// before, so a backend may serve a key's recording without comparing nodes.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/scheduler.h"

namespace lantern {
namespace {

// A host backend that runs everything on a CPU backend and records the
// step key of each compute().
class KeyProbe final : public Backend {
public:
    explicit KeyProbe(CpuBackend& cpu) : cpu_(cpu) {}
    const char* name() const override { return "probe"; }
    std::string description() const override { return "records step keys"; }
    bool is_host() const override { return true; }
    std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) override { return cpu_.alloc(size, kind); }
    bool supports(const Tensor& node) const override { return cpu_.supports(node); }
    void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) override {
        keys.push_back(hints.step_key);
        cpu_.compute(nodes, hints);
    }
    std::vector<uint64_t> keys;

private:
    CpuBackend& cpu_;
};

// y = (x + x) * 0.5, x an input.
std::unique_ptr<Graph> make_step(std::vector<float>& x, Tensor*& in, Tensor*& y) {
    auto g = std::make_unique<Graph>();
    in = g->input(DType::F32, {static_cast<int64_t>(x.size())}, "x", x.data(), x.size() * sizeof(float));
    y = g->scale(g->add(in, in), 0.5f);
    g->mark_output(y);
    return g;
}

TEST(SchedulerStepKeys, StableForAPlanNewForANewOne) {
    CpuBackend cpu(1);
    KeyProbe probe(cpu);
    Scheduler sched(probe, nullptr, 1, 0, nullptr);
    std::vector<float> x(16, 1.5f), out(16);

    Tensor *in = nullptr, *y = nullptr;
    std::unique_ptr<Graph> g = make_step(x, in, y);
    for (int i = 0; i < 3; ++i) {
        x.assign(16, static_cast<float>(i));
        g->set_input_data(in, x.data(), x.size() * sizeof(float));
        sched.compute(*g, ComputeHints{});
        sched.read_output(*y, out.data(), out.size() * sizeof(float));
        EXPECT_EQ(out[3], static_cast<float>(i));
    }
    ASSERT_EQ(probe.keys.size(), 3u);
    EXPECT_NE(probe.keys[0], 0u);
    EXPECT_EQ(probe.keys[1], probe.keys[0]);
    EXPECT_EQ(probe.keys[2], probe.keys[0]);

    // The same graph built again (after forget(), as a context rebuilds a
    // step): a key never seen, kept for its computes.
    sched.forget(*g);
    g = make_step(x, in, y);
    sched.compute(*g, ComputeHints{});
    sched.compute(*g, ComputeHints{});
    // Another graph beside it: its own key.
    Tensor *in2 = nullptr, *y2 = nullptr;
    std::unique_ptr<Graph> other = make_step(x, in2, y2);
    sched.compute(*other, ComputeHints{});
    sched.synchronize();
    ASSERT_EQ(probe.keys.size(), 6u);
    EXPECT_EQ(probe.keys[3], probe.keys[4]);
    const std::set<uint64_t> distinct(probe.keys.begin(), probe.keys.end());
    EXPECT_EQ(distinct.size(), 3u);
    EXPECT_EQ(distinct.count(0), 0u);
}

}  // namespace
}  // namespace lantern
