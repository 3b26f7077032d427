/* sl_ctx_embeddings (the embeddings option, issue 30): the final hidden state of every row of
 * an eval, after the output norm — what the output layer multiplies.
 *
 * Held here:
 *   - on the CPU (F32 llama file), each row's logits equal output.weight times its hidden row
 *     (read from the file): the hidden state is exactly what the output layer reads;
 *   - rows of a chunked prompt (n_batch 3) equal those of one-token evals of the same tokens;
 *   - on the sim device (gpu, layers, experts-cpu placements of a qwen3moe file) the rows equal
 *     the CPU placement's, copied back from where the output ran;
 *   - without the option, or out of range: NULL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PROMPT = 7, N_CTX = 32 };
static const int32_t k_prompt[N_PROMPT] = {1, 17, 250, 3, 99, 42, 7};

static sl_model *open_model(const char *path, sl_placement pl)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.progress = false;
    o.n_threads = 2;
    if (pl != SL_PLACE_CPU) o.device = "sim";
    if (pl == SL_PLACE_LAYERS) o.gpu_layers = 1; /* the last layer on the device, not the output */
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

/* The hidden rows [N_PROMPT][n_embd] of the prompt: one eval (n_batch chunks) or, one_by_one,
 * a token per eval; logits (optional) [N_PROMPT][n_vocab] with all_logits. */
static float *hidden(sl_model *m, int32_t n_batch, bool one_by_one, float *logits)
{
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t E = (size_t)info.n_embd, V = (size_t)info.n_vocab;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    co.n_batch = n_batch;
    co.kv_f16 = false;
    co.embeddings = true;
    co.all_logits = logits != NULL;
    sl_ctx *c = NULL;
    sl_error e;
    float *h = calloc(N_PROMPT * E, sizeof *h);
    CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx: %s", e.msg);
    if (!c || !h) {
        free(h);
        return NULL;
    }
    bool ok = true;
    for (int i = 0; ok && i < (one_by_one ? N_PROMPT : 1); i++) {
        const size_t n = one_by_one ? 1 : N_PROMPT;
        ok = sl_ctx_eval(c, k_prompt + i, n, &e) == SL_OK;
        CHECK_MSG(ok, "eval: %s", e.msg);
        for (size_t r = 0; ok && r < n; r++) {
            const float *row = sl_ctx_embeddings(c, (int64_t)r);
            CHECK_MSG(row != NULL, "row %zu of %zu: NULL", r, n);
            if (row) memcpy(h + (i + r) * E, row, E * sizeof *row);
            const float *l = logits ? sl_ctx_logits(c, (int64_t)r) : NULL;
            if (l) memcpy(logits + (i + r) * V, l, V * sizeof *l);
        }
        if (ok) {
            CHECK(sl_ctx_embeddings(c, -1) == sl_ctx_embeddings(c, (int64_t)n - 1));
            CHECK(sl_ctx_embeddings(c, (int64_t)n) == NULL);
            CHECK(sl_ctx_embeddings(c, -2) == NULL);
        }
    }
    sl_ctx_destroy(c);
    if (!ok) {
        free(h);
        return NULL;
    }
    return h;
}

static void check_cpu(const char *dir)
{
    tm_params p;
    tm_defaults("llama", &p);
    char path[600];
    snprintf(path, sizeof path, "%s/llama.gguf", dir);
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    sl_model *m = open_model(path, SL_PLACE_CPU);
    if (!m) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t E = (size_t)info.n_embd, V = (size_t)info.n_vocab;
    float *logits = calloc(N_PROMPT * V, sizeof *logits);
    float *h = hidden(m, 0, false, logits);
    float *h3 = hidden(m, 3, false, NULL);
    float *h1 = hidden(m, 0, true, NULL);
    CHECK_MSG(h && h3 && h1 && !memcmp(h, h3, N_PROMPT * E * sizeof *h) &&
              !memcmp(h, h1, N_PROMPT * E * sizeof *h),
              "hidden rows depend on the chunking (n_batch 3, one token per eval)");
    /* logits = output.weight (F32 [n_embd][n_vocab]) x hidden */
    sl_gguf *g = NULL;
    CHECK_MSG(sl_gguf_open(path, NULL, &g, &e) == SL_OK, "gguf: %s", e.msg);
    const sl_gguf_tensor *t = g ? sl_gguf_tensor_find(g, "output.weight") : NULL;
    CHECK(t && t->type == SL_GGML_F32 && t->ne[0] == (int64_t)E);
    const float *w = t ? sl_gguf_tensor_view(g, t) : NULL;
    double worst = 0;
    for (size_t r = 0; w && h && r < N_PROMPT; r++)
        for (size_t v = 0; v < V; v++) {
            double d = 0;
            for (size_t k = 0; k < E; k++) d += (double)w[v * E + k] * h[r * E + k];
            const double diff = fabs(d - logits[r * V + v]) / (1 + fabs(d));
            if (diff > worst) worst = diff;
        }
    CHECK_MSG(w && worst < 1e-4, "logits vs output.weight x hidden: %.3g apart", worst);
    /* not kept without the option */
    sl_ctx *c = NULL;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    if (sl_ctx_create(m, &co, &c, &e) == SL_OK) {
        CHECK(sl_ctx_eval(c, k_prompt, N_PROMPT, &e) == SL_OK);
        CHECK(sl_ctx_embeddings(c, -1) == NULL);
        sl_ctx_destroy(c);
    }
    CHECK(sl_ctx_embeddings(NULL, 0) == NULL);
    sl_gguf_close(g);
    free(logits);
    free(h);
    free(h3);
    free(h1);
    sl_model_close(m);
}

static void check_device(const char *dir)
{
    tm_params p;
    tm_defaults("qwen3moe", &p);
    char path[600];
    snprintf(path, sizeof path, "%s/qwen3moe.gguf", dir);
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    sl_model *cpu = open_model(path, SL_PLACE_CPU);
    if (!cpu) return;
    sl_model_info info;
    sl_model_info_get(cpu, &info);
    const size_t n = N_PROMPT * (size_t)info.n_embd;
    float *ref = hidden(cpu, 4, false, NULL);
    sl_model_close(cpu);
    const sl_placement pls[] = {SL_PLACE_GPU, SL_PLACE_LAYERS, SL_PLACE_EXPERTS_CPU};
    const char *names[] = {"gpu", "layers", "experts-cpu"};
    for (int i = 0; i < 3; i++) {
        sl_model *m = open_model(path, pls[i]);
        float *h = m ? hidden(m, 4, false, NULL) : NULL;
        const double d = ref && h ? sl_test_rel_diff(ref, h, n) : 1;
        CHECK_MSG(d < 1e-5, "%s (sim): hidden rows %.3g from the CPU placement's", names[i], d);
        free(h);
        sl_model_close(m);
    }
    free(ref);
}

int main(void)
{
    char dir[] = "/tmp/sl_embd_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    check_cpu(dir);
    check_device(dir);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cleanup of %s failed\n", dir);
    return sl_test_finish("embd_test");
}
