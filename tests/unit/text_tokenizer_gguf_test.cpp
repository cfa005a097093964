// vocab_data_from_gguf: every tokenizer.ggml.* key it reads, defaults when
// keys are absent, and the errors for missing or mistyped keys.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace lantern {
namespace {

namespace fs = std::filesystem;
using gguf::Array;

// Writes the writer to a temp file, opens it, removes the file.
std::unique_ptr<gguf::File> round_trip(const gguf::Writer& w, const std::string& name) {
    const fs::path path = test::temp_path(name);
    w.write(path.string());
    auto file = gguf::File::open(path.string());
    fs::remove(path);
    return file;
}

gguf::Writer spm_writer() {
    gguf::Writer w;
    w.set("general.architecture", std::string("llama"));
    w.set("tokenizer.ggml.model", std::string("llama"));
    w.set("tokenizer.ggml.tokens", Array::of(std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a",
                                                                       "\xE2\x96\x81" "a"}));
    w.set("tokenizer.ggml.scores", Array::of(std::vector<float>{0, 0, 0, -1, -2, -0.5f}));
    w.set("tokenizer.ggml.token_type", Array::of(std::vector<int32_t>{2, 3, 3, 1, 1, 1}));
    w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    return w;
}

ErrorCode load_error(const gguf::Writer& w, const std::string& expect_in_message) {
    auto file = round_trip(w, "vocab-error.gguf");
    try {
        vocab_data_from_gguf(*file);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(expect_in_message), std::string::npos) << e.what();
        return e.code();
    }
    ADD_FAILURE() << "no error";
    return ErrorCode::InvalidArgument;
}

TEST(TokGguf, ReadsEveryKey) {
    gguf::Writer w = spm_writer();
    w.set("tokenizer.ggml.pre", std::string("default"));
    w.set("tokenizer.ggml.padding_token_id", int32_t{2});
    w.set("tokenizer.ggml.eot_token_id", uint32_t{2});
    w.set("tokenizer.ggml.eom_token_id", uint64_t{1});
    w.set("tokenizer.ggml.seperator_token_id", uint32_t{3});
    w.set("tokenizer.ggml.cls_token_id", uint32_t{4});
    w.set("tokenizer.ggml.mask_token_id", uint32_t{5});
    w.set("tokenizer.ggml.prefix_token_id", uint32_t{3});  // older name, overridden below
    w.set("tokenizer.ggml.fim_pre_token_id", uint32_t{4});
    w.set("tokenizer.ggml.suffix_token_id", uint32_t{5});
    w.set("tokenizer.ggml.fim_mid_token_id", uint32_t{3});
    w.set("tokenizer.ggml.add_bos_token", false);
    w.set("tokenizer.ggml.add_eos_token", true);
    w.set("tokenizer.ggml.add_space_prefix", false);
    w.set("tokenizer.ggml.remove_extra_whitespaces", true);
    const auto file = round_trip(w, "vocab-all.gguf");
    const VocabData d = vocab_data_from_gguf(*file);
    EXPECT_EQ(d.model, "llama");
    EXPECT_EQ(d.pre, "default");
    ASSERT_EQ(d.tokens.size(), 6u);
    EXPECT_EQ(d.tokens[5], "\xE2\x96\x81" "a");
    EXPECT_EQ(d.scores, (std::vector<float>{0, 0, 0, -1, -2, -0.5f}));
    EXPECT_EQ(d.token_types, (std::vector<int32_t>{2, 3, 3, 1, 1, 1}));
    EXPECT_TRUE(d.merges.empty());
    EXPECT_EQ(d.unk, 0);
    EXPECT_EQ(d.bos, 1);
    EXPECT_EQ(d.eos, 2);
    EXPECT_EQ(d.pad, 2);
    EXPECT_EQ(d.eot, 2);
    EXPECT_EQ(d.eom, 1);
    EXPECT_EQ(d.sep, 3);
    EXPECT_EQ(d.cls, 4);
    EXPECT_EQ(d.mask, 5);
    EXPECT_EQ(d.fim_pre, 4);
    EXPECT_EQ(d.fim_suf, 5);
    EXPECT_EQ(d.fim_mid, 3);
    EXPECT_EQ(d.fim_pad, -1);
    EXPECT_EQ(d.add_bos, false);
    EXPECT_EQ(d.add_eos, true);
    EXPECT_EQ(d.add_space_prefix, false);
    EXPECT_EQ(d.remove_extra_whitespaces, true);

    const Tokenizer tok(d);
    EXPECT_FALSE(tok.add_bos());
    EXPECT_TRUE(tok.add_eos());
    EXPECT_EQ(tok.encode("a a", true, false), (std::vector<int32_t>{4, 5, 2}));
}

