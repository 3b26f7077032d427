/* Engine tests: every supported architecture (tiny models written by testmodel.c, and models
 * from `sluice mkmodel` when its path is given as argv[1]) opened and evaluated on the CPU.
 * Properties: logits finite; prefill of N tokens == N single-token decodes; rewind + re-eval
 * reproduces; chunked prefill (n_batch < N) == one chunk; F16 KV close to F32 KV; every io
 * mode and every (sim) placement gives the CPU logits; missing / mis-shaped tensors are
 * SL_ERR_FORMAT naming the tensor and the expected shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_TOK = 11 };
static const int32_t k_tokens[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 7, 128, 5, 260};

static char g_dir[512];

static const char *tmp_path(const char *name)
{
    static char buf[8][600];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 600, "%s/%s", g_dir, name);
    return b;
}

/* A placement and llama.cpp's controls on top of it (scheduler/policy/placement.h). */
typedef struct combo {
    sl_placement pl;
    int gpu_layers;
    const char *ot;
    bool cpu_moe;
    int n_cpu_moe;
    uint64_t vram_budget;
} combo;

/* The FFN (dense, merged experts or per-expert tensors) of layer 1, not its router. */
#define FFN1 "blk\\.1\\.ffn_(gate|up|down)(_exps)?\\.(weight|[0-9])"

static const combo k_combos[] = {
    {SL_PLACE_GPU, 0, NULL, false, 0, 0},
    {SL_PLACE_LAYERS, 1, NULL, false, 0, 0},      /* the last layer */
    {SL_PLACE_LAYERS, 99, NULL, false, 0, 0},     /* all layers and the output */
    {SL_PLACE_EXPERTS_CPU, 0, NULL, false, 0, 0},
    {SL_PLACE_AUTO, 0, NULL, false, 0, 0},
    {SL_PLACE_AUTO, 0, NULL, true, 0, 0},         /* --cpu-moe */
    {SL_PLACE_LAYERS, 99, NULL, false, 1, 0},     /* -ngl 99 --n-cpu-moe 1 */
    {SL_PLACE_LAYERS, 99, NULL, false, 2, 0},     /* --n-cpu-moe 2: past a leading dense layer */
    {SL_PLACE_AUTO, 0, FFN1 "=CPU", false, 0, 0}, /* device core, host FFN */
    {SL_PLACE_LAYERS, 0, FFN1 "=CUDA0", false, 0, 0}, /* host core, device FFN */
    {SL_PLACE_AUTO, 0, "blk\\.0\\.=CPU,output=GPU", false, 0, 0},
};

static sl_model *open_combo(const char *path, const combo *cb, sl_load_io io)
{
    sl_model_options o = sl_model_options_default();
    o.placement = cb->pl;
    o.io = io;
    o.gpu_layers = cb->gpu_layers;
    o.override_tensor = cb->ot;
    o.cpu_moe = cb->cpu_moe;
    o.n_cpu_moe = cb->n_cpu_moe;
    o.vram_budget = cb->vram_budget;
    o.progress = false;
    o.n_threads = 2;
    if (cb->pl != SL_PLACE_CPU) o.device = "sim";
    sl_model *m = NULL;
    sl_error e;
    sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

static sl_model *open_model(const char *path, sl_placement pl, sl_load_io io, int gpu_layers)
{
    const combo cb = {.pl = pl, .gpu_layers = gpu_layers};
    return open_combo(path, &cb, io);
}

/* The options of an all-logits context of 64 positions. */
static sl_ctx_options all_logits_opts(int n_batch, bool f16)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.n_batch = n_batch;
    co.kv_f16 = f16;
    co.all_logits = true;
    return co;
}

/* Evaluates k_tokens (all logits) in one call with n_batch, returns a malloc'd copy. */
/* Leading dense layers of the testmodel `label` starts with: deepseek2's and glm4moe's one. */
static int dense_lead(const char *label)
{
    return strstr(label, "deepseek2") || strstr(label, "glm4moe") ? 1 : 0;
}

static float *run_prefill(sl_model *m, int n_batch, bool f16)
{
    const sl_ctx_options co = all_logits_opts(n_batch, f16);
    sl_ctx *c = NULL;
    sl_error e;
    sl_status st = sl_ctx_create(m, &co, &c, &e);
    CHECK_MSG(st == SL_OK, "ctx: %s", e.msg);
    if (st) return NULL;
    sl_model_info info;
    sl_model_info_get(m, &info);
    st = sl_ctx_eval(c, k_tokens, N_TOK, &e);
    CHECK_MSG(st == SL_OK, "eval: %s", e.msg);
    /* buffers are sized at creation: an eval within a batch registers no host memory and
     * allocates no device memory (on CUDA both are synchronising calls) */
    sl_model_info after;
    sl_model_info_get(m, &after);
    if (n_batch >= N_TOK)
        CHECK_MSG(after.device_host_registers == info.device_host_registers &&
                      after.device_region_allocs == info.device_region_allocs,
                  "eval: %llu host registrations, %llu device allocations",
                  (unsigned long long)(after.device_host_registers - info.device_host_registers),
                  (unsigned long long)(after.device_region_allocs - info.device_region_allocs));
    float *out = calloc((size_t)N_TOK * (size_t)info.n_vocab, sizeof *out);
    for (int i = 0; i < N_TOK && !st; i++) {
        const float *l = sl_ctx_logits(c, i);
        CHECK(l != NULL);
        if (l) memcpy(out + (size_t)i * info.n_vocab, l, (size_t)info.n_vocab * sizeof *l);
    }
    CHECK(sl_ctx_n_past(c) == N_TOK);
    sl_ctx_destroy(c);
    return out;
}

static double max_diff(const float *a, const float *b, size_t n, double *scale)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = fabs((double)a[i] - (double)b[i]);
        if (x > d || isnan(x)) d = isnan(x) ? INFINITY : x;
        if (fabs(a[i]) > s) s = fabs(a[i]);
    }
    if (scale) *scale = s;
    return d;
}

/* sl_ctx_eval_tail keeps rows first..N_TOK-1 only, each the bits of the full eval's row (ref,
 * run with the same n_batch), whether the tail starts inside the first batch or a later one;
 * rows below first are not served; the argument errors are SL_ERR_INVALID. */
