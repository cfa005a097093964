// GraphCache matching: a recording is replayed only while every node and
// every source has the properties it was recorded with, whether the step
// hands over the recorded tensor objects (the fast path of steady decoding)
// or other tensors with the same properties.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <vector>

#include "backends/graph_cache.h"

namespace lantern {
namespace {

struct Recording {
    int id;
};

// A two-node step: c = a (+) b, d = c (*) w; a, b, w are sources outside
// the node list.
struct Step {
    std::deque<Tensor> pool;  // stable addresses
    Tensor* a;
    Tensor* b;
    Tensor* w;
    Tensor* c;
    Tensor* d;
    std::vector<Tensor*> nodes;

    Step() {
        a = leaf(0);
        b = leaf(64);
        w = leaf(128);
        c = node(Op::Add, a, b, 256);
        d = node(Op::Mul, c, w, 512);
        nodes = {c, d};
    }
    Tensor* leaf(size_t offset) {
        Tensor& t = pool.emplace_back();
        t.ne = {16, 1, 1, 1};
        t.nb = {4, 64, 64, 64};
        t.offset = offset;
        return &t;
    }
    Tensor* node(Op op, Tensor* x, Tensor* y, size_t offset) {
        Tensor* t = leaf(offset);
        t->op = op;
        t->src[0] = x;
        t->src[1] = y;
        return t;
    }
};

class GraphCacheTest : public ::testing::Test {
protected:
    GraphCache<Recording> cache{4};
    Step step;
    void SetUp() override { cache.insert(step.nodes, std::make_unique<Recording>(Recording{7})); }
};

TEST_F(GraphCacheTest, SameTensorsReplay) {
    for (int i = 0; i < 3; ++i) {
        const Recording* r = cache.lookup(step.nodes);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->id, 7);
    }
    EXPECT_EQ(cache.stats().graph_replays, 3u);
    EXPECT_EQ(cache.stats().graph_misses, 0u);
}

TEST_F(GraphCacheTest, OutsideSourceChangeMisses) {
    step.w->offset = 4096;  // a weight moved: the recording reads the old address
    EXPECT_EQ(cache.lookup(step.nodes), nullptr);
    step.w->offset = 128;
    EXPECT_NE(cache.lookup(step.nodes), nullptr);
    step.a->nb[1] = 128;
    EXPECT_EQ(cache.lookup(step.nodes), nullptr);
}

TEST_F(GraphCacheTest, NodeChangeMisses) {
    step.d->set_param_i(0, 3);
    EXPECT_EQ(cache.lookup(step.nodes), nullptr);
    step.d->set_param_i(0, 0);
    step.c->ne[0] = 8;
    EXPECT_EQ(cache.lookup(step.nodes), nullptr);
}

TEST_F(GraphCacheTest, SourceSwapComparesProperties) {
    // Same node objects, a source replaced by another tensor: equal
    // properties still replay, different ones do not.
    Tensor* twin = step.leaf(128);
    step.d->src[1] = twin;
    EXPECT_NE(cache.lookup(step.nodes), nullptr);
    twin->offset = 192;
    EXPECT_EQ(cache.lookup(step.nodes), nullptr);
}

TEST_F(GraphCacheTest, OtherTensorsWithSameProperties) {
    Step other;  // a rebuilt graph: new objects, same shapes and addresses
    EXPECT_NE(cache.lookup(other.nodes), nullptr);
    other.b->offset = 0;
    EXPECT_EQ(cache.lookup(other.nodes), nullptr);
}

// A keyed step (ComputeHints::step_key) is served without the comparison
// while its key is the armed one; verify() compares afterwards and drops the
// key when the nodes no longer match, so the next step is compared in full.
TEST_F(GraphCacheTest, KeyedStepsCompareInVerify) {
    const uint64_t key = 42;
    ASSERT_NE(cache.lookup(step.nodes, key), nullptr);  // compared in full, arms the key
    EXPECT_TRUE(cache.verify());
    step.w->offset = 4096;
    // Served by the key alone: the change is not seen here...
    EXPECT_NE(cache.lookup(step.nodes, key), nullptr);
    // ...but by verify(), which drops the key.
    EXPECT_FALSE(cache.verify());
    EXPECT_EQ(cache.lookup(step.nodes, key), nullptr);
    step.w->offset = 128;
    ASSERT_NE(cache.lookup(step.nodes, key), nullptr);
    EXPECT_EQ(cache.stats().graph_replays, 3u);
    EXPECT_EQ(cache.stats().graph_misses, 1u);
    EXPECT_TRUE(cache.verify());
}

TEST_F(GraphCacheTest, KeyServesOnlyItsRecording) {
    Step other;
    other.d->op = Op::Add;  // a different step
    cache.insert(other.nodes, std::make_unique<Recording>(Recording{8}), 5);
    const Recording* r = cache.lookup(other.nodes, 5);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->id, 8);
    // Another key (or none) is compared in full and finds the first step.
    r = cache.lookup(step.nodes, 6);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->id, 7);
    // Key 5 is no longer armed: its step is compared again.
    other.c->ne[0] = 8;
    EXPECT_EQ(cache.lookup(other.nodes, 5), nullptr);
    // clear() forgets the armed key with the recordings.
    ASSERT_NE(cache.lookup(step.nodes, 6), nullptr);
    cache.clear();
    EXPECT_EQ(cache.lookup(step.nodes, 6), nullptr);
}

}  // namespace
}  // namespace lantern
