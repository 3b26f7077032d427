/* Hot/cold placement (PowerInfer) end to end on the sim device: a .gpuidx written with the
 * project's writer splits every dense FFN (llama, gemma3) into hot neurons in the device arena
 * and cold ones on the host; with SLUICE_ACT_F32=1 the logits match the CPU run within 1e-5
 * relative, two runs of the same split are bit-identical, a layer with no or all neurons hot is
 * not split, and bad indexes (wrong layer count, wrong width, no index at all) fail the open
 * with a message naming the file. A MoE index (expert-major) splits every routed expert of
 * every MoE architecture the same way (F32, Q8_0, Q4_K; experts all hot, all cold or split;
 * biases and gpt-oss's clamped SwiGLU; shared experts and deepseek2's dense layer whole on the
 * device); a mis-sized MoE index is refused naming file, layer and experts, and one beside
 * the model is picked up. The fetching scheduler runs a split model (its parts through the CPU
 * scheduler) with the CPU scheduler's logits bit for bit. The neuron statistics (profile) count
 * activations of every layer. A ReLU llama split hot/cold skips inactive neurons in both
 * parts with the split-but-dense logits bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "base/prng.h"
#include "runtime/sluice.h"
#include "scheduler/policy/gpuidx.h"
#include "tests/runtime/testidx.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"
#include "tools/lib/requant.h"

enum { N_TOK = 9 };
static const int32_t k_tok[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 128, 5};
static char g_dir[256];
static bool g_relu_dense; /* the contexts' relu_dense option */
static uint64_t g_gpu_bytes; /* the last model run's weight bytes on the device */
static bool g_decode;        /* run() evaluates token by token (decode) instead of at once */
static const char *g_sched;  /* the contexts' MoE scheduler options (NULL: the CPU one) */
static sl_ctx_stats g_stats; /* the last run's context counters */

static float *run(const char *path, sl_placement pl, const char *idx, size_t *nv,
                  sl_status *st_out, char *msg)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.gpu_index = idx;
    o.progress = false;
    o.n_threads = 2;
    o.device = "sim";
    sl_model *m = NULL;
    sl_error e = {0};
    sl_status st = sl_model_open(path, &o, &m, &e);
    if (st_out) *st_out = st;
    if (msg) snprintf(msg, SL_ERROR_MSG_BYTES, "%s", e.msg);
    if (st) return NULL;
    sl_model_info in;
    sl_model_info_get(m, &in);
    g_gpu_bytes = in.gpu_bytes;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.all_logits = true;
    co.relu_dense = g_relu_dense;
    co.sched = g_sched;
    sl_ctx *c = NULL;
    float *out = NULL;
    if (sl_ctx_create(m, &co, &c, &e)) {
        CHECK_MSG(0, "%s: %s", path, e.msg);
    } else {
        *nv = (size_t)in.n_vocab * N_TOK;
        out = malloc(*nv * sizeof *out);
        for (int i = 0; i < N_TOK; i += g_decode ? 1 : N_TOK) {
            const int n = g_decode ? 1 : N_TOK;
            if (sl_ctx_eval(c, k_tok + i, n, &e)) {
                CHECK_MSG(0, "%s: %s", path, e.msg);
                free(out);
                out = NULL;
                break;
            }
            for (int j = 0; j < n; j++)
                memcpy(out + (size_t)(i + j) * in.n_vocab, sl_ctx_logits(c, j),
                       (size_t)in.n_vocab * sizeof *out);
        }
        sl_ctx_stats_get(c, &g_stats);
    }
    sl_ctx_destroy(c);
    sl_model_close(m);
    return out;
}

enum {
    MOE_RANDOM = TIDX_MOE_RANDOM,
    MOE_COLD = TIDX_MOE_COLD,
    MOE_HOT = TIDX_MOE_HOT,
    MOE_EDGES = TIDX_MOE_EDGES
};

/* Whether granule of expert x in layer il is hot, given a fair coin. Dense (mode = edges):
 * each granule hot with probability 1/2; layer 0 all hot and the last layer all cold when
 * edges (not split, PowerInfer's rule). MoE: tidx_pick_moe. */
typedef tidx_pick_fn pick_fn;

