#include "graph/graph.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "lantern/error.h"

namespace lantern {
namespace {

// Throws when !ok; the message is only built on failure (graph building is
// on every step's path).
template <class Msg>
void require(bool ok, const char* op, Msg&& what) {
    if (ok) return;
    if constexpr (std::is_invocable_v<Msg>) {
        throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + what());
    } else {
        throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + what);
    }
}

std::string shape_str(const Tensor* t) {
    return "[" + std::to_string(t->ne[0]) + ", " + std::to_string(t->ne[1]) + ", " +
           std::to_string(t->ne[2]) + ", " + std::to_string(t->ne[3]) + "]";
}

}  // namespace

Tensor* Graph::alloc_tensor() {
    storage_.emplace_back();
    return &storage_.back();
}

Tensor* Graph::add_tensor(const Tensor& proto) {
    Tensor* t = alloc_tensor();
    *t = proto;
    return t;
}

const std::vector<uint8_t>& Graph::input_data(const Tensor* t) const {
    for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i] == t) return input_bytes_[i];
    }
    throw Error(ErrorCode::InvalidArgument, std::string("tensor '") + t->name + "' is not an input");
}

void Graph::set_input_data(const Tensor* t, const void* data, size_t nbytes) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i] != t) continue;
        require(nbytes == input_bytes_[i].size(), "set_input_data",
                [&] { return std::string(t->name) + ": byte count differs from the input's"; });
        std::memcpy(input_bytes_[i].data(), data, nbytes);
        return;
    }
    throw Error(ErrorCode::InvalidArgument, std::string("tensor '") + t->name + "' is not an input");
}

Tensor* Graph::new_tensor(DType type, std::initializer_list<int64_t> ne, const char* name) {
    require(ne.size() >= 1 && ne.size() <= kMaxDims, "new_tensor", "1 to 4 dims");
    Tensor* t = alloc_tensor();
    t->type = type;
    size_t d = 0;
    for (int64_t n : ne) t->ne[d++] = n;
    t->set_contiguous_strides();
    t->name = name;
    t->layer = layer_;
    return t;
}

Tensor* Graph::input(DType type, std::initializer_list<int64_t> ne, const char* name,
                     const void* data, size_t nbytes) {
    Tensor* t = new_tensor(type, ne, name);
    require(nbytes == t->nbytes(), "input", [&] { return std::string(name) + " byte count does not match its shape"; });
    t->flags |= kTensorInput;
    inputs_.push_back(t);
    const auto* p = static_cast<const uint8_t*>(data);
    input_bytes_.emplace_back(p, p + nbytes);
    return t;
}

void Graph::mark_output(Tensor* t) {
    t->flags |= kTensorOutput;
    outputs_.push_back(t);
}

Tensor* Graph::view(Tensor* src, std::initializer_list<int64_t> ne, std::initializer_list<size_t> nb,
                    size_t offset, const char* name) {
    require(ne.size() == nb.size() && ne.size() >= 1 && ne.size() <= kMaxDims, "view",
            "ne and nb must have 1 to 4 matching dims");
    Tensor* t = alloc_tensor();
    t->type = src->type;
    size_t d = 0;
    for (int64_t n : ne) t->ne[d++] = n;
    d = 0;
    for (size_t s : nb) t->nb[d++] = s;
    // Unnamed trailing strides continue contiguously.
    for (; d < kMaxDims; ++d) t->nb[d] = t->nb[d - 1] * static_cast<size_t>(t->ne[d - 1]);
    t->view_src = src;
    t->view_offset = offset;
    t->name = name;
    t->layer = layer_;
    t->flags = src->flags & (kTensorWeight | kTensorCache);
    require(offset + t->nbytes() <= src->nbytes(), "view",
            [&] { return std::string("view of '") + src->name + "' runs past its end"; });
    return t;
}

