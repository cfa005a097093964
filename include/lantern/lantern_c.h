/* Lantern's C API: the C++ API (lantern.h) behind a plain C ABI, for C
 * programs and for language bindings (Python ctypes, Go cgo, C# P/Invoke,
 * Rust FFI). Built as the shared library liblantern_c (CMake target
 * lantern_c), which exports these functions and nothing else.
 *
 *   lantern_model *m = lantern_model_load("model.gguf", NULL);
 *   if (!m) { fprintf(stderr, "%s\n", lantern_last_error()); return 1; }
 *   lantern_context *c = lantern_context_new(m, NULL);
 *   int32_t ids[256];
 *   int n = lantern_tokenize(m, "Hello", 5, 1, 0, ids, 256);
 *   lantern_decode(c, ids, NULL, NULL, NULL, n);        (positions 0..n-1, sequence 0)
 *   lantern_sampler *s = lantern_sampler_new(NULL, lantern_model_n_vocab(m));
 *   int32_t next = lantern_sampler_sample(s, lantern_logits(c, 0));
 *
 * Errors: a function that fails returns NULL or a negative status (a
 * LANTERN_ERR_* code) and records a message for the calling thread,
 * lantern_last_error(). No C++ exception crosses this boundary.
 *
 * Strings in: UTF-8, with an explicit length where they may hold NUL bytes.
 * Strings out: written into the caller's buffer; the return value is the
 * full length in bytes (without the NUL), which may exceed `capacity`: the
 * buffer then holds a truncated, NUL-terminated prefix (when capacity > 0),
 * and a second call with a larger buffer gets all of it. Token lists out
 * work the same way, counted in tokens.
 *
 * Parameter structs: take them from their *_default_params() call, then set
 * fields. Each begins with `size`, which that call sets to the struct's size
 * in this header; the library reads no further than it, so a program built
 * against an older header (a shorter struct) gets the defaults for the
 * fields it does not know. A size of 0 (a struct not taken from its
 * defaults call), or larger than the library knows (a newer header than the
 * library), is LANTERN_ERR_INVALID_ARGUMENT. Fields are only ever added at
 * the end, past the previous version's size.
 *
 * Threads: a model's contexts share its backends, so decoding on one model
 * must not overlap (one thread, or a lock); the text calls (tokenize,
 * pieces, chat templates) may run beside it, as the server's do. A
 * sampler is used by one thread at a time. */
#ifndef LANTERN_C_H
#define LANTERN_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LANTERN_C_API __attribute__((visibility("default")))
#else
#define LANTERN_C_API
#endif

/* Statuses: 0, or the negative code of lantern::ErrorCode + 1. */
enum {
    LANTERN_OK = 0,
    LANTERN_ERR_INVALID_ARGUMENT = -1,
    LANTERN_ERR_IO = -2,
    LANTERN_ERR_FORMAT = -3,
    LANTERN_ERR_UNSUPPORTED = -4,
    LANTERN_ERR_BACKEND = -5,
    LANTERN_ERR_OUT_OF_MEMORY = -6,
    LANTERN_ERR_CONTEXT_FULL = -7,
    LANTERN_ERR_TOKENIZER = -8,
    LANTERN_ERR_TEMPLATE = -9,
    LANTERN_ERR_INTERNAL = -100 /* anything else (a bug: please report it) */
};

/* The calling thread's last failure: its message ("" if none) and status. */
LANTERN_C_API const char *lantern_last_error(void);
LANTERN_C_API int lantern_last_error_code(void);

/* The library's version, "MAJOR.MINOR.PATCH". */
LANTERN_C_API const char *lantern_version(void);

/* --- what this build can run on ------------------------------------------- */

/* The backends built in, comma-separated, "cpu" first ("cpu,cuda,opencl"),
 * and the CPU kernels' instruction set ("AVX2", "NEON SDOT", ...): the
 * buffer protocol of the text calls below. */
LANTERN_C_API int lantern_backends(char *buf, int capacity);
LANTERN_C_API int lantern_cpu_kernels(char *buf, int capacity);
/* The GPU devices of every backend built in: their count, or a negative
 * status; device i's backend, index within it (lantern_model_params.device),
 * name and details into the caller's buffers. */
