/* The fetching MoE scheduler (scheduler/moe/fetch.h) through the engine, on the sim device.
 *
 * Core property: logits are bit-identical to the CPU scheduler's for every mode (post, full,
 * auto) x cache policy (LRU, LFU) x block_on_miss (0, 1) x device condition (plain, throttled
 * copies 2 GB/s + 20 us so copies arrive late, an injected fault of the first or the fifth
 * copy), on tiny models of
 * qwen3moe, mixtral (merged and per-expert tensors), olmoe and qwen2moe, F32 and Q8_0 — the
 * sim device computes with the CPU kernels, so any difference is a scheduling bug (a wrong
 * slot, a stale cache entry, a sum in another order, a lost fallback).
 * Counters: throttled + block_on_miss=0 has miss fallbacks; unthrottled + block_on_miss=1 has
 * none; a cache sees hits; a pinned layer hits always. Configuration errors name the variable
 * and the value. The trace file parses as JSON and has copy, CPU and device spans.
 *
 * Built with SL_FETCH_TEST_CUDA (fetch_cuda_test, tag gpu) the same runs use the cuda device:
 * the device groups then run kernels/cuda GEMVs, so logits are compared with a tolerance
 * (1e-4 of the largest |logit|, both sides in the verification mode SLUICE_ACT_F32=1, which
 * keeps activations F32 as the GPU does) instead of bit for bit; the sim-only conditions
 * (throttled copies) are skipped. Without a usable GPU it prints SKIPPED and passes. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <math.h>

#include "base/fault.h"
#include "gguf/gguf.h"
#include "kernels/cuda/ctx.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PRE = 6, N_TOK = 12 };
/* a prefill, then decodes that repeat tokens (so experts repeat and the cache can hit) */
static const int32_t k_tokens[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 7, 42, 7, 17, 7};

static char g_dir[512];

#ifdef SL_FETCH_TEST_CUDA
static const bool g_cuda = true;
static const char *const g_device = "cuda";
#else
static const bool g_cuda = false;
static const char *const g_device = "sim";
#endif

