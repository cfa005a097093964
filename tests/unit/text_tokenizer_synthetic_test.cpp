// Tokenizers built from hand-made vocabularies: the merge rules of both
// models, byte fallback and unknown tokens, special-token parsing, BOS/EOS,
// end-of-generation detection, pre-tokenizer fallback, and every
// construction error.
#include <gtest/gtest.h>

#include <thread>

#include "lantern/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace lantern {
namespace {

constexpr int32_t kNormal = static_cast<int32_t>(TokenType::Normal);
constexpr int32_t kControl = static_cast<int32_t>(TokenType::Control);
constexpr int32_t kUserDefined = static_cast<int32_t>(TokenType::UserDefined);
constexpr int32_t kUnknown = static_cast<int32_t>(TokenType::Unknown);
constexpr int32_t kByte = static_cast<int32_t>(TokenType::Byte);

const std::string kEsc = "\xE2\x96\x81";  // "▁"

// A SentencePiece vocabulary: <unk> <s> </s>, optionally the 256 byte
// tokens, then the given pieces with their scores.
struct SpmBuilder {
    VocabData d;
    explicit SpmBuilder(bool byte_tokens = true) {
        d.model = "llama";
        add("<unk>", 0, kUnknown);
        add("<s>", 0, kControl);
        add("</s>", 0, kControl);
        d.unk = 0, d.bos = 1, d.eos = 2;
        if (byte_tokens) {
            for (unsigned b = 0; b < 256; ++b) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", b);
                add(name, 0, kByte);
            }
        }
    }
    int32_t add(const std::string& text, float score, int32_t type = kNormal) {
        d.tokens.push_back(text);
        d.scores.push_back(score);
        d.token_types.push_back(type);
        return static_cast<int32_t>(d.tokens.size() - 1);
    }
};

// A byte-level BPE vocabulary: the 256 byte characters, then the given
// tokens; merges as given.
struct BpeBuilder {
    VocabData d;
    BpeBuilder() {
        d.model = "gpt2";
        for (unsigned b = 0; b < 256; ++b) {
            std::string ch;
            const char c = static_cast<char>(b);
            tok::append_byte_chars(ch, std::string_view(&c, 1));
            add(ch);
        }
    }
    int32_t add(const std::string& text, int32_t type = kNormal) {
        d.tokens.push_back(text);
        d.token_types.push_back(type);
        return static_cast<int32_t>(d.tokens.size() - 1);
    }
    int32_t byte(char c) const { return static_cast<uint8_t>(c); }
};

std::vector<std::string> texts(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(tok.token_text(id));
    return out;
}
using V = std::vector<std::string>;

// --- SentencePiece ----------------------------------------------------------------

TEST(TokSyntheticSpm, MergesTheHighestScoringPairFirst) {
    for (bool ab_first : {true, false}) {
        SpmBuilder v;
        for (const char* c : {"a", "b", "c"}) v.add(c, -10);
        v.add("ab", ab_first ? -1.0f : -2.0f);
        v.add("bc", ab_first ? -2.0f : -1.0f);
        v.d.add_space_prefix = false;
        const Tokenizer tok(v.d);
        EXPECT_EQ(texts(tok, tok.encode("abc", false, false)), ab_first ? (V{"ab", "c"}) : (V{"a", "bc"}));
    }
    // A merged piece keeps merging when the longer piece exists.
    SpmBuilder v;
    for (const char* c : {"a", "b", "c"}) v.add(c, -10);
    v.add("bc", -1);
    v.add("abc", -5);
    v.d.add_space_prefix = false;
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("abc", false, false)), (V{"abc"}));
}

TEST(TokSyntheticSpm, EqualScoresMergeLeftmostFirst) {
    SpmBuilder v;
    v.add("a", -10);
    v.add("aa", -1);
    v.d.add_space_prefix = false;
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("aaa", false, false)), (V{"aa", "a"}));
    EXPECT_EQ(texts(tok, tok.encode("aaaaa", false, false)), (V{"aa", "aa", "a"}));
}