LANTERN_C_API int lantern_device_count(void);
LANTERN_C_API int lantern_device_info(int i, char *backend, int backend_capacity, int *index, char *name,
                                      int name_capacity, char *details, int details_capacity);

typedef struct lantern_model lantern_model;
typedef struct lantern_context lantern_context;
typedef struct lantern_sampler lantern_sampler;

/* --- models --------------------------------------------------------------- */

typedef struct {
    size_t size;         /* sizeof(lantern_model_params): set by lantern_model_default_params */
    const char *backend; /* "cpu", "cuda", "opencl" or "auto"; NULL: "cpu" */
    int device;          /* device index within the backend */
    int n_gpu_layers;    /* the last N layers on the GPU backend; more than the model has: all */
    int n_threads;       /* CPU threads; 0: all hardware threads */
    int vocab_only;      /* nonzero: the vocabulary and chat template only (no contexts) */
    /* Called with 0..1 while the weights are read, packed and uploaded (NULL: not). */
    void (*progress)(float fraction, void *user_data);
    void *progress_user_data;
    /* LoRA adapter GGUFs applied in every context: n_lora paths, each with
     * its scale (lora_scales NULL: all 1). */
    const char *const *lora_paths;
    const float *lora_scales;
    int n_lora;
    /* Rope overrides (lantern::RopeOverrides): rope_scaling "none", "linear"
     * or "yarn" (NULL: the file's); 0 keeps the file's base, scale and
     * original context; a negative yarn_* keeps the file's (else 1, 1, 32, 1). */
    const char *rope_scaling;
    float rope_freq_base;
    float rope_freq_scale;
    int yarn_orig_ctx;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
} lantern_model_params;

LANTERN_C_API lantern_model_params lantern_model_default_params(void);
/* params NULL: the defaults. NULL on failure. */
LANTERN_C_API lantern_model *lantern_model_load(const char *path, const lantern_model_params *params);
LANTERN_C_API void lantern_model_free(lantern_model *model); /* NULL: nothing */

LANTERN_C_API int lantern_model_n_vocab(const lantern_model *model);
LANTERN_C_API int lantern_model_n_ctx_train(const lantern_model *model);
/* The longest context the rope settings are for (ModelInfo::n_ctx_max). */
LANTERN_C_API int lantern_model_n_ctx_max(const lantern_model *model);
LANTERN_C_API int lantern_model_n_embd(const lantern_model *model);
LANTERN_C_API int lantern_model_n_layer(const lantern_model *model);
/* "llama 135M Q4_1", as llama-bench prints it; owned by the model. */
LANTERN_C_API const char *lantern_model_description(const lantern_model *model);

LANTERN_C_API int32_t lantern_token_bos(const lantern_model *model); /* -1: none */
LANTERN_C_API int32_t lantern_token_eos(const lantern_model *model); /* -1: none */
/* 1 if generation ends at this token (EOS, EOT, ...), 0 if not. */
LANTERN_C_API int lantern_token_is_eog(const lantern_model *model, int32_t token);

/* --- text ----------------------------------------------------------------- */

/* Token ids of text[0, text_len): the count, or a negative status.
 * add_special: BOS (and EOS) as the vocabulary asks; parse_special: spell
 * special tokens such as "<|im_start|>" as themselves. */
LANTERN_C_API int lantern_tokenize(const lantern_model *model, const char *text, size_t text_len, int add_special,
                                   int parse_special, int32_t *tokens, int capacity);
/* Fill in the middle (code models): the prompt asking for what goes between
 * prefix and suffix (lantern::Model::fill_in_middle; max_tokens > 0 cuts it
 * to fit), as lantern_tokenize returns tokens: the count, or a negative
 * status (LANTERN_ERR_UNSUPPORTED for a model without FIM tokens). */
LANTERN_C_API int lantern_fill_in_middle(const lantern_model *model, const char *prefix, size_t prefix_len,
                                         const char *suffix, size_t suffix_len, int max_tokens, int32_t *tokens,
                                         int capacity);
/* A token's text (render_special: special tokens as their text, not ""). */
LANTERN_C_API int lantern_token_to_piece(const lantern_model *model, int32_t token, int render_special, char *buf,
                                         int capacity);
