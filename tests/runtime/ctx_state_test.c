/* sl_ctx_state_get / _set (issue 30: a server's slot save and restore): a context's KV cache as
 * bytes and back.
 *
 * Held here: after restoring the state of a prompt into a fresh context, the next token's
 * logits equal those of the context that evaluated the prompt, bit for bit — on the CPU and on
 * the sim device's gpu and layers placements (device KV caches copied down and up); n_past is
 * the state's; a state of another KV type, of another model's layout, truncated, or longer
 * than the context is refused naming what differs, and leaves the cache as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PROMPT = 6, N_CTX = 32 };
static const int32_t k_prompt[N_PROMPT] = {1, 17, 250, 3, 99, 42};
static const int32_t k_next = 7;

static sl_model *open_model(const char *path, sl_placement pl)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.progress = false;
    o.n_threads = 2;
    if (pl != SL_PLACE_CPU) o.device = "sim";
    if (pl == SL_PLACE_LAYERS) o.gpu_layers = 1;
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

static sl_ctx *new_ctx(sl_model *m, bool f16, int32_t n_ctx)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = n_ctx;
    co.kv_f16 = f16;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx: %s", e.msg);
    return c;
}

/* The prompt's state (malloc'd, *n bytes) and the logits of k_next after it. */
static void *prompt_state(sl_model *m, bool f16, size_t *n, float *next_logits, int32_t V)
{
    sl_ctx *c = new_ctx(m, f16, N_CTX);
    if (!c) return NULL;
    sl_error e;
    CHECK(sl_ctx_eval(c, k_prompt, N_PROMPT, &e) == SL_OK);
    size_t need = 0;
    CHECK(sl_ctx_state_get(c, NULL, 0, &need, &e) == SL_OK && need > 32);
    void *buf = malloc(need);
    CHECK(sl_ctx_state_get(c, buf, need - 1, n, &e) == SL_ERR_RANGE);
    CHECK_MSG(buf && sl_ctx_state_get(c, buf, need, n, &e) == SL_OK && *n == need, "get: %s",
              e.msg);
    CHECK(sl_ctx_eval(c, &k_next, 1, &e) == SL_OK);
    const float *l = sl_ctx_logits(c, -1);
    if (l) memcpy(next_logits, l, (size_t)V * sizeof *l);
    sl_ctx_destroy(c);
    return buf;
}

static void check_roundtrip(const char *path, sl_placement pl, const char *name)
{
    sl_model *m = open_model(path, pl);
    if (!m) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const int32_t V = info.n_vocab;
    float *want = calloc((size_t)V, sizeof *want);
    size_t n = 0;
    void *st = prompt_state(m, true, &n, want, V);
    sl_ctx *c = new_ctx(m, true, N_CTX);
    sl_error e;
    if (st && c) {
        CHECK(sl_ctx_eval(c, k_prompt, 2, &e) == SL_OK); /* something to replace */
        CHECK_MSG(sl_ctx_state_set(c, st, n, &e) == SL_OK, "%s: set: %s", name, e.msg);
        CHECK_MSG(sl_ctx_n_past(c) == N_PROMPT, "%s: n_past %d", name, sl_ctx_n_past(c));
        CHECK(sl_ctx_logits(c, -1) == NULL);
        CHECK(sl_ctx_eval(c, &k_next, 1, &e) == SL_OK);
        const float *got = sl_ctx_logits(c, -1);
        CHECK_MSG(got && !memcmp(got, want, (size_t)V * sizeof *got),
                  "%s: logits after the restored state differ", name);
    }
    sl_ctx_destroy(c);
    free(st);
    free(want);
    sl_model_close(m);
}

static void check_refusals(const char *llama, const char *moe)
{
    sl_model *m = open_model(llama, SL_PLACE_CPU), *o = open_model(moe, SL_PLACE_CPU);
    if (!m || !o) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    float *scratch = calloc((size_t)info.n_vocab + 4096, sizeof *scratch);
    size_t n = 0;
    void *st = prompt_state(m, true, &n, scratch, info.n_vocab);
    sl_error e;
    /* each refusal leaves the cache as it was: 3 positions */
    sl_ctx *f32 = new_ctx(m, false, N_CTX), *small = new_ctx(m, true, 4), *same = new_ctx(m, true, N_CTX);
    sl_ctx *other = new_ctx(o, true, N_CTX);
    sl_ctx *all[] = {f32, small, same, other};
    for (int i = 0; i < 4; i++)
        if (all[i]) CHECK(sl_ctx_eval(all[i], k_prompt, 3, &e) == SL_OK);
    if (st && f32) {
        CHECK(sl_ctx_state_set(f32, st, n, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "KV type F16, this context's is F32");
    }
    if (st && small) {
        CHECK(sl_ctx_state_set(small, st, n, &e) == SL_ERR_RANGE);
        CHECK_CONTAINS(e.msg, "n_ctx 4");
    }
    if (st && other) {
        CHECK(sl_ctx_state_set(other, st, n, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "layout of another model");
    }
    if (st && same) {
        CHECK(sl_ctx_state_set(same, st, n - 1, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "positions take");
        CHECK(sl_ctx_state_set(same, st, 16, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "shorter than its header");
        ((unsigned char *)st)[0] ^= 0xff;
        CHECK(sl_ctx_state_set(same, st, n, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "not a Sluice KV state");
    }
    for (int i = 0; i < 4; i++)
        if (all[i]) CHECK_MSG(sl_ctx_n_past(all[i]) == 3, "refusal %d changed n_past", i);
    for (int i = 0; i < 4; i++) sl_ctx_destroy(all[i]);
    CHECK(sl_ctx_state_set(NULL, st, n, &e) == SL_ERR_INVALID);
    free(st);
    free(scratch);
    sl_model_close(m);
    sl_model_close(o);
}

int main(void)
{
    char dir[] = "/tmp/sl_state_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char llama[600], moe[600];
    snprintf(llama, sizeof llama, "%s/llama.gguf", dir);
    snprintf(moe, sizeof moe, "%s/qwen3moe.gguf", dir);
    tm_params p;
    sl_error e;
    tm_defaults("llama", &p);
    CHECK_MSG(tm_write(&p, llama, &e) == SL_OK, "write: %s", e.msg);
    tm_defaults("qwen3moe", &p);
    CHECK_MSG(tm_write(&p, moe, &e) == SL_OK, "write: %s", e.msg);
    check_roundtrip(llama, SL_PLACE_CPU, "llama cpu");
    check_roundtrip(llama, SL_PLACE_GPU, "llama gpu (sim)");
    check_roundtrip(llama, SL_PLACE_LAYERS, "llama layers (sim)");
    check_roundtrip(moe, SL_PLACE_EXPERTS_CPU, "qwen3moe experts-cpu (sim)");
    check_refusals(llama, moe);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cleanup of %s failed\n", dir);
    return sl_test_finish("ctx_state_test");
}
