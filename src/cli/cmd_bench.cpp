// lantern bench: prompt-processing and generation speed, in llama-bench's shape.
//
// Each test is run once to warm up, then -r times on an empty cache: pp<N>
// decodes N tokens in batches of -b, tg<N> decodes N tokens one at a time.
// Figures are tokens/s, mean +/- sample standard deviation.
//
// As llama-bench, -m, -p, -n, -d, -b, -t, -ngl, -ctk and -ctv take lists
// ("-p 128,512" or "-p 128 -p 512"): every combination is measured, one row
// each, a model loaded per file and -ngl value and a context per
// combination of the others.
#include <algorithm>
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
    std::vector<std::string> models;  // empty: the default model
    std::vector<int> n_prompt{512};
    std::vector<int> n_gen{128};
    std::vector<int> n_batch{512};
    std::vector<int> n_depth{0};
    std::vector<int> n_gpu_layers{0};
    std::vector<int> threads;  // empty: all hardware threads
    std::vector<std::string> type_k{"f16"};
    std::vector<std::string> type_v{"f16"};
    int reps = 5;
    std::string output = "md";
};

// What one context measures under (the model's layers on the GPU are in its info).
struct Config {
    int threads = 0;
    int n_batch = 0;
    std::string type_k, type_v;
};

struct Result {
    Config config;
    std::string test;
    int n_prompt = 0;
    int n_gen = 0;
    int n_depth = 0;
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

// The table's rows, printed as they are measured (md) or as one array at
// the end (json).
class Report {
public:
    Report(const BenchOptions& o, bool json) : json_(json) {
        // Columns llama-bench prints only when they are not the default.
        batch_col_ = o.n_batch != std::vector<int>{512};
        kv_cols_ = std::any_of(o.type_k.begin(), o.type_k.end(), [](const std::string& t) { return t != "f16"; }) ||
                   std::any_of(o.type_v.begin(), o.type_v.end(), [](const std::string& t) { return t != "f16"; });
        if (json_) return;
        std::printf("| model | size | params | backend | ngl | threads |%s%s test | t/s |\n",
                    batch_col_ ? " n_batch |" : "", kv_cols_ ? " type_k | type_v |" : "");
        std::printf("| --- | ---: | ---: | --- | --: | --: |%s%s ---: | ---: |\n", batch_col_ ? " --: |" : "",
                    kv_cols_ ? " --- | --- |" : "");
        std::fflush(stdout);
    }

    void add(const ModelInfo& info, const Result& r) {
        const std::string backend = info.n_gpu_layers > 0 ? info.backend : "CPU";
        const Config& c = r.config;
        device_ = info.device;
        if (json_) {
            rows_.push_back({{"model_type", info.description},
                             {"model_size", info.file_bytes},
                             {"model_n_params", info.n_params},
                             {"backends", backend},
                             {"device", info.device},
                             {"cpu_kernels", cpu_kernels()},
                             {"n_threads", c.threads},
                             {"n_gpu_layers", info.n_gpu_layers},
                             {"n_batch", c.n_batch},
                             {"type_k", c.type_k},
                             {"type_v", c.type_v},
                             {"n_prompt", r.n_prompt},
                             {"n_gen", r.n_gen},
                             {"n_depth", r.n_depth},
                             {"test", r.test},
                             {"avg_ts", r.mean()},
                             {"stddev_ts", r.stddev()},
                             {"samples_ts", r.samples}});
            return;
        }
        const std::string batch = batch_col_ ? " " + std::to_string(c.n_batch) + " |" : "";
        const std::string kv = kv_cols_ ? " " + c.type_k + " | " + c.type_v + " |" : "";
        std::printf("| %s | %s | %s | %s | %d | %d |%s%s %s | %.2f ± %.2f |\n", info.description.c_str(),
                    human_size(info.file_bytes).c_str(), human_params(info.n_params).c_str(), backend.c_str(),
                    info.n_gpu_layers, c.threads, batch.c_str(), kv.c_str(), r.test.c_str(), r.mean(), r.stddev());
        std::fflush(stdout);
    }

