#include "backends/cpu/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LANTERN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define LANTERN_PAUSE() asm volatile("yield")
#else
#define LANTERN_PAUSE() std::this_thread::yield()
#endif

namespace lantern {

namespace {
constexpr int kSpinsBeforeSleep = 200000;
// Waits inside a region spin this long, then yield the core on every check:
// on an oversubscribed machine a pure spin would wait out a whole scheduler
// quantum for a descheduled peer at every barrier.
constexpr int kSpinsBeforeYield = 4000;

template <class Done>
void wait_until(Done&& done) {
    int spins = 0;
    while (!done()) {
        if (spins < kSpinsBeforeYield) {
            LANTERN_PAUSE();
            ++spins;
        } else {
            std::this_thread::yield();
        }
    }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    claimed_.store(0, std::memory_order_relaxed);
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    job_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    fn(0, n_threads_);
    wait_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) {
        claimed_.store(0, std::memory_order_relaxed);
        return;
    }
    const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        claimed_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_release);
        return;
    }
    wait_until([&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
}

void ThreadPool::worker(int ith) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinsBeforeSleep) {
            if (spins < kSpinsBeforeYield) {
                LANTERN_PAUSE();
            } else {
                std::this_thread::yield();
            }
            ++spins;
        }
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load() != seen; });
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        (*job_)(ith, n_threads_);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace lantern
