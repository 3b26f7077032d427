/* qwen3next (issue 34) on mkmodel's files (tools/synth), F32 and Q8_0, and Qwen3.5 (qwen35moe,
 * qwen35) in F32: Gated DeltaNet layers
 * with their recurrent state in the context, gated attention, experts with a shared expert.
 *
 * Held here:
 *   - prefill equals token-by-token decode (and a prefill in batches of 3), bit for bit on the
 *     CPU kernels (the delta rule runs token by token either way; the stated tolerance,
 *     1e-5 of the largest logit, would admit a blocked kernel);
 *   - the sim placements (gpu, experts-cpu, --n-cpu-moe 2, layers -ngl 2) give the CPU's bits;
 *   - the recurrent state is the context's: a rewind to 0 < p < n_past other than the
 *     checkpoint is refused with SL_ERR_UNSUPPORTED naming the architecture and the context is
 *     unchanged; a rewind to n_past is allowed; the checkpoint (before the last token of the
 *     last multi-token pass) restores the state exactly (the next tokens give the first run's
 *     bits), moves with the next multi-token pass and dies with a rewind to 0; a rewind to 0
 *     starts again with the first run's bits; two contexts of one model do not share state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/testing.h"
#include "tools/synth/synth.h"

enum { N_TOK = 13, N_CTX = 64 };
static const int32_t k_tok[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 128, 5, 260, 11, 300, 64};

static char g_dir[512];

static sl_model *open_model(const char *path, sl_placement pl, int n_cpu_moe, int ngl)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.progress = false;
    o.n_threads = 2;
    o.n_cpu_moe = n_cpu_moe;
    if (ngl >= 0) o.gpu_layers = ngl;
    if (pl != SL_PLACE_CPU) o.device = "sim";
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

static sl_ctx *new_ctx(sl_model *m, int32_t n_batch)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    co.n_batch = n_batch;
    co.kv_f16 = false;
    co.all_logits = true;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx: %s", e.msg);
    return c;
}

/* logits [N_TOK][V] of k_tok evaluated in chunks of `chunk` tokens (one eval call each). */
static float *run(sl_model *m, int32_t chunk, int32_t V)
{
    float *out = calloc((size_t)N_TOK * (size_t)V, sizeof *out);
    sl_ctx *c = m ? new_ctx(m, chunk) : NULL;
    if (!c || !out) {
        free(out);
        sl_ctx_destroy(c);
        return NULL;
    }
    sl_error e;
    for (int32_t at = 0; at < N_TOK; at += chunk) {
        const int32_t n = N_TOK - at < chunk ? N_TOK - at : chunk;
        CHECK_MSG(sl_ctx_eval(c, k_tok + at, (size_t)n, &e) == SL_OK, "eval: %s", e.msg);
        for (int32_t i = 0; i < n; i++) {
            const float *l = sl_ctx_logits(c, i);
            if (l) memcpy(out + (size_t)(at + i) * V, l, (size_t)V * sizeof *l);
        }
    }
    sl_ctx_destroy(c);
    return out;
}

