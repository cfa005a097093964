// lantern run: generate from a prompt, or chat with the model's template.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/speculative.h"

namespace lantern::cli {
namespace {

struct RunOptions {
    ModelOptions model;
    CacheTypeOptions cache;
    std::string prompt;
    std::string prompt_file;
    std::string json_schema;  // --json-schema: a file, or the schema itself
    std::string grammar_file;  // --grammar-file
    std::vector<std::string> dry_breakers;  // --dry-sequence-breaker; {"none"}: no breakers
    int n_predict = 256;
    int n_ctx = 4096;
    int n_batch = 512;
    SamplerParams sampling;
    int64_t seed = -1;
    bool chat = false;
    bool single_turn = false;
    std::string system;
    std::string chat_template;
    std::string template_kwargs;  // --chat-template-kwargs: a JSON object's text
    bool ignore_eos = false;
    bool no_display_prompt = false;
    std::vector<std::string> reverse_prompts;  // stop when the text ends with one
    std::vector<std::string> logit_bias;       // TOKEN+BIAS / TOKEN-BIAS, as llama.cpp's -l
    std::string draft_model;                   // speculative decoding's draft (cli/speculative.h)
    int n_draft = 5;
    std::string prompt_cache;  // --prompt-cache: the prompt's state, reused and saved
    bool prompt_cache_ro = false;
    std::optional<std::string> suffix;  // --suffix: fill in the middle between the prompt and it
};

// "15043+1", "15043-0.5", "15043-inf" (a ban): llama.cpp's --logit-bias form.
LogitBias parse_logit_bias(const std::string& s) {
    const size_t sign = s.find_first_of("+-");
    const std::string id = s.substr(0, sign), value = sign == std::string::npos ? "" : s.substr(sign);
    const bool id_ok = !id.empty() && id.size() <= 9 && id.find_first_not_of("0123456789") == std::string::npos;
    LogitBias b;
    bool ok = id_ok && value.size() > 1;
    if (ok) {
        b.token = std::stoi(id);
        if (value == "-inf") {
            b.bias = -INFINITY;
        } else {
            char* end = nullptr;
            b.bias = std::strtof(value.c_str(), &end);
            ok = *end == '\0' && std::isfinite(b.bias);
        }
    }
    if (!ok) {
        throw Error(ErrorCode::InvalidArgument,
                    "--logit-bias wants TOKEN+BIAS or TOKEN-BIAS (e.g. 15043+1, 15043-inf), not '" + s + "'");
    }
    return b;
}

// Decodes `tokens` into sequence 0 from position `start` (-1: its end),
// asking for the last logits.
void feed(Context& ctx, const std::vector<int32_t>& tokens, int start = -1) {
    Batch b;
    if (start < 0) start = ctx.sequence_length(0);
    for (size_t i = 0; i < tokens.size(); ++i) {
        b.add(tokens[i], start + static_cast<int>(i), 0, i + 1 == tokens.size());
    }
    ctx.decode(b);
}

// Samples and streams up to n tokens; returns the text generated. Generation
// also stops when the text ends with a reverse prompt; text that could be the
// start of one is held back, and a reverse prompt that matched is not shown
// (but stays in the returned text, as it is in the KV cache).
std::string generate(const Model& model, Context& ctx, Sampler& sampler, int n, bool ignore_eos,
                     const std::vector<std::string>& reverse, bool trim_leading, bool* stopped) {
    std::string text;
    size_t shown = 0;
    *stopped = false;
    auto show = [&](size_t upto) {
        if (trim_leading && shown == 0) {  // the template's separator after the role
            while (shown < upto && text[shown] == ' ') ++shown;
        }
        if (upto > shown) std::fwrite(text.data() + shown, 1, upto - shown, stdout);
        shown = std::max(shown, upto);
        std::fflush(stdout);
    };
    for (int i = 0; i < n; ++i) {
        const int32_t tok = sampler.sample(ctx.logits(0));
        if (model.is_end_of_generation(tok) && !ignore_eos) {
            *stopped = true;
            break;
        }
        text += model.token_to_piece(tok);
        size_t safe = text.size();
        bool hit = false;
        for (const std::string& r : reverse) {
            if (r.empty()) continue;
            const size_t at = text.find(r, shown > r.size() ? shown - r.size() : 0);
            if (at != std::string::npos) {
                safe = std::min(safe, at);
                hit = true;
                continue;
            }
            for (size_t k = std::min(r.size() - 1, text.size()); k > 0; --k) {
                if (text.compare(text.size() - k, k, r, 0, k) == 0) {
                    safe = std::min(safe, text.size() - k);
                    break;
                }
            }
        }
        show(safe);
        if (ctx.sequence_length(0) >= ctx.n_ctx()) {
            if (i + 1 < n) {  // the user asked for more: say why it ends here
                show(text.size());
                std::fprintf(stderr,
                             "\nnote: the context is full (%d tokens): generation stopped after %d tokens; raise "
                             "-c/--ctx-size\n",
                             ctx.n_ctx(), i + 1);
                return text;
            }
            break;
        }
        feed(ctx, {tok});  // the cache holds all of `text`, a matched reverse prompt too
        if (hit) {
            *stopped = true;
            return text;
        }
    }
    show(text.size());
    return text;
}

void print_stats(const Context& ctx, bool verbose) {
    const PerfStats p = ctx.perf();
    std::fprintf(stderr, "\nprompt: %lld tokens in %.1f ms (%.2f tokens/s)\n", static_cast<long long>(p.prompt_tokens),
                 p.prompt_ms, p.prompt_ms > 0 ? 1000.0 * static_cast<double>(p.prompt_tokens) / p.prompt_ms : 0.0);
    if (p.gen_tokens > 0) {  // (speculative decoding's passes are batches: its own line says what they did)
        std::fprintf(stderr, "generation: %lld tokens in %.1f ms (%.2f tokens/s)\n", static_cast<long long>(p.gen_tokens),
                     p.gen_ms, 1000.0 * static_cast<double>(p.gen_tokens) / p.gen_ms);
    }
    if (verbose) {
        for (const auto& [name, stats] : p.backend_stats) std::fprintf(stderr, "%s: %s\n", name.c_str(), stats.c_str());
    }
}

// --draft-model: greedy speculative decoding, for completions with plain
// greedy settings (the draft's picks are checked by argmax alone).
void check_speculative(const RunOptions& o) {
    std::string bad;
    if (o.chat || o.prompt.empty()) bad = "a chat (it needs a prompt to complete)";
    if (o.sampling.temperature > 0.0f) bad = "--temp above 0";
    if (o.sampling.repeat_penalty != 1.0f || o.sampling.frequency_penalty != 0.0f ||
        o.sampling.presence_penalty != 0.0f) {
        bad = "penalties";
    }
    if (!o.sampling.logit_bias.empty()) bad = "--logit-bias";
    if (o.sampling.json_object || !o.sampling.json_schema.empty()) bad = "--json / --json-schema";
    if (!o.sampling.grammar.empty() || !o.grammar_file.empty()) bad = "--grammar";
    if (!o.reverse_prompts.empty()) bad = "--reverse-prompt";
    if (o.n_draft < 1 || o.n_draft > 64) bad = "--draft outside 1..64";
    if (!bad.empty()) {
        throw Error(ErrorCode::InvalidArgument,
                    "--draft-model is greedy speculative decoding of a completion: it does not take " + bad);
    }
}

// --prompt-cache FILE: a state saved by an earlier run (Context::
// save_sequence_file) whose tokens begin the prompt is loaded, and only the
// rest is decoded (the last prompt token always, for its logits). A file
// that is not a saved state is refused before anything is written to it; a
// state of another model, or a damaged one, is reported and replaced.
// Returns how many prompt tokens the cache held.
size_t load_prompt_cache(const RunOptions& o, Context& ctx, const std::vector<int32_t>& tokens) {
    const std::string& path = o.prompt_cache;
    if (!std::filesystem::exists(path)) return 0;
    if (!Context::is_sequence_file(path)) {
        throw Error(ErrorCode::InvalidArgument, "--prompt-cache: " + path + " exists and is not a saved prompt state");
    }
    std::vector<int32_t> saved;
    try {
        saved = ctx.load_sequence_file(0, path);
    } catch (const Error& e) {
        std::fprintf(stderr, "prompt cache not used: %s\n", e.what());
        ctx.clear_sequence(0);
        return 0;
    }
    size_t n = 0;
    while (n < saved.size() && n < tokens.size() && saved[n] == tokens[n]) ++n;
    n = std::min(n, tokens.size() - 1);
    std::fprintf(stderr, "prompt cache: %zu of %zu prompt tokens reused from %s\n", n, tokens.size(), path.c_str());
    return n;
}

void run_completion(const RunOptions& o, const Model& model, Context& ctx, Sampler& sampler,
                    Model* draft_model = nullptr) {
    const std::vector<int32_t> tokens =
        o.suffix ? model.fill_in_middle({.prefix = o.prompt, .suffix = *o.suffix}).tokens : model.tokenize(o.prompt, true, true);
    if (tokens.empty()) throw Error(ErrorCode::InvalidArgument, "the prompt is empty");
    if (static_cast<int>(tokens.size()) >= ctx.n_ctx()) {
        throw Error(ErrorCode::ContextFull, "the prompt has " + std::to_string(tokens.size()) +
                                                " tokens; the context holds " + std::to_string(ctx.n_ctx()));
    }
    if (!o.no_display_prompt) {
        std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
        std::fflush(stdout);
    }
    for (int32_t t : tokens) sampler.accept(t);
    const size_t reused = o.prompt_cache.empty() ? 0 : load_prompt_cache(o, ctx, tokens);
    feed(ctx, std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(reused), tokens.end()),
         static_cast<int>(reused));
    if (!o.prompt_cache.empty() && !o.prompt_cache_ro && reused + 1 < tokens.size()) {
        ctx.save_sequence_file(0, o.prompt_cache, tokens);
    }
    if (draft_model != nullptr) {
        ContextParams dp;
        dp.n_ctx = ctx.n_ctx();
        dp.n_batch = o.n_batch;
        Context draft(*draft_model, dp);
        const SpeculativeStats st =
            generate_speculative(model, ctx, *draft_model, draft, tokens, o.n_predict, o.n_draft, o.ignore_eos);
        std::printf("\n");
        std::fprintf(stderr,
                     "speculative: %d tokens in %.1f ms (%.2f tokens/s), %d target passes; the draft's %d proposals, "
                     "%d accepted (%.0f%%)\n",
                     st.generated, st.ms, st.ms > 0 ? 1000.0 * st.generated / st.ms : 0.0, st.target_passes, st.drafted,
                     st.accepted, st.drafted > 0 ? 100.0 * st.accepted / st.drafted : 0.0);
        return;
    }
    bool stopped = false;
    generate(model, ctx, sampler, o.n_predict, o.ignore_eos, o.reverse_prompts, false, &stopped);
    if (o.suffix && !o.no_display_prompt) std::fwrite(o.suffix->data(), 1, o.suffix->size(), stdout);
    std::printf("\n");
}

void run_chat(const RunOptions& o, const Model& model, Context& ctx, Sampler& sampler) {
    if (o.chat_template.empty() && !model.info().has_chat_template) {
        // Instruction-tuned files carry their template; one without is often
        // a base (pretrained) model, which does not follow chat turns.
        std::fprintf(stderr,
                     "note: the model file has no chat template (a base model?): using the built-in format its "
                     "vocabulary suggests; if the answers ramble, try --chat-template plain\n");
    }
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    auto render = [&] { return model.apply_chat_template(messages, ChatTools{}, true, o.chat_template, o.template_kwargs).text; };
    const bool interactive = isatty(STDIN_FILENO) != 0;
    std::string cached;  // the text whose tokens the cache holds
    std::string first = o.prompt;
    for (int turn = 0;; ++turn) {
        std::string user;
        if (turn == 0 && !first.empty()) {
            user = first;
        } else {
            if (o.single_turn && turn > 0) break;
            if (interactive) {
                std::fprintf(stdout, "\n> ");
                std::fflush(stdout);
            }
            if (!std::getline(std::cin, user)) break;
            if (user.empty()) continue;
        }
        messages.push_back({"user", user});
        std::string full = render();
        std::string delta;
        if (full.compare(0, cached.size(), cached) == 0) {
            delta = full.substr(cached.size());
        } else {  // the template rewrote history: start over
            ctx.clear_sequence(0);
            delta = full;
            cached.clear();
        }
        const std::string bos = model.bos_token() >= 0 ? model.token_to_piece(model.bos_token(), true) : "";
        auto tokenize = [&](const std::string& text) {
            const bool add_special = cached.empty() && (bos.empty() || full.rfind(bos, 0) != 0);
            return model.tokenize(text, add_special, true);
        };
        std::vector<int32_t> tokens = tokenize(delta);
        // Room for the reply: a conversation that would leave less than this
        // loses its oldest exchanges (the system message stays) and is read
        // again from the start, rather than ending the chat.
        const int reserve = std::min(std::max(o.n_predict, 1), ctx.n_ctx() / 4);
        if (ctx.sequence_length(0) + static_cast<int>(tokens.size()) + reserve >= ctx.n_ctx()) {
            const size_t keep = !messages.empty() && messages[0].role == "system" ? 1 : 0;
            size_t dropped = 0;
            ctx.clear_sequence(0);
            cached.clear();
            for (;;) {
                full = render();
                tokens = tokenize(full);
                if (static_cast<int>(tokens.size()) + reserve < ctx.n_ctx()) break;
                if (messages.size() - keep <= 1) {
                    throw Error(ErrorCode::ContextFull, "the message does not fit in the context (" +
                                                            std::to_string(ctx.n_ctx()) + " tokens) with room for a reply");
                }
                // The oldest exchange: a user message and the reply to it.
                const size_t n = messages.size() - keep > 2 && messages[keep + 1].role == "assistant" ? 2 : 1;
                messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(keep),
                               messages.begin() + static_cast<std::ptrdiff_t>(keep + n));
                dropped += n;
            }
            if (dropped > 0) {
                std::fprintf(stderr, "note: the conversation outgrew the context (%d tokens): the oldest %zu message%s dropped\n",
                             ctx.n_ctx(), dropped, dropped == 1 ? " was" : "s were");
            }
        }
        for (int32_t t : tokens) sampler.accept(t);
        feed(ctx, tokens);
        sampler.restart_output();  // --json or --grammar hold each reply, not the chat
        bool stopped = false;
        std::string reply = generate(model, ctx, sampler, o.n_predict, false, o.reverse_prompts, true, &stopped);
        std::printf("\n");
        std::fflush(stdout);
        cached = full + reply;  // what the cache holds, a matched reverse prompt included
        for (const std::string& r : o.reverse_prompts) {
            const size_t at = r.empty() ? std::string::npos : reply.find(r);
            if (at != std::string::npos) reply.resize(at);
        }
        // Templates write their own separator after the role; the reply's
        // leading space belongs to it.
        reply.erase(0, reply.find_first_not_of(' '));
        // A reasoning model's <think> block goes back as the turn's
        // reasoning, which templates render as they choose (Qwen3's drops it).
        auto [reasoning, answer] = split_reasoning(reply, prompt_opens_reasoning(full));
        ChatMessage said{"assistant", std::move(answer)};
        said.reasoning_content = std::move(reasoning);
        messages.push_back(std::move(said));
        if (o.single_turn) break;
    }
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt, or chat (--chat, or no prompt)");
    o->model.add_to(*cmd);
    cmd->add_option("-p,--prompt", o->prompt, "prompt text");
    cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file");
    cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->capture_default_str();
    cmd->add_option("-c,--ctx-size", o->n_ctx, "context size in tokens")->capture_default_str();
    cmd->add_option("-b,--batch-size", o->n_batch, "tokens per forward pass")->capture_default_str();
    o->cache.add_to(*cmd);
    cmd->add_option("--temp", o->sampling.temperature, "temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--top-k", o->sampling.top_k, "top-k (0: off)")->capture_default_str();
    cmd->add_option("--top-p", o->sampling.top_p, "top-p (1: off)")->capture_default_str();
    cmd->add_option("--min-p", o->sampling.min_p, "min-p (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty, "repetition penalty")->capture_default_str();
    cmd->add_option("--repeat-last-n", o->sampling.repeat_last_n, "tokens the penalties look back")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "frequency penalty");
    cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "presence penalty");
    cmd->add_option("--typical", o->sampling.typical_p, "locally typical sampling: mass kept (1: off)");
    cmd->add_option("--top-nsigma", o->sampling.top_n_sigma, "keep logits within N standard deviations of the max (0: off)");
    cmd->add_option("--xtc-probability", o->sampling.xtc_probability, "XTC: chance per token of dropping the top choices (0: off)");
    cmd->add_option("--xtc-threshold", o->sampling.xtc_threshold, "XTC: probability a top choice has")->capture_default_str();
    cmd->add_option("--dry-multiplier", o->sampling.dry_multiplier, "DRY repeat penalty's scale (0: off)");
    cmd->add_option("--dry-base", o->sampling.dry_base, "DRY: growth per token of a repeat")->capture_default_str();
    cmd->add_option("--dry-allowed-length", o->sampling.dry_allowed_length, "DRY: repeats this long go free")
        ->capture_default_str();
    cmd->add_option("--dry-penalty-last-n", o->sampling.dry_penalty_last_n, "DRY: tokens looked back (-1: all)")
        ->capture_default_str();
    cmd->add_option("--dry-sequence-breaker", o->dry_breakers,
                    "DRY: a text no repeat reaches across (repeatable; replaces \\n : \" *; 'none': no breakers)");
    cmd->add_option("--mirostat", o->sampling.mirostat, "mirostat version: 1 or 2 (0: off)");
    cmd->add_option("--mirostat-ent", o->sampling.mirostat_tau, "mirostat's target surprise, bits")->capture_default_str();
    cmd->add_option("--mirostat-lr", o->sampling.mirostat_eta, "mirostat's learning rate")->capture_default_str();
    cmd->add_flag("--json", o->sampling.json_object,
                  "the output is one JSON object: tokens that would break it are never drawn");
    cmd->add_option("--json-schema", o->json_schema,
                    "the output follows this JSON schema (a file, or the schema's text): OpenAI's structured-output "
                    "subset; a keyword it cannot enforce is an error");
    cmd->add_option("--grammar", o->sampling.grammar,
                    "a GBNF grammar (llama.cpp's format) whose root rule the output matches, token by token");
    cmd->add_option("--grammar-file", o->grammar_file, "read the GBNF grammar from a file");
    cmd->add_option("-l,--logit-bias", o->logit_bias,
                    "add BIAS to TOKEN's logit before sampling: TOKEN+BIAS or TOKEN-BIAS, -inf bans it (repeatable)");
    cmd->add_option("-s,--seed", o->seed, "random seed (-1: random)")->capture_default_str();
    cmd->add_flag("--chat,-i", o->chat, "chat with the model's chat template");
    cmd->add_flag("--single-turn", o->single_turn, "in chat mode, stop after the first answer");
    cmd->add_option("--system", o->system, "system message for chat mode");
    cmd->add_option("--chat-template", o->chat_template, "chat template: a built-in name or Jinja source");
    cmd->add_option_function<std::string>(
        "--chat-template-file", [o](const std::string& path) { o->chat_template = read_text_file(path); },
        "read the chat template's Jinja source from a file");
    cmd->add_option("--chat-template-kwargs", o->template_kwargs,
                    "more chat template variables, a JSON object (e.g. '{\"enable_thinking\": false}' for Qwen3)");
    cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-generation tokens");
    cmd->add_option("-r,--reverse-prompt", o->reverse_prompts,
                    "stop generating when the text ends with this (repeatable; the `plain` chat template "
                    "uses \"\\nUser\" unless given)");
    cmd->add_flag("--no-display-prompt", o->no_display_prompt, "do not echo the prompt");
    cmd->add_option("--draft-model,--model-draft", o->draft_model,
                    "a small model of the same vocabulary whose guesses the model checks in batches (greedy "
                    "speculative decoding of a completion)");
    cmd->add_option("--draft", o->n_draft, "tokens the draft guesses ahead")->capture_default_str();
    cmd->add_option("--prompt-cache", o->prompt_cache,
                    "file of the prompt's state: its longest common start with the prompt is reused, and the "
                    "state saved after the prompt (completions, not --chat)");
    cmd->add_flag("--prompt-cache-ro", o->prompt_cache_ro, "use --prompt-cache's file but do not update it");
    cmd->add_option("--suffix", o->suffix,
                    "fill in the middle (code models with FIM tokens): generate what goes between the prompt and "
                    "this text");
    cmd->callback([o] {
        if (!o->prompt_file.empty()) o->prompt = read_text_file(o->prompt_file);
        for (const std::string& b : o->logit_bias) o->sampling.logit_bias.push_back(parse_logit_bias(b));
        if (!o->dry_breakers.empty()) {
            o->sampling.dry_sequence_breakers.clear();
            for (const std::string& b : o->dry_breakers) {
                if (b != "none") o->sampling.dry_sequence_breakers.push_back(b);
            }
        }
        if (!o->template_kwargs.empty() && !nlohmann::json::parse(o->template_kwargs, nullptr, false).is_object()) {
            throw Error(ErrorCode::InvalidArgument, "--chat-template-kwargs must be a JSON object, such as '{\"enable_thinking\": false}'");
        }
        if (!o->json_schema.empty()) {
            const bool inline_schema = o->json_schema.find('{') != std::string::npos;
            o->sampling.json_schema = inline_schema ? o->json_schema : read_text_file(o->json_schema);
            check_json_schema(o->sampling.json_schema);
        }
        if (!o->grammar_file.empty()) {
            if (!o->sampling.grammar.empty()) throw Error(ErrorCode::InvalidArgument, "give --grammar or --grammar-file, not both");
            o->sampling.grammar = read_text_file(o->grammar_file);
        }
        if (!o->sampling.grammar.empty()) {
            if (o->sampling.json_object || !o->sampling.json_schema.empty()) {
                throw Error(ErrorCode::InvalidArgument, "a grammar cannot be combined with --json or --json-schema");
            }
            check_grammar(o->sampling.grammar);
        }
        if (!o->draft_model.empty()) check_speculative(*o);
        if (o->suffix && (o->chat || !o->draft_model.empty())) {
            throw Error(ErrorCode::InvalidArgument, "--suffix fills in a completion's middle: not with --chat or --draft-model");
        }
        if (!o->prompt_cache.empty() && (o->chat || o->prompt.empty())) {
            throw Error(ErrorCode::InvalidArgument, "--prompt-cache works with a completion (-p), not a chat");
        }
        std::unique_ptr<Model> model = o->model.load();
        std::unique_ptr<Model> draft;
        if (!o->draft_model.empty()) {
            ModelOptions d = o->model;
            d.model_path = o->draft_model;
            d.lora.clear();  // the adapters are the model's, not the draft's
            d.lora_scaled.clear();
            d.rope = {};  // and so are the rope overrides
            d.rope_factor = 0;
            draft = d.load(true);
        }
        ContextParams cp;
        cp.n_ctx = std::min(o->n_ctx, model->info().n_ctx_max > 0 ? model->info().n_ctx_max : o->n_ctx);
        cp.n_batch = o->n_batch;
        o->cache.apply(cp);
        Context ctx(*model, cp);
        std::fprintf(stderr, "KV cache: %s\n", ctx.cache_summary().c_str());
        SamplerParams sp = o->sampling;
        sp.seed = o->seed < 0 ? 0xFFFFFFFFu : static_cast<uint64_t>(o->seed);
        Sampler sampler(sp, *model);
        if (o->chat_template == "plain" && o->reverse_prompts.empty()) o->reverse_prompts.push_back("\nUser");
        if (o->chat || (o->prompt.empty() && !o->suffix)) {
            run_chat(*o, *model, ctx, sampler);
        } else {
            run_completion(*o, *model, ctx, sampler, draft.get());
        }
        print_stats(ctx, o->model.verbose);
    });
}

}  // namespace lantern::cli
