// The server's generation engine: one worker thread owns a Context with one
// KV-cache sequence per slot and runs continuous batching. Each step decodes
// one batch holding the next prompt chunk of slots still reading their prompt
// and the last sampled token of every generating slot; requests join and
// leave between steps.
#pragma once

#include <condition_variable>
#include <deque>
#include <future>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lantern/lantern.h"

namespace lantern::server {

// One of the most likely tokens at a position.
struct TopToken {
    int32_t id = -1;
    std::string token;  // its text (may be part of a UTF-8 character)
    float logprob = 0.0f;
};

// A generated token's log-probability under the model (the log-softmax of
// its raw logits, before any sampling setting), and the most likely tokens
// at that position when asked for.
struct TokenLogprob {
    int32_t id = -1;
    std::string token;  // its text (may be part of a UTF-8 character)
    float logprob = 0.0f;
    std::vector<TopToken> top;  // most likely first
};

struct GenerationResult {
    std::string text;
    std::vector<TokenLogprob> logprobs;  // when asked for: the tokens of `text`
    std::vector<TokenLogprob> prompt_logprobs;  // prompt_logprobs: the prompt's tokens (the first's logprob NaN)
    int prompt_tokens = 0;
    int cached_tokens = 0;  // of them, reused from the slot's cache (not decoded again)
    int completion_tokens = 0;
    std::string finish_reason;  // "stop", "length", or "error"
    std::string stop_word;      // the stop string that ended it ("stop" without one: end of generation)
    std::string error;          // set when finish_reason == "error"
    // Wall time from admission to a slot until the prompt's last token had
    // its logits (the prompt's share of the steps it shared with other
    // slots included), and from then until the end.
    double prompt_ms = 0.0;
    double generation_ms = 0.0;
};

struct GenerationRequest {
    std::vector<int32_t> prompt;
    SamplerParams sampling;
    int max_tokens = 256;  // 0: only the prompt decoded (into the slot's cache; scored when asked)
    std::vector<std::string> stop;  // stop strings (not included in the text)
    bool ignore_eos = false;
    // Start from the longest prefix of the prompt a free slot's cache holds
    // (with EngineParams::cache_prompt); false: decode all of it.
    bool cache_prompt = true;
    // > 0: the request ends ("length") at the first token past this many
    // milliseconds of generation once its text holds a line break
    // (llama.cpp's t_max_predict_ms: code completion wants whole lines fast).
    double max_generation_ms = 0.0;
    // > 0: a line after the first that starts less indented than this
    // (spaces and tabs, one column each) ends the text before it, as a code
    // completion's block closing does (llama.cpp's n_indent).
    int min_indent = 0;
    int logprobs = -1;  // -1: none; N >= 0: each token's logprob and the N most likely
    // The prompt's tokens scored too (with logprobs >= 0): each one's logprob
    // given the tokens before it (the first has none). The prompt is then
    // decoded whole, not found in a slot's cache. max_tokens may be 0.
    bool prompt_logprobs = false;
    // Called on the engine thread with each new piece of text (whole UTF-8
    // characters; text that may begin a stop string is held back) and, when
    // logprobs were asked for, the tokens whose text it completes. Returning
    // false cancels the request (the client went away).
    std::function<bool(const std::string& piece, const std::vector<TokenLogprob>& tokens)> on_text;
    // Asked on the engine thread before the request takes a slot and before
    // each step while it holds one (its prompt's chunks included): true
    // cancels it (its client went away), so that a request nobody waits for
    // frees its slot. Empty: never.
    std::function<bool()> client_gone;
    // Called once on the engine thread when the request ends.
    std::function<void(const GenerationResult&)> on_done;
};

// Where the first line after the first that starts with a character other
// than a space or tab within `indent` columns begins (blank lines do not
// count); npos when none does. GenerationRequest::min_indent.
size_t dedent_at(const std::string& text, int indent);

struct EngineParams {
    int n_slots = 4;     // requests served at once
    int n_ctx = 4096;    // positions per slot
    int n_batch = 512;   // tokens per step, shared by the slots
    // A request goes to the free slot whose cache holds the longest prefix
    // of its prompt (a conversation's earlier turns, a shared system
    // prompt), and only the rest of the prompt is decoded.
    bool cache_prompt = true;
    // The KV cache's element types (ContextParams::cache_type_k/_v).
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
};

// A slot as GET /slots reports it.
struct SlotInfo {
    int id = 0;
    bool processing = false;  // serving a request
    int cached_tokens = 0;    // tokens its KV-cache sequence holds
};

enum class SlotAction { Save, Restore, Erase };

struct EngineStats {
    uint64_t requests_done = 0;
    uint64_t requests_cancelled = 0;  // of them, ended because their client went away
    uint64_t steps = 0;
    uint64_t tokens_decoded = 0;     // prompt and generated tokens through the model
    uint64_t prompt_tokens = 0;      // of them, prompt tokens
    uint64_t prompt_tokens_cached = 0;  // prompt tokens reused from a slot's cache instead
    uint64_t generated_tokens = 0;   // tokens sampled (end-of-generation tokens excepted)
    // Finished requests' GenerationResult::prompt_ms and generation_ms, summed.
    double prompt_ms = 0.0;
    double generation_ms = 0.0;
    int active_slots = 0;
    int queued = 0;
};

class Engine {
public:
    Engine(Model& model, const EngineParams& params);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Embeddings of each input (token lists): its tokens' final hidden
    // states pooled as the model says (ModelInfo::pooling: the mean unless
    // the file asks for the first or last token's), L2-normalised. Runs on
    // the engine thread between decode steps (a model's decodes may not
    // overlap), in a context of its own made at the first call. Blocks until done; thread-safe. Throws
    // Error(InvalidArgument/ContextFull) for an empty or too long input.
    std::vector<std::vector<float>> embed(std::vector<std::vector<int32_t>> inputs);

