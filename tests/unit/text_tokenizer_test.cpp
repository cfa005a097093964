// Tokenizer against real vocabularies: the test vectors beside the vocab-only
// GGUFs in shared/testdata/vocab (every line must match), round trips on the
// extra vocabularies, special tokens, BOS/EOS rules, byte fallback, and the
// default model's tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

#include "lantern/error.h"
#include "text_tokenizer_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"

namespace lantern {
namespace {

namespace fs = std::filesystem;
using test::escaped;
using test::load_tokenizer;

fs::path vocab_path(const std::string& name) {
    return test::testdata_dir() / "vocab" / ("ggml-vocab-" + name + ".gguf");
}
fs::path extra_vocab_path(const std::string& name) {
    return test::testdata_dir() / "vocab-extra" / ("ggml-vocab-" + name + ".gguf");
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) {
        s += ' ';
        s += std::to_string(id);
    }
    return s;
}

// --- the test vectors ----------------------------------------------------------

class TokVocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokVocabVectors, EveryLineMatches) {
    const fs::path path = vocab_path(GetParam());
    ASSERT_TRUE(fs::exists(path)) << path;
    const Tokenizer tok = load_tokenizer(path);
    const auto inputs = test::read_vocab_inputs(path.string() + ".inp");
    const auto outputs = test::read_vocab_outputs(path.string() + ".out");
    ASSERT_EQ(inputs.size(), outputs.size());
    ASSERT_GE(inputs.size(), 40u);
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto ids = tok.encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
        EXPECT_EQ(ids, outputs[i]) << GetParam() << " input #" << i << " '" << escaped(inputs[i])
                                   << "'\n  got: " << ids_text(ids) << "\n want: " << ids_text(outputs[i]);
    }
}

TEST_P(TokVocabVectors, RoundTrips) {
    const Tokenizer tok = load_tokenizer(vocab_path(GetParam()));
    auto inputs = test::read_vocab_inputs(vocab_path(GetParam()).string() + ".inp");
    for (const std::string& s : test::tricky_strings()) inputs.push_back(s);
    for (const std::string& text : inputs) {
        const auto ids = tok.encode(text, false, false);
        EXPECT_EQ(tok.decode(ids), text) << GetParam() << " '" << escaped(text) << "'";
        // Special tokens are text when not parsed, and never appear.
        for (int32_t id : ids) EXPECT_FALSE(tok.is_control(id)) << id;
    }
}

INSTANTIATE_TEST_SUITE_P(Tok, TokVocabVectors,
                         ::testing::Values("gpt-2", "llama-spm", "phi-3", "deepseek-llm", "starcoder"));

// --- the extra vocabularies: load, round trip, pieces respect the pre-tokenizer ---

class TokExtraVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(TokExtraVocab, LoadsAndRoundTrips) {
    const fs::path path = extra_vocab_path(GetParam());
    ASSERT_TRUE(fs::exists(path)) << path;
    std::vector<std::string> warnings;
    const Tokenizer tok = load_tokenizer(path, [&](std::string_view w) { warnings.emplace_back(w); });
    EXPECT_FALSE(tok.pre_tokenizer_fallback()) << tok.pre();
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    EXPECT_GT(tok.n_vocab(), 30000);
    for (const std::string& text : test::tricky_strings()) {
        const auto ids = tok.encode(text, false, false);
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
        EXPECT_EQ(tok.decode(ids), text) << GetParam() << " '" << escaped(text) << "'";
        if (!text.empty()) {
            EXPECT_FALSE(ids.empty());
        }
    }
}

// A BPE token never spans two pre-tokenizer pieces: the token boundaries
// refine the piece boundaries.
class TokExtraBpeVocab : public ::testing::TestWithParam<std::string> {};

