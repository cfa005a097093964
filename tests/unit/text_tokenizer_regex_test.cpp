// The pieces under the pre-tokenizers: the regex engine, the Unicode tables
// and UTF-8 coding, and GPT-2's byte alphabet.
#include <gtest/gtest.h>

#include <set>

#include "lantern/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lantern::tok {
namespace {

// All non-empty matches of `pattern` in `text`, left to right.
std::vector<std::string> matches(std::string_view pattern, std::string_view text) {
    const Regex re(pattern);
    CodepointText t;
    t.assign(text);
    Regex::Scratch scratch;
    std::vector<std::string> out;
    size_t pos = 0, b = 0, e = 0;
    while (re.find(t, 0, t.size(), pos, b, e, scratch)) {
        out.emplace_back(text.substr(t.offsets[b], t.offsets[e] - t.offsets[b]));
        pos = e;
    }
    return out;
}

using V = std::vector<std::string>;

TEST(TokRegex, LiteralsAlternationAndQuantifiers) {
    EXPECT_EQ(matches("ab", "xabyab"), (V{"ab", "ab"}));
    EXPECT_EQ(matches("a|ab", "ab"), (V{"a"}));  // leftmost-first, not longest
    EXPECT_EQ(matches("ab|a", "ab"), (V{"ab"}));
    EXPECT_EQ(matches("a+", "caaab"), (V{"aaa"}));
    EXPECT_EQ(matches("a+?", "aaa"), (V{"a", "a", "a"}));
    EXPECT_EQ(matches("a{2}", "aaaaa"), (V{"aa", "aa"}));
    EXPECT_EQ(matches("a{1,3}", "aaaaa"), (V{"aaa", "aa"}));
    EXPECT_EQ(matches("a{2,}", "a aa aaaa"), (V{"aa", "aaaa"}));
    EXPECT_EQ(matches("ba?c", "bc bac baac"), (V{"bc", "bac"}));
    EXPECT_EQ(matches("x*", "aaa"), V{});  // empty matches are skipped
    EXPECT_EQ(matches("a{,2}", "a{,2}"), (V{"a{,2}"}));  // not a quantifier: literal braces
    EXPECT_EQ(matches("(?:ab)+", "ababa"), (V{"abab"}));
    EXPECT_EQ(matches("(IMG)((A|B){1,2})Z", "IMGABZ IMGZ IMGBZ"), (V{"IMGABZ", "IMGBZ"}));
}

TEST(TokRegex, UnicodeClasses) {
    EXPECT_EQ(matches(R"(\p{L}+)", "héllo мир 中文 x1"), (V{"héllo", "мир", "中文", "x"}));
    EXPECT_EQ(matches(R"(\p{N}+)", "a12 ½ Ⅷ ٣٤"), (V{"12", "½", "Ⅷ", "٣٤"}));
    EXPECT_EQ(matches(R"(\p{Lu}+)", "HelloWORLD Émile"), (V{"H", "WORLD", "É"}));
    EXPECT_EQ(matches(R"(\P{L}+)", "ab12cd"), (V{"12"}));
    EXPECT_EQ(matches(R"(\p{^L}+)", "ab12cd"), (V{"12"}));
    EXPECT_EQ(matches(R"([^\s\p{L}\p{N}]+)", "a, b!? 9;"), (V{",", "!?", ";"}));
    EXPECT_EQ(matches(R"([\p{P}\$\+<=>\^~\|`]+)", "a$+<b>c`d"), (V{"$+<", ">", "`"}));
    EXPECT_EQ(matches(R"(\s+)", "a \t\u00a0\u3000b\u0085c\u001cd"), (V{" \t\u00a0\u3000", "\u0085"}));
    EXPECT_EQ(matches(R"(\S+)", "ab  cd"), (V{"ab", "cd"}));
    EXPECT_EQ(matches(R"([\x{4E00}-\x{9FA5}]+)", "a中文b"), (V{"中文"}));
    EXPECT_EQ(matches(R"(\x41\u0042\U00000043)", "ABC"), (V{"ABC"}));
    EXPECT_EQ(matches(R"([!-/:-@\[-`{-~])", "a[b]"), (V{"[", "]"}));
    // A nested class is a union (Oniguruma).
    EXPECT_EQ(matches(R"([^(\s|[.,!?])]+)", "ab(c) d.e|f"), (V{"ab", "c", "d", "e", "f"}));
    EXPECT_EQ(matches(R"(.+)", "ab\ncd"), (V{"ab", "cd"}));
    EXPECT_EQ(matches(R"(\d+)", "x42y"), (V{"42"}));
    EXPECT_EQ(matches(R"(\w+)", "foo_bar-baz"), (V{"foo_bar", "baz"}));
}

TEST(TokRegex, CaseInsensitiveGroups) {
    EXPECT_EQ(matches(R"((?i:'s|'ll))", "'s 'S 'Ll 'LL 'x"), (V{"'s", "'S", "'Ll", "'LL"}));
    // U+017F (long s) and U+212A (Kelvin) case-fold to ASCII letters.
    EXPECT_EQ(matches(R"((?i:'s))", "'\u017f"), (V{"'\u017f"}));
    EXPECT_EQ(matches(R"((?i:k))", "\u212a"), (V{"\u212a"}));
    EXPECT_EQ(matches(R"((?i)[a-c]+)", "xAbCy"), (V{"AbC"}));
    EXPECT_EQ(matches(R"('(?i:[sdmt]|ll|ve|re))", "'D 'RE 'x"), (V{"'D", "'RE"}));
    // Outside the group, case matters.
    EXPECT_EQ(matches(R"((?i:a)b)", "AB Ab"), (V{"Ab"}));
}

TEST(TokRegex, LookaheadAtomicAndAnchors) {
    EXPECT_EQ(matches(R"(\s+(?!\S))", "a   b"), (V{"  "}));
    EXPECT_EQ(matches(R"(\s+(?!\S))", "a   "), (V{"   "}));
    EXPECT_EQ(matches(R"(a(?=b))", "ab ac"), (V{"a"}));
    EXPECT_EQ(matches(R"((?>a+)a)", "aaaa"), V{});
    EXPECT_EQ(matches(R"(a++a)", "aaaa"), V{});
    EXPECT_EQ(matches(R"(a+a)", "aaaa"), (V{"aaaa"}));
    EXPECT_EQ(matches(R"(\s+$)", "a  \nb  "), (V{"  ", "  "}));  // $ also before a newline
    EXPECT_EQ(matches(R"(^b)", "b\nb ab"), (V{"b", "b"}));
    EXPECT_EQ(matches(R"(\Aa)", "aa"), (V{"a"}));
    EXPECT_EQ(matches(R"(a\z)", "aa"), (V{"a"}));
    // The window given to find() is the whole text for anchors and lookaheads.
    const Regex re(R"(\s+(?!\S))");
    CodepointText t;
    t.assign("x  y");
    Regex::Scratch scratch;
    size_t b = 0, e = 0;
    ASSERT_TRUE(re.find(t, 0, 3, 1, b, e, scratch));
    EXPECT_EQ(b, 1u);
    EXPECT_EQ(e, 3u);
}

TEST(TokRegex, RejectsWhatItCannotMatch) {
    for (const char* bad : {R"((a)\1)", R"((?<=a)b)", R"(\p{Han})", R"([abc)", R"(*a)", R"((a*)*)", R"([z-a])",
                            R"((?P<x>a))", R"(\bword)", R"((ab)", R"(ab))", "\xff"}) {
        EXPECT_THROW(Regex{bad}, Error) << bad;
        try {
            Regex r{bad};
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
            EXPECT_NE(std::string(e.what()).find("regex"), std::string::npos);
        }
    }
}

TEST(TokUnicode, Categories) {
    using unicode::Category;
    using unicode::category;
    EXPECT_STREQ(unicode::unicode_version(), "14.0.0");
    EXPECT_EQ(category('A'), Category::Lu);
    EXPECT_EQ(category('z'), Category::Ll);
    EXPECT_EQ(category(0x00E9), Category::Ll);
    EXPECT_EQ(category(0x01C5), Category::Lt);
    EXPECT_EQ(category(0x02B0), Category::Lm);
    EXPECT_EQ(category(0x4E2D), Category::Lo);
    EXPECT_EQ(category(0x0301), Category::Mn);
    EXPECT_EQ(category('7'), Category::Nd);
    EXPECT_EQ(category(0x0663), Category::Nd);
    EXPECT_EQ(category(0x2167), Category::Nl);
    EXPECT_EQ(category(0x00BD), Category::No);
    EXPECT_EQ(category('_'), Category::Pc);
    EXPECT_EQ(category('('), Category::Ps);
    EXPECT_EQ(category('$'), Category::Sc);
    EXPECT_EQ(category('`'), Category::Sk);
    EXPECT_EQ(category('+'), Category::Sm);
    EXPECT_EQ(category(0x1F600), Category::So);
    EXPECT_EQ(category(' '), Category::Zs);
    EXPECT_EQ(category(0x2028), Category::Zl);
    EXPECT_EQ(category('\n'), Category::Cc);
    EXPECT_EQ(category(0x200D), Category::Cf);
    EXPECT_EQ(category(0xE000), Category::Co);
    EXPECT_EQ(category(0x0378), Category::Cn);
    EXPECT_EQ(category(0x10FFFF), Category::Cn);
    EXPECT_EQ(category(0x110000), Category::Cn);
}

TEST(TokUnicode, WhiteSpaceIsTheUnicodeProperty) {
    for (uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x2029u,
                        0x202Fu, 0x205Fu, 0x3000u}) {
        EXPECT_TRUE(unicode::is_white_space(cp)) << std::hex << cp;
    }
    // Python's str.isspace() accepts U+001C..U+001F; White_Space does not.
    for (uint32_t cp : {0x1Cu, 0x1Fu, 0x200Bu, 0x180Eu, 0xFEFFu, 0x61u}) {
        EXPECT_FALSE(unicode::is_white_space(cp)) << std::hex << cp;
    }
}

