// Host side of kernels/attention.cl: KV-cache writes and attention, one
// work-group per (head, token) for generation, tiled for prompts.
#include "backends/opencl/ops.h"

namespace lantern::ocl {
namespace {

bool cache_type_ok(DType t) { return t == DType::F16 || t == DType::F32; }

constexpr int64_t kMaxHeadDim = 256;         // ATT_MAX_HD in attention.cl
constexpr int64_t kPrefillMaxHeadDim = 128;  // PHD
constexpr int64_t kPrefillQueries = 16;      // PQ
constexpr size_t kPrefillGroup = 128;        // PWG
// From this many tokens on, a step's attention uses the tiled kernel.
constexpr int64_t kPrefillMinTokens = 8;

}  // namespace

bool kv_store_accepts(const Tensor& node) {
    const Tensor& src = *node.src[0];
    return src.type == DType::F32 && src.nb[0] == sizeof(float) && cache_type_ok(node.src[1]->type) &&
           node.src[2]->type == DType::I32 && node.src[3]->type == DType::I32 && src.ne[2] == 1 && src.ne[3] == 1;
}

bool attention_accepts(const Tensor& node) {
    const Tensor& q = *node.src[0];
    const int64_t hd = q.ne[0];
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && cache_type_ok(node.src[1]->type) &&
           node.src[2]->type == node.src[1]->type && node.src[3]->type == DType::I32 &&
           node.src[4]->type == DType::I32 && hd <= kMaxHeadDim && hd % 2 == 0 && q.ne[3] == 1 &&
           node.type == DType::F32 && node.nb[0] == sizeof(float);
}

void run_kv_store(Dispatch& d, const Tensor& node) {
    const Tensor& src = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Attention, "kv_store");
    Args(k).tensor(src).u64(src.nb[1]).tensor(node).u64(node.nb[1]).i32(node.type == DType::F16)
        .tensor(*node.src[2]).tensor(*node.src[3]).i32(src.ne[0]).i32(node.param_i(0)).i32(node.ne[1]);
    const size_t g[2] = {static_cast<size_t>(src.ne[0]), static_cast<size_t>(src.ne[1])};
    d.launch(k, 2, g, nullptr);
}

void run_attention(Dispatch& d, const Tensor& node) {
    const Tensor& q = *node.src[0];
    const Tensor& kc = *node.src[1];
    const Tensor& vc = *node.src[2];
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const bool tiled = T >= kPrefillMinTokens && hd <= kPrefillMaxHeadDim;

    const int64_t K = hd * n_head;
    const bool want = hd % 32 == 0 && rows_uniform(node) && d.wanted(act_key(node));
    const Q8Act q8 = want ? d.make_q8(act_key(node), K, T) : Q8Act{};

    cl_kernel k = d.kernel(ProgramId::Attention, tiled ? "attn_prefill" : "attn_decode");
    Args args(k);
    args.tensor(q).u64(q.nb[1]).u64(q.nb[2]).tensor(kc).u64(kc.nb[1]).tensor(vc).u64(vc.nb[1])
        .i32(kc.type == DType::F16).tensor(*node.src[3]).tensor(*node.src[4]).tensor(node).u64(node.nb[1])
        .i32(hd).i32(n_head).i32(node.param_i(0)).i32(node.param_i(1)).i32(kc.ne[1]).f32(node.param_f(2))
        .f32(node.param_f(3)).i32(node.param_i(4)).mem(want ? q8.mem : mem_of(node)).u64(q8.q).u64(q8.ds).i32(want);
    if (tiled) {
        args.i32(T);
        const size_t g[2] = {static_cast<size_t>(n_head) * kPrefillGroup,
                             static_cast<size_t>((T + kPrefillQueries - 1) / kPrefillQueries)};
        const size_t l[2] = {kPrefillGroup, 1};
        d.launch(k, 2, g, l);
    } else {
        const size_t wg = d.shape().reduction;
        const size_t g[2] = {static_cast<size_t>(n_head) * wg, static_cast<size_t>(T)};
        const size_t l[2] = {wg, 1};
        d.launch(k, 2, g, l);
    }
}

}  // namespace lantern::ocl
