#include "server/openai.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "chat/tool_calls.h"
#include "server/native_api.h"

namespace lantern::server {
namespace {

using json = nlohmann::json;

template <class T>
T field(const json& body, const char* name, T fallback) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return fallback;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // get<T>() would cast a float or a large number unchecked (undefined
        // behaviour past T's range): only whole numbers within it.
        if (!it->is_number()) throw ApiError(400, std::string("'") + name + "' has the wrong type");
        using L = std::numeric_limits<T>;
        bool in_range;
        if (it->is_number_float()) {
            const double d = it->get<double>();  // max() + 1.0 rounds to 2^(bits - 1): the bound
            in_range = d == std::floor(d) && d >= double(L::min()) && d < double(L::max()) + 1.0;
        } else if (it->is_number_unsigned()) {
            in_range = it->get<uint64_t>() <= uint64_t(L::max());
        } else {
            const auto i = it->get<int64_t>();
            in_range = i >= int64_t(L::min()) && i <= int64_t(L::max());
        }
        if (!in_range) throw ApiError(400, std::string("'") + name + "' must be a whole number in range");
        return it->is_number_float() ? static_cast<T>(it->get<double>())
               : it->is_number_unsigned() ? static_cast<T>(it->get<uint64_t>())
                                          : static_cast<T>(it->get<int64_t>());
    }
    if constexpr (std::is_floating_point_v<T>) {
        if (!it->is_number()) throw ApiError(400, std::string("'") + name + "' has the wrong type");
        const double d = it->get<double>();
        if (!(std::fabs(d) <= double(std::numeric_limits<T>::max()))) {
            throw ApiError(400, std::string("'") + name + "' is out of range");
        }
        return static_cast<T>(d);
    }
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        throw ApiError(400, std::string("'") + name + "' has the wrong type");
    }
}

// A choice's "logprobs": null unless asked for; chat's {"content": [...]}
// or completions' parallel lists.
json logprobs_json(const CompletionRequest& req, const std::vector<TokenLogprob>& tokens, size_t text_offset) {
    if (req.logprobs < 0) return json();
    if (req.chat) {
        json content = json::array();
        for (const TokenLogprob& t : tokens) {
            json top = json::array();
            for (const TopToken& x : t.top) {
                top.push_back({{"token", x.token}, {"logprob", x.logprob}, {"bytes", token_bytes(x.token)}});
            }
            content.push_back(
                {{"token", t.token}, {"logprob", t.logprob}, {"bytes", token_bytes(t.token)}, {"top_logprobs", top}});
        }
        return json{{"content", content}};
    }
    json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const TokenLogprob& t : tokens) {
        texts.push_back(t.token);
        // An echoed prompt's first token has no logprob: null, as OpenAI gives it.
        const bool none = std::isnan(t.logprob);
        lps.push_back(none ? json() : json(t.logprob));
        json top = json::object();
        for (const TopToken& x : t.top) {
            if (!top.contains(x.token)) top[x.token] = x.logprob;
        }
        tops.push_back(none ? json() : top);
        offsets.push_back(text_offset);
        text_offset += t.token.size();
    }
    return json{{"tokens", texts}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace

namespace {

enum class Endpoint { Chat, Completions, Infill, Native };

// A schema's text for SamplerParams::json_schema; one the sampler cannot
// enforce is a 400 naming the request's field and the keyword.
std::string checked_schema(const json& schema, const char* field) {
    std::string text = schema.dump();
    try {
        check_json_schema(text);
    } catch (const Error& e) {
        throw ApiError(400, std::string("'") + field + "': " + e.what());
    }
    return text;
}

// "prompt": a text; a list of token ids (OpenAI's completions); a list of
// texts and ids mixed (/completion). A list holding one prompt (OpenAI's
// batch of one) is that prompt; completions' batches of several are split
// before (split_prompt_batch), /completion refuses them.
void parse_prompt(const json& body, CompletionRequest& r) {
    const char* what = r.native ? "'prompt' must be a string or a list of strings and token ids"
                                : "'prompt' must be a string or a list of token ids";
    auto it = body.find("prompt");
    if (it == body.end()) throw ApiError(400, what);
    const json* p = &*it;
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_array() || (!r.native && (*p)[0].is_string()))) p = &(*p)[0];
    if (p->is_string()) {
        r.prompt = p->get<std::string>();
        return;
    }
    if (!p->is_array()) throw ApiError(400, what);
    for (const json& x : *p) {
        if (x.is_number_unsigned() || x.is_number_integer()) {
            const bool in_range = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t(INT32_MAX) : x.get<int64_t>() >= 0;
            if (!in_range) throw ApiError(400, "'prompt' holds a token id outside the vocabulary");
            r.prompt_pieces.push_back({"", static_cast<int32_t>(x.get<int64_t>())});
        } else if (x.is_string() && r.native) {
            r.prompt_pieces.push_back({x.get<std::string>(), -1});
        } else if (x.is_array() && r.native) {
            throw ApiError(400, "'prompt' holds several prompts; send one request for each");
        } else {
            throw ApiError(400, what);
        }
    }
}

