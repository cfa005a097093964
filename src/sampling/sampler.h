// Token sampling: turns one step's logits into the next token.
//
// The pipeline follows llama.cpp's conventions, in this order:
//   0. logit bias    logit += bias, per SamplerParams::logit_bias entry
//   1. penalties     over the last `repeat_last_n` accepted tokens:
//                      repetition  logit > 0 ? logit / repeat_penalty : logit * repeat_penalty
//                      frequency   logit -= count * frequency_penalty
//                      presence    logit -= (count > 0) * presence_penalty
//                    then DRY over the last `dry_penalty_last_n` (sampler_dry.cpp)
//   2. greedy        if temperature <= 0: argmax (ties to the lowest id), no randomness
//      mirostat      if on: temperature, then mirostat's own truncation and draw
//                    (sampler_filters.cpp), in place of 3..9
//   3. top-n-sigma   keep logits >= max - n * (their standard deviation)
//   4. top-k         keep the k largest logits (0 = off)
//   5. typical-p     keep the tokens whose surprise is nearest the entropy, up to
//                    typical_p of the mass
//   6. top-p         keep the smallest prefix, by descending probability, whose mass
//                    reaches top_p (softmax of the remaining logits; 1 = off)
//   7. min-p         keep tokens with p >= min_p * p_max (0 = off)
//   8. XTC           with probability xtc_probability, drop every token with
//                    p >= xtc_threshold but the least likely of them
//   9. temperature   logits /= temperature
//  10. softmax and one draw from a seeded 64-bit Mersenne Twister.
// Probabilities in 5..8 are at temperature 1, as llama.cpp applies it last.
// Every filter keeps at least one token. Ties between equal logits are broken by
// the lower token id, so the kept set never depends on the sort implementation.
//
// Reproducibility: the same seed and the same sequence of logits give the same
// tokens on every platform. The uniform draw is built from the generator's raw
// 64-bit output (53 bits -> [0, 1)), never std::uniform_real_distribution, whose
// output the standard leaves to the implementation.
//
// Cost: no allocation per token (all buffers are sized once, by n_vocab). With
// top-k set, only k candidates are ever sorted (nth_element + sort of k); without
// it, top-p finds its cut with a histogram of the logits (two linear passes and a
// sort of the one bucket the cut falls in), and min-p needs no sort at all.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lantern/sampling.h"

namespace lantern {

// Seed value that asks for a random seed (drawn from std::random_device).
// SamplerParams and kSamplerRandomSeed: include/lantern/sampling.h.

// Descending logit, then ascending id: a strict total order, so nth_element and
// sort pick the same candidates on every standard library.
struct ByLogitDesc {
    template <class C>
    bool operator()(const C& a, const C& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};

class TokenSampler {
public:
    // Throws Error(InvalidArgument) if n_vocab <= 0 or a parameter is out of
    // range (negative penalty, top_p/min_p outside [0, 1], NaN, a logit bias
    // for a token outside the vocabulary or of NaN / +infinity).
    TokenSampler(const SamplerParams& params, int32_t n_vocab);

    // Picks the next token from `logits` (n_vocab floats, not modified).
    // Does not record the token: call accept() with the token actually used.
    int32_t sample(const float* logits);

    // Appends a token to the penalty history. Throws Error(InvalidArgument)
    // for an id outside [0, n_vocab).
    void accept(int32_t token);

    // Applies the penalty step alone (step 1 above, using the current history)
    // to `logits` (n_vocab floats) in place: what sample() does to its copy.
    void apply_penalties(float* logits) const;

    // Forgets the history and restarts the random sequence from the seed, so a
    // reset sampler repeats its draws exactly.
    void reset();

    const SamplerParams& params() const { return params_; }
    int32_t n_vocab() const { return n_vocab_; }
    // The seed in use: params().seed, or the drawn one when that asked for random.
    uint64_t seed() const { return seed_; }
    // Accepted tokens still inside the penalty window, oldest first.
    std::vector<int32_t> history() const;
    // Token texts (n_vocab of them): DRY's sequence breakers are the tokens
    // whose text holds one. Without them no token breaks a sequence.
    void set_pieces(const std::vector<std::string>& pieces);

private:
    struct Candidate {
        int32_t id;
        float logit;
        float weight;  // scratch: exp(logit - max logit), set by top_p
    };

    bool penalties_active() const;
    void count_in(int32_t token);
    void count_out(int32_t token);
    float penalized(float logit, int32_t count) const;
    void penalize_candidates();
    int32_t argmax() const;
    void top_k(size_t k);
    void top_p(float p);
    void min_p(float p);
    // sampler_filters.cpp
    double weigh(float inv_temperature);  // weight = exp((logit - max) / T); returns their sum
    void top_n_sigma(float n);
    void typical(float p);
    void xtc(float probability, float threshold);
    int32_t mirostat_draw();
    // sampler_dry.cpp
    bool dry_active() const;
    void dry_remember(int32_t token);
    void dry_penalize();
    int32_t draw(float temperature);
    double uniform01();  // in [0, 1), 53 random bits

    SamplerParams params_;
    int32_t n_vocab_;
    uint64_t seed_;
    std::mt19937_64 rng_;

    std::vector<Candidate> cands_;  // [n_vocab] working set; shrinks as filters cut it
    bool sorted_ = false;           // cands_ is in descending-logit order
    std::vector<float> probs_;      // [n_vocab] scratch: unnormalised softmax weights
    std::vector<double> bucket_mass_;  // [1024] scratch for top-p's histogram

    // Penalty window: a ring of the last repeat_last_n accepted ids (or every
    // id when repeat_last_n == -1) and the count of each id inside it.
    std::vector<int32_t> ring_;     // capacity repeat_last_n (grows when -1)
    size_t ring_head_ = 0;          // index of the oldest entry when full
    size_t ring_size_ = 0;
    std::vector<int32_t> counts_;   // [n_vocab] occurrences inside the window
    std::vector<int32_t> distinct_; // the ids with counts_ > 0, in no particular order
    std::vector<int32_t> slot_;     // [n_vocab] index of the id in distinct_ (valid while counted)

    float mu_ = 0.0f;               // mirostat's running surprise bound, 2 * tau after a reset

    // DRY: the accepted tokens it looks back on (from dry_start_), which
    // tokens break a sequence, and per token its longest repeat this step.
    std::vector<int32_t> dry_hist_;
    size_t dry_start_ = 0;
    std::vector<uint8_t> breaker_;  // [n_vocab] once set_pieces ran
    std::vector<int32_t> dry_len_;  // [n_vocab] scratch, zero between steps
    std::vector<int32_t> dry_hit_;  // the tokens dry_len_ holds this step
};

}  // namespace lantern
