// lantern perplexity: perplexity of a model over a text, as llama-perplexity
// computes it, and the KL divergence of one model's next-token distributions
// from another's.
//
//   lantern perplexity -m MODEL -f FILE [-c 512] [--chunks N]
//   lantern perplexity -m BASE  -f FILE [-c 512] --kl-divergence-base BASE.kld
//   lantern perplexity -m OTHER --kl-divergence-base BASE.kld --kl-divergence
//
// Perplexity: the whole text is tokenized once (with BOS when the vocabulary
// adds one) and cut into consecutive chunks of -c tokens. Each chunk is run
// from position 0 with its first token replaced by BOS (when the vocabulary
// adds BOS), and only the second half is scored: the logits at positions
// j in [c/2, c-1) give the negative log-likelihood of token j+1. Printed:
// the running perplexity after each chunk ("[1]x.xxxx,[2]...") and
// "Final estimate: PPL = exp(mean NLL) +/- PPL * sqrt(var(NLL) / (N - 1))"
// over all N scored tokens (llama-perplexity's estimate).
//
// KL divergence: with --kl-divergence-base alone, the run also saves, for
// every scored position, the base model's top-K log-probabilities (K =
// --kl-top-k, default 32) and its log-probability of the actual next token,
// together with the tokens, so a later run needs no text. With
// --kl-divergence the tokens come from that file, and each position's
// divergence KL(base || model) is taken over the K base tokens plus one
// bucket for the rest of the vocabulary:
//   sum_i p_i log(p_i / q_i) + p_rest log(p_rest / q_rest).
// This is the exact divergence of the two distributions coarsened to K+1
// outcomes: never above the full-vocabulary KLD and equal to it as the
// base's tail mass goes to 0 (a choice that keeps the file at a few hundred
// bytes per token instead of n_vocab floats). Printed: mean KLD +/- its
// standard error, median / 99th percentile / maximum, the share of positions
// where both models' most likely token agree, and both perplexities.
//
// Base file (little-endian): "LNTNKLD1", u32 n_vocab, n_ctx, top_k, n_chunks,
// n_tokens, add_bos; i32 tokens[n_tokens]; then per scored position, in
// order: f32 log-prob of the next token, top_k x (i32 id, f32 log-prob),
// most likely first.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "cli/common.h"