// llama.cpp's /infill: the text around the gap, the project's other files,
// and what is already written of the middle.
void parse_infill_fields(const json& body, CompletionRequest& r) {
    FillInMiddle fim;
    fim.prefix = field<std::string>(body, "input_prefix", "");
    fim.suffix = field<std::string>(body, "input_suffix", "");
    if (auto it = body.find("input_extra"); it != body.end() && !it->is_null()) {
        if (!it->is_array()) throw ApiError(400, "'input_extra' must be a list of {\"filename\", \"text\"} objects");
        for (const json& chunk : *it) {
            if (!chunk.is_object()) throw ApiError(400, "'input_extra' entries must be {\"filename\", \"text\"} objects");
            fim.files.push_back({field<std::string>(chunk, "filename", "tmp"), field<std::string>(chunk, "text", "")});
        }
    }
    r.fim = std::move(fim);
    r.prompt = field<std::string>(body, "prompt", "");
}

CompletionRequest parse_request(const std::string& body_text, Endpoint endpoint, bool reasoning) {
    const bool chat = endpoint == Endpoint::Chat;
    json body;
    try {
        body = json::parse(body_text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past a double
        throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");

    CompletionRequest r;
    r.chat = chat;
    r.reasoning = reasoning;
    if (chat) {
        // The conversation and its tools (lantern/chat.h; a lantern::Error
        // naming the field is a 400 too).
        r.conversation = parse_chat_request(body_text);
    } else if (endpoint == Endpoint::Infill) {
        r.native = true;
        parse_infill_fields(body, r);
    } else {
        r.native = endpoint == Endpoint::Native;
        // Special tokens' names in the text are those tokens on both routes, as
        // llama.cpp's server reads them (and OpenAI's completions read
        // <|endoftext|>): a prompt written in the model's chat format works.
        r.parse_special = true;
        parse_prompt(body, r);
        // OpenAI's insertion: the prompt is the text before the gap.
        if (auto s = body.find("suffix"); !r.native && s != body.end() && !s->is_null()) {
            if (!s->is_string()) throw ApiError(400, "'suffix' must be a string");
            if (!r.prompt_pieces.empty()) throw ApiError(400, "'suffix' needs the 'prompt' as a string");
            r.fim = FillInMiddle{.prefix = r.prompt, .suffix = s->get<std::string>()};
            r.prompt.clear();
        } else if (r.prompt.empty() && r.prompt_pieces.empty()) {
            throw ApiError(400, "'prompt' is empty");
        }
    }

    r.stream = field<bool>(body, "stream", false);
    if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
        if (!r.stream) throw ApiError(400, "'stream_options' needs 'stream': true");
        if (!it->is_object()) throw ApiError(400, "'stream_options' must be an object");
        r.include_usage = field<bool>(*it, "include_usage", false);
    }
    r.max_tokens = field<int>(body, "max_tokens", field<int>(body, "max_completion_tokens", r.max_tokens));
    if (r.native) {
        // llama.cpp's n_predict; -1 runs to the context's end.
        const int n_predict = field<int>(body, "n_predict", r.max_tokens);
        if (n_predict < -1) throw ApiError(400, "'n_predict' must be -1 (no limit), 0 or more");
        r.max_tokens = n_predict < 0 ? std::numeric_limits<int>::max() : n_predict;
    }
    // Completions' echo: the prompt in front of the text, and with logprobs
    // the prompt's tokens scored (max_tokens 0: only that, as evaluation
    // harnesses ask for a text's likelihood).
    r.echo = !chat && field<bool>(body, "echo", false);
    // llama.cpp's routes take n_predict 0 too: the prompt decoded into a
    // slot's cache and nothing generated (editor plugins warm the cache so).
    if (r.native) {
        if (r.max_tokens < 0) throw ApiError(400, "'max_tokens' must be 0 or more");
    } else if (r.max_tokens < (r.echo ? 0 : 1)) {
        throw ApiError(400, r.echo ? "'max_tokens' must be 0 or more" : "'max_tokens' must be positive");
    }
    SamplerParams& s = r.sampling;
    // A field left out keeps SamplerParams' default (what /props reports).
    s.temperature = field<float>(body, "temperature", s.temperature);
    s.top_p = field<float>(body, "top_p", s.top_p);
    s.top_k = field<int>(body, "top_k", s.top_k);
    s.min_p = field<float>(body, "min_p", s.min_p);
    s.frequency_penalty = field<float>(body, "frequency_penalty", s.frequency_penalty);
    s.presence_penalty = field<float>(body, "presence_penalty", s.presence_penalty);
    s.repeat_penalty = field<float>(body, "repeat_penalty", s.repeat_penalty);
    s.repeat_last_n = field<int>(body, "repeat_last_n", s.repeat_last_n);
    // llama.cpp's server's extensions.
    s.typical_p = field<float>(body, "typical_p", s.typical_p);
    s.top_n_sigma = field<float>(body, "top_n_sigma", s.top_n_sigma);
    s.xtc_probability = field<float>(body, "xtc_probability", s.xtc_probability);
    s.xtc_threshold = field<float>(body, "xtc_threshold", s.xtc_threshold);
    s.dry_multiplier = field<float>(body, "dry_multiplier", s.dry_multiplier);
    s.dry_base = field<float>(body, "dry_base", s.dry_base);
    s.dry_allowed_length = field<int>(body, "dry_allowed_length", s.dry_allowed_length);
    s.dry_penalty_last_n = field<int>(body, "dry_penalty_last_n", s.dry_penalty_last_n);
    if (auto it = body.find("dry_sequence_breakers"); it != body.end() && !it->is_null()) {
        if (!it->is_array()) throw ApiError(400, "'dry_sequence_breakers' must be a list of strings");
        s.dry_sequence_breakers.clear();
        for (const json& x : *it) {
            if (!x.is_string()) throw ApiError(400, "'dry_sequence_breakers' entries must be strings");
            s.dry_sequence_breakers.push_back(x.get<std::string>());
        }
    }
    s.mirostat = field<int>(body, "mirostat", s.mirostat);
    s.mirostat_tau = field<float>(body, "mirostat_tau", s.mirostat_tau);
    s.mirostat_eta = field<float>(body, "mirostat_eta", s.mirostat_eta);
    const int64_t seed = field<int64_t>(body, "seed", -1);
    s.seed = seed < 0 ? kSamplerRandomSeed : static_cast<uint64_t>(seed);
    if (s.temperature < 0.0f || s.temperature > 100.0f) throw ApiError(400, "'temperature' must be in [0, 100]");
    if (s.top_p <= 0.0f || s.top_p > 1.0f) throw ApiError(400, "'top_p' must be in (0, 1]");
    if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
        if (it->is_string()) {
            r.stop.push_back(it->get<std::string>());
        } else if (it->is_array()) {
            for (const json& x : *it) {
                if (!x.is_string()) throw ApiError(400, "'stop' entries must be strings");
                r.stop.push_back(x.get<std::string>());
            }
        } else {
            throw ApiError(400, "'stop' must be a string or a list of strings");
        }
    }
    constexpr int kMaxChoices = 16;
    r.n = field<int>(body, "n", 1);
    if (r.n < 1 || r.n > kMaxChoices) throw ApiError(400, "'n' must be between 1 and " + std::to_string(kMaxChoices));
    // Log-probabilities: chat asks with "logprobs": true and "top_logprobs": N,
    // completions with "logprobs": N (up to 20 alternatives either way).
    constexpr int kMaxTop = 20, kMaxNativeTop = 1000;
    if (r.native) {
        if (body.contains("logprobs") && !body["logprobs"].is_null()) {
            throw ApiError(400, "llama.cpp's routes ask for logprobs with 'n_probs': N (the N most likely tokens)");
        }
        const int n = field<int>(body, "n_probs", 0);
        if (n < 0 || n > kMaxNativeTop) {
            throw ApiError(400, "'n_probs' must be between 0 and " + std::to_string(kMaxNativeTop));
        }
        r.logprobs = n > 0 ? n : -1;
    } else if (chat) {
        const int top = field<int>(body, "top_logprobs", -1);
        if (field<bool>(body, "logprobs", false)) {
            r.logprobs = std::max(top, 0);
        } else if (top >= 0) {
            throw ApiError(400, "'top_logprobs' needs 'logprobs': true");
        }
    } else {
        r.logprobs = field<int>(body, "logprobs", -1);
        if (body.contains("logprobs") && !body["logprobs"].is_null() && r.logprobs < 0) {
            throw ApiError(400, "'logprobs' must be 0 or more");
        }
    }
    if (!r.native && r.logprobs > kMaxTop) throw ApiError(400, "at most " + std::to_string(kMaxTop) + " top logprobs per token");
    if (r.echo && r.stream) throw ApiError(400, "'echo' with 'stream' is not supported");
    if (r.fim && r.echo) throw ApiError(400, "'echo' cannot be combined with 'suffix'");
    if (r.native && r.n != 1) throw ApiError(400, "llama.cpp's routes give one answer ('n' 1)");
    r.cache_prompt = field<bool>(body, "cache_prompt", true);
    if (auto it = body.find("response_fields"); r.native && it != body.end() && !it->is_null()) {
        if (!it->is_array()) throw ApiError(400, "'response_fields' must be a list of field paths (\"timings/prompt_n\")");
        for (const json& f : *it) {
            if (!f.is_string()) throw ApiError(400, "'response_fields' entries must be strings");
            r.response_fields.push_back(f.get<std::string>());
        }
    }
    r.max_generation_ms = field<double>(body, "t_max_predict_ms", 0.0);
    r.min_indent = field<int>(body, "n_indent", 0);
    if (r.min_indent < 0) throw ApiError(400, "'n_indent' must be 0 (off) or more");
    if (r.max_generation_ms < 0.0) throw ApiError(400, "'t_max_predict_ms' must be 0 (no limit) or more");
    // {"token id": bias in [-100, 100]} as OpenAI takes it, or false to ban
    // the token; llama.cpp's server also takes [[id, bias], ...]. The ids
    // are checked against the vocabulary by the caller (check_logit_bias).
    if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
        std::vector<std::pair<std::string, json>> entries;
        if (it->is_object()) {
            for (const auto& [key, v] : it->items()) entries.emplace_back(key, v);
        } else if (it->is_array()) {
            for (const json& pair : *it) {
                if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer()) {
                    throw ApiError(400, "'logit_bias' as a list holds [token id, bias] pairs");
                }
                entries.emplace_back(pair[0].dump(), pair[1]);
            }
        } else {
            throw ApiError(400, "'logit_bias' must be an object mapping token ids to biases");
        }
        for (const auto& [key, v] : entries) {
            const bool digits = !key.empty() && key.size() <= 9 &&
                                key.find_first_not_of("0123456789") == std::string::npos;
            if (!digits) throw ApiError(400, "'logit_bias' keys must be token ids, not '" + key + "'");
            LogitBias b;
            b.token = std::stoi(key);
            if (v.is_boolean() && !v.get<bool>()) {
                b.bias = -INFINITY;
            } else if (v.is_number() && v.get<double>() >= -100.0 && v.get<double>() <= 100.0) {
                b.bias = v.get<float>();
            } else {
                throw ApiError(400, "'logit_bias' for token " + key + " must be a number in [-100, 100] or false");
            }
            s.logit_bias.push_back(b);
        }
    }
    // {"type": "json_object"}: the output is one JSON object (the sampler
    // keeps it valid); "json_schema": one that follows the schema.
    if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        const std::string type = it->is_object() && it->contains("type") && (*it)["type"].is_string()
                                     ? (*it)["type"].get<std::string>()
                                     : std::string();
        if (type == "json_object") {
            s.json_object = true;
        } else if (type == "json_schema") {
            // {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}:
            // the reply follows the schema (a schema the sampler cannot
            // enforce is a 400 naming the keyword).
            const json& js = it->value("json_schema", json());
            if (!js.is_object() || !js.contains("schema") || !js["schema"].is_object()) {
                throw ApiError(400, "'response_format' json_schema needs {\"json_schema\": {\"schema\": {...}}}");
            }
            s.json_schema = checked_schema(js["schema"], "response_format");
        } else if (type != "text") {
            throw ApiError(400, "'response_format' type must be \"text\", \"json_object\" or \"json_schema\"");
        }
    }
    // llama.cpp's routes take the schema itself: "json_schema": {...}.
    if (auto it = body.find("json_schema"); r.native && it != body.end() && !it->is_null()) {
        if (!it->is_object()) throw ApiError(400, "'json_schema' must be a JSON schema (an object)");
        if (s.json_object || !s.json_schema.empty()) {
            throw ApiError(400, "'json_schema' cannot be combined with a JSON 'response_format'");
        }
        s.json_schema = checked_schema(*it, "json_schema");
    }
    // "grammar" (llama.cpp's extension): a GBNF grammar the reply matches.
    if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) throw ApiError(400, "'grammar' must be a string (a GBNF grammar)");
        s.grammar = it->get<std::string>();
        if (!s.grammar.empty() && (s.json_object || !s.json_schema.empty())) {
            throw ApiError(400, "'grammar' cannot be combined with a JSON 'response_format'");
        }
        try {
            if (!s.grammar.empty()) check_grammar(s.grammar);
        } catch (const Error& e) {
            throw ApiError(400, std::string("'grammar': ") + e.what());
        }
    }
    if (!chat) {
        for (const char* name : {"tools", "functions"}) {
            if (auto it = body.find(name); it != body.end() && !it->is_null() && !(it->is_array() && it->empty())) {
                throw ApiError(400, std::string("'") + name + "' is for /v1/chat/completions");
            }
        }
    }
    r.ignore_eos = field<bool>(body, "ignore_eos", false);
    if (auto it = body.find("reasoning_format"); chat && it != body.end() && !it->is_null()) {
        const std::string f = it->is_string() ? it->get<std::string>() : std::string();
        if (f != "auto" && f != "deepseek" && f != "none") {
            throw ApiError(400, "'reasoning_format' must be \"auto\" (or \"deepseek\") or \"none\"");
        }
        r.reasoning = f != "none";
    }
    return r;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body, bool chat, bool reasoning) {
    return parse_request(body, chat ? Endpoint::Chat : Endpoint::Completions, reasoning);
}

