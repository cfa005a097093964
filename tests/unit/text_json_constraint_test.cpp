// The JSON constraint (sampling/json_constraint.h): the byte-level checker
// against valid and broken documents, and constrained sampling on a toy
// vocabulary whose logits prefer the tokens that would break the JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "sampling/json_constraint.h"

namespace lantern {
namespace {

// Whether `text` is accepted byte by byte, and then complete.
struct Fed {
    bool accepted;
    bool complete;
};
Fed feed_all(const std::string& text) {
    JsonState s;
    for (char c : text) {
        if (!s.feed(static_cast<unsigned char>(c))) return {false, false};
    }
    return {true, s.complete()};
}

TEST(JsonState, AcceptsObjectsAndEveryValueKind) {
    for (const char* doc : {"{}", " { } ", "{\"a\":1}", "{\"a\": -0.5e+10, \"b\": [true, false, null, \"x\"]}",
                            "{\"k\": {\"nested\": [[], {}, [1, 2.25, -3E2]]}}", "{\"s\": \"tab\\t quote\\\" \\u00e9 é\"}",
                            "{\"pair\": \"\\uD83D\\uDE00 \\ud83d\\ude00\"}",
                            "{\n  \"pretty\": [\n    1,\n    2\n  ]\n}", "{\"zero\": 0, \"neg\": -12, \"frac\": 10.01}"}) {
        const Fed f = feed_all(doc);
        EXPECT_TRUE(f.accepted) << doc;
        EXPECT_TRUE(f.complete) << doc;
    }
}

TEST(JsonState, PrefixesAreAcceptedButNotComplete) {
    for (const char* prefix : {"", "{", "{\"a", "{\"a\":", "{\"a\": [1, ", "{\"a\": tr", "{\"a\": 1.", "{\"a\": \"\\u00"}) {
        const Fed f = feed_all(prefix);
        EXPECT_TRUE(f.accepted) << prefix;
        EXPECT_FALSE(f.complete) << prefix;
    }
}

TEST(JsonState, RejectsWhatCannotContinueAnObject) {
    for (const char* bad : {"[1]", "\"top\"", "1", "{,", "{\"a\" 1}", "{\"a\":}", "{\"a\":01}", "{\"a\":1.}x",
                            "{\"a\":-}", "{\"a\":1e}", "{\"a\":tru}", "{\"a\":nul", "{\"a\":[1,]}", "{\"a\":1,}",
                            "{a:1}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"line\nbreak\"}", "{}}",
                            "{} x", "{\"a\":1]", "{\"a\":[1}",
                            // An exponent of three digits (1e100 still fits a double; 31E813 does not)
                            "{\"a\":1e100}", "{\"a\":2E-308}",
                            // UTF-16 escapes that are no character: a low surrogate alone, a
                            // high one followed by anything but its low one
                            "{\"a\":\"\\uDE00\"}", "{\"a\":\"\\uD83Dx\"}", "{\"a\":\"\\uD83D\\u0041\"}",
                            "{\"a\":\"\\uD83D\\n\"}", "{\"a\":\"\\ud83d\"}",
                            // UTF-8 out of sequence: a stray continuation byte, a sequence
                            // cut by the quote or by an ASCII byte, a byte no sequence starts with
                            "{\"a\":\"\x80\"}", "{\"a\":\"\xC3\"}", "{\"a\":\"\xE2\x82x\"}", "{\"a\":\"\xC0\x80\"}",
                            "{\"\xFF\":1}"}) {
        const std::string doc = bad;
        bool rejected = false;
        JsonState s;
        for (char c : doc) {
            if (!s.feed(static_cast<unsigned char>(c))) {
                rejected = true;
                break;
            }
        }
        EXPECT_TRUE(rejected || !s.complete()) << doc;
        // Every one of these has a byte the checker must refuse, except the
        // prefixes that are merely unfinished ("{\"a\":nul").
        if (doc != "{\"a\":nul") {
            EXPECT_TRUE(rejected) << doc;
        }
    }
}

TEST(JsonState, CapsWhitespaceAndDepthAndIsAllOrNothing) {
    JsonState s;
    ASSERT_TRUE(s.feed(std::string("{")));
    EXPECT_TRUE(s.feed(std::string(JsonState::kMaxSpaces, ' ')));
    EXPECT_FALSE(s.feed(' '));
    EXPECT_TRUE(s.feed(std::string("\"k\":")));  // a token resets the count
    EXPECT_TRUE(s.feed(std::string(10, '\n')));
    JsonState deep;
    EXPECT_TRUE(deep.feed("{\"a\":" + std::string(JsonState::kMaxDepth - 1, '[')));
    EXPECT_FALSE(deep.feed('['));
    // A rejected string leaves the state as it was.
    JsonState t;
    ASSERT_TRUE(t.feed(std::string("{\"a\":")));
    EXPECT_FALSE(t.feed(std::string("1}}")));
    EXPECT_TRUE(t.feed(std::string("1}")));
    EXPECT_TRUE(t.complete());
}

// A toy vocabulary: pieces, the last token ends generation.
const std::vector<std::string> kPieces = {"{", "}", "\"name\"", ":", " \"Ada\"", ",", "x", "]", "{\"", "", "42", "<eos>"};

JsonConstraint toy() {
    std::vector<bool> eog(kPieces.size(), false);
    eog.back() = true;
    std::vector<std::string> pieces = kPieces;
    pieces.back() = "";
    return JsonConstraint(pieces, eog);
}

// Random walks through what the checker accepts, byte by byte, as a
// sampler walks it: no dead end (no byte goes on, yet the object is not
// closed), and every closed text is a JSON object a strict parser takes.
// Numbers end by 25 bytes (a model may write digits for ever), and a point
// or exponent mark only where the digit it needs still fits.
TEST(JsonState, NumbersAreCapped) {
    EXPECT_TRUE(feed_all("{\"a\":" + std::string(25, '7') + "}").complete);
    EXPECT_FALSE(feed_all("{\"a\":" + std::string(26, '7') + "}").accepted);
    EXPECT_FALSE(feed_all("{\"a\":" + std::string(24, '7') + ".5}").accepted);
    EXPECT_TRUE(feed_all("{\"a\":-" + std::string(22, '7') + "e5}").complete);
    EXPECT_FALSE(feed_all("{\"a\":-" + std::string(23, '7') + "e5}").accepted);
}

TEST(JsonState, RandomWalksEndInJsonObjects) {
    std::string alphabet = "\n\t";
    for (char b = 0x20; b < 0x7f; ++b) alphabet += b;
    std::mt19937 rng(3);
    int closed = 0;
    for (int walk = 0; walk < 400; ++walk) {
        JsonState s;
        std::string text;
        while (text.size() < 160 && !(s.complete() && rng() % 2 == 0)) {
            std::string next;
            for (char b : alphabet) {
                JsonState probe = s;
                if (probe.feed(static_cast<unsigned char>(b))) next += b;
            }
            ASSERT_FALSE(next.empty()) << "dead end after: " << nlohmann::json(text).dump();
            const char b = next[rng() % next.size()];
            ASSERT_TRUE(s.feed(static_cast<unsigned char>(b)));
            text += b;
        }
        if (!s.complete()) continue;
        ++closed;
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        ASSERT_TRUE(j.is_object()) << nlohmann::json(text).dump();
    }
    EXPECT_GT(closed, 20);
}

TEST(JsonConstraint, GreedyDrawsStayValidAndEndOnlyWhenComplete) {
    JsonConstraint c = toy();
    SamplerParams p;
    p.temperature = 0.0f;
    TokenSampler greedy(p, static_cast<int32_t>(kPieces.size()));
    // The logits prefer the tokens that break JSON ("x", "]", the empty
    // piece) and the end token; then "}" and "42" (a number where a key must
    // come is refused); the name tokens last.
    std::vector<float> logits = {1.0f, 5.0f, 2.0f, 1.5f, 1.2f, 0.5f, 9.0f, 8.0f, 0.0f, 8.5f, 4.0f, 7.0f};
    std::string text;
    int32_t t = -1;
    for (int step = 0; step < 10 && (t < 0 || t != 11); ++step) {
        t = c.sample(greedy, logits.data());
        if (t != 11) text += kPieces[static_cast<size_t>(t)];
    }
    EXPECT_EQ(t, 11);  // ended, and only once the object was closed
    EXPECT_EQ(text, "{}");
    // Sampling with temperature: every run is a valid, complete object.
    SamplerParams q;
    q.temperature = 1.5f;
    q.top_k = 0;
    q.top_p = 1.0f;
    q.min_p = 0.0f;
    q.seed = 7;
    TokenSampler hot(q, static_cast<int32_t>(kPieces.size()));
    const std::vector<float> flat(kPieces.size(), 0.0f);
    for (int run = 0; run < 50; ++run) {
        JsonConstraint r = toy();
        std::string out;
        bool ended = false;
        for (int step = 0; step < 60 && !ended; ++step) {
            const int32_t k = r.sample(hot, flat.data());
            ended = k == 11;
            if (!ended) out += kPieces[static_cast<size_t>(k)];
        }
        if (!ended) continue;  // a long object still being written
        const Fed f = feed_all(out);
        EXPECT_TRUE(f.accepted && f.complete) << out;
    }
}

}  // namespace
}  // namespace lantern
