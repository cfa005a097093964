// Places each node of a step on a backend, moves data between backends,
// allocates intermediates and runs the step.
//
// Placement: a node of layer L runs on the GPU backend when L is among the
// last n_gpu_layers layers (the input stage, layer -1, and the output stage,
// layer n_layer, count as on the GPU only when n_gpu_layers > n_layer), and
// on the CPU otherwise or when the GPU backend lacks the op or type. A fused
// op a backend lacks is replaced by its unfused default (graph/fusion.h).
// A node that writes into the KV cache runs where that cache lives.
//
// Data: weights come from the model's WeightStore replicas (host backends read
// the mapped file), inputs are copied from the graph's host bytes to each
// backend that reads them, and an intermediate read on another backend than
// the one that made it is copied there before the reading split runs.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/weight_store.h"
#include "graph/graph.h"

namespace lantern {

class Scheduler {
public:
    // `cpu` must be a host backend; `gpu` may be null.
    Scheduler(Backend& cpu, Backend* gpu, int n_layer, int n_gpu_layers, const WeightStore* weights);

    Backend& backend_for_layer(int layer) const;

    // The node list of `g` after fusion defaults, and the backend of each.
    // Changes g (adds expanded nodes) but allocates and runs nothing.
    struct Assignment {
        std::vector<Tensor*> nodes;
        std::vector<Backend*> backends;
    };
    Assignment assign(Graph& g) const;

    // Runs a step: returns once the work is enqueued. Output tensors (marked
    // with Graph::mark_output) are then read with read_output. The graph must
    // outlive the step (call synchronize() or read_output before dropping it).
    //
    // The first compute of a graph plans it (and rewrites its sources to the
    // copies and replicas each backend reads). The plan is kept: computing the
    // same graph again, with new input bytes (Graph::set_input_data), skips
    // all host-side planning, which is what makes a decode step cheap. A plan
    // goes stale when another graph's plan had to grow a compute buffer; then
    // ready() is false and the caller builds the graph anew.
    void compute(Graph& g, const ComputeHints& hints);
    bool ready(const Graph& g) const;
    // Drops the plan kept for g (call before destroying a computed graph
    // whose address could be reused).
    void forget(const Graph& g);
    // Plans `g` (placement, copies, allocation) without running it, so that
    // compute buffers are sized for the largest step up front.
    void reserve(Graph& g);
    // Blocking read of an output tensor's bytes.
    void read_output(const Tensor& t, void* dst, size_t n);
    void synchronize();
    // Backend::pin_host / unpin_host on every backend.
    void pin_host(void* p, size_t n);
    void unpin_host(void* p);

    // Bytes of the compute buffer on a backend (0 if none yet).
    size_t compute_bytes(const Backend& b) const;

private:
    struct Transfer {
        Tensor* dst;
        const Tensor* src;                  // null for a graph input
        const std::vector<uint8_t>* bytes;  // a graph input's host bytes
    };
    // A run of nodes on one backend, the copies it needs first, and the
    // step key the backend knows it by (ComputeHints::step_key).
    struct Split {
        Backend* backend = nullptr;
        std::vector<Tensor*> nodes;
        std::vector<Transfer> transfers;
        uint64_t key = 0;
    };
    struct Plan {
        std::vector<Split> splits;
        uint64_t generation = 0;  // buffers_generation_ when made
    };
    Plan prepare(Graph& g);
    Buffer& ensure_buffer(Backend& b, size_t bytes);
    void transfer(const Transfer& t, Backend& to);

    Backend& cpu_;
    Backend* gpu_;
    int n_layer_;
    int n_gpu_layers_;
    const WeightStore* weights_;
    std::unordered_map<const Backend*, std::unique_ptr<Buffer>> buffers_;
    uint64_t buffers_generation_ = 0;  // bumped whenever a compute buffer is replaced
    std::unordered_map<const Graph*, Plan> plans_;
};

}  // namespace lantern
