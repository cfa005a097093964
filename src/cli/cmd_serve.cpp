// lantern serve: the OpenAI-compatible HTTP server.
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "server/engine.h"
#include "server/http_server.h"

namespace lantern::cli {

void add_serve_command(CLI::App& app) {
    struct Options {
        ModelOptions model;
        server::ServerOptions http;
        server::EngineParams engine;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
    o->model.add_to(*cmd);
    cmd->add_option("--host", o->http.host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", o->http.port, "port (0: any free port)")->capture_default_str();
    cmd->add_option("--parallel", o->engine.n_slots, "requests decoded together")->capture_default_str();
    cmd->add_option("-c,--ctx-size", o->engine.n_ctx, "context per request, in tokens")->capture_default_str();
    cmd->add_option("-b,--batch-size", o->engine.n_batch, "tokens per forward pass")->capture_default_str();
    cmd->add_option("--cache-type-k", o->engine.cache_type_k, "KV cache type of the keys (f16, q8_0, ...)")
        ->capture_default_str();
    cmd->add_option("--cache-type-v", o->engine.cache_type_v, "KV cache type of the values (f16, q8_0, ...)")
        ->capture_default_str();
    cmd->add_flag("!--no-cache-prompt", o->engine.cache_prompt,
                  "decode every prompt whole (by default a request reuses the longest prefix of its prompt that a "
                  "free slot holds)");
    cmd->add_option("--chat-template", o->http.chat_template, "chat template: a built-in name or Jinja source");
    cmd->add_option_function<std::string>(
        "--chat-template-file", [o](const std::string& path) { o->http.chat_template = read_text_file(path); },
        "read the chat template's Jinja source from a file");
    cmd->add_option("--alias", o->http.model_name, "model name reported to clients");
    cmd->add_option_function<std::string>(
           "--reasoning-format",
           [o](const std::string& f) { o->http.reasoning = f != "none"; },
           "auto: a reply's <think> block is the message's reasoning_content (default); none: left in content")
        ->check(CLI::IsMember({"auto", "deepseek", "none"}));
    cmd->add_option("--api-key", o->http.api_key,
                    "require this key from clients (Authorization: Bearer KEY)")
        ->envname("LANTERN_API_KEY");
    cmd->add_option("--slot-save-path", o->http.slot_save_path,
                    "directory where POST /slots/ID?action=save|restore keep slot states (made if missing)");
    cmd->callback([o] {
        if (!o->http.slot_save_path.empty()) {
            std::error_code ec;
            std::filesystem::create_directories(o->http.slot_save_path, ec);
            if (ec || !std::filesystem::is_directory(o->http.slot_save_path)) {
                throw Error(ErrorCode::Io, "--slot-save-path: cannot use " + o->http.slot_save_path + " as a directory");
            }
        }
        std::unique_ptr<Model> model = o->model.load();
        if (model->info().n_ctx_max > 0) o->engine.n_ctx = std::min(o->engine.n_ctx, model->info().n_ctx_max);
        server::Engine engine(*model, o->engine);
        server::HttpServer http(*model, engine, o->http);
        http.bind();
        std::fprintf(stderr, "KV cache: %s\n", engine.cache_summary().c_str());
        std::fprintf(stderr, "listening on http://%s:%d (%d slots, %d tokens each)\n", o->http.host.c_str(), http.port(),
                     o->engine.n_slots, engine.params().n_ctx);
        http.serve();
    });
}

}  // namespace lantern::cli
