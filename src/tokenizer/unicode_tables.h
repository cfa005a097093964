// Declarations of the generated Unicode tables (unicode_tables.cpp and
// unicode_nfc_tables.cpp, written by tools/gen_unicode_tables.py). Use the
// functions in unicode.h and normalize.h instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lantern::unicode::tables {

struct CodepointRange {
    uint32_t first;
    uint32_t last;  // inclusive
};

struct FoldPair {
    uint32_t codepoint;
    char ascii;  // the lower-case ASCII letter it folds to
};

// Canonical composition data (unicode_nfc_tables.cpp).
struct CombiningRange {
    uint32_t first;
    uint32_t last;  // inclusive
    uint8_t ccc;    // canonical combining class, 1..254
};

struct Decomposition {
    uint32_t codepoint;
    uint32_t first;
    uint32_t second;  // 0: a singleton
};

struct Composition {
    uint32_t first;
    uint32_t second;
    uint32_t composite;
};

extern const char* const kUnicodeVersion;
extern const uint32_t kCategoryRuns[];  // (first << 5) | Category, sorted
extern const size_t kCategoryRunCount;
extern const CodepointRange kWhiteSpace[];
extern const size_t kWhiteSpaceCount;
extern const FoldPair kAsciiFolds[];
extern const size_t kAsciiFoldCount;
extern const CombiningRange kCombiningClasses[];  // sorted
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];  // sorted by codepoint
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];  // sorted by (first, second)
extern const size_t kCompositionCount;

}  // namespace lantern::unicode::tables