// User-defined tokens are matched in the text first (as llama.cpp does);
// every run of text between them is pre-tokenized on its own, and no token of
// a run may cross one of its pieces.
TEST_P(TokExtraBpeVocab, TokensStayInsidePreTokenizerPieces) {
    const Tokenizer tok = load_tokenizer(extra_vocab_path(GetParam()));
    ASSERT_EQ(tok.model(), "gpt2");
    const tok::PreTokenizerSpec* spec = tok::find_pre_tokenizer(tok.pre());
    ASSERT_NE(spec, nullptr);
    const tok::PreTokenizer pre(spec->patterns);
    for (const std::string& text : test::tricky_strings()) {
        const std::vector<int32_t> ids = tok.encode(text, false, false);
        size_t pos = 0;
        for (size_t i = 0; i < ids.size();) {
            if (tok.token_type(ids[i]) == TokenType::UserDefined) {
                pos += tok.token_to_piece(ids[i], false).size();
                ++i;
                continue;
            }
            size_t j = i;
            std::string run;
            while (j < ids.size() && tok.token_type(ids[j]) != TokenType::UserDefined) {
                run += tok.token_to_piece(ids[j], false);
                ++j;
            }
            ASSERT_EQ(text.compare(pos, run.size(), run), 0) << escaped(text);
            std::vector<size_t> piece_ends;
            size_t end = 0;
            for (const std::string& p : pre.split(run)) piece_ends.push_back(end += p.size());
            size_t at = 0;
            for (; i < j; ++i) {
                const size_t len = tok.token_to_piece(ids[i], false).size();
                const auto it = std::upper_bound(piece_ends.begin(), piece_ends.end(), at);
                ASSERT_NE(it, piece_ends.end());
                EXPECT_LE(at + len, *it) << GetParam() << " '" << escaped(text) << "': token " << ids[i]
                                         << " crosses a piece boundary at byte " << pos + *it;
                at += len;
            }
            pos += run.size();
        }
        EXPECT_EQ(pos, text.size());
    }
}

INSTANTIATE_TEST_SUITE_P(Tok, TokExtraVocab,
                         ::testing::Values("baichuan", "deepseek-coder", "falcon", "gpt-neox", "mpt", "refact"));
INSTANTIATE_TEST_SUITE_P(Tok, TokExtraBpeVocab,
                         ::testing::Values("deepseek-coder", "falcon", "gpt-neox", "mpt", "refact"));

// Pieces the vocabularies themselves spell out (ids found by text, not fixed).
TEST(TokExtraVocab, BaichuanSpellsWordsWithSpacePrefix) {
    const Tokenizer tok = load_tokenizer(extra_vocab_path("baichuan"));
    EXPECT_EQ(tok.model(), "llama");
    EXPECT_TRUE(tok.add_bos());
    EXPECT_TRUE(tok.add_space_prefix());
    const auto ids = tok.encode("Hello world", true, false);
    ASSERT_EQ(ids.size(), 3u);
    EXPECT_EQ(ids[0], tok.bos());
    EXPECT_EQ(tok.token_text(ids[1]), "\xE2\x96\x81Hello");
    EXPECT_EQ(tok.token_text(ids[2]), "\xE2\x96\x81world");
}

TEST(TokExtraVocab, DeepseekCoderDigitsAreSingle) {
    const Tokenizer tok = load_tokenizer(extra_vocab_path("deepseek-coder"));
    const auto ids = tok.encode("x = 123456", false, false);
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(tok.token_to_piece(id, false));
    const std::vector<std::string> tail(pieces.end() - 6, pieces.end());
    EXPECT_EQ(tail, (std::vector<std::string>{"1", "2", "3", "4", "5", "6"}));
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(tok.encode("x", true, false).front(), tok.bos());
}

TEST(TokExtraVocab, GptNeoxHasNoPreAndUsesGpt2Rules) {
    std::vector<std::string> warnings;
    const Tokenizer tok = load_tokenizer(extra_vocab_path("gpt-neox"),
                                         [&](std::string_view w) { warnings.emplace_back(w); });
    EXPECT_EQ(tok.pre(), "default");
    EXPECT_FALSE(tok.pre_tokenizer_fallback());
    EXPECT_TRUE(warnings.empty());
    // GPT-2 rules keep " 123456" together as one piece; the merges decide the rest.
    std::string joined;
    for (int32_t id : tok.encode(" 123456", false, false)) joined += tok.token_to_piece(id, false) + "|";
    EXPECT_EQ(joined.find(' '), 0u);  // the space is glued to the first digit token
    EXPECT_NE(joined.substr(0, 2), " |");
}

