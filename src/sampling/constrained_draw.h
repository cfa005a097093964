// The draw shared by the sampler's constraints (JSON, grammars): the next
// token among those a constraint allows.
//
// The caller's TokenSampler picks from the logits; a pick the constraint
// refuses is masked and the sampler draws again, so greedy decoding needs one
// check per pick rather than one per token of the vocabulary. After
// kMaxRejections refusals every refused token is masked at once. Either way
// the result is a draw from the distribution restricted to the allowed tokens.
// When no allowed token has a finite logit, the first allowed token is taken,
// else an end-of-generation one.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sampling/sampler.h"

namespace lantern {

inline constexpr int kMaxRejections = 16;

// logits: n_vocab floats, not modified; eog[t]: token t ends generation;
// scratch: reused between calls. Throws Error(InvalidArgument), prefixed by
// `who`, when the vocabulary sizes differ or nothing at all can come next.
int32_t draw_allowed(TokenSampler& sampler, const float* logits, const std::function<bool(int32_t)>& allows,
                     const std::vector<bool>& eog, std::vector<float>& scratch, std::string_view who);

}  // namespace lantern