LANTERN_C_API int lantern_detokenize(const lantern_model *model, const int32_t *tokens, int n_tokens,
                                     int render_special, char *buf, int capacity);
/* A conversation (roles[i], contents[i]) rendered with the model's chat
 * template, or with override_template (a built-in name such as "chatml", or
 * Jinja source; NULL or "": the model's). */
LANTERN_C_API int lantern_chat_apply(const lantern_model *model, const char *const *roles, const char *const *contents,
                                     int n_messages, int add_generation_prompt, const char *override_template,
                                     char *buf, int capacity);
/* Function calling, in OpenAI's JSON. request_json holds "messages" (with
 * assistants' "tool_calls" and tools' answers) and optionally "tools",
 * "tool_choice" and "parallel_tool_calls" (or the older "functions",
 * "function_call"), and "chat_template_kwargs" (more template variables).
 * Writes {"prompt": TEXT, "call_prefixes": [...], "call_schema": TEXT,
 * "opens_reasoning": BOOL}: the prompt (templates that render tools get them;
 * others get lantern's instructions), and when a call is required the texts
 * its JSON object must begin with and, with one function allowed, the schema
 * it follows ("" if none), to be passed to the sampler as json_prefixes and
 * json_schema with json_object; opens_reasoning: the prompt ends inside a
 * <think> block, so the reply starts with the model's reasoning. */
LANTERN_C_API int lantern_chat_apply_json(const lantern_model *model, const char *request_json,
                                          int add_generation_prompt, const char *override_template, char *buf,
                                          int capacity);
/* A generated reply as OpenAI's message: {"role": "assistant", "content":
 * TEXT or null, "tool_calls": [{"id", "type": "function", "function":
 * {"name", "arguments"}}]} (tool_calls only when it made calls of the
 * request's tools; request_json as above; a request with the older
 * "functions" gets "function_call": {"name", "arguments"} instead), and
 * "reasoning_content" when the reply began with a <think> block: request_json
 * may carry "opens_reasoning" (as lantern_chat_apply_json wrote it: the
 * reply starts inside the block) and "reasoning_format": "none" (no split). */
LANTERN_C_API int lantern_chat_parse_reply(const char *request_json, const char *text, char *buf, int capacity);

/* --- contexts ------------------------------------------------------------- */

typedef struct {
    size_t size;   /* sizeof(lantern_context_params): set by lantern_context_default_params */
    int n_ctx;     /* positions per sequence (capped at the model's training context) */
    int n_seq;     /* sequences the KV cache holds */
    int n_batch;   /* tokens per forward pass; longer batches are split */
    int n_threads; /* 0: the model's */
    int embeddings; /* nonzero: outputs are final hidden states (lantern_embeddings), not logits */
    /* The KV cache's key and value types: "f16", "f32", "bf16", "q8_0",
     * "q5_1", "q5_0", "q4_1" or "q4_0" (NULL: "f16"; ContextParams says more). */
    const char *cache_type_k;
    const char *cache_type_v;
} lantern_context_params;

LANTERN_C_API lantern_context_params lantern_context_default_params(void);
/* The model must outlive the context. NULL on failure. */
LANTERN_C_API lantern_context *lantern_context_new(lantern_model *model, const lantern_context_params *params);
LANTERN_C_API void lantern_context_free(lantern_context *ctx); /* NULL: nothing */

/* Runs n tokens. pos NULL: each sequence continues where it is (token i of
 * a sequence at its length + the tokens before it in this call); seq NULL:
 * sequence 0; want_logits NULL: only the last token's. LANTERN_OK or a
 * negative status (LANTERN_ERR_CONTEXT_FULL past n_ctx); on failure the
 * cache keeps what it held. */
LANTERN_C_API int lantern_decode(lantern_context *ctx, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                                 const int8_t *want_logits, int n);
/* Logits (n_vocab floats) of the i-th token that asked for them in the
 * last decode, valid until the next decode; NULL if there is no such token. */