static void clear_env(void)
{
    static const char *const vars[] = {
        "SLUICE_POSTFETCH_ENABLE", "SLUICE_POSTFETCH_FORCE_CPU", "SLUICE_POSTFETCH_BLOCK_ON_MISS",
        "SLUICE_POSTFETCH_MAX_TRANSFERS", "SLUICE_POSTFETCH_SCRATCHPAD_MB",
        "SLUICE_POSTFETCH_USE_DEDICATED_STREAMS", "SLUICE_POSTFETCH_DEBUG",
        "SLUICE_POSTFETCH_MODE", "SLUICE_POSTFETCH_CACHE_MB", "SLUICE_POSTFETCH_POLICY",
        "SLUICE_POSTFETCH_PIN", "SLUICE_SIM_H2D_GBS", "SLUICE_SIM_LATENCY_NS",
        "SLUICE_DEVICE", "SLUICE_ACT_F32"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    if (g_cuda) setenv("SLUICE_ACT_F32", "1", 1);
}

/* fault: the first copy (always a fetch) fails; fault-late: the fifth (a fetch, a promotion
 * into the cache or a pinned load, whichever comes fifth) */
typedef enum { DEV_PLAIN = 0, DEV_THROTTLED, DEV_FAULT, DEV_FAULT_LATE, DEV_COUNT } dev_cond;
static const char *const k_cond_name[DEV_COUNT] = {"plain", "throttled", "fault", "fault-late"};

/* the copy faults, through the library's one fault hook (base/fault.h) */
static sl_fault_plan g_faults;
static const sl_fault_hook k_fault_hook = {sl_fault_plan_fn, &g_faults};

static void set_cond(dev_cond c)
{
    unsetenv("SLUICE_SIM_H2D_GBS");
    unsetenv("SLUICE_SIM_LATENCY_NS");
    g_faults.at[SL_FAULT_COPY] = c == DEV_FAULT ? 1 : c == DEV_FAULT_LATE ? 5 : 0;
    sl_fault_install(g_faults.at[SL_FAULT_COPY] ? &k_fault_hook : NULL);
    if (c == DEV_THROTTLED) {
        setenv("SLUICE_SIM_H2D_GBS", "2", 1);
        setenv("SLUICE_SIM_LATENCY_NS", "20000", 1);
    }
}

static sl_model *open_model(const char *path, sl_placement pl, int gpu_layers)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.gpu_layers = gpu_layers;
    o.device = g_device;
    o.progress = false;
    o.n_threads = 2;
    sl_model *m = NULL;
    sl_error e;
    sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

/* Prefill of N_PRE tokens (all logits) then single-token decodes; returns N_TOK rows of logits
 * (malloc'd) and the context's stats; writes the trace when trace_path is set. */
static float *run(sl_model *m, const char *sched, sl_ctx_stats *stats, const char *trace_path)
{
    sl_model_info info;
    sl_model_info_get(m, &info);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.all_logits = true;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e;
    sl_status st = sl_ctx_create(m, &co, &c, &e);
    CHECK_MSG(st == SL_OK, "ctx '%s': %s", sched ? sched : "", e.msg);
    if (st) return NULL;
    const size_t V = (size_t)info.n_vocab;
    float *out = calloc(N_TOK * V, sizeof *out);
    st = sl_ctx_eval(c, k_tokens, N_PRE, &e);
    CHECK_MSG(st == SL_OK, "eval '%s': %s", sched ? sched : "", e.msg);
    for (int i = 0; i < N_PRE && !st; i++) memcpy(out + i * V, sl_ctx_logits(c, i), V * 4);
    for (int i = N_PRE; i < N_TOK && !st; i++) {
        st = sl_ctx_eval(c, k_tokens + i, 1, &e);
        CHECK_MSG(st == SL_OK, "decode '%s': %s", sched ? sched : "", e.msg);
        if (!st) memcpy(out + i * V, sl_ctx_logits(c, -1), V * 4);
    }
    if (stats) sl_ctx_stats_get(c, stats);
    if (trace_path) {
        st = sl_ctx_trace_write(c, trace_path, &e);
        CHECK_MSG(st == SL_OK, "trace: %s", e.msg);
    }
    sl_ctx_destroy(c);
    if (st) {
        free(out);
        return NULL;
    }
    return out;
}

static bool same(const float *a, const float *b, size_t n)
{
    if (!a || !b) return false;
    if (!g_cuda) return !memcmp(a, b, n * sizeof *a);
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        const double v = fabs((double)a[i] - (double)b[i]);
        if (!(v <= d)) d = isnan(v) ? INFINITY : v;
        if (fabs(a[i]) > s) s = fabs(a[i]);
    }
    return d <= 1e-4 * (s > 0 ? s : 1);
}

typedef struct arch_case {
    const char *arch;
    uint32_t wtype;
} arch_case;

