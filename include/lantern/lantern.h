// Lantern's public C++ API: load a GGUF model, create a context, tokenize,
// decode batches of tokens, sample.
//
//   auto model = lantern::Model::load("model.gguf", {});
//   lantern::Context ctx(*model, {});
//   auto ids = model->tokenize("Hello", /*add_special=*/true, /*parse_special=*/false);
//   lantern::Batch batch;
//   for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], i, 0, i + 1 == ids.size());
//   ctx.decode(batch);
//   lantern::Sampler sampler({.temperature = 0}, model->n_vocab());
//   int32_t next = sampler.sample(ctx.logits(0));
//
// Every failure is a lantern::Error (include/lantern/error.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lantern/chat.h"
#include "lantern/error.h"
#include "lantern/sampling.h"

namespace lantern {

// A LoRA adapter GGUF (llama.cpp's format: general.type "adapter") and the
// scale its update is applied with (times its alpha / rank).
struct LoraAdapterParams {
    std::string path;
    float scale = 1.0f;
};

// Overrides of the file's rotary position settings (llama.cpp's --rope-* and
// --yarn-* options). Unset fields keep what the file says; Error
// (InvalidArgument) for a value out of range, Error(Unsupported) for YaRN on
// an architecture that cannot take it (gemma2, gemma3).
struct RopeOverrides {
    std::string scaling;        // "none", "linear" or "yarn"; empty: the file's
    float freq_base = 0.0f;     // theta base; 0: the file's
    float freq_scale = 0.0f;    // 1 / context scaling factor; 0: the file's
    int yarn_orig_ctx = 0;      // context the model was trained for; 0: the file's
    // YaRN: how much the high-frequency pairs keep their trained rotation
    // (0: plain interpolation), a multiplier on the attention magnitude
    // 1 + 0.1 ln(factor), and the correction range in rotations. Negative:
    // the file's, else 1, 1, 32 and 1.
    float yarn_ext_factor = -1.0f;
    float yarn_attn_factor = -1.0f;
    float yarn_beta_fast = -1.0f;
    float yarn_beta_slow = -1.0f;
};

struct ModelParams {
    // "cpu", "cuda", "opencl", or "auto" (the first GPU backend built in and
    // present, else the CPU).
    std::string backend = "cpu";
    int device = 0;           // device index within the backend (see list_devices)
    int n_gpu_layers = 0;     // the last N layers run on the GPU backend; > n_layer: all, output too
    int n_threads = 0;        // CPU threads; 0: all hardware threads
    // Called with 0..1 while weights are read, packed for the CPU and uploaded.
    std::function<void(float)> progress;
    // Load only the vocabulary and chat template (tokenize, templates); the
    // file may be a vocabulary-only GGUF. Contexts cannot be made from it.
    bool vocab_only = false;
    // Adapters applied in every context of the model, on whichever backend
    // runs each adapted layer. Error(Format) for one that does not fit the
    // model (a tensor it lacks, a shape, another architecture).
    std::vector<LoraAdapterParams> lora_adapters;
    RopeOverrides rope;
};

struct ModelInfo {
    std::string architecture;  // general.architecture
    std::string name;          // general.name
    std::string description;   // "llama 135M Q4_1", as llama-bench prints it ("... + LoRA" with adapters)
    std::string file_type;     // dominant weight type, e.g. "Q4_1"
    std::string backend;       // backend of the offloaded layers ("cpu" if none)
    std::string device;        // that backend's device
    uint64_t n_params = 0;
    uint64_t file_bytes = 0;
    int n_layer = 0;
    int n_embd = 0;
    int n_vocab = 0;
    int n_ctx_train = 0;
    // The longest context the rope settings are meant for: n_ctx_train, or
    // the original context times the factor under linear or YaRN scaling
    // when that is longer (a Qwen2.5 file with YaRN 4 over 32,768: 131,072).
    int n_ctx_max = 0;
    int n_gpu_layers = 0;      // layers actually on the GPU backend
    bool has_chat_template = false;  // the file carries tokenizer.chat_template
    // How an embedding model pools its tokens' states ({arch}.pooling_type):
    // "mean" (also when the file does not say), "cls" (the first token's),
    // or "last" (the last token's).
    std::string pooling = "mean";
};


// Fill in the middle (code models): the text before and after the gap, and
// other files of the project as context (a repository-level prompt where
// the vocabulary has the separators, Qwen2.5-Coder's format; else each file
// as text under a "--- name ---" line).
struct FimFile {
    std::string name;
    std::string text;
};
struct FillInMiddle {
    std::string prefix = {};  // (initialised: designated initializers may leave them out)
    std::string suffix = {};
    std::vector<FimFile> files = {};
    std::string file_name = "main";  // the current file's name, written when files are given
    std::string repo_name = "project";
};
struct FimPrompt {
    std::vector<int32_t> tokens;
    bool truncated = false;  // the prefix's start, the suffix's end or the files were cut to fit
};

struct DeviceInfo {
    std::string backend;       // "cuda", "opencl"
    int index = 0;             // pass as ModelParams::device
    std::string name;
    std::string details;       // memory, compute units, version, extensions
};

// Devices of every GPU backend built into this binary.
std::vector<DeviceInfo> list_devices();
// Backends built into this binary ("cpu" first).
std::vector<std::string> available_backends();
// The instruction set the CPU backend's kernels were built for ("AVX-512
// VNNI", "AVX2", "NEON SDOT", "scalar", ...): a build without -march for its
// machine runs the slower ones.
std::string cpu_kernels();
// Weight types whose matrices the CPU backend packs at load on this machine
// for its fastest tiles ("Q4_0", "Q4_K", ...; empty on tiers without packed
// kernels). LANTERN_CPU_REPACK=0 keeps every weight in the file's layout.
std::vector<std::string> cpu_packed_types();

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const ModelParams& params);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelInfo& info() const;
    int n_vocab() const;

    // Text <-> tokens.
    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;
    std::string token_to_piece(int32_t token, bool render_special = false) const;
    std::string detokenize(const std::vector<int32_t>& tokens, bool render_special = false) const;
    bool is_end_of_generation(int32_t token) const;
    int32_t bos_token() const;
    int32_t eos_token() const;
    // The file's chat template (tokenizer.chat_template, Jinja source);
    // empty when it has none.
    std::string chat_template() const;

    // Whether the vocabulary has fill-in-the-middle tokens (prefix, suffix,
    // middle), from its keys or their published texts.
    bool has_fill_in_middle() const;
    // The prompt that asks the model for the middle: [BOS] [files] PRE
    // prefix SUF suffix MID; generation then writes the middle and ends with
    // an end-of-generation token (the separators count as such). With
    // max_tokens > 0 the prompt is cut to fit: the suffix keeps its first
    // quarter of the room at most, the prefix its last tokens, the files
    // what is left. Error(Unsupported) for a model without FIM tokens,
    // Error(InvalidArgument) when even the markers do not fit.
    FimPrompt fill_in_middle(const FillInMiddle& request, int max_tokens = 0) const;

    // Renders a conversation with the model's chat template, or with
    // `override_template` (a built-in name such as "chatml", or Jinja source).
    std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                    const std::string& override_template = "") const;
    // The same with tools (lantern/chat.h): templates that render tools get
    // them; one that does not gets lantern's instructions in the system
    // message (and the conversation's calls as text). A required call ends
    // the prompt with the call's opening and gives the JSON prefixes the
    // sampler must hold it to. Parse the reply with parse_chat_reply.
    // `template_kwargs`: more template variables as a JSON object's text
    // (ChatRequest::template_kwargs; e.g. {"enable_thinking": false}).
    ChatPrompt apply_chat_template(const std::vector<ChatMessage>& messages, const ChatTools& tools,
                                   bool add_generation_prompt, const std::string& override_template = "",
                                   const std::string& template_kwargs = "") const;

    struct Impl;
    Impl& impl() const { return *impl_; }