static bool pick_dense(int edges, int il, int n_layer, int x, bool coin)
{
    (void)x;
    return edges && il == 0 ? true : edges && il == n_layer - 1 ? false : coin;
}

/* An index of n_layer layers of X experts (0: a dense index) of n_ff neurons, in granules of
 * g chosen by pick (tests/runtime/testidx.h). */
static void write_idx(const char *path, int n_layer, int X, int n_ff, int g, pick_fn pick,
                      int mode, uint64_t seed)
{
    sl_error e;
    CHECK_MSG(tidx_write(path, n_layer, X, n_ff, g, pick, mode, seed, &e) == SL_OK, "%s",
              e.msg);
}

static void write_index(const char *path, int n_layer, int n_ff, int g, bool edges, uint64_t seed)
{
    write_idx(path, n_layer, 0, n_ff, g, pick_dense, edges, seed);
}

static void write_moe_index(const char *path, int n_layer, int X, int n_ff, int g, int mode,
                            uint64_t seed)
{
    write_idx(path, n_layer, X, n_ff, g, tidx_pick_moe, mode, seed);
}

/* Writes a test model of arch (prefix_ARCH_TYPE.gguf; n_embd, n_ff, head_dim 0: defaults)
 * and names its index and label. */
static void test_model(const char *prefix, const char *arch, uint32_t wtype, int n_embd,
                       int n_ff, int head_dim, tm_params *p, char path[512], char idx[512],
                       char label[64])
{
    snprintf(label, 64, "%s/type %u", arch, wtype);
    snprintf(path, 512, "%s/%s%s_%u.gguf", g_dir, prefix, arch, wtype);
    snprintf(idx, 512, "%s/%s%s_%u.gpuidx", g_dir, prefix, arch, wtype);
    tm_defaults(arch, p);
    p->wtype = wtype;
    if (n_embd) p->n_embd = n_embd;
    if (n_ff) p->n_ff = n_ff;
    if (head_dim) p->head_dim = head_dim;
    sl_error e;
    CHECK_MSG(tm_write(p, path, &e) == SL_OK, "%s", e.msg);
}

/* Two hot-cold runs of path with index idx: within 1e-5 of base (the CPU run) and
 * bit-identical to each other. The first run's device bytes in *dev (may be NULL). */
static void check_split(const char *label, int mode, const char *path, const char *idx,
                        const float *base, size_t n0, uint64_t *dev)
{
    char msg[SL_ERROR_MSG_BYTES] = "";
    sl_status st;
    size_t n1 = 0, n2 = 0;
    float *a = run(path, SL_PLACE_HOT_COLD, idx, &n1, &st, msg);
    if (dev) *dev = g_gpu_bytes;
    float *b = run(path, SL_PLACE_HOT_COLD, idx, &n2, NULL, NULL);
    CHECK_MSG(a && b, "%s, index mode %d: %s", label, mode, msg);
    if (base && a && b) {
        const double d = sl_test_rel_diff(base, a, n0);
        CHECK_MSG(d <= 1e-5, "%s, index mode %d: hot-cold differs from the CPU by %g relative",
                  label, mode, d);
        CHECK_MSG(n1 == n2 && !memcmp(a, b, n1 * sizeof *a), "%s, index mode %d: two hot-cold "
                  "runs differ", label, mode);
    }
    free(a);
    free(b);
}

static void check_arch(const char *arch, uint32_t wtype, int g)
{
    char path[512], idx[512], label[64];
    tm_params p;
    test_model("", arch, wtype, 256, 1024, 64, &p, path, idx, label);
    size_t n0 = 0;
    float *base = run(path, SL_PLACE_CPU, NULL, &n0, NULL, NULL);
    for (int edges = 0; edges < 2; edges++) {
        write_index(idx, p.n_layer, p.n_ff, g, edges, 7 + (uint64_t)edges);
        check_split(label, edges, path, idx, base, n0, NULL);
    }
    free(base);
}

/* Routed experts split hot/cold on the sim device: every split's logits within 1e-5 of the
 * CPU run and bit-identical between two runs; a random split holds strictly fewer device
 * bytes than all hot and more than all cold. n_embd / n_ff: 0 for the defaults. */
