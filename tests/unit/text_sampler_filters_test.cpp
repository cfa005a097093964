// The sampler's less common stages against their definitions on hand-made
// distributions: top-n-sigma, typical-p, XTC, DRY and mirostat.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "lantern/error.h"
#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace lantern {
namespace {

using test::drawn;
using test::log_probs;
using test::plain;

TEST(SamplerFilters, TopNSigmaKeepsLogitsNearTheMax) {
    // Logits 5, 4 and six zeros: mean 1.125, sigma 1.96; one sigma below the
    // max (3.04) keeps the first two, three sigmas keep everything.
    const std::vector<float> logits = {5, 4, 0, 0, 0, 0, 0, 0};
    SamplerParams p = plain();
    p.top_n_sigma = 1.0f;
    TokenSampler one(p, 8);
    EXPECT_EQ(drawn(one, logits), (std::set<int32_t>{0, 1}));
    p.top_n_sigma = 3.0f;
    TokenSampler three(p, 8);
    EXPECT_EQ(drawn(three, logits).size(), 8u);
}

TEST(SamplerFilters, TypicalKeepsTheTokensNearestTheEntropy) {
    // p = .5 .2 .1 .1 .1: entropy 1.36 nats; surprises .69 1.61 2.30: the
    // distances from it put token 1 first (.25), then token 0 (.67).
    const std::vector<float> logits = log_probs({0.5, 0.2, 0.1, 0.1, 0.1});
    SamplerParams p = plain();
    p.typical_p = 0.15f;
    TokenSampler only(p, 5);
    EXPECT_EQ(drawn(only, logits), (std::set<int32_t>{1}));  // not the likeliest
    p.typical_p = 0.6f;
    TokenSampler two(p, 5);
    EXPECT_EQ(drawn(two, logits), (std::set<int32_t>{0, 1}));
    p.typical_p = 1.0f;
    TokenSampler off(p, 5);
    EXPECT_EQ(drawn(off, logits).size(), 5u);
}

TEST(SamplerFilters, XtcDropsTheTopChoicesButTheLeastLikelyOfThem) {
    const std::vector<float> logits = log_probs({0.5, 0.3, 0.1, 0.05, 0.05});
    SamplerParams p = plain();
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.2f;  // tokens 0 and 1 pass it: 1 stays
    TokenSampler always(p, 5);
    EXPECT_EQ(drawn(always, logits), (std::set<int32_t>{1, 2, 3, 4}));
    p.xtc_threshold = 0.4f;  // only token 0 passes: nothing is dropped
    TokenSampler single(p, 5);
    EXPECT_EQ(drawn(single, logits).size(), 5u);
    // Half the time: token 0 comes at about half its probability.
    p.xtc_threshold = 0.2f;
    p.xtc_probability = 0.5f;
    TokenSampler half(p, 5);
    int zeros = 0;
    for (int i = 0; i < 4000; ++i) zeros += half.sample(logits.data()) == 0;
    EXPECT_NEAR(zeros / 4000.0, 0.25, 0.03);
    // Greedy is untouched.
    p.temperature = 0.0f;
    p.xtc_probability = 1.0f;
    TokenSampler greedy(p, 5);
    EXPECT_EQ(greedy.sample(logits.data()), 0);
}

// A history A B C D .. A B C: the text's end repeats A B C, which D
// followed before, so D loses multiplier * base^(3 - allowed).
TEST(SamplerFilters, DryPenalizesTheTokenThatWouldExtendARepeat) {
    const std::vector<int32_t> history = {1, 2, 3, 4, 6, 1, 2, 3};
    std::vector<float> logits(8, 0.0f);
    logits[4] = 10.0f;   // D
    logits[5] = 8.5f;    // another
    SamplerParams p = plain();
    p.temperature = 0.0f;
    p.dry_multiplier = 1.0f;
    p.dry_base = 2.0f;
    p.dry_allowed_length = 2;  // penalty 2: D at 8 loses to 8.5
    auto pick = [&](const SamplerParams& q, const std::vector<std::string>& pieces = {}) {
        TokenSampler s(q, 8);
        if (!pieces.empty()) s.set_pieces(pieces);
        for (int32_t t : history) s.accept(t);
        return s.sample(logits.data());
    };
    EXPECT_EQ(pick(p), 5);
    SamplerParams q = p;
    q.dry_allowed_length = 3;  // penalty 1: D at 9 still wins
    EXPECT_EQ(pick(q), 4);
    q = p;
    q.dry_multiplier = 0.0f;
    EXPECT_EQ(pick(q), 4);
    q = p;
    q.dry_penalty_last_n = 4;  // the window holds no earlier A B C
    EXPECT_EQ(pick(q), 4);
    // B's text holds a breaker: the repeat at the end is only C long.
    std::vector<std::string> pieces = {"", "A", "B:", "C", "D", "E", "F", "G"};
    EXPECT_EQ(pick(p, pieces), 4);
    pieces[2] = "B";
    EXPECT_EQ(pick(p, pieces), 5);
    // reset() forgets the history.
    TokenSampler s(p, 8);
    for (int32_t t : history) s.accept(t);
    s.reset();
    EXPECT_EQ(s.sample(logits.data()), 4);
}

TEST(SamplerFilters, DryPenaltyGrowsWithTheRepeat) {
    // A loop of one token: the longer it runs, the more it costs.
    SamplerParams p = plain();
    p.temperature = 0.0f;
    p.dry_multiplier = 0.5f;
    p.dry_base = 2.0f;
    p.dry_allowed_length = 2;
    std::vector<float> logits = {0.0f, 4.0f, 0.9f};  // token 1 repeats; 2 is the alternative
    TokenSampler s(p, 3);
    std::vector<int32_t> out;
    for (int i = 0; i < 8; ++i) {
        const int32_t t = s.sample(logits.data());
        s.accept(t);
        out.push_back(t);
    }
    // After three ones the end repeats "1 1" (a repeat of 2): penalty 0.5;
    // after four, 1.0; after six, 4: under 0.9, so 2 comes, and then nothing
    // before the end has been seen followed by anything.
    const std::vector<int32_t> want = {1, 1, 1, 1, 1, 1, 2, 1};
    EXPECT_EQ(out, want);
}

double mean_surprise(TokenSampler& s, const std::vector<float>& logits, int n) {
    double m = -INFINITY, total = 0.0;
    for (float l : logits) m = std::max(m, double(l));
    for (float l : logits) total += std::exp(l - m);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        const int32_t t = s.sample(logits.data());
        sum += -std::log2(std::exp(logits[size_t(t)] - m) / total);
    }
    return sum / n;
}

