/* A long prompt's logits do not depend on how the CPU splits its prefill (issue 28). Property:
 * every row of an all-logits prefill of N tokens is bit-identical at 1 and 2 threads and in
 * 64-token chunks, for N past one 64-token matmul batch (the host executor's grouped matmul
 * over several batches, a lone last token on the decode path: N % 64 == 1, a short tail:
 * N % 64 == 2) and MoE layers with more than one slab of 1024 assignments (193 tokens, top 8:
 * groups of many tokens, the pool's activation, gather and join), on dense, MoE and MoE with a
 * shared expert (qwen2moe: its gated add over the pool), with rows wide enough that the
 * residual adds and K/V stores go over the pool too; at 2 threads the embedding rows are
 * dequantized over the pool and a matmul's last chunks are split smaller (matvec.c's tails). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { MAX_TOK = 193 };

/* a 2-token tail; 3 batches and a lone token (and 193 x 8 assignments: two MoE slabs) */
static const size_t k_lens[] = {130, MAX_TOK};

/* All logits rows of the first n of tokens, evaluated with n_threads and n_batch; malloc'd. */
static float *prefill(const char *path, int n_threads, int n_batch, const int32_t *tokens,
                      size_t n, int32_t *n_vocab)
{
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.n_threads = n_threads;
    o.progress = false;
    sl_model *m = NULL;
    sl_error e;
    sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "open %s: %s", path, e.msg);
    if (st) return NULL;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = MAX_TOK;
    co.n_batch = n_batch;
    co.all_logits = true;
    sl_ctx *c = NULL;
    st = sl_ctx_create(m, &co, &c, &e);
    CHECK_MSG(st == SL_OK, "ctx: %s", e.msg);
    float *out = NULL;
    if (!st) {
        sl_model_info info;
        sl_model_info_get(m, &info);
        *n_vocab = info.n_vocab;
        st = sl_ctx_eval(c, tokens, n, &e);
        CHECK_MSG(st == SL_OK, "eval of %zu tokens (%d threads, batch %d): %s", n, n_threads,
                  n_batch, e.msg);
        out = st ? NULL : malloc(n * (size_t)info.n_vocab * sizeof *out);
        for (size_t i = 0; out && i < n; i++) {
            const float *l = sl_ctx_logits(c, (int32_t)i);
            CHECK(l != NULL);
            if (l) memcpy(out + i * (size_t)info.n_vocab, l, (size_t)info.n_vocab * sizeof *l);
        }
        sl_ctx_destroy(c);
    }
    sl_model_close(m);
    return out;
}

static void check_model(const char *label, const char *path, const int32_t *tokens)
{
    for (size_t k = 0; k < sizeof k_lens / sizeof *k_lens; k++) {
        const size_t n = k_lens[k];
        int32_t V = 0;
        float *ref = prefill(path, 1, 512, tokens, n, &V);
        float *two = prefill(path, 2, 512, tokens, n, &V);
        float *chunked = prefill(path, 2, 64, tokens, n, &V);
        const size_t bytes = n * (size_t)V * sizeof(float);
        if (ref && two)
            CHECK_MSG(!memcmp(ref, two, bytes), "%s, %zu tokens: 2 threads != 1 thread", label,
                      n);
        if (ref && chunked)
            CHECK_MSG(!memcmp(ref, chunked, bytes),
                      "%s, %zu tokens: 64-token chunks at 2 threads != one batch at 1", label, n);
        free(ref);
        free(two);
        free(chunked);
    }
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/prefill_split_test_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int32_t tokens[MAX_TOK];
    uint32_t s = 12345;
    for (int i = 0; i < MAX_TOK; i++) {
        s = s * 1664525u + 1013904223u;
        tokens[i] = (int32_t)((s >> 8) % 300); /* tm_defaults' vocabulary */
    }
    const char *archs[] = {"llama", "qwen3moe", "qwen2moe"};
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        tm_params p;
        tm_defaults(archs[a], &p);
        p.wtype = SL_GGML_Q8_0; /* quantized activations: the GEMM and its grouped calls */
        if (p.n_expert) p.n_expert_used = p.n_expert; /* 193 tokens x 8 > one 1024 slab */
        /* rows of 768: 193 tokens' residual adds, gated add and K/V stores are big enough
         * for the host executor to split them over the pool (dx_host.c POOL_MIN_FLOATS) */
        p.n_embd = 768;
        p.head_dim = 192;
        p.n_head_kv = p.n_head;
        char path[600];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, archs[a]);
        sl_error e;
        const sl_status st = tm_write(&p, path, &e);
        CHECK_MSG(st == SL_OK, "write %s: %s", archs[a], e.msg);
        if (!st) check_model(archs[a], path, tokens);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", dir);
    return sl_test_finish("prefill_split_test");
}