Tensor* Graph::reshape(Tensor* src, std::initializer_list<int64_t> ne) {
    require(src->is_contiguous(), "reshape", [&] { return std::string("'") + src->name + "' is not contiguous"; });
    Tensor* t = alloc_tensor();
    *t = Tensor{};
    t->type = src->type;
    size_t d = 0;
    int64_t count = 1;
    for (int64_t n : ne) {
        t->ne[d++] = n;
        count *= n;
    }
    require(count == src->n_elements(), "reshape", [&] { return "element count changes " + shape_str(src); });
    t->set_contiguous_strides();
    t->view_src = src;
    t->name = src->name;
    t->layer = layer_;
    t->flags = src->flags & (kTensorWeight | kTensorCache);
    return t;
}

Tensor* Graph::make_node(Op op, DType type, std::initializer_list<int64_t> ne,
                         std::initializer_list<Tensor*> srcs, const char* name) {
    Tensor* t = new_tensor(type, ne, name);
    t->op = op;
    size_t i = 0;
    for (Tensor* s : srcs) t->src[i++] = s;
    return t;
}

Tensor* Graph::new_node(Op op, DType type, std::initializer_list<int64_t> ne,
                        std::initializer_list<Tensor*> srcs, const char* name) {
    Tensor* t = make_node(op, type, ne, srcs, name);
    nodes_.push_back(t);
    return t;
}

Tensor* Graph::get_rows(Tensor* table, Tensor* ids) {
    require(ids->type == DType::I32, "get_rows", "ids must be i32");
    return new_node(Op::GetRows, DType::F32, {table->ne[0], ids->ne[0]}, {table, ids}, "get_rows");
}

Tensor* Graph::mul_mat(Tensor* w, Tensor* x) {
    require(w->ne[0] == x->ne[0], "mul_mat",
            [&] { return std::string("inner dims differ: '") + w->name + "' " + shape_str(w) + " x " + shape_str(x); });
    require(x->type == DType::F32, "mul_mat", "activations must be f32");
    require(x->nb[0] == sizeof(float), "mul_mat", "activation rows must be contiguous");
    return new_node(Op::MulMat, DType::F32, {w->ne[1], x->ne[1], x->ne[2], x->ne[3]}, {w, x}, "mul_mat");
}

Tensor* Graph::rms_norm(Tensor* x, Tensor* w, float eps) {
    require(w == nullptr || w->ne[0] == x->ne[0], "rms_norm", "weight length differs from rows");
    Tensor* t = new_node(Op::RmsNorm, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x, w}, "rms_norm");
    t->set_param_f(0, eps);
    return t;
}

Tensor* Graph::add(Tensor* a, Tensor* b) {
    require(a->ne[0] == b->ne[0], "add", [&] { return "row lengths differ " + shape_str(a) + " " + shape_str(b); });
    return new_node(Op::Add, DType::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a, b}, "add");
}

Tensor* Graph::mul(Tensor* a, Tensor* b) {
    require(a->ne[0] == b->ne[0], "mul", [&] { return "row lengths differ " + shape_str(a) + " " + shape_str(b); });
    return new_node(Op::Mul, DType::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a, b}, "mul");
}

Tensor* Graph::scale(Tensor* x, float s) {
    Tensor* t = new_node(Op::Scale, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x}, "scale");
    t->set_param_f(0, s);
    return t;
}

Tensor* Graph::silu_mul(Tensor* gate, Tensor* up) {
    require(gate->ne == up->ne, "silu_mul", "shapes differ");
    return new_node(Op::SiluMul, DType::F32, {gate->ne[0], gate->ne[1], gate->ne[2], gate->ne[3]}, {gate, up},
                    "silu_mul");
}

Tensor* Graph::gelu_mul(Tensor* gate, Tensor* up) {
    require(gate->ne == up->ne, "gelu_mul", "shapes differ");
    return new_node(Op::GeluMul, DType::F32, {gate->ne[0], gate->ne[1], gate->ne[2], gate->ne[3]}, {gate, up},
                    "gelu_mul");
}

Tensor* Graph::soft_max(Tensor* x, float scale) {
    Tensor* t = new_node(Op::SoftMax, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x}, "soft_max");
    t->set_param_f(0, scale);
    return t;
}

namespace {
void set_rope_params(Tensor* t, int n_rot, RopeMode mode, float freq_base, float freq_scale, float attn_factor) {
    t->set_param_i(0, n_rot);
    t->set_param_i(1, static_cast<int32_t>(mode));
    t->set_param_f(2, freq_base);
    t->set_param_f(3, freq_scale);
    t->set_param_f(5, attn_factor);
}
}  // namespace

