/* ReLU sparsity (issue 11): a dense llama whose file says sluice.feed_forward_activation "relu"
 * skips, exactly, the up rows and down columns of the neurons whose gate output is <= 0. The
 * logits of prefill and decode equal the dense computation (the context's relu_dense option)
 * bit for bit for float and quantized weights, the measured skip rate is counted in the stats
 * (a random FFN leaves about half of its neurons at gate <= 0), a SwiGLU model counts nothing,
 * and the key's bad values and places fail the open with the key and value named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_TOK = 9, N_DEC = 3 };
static const int32_t k_tok[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 128, 5};
static char g_dir[256];

/* Logits of a 9-token prefill and 3 decodes ([N_TOK + N_DEC][n_vocab]), and the stats. */
static float *run(const char *path, bool dense, sl_ctx_stats *stats, size_t *nv)
{
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.progress = false;
    o.n_threads = 2;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error e = {0};
    float *out = NULL;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.all_logits = true;
    co.relu_dense = dense;
    if (sl_model_open(path, &o, &m, &e) || sl_ctx_create(m, &co, &c, &e) ||
        sl_ctx_eval(c, k_tok, N_TOK, &e)) {
        CHECK_MSG(0, "%s: %s", path, e.msg);
        goto out;
    }
    sl_model_info in;
    sl_model_info_get(m, &in);
    const size_t V = (size_t)in.n_vocab;
    *nv = V * (N_TOK + N_DEC);
    out = malloc(*nv * sizeof *out);
    for (int i = 0; i < N_TOK; i++) memcpy(out + i * V, sl_ctx_logits(c, i), V * sizeof *out);
    for (int i = 0; i < N_DEC; i++) {
        const int32_t t = k_tok[i] + 1;
        if (sl_ctx_eval(c, &t, 1, &e)) {
            CHECK_MSG(0, "%s: decode: %s", path, e.msg);
            break;
        }
        memcpy(out + (N_TOK + i) * V, sl_ctx_logits(c, -1), V * sizeof *out);
    }
    sl_ctx_stats_get(c, stats);
out:
    sl_ctx_destroy(c);
    sl_model_close(m);
    return out;
}

static void check_exact(uint32_t wtype, int n_embd, int n_ff)
{
    char path[512];
    snprintf(path, sizeof path, "%s/relu_%u.gguf", g_dir, wtype);
    tm_params p;
    tm_defaults("llama", &p);
    p.wtype = wtype;
    p.n_embd = n_embd;
    p.n_ff = n_ff;
    p.head_dim = n_embd / p.n_head;
    p.ffn_act = "relu";
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "%s", e.msg);
    sl_ctx_stats sp, dn;
    size_t n0 = 0, n1 = 0;
    float *sparse = run(path, false, &sp, &n0), *dense = run(path, true, &dn, &n1);
    if (sparse && dense) {
        CHECK(n0 == n1);
        size_t first = n0;
        for (size_t i = 0; i < n0 && first == n0; i++)
            if (memcmp(&sparse[i], &dense[i], sizeof *sparse)) first = i;
        CHECK_MSG(first == n0, "type %u: logit %zu: sparse %.9g, dense %.9g", wtype, first,
                  first < n0 ? sparse[first] : 0, first < n0 ? dense[first] : 0);
    }
    /* every layer's FFN for every token: prefill and decodes */
    const uint64_t want = (uint64_t)p.n_layer * (uint64_t)n_ff * (N_TOK + N_DEC);
    CHECK_MSG(sp.ffn_neurons == want, "type %u: %llu neurons counted, expected %llu", wtype,
              (unsigned long long)sp.ffn_neurons, (unsigned long long)want);
    const double zero = (double)sp.ffn_neurons_zero / (double)want;
    CHECK_MSG(zero > 0.3 && zero < 0.7, "type %u: %.3f of gate outputs <= 0", wtype, zero);
    /* a decode step skips exactly its zeros; prefill only what no token of it activates */
    CHECK(sp.ffn_neurons_skipped > 0 && sp.ffn_neurons_skipped <= sp.ffn_neurons_zero);
    CHECK(dn.ffn_neurons == 0 && dn.ffn_neurons_skipped == 0);
    free(sparse);
    free(dense);
}

/* A SwiGLU llama runs no ReLU path; the key's wrong values and places are refused. */
static void check_keys(void)
{
    char path[512];
    tm_params p;
    sl_error e;
    sl_ctx_stats st;
    size_t n = 0;
    tm_defaults("llama", &p);
    snprintf(path, sizeof path, "%s/silu.gguf", g_dir);
    CHECK(tm_write(&p, path, &e) == SL_OK);
    free(run(path, false, &st, &n));
    CHECK(st.ffn_neurons == 0 && st.ffn_neurons_zero == 0);
    p.ffn_act = "silu"; /* the arch's own: accepted */
    CHECK(tm_write(&p, path, &e) == SL_OK);
    free(run(path, false, &st, &n));
    CHECK(st.ffn_neurons == 0);
    static const struct {
        const char *arch, *act;
    } bad[] = {{"llama", "gelu"}, {"qwen3moe", "relu"}, {"mixtral", "relu"}, {"gemma3", "silu"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tm_defaults(bad[k].arch, &p);
        p.ffn_act = bad[k].act;
        snprintf(path, sizeof path, "%s/bad%zu.gguf", g_dir, k);
        CHECK(tm_write(&p, path, &e) == SL_OK);
        sl_model_options o = sl_model_options_default();
        o.progress = false;
        sl_model *m = NULL;
        CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_ERR_UNSUPPORTED, "%s %s", bad[k].arch,
                  bad[k].act);
        CHECK_CONTAINS(e.msg, "sluice.feed_forward_activation");
        CHECK_CONTAINS(e.msg, bad[k].act);
        sl_model_close(m);
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    unsetenv("SLUICE_ACT_F32"); /* the sparse path runs on Q8 activations */
    check_exact(SL_GGML_F32, 64, 128);
    check_exact(SL_GGML_F16, 64, 128);
    check_exact(SL_GGML_Q8_0, 64, 256);
    check_exact(SL_GGML_Q4_K, 256, 1024);
    check_keys();
    return sl_test_finish("relu_test");
}
