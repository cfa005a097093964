// What moe.cu (routing, the per-pair kernels) and moe_prompt.cu (grouped
// GEMMs for prompts) share: a MoeFfn node's sizes and its workspace.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda::moe {

constexpr int kMaxExperts = 1024;
constexpr int kMaxUsed = 32;

struct Dims {
    int64_t D, F, E, T;  // model width, expert hidden width, experts, tokens
    int k;               // experts per token
    bool norm;           // the chosen weights renormalised to sum to 1
    int64_t pairs() const { return T * k; }
};

inline Dims dims_of(const Tensor& node) {
    return {node.src[0]->ne[0], node.src[2]->ne[1], node.src[1]->ne[1], node.src[0]->ne[1], node.param_i(0),
            node.param_i(1) != 0};
}

inline size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

// The router's rows are summed in slices of this many values (moe.cu).
constexpr int64_t kRouteSlice = 512;
inline __host__ __device__ int64_t route_slices(const Dims& d) { return (d.D + kRouteSlice - 1) / kRouteSlice; }

// The workspace opens with the routing: ids [P] i32 (each pair's expert),
// weights [P] f32, the router's slices' sums [T, E, slices] f32; each
// path's own scratch follows at routing_bytes().
inline size_t routing_bytes(const Dims& d) {
    return 2 * align256(static_cast<size_t>(d.pairs()) * 4) +
           align256(static_cast<size_t>(d.T * d.E * route_slices(d)) * 4);
}

// moe_prompt.cu. Whether the node's step runs as grouped GEMMs: enough
// pairs per expert that dequantizing each expert once beats reading its
// rows once per pair (prompt_wanted), and a stream not being captured (the
// host waits for the count of pairs per expert).
bool prompt_wanted(const Ctx& ctx, const Tensor& node);
bool prompt_path(const Ctx& ctx, const Tensor& node);
// The prompt path's scratch after the routing (bytes) and its dequantized
// weight (in ctx.ws.dequant).
void need_prompt(const Tensor& node, const Dims& d, WorkspaceNeeds& needs);
// Runs the experts and the weighted sum after routing wrote ids and weights.
void run_prompt(const Ctx& ctx, const Tensor& node, const Dims& d, const int32_t* ids, const float* weights,
                uint8_t* scratch);

}  // namespace lantern::cuda::moe