namespace lantern::cli {
namespace {

constexpr char kMagic[8] = {'L', 'N', 'T', 'N', 'K', 'L', 'D', '1'};

struct PerplexityOptions {
    ModelOptions model;
    CacheTypeOptions cache;
    std::string file;
    int n_ctx = 512;
    int n_batch = 512;
    int n_chunks = -1;  // -1: all
    std::string kld_base;
    bool kld = false;
    int top_k = 32;
};

// Log-probabilities of one row of logits (double accumulation).
void log_softmax(const float* logits, int n, std::vector<float>& out) {
    out.resize(static_cast<size_t>(n));
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(logits[i] - lse);
}

// Mean and standard error of the mean of `v`.
std::pair<double, double> mean_stderr(const std::vector<double>& v) {
    const double n = static_cast<double>(v.size());
    double s = 0, s2 = 0;
    for (double x : v) {
        s += x;
        s2 += x * x;
    }
    const double mean = s / n;
    const double var = s2 / n - mean * mean;
    return {mean, v.size() > 1 && var > 0 ? std::sqrt(var / (n - 1)) : 0.0};
}

// What the base file holds.
struct KldBase {
    uint32_t n_vocab = 0, n_ctx = 0, top_k = 0, n_chunks = 0;
    bool add_bos = false;
    std::vector<int32_t> tokens;
    std::ifstream in;  // positioned at the first record
};

template <class T>
void put(std::ofstream& out, T v) {
    out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <class T>
T get(std::ifstream& in, const std::string& path) {
    T v;
    if (!in.read(reinterpret_cast<char*>(&v), sizeof(T))) {
        throw Error(ErrorCode::Format, path + ": truncated KL-divergence base file");
    }
    return v;
}

KldBase read_base_header(const std::string& path) {
    KldBase b;
    b.in.open(path, std::ios::binary);
    if (!b.in) throw Error(ErrorCode::Io, "cannot read " + path);
    char magic[8];
    if (!b.in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) {
        throw Error(ErrorCode::Format, path + ": not a Lantern KL-divergence base file");
    }
    b.n_vocab = get<uint32_t>(b.in, path);
    b.n_ctx = get<uint32_t>(b.in, path);
    b.top_k = get<uint32_t>(b.in, path);
    b.n_chunks = get<uint32_t>(b.in, path);
    const uint32_t n_tokens = get<uint32_t>(b.in, path);
    b.add_bos = get<uint32_t>(b.in, path) != 0;
    // In 64 bits (the 32-bit product wraps), and no more tokens than the file holds.
    std::error_code ec;
    const uint64_t file_bytes = std::filesystem::file_size(path, ec);
    if (b.n_ctx < 4 || b.n_ctx > uint32_t(INT32_MAX) || b.top_k == 0 || b.top_k > b.n_vocab ||
        uint64_t(n_tokens) != uint64_t(b.n_chunks) * b.n_ctx || ec || uint64_t(n_tokens) * 4 > file_bytes) {
        throw Error(ErrorCode::Format, path + ": inconsistent KL-divergence base header");
    }
    b.tokens.resize(n_tokens);
    for (int32_t& t : b.tokens) t = get<int32_t>(b.in, path);
    return b;
}

// Accumulates the scores of every position.
struct Scores {
    std::vector<double> nll;       // -log q(next)
    std::vector<double> base_nll;  // -log p(next), KLD mode
    std::vector<double> kld;
    std::vector<double> same_top;  // 1 when the argmaxes agree

    double ppl(const std::vector<double>& v) const {
        return std::exp(std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()));
    }
};

void print_ppl_final(const Scores& s) {
    const auto [mean, err] = mean_stderr(s.nll);
    const double ppl = std::exp(mean);
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * err);
}

void print_kld_final(Scores& s) {
    const auto [pm, pe] = mean_stderr(s.nll);
    const auto [bm, be] = mean_stderr(s.base_nll);
    const auto [km, ke] = mean_stderr(s.kld);
    const auto [tm, te] = mean_stderr(s.same_top);
    std::vector<double> sorted = s.kld;
    std::sort(sorted.begin(), sorted.end());
    auto pct = [&](double q) { return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))]; };
    std::printf("\n====== KL divergence statistics (%zu positions) ======\n", s.kld.size());
    std::printf("Mean PPL(Q)         : %10.4f +/- %.5f\n", std::exp(pm), std::exp(pm) * pe);
    std::printf("Mean PPL(base)      : %10.4f +/- %.5f\n", std::exp(bm), std::exp(bm) * be);
    std::printf("Mean ln(PPL(Q)/PPL(base)): %.6f\n", pm - bm);
    std::printf("Mean KLD            : %10.6f +/- %.6f\n", km, ke);
    std::printf("Median KLD          : %10.6f\n", pct(0.5));
    std::printf("99.0%% KLD           : %10.6f\n", pct(0.99));
    std::printf("Maximum KLD         : %10.6f\n", sorted.back());
    std::printf("Same top p          : %7.3f +/- %.3f %%\n", 100.0 * tm, 100.0 * te);
}