CompletionRequest parse_infill_request(const std::string& body) { return parse_request(body, Endpoint::Infill, false); }

std::vector<std::string> split_prompt_batch(const std::string& body_text) {
    const json body = json::parse(body_text, nullptr, false);
    if (!body.is_object()) return {};
    auto it = body.find("prompt");
    if (it == body.end() || !it->is_array() || it->size() < 2) return {};
    // A list of ids is one prompt; a list of texts or of id lists is several.
    for (const json& p : *it) {
        if (!p.is_string() && !p.is_array()) return {};
    }
    std::vector<std::string> bodies;
    for (const json& p : *it) {
        json one = body;
        one["prompt"] = p;
        bodies.push_back(one.dump());
    }
    return bodies;
}

CompletionRequest parse_native_request(const std::string& body) { return parse_request(body, Endpoint::Native, false); }

std::string base64_floats(const std::vector<float>& v) {
    static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<unsigned char> bytes;
    bytes.reserve(v.size() * 4);
    for (float f : v) {
        uint32_t u = 0;
        std::memcpy(&u, &f, 4);
        for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<unsigned char>(u >> (8 * k)));
    }
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        const uint32_t w = (uint32_t{bytes[i]} << 16) | (n > 1 ? uint32_t{bytes[i + 1]} << 8 : 0u) | (n > 2 ? bytes[i + 2] : 0u);
        out += kDigits[(w >> 18) & 63];
        out += kDigits[(w >> 12) & 63];
        out += n > 1 ? kDigits[(w >> 6) & 63] : '=';
        out += n > 2 ? kDigits[w & 63] : '=';
    }
    return out;
}

