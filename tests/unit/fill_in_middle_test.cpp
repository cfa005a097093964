// Fill-in-the-middle prompts (Model::fill_in_middle, api/fill_in_middle.cpp)
// on published vocabularies: StarCoder's FIM tokens found by their texts,
// the prompt's layout, the cut to a budget, and models without FIM tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf.h"
#include "lantern/lantern.h"
#include "test_util.h"

namespace lantern::test {
namespace {

std::unique_ptr<Model> vocab(const std::string& name) {
    ModelParams p;
    p.vocab_only = true;
    return Model::load((testdata_dir() / "vocab" / name).string(), p);
}

int32_t id_of(const Model& m, const std::string& text) {
    const std::vector<int32_t> ids = m.tokenize(text, false, true);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

TEST(FillInMiddle, StarcoderPromptIsPrefixSuffixMiddle) {
    auto m = vocab("ggml-vocab-starcoder.gguf");
    ASSERT_TRUE(m->has_fill_in_middle());
    const int32_t pre = id_of(*m, "<fim_prefix>"), suf = id_of(*m, "<fim_suffix>"), mid = id_of(*m, "<fim_middle>");
    const std::string prefix = "def add(a, b):\n    ", suffix = "\n\nprint(add(1, 2))\n";
    const FimPrompt p = m->fill_in_middle({.prefix = prefix, .suffix = suffix});
    EXPECT_FALSE(p.truncated);
    EXPECT_EQ(p.tokens, concat({{pre}, m->tokenize(prefix, false, false), {suf}, m->tokenize(suffix, false, false), {mid}}));
    // The model ends the middle with a separator or padding as well as EOS.
    EXPECT_TRUE(m->is_end_of_generation(id_of(*m, "<fim_pad>")));
    EXPECT_TRUE(m->is_end_of_generation(m->eos_token()));
}

TEST(FillInMiddle, OtherFilesComeFirst) {
    auto m = vocab("ggml-vocab-starcoder.gguf");
    const int32_t pre = id_of(*m, "<fim_prefix>");
    FillInMiddle r{.prefix = "x = ", .suffix = "\n"};
    r.files = {{"util.py", "def helper():\n    return 1\n"}, {"b.py", "y = 2"}};
    r.file_name = "main.py";
    const FimPrompt p = m->fill_in_middle(r);
    const auto at = std::find(p.tokens.begin(), p.tokens.end(), pre);
    ASSERT_NE(at, p.tokens.end());
    const std::string before = m->detokenize(std::vector<int32_t>(p.tokens.begin(), at), true);
    // StarCoder's vocabulary has no repository separators here: the files
    // go in as text under their names, the current file's name last.
    const bool repo = m->tokenize("<file_sep>", false, true).size() == 1 && m->tokenize("<repo_name>", false, true).size() == 1;
    if (repo) {
        EXPECT_EQ(before, "<repo_name>project\n<file_sep>util.py\ndef helper():\n    return 1\n<file_sep>b.py\ny = 2\n"
                          "<file_sep>main.py\n");
    } else {
        EXPECT_EQ(before, "--- util.py ---\ndef helper():\n    return 1\n--- b.py ---\ny = 2\n--- main.py ---\n");
    }
}

TEST(FillInMiddle, LongTextIsCutNearestTheGapLast) {
    auto m = vocab("ggml-vocab-starcoder.gguf");
    std::string prefix, suffix;
    for (int i = 0; i < 200; ++i) prefix += "line_" + std::to_string(i) + " = " + std::to_string(i) + "\n";
    for (int i = 0; i < 200; ++i) suffix += "tail_" + std::to_string(i) + "()\n";
    FillInMiddle r{.prefix = prefix, .suffix = suffix};
    r.files = {{"other.py", prefix}};
    const FimPrompt whole = m->fill_in_middle(r);
    ASSERT_GT(whole.tokens.size(), 400u);
    const FimPrompt cut = m->fill_in_middle(r, 100);
    EXPECT_TRUE(cut.truncated);
    EXPECT_EQ(cut.tokens.size(), 100u);
    // The prefix keeps its end, the suffix its start, and the suffix has at
    // most a quarter of the room.
    const int32_t pre = id_of(*m, "<fim_prefix>"), suf = id_of(*m, "<fim_suffix>"), mid = id_of(*m, "<fim_middle>");
    const auto p = std::find(cut.tokens.begin(), cut.tokens.end(), pre);
    const auto s = std::find(cut.tokens.begin(), cut.tokens.end(), suf);
    ASSERT_NE(p, cut.tokens.end());
    ASSERT_NE(s, cut.tokens.end());
    EXPECT_EQ(cut.tokens.back(), mid);
    const std::vector<int32_t> kept_prefix(p + 1, s), kept_suffix(s + 1, cut.tokens.end() - 1);
    const std::vector<int32_t> all_prefix = m->tokenize(prefix, false, false), all_suffix = m->tokenize(suffix, false, false);
    EXPECT_TRUE(std::equal(kept_prefix.begin(), kept_prefix.end(), all_prefix.end() - kept_prefix.size()));
    EXPECT_TRUE(std::equal(kept_suffix.begin(), kept_suffix.end(), all_suffix.begin()));
    EXPECT_LE(kept_suffix.size(), (100u - 3u) / 4u);
    EXPECT_EQ(p, cut.tokens.begin());  // the files had no room left
    EXPECT_THROW(m->fill_in_middle(r, 2), Error);
}

TEST(FillInMiddle, ModelsWithoutFimTokensSaySo) {
    for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
        auto m = vocab(name);
        EXPECT_FALSE(m->has_fill_in_middle()) << name;
        try {
            m->fill_in_middle({.prefix = "a", .suffix = "b"});
            ADD_FAILURE() << name;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::Unsupported);
            EXPECT_NE(std::string(e.what()).find("no fill-in-the-middle tokens"), std::string::npos) << e.what();
        }
    }
    // SmolLM2 has <repo_name> and <file_sep> but no FIM markers: they stay
    // ordinary special tokens, not end-of-generation ones.
    ModelParams p;
    p.vocab_only = true;
    auto smol = Model::load(default_model_path().string(), p);
    EXPECT_FALSE(smol->has_fill_in_middle());
    EXPECT_FALSE(smol->is_end_of_generation(id_of(*smol, "<file_sep>")));
}

// Ids given by the file's keys win over texts.
TEST(FillInMiddle, FileKeysNameTheTokens) {
    const std::string copy = temp_path("fim-keys.gguf").string();
    {
        ModelParams p;
        p.vocab_only = true;
        auto smol = Model::load(default_model_path().string(), p);
        const auto f = gguf::File::open(default_model_path().string());
        gguf::Writer w;
        for (const auto& [key, value] : f->metadata()) w.set(key, value);
        w.set("tokenizer.ggml.fim_pre_token_id", uint32_t(id_of(*smol, "<repo_name>")));
        w.set("tokenizer.ggml.fim_suf_token_id", uint32_t(id_of(*smol, "<reponame>")));
        w.set("tokenizer.ggml.fim_mid_token_id", uint32_t(id_of(*smol, "<filename>")));
        w.write(copy);
    }
    ModelParams p;
    p.vocab_only = true;
    auto m = Model::load(copy, p);
    ASSERT_TRUE(m->has_fill_in_middle());
    const FimPrompt f = m->fill_in_middle({.prefix = "a", .suffix = "b"});
    EXPECT_EQ(f.tokens, concat({{id_of(*m, "<repo_name>")}, m->tokenize("a", false, false), {id_of(*m, "<reponame>")},
                                m->tokenize("b", false, false), {id_of(*m, "<filename>")}}));
    std::remove(copy.c_str());
}

}  // namespace
}  // namespace lantern::test
