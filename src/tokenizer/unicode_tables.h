// Declarations of the generated Unicode tables (unicode_tables.cpp, written by
// tools/gen_unicode_tables.py). Use the functions in unicode.h instead.
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

extern const char* const kUnicodeVersion;
extern const uint32_t kCategoryRuns[];  // (first << 5) | Category, sorted
extern const size_t kCategoryRunCount;
extern const CodepointRange kWhiteSpace[];
extern const size_t kWhiteSpaceCount;
extern const FoldPair kAsciiFolds[];
extern const size_t kAsciiFoldCount;

}  // namespace lantern::unicode::tables