    void finish() const {
        if (json_) {
            std::printf("%s\n", rows_.dump(2).c_str());
        } else {
            std::printf("\ndevice: %s\ncpu kernels: %s\n", device_.c_str(), cpu_kernels().c_str());
        }
    }

private:
    bool json_;
    bool batch_col_ = false, kv_cols_ = false;
    std::string device_;
    nlohmann::json rows_ = nlohmann::json::array();
};

// Every test of one context: per depth, the prompts, then the generations.
void measure(const BenchOptions& o, const Model& model, Context& ctx, const Config& c, Report& report) {
    const ModelInfo& info = model.info();
    for (const int depth : o.n_depth) {
        const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
        for (const int n : o.n_prompt) {
            if (n <= 0) continue;
            Result r{c, "pp" + std::to_string(n) + at, n, 0, depth, {}};
            run_prompt(ctx, n, depth, info.n_vocab, c.n_batch);  // warm-up
            for (int i = 0; i < o.reps; ++i) r.samples.push_back(run_prompt(ctx, n, depth, info.n_vocab, c.n_batch));
            report.add(info, r);
        }
        for (const int n : o.n_gen) {
            if (n <= 0) continue;
            Result r{c, "tg" + std::to_string(n) + at, 0, n, depth, {}};
            run_gen(ctx, std::min(n, 16), depth, info.n_vocab, c.n_batch);  // warm-up
            for (int i = 0; i < o.reps; ++i) r.samples.push_back(run_gen(ctx, n, depth, info.n_vocab, c.n_batch));
            report.add(info, r);
        }
    }
}

int largest(const std::vector<int>& v) { return *std::max_element(v.begin(), v.end()); }

// A check of an integer list's elements: at least `lo`.
CLI::Validator at_least(int lo) {
    return CLI::Validator(
        [lo](std::string& text) -> std::string {
            int v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not an integer";
            return v < lo ? text + " is less than " + std::to_string(lo) : std::string();
        },
        "INT>=" + std::to_string(lo));
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand("bench", "measure prompt and generation speed");
    o->model.add_to(*cmd, false);
    const char* list = " (a list: 1,2 or the option repeated)";
    cmd->add_option("-m,--model", o->models, std::string("GGUF model file (default: SmolLM2-135M-Instruct)") + list)
        ->delimiter(',');
    auto many = [&](const std::string& names, auto& values, const std::string& what) {
        return cmd->add_option(names, values, what + list)->delimiter(',')->capture_default_str();
    };
    many("--n-gpu-layers", o->n_gpu_layers, "layers to run on the GPU backend, counted from the last")
        ->check(at_least(0));
    cmd->add_option("-t,--threads", o->threads, std::string("CPU threads (default: all)") + list)
        ->delimiter(',')
        ->check(at_least(1));
    many("-p,--n-prompt", o->n_prompt, "prompt tokens (0: skip)")->check(at_least(0));
    many("-n,--n-gen", o->n_gen, "generated tokens (0: skip)")->check(at_least(0));
    many("-b,--batch-size", o->n_batch, "tokens per forward pass")->check(at_least(1));
    const std::string types = CacheTypeOptions::kTypes;
    many("--cache-type-k", o->type_k, "KV cache type of the keys: " + types);
    many("--cache-type-v", o->type_v, "KV cache type of the values: " + types);
    cmd->add_option("-r,--repetitions", o->reps, "repetitions")->capture_default_str()->check(at_least(1));
    many("-d,--n-depth", o->n_depth, "tokens already in the cache")->check(at_least(0));
    cmd->add_option("-o,--output", o->output, "md or json")->check(CLI::IsMember({"md", "json"}));
    cmd->callback([o] {
        const bool json = o->output == "json";
        const std::vector<int> threads = o->threads.empty() ? std::vector<int>{hardware_threads()} : o->threads;
        // Each context holds the deepest test (the lists are never empty: CLI11 takes a value or refuses).
        const int most = largest(o->n_depth) + std::max(largest(o->n_prompt), largest(o->n_gen));
        Report report(*o, json);
        // A context per combination of the per-context lists, for each model.
        std::vector<Config> configs;
        for (const int t : threads) {
            for (const int b : o->n_batch) {
                for (const std::string& k : o->type_k) {
                    for (const std::string& v : o->type_v) configs.push_back(Config{t, b, k, v});
                }
            }
        }
        const std::vector<std::string> files = o->models.empty() ? std::vector<std::string>{""} : o->models;
        for (const std::string& file : files) {
            for (const int ngl : o->n_gpu_layers) {
                ModelOptions mo = o->model;
                mo.model_path = file;
                mo.n_gpu_layers = ngl;
                mo.n_threads = threads.front();
                const std::unique_ptr<Model> model = mo.load(json);
                for (const Config& c : configs) {
                    ContextParams cp;
                    cp.n_ctx = most + 1;
                    cp.n_batch = c.n_batch;
                    cp.n_threads = c.threads;
                    cp.cache_type_k = c.type_k;
                    cp.cache_type_v = c.type_v;
                    Context ctx(*model, cp);
                    measure(*o, *model, ctx, c, report);
                    if (o->model.verbose) {
                        for (const auto& [name, stats] : ctx.perf().backend_stats) {
                            std::fprintf(stderr, "%s: %s\n", name.c_str(), stats.c_str());
                        }
                    }
                }
            }
        }
        report.finish();
    });
}

}  // namespace lantern::cli
