// Turns a tile kernel templated on its shape into one VecDotFn.
//
// A kernel is a class with
//   template <int NR, int NC> static void run(int64_t n, float* s, size_t ldc,
//       const void* x, size_t bx, const void* y, size_t by);
// computing the NR x NC tile of quant.h's VecDotFn contract with the shape known
// at compile time (so accumulators live in registers). TiledDot instantiates
// every shape up to MaxNR x MaxNC and picks one per call.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace lantern::quant {

template <class Kernel, int MaxNR, int MaxNC>
struct TiledDot {
    static constexpr int kMaxNR = MaxNR;
    static constexpr int kMaxNC = MaxNC;

    static void vec_dot(int64_t n, float* s, size_t ldc, const void* x, size_t bx, const void* y,
                        size_t by, int nr, int nc) {
        assert(nr >= 1 && nr <= MaxNR && nc >= 1 && nc <= MaxNC);
        kTable[(nr - 1) * MaxNC + (nc - 1)](n, s, ldc, x, bx, y, by);
    }

private:
    using Fn = void (*)(int64_t, float*, size_t, const void*, size_t, const void*, size_t);

    template <int... I>
    static constexpr std::array<Fn, sizeof...(I)> make(std::integer_sequence<int, I...>) {
        return {&Kernel::template run<I / MaxNC + 1, I % MaxNC + 1>...};
    }
    static constexpr std::array<Fn, MaxNR * MaxNC> kTable =
        make(std::make_integer_sequence<int, MaxNR * MaxNC>{});
};

// Row r of a strided array of rows, as a T*.
template <class T>
inline const T* row_at(const void* base, size_t stride, int r) {
    return reinterpret_cast<const T*>(static_cast<const char*>(base) + static_cast<size_t>(r) * stride);
}

// Software prefetch of the `span` bytes that start `ahead` bytes after p,
// one request per 64-byte line. The tiles read a few weight rows at once,
// and with one activation row they wait on memory: the hardware prefetcher
// alone keeps too few lines in flight. Computed on integers: the address
// may lie past the end of a row, and a prefetch never faults.
inline void prefetch_ahead(const void* p, size_t ahead, size_t span) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(p) + ahead;
    for (uintptr_t offset = 0; offset < span; offset += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(start + offset));
    }
}

}  // namespace lantern::quant
