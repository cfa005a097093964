// Pre-tokenizer splits per family: the pieces each family's published split
// rules give for inputs that exercise what distinguishes them (digit
// grouping, contractions and their case, punctuation runs, CJK runs, line
// breaks, cased words). Expected pieces were checked against the published
// patterns run by a PCRE-style engine.
#include <gtest/gtest.h>

#include <set>

#include "lantern/error.h"
#include "text_tokenizer_util.h"
#include "tokenizer/pretokenizer.h"

namespace lantern::tok {
namespace {

using test::escaped;

struct SplitCase {
    const char* pre;
    std::string text;
    std::vector<std::string> pieces;
};

const SplitCase kCases[] = {
    {"gpt-2", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " 123456", " I", "'", "M", " ", " here", "\n\n"}},
    {"gpt-2", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "14", " +", " 1", ",", "000", ",", "000", " =", " <=>", " $", "12", " ...", " ~|^", " `", "a", "`"}},
    {"gpt-2", "x  \t y \r\n\n  z   ",
     {"x", "  \t", " y", " \r\n\n ", " z", "   "}},
    {"gpt-2", "a b　c  d",
     {"a", " ", "b", "　", "c", " ", " ", "d"}},
    {"llama-bpe", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "123", "456", " I", "'M", " ", " here", "\n\n"}},
    {"llama-bpe", "HelloWorld XMLHttpRequest don't I'LL ſ",
     {"HelloWorld", " XMLHttpRequest", " don", "'t", " I", "'LL", " ſ"}},
    {"llama-bpe", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "14", " +", " ", "1", ",", "000", ",", "000", " =", " <=>", " $", "12", " ...", " ~|^", " `", "a", "`"}},
    {"llama-bpe", "x  \t y \r\n\n  z   ",
     {"x", "  \t", " y", " \r\n\n", " ", " z", "   "}},
    {"llama-bpe", "line1\r\nline2/\npath/to\n",
     {"line", "1", "\r\n", "line", "2", "/\n", "path", "/to", "\n"}},
    {"llama-bpe", "it'ſ IT'S x",
     {"it", "'ſ", " IT", "'S", " x"}},
    {"qwen2", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "1", "2", "3", "4", "5", "6", " I", "'M", " ", " here", "\n\n"}},
    {"qwen2", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "1", "4", " +", " ", "1", ",", "0", "0", "0", ",", "0", "0", "0", " =", " <=>", " $", "1", "2", " ...", " ~|^", " `", "a", "`"}},
    {"smollm", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "1", "2", "3", "4", "5", "6", " I", "'", "M", " ", " here", "\n\n"}},
    {"smollm", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "1", "4", " +", " ", "1", ",", "0", "0", "0", ",", "0", "0", "0", " =", " <=>", " $", "1", "2", " ...", " ~|^", " `", "a", "`"}},
    {"smollm", "x  \t y \r\n\n  z   ",
     {"x", "  \t", " y", " \r\n\n ", " z", "   "}},
    {"deepseek-llm", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "1", "2", "3", "4", "5", "6", " I", "'", "M", " ", " here", "\n", "\n"}},
    {"deepseek-llm", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "1", "4", " +", " ", "1", ",", "0", "0", "0", ",", "0", "0", "0", " =", " <=>", " $", "1", "2", " ...", " ~|^", " `", "a", "`"}},
    {"deepseek-llm", "你好，世界。こんにちは 안녕 Ελλάδα ĀĒ ÀÉ Hello!!",
     {"你好", "，", "世界", "。", "こんにちは", " ", "안녕", " Ελλάδα", " ĀĒ", " ÀÉ", " Hello", "!!"}},
    {"deepseek-llm", "x  \t y \r\n\n  z   ",
     {"x", "  \t", " y", " ", "\r", "\n", "\n", " ", " z", "   "}},
    {"deepseek-llm", "x ΐώι ΩK שלום 12",
     {"x", " ", "ΐώι", " ", "ΩK", " שלום ", "1", "2"}},
    {"deepseek-coder", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "1", "4", " + ", "1", ",", "0", "0", "0", ",", "0", "0", "0", " = <=> $", "1", "2", " ...", " ~|^ `", "a", "`"}},
    {"deepseek-coder", "你好，世界。こんにちは 안녕 Ελλάδα ĀĒ ÀÉ Hello!!",
     {"你好", "，", "世界", "。", "こんにちは", " ", "안녕", " Ελλάδα", " ĀĒ", " ÀÉ", " Hello", "!!"}},
    {"deepseek-v3", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "123", "456", " I", "'M", " ", " here", "\n\n"}},
    {"deepseek-v3", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "14", " +", " ", "1", ",", "000", ",", "000", " =", " <=>", " $", "12", " ...", " ~|^", " `", "a", "`"}},
    {"deepseek-v3", "你好，世界。こんにちは 안녕 Ελλάδα ĀĒ ÀÉ Hello!!",
     {"你好", "，", "世界", "。", "こんにちは", " 안녕", " Ελλάδα", " ĀĒ", " ÀÉ", " Hello", "!!"}},
    {"falcon", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "123", "456", " I", "'", "M", " ", " here", "\n\n"}},
    {"falcon", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "14", " ", "+", " 1", ",", "000", ",", "000", " ", "=", " ", "<=>", " ", "$", "12", " ", "...", " ", "~|^", " ", "`", "a", "`"}},
    {"falcon", "Tervetuloa (Suomi)! Hei, miten menee? 12.5%",
     {"Tervetuloa", " ", "(", "Suomi", ")!", " Hei", ",", " miten", " menee", "?", " 12", ".", "5", "%"}},
    {"bloom", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " 123456", " I'M", " ", " here", "\n\n"}},
    {"bloom", "3.14 + 1,000,000 = <=> $12 ... ~|^ `a`",
     {"3", ".", "14", " +", " 1", ",", "000", ",", "000", " =", " <=>", " $12", " ...", " ~", "|", "^", " `a`"}},
    {"bloom", "Tervetuloa (Suomi)! Hei, miten menee? 12.5%",
     {"Tervetuloa", " (", "Suomi", ")!", " Hei", ",", " miten", " menee", "?", " 12", ".", "5%"}},
    {"bloom", "line1\r\nline2/\npath/to\n",
     {"line1", "\r\n", "line2/", "\n", "path/to", "\n"}},
    {"viking", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "1", "2", "3", "4", "5", "6", " I'M", " ", " here", "\n\n"}},
    {"viking", "line1\r\nline2/\npath/to\n",
     {"line", "1", "\r\n", "line", "2", "/", "\n", "path/to", "\n"}},
    {"tekken", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "1", "2", "3", "4", "5", "6", " I", "'M", " ", " here", "\n\n"}},
    {"tekken", "HelloWorld XMLHttpRequest don't I'LL ſ",
     {"Hello", "World", " XMLHttp", "Request", " don", "'t", " I", "'LL", " ſ"}},
    {"gpt-4o", "Hello world 123456 I'M  here\n\n",
     {"Hello", " world", " ", "123", "456", " I'M", " ", " here", "\n\n"}},
    {"gpt-4o", "HelloWorld XMLHttpRequest don't I'LL ſ",
     {"Hello", "World", " XMLHttp", "Request", " don't", " I'LL", " ſ"}},
    {"chameleon", "x  \t y \r\n\n  z   ",
     {"x", "  ", "\t", " y", " \r", "\n", "\n", "  ", "z", "  ", " "}},
    {"chameleon", "<sentinel:12>IMGIMGABZ a    b  c\td",
     {"<", "sentinel", ":", "1", "2", ">", "IMGIMGABZ", " a", "    ", "b", "  ", "c", "\t", "d"}},
    {"bailingmoe", "HelloWorld XMLHttpRequest don't I'LL ſ",
     {"HelloWorld", " XMLHttpRequest", " don", "'t", " I", "'LL", " ſ"}},
    {"seed-coder", "line1\r\nline2/\npath/to\n",
     {"line", "1", "\r\n", "line", "2", "/", "\n", "path", "/to", "\n"}},
};

