// HttpServer's completion requests made into the engine's generations, and
// OpenAI's batch of several prompts in one completions request answered
// together.
#include <future>

#include "chat/reasoning.h"
#include "server/http_server.h"
#include "server/openai.h"

namespace lantern::server {

using json = nlohmann::json;

// A request's generations (n of them for "n": N), its prompt tokenized
// (or rendered with the chat template, or the fill-in-the-middle prompt
// made) and its sampling settings checked: a 400 for anything wrong.
HttpServer::Prepared HttpServer::prepare(CompletionRequest& req, bool infill) {
    const bool chat = req.chat;
    for (const LogitBias& b : req.sampling.logit_bias) {
        if (b.token >= model_.n_vocab()) {
            throw ApiError(400, "'logit_bias' names token " + std::to_string(b.token) + ", outside the vocabulary (" +
                                    std::to_string(model_.n_vocab()) + " tokens)");
        }
    }
    {
        // Every sampling setting checked here (a 400), not when the
        // engine admits the request.
        SamplerParams check = req.sampling;
        check.json_object = false;
        check.json_schema.clear();
        check.grammar.clear();
        check.dry_sequence_breakers.clear();  // their tokens need the vocabulary
        Sampler(check, model_.n_vocab());
    }
    std::string text = req.prompt;
    if (chat) {
        // A required tool call: the prompt ends where the call
        // begins, and the sampler keeps the call's object valid.
        ChatPrompt prompt = model_.apply_chat_template(req.conversation.messages, req.conversation.tools, true,
                                                        options_.chat_template, req.conversation.template_kwargs);
        text = std::move(prompt.text);
        req.reasoning_opened = prompt_opens_reasoning(text);
        if (!prompt.call_prefixes.empty()) {
            if (!req.sampling.grammar.empty()) {
                throw ApiError(400, "'grammar' cannot be combined with a required tool call");
            }
            req.sampling.json_object = true;
            req.sampling.json_prefixes = std::move(prompt.call_prefixes);
            req.sampling.json_schema = std::move(prompt.call_schema);
        }
    }
    auto gen = std::make_shared<GenerationRequest>();
    // A chat template writes its own BOS when it wants one (and so does a
    // /completion prompt rendered by /apply-template).
    const std::string bos = model_.bos_token() >= 0 ? model_.token_to_piece(model_.bos_token(), true) : "";
    const bool add_special = !(chat || req.parse_special) || bos.empty() || text.rfind(bos, 0) != 0;
    Prepared out;
    if (req.fim) {
        // The gap's surroundings, cut to leave room for the middle
        // (at most a quarter of the context) and its start.
        if (!model_.has_fill_in_middle()) {
            throw ApiError(400, std::string(infill ? "/infill" : "'suffix'") +
                                    " needs a code model with fill-in-the-middle tokens; this one has none");
        }
        const std::vector<int32_t> start = model_.tokenize(text, false, false);
        const int n_ctx = engine_.params().n_ctx;
        const int room = n_ctx - std::min(req.max_tokens, n_ctx / 4) - static_cast<int>(start.size()) - 1;
        FimPrompt fim = model_.fill_in_middle(*req.fim, std::max(room, 1));
        out.truncated = fim.truncated;
        gen->prompt = std::move(fim.tokens);
        gen->prompt.insert(gen->prompt.end(), start.begin(), start.end());
    } else if (!req.prompt_pieces.empty()) {
        // Ids as given; texts tokenized where they stand, a BOS in
        // front of the first piece when it is a text.
        for (const PromptPiece& piece : req.prompt_pieces) {
            if (piece.token >= model_.n_vocab()) {
                throw ApiError(400, "'prompt' holds token id " + std::to_string(piece.token) +
                                        ", outside the vocabulary (" + std::to_string(model_.n_vocab()) +
                                        " tokens)");
            }
            if (piece.token >= 0) {
                gen->prompt.push_back(piece.token);
                continue;
            }
            const std::vector<int32_t> t = model_.tokenize(piece.text, gen->prompt.empty(), req.parse_special);
            gen->prompt.insert(gen->prompt.end(), t.begin(), t.end());
        }
        if (req.echo) req.prompt = model_.detokenize(gen->prompt);
    } else {
        gen->prompt = model_.tokenize(text, add_special, chat || req.parse_special);
    }
    gen->sampling = req.sampling;
    gen->max_tokens = req.max_tokens;
    gen->stop = req.stop;
    gen->ignore_eos = req.ignore_eos;
    gen->cache_prompt = req.cache_prompt;
    gen->max_generation_ms = req.max_generation_ms;
    gen->min_indent = req.min_indent;
    gen->logprobs = req.logprobs;
    gen->prompt_logprobs = req.echo && req.logprobs >= 0;

    // n choices: n requests of the same prompt, each with its own
    // draws (a fixed seed gives choice i seed + i).
    std::vector<std::shared_ptr<GenerationRequest>>& gens = out.gens;
    gens.push_back(gen);
    for (int i = 1; i < req.n; ++i) {
        auto g = std::make_shared<GenerationRequest>(*gen);
        if (g->sampling.seed != kSamplerRandomSeed) g->sampling.seed += static_cast<uint64_t>(i);
        gens.push_back(std::move(g));
    }
    return out;
}

json HttpServer::complete_batch(const std::vector<std::string>& bodies, const ClientWatch& client, const std::string& id,
                                int64_t created) {
    // Every prompt's generations made (and so checked) before any runs.
    constexpr size_t kMaxGenerations = 256;
    std::vector<CompletionRequest> reqs;
    std::vector<Prepared> prepared;
    size_t generations = 0;
    for (const std::string& body : bodies) {
        reqs.push_back(parse_completion_request(body, false, options_.reasoning));
        if (reqs.back().stream) throw ApiError(400, "several prompts cannot be streamed; send one request for each");
        generations += static_cast<size_t>(reqs.back().n);
        if (generations > kMaxGenerations) {
            throw ApiError(400, "at most " + std::to_string(kMaxGenerations) + " answers (prompts times 'n') per request");
        }
    }
    for (CompletionRequest& r : reqs) {
        prepared.push_back(prepare(r, false));
        for (const auto& g : prepared.back().gens) engine_.check(*g);
    }
    std::vector<std::vector<std::future<GenerationResult>>> futures(prepared.size());
    for (size_t k = 0; k < prepared.size(); ++k) {
        for (auto& g : prepared[k].gens) {
            auto done = std::make_shared<std::promise<GenerationResult>>();
            futures[k].push_back(done->get_future());
            g->on_done = [done](const GenerationResult& r) { done->set_value(r); };
            g->client_gone = client.gone();
        }
    }
    for (Prepared& p : prepared) {
        for (auto& g : p.gens) engine_.submit(g);
    }
    // One response: each prompt's choices in turn, numbered through; the
    // usage summed over the prompts.
    json out;
    for (size_t k = 0; k < prepared.size(); ++k) {
        std::vector<GenerationResult> rs;
        for (auto& f : futures[k]) rs.push_back(f.get());
        for (const GenerationResult& r : rs) {
            if (r.finish_reason == "error") throw ApiError(500, r.error, "server_error");
        }
        json one = completion_response(reqs[k], rs, id, options_.model_name, created);
        if (k == 0) {
            out = std::move(one);
            out.erase("timings");
            continue;
        }
        for (json& choice : one["choices"]) {
            choice["index"] = out["choices"].size();
            out["choices"].push_back(std::move(choice));
        }
        json& usage = out["usage"];
        for (const char* field : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
            usage[field] = usage[field].get<int64_t>() + one["usage"][field].get<int64_t>();
        }
        json& cached = usage["prompt_tokens_details"]["cached_tokens"];
        cached = cached.get<int64_t>() + one["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    }
    return out;
}

}  // namespace lantern::server
