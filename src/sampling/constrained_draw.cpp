#include "sampling/constrained_draw.h"

#include <cmath>
#include <string>

#include "lantern/error.h"

namespace lantern {

int32_t draw_allowed(TokenSampler& sampler, const float* logits, const std::function<bool(int32_t)>& allows,
                     const std::vector<bool>& eog, std::vector<float>& scratch, std::string_view who) {
    const auto n = static_cast<size_t>(sampler.n_vocab());
    if (n != eog.size()) throw Error(ErrorCode::InvalidArgument, std::string(who) + ": the sampler's vocabulary differs");
    const float* cur = logits;
    for (int tries = 0; tries < kMaxRejections; ++tries) {
        const int32_t t = sampler.sample(cur);
        if (allows(t)) return t;
        if (cur == logits) {
            scratch.assign(logits, logits + n);
            cur = scratch.data();
        }
        scratch[static_cast<size_t>(t)] = -INFINITY;
    }
    // Many refused picks: mask them all at once.
    int32_t first = -1;
    for (size_t t = 0; t < n; ++t) {
        if (scratch[t] == -INFINITY) continue;
        if (allows(static_cast<int32_t>(t))) {
            if (first < 0) first = static_cast<int32_t>(t);
        } else {
            scratch[t] = -INFINITY;
        }
    }
    int32_t t = first >= 0 ? sampler.sample(scratch.data()) : -1;
    if (t >= 0 && allows(t)) return t;
    for (size_t i = 0; i < n; ++i) {
        if (allows(static_cast<int32_t>(i))) return static_cast<int32_t>(i);
    }
    for (size_t i = 0; i < n; ++i) {
        if (eog[i]) return static_cast<int32_t>(i);
    }
    throw Error(ErrorCode::InvalidArgument, std::string(who) + ": no token can continue the output");
}

}  // namespace lantern