LANTERN_C_API const float *lantern_logits(lantern_context *ctx, int i);
/* The same for a context made with embeddings: n_embd floats. */
LANTERN_C_API const float *lantern_embeddings(lantern_context *ctx, int i);
LANTERN_C_API int lantern_n_outputs(const lantern_context *ctx);
LANTERN_C_API int lantern_sequence_length(const lantern_context *ctx, int seq);
LANTERN_C_API int lantern_clear_sequence(lantern_context *ctx, int seq);
LANTERN_C_API int lantern_context_n_ctx(const lantern_context *ctx);
/* A sequence's state to a file and back (Context::save_sequence_file): its
 * KV-cache rows, and its tokens when n_tokens > 0 (then all
 * lantern_sequence_length of them). Load returns how many tokens the file
 * holds (copied into tokens, at most cap of them) or a negative status; a
 * refused file (damaged, another model's, longer than the context) leaves
 * the sequence as it was. To sample after a load, decode its last token
 * again at its position. */
LANTERN_C_API int lantern_sequence_save_file(const lantern_context *ctx, int seq, const char *path,
                                             const int32_t *tokens, int n_tokens);
LANTERN_C_API int lantern_sequence_load_file(lantern_context *ctx, int seq, const char *path, int32_t *tokens,
                                             int cap);

/* --- sampling ------------------------------------------------------------- */

typedef struct {
    size_t size;       /* sizeof(lantern_sampler_params): set by lantern_sampler_default_params */
    float temperature; /* <= 0: greedy */
    int top_k;         /* <= 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    float repeat_penalty;
    int repeat_last_n;
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed;              /* 0xFFFFFFFF: a random seed */
    const int32_t *bias_tokens; /* n_bias logit biases (bias_values[i] added to bias_tokens[i]) */
    const float *bias_values;
    int n_bias;
    int json_object; /* nonzero: the output is one JSON object (needs lantern_sampler_new_for_model) */
    const char *const *json_prefixes; /* with json_object: the object begins with one of these n_json_prefixes texts */
    int n_json_prefixes;
    const char *json_schema; /* NULL or "": none; else the JSON schema the output follows (implies JSON output) */
    const char *grammar;     /* NULL or "": none; else a GBNF grammar whose root rule the output matches (not with JSON) */
    /* llama.cpp's further samplers (lantern/sampling.h says what each does) */
    float typical_p;       /* >= 1: off */
    float top_n_sigma;     /* <= 0: off */
    float xtc_probability; /* 0: off */
    float xtc_threshold;
    float dry_multiplier; /* 0: off */
    float dry_base;
    int dry_allowed_length;
    int dry_penalty_last_n;                   /* -1: every accepted token */
    const char *const *dry_sequence_breakers; /* n_dry_sequence_breakers texts; -1 keeps the defaults */
    int n_dry_sequence_breakers;
    int mirostat; /* 0: off, 1 or 2 */
    float mirostat_tau;
    float mirostat_eta;
} lantern_sampler_params;

LANTERN_C_API lantern_sampler_params lantern_sampler_default_params(void);
LANTERN_C_API lantern_sampler *lantern_sampler_new(const lantern_sampler_params *params, int n_vocab);
/* With the model's vocabulary, which json_object, json_schema and grammar
 * need; the model must
 * outlive the sampler. */
LANTERN_C_API lantern_sampler *lantern_sampler_new_for_model(const lantern_sampler_params *params,
                                                             const lantern_model *model);
LANTERN_C_API void lantern_sampler_free(lantern_sampler *sampler); /* NULL: nothing */
/* The next token from n_vocab logits (recorded for the penalties), or a
 * negative status. */
LANTERN_C_API int32_t lantern_sampler_sample(lantern_sampler *sampler, const float *logits);
/* Records a token chosen elsewhere (a prompt's) for the penalties. */
LANTERN_C_API int lantern_sampler_accept(lantern_sampler *sampler, int32_t token);
LANTERN_C_API void lantern_sampler_reset(lantern_sampler *sampler);
/* The next token begins a new output (a chat's next reply): a JSON or
 * grammar constraint starts over; penalties and the random sequence go on. */
LANTERN_C_API void lantern_sampler_restart_output(lantern_sampler *sampler);

#ifdef __cplusplus
}
#endif

#endif /* LANTERN_C_H */
