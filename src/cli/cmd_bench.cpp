// lantern bench: prompt-processing and generation speed, in llama-bench's shape.
//
// Each test is run once to warm up, then -r times on an empty cache: pp<N>
// decodes N tokens in batches of -b, tg<N> decodes N tokens one at a time.
// Figures are tokens/s, mean +/- sample standard deviation.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/common.h"

namespace lantern::cli {
namespace {

struct BenchOptions {
    ModelOptions model;
    CacheTypeOptions cache;
    int n_prompt = 512;
    int n_gen = 128;
    int n_batch = 512;
    int reps = 5;
    int n_depth = 0;
    std::string output = "md";
};

struct Result {
    std::string test;
    int n_prompt = 0;
    int n_gen = 0;
    std::vector<double> samples;  // tokens/s
    double mean() const {
        double s = 0;
        for (double x : samples) s += x;
        return samples.empty() ? 0 : s / static_cast<double>(samples.size());
    }
    double stddev() const {
        if (samples.size() < 2) return 0;
        const double m = mean();
        double s = 0;
        for (double x : samples) s += (x - m) * (x - m);
        return std::sqrt(s / static_cast<double>(samples.size() - 1));
    }
};

std::vector<int32_t> random_tokens(int n, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    return t;
}

// Fills the cache with `depth` tokens (not timed).
void prefill_depth(Context& ctx, int depth, int n_vocab, int n_batch) {
    ctx.clear_sequence(0);
    const std::vector<int32_t> toks = random_tokens(depth, n_vocab, 7);
    for (int begin = 0; begin < depth; begin += n_batch) {
        Batch b;
        const int end = std::min(depth, begin + n_batch);
        for (int i = begin; i < end; ++i) b.add(toks[static_cast<size_t>(i)], i, 0, i + 1 == end);
        ctx.decode(b);
    }
}

double run_prompt(Context& ctx, int n, int depth, int n_vocab, int n_batch) {
    prefill_depth(ctx, depth, n_vocab, n_batch);
    const std::vector<int32_t> toks = random_tokens(n, n_vocab, 11);
    const auto t0 = std::chrono::steady_clock::now();
    for (int begin = 0; begin < n; begin += n_batch) {
        Batch b;
        const int end = std::min(n, begin + n_batch);
        for (int i = begin; i < end; ++i) b.add(toks[static_cast<size_t>(i)], depth + i, 0, i + 1 == end);
        ctx.decode(b);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(n) / s;
}

double run_gen(Context& ctx, int n, int depth, int n_vocab, int n_batch) {
    prefill_depth(ctx, depth, n_vocab, n_batch);
    const std::vector<int32_t> toks = random_tokens(n, n_vocab, 13);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        Batch b;
        b.add(toks[static_cast<size_t>(i)], depth + i, 0, true);
        ctx.decode(b);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(n) / s;
}

std::string human_size(uint64_t bytes) {
    char buf[32];
    if (bytes >= (1ull << 30)) {
        std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
    } else {
        std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1ull << 20));
    }
    return buf;
}

std::string human_params(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) {
        std::snprintf(buf, sizeof(buf), "%.2f B", static_cast<double>(n) / 1e9);
    } else {
        std::snprintf(buf, sizeof(buf), "%.2f M", static_cast<double>(n) / 1e6);
    }
    return buf;
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand("bench", "measure prompt and generation speed");
    o->model.add_to(*cmd);
    cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens (0: skip)")->capture_default_str();
    cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens (0: skip)")->capture_default_str();
    cmd->add_option("-b,--batch-size", o->n_batch, "tokens per forward pass")->capture_default_str();
    o->cache.add_to(*cmd);
    cmd->add_option("-r,--repetitions", o->reps, "repetitions")->capture_default_str();
    cmd->add_option("-d,--n-depth", o->n_depth, "tokens already in the cache")->capture_default_str();
    cmd->add_option("-o,--output", o->output, "md or json")->check(CLI::IsMember({"md", "json"}));
    cmd->callback([o] {
        std::unique_ptr<Model> model = o->model.load(o->output == "json");
        const ModelInfo& info = model->info();
        const int threads = o->model.n_threads > 0 ? o->model.n_threads : hardware_threads();
        ContextParams cp;
        cp.n_ctx = o->n_depth + std::max(o->n_prompt, o->n_gen) + 1;
        cp.n_batch = o->n_batch;
        o->cache.apply(cp);
        Context ctx(*model, cp);

        std::vector<Result> results;
        const std::string depth = o->n_depth > 0 ? " @ d" + std::to_string(o->n_depth) : "";
        if (o->n_prompt > 0) {
            Result r{"pp" + std::to_string(o->n_prompt) + depth, o->n_prompt, 0, {}};
            run_prompt(ctx, o->n_prompt, o->n_depth, info.n_vocab, o->n_batch);  // warm-up
            for (int i = 0; i < o->reps; ++i) r.samples.push_back(run_prompt(ctx, o->n_prompt, o->n_depth, info.n_vocab, o->n_batch));
            results.push_back(r);
        }
        if (o->n_gen > 0) {
            Result r{"tg" + std::to_string(o->n_gen) + depth, 0, o->n_gen, {}};
            run_gen(ctx, std::min(o->n_gen, 16), o->n_depth, info.n_vocab, o->n_batch);  // warm-up
            for (int i = 0; i < o->reps; ++i) r.samples.push_back(run_gen(ctx, o->n_gen, o->n_depth, info.n_vocab, o->n_batch));
            results.push_back(r);
        }

        const std::string backend = info.n_gpu_layers > 0 ? info.backend : "CPU";
        if (o->output == "json") {
            nlohmann::json out = nlohmann::json::array();
            for (const Result& r : results) {
                out.push_back({{"model_type", info.description},
                               {"model_size", info.file_bytes},
                               {"model_n_params", info.n_params},
                               {"backends", backend},
                               {"device", info.device},
                               {"cpu_kernels", cpu_kernels()},
                               {"n_threads", threads},
                               {"n_gpu_layers", info.n_gpu_layers},
                               {"n_batch", o->n_batch},
                               {"type_k", o->cache.k},
                               {"type_v", o->cache.v},
                               {"n_prompt", r.n_prompt},
                               {"n_gen", r.n_gen},
                               {"n_depth", o->n_depth},
                               {"test", r.test},
                               {"avg_ts", r.mean()},
                               {"stddev_ts", r.stddev()},
                               {"samples_ts", r.samples}});
            }
            std::printf("%s\n", out.dump(2).c_str());
        } else {
            // The cache types get columns when they are not the default, as llama-bench prints them.
            const bool kv_cols = o->cache.k != "f16" || o->cache.v != "f16";
            const std::string kv_head = kv_cols ? " type_k | type_v |" : "";
            const std::string kv_rule = kv_cols ? " --- | --- |" : "";
            const std::string kv_cells = kv_cols ? " " + o->cache.k + " | " + o->cache.v + " |" : "";
            std::printf("| model | size | params | backend | ngl | threads |%s test | t/s |\n", kv_head.c_str());
            std::printf("| --- | ---: | ---: | --- | --: | --: |%s ---: | ---: |\n", kv_rule.c_str());
            for (const Result& r : results) {
                std::printf("| %s | %s | %s | %s | %d | %d |%s %s | %.2f ± %.2f |\n", info.description.c_str(),
                            human_size(info.file_bytes).c_str(), human_params(info.n_params).c_str(), backend.c_str(),
                            info.n_gpu_layers, threads, kv_cells.c_str(), r.test.c_str(), r.mean(), r.stddev());
            }
            std::printf("\ndevice: %s\ncpu kernels: %s\n", info.device.c_str(), cpu_kernels().c_str());
        }
        if (o->model.verbose) {
            for (const auto& [name, stats] : ctx.perf().backend_stats) {
                std::fprintf(stderr, "%s: %s\n", name.c_str(), stats.c_str());
            }
        }
    });
}

}  // namespace lantern::cli