static void test_arch(const arch_case *ac)
{
    tm_params p;
    tm_defaults(ac->arch, &p);
    p.wtype = ac->wtype;
    char path[700];
    snprintf(path, sizeof path, "%s/%s-%u.gguf", g_dir, ac->arch, ac->wtype);
    sl_error e;
    sl_status st = tm_write(&p, path, &e);
    CHECK_MSG(st == SL_OK, "write %s: %s", path, e.msg);
    if (st) return;
    clear_env();
    sl_model *m = open_model(path, SL_PLACE_CPU, 0);
    if (!m) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t n = (size_t)N_TOK * (size_t)info.n_vocab;
    sl_ctx_stats cs;
    float *base = run(m, NULL, &cs, NULL);
    CHECK(cs.moe_scheduler && !strcmp(cs.moe_scheduler, "cpu"));
    sl_model_close(m);
    if (!base) return;

    static const char *const modes[] = {"post", "full", "auto"};
    static const char *const policies[] = {"lru", "lfu"};
    for (int dc = 0; dc < DEV_COUNT; dc++) {
        set_cond((dev_cond)dc);
        m = open_model(path, SL_PLACE_CPU, 0);
        if (!m) continue;
        for (int mi = 0; mi < 3; mi++)
            for (int pi = 0; pi < 2; pi++)
                for (int b = 0; b < 2; b++) {
                    char sched[256];
                    /* a cache of 2-3 experts: promotions, evictions and hits all happen */
                    snprintf(sched, sizeof sched,
                             "mode=%s policy=%s block_on_miss=%d cache_kb=120 max_transfers=2 "
                             "debug=1", modes[mi], policies[pi], b);
                    /* the device counts copies from its open: a fresh one per run puts the
                     * injected fault inside this run */
                    sl_model *fm = dc >= DEV_FAULT ? open_model(path, SL_PLACE_CPU, 0) : m;
                    if (!fm) continue;
                    sl_ctx_stats s;
                    float *l = run(fm, sched, &s, NULL);
                    if (fm != m) sl_model_close(fm);
                    CHECK_MSG(same(base, l, n), "%s/%u %s [%s]: logits differ from the CPU "
                              "scheduler's", ac->arch, ac->wtype, k_cond_name[dc], sched);
                    CHECK(s.moe_scheduler && !strcmp(s.moe_scheduler, "fetch"));
                    if (dc == DEV_FAULT && mi < 2)
                        CHECK_MSG(s.expert_fallbacks > 0, "%s %s: an injected copy fault must "
                                  "be a fallback", ac->arch, sched);
                    free(l);
                }
        /* slow copies (5 ms each: far longer than gate/up of these tiny experts, even under
         * ASan on a loaded machine), post, no waiting: late copies make the CPU compute down */
        if (dc == DEV_THROTTLED && !g_cuda) {
            setenv("SLUICE_SIM_LATENCY_NS", "5000000", 1);
            sl_model *sm = open_model(path, SL_PLACE_CPU, 0);
            set_cond(DEV_THROTTLED);
            sl_ctx_stats s = {0};
            float *l = sm ? run(sm, "mode=post block_on_miss=0 max_transfers=1", &s, NULL) : NULL;
            sl_model_close(sm);
            CHECK(same(base, l, n));
            CHECK_MSG(s.expert_fetches > 0 && s.expert_fallbacks > 0,
                      "%s throttled post: fetches %llu fallbacks %llu", ac->arch,
                      (unsigned long long)s.expert_fetches,
                      (unsigned long long)s.expert_fallbacks);
            CHECK(s.copy_overlap_pct >= 0.0 && s.copy_overlap_pct <= 100.0);
            free(l);
        }
        if (dc == DEV_PLAIN) {
            sl_ctx_stats s;
            float *l = run(m, "mode=post block_on_miss=1", &s, NULL);
            CHECK(same(base, l, n));
            CHECK_MSG(s.expert_fetches > 0 && s.expert_fallbacks == 0 && s.copy_bytes > 0,
                      "%s plain post blocking: fetches %llu fallbacks %llu", ac->arch,
                      (unsigned long long)s.expert_fetches,
                      (unsigned long long)s.expert_fallbacks);
            free(l);
            /* a cache that holds every expert: repeated experts hit */
            l = run(m, "mode=full cache_kb=4096 policy=lfu", &s, NULL);
            CHECK(same(base, l, n));
            CHECK_MSG(s.expert_cache_hits > 0 && s.expert_cache_hits <= s.expert_cache_lookups,
                      "%s cache: hits %llu of %llu", ac->arch,
                      (unsigned long long)s.expert_cache_hits,
                      (unsigned long long)s.expert_cache_lookups);
            free(l);
            /* layer 0 pinned, no dynamic cache: layer 0 always hits */
            l = run(m, "mode=post pin=0:0,0:1,0:2,0:3,0:4,0:5,0:6,0:7 streams=shared", &s, NULL);
            CHECK(same(base, l, n));
            CHECK(s.expert_cache_hits > 0);
            free(l);
            /* a scratch area too small for one expert: every fetch falls back, same logits */
            l = run(m, "mode=full scratch_kb=1", &s, NULL);
            CHECK(same(base, l, n));
            CHECK(s.expert_fetches > 0 && s.expert_fallbacks == s.expert_fetches);
            free(l);
        }
        sl_model_close(m);
    }
    /* SLUICE_ACT_F32=1 (the verification matvec): the device path follows it too */
    setenv("SLUICE_ACT_F32", "1", 1);
    m = open_model(path, SL_PLACE_CPU, 0);
    if (m) {
        float *ref = run(m, NULL, NULL, NULL);
        for (int mi = 0; mi < 2; mi++) {
            float *l = run(m, mi ? "mode=full" : "mode=post block_on_miss=1", NULL, NULL);
            CHECK_MSG(same(ref, l, n), "%s SLUICE_ACT_F32=1 %s: logits differ", ac->arch,
                      modes[mi]);
            free(l);
        }
        free(ref);
        sl_model_close(m);
    }
    if (!g_cuda) unsetenv("SLUICE_ACT_F32");
    /* experts resident by the engine's placement (layer 0 on the device; on cuda the engine's
     * executor computes that layer's experts itself, not the scheduler) */
    set_cond(DEV_THROTTLED);
    m = open_model(path, SL_PLACE_LAYERS, 1);
    if (m) {
        for (int mi = 0; mi < 3; mi++) {
            char sched[64];
            snprintf(sched, sizeof sched, "mode=%s cache_kb=60", modes[mi]);
            sl_ctx_stats s;
            float *l = run(m, sched, &s, NULL);
            CHECK_MSG(same(base, l, n), "%s layers=1 %s: logits differ", ac->arch, sched);
            CHECK(g_cuda || s.expert_calls_gpu > 0);
            free(l);
        }
        sl_model_close(m);
    }
    clear_env();
    free(base);
}