Tensor* Graph::rope(Tensor* x, Tensor* pos, Tensor* freq_factors, int n_rot, RopeMode mode, float freq_base,
                    float freq_scale, float attn_factor) {
    require(pos->type == DType::I32 && pos->ne[0] == x->ne[2], "rope", "positions must be i32 [n_tokens]");
    require(n_rot % 2 == 0 && n_rot <= x->ne[0], "rope", "n_rot must be even and at most head_dim");
    Tensor* t = new_node(Op::Rope, DType::F32, {x->ne[0], x->ne[1], x->ne[2]}, {x, pos, freq_factors}, "rope");
    set_rope_params(t, n_rot, mode, freq_base, freq_scale, attn_factor);
    return t;
}

Tensor* Graph::copy(Tensor* src, DType type) {
    return new_node(Op::Copy, type, {src->ne[0], src->ne[1], src->ne[2], src->ne[3]}, {src}, "copy");
}

Tensor* Graph::kv_store(Tensor* src, Tensor* cache, Tensor* pos, Tensor* seq, int n_ctx_seq) {
    require(src->ne[0] == cache->ne[0], "kv_store", "row width differs from the cache's");
    require(pos->ne[0] == src->ne[1] && seq->ne[0] == src->ne[1], "kv_store", "one position and sequence per row");
    Tensor* t = make_node(Op::KvStore, cache->type, {cache->ne[0], cache->ne[1]}, {src, cache, pos, seq}, "kv_store");
    t->nb = cache->nb;
    t->view_src = cache;  // writes in place
    t->set_param_i(0, n_ctx_seq);
    nodes_.push_back(t);
    return t;
}

Tensor* Graph::attention(Tensor* q, Tensor* k_cache, Tensor* v_cache, Tensor* pos, Tensor* seq, int n_head_kv,
                         int n_ctx_seq, float scale, float softcap, int window) {
    const int64_t hd = q->ne[0], n_head = q->ne[1], n_tokens = q->ne[2];
    require(n_head_kv > 0 && n_head % n_head_kv == 0, "attention", "n_head must be a multiple of n_head_kv");
    require(k_cache->ne[0] == hd * n_head_kv && v_cache->ne[0] == hd * n_head_kv, "attention",
            "cache rows must be head_dim * n_head_kv");
    require(pos->ne[0] == n_tokens && seq->ne[0] == n_tokens, "attention", "one position and sequence per token");
    Tensor* t = new_node(Op::Attention, DType::F32, {hd * n_head, n_tokens}, {q, k_cache, v_cache, pos, seq},
                         "attention");
    t->set_param_i(0, n_head_kv);
    t->set_param_i(1, n_ctx_seq);
    t->set_param_f(2, scale);
    t->set_param_f(3, softcap);
    t->set_param_i(4, window);
    return t;
}

Tensor* Graph::sigmoid_gate(Tensor* x, Tensor* gate) {
    require(gate->ne[0] == 1 && gate->ne[1] == x->ne[1] && gate->ne[2] == x->ne[2] && gate->ne[3] == x->ne[3],
            "sigmoid_gate", [&] { return "the gate must be one value per row: " + shape_str(x) + " " + shape_str(gate); });
    return new_node(Op::SigmoidGate, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x, gate}, "sigmoid_gate");
}

Tensor* Graph::softcap(Tensor* x, float cap) {
    require(cap > 0.0f, "softcap", "the cap must be positive");
    Tensor* t = new_node(Op::Softcap, DType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, {x}, "softcap");
    t->set_param_f(0, cap);
    return t;
}

