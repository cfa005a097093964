#include "tokenizer/normalize.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

namespace lantern::unicode {
namespace {

// Hangul syllables decompose and compose by arithmetic (UAX #15, 3.12 of
// the Unicode Standard): S = SBase + (L index * VCount + V index) * TCount +
// T index.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The byte a decoder escape stands for (decode_utf8: 0xDC00 + byte), or -1.
int escaped_byte(uint32_t cp) { return cp >= 0xDC80 && cp <= 0xDCFF ? static_cast<int>(cp - 0xDC00) : -1; }

uint8_t combining_class(uint32_t cp) {
    using namespace tables;
    if (cp < 0x300) return 0;  // the first combining mark
    const CombiningRange* end = kCombiningClasses + kCombiningClassCount;
    const CombiningRange* it =
        std::upper_bound(kCombiningClasses, end, cp, [](uint32_t c, const CombiningRange& r) { return c < r.first; });
    if (it == kCombiningClasses) return 0;
    --it;
    return cp <= it->last ? it->ccc : 0;
}

// Appends the full canonical decomposition of cp.
void decompose(uint32_t cp, std::vector<uint32_t>& out) {
    using namespace tables;
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const uint32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
        return;
    }
    if (cp >= 0xC0) {  // the first codepoint with a canonical decomposition
        const Decomposition* end = kDecompositions + kDecompositionCount;
        const Decomposition* it =
            std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, uint32_t c) { return d.codepoint < c; });
        if (it != end && it->codepoint == cp) {
            decompose(it->first, out);
            if (it->second != 0) decompose(it->second, out);
            return;
        }
    }
    out.push_back(cp);
}

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
    using namespace tables;
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    }
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
        return a + (b - kTBase);
    }
    const Composition* end = kCompositions + kCompositionCount;
    const Composition* it = std::lower_bound(kCompositions, end, std::make_pair(a, b), [](const Composition& c, const auto& k) {
        return c.first < k.first || (c.first == k.first && c.second < k.second);
    });
    return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string to_nfc(std::string_view text) {
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
        return std::string(text);
    }
    std::vector<uint32_t> cps;
    cps.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        uint32_t cp = 0;
        pos += decode_utf8(text, pos, cp);
        decompose(cp, cps);  // an escape has no decomposition
    }
    // Canonical ordering: each run of non-starters sorted by class, stably.
    for (size_t k = 1; k < cps.size(); ++k) {
        const uint8_t c = combining_class(cps[k]);
        if (c == 0) continue;
        for (size_t j = k; j > 0 && combining_class(cps[j - 1]) > c; --j) std::swap(cps[j - 1], cps[j]);
    }
    // Canonical composition: a character joins the last starter unless a
    // character between them is a starter or has a class >= its own (after
    // the ordering above, the last one kept has the largest class).
    std::vector<uint32_t> out;
    out.reserve(cps.size());
    size_t starter = SIZE_MAX;
    uint8_t last_class = 0;
    for (uint32_t cp : cps) {
        const uint8_t c = combining_class(cp);
        if (starter != SIZE_MAX && (out.size() == starter + 1 || last_class < c)) {
            if (const uint32_t composite = compose(out[starter], cp); composite != 0) {
                out[starter] = composite;
                continue;
            }
        }
        if (c == 0) starter = out.size();
        last_class = c;
        out.push_back(cp);
    }
    std::string result;
    result.reserve(text.size());
    for (uint32_t cp : out) {
        if (const int b = escaped_byte(cp); b >= 0) {
            result.push_back(static_cast<char>(b));
        } else {
            append_utf8(result, cp);
        }
    }
    return result;
}

}  // namespace lantern::unicode