TEST(TokSyntheticSpm, SpacesAreEscapedAndPrefixed) {
    SpmBuilder v;
    v.add(kEsc, -1);
    v.add("a", -2);
    v.add(kEsc + "a", -0.5);
    const Tokenizer tok(v.d);
    EXPECT_TRUE(tok.add_space_prefix());  // the SentencePiece default
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(texts(tok, tok.encode("a a", false, false)), (V{kEsc + "a", kEsc + "a"}));
    EXPECT_EQ(texts(tok, tok.encode(" a", false, false)), (V{kEsc, kEsc + "a"}));
    EXPECT_EQ(tok.encode("", false, false), std::vector<int32_t>{});
    for (const std::string s : {"a a", " a", "a  ", "  a a  "}) {
        EXPECT_EQ(tok.decode(tok.encode(s, true, false)), s) << "'" << s << "'";
    }
    EXPECT_EQ(tok.token_to_piece(*tok.find_token(kEsc + "a"), false), " a");
}

// Encoding works word by word only when no piece joins a character to a
// following "▁"; a vocabulary with such a piece is merged across words.
TEST(TokSyntheticSpm, PiecesAcrossWordStarts) {
    SpmBuilder v;
    v.add(kEsc, -3);
    v.add("a", -3);
    v.add("b", -3);
    v.add("a" + kEsc, -2);
    v.add("a" + kEsc + "b", -1);
    v.d.add_space_prefix = false;
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("a b", false, false)), (V{"a" + kEsc + "b"}));
    EXPECT_EQ(tok.decode(tok.encode("a b a", false, false)), "a b a");
}

TEST(TokSyntheticSpm, RemoveExtraWhitespaces) {
    SpmBuilder v;
    v.add(kEsc, -1);
    v.add("a", -2);
    v.add("b", -2);
    v.d.remove_extra_whitespaces = true;
    v.d.add_space_prefix = false;
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("  a   b  ", false, false)), (V{"a", kEsc, "b"}));
    EXPECT_EQ(tok.encode("   ", false, false), std::vector<int32_t>{});
}

TEST(TokSyntheticSpm, ByteFallbackAndUnknown) {
    SpmBuilder with_bytes;
    with_bytes.add("a", -1);
    with_bytes.d.add_space_prefix = false;
    const Tokenizer tok(with_bytes.d);
    EXPECT_EQ(texts(tok, tok.encode("a\xC3\xA9z", false, false)), (V{"a", "<0xC3>", "<0xA9>", "<0x7A>"}));
    EXPECT_EQ(tok.decode(tok.encode("a\xC3\xA9z", false, false)), "a\xC3\xA9z");
    EXPECT_EQ(tok.nl(), *tok.find_token("<0x0A>"));

    SpmBuilder no_bytes(false);
    no_bytes.add("a", -1);
    no_bytes.d.add_space_prefix = false;
    const Tokenizer unk(no_bytes.d);
    EXPECT_EQ(unk.encode("a\xC3\xA9z", false, false), (std::vector<int32_t>{3, 0, 0}));
    EXPECT_EQ(unk.decode(unk.encode("az", false, false)), "a \xE2\x81\x87 ");  // SentencePiece's " ⁇ "

    no_bytes.d.unk = -1;
    const Tokenizer nothing(no_bytes.d);
    EXPECT_THROW(nothing.encode("z", false, false), Error);
}

// Control pieces in text are text unless parse_special; user-defined pieces
// are always matched (llama.cpp's and SentencePiece's rule).
TEST(TokSyntheticSpm, ControlPiecesStayTextUserPiecesMatch) {
    SpmBuilder v;
    for (const char* c : {"<", "s", ">", "/"}) v.add(c, -10);
    v.add("<s", -1);
    v.add("</", -1);
    const int32_t tool = v.add("<tool>", 0, kUserDefined);
    v.d.add_space_prefix = false;
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("<s>", false, false)), (V{"<s", ">"}));
    EXPECT_EQ(tok.encode("<s>", false, true), std::vector<int32_t>{tok.bos()});
    EXPECT_EQ(tok.encode("<tool>", false, false), std::vector<int32_t>{tool});
    EXPECT_EQ(tok.encode("<tool>", false, true), std::vector<int32_t>{tool});
    EXPECT_EQ(tok.token_to_piece(tool, false), "<tool>");    // user-defined: always shown
    EXPECT_EQ(tok.token_to_piece(tok.bos(), false), "");       // control: only when asked
    EXPECT_EQ(tok.token_to_piece(tok.bos(), true), "<s>");
}

