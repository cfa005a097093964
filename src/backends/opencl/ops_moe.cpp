// Host side of kernels/moe.cl: a mixture of experts' FFN in four launches
// (route, gate/up, the hidden rows' 8-bit blocks, down), the routing kept in
// scratch memory on the device.
#include <array>
#include <string>

#include "backends/opencl/ops.h"
#include "backends/opencl/weight_layout.h"

namespace lantern::ocl {
namespace {

constexpr int64_t kMaxExperts = 1024;  // MOE_MAX_E

bool plain_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// An expert tensor [K, N, E]: repacked block-32 weights, or plain rows with
// the experts one after another.
bool experts_ok(const Tensor& w) {
    if (w.ne[3] != 1 || w.ne[0] % 32 != 0) return false;
    if (is_block32(w.type)) return (w.storage_root()->flags & kTensorWeight) != 0 && w.view_src == nullptr;
    return plain_type(w.type) && w.nb[0] == dtype_type_size(w.type) && w.nb[2] == w.nb[1] * static_cast<size_t>(w.ne[1]);
}


// (buffer, qs, qh, sc) of a repacked weight.
void planes(Args& a, const Tensor& w) {
    const QuantLayout l = quant_layout(w);
    a.mem(mem_of(w)).u64(w.offset + l.qs).u64(w.offset + l.qh).u64(w.offset + l.sc);
}

size_t round256(size_t n) { return (n + 255) / 256 * 256; }

// `rows` rows of K f32 values (nb1 bytes apart, at mem + offset) quantized
// to 8-bit blocks in scratch memory.
Q8Act quantize_rows(Dispatch& d, cl_mem mem, size_t offset, size_t nb1, int64_t K, int64_t rows) {
    const size_t q_bytes = round256(static_cast<size_t>(K * rows));
    const OpenClBackend::Scratch s = d.scratch(q_bytes + static_cast<size_t>(K / 32 * rows) * 8);
    const Q8Act q{s.mem, s.offset, s.offset + q_bytes};
    cl_kernel k = d.kernel(ProgramId::Quant, "quantize_q8");
    Args(k).mem(mem).u64(offset).u64(nb1).mem(q.mem).u64(q.q).u64(q.ds).i32(K);
    const size_t g[2] = {static_cast<size_t>(K / 32), static_cast<size_t>(rows)};
    d.launch(k, 2, g, nullptr);
    return q;
}

}  // namespace

bool moe_ffn_accepts(const Tensor& node) {
    const Tensor& x = *node.src[0];
    const Tensor& router = *node.src[1];
    const Tensor &gate = *node.src[2], &up = *node.src[3], &down = *node.src[4];
    const bool quantized = is_block32(gate.type);
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && rows_uniform(x) && node.type == DType::F32 &&
           node.nb[0] == sizeof(float) && plain_type(router.type) && router.nb[0] == dtype_type_size(router.type) &&
           router.ne[1] <= kMaxExperts && experts_ok(gate) && experts_ok(up) && experts_ok(down) &&
           // gate and up share a kernel (one type, or both plain); down is quantized when they are
           (quantized ? up.type == gate.type && is_block32(down.type) : plain_type(up.type) && plain_type(down.type));
}

bool moe_ffn_ready(ProgramCache& p, const Tensor& node) {
    return p.available(ProgramId::Moe) && (!is_block32(node.src[2]->type) || p.available(ProgramId::Quant));
}

void run_moe_ffn(Dispatch& d, const Tensor& node) {
    const Tensor& x = *node.src[0];
    const Tensor& router = *node.src[1];
    const Tensor &gate = *node.src[2], &up = *node.src[3], &down = *node.src[4];
    const int64_t D = x.ne[0], T = x.ne[1], F = gate.ne[1], E = router.ne[1];
    const int k = node.param_i(0);
    const int64_t P = T * k;
    if (T == 0) return;
    // ids [P] i32, weights [P] f32, hidden [P, F] f32.
    const size_t ids_at = 0, w_at = round256(static_cast<size_t>(P) * 4), h_at = w_at + round256(static_cast<size_t>(P) * 4);
    const OpenClBackend::Scratch s = d.scratch(h_at + static_cast<size_t>(P * F) * sizeof(float));

    cl_kernel route = d.kernel(ProgramId::Moe, "moe_route");
    Args(route).tensor(x).u64(x.nb[1]).tensor(router).u64(router.nb[1]).i32(static_cast<int>(router.type)).i32(D)
        .i32(E).i32(k).i32(node.param_i(1)).mem(s.mem).u64(s.offset + ids_at).u64(s.offset + w_at);
    const size_t red = d.shape().reduction;
    const size_t rg[2] = {red, static_cast<size_t>(T)}, rl[2] = {red, 1};
    d.launch(route, 2, rg, rl);

    const size_t wg = d.shape().mv_wg, slots = wg / d.shape().mv_tpr;
    auto grid = [&](int64_t rows, int64_t groups) {
        return std::array<size_t, 2>{static_cast<size_t>((rows + static_cast<int64_t>(slots) - 1) / static_cast<int64_t>(slots)) * wg,
                                     static_cast<size_t>(groups)};
    };
    const size_t local[2] = {wg, 1};
    if (is_block32(gate.type)) {
        // The token rows' 8-bit blocks (made by their producer when it could).
        Q8Act q = q8_input(d, x);
        // Blocks still to be scaled by a norm are not for these kernels.
        if (q.norm != nullptr) q = quantize_rows(d, mem_of(x), x.offset, x.nb[1], D, T);
        cl_kernel upk = d.kernel(ProgramId::Moe, (std::string("moe_up_") + dtype_name(gate.type)).c_str());
        Args a(upk);
        planes(a, gate);
        planes(a, up);
        a.mem(q.mem).u64(q.q).u64(q.ds).mem(s.mem).u64(s.offset + ids_at).i32(D).i32(F).i32(k).mem(s.mem).u64(s.offset + h_at);
        const auto ug = grid(F, P);
        d.launch(upk, 2, ug.data(), local);

        // The hidden rows' 8-bit blocks, then down.
        const Q8Act hq = quantize_rows(d, s.mem, s.offset + h_at, static_cast<size_t>(F) * 4, F, P);

        cl_kernel dk = d.kernel(ProgramId::Moe, (std::string("moe_down_") + dtype_name(down.type)).c_str());
        Args b(dk);
        planes(b, down);
        b.mem(hq.mem).u64(hq.q).u64(hq.ds).mem(s.mem).u64(s.offset + ids_at).u64(s.offset + w_at).i32(D).i32(F).i32(k)
            .tensor(node).u64(node.nb[1]);
        const auto dg = grid(D, T);
        d.launch(dk, 2, dg.data(), local);
        return;
    }
    cl_kernel upk = d.kernel(ProgramId::Moe, "moe_up_plain");
    Args(upk).tensor(gate).u64(gate.nb[1]).i32(static_cast<int>(gate.type)).tensor(up).u64(up.nb[1])
        .i32(static_cast<int>(up.type)).tensor(x).u64(x.nb[1]).mem(s.mem).u64(s.offset + ids_at).i32(D).i32(F).i32(k)
        .mem(s.mem).u64(s.offset + h_at);
    const auto ug = grid(F, P);
    d.launch(upk, 2, ug.data(), local);
    cl_kernel dk = d.kernel(ProgramId::Moe, "moe_down_plain");
    Args(dk).tensor(down).u64(down.nb[1]).i32(static_cast<int>(down.type)).mem(s.mem).u64(s.offset + h_at)
        .mem(s.mem).u64(s.offset + ids_at).u64(s.offset + w_at).i32(D).i32(F).i32(k).tensor(node).u64(node.nb[1]);
    const auto dg = grid(D, T);
    d.launch(dk, 2, dg.data(), local);
}

}  // namespace lantern::ocl
