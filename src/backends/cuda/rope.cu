// Rotary embeddings and KV-cache writes.
//
// One kernel covers Rope, RopeQK and RopeQK fused with the two KvStores that
// follow it in a layer: a thread per rotated pair computes its angle in
// double precision (as the CPU does: theta = pos * scale * base^(-2i/n_rot)
// / factor[i]), rotates it into the RopeQK output, and, when fused, writes
// the roped K heads and the V row into the caches as f16 at cell
// seq * n_ctx_seq + pos. Rotated pairs are scaled by the attention
// factor (params f[5]); dimensions past n_rot pass through.
// Fused writes into Q8_0 caches (full rotary only) quantize each block of 32
// across the threads that hold its values: a head's pairs are whole warps,
// so a block's largest magnitude is a warp (NeoX: the pairs' first and second
// halves are separate blocks) or half-warp (interleaved pairs) reduction, as
// is a V block's (two values per thread).
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_ops.h"

namespace lantern::cuda {
namespace {

constexpr int kThreads = 256;

struct RopeSrc {
    const float* x;
    int64_t nb1, nb2;  // floats between heads, tokens
    int heads;
};

struct RopeParams {
    RopeSrc src[2];    // q (or the only source), k
    int n_src;
    float* dst;
    int64_t dst_nb1, dst_nb2;  // floats
    int hd, n_rot;
    bool neox;
    double base, scale;
    double attn_factor;  // scales the rotated pairs (cos and sin)
    const float* factors;
    const int32_t* pos;
    // Fused cache writes (null: none). K rows are the roped heads of src[1].
    const int32_t* seq;
    int n_ctx;
    int64_t n_cells;
    __half* k_cache;
    int64_t k_row;  // halves per cache row
    const float* v;
    int64_t v_nb1;  // floats per token
    __half* v_cache;
    int64_t v_row;
    int v_width;
    bool q8;  // the caches are Q8_0: k_row and v_row count bytes
};

// Thread w of token blockIdx.y takes one pair: Q pairs, then K pairs, then
// pairs of the V row. Each thread computes its own angle (double, as the CPU),
// so no block waits on a shared table and a row is spread over many blocks:
// a decode step's RoPE costs one load round trip and the trigonometry.
__global__ void __launch_bounds__(kThreads) k_rope(const RopeParams p) {
    pdl_enter();
    const int t = blockIdx.y;
    const int64_t w = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    const int pairs = p.hd / 2;
    const int64_t q_work = static_cast<int64_t>(p.src[0].heads) * pairs;
    const int64_t rope_work = q_work + (p.n_src > 1 ? static_cast<int64_t>(p.src[1].heads) * pairs : 0);
    const int32_t pos = p.pos[t];
    int64_t cell = -1;
    if (p.k_cache != nullptr) {
        const int64_t c = static_cast<int64_t>(p.seq[t]) * p.n_ctx + pos;
        if (pos >= 0 && pos < p.n_ctx && c >= 0 && c < p.n_cells) cell = c;
    }
    if (w >= rope_work) {
        // V row into the cache, two elements per thread.
        const int64_t i = 2 * (w - rope_work);
        if (p.v_cache == nullptr || cell < 0 || i >= p.v_width) return;
        const float* v = p.v + t * p.v_nb1;
        if (p.q8) {  // 16 threads a block (v_width is a multiple of 32)
            const float a = v[i], b = v[i + 1];
            const unsigned mask = 0xFFFFu << (threadIdx.x & 16);
            const float amax = group_max(fmaxf(fabsf(a), fabsf(b)), mask, 16);
            uint8_t* blk = reinterpret_cast<uint8_t*>(p.v_cache) + cell * p.v_row + (i >> 5) * 34;
            q8_put(blk, static_cast<int>(i & 31), a, amax);
            q8_put(blk, static_cast<int>((i + 1) & 31), b, amax);
            return;
        }
        __half* vr = p.v_cache + cell * p.v_row;
        vr[i] = __float2half_rn(v[i]);
        if (i + 1 < p.v_width) vr[i + 1] = __float2half_rn(v[i + 1]);
        return;
    }
    const int s = w < q_work ? 0 : 1;
    const int64_t ws = s == 0 ? w : w - q_work;
    const int h = static_cast<int>(ws / pairs), j = static_cast<int>(ws % pairs);
    const RopeSrc& src = p.src[s];
    const float* x = src.x + h * src.nb1 + t * src.nb2;
    float* y = p.dst + ((s == 0 ? 0 : p.src[0].heads) + h) * p.dst_nb1 + t * p.dst_nb2;
    const int half_rot = p.n_rot / 2;
    int i0, i1;
    float y0, y1;
    if (j < half_rot) {
        i0 = p.neox ? j : 2 * j;
        i1 = p.neox ? j + half_rot : 2 * j + 1;
        const float x0 = x[i0], x1 = x[i1];
        double f = p.scale * pow(p.base, -2.0 * j / p.n_rot);
        if (p.factors != nullptr) f /= static_cast<double>(p.factors[j]);
        double sd, cd;
        sincos(static_cast<double>(pos) * f, &sd, &cd);
        const float c = static_cast<float>(cd * p.attn_factor), sn = static_cast<float>(sd * p.attn_factor);
        y0 = x0 * c - x1 * sn;
        y1 = x0 * sn + x1 * c;
    } else {
        i0 = p.n_rot + 2 * (j - half_rot);
        i1 = i0 + 1;
        y0 = x[i0];
        y1 = x[i1];
    }
    y[i0] = y0;
    y[i1] = y1;
    if (s == 1 && cell >= 0 && p.q8) {
        uint8_t* kr = reinterpret_cast<uint8_t*>(p.k_cache) + cell * p.k_row + (h * p.hd >> 5) * 34;
        if (p.neox) {  // i0 and i1 in blocks of their own, each held by this warp
            const float m0 = group_max(fabsf(y0), 0xFFFFFFFFu, 32), m1 = group_max(fabsf(y1), 0xFFFFFFFFu, 32);
            q8_put(kr + (i0 >> 5) * 34, i0 & 31, y0, m0);
            q8_put(kr + (i1 >> 5) * 34, i1 & 31, y1, m1);
        } else {  // pairs 2j, 2j + 1: a block is 16 pairs
            const unsigned mask = 0xFFFFu << (threadIdx.x & 16);
            const float m = group_max(fmaxf(fabsf(y0), fabsf(y1)), mask, 16);
            q8_put(kr + (i0 >> 5) * 34, i0 & 31, y0, m);
            q8_put(kr + (i1 >> 5) * 34, i1 & 31, y1, m);
        }
    } else if (s == 1 && cell >= 0) {
        __half* kr = p.k_cache + cell * p.k_row + h * p.hd;
        kr[i0] = __float2half_rn(y0);
        kr[i1] = __float2half_rn(y1);
    }
}

RopeSrc src_of(const Tensor& x) {
    return RopeSrc{ptr<const float>(x), static_cast<int64_t>(x.nb[1] / 4), static_cast<int64_t>(x.nb[2] / 4),
                   static_cast<int>(x.ne[1])};
}

RopeParams params_of(const Tensor& node, const Tensor* factors, const Tensor& pos) {
    RopeParams p{};
    p.dst = ptr<float>(node);
    p.dst_nb1 = static_cast<int64_t>(node.nb[1] / 4);
    p.dst_nb2 = static_cast<int64_t>(node.nb[2] / 4);
    p.hd = static_cast<int>(node.ne[0]);
    const RopeSpec r = rope_spec(node);
    p.n_rot = r.n_rot;
    p.neox = r.neox;
    p.base = r.base;
    p.scale = r.scale;
    p.attn_factor = r.attn_factor;
    p.factors = factors != nullptr ? ptr<const float>(*factors) : nullptr;
    p.pos = ptr<const int32_t>(pos);
    return p;
}

bool f32_rows(const Tensor& t) { return t.type == DType::F32 && t.nb[0] == 4 && t.nb[1] % 4 == 0 && t.nb[2] % 4 == 0; }

bool rope_common(const Tensor& node, const Tensor* factors, const Tensor& pos) {
    const int n_rot = node.param_i(0);
    return f32_rows(node) && node.ne[3] == 1 && pos.type == DType::I32 && n_rot % 2 == 0 && n_rot <= node.ne[0] &&
           node.ne[0] % 2 == 0 && (factors == nullptr || factors->type == DType::F32);
}

void launch(const Ctx& ctx, const RopeParams& p, int64_t T, const Tensor& node) {
    if (T == 0) return;
    int64_t work = 0;
    for (int s = 0; s < p.n_src; ++s) work += static_cast<int64_t>(p.src[s].heads) * (p.hd / 2);
    if (p.v_cache != nullptr) work += (p.v_width + 1) / 2;
    check(launch(ctx, k_rope, dim3(blocks_for(work, kThreads), static_cast<unsigned>(T)), dim3(kThreads), 0, p),
          "k_rope", node);
}


}  // namespace

RopeSpec rope_spec(const Tensor& node) {
    RopeSpec r;
    r.n_rot = node.param_i(0);
    r.neox = node.param_i(1) == static_cast<int32_t>(RopeMode::Neox);
    r.base = node.param_f(2);
    r.scale = node.param_f(3);
    r.attn_factor = node.param_f(5) != 0.0f ? node.param_f(5) : 1.0;
    return r;
}

bool accepts_rope(const Tensor& node) {
    return rope_common(node, node.src[2], *node.src[1]) && f32_rows(*node.src[0]);
}

bool accepts_rope_qk(const Tensor& node) {
    return rope_common(node, node.src[3], *node.src[2]) && f32_rows(*node.src[0]) && f32_rows(*node.src[1]);
}

bool accepts_kv_store(const Tensor& node) {
    const Tensor& src = *node.src[0];
    const Tensor& cache = *node.src[1];
    return src.type == DType::F32 && src.nb[0] == 4 && src.nb[1] % 4 == 0 &&
           (((cache.type == DType::F16 || cache.type == DType::F32) && cache.nb[1] % dtype_type_size(cache.type) == 0) ||
            (cache.type == DType::Q8_0 && cache.ne[0] % 32 == 0 && cache.nb[1] == dtype_row_size(cache.type, cache.ne[0]))) &&
           node.src[2]->type == DType::I32 && node.src[3]->type == DType::I32;
}

void run_rope(const Ctx& ctx, const Tensor& node) {
    RopeParams p = params_of(node, node.src[2], *node.src[1]);
    p.src[0] = src_of(*node.src[0]);
    p.n_src = 1;
    launch(ctx, p, node.ne[2], node);
}

void run_rope_qk(const Ctx& ctx, const Tensor& node) {
    RopeParams p = params_of(node, node.src[3], *node.src[2]);
    p.src[0] = src_of(*node.src[0]);
    p.src[1] = src_of(*node.src[1]);
    p.n_src = 2;
    launch(ctx, p, node.ne[2], node);
}

bool can_fuse_rope_store(const Tensor& rope, const Tensor& ks, const Tensor& vs) {
    if (rope.op != Op::RopeQK || ks.op != Op::KvStore || vs.op != Op::KvStore) return false;
    const Tensor& kin = *ks.src[0];
    const int64_t hd = rope.ne[0], n_q = rope.param_i(4), n_k = rope.ne[1] - n_q, T = rope.ne[2];
    // K rows: rope's K heads as [hd * n_k, T] rows.
    const bool k_rows = kin.buffer == rope.buffer && kin.offset == rope.offset + static_cast<size_t>(n_q) * rope.nb[1] &&
                        kin.ne[0] == hd * n_k && kin.ne[1] == T && kin.nb[1] == rope.nb[2] &&
                        rope.nb[1] == static_cast<size_t>(hd) * 4 && rope.nb[0] == 4;
    const Tensor& kc = *ks.src[1];
    const Tensor& vc = *vs.src[1];
    // Q8_0 caches: full rotary (every pair rotated, so a thread's pair lies
    // in the blocks the reductions assume), heads of 64 or 128, whole blocks.
    const bool q8 = kc.type == DType::Q8_0 && vc.type == DType::Q8_0 && rope.param_i(0) == hd &&
                    (hd == 64 || hd == 128) && vs.src[0]->ne[0] % 32 == 0;
    return k_rows && accepts_kv_store(ks) && accepts_kv_store(vs) &&
           ((kc.type == DType::F16 && vc.type == DType::F16) || q8) && same_address(*ks.src[2], *rope.src[2]) && same_address(*vs.src[2], *rope.src[2]) &&
           same_address(*ks.src[3], *vs.src[3]) && ks.param_i(0) == vs.param_i(0) && vs.src[0]->ne[1] == T &&
           vs.src[0]->ne[0] == vc.ne[0] && kc.ne[1] == vc.ne[1];
}

void run_rope_qk_store(const Ctx& ctx, const Tensor& rope, const Tensor& ks, const Tensor& vs) {
    RopeParams p = params_of(rope, rope.src[3], *rope.src[2]);
    p.src[0] = src_of(*rope.src[0]);
    p.src[1] = src_of(*rope.src[1]);
    p.n_src = 2;
    const Tensor& kc = *ks.src[1];
    const Tensor& vc = *vs.src[1];
    const Tensor& v = *vs.src[0];
    p.seq = ptr<const int32_t>(*ks.src[3]);
    p.n_ctx = ks.param_i(0);
    p.n_cells = kc.ne[1];
    p.q8 = kc.type == DType::Q8_0;
    const size_t unit = p.q8 ? 1 : 2;  // the rows in bytes or halves
    p.k_cache = ptr<__half>(kc);
    p.k_row = static_cast<int64_t>(kc.nb[1] / unit);
    p.v = ptr<const float>(v);
    p.v_nb1 = static_cast<int64_t>(v.nb[1] / 4);
    p.v_cache = ptr<__half>(vc);
    p.v_row = static_cast<int64_t>(vc.nb[1] / unit);
    p.v_width = static_cast<int>(v.ne[0]);
    launch(ctx, p, rope.ne[2], rope);
}

namespace {

template <class C>
__global__ void k_kv_store(const float* __restrict__ src, int64_t src_nb1, int64_t D, C* __restrict__ cache,
                           int64_t row, int64_t n_cells, const int32_t* pos, const int32_t* seq, int n_ctx) {
    pdl_enter();
    const int t = blockIdx.x;
    const int32_t pp = pos[t];
    const int64_t cell = static_cast<int64_t>(seq[t]) * n_ctx + pp;
    if (pp < 0 || pp >= n_ctx || cell < 0 || cell >= n_cells) return;
    const float* in = src + t * src_nb1;
    C* out = cache + cell * row;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        if constexpr (std::is_same_v<C, __half>) {
            out[i] = __float2half_rn(in[i]);
        } else {
            out[i] = in[i];
        }
    }
}

// A Q8_0 cache row: a warp per block of 32 (q8_put: as the CPU quantizes).
__global__ void k_kv_store_q8(const float* __restrict__ src, int64_t src_nb1, int64_t D, uint8_t* __restrict__ cache,
                              int64_t row_bytes, int64_t n_cells, const int32_t* pos, const int32_t* seq, int n_ctx) {
    pdl_enter();
    const int t = blockIdx.x;
    const int32_t pp = pos[t];
    const int64_t cell = static_cast<int64_t>(seq[t]) * n_ctx + pp;
    if (pp < 0 || pp >= n_ctx || cell < 0 || cell >= n_cells) return;
    const float* in = src + t * src_nb1;
    uint8_t* out = cache + cell * row_bytes;
    const int lane = threadIdx.x & 31;
    for (int64_t b = threadIdx.x >> 5; b < D / 32; b += blockDim.x >> 5) {
        const float x = in[b * 32 + lane];
        q8_put(out + b * 34, lane, x, group_max(fabsf(x), 0xFFFFFFFFu, 32));
    }
}

}  // namespace

