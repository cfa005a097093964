/* The C API used from C: this file is compiled as C (not C++), so the
 * header's C compatibility is part of the test. c_api_test.cpp calls it. */
#include <stdio.h>
#include <string.h>

#include "lantern/lantern_c.h"

/* Appends a token's text to out (NUL-terminated, truncated to capacity). */
static void append_piece(const lantern_model *m, int32_t token, char *out, size_t capacity) {
    char piece[256];
    const int n = lantern_token_to_piece(m, token, 0, piece, (int)sizeof piece);
    const size_t len = strlen(out);
    if (n > 0 && len + 1 < capacity) strncat(out, piece, capacity - len - 1);
}

/* The chat template's greedy answer to `question`, up to max_tokens, into
 * out; the number of tokens generated, or a negative status. */
int c_chat_answer(const char *model_path, const char *question, int max_tokens, char *out, int capacity) {
    lantern_model_params mp = lantern_model_default_params();
    lantern_model *m;
    lantern_context *c = NULL;
    lantern_sampler *s = NULL;
    lantern_context_params cp = lantern_context_default_params();
    lantern_sampler_params sp = lantern_sampler_default_params();
    const char *roles[1] = {"user"};
    const char *contents[1];
    char prompt[4096], bos[64] = "";
    int32_t ids[1024];
    int n, status = LANTERN_OK, generated = 0, add_bos;

    out[0] = '\0';
    mp.n_threads = 2;
    m = lantern_model_load(model_path, &mp);
    if (m == NULL) return lantern_last_error_code();
    cp.n_ctx = 512;
    sp.temperature = 0.0f;
    contents[0] = question;
    if (lantern_chat_apply(m, roles, contents, 1, 1, NULL, prompt, (int)sizeof prompt) >= (int)sizeof prompt) {
        status = LANTERN_ERR_INVALID_ARGUMENT;
        goto done;
    }
    /* A template that writes the BOS itself gets no second one. */
    if (lantern_token_bos(m) >= 0) lantern_token_to_piece(m, lantern_token_bos(m), 1, bos, (int)sizeof bos);
    add_bos = bos[0] == '\0' || strncmp(prompt, bos, strlen(bos)) != 0;
    n = lantern_tokenize(m, prompt, strlen(prompt), add_bos, 1, ids, 1024);
    if (n < 0 || n > 1024) {
        status = n < 0 ? n : LANTERN_ERR_INVALID_ARGUMENT;
        goto done;
    }
    c = lantern_context_new(m, &cp);
    s = lantern_sampler_new(&sp, lantern_model_n_vocab(m));
    if (c == NULL || s == NULL) {
        status = lantern_last_error_code();
        goto done;
    }
    status = lantern_decode(c, ids, NULL, NULL, NULL, n);
    while (status == LANTERN_OK && generated < max_tokens) {
        const int32_t t = lantern_sampler_sample(s, lantern_logits(c, 0));
        if (t < 0) {
            status = t;
            break;
        }
        if (lantern_token_is_eog(m, t)) break;
        append_piece(m, t, out, (size_t)capacity);
        ++generated;
        status = lantern_decode(c, &t, NULL, NULL, NULL, 1);
    }
done:
    lantern_sampler_free(s);
    lantern_context_free(c);
    lantern_model_free(m);
    return status < 0 ? status : generated;
}
