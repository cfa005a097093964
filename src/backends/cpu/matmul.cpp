// Matrix multiply (weights of any type x f32 activations) and row lookup.
//
// mul_mat: activations are first converted to the weight type's vec_dot_type
// (phase 1, split by rows), then the threads share tiles of the output
// (phase 2): blocks of kBlockN weight rows x kBlockM activation rows, each
// computed by the type's tile kernel in wide_nr x max_nc pieces so that a
// weight block loaded into cache serves many activation rows (max_nr x 1
// for one activation row). Weights the backend holds packed (quant/packed.h)
// go through mul_mat_packed: the same two phases, in the packed kernels'
// activation format and groups of kPackRows rows.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_kernel.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace lantern::cpu {
namespace {

constexpr int64_t kBlockN = 64;
constexpr int64_t kBlockM = 64;

const quant::TypeOps* activation_ops(const quant::TypeOps& w) {
    return w.vec_dot_type == DType::F32 ? nullptr : quant::type_ops(w.vec_dot_type);
}

// Rows of the weights per work item with one activation row: about four
// items per thread, in multiples of `unit` rows.
int64_t decode_rows_per_item(int64_t N, int nth, int64_t unit) {
    return std::max<int64_t>(unit, (N + nth * 4 - 1) / (nth * 4) / unit * unit);
}

// Phase 1: every activation row (of every batch) converted by `from_float`
// into scratch, row r at r * row_bytes.
void convert_activations(const KernelContext& ctx, const Tensor& x, quant::FromFloatFn from_float, size_t row_bytes) {
    const int64_t K = x.ne[0], M = x.ne[1];
    int64_t begin, end;
    split_range(x.n_rows(), ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        const int64_t i1 = r % M, ib = r / M;
        const float* src = reinterpret_cast<const float*>(row_ptr(x, i1, ib % x.ne[2], ib / x.ne[2]));
        from_float(src, ctx.scratch + static_cast<size_t>(r) * row_bytes, K);
    }
    ctx.barrier();
}

// Phase 2's work items: blocks of `bn` weight rows x kBlockM activation rows
// of each batch. tile(b, m0, m1, n0, n1) computes rows [n0, n1) of
// activation rows [m0, m1) of batch b. Thread ith takes item ith, then
// whichever is next (ThreadPool::claim), so a thread slowed by the machine
// does fewer items instead of holding the others at the next barrier.
template <class Tile>
void for_each_block(const KernelContext& ctx, int64_t N, int64_t M, int64_t batches, int64_t bn, Tile tile) {
    const int64_t blocks_n = (N + bn - 1) / bn;
    const int64_t blocks_m = (M + kBlockM - 1) / kBlockM;
    const int64_t items = blocks_n * blocks_m * batches;
    for (int64_t item = ctx.ith; item < items; item = ctx.next_item()) {
        const int64_t b = item / (blocks_n * blocks_m);
        const int64_t rest = item % (blocks_n * blocks_m);
        const int64_t m0 = (rest / blocks_n) * kBlockM, n0 = (rest % blocks_n) * bn;
        tile(b, m0, std::min(M, m0 + kBlockM), n0, std::min(N, n0 + bn));
    }
}

void mul_mat_packed(const KernelContext& ctx, const Tensor& dst, const quant::PackedOps& ops) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t K = w.ne[0], N = w.ne[1], M = x.ne[1];
    const size_t act_row = ops.act_row_bytes(K);
    convert_activations(ctx, x, ops.act_from_float, act_row);

    constexpr int64_t G = quant::kPackRows;
    const size_t group_bytes = ops.packed_bytes(G, K);
    const int64_t bn = M == 1 ? decode_rows_per_item(N, ctx.nth, G) : kBlockN;
    const size_t ldc = dst.nb[1] / sizeof(float);
    const uint8_t* wdata = static_cast<const uint8_t*>(ctx.packed[0]);
    for_each_block(ctx, N, M, x.ne[2] * x.ne[3], bn, [&](int64_t b, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
        const uint8_t* y = ctx.scratch + static_cast<size_t>(b * M) * act_row;
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, 0, b % x.ne[2], b / x.ne[2]));
        quant::packed_product(ops, K, n1 - n0, wdata + static_cast<size_t>(n0 / G) * group_bytes, y + m0 * act_row,
                              act_row, m1 - m0, out + m0 * ldc + n0, ldc);
    });
}

}  // namespace

