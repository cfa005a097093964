#include "op_harness.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "core/half.h"
#include "quant/quant.h"

namespace lantern::test {
namespace {

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;

std::unique_ptr<OpCase> new_case(std::string name, double tol) {
    auto c = std::make_unique<OpCase>();
    c->name = std::move(name);
    c->tolerance = tol;
    return c;
}

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                              DType::IQ4_NL, DType::IQ4_XS};

}  // namespace

Tensor* CaseLeaves::leaf(DType type, std::initializer_list<int64_t> ne, const char* name, float lo, float hi,
                         uint32_t flags) {
    Tensor* t = c.graph.new_tensor(type, ne, name);
    t->flags |= flags;
    const int64_t n = t->n_elements();
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> f(static_cast<size_t>(n));
    for (float& x : f) x = dist(rng);
    std::vector<uint8_t> bytes(t->nbytes());
    switch (type) {
        case DType::F32: std::memcpy(bytes.data(), f.data(), bytes.size()); break;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_fp16(f[static_cast<size_t>(i)]);
            break;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16(f[static_cast<size_t>(i)]);
            break;
        default:
            for (int64_t r = 0; r < t->n_rows(); ++r) {
                quant::quantize_row(type, f.data() + r * t->ne[0], bytes.data() + static_cast<size_t>(r) * t->row_bytes(),
                                    t->ne[0]);
            }
    }
    c.leaves.emplace_back(t, std::move(bytes));
    return t;
}

namespace {

// A weight of shape ne whose row r is row pick(r) of 64 random rows.
template <class Pick>
Tensor* from_64_rows(CaseLeaves& b, DType type, std::initializer_list<int64_t> ne, const char* name, Pick&& pick) {
    OpCase rows;
    CaseLeaves rb{rows, std::mt19937(b.rng())};
    const Tensor* proto = rb.leaf(type, {*ne.begin(), 64}, "rows");
    const std::vector<uint8_t>& pattern = rows.leaves.back().second;
    const size_t row = proto->row_bytes();
    Tensor* t = b.c.graph.new_tensor(type, ne, name);
    t->flags |= kTensorWeight;
    std::vector<uint8_t> bytes(t->nbytes());
    for (int64_t r = 0; r < t->n_rows(); ++r) {
        std::memcpy(bytes.data() + static_cast<size_t>(r) * row, pattern.data() + static_cast<size_t>(pick(r)) * row, row);
    }
    b.c.leaves.emplace_back(t, std::move(bytes));
    return t;
}

}  // namespace

Tensor* CaseLeaves::repeated_weight(DType type, int64_t K, int64_t N, const char* name) {
    return from_64_rows(*this, type, {K, N}, name, [](int64_t r) { return r % 64; });
}

Tensor* CaseLeaves::picked_rows_weight(DType type, std::initializer_list<int64_t> ne, const char* name) {
    return from_64_rows(*this, type, ne, name, [this](int64_t) { return uniform_int(0, 63); });
}

Tensor* CaseLeaves::ints(const std::vector<int32_t>& v, const char* name) {
    Tensor* t = c.graph.new_tensor(DType::I32, {static_cast<int64_t>(v.size())}, name);
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    c.leaves.emplace_back(t, std::move(bytes));
    return t;
}