static void check_tail(const char *label, sl_model *m, int n_batch, const float *ref)
{
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t V = (size_t)info.n_vocab;
    sl_ctx_options co = all_logits_opts(n_batch, false);
    sl_ctx *c = NULL;
    sl_error e;
    CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "%s: ctx: %s", label, e.msg);
    const size_t firsts[] = {1, N_TOK / 2, N_TOK - 1};
    for (size_t f = 0; c && f < sizeof firsts / sizeof *firsts; f++) {
        const size_t first = firsts[f];
        CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK);
        CHECK_MSG(sl_ctx_eval_tail(c, k_tokens, N_TOK, first, &e) == SL_OK, "%s: %s", label,
                  e.msg);
        CHECK(sl_ctx_n_past(c) == N_TOK);
        CHECK(sl_ctx_logits(c, (int64_t)first - 1) == NULL);
        CHECK(sl_ctx_logits(c, N_TOK) == NULL);
        CHECK(sl_ctx_logits(c, -1) == sl_ctx_logits(c, N_TOK - 1));
        bool same = true;
        for (size_t i = first; i < N_TOK; i++) {
            const float *l = sl_ctx_logits(c, (int64_t)i);
            same &= l && !memcmp(l, ref + i * V, V * sizeof *l);
        }
        CHECK_MSG(same, "%s: n_batch %d, tail from %zu: rows differ from the full eval's",
                  label, n_batch, first);
    }
    if (c) {
        CHECK(sl_ctx_rewind(c, 0, &e) == SL_OK);
        CHECK(sl_ctx_eval_tail(c, k_tokens, N_TOK, N_TOK, &e) == SL_ERR_INVALID);
        CHECK(sl_ctx_eval_tail(c, k_tokens, 0, 0, &e) == SL_ERR_INVALID);
        CHECK(sl_ctx_n_past(c) == 0);
    }
    sl_ctx_destroy(c);
    co.all_logits = false;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    if (c) CHECK(sl_ctx_eval_tail(c, k_tokens, N_TOK, 1, &e) == SL_ERR_INVALID);
    sl_ctx_destroy(c);
    CHECK(sl_ctx_eval_tail(NULL, k_tokens, N_TOK, 1, &e) == SL_ERR_INVALID);
}

/* The full property set on one model file. */
/* Greedy decoding picked inside the engine (sl_ctx_eval_greedy: on the device where the output
 * layer runs there) gives the tokens of logits read back and picked on the host, step by step,
 * keeps no logits, and copies nothing pageable. */
static void check_greedy(const char *label, sl_model *m, int combo_i)
{
    enum { PROMPT = 5, STEPS = 6 };
    sl_model_info info;
    sl_model_info_get(m, &info);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 32;
    co.kv_f16 = false;
    sl_ctx *a = NULL, *b = NULL;
    sl_error e;
    CHECK(sl_ctx_create(m, &co, &a, &e) == SL_OK);
    co.all_logits = true; /* a greedy step of an all_logits context computes the last row only */
    CHECK(sl_ctx_create(m, &co, &b, &e) == SL_OK);
    if (!a || !b) goto done;
    sl_model_info_get(m, &info);
    const uint64_t pageable0 = info.device_copies_pageable;
    int32_t ta = -1, tb = -1;
    for (int s = 0; s <= STEPS; s++) {
        const int32_t *in = s ? &ta : k_tokens;
        const size_t n = s ? 1 : PROMPT;
        const int32_t prev = ta;
        CHECK(sl_ctx_eval(a, s ? &prev : in, n, &e) == SL_OK);
        const float *l = sl_ctx_logits(a, -1);
        CHECK(l && sl_logits_argmax(l, info.n_vocab, &ta, &e) == SL_OK);
        const int32_t tin = tb;
        CHECK_MSG(sl_ctx_eval_greedy(b, s ? &tin : k_tokens, n, &tb, &e) == SL_OK, "%s: %s",
                  label, e.msg);
        CHECK_MSG(ta == tb, "%s: combo %d step %d: greedy on the engine picked %d, on the host "
                  "%d", label, combo_i, s, tb, ta);
        CHECK(sl_ctx_logits(b, -1) == NULL);
        tb = ta; /* continue both from the same token even after a mismatch */
    }
    sl_model_info_get(m, &info);
    CHECK_MSG(info.device_copies_pageable == pageable0, "%s: combo %d: greedy steps copied "
              "pageable host memory", label, combo_i);
    /* sl_ctx_eval_sample with a greedy sampler is the same step */
    sl_sampler *smp = NULL;
    sl_sampler_options so = sl_sampler_options_default();
    so.temp = 0;
    CHECK(sl_sampler_create(&so, &smp, &e) == SL_OK && sl_sampler_is_greedy(smp));
    CHECK(sl_ctx_rewind(a, 0, &e) == SL_OK && sl_ctx_rewind(b, 0, &e) == SL_OK);
    CHECK(sl_ctx_eval(a, k_tokens, PROMPT, &e) == SL_OK);
    CHECK(sl_logits_argmax(sl_ctx_logits(a, -1), info.n_vocab, &ta, &e) == SL_OK);
    CHECK(sl_ctx_eval_sample(b, smp, k_tokens, PROMPT, &tb, &e) == SL_OK && ta == tb);
    CHECK(sl_ctx_eval_greedy(b, k_tokens, 0, &tb, &e) == SL_ERR_INVALID);
    /* a non-greedy sampler with no tokens must not sample the previous step's logits */
    sl_sampler *hot = NULL;
    so.temp = 0.8f;
    CHECK(sl_sampler_create(&so, &hot, &e) == SL_OK && !sl_sampler_is_greedy(hot));
    CHECK(sl_ctx_eval_sample(a, hot, k_tokens, 0, &tb, &e) == SL_ERR_INVALID);
    CHECK(sl_ctx_eval_sample(a, NULL, k_tokens, 1, &tb, &e) == SL_ERR_INVALID);
    CHECK(sl_ctx_eval_sample(NULL, hot, k_tokens, 1, &tb, &e) == SL_ERR_INVALID);
    sl_sampler_destroy(hot);
    CHECK(sl_ctx_eval_greedy(b, k_tokens, 1, NULL, &e) == SL_ERR_INVALID);
    sl_sampler_destroy(smp);
done:
    sl_ctx_destroy(a);
    sl_ctx_destroy(b);
}