TEST(TokSyntheticSpm, SpacePrefixAfterEverySpecialToken) {
    SpmBuilder v;
    v.add(kEsc, -1);
    v.add("a", -2);
    v.add(kEsc + "a", -0.5);
    v.add("<t>", 0, kControl);
    const Tokenizer tok(v.d);
    EXPECT_EQ(texts(tok, tok.encode("a<t>a", false, true)), (V{kEsc + "a", "<t>", kEsc + "a"}));
    EXPECT_EQ(texts(tok, tok.encode("<t>a", false, true)), (V{"<t>", kEsc + "a"}));
    EXPECT_EQ(texts(tok, tok.encode("<t> a<t>", false, true)), (V{"<t>", kEsc, kEsc + "a", "<t>"}));
    for (const std::string s : {"a<t>a", "<t>a", "<t> a<t>", " <t>  a"}) {
        EXPECT_EQ(tok.decode(tok.encode(s, false, true), true), s) << s;
        EXPECT_EQ(tok.decode(tok.encode(s, true, true), true), "<s>" + s) << s;
        EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s) << s;
    }
    EXPECT_EQ(tok.decode(tok.encode("a<t>a", true, true), false), "aa");
}

// --- byte-level BPE ---------------------------------------------------------------

TEST(TokSyntheticBpe, MergesByRank) {
    for (bool ab_first : {true, false}) {
        BpeBuilder v;
        v.add("ab");
        v.add("bc");
        v.d.merges = ab_first ? std::vector<std::string>{"a b", "b c"} : std::vector<std::string>{"b c", "a b"};
        const Tokenizer tok(v.d);
        EXPECT_EQ(texts(tok, tok.encode("abc", false, false)), ab_first ? (V{"ab", "c"}) : (V{"a", "bc"}));
    }
    // " ab" is "Ġ" "a" "b": whichever of "Ġ a" and "a b" ranks first decides.
    BpeBuilder v;
    v.add("\xC4\xA0" "a");  // "Ġa"
    v.add("\xC4\xA0" "ab");
    v.add("ab");
    v.d.merges = {"\xC4\xA0 a", "a b", "\xC4\xA0" "a b"};
    const Tokenizer space_first(v.d);
    EXPECT_FALSE(space_first.add_bos());
    EXPECT_FALSE(space_first.add_space_prefix());
    EXPECT_EQ(texts(space_first, space_first.encode("ab ab", false, false)), (V{"ab", "\xC4\xA0" "ab"}));
    EXPECT_EQ(space_first.decode(space_first.encode("ab ab", false, false)), "ab ab");
    EXPECT_EQ(space_first.token_to_piece(*space_first.find_token("\xC4\xA0" "ab"), false), " ab");
    v.d.merges = {"a b", "\xC4\xA0 a", "\xC4\xA0" "a b"};
    const Tokenizer ab_first(v.d);
    EXPECT_EQ(texts(ab_first, ab_first.encode("ab ab", false, false)), (V{"ab", "\xC4\xA0", "ab"}));
}

TEST(TokSyntheticBpe, IgnoreMergesTakesWholePieces) {
    // "abc" is a token but no merges lead to it: llama3-style vocabularies
    // emit it whole, GPT-2-style ones spell it from the merges.
    BpeBuilder v;
    v.add("abc");
    v.add("ab");
    v.d.merges = {"a b"};
    v.d.pre = "llama-bpe";
    const Tokenizer llama3(v.d);
    EXPECT_EQ(texts(llama3, llama3.encode("abc", false, false)), (V{"abc"}));
    v.d.pre = "gpt-2";
    const Tokenizer gpt2(v.d);
    EXPECT_EQ(texts(gpt2, gpt2.encode("abc", false, false)), (V{"ab", "c"}));
}