    // Queues a request (thread-safe). Error(InvalidArgument/ContextFull) at
    // once when the prompt is empty or cannot fit a slot (check()).
    void submit(std::shared_ptr<GenerationRequest> request);
    // What submit refuses, without queueing: for callers that must know
    // all of several requests will be taken before submitting any.
    void check(const GenerationRequest& request) const;
    EngineStats stats() const;
    const EngineParams& params() const { return params_; }
    // The slots' KV cache (Context::cache_summary).
    std::string cache_summary() const { return ctx_->cache_summary(); }

    // Every slot's state.
    std::vector<SlotInfo> slots();
    // An idle slot's sequence and tokens saved to `path` (Context::
    // save_sequence_file), restored from it (the tokens become the slot's
    // cache, so a request sharing their prefix starts after them), or
    // forgotten (`path` unused). Returns the tokens saved, restored or
    // erased. Error(InvalidArgument) for a slot that does not exist or is
    // serving a request; the Context's errors for a file it refuses.
    int slot_action(int slot, SlotAction action, const std::string& path = "");
    // (Both run on the engine thread between steps, and block until done.)

private:
    // Work for the engine thread between steps (embed, slots,
    // slot_action): f() there, its result or exception here.
    template <class F>
    auto on_engine(F f) -> decltype(f());
    void run_jobs();
    std::deque<std::function<void(bool run)>> jobs_;

    struct Slot;
    void loop();
    void admit_queued();
    void step();
    void finish(Slot& slot, const std::string& reason, const std::string& error = "");
    void cancel(Slot& slot);
    bool emit(Slot& slot, bool final);

    Model& model_;
    EngineParams params_;
    std::unique_ptr<Context> ctx_;
    std::vector<std::unique_ptr<Slot>> slots_;
    uint64_t admitted_ = 0;  // requests admitted to a slot (engine thread)

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<GenerationRequest>> queue_;
    std::unique_ptr<Context> embed_ctx_;  // made by the first embedding job
    bool stop_ = false;
    EngineStats stats_;
    std::thread worker_;
};

}  // namespace lantern::server
