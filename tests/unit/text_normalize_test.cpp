// NFC normalisation (tokenizer/normalize.h): the Unicode Standard's own
// examples, every case of tests/data/nfc_cases.txt (Python's unicodedata,
// tools/gen_nfc_cases.py), bytes that are not UTF-8, and the qwen2
// pre-tokenizer normalising before it splits.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace lantern {
namespace {

// UTF-8 of the codepoints.
std::string u8(std::initializer_list<uint32_t> cps) {
    std::string s;
    for (uint32_t cp : cps) unicode::append_utf8(s, cp);
    return s;
}

std::string parse_hex(const std::string& field) {
    std::istringstream in(field);
    std::string s, word;
    while (in >> word) unicode::append_utf8(s, static_cast<uint32_t>(std::stoul(word, nullptr, 16)));
    return s;
}

TEST(Nfc, StandardExamples) {
    EXPECT_EQ(unicode::to_nfc(u8({0x65, 0x301})), u8({0xE9}));            // e + acute
    EXPECT_EQ(unicode::to_nfc(u8({0x212B})), u8({0xC5}));                 // Angstrom sign: a singleton
    EXPECT_EQ(unicode::to_nfc(u8({0x1E9B, 0x323})), u8({0x1E9B, 0x323}));  // long s + dots: no composite
    EXPECT_EQ(unicode::to_nfc(u8({0x61, 0x301, 0x328})), u8({0x105, 0x301}));  // ogonek (202) before acute (230)
    EXPECT_EQ(unicode::to_nfc(u8({0x61, 0x323, 0x302})), u8({0x1EAD}));        // two marks, both compose
    EXPECT_EQ(unicode::to_nfc(u8({0xE9, 0x323})), u8({0x1EB9, 0x301}));        // a composite taken apart
    EXPECT_EQ(unicode::to_nfc(u8({0x65, 0x301, 0x301})), u8({0xE9, 0x301}));   // the second acute is blocked
    EXPECT_EQ(unicode::to_nfc(u8({0x301, 0x65})), u8({0x301, 0x65}));          // a mark with no starter
    EXPECT_EQ(unicode::to_nfc(u8({0x344})), u8({0x308, 0x301}));               // a non-starter decomposition
    EXPECT_EQ(unicode::to_nfc(u8({0x958})), u8({0x915, 0x93C}));               // a composition exclusion
    EXPECT_EQ(unicode::to_nfc(u8({0xB47, 0xB3E})), u8({0xB4B}));               // two starters compose
    // Hangul by arithmetic: L V T, LV T, and T blocked by a mark between.
    EXPECT_EQ(unicode::to_nfc(u8({0x1100, 0x1161, 0x11A8})), u8({0xAC01}));
    EXPECT_EQ(unicode::to_nfc(u8({0xAC00, 0x11A8})), u8({0xAC01}));
    EXPECT_EQ(unicode::to_nfc(u8({0x1100, 0x1161, 0x301, 0x11A8})), u8({0xAC00, 0x301, 0x11A8}));
    EXPECT_EQ(unicode::to_nfc(u8({0xAC01})), u8({0xAC01}));
}

TEST(Nfc, MatchesPythonUnicodedata) {
    const auto path = test::source_dir() / "tests" / "data" / "nfc_cases.txt";
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t tab = line.find('\t');
        ASSERT_NE(tab, std::string::npos) << line;
        const std::string input = parse_hex(line.substr(0, tab)), want = parse_hex(line.substr(tab + 1));
        EXPECT_EQ(unicode::to_nfc(input), want) << line;
        EXPECT_EQ(unicode::to_nfc(want), want) << "not idempotent: " << line;
        ++n;
    }
    EXPECT_GT(n, 4000);
}

TEST(Nfc, AsciiAndInvalidBytesPassThrough) {
    EXPECT_EQ(unicode::to_nfc(""), "");
    EXPECT_EQ(unicode::to_nfc("plain ASCII\n\t~"), "plain ASCII\n\t~");
    // Stray and truncated bytes stay where they are; the text around them
    // is normalised, and a mark after a bad byte has no starter to join.
    const std::string bad = std::string("caf\xFF") + u8({0x65, 0x301}) + "\xCC" + u8({0x301}) + "\xE2\x82";
    EXPECT_EQ(unicode::to_nfc(bad), std::string("caf\xFF") + u8({0xE9}) + "\xCC" + u8({0x301}) + "\xE2\x82");
    // An encoded surrogate is not UTF-8: three bytes that pass through.
    EXPECT_EQ(unicode::to_nfc("a\xED\xB2\x80" "b"), "a\xED\xB2\x80" "b");
}

// A byte-level BPE vocabulary (every byte's character, "é" as one token)
// with the given pre-tokenizer.
Tokenizer bpe_tokenizer(const std::string& pre) {
    VocabData d;
    d.model = "gpt2";
    d.pre = pre;
    for (unsigned b = 0; b < 256; ++b) {
        std::string ch;
        const char c = static_cast<char>(b);
        tok::append_byte_chars(ch, std::string_view(&c, 1));
        d.tokens.push_back(ch);
    }
    std::string e_acute;
    tok::append_byte_chars(e_acute, u8({0xE9}));
    d.tokens.push_back(e_acute);
    std::string lead, trail;
    tok::append_byte_chars(lead, "\xC3");
    tok::append_byte_chars(trail, "\xA9");
    d.merges = {lead + " " + trail};
    return Tokenizer(std::move(d));
}

TEST(Nfc, Qwen2NormalisesBeforeSplitting) {
    const std::string composed = "caf" + u8({0xE9}), decomposed = "cafe" + u8({0x301});
    const Tokenizer qwen = bpe_tokenizer("qwen2");
    const auto want = qwen.encode(composed, false, false);
    ASSERT_EQ(want.back(), 256);  // "é" is one token
    EXPECT_EQ(qwen.encode(decomposed, false, false), want);
    EXPECT_EQ(qwen.decode(qwen.encode(decomposed, false, false)), composed);
    // Other vocabularies take the text as given, and round-trip it.
    const Tokenizer gpt2 = bpe_tokenizer("gpt2");
    EXPECT_NE(gpt2.encode(decomposed, false, false), gpt2.encode(composed, false, false));
    EXPECT_EQ(gpt2.decode(gpt2.encode(decomposed, false, false)), decomposed);
}

}  // namespace
}  // namespace lantern