TEST(TokSyntheticBpe, UnknownPreTokenizerFallsBackToGpt2OnceWarned) {
    BpeBuilder v;
    v.add("ab");
    v.d.merges = {"a b"};
    v.d.pre = "brand-new-family";
    int calls = 0;
    std::string message;
    const Tokenizer tok(v.d, [&](std::string_view w) {
        ++calls;
        message = w;
    });
    EXPECT_TRUE(tok.pre_tokenizer_fallback());
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(tok.warnings().size(), 1u);
    EXPECT_NE(message.find("brand-new-family"), std::string::npos);
    v.d.pre = "gpt-2";
    const Tokenizer gpt2(v.d);
    EXPECT_FALSE(gpt2.pre_tokenizer_fallback());
    EXPECT_TRUE(gpt2.warnings().empty());
    const std::string text = "I'm here 123, ok?";
    EXPECT_EQ(tok.encode(text, false, false), gpt2.encode(text, false, false));
    (void)tok.encode(text, false, false);
    EXPECT_EQ(calls, 1);  // encoding does not warn again
}

TEST(TokSyntheticBpe, SkippedMergesAreReported) {
    BpeBuilder v;
    v.add("ab");
    v.d.merges = {"a b", "x yz", "q r"};  // "yz" and "qr" are not tokens
    const Tokenizer tok(v.d);
    ASSERT_EQ(tok.warnings().size(), 1u);
    EXPECT_NE(tok.warnings()[0].find("2 merges"), std::string::npos);
}

TEST(TokSyntheticBpe, SpecialTokensLongestMatchFirst) {
    BpeBuilder v;
    v.d.merges = {"a b"};
    const int32_t ab = v.add("ab");
    const int32_t start = v.add("<|im_start|>", kControl);
    const int32_t end = v.add("<|im_end|>", kControl);
    const int32_t im = v.add("<|im", kUserDefined);
    const Tokenizer tok(v.d);
    EXPECT_EQ(tok.encode("<|im_start|>ab<|im_end|><|im", false, true), (std::vector<int32_t>{start, ab, end, im}));
    // Without parse_special the control token is text, but the user-defined
    // "<|im" inside it still matches.
    const auto plain = tok.encode("<|im_start|>", false, false);
    ASSERT_FALSE(plain.empty());
    EXPECT_EQ(plain.front(), im);
    EXPECT_EQ(plain.size(), 1 + std::string("_start|>").size());
    EXPECT_EQ(tok.decode(plain), "<|im_start|>");
    EXPECT_TRUE(tok.is_eog(end));
    EXPECT_EQ(tok.eot(), end);
    EXPECT_FALSE(tok.is_eog(start));
}

TEST(TokSyntheticBpe, BosEosFromTheFile) {
    BpeBuilder v;
    v.d.merges = {"a b"};
    v.add("ab");
    v.d.bos = v.add("<s>", kControl);
    v.d.eos = v.add("</s>", kControl);
    v.d.add_bos = true;
    v.d.add_eos = true;
    const Tokenizer tok(v.d);
    EXPECT_EQ(tok.encode("ab", true, false), (std::vector<int32_t>{v.d.bos, 256, v.d.eos}));
    EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{256}));
    EXPECT_EQ(tok.encode("", true, false), (std::vector<int32_t>{v.d.bos, v.d.eos}));
    EXPECT_EQ(tok.decode(tok.encode("ab", true, false)), "ab");
    EXPECT_EQ(tok.decode(tok.encode("ab", true, false), true), "<s>ab</s>");
    EXPECT_TRUE(tok.is_eog(v.d.eos));
}