static void check_moe(const char *arch, uint32_t wtype, int g, int n_embd, int n_ff)
{
    char path[512], idx[512], label[64];
    tm_params p;
    test_model("moe_", arch, wtype, n_embd, n_ff, 0, &p, path, idx, label);
    size_t n0 = 0, n1 = 0;
    float *base = run(path, SL_PLACE_CPU, NULL, &n0, NULL, NULL);
    uint64_t dev[4] = {0, 0, 0, 0};
    for (int mode = MOE_RANDOM; mode <= MOE_EDGES; mode++) {
        write_moe_index(idx, p.n_layer, p.n_expert, p.n_ff, g, mode, 5 + (uint64_t)mode);
        check_split(label, mode, path, idx, base, n0, &dev[mode]);
    }
    /* decode (one token per step: the scheduler's single-token path) gives the same split
     * logits within the same tolerance */
    write_moe_index(idx, p.n_layer, p.n_expert, p.n_ff, g, MOE_EDGES, 5 + MOE_EDGES);
    g_decode = true;
    float *dec = run(path, SL_PLACE_HOT_COLD, idx, &n1, NULL, NULL);
    g_decode = false;
    if (base && dec) {
        const double d = sl_test_rel_diff(base, dec, n0);
        CHECK_MSG(d <= 1e-5, "%s, decode: hot-cold differs from the CPU by %g relative", label,
                  d);
    }
    free(dec);
    CHECK_MSG(dev[MOE_COLD] < dev[MOE_RANDOM] && dev[MOE_RANDOM] < dev[MOE_HOT],
              "%s: device bytes cold %llu, split %llu, hot %llu", label,
              (unsigned long long)dev[MOE_COLD], (unsigned long long)dev[MOE_RANDOM],
              (unsigned long long)dev[MOE_HOT]);
    free(base);
}

/* The fetching scheduler (modes post, full, auto) on a hot/cold split: the parts of split
 * layers run through the CPU scheduler inside it (nothing to fetch: the hot side is resident,
 * the cold side the CPU's); an all-cold index leaves the experts whole on the host, fetched as
 * usual. Prefill and decode logits equal the CPU scheduler's bit for bit, with as many expert
 * evaluations counted. */
static void check_moe_fetch(const char *arch)
{
    char path[512], idx[512], label[64], msg[SL_ERROR_MSG_BYTES] = "";
    tm_params p;
    test_model("fetch_", arch, SL_GGML_Q8_0, 0, 0, 0, &p, path, idx, label);
    static const char *const modes[] = {"mode=post", "mode=full", "mode=auto"};
    static const int idx_modes[] = {MOE_RANDOM, MOE_EDGES, MOE_COLD};
    for (size_t k = 0; k < sizeof idx_modes / sizeof *idx_modes; k++) {
        const int mode = idx_modes[k];
        write_moe_index(idx, p.n_layer, p.n_expert, p.n_ff, 32, mode, 11 + (uint64_t)mode);
        for (int dec = 0; dec < 2; dec++) {
            size_t n0 = 0, n1 = 0;
            g_decode = dec;
            g_sched = NULL;
            float *base = run(path, SL_PLACE_HOT_COLD, idx, &n0, NULL, msg);
            const sl_ctx_stats bs = g_stats;
            CHECK_MSG(base && bs.moe_scheduler && !strcmp(bs.moe_scheduler, "cpu"),
                      "%s, index %d: cpu scheduler: %s", label, mode, msg);
            /* the hot parts lie in the device arena: their calls count as device calls */
            CHECK_MSG(mode == MOE_COLD || bs.expert_calls_gpu > 0, "%s, index %d: no expert "
                      "call counted on the device", label, mode);
            for (size_t i = 0; i < sizeof modes / sizeof *modes && base; i++) {
                g_sched = modes[i];
                float *l = run(path, SL_PLACE_HOT_COLD, idx, &n1, NULL, msg);
                CHECK_MSG(l && g_stats.moe_scheduler && !strcmp(g_stats.moe_scheduler, "fetch"),
                          "%s, index %d, %s: %s", label, mode, modes[i], msg);
                CHECK_MSG(l && n1 == n0 && !memcmp(base, l, n0 * sizeof *l),
                          "%s, index %d, %s, %s: logits differ from the cpu scheduler's", label,
                          mode, modes[i], dec ? "decode" : "prefill");
                CHECK_MSG(g_stats.expert_calls_cpu + g_stats.expert_calls_gpu ==
                              bs.expert_calls_cpu + bs.expert_calls_gpu,
                          "%s, %s: %llu expert evaluations, cpu scheduler %llu", label, modes[i],
                          (unsigned long long)(g_stats.expert_calls_cpu +
                                               g_stats.expert_calls_gpu),
                          (unsigned long long)(bs.expert_calls_cpu + bs.expert_calls_gpu));
                free(l);
            }
            free(base);
        }
    }
    g_sched = NULL;
    g_decode = false;
}