std::string show(const std::vector<std::string>& pieces) {
    std::string s;
    for (const auto& p : pieces) {
        s += '[';
        s += escaped(p);
        s += ']';
    }
    return s;
}

TEST(TokPreSplit, PublishedRulesPerFamily) {
    for (const SplitCase& c : kCases) {
        const PreTokenizerSpec* spec = find_pre_tokenizer(c.pre);
        ASSERT_NE(spec, nullptr) << c.pre;
        const PreTokenizer pre(spec->patterns);
        const auto pieces = pre.split(c.text);
        EXPECT_EQ(pieces, c.pieces) << c.pre << " '" << escaped(c.text) << "'\n  got: " << show(pieces)
                                    << "\n want: " << show(c.pieces);
    }
}

// Names of one family share one rule set.
TEST(TokPreSplit, FamiliesShareRuleSets) {
    const std::pair<const char*, const char*> same[] = {
        {"default", "gpt-2"},     {"mpt", "gpt-2"},          {"olmo", "gpt-2"},         {"jais", "gpt-2"},
        {"gpt-neox", "gpt-2"},    {"llama3", "llama-bpe"},   {"llama-v3", "llama-bpe"}, {"dbrx", "llama-bpe"},
        {"smaug-bpe", "llama-bpe"}, {"chatglm-bpe", "llama-bpe"}, {"starcoder", "smollm"},
        {"refact", "smollm"},     {"command-r", "smollm"},   {"codeshell", "smollm"},   {"exaone", "smollm"},
        {"minerva-7b", "smollm"}, {"stablelm2", "qwen2"},    {"deepseek-r1-qwen", "qwen2"},
        {"poro-chat", "bloom"},   {"gpt3-finnish", "bloom"}, {"llama4", "gpt-4o"},
    };
    for (const auto& [a, b] : same) {
        const PreTokenizerSpec* sa = find_pre_tokenizer(a);
        const PreTokenizerSpec* sb = find_pre_tokenizer(b);
        ASSERT_NE(sa, nullptr) << a;
        ASSERT_NE(sb, nullptr) << b;
        EXPECT_EQ(sa->rule_set, sb->rule_set) << a << " vs " << b;
        ASSERT_EQ(sa->patterns.size(), sb->patterns.size()) << a;
        for (size_t i = 0; i < sa->patterns.size(); ++i) EXPECT_EQ(sa->patterns[i], sb->patterns[i]);
    }
    EXPECT_TRUE(find_pre_tokenizer("llama-bpe")->ignore_merges);
    EXPECT_FALSE(find_pre_tokenizer("gpt-2")->ignore_merges);
    EXPECT_EQ(find_pre_tokenizer("no-such-family"), nullptr);
    EXPECT_EQ(&gpt2_pre_tokenizer(), find_pre_tokenizer("default"));
}

