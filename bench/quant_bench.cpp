// Micro-benchmarks of the CPU quant kernels (src/quant), one thread:
//   VecDot1Row/<type>/<rows>/<K>: one activation row against `rows` weight
//       rows (tiles of max_nr x 1, as in generation); GB/s of weights read.
//       512 rows of K = 4096 fit in L2, 16384 rows come from DRAM (mostly:
//       37 MB of Q4_0 against a 32 MB L3); 1536 x 768 is a small model's
//       matrix, where the per-call overhead shows.
//   VecDotTile/<type>: a 64 x 64 block of weight x activation rows (K = 4096)
//       in tiles of max_nr x max_nc, as in prompt processing; GOPS
//       (2 ops per multiply-add).
//   FromFloat/<type>: activation quantization of rows of K = 4096; GB/s of
//       f32 input.
//   ToFloat/<type>: dequantization of a row of K = 4096; GB/s of f32 output.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace lantern::quant {
namespace {

constexpr int64_t kK = 4096;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return v;
}

struct Matrix {
    size_t stride;
    std::vector<uint8_t> bytes;
    Matrix(DType t, int rows, uint32_t seed, FromFloatFn quantize, int64_t k = kK) : stride(dtype_row_size(t, k)) {
        bytes.resize(stride * rows);
        // A few distinct rows, repeated.
        for (int r = 0; r < rows; ++r) {
            if (r < 8) {
                const std::vector<float> x = random_floats(k, seed + r);
                quantize(x.data(), bytes.data() + r * stride, k);
            } else {
                std::memcpy(bytes.data() + r * stride, bytes.data() + (r % 8) * stride, stride);
            }
        }
    }
};

void vec_dot_1row(benchmark::State& state, DType t) {
    const TypeOps* ops = type_ops(t);
    const int rows = static_cast<int>(state.range(0));
    const int64_t k = state.range(1);
    const Matrix w(t, rows, 1, ops->from_float_ref, k);
    const Matrix a(ops->vec_dot_type, 1, 2, type_ops(ops->vec_dot_type)->from_float, k);
    std::vector<float> out(rows);
    for (auto _ : state) {
        for (int r = 0; r < rows; r += ops->max_nr) {
            const int nr = std::min(ops->max_nr, rows - r);
            ops->vec_dot(k, out.data() + r, rows, w.bytes.data() + r * w.stride, w.stride, a.bytes.data(), a.stride,
                         nr, 1);
        }
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes.size()));
}

void vec_dot_tile(benchmark::State& state, DType t) {
    const TypeOps* ops = type_ops(t);
    constexpr int kN = 64, kM = 64;
    const Matrix w(t, kN, 1, ops->from_float_ref);
    const Matrix a(ops->vec_dot_type, kM, 2, type_ops(ops->vec_dot_type)->from_float);
    std::vector<float> out(static_cast<size_t>(kN) * kM);
    for (auto _ : state) {
        for (int c = 0; c < kM; c += ops->max_nc) {
            const int nc = std::min(ops->max_nc, kM - c);
            for (int r = 0; r < kN; r += ops->max_nr) {
                const int nr = std::min(ops->max_nr, kN - r);
                ops->vec_dot(kK, out.data() + static_cast<size_t>(c) * kN + r, kN, w.bytes.data() + r * w.stride,
                             w.stride, a.bytes.data() + c * a.stride, a.stride, nr, nc);
            }
        }
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.counters["GOPS"] = benchmark::Counter(2.0 * kN * kM * kK / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["tile"] = ops->max_nr * 100 + ops->max_nc;
}

void from_float(benchmark::State& state, DType t) {
    const TypeOps* ops = type_ops(t);
    const std::vector<float> x = random_floats(kK, 3);
    std::vector<uint8_t> out(dtype_row_size(t, kK));
    for (auto _ : state) {
        ops->from_float(x.data(), out.data(), kK);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kK * static_cast<int64_t>(sizeof(float)));
}

void to_float(benchmark::State& state, DType t) {
    const TypeOps* ops = type_ops(t);
    const Matrix w(t, 1, 1, ops->from_float_ref);
    std::vector<float> out(static_cast<size_t>(kK));
    for (auto _ : state) {
        ops->to_float(w.bytes.data(), out.data(), kK);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kK * static_cast<int64_t>(sizeof(float)));
}

int register_all() {
    const DType weights[] = {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                             DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16,
                             DType::F32};
    for (DType t : weights) {
        const std::string name = dtype_name(t);
        benchmark::RegisterBenchmark(("VecDot1Row/" + name).c_str(), vec_dot_1row, t)
            ->Args({512, kK})
            ->Args({16384, kK})
            ->Args({1536, 768});
    }
    for (DType t : weights) {
        benchmark::RegisterBenchmark(("VecDotTile/" + std::string(dtype_name(t))).c_str(), vec_dot_tile, t);
    }
    for (DType t : weights) {
        benchmark::RegisterBenchmark(("ToFloat/" + std::string(dtype_name(t))).c_str(), to_float, t);
    }
    for (DType t : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F16, DType::BF16}) {
        benchmark::RegisterBenchmark(("FromFloat/" + std::string(dtype_name(t))).c_str(), from_float, t);
    }
    return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace lantern::quant
