/* sl_ctx_eval_batch (issue 30): several contexts' tokens in one forward pass. Properties: every
 * context's logits after every batched step equal, bit for bit, those of the same context run
 * alone with sl_ctx_eval — prompts of different lengths together, then decodes, a sequence
 * sitting a step out, another context leading the pass, an all_logits context beside last-row
 * ones, F16 and F32 caches — on the CPU and on the sim device's placements (device core,
 * layer split, experts on the host, the output on the device, the fetching MoE scheduler), for
 * dense, MoE, sliding-window and MLA attention; a MoE pass reads each expert's weights once for
 * all its tokens (check_grouped); and the refusals (contexts of two models, one
 * context twice, more tokens than the first context's batch, a count that would wrap, a full
 * context, a bad token), after which no context moved. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { K = 3, STEPS = 4, MAX_ROWS = 8 + STEPS };

static const int32_t k_p0[] = {1, 17, 250, 3, 99};
static const int32_t k_p1[] = {42, 7};
static const int32_t k_p2[] = {7, 128, 5, 260, 11, 64, 2};
static const int32_t *const k_prompt[K] = {k_p0, k_p1, k_p2};
static const size_t k_n_prompt[K] = {5, 2, 7};
static const int32_t k_dec[K][STEPS] = {{5, 9, 200, 31}, {77, 1, 2, 3}, {260, 0, 14, 99}};

static char g_dir[512];

typedef struct placement {
    const char *label;
    sl_placement pl;
    int gpu_layers;
    const char *ot;
    const char *sched;       /* the contexts' MoE scheduler options, or NULL */
} placement;

static const placement k_places[] = {
    {"cpu", SL_PLACE_CPU, 0, NULL, NULL},
    {"sim gpu", SL_PLACE_GPU, 0, NULL, NULL},
    {"sim layers 1", SL_PLACE_LAYERS, 1, NULL, NULL},
    {"sim experts-cpu", SL_PLACE_EXPERTS_CPU, 0, NULL, NULL},
    {"sim host layer 0, device output", SL_PLACE_AUTO, 0, "blk\\.0\\.=CPU,output=GPU", NULL},
    /* the fetching scheduler: host experts copied to the device and run there */
    {"sim experts-cpu, sched mode=full", SL_PLACE_EXPERTS_CPU, 0, NULL, "mode=full"},
};

static const placement *g_place; /* the placement check_equal runs (its contexts' sched) */

static sl_model *open_at(const char *path, const placement *p)
{
    sl_model_options o = sl_model_options_default();
    o.placement = p->pl;
    o.gpu_layers = p->gpu_layers;
    o.override_tensor = p->ot;
    o.progress = false;
    o.n_threads = 2;
    if (p->pl != SL_PLACE_CPU) o.device = "sim";
    sl_model *m = NULL;
    sl_error e;
    const sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "open %s (%s): %s", path, p->label, e.msg);
    return m;
}

/* Sequence i's context options: sequence 1 keeps every row's logits, sequence 2 an F32 cache. */
static sl_ctx_options opts(int i, int n_batch)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.n_batch = n_batch;
    co.all_logits = i == 1;
    co.kv_f16 = i != 2;
    co.sched = g_place ? g_place->sched : NULL;
    return co;
}

static sl_ctx *make_ctx(sl_model *m, int i, int n_batch)
{
    const sl_ctx_options co = opts(i, n_batch);
    sl_ctx *c = NULL;
    sl_error e;
    const sl_status st = sl_ctx_create(m, &co, &c, &e);
    CHECK_MSG(st == SL_OK, "ctx %d: %s", i, e.msg);
    return c;
}

/* The logits rows of the last eval of n tokens on c (all of them with all_logits, else the
 * last) into out; the row count. */
static int rows_of(const sl_ctx *c, int i, size_t n, int32_t V, float *out)
{
    const int rows = i == 1 ? (int)n : 1;
    for (int r = 0; r < rows; r++) {
        const float *l = sl_ctx_logits(c, i == 1 ? r : -1);
        CHECK(l != NULL);
        if (l) memcpy(out + (size_t)r * V, l, (size_t)V * sizeof *l);
    }
    return rows;
}

/* The reference: each sequence alone, its logits after the prompt and after every decode. */
typedef struct ref {
    float *l[K][1 + STEPS];
    int rows[K][1 + STEPS];
} ref;

