#include "sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "lantern/error.h"

namespace lantern {

namespace {

void check(bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorCode::InvalidArgument, "sampler: " + what);
}

}  // namespace

TokenSampler::TokenSampler(const SamplerParams& params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
    check(n_vocab > 0, "n_vocab must be positive, got " + std::to_string(n_vocab));
    check(!std::isnan(params.temperature), "temperature is NaN");
    check(params.top_p >= 0.0f && params.top_p <= 1.0f, "top_p must be in [0, 1], got " + std::to_string(params.top_p));
    check(params.min_p >= 0.0f && params.min_p <= 1.0f, "min_p must be in [0, 1], got " + std::to_string(params.min_p));
    check(params.repeat_penalty > 0.0f && std::isfinite(params.repeat_penalty),
          "repeat_penalty must be positive, got " + std::to_string(params.repeat_penalty));
    // The window is a ring of that many tokens, allocated here: bounded so
    // that a request cannot ask for gigabytes (-1 covers any length).
    constexpr int kMaxWindow = 1 << 24;
    check(params.repeat_last_n >= -1 && params.repeat_last_n <= kMaxWindow,
          "repeat_last_n must be in [-1, " + std::to_string(kMaxWindow) + "], got " + std::to_string(params.repeat_last_n));
    check(std::isfinite(params.frequency_penalty) && std::isfinite(params.presence_penalty),
          "frequency/presence penalties must be finite");
    check(params.typical_p >= 0.0f && params.typical_p <= 1.0f, "typical_p must be in [0, 1]");
    check(std::isfinite(params.top_n_sigma), "top_n_sigma must be finite");
    check(params.xtc_probability >= 0.0f && params.xtc_probability <= 1.0f, "xtc_probability must be in [0, 1]");
    check(params.xtc_threshold >= 0.0f && params.xtc_threshold <= 1.0f, "xtc_threshold must be in [0, 1]");
    check(params.dry_multiplier >= 0.0f && std::isfinite(params.dry_multiplier), "dry_multiplier must be 0 or more");
    check(params.dry_base >= 1.0f && std::isfinite(params.dry_base), "dry_base must be at least 1");
    check(params.dry_allowed_length >= 1, "dry_allowed_length must be at least 1");
    check(params.dry_penalty_last_n >= -1, "dry_penalty_last_n must be >= -1");
    check(params.mirostat >= 0 && params.mirostat <= 2, "mirostat must be 0 (off), 1 or 2");
    check(params.mirostat_tau >= 0.0f && std::isfinite(params.mirostat_tau), "mirostat_tau must be 0 or more");
    check(params.mirostat_eta > 0.0f && std::isfinite(params.mirostat_eta), "mirostat_eta must be positive");
    for (const LogitBias& b : params.logit_bias) {
        check(b.token >= 0 && b.token < n_vocab, "logit bias for token " + std::to_string(b.token) +
                                                     ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        check(!std::isnan(b.bias) && b.bias != INFINITY,
              "logit bias for token " + std::to_string(b.token) + " must be a number or -infinity");
    }

    seed_ = params.seed;
    if (seed_ == kSamplerRandomSeed) {
        std::random_device rd;
        seed_ = (uint64_t(rd()) << 32) ^ uint64_t(rd());
    }
    rng_.seed(seed_);

    cands_.reserve(size_t(n_vocab));
    probs_.resize(size_t(n_vocab));
    bucket_mass_.resize(1024);
    counts_.assign(size_t(n_vocab), 0);
    slot_.assign(size_t(n_vocab), 0);
    if (params.repeat_last_n > 0) ring_.resize(size_t(params.repeat_last_n));
    if (dry_active()) dry_len_.assign(size_t(n_vocab), 0);
    mu_ = 2.0f * params.mirostat_tau;
}

void TokenSampler::reset() {
    rng_.seed(seed_);
    for (int32_t t : distinct_) counts_[size_t(t)] = 0;
    distinct_.clear();
    ring_head_ = 0;
    ring_size_ = 0;
    if (params_.repeat_last_n == -1) ring_.clear();
    dry_hist_.clear();
    dry_start_ = 0;
    mu_ = 2.0f * params_.mirostat_tau;
}

void TokenSampler::accept(int32_t token) {
    check(token >= 0 && token < n_vocab_,
          "accepted token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(n_vocab_) + ")");
    dry_remember(token);
    if (params_.repeat_last_n == 0) return;
    if (params_.repeat_last_n == -1) {  // unbounded window
        ring_.push_back(token);
        ++ring_size_;
    } else if (ring_size_ < ring_.size()) {
        ring_[(ring_head_ + ring_size_) % ring_.size()] = token;
        ++ring_size_;
    } else {  // full: the oldest entry leaves the window
        count_out(ring_[ring_head_]);
        ring_[ring_head_] = token;
        ring_head_ = (ring_head_ + 1) % ring_.size();
    }
    count_in(token);
}

std::vector<int32_t> TokenSampler::history() const {
    std::vector<int32_t> out;
    out.reserve(ring_size_);
    for (size_t i = 0; i < ring_size_; ++i) out.push_back(ring_[(ring_head_ + i) % ring_.size()]);
    return out;
}

bool TokenSampler::penalties_active() const {
    return ring_size_ > 0 && (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                              params_.presence_penalty != 0.0f);
}

void TokenSampler::count_in(int32_t token) {
    if (counts_[size_t(token)]++ == 0) {
        slot_[size_t(token)] = int32_t(distinct_.size());
        distinct_.push_back(token);
    }
}

void TokenSampler::count_out(int32_t token) {
    if (--counts_[size_t(token)] == 0) {  // swap-remove from distinct_
        const int32_t slot = slot_[size_t(token)];
        distinct_[size_t(slot)] = distinct_.back();
        slot_[size_t(distinct_.back())] = slot;
        distinct_.pop_back();
    }
}

float TokenSampler::penalized(float logit, int32_t count) const {
    logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
    return logit - (float(count) * params_.frequency_penalty + float(count > 0) * params_.presence_penalty);
}

void TokenSampler::apply_penalties(float* logits) const {
    check(logits != nullptr, "logits is null");
    if (!penalties_active()) return;
    for (int32_t t : distinct_) logits[t] = penalized(logits[t], counts_[size_t(t)]);
}

// cands_ is in id order here, so cands_[t] is token t.
void TokenSampler::penalize_candidates() {
    if (!penalties_active()) return;
    for (int32_t t : distinct_) cands_[size_t(t)].logit = penalized(cands_[size_t(t)].logit, counts_[size_t(t)]);
}

int32_t TokenSampler::argmax() const {
    size_t best = 0;
    for (size_t i = 1; i < cands_.size(); ++i) {
        if (ByLogitDesc{}(cands_[i], cands_[best])) best = i;
    }
    return cands_[best].id;
}

void TokenSampler::top_k(size_t k) {
    if (k == 0 || k >= cands_.size()) return;
    std::nth_element(cands_.begin(), cands_.begin() + std::ptrdiff_t(k), cands_.end(), ByLogitDesc{});
    cands_.resize(k);
    std::sort(cands_.begin(), cands_.end(), ByLogitDesc{});
    sorted_ = true;
}

void TokenSampler::top_p(float p) {
    if (p >= 1.0f || cands_.size() <= 1) return;
    float max_logit = cands_[0].logit;
    if (!sorted_) {
        for (const Candidate& c : cands_) max_logit = std::max(max_logit, c.logit);
    }
    double total = 0.0;
    for (Candidate& c : cands_) {
        c.weight = std::exp(c.logit - max_logit);
        total += c.weight;
    }
    const double target = double(p) * total;

    if (sorted_) {  // after top-k: walk the sorted candidates
        double acc = 0.0;
        for (size_t i = 0; i < cands_.size(); ++i) {
            acc += cands_[i].weight;
            if (acc >= target) {
                cands_.resize(i + 1);
                return;
            }
        }
        return;  // rounding left the whole set just short of the target: keep it all
    }

    // Unsorted: histogram the candidates by logit distance from the max, find the
    // bucket where the descending cumulative mass crosses the target, keep every
    // bucket above it and sort only that boundary bucket. Two linear passes.
    // Candidates further than kTopPRange below the max share the last bucket.
    constexpr size_t kBuckets = 1024;
    constexpr float kTopPRange = 40.0f;  // exp(-40) ~ 4e-18 of the max token's weight
    auto bucket_of = [&](float logit) {
        const float d = (max_logit - logit) * (float(kBuckets) / kTopPRange);
        return d < float(kBuckets - 1) ? size_t(d) : kBuckets - 1;
    };
    std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
    for (const Candidate& c : cands_) bucket_mass_[bucket_of(c.logit)] += c.weight;
    size_t cut = 0;
    double above = 0.0;  // mass of the buckets before `cut`
    while (cut + 1 < kBuckets && above + bucket_mass_[cut] < target) above += bucket_mass_[cut++];

    // Partition: buckets < cut, then bucket == cut (sorted), then the rest.
    auto first_after = std::partition(cands_.begin(), cands_.end(),
                                      [&](const Candidate& c) { return bucket_of(c.logit) < cut; });
    auto boundary_end = std::partition(first_after, cands_.end(),
                                       [&](const Candidate& c) { return bucket_of(c.logit) == cut; });
    std::sort(first_after, boundary_end, ByLogitDesc{});
    const size_t n_above = size_t(first_after - cands_.begin());
    size_t keep = size_t(boundary_end - cands_.begin());
    double acc = above;
    for (size_t i = n_above; i < keep; ++i) {
        acc += cands_[i].weight;
        if (acc >= target) {
            keep = i + 1;
            break;
        }
    }
    cands_.resize(keep);
    sorted_ = n_above == 0;  // otherwise only the boundary bucket is in order
}

void TokenSampler::min_p(float p) {
    if (p <= 0.0f || cands_.size() <= 1) return;
    float max_logit = cands_[0].logit;
    if (!sorted_) {
        for (const Candidate& c : cands_) max_logit = std::max(max_logit, c.logit);
    }
    // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p); the max always stays.
    const float threshold = max_logit + std::log(p);
    if (sorted_) {
        size_t keep = 1;
        while (keep < cands_.size() && cands_[keep].logit >= threshold) ++keep;
        cands_.resize(keep);
    } else {
        cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                    [threshold](const Candidate& c) { return c.logit < threshold; }),
                     cands_.end());
    }
}

