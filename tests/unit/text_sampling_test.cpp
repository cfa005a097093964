// TokenSampler tests: each stage against its definition on hand-made distributions,
// reproducibility, and the empirical distribution of draws against softmax.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <random>
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

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
    double m = -INFINITY;
    for (float l : logits) m = std::max(m, double(l));
    std::vector<double> p;
    double sum = 0;
    for (float l : logits) sum += std::exp((l - m) / temperature);
    for (float l : logits) p.push_back(std::exp((l - m) / temperature) / sum);
    return p;
}

TEST(TokenSampler, GreedyPicksArgmax) {
    SamplerParams p;
    p.temperature = 0.0f;
    p.seed = kSamplerRandomSeed;  // greedy must not depend on the seed
    TokenSampler s(p, 6);
    const std::vector<float> logits = {0.1f, -3.0f, 2.5f, 2.4f, -INFINITY, 1.0f};
    for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(logits.data()), 2);

    p.temperature = -1.0f;
    TokenSampler neg(p, 6);
    EXPECT_EQ(neg.sample(logits.data()), 2);
}

TEST(TokenSampler, GreedyTiesGoToLowestId) {
    SamplerParams p;
    p.temperature = 0.0f;
    TokenSampler s(p, 5);
    const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
    EXPECT_EQ(s.sample(logits.data()), 1);
    const std::vector<float> nan_first = {NAN, 0.5f, 0.5f, 0.0f, 0.0f};  // NaN never wins
    EXPECT_EQ(s.sample(nan_first.data()), 1);
}

TEST(TokenSampler, TopKKeepsExactlyTheKLargest) {
    SamplerParams p = plain();
    p.top_k = 3;
    TokenSampler s(p, 8);
    // Probabilities chosen so that every kept token is likely enough to be seen.
    const std::vector<float> logits = {0.0f, 1.0f, 0.2f, 1.1f, 0.9f, 0.1f, -1.0f, 0.5f};
    EXPECT_EQ(drawn(s, logits), (std::set<int32_t>{1, 3, 4}));

    p.top_k = 1;  // top-1 is greedy whatever the temperature
    TokenSampler one(p, 8);
    EXPECT_EQ(drawn(one, logits, 200), (std::set<int32_t>{3}));

    p.top_k = 100;  // larger than the vocabulary: nothing removed
    TokenSampler all(p, 8);
    EXPECT_EQ(drawn(all, logits, 20000).size(), 8u);
}

TEST(TokenSampler, TopKBreaksTiesByLowestId) {
    SamplerParams p = plain();
    p.top_k = 2;
    TokenSampler s(p, 6);
    const std::vector<float> logits = {0.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f};
    EXPECT_EQ(drawn(s, logits), (std::set<int32_t>{1, 2}));
}