static void run_solo(sl_model *m, int32_t V, ref *r)
{
    for (int i = 0; i < K; i++) {
        sl_ctx *c = make_ctx(m, i, 16);
        if (!c) return;
        sl_error e;
        for (int s = 0; s <= STEPS; s++) {
            const int32_t *t = s ? &k_dec[i][s - 1] : k_prompt[i];
            const size_t n = s ? 1 : k_n_prompt[i];
            const sl_status st = sl_ctx_eval(c, t, n, &e);
            CHECK_MSG(st == SL_OK, "solo eval: %s", e.msg);
            r->l[i][s] = calloc((size_t)MAX_ROWS * V, sizeof(float));
            r->rows[i][s] = rows_of(c, i, n, V, r->l[i][s]);
        }
        sl_ctx_destroy(c);
    }
}

/* Step s of the batched run: sequences in order ord[0, k) (ord[0] leads the pass). */
static void batch_step(const char *label, sl_ctx *const *ctx, const int *ord, int k, int s,
                       int32_t V, const ref *r, float *buf)
{
    sl_ctx *cs[K];
    const int32_t *ts[K];
    size_t ns[K];
    int32_t past[K];
    for (int j = 0; j < k; j++) {
        const int i = ord[j];
        cs[j] = ctx[i];
        ts[j] = s ? &k_dec[i][s - 1] : k_prompt[i];
        ns[j] = s ? 1 : k_n_prompt[i];
        past[j] = sl_ctx_n_past(ctx[i]);
    }
    sl_error e;
    const sl_status st = sl_ctx_eval_batch(cs, ts, ns, (size_t)k, &e);
    CHECK_MSG(st == SL_OK, "%s step %d: %s", label, s, e.msg);
    for (int j = 0; j < k && !st; j++) {
        const int i = ord[j];
        CHECK(sl_ctx_n_past(ctx[i]) == past[j] + (int32_t)ns[j]);
        const int rows = rows_of(ctx[i], i, ns[j], V, buf);
        CHECK(rows == r->rows[i][s]);
        const size_t cnt = (size_t)rows * (size_t)V;
        const bool same = !memcmp(buf, r->l[i][s], cnt * sizeof *buf);
        CHECK_MSG(same, "%s: step %d, sequence %d (lead %d): logits differ from its solo run "
                  "(max rel %.3g)", label, s, i, ord[0],
                  sl_test_rel_diff(r->l[i][s], buf, cnt));
    }
}

static void check_equal(const char *label, const char *path, const placement *p)
{
    sl_model *m = open_at(path, p);
    if (!m) return;
    g_place = p;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const int32_t V = info.n_vocab;
    ref r;
    memset(&r, 0, sizeof r);
    run_solo(m, V, &r);
    sl_ctx *ctx[K] = {0};
    /* sequence 0 has room for the three prompts (14 tokens); sequence 2 for the decodes */
    for (int i = 0; i < K; i++) ctx[i] = make_ctx(m, i, i == 1 ? 2 : 16);
    float *buf = calloc((size_t)MAX_ROWS * V, sizeof *buf);
    char lab[160];
    snprintf(lab, sizeof lab, "%s, %s", label, p->label);
    if (ctx[0] && ctx[1] && ctx[2]) {
        const int all[K] = {0, 1, 2}, rev[K] = {2, 1, 0}, two[2] = {0, 2}, one[1] = {1};
        batch_step(lab, ctx, all, K, 0, V, &r, buf);        /* three prompts */
        batch_step(lab, ctx, all, K, 1, V, &r, buf);        /* three decodes */
        batch_step(lab, ctx, two, 2, 2, V, &r, buf);        /* sequence 1 sits out ... */
        batch_step(lab, ctx, one, 1, 2, V, &r, buf);        /* ... and catches up alone */
        batch_step(lab, ctx, rev, K, 3, V, &r, buf);        /* sequence 2 leads */
        batch_step(lab, ctx, all, K, 4, V, &r, buf);
        if (p->sched && info.n_expert) { /* the fetching scheduler ran the experts */
            sl_ctx_stats cs;
            sl_ctx_stats_get(ctx[0], &cs);
            CHECK_MSG(cs.expert_calls_gpu > 0 && cs.moe_mode && !strcmp(cs.moe_mode, "full"),
                      "%s: mode %s, %llu device expert calls", lab, cs.moe_mode ? cs.moe_mode
                      : "none", (unsigned long long)cs.expert_calls_gpu);
        }
    }
    free(buf);
    for (int i = 0; i < K; i++) {
        sl_ctx_destroy(ctx[i]);
        for (int s = 0; s <= STEPS; s++) free(r.l[i][s]);
    }
    sl_model_close(m);
}

static void expect(sl_status st, sl_status want, const sl_error *e, const char *needle)
{
    CHECK_MSG(st == want, "status %d, want %d (%s)", (int)st, (int)want, e->msg);
    if (st) CHECK_CONTAINS(e->msg, needle);
}

