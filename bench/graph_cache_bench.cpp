// Micro-benchmark of a GPU backend's replay check (backends/graph_cache.h),
// which runs on the host before every replayed decode step while the GPU
// waits: GraphCache::lookup of a step shaped like a 30-layer small model's
// (420 nodes reading 330 weights, inputs and cache tensors from 4 buffers).
//   Lookup/same: the recorded node list (steady decoding, the fast path);
//   Lookup/rebuilt: equal tensors in other objects (the full comparison).
#include <benchmark/benchmark.h>

#include <deque>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/graph_cache.h"

namespace lantern {
namespace {

struct Step {
    std::deque<Tensor> pool;  // stable addresses
    std::vector<Tensor*> nodes;

    explicit Step(const std::vector<std::unique_ptr<Buffer>>& bufs) {
        std::vector<Tensor*> outside;
        for (int i = 0; i < 330; ++i) {
            Tensor& t = pool.emplace_back();
            t.buffer = bufs[static_cast<size_t>(i) % bufs.size()].get();
            t.offset = 256 * static_cast<size_t>(i);
            t.ne = {576, 576, 1, 1};
            t.nb = {1, 324, 324 * 576, 324 * 576};
            outside.push_back(&t);
        }
        Tensor* prev = outside[0];
        for (int i = 0; i < 420; ++i) {
            Tensor& t = pool.emplace_back();
            t.buffer = bufs[static_cast<size_t>(i) % bufs.size()].get();
            t.offset = 4096 * static_cast<size_t>(i);
            t.ne = {576, 1, 1, 1};
            t.nb = {4, 2304, 2304, 2304};
            t.op = Op::MulMat;
            t.src[0] = outside[static_cast<size_t>(i * 7) % outside.size()];
            t.src[1] = prev;
            if (i % 3 == 0) t.src[2] = outside[static_cast<size_t>(i * 3) % outside.size()];
            nodes.push_back(&t);
            prev = &t;
        }
    }
};

void Lookup(benchmark::State& state) {
    CpuBackend cpu(1);
    std::vector<std::unique_ptr<Buffer>> bufs;
    for (int i = 0; i < 4; ++i) bufs.push_back(cpu.alloc(1 << 20, BufferKind::Weights));
    Step recorded(bufs);
    Step rebuilt(bufs);
    GraphCache<int> cache(12);
    cache.insert(recorded.nodes, std::make_unique<int>(1));
    const std::vector<Tensor*>& step = state.range(0) == 0 ? recorded.nodes : rebuilt.nodes;
    for (auto _ : state) benchmark::DoNotOptimize(cache.lookup(step));
    if (cache.stats().graph_misses != 0) state.SkipWithError("the step did not match its recording");
}
BENCHMARK(Lookup)->ArgName("rebuilt")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lantern
