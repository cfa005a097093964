// JSON schemas' `pattern` (sampling/json_pattern.h): what a pattern matches
// whole, which prefixes it lets go on, and the syntax it refuses (a schema's
// patterned strings: text_json_schema_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "lantern/error.h"
#include "sampling/json_pattern.h"

namespace lantern {
namespace {

// The states after the text (ASCII characters; a byte >= 0x80 stands for a
// non-ASCII character); 0 once no match can go on.
uint64_t run(const JsonPattern& p, const std::string& text) {
    uint64_t s = JsonPattern::kStart;
    for (char c : text) s = p.step(s, static_cast<unsigned char>(c));
    return s;
}
bool matches(const char* pattern, const std::string& text) { return JsonPattern::compile(pattern).accepts(run(JsonPattern::compile(pattern), text)); }
bool may_go_on(const char* pattern, const std::string& text) { return run(JsonPattern::compile(pattern), text) != 0; }

TEST(JsonPattern, MatchesWholeTextsAsEcmaScriptWould) {
    struct Case {
        const char* pattern;
        const char* text;
        bool match;
    };
    for (const Case& c : {
             Case{"^\\d{3}-\\d{4}$", "555-1234", true},
             Case{"^\\d{3}-\\d{4}$", "555-123", false},
             Case{"^\\d{3}-\\d{4}$", "5551-234", false},
             Case{"^[A-Z]{2}\\d+$", "AB1", true},
             Case{"^[A-Z]{2}\\d+$", "AB", false},
             Case{"^[A-Z]{2}\\d+$", "ab12", false},
             Case{"^(cat|dog)s?$", "dogs", true},
             Case{"^(cat|dog)s?$", "cat", true},
             Case{"^(cat|dog)s?$", "cow", false},
             Case{"^(?:ab)*$", "", true},
             Case{"^(?:ab)*$", "abab", true},
             Case{"^(?:ab)*$", "aba", false},
             Case{"^a{2,3}$", "a", false},
             Case{"^a{2,3}$", "aaa", true},
             Case{"^a{2,3}$", "aaaa", false},
             Case{"^a{2,}$", "aaaaaa", true},
             Case{"^[^0-9 ]+$", "x_y", true},
             Case{"^[^0-9 ]+$", "x y", false},
             Case{"^[\\w.-]+@[\\w-]+\\.[a-z]{2,}$", "ada.l@example.org", true},
             Case{"^[\\w.-]+@[\\w-]+\\.[a-z]{2,}$", "ada@example", false},
             Case{"^\\$\\d+\\.\\d\\d$", "$12.50", true},  // escaped anchors and dots are literals
             Case{"^a.c$", "a\xC3" "c", true},             // '.' takes a non-ASCII character
             Case{"^a.c$", "a\nc", false},
             Case{"^[a-z]+$", "\xC3", false},             // a class of ASCII characters does not
             Case{"^(?<year>\\d{4})-\\d{2}$", "2026-11", true},
             Case{"^x+?y$", "xxy", true},                  // lazy quantifiers match the same texts
             Case{"^a{,2}$", "a{,2}", true},               // not a quantifier: literal braces
             Case{"\\d", "abc1def", true},                 // unanchored: anywhere in the text
             Case{"\\d", "abcdef", false},
             Case{"^ab", "abzzz", true},
             Case{"yz$", "xxyz", true},
             Case{"yz$", "yzx", false},
             Case{"", "anything", true},
         }) {
        EXPECT_EQ(matches(c.pattern, c.text), c.match) << c.pattern << " on " << c.text;
    }
}

TEST(JsonPattern, PrefixesGoOnOnlyTowardAMatch) {
    EXPECT_TRUE(may_go_on("^\\d{3}-\\d{4}$", "55"));
    EXPECT_TRUE(may_go_on("^\\d{3}-\\d{4}$", "555-"));
    EXPECT_FALSE(may_go_on("^\\d{3}-\\d{4}$", "55-"));    // stopped at the '-'
    EXPECT_FALSE(may_go_on("^\\d{3}-\\d{4}$", "555-12345"));
    EXPECT_FALSE(may_go_on("^(cat|dog)$", "cad"));
    EXPECT_TRUE(may_go_on("^(cat|dog)$", "do"));
    EXPECT_TRUE(may_go_on("\\d", "xyz"));                  // a digit may still come
    const JsonPattern p = JsonPattern::compile("^a{2,4}(b|cd)$");
    EXPECT_EQ(p.min_left(JsonPattern::kStart), 3);
    EXPECT_EQ(p.max_left(JsonPattern::kStart), 6);
    EXPECT_EQ(p.max_left(run(p, "aaa")), 3);
    EXPECT_EQ(JsonPattern::compile("^a(bc)*d$").max_left(JsonPattern::kStart), JsonPattern::kUnbounded);
    EXPECT_EQ(JsonPattern::compile("x").max_left(JsonPattern::kStart), JsonPattern::kUnbounded);  // unanchored
}

TEST(JsonPattern, RefusesWhatItWouldNotEnforce) {
    for (const char* p : {"(a)\\1", "a(?=b)", "a(?!b)", "(?<=a)b", "\\bword", "\\p{L}", "a^b", "a$b", "caf\xC3\xA9",
                          "[\xC3\xA9]", "\\u00e9", "(ab", "ab)", "[ab", "*a", "a**", "a{3,2}", "[z-a]", "a{1001}",
                          "\\", "\\q", "\\07", "(?P<x>a)"}) {
        try {
            JsonPattern::compile(p);
            ADD_FAILURE() << p << " was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << p;
        }
    }
    // 64 characters once written out: one more than a state set holds.
    EXPECT_NO_THROW(JsonPattern::compile("^a{63}$"));
    EXPECT_THROW(JsonPattern::compile("^a{64}$"), Error);
    EXPECT_THROW(JsonPattern::compile("^(?:ab){32}$"), Error);
    // Repetitions of empty groups are refused rather than written out for
    // ever; deep nesting is refused rather than overflowing the stack.
    EXPECT_THROW(JsonPattern::compile("(((|){1000}){1000}){1000}"), Error);
    EXPECT_THROW(JsonPattern::compile(std::string(5000, '(') + std::string(5000, ')')), Error);
}

// Any text as a pattern compiles or is refused by an Error, never worse;
// a compiled one steps through any text.
TEST(JsonPattern, AnyTextCompilesOrIsRefused) {
    const std::string alphabet = "ab01^$.*+?|()[]{}-,\\dws:=!<>";
    uint32_t seed = 12345;
    auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
    int compiled = 0;
    for (int i = 0; i < 5000; ++i) {
        std::string p;
        const uint32_t len = next() % 12;
        for (uint32_t k = 0; k < len; ++k) p += alphabet[(next() >> 8) % alphabet.size()];
        try {
            const JsonPattern pat = JsonPattern::compile(p);
            ++compiled;
            uint64_t st = JsonPattern::kStart;
            for (int k = 0; k < 16 && st != 0; ++k) st = pat.step(st, (next() >> 8) % 130);
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << p;
        }
    }
    EXPECT_GT(compiled, 500);  // the generator does reach valid patterns
}

}  // namespace
}  // namespace lantern
