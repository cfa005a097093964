// GBNF grammars, the format llama.cpp made common for holding generated text to
// a context-free grammar:
//
//   root   ::= answer ("," ws answer)*        # a rule: name ::= alternatives
//   answer ::= "yes" | "no" | [0-9]{1,3}
//   ws     ::= [ \t]*
//
// Terminals are quoted literals, character classes ([a-z_], [^"\\]) and '.' (any
// character); both take the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH and
// \UHHHHHHHH, and any UTF-8 character as itself. Items are grouped with ( ) and
// repeated with * + ? {m} {m,} {m,n}; '#' comments to the end of the line. A rule
// ends with its line, except inside parentheses and after '::=' or '|'. Rule
// names take letters, digits, '-' and '_'. The text must match the rule `root`.
//
// parse() compiles the rules into alternatives of elements, each a character
// set or a rule reference, flattened into one array where an End element closes
// every alternative; repetitions become helper rules (x* is r ::= x r | ""),
// so that a position in that array is all a parse stack needs
// (grammar_constraint.h runs them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lantern {

class Grammar {
public:
    static constexpr uint32_t kMaxCodePoint = 0x10FFFF;
    static constexpr int kMaxRepeat = 1000;        // the largest m or n of x{m,n}
    static constexpr int kMaxNesting = 64;         // groups inside groups
    static constexpr size_t kMaxElements = 1 << 20;  // after repetitions are written out

    // Throws Error(InvalidArgument) naming the line and column of a syntax
    // error, a rule used but not defined or defined twice, a grammar without
    // `root`, and a left-recursive rule (one that can reach itself before
    // reading a character, which a parse stack would expand for ever; this
    // includes repeating what can be empty, as in ("a"?)*), groups nested
    // deeper than kMaxNesting, and more than kMaxElements elements (x{1000}
    // is a thousand copies of x).
    static std::shared_ptr<const Grammar> parse(std::string_view text);

    struct Element {
        enum class Kind : uint8_t { Chars, Ref, End };
        Kind kind = Kind::End;
        uint32_t index = 0;  // Chars: a set; Ref: a rule
    };
    // Sorted, disjoint, non-adjacent ranges of code points [first, second].
    struct CharSet {
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        bool contains(uint32_t c) const;
        bool overlaps(uint32_t lo, uint32_t hi) const;
    };

    const Element& at(uint32_t pos) const { return elems_[pos]; }
    const CharSet& set(uint32_t index) const { return sets_[index]; }
    // A rule's alternatives, as the positions of their first elements.
    const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
    uint32_t root() const { return root_; }

private:
    Grammar() = default;
    friend class GrammarCompiler;
    std::vector<Element> elems_;
    std::vector<std::vector<uint32_t>> rules_;
    std::vector<CharSet> sets_;
    uint32_t root_ = 0;
};

}  // namespace lantern
