// Sampling parameters, shared by the public Sampler (lantern.h) and the
// engine's sampler implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lantern {

// Seed value meaning "draw a random seed".
inline constexpr uint64_t kSamplerRandomSeed = 0xFFFFFFFFu;

// A bias added to one token's logit before anything else; -infinity bans the
// token (OpenAI's and llama.cpp's logit_bias). Biases of one token add up.
struct LogitBias {
    int32_t token = 0;
    float bias = 0.0f;
};

// llama.cpp's conventions: logit biases, penalties (repetition, frequency,
// presence, DRY), then top-n-sigma, top-k, typical-p, top-p, min-p, XTC,
// temperature and a seeded draw; temperature <= 0 is greedy (argmax, ties to
// the lowest id). Mirostat, when on, takes the place of top-n-sigma .. XTC.
struct SamplerParams {
    float temperature = 0.8f;        // <= 0: greedy
    int top_k = 40;                  // <= 0: off
    float top_p = 0.95f;             // >= 1: off
    float min_p = 0.05f;             // <= 0: off
    float repeat_penalty = 1.0f;     // 1: off
    int repeat_last_n = 64;          // penalty window; 0: penalties off, -1: every accepted token
    float frequency_penalty = 0.0f;  // 0: off
    float presence_penalty = 0.0f;   // 0: off
    // Locally typical sampling: the tokens whose surprise is nearest the
    // distribution's entropy, up to this much probability mass.
    float typical_p = 1.0f;          // >= 1: off
    // Top-n-sigma: only logits within n standard deviations of the largest.
    float top_n_sigma = 0.0f;        // <= 0: off
    // XTC (exclude top choices): with this probability per token, every token
    // of probability >= xtc_threshold but the least likely of them is left out.
    float xtc_probability = 0.0f;    // 0: off
    float xtc_threshold = 0.1f;      // > 0.5: off (at most one token can pass it)
    // DRY (don't repeat yourself): a token that would extend a repeat of an
    // earlier sequence of n >= dry_allowed_length tokens loses
    // dry_multiplier * dry_base^(n - dry_allowed_length) of its logit; a
    // repeat does not reach across a token whose text holds a sequence breaker.
    float dry_multiplier = 0.0f;     // 0: off
    float dry_base = 1.75f;
    int dry_allowed_length = 2;
    int dry_penalty_last_n = -1;     // tokens DRY looks back; -1: all accepted since reset
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    // Mirostat (1: the paper's first algorithm, 2: its second) keeps the
    // sampled tokens' surprise near mirostat_tau bits, learning at
    // mirostat_eta; with temperature, it replaces the truncations above.
    int mirostat = 0;                // 0: off
    float mirostat_tau = 5.0f;
    float mirostat_eta = 0.1f;
    uint64_t seed = kSamplerRandomSeed;
    std::vector<LogitBias> logit_bias;  // tokens in [0, n_vocab); no NaN or +infinity
    // The output is one JSON object (OpenAI's response_format json_object):
    // each token is drawn among those that keep the text a valid JSON prefix,
    // and generation ends only once the object is closed. Needs the model's
    // vocabulary: Sampler(params, model).
    bool json_object = false;
    // With json_object: the object begins with one of these texts, e.g. a
    // forced tool call's {"name": "get_weather", "arguments": { (each must
    // begin a JSON object). Empty: any object.
    std::vector<std::string> json_prefixes;
    // A JSON schema (its text) that the output follows, token by token, as
    // OpenAI's structured outputs do: types, properties with required (no
    // others), items, enum/const, anyOf (up to 16 branches of one type),
    // string lengths, formats (date, time, date-time, uuid, email, hostname, ipv4, ipv6,
    // uri, duration) and patterns
    // (regular expressions over ASCII classes), array sizes, number ranges, whole multipleOf;
    // a schema with a keyword the sampler cannot enforce is refused
    // (check_json_schema, lantern.h). Implies JSON output; needs
    // Sampler(params, model).
    std::string json_schema;
    // A GBNF grammar (llama.cpp's format: rules `name ::= ...`, literals,
    // character classes, groups, * + ? {m,n}) whose `root` rule the output
    // matches, token by token; generation ends only once the text matches
    // whole. Not with json_object or json_schema; needs Sampler(params, model).
    std::string grammar;
};

}  // namespace lantern
