// The bulk-copy matrix-vector kernel (k_matvec_bulk) for the quantized
// types: a warp's items are staged in shared memory by the copy engine
// (cp.async.bulk) and read from there (qblocks.cuh decodes the blocks).
#include <algorithm>

#include "backends/cuda/matvec_items.cuh"

namespace lantern::cuda::mv {
namespace {

// Warps per block: the streamed kernel's (an SM's block stages the
// activation once), at fewer registers (no weights held in flight).
constexpr int kBulkWarps = 16;
constexpr int kBulkThreads = kBulkWarps * 32;

// Each warp takes the items the streamed kernel's warp would (item, item +
// warps of the grid, ...), but its lane 0 asks the copy engine for them
// (cp.async.bulk into a ring of kBulkSlots item buffers in shared memory,
// an mbarrier per buffer) and the warp reads them with shared loads: no
// registers hold weights in flight and no lane computes a weight address,
// so an item is its dot products (~340 instructions for a Q2_K pair, where
// the streamed kernel's was ~630). Its first items are asked for before
// the grid wait.
//
// Where it pays (H100 op bench, same call, share of the copy bandwidth,
// 4096 x 11008 / 4096 x 32000): Q5_K 74 -> 84% / 87 -> 90%, Q6_K 79 -> 85% /
// 91 -> 93%, Q5_0 76 -> 83% / 88 -> 93%; 7B Q5_K decode step 2,220 ->
// 2,104-2,112 us (445 -> 465-471 tokens/s). Where it does not: Q2_K 67 -> 61%,
// Q3_K 71 -> 67%, Q4_0 85 -> 79%, Q4_K 78 -> 77% (two buffers). Tried and
// worse: as many buffers as shared memory holds, up to 8 (Q2_K's five
// 55%, Q3_K's three 60%; the other types fit two), a contiguous share of items per
// warp (Q2_K 56%), the first items of every warp asked for by warp 0's
// lanes (Q2_K 39%), and one copy per plane for a whole block's round of
// 32 rows (33-66% for every type: a few large copies per SM move far
// slower than many small ones).
constexpr int kBulkSlots = 2;
// The kernel's static shared memory (its mbarriers and the warps' sums).
constexpr size_t kBulkStaticSmem = sizeof(uint64_t) * kBulkWarps * kBulkSlots + sizeof(float) * 32;

__device__ __forceinline__ uint32_t sh_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sh_addr(bar)), "r"(count) : "memory");
}
// Arrives on bar, which then waits for `bytes` more of copies.
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sh_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT_%=;\n"
        "}\n" ::"r"(sh_addr(bar)),
        "r"(parity)
        : "memory");
}
// bytes (a multiple of 16; both addresses 16-byte aligned) from global src
// to shared dst, counted on bar.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     sh_addr(dst)),
                 "l"(src), "r"(bytes), "r"(sh_addr(bar))
                 : "memory");
}

// An item's rows into a buffer: row s's payload at s * row_bytes, its meta
// after both payloads (lane 0). A copy per row and plane: fewer, larger
// copies were slower (a pair's consecutive rows as one copy per plane: op
// bench Q5_K 84 -> 80%, Q2_K 61 -> 57%), and so were smaller ones (rows cut
// into 512-, 256- or 128-byte copies over the warp's lanes: Q5_K 79, 76,
// 72, 63%).
__device__ __forceinline__ void bulk_issue(const MvParams& p, int item, uint8_t* dst, uint64_t* bar) {
    const uint32_t rb = static_cast<uint32_t>(p.w[0].row_bytes), mb = static_cast<uint32_t>(p.w[0].meta_row_bytes);
    const QRows rows = q_rows(p, item);
    uint32_t bytes = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) bytes += rows.r[r].q != nullptr ? rb + mb : 0;
    mbar_expect(bar, bytes);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        if (rows.r[r].q == nullptr) continue;
        bulk_copy(dst + r * rb, rows.r[r].q, rb, bar);
        bulk_copy(dst + kRows * rb + r * mb, rows.r[r].m, mb, bar);
    }
}