static void check_refusals(const char *path)
{
    const placement cpu = k_places[0];
    sl_model *m = open_at(path, &cpu), *m2 = open_at(path, &cpu);
    if (!m || !m2) {
        sl_model_close(m);
        sl_model_close(m2);
        return;
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 8;
    co.n_batch = 4;
    sl_ctx *a = NULL, *b = NULL, *o = NULL;
    sl_error e;
    CHECK(sl_ctx_create(m, &co, &a, &e) == SL_OK);
    CHECK(sl_ctx_create(m, &co, &b, &e) == SL_OK);
    CHECK(sl_ctx_create(m2, &co, &o, &e) == SL_OK);
    if (a && b && o) {
        const int32_t t3[3] = {1, 2, 3}, bad[1] = {1 << 20};
        const int32_t *ts[2] = {t3, t3};
        size_t ns[2] = {1, 1};
        sl_ctx *mixed[2] = {a, o}, *twice[2] = {a, a}, *ab[2] = {a, b};
        expect(sl_ctx_eval_batch(mixed, ts, ns, 2, &e), SL_ERR_INVALID, &e, "another model");
        expect(sl_ctx_eval_batch(twice, ts, ns, 2, &e), SL_ERR_INVALID, &e, "same context");
        sl_ctx *none[2] = {a, NULL};
        expect(sl_ctx_eval_batch(none, ts, ns, 2, &e), SL_ERR_INVALID, &e, "NULL context");
        expect(sl_ctx_eval_batch(ab, NULL, ns, 2, &e), SL_ERR_INVALID, &e, "NULL tokens");
        ns[1] = 0;
        expect(sl_ctx_eval_batch(ab, ts, ns, 2, &e), SL_ERR_INVALID, &e, "no tokens");
        ns[0] = ns[1] = 3; /* 6 tokens, a's batch is 4 */
        expect(sl_ctx_eval_batch(ab, ts, ns, 2, &e), SL_ERR_RANGE, &e, "batch of 4");
        ns[0] = 1; /* a count that would wrap the total */
        ns[1] = SIZE_MAX;
        expect(sl_ctx_eval_batch(ab, ts, ns, 2, &e), SL_ERR_RANGE, &e, "batch of 4");

        const int32_t *tb[2] = {t3, bad};
        ns[0] = ns[1] = 1;
        expect(sl_ctx_eval_batch(ab, tb, ns, 2, &e), SL_ERR_RANGE, &e, "n_vocab");
        CHECK(sl_ctx_n_past(a) == 0 && sl_ctx_n_past(b) == 0);
        expect(sl_ctx_eval_batch(ab, ts, ns, 0, &e), SL_OK, &e, "");
        /* b full: no context advances */
        const int32_t t7[7] = {1, 2, 3, 4, 5, 6, 7};
        CHECK(sl_ctx_eval(b, t7, 7, &e) == SL_OK);
        const size_t huge[1] = {SIZE_MAX}; /* n_past 7 + it wraps */
        expect(sl_ctx_eval_batch(&b, ts, huge, 1, &e), SL_ERR_RANGE, &e, "n_ctx 8");
        ns[1] = 2;
        expect(sl_ctx_eval_batch(ab, ts, ns, 2, &e), SL_ERR_RANGE, &e, "n_ctx 8");
        CHECK(sl_ctx_n_past(a) == 0 && sl_ctx_n_past(b) == 7);
        /* one sequence is sl_ctx_eval: more tokens than a batch are chunked */
        const int32_t *t1[1] = {t7};
        const size_t n7[1] = {7};
        expect(sl_ctx_eval_batch(&a, t1, n7, 1, &e), SL_OK, &e, "");
        CHECK(sl_ctx_n_past(a) == 7);
        const float *la = sl_ctx_logits(a, -1), *lb = sl_ctx_logits(b, -1);
        sl_model_info info;
        sl_model_info_get(m, &info);
        CHECK(la && lb && !memcmp(la, lb, (size_t)info.n_vocab * sizeof *la));
        /* contexts with the embeddings option batch too; a batched pass keeps no hidden states */
        sl_ctx_options ce = co;
        ce.embeddings = true;
        sl_ctx *x = NULL, *y = NULL;
        CHECK(sl_ctx_create(m, &ce, &x, &e) == SL_OK && sl_ctx_create(m, &ce, &y, &e) == SL_OK);
        if (x && y) {
            sl_ctx *xy[2] = {x, y};
            ns[0] = ns[1] = 2;
            expect(sl_ctx_eval_batch(xy, ts, ns, 2, &e), SL_OK, &e, "");
            CHECK(sl_ctx_n_past(x) == 2 && sl_ctx_logits(x, -1) && !sl_ctx_embeddings(x, -1));
            CHECK(sl_ctx_eval(y, t3, 1, &e) == SL_OK && sl_ctx_embeddings(y, -1));
        }
        sl_ctx_destroy(x);
        sl_ctx_destroy(y);
    }
    sl_ctx_destroy(a);
    sl_ctx_destroy(b);
    sl_ctx_destroy(o);
    sl_model_close(m);
    sl_model_close(m2);
}

/* The expert weight bytes an evaluation of c read (the CPU's) or copied (the fetching
 * scheduler's) so far, and its (token, expert) evaluations. */
static void expert_use(const sl_ctx *c, uint64_t *bytes, uint64_t *calls)
{
    sl_ctx_stats cs;
    sl_ctx_stats_get(c, &cs);
    *bytes = cs.expert_cpu_bytes + cs.copy_bytes;
    *calls = cs.expert_calls_cpu + cs.expert_calls_gpu;
}

/* A MoE pass groups its tokens by expert: K sequences in the same state decoding the same
 * token route alike, and their batched pass evaluates K times the (token, expert) pairs of one
 * solo decode while reading (or copying) each expert's weights once, as the solo decode does. */
static void check_grouped(const char *path, const placement *p)
{
    sl_model *m = open_at(path, p);
    if (!m) return;
    g_place = p;
    sl_ctx *c[K + 1] = {0};
    sl_error e;
    bool ok = true;
    for (int i = 0; i <= K && ok; i++) {
        c[i] = make_ctx(m, 0, 16);
        ok = c[i] && sl_ctx_eval(c[i], k_p0, 5, &e) == SL_OK;
    }
    CHECK_MSG(ok, "%s: prompts", p->label);
    if (ok) {
        const int32_t tok = 5;
        uint64_t b0, n0, b1, n1;
        expert_use(c[K], &b0, &n0);
        CHECK(sl_ctx_eval(c[K], &tok, 1, &e) == SL_OK);
        expert_use(c[K], &b1, &n1);
        const uint64_t solo_bytes = b1 - b0, solo_calls = n1 - n0;
        const int32_t *ts[K] = {&tok, &tok, &tok};
        const size_t ns[K] = {1, 1, 1};
        expert_use(c[0], &b0, &n0);
        const sl_status st = sl_ctx_eval_batch(c, ts, ns, K, &e);
        CHECK_MSG(st == SL_OK, "%s: batch: %s", p->label, e.msg);
        expert_use(c[0], &b1, &n1);
        CHECK_MSG(solo_calls > 0 && n1 - n0 == K * solo_calls,
                  "%s: %llu (token, expert) evaluations in the pass of %d, solo %llu", p->label,
                  (unsigned long long)(n1 - n0), K, (unsigned long long)solo_calls);
        CHECK_MSG(solo_bytes > 0 && b1 - b0 == solo_bytes,
                  "%s: the pass of %d read %llu expert bytes, a solo decode %llu (each expert "
                  "once)", p->label, K, (unsigned long long)(b1 - b0),
                  (unsigned long long)solo_bytes);
    }
    for (int i = 0; i <= K; i++) sl_ctx_destroy(c[i]);
    g_place = NULL;
    sl_model_close(m);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/batch_test_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* dense, MoE, MoE with biases and sliding windows, local/global layers, MLA */
    const char *archs[] = {"llama", "qwen3moe", "gpt-oss", "gemma3", "deepseek2"};
    char llama[600] = "";
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        tm_params p;
        tm_defaults(archs[a], &p);
        p.wtype = a % 2 ? SL_GGML_Q8_0 : SL_GGML_F32;
        char path[600];
        snprintf(path, sizeof path, "%s/%s.gguf", g_dir, archs[a]);
        sl_error e;
        const sl_status st = tm_write(&p, path, &e);
        CHECK_MSG(st == SL_OK, "write %s: %s", archs[a], e.msg);
        if (st) continue;
        if (!a) snprintf(llama, sizeof llama, "%s", path);
        for (size_t i = 0; i < sizeof k_places / sizeof *k_places; i++)
            check_equal(archs[a], path, &k_places[i]);
        if (!strcmp(archs[a], "qwen3moe")) {
            check_grouped(path, &k_places[0]);
            check_grouped(path, &k_places[5]);
        }
    }
    if (*llama) check_refusals(llama);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", g_dir);
    return sl_test_finish("batch_test");
}