/* max |a - b| over n, relative to max |a| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    if (!a || !b) return INFINITY;
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)a[i]));
    }
    return s > 0 ? d / s : d;
}

static void check_file(const char *arch, const char *label, const char *path)
{
    sl_model *m = open_model(path, SL_PLACE_CPU, 0, 0);
    if (!m) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const int32_t V = info.n_vocab;
    const size_t n = (size_t)N_TOK * (size_t)V;
    float *pre = run(m, N_TOK, V), *dec = run(m, 1, V), *b3 = run(m, 3, V);
    CHECK_MSG(rel_diff(pre, dec, n) <= 1e-5 && rel_diff(pre, b3, n) <= 1e-5,
              "%s: prefill vs decode %.3g, vs batches of 3 %.3g (<= 1e-5)", label,
              rel_diff(pre, dec, n), rel_diff(pre, b3, n));
    CHECK_MSG(pre && dec && !memcmp(pre, dec, n * sizeof *pre), "%s: prefill == decode bits",
              label);

    /* the recurrent state and sl_ctx_rewind */
    sl_ctx *c = new_ctx(m, N_CTX), *c2 = new_ctx(m, N_CTX);
    sl_error e;
    if (c && c2) {
        CHECK(sl_ctx_eval(c, k_tok, 8, &e) == SL_OK);
        CHECK(sl_ctx_eval(c2, k_tok, 3, &e) == SL_OK); /* another context's state */
        CHECK(sl_ctx_rewind(c, 5, &e) == SL_ERR_UNSUPPORTED);
        CHECK_CONTAINS(e.msg, arch);
        CHECK_CONTAINS(e.msg, "rewind to 0");
        CHECK(sl_ctx_n_past(c) == 8);
        CHECK(sl_ctx_rewind(c, 8, &e) == SL_OK);
        /* the checkpoint: before the last token of the 8-token pass */
        CHECK_MSG(sl_ctx_rewind(c, 7, &e) == SL_OK, "%s: rewind to the checkpoint: %s", label,
                  e.msg);
        CHECK(sl_ctx_eval(c, k_tok + 7, 1, &e) == SL_OK);
        const float *l = sl_ctx_logits(c, -1);
        CHECK_MSG(l && pre && !memcmp(l, pre + (size_t)7 * V, (size_t)V * sizeof *l),
                  "%s: from the checkpoint, token 7's logits", label);
        CHECK(sl_ctx_eval(c, k_tok + 8, N_TOK - 8, &e) == SL_OK);
        l = sl_ctx_logits(c, -1);
        CHECK_MSG(l && pre && !memcmp(l, pre + (size_t)(N_TOK - 1) * V, (size_t)V * sizeof *l),
                  "%s: after a refused rewind and the checkpoint the same last logits", label);
        /* the last pass (N_TOK - 8 > 1 tokens) moved the checkpoint to N_TOK - 1: 7 is gone */
        CHECK(sl_ctx_rewind(c, 7, &e) == SL_ERR_UNSUPPORTED);
        CHECK(sl_ctx_rewind(c, N_TOK - 1, &e) == SL_OK);
        CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK);
        /* another history one token at a time: the old checkpoint must not come back */
        CHECK(sl_ctx_eval(c, k_tok + 1, 1, &e) == SL_OK && sl_ctx_eval(c, k_tok, 1, &e) == 0);
        CHECK(sl_ctx_eval(c, k_tok + 2, 1, &e) == SL_OK);
        CHECK(sl_ctx_rewind(c, N_TOK - 1, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_rewind(c, 2, &e) == SL_ERR_UNSUPPORTED);
        CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK);
        CHECK(sl_ctx_eval(c, k_tok, N_TOK, &e) == SL_OK);
        l = sl_ctx_logits(c, 0);
        CHECK_MSG(l && pre && !memcmp(l, pre, (size_t)V * N_TOK * sizeof *l),
                  "%s: rewind to 0 starts again with the first run's bits", label);
        /* a call with a bad token id (in its last chunk) changes nothing: refused before any
         * pass, the recurrent state stays (it was lost: every later eval refused) */
        int32_t bad[N_TOK];
        memcpy(bad, k_tok + 3, (N_TOK - 3) * sizeof *bad);
        bad[N_TOK - 4] = V;
        CHECK(sl_ctx_eval(c2, bad, N_TOK - 3, &e) == SL_ERR_RANGE);
        CHECK_CONTAINS(e.msg, "outside [0, n_vocab");
        CHECK(sl_ctx_n_past(c2) == 3);
        CHECK(sl_ctx_eval(c2, k_tok + 3, N_TOK - 3, &e) == SL_OK);
        l = sl_ctx_logits(c2, -1);
        CHECK_MSG(l && pre && !memcmp(l, pre + (size_t)(N_TOK - 1) * V, (size_t)V * sizeof *l),
                  "%s: a second context keeps its own state", label);
    }
    sl_ctx_destroy(c);
    /* the model closed under a live context: that context runs on, no new one is made, and
     * its destroy closes the model (ASan: nothing freed early, nothing leaked) */
    sl_model_close(m);
    if (c2) {
        sl_ctx *c3 = NULL;
        CHECK(sl_ctx_create(m, NULL, &c3, &e) == SL_ERR_INVALID && !c3);
        CHECK_CONTAINS(e.msg, "was closed");
        CHECK(sl_ctx_rewind(c2, 0, &e) == SL_OK);
        CHECK(sl_ctx_eval(c2, k_tok, N_TOK, &e) == SL_OK);
        const float *l = sl_ctx_logits(c2, -1);
        CHECK_MSG(l && pre && !memcmp(l, pre + (size_t)(N_TOK - 1) * V, (size_t)V * sizeof *l),
                  "%s: a context of a closed model runs on", label);
    }
    sl_ctx_destroy(c2);

    /* the sim placements: the CPU's bits */
    static const struct {
        const char *name;
        sl_placement pl;
        int n_cpu_moe, ngl;
    } k_pl[] = {{"gpu", SL_PLACE_GPU, 0, -1},
                {"experts-cpu", SL_PLACE_EXPERTS_CPU, 0, -1},
                {"--n-cpu-moe 2", SL_PLACE_GPU, 2, -1},
                {"layers -ngl 2", SL_PLACE_LAYERS, 0, 2}};
    for (size_t i = 0; i < sizeof k_pl / sizeof *k_pl; i++) {
        sl_model *ms = open_model(path, k_pl[i].pl, k_pl[i].n_cpu_moe, k_pl[i].ngl);
        float *a = ms ? run(ms, N_TOK, V) : NULL, *b = ms ? run(ms, 1, V) : NULL;
        CHECK_MSG(a && b && pre && !memcmp(a, pre, n * sizeof *a) &&
                      !memcmp(b, pre, n * sizeof *b),
                  "%s sim %s: the CPU's logits bit for bit (prefill %.3g, decode %.3g)", label,
                  k_pl[i].name, rel_diff(pre, a, n), rel_diff(pre, b, n));
        free(a);
        free(b);
        if (ms) sl_model_close(ms);
    }
    free(pre);
    free(dec);
    free(b3);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/qwen3next_test_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* qwen3next in F32 and Q8_0; Qwen3.5 (its own beta / alpha and head tiling, the same
     * recurrent state) in F32 */
    static const struct {
        sl_synth_arch arch;
        uint32_t type;
        const char *label;
    } k_files[] = {{SL_SYNTH_QWEN3NEXT, SL_GGML_F32, "qwen3next F32"},
                   {SL_SYNTH_QWEN3NEXT, SL_GGML_Q8_0, "qwen3next Q8_0"},
                   {SL_SYNTH_QWEN35MOE, SL_GGML_F32, "qwen35moe F32"},
                   {SL_SYNTH_QWEN35, SL_GGML_F32, "qwen35 F32"}};
    for (size_t i = 0; i < sizeof k_files / sizeof *k_files; i++) {
        sl_synth_params p;
        sl_synth_defaults(k_files[i].arch, &p);
        p.type = k_files[i].type;
        p.n_ctx = N_CTX;
        char path[600];
        snprintf(path, sizeof path, "%s/gdn-%zu.gguf", g_dir, i);
        sl_error e;
        CHECK_MSG(sl_synth_write(&p, path, 1, NULL, NULL, NULL, NULL, NULL, &e) == SL_OK,
                  "mkmodel: %s", e.msg);
        check_file(sl_synth_arch_name(k_files[i].arch), k_files[i].label, path);
        remove(path);
    }
    rmdir(g_dir);
    return sl_test_finish("qwen3next_test");
}
