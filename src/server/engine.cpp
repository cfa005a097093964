#include "server/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace lantern::server {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

struct Engine::Slot {
    int id = 0;
    std::shared_ptr<GenerationRequest> req;
    std::unique_ptr<Sampler> sampler;
    std::vector<int32_t> cached;  // the tokens the slot's sequence holds, in order
    size_t prompt_cached = 0;  // prompt tokens the request found in `cached`
    size_t prompt_done = 0;    // prompt tokens decoded so far (or found cached)
    int32_t last = -1;         // sampled token to decode next
    bool has_logits = false;   // the last step gave this slot logits
    int out_index = -1;        // its row in the step's logits
    int generated = 0;
    std::string text;          // all generated text
    size_t emitted = 0;        // bytes of text already sent
    std::vector<TokenLogprob> logprobs;  // per generated token, when asked for
    std::vector<TokenLogprob> prompt_logprobs;  // per prompt token, when asked for
    size_t logprobs_sent = 0;
    size_t logprobs_sent_end = 0;        // where the sent tokens' text ends in `text`
    std::string stop_word;               // the stop string that ended the text
    bool line_break = false;             // the text holds a '\n'
    uint64_t last_used = 0;              // Engine::admitted_ when it last took a request
    Clock::time_point admitted, prompt_read;  // prompt_read: its last token's logits came (zero: not yet)
    bool active() const { return req != nullptr; }
};

namespace {

// Bytes at the end of s that form an incomplete UTF-8 character.
size_t incomplete_utf8_tail(const std::string& s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? back : 0;
    }
    return 0;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

// Ends a request that never reached a slot, with `error`.
void fail_unadmitted(const GenerationRequest& req, const std::string& error) {
    GenerationResult r;
    r.finish_reason = "error";
    r.error = error;
    r.prompt_tokens = static_cast<int>(req.prompt.size());
    try {
        if (req.on_done) req.on_done(r);
    } catch (const std::exception&) {
        // Its client hears nothing more; the engine goes on.
    }
}

// Whether the request's client went away (GenerationRequest::client_gone);
// a callback that throws counts as gone.
bool client_gone(const GenerationRequest& req) {
    try {
        return req.client_gone && req.client_gone();
    } catch (const std::exception&) {
        return true;
    }
}

constexpr const char* kCancelled = "cancelled: the client went away";

// Slots serving a request (Engine::slots_).
template <class Slots>
int count_active(const Slots& slots) {
    return static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const auto& s) { return s->active(); }));
}

// The log-softmax of `logits` at `token` (whose text is `piece`), and the
// n_top most likely tokens.
TokenLogprob token_logprob(const Model& model, const float* logits, int n_vocab, int32_t token, std::string piece,
                           int n_top) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
    const float log_z = max + static_cast<float>(std::log(sum));
    TokenLogprob t;
    t.id = token;
    t.token = std::move(piece);
    t.logprob = logits[token] - log_z;
    const int k = std::min(n_top, n_vocab);
    if (k > 0) {
        std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
        std::iota(ids.begin(), ids.end(), 0);
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
        });
        for (int i = 0; i < k; ++i) t.top.push_back({ids[i], model.token_to_piece(ids[i]), logits[ids[i]] - log_z});
    }
    return t;
}

}  // namespace

size_t dedent_at(const std::string& text, int indent) {
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', nl + 1)) {
        const size_t start = nl + 1;
        size_t p = start;
        while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
        const bool blank = p == text.size() || text[p] == '\n' || text[p] == '\r';
        if (!blank && p - start < static_cast<size_t>(indent)) return start;
    }
    return std::string::npos;
}

Engine::Engine(Model& model, const EngineParams& params) : model_(model), params_(params) {
    if (params_.n_slots <= 0) throw Error(ErrorCode::InvalidArgument, "server: the number of slots must be positive");
    ContextParams cp;
    cp.n_ctx = params_.n_ctx;
    cp.n_seq = params_.n_slots;
    cp.n_batch = params_.n_batch;
    cp.cache_type_k = params_.cache_type_k;
    cp.cache_type_v = params_.cache_type_v;
    ctx_ = std::make_unique<Context>(model_, cp);
    params_.n_ctx = ctx_->n_ctx();
    for (int i = 0; i < params_.n_slots; ++i) {
        slots_.push_back(std::make_unique<Slot>());
        slots_.back()->id = i;
    }
    worker_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
}