json error_body(const ApiError& e) {
    return json{{"error", {{"message", e.what()}, {"type", e.type}, {"code", e.status}}}};
}


namespace {

// The prompt counts once, the choices' tokens add up (OpenAI's usage for n).
json usage_json(const std::vector<GenerationResult>& rs) {
    int completion = 0, cached = 0;
    for (const GenerationResult& r : rs) completion += r.completion_tokens, cached = std::max(cached, r.cached_tokens);
    const int prompt = rs.empty() ? 0 : rs.front().prompt_tokens;
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

}  // namespace

json usage_chunk(const CompletionRequest& req, const std::vector<GenerationResult>& results, const std::string& id,
                 const std::string& model, int64_t created) {
    return json{{"id", id},
                {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array()},
                {"usage", usage_json(results)}};
}

json completion_response(const CompletionRequest& req, const std::vector<GenerationResult>& results,
                         const std::string& id, const std::string& model, int64_t created) {
    json choices = json::array();
    for (size_t i = 0; i < results.size(); ++i) {
        const GenerationResult& r = results[i];
        json choice = {{"index", i}, {"finish_reason", r.finish_reason}, {"logprobs", logprobs_json(req, r.logprobs, 0)}};
        if (req.chat) {
            const auto [reasoning, answer] = reply_parts(req, r.text);
            if (req.calls_tools()) {
                const ChatReply reply = parse_chat_reply(answer, req.conversation.tools);
                choice["message"] = reply_message(reply, req.conversation.parallel_tool_calls, req.conversation.legacy_functions);
                if (!reply.tool_calls.empty()) choice["finish_reason"] = calls_finish_reason(req, r.finish_reason);
            } else {
                choice["message"] = {{"role", "assistant"}, {"content", answer}};
            }
            if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
        } else if (req.echo) {
            choice["text"] = req.prompt + r.text;
            std::vector<TokenLogprob> all = r.prompt_logprobs;
            all.insert(all.end(), r.logprobs.begin(), r.logprobs.end());
            choice["logprobs"] = logprobs_json(req, all, 0);
        } else {
            choice["text"] = r.text;
        }
        choices.push_back(std::move(choice));
    }
    json out = {{"id", id},
                {"object", req.chat ? "chat.completion" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", choices},
                {"usage", usage_json(results)}};
    if (results.size() == 1) out["timings"] = timings_json(results.front());
    return out;
}

std::string calls_finish_reason(const CompletionRequest& req, const std::string& reason) {
    if (reason != "stop") return reason;  // cut short ("length") stays so
    return req.conversation.legacy_functions ? "function_call" : "tool_calls";
}

json tool_calls_chunk(const CompletionRequest& req, int index, const std::vector<ToolCall>& calls, const std::string& id,
                      const std::string& model, int64_t created) {
    json delta = {{"role", "assistant"}, {"content", nullptr}};
    put_reply_calls(delta, calls, req.conversation.parallel_tool_calls, req.conversation.legacy_functions, true);
    json choice = {{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr}, {"delta", std::move(delta)}};
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({choice})}};
}

std::pair<std::string, std::string> reply_parts(const CompletionRequest& req, const std::string& text) {
    if (!req.reasoning) return {"", text};
    return split_reasoning(text, req.reasoning_opened);
}

json reasoning_chunk(const CompletionRequest& req, int index, const std::string& text, const std::string& id,
                     const std::string& model, int64_t created, const std::vector<TokenLogprob>& tokens) {
    json chunk = completion_chunk(req, index, "", "", id, model, created, tokens);
    json& delta = chunk["choices"][0]["delta"];
    delta.erase("content");
    delta["reasoning_content"] = text;
    return chunk;
}

json completion_chunk(const CompletionRequest& req, int index, const std::string& text,
                      const std::string& finish_reason, const std::string& id, const std::string& model,
                      int64_t created, const std::vector<TokenLogprob>& tokens, size_t text_offset) {
    json choice = {{"index", index},
                   {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)},
                   {"logprobs", logprobs_json(req, tokens, text_offset)}};
    if (req.chat) {
        choice["delta"] = finish_reason.empty() ? json{{"role", "assistant"}, {"content", text}} : json::object();
    } else {
        choice["text"] = text;
    }
    return json{{"id", id},
                {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({choice})}};
}

}  // namespace lantern::server
