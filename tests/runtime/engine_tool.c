/* engine_tool: test front end of the engine — writes a tiny model of an architecture
 * (testmodel.c) and/or evaluates tokens on a model file, printing every position's logits.
 *   engine_tool write ARCH OUT.gguf [Q8_0]
 *   engine_tool eval MODEL.gguf TOK... -> one line per token: "i v0 v1 ..." (%.9g)
 * Used to check the engine against independent float64 references by hand and in scripts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"

int main(int argc, char **argv)
{
    sl_error e;
    if (argc >= 4 && !strcmp(argv[1], "write")) {
        tm_params p;
        tm_defaults(argv[2], &p);
        if (argc > 4 && !strcmp(argv[4], "Q8_0")) p.wtype = SL_GGML_Q8_0;
        if (tm_write(&p, argv[3], &e)) {
            fprintf(stderr, "write: %s\n", e.msg);
            return 1;
        }
        return 0;
    }
    if (argc < 4 || strcmp(argv[1], "eval")) {
        fprintf(stderr, "usage: engine_tool write ARCH OUT [Q8_0] | eval MODEL TOK...\n");
        return 2;
    }
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.progress = false;
    sl_model *m;
    if (sl_model_open(argv[2], &o, &m, &e)) {
        fprintf(stderr, "open: %s\n", e.msg);
        return 1;
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.all_logits = true;
    co.kv_f16 = false;
    sl_ctx *c;
    if (sl_ctx_create(m, &co, &c, &e)) {
        fprintf(stderr, "ctx: %s\n", e.msg);
        return 1;
    }
    const int n = argc - 3;
    int n_print = n;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    for (int i = 0; i < n; i++) tok[i] = atoi(argv[3 + i]);
    if (sl_ctx_eval(c, tok, (size_t)n, &e)) {
        fprintf(stderr, "eval: %s\n", e.msg);
        return 1;
    }
    sl_model_info in;
    sl_model_info_get(m, &in);
    sl_ctx_stats stt;
    sl_ctx_stats_get(c, &stt);
    const double secs = stt.prefill_seconds + stt.decode_seconds;
    fprintf(stderr, "eval: %d tokens in %.3f s (%.1f tok/s), expert calls cpu %llu gpu %llu\n", n,
            secs, secs > 0 ? n / secs : 0.0, (unsigned long long)stt.expert_calls_cpu,
            (unsigned long long)stt.expert_calls_gpu);
    if (getenv("ENGINE_TOOL_QUIET")) n_print = 0;
    for (int i = 0; i < n_print; i++) {
        const float *l = sl_ctx_logits(c, i);
        printf("%d", i);
        for (int j = 0; j < in.n_vocab; j++) printf(" %.9g", l[j]);
        printf("\n");
    }
    free(tok);
    sl_ctx_destroy(c);
    sl_model_close(m);
    return 0;
}
