// A sequence's state saved and loaded (Context::save_sequence and friends):
// the loaded sequence continues exactly as the saved one would, in another
// context or sequence; damaged bytes, another model's state and one longer
// than the context are refused with the sequence left as it was.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lantern/lantern.h"
#include "model/synth.h"
#include "test_util.h"

namespace lantern::test {
namespace {

// "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
const std::vector<int32_t> kPrompt = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};

std::unique_ptr<Model> load_default() {
    ModelParams p;
    p.n_threads = 2;
    return Model::load(default_model_path().string(), p);
}

// Decodes `tokens` at the end of `seq`, logits of the last.
void feed(Context& ctx, const std::vector<int32_t>& tokens, int seq = 0) {
    Batch b;
    const int start = ctx.sequence_length(seq);
    for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], start + static_cast<int>(i), seq, i + 1 == tokens.size());
    ctx.decode(b);
}

std::vector<float> logits_of(const Model& m, const Context& ctx) {
    const float* l = ctx.logits(0);
    return std::vector<float>(l, l + m.n_vocab());
}

// The logits after re-decoding the last prompt token and one more token.
std::vector<float> continue_after(const Model& m, Context& ctx, int seq) {
    const int n = ctx.sequence_length(seq);
    Batch b;
    b.add(kPrompt.back(), n - 1, seq, false);
    b.add(504, n, seq, true);
    ctx.decode(b);
    return logits_of(m, ctx);
}

TEST(SequenceState, LoadedSequenceContinuesAsTheSavedOne) {
    auto m = load_default();
    Context a(*m, ContextParams{.n_ctx = 64});
    feed(a, kPrompt);
    const std::vector<uint8_t> state = a.save_sequence(0, kPrompt);
    const std::vector<float> want = continue_after(*m, a, 0);

    // Another context, into its second sequence, the first one busy.
    Context b(*m, ContextParams{.n_ctx = 64, .n_seq = 2});
    feed(b, {1, 2, 3}, 0);
    EXPECT_EQ(b.load_sequence(1, state), kPrompt);
    EXPECT_EQ(b.sequence_length(1), static_cast<int>(kPrompt.size()));
    EXPECT_EQ(b.sequence_length(0), 3);
    EXPECT_EQ(continue_after(*m, b, 1), want);

    // Without tokens; a longer context; through a file.
    const std::string path = temp_path("seq-state.bin").string();
    Context c(*m, ContextParams{.n_ctx = 128});
    feed(c, kPrompt);
    c.save_sequence_file(0, path);
    Context d(*m, ContextParams{.n_ctx = 128});
    EXPECT_TRUE(d.load_sequence_file(0, path).empty());
    EXPECT_EQ(continue_after(*m, d, 0), want);
    EXPECT_TRUE(Context::is_sequence_file(path));
    EXPECT_FALSE(Context::is_sequence_file(default_model_path().string()));
    EXPECT_FALSE(Context::is_sequence_file(path + ".missing"));
    std::filesystem::remove(path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SequenceState, BadStatesAreRefusedAndTheSequenceKept) {
    auto m = load_default();
    Context a(*m, ContextParams{.n_ctx = 64});
    feed(a, kPrompt);
    const std::vector<uint8_t> state = a.save_sequence(0);
    EXPECT_THROW(a.save_sequence(0, {1, 2}), Error);  // not the sequence's length
    EXPECT_THROW(a.save_sequence(1), Error);

    // The target holds a shorter prompt; every refusal must leave it so.
    Context b(*m, ContextParams{.n_ctx = 64});
    const std::vector<int32_t> other = {1, 4093, 198, 1780};
    feed(b, other);
    const std::vector<float> before = logits_of(*m, b);
    auto expect_refused = [&](const std::vector<uint8_t>& bytes, ErrorCode code, const std::string& says) {
        try {
            b.load_sequence(0, bytes);
            ADD_FAILURE() << "accepted: " << says;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), code) << e.what();
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
        EXPECT_EQ(b.sequence_length(0), static_cast<int>(other.size()));
    };
    std::vector<uint8_t> flipped = state;
    flipped[flipped.size() / 2] ^= 0x40;
    expect_refused(flipped, ErrorCode::Format, "checksum");
    expect_refused(std::vector<uint8_t>(state.begin(), state.begin() + 100), ErrorCode::Format, "checksum");
    expect_refused({}, ErrorCode::Format, "too short");
    std::vector<uint8_t> not_state(64, 'x');
    expect_refused(not_state, ErrorCode::Format, "magic");

    // A context too short for it.
    Context tiny(*m, ContextParams{.n_ctx = 8});
    EXPECT_THROW(tiny.load_sequence(0, state), Error);
    EXPECT_EQ(tiny.sequence_length(0), 0);

    // Another model's state (a synthetic llama of another shape).
    const std::string path = temp_path("seq-state-other.gguf").string();
    SynthOptions o;
    o.shape = {"tiny", 64, 2, 2, 1, 128, 64};
    o.type = DType::Q8_0;
    o.vocab_path = (testdata_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string();
    o.output_path = path;
    o.n_threads = 2;
    write_synthetic_model(o);
    ModelParams mp;
    mp.n_threads = 2;
    auto small = Model::load(path, mp);
    Context s(*small, ContextParams{.n_ctx = 16});
    feed(s, {1, 2, 3});
    expect_refused(s.save_sequence(0), ErrorCode::InvalidArgument, "another model");
    std::filesystem::remove(path);

    // The kept sequence still continues as it did.
    Batch next;
    next.add(other.back(), static_cast<int>(other.size()) - 1, 0, true);
    b.decode(next);
    EXPECT_EQ(logits_of(*m, b), before);

    EXPECT_THROW(b.load_sequence_file(0, temp_path("no-such-state.bin").string()), Error);
}

}  // namespace
}  // namespace lantern::test