TEST(TokenSampler, TopPKeepsSmallestPrefixReachingP) {
    // p = 0.5, 0.3, 0.15, 0.05 (shuffled ids): cumulative 0.5, 0.8, 0.95, 1.0.
    const std::vector<float> logits = log_probs({0.15, 0.5, 0.05, 0.3});
    auto kept = [&](float top_p) {
        SamplerParams p = plain();
        p.top_p = top_p;
        TokenSampler s(p, 4);
        return drawn(s, logits);
    };
    EXPECT_EQ(kept(0.4f), (std::set<int32_t>{1}));           // 0.5 >= 0.4
    EXPECT_EQ(kept(0.75f), (std::set<int32_t>{1, 3}));       // 0.8 >= 0.75
    EXPECT_EQ(kept(0.9f), (std::set<int32_t>{0, 1, 3}));     // 0.95 >= 0.9
    EXPECT_EQ(kept(0.99f), (std::set<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(kept(0.0f), (std::set<int32_t>{1}));           // always keeps one
}

TEST(TokenSampler, TopPWithoutTopKOnALargeVocabulary) {
    // 200 equally likely tokens scattered over 5000 ids (the rest have no mass):
    // top_p = 0.5 keeps the 100 with the lowest ids. The candidates are not sorted
    // by top-k first, so this walks the growing partial sort.
    const int n = 5000;
    std::vector<float> logits(n, -INFINITY);
    std::vector<int32_t> ids;
    for (int i = 0; i < 200; ++i) ids.push_back((i * 37 + 11) % n);
    for (int32_t id : ids) logits[size_t(id)] = 3.0f;
    std::sort(ids.begin(), ids.end());
    const std::set<int32_t> expected(ids.begin(), ids.begin() + 100);

    SamplerParams p = plain(99);
    p.top_p = 0.5f;
    TokenSampler s(p, n);
    EXPECT_EQ(drawn(s, logits, 20000), expected);
}

TEST(TokenSampler, MinPKeepsTokensAboveFractionOfMax) {
    const std::vector<float> logits = log_probs({0.05, 0.5, 0.15, 0.3});
    auto kept = [&](float min_p, int top_k) {
        SamplerParams p = plain();
        p.min_p = min_p;
        p.top_k = top_k;  // min-p on sorted (after top-k) and unsorted candidates
        TokenSampler s(p, 4);
        return drawn(s, logits);
    };
    for (int top_k : {0, 4}) {
        EXPECT_EQ(kept(0.2f, top_k), (std::set<int32_t>{1, 2, 3})) << top_k;  // p >= 0.1
        EXPECT_EQ(kept(0.5f, top_k), (std::set<int32_t>{1, 3})) << top_k;     // p >= 0.25
        EXPECT_EQ(kept(0.7f, top_k), (std::set<int32_t>{1})) << top_k;        // p >= 0.35
        EXPECT_EQ(kept(1.0f, top_k), (std::set<int32_t>{1})) << top_k;
    }
}

TEST(TokenSampler, FiltersComposeInOrder) {
    // top-k 3 -> {1, 3, 2}; top-p 0.7 over their renormalised mass
    // (0.5, 0.3, 0.15)/0.95 -> {1, 3}; min-p 0.7 -> {1}.
    const std::vector<float> logits = log_probs({0.05, 0.5, 0.15, 0.3});
    SamplerParams p = plain();
    p.top_k = 3;
    p.top_p = 0.7f;
    TokenSampler s(p, 4);
    EXPECT_EQ(drawn(s, logits), (std::set<int32_t>{1, 3}));
    p.min_p = 0.7f;
    TokenSampler s2(p, 4);
    EXPECT_EQ(drawn(s2, logits), (std::set<int32_t>{1}));
}

TEST(TokenSampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
    SamplerParams p = plain();
    p.repeat_penalty = 2.0f;
    TokenSampler s(p, 5);
    s.accept(0);
    s.accept(1);
    s.accept(1);  // counted once for the repetition penalty
    std::vector<float> logits = {3.0f, -1.5f, 4.0f, -2.0f, 0.0f};
    s.apply_penalties(logits.data());
    EXPECT_FLOAT_EQ(logits[0], 1.5f);
    EXPECT_FLOAT_EQ(logits[1], -3.0f);
    EXPECT_FLOAT_EQ(logits[2], 4.0f);   // not in the history
    EXPECT_FLOAT_EQ(logits[3], -2.0f);
    EXPECT_FLOAT_EQ(logits[4], 0.0f);
}

TEST(TokenSampler, FrequencyAndPresencePenaltiesSubtract) {
    SamplerParams p = plain();
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 1.0f;
    TokenSampler s(p, 4);
    for (int32_t t : {2, 2, 2, 0}) s.accept(t);
    std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
    s.apply_penalties(logits.data());
    EXPECT_FLOAT_EQ(logits[0], 1.0f - 0.25f - 1.0f);
    EXPECT_FLOAT_EQ(logits[1], 1.0f);
    EXPECT_FLOAT_EQ(logits[2], 1.0f - 3 * 0.25f - 1.0f);
    EXPECT_FLOAT_EQ(logits[3], 1.0f);
}

TEST(TokenSampler, PenaltyWindowForgetsOldTokens) {
    SamplerParams p = plain();
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.repeat_last_n = 3;
    TokenSampler s(p, 4);
    for (int32_t t : {0, 1, 1, 2}) s.accept(t);  // 0 has left the window
    EXPECT_EQ(s.history(), (std::vector<int32_t>{1, 1, 2}));
    std::vector<float> logits = {2.0f, 2.0f, 2.0f, 2.0f};
    s.apply_penalties(logits.data());
    EXPECT_FLOAT_EQ(logits[0], 2.0f);
    EXPECT_FLOAT_EQ(logits[1], 1.0f - 2 * 0.5f);
    EXPECT_FLOAT_EQ(logits[2], 1.0f - 0.5f);
    EXPECT_FLOAT_EQ(logits[3], 2.0f);

    p.repeat_last_n = 0;  // penalties off
    TokenSampler off(p, 4);
    off.accept(0);
    std::vector<float> same = {2.0f, 2.0f, 2.0f, 2.0f};
    off.apply_penalties(same.data());
    EXPECT_FLOAT_EQ(same[0], 2.0f);

    p.repeat_last_n = -1;  // the whole history
    TokenSampler all(p, 4);
    for (int i = 0; i < 1000; ++i) all.accept(i % 2);
    std::vector<float> l = {2.0f, 2.0f, 2.0f, 2.0f};
    all.apply_penalties(l.data());
    EXPECT_FLOAT_EQ(l[0], 1.0f - 500 * 0.5f);
    EXPECT_FLOAT_EQ(l[2], 2.0f);

    all.reset();
    EXPECT_TRUE(all.history().empty());
}

TEST(TokenSampler, PenaltiesApplyBeforeGreedy) {
    SamplerParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = 1.1f;
    TokenSampler s(p, 3);
    const std::vector<float> logits = {2.0f, 1.9f, -5.0f};
    EXPECT_EQ(s.sample(logits.data()), 0);
    s.accept(0);  // 2.0 / 1.1 = 1.82 < 1.9
    EXPECT_EQ(s.sample(logits.data()), 1);
}

TEST(TokenSampler, LogitBiasAppliesFirstAndAddsUp) {
    SamplerParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f;
    const std::vector<float> logits = {2.0f, 1.9f, -5.0f, 0.0f};
    // Token 2 pushed above the rest (two entries add up: -5 + 4 + 4 = 3).
    p.logit_bias = {{2, 4.0f}, {2, 4.0f}};
    TokenSampler s(p, 4);
    EXPECT_EQ(s.sample(logits.data()), 2);
    // Before the penalty: 3 / 2 = 1.5 once token 2 was seen, under 2.0.
    s.accept(2);
    EXPECT_EQ(s.sample(logits.data()), 0);
    // -infinity bans a token, with or without randomness.
    p = SamplerParams{};
    p.temperature = 0.0f;
    p.logit_bias = {{0, -INFINITY}};
    TokenSampler ban(p, 4);
    EXPECT_EQ(ban.sample(logits.data()), 1);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 3;
    p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
    TokenSampler draws(p, 4);
    for (int i = 0; i < 200; ++i) {
        const int32_t t = draws.sample(logits.data());
        EXPECT_TRUE(t == 2 || t == 3) << t;
    }
    // The caller's logits are not modified.
    EXPECT_EQ(logits[0], 2.0f);
}

TEST(TokenSampler, SameSeedSameTokens) {
    const int n = 1000;
    std::mt19937 gen(7);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<std::vector<float>> steps(64, std::vector<float>(n));
    for (auto& step : steps)
        for (float& l : step) l = nd(gen);

    auto run = [&](uint64_t seed) {
        SamplerParams p;  // the defaults: every filter on
        p.seed = seed;
        p.repeat_penalty = 1.1f;
        TokenSampler s(p, n);
        std::vector<int32_t> out;
        for (const auto& step : steps) {
            out.push_back(s.sample(step.data()));
            s.accept(out.back());
        }
        return out;
    };
    const auto a = run(42), b = run(42), c = run(43);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);

    SamplerParams p = plain(42);
    TokenSampler s(p, n);
    std::vector<int32_t> first, again;
    for (const auto& step : steps) first.push_back(s.sample(step.data()));
    s.reset();
    for (const auto& step : steps) again.push_back(s.sample(step.data()));
    EXPECT_EQ(first, again);
}

TEST(TokenSampler, RandomSeedIsReported) {
    SamplerParams p = plain(kSamplerRandomSeed);
    TokenSampler a(p, 10), b(p, 10);
    EXPECT_NE(a.seed(), kSamplerRandomSeed);
    EXPECT_NE(a.seed(), b.seed());  // 2^-64 chance of a false failure
    p.seed = a.seed();
    TokenSampler c(p, 10);
    std::vector<float> logits(10, 0.0f);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits.data()), c.sample(logits.data()));
}