std::vector<std::unique_ptr<OpCase>> make_op_cases(uint32_t seed) {
    std::vector<std::unique_ptr<OpCase>> cases;
    auto add = [&](std::unique_ptr<OpCase> c) { cases.push_back(std::move(c)); };
    uint32_t k = seed;

    for (DType t : kWeightTypes) {
        if (quant::type_ops(t) == nullptr) continue;
        auto c = new_case(std::string("get_rows_") + dtype_name(t), 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* table = b.weight(t, {256, 40}, "table");
        std::vector<int32_t> ids;
        for (int i = 0; i < 7; ++i) ids.push_back(b.uniform_int(0, 39));
        c->outputs.push_back(c->graph.get_rows(table, b.ints(ids, "ids")));
        add(std::move(c));
    }

    struct MM {
        int64_t K, N, M;
    };
    for (DType t : kWeightTypes) {
        if (quant::type_ops(t) == nullptr) continue;
        for (MM s : {MM{256, 48, 1}, MM{512, 37, 5}, MM{256, 64, 33}}) {
            auto c = new_case(std::string("mul_mat_") + dtype_name(t) + "_" + std::to_string(s.K) + "x" +
                                  std::to_string(s.N) + "x" + std::to_string(s.M),
                              5e-4);
            CaseLeaves b{*c, std::mt19937(++k)};
            Tensor* w = b.weight(t, {s.K, s.N}, "w");
            Tensor* x = b.leaf(DType::F32, {s.K, s.M}, "x");
            c->outputs.push_back(c->graph.mul_mat(w, x));
            c->bytes = static_cast<double>(w->nbytes() + x->nbytes());
            c->flops = 2.0 * static_cast<double>(s.K * s.N * s.M);
            add(std::move(c));
        }
    }

    // A LoRA adapter's B product added into the base product: K = rank rows
    // (a thread per row on CUDA at one token), and prompts.
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        for (MM s : {MM{16, 300, 1}, MM{64, 77, 1}, MM{32, 50, 9}}) {
            auto c = new_case(std::string("mul_mat_add_") + dtype_name(t) + "_" + std::to_string(s.K) + "x" +
                                  std::to_string(s.N) + "x" + std::to_string(s.M),
                              5e-4);
            CaseLeaves b{*c, std::mt19937(++k)};
            Tensor* w = b.weight(t, {s.K, s.N}, "lora_b");
            Tensor* x = b.leaf(DType::F32, {s.K, s.M}, "x");
            Tensor* base = b.leaf(DType::F32, {s.N, s.M}, "base");
            c->outputs.push_back(c->graph.mul_mat_add(w, x, base));
            add(std::move(c));
        }
    }

    for (bool with_w : {true, false}) {
        auto c = new_case(with_w ? "rms_norm_weighted" : "rms_norm", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* x = b.leaf(DType::F32, {300, 5}, "x", -3.0f, 3.0f);
        Tensor* w = with_w ? b.weight(DType::F32, {300}, "w") : nullptr;
        c->outputs.push_back(c->graph.rms_norm(x, w, 1e-5f));
        add(std::move(c));
    }

    for (Op op : {Op::Add, Op::Mul}) {
        for (bool bcast : {false, true}) {
            auto c = new_case(std::string(op_name(op)) + (bcast ? "_broadcast" : ""), 1e-7);
            CaseLeaves b{*c, std::mt19937(++k)};
            Tensor* x = b.leaf(DType::F32, {64, 6}, "a");
            Tensor* y = b.leaf(DType::F32, {64, bcast ? 1 : 6}, "b");
            c->outputs.push_back(op == Op::Add ? c->graph.add(x, y) : c->graph.mul(x, y));
            add(std::move(c));
        }
    }
    {
        auto c = new_case("scale", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        c->outputs.push_back(c->graph.scale(b.leaf(DType::F32, {100, 3}, "x"), 0.37f));
        add(std::move(c));
    }
    for (bool gelu : {false, true}) {
        auto c = new_case(gelu ? "gelu_mul" : "silu_mul", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* g = b.leaf(DType::F32, {128, 5}, "gate", -6.0f, 6.0f);
        Tensor* u = b.leaf(DType::F32, {128, 5}, "up");
        c->outputs.push_back(gelu ? c->graph.gelu_mul(g, u) : c->graph.silu_mul(g, u));
        add(std::move(c));
    }
    {
        auto c = new_case("soft_max", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        c->outputs.push_back(c->graph.soft_max(b.leaf(DType::F32, {70, 4}, "x", -8.0f, 8.0f), 0.5f));
        add(std::move(c));
    }

    struct RopeCase {
        RopeMode mode;
        int n_rot;
        bool factors;
    };
    for (RopeCase rc : {RopeCase{RopeMode::Normal, 64, false}, RopeCase{RopeMode::Neox, 64, false},
                        RopeCase{RopeMode::Neox, 32, false}, RopeCase{RopeMode::Normal, 64, true}}) {
        auto c = new_case(std::string("rope_") + (rc.mode == RopeMode::Neox ? "neox" : "normal") + "_rot" +
                              std::to_string(rc.n_rot) + (rc.factors ? "_factors" : ""),
                          1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* x = b.leaf(DType::F32, {64, 4, 5}, "x");
        std::vector<int32_t> pos;
        for (int i = 0; i < 5; ++i) pos.push_back(b.uniform_int(0, 3000));
        Tensor* ff = rc.factors ? b.leaf(DType::F32, {rc.n_rot / 2}, "freq_factors", 1.0f, 8.0f) : nullptr;
        c->outputs.push_back(c->graph.rope(x, b.ints(pos, "pos"), ff, rc.n_rot, rc.mode, 10000.0f, 0.5f));
        add(std::move(c));
    }
    {
        auto c = new_case("rope_qk", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* q = b.leaf(DType::F32, {64, 4, 3}, "q");
        Tensor* kk = b.leaf(DType::F32, {64, 2, 3}, "k");
        std::vector<int32_t> pos = {0, 17, 511};
        c->outputs.push_back(c->graph.rope_qk(q, kk, b.ints(pos, "pos"), nullptr, 64, RopeMode::Normal, 100000.0f, 1.0f));
        add(std::move(c));
    }
    {
        auto c = new_case("add_rms_norm", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* x = b.leaf(DType::F32, {96, 3}, "a");
        Tensor* y = b.leaf(DType::F32, {96, 3}, "b");
        c->outputs.push_back(c->graph.add_rms_norm(x, y, b.weight(DType::F32, {96}, "w"), 1e-6f));
        add(std::move(c));
    }
    for (auto [from, to] : {std::pair{DType::F32, DType::F16}, std::pair{DType::F16, DType::F32},
                            std::pair{DType::F32, DType::BF16}, std::pair{DType::F32, DType::F32}}) {
        auto c = new_case(std::string("copy_") + dtype_name(from) + "_" + dtype_name(to), to == DType::F32 ? 1e-7 : 1e-5);
        CaseLeaves b{*c, std::mt19937(++k)};
        c->outputs.push_back(c->graph.copy(b.leaf(from, {48, 7}, "x"), to));
        add(std::move(c));
    }
    {
        // Four tokens of two sequences into a cache of 2 x 16 cells.
        auto c = new_case("kv_store", 1e-6);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* src = b.leaf(DType::F32, {32, 4}, "rows");
        Tensor* cache = b.leaf(DType::F16, {32, 32}, "cache", -1.0f, 1.0f, kTensorCache);
        Tensor* pos = b.ints({3, 9, 0, 15}, "pos");
        Tensor* seq = b.ints({0, 0, 1, 1}, "seq");
        c->outputs.push_back(c->graph.kv_store(src, cache, pos, seq, 16));
        add(std::move(c));
    }
    struct AttnCase {
        int64_t hd, n_head, n_kv, T;
        int window;
        float softcap;
    };
    for (AttnCase ac : {AttnCase{64, 4, 2, 3, 0, 0.0f}, AttnCase{64, 4, 4, 1, 0, 0.0f}, AttnCase{128, 8, 2, 5, 0, 0.0f},
                        AttnCase{64, 4, 1, 3, 5, 0.0f}, AttnCase{64, 2, 2, 2, 0, 30.0f}}) {
        auto c = new_case("attention_hd" + std::to_string(ac.hd) + "_h" + std::to_string(ac.n_head) + "_kv" +
                              std::to_string(ac.n_kv) + "_t" + std::to_string(ac.T) +
                              (ac.window ? "_window" : "") + (ac.softcap > 0 ? "_softcap" : ""),
                          5e-4);
        CaseLeaves b{*c, std::mt19937(++k)};
        const int n_ctx = 40;
        Tensor* q = b.leaf(DType::F32, {ac.hd, ac.n_head, ac.T}, "q", -2.0f, 2.0f);
        Tensor* kc = b.leaf(DType::F16, {ac.hd * ac.n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
        Tensor* vc = b.leaf(DType::F16, {ac.hd * ac.n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
        std::vector<int32_t> pos, seq;
        for (int64_t t = 0; t < ac.T; ++t) {
            pos.push_back(b.uniform_int(0, n_ctx - 1));
            seq.push_back(b.uniform_int(0, 1));
        }
        c->outputs.push_back(c->graph.attention(q, kc, vc, b.ints(pos, "pos"), b.ints(seq, "seq"),
                                                static_cast<int>(ac.n_kv), n_ctx, 1.0f / std::sqrt(static_cast<float>(ac.hd)),
                                                ac.softcap, ac.window));
        add(std::move(c));
    }

    // Added for the phi3 / gemma3 graphs (kept last so earlier cases keep their seeds).
    {
        auto c = new_case("softcap", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        c->outputs.push_back(c->graph.softcap(b.leaf(DType::F32, {90, 4}, "x", -80.0f, 80.0f), 30.0f));
        add(std::move(c));
    }
    {
        // phi3: partial rotary with longrope factors and an attention factor.
        auto c = new_case("rope_neox_rot48_factors_attn_factor", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* x = b.leaf(DType::F32, {64, 4, 5}, "x");
        std::vector<int32_t> pos;
        for (int i = 0; i < 5; ++i) pos.push_back(b.uniform_int(0, 3000));
        Tensor* ff = b.leaf(DType::F32, {24}, "freq_factors", 1.0f, 8.0f);
        c->outputs.push_back(c->graph.rope(x, b.ints(pos, "pos"), ff, 48, RopeMode::Neox, 10000.0f, 1.0f, 1.19f));
        add(std::move(c));
    }
    {
        // phi3: Q and K are strided views of one fused QKV product.
        auto c = new_case("rope_qk_strided_views", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        const int64_t hd = 32, n_q = 4, n_k = 2, T = 3, row = hd * (n_q + 2 * n_k);
        Tensor* qkv = b.leaf(DType::F32, {row, T}, "qkv");
        Graph& g = c->graph;
        Tensor* q = g.view(qkv, {hd, n_q, T}, {qkv->nb[0], hd * qkv->nb[0], qkv->nb[1]}, 0, "q");
        Tensor* kk = g.view(qkv, {hd, n_k, T}, {qkv->nb[0], hd * qkv->nb[0], qkv->nb[1]},
                            static_cast<size_t>(hd * n_q) * qkv->nb[0], "k");
        std::vector<int32_t> pos = {3, 90, 1000};
        c->outputs.push_back(g.rope_qk(q, kk, b.ints(pos, "pos"), nullptr, 24, RopeMode::Neox, 10000.0f, 1.0f, 1.19f));
        add(std::move(c));
    }
    {
        // gemma3: per-head RMSNorm of Q ([head_dim, n_head, T] rows, [head_dim] weight).
        auto c = new_case("rms_norm_heads", 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* x = b.leaf(DType::F32, {32, 4, 3}, "x", -3.0f, 3.0f);
        c->outputs.push_back(c->graph.rms_norm(x, b.weight(DType::F32, {32}, "w"), 1e-6f));
        add(std::move(c));
    }
    // Mixture-of-experts FFN (kept last so earlier cases keep their seeds):
    // one token and prompts of 5 and 24 (experts shared by several tokens:
    // tiles of activation rows), weights of each kind of dot product.
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
        for (int64_t T : {1, 5, 24}) {
            auto c = new_case(std::string("moe_ffn_") + dtype_name(t) + "_T" + std::to_string(T), 5e-4);
            CaseLeaves b{*c, std::mt19937(++k)};
            const int64_t D = 256, F = 256, E = 6;
            Tensor* x = b.leaf(DType::F32, {D, T}, "x");
            Tensor* router = b.weight(DType::F32, {D, E}, "router");
            // Rows picked from 64 quantized ones: quantizing every row of
            // three 3-D tensors per case made each op test (which builds
            // every case) take half a minute under qemu.
            Tensor* gate = b.picked_rows_weight(t, {D, F, E}, "gate_exps");
            Tensor* up = b.picked_rows_weight(t, {D, F, E}, "up_exps");
            Tensor* down = b.picked_rows_weight(t, {F, D, E}, "down_exps");
            c->outputs.push_back(c->graph.moe_ffn(x, router, gate, up, down, 2, t != DType::F16));
            add(std::move(c));
        }
    }
    // Prompts that GPU backends may run as one GEMM per expert: bf16
    // weights, and quantization mixes' types (Q6_K down; the IQ4 types) over
    // 8 experts, some of which no token picks.
    for (const auto& [gt, dt, T, E] : {std::tuple{DType::BF16, DType::BF16, int64_t{24}, int64_t{6}},
                                       std::tuple{DType::Q4_K, DType::Q6_K, int64_t{16}, int64_t{8}},
                                       std::tuple{DType::IQ4_XS, DType::IQ4_NL, int64_t{16}, int64_t{8}}}) {
        auto c = new_case(std::string("moe_ffn_") + dtype_name(gt) + "_" + dtype_name(dt) + "_T" + std::to_string(T) +
                              "_E" + std::to_string(E),
                          5e-4);
        CaseLeaves b{*c, std::mt19937(++k)};
        const int64_t D = 256, F = 256;
        Tensor* x = b.leaf(DType::F32, {D, T}, "x", 0.0f, 1.0f);
        Tensor* router = b.weight(DType::F32, {D, E}, "router");
        // Positive activations and all-negative router rows: the last two
        // experts are never picked.
        auto* rw = reinterpret_cast<float*>(c->leaves.back().second.data());
        for (int64_t i = (E - 2) * D; i < E * D; ++i) rw[i] = -0.5f;
        Tensor* gate = b.picked_rows_weight(gt, {D, F, E}, "gate_exps");
        Tensor* up = b.picked_rows_weight(gt, {D, F, E}, "up_exps");
        Tensor* down = b.picked_rows_weight(dt, {F, D, E}, "down_exps");
        c->outputs.push_back(c->graph.moe_ffn(x, router, gate, up, down, 2, true));
        add(std::move(c));
    }
    // Qwen2-MoE's shared expert gate: rows scaled by the sigmoid of a
    // strided gate (every other value of a [2, T] product), one row (a
    // decode step's) long enough to be split over blocks.
    for (const int64_t T : {int64_t{7}, int64_t{1}}) {
        auto c = new_case("sigmoid_gate_T" + std::to_string(T), 1e-7);
        CaseLeaves b{*c, std::mt19937(++k)};
        const int64_t D = T == 1 ? 5632 : 96;
        Tensor* x = b.leaf(DType::F32, {D, T}, "x");
        Tensor* g = b.leaf(DType::F32, {2, T}, "g", -6.0f, 6.0f);
        Tensor* gate = c->graph.view(g, {1, T}, {g->nb[0], g->nb[1]}, 0, "gate");
        c->outputs.push_back(c->graph.sigmoid_gate(x, gate));
        add(std::move(c));
    }
    // KV caches in the other types a context may ask for: the writes
    // quantize whole rows, attention reads a head's blocks (K and V may
    // differ in type).
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::BF16}) {
        auto c = new_case(std::string("kv_store_") + dtype_name(t), 1e-6);
        c->gpu_may_decline = true;
        CaseLeaves b{*c, std::mt19937(++k)};
        Tensor* src = b.leaf(DType::F32, {128, 4}, "rows");
        Tensor* cache = b.leaf(t, {128, 32}, "cache", -1.0f, 1.0f, kTensorCache);
        c->outputs.push_back(c->graph.kv_store(src, cache, b.ints({3, 9, 0, 15}, "pos"), b.ints({0, 0, 1, 1}, "seq"), 16));
        add(std::move(c));
    }
    for (const auto& [kt, vt, hd, T] : {std::tuple{DType::Q8_0, DType::Q8_0, int64_t{64}, int64_t{3}},
                                        std::tuple{DType::Q8_0, DType::F16, int64_t{128}, int64_t{1}},
                                        std::tuple{DType::Q4_0, DType::Q5_1, int64_t{64}, int64_t{20}},
                                        std::tuple{DType::BF16, DType::F32, int64_t{96}, int64_t{2}},
                                        std::tuple{DType::Q8_0, DType::Q8_0, int64_t{128}, int64_t{20}}}) {
        auto c = new_case(std::string("attention_cache_") + dtype_name(kt) + "_" + dtype_name(vt) + "_hd" +
                              std::to_string(hd) + "_t" + std::to_string(T),
                          5e-4);
        c->gpu_may_decline = true;
        CaseLeaves b{*c, std::mt19937(++k)};
        const int n_ctx = 80, n_head = 4, n_kv = 2;
        Tensor* q = b.leaf(DType::F32, {hd, n_head, T}, "q", -2.0f, 2.0f);
        Tensor* kc = b.leaf(kt, {hd * n_kv, 2 * n_ctx}, "k_cache", -1.0f, 1.0f, kTensorCache);
        Tensor* vc = b.leaf(vt, {hd * n_kv, 2 * n_ctx}, "v_cache", -1.0f, 1.0f, kTensorCache);
        std::vector<int32_t> pos, seq;
        for (int64_t t = 0; t < T; ++t) {  // a prompt's run of positions in sequence 1, past one key block
            pos.push_back(static_cast<int32_t>(50 + t));
            seq.push_back(1);
        }
        c->outputs.push_back(c->graph.attention(q, kc, vc, b.ints(pos, "pos"), b.ints(seq, "seq"), n_kv, n_ctx,
                                                1.0f / std::sqrt(static_cast<float>(hd)), 0.0f, 0));
        add(std::move(c));
    }
    return cases;
}

bool uses_op(const OpCase& c, Op op) {
    for (const Tensor* n : c.graph.nodes()) {
        if (n->op == op) return true;
    }
    return false;
}

const std::vector<std::string>& op_case_names(uint32_t seed) {
    static std::map<uint32_t, std::vector<std::string>> cache;
    auto it = cache.find(seed);
    if (it == cache.end()) {
        std::vector<std::string> names;
        for (const auto& c : make_op_cases(seed)) names.push_back(c->name);
        it = cache.emplace(seed, std::move(names)).first;
    }
    return it->second;
}

double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
    if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) || std::isnan(ref[i])) return std::numeric_limits<double>::infinity();
        const double d = static_cast<double>(a[i]) - ref[i];
        num += d * d;
        den += static_cast<double>(ref[i]) * ref[i];
    }
    return den > 0 ? num / den : num;
}

CaseResult run_case(OpCase& c, Backend& backend, int timing_runs, ComputeHints hints,
                    const std::function<void(Tensor&)>& after_upload) {
    CaseResult r;
    const std::vector<Tensor*>& nodes = c.graph.nodes();
    for (const Tensor* n : nodes) {
        if (!backend.supports(*n)) return r;
    }
    r.supported = true;

    // Lay out: weights in a weight buffer, everything else (leaves and node
    // outputs, each between guard bands) in one compute buffer.
    const size_t align = backend.alignment();
    auto round = [&](size_t x) { return (x + align - 1) / align * align; };
    size_t weight_end = 0, compute_end = 0;
    std::vector<std::pair<Tensor*, size_t>> weights, others;
    for (auto& [t, bytes] : c.leaves) {
        if (t->flags & kTensorWeight) {
            weights.emplace_back(t, weight_end);
            weight_end = round(weight_end + backend.weight_bytes(*t));
        } else {
            compute_end = round(compute_end + kGuard);
            others.emplace_back(t, compute_end);
            compute_end = round(compute_end + t->nbytes());
        }
    }
    std::vector<std::pair<size_t, size_t>> guards;  // (offset, bytes) of each band
    for (Tensor* n : nodes) {
        if (n->view_src != nullptr) continue;
        guards.emplace_back(compute_end, kGuard);
        compute_end = round(compute_end + kGuard);
        others.emplace_back(n, compute_end);
        compute_end = round(compute_end + n->nbytes());
        guards.emplace_back(compute_end, kGuard);
        compute_end = round(compute_end + kGuard);
    }
    std::unique_ptr<Buffer> wbuf = backend.alloc(std::max<size_t>(weight_end, align), BufferKind::Weights);
    std::unique_ptr<Buffer> cbuf = backend.alloc(std::max<size_t>(compute_end, align), BufferKind::Compute);
    cbuf->fill(0, kGuardByte, cbuf->size());
    for (auto& [t, off] : weights) {
        t->buffer = wbuf.get();
        t->offset = off;
    }
    for (auto& [t, off] : others) {
        t->buffer = cbuf.get();
        t->offset = off;
    }
    auto resolve = [](Tensor* t) {
        std::vector<Tensor*> chain;
        for (Tensor* p = t; p->view_src != nullptr; p = p->view_src) chain.push_back(p);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            (*it)->buffer = (*it)->view_src->buffer;
            (*it)->offset = (*it)->view_src->offset + (*it)->view_offset;
        }
    };
    for (Tensor* n : nodes) {
        resolve(n);
        for (Tensor* s : n->src) {
            if (s != nullptr) resolve(s);
        }
    }
    for (Tensor* o : c.outputs) resolve(o);

    auto upload = [&] {
        for (auto& [t, bytes] : c.leaves) {
            if (t->flags & kTensorWeight) {
                backend.upload_weight(*t, bytes.data());
            } else {
                t->buffer->write(t->offset, bytes.data(), bytes.size());
            }
        }
    };
    upload();
    if (after_upload) {
        for (auto& [t, bytes] : c.leaves) {
            if (t->flags & kTensorWeight) after_upload(*t);
        }
    }
    backend.compute(nodes, hints);
    backend.synchronize();

    for (Tensor* o : c.outputs) {
        std::vector<uint8_t> bytes(o->nbytes());
        o->buffer->read(o->offset, bytes.data(), bytes.size());
        std::vector<float> f(static_cast<size_t>(o->n_elements()));
        if (dtype_is_quantized(o->type)) {  // a quantized KV cache, written in place
            for (int64_t r = 0; r < o->n_rows(); ++r) {
                quant::dequantize_row(o->type, bytes.data() + static_cast<size_t>(r) * o->row_bytes(),
                                      f.data() + r * o->ne[0], o->ne[0]);
            }
            r.outputs.push_back(std::move(f));
            continue;
        }
        for (size_t i = 0; i < f.size(); ++i) {
            switch (o->type) {
                case DType::F16: f[i] = fp16_to_f32(reinterpret_cast<const uint16_t*>(bytes.data())[i]); break;
                case DType::BF16: f[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(bytes.data())[i]); break;
                default: f[i] = reinterpret_cast<const float*>(bytes.data())[i];
            }
        }
        r.outputs.push_back(std::move(f));
    }
    for (auto [off, n] : guards) {
        std::vector<uint8_t> g(n);
        cbuf->read(off, g.data(), n);
        for (uint8_t x : g) {
            if (x != kGuardByte) r.guards_intact = false;
        }
    }

    if (timing_runs > 0) {
        backend.compute(nodes, hints);  // warm-up
        backend.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < timing_runs; ++i) backend.compute(nodes, hints);
        backend.synchronize();
        r.seconds_per_run = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / timing_runs;
    }
    for (auto& [t, bytes] : c.leaves) t->buffer = nullptr;
    for (Tensor* n : nodes) n->buffer = nullptr;
    return r;
}

}  // namespace lantern::test