// Every rule set compiles, and on any input the pieces are non-empty and
// concatenate back to the input.
TEST(TokPreSplit, EveryRuleSetCoversItsInput) {
    std::set<std::string_view> seen;
    for (std::string_view name : known_pre_tokenizer_names()) {
        const PreTokenizerSpec* spec = find_pre_tokenizer(name);
        ASSERT_NE(spec, nullptr) << name;
        if (!seen.insert(spec->rule_set).second) continue;
        const PreTokenizer pre(spec->patterns);
        for (const std::string& text : test::tricky_strings()) {
            const auto pieces = pre.split(text);
            std::string joined;
            for (const auto& p : pieces) {
                EXPECT_FALSE(p.empty()) << name;
                joined += p;
            }
            EXPECT_EQ(joined, text) << name << " '" << escaped(text) << "'";
        }
    }
    EXPECT_GE(seen.size(), 14u);
}

TEST(TokPreSplit, LongRunsStayLinear) {
    // Whitespace, digit and letter runs of 200k characters split quickly and exactly.
    const PreTokenizer llama3(find_pre_tokenizer("llama-bpe")->patterns);
    const std::string spaces(200000, ' ');
    auto pieces = llama3.split(spaces + "x");
    ASSERT_EQ(pieces.size(), 2u);
    EXPECT_EQ(pieces[0].size(), 199999u);
    EXPECT_EQ(pieces[1], " x");
    pieces = llama3.split(std::string(200000, '7'));
    EXPECT_EQ(pieces.size(), 66667u);
    EXPECT_EQ(pieces.back(), "77");
    const PreTokenizer gpt2(gpt2_pre_tokenizer().patterns);
    pieces = gpt2.split(std::string(200000, 'a') + "\n\n");
    ASSERT_EQ(pieces.size(), 2u);
}

}  // namespace
}  // namespace lantern::tok