void Engine::check(const GenerationRequest& request) const {
    if (request.prompt.empty()) throw Error(ErrorCode::InvalidArgument, "the prompt is empty");
    if (static_cast<int>(request.prompt.size()) >= params_.n_ctx) {
        throw Error(ErrorCode::ContextFull, "the prompt has " + std::to_string(request.prompt.size()) +
                                                " tokens; a request may use at most " +
                                                std::to_string(params_.n_ctx - 1));
    }
    for (int32_t t : request.prompt) {
        if (t < 0 || t >= model_.n_vocab()) throw Error(ErrorCode::InvalidArgument, "prompt token outside the vocabulary");
    }
}

void Engine::submit(std::shared_ptr<GenerationRequest> request) {
    check(*request);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(request));
        stats_.queued = static_cast<int>(queue_.size());
    }
    wake_.notify_all();
}

EngineStats Engine::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

// The job runs f() on the engine thread and hands its result or exception
// to this thread's future; called with false (the server stopping before
// it ran), it hands an Error instead.
template <class F>
auto Engine::on_engine(F f) -> decltype(f()) {
    using R = decltype(f());
    auto done = std::make_shared<std::promise<R>>();
    std::future<R> result = done->get_future();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) throw Error(ErrorCode::InvalidArgument, "the server is shutting down");
        jobs_.push_back([done, f = std::move(f)](bool run) mutable {
            if (!run) {
                done->set_exception(std::make_exception_ptr(Error(ErrorCode::Backend, "the server is shutting down")));
                return;
            }
            try {
                done->set_value(f());
            } catch (...) {
                done->set_exception(std::current_exception());
            }
        });
    }
    wake_.notify_all();
    return result.get();
}

void Engine::run_jobs() {
    for (;;) {
        std::function<void(bool)> job;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (jobs_.empty()) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        job(true);
    }
}

std::vector<std::vector<float>> Engine::embed(std::vector<std::vector<int32_t>> inputs) {
    for (const auto& in : inputs) {
        if (in.empty()) throw Error(ErrorCode::InvalidArgument, "an input to embed is empty");
        if (static_cast<int>(in.size()) > params_.n_ctx) {
            throw Error(ErrorCode::ContextFull, "an input to embed has " + std::to_string(in.size()) +
                                                    " tokens; at most " + std::to_string(params_.n_ctx));
        }
        for (int32_t t : in) {
            if (t < 0 || t >= model_.n_vocab()) throw Error(ErrorCode::InvalidArgument, "token outside the vocabulary");
        }
    }
    return on_engine([this, &inputs] {
        if (!embed_ctx_) {
            ContextParams cp;
            cp.n_ctx = params_.n_ctx;
            cp.n_batch = params_.n_batch;
            cp.embeddings = true;
            cp.cache_type_k = params_.cache_type_k;
            cp.cache_type_v = params_.cache_type_v;
            embed_ctx_ = std::make_unique<Context>(model_, cp);
        }
        const auto n_embd = static_cast<size_t>(model_.info().n_embd);
        // The model's pooling: every token's state (mean), or one.
        const std::string& pooling = model_.info().pooling;
        std::vector<std::vector<float>> out;
        for (const std::vector<int32_t>& in : inputs) {
            embed_ctx_->clear_sequence(0);
            Batch b;
            for (size_t i = 0; i < in.size(); ++i) {
                const bool want = pooling == "mean" || (pooling == "cls" ? i == 0 : i + 1 == in.size());
                b.add(in[i], static_cast<int32_t>(i), 0, want);
            }
            embed_ctx_->decode(b);
            std::vector<double> sum(n_embd, 0.0);
            for (int i = 0; i < embed_ctx_->n_outputs(); ++i) {
                const float* h = embed_ctx_->embeddings(i);
                for (size_t k = 0; k < n_embd; ++k) sum[k] += h[k];
            }
            double norm = 0.0;
            for (double v : sum) norm += v * v;
            norm = norm > 0.0 ? std::sqrt(norm) : 1.0;
            std::vector<float> e(n_embd);
            for (size_t k = 0; k < n_embd; ++k) e[k] = static_cast<float>(sum[k] / norm);
            out.push_back(std::move(e));
        }
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& in : inputs) stats_.prompt_tokens += in.size();
        return out;
    });
}

std::vector<SlotInfo> Engine::slots() {
    return on_engine([this] {
        std::vector<SlotInfo> out;
        for (const auto& s : slots_) out.push_back({s->id, s->active(), ctx_->sequence_length(s->id)});
        return out;
    });
}

