#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>

#include "chat/reasoning.h"
#include "server/native_api.h"
#include "server/openai.h"
#include "tokenizer/unicode.h"

namespace lantern::server {
namespace {

using json = nlohmann::json;

int64_t unix_time() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A token's text can be part of a UTF-8 character (byte-level vocabularies
// split them; logprobs list single tokens, /detokenize any ids), which JSON
// cannot carry: such bytes become U+FFFD here (logprobs also give the exact
// bytes). A strict dump threw instead, and on the engine thread, while
// streaming, that ended the server.
std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(to_text(body), "application/json");
}

// Events of one streamed response, handed from the engine thread to the
// HTTP thread that writes them.
struct Stream {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::string> events;
    bool done = false;
    std::atomic<bool> cancelled{false};

    void push(std::string event, bool last) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            events.push_back(std::move(event));
            done = done || last;
        }
        ready.notify_one();
    }
};

// A JSON list of token ids, each checked against the vocabulary (400
// naming `field` otherwise).
std::vector<int32_t> token_ids(const json& list, int n_vocab, const char* field) {
    std::vector<int32_t> ids;
    for (const json& t : list) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
            throw ApiError(400, std::string("'") + field + "' holds an id outside the vocabulary");
        }
        ids.push_back(t.get<int32_t>());
    }
    return ids;
}

// Whether s is whole UTF-8 characters: decode_utf8 gives a stray or
// cut-off byte as a lone surrogate (0xDC80 + byte), which no valid
// character decodes to.
bool whole_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        i += unicode::decode_utf8(s, i, cp);
        if (cp >= 0xDC80 && cp <= 0xDCFF) return false;
    }
    return true;
}

// Compared in time that does not depend on where the keys differ, so a
// client cannot learn a key byte by byte from response times (its length
// it may).
bool same_key(const std::string& given, const std::string& key) {
    if (given.size() != key.size()) return false;
    unsigned diff = 0;
    for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
    return diff == 0;
}

}  // namespace

HttpServer::HttpServer(Model& model, Engine& engine, ServerOptions options)
    : model_(model), engine_(engine), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
    if (options_.model_name.empty()) options_.model_name = model_.info().name.empty() ? "lantern" : model_.info().name;
    routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
    if (options_.port == 0) {
        port_ = http_->bind_to_any_port(options_.host);
    } else {
        port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
    }
    if (port_ < 0) {
        throw Error(ErrorCode::Io, "cannot listen on " + options_.host + ":" + std::to_string(options_.port));
    }
}

void HttpServer::serve() { http_->listen_after_bind(); }
void HttpServer::stop() {
    if (http_) http_->stop();
}

