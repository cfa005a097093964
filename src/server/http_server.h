// `lantern serve`: an OpenAI-compatible HTTP server over the Engine.
//
//   GET  /health                 {"status": "ok", slots and queue}
//   GET  /v1/models              the loaded model
//   POST /v1/chat/completions    messages -> the model's chat template
//   POST /v1/completions         raw prompt (or several: one response for all)
//   POST /completion, /infill    llama.cpp's own format (native_api.h)
//   GET  /props                  llama.cpp's: default settings, slots, chat template
//   POST /v1/embeddings          pooled (the model's pooling_type), normalised final hidden states
//   POST /tokenize, /detokenize  {"content": text} <-> {"tokens": [ids]}
//   GET  /slots                  each slot: id, is_processing, n_ctx, n_cached_tokens
//   POST /slots/ID?action=save|restore|erase  {"filename": name} (save and
//                                restore need ServerOptions::slot_save_path)
// The completion routes stream server-sent events with "stream": true.
// Malformed requests get status 400 and an OpenAI-style error body; with an
// API key (ServerOptions::api_key) a request without it gets 401.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lantern/lantern.h"
#include "server/client_socket.h"
#include "server/engine.h"
#include "server/openai.h"

namespace httplib {
class Server;
}

namespace lantern::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;             // 0: any free port (see port())
    std::string chat_template;   // override, as `lantern run --chat-template`
    std::string model_name;      // reported by /v1/models (default: the file's general.name)
    // Non-empty: every route but /health needs "Authorization: Bearer <key>"
    // (or "X-Api-Key: <key>"), else 401.
    std::string api_key;
    // Chat replies' <think> blocks go to reasoning_content unless a request
    // says otherwise ("reasoning_format"); false: left in content.
    bool reasoning = true;
    // Non-empty: the directory POST /slots/ID?action=save|restore reads and
    // writes slot states in (by bare file name); empty: those answer 501.
    std::string slot_save_path;
};

class HttpServer {
public:
    HttpServer(Model& model, Engine& engine, ServerOptions options);
    ~HttpServer();

    // Binds (throws Error(Io) when it cannot), then serves until stop().
    void bind();
    void serve();
    void stop();
    int port() const { return port_; }

private:
    void routes();
    struct Prepared {
        std::vector<std::shared_ptr<GenerationRequest>> gens;
        bool truncated = false;  // the fill-in-the-middle prompt was cut to fit
    };
    Prepared prepare(CompletionRequest& req, bool infill);
    // OpenAI's completions with several prompts: `bodies` holds the request
    // once per prompt (split_prompt_batch); one response for all.
    nlohmann::json complete_batch(const std::vector<std::string>& bodies, const ClientWatch& client, const std::string& id,
                                  int64_t created);

    Model& model_;
    Engine& engine_;
    ServerOptions options_;
    std::unique_ptr<httplib::Server> http_;
    int port_ = 0;
    std::atomic<uint64_t> next_id_{0};  // response ids
};

}  // namespace lantern::server