static void check_model(const char *label, const char *path, bool placements)
{
    sl_model *m = open_model(path, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
    if (!m) return;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t V = (size_t)info.n_vocab, NV = V * N_TOK;
    CHECK(info.n_layer > 0 && info.n_vocab > 0 && info.host_bytes > 0 && info.gpu_bytes == 0);

    float *pre = run_prefill(m, 512, false);
    if (!pre) {
        sl_model_close(m);
        return;
    }
    bool finite = true;
    for (size_t i = 0; i < NV; i++) finite &= isfinite(pre[i]) != 0;
    CHECK_MSG(finite, "%s: non-finite logits", label);
    double scale;
    max_diff(pre, pre, NV, &scale);
    CHECK_MSG(scale > 1e-3, "%s: logits all ~0 (%g)", label, scale);

    check_greedy(label, m, -1);
    /* decode one token at a time */
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.kv_f16 = false;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    double worst = 0;
    for (int i = 0; i < N_TOK && c; i++) {
        sl_status st = sl_ctx_eval(c, &k_tokens[i], 1, &e);
        CHECK_MSG(st == SL_OK, "%s decode %d: %s", label, i, e.msg);
        const float *l = sl_ctx_logits(c, -1);
        if (!l) break;
        const double d = max_diff(pre + (size_t)i * V, l, V, NULL);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= 1e-4 * (1 + scale), "%s: prefill vs decode differ by %g", label, worst);
    /* rewind to 4 and re-evaluate the rest as one batch */
    if (c) {
        CHECK(sl_ctx_rewind(c, 4, &e) == SL_OK);
        CHECK(sl_ctx_n_past(c) == 4);
        CHECK(sl_ctx_rewind(c, 5, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_eval(c, k_tokens + 4, N_TOK - 4, &e) == SL_OK);
        const float *l = sl_ctx_logits(c, -1);
        CHECK(l && max_diff(pre + (size_t)(N_TOK - 1) * V, l, V, NULL) <= 1e-4 * (1 + scale));
        /* the same bits as every row's pass: the last layer ran past its attention on this
         * one row alone (forward.c's output rows), the CPU kernels are batch-invariant */
        CHECK_MSG(l && memcmp(pre + (size_t)(N_TOK - 1) * V, l, V * sizeof *l) == 0,
                  "%s: the kept row's logits differ from the all-rows pass", label);
        CHECK(sl_ctx_logits(c, 0) == NULL); /* not all_logits */
        CHECK(sl_ctx_logits(c, N_TOK - 5) == l);
        int32_t bad = info.n_vocab;
        CHECK(sl_ctx_eval(c, &bad, 1, &e) == SL_ERR_RANGE);
        CHECK(sl_ctx_n_past(c) == N_TOK);
        sl_ctx_stats stt;
        sl_ctx_stats_get(c, &stt);
        CHECK(stt.decode_tokens == N_TOK && stt.prefill_tokens == N_TOK - 4);
        /* the last layer (MoE in every testmodel) computes past its attention only the row
         * whose logits are kept (forward.c's output rows): one of the batch's N_TOK - 4 */
        const int32_t moe_layers = info.n_layer - dense_lead(label);
        if (info.n_expert)
            CHECK_MSG(stt.expert_calls_cpu ==
                          ((uint64_t)N_TOK * moe_layers + (uint64_t)(N_TOK - 4) * (moe_layers - 1) +
                           1) * (uint64_t)info.n_expert_used,
                      "%s: %llu expert calls", label, (unsigned long long)stt.expert_calls_cpu);
        sl_ctx_destroy(c);
    }
    /* chunked prefill */
    float *chunk = run_prefill(m, 3, false);
    if (chunk) {
        const double d = max_diff(pre, chunk, NV, NULL);
        CHECK_MSG(d <= 1e-4 * (1 + scale), "%s: chunked prefill differs by %g", label, d);
        check_tail(label, m, 3, chunk);
    }
    check_tail(label, m, 512, pre);
    free(chunk);
    /* F16 KV */
    float *h = run_prefill(m, 512, true);
    if (h) {
        /* F16 rounding of K/V is ~5e-4 relative; a MoE router may then flip an expert of a
         * token, which moves that token's logits a lot: the max is checked for dense models,
         * the mean for all */
        const double d = max_diff(pre, h, NV, NULL);
        double mean = 0;
        for (size_t i = 0; i < NV; i++) mean += fabs((double)pre[i] - (double)h[i]);
        mean /= (double)NV;
        if (!info.n_expert)
            CHECK_MSG(d <= 2e-2 * (1 + scale), "%s: F16 KV differs by %g (scale %g)", label, d,
                      scale);
        CHECK_MSG(mean <= 1e-2 * (1 + scale), "%s: F16 KV differs by %g on average (max %g, "
                  "scale %g)", label, mean, d, scale);
        CHECK_MSG(d > 0, "%s: F16 KV identical to F32 (was F16 used?)", label);
    }
    float *pre16 = h; /* the placements' F16 reference */
    sl_model_close(m);

    /* io modes */
    const sl_load_io ios[] = {SL_LOAD_DIRECT, SL_LOAD_MMAP};
    for (size_t i = 0; i < 2; i++) {
        sl_model *mi = open_model(path, SL_PLACE_CPU, ios[i], 0);
        if (!mi) continue;
        float *l = run_prefill(mi, 512, false);
        if (l) CHECK_MSG(max_diff(pre, l, NV, NULL) == 0, "%s: io %d differs", label, (int)ios[i]);
        free(l);
        sl_model_close(mi);
    }
    /* placements on the sim device */
    if (placements) {
        for (size_t i = 0; i < sizeof k_combos / sizeof *k_combos; i++) {
            const combo *cb = &k_combos[i];
            if ((cb->cpu_moe || cb->n_cpu_moe) && !info.n_expert) continue;
            /* the first combos read with mmap: device weights are staged through the pool */
            const sl_load_io io = i < 2 ? SL_LOAD_MMAP : SL_LOAD_PREAD;
            sl_model *mp = open_combo(path, cb, io);
            if (!mp) continue;
            sl_model_info pi;
            sl_model_info_get(mp, &pi);
            /* loading uploads from page-locked memory only (CUDA: no synchronous copies) */
            CHECK_MSG(pi.device_copies_pageable == 0, "%s: combo %d (io %d): loading made %llu "
                      "pageable copies", label, (int)i, (int)io,
                      (unsigned long long)pi.device_copies_pageable);
            CHECK_MSG(pi.gpu_bytes > 0, "%s: combo %d: nothing on the device", label,
                      (int)i);
            CHECK(pi.gpu_bytes + pi.host_bytes >= pi.weight_bytes);
            /* --n-cpu-moe N counts layers, so a leading dense layer has none */
            const int n_dense = dense_lead(label);
            if ((cb->pl == SL_PLACE_EXPERTS_CPU || cb->cpu_moe || cb->n_cpu_moe > n_dense ||
                 cb->ot) &&
                info.n_expert)
                CHECK_MSG(pi.host_bytes > 0, "%s: combo %d: nothing on the host", label, (int)i);
            sl_model_info_get(mp, &pi);
            const uint64_t pageable0 = pi.device_copies_pageable;
            float *l = run_prefill(mp, 512, false);
            if (l)
                CHECK_MSG(max_diff(pre, l, NV, NULL) == 0, "%s: combo %d differs", label,
                          (int)i);
            free(l);
            /* evaluation copies only page-locked host memory (on CUDA a pageable one would be
             * a synchronous copy) */
            sl_model_info_get(mp, &pi);
            CHECK_MSG(pi.device_copies_pageable == pageable0,
                      "%s: combo %d: %llu copies from or to pageable host memory", label,
                      (int)i, (unsigned long long)(pi.device_copies_pageable - pageable0));
            /* chunks of 4 (device buffers reused across chunks) and an F16 KV on the device */
            l = run_prefill(mp, 4, false);
            if (l)
                CHECK_MSG(max_diff(pre, l, NV, NULL) <= 1e-4 * (1 + scale),
                          "%s: combo %d chunked differs", label, (int)i);
            free(l);
            l = run_prefill(mp, 512, true);
            if (l && pre16)
                CHECK_MSG(max_diff(pre16, l, NV, NULL) == 0, "%s: combo %d F16 KV differs",
                          label, (int)i);
            free(l);
            check_greedy(label, mp, (int)i);
            sl_model_close(mp);
        }
    }
    /* the post-fetch MoE scheduler's modes (scheduler/moe/fetch.h) with experts on the host: the
     * same logits bit for bit (deepseek2, issue 15: groups, bias and shared experts) */
    for (int i = 0; placements && strstr(label, "deepseek2") && i < 5; i++) {
        static const char *const modes[] = {"mode=cpu", "mode=post", "mode=post block_on_miss=0",
                                            "mode=full", "mode=auto"};
        const combo cb = {SL_PLACE_EXPERTS_CPU, 0, NULL, false, 0, 0};
        sl_model *mp = open_combo(path, &cb, SL_LOAD_PREAD);
        if (!mp) continue;
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = 64;
        co.kv_f16 = false;
        co.all_logits = true;
        co.sched = modes[i];
        sl_ctx *c = NULL;
        sl_error e;
        CHECK_MSG(sl_ctx_create(mp, &co, &c, &e) == SL_OK, "%s %s: %s", label, modes[i], e.msg);
        if (c) {
            CHECK_MSG(sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK, "%s %s: %s", label,
                      modes[i], e.msg);
            const float *l = sl_ctx_logits(c, 0);
            CHECK_MSG(l && max_diff(pre, l, NV, NULL) == 0, "%s: scheduler %s differs", label,
                      modes[i]);
            sl_ctx_destroy(c);
        }
        sl_model_close(mp);
    }
    free(pre);
    free(pre16);
}

/* deepseek2's legacy attn_kv_b layout (issue 15) holding the same F32 weights as the split
 * attn_k_b / attn_v_b file: the k_b / v_b derived at load give the split file's logits, on the
 * CPU and with the attention on the sim device. */
static void check_legacy_deepseek2(void)
{
    tm_params p;
    tm_defaults("deepseek2", &p);
    sl_error e;
    const char *split = tmp_path("ds2-split.gguf");
    CHECK_MSG(tm_write(&p, split, &e) == SL_OK, "write: %s", e.msg);
    p.legacy_kv_b = 1;
    char legacy[600];
    snprintf(legacy, sizeof legacy, "%s", tmp_path("ds2-kv_b.gguf"));
    CHECK_MSG(tm_write(&p, legacy, &e) == SL_OK, "write legacy: %s", e.msg);
    sl_model *ms = open_model(split, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
    float *want = ms ? run_prefill(ms, 512, false) : NULL;
    sl_model_close(ms);
    if (!want) return;
    const combo cbs[] = {{.pl = SL_PLACE_CPU}, k_combos[0], k_combos[1]};
    for (size_t i = 0; i < sizeof cbs / sizeof *cbs; i++) {
        sl_model *m = open_combo(legacy, &cbs[i], i ? SL_LOAD_PREAD : SL_LOAD_MMAP);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        const size_t NV = (size_t)info.n_vocab * N_TOK;
        CHECK_MSG(i == 0 || info.gpu_bytes > 0, "deepseek2 attn_kv_b combo %zu: nothing on "
                  "the device", i);
        float *got = run_prefill(m, 512, false);
        if (got) {
            double scale;
            const double d = max_diff(want, got, NV, &scale);
            CHECK_MSG(scale > 1e-3 && d <= 1e-6 * scale, "deepseek2 attn_kv_b (combo %zu): "
                      "logits differ from the split layout's by %g (scale %g)", i, d, scale);
        }
        free(got);
        sl_model_close(m);
    }
    free(want);
}

/* A deepseek2 or glm4moe file whose last block is an MTP block (nextn_predict_layers 1,
 * issue 15) runs the trunk only, as llama.cpp: its logits are the trunk-only file's, and the
 * same four blocks without the key give different ones (so the block would have shown). */
static void check_mtp(const char *arch)
{
    tm_params p;
    tm_defaults(arch, &p);
    sl_error e;
    float *logits[3] = {NULL, NULL, NULL};
    int32_t n_layer[3] = {0, 0, 0}, n_vocab = 0;
    for (int i = 0; i < 3; i++) {
        p.n_layer = i ? 4 : 3;
        p.n_nextn = i == 1;
        const char *path = tmp_path("mtp.gguf");
        CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
        sl_model *m = open_model(path, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        n_layer[i] = info.n_layer;
        n_vocab = info.n_vocab;
        logits[i] = run_prefill(m, 512, false);
        sl_model_close(m);
    }
    CHECK_MSG(n_layer[0] == 3 && n_layer[1] == 3 && n_layer[2] == 4,
              "%s MTP: n_layer %d / %d / %d, want 3 / 3 / 4", arch, n_layer[0], n_layer[1],
              n_layer[2]);
    if (logits[0] && logits[1] && logits[2]) {
        const size_t NV = (size_t)n_vocab * N_TOK;
        double scale;
        const double same = max_diff(logits[0], logits[1], NV, &scale);
        CHECK_MSG(scale > 1e-3 && same <= 1e-6 * scale, "%s MTP: logits differ from the "
                  "trunk's by %g (scale %g)", arch, same, scale);
        const double other = max_diff(logits[0], logits[2], NV, &scale);
        CHECK_MSG(other > 1e-3 * scale, "%s: a fourth block changed nothing (%g)", arch, other);
    }
    for (int i = 0; i < 3; i++) free(logits[i]);
}

/* glm4moe's defaults, as llama_model_glm4_moe loads them: without expert_gating_func it
 * routes by sigmoid (the same logits as the key's 2; 1, softmax, differs); without
 * expert_weights_scale the weights are not scaled (differs from the file's 2.5); q/k norms
 * are optional each (a file without layer 1's q norm loads, and it changes the logits). */
static void check_glm4moe_defaults(void)
{
    static const struct {
        const char *drop, *set, *omit;
        int64_t val;
        bool same; /* as the default file's logits */
    } k_files[] = {{NULL, NULL, NULL, 0, true},
                   {"expert_gating_func", NULL, NULL, 0, true},
                   {NULL, "expert_gating_func", NULL, 1, false},
                   {"expert_weights_scale", NULL, NULL, 0, false},
                   {NULL, NULL, "blk.1.attn_q_norm.weight", 0, false}};
    enum { NF = sizeof k_files / sizeof *k_files };
    float *logits[NF] = {NULL};
    int32_t n_vocab = 0;
    for (int i = 0; i < NF; i++) {
        tm_params p;
        tm_defaults("glm4moe", &p);
        p.drop_key = k_files[i].drop;
        p.set_key = k_files[i].set;
        p.set_val = k_files[i].val;
        p.omit = k_files[i].omit;
        sl_error e;
        const char *path = tmp_path("glm4moe-defaults.gguf");
        CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
        sl_model *m = open_model(path, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
        CHECK_MSG(m != NULL, "glm4moe file %d does not open", i);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        n_vocab = info.n_vocab;
        logits[i] = run_prefill(m, 512, false);
        sl_model_close(m);
    }
    for (int i = 1; i < NF && logits[0]; i++) {
        if (!logits[i]) continue;
        double scale;
        const double d = max_diff(logits[0], logits[i], (size_t)n_vocab * N_TOK, &scale);
        CHECK_MSG(k_files[i].same ? d <= 1e-6 * scale : d > 1e-3 * scale,
                  "glm4moe file %d: logits %s the default's (max diff %g, scale %g)", i,
                  k_files[i].same ? "differ from" : "equal", d, scale);
    }
    for (int i = 0; i < NF; i++) free(logits[i]);
}

/* deepseek2 without expert_gating_func routes as llama.cpp's loader says: sigmoid for a
 * GLM-4.7-Flash file (47 or 48 trunk blocks, 154880 tokens by deepseek2.vocab_size or the
 * tokenizer's list; its converter leaves the key out), softmax otherwise. Logits of files
 * without the key against the same weights with the key 2 (sigmoid, testmodel's) or 1
 * (softmax); 154880 x 64 tied embeddings keep each file ~40 MB. */
static void check_glm_gating_deepseek2(void)
{
    static const struct {
        int n_layer, n_nextn;
        bool drop;    /* expert_gating_func left out, deepseek2.vocab_size 154880 written */
        bool softmax; /* expert_gating_func 1 */
    } k_files[] = {{47, 0, true, false}, {47, 0, false, false}, {47, 0, false, true},
                   {48, 1, true, false}, {46, 0, true, false}, {46, 0, false, true},
                   {47, 0, false, false}};
    enum { NF = sizeof k_files / sizeof *k_files };
    float *logits[NF] = {NULL};
    int32_t n_vocab = 0;
    for (int i = 0; i < NF; i++) {
        tm_params p;
        tm_defaults("deepseek2", &p);
        p.n_vocab = 154880;
        p.tie_output = 1;
        p.n_layer = k_files[i].n_layer;
        p.n_nextn = k_files[i].n_nextn;
        if (k_files[i].drop) {
            p.drop_key = "expert_gating_func";
            p.set_key = "vocab_size";
            p.set_val = 154880;
        } else if (k_files[i].softmax) {
            p.set_key = "expert_gating_func";
            p.set_val = 1;
        }
        if (i == NF - 1) p.drop_key = "expert_gating_func"; /* and no vocab_size: n_vocab 0 */
        sl_error e;
        const char *path = tmp_path("ds2-gating.gguf");
        CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
        sl_model *m = open_model(path, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        n_vocab = info.n_vocab;
        logits[i] = run_prefill(m, 512, false);
        sl_model_close(m);
    }
    /* pairs (a, b, same): 47 blocks without the key = sigmoid, != softmax; 48 blocks of which
     * one MTP (the same 47-block trunk, check_mtp) = sigmoid; 46 = softmax; 47
     * without a vocabulary size llama.cpp sees before the tensors = softmax */
    static const int k_pairs[][3] = {{0, 1, 1}, {0, 2, 0}, {3, 1, 1}, {4, 5, 1}, {6, 2, 1}};
    for (size_t i = 0; i < sizeof k_pairs / sizeof *k_pairs; i++) {
        const float *a = logits[k_pairs[i][0]], *b = logits[k_pairs[i][1]];
        if (!a || !b) continue;
        double scale;
        const double d = max_diff(a, b, (size_t)n_vocab * N_TOK, &scale);
        if (k_pairs[i][2])
            CHECK_MSG(scale > 1e-3 && d == 0, "deepseek2 gating: file %d (no key) differs from "
                      "file %d by %g (scale %g)", k_pairs[i][0], k_pairs[i][1], d, scale);
        else
            CHECK_MSG(d > 1e-3 * scale, "deepseek2 gating: sigmoid and softmax gave the same "
                      "logits (%g)", d);
    }
    for (int i = 0; i < NF; i++) free(logits[i]);
}

/* Opens a deepseek2 testmodel changed by one of omit / reshape / set_key / drop_key and
 * expects SL_ERR_FORMAT (or `want`) with a message holding a and b. */
static void refuse_ds2(const char *path, const sl_model_options *o, const char *omit,
                       const char *reshape, const char *set_key, int64_t set_val,
                       const char *drop_key, sl_status want, const char *a, const char *b)
{
    tm_params p;
    sl_error e;
    tm_defaults("deepseek2", &p);
    p.omit = omit;
    p.reshape = reshape;
    p.set_key = set_key;
    p.set_val = set_val;
    p.drop_key = drop_key;
    p.legacy_kv_b =
        (omit && strstr(omit, "attn_kv_b")) || (reshape && strstr(reshape, "attn_kv_b"));
    CHECK(tm_write(&p, path, &e) == SL_OK);
    sl_model *m = NULL;
    const sl_status st = sl_model_open(path, o, &m, &e);
    CHECK_MSG(st == want, "deepseek2 %s%s%s: status %d, want %d (%s)", omit ? omit : "",
              reshape ? reshape : "", set_key ? set_key : drop_key ? drop_key : "", (int)st,
              (int)want, e.msg);
    CHECK(m == NULL);
    if (st != SL_OK) {
        CHECK_CONTAINS(e.msg, a);
        CHECK_CONTAINS(e.msg, b);
    }
    sl_model_close(m);
}

static void check_broken_deepseek2(const char *path, const sl_model_options *o)
{
    const sl_status F = SL_ERR_FORMAT;
    /* omit, reshape, set_key, set_val, drop_key, status, two parts of the message */
    static const struct {
        const char *omit, *reshape, *set_key;
        int64_t set_val;
        const char *drop_key;
        bool unsupported;
        const char *a, *b;
    } k_cases[] = {
        /* MLA tensors: missing, or not kv_lora + rope wide; a mis-shaped selection bias */
        {"blk.1.attn_kv_a_mqa.weight", NULL, NULL, 0, NULL, false, "blk.1.attn_kv_a_mqa.weight",
         "[64, 40]"},
        {"blk.2.attn_k_b.weight", NULL, NULL, 0, NULL, false, "blk.2.attn_k_b.weight",
         "[16, 32, 4]"},
        {"blk.0.attn_q_a_norm.weight", NULL, NULL, 0, NULL, false, "blk.0.attn_q_a_norm.weight",
         "[32]"},
        {NULL, "blk.0.attn_kv_a_mqa.weight", NULL, 0, NULL, false, "blk.0.attn_kv_a_mqa.weight",
         "expected [64, 40]"},
        {NULL, "blk.1.exp_probs_b.bias", NULL, 0, NULL, false, "blk.1.exp_probs_b.bias",
         "expected [8]"},
        {"blk.2.ffn_up_shexp.weight", NULL, NULL, 0, NULL, false, "blk.2.ffn_up_shexp.weight",
         "[64, 64]"},
        /* q_lora_rank 0 (V2-Lite) needs the plain attn_q */
        {NULL, NULL, "attention.q_lora_rank", 0, NULL, false, "blk.0.attn_q.weight", "[64, 96]"},
        /* head dimensions */
        {NULL, NULL, "attention.key_length", 48, NULL, false, "deepseek2.attention.key_length",
         "= 32 + 8 = 40"},
        {NULL, NULL, "attention.value_length", 16, NULL, false,
         "deepseek2.attention.value_length", "expected kv_lora_rank = 32"},
        {NULL, NULL, "attention.key_length_mla", 8, NULL, false,
         "deepseek2.attention.key_length_mla", "expected > rope.dimension_count 8"},
        {NULL, NULL, "attention.head_count_kv", 2, NULL, false,
         "deepseek2.attention.head_count_kv", "expected 1"},
        {NULL, NULL, NULL, 0, "rope.dimension_count", false, "deepseek2.rope.dimension_count",
         "missing"},
        /* no *_mla keys: the legacy attn_kv_b layout, whose head_count_kv is head_count and
         * whose attn_kv_b is [kv_lora, H * (nope + v)] */
        {NULL, NULL, NULL, 0, "attention.key_length_mla", false,
         "deepseek2.attention.head_count_kv", "expected head_count 4"},
        {NULL, "blk.1.attn_kv_b.weight", NULL, 0, NULL, false, "blk.1.attn_kv_b.weight",
         "expected [32, 128]"},
        {"blk.2.attn_kv_b.weight", NULL, NULL, 0, NULL, false, "blk.2.attn_kv_b.weight",
         "[32, 128]"},
        {NULL, NULL, NULL, 0, "attention.kv_lora_rank", false,
         "deepseek2.attention.kv_lora_rank", "missing"},
        /* routing */
        {NULL, NULL, "expert_group_count", 3, NULL, false, "deepseek2.expert_group_count",
         "does not divide expert_count 8"},
        {NULL, NULL, "expert_group_used_count", 5, NULL, false,
         "deepseek2.expert_group_used_count", "[1, expert_group_count 4)"},
        {NULL, NULL, "expert_group_used_count", 0, NULL, false,
         "deepseek2.expert_group_used_count", "[1, expert_group_count 4)"},
        /* every group used: llama.cpp asserts n_group_used < n_group */
        {NULL, NULL, "expert_group_used_count", 4, NULL, false,
         "deepseek2.expert_group_used_count", "[1, expert_group_count 4)"},
        {NULL, NULL, "expert_group_count", 8, NULL, false, "deepseek2.expert_group_count",
         "below expert_count 8"},
        {NULL, NULL, "expert_gating_func", 3, NULL, false, "deepseek2.expert_gating_func",
         "outside [0, 2]"},
        {NULL, NULL, "leading_dense_block_count", 4, NULL, false,
         "deepseek2.leading_dense_block_count", "outside [0, 3]"},
        /* MTP blocks: at least one trunk block stays */
        {NULL, NULL, "nextn_predict_layers", 3, NULL, false, "deepseek2.nextn_predict_layers",
         "value 3 outside [0, 2]"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++)
        refuse_ds2(path, o, k_cases[i].omit, k_cases[i].reshape, k_cases[i].set_key,
                   k_cases[i].set_val, k_cases[i].drop_key,
                   k_cases[i].unsupported ? SL_ERR_UNSUPPORTED : F, k_cases[i].a, k_cases[i].b);
}

/* The dense archs of issue 34, and glm4moe's and minimax-m2's own rules: a missing or
 * mis-shaped tensor, a missing, mistyped or out-of-range key, a tensor the architecture does
 * not use (llama.cpp: "wrong number of tensors") (phi3: the fused attn_qkv and gate | up). */
static void check_broken_dense(const char *path, const sl_model_options *o)
{
    static const struct {
        const char *arch, *omit, *reshape, *drop_key, *set_key, *extra;
        sl_status st;
        const char *a, *b;
    } k_cases[] = {
        {"qwen2", NULL, "blk.1.attn_k.bias", NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.attn_k.bias", "expected [32]"},
        {"qwen2", "blk.0.attn_v.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.attn_v.weight", "missing"},
        {"qwen2", NULL, NULL, "embedding_length", NULL, NULL, SL_ERR_FORMAT,
         "qwen2.embedding_length", "missing"},
        {"qwen2", NULL, NULL, NULL, NULL, "blk.0.attn_output.bias", SL_ERR_FORMAT,
         "blk.0.attn_output.bias", "not used by architecture qwen2"},
        {"qwen3", NULL, NULL, NULL, "attention.head_count_kv", NULL, SL_ERR_FORMAT,
         "head_count_kv 3", "not a multiple"},
        {"qwen3", NULL, NULL, NULL, NULL, "blk.1.ffn_gate.bias", SL_ERR_FORMAT,
         "blk.1.ffn_gate.bias", "not used by architecture qwen3"},
        {"gemma2", "blk.0.ffn_gate.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.ffn_gate.weight", "missing"},
        {"gemma2", NULL, NULL, NULL, "attention.sliding_window", NULL, SL_ERR_FORMAT,
         "gemma2.attention.sliding_window", "outside"},
        {"gemma2", NULL, NULL, NULL, NULL, "blk.0.attn_q_norm.weight", SL_ERR_FORMAT,
         "blk.0.attn_q_norm.weight", "not used by architecture gemma2"},
        {"granite", NULL, "blk.1.attn_k.weight", NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.attn_k.weight", "expected [64, 32]"},
        {"granite", NULL, NULL, NULL, NULL, "rope_factors_long.weight", SL_ERR_FORMAT,
         "rope_factors_long.weight", "not used by architecture granite"},
        {"phi3", NULL, NULL, NULL, NULL, "blk.0.ffn_gate.weight", SL_ERR_FORMAT,
         "blk.0.ffn_gate.weight", "not used by architecture phi3"},
        {"phi3", NULL, NULL, NULL, "feed_forward_length", NULL, SL_ERR_UNSUPPORTED,
         "phi3.feed_forward_length", "multiple of 8"},
        {"phi3", NULL, NULL, "attention.layer_norm_rms_epsilon", NULL, NULL, SL_ERR_FORMAT,
         "phi3.attention.layer_norm_rms_epsilon", "missing"},
        {"phi3", NULL, NULL, NULL, NULL, "blk.0.attn_q.bias", SL_ERR_FORMAT,
         "blk.0.attn_k.bias", "all three or none"},
        {"qwen3", "blk.0.attn_k_norm.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.attn_k_norm.weight", "[32]"},
        {"qwen3", NULL, "blk.1.attn_q.weight", NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.attn_q.weight", "expected [64, 128]"},
        {"gemma2", "blk.1.post_attention_norm.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.post_attention_norm.weight", "[64]"},
        {"gemma2", NULL, NULL, NULL, "final_logit_softcapping", NULL, SL_ERR_TYPE,
         "gemma2.final_logit_softcapping", "expected f32"},
        {"granite", NULL, NULL, "logit_scale", NULL, NULL, SL_ERR_FORMAT, "granite.logit_scale",
         "missing"},
        {"granite", NULL, NULL, NULL, "logit_scale", NULL, SL_ERR_TYPE, "granite.logit_scale",
         "expected f32"},
        {"granite", "blk.0.ffn_down.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.ffn_down.weight", "[64, 64]"},
        {"phi3", NULL, "blk.1.attn_qkv.weight", NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.attn_qkv.weight", "expected [64, 128]"},
        {"phi3", "blk.0.ffn_up.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.ffn_up.weight", "[64, 128]"},
        /* glm4moe: exp_probs_b and expert_shared_count are required, the dense layer has no
         * router bias, the gating is 0..2 */
        {"glm4moe", "blk.2.exp_probs_b.bias", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.2.exp_probs_b.bias", "missing"},
        {"glm4moe", NULL, NULL, "expert_shared_count", NULL, NULL, SL_ERR_FORMAT,
         "glm4moe.expert_shared_count", "missing"},
        {"glm4moe", NULL, NULL, NULL, "expert_gating_func", NULL, SL_ERR_FORMAT,
         "glm4moe.expert_gating_func", "outside [0, 2]"},
        {"glm4moe", NULL, NULL, NULL, NULL, "blk.0.exp_probs_b.bias", SL_ERR_FORMAT,
         "blk.0.exp_probs_b.bias", "not used by architecture glm4moe"},
        {"glm4moe", NULL, "blk.1.attn_k_norm.weight", NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.attn_k_norm.weight", "expected [16]"},
        /* minimax-m2: the gating key and exp_probs_b are required, its k norm is [Hkv D] */
        {"minimax-m2", NULL, NULL, "expert_gating_func", NULL, NULL, SL_ERR_FORMAT,
         "minimax-m2.expert_gating_func", "missing"},
        {"minimax-m2", "blk.1.exp_probs_b.bias", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.1.exp_probs_b.bias", "missing"},
        {"minimax-m2", NULL, NULL, NULL, "expert_gating_func", NULL, SL_ERR_FORMAT,
         "minimax-m2.expert_gating_func", "outside [1, 2]"},
        {"minimax-m2", "blk.0.attn_k_norm.weight", NULL, NULL, NULL, NULL, SL_ERR_FORMAT,
         "blk.0.attn_k_norm.weight", "[32]"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
        tm_params p;
        sl_error e;
        sl_model *m = NULL;
        tm_defaults(k_cases[i].arch, &p);
        p.omit = k_cases[i].omit;
        p.reshape = k_cases[i].reshape;
        p.drop_key = k_cases[i].drop_key;
        p.set_key = k_cases[i].set_key;
        p.extra = k_cases[i].extra;
        /* 3: no head count's divisor, no multiple of 8, and an f32 key written as a u32 */
        p.set_val = p.set_key && !strcmp(p.set_key, "attention.sliding_window") ? 0 : 3;
        CHECK(tm_write(&p, path, &e) == SL_OK);
        const sl_status st = sl_model_open(path, o, &m, &e);
        CHECK_MSG(st == k_cases[i].st && !m, "%s case %zu: status %d", k_cases[i].arch, i,
                  (int)st);
        CHECK_CONTAINS(e.msg, k_cases[i].a);
        CHECK_CONTAINS(e.msg, k_cases[i].b);
        if (m) sl_model_close(m);
    }
    /* gemma2 has no output tensor in llama.cpp (always token_embd): a file with one is refused,
     * as llama.cpp refuses it; so is a sliding_window_pattern of 0 (llama.cpp: all layers) */
    for (int c = 0; c < 2; c++) {
        tm_params p;
        sl_error e;
        sl_model *m = NULL;
        tm_defaults("gemma2", &p);
        p.gemma_output = c == 0;
        p.set_key = c == 1 ? "attention.sliding_window_pattern" : NULL;
        p.set_val = 0;
        CHECK(tm_write(&p, path, &e) == SL_OK);
        CHECK(sl_model_open(path, o, &m, &e) == SL_ERR_FORMAT && !m);
        CHECK_CONTAINS(e.msg, c == 0 ? "output.weight"
                                     : "gemma2.attention.sliding_window_pattern");
        CHECK_CONTAINS(e.msg, c == 0 ? "token_embd" : "outside [1,");
        if (m) sl_model_close(m);
    }
}

static void check_broken(void)
{
    tm_params p;
    sl_error e;
    const char *path = tmp_path("broken.gguf");
    /* missing tensor */
    tm_defaults("qwen3moe", &p);
    p.omit = "blk.1.ffn_up_exps.weight";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_CPU;
    o.progress = false;
    sl_model *m = NULL;
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK(m == NULL);
    CHECK_CONTAINS(e.msg, "blk.1.ffn_up_exps.weight");
    CHECK_CONTAINS(e.msg, "[64, 64, 8]");
    /* wrong shape */
    tm_defaults("llama", &p);
    p.reshape = "blk.1.attn_k.weight";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.1.attn_k.weight");
    CHECK_CONTAINS(e.msg, "[32, 64]"); /* what the file has */
    CHECK_CONTAINS(e.msg, "expected [64, 32]");
    /* qwen2moe's biases are optional, as llama.cpp's create_tensor_qkv loads them; a
     * mis-shaped one is refused */
    tm_defaults("qwen2moe", &p);
    p.omit = "blk.0.attn_v.bias";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_OK && m);
    if (m) sl_model_close(m);
    m = NULL;
    p.omit = NULL;
    p.reshape = "blk.0.attn_v.bias";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.0.attn_v.bias");
    CHECK_CONTAINS(e.msg, "expected [32]");
    /* gemma3's post norm */
    tm_defaults("gemma3", &p);
    p.omit = "blk.3.post_ffw_norm.weight";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.3.post_ffw_norm.weight");
    /* gpt-oss: a missing expert bias, a mis-shaped sink, a head size that is not n_rot */
    tm_defaults("gpt-oss", &p);
    p.omit = "blk.1.ffn_down_exps.bias";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.1.ffn_down_exps.bias");
    CHECK_CONTAINS(e.msg, "[64, 4]");
    tm_defaults("gpt-oss", &p);
    p.omit = "blk.0.attn_sinks.weight";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.0.attn_sinks.weight");
    CHECK_CONTAINS(e.msg, "[4]");
    tm_defaults("gpt-oss", &p);
    p.reshape = "blk.0.ffn_gate_exps.bias";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.0.ffn_gate_exps.bias");
    CHECK_CONTAINS(e.msg, "expected [64, 4]");
    tm_defaults("gpt-oss", &p);
    p.omit = "blk.1.post_attention_norm.weight";
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(path, &o, &m, &e) == SL_ERR_FORMAT);
    CHECK_CONTAINS(e.msg, "blk.1.post_attention_norm.weight");
    check_broken_deepseek2(path, &o);
    check_broken_dense(path, &o);
    /* unknown architecture */
    tm_defaults("llama", &p);
    CHECK(tm_write(&p, path, &e) == SL_OK);
    CHECK(sl_model_open(tmp_path("does-not-exist.gguf"), &o, &m, &e) != SL_OK);
}

static void check_info(const char *path)
{
    sl_model *m = open_model(path, SL_PLACE_CPU, SL_LOAD_PREAD, 0);
    if (!m) return;
    sl_model_info in;
    sl_model_info_get(m, &in);
    CHECK(!strcmp(in.arch, "qwen3moe"));
    CHECK(!strcmp(in.name, "testmodel"));
    CHECK(in.n_embd == 64 && in.n_head == 4 && in.n_head_kv == 2 && in.head_dim == 32);
    CHECK(in.n_expert == 8 && in.n_expert_used == 2 && in.n_ff_exp == 64);
    CHECK(in.n_vocab == 300 && in.bos == 1 && in.eos == 2);
    CHECK(in.n_params > 0 && in.weight_bytes == in.n_params * 4);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 4;
    sl_ctx *c = NULL;
    sl_error e;
    CHECK(sl_ctx_create(m, &co, &c, &e) == SL_OK);
    if (c) {
        CHECK(sl_ctx_eval(c, k_tokens, 5, &e) == SL_ERR_RANGE);
        CHECK_CONTAINS(e.msg, "n_ctx 4");
        CHECK(sl_ctx_n_past(c) == 0);
        CHECK(sl_ctx_logits(c, -1) == NULL);
        sl_ctx_destroy(c);
    }
    sl_model_close(m);
    /* options refused by sl_model_open itself, naming the field: a cpus list that does not
     * parse (it passed, counted as the CPUs online, until a context's pool), budget_ctx < 0
     * (it meant the default) */
    static const struct {
        const char *cpus;
        int budget_ctx;
        const char *want;
    } k_bad[] = {{"3-x", 0, "3-x"}, {NULL, -1, "budget_ctx"}};
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        sl_model_options o = sl_model_options_default();
        o.placement = SL_PLACE_CPU;
        o.progress = false;
        o.cpus = k_bad[i].cpus;
        o.budget_ctx = k_bad[i].budget_ctx;
        sl_model *bad = NULL;
        CHECK_MSG(sl_model_open(path, &o, &bad, &e) != SL_OK && !bad, "option %zu accepted", i);
        CHECK_CONTAINS(e.msg, k_bad[i].want);
        sl_model_close(bad);
    }
}

/* `sluice mkmodel --arch A -o FILE` through the CLI binary. */
static bool mkmodel(const char *bin, const char *arch, const char *type, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "mkmodel", "--arch", arch, "--type", type, "-o", out, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/engine_test_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *archs[] = {"llama", "mixtral", "mixtral-split", "qwen2moe", "qwen3moe", "olmoe",
                           "gemma3", "gpt-oss", "deepseek2", "qwen2", "qwen3", "gemma2",
                           "granite", "phi3", "glm4moe", "minimax-m2"};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        tm_params p;
        tm_defaults(archs[i], &p);
        sl_error e;
        char name[64];
        snprintf(name, sizeof name, "%s.gguf", archs[i]);
        const char *path = tmp_path(name);
        CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write %s: %s", archs[i], e.msg);
        check_model(archs[i], path, true);
        if (!strcmp(archs[i], "qwen3moe")) check_info(path);
        /* quantized weights and a tied output */
        p.wtype = SL_GGML_Q8_0;
        p.tie_output = 1;
        snprintf(name, sizeof name, "%s-q8.gguf", archs[i]);
        path = tmp_path(name);
        CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write %s q8: %s", archs[i], e.msg);
        char label[64];
        snprintf(label, sizeof label, "%s Q8_0 tied", archs[i]);
        check_model(label, path, true);
    }
    check_broken();
    check_legacy_deepseek2();
    check_mtp("deepseek2");
    check_mtp("glm4moe");
    check_glm4moe_defaults();
    check_glm_gating_deepseek2();
    if (argc > 1) {
        const char *ma[] = {"llama", "mixtral", "qwen3moe", "olmoe"};
        for (size_t i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "mk-%s.gguf", ma[i]);
            const char *path = tmp_path(name);
            const bool ok = mkmodel(argv[1], ma[i], i % 2 ? "Q4_0" : "F16", path);
            CHECK_MSG(ok, "mkmodel %s failed", ma[i]);
            char label[64];
            snprintf(label, sizeof label, "mkmodel %s", ma[i]);
            if (ok) check_model(label, path, i == 2);
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", g_dir);
    return sl_test_finish("engine_test");
}