void run_kv_store(const Ctx& ctx, const Tensor& node) {
    const Tensor& src = *node.src[0];
    const Tensor& cache = *node.src[1];
    const int64_t T = src.ne[1];
    if (T == 0) return;
    const int n_ctx = node.param_i(0);
    const int32_t* pos = ptr<const int32_t>(*node.src[2]);
    const int32_t* seq = ptr<const int32_t>(*node.src[3]);
    if (cache.type == DType::Q8_0) {
        check(launch(ctx, k_kv_store_q8, dim3(static_cast<unsigned>(T)), dim3(256), 0, ptr<const float>(src),
                     static_cast<int64_t>(src.nb[1] / 4), src.ne[0], ptr<uint8_t>(cache),
                     static_cast<int64_t>(cache.nb[1]), cache.ne[1], pos, seq, n_ctx),
              "k_kv_store_q8", node);
    } else if (cache.type == DType::F16) {
        check(launch(ctx, k_kv_store<__half>, dim3(static_cast<unsigned>(T)), dim3(256), 0, ptr<const float>(src),
                     static_cast<int64_t>(src.nb[1] / 4), src.ne[0], ptr<__half>(cache),
                     static_cast<int64_t>(cache.nb[1] / 2), cache.ne[1], pos, seq, n_ctx),
              "k_kv_store", node);
    } else {
        check(launch(ctx, k_kv_store<float>, dim3(static_cast<unsigned>(T)), dim3(256), 0, ptr<const float>(src),
                     static_cast<int64_t>(src.nb[1] / 4), src.ne[0], ptr<float>(cache),
                     static_cast<int64_t>(cache.nb[1] / 4), cache.ne[1], pos, seq, n_ctx),
              "k_kv_store", node);
    }
}

}  // namespace lantern::cuda
