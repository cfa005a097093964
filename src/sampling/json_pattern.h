// A JSON schema's `pattern` (an ECMA-262 regular expression) as the sampler
// checks it: a position (Glushkov) automaton over characters whose states
// are a 64-bit set, so that a SchemaState frame holds them and a string's
// text can be checked character by character as it is written.
//
// The subset: literals and escaped punctuation; `.`; classes [a-z0-9_],
// [^...]; \d \D \w \W \s \S; \n \r \t \f \v \0 \xHH and \uHHHH of ASCII
// characters; groups (...), (?:...), (?<name>...); alternation |; the
// quantifiers * + ? {n} {n,} {n,m} (lazy forms too: laziness does not change
// what matches); ^ and $ at the start and end of the pattern only. As JSON
// schemas mean it, a pattern without ^ (or $) may match anywhere, so it is
// read with any text allowed before (after) it.
//
// Refused, since they would not be enforced: backreferences, lookaround,
// \b, \p{...}, anchors inside the pattern, and non-ASCII characters in the
// pattern (its classes list ASCII characters: a non-ASCII character of the
// text matches `.`, negated classes, \D, \W and \S, and nothing else; \s
// matches ASCII spaces only). At most kMaxPositions characters after the
// repetitions are written out (a{3} is three).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lantern {

class JsonPattern {
public:
    static constexpr int kMaxPositions = 63;  // bit 0 of a state set: before any character
    static constexpr uint64_t kStart = 1;

    // Throws Error(InvalidArgument) saying what it cannot take.
    static JsonPattern compile(std::string_view source);

    // The states after one more character of the text (a code point;
    // the non-ASCII ones all alike). Empty: no match can go on.
    uint64_t step(uint64_t states, uint32_t c) const;
    // The text so far matches the whole pattern.
    bool accepts(uint64_t states) const { return (states & accept_) != 0; }
    // The fewest characters that still complete a match (a string's
    // maxLength then ends no text where no match fits).
    int min_left(uint64_t states) const;
    // The most characters a match may still take; kUnbounded: no limit.
    static constexpr int kUnbounded = 255;
    int max_left(uint64_t states) const;

private:
    friend class PatternBuilder;
    void measure();  // left_ and most_left_ from the follow sets
    std::vector<uint64_t> follow_;          // per state: the positions that may come next
    std::array<uint64_t, 128> by_ascii_{};  // the positions whose class has the character
    uint64_t by_other_ = 0;                 // the positions whose class has non-ASCII characters
    uint64_t accept_ = 0;
    std::array<uint8_t, kMaxPositions + 1> left_{};      // per state: min_left of it alone (255: none)
    std::array<uint8_t, kMaxPositions + 1> most_left_{};  // per state: max_left of it alone
};

}  // namespace lantern
