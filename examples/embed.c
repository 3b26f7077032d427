/* examples/embed.c: the smallest program embedding Sluice through its public C API
 * (runtime/sluice.h), linked against the shared library libsluice.so.
 *
 *   embed MODEL.gguf [PROMPT]
 *
 * Opens the model on the CPU, tokenizes the prompt (with BOS when the model adds one),
 * evaluates it, then samples 8 tokens greedily, evaluating each; prints the prompt's tokens,
 * then one line per generated token "token I: ID<TAB>piece", then the whole generated text
 * (bytes outside printable ASCII written as \xNN, so each is one line). Exit 0 on
 * success, 1 on any error (the message names what failed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"

enum { N_GEN = 8, MAX_PROMPT = 1024, PIECE = 256 };

/* Text with bytes outside printable ASCII as \xNN, so that one token stays one line. */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') putchar(c);
        else printf("\\x%02x", c);
    }
}

static int fail(const char *what, const sl_error *err)
{
    fprintf(stderr, "embed: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: embed MODEL.gguf [PROMPT]\n");
        return 2;
    }
    const char *prompt = argc == 3 ? argv[2] : "Hello, world";
    sl_error err = {0};
    int rc = 1;
    sl_model *model = NULL;
    sl_ctx *ctx = NULL;
    sl_sampler *smp = NULL;

    sl_model_options mo = sl_model_options_default();
    mo.placement = SL_PLACE_CPU;
    mo.progress = false;
    if (sl_model_open(argv[1], &mo, &model, &err)) return fail(argv[1], &err);
    sl_model_info info;
    sl_model_info_get(model, &info);
    printf("model: %s, %" PRId32 " layers, vocab %" PRId32 "\n", info.arch, info.n_layer,
           info.n_vocab);

    int32_t tokens[MAX_PROMPT + N_GEN];
    size_t n = 0;
    if (sl_tokenize(model, prompt, strlen(prompt), true, true, tokens, MAX_PROMPT, &n, &err)) {
        rc = fail("tokenize", &err);
        goto out;
    }
    printf("prompt: %zu tokens:", n);
    for (size_t i = 0; i < n; i++) printf(" %" PRId32, tokens[i]);
    printf("\n");

    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)(n + N_GEN);
    if (sl_ctx_create(model, &co, &ctx, &err)) {
        rc = fail("context", &err);
        goto out;
    }
    sl_sampler_options so = sl_sampler_options_default();
    so.temp = 0; /* greedy */
    if (sl_sampler_create(&so, &smp, &err)) {
        rc = fail("sampler", &err);
        goto out;
    }
    if (sl_ctx_eval(ctx, tokens, n, &err)) {
        rc = fail("prefill", &err);
        goto out;
    }
    const size_t n_prompt = n;
    for (int i = 0; i < N_GEN; i++) {
        int32_t tok;
        if (sl_sampler_sample(smp, sl_ctx_logits(ctx, -1), info.n_vocab, &tok, &err)) {
            rc = fail("sample", &err);
            goto out;
        }
        tokens[n++] = tok;
        char piece[PIECE];
        size_t len = 0;
        if (sl_token_to_piece(model, tok, false, piece, sizeof piece, &len, &err)) {
            rc = fail("token_to_piece", &err);
            goto out;
        }
        printf("token %d: %" PRId32 "\t", i, tok);
        print_escaped(piece, len);
        printf("\n");
        if (i + 1 < N_GEN && sl_ctx_eval(ctx, &tok, 1, &err)) {
            rc = fail("decode", &err);
            goto out;
        }
    }
    char text[N_GEN * PIECE];
    size_t len = 0;
    if (sl_detokenize(model, tokens + n_prompt, N_GEN, text, sizeof text, &len, &err)) {
        rc = fail("detokenize", &err);
        goto out;
    }
    printf("text: ");
    print_escaped(text, len);
    printf("\n");
    rc = 0;
out:
    sl_sampler_destroy(smp);
    sl_ctx_destroy(ctx);
    sl_model_close(model);
    return rc;
}
