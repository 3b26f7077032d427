/* Fuzz entry point for the GBNF parser and matcher (runtime/text/grammar.h): any input is
 * refused with a "grammar: ..." message and no grammar, or yields a grammar that passes
 * sl_grammar_validate and a matcher that accepts or refuses pieces of the input (and filters
 * them as candidates) without crashing. A broken invariant aborts, which libFuzzer reports. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "grammar_fuzz: invariant broken: %s: %s\n", what, msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_grammar *g = NULL;
    sl_error e = {0};
    if (sl_grammar_parse((const char *)data, size, &g, &e) != SL_OK) {
        if (g) die("parse", "a grammar after an error");
        if (strncmp(e.msg, "grammar: ", 9)) die("parse", e.msg);
        return 0;
    }
    if (sl_grammar_validate(g, &e) != SL_OK) die("validate", e.msg);
    sl_gmatch *m = NULL;
    if (sl_gmatch_create(g, &m, &e) == SL_OK) {
        /* the input's own bytes as text: 8-byte pieces, each filtered, then accepted */
        for (size_t off = 0; off < size && off < 256; off += 8) {
            const size_t n = size - off < 8 ? size - off : 8;
            uint32_t cp[9];
            sl_gcand c = {.index = 0, .cp = cp, .partial = sl_gmatch_partial(m)};
            sl_grammar_decode((const char *)data + off, n, &c.partial, cp);
            bool rejected = false;
            if (sl_gmatch_reject(m, &c, 1, &rejected, &e) != SL_OK) break;
            const sl_status st = sl_gmatch_accept(m, (const char *)data + off, n, &e);
            if (!st && rejected) die("accept", "accepted a piece the filter rejected");
            if (st) break;
            (void)sl_gmatch_can_end(m);
            (void)sl_gmatch_done(m);
        }
    }
    sl_gmatch_free(m);
    sl_grammar_free(g);
    return 0;
}