// The draw sequence is fixed by the seed alone: std::mt19937_64 is specified
// bit for bit and the uniform is built from its raw output. These tokens pin it.
TEST(TokenSampler, SeededSequenceIsPinned) {
    SamplerParams p = plain(2024);
    TokenSampler s(p, 8);
    const std::vector<float> logits(8, 0.0f);  // uniform over 8 tokens
    std::vector<int32_t> out;
    for (int i = 0; i < 16; ++i) out.push_back(s.sample(logits.data()));
    // token = floor(8 * u), u = (mt19937_64(2024)() >> 11) * 2^-53.
    std::mt19937_64 ref(2024);
    std::vector<int32_t> expected;
    for (int i = 0; i < 16; ++i) expected.push_back(int32_t(double(ref() >> 11) * 0x1.0p-53 * 8.0));
    EXPECT_EQ(out, expected);
}

// Pearson's chi-square of the counts of `draws` samples against `probs`.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
    double chi2 = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
        const double e = probs[i] * draws;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi2;
}

TEST(TokenSampler, DrawsFollowSoftmax) {
    const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f, 1.6f, 0.5f};
    const int draws = 200000;
    for (float temperature : {1.0f, 0.5f, 2.0f}) {
        SamplerParams p = plain(777);
        p.temperature = temperature;
        TokenSampler s(p, int32_t(logits.size()));
        std::vector<int> counts(logits.size(), 0);
        for (int i = 0; i < draws; ++i) ++counts[size_t(s.sample(logits.data()))];
        const auto probs = softmax(logits, temperature);
        // 9 degrees of freedom: P(chi2 > 27.88) = 0.001 for a correct sampler.
        EXPECT_LT(chi_square(counts, probs, draws), 27.88) << "temperature " << temperature;
        for (size_t i = 0; i < probs.size(); ++i)
            EXPECT_NEAR(double(counts[i]) / draws, probs[i], 0.005) << "token " << i << " T " << temperature;
    }
}