/* A live reload of a layer whose experts are split hot/cold is refused (their bytes live in
 * parts packed across the experts), naming the reason; the model computes what it did. */
static void check_moe_reload(void)
{
    char path[512], live[512], q4[512], idx[512];
    snprintf(path, sizeof path, "%s/rl.gguf", g_dir);
    snprintf(live, sizeof live, "%s/rl_live.gguf", g_dir);
    snprintf(q4, sizeof q4, "%s/rl_q4.gguf", g_dir);
    snprintf(idx, sizeof idx, "%s/rl.gpuidx", g_dir);
    tm_params p;
    tm_defaults("qwen3moe", &p);
    p.wtype = SL_GGML_Q8_0;
    sl_error e;
    uint32_t n_req = 0;
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(tm_write(&p, live, &e) == SL_OK);
    const char *exps = "blk\\.[0-9]+\\.ffn_(gate|up|down)_exps\\.weight";
    CHECK_MSG(sl_requant_file(path, q4, exps, SL_GGML_Q4_0, &n_req, NULL, NULL, NULL, NULL,
                              &e) == SL_OK &&
                  n_req == 3u * (uint32_t)p.n_layer, "requant: %s", e.msg);
    write_moe_index(idx, p.n_layer, p.n_expert, p.n_ff, 32, MOE_RANDOM, 9);
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_HOT_COLD;
    o.gpu_index = idx;
    o.progress = false;
    o.device = "sim";
    sl_model *m = NULL;
    CHECK_MSG(sl_model_open(live, &o, &m, &e) == SL_OK, "%s", e.msg);
    if (!m) return;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    sl_ctx *c = NULL;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    float before[300], after[300];
    CHECK(c && sl_ctx_eval(c, k_tok, N_TOK, &e) == SL_OK);
    if (c) memcpy(before, sl_ctx_logits(c, -1), sizeof before);
    CHECK(rename(q4, live) == 0);
    sl_reload_report r;
    /* a file with a tensor that cannot be applied is refused whole, and the call says so */
    CHECK_MSG(sl_reload_changed(m, &r, &e) == SL_ERR_UNSUPPORTED && strstr(e.msg, "hot/cold"),
              "%s", e.msg);
    size_t refused = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.entries[i].kind == SL_RELOAD_REFUSED && strstr(r.entries[i].name, "_exps") &&
            strstr(r.entries[i].msg, "split hot/cold"))
            refused++;
    CHECK_MSG(refused == 3u * (size_t)p.n_layer && r.n_reloaded == 0, "%zu refused, %u reloaded",
              refused, r.n_reloaded);
    sl_reload_report_free(&r);
    sl_ctx_destroy(c);
    c = NULL;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    CHECK(c && sl_ctx_eval(c, k_tok, N_TOK, &e) == SL_OK);
    if (c) memcpy(after, sl_ctx_logits(c, -1), sizeof after);
    CHECK_MSG(p.n_vocab == 300 && !memcmp(before, after, sizeof before),
              "logits changed after a refused reload");
    sl_ctx_destroy(c);
    sl_model_close(m);
}

/* A ReLU llama split hot/cold on the sim device: each part skips its own inactive neurons
 * (the sim executor is the host's), so the split gives the split-but-dense logits bit for bit;
 * with SLUICE_ACT_F32 (dense parts) it matches the CPU within 1e-5 like any model. */
