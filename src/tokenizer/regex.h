// A small Unicode regex engine for pre-tokenizer split patterns.
//
// The published pre-tokenizers (tokenizer.json "Split" patterns, tiktoken
// patterns) are written for Oniguruma / PCRE-style engines and lean on
// Unicode general categories (\p{L}, \p{N}, \p{Lu}, ...), lookahead and
// case-insensitive groups, none of which std::regex offers. This engine
// matches them by backtracking over codepoints, leftmost-first, which is the
// semantics those engines give these patterns.
//
// Dialect:
//   literals (UTF-8), .  \s \S \d \D \w \W  \p{X} \P{X} \p{^X}
//     X = a general category (Lu, Nd, ...), a group (L, M, N, P, S, Z, C),
//         its long name (Letter, Number, ...) or L& / LC (cased letter)
//   escapes \r \n \t \f \v \e \0 \xHH \x{H...} \uHHHH \UHHHHHHHH, \ + punctuation
//   classes [...] [^...] with ranges, escapes and nested classes (a union)
//   groups (...) (?:...) (?i:...) (?i) (?=...) (?!...) (?>...)
//   quantifiers ? * + {n} {n,} {n,m}, lazy (+?) and possessive (++) forms
//   anchors ^ $ (line anchors, as in Oniguruma's Ruby syntax) \A \z \Z
// Not supported (the constructor throws Error(InvalidArgument) naming the
// pattern and the offset): backreferences, lookbehind, script properties,
// a repeated sub-pattern that can match empty.
//
// Case-insensitivity covers ASCII letters and the non-ASCII codepoints that
// case-fold to them (U+017F, U+212A); other letters match as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lantern::tok {

// A text decoded for matching.
struct CodepointText {
    std::vector<uint32_t> cps;      // [n] codepoints (invalid bytes as 0xDC00 + byte)
    std::vector<uint32_t> props;    // [n] unicode::properties of each
    std::vector<uint32_t> offsets;  // [n + 1] byte offset of each codepoint, then the text size

    void assign(std::string_view utf8);
    size_t size() const { return cps.size(); }
};

class Regex {
public:
    explicit Regex(std::string_view pattern);

    // The backtracking stack; reuse one per thread to avoid allocations.
    struct Scratch {
        std::vector<std::pair<uint32_t, uint32_t>> stack;  // (pc, position)
    };

    // Finds the leftmost non-empty match starting at or after `from` inside
    // text[begin, end), which the pattern sees as the whole text (anchors and
    // lookaheads stop at its edges). Sets [match_begin, match_end) on success.
    bool find(const CodepointText& text, size_t begin, size_t end, size_t from,
              size_t& match_begin, size_t& match_end, Scratch& scratch) const;

    const std::string& pattern() const { return pattern_; }

    struct CharClass {
        bool negated = false;
        uint32_t any_props = 0;              // matches if it has any of these property bits
        std::vector<uint32_t> lacks_props;   // or if it has none of the bits of one entry
        std::vector<std::pair<uint32_t, uint32_t>> ranges;  // or lies in one (sorted, inclusive)

        bool matches(uint32_t cp, uint32_t props) const;
    };

    enum class Op : uint8_t {
        Char,       // a = codepoint
        Class,      // a = class index
        Split,      // try x, then y
        Jmp,        // x
        LineBegin,  // ^
        LineEnd,    // $
        TextBegin,  // \A
        TextEnd,    // \z
        TextEndNl,  // \Z
        LookAhead,  // sub-program at pc+1 must match here; continue at x
        NegLookAhead,
        Atomic,     // sub-program at pc+1, first match taken, no backtracking into it; continue at x
        SubMatch,   // end of a sub-program
        Match,
    };
    struct Inst {
        Op op;
        uint32_t a = 0;
        uint32_t x = 0;
        uint32_t y = 0;
    };

private:
    struct Bounds;
    bool run(uint32_t pc, uint32_t pos, const CodepointText& text, const Bounds& bounds,
             uint32_t& match_end, Scratch& scratch) const;

    std::string pattern_;
    std::vector<Inst> prog_;
    std::vector<CharClass> classes_;

    friend class RegexCompiler;
};

}  // namespace lantern::tok