TEST(TokenSampler, FilteredDrawsFollowRenormalisedSoftmax) {
    // top-k 4 of 6, then the kept four are drawn in proportion to softmax.
    const std::vector<float> logits = {1.0f, 0.2f, -0.3f, 0.8f, 0.5f, 1.3f};
    SamplerParams p = plain(5);
    p.top_k = 4;
    TokenSampler s(p, 6);
    const int draws = 100000;
    std::vector<int> counts(6, 0);
    for (int i = 0; i < draws; ++i) ++counts[size_t(s.sample(logits.data()))];
    EXPECT_EQ(counts[1], 0);
    EXPECT_EQ(counts[2], 0);
    const auto kept = softmax({1.0f, 0.8f, 0.5f, 1.3f}, 1.0);
    const std::vector<int> kept_counts = {counts[0], counts[3], counts[4], counts[5]};
    EXPECT_LT(chi_square(kept_counts, kept, draws), 16.27);  // 3 dof, p = 0.001
}

TEST(TokenSampler, LargeVocabularyIsFast) {
    const int n = 152064;  // Qwen2's vocabulary
    std::vector<float> logits(static_cast<size_t>(n));
    std::mt19937 gen(3);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (float& l : logits) l = nd(gen);
    for (int top_k : {40, 0}) {
        SamplerParams p;
        p.top_k = top_k;
        p.repeat_penalty = 1.1f;
        p.seed = 11;
        TokenSampler s(p, n);
        const auto t0 = std::chrono::steady_clock::now();
        const int steps = 50;
        for (int i = 0; i < steps; ++i) s.accept(s.sample(logits.data()));
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("sampler: n_vocab %d top_k %d: %.3f ms/token\n", n, top_k, ms / steps);
#if !defined(LANTERN_TESTS_EMULATED)  // under qemu the bound would time the emulator
        EXPECT_LT(ms / steps, 50.0);  // generous: a full sort per token would still pass, a bug would not
#endif
    }
}

TEST(TokenSampler, RejectsBadArguments) {
    EXPECT_THROW(TokenSampler(plain(), 0), Error);
    SamplerParams p = plain();
    p.top_p = 1.5f;
    EXPECT_THROW(TokenSampler(p, 10), Error);
    p = plain();
    p.min_p = -0.1f;
    EXPECT_THROW(TokenSampler(p, 10), Error);
    p = plain();
    p.repeat_penalty = 0.0f;
    EXPECT_THROW(TokenSampler(p, 10), Error);
    p = plain();
    p.repeat_last_n = -2;
    EXPECT_THROW(TokenSampler(p, 10), Error);
    for (LogitBias b : {LogitBias{10, 1.0f}, LogitBias{-1, 1.0f}, LogitBias{3, NAN}, LogitBias{3, INFINITY}}) {
        p = plain();
        p.logit_bias = {b};
        EXPECT_THROW(TokenSampler(p, 10), Error) << b.token << " " << b.bias;
    }
    TokenSampler s(plain(), 10);
    EXPECT_THROW(s.accept(10), Error);
    EXPECT_THROW(s.accept(-1), Error);
    try {
        s.accept(10);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    }
}

}  // namespace
}  // namespace lantern