int Engine::slot_action(int id, SlotAction action, const std::string& path) {
    if (id < 0 || id >= params_.n_slots) {
        throw Error(ErrorCode::InvalidArgument, "slot " + std::to_string(id) + " does not exist (this server has " +
                                                    std::to_string(params_.n_slots) + ")");
    }
    return on_engine([&]() -> int {
        Slot& s = *slots_[static_cast<size_t>(id)];
        if (s.active()) throw Error(ErrorCode::InvalidArgument, "slot " + std::to_string(id) + " is serving a request");
        const int held = ctx_->sequence_length(id);
        switch (action) {
            case SlotAction::Save:
                // `cached` is the sequence's tokens unless a failed step left
                // them unknown: the state is then saved without tokens.
                ctx_->save_sequence_file(id, path, static_cast<int>(s.cached.size()) == held ? s.cached
                                                                                             : std::vector<int32_t>{});
                return held;
            case SlotAction::Restore:
                s.cached = ctx_->load_sequence_file(id, path);
                return ctx_->sequence_length(id);
            case SlotAction::Erase:
                ctx_->clear_sequence(id);
                s.cached.clear();
                return held;
        }
        return 0;
    });
}

void Engine::loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] {
                return stop_ || !queue_.empty() || !jobs_.empty() ||
                       std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->active(); });
            });
            if (stop_) break;
        }
        run_jobs();
        admit_queued();
        step();
    }
    for (auto& s : slots_) {
        if (s->active()) finish(*s, "error", "the server is shutting down");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& job : jobs_) job(false);
    jobs_.clear();
    for (auto& r : queue_) fail_unadmitted(*r, "the server is shutting down");
    queue_.clear();
}

void Engine::admit_queued() {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!queue_.empty()) {
        // The free slot whose cache shares the longest prefix with the
        // prompt; among equals the one used longest ago, so that the caches
        // of recent conversations stay.
        const std::vector<int32_t>& prompt = queue_.front()->prompt;
        Slot* s = nullptr;
        size_t shared = 0;
        for (auto& sp : slots_) {
            if (sp->active()) continue;
            const size_t l = params_.cache_prompt && queue_.front()->cache_prompt ? common_prefix(sp->cached, prompt) : 0;
            if (s == nullptr || l > shared || (l == shared && sp->last_used < s->last_used)) {
                s = sp.get();
                shared = l;
            }
        }
        if (s == nullptr) break;
        std::shared_ptr<GenerationRequest> req = std::move(queue_.front());
        queue_.pop_front();
        // Not admitted when nobody waits for it: admission would rewind a
        // slot's cache that another conversation may still want.
        if (client_gone(*req)) {
            ++stats_.requests_done;
            ++stats_.requests_cancelled;
            fail_unadmitted(*req, kCancelled);
            continue;
        }
        std::unique_ptr<Sampler> sampler;
        try {
            sampler = std::make_unique<Sampler>(req->sampling, model_);
        } catch (const std::exception& e) {
            // The HTTP layer checks the settings first; a request that still
            // fails here ends alone, not the engine thread.
            ++stats_.requests_done;
            fail_unadmitted(*req, e.what());
            continue;
        }
        s->req = std::move(req);
        s->sampler = std::move(sampler);
        s->last_used = ++admitted_;
        for (int32_t t : s->req->prompt) s->sampler->accept(t);
        // The last prompt token is decoded again even when cached: its logits
        // start the answer. Decoding from `keep` rewinds the sequence there.
        // Scored prompts are decoded whole: cached tokens have no logits.
        const size_t keep = s->req->prompt_logprobs ? 0 : std::min(shared, s->req->prompt.size() - 1);
        s->cached.resize(keep);
        s->prompt_cached = keep;
        s->prompt_done = keep;
        if (keep == 0) ctx_->clear_sequence(s->id);
        stats_.prompt_tokens_cached += keep;
        s->last = -1;
        s->has_logits = false;
        s->generated = 0;
        s->text.clear();
        s->emitted = 0;
        s->logprobs.clear();
        s->logprobs_sent = 0;
        s->logprobs_sent_end = 0;
        s->prompt_logprobs.clear();
        if (s->req->prompt_logprobs) {
            s->prompt_logprobs.push_back({s->req->prompt[0], model_.token_to_piece(s->req->prompt[0]), std::nanf(""), {}});
        }
        s->stop_word.clear();
        s->line_break = false;
        s->admitted = Clock::now();
        s->prompt_read = {};
    }
    stats_.queued = static_cast<int>(queue_.size());
    stats_.active_slots = count_active(slots_);
}

