// Which kernels a CUDA step launches: the node list, with the patterns of a
// transformer layer fused (each fused launch writes everything its nodes
// would have written, so any later reader sees the same bytes):
//   MulMat x 2..3 on one activation (Q, K, V)     -> one matrix-vector launch
//   MulMat gate, MulMat up, SiluMul(gate, up)     -> one launch, pairs of rows
//   RopeQK, KvStore(K rows), KvStore(V rows), Attention (one token)
//                                                 -> the attention launch, rotating
//                                                    and writing the new rows first
//   RopeQK, KvStore(K rows), KvStore(V rows)      -> one RoPE + cache-write launch
//   AddRmsNorm (one row) before a matrix-vector launch that reads its normed
//   slice, or RmsNorm (one row: the first layer's) before one that reads it
//                                                 -> computed inside that launch
// A decode layer is then 5 launches: add+norm+QKV, rope+store+attention, wo,
// add+norm+gate/up/silu, down. The backend's fusion_window() (4) keeps every
// input of a group intact until the group's last node, so no output of a
// fused launch can alias an input another block of it still reads.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graph/tensor.h"

namespace lantern::cuda {

struct Launch {
    enum class Kind : uint8_t { Single, MatVecGroup, GateUpSilu, RopeStore, RopeStoreAttention };
    Kind kind = Kind::Single;
    int count = 1;                          // nodes of the step this launch runs
    int n = 1;                              // entries of `nodes`
    std::array<const Tensor*, 4> nodes{};  // Single: [0]; MatVecGroup: the MulMats;
                                            // GateUpSilu: gate, up, silu; RopeStore: rope, k, v;
                                            // RopeStoreAttention: rope, k, v, attention
    const Tensor* norm = nullptr;           // MatVecGroup / GateUpSilu: a fused AddRmsNorm or RmsNorm before them
    // The fused AddRmsNorm's residual (norm->src[0]) was written before the
    // previous launch, which waits for its own predecessors before it lets
    // this one start: the launch may read it before its grid wait.
    bool residual_settled = false;
};

// Fills `out` (cleared first) for `nodes`, every node supported by the CUDA
// backend and allocated. `fuse_attention` false: RoPE + cache writes and the
// attention after them stay two launches (LANTERN_CUDA_FUSE_ATTENTION=0).
void plan_launches(const std::vector<Tensor*>& nodes, std::vector<Launch>& out, bool fuse_attention = true);

}  // namespace lantern::cuda
