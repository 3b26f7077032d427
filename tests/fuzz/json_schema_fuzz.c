/* Fuzz entry point for JSON Schema -> GBNF (tools/common/json_schema.h), whose input comes from
 * HTTP requests: any JSON is refused with a message "at /...: ...", or converts to a grammar that
 * the GBNF parser (runtime/text/grammar.h) accepts, refusing at most a size limit. A grammar the
 * parser finds malformed is the converter's bug and aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"
#include "tools/common/json_schema.h"

static void die(const char *what, const char *msg, const char *gbnf)
{
    fprintf(stderr, "json_schema_fuzz: invariant broken: %s: %s\n%s\n", what, msg,
            gbnf ? gbnf : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_jdoc *d = NULL;
    sl_error e = {0};
    if (sl_jdoc_parse((const char *)data, size, 0, &d, &e) != SL_OK) return 0;
    char *gbnf = NULL;
    if (sl_json_schema_to_gbnf(d, 0, &gbnf, &e) != SL_OK) {
        if (gbnf) die("convert", "a grammar after an error", gbnf);
        if (strncmp(e.msg, "at /", 4) && e.code != SL_ERR_NOMEM) die("convert", e.msg, NULL);
    } else {
        sl_grammar *g = NULL;
        const sl_status st = sl_grammar_parse(gbnf, strlen(gbnf), &g, &e);
        if (st && st != SL_ERR_RANGE) die("parse", e.msg, gbnf);
        if (!st && sl_grammar_validate(g, &e)) die("validate", e.msg, gbnf);
        sl_grammar_free(g);
    }
    free(gbnf);
    sl_jdoc_free(d);
    return 0;
}
