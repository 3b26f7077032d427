/* tok_tool: command-line front end of runtime/text/tokenizer for tokenizer_vs_reference.py.
 *
 *   tok_tool MODEL.gguf [--special] [--parse-special] < TEXTS
 *
 * TEXTS is a sequence of NUL-terminated texts (so they may hold newlines). For each text one
 * output line: the token ids separated by spaces, then a tab, then the detokenized text as
 * lowercase hex bytes. Exit 1 on any error (message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/tokenizer.h"

static int fail(const char *what, const sl_error *err)
{
    fprintf(stderr, "tok_tool: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tok_tool MODEL.gguf [--special] [--parse-special] < TEXTS\n");
        return 2;
    }
    bool add_special = false, parse_special = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--special")) add_special = true;
        else if (!strcmp(argv[i], "--parse-special")) parse_special = true;
        else {
            fprintf(stderr, "tok_tool: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    sl_error err = {0};
    sl_gguf *g;
    if (sl_gguf_open(argv[1], NULL, &g, &err)) return fail(argv[1], &err);
    sl_vocab *v;
    if (sl_vocab_load(g, &v, &err)) return fail("vocab", &err);
    sl_gguf_close(g);

    size_t cap = 1 << 16, len = 0;
    char *in = malloc(cap);
    for (size_t r; in && (r = fread(in + len, 1, cap - len, stdin)) > 0;) {
        len += r;
        if (len == cap) in = realloc(in, cap *= 2);
    }
    if (!in) return 1;
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        const char *text = in + at;
        const size_t n = strnlen(text, len - at);
        at += n + 1;
        size_t nt = 0;
        sl_vocab_tokenize(v, text, n, add_special, parse_special, NULL, 0, &nt, NULL);
        int32_t *ids = malloc((nt + 1) * sizeof *ids);
        if (sl_vocab_tokenize(v, text, n, add_special, parse_special, ids, nt, &nt, &err)) {
            rc = fail("tokenize", &err);
            free(ids);
            break;
        }
        for (size_t i = 0; i < nt; i++) printf(i ? " %d" : "%d", ids[i]);
        size_t nb = 0;
        sl_vocab_detokenize(v, ids, nt, NULL, 0, &nb, NULL);
        char *out = malloc(nb + 1);
        if (sl_vocab_detokenize(v, ids, nt, out, nb + 1, &nb, &err)) rc = fail("detokenize", &err);
        putchar('\t');
        for (size_t i = 0; i < nb; i++) printf("%02x", (unsigned char)out[i]);
        putchar('\n');
        free(out);
        free(ids);
    }
    free(in);
    sl_vocab_free(v);
    return rc;
}
