#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_tables.h"

namespace lantern::unicode {
namespace {

Category lookup_category(uint32_t cp) {
    using namespace tables;
    if (cp > 0x10FFFF) return Category::Cn;
    // The last run starting at or before cp.
    const uint32_t key = (cp << 5) | 31u;
    const uint32_t* end = kCategoryRuns + kCategoryRunCount;
    const uint32_t* it = std::upper_bound(kCategoryRuns, end, key);
    return static_cast<Category>(*(it - 1) & 31u);
}

bool lookup_white_space(uint32_t cp) {
    using namespace tables;
    for (size_t i = 0; i < kWhiteSpaceCount; ++i) {
        if (cp < kWhiteSpace[i].first) return false;
        if (cp <= kWhiteSpace[i].last) return true;
    }
    return false;
}

// Properties of the ASCII range, computed once from the tables.
const std::array<uint32_t, 128>& ascii_properties() {
    static const std::array<uint32_t, 128> table = [] {
        std::array<uint32_t, 128> t{};
        for (uint32_t cp = 0; cp < 128; ++cp) {
            t[cp] = bit(lookup_category(cp)) | (lookup_white_space(cp) ? kWhiteSpaceBit : 0);
        }
        return t;
    }();
    return table;
}

}  // namespace

Category category(uint32_t cp) {
    if (cp < 128) return static_cast<Category>(__builtin_ctz(ascii_properties()[cp] & ~kWhiteSpaceBit));
    return lookup_category(cp);
}

bool is_white_space(uint32_t cp) {
    if (cp < 128) return (ascii_properties()[cp] & kWhiteSpaceBit) != 0;
    return lookup_white_space(cp);
}

uint32_t properties(uint32_t cp) {
    if (cp < 128) return ascii_properties()[cp];
    return bit(lookup_category(cp)) | (lookup_white_space(cp) ? kWhiteSpaceBit : 0);
}

char fold_to_ascii(uint32_t cp) {
    for (size_t i = 0; i < tables::kAsciiFoldCount; ++i) {
        if (tables::kAsciiFolds[i].codepoint == cp) return tables::kAsciiFolds[i].ascii;
    }
    return 0;
}

const char* unicode_version() { return tables::kUnicodeVersion; }

size_t utf8_sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 1;
}

size_t decode_utf8(std::string_view s, size_t pos, uint32_t& cp) {
    const auto b0 = static_cast<uint8_t>(s[pos]);
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    const size_t len = utf8_sequence_length(b0);
    auto invalid = [&] {
        cp = 0xDC00 + b0;
        return size_t{1};
    };
    if (len == 1 || pos + len > s.size()) return invalid();
    uint32_t value = b0 & (0x7F >> len);
    for (size_t i = 1; i < len; ++i) {
        const auto b = static_cast<uint8_t>(s[pos + i]);
        if ((b & 0xC0) != 0x80) return invalid();
        value = (value << 6) | (b & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (value < kMin[len] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
        return invalid();
    }
    cp = value;
    return len;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace lantern::unicode
