/* A model's bytes by kind, read from its GGUF tensor table (no weights loaded): what the
 * decode benchmarks divide by bandwidths. One reading of "which tensors a decode step reads",
 * so bench decode's bound and bench moe's rows agree on a model.
 *
 * Routed experts are the `*_exps.*` tensors (llama.cpp's names; a step reads n_used / n_expert
 * of them); the token embedding is read one row per token unless the output is tied to it
 * (no output.weight), when the whole matrix is read; everything else is read whole. */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tools/bench/bench.h"

int sl_bench_model_bytes(const char *cmd, const char *path, sl_bench_bytes *b)
{
    memset(b, 0, sizeof *b);
    sl_gguf *g = NULL;
    sl_error err = {0};
    sl_gguf_options go = {.no_shards = false, .notice = NULL, .notice_user = NULL};
    if (sl_gguf_open(path, &go, &g, &err)) {
        fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
        return 1;
    }
    const sl_gguf_tensor *embd = NULL;
    bool has_output = false;
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        b->total += t->nbytes;
        if (!strcmp(t->name, "token_embd.weight")) {
            embd = t;
        } else if (strstr(t->name, "_exps.")) {
            b->experts += t->nbytes;
            if (strstr(t->name, "ffn_down_exps.")) {
                b->down += t->nbytes;
                b->n_moe_layers++;
            } else {
                b->gate_up += t->nbytes;
            }
        } else {
            b->dense += t->nbytes;
        }
        has_output |= !strcmp(t->name, "output.weight");
    }
    if (embd) {
        b->tied = !has_output;
        b->embd_row = b->tied || embd->ne[1] <= 0 ? embd->nbytes
                                                  : embd->nbytes / (uint64_t)embd->ne[1];
    }
    sl_gguf_close(g);
    return 0;
}