// --- special tokens, BOS/EOS, byte fallback --------------------------------------

TEST(TokSpecial, Phi3ChatTokensParseOnlyWhenAsked) {
    const Tokenizer tok = load_tokenizer(vocab_path("phi-3"));
    const int32_t user = *tok.find_token("<|user|>");
    const int32_t end = *tok.find_token("<|end|>");
    const int32_t assistant = *tok.find_token("<|assistant|>");
    const std::string text = "<|user|>\nHi<|end|>\n<|assistant|>";

    const auto parsed = tok.encode(text, false, true);
    EXPECT_EQ(parsed.front(), user);
    EXPECT_EQ(parsed.back(), assistant);
    EXPECT_EQ(std::count(parsed.begin(), parsed.end(), end), 1);
    EXPECT_EQ(tok.decode(parsed, /*render_special=*/true), text);
    EXPECT_EQ(tok.decode(parsed, false), "\nHi\n");

    const auto plain = tok.encode(text, false, false);
    for (int32_t id : plain) EXPECT_FALSE(tok.is_special(id)) << tok.token_text(id);
    EXPECT_EQ(tok.decode(plain), text);
    EXPECT_GT(plain.size(), parsed.size());
}

TEST(TokSpecial, LongestSpecialTokenWins) {
    // starcoder has both <issue_comment> and <issue_closed>, <jupyter_text> and
    // <jupyter_start>: each must be found whole, next to text and to each other.
    const Tokenizer tok = load_tokenizer(vocab_path("starcoder"));
    const std::string text = "a<issue_comment><issue_closed>b<jupyter_text>";
    const auto ids = tok.encode(text, false, true);
    std::vector<int32_t> specials;
    for (int32_t id : ids) {
        if (tok.is_special(id)) specials.push_back(id);
    }
    EXPECT_EQ(specials, (std::vector<int32_t>{*tok.find_token("<issue_comment>"), *tok.find_token("<issue_closed>"),
                                              *tok.find_token("<jupyter_text>")}));
    EXPECT_EQ(tok.decode(ids, true), text);
    // A near miss is plain text.
    for (int32_t id : tok.encode("<issue_commen>", false, true)) EXPECT_FALSE(tok.is_special(id));
}

TEST(TokBosEos, RulesFromTheFile) {
    const Tokenizer spm = load_tokenizer(vocab_path("llama-spm"));
    EXPECT_TRUE(spm.add_bos());
    EXPECT_FALSE(spm.add_eos());
    auto ids = spm.encode("Hello", true, false);
    EXPECT_EQ(ids.front(), spm.bos());
    EXPECT_EQ(spm.token_text(ids.front()), "<s>");
    EXPECT_EQ(spm.encode("Hello", false, false), std::vector<int32_t>(ids.begin() + 1, ids.end()));
    EXPECT_EQ(spm.encode("", true, false), std::vector<int32_t>{spm.bos()});

    const Tokenizer deepseek = load_tokenizer(vocab_path("deepseek-llm"));
    EXPECT_TRUE(deepseek.add_bos());
    EXPECT_EQ(deepseek.encode("Hello", true, false).front(), 100000);

    // gpt-2 has no add_bos_token key: a BPE vocabulary adds nothing by default.
    const Tokenizer gpt2 = load_tokenizer(vocab_path("gpt-2"));
    EXPECT_FALSE(gpt2.add_bos());
    EXPECT_EQ(gpt2.encode("Hello", true, false), gpt2.encode("Hello", false, false));
    EXPECT_TRUE(gpt2.is_eog(gpt2.eos()));
}

