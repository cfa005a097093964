// What writing a model file needs besides the GGUF writer (model/synth.cpp,
// model/quantize.cpp): llama.cpp's file-type numbers, the 32-element-block
// type a row takes when a K-quant's 256-element super-blocks do not divide
// it, and rows processed on several threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/dtype.h"

namespace lantern {

// llama_ftype of a file whose 2-D weights are all of type t (the K-quants
// as the "_M" mixes llama.cpp's benchmarks name them).
std::optional<uint32_t> llama_file_type(DType t);

// The type of a weight row of row_length elements asked to be `requested`:
// itself when its blocks divide the row, else a type of similar size with
// 32-element blocks (as llama.cpp's quantizer does); nullopt when neither
// divides it.
std::optional<DType> weight_row_type(DType requested, int64_t row_length);

// Whether the CPU can write type t (F32 is copied).
bool has_quantizer(DType t);

// Runs fn(begin, end) over [0, n) in chunks on up to n_threads threads and
// rethrows the first exception any of them raised.
template <typename Fn>
void parallel_for(int64_t n, int n_threads, const Fn& fn) {
    const int64_t chunk = std::max<int64_t>(1, n / (int64_t{std::max(n_threads, 1)} * 8));
    std::atomic<int64_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
        try {
            for (int64_t b; (b = next.fetch_add(chunk)) < n;) fn(b, std::min(n, b + chunk));
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
            next = n;
        }
    };
    std::vector<std::thread> threads;
    const int64_t useful = std::min<int64_t>(n_threads, (n + chunk - 1) / chunk);
    for (int64_t t = 1; t < useful; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace lantern