TEST(TokUnicode, Utf8DecodingKeepsEveryByte) {
    auto decode_all = [](std::string_view s) {
        std::vector<uint32_t> cps;
        for (size_t pos = 0; pos < s.size();) {
            uint32_t cp = 0;
            pos += unicode::decode_utf8(s, pos, cp);
            cps.push_back(cp);
        }
        return cps;
    };
    EXPECT_EQ(decode_all("a\u00e9\u4e2d\U0001F600"), (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F600}));
    // Overlong, surrogate, truncated and stray bytes decode one byte at a time.
    EXPECT_EQ(decode_all("\xc0\xaf"), (std::vector<uint32_t>{0xDCC0, 0xDCAF}));
    EXPECT_EQ(decode_all("\xed\xa0\x80"), (std::vector<uint32_t>{0xDCED, 0xDCA0, 0xDC80}));
    EXPECT_EQ(decode_all("\xe4\xb8"), (std::vector<uint32_t>{0xDCE4, 0xDCB8}));
    EXPECT_EQ(decode_all("\xf4\x90\x80\x80"), (std::vector<uint32_t>{0xDCF4, 0xDC90, 0xDC80, 0xDC80}));
    std::string out;
    for (uint32_t cp : {0x41u, 0xE9u, 0x4E2Du, 0x1F600u}) unicode::append_utf8(out, cp);
    EXPECT_EQ(out, "A\u00e9\u4e2d\U0001F600");
}

TEST(TokByteLevel, AlphabetIsABijection) {
    std::set<uint32_t> chars;
    for (unsigned b = 0; b < 256; ++b) {
        const uint32_t cp = byte_to_char(static_cast<uint8_t>(b));
        EXPECT_TRUE(chars.insert(cp).second);
        EXPECT_EQ(char_to_byte(cp), static_cast<int>(b));
        EXPECT_FALSE(unicode::is_white_space(cp)) << b;  // every character is printable
    }
    EXPECT_EQ(byte_to_char(' '), 0x120u);   // "Ġ"
    EXPECT_EQ(byte_to_char('\n'), 0x10Au);  // "Ċ"
    EXPECT_EQ(byte_to_char('A'), static_cast<uint32_t>('A'));
    EXPECT_EQ(byte_to_char(0xAD), 0x143u);
    EXPECT_EQ(char_to_byte(0x144), -1);
    std::string all;
    for (unsigned b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
    std::string mapped, back;
    append_byte_chars(mapped, all);
    append_byte_level_decoded(back, mapped);
    EXPECT_EQ(back, all);
}

}  // namespace
}  // namespace lantern::tok
