// Op tests shared by every backend.
//
// An OpCase is a small graph (one op, or a few) over random leaves. run_case
// executes it on a backend through the scheduler's own path (allocation,
// weight upload, compute, readback) with guard bytes around every output,
// and returns the outputs as floats. The reference is ReferenceBackend: a
// plain scalar implementation of every op in double precision.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/graph.h"

namespace lantern::test {

struct OpCase {
    std::string name;
    Graph graph;
    // Host bytes of every leaf (weights, inputs, caches).
    std::vector<std::pair<Tensor*, std::vector<uint8_t>>> leaves;
    std::vector<Tensor*> outputs;
    double tolerance = 1e-7;  // normalised MSE allowed against the reference
    // GPU backends may decline it (a KV cache in a type they do not hold:
    // the scheduler then runs it on the CPU, with the cache in host memory).
    bool gpu_may_decline = false;
    // Rough size of the work, for the perf mode: bytes moved, flops.
    double bytes = 0;
    double flops = 0;
};

// Random leaves of an OpCase, for the harness's cases and hand-built ones:
// each leaf's values are uniform in [lo, hi), then stored in its type (f16,
// bf16, or quantized row by row).
struct CaseLeaves {
    OpCase& c;
    std::mt19937 rng;

    Tensor* leaf(DType type, std::initializer_list<int64_t> ne, const char* name, float lo = -1.0f, float hi = 1.0f,
                 uint32_t flags = 0);
    Tensor* weight(DType type, std::initializer_list<int64_t> ne, const char* name) {
        return leaf(type, ne, name, -1.0f, 1.0f, kTensorWeight);
    }
    // A [K, N] weight of 64 random rows repeated (benchmarks: N rows
    // without quantizing N rows).
    Tensor* repeated_weight(DType type, int64_t K, int64_t N, const char* name);
    // A weight of any shape whose rows are each one of 64 random rows, picked
    // at random: distinct rows (and experts) at the cost of quantizing 64.
    Tensor* picked_rows_weight(DType type, std::initializer_list<int64_t> ne, const char* name);
    Tensor* ints(const std::vector<int32_t>& v, const char* name);
    int32_t uniform_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }
};

// Every op, with several shapes and types. Deterministic in `seed`.
std::vector<std::unique_ptr<OpCase>> make_op_cases(uint32_t seed);
// Whether the case's graph has a node of `op`.
bool uses_op(const OpCase& c, Op op);
// The names of make_op_cases(seed), in order (computed once per seed; for
// naming parameterised tests without building every case per name).
const std::vector<std::string>& op_case_names(uint32_t seed);

struct CaseResult {
    bool supported = false;          // the backend accepts every node
    bool guards_intact = true;       // no write outside an output
    std::vector<std::vector<float>> outputs;
    double seconds_per_run = 0;      // with timing runs > 0
};

// Runs the case on `backend` (weights through upload_weight). When the
// backend lacks a node, supported is false and nothing runs. `timing_runs`
// > 0 repeats the compute that many times and reports the mean time.
// `hints`: what compute() is told (prefill: a prompt step, which GPU
// backends run without recording it unless asked to).
// `after_upload`, if set, is called on each weight once its bytes are in place.
CaseResult run_case(OpCase& c, Backend& backend, int timing_runs = 0, ComputeHints hints = {},
                    const std::function<void(Tensor&)>& after_upload = {});

// sum((a - ref)^2) / sum(ref^2); infinity when either holds a NaN or the
// sizes differ.
double nmse(const std::vector<float>& a, const std::vector<float>& ref);

// A host backend implementing every op plainly, in double precision.
std::unique_ptr<Backend> make_reference_backend();

// Wraps a backend and hides the listed ops from supports() (to exercise
// fallbacks and fused-op defaults).
std::unique_ptr<Backend> make_masked_backend(Backend& inner, std::vector<Op> hidden);

// A "device" backend for testing the scheduler without a GPU: it runs a host
// backend's kernels on host memory but says it is not a host backend, so the
// scheduler gives it weight replicas, its own KV cache and explicit copies,
// exactly as it would a GPU. `hidden` ops fall back to the CPU.
std::unique_ptr<Backend> make_fake_device(Backend& host_inner, std::vector<Op> hidden = {});

}  // namespace lantern::test