Tensor* Graph::moe_ffn(Tensor* x, Tensor* router, Tensor* gate, Tensor* up, Tensor* down, int n_used,
                       bool norm_weights) {
    const int64_t D = x->ne[0], T = x->ne[1], E = router->ne[1], F = gate->ne[1];
    require(x->type == DType::F32 && x->ne[2] == 1 && x->ne[3] == 1, "moe_ffn", "x must be 2-D f32");
    require(router->ne[0] == D && router->ne[2] == 1, "moe_ffn", "the router must be [D, E]");
    require(gate->ne == up->ne && gate->ne[0] == D && gate->ne[2] == E && gate->type == up->type, "moe_ffn",
            "gate and up must be [D, F, E] of one type");
    require(down->ne[0] == F && down->ne[1] == D && down->ne[2] == E, "moe_ffn", "down must be [F, D, E]");
    require(n_used >= 1 && n_used <= E, "moe_ffn", "experts used must be in [1, E]");
    Tensor* t = new_node(Op::MoeFfn, DType::F32, {D, T}, {x, router, gate, up, down}, "moe_ffn");
    t->set_param_i(0, n_used);
    t->set_param_i(1, norm_weights ? 1 : 0);
    return t;
}

Tensor* Graph::add_rms_norm(Tensor* a, Tensor* b, Tensor* w, float eps) {
    require(a->ne == b->ne, "add_rms_norm", "shapes differ");
    require(a->ne[2] == 1 && a->ne[3] == 1, "add_rms_norm", "inputs must be 2-D");
    Tensor* t = new_node(Op::AddRmsNorm, DType::F32, {a->ne[0], a->ne[1], 2}, {a, b, w}, "add_rms_norm");
    t->set_param_f(0, eps);
    return t;
}

Tensor* Graph::mul_mat_add(Tensor* w, Tensor* x, Tensor* acc) {
    require(w->ne[0] == x->ne[0], "mul_mat_add",
            [&] { return std::string("inner dims differ: '") + w->name + "' " + shape_str(w) + " x " + shape_str(x); });
    require(x->type == DType::F32 && x->nb[0] == sizeof(float), "mul_mat_add", "activations must be contiguous f32 rows");
    require(x->ne[2] == 1 && x->ne[3] == 1, "mul_mat_add", "activations must be 2-D");
    require(acc->type == DType::F32 && acc->is_contiguous() && acc->ne[0] == w->ne[1] && acc->ne[1] == x->ne[1] &&
                acc->ne[2] == 1 && acc->ne[3] == 1,
            "mul_mat_add", [&] { return "the addend " + shape_str(acc) + " is not the product's shape"; });
    return new_node(Op::MulMatAdd, DType::F32, {w->ne[1], x->ne[1]}, {w, x, acc}, "mul_mat_add");
}

Tensor* Graph::fused_slice(Tensor* fused, int slice) {
    return view(fused, {fused->ne[0], fused->ne[1]}, {fused->nb[0], fused->nb[1]},
                static_cast<size_t>(slice) * fused->nb[2], slice == 0 ? "residual" : "normed");
}

Tensor* Graph::rope_qk(Tensor* q, Tensor* k, Tensor* pos, Tensor* freq_factors, int n_rot, RopeMode mode,
                       float freq_base, float freq_scale, float attn_factor) {
    require(q->ne[0] == k->ne[0] && q->ne[2] == k->ne[2], "rope_qk", "q and k must share head_dim and tokens");
    require(pos->type == DType::I32 && pos->ne[0] == q->ne[2], "rope_qk", "positions must be i32 [n_tokens]");
    Tensor* t = new_node(Op::RopeQK, DType::F32, {q->ne[0], q->ne[1] + k->ne[1], q->ne[2]},
                         {q, k, pos, freq_factors}, "rope_qk");
    set_rope_params(t, n_rot, mode, freq_base, freq_scale, attn_factor);
    t->set_param_i(4, static_cast<int32_t>(q->ne[1]));  // heads of q; the rest are k
    return t;
}

Tensor* Graph::rope_qk_part(Tensor* fused, bool k_part) {
    const int64_t n_q = fused->param_i(4);
    const int64_t heads = k_part ? fused->ne[1] - n_q : n_q;
    const size_t offset = k_part ? static_cast<size_t>(n_q) * fused->nb[1] : 0;
    return view(fused, {fused->ne[0], heads, fused->ne[2]}, {fused->nb[0], fused->nb[1], fused->nb[2]}, offset,
                k_part ? "k_roped" : "q_roped");
}

}  // namespace lantern