// Sends what can be sent of the slot's text; false when the client cancelled.
bool Engine::emit(Slot& s, bool final) {
    size_t end = s.text.size();
    if (!final) {
        end -= incomplete_utf8_tail(s.text);
        // Hold back a tail that could still grow into a stop string.
        const size_t limit = end;
        for (const std::string& stop : s.req->stop) {
            if (stop.empty()) continue;
            const size_t unsent = limit - std::min(limit, s.emitted);
            for (size_t k = std::min(stop.size() - 1, unsent); k > 0; --k) {
                if (s.text.compare(limit - k, k, stop, 0, k) == 0) {
                    end = std::min(end, limit - k);
                    break;
                }
            }
        }
    }
    // With min_indent, a last line of spaces and tabs only waits until its
    // first other character says whether it is too little indented.
    if (!final && s.req->min_indent > 0) {
        const size_t nl = s.text.rfind('\n', end == 0 ? 0 : end - 1);
        if (nl != std::string::npos && nl + 1 < end &&
            s.text.find_first_not_of(" \t", nl + 1) >= end) {
            end = nl + 1;
        }
    }
    // The tokens whose text is now all sent; at the end also one that a stop
    // string cut short (its text began before the cut).
    std::vector<TokenLogprob> tokens;
    while (s.logprobs_sent < s.logprobs.size()) {
        const TokenLogprob& t = s.logprobs[s.logprobs_sent];
        const size_t start = s.logprobs_sent_end, token_end = start + t.token.size();
        if (token_end > end && !(final && start < end)) break;
        tokens.push_back(t);
        ++s.logprobs_sent;
        s.logprobs_sent_end = token_end;
    }
    if (end <= s.emitted && tokens.empty()) return true;
    const std::string piece = end > s.emitted ? s.text.substr(s.emitted, end - s.emitted) : std::string();
    s.emitted = std::max(s.emitted, end);
    // A callback that throws ends its request (as a cancel), never the
    // engine thread and the requests beside it.
    try {
        return !s.req->on_text || s.req->on_text(piece, tokens);
    } catch (const std::exception&) {
        return false;
    }
}

void Engine::finish(Slot& s, const std::string& reason, const std::string& error) {
    if (reason != "error") emit(s, true);
    GenerationResult r;
    r.text = s.text.substr(0, s.emitted);
    r.logprobs.assign(s.logprobs.begin(), s.logprobs.begin() + static_cast<std::ptrdiff_t>(s.logprobs_sent));
    r.prompt_logprobs = std::move(s.prompt_logprobs);
    r.prompt_tokens = static_cast<int>(s.req->prompt.size());
    r.cached_tokens = static_cast<int>(s.prompt_cached);
    r.completion_tokens = s.generated;
    r.finish_reason = reason;
    r.stop_word = reason == "stop" ? s.stop_word : "";
    r.error = error;
    const Clock::time_point now = Clock::now();
    // A request that ends before its prompt is read (an error, a cancel)
    // spent all its time on the prompt.
    const Clock::time_point prompt_end = s.prompt_read != Clock::time_point{} ? s.prompt_read : now;
    r.prompt_ms = std::chrono::duration<double, std::milli>(prompt_end - s.admitted).count();
    r.generation_ms = std::chrono::duration<double, std::milli>(now - prompt_end).count();
    const std::shared_ptr<GenerationRequest> req = std::move(s.req);
    s.sampler.reset();
    {
        // Counted before the client hears of it, so that /health and /metrics
        // read after a response include that request (the slot is free now,
        // not at the next admission).
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.requests_done;
        stats_.prompt_ms += r.prompt_ms;
        stats_.generation_ms += r.generation_ms;
        stats_.active_slots = count_active(slots_);
    }
    try {
        if (req->on_done) req->on_done(r);
    } catch (const std::exception&) {
        // Its client hears nothing more; the engine goes on.
    }
}

void Engine::cancel(Slot& s) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.requests_cancelled;
    }
    finish(s, "error", kCancelled);
}