static void check_relu(void)
{
    char path[512], idx[512];
    snprintf(path, sizeof path, "%s/relu.gguf", g_dir);
    snprintf(idx, sizeof idx, "%s/relu.gpuidx", g_dir);
    tm_params p;
    tm_defaults("llama", &p);
    p.wtype = SL_GGML_Q8_0;
    p.n_embd = 256;
    p.n_ff = 1024;
    p.head_dim = 64;
    p.ffn_act = "relu";
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "%s", e.msg);
    write_index(idx, p.n_layer, p.n_ff, 32, false, 11);
    size_t n0 = 0, n1 = 0, n2 = 0;
    float *base = run(path, SL_PLACE_CPU, NULL, &n0, NULL, NULL);
    float *split = run(path, SL_PLACE_HOT_COLD, idx, &n1, NULL, NULL);
    if (base && split) {
        const double d = sl_test_rel_diff(base, split, n0);
        CHECK_MSG(d <= 1e-5, "relu: hot-cold differs from the CPU by %g relative", d);
    }
    free(base);
    free(split);
    unsetenv("SLUICE_ACT_F32");
    float *sparse = run(path, SL_PLACE_HOT_COLD, idx, &n1, NULL, NULL);
    g_relu_dense = true;
    float *dense = run(path, SL_PLACE_HOT_COLD, idx, &n2, NULL, NULL);
    g_relu_dense = false;
    setenv("SLUICE_ACT_F32", "1", 1);
    if (sparse && dense)
        CHECK_MSG(n1 == n2 && !memcmp(sparse, dense, n1 * sizeof *sparse),
                  "relu: the split's sparse and dense logits differ");
    free(sparse);
    free(dense);
}