double TokenSampler::uniform01() { return double(rng_() >> 11) * 0x1.0p-53; }

int32_t TokenSampler::draw(float temperature) {
    float max_logit = cands_[0].logit;
    for (const Candidate& c : cands_) max_logit = std::max(max_logit, c.logit);
    if (max_logit == -INFINITY) return argmax();  // nothing has any mass: be deterministic

    const float inv_t = 1.0f / temperature;
    double total = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
        probs_[i] = std::exp((cands_[i].logit - max_logit) * inv_t);
        total += probs_[i];
    }
    const double u = uniform01() * total;
    double cum = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
        cum += probs_[i];
        if (cum > u) return cands_[i].id;
    }
    // u landed in the rounding gap at the very top: the last token with mass.
    for (size_t i = cands_.size(); i-- > 0;) {
        if (probs_[i] > 0.0) return cands_[i].id;
    }
    return cands_[0].id;
}

int32_t TokenSampler::sample(const float* logits) {
    check(logits != nullptr, "logits is null");
    cands_.resize(size_t(n_vocab_));
    for (int32_t i = 0; i < n_vocab_; ++i) {
        float l = logits[i];
        if (std::isnan(l)) l = -INFINITY;  // NaN would break the ordering
        if (l == INFINITY) l = FLT_MAX;
        cands_[size_t(i)] = {i, l, 0.0f};
    }
    sorted_ = false;

    for (const LogitBias& b : params_.logit_bias) {
        float& l = cands_[size_t(b.token)].logit;
        l = std::min(l + b.bias, FLT_MAX);
    }
    penalize_candidates();
    dry_penalize();
    if (params_.temperature <= 0.0f) return argmax();
    if (params_.mirostat != 0) return mirostat_draw();

    top_n_sigma(params_.top_n_sigma);
    if (params_.top_k > 0) top_k(size_t(params_.top_k));
    typical(params_.typical_p);
    top_p(params_.top_p);
    min_p(params_.min_p);
    xtc(params_.xtc_probability, params_.xtc_threshold);
    return draw(params_.temperature);
}

}  // namespace lantern
