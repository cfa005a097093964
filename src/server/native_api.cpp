#include "server/native_api.h"

#include <limits>

namespace lantern::server {
namespace {

using json = nlohmann::json;

json probabilities(const std::vector<TokenLogprob>& tokens) {
    json out = json::array();
    for (const TokenLogprob& t : tokens) {
        json top = json::array();
        for (const TopToken& x : t.top) {
            top.push_back({{"id", x.id}, {"token", x.token}, {"logprob", x.logprob}, {"bytes", token_bytes(x.token)}});
        }
        out.push_back({{"id", t.id},
                       {"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", token_bytes(t.token)},
                       {"top_logprobs", std::move(top)}});
    }
    return out;
}

// llama.cpp's response_fields: each path ("a/b") that the answer has, as
// one key of a flat object. A path is a JSON pointer without its leading
// slash ('~' escaped as the pointer syntax wants).
json select_fields(const json& answer, const std::vector<std::string>& paths) {
    json out = json::object();
    for (const std::string& path : paths) {
        std::string pointer = "/";
        for (char c : path) pointer += c == '~' ? std::string("~0") : std::string(1, c);
        try {
            const json::json_pointer at(pointer);
            if (answer.contains(at)) out[path] = answer.at(at);
        } catch (const json::exception&) {
            // A path through a list by a name, not an index: not there.
        }
    }
    return out;
}

}  // namespace

json token_bytes(const std::string& text) {
    json bytes = json::array();
    for (char c : text) bytes.push_back(static_cast<unsigned char>(c));
    return bytes;
}

std::string stop_type(const GenerationResult& r) {
    if (r.finish_reason == "length") return "limit";
    if (r.finish_reason == "stop") return r.stop_word.empty() ? "eos" : "word";
    return "none";
}

json timings_json(const GenerationResult& r) {
    const int prompt_n = r.prompt_tokens - r.cached_tokens;
    const int predicted_n = r.completion_tokens;
    auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
    auto per_second = [](double ms, int n) { return ms > 0.0 ? 1e3 * n / ms : 0.0; };
    return {{"cache_n", r.cached_tokens},
            {"prompt_n", prompt_n},
            {"prompt_ms", r.prompt_ms},
            {"prompt_per_token_ms", per_token(r.prompt_ms, prompt_n)},
            {"prompt_per_second", per_second(r.prompt_ms, prompt_n)},
            {"predicted_n", predicted_n},
            {"predicted_ms", r.generation_ms},
            {"predicted_per_token_ms", per_token(r.generation_ms, predicted_n)},
            {"predicted_per_second", per_second(r.generation_ms, predicted_n)}};
}

json generation_settings(const CompletionRequest& req, int n_ctx) {
    const SamplerParams& s = req.sampling;
    return {{"n_ctx", n_ctx},
            {"n_predict", req.max_tokens == std::numeric_limits<int>::max() ? -1 : req.max_tokens},
            {"seed", s.seed == kSamplerRandomSeed ? json(-1) : json(s.seed)},
            {"temperature", s.temperature},
            {"top_k", s.top_k},
            {"top_p", s.top_p},
            {"min_p", s.min_p},
            {"typical_p", s.typical_p},
            {"top_n_sigma", s.top_n_sigma},
            {"xtc_probability", s.xtc_probability},
            {"xtc_threshold", s.xtc_threshold},
            {"repeat_last_n", s.repeat_last_n},
            {"repeat_penalty", s.repeat_penalty},
            {"presence_penalty", s.presence_penalty},
            {"frequency_penalty", s.frequency_penalty},
            {"dry_multiplier", s.dry_multiplier},
            {"dry_base", s.dry_base},
            {"dry_allowed_length", s.dry_allowed_length},
            {"dry_penalty_last_n", s.dry_penalty_last_n},
            {"dry_sequence_breakers", s.dry_sequence_breakers},
            {"mirostat", s.mirostat},
            {"mirostat_tau", s.mirostat_tau},
            {"mirostat_eta", s.mirostat_eta},
            {"grammar", s.grammar},
            {"stop", req.stop},
            {"ignore_eos", req.ignore_eos},
            {"stream", req.stream},
            {"n_probs", std::max(req.logprobs, 0)},
            {"cache_prompt", req.cache_prompt},
            {"t_max_predict_ms", req.max_generation_ms},
            {"n_indent", req.min_indent}};
}

json native_response(const CompletionRequest& req, const GenerationResult& r, const std::string& model,
                     bool truncated, int n_ctx, bool streamed) {
    json out = {{"content", streamed ? std::string() : r.text},
                {"stop", true},
                {"model", model},
                {"tokens_predicted", r.completion_tokens},
                {"tokens_evaluated", r.prompt_tokens},
                {"tokens_cached", r.cached_tokens},
                {"truncated", truncated},
                {"stop_type", stop_type(r)},
                {"stopping_word", r.stop_word},
                {"timings", timings_json(r)},
                {"generation_settings", generation_settings(req, n_ctx)}};
    if (req.logprobs > 0 && !streamed) out["completion_probabilities"] = probabilities(r.logprobs);
    return req.response_fields.empty() ? out : select_fields(out, req.response_fields);
}

json native_chunk(const CompletionRequest& req, const std::string& text, const std::vector<TokenLogprob>& tokens) {
    json out = {{"content", text}, {"stop", false}};
    if (req.logprobs > 0) out["completion_probabilities"] = probabilities(tokens);
    return out;
}

}  // namespace lantern::server
