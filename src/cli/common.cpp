#include "cli/common.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace lantern::cli {
namespace fs = std::filesystem;

namespace {
constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

fs::path executable_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path(".") : exe.parent_path();
}
}  // namespace

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorCode::Io, "cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string default_model_path() {
    if (const char* env = std::getenv("LANTERN_MODEL"); env != nullptr && *env != '\0') return env;
    const fs::path candidates[] = {
        executable_dir() / ".." / ".." / "models" / kDefaultModelFile,  // build/bin -> repo root
        fs::path(LANTERN_MODELS_DIR) / kDefaultModelFile,                // the checkout it was built from
        fs::path("models") / kDefaultModelFile,
    };
    for (const fs::path& p : candidates) {
        std::error_code ec;
        if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
    }
    throw Error(ErrorCode::Io, std::string("no model given (-m) and the default model ") + kDefaultModelFile +
                                   " was not found: run scripts/setup.sh or set LANTERN_MODEL");
}

int hardware_threads() {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

void ModelOptions::add_to(CLI::App& cmd, bool single) {
    if (single) cmd.add_option("-m,--model", model_path, "GGUF model file (default: SmolLM2-135M-Instruct)");
    cmd.add_option("--backend", backend, "cpu, cuda, opencl or auto")->capture_default_str();
    cmd.add_option("--device", device, "device index within the backend (see `lantern devices`)");
    if (single) {
        cmd.add_option("--n-gpu-layers", n_gpu_layers, "layers to run on the GPU backend, counted from the last")
            ->capture_default_str();
        cmd.add_option("-t,--threads", n_threads, "CPU threads (default: all)");
    }
    cmd.add_flag("-v,--verbose", verbose, "print backend statistics");
    cmd.add_option("--lora", lora, "a LoRA adapter GGUF to apply (repeatable)");
    cmd.add_option("--lora-scaled", lora_scaled, "a LoRA adapter GGUF and the scale to apply it with (repeatable)")
        ->type_size(2)
        ->type_name("FILE SCALE");
    cmd.add_option("--rope-scaling", rope.scaling, "rope scaling: none, linear or yarn (default: the file's)")
        ->check(CLI::IsMember({"none", "linear", "yarn"}));
    cmd.add_option("--rope-scale", rope_factor, "context scaling factor of the rope (--rope-freq-scale 1/N)");
    cmd.add_option("--rope-freq-base", rope.freq_base, "rope base frequency (default: the file's)");
    cmd.add_option("--rope-freq-scale", rope.freq_scale, "rope frequency scale, 1 / the context factor");
    cmd.add_option("--yarn-orig-ctx", rope.yarn_orig_ctx, "YaRN: the context the model was trained for");
    cmd.add_option("--yarn-ext-factor", rope.yarn_ext_factor, "YaRN: extrapolation mix (0: plain interpolation, default 1)");
    cmd.add_option("--yarn-attn-factor", rope.yarn_attn_factor, "YaRN: multiplier on its attention magnitude (default 1)");
    cmd.add_option("--yarn-beta-fast", rope.yarn_beta_fast, "YaRN: correction range's fast end in rotations (default 32)");
    cmd.add_option("--yarn-beta-slow", rope.yarn_beta_slow, "YaRN: correction range's slow end in rotations (default 1)");
}

void CacheTypeOptions::add_to(CLI::App& cmd) {
    const char* types = kTypes;
    cmd.add_option("--cache-type-k", k, std::string("KV cache type of the keys: ") + types)->capture_default_str();
    cmd.add_option("--cache-type-v", v, std::string("KV cache type of the values: ") + types)->capture_default_str();
}

std::unique_ptr<Model> ModelOptions::load(bool quiet) const {
    ModelParams p;
    p.backend = backend;
    p.device = device;
    p.n_gpu_layers = n_gpu_layers;
    p.n_threads = n_threads > 0 ? n_threads : hardware_threads();
    for (const std::string& path : lora) p.lora_adapters.push_back({path, 1.0f});
    for (size_t i = 0; i + 1 < lora_scaled.size(); i += 2) {
        const std::string& scale = lora_scaled[i + 1];
        char* end = nullptr;
        const float s = std::strtof(scale.c_str(), &end);
        if (scale.empty() || *end != '\0' || !std::isfinite(s)) {
            throw Error(ErrorCode::InvalidArgument, "--lora-scaled " + lora_scaled[i] + ": '" + scale + "' is not a number");
        }
        p.lora_adapters.push_back({lora_scaled[i], s});
    }
    p.rope = rope;
    if (rope_factor != 0.0f) {
        if (!(rope_factor > 0.0f) || !std::isfinite(rope_factor)) {
            throw Error(ErrorCode::InvalidArgument, "--rope-scale must be a positive number");
        }
        p.rope.freq_scale = 1.0f / rope_factor;
    }
    const bool tty = isatty(STDERR_FILENO) != 0;
    int last = -1;
    if (tty && !quiet) {
        p.progress = [&last](float f) {
            const int pct = static_cast<int>(f * 100.0f);
            if (pct == last) return;
            last = pct;
            const int width = 30, filled = pct * width / 100;
            std::fprintf(stderr, "\rloading [%.*s%*s] %3d%%", filled, "##############################",
                         width - filled, "", pct);
            std::fflush(stderr);
        };
    }
    const std::string path = model_path.empty() ? default_model_path() : model_path;
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Model> m = Model::load(path, p);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (tty && !quiet) std::fprintf(stderr, "\r%*s\r", 50, "");
    if (!quiet) {
        const ModelInfo& i = m->info();
        std::fprintf(stderr, "model: %s (%s), %d layers, backend %s (%d layers offloaded), %d threads\n",
                     i.description.c_str(), path.c_str(), i.n_layer, i.backend.c_str(), i.n_gpu_layers,
                     p.n_threads);
        for (const LoraAdapterParams& a : p.lora_adapters) {
            std::fprintf(stderr, "LoRA adapter: %s (scale %g)\n", a.path.c_str(), static_cast<double>(a.scale));
        }
        if (i.n_ctx_max > i.n_ctx_train) {
            std::fprintf(stderr, "rope scaling: contexts up to %d tokens (trained for %d)\n", i.n_ctx_max, i.n_ctx_train);
        }
        std::fprintf(stderr, "load time: %.1f ms\n", ms);
    }
    return m;
}

}  // namespace lantern::cli
