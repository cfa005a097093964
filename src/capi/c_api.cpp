// The C API (include/lantern/lantern_c.h) over the C++ one: handles that own
// the C++ objects, every call inside a guard that turns an exception into a
// status and the thread's last error.
#include "lantern/lantern_c.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "lantern/lantern.h"

struct lantern_model {
    std::unique_ptr<lantern::Model> model;
};

struct lantern_context {
    std::unique_ptr<lantern::Context> ctx;
};

struct lantern_sampler {
    std::unique_ptr<lantern::Sampler> sampler;
};

namespace {

struct LastError {
    std::string message;
    int code = LANTERN_OK;
};

// Per thread, so that one thread's failure is not another's message.
LastError& last_error() {
    thread_local LastError e;
    return e;
}

int status_of(lantern::ErrorCode code) { return -(static_cast<int>(code) + 1); }

int fail(int code, const std::string& message) {
    last_error() = {message, code};
    return code;
}

// Runs fn, returning its result. An exception becomes the thread's last
// error and the result null (pointers) or the failure's status (numbers).
template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
    using R = decltype(fn());
    try {
        return fn();
    } catch (const lantern::Error& e) {
        fail(status_of(e.code()), e.what());
    } catch (const std::bad_alloc&) {
        fail(LANTERN_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        fail(LANTERN_ERR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        fail(LANTERN_ERR_INTERNAL, "internal error");
    }
    if constexpr (std::is_pointer_v<R>) {
        return nullptr;
    } else {
        return static_cast<R>(last_error().code);
    }
}

void require(bool ok, const std::string& what) {
    if (!ok) throw lantern::Error(lantern::ErrorCode::InvalidArgument, what);
}

// The caller's parameter struct as far as its `size` reaches, over the
// defaults (lantern_c.h: "Parameter structs"); `given` null: the defaults.
template <class P>
P read_params(const P* given, P defaults, const char* what) {
    if (given == nullptr) return defaults;
    const size_t known = sizeof(P);
    require(given->size != 0, std::string(what) + ".size is 0: take the struct from " + what + "'s default_params call");
    require(given->size >= sizeof(size_t) && given->size <= known,
            std::string(what) + ".size is " + std::to_string(given->size) + ", this library's struct is " +
                std::to_string(known) + " bytes (a newer lantern_c.h than the library?)");
    std::memcpy(static_cast<void*>(&defaults), given, given->size);
    defaults.size = known;
    return defaults;
}

// Copies bytes into the caller's buffer (NUL-terminated, truncated to fit)
// and returns their full length.
int copy_out(const std::string& s, char* buf, int capacity) {
    require(capacity >= 0 && (buf != nullptr || capacity == 0), "the output buffer is null or its capacity negative");
    require(s.size() < static_cast<size_t>(INT32_MAX), "the text is too long for an int length");
    if (capacity > 0) {
        const size_t n = std::min(s.size(), static_cast<size_t>(capacity) - 1);
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return static_cast<int>(s.size());
}

const lantern::Model& model_of(const lantern_model* m) {
    require(m != nullptr && m->model != nullptr, "the model is null");
    return *m->model;
}

lantern::Context& context_of(const lantern_context* c) {
    require(c != nullptr && c->ctx != nullptr, "the context is null");
    return *c->ctx;
}

}  // namespace

extern "C" {

const char* lantern_last_error(void) { return last_error().message.c_str(); }
int lantern_last_error_code(void) { return last_error().code; }
const char* lantern_version(void) { return LANTERN_VERSION_STRING; }

int lantern_backends(char* buf, int capacity) {
    return guarded([&] {
        std::string list;
        for (const std::string& b : lantern::available_backends()) list += (list.empty() ? "" : ",") + b;
        return copy_out(list, buf, capacity);
    });
}

int lantern_cpu_kernels(char* buf, int capacity) {
    return guarded([&] { return copy_out(lantern::cpu_kernels(), buf, capacity); });
}

int lantern_device_count(void) {
    return guarded([&] { return static_cast<int>(lantern::list_devices().size()); });
}

int lantern_device_info(int i, char* backend, int backend_capacity, int* index, char* name, int name_capacity,
                        char* details, int details_capacity) {
    return guarded([&]() -> int {
        const std::vector<lantern::DeviceInfo> devices = lantern::list_devices();
        require(i >= 0 && static_cast<size_t>(i) < devices.size(),
                "device " + std::to_string(i) + " is not one of the " + std::to_string(devices.size()) + " found");
        const lantern::DeviceInfo& d = devices[static_cast<size_t>(i)];
        copy_out(d.backend, backend, backend_capacity);
        copy_out(d.name, name, name_capacity);
        copy_out(d.details, details, details_capacity);
        if (index != nullptr) *index = d.index;
        return LANTERN_OK;
    });
}

lantern_model_params lantern_model_default_params(void) {
    const lantern::ModelParams d;
    const lantern::RopeOverrides& r = d.rope;
    return {sizeof(lantern_model_params),
            nullptr,           d.device,           d.n_gpu_layers,     d.n_threads,         d.vocab_only ? 1 : 0,
            nullptr,           nullptr,            nullptr,            nullptr,             0,
            nullptr,           r.freq_base,        r.freq_scale,       r.yarn_orig_ctx,     r.yarn_ext_factor,
            r.yarn_attn_factor, r.yarn_beta_fast,  r.yarn_beta_slow};
}

lantern_model* lantern_model_load(const char* path, const lantern_model_params* params) {
    return guarded(
        [&]() -> lantern_model* {
            require(path != nullptr, "the model path is null");
            const lantern_model_params p = read_params(params, lantern_model_default_params(), "lantern_model_params");
            lantern::ModelParams mp;
            if (p.backend != nullptr) mp.backend = p.backend;
            mp.device = p.device;
            mp.n_gpu_layers = p.n_gpu_layers;
            mp.n_threads = p.n_threads;
            mp.vocab_only = p.vocab_only != 0;
            require(p.n_lora >= 0 && (p.n_lora == 0 || p.lora_paths != nullptr), "n_lora is negative or lora_paths null");
            for (int i = 0; i < p.n_lora; ++i) {
                require(p.lora_paths[i] != nullptr, "lora_paths[" + std::to_string(i) + "] is null");
                mp.lora_adapters.push_back({p.lora_paths[i], p.lora_scales != nullptr ? p.lora_scales[i] : 1.0f});
            }
            if (p.rope_scaling != nullptr) mp.rope.scaling = p.rope_scaling;
            mp.rope.freq_base = p.rope_freq_base;
            mp.rope.freq_scale = p.rope_freq_scale;
            mp.rope.yarn_orig_ctx = p.yarn_orig_ctx;
            mp.rope.yarn_ext_factor = p.yarn_ext_factor;
            mp.rope.yarn_attn_factor = p.yarn_attn_factor;
            mp.rope.yarn_beta_fast = p.yarn_beta_fast;
            mp.rope.yarn_beta_slow = p.yarn_beta_slow;
            if (p.progress != nullptr) {
                mp.progress = [fn = p.progress, user = p.progress_user_data](float f) { fn(f, user); };
            }
            auto m = std::make_unique<lantern_model>();
            m->model = lantern::Model::load(path, mp);
            return m.release();
        });
}

void lantern_model_free(lantern_model* model) { delete model; }

int lantern_model_n_vocab(const lantern_model* model) {
    return guarded([&] { return model_of(model).n_vocab(); });
}
int lantern_model_n_ctx_train(const lantern_model* model) {
    return guarded([&] { return model_of(model).info().n_ctx_train; });
}
int lantern_model_n_ctx_max(const lantern_model* model) {
    return guarded([&] { return model_of(model).info().n_ctx_max; });
}

int lantern_model_n_embd(const lantern_model* model) {
    return guarded([&] { return model_of(model).info().n_embd; });
}
int lantern_model_n_layer(const lantern_model* model) {
    return guarded([&] { return model_of(model).info().n_layer; });
}
const char* lantern_model_description(const lantern_model* model) {
    return guarded([&] { return model_of(model).info().description.c_str(); });
}

int32_t lantern_token_bos(const lantern_model* model) {
    return guarded([&]() -> int32_t { return model_of(model).bos_token(); });
}
int32_t lantern_token_eos(const lantern_model* model) {
    return guarded([&]() -> int32_t { return model_of(model).eos_token(); });
}
int lantern_token_is_eog(const lantern_model* model, int32_t token) {
    return guarded([&] { return model_of(model).is_end_of_generation(token) ? 1 : 0; });
}

int lantern_tokenize(const lantern_model* model, const char* text, size_t text_len, int add_special, int parse_special,
                     int32_t* tokens, int capacity) {
    return guarded(
        [&] {
            require(text != nullptr || text_len == 0, "the text is null");
            require(capacity >= 0 && (tokens != nullptr || capacity == 0), "the token buffer is null or its capacity negative");
            const std::vector<int32_t> ids =
                model_of(model).tokenize(std::string_view(text == nullptr ? "" : text, text_len), add_special != 0,
                                         parse_special != 0);
            require(ids.size() < static_cast<size_t>(INT32_MAX), "too many tokens for an int count");
            std::copy_n(ids.begin(), std::min(ids.size(), static_cast<size_t>(capacity)), tokens);
            return static_cast<int>(ids.size());
        });
}

int lantern_fill_in_middle(const lantern_model* model, const char* prefix, size_t prefix_len, const char* suffix,
                           size_t suffix_len, int max_tokens, int32_t* tokens, int capacity) {
    return guarded(
        [&] {
            require((prefix != nullptr || prefix_len == 0) && (suffix != nullptr || suffix_len == 0),
                    "the prefix or suffix is null");
            require(capacity >= 0 && (tokens != nullptr || capacity == 0), "the token buffer is null or its capacity negative");
            lantern::FillInMiddle r;
            r.prefix.assign(prefix == nullptr ? "" : prefix, prefix_len);
            r.suffix.assign(suffix == nullptr ? "" : suffix, suffix_len);
            const std::vector<int32_t> ids = model_of(model).fill_in_middle(r, max_tokens).tokens;
            require(ids.size() < static_cast<size_t>(INT32_MAX), "too many tokens for an int count");
            std::copy_n(ids.begin(), std::min(ids.size(), static_cast<size_t>(capacity)), tokens);
            return static_cast<int>(ids.size());
        });
}

int lantern_token_to_piece(const lantern_model* model, int32_t token, int render_special, char* buf, int capacity) {
    return guarded(
        [&] {
            const lantern::Model& m = model_of(model);
            require(token >= 0 && token < m.n_vocab(), "token " + std::to_string(token) + " is outside the vocabulary");
            return copy_out(m.token_to_piece(token, render_special != 0), buf, capacity);
        });
}

int lantern_detokenize(const lantern_model* model, const int32_t* tokens, int n_tokens, int render_special, char* buf,
                       int capacity) {
    return guarded(
        [&] {
            const lantern::Model& m = model_of(model);
            require(n_tokens >= 0 && (tokens != nullptr || n_tokens == 0), "the token list is null or its length negative");
            std::vector<int32_t> ids(tokens, tokens + n_tokens);
            for (int32_t t : ids) require(t >= 0 && t < m.n_vocab(), "token " + std::to_string(t) + " is outside the vocabulary");
            return copy_out(m.detokenize(ids, render_special != 0), buf, capacity);
        });
}

int lantern_chat_apply(const lantern_model* model, const char* const* roles, const char* const* contents,
                       int n_messages, int add_generation_prompt, const char* override_template, char* buf,
                       int capacity) {
    return guarded(
        [&] {
            require(n_messages >= 0 && (n_messages == 0 || (roles != nullptr && contents != nullptr)),
                    "the message lists are null or their length negative");
            std::vector<lantern::ChatMessage> messages;
            for (int i = 0; i < n_messages; ++i) {
                require(roles[i] != nullptr && contents[i] != nullptr, "message " + std::to_string(i) + " has a null string");
                messages.push_back({roles[i], contents[i]});
            }
            const std::string text = model_of(model).apply_chat_template(
                messages, add_generation_prompt != 0, override_template != nullptr ? override_template : "");
            return copy_out(text, buf, capacity);
        });
}

int lantern_chat_apply_json(const lantern_model* model, const char* request_json, int add_generation_prompt,
                            const char* override_template, char* buf, int capacity) {
    return guarded([&] {
        require(request_json != nullptr, "the request is null");
        const lantern::ChatRequest req = lantern::parse_chat_request(request_json);
        const lantern::ChatPrompt p = model_of(model).apply_chat_template(
            req.messages, req.tools, add_generation_prompt != 0, override_template != nullptr ? override_template : "",
            req.template_kwargs);
        const nlohmann::json out = {{"prompt", p.text},
                                    {"call_prefixes", p.call_prefixes},
                                    {"call_schema", p.call_schema},
                                    {"opens_reasoning", lantern::prompt_opens_reasoning(p.text)}};
        return copy_out(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), buf, capacity);
    });
}

int lantern_chat_parse_reply(const char* request_json, const char* text, char* buf, int capacity) {
    return guarded([&] {
        require(request_json != nullptr && text != nullptr, "the request or the text is null");
        const lantern::ChatRequest req = lantern::parse_chat_request(request_json);
        // The reply's <think> block (unless "reasoning_format" is "none";
        // "opens_reasoning": what lantern_chat_apply_json said of the prompt).
        const nlohmann::json body = nlohmann::json::parse(request_json);  // parsed above: valid
        bool split = true, opened = false;
        if (auto it = body.find("reasoning_format"); it != body.end() && !it->is_null()) {
            require(it->is_string(), "'reasoning_format' must be a string");
            split = it->get<std::string>() != "none";
        }
        if (auto it = body.find("opens_reasoning"); it != body.end() && !it->is_null()) {
            require(it->is_boolean(), "'opens_reasoning' must be a boolean");
            opened = it->get<bool>();
        }
        auto [reasoning, answer] = split ? lantern::split_reasoning(text, opened) : std::pair<std::string, std::string>{"", text};
        const lantern::ChatReply reply = lantern::parse_chat_reply(answer, req.tools);
        nlohmann::json out = lantern::reply_message(reply, req.parallel_tool_calls, req.legacy_functions);
        if (!reasoning.empty()) out["reasoning_content"] = reasoning;
        return copy_out(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), buf, capacity);
    });
}

lantern_context_params lantern_context_default_params(void) {
    const lantern::ContextParams d;
    return {sizeof(lantern_context_params), d.n_ctx, d.n_seq, d.n_batch, d.n_threads, d.embeddings ? 1 : 0, nullptr,
            nullptr};
}

lantern_context* lantern_context_new(lantern_model* model, const lantern_context_params* params) {
    return guarded(
        [&]() -> lantern_context* {
            require(model != nullptr && model->model != nullptr, "the model is null");
            const lantern_context_params p =
                read_params(params, lantern_context_default_params(), "lantern_context_params");
            lantern::ContextParams cp;
            cp.n_ctx = p.n_ctx;
            cp.n_seq = p.n_seq;
            cp.n_batch = p.n_batch;
            cp.n_threads = p.n_threads;
            cp.embeddings = p.embeddings != 0;
            if (p.cache_type_k != nullptr) cp.cache_type_k = p.cache_type_k;
            if (p.cache_type_v != nullptr) cp.cache_type_v = p.cache_type_v;
            auto c = std::make_unique<lantern_context>();
            c->ctx = std::make_unique<lantern::Context>(*model->model, cp);
            return c.release();
        });
}

void lantern_context_free(lantern_context* ctx) { delete ctx; }

int lantern_decode(lantern_context* ctx, const int32_t* tokens, const int32_t* pos, const int32_t* seq,
                   const int8_t* want_logits, int n) {
    return guarded(
        [&]() -> int {
            lantern::Context& c = context_of(ctx);
            require(n > 0 && tokens != nullptr, "decode needs at least one token");
            lantern::Batch b;
            std::map<int32_t, int32_t> next;  // each sequence's next position (pos NULL)
            for (int i = 0; i < n; ++i) {
                const int32_t s = seq != nullptr ? seq[i] : 0;
                require(s >= 0 && s < c.n_seq(), "sequence " + std::to_string(s) + " is outside [0, " +
                                                     std::to_string(c.n_seq()) + ")");
                int32_t p = 0;
                if (pos != nullptr) {
                    p = pos[i];
                } else {
                    auto it = next.find(s);
                    if (it == next.end()) it = next.emplace(s, c.sequence_length(s)).first;
                    p = it->second++;
                }
                const bool logits = want_logits != nullptr ? want_logits[i] != 0 : i + 1 == n;
                b.add(tokens[i], p, s, logits);
            }
            c.decode(b);
            return LANTERN_OK;
        });
}

const float* lantern_logits(lantern_context* ctx, int i) {
    return guarded(
        [&] {
            lantern::Context& c = context_of(ctx);
            require(i >= 0 && i < c.n_outputs(), "no logits for output " + std::to_string(i) + " (the last decode gave " +
                                                     std::to_string(c.n_outputs()) + ")");
            return c.logits(i);
        });
}

const float* lantern_embeddings(lantern_context* ctx, int i) {
    return guarded([&] { return context_of(ctx).embeddings(i); });
}

int lantern_n_outputs(const lantern_context* ctx) {
    return guarded([&] { return context_of(ctx).n_outputs(); });
}

int lantern_sequence_length(const lantern_context* ctx, int seq) {
    return guarded(
        [&] {
            const lantern::Context& c = context_of(ctx);
            require(seq >= 0 && seq < c.n_seq(), "sequence " + std::to_string(seq) + " is outside the context");
            return c.sequence_length(seq);
        });
}

int lantern_clear_sequence(lantern_context* ctx, int seq) {
    return guarded(
        [&]() -> int {
            lantern::Context& c = context_of(ctx);
            require(seq >= 0 && seq < c.n_seq(), "sequence " + std::to_string(seq) + " is outside the context");
            c.clear_sequence(seq);
            return LANTERN_OK;
        });
}

int lantern_sequence_save_file(const lantern_context* ctx, int seq, const char* path, const int32_t* tokens,
                               int n_tokens) {
    return guarded(
        [&]() -> int {
            const lantern::Context& c = context_of(ctx);
            require(path != nullptr, "path is NULL");
            require(n_tokens >= 0 && (n_tokens == 0 || tokens != nullptr), "tokens is NULL or n_tokens negative");
            c.save_sequence_file(seq, path, std::vector<int32_t>(tokens, tokens + n_tokens));
            return LANTERN_OK;
        });
}

int lantern_sequence_load_file(lantern_context* ctx, int seq, const char* path, int32_t* tokens, int cap) {
    return guarded(
        [&]() -> int {
            lantern::Context& c = context_of(ctx);
            require(path != nullptr, "path is NULL");
            require(cap >= 0 && (cap == 0 || tokens != nullptr), "tokens is NULL or cap negative");
            const std::vector<int32_t> saved = c.load_sequence_file(seq, path);
            std::copy_n(saved.begin(), std::min(saved.size(), static_cast<size_t>(cap)), tokens);
            return static_cast<int>(saved.size());
        });
}

int lantern_context_n_ctx(const lantern_context* ctx) {
    return guarded([&] { return context_of(ctx).n_ctx(); });
}

lantern_sampler_params lantern_sampler_default_params(void) {
    const lantern::SamplerParams d;
    lantern_sampler_params p{};
    p.size = sizeof(lantern_sampler_params);
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.repeat_last_n = d.repeat_last_n;
    p.frequency_penalty = d.frequency_penalty;
    p.presence_penalty = d.presence_penalty;
    p.seed = d.seed;
    p.json_object = d.json_object ? 1 : 0;
    p.typical_p = d.typical_p;
    p.top_n_sigma = d.top_n_sigma;
    p.xtc_probability = d.xtc_probability;
    p.xtc_threshold = d.xtc_threshold;
    p.dry_multiplier = d.dry_multiplier;
    p.dry_base = d.dry_base;
    p.dry_allowed_length = d.dry_allowed_length;
    p.dry_penalty_last_n = d.dry_penalty_last_n;
    p.n_dry_sequence_breakers = -1;
    p.mirostat = d.mirostat;
    p.mirostat_tau = d.mirostat_tau;
    p.mirostat_eta = d.mirostat_eta;
    return p;
}

namespace {

lantern::SamplerParams sampler_params(const lantern_sampler_params* params) {
    const lantern_sampler_params p = read_params(params, lantern_sampler_default_params(), "lantern_sampler_params");
    lantern::SamplerParams sp;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repeat_penalty = p.repeat_penalty;
    sp.repeat_last_n = p.repeat_last_n;
    sp.frequency_penalty = p.frequency_penalty;
    sp.presence_penalty = p.presence_penalty;
    sp.seed = p.seed;
    sp.json_object = p.json_object != 0;
    require(p.n_bias >= 0 && (p.n_bias == 0 || (p.bias_tokens != nullptr && p.bias_values != nullptr)),
            "the logit bias lists are null or their length negative");
    for (int i = 0; i < p.n_bias; ++i) sp.logit_bias.push_back({p.bias_tokens[i], p.bias_values[i]});
    require(p.n_json_prefixes >= 0 && (p.n_json_prefixes == 0 || p.json_prefixes != nullptr),
            "the JSON prefix list is null or its length negative");
    for (int i = 0; i < p.n_json_prefixes; ++i) {
        require(p.json_prefixes[i] != nullptr, "JSON prefix " + std::to_string(i) + " is null");
        sp.json_prefixes.emplace_back(p.json_prefixes[i]);
    }
    if (p.json_schema != nullptr) sp.json_schema = p.json_schema;
    if (p.grammar != nullptr) sp.grammar = p.grammar;
    sp.typical_p = p.typical_p;
    sp.top_n_sigma = p.top_n_sigma;
    sp.xtc_probability = p.xtc_probability;
    sp.xtc_threshold = p.xtc_threshold;
    sp.dry_multiplier = p.dry_multiplier;
    sp.dry_base = p.dry_base;
    sp.dry_allowed_length = p.dry_allowed_length;
    sp.dry_penalty_last_n = p.dry_penalty_last_n;
    require(p.n_dry_sequence_breakers >= -1 && (p.n_dry_sequence_breakers <= 0 || p.dry_sequence_breakers != nullptr),
            "the DRY sequence breaker list is null or its length below -1");
    if (p.n_dry_sequence_breakers >= 0) {
        sp.dry_sequence_breakers.clear();
        for (int i = 0; i < p.n_dry_sequence_breakers; ++i) {
            require(p.dry_sequence_breakers[i] != nullptr, "DRY sequence breaker " + std::to_string(i) + " is null");
            sp.dry_sequence_breakers.emplace_back(p.dry_sequence_breakers[i]);
        }
    }
    sp.mirostat = p.mirostat;
    sp.mirostat_tau = p.mirostat_tau;
    sp.mirostat_eta = p.mirostat_eta;
    return sp;
}

}  // namespace

lantern_sampler* lantern_sampler_new(const lantern_sampler_params* params, int n_vocab) {
    return guarded([&]() -> lantern_sampler* {
        auto s = std::make_unique<lantern_sampler>();
        s->sampler = std::make_unique<lantern::Sampler>(sampler_params(params), n_vocab);
        return s.release();
    });
}

lantern_sampler* lantern_sampler_new_for_model(const lantern_sampler_params* params, const lantern_model* model) {
    return guarded([&]() -> lantern_sampler* {
        auto s = std::make_unique<lantern_sampler>();
        s->sampler = std::make_unique<lantern::Sampler>(sampler_params(params), model_of(model));
        return s.release();
    });
}

void lantern_sampler_free(lantern_sampler* sampler) { delete sampler; }

int32_t lantern_sampler_sample(lantern_sampler* sampler, const float* logits) {
    return guarded(
        [&]() -> int32_t {
            require(sampler != nullptr && sampler->sampler != nullptr, "the sampler is null");
            require(logits != nullptr, "the logits are null");
            return sampler->sampler->sample(logits);
        });
}

int lantern_sampler_accept(lantern_sampler* sampler, int32_t token) {
    return guarded(
        [&]() -> int {
            require(sampler != nullptr && sampler->sampler != nullptr, "the sampler is null");
            sampler->sampler->accept(token);
            return LANTERN_OK;
        });
}

void lantern_sampler_reset(lantern_sampler* sampler) {
    if (sampler != nullptr && sampler->sampler != nullptr) sampler->sampler->reset();
}

void lantern_sampler_restart_output(lantern_sampler* sampler) {
    if (sampler != nullptr && sampler->sampler != nullptr) sampler->sampler->restart_output();
}

}  // extern "C"
