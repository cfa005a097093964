// A fixed set of worker threads that run one parallel region at a time.
//
// run(fn) calls fn(ith, nth) on every thread (the caller is thread 0) and
// returns when all are done. Inside fn, barrier() waits for all threads:
// the CPU backend runs a whole node list in one region with a barrier
// between nodes, so a step costs one wake-up, not one per op. Workers spin
// briefly before sleeping, since the next region usually follows at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lantern {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    void run(const std::function<void(int ith, int nth)>& fn);
    // Only from inside run().
    void barrier();
    // Work items handed out on demand inside a region: 0, 1, 2, ... from the
    // last barrier (or the region's start) on. Kernels that deal items with
    // it are separated from the previous such kernel by a barrier, which the
    // CPU backend places between nodes.
    int64_t claim() { return claimed_.fetch_add(1, std::memory_order_relaxed); }

private:
    void worker(int ith);

    int n_threads_;
    std::vector<std::thread> threads_;
    const std::function<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    // Sense-reversing barrier.
    std::atomic<int> barrier_count_{0};
    std::atomic<uint32_t> barrier_phase_{0};
    std::atomic<int64_t> claimed_{0};
};

}  // namespace lantern