void run_perplexity(PerplexityOptions& o) {
    const bool compare = o.kld;
    const bool save = !o.kld_base.empty() && !o.kld;
    if (compare && o.kld_base.empty()) {
        throw Error(ErrorCode::InvalidArgument, "--kl-divergence needs --kl-divergence-base FILE (the saved base run)");
    }
    if (!compare && o.file.empty()) throw Error(ErrorCode::InvalidArgument, "no text: pass -f FILE");
    if (o.top_k <= 0) throw Error(ErrorCode::InvalidArgument, "--kl-top-k must be positive");

    KldBase base;
    if (compare) {
        base = read_base_header(o.kld_base);
        o.n_ctx = static_cast<int>(base.n_ctx);
    }
    if (o.n_ctx < 4) throw Error(ErrorCode::InvalidArgument, "-c must be at least 4");

    std::unique_ptr<Model> model = o.model.load();
    const int n_vocab = model->n_vocab();
    if (compare && static_cast<int>(base.n_vocab) != n_vocab) {
        throw Error(ErrorCode::InvalidArgument, o.kld_base + " was made with a vocabulary of " +
                                                    std::to_string(base.n_vocab) + " tokens; this model has " +
                                                    std::to_string(n_vocab));
    }

    // Tokens, and whether the vocabulary adds BOS (then every chunk starts with it).
    std::vector<int32_t> tokens;
    bool add_bos = false;
    const int n_ctx = o.n_ctx;
    int n_chunks = 0;
    if (compare) {
        tokens = base.tokens;
        add_bos = base.add_bos;
        n_chunks = static_cast<int>(base.n_chunks);
        if (o.n_chunks > 0) n_chunks = std::min(n_chunks, o.n_chunks);
    } else {
        const std::string text = read_text_file(o.file);
        const auto t0 = std::chrono::steady_clock::now();
        tokens = model->tokenize(text, true, false);
        const std::vector<int32_t> probe = model->tokenize("x", true, false);
        add_bos = model->bos_token() >= 0 && !probe.empty() && probe[0] == model->bos_token() &&
                  probe.size() > model->tokenize("x", false, false).size();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "tokenized %s: %zu tokens in %.0f ms\n", o.file.c_str(), tokens.size(), ms);
        n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
        if (o.n_chunks > 0) n_chunks = std::min(n_chunks, o.n_chunks);
        if (n_chunks == 0) {
            throw Error(ErrorCode::InvalidArgument, "the text has " + std::to_string(tokens.size()) +
                                                        " tokens; one chunk needs " + std::to_string(n_ctx) +
                                                        " (lower -c)");
        }
        tokens.resize(static_cast<size_t>(n_chunks) * static_cast<size_t>(n_ctx));
    }

    std::ofstream out;
    if (save) {
        out.open(o.kld_base, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(ErrorCode::Io, "cannot write " + o.kld_base);
        out.write(kMagic, 8);
        for (uint32_t v : {static_cast<uint32_t>(n_vocab), static_cast<uint32_t>(n_ctx), static_cast<uint32_t>(o.top_k),
                           static_cast<uint32_t>(n_chunks), static_cast<uint32_t>(tokens.size()),
                           static_cast<uint32_t>(add_bos)}) {
            put(out, v);
        }
        out.write(reinterpret_cast<const char*>(tokens.data()),
                  static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)));
    }

    ContextParams cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = std::max(1, std::min(o.n_batch, n_ctx));
    o.cache.apply(cp);
    Context ctx(*model, cp);

    const int first = n_ctx / 2;  // scored positions: [first, n_ctx - 1)
    std::fprintf(stderr, "perplexity: %d chunks of %d tokens, scoring %d tokens each, batch %d%s\n", n_chunks, n_ctx,
                 n_ctx - 1 - first, cp.n_batch, add_bos ? ", BOS first" : "");
    Scores s;
    std::vector<float> logp;
    std::vector<int32_t> order(static_cast<size_t>(n_vocab));
    std::vector<std::pair<int32_t, float>> top(compare ? base.top_k : 0);
    const auto t_start = std::chrono::steady_clock::now();
    for (int c = 0; c < n_chunks; ++c) {
        const size_t start = static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
        Batch b;
        for (int j = 0; j < n_ctx; ++j) {
            int32_t tok = tokens[start + static_cast<size_t>(j)];
            if (j == 0 && add_bos) tok = model->bos_token();
            b.add(tok, j, 0, j >= first && j < n_ctx - 1);
        }
        ctx.clear_sequence(0);
        ctx.decode(b);
        for (int j = first; j < n_ctx - 1; ++j) {
            const float* logits = ctx.logits(j - first);
            const int32_t next = tokens[start + static_cast<size_t>(j) + 1];
            log_softmax(logits, n_vocab, logp);
            s.nll.push_back(-static_cast<double>(logp[static_cast<size_t>(next)]));
            if (save) {
                const size_t k = static_cast<size_t>(o.top_k);
                std::iota(order.begin(), order.end(), 0);
                std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                                  [&](int32_t a, int32_t bb) { return logp[static_cast<size_t>(a)] > logp[static_cast<size_t>(bb)]; });
                put(out, logp[static_cast<size_t>(next)]);
                for (size_t i = 0; i < k; ++i) {
                    put(out, order[i]);
                    put(out, logp[static_cast<size_t>(order[i])]);
                }
            }
            if (compare) {
                const float base_next = get<float>(base.in, o.kld_base);
                for (auto& [id, lp] : top) {
                    id = get<int32_t>(base.in, o.kld_base);
                    lp = get<float>(base.in, o.kld_base);
                    if (id < 0 || id >= n_vocab) throw Error(ErrorCode::Format, o.kld_base + ": token id out of range");
                }
                double kld = 0.0, p_top = 0.0, q_top = 0.0;
                for (const auto& [id, lp] : top) {
                    const double p = std::exp(static_cast<double>(lp));
                    kld += p * (static_cast<double>(lp) - logp[static_cast<size_t>(id)]);
                    p_top += p;
                    q_top += std::exp(static_cast<double>(logp[static_cast<size_t>(id)]));
                }
                const double p_rest = 1.0 - p_top, q_rest = std::max(1.0 - q_top, 1e-30);
                if (p_rest > 1e-12) kld += p_rest * std::log(p_rest / q_rest);
                s.kld.push_back(std::max(kld, 0.0));
                s.base_nll.push_back(-static_cast<double>(base_next));
                const int32_t argmax = static_cast<int32_t>(std::max_element(logp.begin(), logp.end()) - logp.begin());
                s.same_top.push_back(argmax == top[0].first ? 1.0 : 0.0);
            }
        }
        if (c == 0) {
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
            std::fprintf(stderr, "%.2f seconds per chunk, about %.1f minutes for all\n", sec,
                         sec * n_chunks / 60.0);
        }
        if (compare) {
            std::printf("[%d]%.4f/%.6f,", c + 1, s.ppl(s.nll), mean_stderr(s.kld).first);
        } else {
            std::printf("[%d]%.4f,", c + 1, s.ppl(s.nll));
        }
        std::fflush(stdout);
    }
    std::printf("\n");
    if (save) {
        out.close();
        if (!out) throw Error(ErrorCode::Io, "error writing " + o.kld_base);
        std::fprintf(stderr, "saved the base's top-%d log-probabilities of %zu positions to %s\n", o.top_k,
                     s.nll.size(), o.kld_base.c_str());
    }
    if (compare) {
        print_kld_final(s);
    } else {
        print_ppl_final(s);
    }
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
    auto o = std::make_shared<PerplexityOptions>();
    CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a text, or KL divergence from a saved base run");
    o->model.add_to(*cmd);
    cmd->add_option("-f,--file", o->file, "text file to score");
    cmd->add_option("-c,--ctx-size", o->n_ctx, "tokens per chunk (the second half is scored)")->capture_default_str();
    cmd->add_option("-b,--batch-size", o->n_batch, "tokens per forward pass")->capture_default_str();
    o->cache.add_to(*cmd);
    cmd->add_option("--chunks", o->n_chunks, "score at most this many chunks (-1: all)")->capture_default_str();
    cmd->add_option("--kl-divergence-base", o->kld_base,
                    "file of the base model's log-probabilities: written by a plain run, read with --kl-divergence");
    cmd->add_flag("--kl-divergence", o->kld, "compare this model against --kl-divergence-base (the text comes from it)");
    cmd->add_option("--kl-top-k", o->top_k, "log-probabilities saved per position in the base file")
        ->capture_default_str();
    cmd->callback([o] { run_perplexity(*o); });
}

}  // namespace lantern::cli
