// Pieces shared by the subcommands of the `lantern` tool.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "lantern/lantern.h"

namespace lantern::cli {

// Options every model-loading command takes.
struct ModelOptions {
    std::string model_path;  // empty: the default model
    std::string backend = "cpu";
    int device = 0;
    int n_gpu_layers = 0;
    int n_threads = 0;
    bool verbose = false;
    std::vector<std::string> lora;                          // --lora FILE: scale 1
    std::vector<std::string> lora_scaled;  // --lora-scaled FILE SCALE ...: pairs
    RopeOverrides rope;      // --rope-scaling, --rope-freq-base, --rope-freq-scale, --yarn-*
    float rope_factor = 0;   // --rope-scale N: rope.freq_scale = 1 / N

    // `single` false: the command registers -m, --n-gpu-layers and -t
    // itself (bench takes lists of them).
    void add_to(CLI::App& cmd, bool single = true);
    // Loads with a progress bar on stderr (when it is a terminal) and prints
    // the load time.
    std::unique_ptr<Model> load(bool quiet = false) const;
};

// The KV cache's element types (-ctk/--cache-type-k, -ctv/--cache-type-v,
// as llama.cpp spells them), for the commands that make contexts.
struct CacheTypeOptions {
    // The names a cache type may have, for help texts.
    static constexpr const char* kTypes = "f16, f32, bf16, q8_0, q5_1, q5_0, q4_1 or q4_0";

    std::string k = "f16";
    std::string v = "f16";

    void add_to(CLI::App& cmd);
    void apply(ContextParams& p) const {
        p.cache_type_k = k;
        p.cache_type_v = v;
    }
};

// The default model: $LANTERN_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf
// beside the build directory or the current directory.
std::string default_model_path();

// A file's whole content; Error(Io) naming it when it cannot be read.
std::string read_text_file(const std::string& path);

// Hardware threads, at least 1.
int hardware_threads();

// Subcommand registration (one file each).
void add_run_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace lantern::cli
