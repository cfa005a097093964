// The CPU backend's thread pool: regions, barriers and items claimed on demand.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "backends/cpu/thread_pool.h"

namespace lantern::test {
namespace {

// Every thread claims items until they run out, twice, with a barrier
// between: each item is handed out exactly once per round, and the count
// starts again from 0 after the barrier and in the next region.
void claim_twice(int n_threads) {
    constexpr int kItems = 1000;
    ThreadPool pool(n_threads);
    std::vector<std::atomic<int>> hits(kItems);
    std::atomic<int> threads_seen{0};
    pool.run([&](int, int) {
        threads_seen.fetch_add(1);
        for (int round = 0; round < 2; ++round) {
            for (int64_t item = pool.claim(); item < kItems; item = pool.claim()) hits[item].fetch_add(1);
            if (round == 0) pool.barrier();
        }
    });
    EXPECT_EQ(threads_seen.load(), n_threads);
    for (int i = 0; i < kItems; ++i) ASSERT_EQ(hits[i].load(), 2) << "item " << i;
    // The region ended without a barrier; a new one starts from 0 too.
    std::atomic<int> first{-1};
    pool.run([&](int ith, int) {
        if (ith == 0) first.store(static_cast<int>(pool.claim()));
    });
    EXPECT_EQ(first.load(), 0);
}

TEST(ThreadPool, ClaimsEachItemOncePerBarrier) {
    claim_twice(1);
    claim_twice(2);
    claim_twice(4);
}

}  // namespace
}  // namespace lantern::test