static void check_errors(void)
{
    char path[512], idx[512], msg[SL_ERROR_MSG_BYTES];
    sl_status st;
    size_t n;
    tm_params p;
    sl_error e;
    tm_defaults("llama", &p);
    p.n_ff = 128;
    snprintf(path, sizeof path, "%s/e.gguf", g_dir);
    CHECK(tm_write(&p, path, &e) == SL_OK);
    /* no index given and none beside the model */
    CHECK(!run(path, SL_PLACE_HOT_COLD, NULL, &n, &st, msg) && st == SL_ERR_INVALID);
    CHECK_CONTAINS(msg, "generated.gpuidx");
    /* layer count and width mismatches name the index file */
    snprintf(idx, sizeof idx, "%s/e3.gpuidx", g_dir);
    write_index(idx, p.n_layer + 1, p.n_ff, 1, false, 1);
    CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st != SL_OK);
    CHECK_CONTAINS(msg, "e3.gpuidx");
    write_index(idx, p.n_layer, p.n_ff * 2, 1, false, 1);
    CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st != SL_OK);
    CHECK_CONTAINS(msg, "e3.gpuidx");
    /* a MoE index (expert_count 2) whose width happens to equal the dense FFN's */
    {
        sl_gpuidx gi;
        uint32_t *nn = malloc((size_t)p.n_layer * sizeof *nn);
        for (int il = 0; il < p.n_layer; il++) nn[il] = (uint32_t)p.n_ff;
        CHECK(sl_gpuidx_init(&gi, (uint32_t)p.n_layer, nn, &e) == SL_OK);
        gi.n_expert = 2;
        CHECK(sl_gpuidx_write(idx, &gi, NULL, &e) == SL_OK);
        sl_gpuidx_free(&gi);
        free(nn);
        CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st == SL_ERR_RANGE);
        CHECK_CONTAINS(msg, "e3.gpuidx");
        CHECK_CONTAINS(msg, "2 experts' neurons");
    }
    /* the index beside the model is picked up (PowerInfer's name), by auto too */
    char beside[600];
    snprintf(beside, sizeof beside, "%s.generated.gpuidx", path);
    write_index(beside, p.n_layer, p.n_ff, 1, false, 3);
    float *a = run(path, SL_PLACE_HOT_COLD, NULL, &n, &st, msg);
    CHECK_MSG(a != NULL, "index beside the model: %s", msg);
    float *b = run(path, SL_PLACE_AUTO, NULL, &n, &st, msg);
    if (a && b) CHECK(!memcmp(a, b, n * sizeof *a));
    free(a);
    free(b);
    unlink(beside);
    /* a MoE model: a dense index, then MoE indexes of the wrong expert count or width */
    tm_defaults("qwen3moe", &p);
    snprintf(path, sizeof path, "%s/moe.gguf", g_dir);
    CHECK(tm_write(&p, path, &e) == SL_OK);
    write_index(idx, p.n_layer, p.n_ff * p.n_expert, 1, false, 1);
    CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st == SL_ERR_RANGE);
    CHECK_CONTAINS(msg, "e3.gpuidx");
    CHECK_CONTAINS(msg, "layer 0: 512 neurons in 1 expert(s)");
    write_moe_index(idx, p.n_layer, p.n_expert / 2, p.n_ff * 2, 1, MOE_RANDOM, 1);
    CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st == SL_ERR_RANGE);
    CHECK_CONTAINS(msg, "in 4 expert(s) of 128");
    CHECK_CONTAINS(msg, "8 routed experts of 64 neurons");
    write_moe_index(idx, p.n_layer, p.n_expert, p.n_ff + 32, 32, MOE_RANDOM, 1);
    CHECK(!run(path, SL_PLACE_HOT_COLD, idx, &n, &st, msg) && st == SL_ERR_RANGE);
    CHECK_CONTAINS(msg, "e3.gpuidx: layer 0: 768 neurons in 8 expert(s) of 96");
    /* the MoE index beside the model is picked up, by hot-cold and auto */
    snprintf(beside, sizeof beside, "%s.generated.gpuidx", path);
    write_moe_index(beside, p.n_layer, p.n_expert, p.n_ff, 1, MOE_RANDOM, 3);
    a = run(path, SL_PLACE_HOT_COLD, NULL, &n, &st, msg);
    CHECK_MSG(a != NULL, "MoE index beside the model: %s", msg);
    const uint64_t split_bytes = g_gpu_bytes;
    b = run(path, SL_PLACE_AUTO, NULL, &n, &st, msg);
    if (a && b) CHECK(!memcmp(a, b, n * sizeof *a) && g_gpu_bytes == split_bytes);
    free(a);
    free(b);
    unlink(beside);
    a = run(path, SL_PLACE_AUTO, NULL, &n, &st, msg); /* without it: all on the device */
    CHECK_MSG(a && g_gpu_bytes > split_bytes, "auto without an index: %s", msg);
    free(a);
}

/* A CPU context with neuron statistics on a test model of arch, written as prof_ARCH.gguf;
 * *c NULL on failure (checked). */
static void profile_ctx(const char *arch, tm_params *p, sl_model **m, sl_ctx **c)
{
    char path[512];
    sl_error e = {0};
    tm_defaults(arch, p);
    snprintf(path, sizeof path, "%s/prof_%s.gguf", g_dir, arch);
    CHECK(tm_write(p, path, &e) == SL_OK);
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.progress = false;
    *m = NULL;
    *c = NULL;
    CHECK(sl_model_open(path, &o, m, &e) == SL_OK);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.neuron_stats = true;
    CHECK_MSG(*m && sl_ctx_create(*m, &co, c, &e) == SL_OK, "%s: %s", arch, e.msg);
}

