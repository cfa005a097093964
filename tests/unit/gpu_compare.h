// How the GPU backends' op tests compare a case with the CPU backend.
#pragma once

#include <string>
#include <vector>

#include "lantern/lantern.h"
#include "op_harness.h"

namespace lantern::test {

// Runs `c` on the CPU backend and on `gpu` (with `hints`) and expects the
// same outputs within the case's tolerance, no write outside them, and
// outputs that are not all zeros. `mode` names the run in failures.
//
// With weights the CPU multiplies against activations in blocks of 256
// (Q8_K: the K-quants, IQ4_XS) the two differ by design, the GPU kernels
// quantizing activations in blocks of 32: there both are measured against
// the float64 reference backend, and the GPU's result must be as close to
// it as the CPU's (or within the tolerance).
void expect_matches_cpu(OpCase& c, Backend& gpu, const std::string& mode, ComputeHints hints = {});

// The default model with every layer on `backend` and a KV cache of `type`
// (keys and values): the logits, teacher-forced over 12 steps, stay within
// the model tests' bounds of the CPU's with the same cache or with f16,
// whichever is nearer (per step, or twice what the type itself moves the
// CPU's logits there, if more; on average of the CPU's with the same cache). `held`: the
// backend holds that type (the cache on the device); otherwise the cache
// lives in host memory and attention runs on the CPU. An f16 cache is
// always on the device.
void expect_cache_type_agrees(const std::string& backend, const std::string& type, bool held);

// "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
// in the default model's vocabulary.
extern const std::vector<int32_t> kChatPrompt;

struct Generation {
    std::vector<int32_t> tokens;             // each step's argmax
    std::vector<std::vector<float>> logits;  // the logits behind each token
    std::string backend_stats;               // the first backend's statistics line after the run
    std::string cache_summary;               // Context::cache_summary()
};

// Greedy decoding of n tokens after the prompt (not stopping at the end of
// turn: the continuation is compared, not the answer). With `forced`, those
// tokens are fed instead (teacher forcing); `tokens` still holds each
// step's argmax.
Generation greedy(Model& m, int n, const std::vector<int32_t>& prompt, const std::vector<int32_t>* forced = nullptr,
                  const ContextParams& cp = ContextParams{.n_ctx = 128});

// How far a GPU backend's greedy run may be from the CPU's.
struct GreedyBounds {
    // Where the CPU's two best logits are closer than this, either token may
    // come out on top on either backend. Both quantize every product's input
    // rows to 8 bits but sum in other orders (and multiply prompts in F16 on
    // the GPU); a last-bit difference can move a value across a rounding
    // boundary, and over 30 layers such flips grow to 1e-4..1e-2 normalised
    // MSE in the logits (as the CPU against the float64 reference,
    // model_test.cpp), about 0.1 logit.
    float tie = 0.25f;
    double step_nmse = 3e-2;  // the logits' normalised MSE at each step
    double mean_nmse = 1e-2;  // and on average
};

// The backend's greedy output against the CPU's (`want`, n tokens after the
// same prompt): the same tokens up to the CPU's first near tie
// (free-running), and, fed the CPU's tokens (teacher forcing), the same
// choice at every position that is not a near tie, with the logits within
// the bounds at every step. Returns how many positions were compared; prints
// both counts under `name`.
int expect_greedy_agrees(Model& m, const Generation& want, const std::vector<int32_t>& prompt, int n,
                         const std::string& name, const GreedyBounds& bounds = {},
                         const ContextParams& cp = ContextParams{.n_ctx = 128});

}  // namespace lantern::test
