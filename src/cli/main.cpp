// `lantern`: run, chat, serve, benchmark, tokenize, make synthetic models.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/common.h"

namespace {

// llama.cpp spells some options with one dash and several letters (-ngl,
// -st, -sys); CLI11 reserves single dashes for one-letter names, so those
// spellings are rewritten to their long forms before parsing.
std::vector<std::string> translate_llama_style(int argc, char** argv) {
    static const struct {
        const char* from;
        const char* to;
    } kAliases[] = {{"-ngl", "--n-gpu-layers"}, {"-st", "--single-turn"}, {"-sys", "--system"}, {"-np", "--parallel"},
                     {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}};
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        for (const auto& alias : kAliases) {
            const size_t n = std::strlen(alias.from);
            if (a.compare(0, n, alias.from) == 0 && (a.size() == n || a[n] == '=')) a = alias.to + a.substr(n);
        }
        args.push_back(a);
    }
    return args;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Lantern: run large language models from GGUF files"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "lantern 0.1.0");
    lantern::cli::add_run_command(app);
    lantern::cli::add_tokenize_command(app);
    lantern::cli::add_bench_command(app);
    lantern::cli::add_synth_command(app);
    lantern::cli::add_quantize_command(app);
    lantern::cli::add_devices_command(app);
    lantern::cli::add_perplexity_command(app);
    lantern::cli::add_serve_command(app);
    try {
        std::vector<std::string> args = translate_llama_style(argc, argv);
        std::vector<char*> ptrs;
        for (std::string& a : args) ptrs.push_back(a.data());
        app.parse(static_cast<int>(ptrs.size()), ptrs.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const lantern::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
