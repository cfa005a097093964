// Helpers of the sampler tests: neutral parameters, distributions written
// as probabilities, and the set of tokens a sampler draws.
#pragma once

#include <cmath>
#include <set>
#include <vector>

#include "sampling/sampler.h"

namespace lantern::test {

// Parameters with every filter off and no penalties, at temperature 1.
inline SamplerParams plain(uint64_t seed = 1234) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

inline std::vector<float> log_probs(const std::vector<double>& probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(p > 0 ? float(std::log(p)) : -INFINITY);
    return l;
}

// The set of tokens drawn in `n` samples (history is never accepted).
inline std::set<int32_t> drawn(TokenSampler& s, const std::vector<float>& logits, int n = 4000) {
    std::set<int32_t> seen;
    for (int i = 0; i < n; ++i) seen.insert(s.sample(logits.data()));
    return seen;
}

}  // namespace lantern::test
