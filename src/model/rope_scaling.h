// Rope scaling past what the file says: the user's overrides (llama.cpp's
// --rope-* and --yarn-* options), and YaRN.
//
// YaRN (Peng et al., 2023) changes each rotated pair's angle by a factor
// that depends on the pair and not on the position: pairs that turn many
// times over the original context keep their trained frequency
// (extrapolation), pairs that turn less than once are interpolated by the
// scale, and a linear ramp between the two correction dimensions mixes them.
// The rotated values are also multiplied by 1 + 0.1 ln(factor). So YaRN is
// frequency factors and a magnitude, which every backend's rope already
// takes (Llama 3's rope_freqs work the same way): apply_yarn() builds the
// factors once at load and no kernel knows about YaRN.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "graph/tensor.h"
#include "lantern/lantern.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace lantern {

class Buffer;
class CpuBackend;

// Applies the overrides set in `o` to hp. Error(InvalidArgument) names an
// unknown scaling type or a value out of range.
void apply_rope_overrides(HParams& hp, const RopeOverrides& o);

// YaRN's multiplier on each pair's inverse frequency (n_rot / 2 of them):
// s + (1 - s) m_i with s = rope_freq_scale and m_i the extrapolation share,
// yarn_ext_factor times a ramp from 1 below the fast correction dimension
// to 0 above the slow one.
std::vector<float> yarn_frequency_multipliers(const HParams& hp);

// The magnitude YaRN multiplies the rotated values by: yarn_attn_factor times
// 1 + 0.1 ln(1 / rope_freq_scale) (1 when the factor is at most 1 or
// yarn_ext_factor is 0).
float yarn_magnitude(const HParams& hp);

// The frequency factors made for YaRN; they must outlive the graphs built
// with them (the model owns them).
struct RopeFactorTensors {
    std::unique_ptr<Buffer> buffer;
    std::deque<Tensor> tensors;
};

// Under YaRN scaling, replaces the model's and each layer's frequency
// factors with ones that carry YaRN's multipliers (the file's factors, if
// any, divided by them), puts its magnitude into hp.rope_attn_factor and
// sets hp.rope_scale to 1. Returns null when there is nothing to do.
// Error(Unsupported) for gemma2/gemma3 (their local layers rotate
// unscaled).
std::unique_ptr<RopeFactorTensors> apply_yarn(HParams& hp, ModelWeights& w, CpuBackend& host);

}  // namespace lantern