void HttpServer::routes() {
    httplib::Server& s = *http_;
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const ApiError& e) {
            send_json(res, e.status, error_body(e));
        } catch (const lantern::Error& e) {
            const int status = e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::ContextFull ||
                                       e.code() == ErrorCode::Template || e.code() == ErrorCode::Tokenizer
                                   ? 400
                                   : 500;
            send_json(res, status, error_body(ApiError(status, e.what(), status == 400 ? "invalid_request_error" : "server_error")));
        } catch (const std::exception& e) {
            send_json(res, 500, error_body(ApiError(500, e.what(), "server_error")));
        }
    });
    // The API key, when there is one.
    if (!options_.api_key.empty()) {
        s.set_pre_routing_handler([key = options_.api_key](const httplib::Request& req, httplib::Response& res) {
            if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
            std::string given = req.get_header_value("X-Api-Key");
            const std::string auth = req.get_header_value("Authorization");
            if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
            if (same_key(given, key)) return httplib::Server::HandlerResponse::Unhandled;
            res.set_header("WWW-Authenticate", "Bearer");
            send_json(res, 401, error_body(ApiError(401, given.empty() ? "this server needs an API key (Authorization: Bearer KEY)"
                                                                       : "the API key is not valid",
                                                    "invalid_api_key")));
            return httplib::Server::HandlerResponse::Handled;
        });
    }
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (res.status == 404) send_json(res, 404, error_body(ApiError(404, "no route " + req.method + " " + req.path, "not_found")));
    });

    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        const EngineStats st = engine_.stats();
        send_json(res, 200, json{{"status", "ok"}, {"slots", engine_.params().n_slots}, {"active", st.active_slots},
                                 {"queued", st.queued}, {"requests_done", st.requests_done}});
    });
    // Prometheus' text format, for monitoring.
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        const EngineStats st = engine_.stats();
        std::string out;
        auto metric = [&out](const char* name, const char* type, const char* help, const std::string& value) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
                   value + "\n";
        };
        auto count = [&metric](const char* name, const char* type, const char* help, uint64_t value) {
            metric(name, type, help, std::to_string(value));
        };
        count("lantern_requests_total", "counter", "Requests finished (any outcome).", st.requests_done);
        count("lantern_requests_cancelled_total", "counter", "Requests ended because their client went away.",
               st.requests_cancelled);
        count("lantern_prompt_tokens_total", "counter", "Prompt tokens decoded.", st.prompt_tokens);
        count("lantern_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
               st.prompt_tokens_cached);
        count("lantern_generated_tokens_total", "counter", "Tokens generated.", st.generated_tokens);
        count("lantern_decode_steps_total", "counter", "Batches decoded.", st.steps);
        count("lantern_slots", "gauge", "Requests served at once (--parallel).",
               static_cast<uint64_t>(engine_.params().n_slots));
        count("lantern_slots_active", "gauge", "Slots serving a request.", static_cast<uint64_t>(st.active_slots));
        count("lantern_requests_queued", "gauge", "Requests waiting for a slot.", static_cast<uint64_t>(st.queued));
        // Seconds as Prometheus wants them: rate() of tokens over seconds
        // gives the throughput of the prompts and of the generations.
        auto seconds = [](double ms) { return std::to_string(ms / 1e3); };  // six decimals
        metric("lantern_prompt_seconds_total", "counter", "Wall time of finished requests' prompts.", seconds(st.prompt_ms));
        metric("lantern_generation_seconds_total", "counter", "Wall time of finished requests' generations.",
               seconds(st.generation_ms));
        res.set_content(out, "text/plain; version=0.0.4");
    });
    // llama.cpp's /props: what clients written for its server read first.
    s.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
        CompletionRequest defaults;  // what a request that sets nothing gets
        defaults.native = true;
        const int n_ctx = engine_.params().n_ctx;
        auto text = [this](int32_t t) { return t >= 0 ? model_.token_to_piece(t, true) : std::string(); };
        send_json(res, 200, json{{"default_generation_settings", {{"n_ctx", n_ctx}, {"params", generation_settings(defaults, n_ctx)}}},
                                 {"total_slots", engine_.params().n_slots},
                                 {"model_alias", options_.model_name},
                                 {"chat_template", options_.chat_template.empty() ? model_.chat_template() : options_.chat_template},
                                 {"bos_token", text(model_.bos_token())},
                                 {"eos_token", text(model_.eos_token())}});
    });
    s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, json{{"object", "list"},
                                 {"data", json::array({json{{"id", options_.model_name},
                                                            {"object", "model"},
                                                            {"created", unix_time()},
                                                            {"owned_by", "lantern"},
                                                            {"description", model_.info().description},
                                                            {"meta", {{"n_vocab", model_.n_vocab()},
                                                                      {"n_ctx_train", model_.info().n_ctx_train},
                                                                      {"n_ctx", engine_.params().n_ctx},
                                                                      {"n_embd", model_.info().n_embd},
                                                                      {"n_params", model_.info().n_params},
                                                                      {"size", model_.info().file_bytes}}}}})}});
    });
    // llama.cpp's /apply-template: a chat request's messages (and tools)
    // rendered with the chat template, as /v1/chat/completions would prompt
    // the model; for clients that then call /completion.
    s.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
        const ChatRequest chat = parse_chat_request(req.body);
        const ChatPrompt prompt = model_.apply_chat_template(chat.messages, chat.tools, true, options_.chat_template,
                                                             chat.template_kwargs);
        send_json(res, 200, json{{"prompt", prompt.text}});
    });
    // Slots: their state, and an idle slot's KV cache saved to a file,
    // restored from one or erased (llama.cpp's routes and replies).
    s.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
        json out = json::array();
        for (const SlotInfo& i : engine_.slots()) {
            out.push_back(json{{"id", i.id}, {"is_processing", i.processing}, {"n_ctx", engine_.params().n_ctx},
                               {"n_cached_tokens", i.cached_tokens}});
        }
        send_json(res, 200, out);
    });
    s.Post(R"(/slots/(\d{1,6}))", [this](const httplib::Request& req, httplib::Response& res) {
        const int id = std::stoi(req.matches[1].str());
        const std::string action = req.get_param_value("action");
        if (action == "erase") {
            send_json(res, 200, json{{"id_slot", id}, {"n_erased", engine_.slot_action(id, SlotAction::Erase)}});
            return;
        }
        if (action != "save" && action != "restore") throw ApiError(400, "'action' must be save, restore or erase");
        if (options_.slot_save_path.empty()) {
            throw ApiError(501, "saving and restoring slots needs lantern serve --slot-save-path DIR", "not_supported_error");
        }
        const json body = json::parse(req.body, nullptr, false);
        const std::string name = body.is_object() && body.contains("filename") && body["filename"].is_string()
                                     ? body["filename"].get<std::string>()
                                     : "";
        if (name.empty() || name.size() > 255 || name == "." || name == ".." ||
            name.find_first_of("/\\") != std::string::npos) {
            throw ApiError(400, "'filename' must be a plain file name (no directories)");
        }
        const std::string path = (std::filesystem::path(options_.slot_save_path) / name).string();
        const bool save = action == "save";
        if (!save && !std::filesystem::exists(path)) throw ApiError(404, "no saved slot '" + name + "'", "not_found");
        const auto t0 = std::chrono::steady_clock::now();
        int n = 0;
        try {
            n = engine_.slot_action(id, save ? SlotAction::Save : SlotAction::Restore, path);
        } catch (const lantern::Error& e) {
            // A damaged file or another model's state is the request's fault.
            if (e.code() == ErrorCode::Format || e.code() == ErrorCode::InvalidArgument ||
                e.code() == ErrorCode::ContextFull) {
                throw ApiError(400, e.what());
            }
            throw;
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path));
        send_json(res, 200, save ? json{{"id_slot", id}, {"filename", name}, {"n_saved", n}, {"n_written", bytes},
                                        {"timings", {{"save_ms", ms}}}}
                                 : json{{"id_slot", id}, {"filename", name}, {"n_restored", n}, {"n_read", bytes},
                                        {"timings", {{"restore_ms", ms}}}});
    });
    s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
        json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("content") || !body["content"].is_string()) {
            throw ApiError(400, "'content' must be a string");
        }
        if (body.contains("add_special") && !body["add_special"].is_boolean()) {
            throw ApiError(400, "'add_special' must be true or false");
        }
        if (body.contains("with_pieces") && !body["with_pieces"].is_boolean()) {
            throw ApiError(400, "'with_pieces' must be true or false");
        }
        const bool special = body.value("add_special", false);
        const std::vector<int32_t> ids = model_.tokenize(body["content"].get<std::string>(), special, true);
        if (!body.value("with_pieces", false)) {
            send_json(res, 200, json{{"tokens", ids}});
            return;
        }
        // llama.cpp's with_pieces: each token's text, or its bytes where
        // that text is part of a UTF-8 character.
        json tokens = json::array();
        for (int32_t id : ids) {
            const std::string piece = model_.token_to_piece(id, true);
            tokens.push_back({{"id", id}, {"piece", whole_utf8(piece) ? json(piece) : token_bytes(piece)}});
        }
        send_json(res, 200, json{{"tokens", tokens}});
    });
    s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
        json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
            throw ApiError(400, "'tokens' must be a list of token ids");
        }
        send_json(res, 200, json{{"content", model_.detokenize(token_ids(body["tokens"], model_.n_vocab(), "tokens"))}});
    });

    // OpenAI's embeddings: {"input": text | [texts] | [ids] | [[ids]]}, each
    // its tokens' final hidden states pooled as the model's pooling_type says
    // (mean by default), L2-normalised (a model made for embeddings gives
    // useful ones; any model gives some).
    s.Post("/v1/embeddings", [this](const httplib::Request& http_req, httplib::Response& res) {
        json body = json::parse(http_req.body, nullptr, false);
        if (body.is_discarded() || !body.is_object()) throw ApiError(400, "the body must be a JSON object");
        const json input = body.value("input", json());
        // "base64": the floats' little-endian bytes in base64, which OpenAI's
        // Python client asks for by default.
        const std::string format = body.contains("encoding_format") && !body["encoding_format"].is_null()
                                       ? body["encoding_format"].is_string() ? body["encoding_format"].get<std::string>() : "?"
                                       : "float";
        if (format != "float" && format != "base64") {
            throw ApiError(400, "'encoding_format' must be \"float\" or \"base64\"");
        }
        std::vector<std::vector<int32_t>> inputs;
        auto ids_of = [&](const json& list) { return token_ids(list, model_.n_vocab(), "input"); };
        if (input.is_string()) {
            inputs.push_back(model_.tokenize(input.get<std::string>(), true, false));
        } else if (input.is_array() && !input.empty() && input[0].is_number_integer()) {
            inputs.push_back(ids_of(input));
        } else if (input.is_array() && !input.empty()) {
            for (const json& x : input) {
                if (x.is_string()) {
                    inputs.push_back(model_.tokenize(x.get<std::string>(), true, false));
                } else if (x.is_array()) {
                    inputs.push_back(ids_of(x));
                } else {
                    throw ApiError(400, "'input' must be a string, a list of strings, or token ids");
                }
            }
        } else {
            throw ApiError(400, "'input' must be a string, a list of strings, or token ids");
        }
        int tokens = 0;
        for (const auto& in : inputs) {
            if (in.empty()) throw ApiError(400, "an 'input' is empty");
            tokens += static_cast<int>(in.size());
        }
        const std::vector<std::vector<float>> vectors = engine_.embed(inputs);
        json data = json::array();
        for (size_t i = 0; i < vectors.size(); ++i) {
            data.push_back({{"object", "embedding"},
                            {"index", i},
                            {"embedding", format == "base64" ? json(base64_floats(vectors[i])) : json(vectors[i])}});
        }
        send_json(res, 200, json{{"object", "list"}, {"data", data}, {"model", options_.model_name},
                                 {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
    });

    enum class Route { Chat, Completions, Infill, Native };
    auto completion = [this](Route route) {
        return [this, route](const httplib::Request& http_req, httplib::Response& res) {
            const bool chat = route == Route::Chat, infill = route == Route::Infill;
            if (route == Route::Completions) {
                const std::vector<std::string> bodies = split_prompt_batch(http_req.body);
                if (!bodies.empty()) {
                    const ClientWatch client(http_req);
                    send_json(res, 200, complete_batch(bodies, client, "cmpl-" + std::to_string(++next_id_), unix_time()));
                    return;
                }
            }
            auto req = std::make_shared<CompletionRequest>(
                infill                  ? parse_infill_request(http_req.body)
                : route == Route::Native ? parse_native_request(http_req.body)
                                         : parse_completion_request(http_req.body, chat, options_.reasoning));
            Prepared prepared = prepare(*req, infill);
            std::vector<std::shared_ptr<GenerationRequest>>& gens = prepared.gens;
            const bool truncated = prepared.truncated;
            const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
            const int64_t created = unix_time();
            const std::string model_name = options_.model_name;
            const int n_ctx = engine_.params().n_ctx;

            if (!req->stream) {
                // A client that gives up (a timeout, a closed tab) frees the
                // slots: nothing else would tell the engine before the end.
                const ClientWatch client(http_req);
                std::vector<std::future<GenerationResult>> results;
                for (auto& g : gens) {
                    auto done = std::make_shared<std::promise<GenerationResult>>();
                    results.push_back(done->get_future());
                    g->on_done = [done](const GenerationResult& r) { done->set_value(r); };
                    g->client_gone = client.gone();
                }
                for (auto& g : gens) engine_.submit(g);
                std::vector<GenerationResult> rs;
                for (auto& f : results) rs.push_back(f.get());
                for (const GenerationResult& r : rs) {
                    if (r.finish_reason == "error") throw ApiError(500, r.error, "server_error");
                }
                send_json(res, 200, req->native ? native_response(*req, rs.front(), model_name, truncated, n_ctx, false)
                                                : completion_response(*req, rs, id, model_name, created));
                return;
            }

            // Streamed: each choice's chunks as they come, [DONE] after the
            // last choice ends. The callbacks all run on the engine thread.
            struct Choices {
                std::vector<GenerationResult> results;
                std::vector<size_t> text_offset;  // of each choice's next chunk's first token (completions)
                // Chat: each reply's reasoning split from its answer as it
                // comes, and the tokens of text not yet sent.
                std::vector<ReasoningStream> thinking;
                std::vector<std::vector<TokenLogprob>> pending;
                // With tools: each choice's answer so far and how much of it
                // was sent (what may begin a tool call is held back until
                // the end).
                std::vector<std::string> text, sent;
                int open = 0;
                bool failed = false;
            };
            auto stream = std::make_shared<Stream>();
            // A failed write (or the response's end) sets `cancelled`; the
            // socket's own state ends a request whose text is held back
            // (tool calls, a reasoning block) and so writes nothing for long.
            const ClientSocket socket = ClientSocket::of(http_req);
            for (auto& g : gens) g->client_gone = [stream, socket] { return stream->cancelled.load() || socket.gone(); };
            auto sse = [](const json& j) { return "data: " + to_text(j) + "\n\n"; };
            auto choices = std::make_shared<Choices>();
            choices->results.resize(gens.size());
            choices->text_offset.assign(gens.size(), 0);
            choices->thinking.assign(gens.size(), ReasoningStream(req->reasoning_opened));
            choices->pending.resize(gens.size());
            choices->text.resize(gens.size());
            choices->sent.resize(gens.size());
            choices->open = static_cast<int>(gens.size());
            // A chat reply's next text: its reasoning as reasoning deltas,
            // its answer as content deltas (with tools, only what cannot be
            // the start of a call); the tokens go with the first chunk sent.
            // Returns the events to send.
            auto chat_text = [req, id, model_name, created, sse, choices](int index, const std::string& piece,
                                                                         const std::vector<TokenLogprob>& tokens,
                                                                         bool last) {
                const auto i = static_cast<size_t>(index);
                std::vector<TokenLogprob>& pending = choices->pending[i];
                pending.insert(pending.end(), tokens.begin(), tokens.end());
                std::string events;
                std::string answer = piece;
                if (req->reasoning) {
                    ReasoningStream& rs = choices->thinking[i];
                    ReasoningStream::Parts parts = last ? rs.finish() : rs.feed(piece);
                    if (!parts.reasoning.empty()) {
                        events += sse(reasoning_chunk(*req, index, parts.reasoning, id, model_name, created, pending));
                        pending.clear();
                    }
                    answer = std::move(parts.answer);
                }
                if (req->calls_tools()) {
                    std::string& all = choices->text[i];
                    std::string& sent = choices->sent[i];
                    all += answer;
                    const size_t safe = last ? sent.size() : chat_reply_text_prefix(all);
                    if (safe > sent.size()) {
                        const std::string delta = all.substr(sent.size(), safe - sent.size());
                        events += sse(completion_chunk(*req, index, delta, "", id, model_name, created, pending));
                        sent += delta;
                        pending.clear();
                    }
                } else if (!answer.empty() || (!req->reasoning && !last)) {
                    events += sse(completion_chunk(*req, index, answer, "", id, model_name, created, pending));
                    pending.clear();
                }
                return events;
            };
            for (size_t i = 0; i < gens.size(); ++i) {
                const int index = static_cast<int>(i);
                gens[i]->on_text = [stream, req, id, model_name, created, sse, choices, index, chat_text](
                                       const std::string& piece, const std::vector<TokenLogprob>& tokens) {
                    if (stream->cancelled) return false;
                    if (req->native) {
                        stream->push(sse(native_chunk(*req, piece, tokens)), false);
                        return true;
                    }
                    if (req->chat) {
                        const std::string events = chat_text(index, piece, tokens, false);
                        if (!events.empty()) stream->push(events, false);
                        return true;
                    }
                    size_t& offset = choices->text_offset[static_cast<size_t>(index)];
                    stream->push(sse(completion_chunk(*req, index, piece, "", id, model_name, created, tokens, offset)),
                                 false);
                    for (const TokenLogprob& t : tokens) offset += t.token.size();
                    return true;
                };
                gens[i]->on_done = [stream, req, id, model_name, created, sse, choices, index, chat_text,
                                    truncated, n_ctx](const GenerationResult& r) {
                    std::string tail;
                    if (req->native) {
                        // llama.cpp's stream: a last event with stop true, no [DONE].
                        stream->push(sse(r.finish_reason == "error"
                                             ? error_body(ApiError(500, r.error, "server_error"))
                                             : native_response(*req, r, model_name, truncated, n_ctx, true)),
                                     true);
                        return;
                    }
                    // With one choice its last chunk carries llama.cpp's timings.
                    auto last_chunk = [&](const std::string& finish, const std::vector<TokenLogprob>& tokens) {
                        json chunk = completion_chunk(*req, index, "", finish, id, model_name, created, tokens);
                        if (req->n == 1) chunk["timings"] = timings_json(r);
                        return sse(chunk);
                    };
                    if (r.finish_reason == "error") {
                        if (!choices->failed) tail = sse(error_body(ApiError(500, r.error, "server_error")));
                        choices->failed = true;
                    } else if (req->chat) {
                        // What the reasoning split held back, then (with
                        // tools) the answer held back and the calls.
                        tail = chat_text(index, "", {}, true);
                        std::string finish = r.finish_reason;
                        const auto i = static_cast<size_t>(index);
                        std::vector<TokenLogprob>& pending = choices->pending[i];
                        if (req->calls_tools()) {
                            // The answer as the stream split it (chat_text's `all`, whole now).
                            const ChatReply reply = parse_chat_reply(choices->text[i], req->conversation.tools);
                            const std::string& sent = choices->sent[i];
                            if (reply.content.size() > sent.size() && reply.content.compare(0, sent.size(), sent) == 0) {
                                tail += sse(completion_chunk(*req, index, reply.content.substr(sent.size()), "", id,
                                                             model_name, created, pending));
                                pending.clear();
                            }
                            if (!reply.tool_calls.empty()) {
                                tail += sse(tool_calls_chunk(*req, index, reply.tool_calls, id, model_name, created));
                                finish = calls_finish_reason(*req, finish);
                            }
                        }
                        // The tokens no delta carried (whitespace the
                        // reasoning split drops, a tool call's text) keep
                        // their logprobs: the last chunk has them.
                        tail += last_chunk(finish, pending);
                        pending.clear();
                    } else {
                        tail = last_chunk(r.finish_reason, {});
                    }
                    choices->results[static_cast<size_t>(index)] = r;
                    const bool last = --choices->open == 0;
                    if (last && !choices->failed && req->include_usage) {
                        tail += sse(usage_chunk(*req, choices->results, id, model_name, created));
                    }
                    if (last) tail += "data: [DONE]\n\n";
                    if (!tail.empty()) stream->push(tail, last);
                };
            }
            for (auto& g : gens) engine_.submit(g);
            res.set_chunked_content_provider("text/event-stream", [stream](size_t, httplib::DataSink& sink) {
                std::unique_lock<std::mutex> lock(stream->mutex);
                stream->ready.wait(lock, [&] { return !stream->events.empty() || stream->done; });
                while (!stream->events.empty()) {
                    std::string ev = std::move(stream->events.front());
                    stream->events.pop_front();
                    lock.unlock();
                    if (!sink.write(ev.data(), ev.size())) {
                        stream->cancelled = true;
                        return false;
                    }
                    lock.lock();
                }
                if (stream->done) sink.done();
                return true;
            },
            [stream](bool) { stream->cancelled = true; });
        };
    };
    s.Post("/v1/chat/completions", completion(Route::Chat));
    s.Post("/v1/completions", completion(Route::Completions));
    s.Post("/infill", completion(Route::Infill));
    // llama.cpp's own completion route (and its alias), in its format.
    s.Post("/completion", completion(Route::Native));
    s.Post("/completions", completion(Route::Native));
}

}  // namespace lantern::server
