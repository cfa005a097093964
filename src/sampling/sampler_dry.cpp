// DRY ("don't repeat yourself"): a penalty on tokens that would extend a
// repeat of an earlier sequence. For each earlier position i of the window,
// the longest common suffix of the text before i and the whole text is how
// long a repeat the token at i would continue; a token's penalty grows
// exponentially with its longest such repeat past the allowed length. The
// repeat may not reach across a sequence-breaking token (a line end, a
// colon...), so formats that repeat by nature (names in a dialogue) are not
// punished.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "sampling/sampler.h"

namespace lantern {

namespace {

// Longer repeats than this are not measured: their penalty is past any logit.
constexpr size_t kDryMaxRepeat = 64;

}  // namespace

bool TokenSampler::dry_active() const { return params_.dry_multiplier > 0.0f && params_.dry_penalty_last_n != 0; }

void TokenSampler::set_pieces(const std::vector<std::string>& pieces) {
    breaker_.assign(size_t(n_vocab_), 0);
    for (size_t t = 0; t < pieces.size() && t < breaker_.size(); ++t) {
        for (const std::string& b : params_.dry_sequence_breakers) {
            if (!b.empty() && pieces[t].find(b) != std::string::npos) breaker_[t] = 1;
        }
    }
}

void TokenSampler::dry_remember(int32_t token) {
    if (!dry_active()) return;
    dry_hist_.push_back(token);
    if (params_.dry_penalty_last_n > 0 && dry_hist_.size() - dry_start_ > size_t(params_.dry_penalty_last_n)) {
        ++dry_start_;
        if (dry_start_ >= 4096 && dry_start_ * 2 >= dry_hist_.size()) {  // drop the dead half now and then
            dry_hist_.erase(dry_hist_.begin(), dry_hist_.begin() + std::ptrdiff_t(dry_start_));
            dry_start_ = 0;
        }
    }
}

// cands_ is in id order here, so cands_[t] is token t.
void TokenSampler::dry_penalize() {
    if (!dry_active()) return;
    const int32_t* h = dry_hist_.data() + dry_start_;
    const size_t n = dry_hist_.size() - dry_start_;
    const auto allowed = size_t(params_.dry_allowed_length);
    auto breaks = [&](int32_t t) { return !breaker_.empty() && breaker_[size_t(t)] != 0; };
    // The longest repeat the text's end can be part of: back to its last breaker.
    size_t longest = 0;
    while (longest < n && longest < kDryMaxRepeat && !breaks(h[n - 1 - longest])) ++longest;
    if (longest < allowed) return;
    for (size_t i = 1; i < n; ++i) {
        size_t len = 0;
        while (len < longest && len < i && h[i - 1 - len] == h[n - 1 - len]) ++len;
        if (len < allowed) continue;
        const int32_t t = h[i];
        if (dry_len_[size_t(t)] == 0) dry_hit_.push_back(t);
        dry_len_[size_t(t)] = std::max(dry_len_[size_t(t)], int32_t(len));
    }
    for (const int32_t t : dry_hit_) {
        const double penalty =
            double(params_.dry_multiplier) * std::pow(double(params_.dry_base), double(dry_len_[size_t(t)]) - double(allowed));
        float& logit = cands_[size_t(t)].logit;
        logit = float(std::max(double(logit) - penalty, -double(FLT_MAX)));
        dry_len_[size_t(t)] = 0;
    }
    dry_hit_.clear();
}

}  // namespace lantern
