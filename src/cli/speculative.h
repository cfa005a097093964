// Greedy speculative decoding for `lantern run --draft-model`: a small
// draft model proposes the next tokens one at a time, the target checks them
// all in one batch, and the output is the target's own greedy text (as
// without a draft, up to the rounding differences between a batch and
// single steps), produced in fewer target passes when the draft agrees.
#pragma once

#include <cstdint>
#include <vector>

#include "lantern/lantern.h"

namespace lantern::cli {

struct SpeculativeStats {
    int generated = 0;  // tokens output
    int drafted = 0;    // tokens the draft proposed
    int accepted = 0;   // of them, tokens the target agreed with
    int target_passes = 0;
    double ms = 0;
};

// Continues sequence 0 of `target`, which has decoded `prompt` (its last
// logits ready), for up to n tokens, writing the text to stdout as it is
// accepted; `draft` (a context of draft_model, same vocabulary) starts
// empty. Stops at an end-of-generation token (unless ignore_eos) or when
// the context is full.
SpeculativeStats generate_speculative(const Model& model, Context& target, const Model& draft_model, Context& draft,
                                      const std::vector<int32_t>& prompt, int n, int n_draft, bool ignore_eos);

}  // namespace lantern::cli
