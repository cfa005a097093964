// `lantern`: run, chat, serve, benchmark, tokenize, make synthetic models.
#include <cstdio>
#include <exception>

#include "cli/common.h"

int main(int argc, char** argv) {
    CLI::App app{"Lantern: run large language models from GGUF files"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "lantern 0.1.0");
    lantern::cli::add_run_command(app);
    lantern::cli::add_tokenize_command(app);
    lantern::cli::add_bench_command(app);
    lantern::cli::add_synth_command(app);
    lantern::cli::add_devices_command(app);
    try {
        app.parse(argc, argv);
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