/* ---- configuration errors ------------------------------------------------------------- */

static void expect_ctx_error(sl_model *m, const char *sched, const char *n1, const char *n2)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 16;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e = {0};
    sl_status st = sl_ctx_create(m, &co, &c, &e);
    CHECK_MSG(st == SL_ERR_INVALID, "expected an error for %s / %s", sched ? sched : "(env)", n1);
    if (st == SL_OK) {
        sl_ctx_destroy(c);
        return;
    }
    CHECK_CONTAINS(e.msg, n1);
    CHECK_CONTAINS(e.msg, n2);
}

static void test_config(const char *path)
{
    clear_env();
    sl_model *m = open_model(path, SL_PLACE_CPU, 0);
    if (!m) return;
    static const char *const bad[][2] = {
        {"SLUICE_POSTFETCH_ENABLE", "yes"},       {"SLUICE_POSTFETCH_FORCE_CPU", "2"},
        {"SLUICE_POSTFETCH_BLOCK_ON_MISS", "-1"}, {"SLUICE_POSTFETCH_MAX_TRANSFERS", "abc"},
        {"SLUICE_POSTFETCH_MAX_TRANSFERS", "0"},  {"SLUICE_POSTFETCH_SCRATCHPAD_MB", "0"},
        {"SLUICE_POSTFETCH_SCRATCHPAD_MB", "12x"}, {"SLUICE_POSTFETCH_USE_DEDICATED_STREAMS", ""},
        {"SLUICE_POSTFETCH_DEBUG", "maybe"},       {"SLUICE_POSTFETCH_MODE", "gpu"},
        {"SLUICE_POSTFETCH_POLICY", "fifo"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        char val[64];
        snprintf(val, sizeof val, "'%s'", bad[i][1]);
        expect_ctx_error(m, NULL, bad[i][0], val);
        unsetenv(bad[i][0]);
    }
    expect_ctx_error(m, "mode=post colour=blue", "colour", "unknown key");
    expect_ctx_error(m, "mode=sideways", "mode", "sideways");
    expect_ctx_error(m, "mode=cpu order=later", "order", "'later' is not an order");
    expect_ctx_error(m, "max_transfers=999", "max_transfers", "999");
    expect_ctx_error(m, "mode=post pin=1-2", "pin", "1-2");
    expect_ctx_error(m, "mode=post block_on_miss", "block_on_miss", "key=value");
    /* values that name model parts are checked against the model */
    expect_ctx_error(m, "mode=post pin=99:0", "pin=99:0", "layers [0, ");
    expect_ctx_error(m, "mode=post pin=0:1,1:99", "pin=1:99", "experts [0, ");
    expect_ctx_error(m, "pin=0:99", "pin=0:99", "experts [0, "); /* mode cpu too */
    expect_ctx_error(m, "pin=0:1,", "pin", "ends with ','");
    setenv("SLUICE_POSTFETCH_PIN", "99:99", 1);
    expect_ctx_error(m, "mode=post", "SLUICE_POSTFETCH_PIN", "layer 99");
    setenv("SLUICE_POSTFETCH_PIN", " 0:1", 1);
    expect_ctx_error(m, "mode=post", "SLUICE_POSTFETCH_PIN item 1 ' 0:1': layer", "blank");
    unsetenv("SLUICE_POSTFETCH_PIN");
    setenv("SLUICE_POSTFETCH_MAX_TRANSFERS", " 5", 1);
    expect_ctx_error(m, NULL, "SLUICE_POSTFETCH_MAX_TRANSFERS", "blank");
    unsetenv("SLUICE_POSTFETCH_MAX_TRANSFERS");

    /* the aliases select the scheduler; FORCE_CPU wins over ENABLE */
    sl_ctx_stats s;
    setenv("SLUICE_POSTFETCH_ENABLE", "1", 1);
    float *l = run(m, NULL, &s, NULL);
    CHECK(s.moe_scheduler && !strcmp(s.moe_scheduler, "fetch"));
    free(l);
    setenv("SLUICE_POSTFETCH_FORCE_CPU", "1", 1);
    l = run(m, NULL, &s, NULL);
    CHECK(s.moe_scheduler && !strcmp(s.moe_scheduler, "cpu"));
    free(l);
    sl_error e;
    CHECK(sl_ctx_trace_write(NULL, "x", &e) == SL_ERR_INVALID);
    sl_model_close(m);
    clear_env();

    /* the sim throttle variables are checked by the device */
    setenv("SLUICE_SIM_H2D_GBS", "fast", 1);
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.device = "sim";
    o.progress = false;
    m = NULL;
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "SLUICE_SIM_H2D_GBS");
    CHECK_CONTAINS(e.msg, "'fast'");
    sl_model_close(m);
    clear_env();
}