private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

struct ContextParams {
    int n_ctx = 4096;    // positions per sequence (capped at the model's training context)
    int n_seq = 1;       // sequences the KV cache holds at once
    int n_batch = 512;   // tokens per forward pass; longer batches are split
    int n_threads = 0;   // 0: the model's
    // Each output is the model's final hidden state (after the last norm,
    // n_embd floats: Context::embeddings) instead of next-token logits.
    bool embeddings = false;
    // Element types of the KV cache's keys and values, by llama.cpp's names
    // (its -ctk/-ctv): "f16", "f32", "bf16", "q8_0", "q5_1", "q5_0", "q4_1"
    // or "q4_0" (the block types need a head dimension that is a multiple
    // of 32). q8_0 takes 53% of f16's memory. The CUDA backend holds f16
    // and q8_0 caches (keys and values of one type), OpenCL f16 and f32; a
    // GPU layer with another type keeps its cache in host memory and
    // attends on the CPU.
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
};

// Tokens of one decode call. Each token has a position within its sequence
// and a sequence id; `logits` asks for that token's next-token logits.
struct Batch {
    std::vector<int32_t> tokens;
    std::vector<int32_t> pos;
    std::vector<int32_t> seq;
    std::vector<uint8_t> logits;

    void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
        tokens.push_back(token);
        pos.push_back(position);
        seq.push_back(sequence);
        logits.push_back(want_logits ? 1 : 0);
    }
    size_t size() const { return tokens.size(); }
    void clear() {
        tokens.clear();
        pos.clear();
        seq.clear();
        logits.clear();
    }
};

