// Sampling parameters, shared by the public Sampler (lantern.h) and the
// engine's sampler implementation.
#pragma once

#include <cstdint>

namespace lantern {

// Seed value meaning "draw a random seed".
inline constexpr uint64_t kSamplerRandomSeed = 0xFFFFFFFFu;

// llama.cpp's conventions: penalties, then top-k, top-p, min-p, temperature
// and a seeded draw; temperature <= 0 is greedy (argmax, ties to the lowest id).
struct SamplerParams {
    float temperature = 0.8f;        // <= 0: greedy
    int top_k = 40;                  // <= 0: off
    float top_p = 0.95f;             // >= 1: off
    float min_p = 0.05f;             // <= 0: off
    float repeat_penalty = 1.0f;     // 1: off
    int repeat_last_n = 64;          // penalty window; 0: penalties off, -1: every accepted token
    float frequency_penalty = 0.0f;  // 0: off
    float presence_penalty = 0.0f;   // 0: off
    uint64_t seed = kSamplerRandomSeed;
};

}  // namespace lantern
