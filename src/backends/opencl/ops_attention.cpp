// Host side of kernels/attention.cl: KV-cache writes and attention, work-groups
// per (head, token, split of the cells) for generation, tiled for prompts; for
// one token also RoPE and the cache writes in the attention launch.
#include <algorithm>

#include "backends/opencl/ops.h"

namespace lantern::ocl {
namespace {

// Caches of f32, f16 and q8_0 (rows of whole blocks: `values` per head, or
// per row for a store); a kernel's cache argument is the type's DType id.
bool cache_type_ok(DType t, int64_t values) {
    return t == DType::F16 || t == DType::F32 || (t == DType::Q8_0 && values % 32 == 0);
}
int cache_code(const Tensor& cache) { return static_cast<int>(cache.type); }

constexpr int64_t kMaxHeadDim = 256;         // ATT_MAX_HD in attention.cl
constexpr int64_t kPrefillMaxHeadDim = 128;  // PHD
// Queries per tile of the tiled kernels: attn_prefill_64's (PQ) and
// attn_prefill's.
constexpr int64_t kPrefillQueries64 = 32, kPrefillQueries = 16;
constexpr size_t kPrefillGroup = 128;        // PWG
// From this many tokens on, a step's attention uses the tiled kernel.
constexpr int64_t kPrefillMinTokens = 8;
constexpr int64_t kMaxSplits = 64;

// Decode attention's split of long ranges (attention.cl, attn_split): the
// launch's groups per (head, token), fixed for the step (a recording keeps
// it): enough to fill the device, no more than the cache's cells share out.
// With more than one, the partials need scratch and a counter per (token,
// head).
struct Splits {
    int n = 1;
    int min_cells = 128;
    OpenClBackend::Scratch part{nullptr, 0};
};

// `items` (head, token) or (head, tile) pairs share out about `target`
// groups, each item split at most kMaxSplits ways and into no more splits
// than the cache's cells allow at min_cells each; `floats` of scratch per
// item and split.
Splits make_splits(Dispatch& d, size_t target, int64_t items, int64_t n_ctx_seq, int64_t floats) {
    Splits s;
    s.min_cells = static_cast<int>(d.shape().attn_split_min);
    const int64_t fill = static_cast<int64_t>(target) / std::max<int64_t>(1, items);
    const int64_t share = (n_ctx_seq + s.min_cells - 1) / s.min_cells;
    s.n = static_cast<int>(std::clamp<int64_t>(std::min(fill, share), 1, kMaxSplits));
    if (items > static_cast<int64_t>(OpenClBackend::kAttnCounters)) s.n = 1;
    const size_t bytes = static_cast<size_t>(items * s.n * floats) * sizeof(float);
    s.part = s.n > 1 ? d.scratch(bytes) : OpenClBackend::Scratch{nullptr, 0};
    return s;
}

Splits decode_splits(Dispatch& d, int64_t hd, int64_t heads, int64_t tokens, int64_t n_ctx_seq) {
    return make_splits(d, d.shape().attn_groups, heads * tokens, n_ctx_seq, hd + 2);
}

// Prompt attention's split (attn_prefill): about LaunchShape::prefill_groups
// groups a launch. At depth a tile's range is thousands of cells, which one
// group walked alone.
Splits prefill_splits(Dispatch& d, int64_t heads, int64_t tiles, int64_t queries, int64_t n_ctx_seq) {
    return make_splits(d, d.shape().prefill_groups, heads * tiles, n_ctx_seq, queries * (kPrefillMaxHeadDim + 2));
}

void add_split_args(Dispatch& d, Args& args, const Splits& s, const Tensor& fallback) {
    args.mem(s.part.mem != nullptr ? s.part.mem : mem_of(fallback)).u64(s.part.offset)
        .mem(d.backend().attn_counters()).u64(0).i32(s.n).i32(s.min_cells);
}

}  // namespace

bool kv_store_accepts(const Tensor& node) {
    const Tensor& src = *node.src[0];
    return src.type == DType::F32 && src.nb[0] == sizeof(float) && cache_type_ok(node.src[1]->type, src.ne[0]) &&
           node.src[2]->type == DType::I32 && node.src[3]->type == DType::I32 && src.ne[2] == 1 && src.ne[3] == 1;
}

bool attention_accepts(const Tensor& node) {
    const Tensor& q = *node.src[0];
    const int64_t hd = q.ne[0];
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && cache_type_ok(node.src[1]->type, hd) &&
           cache_type_ok(node.src[2]->type, hd) && node.src[3]->type == DType::I32 &&
           node.src[4]->type == DType::I32 && hd <= kMaxHeadDim && hd % 2 == 0 && q.ne[3] == 1 &&
           node.type == DType::F32 && node.nb[0] == sizeof(float);
}

void run_kv_store(Dispatch& d, const Tensor& node) {
    const Tensor& src = *node.src[0];
    cl_kernel k = d.kernel(ProgramId::Attention, "kv_store");
    Args(k).tensor(src).u64(src.nb[1]).tensor(node).u64(node.nb[1]).i32(cache_code(node))
        .tensor(*node.src[2]).tensor(*node.src[3]).i32(src.ne[0]).i32(node.param_i(0)).i32(node.ne[1]);
    const int64_t items = node.type == DType::Q8_0 ? src.ne[0] / 32 : src.ne[0];  // q8_0: a block each
    const size_t g[2] = {static_cast<size_t>(items), static_cast<size_t>(src.ne[1])};
    d.launch(k, 2, g, nullptr);
}

void run_attention(Dispatch& d, const Tensor& node) {
    const Tensor& q = *node.src[0];
    const Tensor& kc = *node.src[1];
    const Tensor& vc = *node.src[2];
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const bool tiled = T >= kPrefillMinTokens && hd <= kPrefillMaxHeadDim && hd % 4 == 0;

    const int64_t K = hd * n_head;
    const bool want = hd % 32 == 0 && rows_uniform(node) && d.wanted(act_key(node));
    const Q8Act q8 = want ? d.make_q8(act_key(node), K, T) : Q8Act{};

    // The tiled kernel in two sizes: heads of up to 64 values (tiles of 32
    // queries) or of up to 128 (16).
    const char* name = !tiled ? "attn_decode" : hd <= 64 ? "attn_prefill_64" : "attn_prefill";
    cl_kernel k = d.kernel(ProgramId::Attention, name);
    Args args(k);
    args.tensor(q).u64(q.nb[1]).u64(q.nb[2]).tensor(kc).u64(kc.nb[1]).tensor(vc).u64(vc.nb[1])
        .i32(cache_code(kc)).i32(cache_code(vc)).tensor(*node.src[3]).tensor(*node.src[4]).tensor(node).u64(node.nb[1])
        .i32(hd).i32(n_head).i32(node.param_i(0)).i32(node.param_i(1)).i32(kc.ne[1]).f32(node.param_f(2))
        .f32(node.param_f(3)).i32(node.param_i(4)).mem(want ? q8.mem : mem_of(node)).u64(q8.q).u64(q8.ds).i32(want);
    if (tiled) {
        args.i32(T);
        const int64_t queries = hd <= 64 ? kPrefillQueries64 : kPrefillQueries;
        const int64_t tiles = (T + queries - 1) / queries;
        const Splits splits = prefill_splits(d, n_head, tiles, queries, node.param_i(1));
        add_split_args(d, args, splits, node);
        const size_t g[3] = {static_cast<size_t>(n_head) * kPrefillGroup, static_cast<size_t>(tiles),
                             static_cast<size_t>(splits.n)};
        const size_t l[3] = {kPrefillGroup, 1, 1};
        d.launch(k, 3, g, l);
        return;
    }
    const Splits splits = decode_splits(d, hd, n_head, T, node.param_i(1));
    add_split_args(d, args, splits, node);
    const size_t wg = d.shape().reduction;
    const size_t g[3] = {static_cast<size_t>(n_head) * wg, static_cast<size_t>(T), static_cast<size_t>(splits.n)};
    const size_t l[3] = {wg, 1, 1};
    d.launch(k, 3, g, l);
}

bool rope_attention_fusable(const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v, const Tensor& attn) {
    if (attn.op != Op::Attention || !rope_kv_matches(rope, kv_k, kv_v) || !attention_accepts(attn)) return false;
    const Tensor& q = *rope.src[0];
    const Tensor& k = *rope.src[1];
    const Tensor& aq = *attn.src[0];
    const int64_t hd = rope.ne[0], n_q = q.ne[1], n_k = k.ne[1];
    // One token; attention reads the rotated Q heads of `rope` and the caches
    // the two stores write, at the same positions and sequences.
    const bool q_is_rope = aq.buffer == rope.buffer && aq.offset == rope.offset && aq.ne[0] == hd && aq.ne[1] == n_q &&
                           aq.ne[2] == 1 && aq.nb[1] == rope.nb[1];
    return rope.ne[2] == 1 && q_is_rope && n_k > 0 && n_q % n_k == 0 && attn.param_i(0) == n_k &&
           attn.param_i(1) == kv_k.param_i(0) && same_data(*attn.src[1], kv_k) && same_data(*attn.src[2], kv_v) &&
           same_data(*attn.src[3], *rope.src[2]) && same_data(*attn.src[4], *kv_k.src[3]);
}

void run_rope_attention(Dispatch& d, const Tensor& rope, const Tensor& kv_k, const Tensor& kv_v, const Tensor& attn) {
    const Tensor& q = *rope.src[0];
    const Tensor& k = *rope.src[1];
    const Tensor& v = *kv_v.src[0];
    const Tensor* factors = rope.src[3];
    const int64_t hd = rope.ne[0], n_head = q.ne[1];
    const bool want = hd % 32 == 0 && rows_uniform(attn) && d.wanted(act_key(attn));
    const Q8Act q8 = want ? d.make_q8(act_key(attn), hd * n_head, 1) : Q8Act{};
    const cl_mem table = d.backend().rope_table(rope.param_i(0), rope.param_f(2), rope.param_f(3));
    cl_kernel kern = d.kernel(ProgramId::Attention, "attn_decode_rope");
    Args args(kern);
    args.tensor(q).u64(q.nb[1]).tensor(k).u64(k.nb[1]).tensor(v).tensor(rope).u64(rope.nb[1])
        .tensor(factors != nullptr ? *factors : q).i32(factors != nullptr).mem(table).u64(0)
        .i32(rope.param_i(0)).i32(rope.param_i(1) == static_cast<int32_t>(RopeMode::Neox)).f32(rope.param_f(5))
        .tensor(kv_k).u64(kv_k.nb[1]).tensor(kv_v).u64(kv_v.nb[1]).i32(cache_code(kv_k)).i32(cache_code(kv_v))
        .tensor(*attn.src[3]).tensor(*attn.src[4]).tensor(attn)
        .i32(hd).i32(n_head).i32(attn.param_i(0)).i32(attn.param_i(1)).i32(kv_k.ne[1]).f32(attn.param_f(2))
        .f32(attn.param_f(3)).i32(attn.param_i(4)).mem(want ? q8.mem : mem_of(attn)).u64(q8.q).u64(q8.ds).i32(want);
    const Splits splits = decode_splits(d, hd, n_head, 1, attn.param_i(1));
    add_split_args(d, args, splits, attn);
    const size_t wg = d.shape().reduction;
    const size_t g[2] = {static_cast<size_t>(n_head) * wg, static_cast<size_t>(splits.n)};
    const size_t l[2] = {wg, 1};
    d.launch(kern, 2, g, l);
}

}  // namespace lantern::ocl