TEST(TokByteFallback, SpmSpellsUnknownCharactersWithBytes) {
    const Tokenizer tok = load_tokenizer(vocab_path("llama-spm"));
    // U+1F999 (llama) is not a piece: four byte tokens.
    const auto ids = tok.encode("\U0001F999", false, false);
    ASSERT_EQ(ids.size(), 5u);  // "▁" then <0xF0> <0x9F> <0xA6> <0x99>
    EXPECT_EQ(tok.token_text(ids[0]), "\xE2\x96\x81");
    const char* bytes[] = {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"};
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(tok.token_text(ids[i + 1]), bytes[i]);
        EXPECT_EQ(tok.token_type(ids[i + 1]), TokenType::Byte);
    }
    EXPECT_EQ(tok.token_to_piece(*tok.find_token("<0x0A>"), false), "\n");
    EXPECT_EQ(tok.nl(), *tok.find_token("<0x0A>"));
    EXPECT_EQ(tok.decode(ids), "\U0001F999");
    // Invalid UTF-8 goes through byte tokens too.
    const std::string invalid = "a\xff\xc3z";
    EXPECT_EQ(tok.decode(tok.encode(invalid, false, false)), invalid);
}

TEST(TokByteFallback, BpeDecodesByteLevelCharacters) {
    const Tokenizer tok = load_tokenizer(vocab_path("gpt-2"));
    EXPECT_EQ(tok.token_to_piece(*tok.find_token("\xC4\x8A"), false), "\n");  // "Ċ"
    EXPECT_EQ(tok.token_to_piece(*tok.find_token("\xC4\xA0the"), false), " the");  // "Ġthe"
    EXPECT_EQ(tok.nl(), *tok.find_token("\xC4\x8A"));
    EXPECT_EQ(tok.token_to_piece(tok.eos(), false), "");
    EXPECT_EQ(tok.token_to_piece(tok.eos(), true), "<|endoftext|>");
    EXPECT_THROW(tok.token_to_piece(tok.n_vocab(), false), Error);
    EXPECT_THROW(tok.token_to_piece(-1, false), Error);
}

// Invalid UTF-8 survives the round trip wherever the vocabulary can spell
// the bytes: SPM through byte tokens, BPE through its byte alphabet. Bytes a
// BPE vocabulary lacks (0xF5..0xFF never occur in UTF-8, so some omit them)
// are dropped, never replaced by a control token.
TEST(TokByteFallback, InvalidUtf8) {
    const std::string text = "\xff\xfe invalid \xc3 utf-8 \xe2\x82 \xc0\xaf end \xed\xa0\x80";
    const std::vector<fs::path> paths = {
        vocab_path("gpt-2"), vocab_path("llama-spm"), vocab_path("phi-3"), vocab_path("deepseek-llm"),
        vocab_path("starcoder"), extra_vocab_path("baichuan"), extra_vocab_path("deepseek-coder"),
        extra_vocab_path("falcon"), extra_vocab_path("gpt-neox"), extra_vocab_path("mpt"), extra_vocab_path("refact")};
    for (const fs::path& path : paths) {
        const Tokenizer tok = load_tokenizer(path);
        std::string spellable;
        for (char c : text) {
            std::string ch;
            tok::append_byte_chars(ch, std::string_view(&c, 1));
            if (tok.model() == "llama" || tok.find_token(ch)) spellable.push_back(c);
        }
        const auto ids = tok.encode(text, false, false);
        for (int32_t id : ids) EXPECT_FALSE(tok.is_special(id) && tok.token_type(id) != TokenType::UserDefined) << path;
        EXPECT_EQ(tok.decode(ids), spellable) << path.filename();
        if (path.filename() == "ggml-vocab-gpt-2.gguf" || tok.model() == "llama") {
            EXPECT_EQ(spellable, text);
        }
    }
}

