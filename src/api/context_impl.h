// Context::Impl: what context.cpp (decode) and sequence_state.cpp (a
// sequence's cache saved and loaded) share.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "api/model_impl.h"
#include "backends/scheduler.h"

namespace lantern {

struct Context::Impl {
    Model::Impl& m;
    ContextParams params;
    std::unique_ptr<Scheduler> sched;
    Graph cache_graph;  // owns the KV cache leaves
    KvCache kv;
    std::vector<std::unique_ptr<Buffer>> cache_buffers;
    std::vector<int> seq_len;
    // Per sequence: its last token's logits were asked for (PerfStats: one
    // token appended after it is generation).
    std::vector<uint8_t> ends_in_output;
    std::vector<float> logits;  // pinned (Scheduler::pin_host) while it has storage
    void* logits_pinned = nullptr;
    int n_out = 0;
    PerfStats perf;

    Impl(Model::Impl& model, const ContextParams& p) : m(model), params(p) {}

    // logits sized for n floats; a new allocation is pinned in place of the
    // old one (decode reads every step's logits into it).
    void size_logits(size_t n) {
        if (n > logits.capacity()) {
            if (logits_pinned != nullptr) sched->unpin_host(logits_pinned);
            logits_pinned = nullptr;
            std::vector<float>().swap(logits);
            logits.reserve(n);
        }
        logits.resize(n);
        if (logits_pinned == nullptr && logits.capacity() > 0) {
            logits_pinned = logits.data();
            sched->pin_host(logits_pinned, logits.capacity() * sizeof(float));
        }
    }

    // One forward pass's graph, kept and re-run while the next pass has the
    // same shape (token count and which rows want logits): only the input
    // bytes change, so the scheduler skips planning and a GPU backend replays
    // its recorded graph.
    struct Step {
        Graph graph;
        Tensor* logits = nullptr;
        StepInputs in;
        std::vector<int32_t> out_rows;  // rows of the pass with logits
    };
    static constexpr size_t kMaxSteps = 4;
    std::map<std::pair<int64_t, std::vector<int32_t>>, std::unique_ptr<Step>> steps;

    // The step for tokens [begin, end) of b, built or reused, inputs filled.
    Step& step_for(const Batch& b, size_t begin, size_t end, bool all_outputs);
    std::unique_ptr<Step> build_step(const Batch& b, size_t begin, size_t end, const std::vector<int32_t>& rows) const;
    void place_caches();
};

}  // namespace lantern
