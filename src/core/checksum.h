// A 64-bit checksum of bytes: FNV-1a's xor-and-multiply step over 8-byte
// words, then over the tail bytes. It catches damaged or truncated files
// (a saved sequence state); it is no defence against deliberate changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace lantern {

inline uint64_t checksum64(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
    constexpr uint64_t kPrime = 1099511628211ull;
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * kPrime;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * kPrime;
    return h;
}

}  // namespace lantern