// --- speed ---------------------------------------------------------------------

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Encodes 1 MiB of English prose; in an optimised build it must take well
// under a second of CPU time (CPU, not wall time, so that a loaded machine
// does not fail the test; the tokenizers keep no cache, so repetition does
// not help them).
void expect_fast_megabyte(const Tokenizer& tok, const std::string& name) {
    const std::string paragraph =
        "The quick brown fox jumps over the lazy dog. In 1984, researchers at the university measured "
        "3,482 samples; they didn't expect the results to vary by more than 0.5%. \"Why not?\" she asked, "
        "looking at the data again. Tokenizers split text into pieces, then merge bytes by rank.\n"
        "Performance matters: a server that answers many requests can't afford slow encoding!\n";
    std::string text;
    while (text.size() < (1u << 20)) text += paragraph;
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_seconds();
    const auto ids = tok.encode(text, false, false);
    const double seconds = thread_cpu_seconds() - cpu0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GT(ids.size(), text.size() / 8);
    EXPECT_EQ(tok.decode(ids), text);
    std::printf("[ perf ] %s: encoded %zu bytes into %zu tokens in %.3f s CPU, %.3f s wall (%.1f MB/s)\n",
                name.c_str(), text.size(), ids.size(), seconds, wall, text.size() / seconds / 1e6);
// Under qemu (a cross build's tests) the bound would time the emulator.
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(LANTERN_TESTS_EMULATED)
    EXPECT_LT(seconds, 1.0) << name;
#endif
}

TEST_P(TokVocabVectors, EncodesAMegabyteWellUnderASecond) {
    expect_fast_megabyte(load_tokenizer(vocab_path(GetParam())), GetParam());
}

// --- the default model ------------------------------------------------------------

class TokSmolLM2 : public ::testing::Test {
protected:
    void SetUp() override {
        const fs::path path = test::default_model_path();
        if (!fs::exists(path)) GTEST_SKIP() << "default model not present: " << path;
        tok_ = std::make_unique<Tokenizer>(load_tokenizer(path));
    }
    std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TokSmolLM2, Vocabulary) {
    const Tokenizer& tok = *tok_;
    EXPECT_EQ(tok.model(), "gpt2");
    EXPECT_EQ(tok.pre(), "smollm");
    EXPECT_FALSE(tok.pre_tokenizer_fallback());
    EXPECT_EQ(tok.n_vocab(), 49152);
    EXPECT_FALSE(tok.add_bos());
    EXPECT_FALSE(tok.add_space_prefix());
    EXPECT_EQ(tok.token_text(tok.bos()), "<|im_start|>");
    EXPECT_EQ(tok.token_text(tok.eos()), "<|im_end|>");
    EXPECT_TRUE(tok.is_eog(tok.eos()));
    EXPECT_TRUE(tok.is_eog(*tok.find_token("<|endoftext|>")));
    EXPECT_FALSE(tok.is_eog(tok.bos()));
    EXPECT_EQ(tok.eot(), tok.eos());
}

TEST_F(TokSmolLM2, ChatTemplateTokens) {
    const Tokenizer& tok = *tok_;
    const int32_t im_start = *tok.find_token("<|im_start|>");
    const int32_t im_end = *tok.find_token("<|im_end|>");
    const int32_t nl = *tok.find_token("\xC4\x8A");
    const std::string prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
    const auto ids = tok.encode(prompt, false, true);
    ASSERT_GE(ids.size(), 8u);
    EXPECT_EQ(ids[0], im_start);
    EXPECT_EQ(tok.token_text(ids[1]), "user");
    EXPECT_EQ(ids[2], nl);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 2);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 1);
    EXPECT_EQ(ids.back(), nl);
    // "assistant" is not one token in this vocabulary (it merges to "ass" + "istant").
    const auto after_start = std::find(ids.begin() + 1, ids.end(), im_start) + 1;
    EXPECT_EQ(tok.decode(std::vector<int32_t>(after_start, ids.end())), "assistant\n");
    EXPECT_EQ(tok.decode(ids, true), prompt);
    // "2+2": digits are single pieces under the smollm rules.
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(tok.token_to_piece(id, false));
    const auto two = std::find(pieces.begin(), pieces.end(), " 2");
    EXPECT_EQ(two, pieces.end()) << "a digit kept its leading space";

    // Without parse_special the markers are ordinary text.
    const auto plain = tok.encode(prompt, false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
    EXPECT_EQ(tok.decode(plain), prompt);
}

TEST_F(TokSmolLM2, EncodesAMegabyteWellUnderASecond) { expect_fast_megabyte(*tok_, "SmolLM2"); }

}  // namespace
}  // namespace lantern