TEST(SamplerFilters, MirostatFollowsTau) {
    // Zipf over 2,000 tokens: about 8.3 bits of entropy. Mirostat holds the
    // surprise within the distribution it truncates near tau, so under the
    // whole distribution the mean surprise rises with tau, below the free one.
    std::vector<float> logits;
    for (int r = 1; r <= 2000; ++r) logits.push_back(-float(std::log(r)));
    TokenSampler off(plain(), 2000);
    const double free = mean_surprise(off, logits, 3000);
    EXPECT_GT(free, 7.0);
    for (int version : {1, 2}) {
        std::vector<double> held;
        for (float tau : {2.0f, 3.5f, 5.0f}) {
            SamplerParams p = plain();
            p.mirostat = version;
            p.mirostat_tau = tau;
            p.mirostat_eta = 0.1f;
            TokenSampler s(p, 2000);
            held.push_back(mean_surprise(s, logits, 3000));
            EXPECT_GT(held.back(), tau) << version;
            EXPECT_LT(held.back(), tau + 2.5) << version;
            // reset() brings mu back: the same draws again.
            s.reset();
            std::vector<int32_t> a, b;
            for (int i = 0; i < 50; ++i) a.push_back(s.sample(logits.data()));
            s.reset();
            for (int i = 0; i < 50; ++i) b.push_back(s.sample(logits.data()));
            EXPECT_EQ(a, b);
        }
        EXPECT_GT(held[1], held[0] + 0.7) << version;
        EXPECT_GT(held[2], held[1] + 0.7) << version;
        EXPECT_LT(held[2], free - 1.0) << version;
    }
}

TEST(SamplerFilters, BadSettingsAreRefused) {
    auto refused = [](auto change) {
        SamplerParams p = plain();
        change(p);
        EXPECT_THROW(TokenSampler(p, 10), Error);
    };
    refused([](SamplerParams& p) { p.typical_p = 1.5f; });
    refused([](SamplerParams& p) { p.xtc_probability = -0.1f; });
    refused([](SamplerParams& p) { p.dry_base = 0.5f; });
    refused([](SamplerParams& p) { p.dry_allowed_length = 0; });
    refused([](SamplerParams& p) { p.dry_penalty_last_n = -2; });
    refused([](SamplerParams& p) { p.mirostat = 3; });
    refused([](SamplerParams& p) { p.mirostat_eta = 0.0f; });
    refused([](SamplerParams& p) { p.top_n_sigma = NAN; });
}

}  // namespace
}  // namespace lantern