static void check_profile(void)
{
    tm_params p;
    sl_error e = {0};
    sl_model *m;
    sl_ctx *c;
    profile_ctx("llama", &p, &m, &c);
    if (c) {
        CHECK(sl_ctx_eval(c, k_tok, N_TOK, &e) == SL_OK);
        for (int32_t il = 0; il < p.n_layer; il++) {
            int64_t nn;
            uint64_t nt, sum = 0;
            const uint64_t *act;
            const double *mag;
            CHECK(sl_ctx_neuron_stats(c, il, -1, &nn, &nt, &act, &mag, &e) == SL_OK);
            CHECK(nn == p.n_ff && nt == N_TOK);
            for (int64_t j = 0; j < nn; j++) {
                CHECK(act[j] <= nt && mag[j] >= 0);
                sum += act[j];
            }
            /* most neurons of a random FFN are above a tenth of the RMS, not all */
            CHECK_MSG(sum > nt * (uint64_t)nn / 2 && sum < nt * (uint64_t)nn,
                      "layer %d: %llu activations of %llu", il, (unsigned long long)sum,
                      (unsigned long long)(nt * (uint64_t)nn));
        }
        int64_t nn;
        uint64_t nt;
        const uint64_t *act;
        const double *mag;
        CHECK(sl_ctx_neuron_stats(c, p.n_layer, -1, &nn, &nt, &act, &mag, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_neuron_stats(c, 0, 0, &nn, &nt, &act, &mag, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_neuron_stats(c, 0, -7, &nn, &nt, &act, &mag, &e) == SL_ERR_RANGE);
    }
    sl_ctx_destroy(c);
    sl_model_close(m);
}

/* Routed experts (qwen3moe, mixtral): the cpu MoE scheduler records per layer and expert;
 * every token is routed to k experts, so a layer's experts saw N_TOK * k tokens in all, and no
 * neuron is active more often than its expert ran. A dense layer index (-1) is refused. */
static void check_profile_moe(const char *arch)
{
    tm_params p;
    sl_error e = {0};
    sl_model *m;
    sl_ctx *c;
    profile_ctx(arch, &p, &m, &c);
    if (c && sl_ctx_eval(c, k_tok, N_TOK, &e) == SL_OK) {
        for (int32_t il = 0; il < p.n_layer; il++) {
            uint64_t routed = 0, active = 0;
            for (int32_t x = 0; x < p.n_expert; x++) {
                int64_t nn;
                uint64_t nt;
                const uint64_t *act;
                const double *mag;
                CHECK(sl_ctx_neuron_stats(c, il, x, &nn, &nt, &act, &mag, &e) == SL_OK);
                CHECK(nn == p.n_ff);
                for (int64_t j = 0; j < nn; j++) {
                    CHECK(act[j] <= nt && mag[j] >= 0 && (nt || mag[j] == 0));
                    active += act[j];
                }
                routed += nt;
            }
            CHECK_MSG(routed == (uint64_t)N_TOK * (uint64_t)p.n_expert_used,
                      "%s layer %d: %llu routed", arch, il, (unsigned long long)routed);
            CHECK(active > 0);
        }
        int64_t nn;
        uint64_t nt;
        const uint64_t *act;
        const double *mag;
        CHECK(sl_ctx_neuron_stats(c, 0, -1, &nn, &nt, &act, &mag, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_neuron_stats(c, 0, p.n_expert, &nn, &nt, &act, &mag, &e) == SL_ERR_RANGE);
    } else {
        CHECK_MSG(0, "%s: %s", arch, e.msg);
    }
    sl_ctx_destroy(c);
    sl_model_close(m);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    setenv("SLUICE_ACT_F32", "1", 1);
    check_arch("llama", SL_GGML_F32, 1);
    check_arch("gemma3", SL_GGML_F32, 1);
    check_arch("llama", SL_GGML_Q8_0, 32);
    check_arch("llama", SL_GGML_Q4_K, 256);
    check_relu();
    check_moe("qwen3moe", SL_GGML_F32, 1, 0, 0);
    check_moe("qwen3moe", SL_GGML_Q8_0, 32, 0, 0);
    check_moe("qwen3moe", SL_GGML_Q4_K, 256, 256, 512);
    check_moe("mixtral", SL_GGML_Q8_0, 32, 0, 0);
    check_moe("mixtral-split", SL_GGML_F32, 1, 0, 0);
    check_moe("olmoe", SL_GGML_Q8_0, 32, 0, 0);
    check_moe("qwen2moe", SL_GGML_Q8_0, 32, 0, 0);
    check_moe("gpt-oss", SL_GGML_Q8_0, 32, 0, 0);
    check_moe("deepseek2", SL_GGML_Q8_0, 32, 0, 0);
    check_moe_fetch("qwen3moe");
    check_moe_fetch("mixtral");
    check_moe_fetch("gpt-oss");
    check_moe_reload();
    check_errors();
    check_profile();
    check_profile_moe("qwen3moe");
    check_profile_moe("mixtral");
    return sl_test_finish("hotcold_test");
}