TEST(TokGguf, AbsentKeysTakeTheModelDefaults) {
    const auto file = round_trip(spm_writer(), "vocab-defaults.gguf");
    const VocabData d = vocab_data_from_gguf(*file);
    EXPECT_EQ(d.pre, "default");
    EXPECT_FALSE(d.add_bos.has_value());
    EXPECT_FALSE(d.add_space_prefix.has_value());
    EXPECT_EQ(d.pad, -1);
    const Tokenizer tok(d);
    EXPECT_TRUE(tok.add_bos());  // SentencePiece adds BOS and a space prefix
    EXPECT_FALSE(tok.add_eos());
    EXPECT_TRUE(tok.add_space_prefix());
    EXPECT_EQ(tok.encode("a a", true, false), (std::vector<int32_t>{1, 5, 5}));
}

TEST(TokGguf, MinusOneMeansNoToken) {
    gguf::Writer w = spm_writer();
    w.set("tokenizer.ggml.padding_token_id", int32_t{-1});
    w.set("tokenizer.ggml.eot_token_id", uint32_t{0xFFFFFFFFu});
    const auto file = round_trip(w, "vocab-none.gguf");
    const VocabData d = vocab_data_from_gguf(*file);
    EXPECT_EQ(d.pad, -1);
    EXPECT_EQ(d.eot, -1);
}

TEST(TokGguf, MissingOrMistypedKeys) {
    gguf::Writer no_model;
    no_model.set("general.architecture", std::string("llama"));
    EXPECT_EQ(load_error(no_model, "tokenizer.ggml.model"), ErrorCode::Format);

    gguf::Writer no_tokens;
    no_tokens.set("tokenizer.ggml.model", std::string("gpt2"));
    EXPECT_EQ(load_error(no_tokens, "tokenizer.ggml.tokens"), ErrorCode::Format);

    gguf::Writer int_tokens = spm_writer();
    int_tokens.set("tokenizer.ggml.tokens", Array::of(std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(load_error(int_tokens, "tokenizer.ggml.tokens"), ErrorCode::Format);

    gguf::Writer short_scores = spm_writer();
    short_scores.set("tokenizer.ggml.scores", Array::of(std::vector<float>{0, 0}));
    EXPECT_EQ(load_error(short_scores, "tokenizer.ggml.scores"), ErrorCode::Format);

    gguf::Writer float_types = spm_writer();
    float_types.set("tokenizer.ggml.token_type", Array::of(std::vector<float>{1, 1, 1, 1, 1, 1}));
    EXPECT_EQ(load_error(float_types, "tokenizer.ggml.token_type"), ErrorCode::Format);

    gguf::Writer string_merges = spm_writer();
    string_merges.set("tokenizer.ggml.merges", Array::of(std::vector<int32_t>{1}));
    EXPECT_EQ(load_error(string_merges, "tokenizer.ggml.merges"), ErrorCode::Format);

    gguf::Writer huge_id = spm_writer();
    huge_id.set("tokenizer.ggml.bos_token_id", uint64_t{1} << 40);
    EXPECT_EQ(load_error(huge_id, "tokenizer.ggml.bos_token_id"), ErrorCode::Format);
}

TEST(TokGguf, IdsOutsideTheVocabularyAreRejectedByTheTokenizer) {
    gguf::Writer w = spm_writer();
    w.set("tokenizer.ggml.eos_token_id", uint32_t{6});
    const auto file = round_trip(w, "vocab-range.gguf");
    const VocabData d = vocab_data_from_gguf(*file);
    try {
        Tokenizer tok(d);
        ADD_FAILURE() << "accepted eos id 6 of 6 tokens";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Tokenizer);
        EXPECT_NE(std::string(e.what()).find("eos id 6"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace lantern
