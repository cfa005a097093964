// llama.cpp's own response format, which its /completion and /infill give
// and clients written for llama.cpp's server read (editor plugins, the
// Python and JavaScript wrappers): {"content", "stop", "stop_type",
// "timings", "completion_probabilities", ...}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/engine.h"
#include "server/openai.h"

namespace lantern::server {

// A text's bytes as a list of numbers: a token's exact bytes, which its
// text cannot carry in JSON when it is part of a UTF-8 character.
nlohmann::json token_bytes(const std::string& text);

// How the request ended: "eos" (an end-of-generation token), "word" (a stop
// string), "limit" (n_predict or the context), "none" (an error).
std::string stop_type(const GenerationResult& r);

// {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms",
// "prompt_per_second", "predicted_n", "predicted_ms", ...}: the prompt's
// tokens decoded (those found in the slot's cache not counted) and the
// tokens generated, with their wall times.
nlohmann::json timings_json(const GenerationResult& r);

// The settings a request ran with (llama.cpp's "generation_settings", and
// /props' defaults): n_ctx, n_predict, the sampler's settings, stop, n_probs.
nlohmann::json generation_settings(const CompletionRequest& req, int n_ctx);

// The whole answer (stop true) or, streamed, the last event (its content
// empty: the pieces came before). With n_probs, each generated token's
// logprob and the most likely ones ("completion_probabilities"); with
// response_fields, only those (flat: {"timings/prompt_n": 12}).
nlohmann::json native_response(const CompletionRequest& req, const GenerationResult& r, const std::string& model,
                               bool truncated, int n_ctx, bool streamed);
// A streamed piece (stop false), with its tokens' probabilities when asked.
nlohmann::json native_chunk(const CompletionRequest& req, const std::string& text,
                            const std::vector<TokenLogprob>& tokens);

}  // namespace lantern::server