bool mul_mat_accepts(const Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const quant::TypeOps* ops = quant::type_ops(w.type);
    if (ops == nullptr || ops->vec_dot == nullptr) return false;
    if (ops->vec_dot_type != DType::F32) {
        const quant::TypeOps* act = quant::type_ops(ops->vec_dot_type);
        if (act == nullptr || act->from_float == nullptr) return false;
    }
    return x.type == DType::F32 && x.nb[0] == sizeof(float) && w.nb[0] == dtype_type_size(w.type) &&
           w.ne[2] == 1 && w.ne[3] == 1 && dst.type == DType::F32 && dst.nb[0] == sizeof(float);
}

size_t mul_mat_scratch(const Tensor& dst, int /*nth*/) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const quant::TypeOps* ops = quant::type_ops(w.type);
    size_t row = ops->vec_dot_type == DType::F32 ? 0 : dtype_row_size(ops->vec_dot_type, x.ne[0]);
    if (const quant::PackedOps* packed = quant::packed_ops(w.type); packed != nullptr) {
        row = std::max(row, packed->act_row_bytes(x.ne[0]));
    }
    return row * static_cast<size_t>(x.n_rows());
}

void mul_mat(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    if (ctx.packed[0] != nullptr) {
        mul_mat_packed(ctx, dst, *quant::packed_ops(w.type));
        return;
    }
    const quant::TypeOps& ops = *quant::type_ops(w.type);
    const int64_t K = w.ne[0], N = w.ne[1], M = x.ne[1];

    // Phase 1: activations into vec_dot_type.
    const quant::TypeOps* act = activation_ops(ops);
    const size_t act_row = act != nullptr ? dtype_row_size(ops.vec_dot_type, K) : 0;
    if (act != nullptr) convert_activations(ctx, x, act->from_float, act_row);

    // Phase 2: output tiles.
    const int max_nr = M == 1 ? ops.max_nr : ops.wide_nr, max_nc = ops.max_nc;
    const int64_t bn = M == 1 ? decode_rows_per_item(N, ctx.nth, max_nr) : kBlockN;
    const size_t ldc = dst.nb[1] / sizeof(float);
    const uint8_t* wdata = static_cast<const uint8_t*>(tensor_address(w));
    for_each_block(ctx, N, M, x.ne[2] * x.ne[3], bn, [&](int64_t b, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
        const int64_t i2 = b % x.ne[2], i3 = b / x.ne[2];
        const uint8_t* y;
        size_t by;
        if (act != nullptr) {
            y = ctx.scratch + static_cast<size_t>(b * M) * act_row;
            by = act_row;
        } else {
            y = row_ptr(x, 0, i2, i3);
            by = x.nb[1];
        }
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, 0, i2, i3));
        for (int64_t m = m0; m < m1; m += max_nc) {
            const int nc = static_cast<int>(std::min<int64_t>(max_nc, m1 - m));
            for (int64_t n = n0; n < n1; n += max_nr) {
                const int nr = static_cast<int>(std::min<int64_t>(max_nr, n1 - n));
                ops.vec_dot(K, out + m * ldc + n, ldc, wdata + n * w.nb[1], w.nb[1], y + m * by, by, nr, nc);
            }
        }
    });
}

void mul_mat_add(const KernelContext& ctx, const Tensor& dst) {
    mul_mat(ctx, dst);
    ctx.barrier();
    const Tensor& acc = *dst.src[2];
    int64_t begin, end;
    split_range(dst.ne[1], ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        float* y = reinterpret_cast<float*>(row_ptr_mut(dst, r));
        const float* a = reinterpret_cast<const float*>(row_ptr(acc, r));
        for (int64_t i = 0; i < dst.ne[0]; ++i) y[i] += a[i];
    }
}

bool get_rows_accepts(const Tensor& dst) {
    const Tensor& table = *dst.src[0];
    const quant::TypeOps* ops = quant::type_ops(table.type);
    return ops != nullptr && ops->to_float != nullptr && dst.src[1]->type == DType::I32 && dst.type == DType::F32;
}

void get_rows(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& table = *dst.src[0];
    const int32_t* ids = data_at<const int32_t>(*dst.src[1]);
    const quant::TypeOps& ops = *quant::type_ops(table.type);
    int64_t begin, end;
    split_range(dst.ne[1], ctx.ith, ctx.nth, begin, end);
    for (int64_t r = begin; r < end; ++r) {
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, r));
        const int32_t id = ids[r];
        if (id < 0 || id >= table.ne[1]) {  // the context validates ids; never read out of bounds
            std::memset(out, 0, static_cast<size_t>(dst.ne[0]) * sizeof(float));
            continue;
        }
        ops.to_float(row_ptr(table, id), out, dst.ne[0]);
    }
}

}  // namespace lantern::cpu
