// The sampler's less common truncations: top-n-sigma, typical-p, XTC and
// mirostat (sampler.h gives their place in the chain).
#include <algorithm>
#include <cmath>

#include "sampling/sampler.h"

namespace lantern {

double TokenSampler::weigh(float inv_temperature) {
    float max_logit = cands_[0].logit;
    for (const Candidate& c : cands_) max_logit = std::max(max_logit, c.logit);
    double total = 0.0;
    for (Candidate& c : cands_) {
        c.weight = max_logit == -INFINITY ? 1.0f : std::exp((c.logit - max_logit) * inv_temperature);
        total += c.weight;
    }
    return total;
}

void TokenSampler::top_n_sigma(float n) {
    if (n <= 0.0f || cands_.size() <= 1) return;
    double sum = 0.0, sq = 0.0;
    size_t finite = 0;
    float max_logit = -INFINITY;
    for (const Candidate& c : cands_) {
        if (c.logit == -INFINITY) continue;
        sum += c.logit;
        sq += double(c.logit) * c.logit;
        ++finite;
        max_logit = std::max(max_logit, c.logit);
    }
    if (finite < 2) return;
    const double mean = sum / double(finite);
    const double sigma = std::sqrt(std::max(0.0, sq / double(finite) - mean * mean));
    const auto threshold = float(double(max_logit) - double(n) * sigma);
    cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                [threshold](const Candidate& c) { return c.logit < threshold; }),
                 cands_.end());
}

void TokenSampler::typical(float p) {
    if (p >= 1.0f || cands_.size() <= 1) return;
    const double total = weigh(1.0f);
    double entropy = 0.0;
    for (const Candidate& c : cands_) {
        const double q = c.weight / total;
        if (q > 0.0) entropy -= q * std::log(q);
    }
    // weight becomes the token's distance from typical: |surprise - entropy|;
    // zero-probability tokens go last.
    for (Candidate& c : cands_) {
        const double q = c.weight / total;
        c.weight = q > 0.0 ? float(std::fabs(-std::log(q) - entropy)) : INFINITY;
    }
    std::sort(cands_.begin(), cands_.end(), [](const Candidate& a, const Candidate& b) {
        return a.weight < b.weight || (a.weight == b.weight && ByLogitDesc{}(a, b));
    });
    float max_logit = cands_[0].logit;
    for (const Candidate& c : cands_) max_logit = std::max(max_logit, c.logit);
    double acc = 0.0;
    size_t keep = cands_.size();
    for (size_t i = 0; i < cands_.size(); ++i) {
        acc += std::exp(double(cands_[i].logit) - max_logit) / total;
        if (acc >= double(p)) {
            keep = i + 1;
            break;
        }
    }
    cands_.resize(keep);
    sorted_ = false;
}

void TokenSampler::xtc(float probability, float threshold) {
    if (probability <= 0.0f || threshold > 0.5f || cands_.size() < 2) return;
    if (uniform01() >= double(probability)) return;
    const double total = weigh(1.0f);
    const double cut = double(threshold) * total;
    // The least likely of the tokens over the threshold stays.
    size_t above = 0;
    const Candidate* last = nullptr;
    for (const Candidate& c : cands_) {
        if (c.weight < cut) continue;
        ++above;
        if (last == nullptr || ByLogitDesc{}(*last, c)) last = &c;
    }
    if (above < 2) return;
    const int32_t keep = last->id;
    cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                [&](const Candidate& c) { return c.weight >= cut && c.id != keep; }),
                 cands_.end());
}

// Mirostat (Basu et al., 2021): truncate the distribution at temperature
// where the tokens' surprise passes mu (version 2), or to the k tokens that
// a Zipf fit of the top 100 says give surprise mu (version 1); draw; move mu
// by eta times how far the drawn token's surprise missed tau.
int32_t TokenSampler::mirostat_draw() {
    const float temperature = params_.temperature;
    double total = weigh(1.0f / temperature);
    if (!sorted_) {
        std::sort(cands_.begin(), cands_.end(), ByLogitDesc{});
        sorted_ = true;
    }
    size_t keep = 1;
    if (params_.mirostat == 2) {
        // surprise -log2(w / total) <= mu  <=>  w >= total * 2^-mu
        const double floor = total * std::exp2(-double(mu_));
        while (keep < cands_.size() && cands_[keep].weight >= floor) ++keep;
    } else {
        const size_t m = std::min<size_t>(100, cands_.size());
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i + 1 < m; ++i) {
            if (cands_[i + 1].weight <= 0.0f) break;
            const double t = std::log(double(i + 2) / double(i + 1));
            const double b = std::log(double(cands_[i].weight) / cands_[i + 1].weight);
            num += t * b;
            den += t * t;
        }
        const double s_hat = den > 0.0 ? num / den : 0.0;
        double k = double(cands_.size());
        if (s_hat > 0.0) {
            const double eps = s_hat - 1.0;
            const double n = double(n_vocab_);
            const double base = std::fabs(eps) < 1e-6 ? std::exp2(double(mu_)) / std::log(n)
                                                       : eps * std::exp2(double(mu_)) / (1.0 - std::pow(n, -eps));
            if (base > 0.0) k = std::pow(base, 1.0 / s_hat);
        }
        keep = size_t(std::clamp(k, 1.0, double(cands_.size())));
    }
    cands_.resize(keep);
    total = 0.0;
    for (const Candidate& c : cands_) total += c.weight;
    const int32_t id = draw(temperature);
    for (const Candidate& c : cands_) {
        if (c.id != id) continue;
        const double surprise = -std::log2(double(c.weight) / total);
        mu_ -= params_.mirostat_eta * float(surprise - params_.mirostat_tau);
        break;
    }
    return id;
}

}  // namespace lantern