// Time and tokens of a context's decode calls. A call counts as generation
// when it appends one token to each of its sequences right after a token
// whose logits were asked for (a sampled token fed back); every other call,
// a one-token prompt included, counts as prompt.
struct PerfStats {
    double load_ms = 0;
    double prompt_ms = 0;
    int64_t prompt_tokens = 0;
    double gen_ms = 0;
    int64_t gen_tokens = 0;
    // Per backend: graph captures/replays/misses and memory (see --verbose).
    std::vector<std::pair<std::string, std::string>> backend_stats;
};

class Context {
public:
    Context(Model& model, const ContextParams& params);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Runs the batch. Positions of a sequence must continue from what it
    // holds (or rewind into it); Error(ContextFull) when a position is past
    // n_ctx. Nothing already in the cache is lost on error.
    void decode(const Batch& batch);
    // Logits of the i-th token that asked for them in the last decode.
    const float* logits(int i) const;
    // The same for a context made with ContextParams::embeddings: the i-th
    // output's hidden state, n_embd floats.
    const float* embeddings(int i) const;
    int n_outputs() const;

    // Forgets a sequence (its next decode starts at position 0).
    void clear_sequence(int seq);
    // Tokens a sequence holds.
    int sequence_length(int seq) const;
    int n_ctx() const;
    int n_seq() const;
    // Bytes the KV cache takes, keys and values of every layer and sequence,
    // wherever they live; with a one-line description ("1.5 GiB: K q8_0,
    // V q8_0, 4 x 8192 cells, of which 0.5 GiB on the host") for logs.
    size_t cache_bytes() const;
    std::string cache_summary() const;

    // A sequence's state: its KV-cache rows (and, if given, its tokens: all
    // sequence_length(seq) of them, for the caller to match a prompt against)
    // as bytes, checksummed and marked with the model shape they fit. The
    // logits of its last token are not part of it: to sample after a load,
    // decode that token again (at its position, rewinding one).
    std::vector<uint8_t> save_sequence(int seq, const std::vector<int32_t>& tokens = {}) const;
    // Replaces what `seq` holds with a saved state (from any context of the
    // same model, any backend) and returns its tokens (empty if none were
    // saved). Error(Format) for damaged bytes, Error(InvalidArgument) for a
    // state of another model shape, Error(ContextFull) for one longer than
    // n_ctx: all before anything is written, so the sequence keeps what it had.
    std::vector<int32_t> load_sequence(int seq, const std::vector<uint8_t>& state);
    // The same through a file (written whole to a temporary name, then
    // renamed: a failed save leaves an older file intact). Error(Io) when the
    // file cannot be read or written.
    void save_sequence_file(int seq, const std::string& path, const std::vector<int32_t>& tokens = {}) const;
    std::vector<int32_t> load_sequence_file(int seq, const std::string& path);
    // Whether the file begins as a saved sequence does (its magic), so that a
    // caller about to replace it can tell its own states from other files.
    static bool is_sequence_file(const std::string& path);

    PerfStats perf() const;
    void reset_perf();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// SamplerParams: see lantern/sampling.h.

// Throws Error(InvalidArgument) naming what a JSON schema holds that
// SamplerParams::json_schema cannot enforce (or that it is not a schema).
void check_json_schema(std::string_view schema);

// Throws Error(InvalidArgument) naming what is wrong with a GBNF grammar
// (SamplerParams::grammar): the line and column of a syntax error, a rule
// used but not defined, no root rule, left recursion, a start too ambiguous
// to track (grammar_constraint.h's bounds).
void check_grammar(std::string_view grammar);

class Sampler {
public:
    Sampler(const SamplerParams& params, int n_vocab);
    // With the model's vocabulary, which SamplerParams::json_object,
    // json_schema and grammar need.
    Sampler(const SamplerParams& params, const Model& model);
    ~Sampler();
    Sampler(Sampler&&) noexcept;
    Sampler& operator=(Sampler&&) noexcept;

    // Picks a token from n_vocab logits and records it for the penalties.
    int32_t sample(const float* logits);
    void accept(int32_t token);
    // Forgets the penalty history and restarts the random sequence from the
    // seed; a JSON or grammar constraint starts over.
    void reset();
    // The next token begins a new output (a chat's next reply): a JSON or
    // grammar constraint starts over; the penalty history and the random
    // sequence go on.
    void restart_output();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace lantern
