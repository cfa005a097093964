// The OpenAI-compatible request and response formats (chat completions and
// completions), kept apart from HTTP so they can be tested on their own.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lantern/lantern.h"
#include "server/engine.h"

namespace lantern::server {

// A request the client got wrong (status 400) or a failure on our side.
struct ApiError : std::runtime_error {
    ApiError(int status_code, const std::string& message, std::string error_type = "invalid_request_error")
        : std::runtime_error(message), status(status_code), type(std::move(error_type)) {}
    int status;
    std::string type;
};

// A piece of a prompt given as a list: a text or a token id.
struct PromptPiece {
    std::string text;
    int32_t token = -1;  // >= 0: this piece is the token
};

struct CompletionRequest {
    bool chat = false;
    // Chat: the conversation, "tools" (or the older "functions"),
    // "tool_choice" and "parallel_tool_calls" (lantern/chat.h).
    ChatRequest conversation;
    std::string prompt;  // completions; with `fim`: the middle's start, after the MID token
    // A prompt given as token ids (completions), or as texts and ids mixed
    // (/completion); `prompt` is then empty.
    std::vector<PromptPiece> prompt_pieces;
    // The prompt's text may name special tokens ("<|im_start|>"), read as
    // those tokens (completions, /completion), not as their letters.
    bool parse_special = false;
    // Fill in the middle: completions' "suffix" (the prompt is the prefix),
    // or llama.cpp's /infill.
    std::optional<FillInMiddle> fim;
    // llama.cpp's own response format ({"content", "stop", ...}; /completion
    // and /infill; native_api.h).
    bool native = false;
    bool cache_prompt = true;  // llama.cpp's: start from a slot's cached prefix
    double max_generation_ms = 0.0;  // llama.cpp's t_max_predict_ms (GenerationRequest's)
    int min_indent = 0;              // llama.cpp's n_indent (GenerationRequest's)
    // llama.cpp's response_fields: the answer holds only these, each under
    // its path ("timings/prompt_n"); empty: every field.
    std::vector<std::string> response_fields;
    SamplerParams sampling;
    int max_tokens = 256;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
    bool echo = false;           // completions: the prompt in front of the text (and its logprobs)
    int n = 1;                   // choices, each generated on its own
    bool ignore_eos = false;
    // Chat: "logprobs": true with "top_logprobs": N; completions: "logprobs": N;
    // llama.cpp's routes: "n_probs": N (0: none).
    int logprobs = -1;  // -1: not asked for
    // Chat: a <think> block at the reply's start goes to the message's
    // reasoning_content ("reasoning_format": "auto", the default; "none"
    // leaves it in content). reasoning_opened: the prompt opened the block
    // (set when the prompt is rendered: prompt_opens_reasoning).
    bool reasoning = true;
    bool reasoning_opened = false;

    // Tools are offered and the reply is searched for calls.
    bool calls_tools() const {
        return chat && !conversation.tools.json.empty() && conversation.tools.choice != ToolChoice::None;
    }
};

// Parses and validates a request body; throws ApiError(400) naming the field.
// `reasoning`: CompletionRequest::reasoning when the body does not say.
CompletionRequest parse_completion_request(const std::string& body, bool chat, bool reasoning = true);
// OpenAI's completions take several prompts at once ("prompt": [text,
// text, ...] or [[ids], [ids], ...]): the body once per prompt, each with
// one of them as its "prompt"; empty when it holds one prompt (or is not
// a JSON object: parse_completion_request says what is wrong).
std::vector<std::string> split_prompt_batch(const std::string& body);
// llama.cpp's /infill: input_prefix, input_suffix, input_extra [{filename,
// text}], prompt (the middle's start), n_predict, n_probs, cache_prompt and
// the sampling fields.
CompletionRequest parse_infill_request(const std::string& body);
// llama.cpp's /completion: prompt (a text, or a list of texts and token
// ids), n_predict, n_probs, cache_prompt and the sampling fields.
CompletionRequest parse_native_request(const std::string& body);

nlohmann::json error_body(const ApiError& e);

// Floats as their little-endian IEEE-754 bytes in base64 (RFC 4648, padded):
// embeddings' "encoding_format": "base64".
std::string base64_floats(const std::vector<float>& v);

// Full (non-streamed) response: one choice per result (n).
// With one choice it carries llama.cpp's "timings" too.
nlohmann::json completion_response(const CompletionRequest& req, const std::vector<GenerationResult>& results,
                                   const std::string& id, const std::string& model, int64_t created);
// The streamed chunk after the last one when stream_options.include_usage
// asked for it: no choices, the request's usage.
nlohmann::json usage_chunk(const CompletionRequest& req, const std::vector<GenerationResult>& results,
                           const std::string& id, const std::string& model, int64_t created);
// A reply that made calls ends with "tool_calls" ("function_call" for the
// older functions) where it would have said "stop".
std::string calls_finish_reason(const CompletionRequest& req, const std::string& reason);
// The streamed chunk carrying choice `index`'s tool calls.
nlohmann::json tool_calls_chunk(const CompletionRequest& req, int index, const std::vector<ToolCall>& calls,
                                const std::string& id, const std::string& model, int64_t created);

// A chat reply's reasoning and answer: split_reasoning when the request
// asks for it (CompletionRequest::reasoning), else no reasoning.
std::pair<std::string, std::string> reply_parts(const CompletionRequest& req, const std::string& text);

// The streamed chunk of choice `index`'s reasoning: {"reasoning_content": text}.
nlohmann::json reasoning_chunk(const CompletionRequest& req, int index, const std::string& text, const std::string& id,
                               const std::string& model, int64_t created, const std::vector<TokenLogprob>& tokens);

// One streamed chunk of choice `index`: a text delta (finish_reason empty) or
// its final chunk, with the logprobs of the tokens it completes
// (text_offset: where the first of them starts in the generated text).
nlohmann::json completion_chunk(const CompletionRequest& req, int index, const std::string& text,
                                const std::string& finish_reason, const std::string& id, const std::string& model,
                                int64_t created, const std::vector<TokenLogprob>& tokens = {}, size_t text_offset = 0);

}  // namespace lantern::server