TEST(TokSyntheticBpe, BytesWithoutTokensAreDroppedOrUnknown) {
    BpeBuilder v;
    v.d.tokens[0xFF] = "unused-placeholder-for-ff";  // the vocabulary cannot spell 0xFF
    v.d.merges = {"a b"};
    v.add("ab");
    v.d.unk = v.add("<|endoftext|>", kControl);  // a "unk" that is really a control token
    const Tokenizer drops(v.d);
    EXPECT_EQ(drops.decode(drops.encode("a\xFF" "b", false, false)), "ab");
    v.d.unk = v.add("<unk>", kUnknown);
    const Tokenizer unknown(v.d);
    const auto ids = unknown.encode("a\xFF", false, false);
    EXPECT_EQ(ids, (std::vector<int32_t>{'a', v.d.unk}));
}

TEST(TokSyntheticBpe, ConcurrentEncodingAgrees) {
    BpeBuilder v;
    v.add("ab");
    v.add("\xC4\xA0" "ab");
    v.d.merges = {"a b", "\xC4\xA0 ab"};
    v.d.pre = "llama-bpe";
    const Tokenizer tok(v.d);
    std::string text;
    for (int i = 0; i < 2000; ++i) text += "ab abab 123 \xE4\xB8\xAD ";
    const auto expected = tok.encode(text, false, false);
    std::vector<std::vector<int32_t>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[t] = tok.encode(text, false, false); });
    for (auto& th : threads) th.join();
    for (const auto& g : got) EXPECT_EQ(g, expected);
}

// --- construction errors ----------------------------------------------------------

ErrorCode construction_error(VocabData d) {
    try {
        Tokenizer tok(std::move(d));
    } catch (const Error& e) {
        EXPECT_GT(std::string(e.what()).size(), 10u);
        return e.code();
    }
    ADD_FAILURE() << "no error";
    return ErrorCode::InvalidArgument;
}

TEST(TokSyntheticErrors, RejectsWhatItCannotUse) {
    BpeBuilder good;
    good.add("ab");
    good.d.merges = {"a b"};
    ASSERT_NO_THROW(Tokenizer{good.d});

    for (const char* model : {"bert", "t5", "rwkv", "none", ""}) {
        VocabData d = good.d;
        d.model = model;
        EXPECT_EQ(construction_error(d), ErrorCode::Unsupported) << model;
    }
    auto expect_vocab_error = [&](auto edit, const char* what) {
        VocabData d = good.d;
        edit(d);
        EXPECT_EQ(construction_error(d), ErrorCode::Tokenizer) << what;
    };
    expect_vocab_error([](VocabData& d) { d.tokens.clear(), d.token_types.clear(); }, "no tokens");
    expect_vocab_error([](VocabData& d) { d.scores.assign(3, 0.0f); }, "scores length");
    expect_vocab_error([](VocabData& d) { d.token_types.pop_back(); }, "types length");
    expect_vocab_error([](VocabData& d) { d.token_types[5] = 9; }, "type value");
    expect_vocab_error([](VocabData& d) { d.bos = static_cast<int32_t>(d.tokens.size()); }, "bos range");
    expect_vocab_error([](VocabData& d) { d.eos = -7; }, "eos range");
    expect_vocab_error([](VocabData& d) { d.add_bos = true; }, "add_bos without bos");
    expect_vocab_error([](VocabData& d) { d.add_eos = true; }, "add_eos without eos");
    expect_vocab_error([](VocabData& d) { d.merges.clear(); }, "no merges");
    expect_vocab_error([](VocabData& d) { d.merges = {"ab"}; }, "merge without space");
    expect_vocab_error([](VocabData& d) { d.merges = {"a "}; }, "merge with an empty part");
}

TEST(TokSyntheticErrors, TokenAccessorsCheckIds) {
    BpeBuilder v;
    v.add("ab");
    v.d.merges = {"a b"};
    const Tokenizer tok(v.d);
    EXPECT_THROW(tok.token_text(-1), Error);
    EXPECT_THROW(tok.token_type(tok.n_vocab()), Error);
    EXPECT_THROW(tok.decode({0, tok.n_vocab()}), Error);
    EXPECT_FALSE(tok.is_special(-1));
    EXPECT_FALSE(tok.is_eog(-1));
    EXPECT_EQ(tok.find_token("zz"), std::nullopt);
    EXPECT_EQ(tok.find_token("ab"), 256);
}

}  // namespace
}  // namespace lantern