void Engine::step() {
    // 0. Requests whose client went away end before more of their prompt or
    // text is decoded (what their slot's cache holds stays for reuse).
    for (auto& sp : slots_) {
        if (sp->active() && client_gone(*sp->req)) cancel(*sp);
    }

    // 1. Sample for every slot that has fresh logits.
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (!s.active() || !s.has_logits) continue;
        s.has_logits = false;
        if (s.req->max_tokens == 0) {  // the prompt alone was asked for (scored, or read into the cache)
            finish(s, "length");
            continue;
        }
        const float* logits = ctx_->logits(s.out_index);
        int32_t tok = -1;
        try {
            tok = s.sampler->sample(logits);
        } catch (const std::exception& e) {  // e.g. no token can continue a JSON object
            finish(s, "error", e.what());
            continue;
        }
        if (model_.is_end_of_generation(tok) && !s.req->ignore_eos) {
            finish(s, "stop");
            continue;
        }
        ++s.generated;
        {
            // Counted now: the request may finish (and its client read the
            // counters) before this step ends.
            std::lock_guard<std::mutex> lock(mutex_);
            ++stats_.generated_tokens;
        }
        std::string piece = model_.token_to_piece(tok);
        s.text += piece;
        s.line_break = s.line_break || piece.find('\n') != std::string::npos;
        if (s.req->logprobs >= 0) {
            s.logprobs.push_back(token_logprob(model_, logits, model_.n_vocab(), tok, std::move(piece), s.req->logprobs));
        }
        // Stop strings.
        bool stopped = false;
        for (const std::string& stop : s.req->stop) {
            if (stop.empty()) continue;
            const size_t from = s.emitted > stop.size() ? s.emitted - stop.size() : 0;
            const size_t at = s.text.find(stop, from);
            if (at != std::string::npos) {
                s.text.resize(at);
                s.stop_word = stop;
                stopped = true;
                break;
            }
        }
        if (stopped) {
            finish(s, "stop");
            continue;
        }
        if (s.req->min_indent > 0) {
            const size_t cut = dedent_at(s.text, s.req->min_indent);
            if (cut != std::string::npos) {
                s.text.resize(cut);
                finish(s, "length");
                continue;
            }
        }
        if (!emit(s, false)) {
            cancel(s);
            continue;
        }
        if (s.req->max_generation_ms > 0.0 && s.line_break &&
            std::chrono::duration<double, std::milli>(Clock::now() - s.prompt_read).count() > s.req->max_generation_ms) {
            finish(s, "length");
            continue;
        }
        if (s.generated >= s.req->max_tokens ||
            ctx_->sequence_length(s.id) + 1 >= params_.n_ctx) {
            finish(s, "length");
            continue;
        }
        s.last = tok;
    }

    // 2. Build the next batch: generating slots first (one token each), then
    // prompt chunks within the remaining budget.
    Batch batch;
    // The outputs, in batch order: their slot, and the prompt token whose
    // logits they are (-1: a generated token's).
    std::vector<std::pair<Slot*, int64_t>> want;
    uint64_t prompt = 0;
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (!s.active() || s.prompt_done < s.req->prompt.size() || s.last < 0) continue;
        batch.add(s.last, ctx_->sequence_length(s.id), s.id, true);
        s.cached.push_back(s.last);
        want.emplace_back(&s, -1);
        s.last = -1;
    }
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (!s.active() || s.prompt_done >= s.req->prompt.size()) continue;
        const size_t budget = static_cast<size_t>(params_.n_batch) - std::min(batch.size(), size_t(params_.n_batch));
        if (budget == 0) break;
        const size_t n = std::min(budget, s.req->prompt.size() - s.prompt_done);
        for (size_t i = 0; i < n; ++i) {
            const size_t k = s.prompt_done + i;
            const bool last = k + 1 == s.req->prompt.size();
            batch.add(s.req->prompt[k], static_cast<int32_t>(k), s.id, last || s.req->prompt_logprobs);
            s.cached.push_back(s.req->prompt[k]);
            if (last || s.req->prompt_logprobs) want.emplace_back(&s, static_cast<int64_t>(k));
        }
        s.prompt_done += n;
        prompt += n;
    }
    if (batch.size() == 0) return;

    try {
        ctx_->decode(batch);
    } catch (const Error& e) {
        // The batch was validated when the requests came in; a failure here is
        // the backend's, and every request in flight ends with it.
        for (auto& sp : slots_) {
            sp->cached.clear();  // what the cache holds is unknown now
            if (sp->active()) finish(*sp, "error", e.what());
        }
        return;
    }
    // Outputs come in batch order; `want` was filled in that order. A prompt
    // token's logits score the next prompt token; the last one's (and a
    // generated token's) are sampled from at the next step.
    for (size_t i = 0; i < want.size(); ++i) {
        auto [slot, k] = want[i];
        if (k >= 0 && static_cast<size_t>(k) + 1 < slot->req->prompt.size()) {
            const int32_t next = slot->req->prompt[static_cast<size_t>(k) + 1];
            slot->prompt_logprobs.push_back(token_logprob(model_, ctx_->logits(static_cast<int>(i)), model_.n_vocab(),
                                                          next, model_.token_to_piece(next), slot->req->logprobs));
            continue;
        }
        slot->has_logits = true;
        slot->out_index = static_cast<int>(i);
        if (k >= 0) slot->prompt_read = Clock::now();  // the prompt's last token
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.steps;
    stats_.tokens_decoded += batch.size();
    stats_.prompt_tokens += prompt;
}

}  // namespace lantern::server