/* ---- trace ------------------------------------------------------------------------------ */

/* A strict-enough JSON checker: returns the end of one value or NULL. */
static const char *json_value(const char *p, int depth);

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *json_string(const char *p)
{
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\' && !*++p) return NULL;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_value(const char *p, int depth)
{
    if (depth > 32) return NULL;
    p = ws(p);
    if (*p == '{' || *p == '[') {
        const char close = *p == '{' ? '}' : ']';
        const bool obj = *p == '{';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = json_string(ws(p)))) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = json_value(p, depth + 1))) return NULL;
            p = ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"') return json_string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    char *end = NULL;
    strtod(p, &end);
    return end && end != p ? end : NULL;
}

static void test_trace(const char *path)
{
    clear_env();
    set_cond(DEV_THROTTLED);
    sl_model *m = open_model(path, SL_PLACE_CPU, 0);
    clear_env();
    if (!m) return;
    char tpath[700];
    snprintf(tpath, sizeof tpath, "%s/trace.json", g_dir);
    sl_ctx_stats s;
    float *l = run(m, "mode=post block_on_miss=1 trace=1 cache_kb=60", &s, tpath);
    free(l);
    FILE *f = fopen(tpath, "rb");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 0, SEEK_END);
        const long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *buf = calloc((size_t)n + 1, 1);
        CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
        fclose(f);
        const char *end = json_value(buf, 0);
        CHECK_MSG(end && !*ws(end), "trace is not one JSON value");
        CHECK(!strncmp(buf, "{\"traceEvents\":[", 16));
        CHECK_CONTAINS(buf, "\"ph\":\"X\"");
        CHECK_CONTAINS(buf, "\"name\":\"copy L");
        CHECK_CONTAINS(buf, "\"name\":\"cpu L");
        CHECK_CONTAINS(buf, "\"name\":\"dev L");
        CHECK_CONTAINS(buf, "\"tid\":1");
        CHECK_CONTAINS(buf, "\"tid\":2");
        free(buf);
    }
    /* the CPU scheduler has no trace */
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 16;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    CHECK(sl_ctx_trace_write(c, tpath, &e) == SL_ERR_INVALID);
    sl_ctx_destroy(c);
    sl_model_close(m);
}

int main(void)
{
    if (g_cuda) {
        int n = 0;
        sl_error pe;
        if (sl_cuda_probe(&n, &pe) != SL_OK) {
            printf("fetch_cuda_test: SKIPPED, no usable GPU (%s)\n", pe.msg);
            return 0;
        }
    }
    const char *t = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fetch_test_XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const arch_case cases[] = {{"qwen3moe", SL_GGML_F32}, {"mixtral", SL_GGML_Q8_0},
                                      {"mixtral-split", SL_GGML_F32}, {"olmoe", SL_GGML_F32},
                                      {"qwen2moe", SL_GGML_Q8_0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_arch(&cases[i]);
    char path[700];
    snprintf(path, sizeof path, "%s/qwen3moe-%u.gguf", g_dir, SL_GGML_F32);
    test_config(path);
    test_trace(path);
    return sl_test_finish("fetch_test");
}