// U blocks per lane at a time; Exact: the row's blocks are a multiple of
// 32 U (no test per block).
template <DType T, int U, bool Exact>
__global__ void __launch_bounds__(kBulkThreads, 1) k_matvec_bulk(const MvParams p, uint32_t act_bytes) {
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ __align__(16) float red[32];  // kBulkStaticSmem: keep in step
    __shared__ __align__(8) uint64_t bars[kBulkWarps][kBulkSlots];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nb = static_cast<int>(p.K / 32);
    const uint32_t rb = static_cast<uint32_t>(p.w[0].row_bytes), mb = static_cast<uint32_t>(p.w[0].meta_row_bytes);
    const uint32_t item_bytes = kRows * (rb + mb);
    const int n = static_cast<int>(p.n_items);
    const int step = static_cast<int>(gridDim.x) * kBulkWarps;
    const int first = static_cast<int>(blockIdx.x) * kBulkWarps + warp;
    uint8_t* ring = smem + act_bytes + static_cast<uint32_t>(warp * kBulkSlots) * item_bytes;
    uint64_t* bar = bars[warp];
    if (lane == 0) {
        for (int k = 0; k < kBulkSlots; ++k) mbar_init(&bar[k], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int k = 0; k < kBulkSlots && first + k * step < n; ++k) bulk_issue(p, first + k * step, ring + k * item_bytes, &bar[k]);
    }
    __syncwarp();
    prefetch_norm_inputs(p);
    pdl_enter();
    stage_act<true, kBulkWarps>(p, smem, red);
    const Act a = act_view(smem, p.K);

    int s = 0;
    uint32_t parity = 0;
    for (int i = first; i < n; i += step) {
        mbar_wait(&bar[s], parity);
        const uint8_t* buf = ring + static_cast<uint32_t>(s) * item_bytes;
        const QRow row[kRows] = {{buf, buf + kRows * rb}, {buf + rb, buf + kRows * rb + mb}};
        float acc[kRows] = {0.0f, 0.0f};
        for (int c = 0; c < nb; c += 32 * U) {
            // Every load of the U blocks first, then their dot products.
            QBlk blk[kRows][U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int b = c + lane + 32 * u;
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                    if (Exact || b < nb) {
                        const QBase at = qbase<T, false>(row[r], static_cast<size_t>(nb), static_cast<size_t>(b));
                        blk[r][u] = qload_at<T, Ld::Shared>(at, 0);
                    } else {
                        blk[r][u].dm = 0;  // adds 0 (as q_load's)
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int b = c + lane + 32 * u;
                const ActBlk ab = act_blk(a, Exact ? b : min(b, nb - 1));
#pragma unroll
                for (int r = 0; r < kRows; ++r) acc[r] += qdot<T>(blk[r][u], ab);
            }
        }
        __syncwarp();
        if (lane == 0 && i + kBulkSlots * step < n) {
            // The warp's shared loads of the buffer before the copy engine's
            // writes. (Every lane taking part in the copies, lane 0 arming
            // the barrier: op bench Q5_K 84 -> 79%, Q2_K 61 -> 49%.)
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            bulk_issue(p, i + kBulkSlots * step, ring + static_cast<uint32_t>(s) * item_bytes, &bar[s]);
        }
        if (++s == kBulkSlots) {
            s = 0;
            parity ^= 1u;
        }
        const float sum = pair_sum<32>(acc, lane >= 16);
        q_store<32, kBulkWarps>(p, red, i, sum, lane);
    }
}

// The types the bulk kernel serves by default (the measurements above).
template <DType T>
constexpr bool kBulkDefault = T == DType::Q5_0 || T == DType::Q5_K || T == DType::Q6_K;

// Shared memory of a bulk launch (0: it cannot take it: rows the copy
// engine cannot move, 16-byte sizes and addresses, or too large a ring).
size_t bulk_smem(const Ctx& ctx, const MvParams& p, size_t act_bytes) {
    const size_t rb = p.w[0].row_bytes, mb = p.w[0].meta_row_bytes;
    if (rb % 16 != 0 || mb % 16 != 0) return 0;
    for (int j = 0; j < (p.silu != nullptr ? 2 : p.n_jobs); ++j) {
        if (reinterpret_cast<uintptr_t>(p.w[j].data) % 16 != 0 || reinterpret_cast<uintptr_t>(p.w[j].meta) % 16 != 0) return 0;
    }
    const size_t bytes = act_bytes + static_cast<size_t>(kBulkSlots) * kBulkWarps * kRows * (rb + mb);
    return bytes + kBulkStaticSmem <= static_cast<size_t>(ctx.max_smem) ? bytes : 0;
}

// Launches k_matvec_bulk when it takes this launch; false otherwise.
template <DType T>
bool launch_bulk(const Ctx& ctx, const MvParams& p, const Tensor& node) {
    // The bulk kernel by default for its types at rows of 128 blocks or
    // more (at 2,048-wide rows it lost: tinyllama Q5_K decode step 553 ->
    // 578 us, Q6_K 569 -> 601; H100, same call).
    const int64_t nb = p.K / 32;
    const bool bulk = ctx.matvec == MatVecKernel::Bulk ||
                      (ctx.matvec == MatVecKernel::Streamed && ctx.bulk && kBulkDefault<T> && nb >= 128);
    if (!bulk) return false;
    const size_t act = (mv_smem_bytes(T, p.K) + 127) / 128 * 128;
    const size_t bytes = bulk_smem(ctx, p, act);
    if (bytes == 0) return false;
    const int64_t grid = std::min<int64_t>(ctx.sm_count, (p.n_items + kBulkWarps - 1) / kBulkWarps);
    auto go = [&](auto kernel) {
        check(launch(ctx, kernel, dim3(static_cast<unsigned>(grid)), dim3(kBulkThreads), bytes, p, static_cast<uint32_t>(act)),
              "k_matvec_bulk", node);
    };
    if (nb % 128 == 0) {
        go(k_matvec_bulk<T, 4, true>);
    } else if (nb > 64) {
        go(k_matvec_bulk<T, 4, false>);
    } else if (nb > 32) {
        go(k_matvec_bulk<T, 2, false>);
    } else {
        go(k_matvec_bulk<T, 1, false>);
    }
    return true;
}

}  // namespace

bool launch_matvec_bulk(const Ctx& ctx, const MvParams& p, DType t, const Tensor& node) {
    bool done = false;
    dispatch_quant(t, [&]<DType T>() { done = launch_bulk<T>(ctx, p, node); });
    return done;
}

void init_matvec_bulk(int max_smem) {
    for_each_quant([&]<DType T>() {
        raise_smem_limit(k_matvec_bulk<T, 4, true>, max_smem);
        raise_smem_limit(k_matvec_bulk<T, 4, false>, max_smem);
        raise_smem_limit(k_matvec_bulk<T, 2, false>, max_smem);
        raise_smem_limit(k_matvec_bulk<T, 1, false>, max_smem);
    });
}

}  // namespace lantern::cuda::mv
