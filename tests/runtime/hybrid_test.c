/* Hybrid MoE decode on the sim device (issue 33): a device core with routed experts computed
 * on the host, and what one token costs the host in device operations.
 *
 * Held here, per architecture (qwen3moe, mixtral, gpt-oss, deepseek2, glm4moe, minimax-m2),
 * for decode after a prompt (steady state: every weight already where it stays):
 *   - the logits of every decode step equal the CPU placement's bit for bit;
 *   - mode=cpu with the experts on the host moves no expert bytes over PCIe, and its host part
 *     is ordered on the stream: the one blocking wait of a token is for its logits (0 per
 *     layer), with a fixed number of device calls per layer; with order=sync the same bits
 *     and one blocking sync per layer (the old path);
 *   - static hot residency (mode=cpu hot_kb=...) computes part of the assignments on the device
 *     and moves no expert bytes in decode once its set is resident; a run-time cache with
 *     uploads=1 moves at most one expert per layer and token;
 *   - the fetch modes (post, full, auto) give the same bits, post and full with expert bytes
 *     over PCIe.
 * And for Q4_K files (qwen3moe, mixtral): the host experts of the device model are repacked
 * into Q4_K_R8 as the CPU placement's are (every routed expert tensor, counted by
 * sl_model_info), also with n_cpu_moe; every upload above unpacks them back to Q4_K (the
 * device's kernels read the file's layout: scheduler/moe/fetch_stage.c), so the same bits
 * hold for every scheduler. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PROMPT = 6, N_DECODE = 5, N_CTX = 32 };
static const int32_t k_prompt[N_PROMPT] = {1, 17, 250, 3, 99, 42};
static const int32_t k_next[N_DECODE] = {7, 128, 5, 260, 11};

typedef struct run {
    float *logits;            /* [N_DECODE][n_vocab]: each decode step's */
    sl_ctx_stats s0, s1;      /* stats before and after the decode steps */
    char sched[16];
    bool ok;
} run;

static sl_model *open_model(const char *path, sl_placement pl, int n_cpu_moe)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.n_cpu_moe = n_cpu_moe;
    o.progress = false;
    o.n_threads = 2;
    if (pl != SL_PLACE_CPU) o.device = "sim";
    sl_model *m = NULL;
    sl_error e;
    CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open %s: %s", path, e.msg);
    return m;
}

/* The prompt, then N_DECODE single-token evals on c; stats around the decode steps. */
static run decode_on(sl_ctx *c, int32_t n_vocab)
{
    run r = {0};
    sl_error e;
    r.logits = calloc((size_t)N_DECODE * (size_t)n_vocab, sizeof *r.logits);
    if (!c || !r.logits) return r;
    bool ok = sl_ctx_eval(c, k_prompt, N_PROMPT, &e) == SL_OK;
    CHECK_MSG(ok, "prompt: %s", e.msg);
    sl_ctx_stats_get(c, &r.s0);
    for (int i = 0; i < N_DECODE && ok; i++) {
        ok = sl_ctx_eval(c, &k_next[i], 1, &e) == SL_OK;
        CHECK_MSG(ok, "decode %d: %s", i, e.msg);
        const float *l = ok ? sl_ctx_logits(c, -1) : NULL;
        if (l) memcpy(r.logits + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof *l);
    }
    sl_ctx_stats_get(c, &r.s1);
    snprintf(r.sched, sizeof r.sched, "%s", r.s1.moe_scheduler ? r.s1.moe_scheduler : "none");
    r.ok = ok;
    return r;
}

static sl_ctx *ctx_new(sl_model *m, const char *sched)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    co.kv_f16 = false;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e;
    if (m) CHECK_MSG(sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx (%s): %s",
                     sched ? sched : "", e.msg);
    return c;
}

/* decode_on a context of its own. */
static run decode(sl_model *m, const char *sched, int32_t n_vocab)
{
    sl_ctx *c = ctx_new(m, sched);
    run r = decode_on(c, n_vocab);
    sl_ctx_destroy(c);
    return r;
}

/* A prompt of N_LONG tokens (a prefill batch past prefill_stream's default of 32) on a
 * context of its own: every position's logits (last_only: the last row's, the only one asked
 * for) (NULL and why: what failed), the stats after it. bar (or NULL): met between creating
 * the context and evaluating. Checks nothing, so that two threads may run it (the CHECK
 * counters are the main thread's). */
enum { N_LONG = 40 };
typedef struct long_run {
    sl_model *m;
    const char *sched;
    int32_t n_vocab;
    bool last_only;
    bool stepwise;            /* the tokens one eval each (a run of decodes), not one batch */
    pthread_barrier_t *bar;
    float *out;
    sl_ctx_stats st;
    char why[SL_ERROR_MSG_BYTES];
} long_run;

static void *long_prefill(void *p)
{
    long_run *a = p;
    int32_t toks[N_LONG];
    for (int i = 0; i < N_LONG; i++) toks[i] = (int32_t)((37 * i + 1) % 250);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.kv_f16 = false;
    co.all_logits = !a->last_only;
    co.sched = a->sched;
    sl_ctx *c = NULL;
    sl_error e = {0};
    const bool made = a->m && sl_ctx_create(a->m, &co, &c, &e) == SL_OK;
    if (a->bar) pthread_barrier_wait(a->bar); /* both contexts exist: the evals overlap */
    float *out = made ? calloc((size_t)N_LONG * (size_t)a->n_vocab, sizeof *out) : NULL;
    bool ok = out != NULL;
    for (int i = 0; a->stepwise && i < N_LONG && ok; i++) {
        ok = sl_ctx_eval(c, &toks[i], 1, &e) == SL_OK && sl_ctx_logits(c, -1);
        if (ok) memcpy(out + (size_t)i * a->n_vocab, sl_ctx_logits(c, -1),
                       (size_t)a->n_vocab * sizeof *out);
    }
    ok = ok && (a->stepwise || sl_ctx_eval(c, toks, N_LONG, &e) == SL_OK);
    for (int i = a->last_only ? N_LONG - 1 : 0; !a->stepwise && i < N_LONG && ok; i++) {
        const float *l = sl_ctx_logits(c, a->last_only ? -1 : i);
        ok = l != NULL;
        if (l)
            memcpy(out + (size_t)(a->last_only ? 0 : i) * a->n_vocab, l,
                   (size_t)a->n_vocab * sizeof *l);
    }
    if (c) sl_ctx_stats_get(c, &a->st);
    sl_ctx_destroy(c);
    snprintf(a->why, sizeof a->why, "%s", ok ? "" : made ? e.msg : "no context");
    if (!ok) free(out);
    a->out = ok ? out : NULL;
    return NULL;
}

/* long_prefill on this thread, its failure checked */
static float *prefill(sl_model *m, const char *sched, int32_t n_vocab, sl_ctx_stats *st)
{
    long_run r = {.m = m, .sched = sched, .n_vocab = n_vocab};
    long_prefill(&r);
    CHECK_MSG(r.out, "prefill (%s): %s", sched ? sched : "", r.why);
    if (st) *st = r.st;
    return r.out;
}

/* The last row's logits of long_prefill's pass asked for that row alone (the last layer then
 * keeps that row only), its failure checked. */
static float *last_row(sl_model *m, const char *sched, int32_t n_vocab)
{
    long_run r = {.m = m, .sched = sched, .n_vocab = n_vocab, .last_only = true};
    long_prefill(&r);
    CHECK_MSG(r.out, "last row (%s): %s", sched ? sched : "", r.why);
    return r.out;
}

static bool same(const float *a, const float *b, size_t n)
{
    return a && b && memcmp(a, b, n * sizeof *a) == 0;
}

static uint64_t repacked(const sl_model *m)
{
    sl_model_info mi;
    sl_model_info_get(m, &mi);
    return mi.repacked_tensors;
}

/* The file's CPU placement and its decode (the reference every other run of the file matches);
 * NULL (a failed check) if it does not open. */
static sl_model *cpu_ref(const char *path, sl_model_info *info, run *ref)
{
    sl_model *cpu = open_model(path, SL_PLACE_CPU, 0);
    if (!cpu) return NULL;
    sl_model_info_get(cpu, info);
    *ref = decode(cpu, NULL, info->n_vocab);
    return cpu;
}

/* q4k: the file's matrices Q4_K at dims 256 (whole super-blocks), so that host experts repack */
static void check_arch(const char *arch, const char *dir, bool q4k)
{
    tm_params p;
    tm_defaults(arch, &p);
    if (q4k) {
        p.wtype = SL_GGML_Q4_K;
        p.n_embd = p.n_ff = 256;
    }
    char path[600], what[64];
    snprintf(path, sizeof path, "%s/%s%s.gguf", dir, arch, q4k ? "-q4k" : "");
    snprintf(what, sizeof what, "%s%s", arch, q4k ? " Q4_K" : "");
    arch = what;
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write %s: %s", arch, e.msg);
    sl_model_info info;
    run ref;
    sl_model *cpu = cpu_ref(path, &info, &ref);
    if (!cpu) return;
    const size_t NV = (size_t)N_DECODE * (size_t)info.n_vocab;
    /* Expert Deferral's reference (defer.h): one expert a token added a layer later, on the
     * host thread */
    run refd = decode(cpu, "mode=cpu defer=1", info.n_vocab);
    /* and for a pass of many tokens: per token, so the prefill is its run of decodes bit for
     * bit (batch invariance), and a row's logits do not depend on which other rows are asked
     * for (the last layer takes the rows it keeps of the deferred part) */
    float *refd_long = prefill(cpu, "mode=cpu defer=1", info.n_vocab, NULL);
    {
        long_run sw = {.m = cpu, .sched = "mode=cpu defer=1", .n_vocab = info.n_vocab,
                       .stepwise = true};
        long_prefill(&sw);
        float *refd_last = last_row(cpu, "mode=cpu defer=1", info.n_vocab);
        CHECK_MSG(refd_long && same(sw.out, refd_long, (size_t)N_LONG * info.n_vocab),
                  "%s defer=1: the prefill's logits differ from its run of decodes (%s)", arch,
                  sw.why);
        CHECK_MSG(refd_long && same(refd_last, refd_long + (size_t)(N_LONG - 1) * info.n_vocab,
                                    (size_t)info.n_vocab),
                  "%s defer=1: the last row's logits alone differ from those of every row",
                  arch);
        free(refd_last);
        free(sw.out);
    }
    float *ref_long = prefill(cpu, NULL, info.n_vocab, NULL);
    CHECK_MSG(!q4k || repacked(cpu) > 0, "%s: placement cpu repacked nothing", arch);
    sl_model_close(cpu);
    /* deepseek2's and glm4moe's testmodels have one leading dense layer, whose FFN is on the
     * device */
    const int64_t moe_layers =
        info.n_layer - (strstr(arch, "deepseek2") || strstr(arch, "glm4moe") ? 1 : 0);
    /* routed expert tensors per layer: one per projection, or one per expert (mixtral-split) */
    const uint64_t per_layer = 3 * (strstr(arch, "split") ? (uint64_t)info.n_expert : 1);

    if (q4k) {
        /* n_cpu_moe 1: layer 0's routed experts (gate, up, down) on the host, repacked */
        sl_model *nm = open_model(path, SL_PLACE_GPU, 1);
        CHECK_MSG(!nm || repacked(nm) == per_layer, "%s n_cpu_moe=1: %llu tensors repacked, "
                  "not layer 0's %llu expert tensors", arch,
                  (unsigned long long)(nm ? repacked(nm) : 0), (unsigned long long)per_layer);
        run rn = decode(nm, "mode=cpu", info.n_vocab);
        CHECK_MSG(rn.ok && same(ref.logits, rn.logits, NV), "%s n_cpu_moe=1: decode logits "
                  "differ from the CPU placement's", arch);
        free(rn.logits);
        /* layer 0 alone computes its experts on the host: nothing to defer into */
        rn = decode(nm, "mode=cpu defer=1", info.n_vocab);
        CHECK_MSG(rn.ok && same(ref.logits, rn.logits, NV), "%s n_cpu_moe=1 defer=1: decode "
                  "logits differ from the undeferred ones", arch);
        free(rn.logits);
        sl_model_close(nm);
    }

    if (q4k && strstr(arch, "split")) {
        /* one expert of layer 0 asked for on the host: the placement moves the layer's
         * experts together (they share one type per projection), all repacked */
        sl_model_options o = sl_model_options_default();
        o.placement = SL_PLACE_GPU;
        o.override_tensor = "blk\\.0\\.ffn_(gate|up|down)\\.0\\.weight=CPU";
        o.progress = false;
        o.n_threads = 2;
        o.device = "sim";
        sl_model *mm = NULL;
        CHECK_MSG(sl_model_open(path, &o, &mm, &e) == SL_OK, "%s, expert 0 of layer 0 on the "
                  "host: %s", arch, e.msg);
        CHECK_MSG(!mm || repacked(mm) == per_layer, "%s, expert 0 of layer 0 on the host: "
                  "%llu tensors repacked, not the layer's %llu", arch,
                  (unsigned long long)(mm ? repacked(mm) : 0), (unsigned long long)per_layer);
        run rm = decode(mm, "mode=cpu", info.n_vocab);
        CHECK_MSG(rm.ok && same(ref.logits, rm.logits, NV), "%s, expert 0 of layer 0 on the "
                  "host: decode logits differ from the CPU placement's", arch);
        free(rm.logits);
        sl_model_close(mm);
    }

    /* mode=cpu, experts on the host: the host part in stream order */
    sl_model *m = open_model(path, SL_PLACE_EXPERTS_CPU, 0);
    /* every routed expert tensor repacked, nothing else (the rest is on the device) */
    CHECK_MSG(!m || !q4k || repacked(m) == per_layer * (uint64_t)moe_layers,
              "%s experts-cpu: %llu tensors repacked, not the %llu routed expert tensors", arch,
              (unsigned long long)(m ? repacked(m) : 0),
              (unsigned long long)(per_layer * (uint64_t)moe_layers));
    run r = decode(m, "mode=cpu", info.n_vocab);
    CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s mode=cpu: decode logits differ from "
              "the CPU placement's", arch);
    CHECK_MSG(!strcmp(r.sched, "cpu"), "%s: scheduler %s", arch, r.sched);
    const uint64_t syncs = r.s1.dev_syncs - r.s0.dev_syncs,
                   calls = r.s1.dev_calls - r.s0.dev_calls,
                   pcie = r.s1.copy_bytes - r.s0.copy_bytes;
    /* the logits of each token: their copy down and the one wait for it */
    CHECK_MSG(syncs == N_DECODE, "%s mode=cpu: %llu blocking syncs in %d tokens of %lld MoE "
              "layers (want one per token, none per layer)", arch, (unsigned long long)syncs,
              N_DECODE, (long long)moe_layers);
    CHECK_MSG(pcie == 0, "%s mode=cpu: %llu expert bytes over PCIe", arch,
              (unsigned long long)pcie);
    CHECK_MSG(calls % N_DECODE == 0 && calls > 0, "%s mode=cpu: %llu device calls in %d tokens "
              "(each token the same work)", arch, (unsigned long long)calls, N_DECODE);
    /* the CPU expert path's reads: top-k distinct experts of each MoE layer per token (the
     * test models' experts: gate, up, down of n_embd x n_ff_exp, F32 or Q4_K's 144 bytes per
     * 256 weights, the same in Q4_K_R8) */
    const uint64_t per_expert = 3 * (uint64_t)info.n_embd *
                                (uint64_t)(info.n_ff_exp ? info.n_ff_exp : info.n_ff) *
                                (q4k ? 144 : 1024) / 256;
    const uint64_t cpu_bytes = r.s1.expert_cpu_bytes - r.s0.expert_cpu_bytes;
    CHECK_MSG(cpu_bytes == (uint64_t)N_DECODE * moe_layers * info.n_expert_used * per_expert &&
                  r.s1.expert_cpu_seconds > r.s0.expert_cpu_seconds,
              "%s mode=cpu: the CPU expert path read %llu bytes in %g s", arch,
              (unsigned long long)cpu_bytes, r.s1.expert_cpu_seconds - r.s0.expert_cpu_seconds);
    printf("%s mode=cpu: %.2f blocking syncs and %.1f device calls per MoE layer and token\n",
           arch, (double)syncs / N_DECODE / (double)moe_layers,
           (double)calls / N_DECODE / (double)moe_layers);
    free(r.logits);

    /* a prefill of N_LONG tokens: each MoE layer's host experts copied to the device once
     * (runtime/engine/stream.h; a Q4_K file's as the repacked bytes the host holds) and computed
     * there, the same bits as the CPU placement's; prefill_stream=0 computes them on the CPU */
    const size_t NL = (size_t)N_LONG * (size_t)info.n_vocab;
    static const char *const pre[] = {"mode=cpu", "mode=cpu prefill_stream=0", "mode=auto",
                                      "mode=cpu prefill_stream=41"};
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++) {
        sl_ctx_stats ps;
        memset(&ps, 0, sizeof ps);
        float *pl = prefill(m, pre[i], info.n_vocab, &ps);
        CHECK_MSG(same(ref_long, pl, NL), "%s %s: prefill logits differ from the CPU "
                  "placement's", arch, pre[i]);
        const bool streams = !strstr(pre[i], "prefill_stream");
        CHECK_MSG(ps.stream_layers == (streams ? (uint64_t)moe_layers : 0),
                  "%s %s: %llu MoE layers streamed in a prefill of %d tokens (want %lld)", arch,
                  pre[i], (unsigned long long)ps.stream_layers, (int)N_LONG,
                  streams ? (long long)moe_layers : 0LL);
        CHECK_MSG(!streams || ps.stream_bytes >= (uint64_t)moe_layers * info.n_expert * per_expert,
                  "%s %s: %llu expert bytes streamed (%lld layers of %d experts of %llu)", arch,
                  pre[i], (unsigned long long)ps.stream_bytes, (long long)moe_layers,
                  info.n_expert, (unsigned long long)per_expert);
        CHECK_MSG(ps.copy_bytes >= ps.stream_bytes, "%s %s: copy_bytes %llu without the "
                  "streamed %llu", arch, pre[i], (unsigned long long)ps.copy_bytes,
                  (unsigned long long)ps.stream_bytes);
        free(pl);
    }
    /* two contexts of one model prefilling at once from two threads: they share the model's
     * one streaming buffer (stream.h), each streamed layer's copies and compute enqueued under
     * its lock, so each must still get the reference bits */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    long_run pa[2];
    for (int i = 0; i < 2; i++)
        pa[i] = (long_run){.m = m, .sched = "mode=cpu", .n_vocab = info.n_vocab, .bar = &bar};
    pthread_t th;
    const bool started = pthread_create(&th, NULL, long_prefill, &pa[0]) == 0;
    if (started) {
        long_prefill(&pa[1]); /* the second on this thread */
        pthread_join(th, NULL);
    }
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < 2 && started; i++) {
        CHECK_MSG(pa[i].out, "%s: concurrent prefill %d: %s", arch, i, pa[i].why);
        CHECK_MSG(same(ref_long, pa[i].out, NL) && pa[i].st.stream_layers == (uint64_t)moe_layers,
                  "%s: concurrent prefill %d: logits differ from the CPU placement's or %llu "
                  "layers streamed", arch, i, (unsigned long long)pa[i].st.stream_layers);
        free(pa[i].out);
    }
    CHECK_MSG(started, "%s: no second thread", arch);

    /* order=sync (fetch.h sl_fetch_order): the old path, a blocking sync per MoE layer and
     * the experts on the calling thread; the same bits */
    r = decode(m, "mode=cpu order=sync", info.n_vocab);
    CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s order=sync: decode logits differ "
              "from the CPU placement's", arch);
    CHECK_MSG(!strcmp(r.sched, "cpu"), "%s order=sync: scheduler %s", arch, r.sched);
    const uint64_t sync_syncs = r.s1.dev_syncs - r.s0.dev_syncs;
    CHECK_MSG(sync_syncs == (uint64_t)N_DECODE * (1 + (uint64_t)moe_layers),
              "%s order=sync: %llu blocking syncs in %d tokens of %lld MoE layers (want one "
              "per layer and one per token)", arch, (unsigned long long)sync_syncs, N_DECODE,
              (long long)moe_layers);
    CHECK_MSG(r.s1.copy_bytes == r.s0.copy_bytes, "%s order=sync: expert bytes over PCIe",
              arch);
    free(r.logits);

    /* Expert Deferral in stream order (host functions, the deferred part on the worker
     * thread) and on the host thread (order=sync): the CPU placement's deferred bits, which
     * are not the undeferred ones; the same work (assignments and expert bytes on the CPU) */
    {
        CHECK_MSG(refd.ok && !same(ref.logits, refd.logits, NV), "%s defer=1: the CPU "
                  "placement's logits are the undeferred ones", arch);
        static const char *const dmodes[] = {"mode=cpu defer=1", "mode=cpu defer=1 order=sync"};
        for (int i = 0; i < 2; i++) {
            run rd = decode(m, dmodes[i], info.n_vocab);
            CHECK_MSG(rd.ok && same(refd.logits, rd.logits, NV), "%s %s: decode logits differ "
                      "from the CPU placement's with defer=1", arch, dmodes[i]);
            CHECK_MSG(rd.s1.expert_calls_cpu - rd.s0.expert_calls_cpu ==
                              r.s1.expert_calls_cpu - r.s0.expert_calls_cpu &&
                          rd.s1.expert_cpu_bytes - rd.s0.expert_cpu_bytes ==
                              r.s1.expert_cpu_bytes - r.s0.expert_cpu_bytes,
                      "%s %s: %llu assignments on the CPU, not mode=cpu's %llu", arch, dmodes[i],
                      (unsigned long long)(rd.s1.expert_calls_cpu - rd.s0.expert_calls_cpu),
                      (unsigned long long)(r.s1.expert_calls_cpu - r.s0.expert_calls_cpu));
            free(rd.logits);
        }
        /* a pass of N_LONG tokens with every row's logits (the last layer keeps every row, so
         * it absorbs too), not streamed */
        float *pd = prefill(m, "mode=cpu defer=1 prefill_stream=0", info.n_vocab, NULL);
        CHECK_MSG(same(refd_long, pd, (size_t)N_LONG * (size_t)info.n_vocab) &&
                      !same(ref_long, pd, (size_t)N_LONG * (size_t)info.n_vocab),
                  "%s defer=1: prefill logits differ from the CPU placement's with defer=1, or "
                  "equal the undeferred ones", arch);
        free(pd);
        /* a row's logits do not depend on which other rows are asked for: the last layer
         * takes the deferred part's rows it keeps (CPU placement and device chain alike) */
        float *ll = last_row(m, "mode=cpu defer=1 prefill_stream=0", info.n_vocab);
        CHECK_MSG(refd_long && same(ll, refd_long + (size_t)(N_LONG - 1) * info.n_vocab,
                                    (size_t)info.n_vocab),
                  "%s defer=1: the last row's logits alone differ from the CPU placement's "
                  "of every row", arch);
        free(ll);
    }

    /* static hot residency (runtime/engine/hot.h): half of each layer's experts resident
     * from the prompt's routing, the rest on the CPU, in stream order; the same bits, no
     * expert bytes over PCIe once the set is resident, some assignments on the device, and
     * no blocking wait but each token's for its logits */
    char sched[128];
    const uint64_t half_kb = (uint64_t)info.n_expert / 2 * per_expert * (uint64_t)moe_layers >> 10;
    snprintf(sched, sizeof sched, "mode=cpu hot_kb=%llu hot_warm=1", (unsigned long long)half_kb);
    r = decode(m, sched, info.n_vocab);
    CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s %s: decode logits differ from the "
              "CPU placement's", arch, sched);
    CHECK_MSG(!strcmp(r.sched, "cpu"), "%s %s: scheduler %s", arch, sched, r.sched);
    const uint64_t gpu = r.s1.expert_calls_gpu - r.s0.expert_calls_gpu,
                   all = gpu + r.s1.expert_calls_cpu - r.s0.expert_calls_cpu;
    CHECK_MSG(r.s1.copy_bytes == r.s0.copy_bytes && r.s0.copy_bytes > 0,
              "%s static hot: %llu expert bytes over PCIe in decode (%llu to load)", arch,
              (unsigned long long)(r.s1.copy_bytes - r.s0.copy_bytes),
              (unsigned long long)r.s0.copy_bytes);
    CHECK_MSG(gpu > 0 && gpu < all && all == (uint64_t)N_DECODE * moe_layers * info.n_expert_used,
              "%s static hot: %llu of %llu assignments on the device", arch,
              (unsigned long long)gpu, (unsigned long long)all);
    const uint64_t hot_syncs = r.s1.dev_syncs - r.s0.dev_syncs;
    CHECK_MSG(hot_syncs == (uint64_t)N_DECODE, "%s static hot: %llu blocking syncs in %d "
              "tokens (want one per token, none per layer)", arch,
              (unsigned long long)hot_syncs, N_DECODE);
    CHECK_MSG(r.s1.expert_cpu_bytes - r.s0.expert_cpu_bytes <
                  (uint64_t)N_DECODE * moe_layers * info.n_expert_used * per_expert,
              "%s static hot: the CPU read every routed expert", arch);
    CHECK_MSG(r.s1.hot_experts > 0 && r.s1.hot_experts <= (uint64_t)info.n_expert / 2 *
                                                              (uint64_t)moe_layers &&
                  r.s1.hot_bytes == r.s1.hot_experts * per_expert,
              "%s static hot: %llu experts resident in %llu bytes (experts of %llu)", arch,
              (unsigned long long)r.s1.hot_experts, (unsigned long long)r.s1.hot_bytes,
              (unsigned long long)per_expert);
    printf("%s static hot: %.2f blocking syncs and %.1f device calls per MoE layer and token; "
           "%llu of %llu assignments on the device\n", arch,
           (double)(r.s1.dev_syncs - r.s0.dev_syncs) / N_DECODE / (double)moe_layers,
           (double)(r.s1.dev_calls - r.s0.dev_calls) / N_DECODE / (double)moe_layers,
           (unsigned long long)gpu, (unsigned long long)all);
    free(r.logits);
    /* room for every expert: those the prompt routed resident (a share below one expert a
     * layer is refused: check_refusals) */
    {
        const uint64_t kb = (uint64_t)info.n_expert * per_expert * (uint64_t)moe_layers * 2 >> 10;
        snprintf(sched, sizeof sched, "mode=cpu hot_kb=%llu hot_warm=1", (unsigned long long)kb);
        r = decode(m, sched, info.n_vocab);
        CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s %s: decode logits differ from "
                  "the CPU placement's", arch, sched);
        const uint64_t g = r.s1.expert_calls_gpu - r.s0.expert_calls_gpu;
        CHECK_MSG(g > gpu, "%s %s: %llu assignments on the device, not more than half's %llu",
                  arch, sched, (unsigned long long)g, (unsigned long long)gpu);
        free(r.logits);
    }
    /* a streamed prefill is the profile: its routing chooses the set, which goes up behind
     * the pass (copies past the streamed bytes); the same bits */
    {
        snprintf(sched, sizeof sched, "mode=cpu hot_kb=%llu hot_warm=64",
                 (unsigned long long)half_kb);
        sl_ctx_stats ps;
        memset(&ps, 0, sizeof ps);
        float *pl = prefill(m, sched, info.n_vocab, &ps);
        CHECK_MSG(same(ref_long, pl, (size_t)N_LONG * (size_t)info.n_vocab), "%s %s: prefill "
                  "logits differ from the CPU placement's", arch, sched);
        CHECK_MSG(ps.stream_layers == (uint64_t)moe_layers && ps.copy_bytes > ps.stream_bytes,
                  "%s %s: %llu layers streamed, %llu bytes copied of which %llu streamed", arch,
                  sched, (unsigned long long)ps.stream_layers,
                  (unsigned long long)ps.copy_bytes, (unsigned long long)ps.stream_bytes);
        free(pl);
    }

    /* a streamed prefill after the set is resident reads the resident experts where they
     * are: the plain context's streamed bytes less exactly the set's, the same bits */
    {
        snprintf(sched, sizeof sched, "mode=cpu hot_kb=%llu hot_warm=1",
                 (unsigned long long)half_kb);
        int32_t toks[N_LONG];
        for (int i = 0; i < N_LONG; i++) toks[i] = (int32_t)((37 * i + 1) % 250);
        const char *scheds[2] = {"mode=cpu", sched};
        float *out[2] = {NULL, NULL};
        sl_ctx_stats st[2][2];
        memset(st, 0, sizeof st);
        for (int k = 0; k < 2; k++) {
            sl_ctx_options co = sl_ctx_options_default();
            co.n_ctx = 64;
            co.kv_f16 = false;
            co.all_logits = true;
            co.sched = scheds[k];
            sl_ctx *c = NULL;
            sl_error e2 = {0};
            out[k] = calloc((size_t)N_LONG * info.n_vocab, sizeof *out[k]);
            bool ok = out[k] && sl_ctx_create(m, &co, &c, &e2) == SL_OK &&
                      sl_ctx_eval(c, k_prompt, N_PROMPT, &e2) == SL_OK;
            if (c) sl_ctx_stats_get(c, &st[k][0]);
            ok = ok && sl_ctx_eval(c, toks, N_LONG, &e2) == SL_OK;
            for (int i = 0; ok && i < N_LONG; i++)
                memcpy(out[k] + (size_t)i * info.n_vocab, sl_ctx_logits(c, i),
                       (size_t)info.n_vocab * sizeof *out[k]);
            if (c) sl_ctx_stats_get(c, &st[k][1]);
            CHECK_MSG(ok, "%s %s: prompt and a streamed pass: %s", arch, scheds[k], e2.msg);
            sl_ctx_destroy(c);
        }
        const uint64_t plain = st[0][1].stream_bytes - st[0][0].stream_bytes,
                       hot = st[1][1].stream_bytes - st[1][0].stream_bytes;
        CHECK_MSG(same(out[0], out[1], (size_t)N_LONG * info.n_vocab) && st[1][1].hot_bytes > 0 &&
                      plain == hot + st[1][1].hot_bytes &&
                      st[1][1].stream_layers - st[1][0].stream_layers == (uint64_t)moe_layers,
                  "%s %s: a streamed pass after the set is resident streamed %llu bytes (a "
                  "plain context %llu; the set %llu), or its logits differ", arch, sched,
                  (unsigned long long)hot, (unsigned long long)plain,
                  (unsigned long long)st[1][1].hot_bytes);
        free(out[0]);
        free(out[1]);
    }

    /* a run-time cache with at most one upload per layer and step (hot.h, in stream order):
     * the same bits, one wait a token, and never more than one expert's bytes per layer and
     * token over PCIe (beside the layer's mask and pointer arrays: 25 bytes an expert) */
    for (int pol = 0; pol < 2; pol++) {
        snprintf(sched, sizeof sched, "mode=cpu cache_kb=%llu policy=%s uploads=1",
                 (unsigned long long)half_kb, pol ? "lru" : "lfu");
        r = decode(m, sched, info.n_vocab);
        CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s %s: decode logits differ from "
                  "the CPU placement's", arch, sched);
        CHECK_MSG(!strcmp(r.sched, "cpu") && r.s1.dev_syncs - r.s0.dev_syncs == N_DECODE,
                  "%s %s: scheduler %s, %llu blocking syncs in %d tokens", arch, sched,
                  r.sched, (unsigned long long)(r.s1.dev_syncs - r.s0.dev_syncs), N_DECODE);
        CHECK_MSG(r.s1.copy_bytes - r.s0.copy_bytes <=
                      (uint64_t)N_DECODE * moe_layers * (per_expert + 25 * (uint64_t)info.n_expert),
                  "%s %s: %llu bytes over PCIe in %d tokens (experts of %llu)", arch, sched,
                  (unsigned long long)(r.s1.copy_bytes - r.s0.copy_bytes), N_DECODE,
                  (unsigned long long)per_expert);
        CHECK_MSG(r.s1.expert_calls_gpu > 0, "%s %s: no assignment ran on the device", arch,
                  sched);
        free(r.logits);
    }

    /* one cache slot a layer, two uploads a step, lru: an expert uploaded in a step is never
     * the one the next upload of that step evicts (so at most one goes up a layer and step) */
    {
        const uint64_t kb = ((uint64_t)moe_layers * per_expert * 3 / 2 + 1023) >> 10;
        snprintf(sched, sizeof sched, "mode=cpu cache_kb=%llu policy=lru uploads=2",
                 (unsigned long long)kb);
        r = decode(m, sched, info.n_vocab);
        CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s %s: decode logits differ from "
                  "the CPU placement's", arch, sched);
        CHECK_MSG(r.s1.copy_bytes - r.s0.copy_bytes <=
                      (uint64_t)N_DECODE * moe_layers * (per_expert + 25 * (uint64_t)info.n_expert),
                  "%s %s: %llu bytes over PCIe in %d tokens (experts of %llu): more than one "
                  "upload a layer and step into one slot", arch, sched,
                  (unsigned long long)(r.s1.copy_bytes - r.s0.copy_bytes), N_DECODE,
                  (unsigned long long)per_expert);
        free(r.logits);
    }

    /* the fetch modes: experts copied to the device (unpacked from Q4_K_R8 on the way for a
     * Q4_K file) and computed there; post and full fetch every miss */
    static const char *const modes[] = {"mode=post", "mode=full", "mode=auto",
                                        "mode=post cache_kb=64"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        r = decode(m, modes[i], info.n_vocab);
        CHECK_MSG(r.ok && same(ref.logits, r.logits, NV), "%s %s: decode logits differ from "
                  "the CPU placement's", arch, modes[i]);
        CHECK_MSG(!strcmp(r.sched, "fetch"), "%s %s: scheduler %s", arch, modes[i], r.sched);
        CHECK_MSG(strstr(modes[i], "auto") || r.s1.copy_bytes > r.s0.copy_bytes,
                  "%s %s: no expert bytes over PCIe in decode", arch, modes[i]);
        free(r.logits);
    }
    sl_model_close(m);
    free(ref.logits);
    free(refd.logits);
    free(refd_long);
    free(ref_long);
}

/* A context asking for resident experts that cannot be kept: refused at creation with the
 * option named (engine.c: no scheduler option is silently dropped). */
static void refused(sl_model *m, const char *sched, const char *want)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = N_CTX;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e = {0};
    const sl_status st = m ? sl_ctx_create(m, &co, &c, &e) : SL_ERR_INVALID;
    CHECK_MSG(m && st == SL_ERR_INVALID && !c && strstr(e.msg, want), "%s: status %d, want "
              "SL_ERR_INVALID naming \"%s\": %s", sched, (int)st, want, e.msg);
    sl_ctx_destroy(c);
}

static uint64_t arena_in_use(const sl_runtime *rt)
{
    sl_runtime_stats rs;
    sl_runtime_stats_get(rt, &rs);
    return rs.arena_in_use;
}

/* Static hot experts are the model's (runtime/engine/hot.h sl__hot_shared): a second context
 * with the same hot_kb adopts the first one's set - no expert copied, no device bytes for it
 * beyond a plain context's and its own rows and masks - and decodes the CPU placement's bits;
 * another hot_kb beside it is refused; the last context frees it. In a runtime (its arena's
 * bytes in use are public). */
static void check_shared(const char *dir)
{
    tm_params p;
    tm_defaults("qwen3moe", &p);
    char path[600];
    snprintf(path, sizeof path, "%s/shared.gguf", dir);
    sl_error e = {0};
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    sl_model_info info;
    run ref;
    sl_model *cpu = cpu_ref(path, &info, &ref);
    if (!cpu) return;
    const size_t NV = (size_t)N_DECODE * (size_t)info.n_vocab;
    sl_model_close(cpu);
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = (uint64_t)256 << 20;
    sl_runtime *rt = NULL;
    sl_model *m = NULL;
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_EXPERTS_CPU;
    o.progress = false;
    o.n_threads = 2;
    const bool up = sl_runtime_create(&ro, &rt, &e) == SL_OK &&
                    sl_model_open_in(rt, path, &o, &m, &e) == SL_OK &&
                    sl_runtime_acquire(rt, m, &e) == SL_OK;
    CHECK_MSG(up, "runtime: %s", e.msg);
    /* half of each layer's experts (F32: gate, up, down of n_embd x n_ff_exp) */
    const uint64_t per_expert = 3 * (uint64_t)info.n_embd * (uint64_t)info.n_ff_exp * 4;
    char sched[96], other[96];
    snprintf(sched, sizeof sched, "mode=cpu hot_kb=%llu hot_warm=1",
             (unsigned long long)((uint64_t)info.n_expert / 2 * per_expert * info.n_layer >> 10));
    snprintf(other, sizeof other, "mode=cpu hot_kb=%llu hot_warm=1",
             (unsigned long long)((uint64_t)info.n_expert * per_expert * info.n_layer >> 10));
    sl_ctx *a = up ? ctx_new(m, sched) : NULL;
    run ra = decode_on(a, info.n_vocab);
    /* a plain context's device bytes, then the second hot one's */
    const uint64_t u0 = up ? arena_in_use(rt) : 0;
    sl_ctx *plain = up ? ctx_new(m, "mode=cpu") : NULL;
    const uint64_t d_plain = up ? arena_in_use(rt) - u0 : 0;
    sl_ctx_destroy(plain);
    sl_ctx *b = up ? ctx_new(m, sched) : NULL;
    const uint64_t d_hot = up ? arena_in_use(rt) - u0 : 0;
    run rb = decode_on(b, info.n_vocab);
    const uint64_t experts_a = ra.s0.copy_bytes; /* A's prompt pass uploaded its set */
    CHECK_MSG(ra.ok && rb.ok && same(ref.logits, ra.logits, NV) &&
                  same(ref.logits, rb.logits, NV),
              "shared hot set: decode logits differ from the CPU placement's");
    CHECK_MSG(ra.s1.hot_bytes > 0 && rb.s1.hot_bytes == ra.s1.hot_bytes &&
                  rb.s1.expert_calls_gpu > rb.s0.expert_calls_gpu,
              "shared hot set: %llu and %llu bytes resident, %llu assignments on the device "
              "for the second context", (unsigned long long)ra.s1.hot_bytes,
              (unsigned long long)rb.s1.hot_bytes,
              (unsigned long long)(rb.s1.expert_calls_gpu - rb.s0.expert_calls_gpu));
    CHECK_MSG(d_hot >= d_plain && d_hot - d_plain < ra.s1.hot_bytes &&
                  rb.s0.copy_bytes + ra.s1.hot_bytes <= experts_a,
              "shared hot set: the second context took %llu device bytes beside a plain "
              "context's %llu (its set is %llu) and copied %llu bytes (the first %llu)",
              (unsigned long long)d_hot, (unsigned long long)d_plain,
              (unsigned long long)ra.s1.hot_bytes, (unsigned long long)rb.s0.copy_bytes,
              (unsigned long long)experts_a);
    printf("shared hot set: second context +%llu device bytes (a plain one +%llu; the set "
           "%llu), %llu bytes copied (the first %llu)\n", (unsigned long long)d_hot,
           (unsigned long long)d_plain, (unsigned long long)ra.s1.hot_bytes,
           (unsigned long long)rb.s0.copy_bytes, (unsigned long long)experts_a);
    if (up) refused(m, other, "another context of the model keeps its static hot experts");
    sl_ctx_destroy(a);
    sl_ctx_destroy(b);
    /* the last one gone, the set is freed: another size is taken */
    if (up) {
        sl_ctx *c = ctx_new(m, other);
        CHECK_MSG(c != NULL && arena_in_use(rt) > u0, "after the shared set's last context: "
                  "another hot_kb");
        sl_ctx_destroy(c);
    }
    free(ra.logits);
    free(rb.logits);
    free(ref.logits);
    sl_model_close(m);
    if (rt) CHECK_MSG(sl_runtime_destroy(rt, &e) == SL_OK, "runtime destroy: %s", e.msg);
}

static void check_refusals(const char *dir)
{
    tm_params p;
    tm_defaults("qwen3moe", &p);
    char path[600];
    snprintf(path, sizeof path, "%s/refuse.gguf", dir);
    sl_error e;
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    /* nothing on the device */
    sl_model *m = open_model(path, SL_PLACE_CPU, 0);
    refused(m, "mode=cpu hot_kb=1024", "hot_kb=1024: no layer on the device");
    refused(m, "mode=cpu cache_kb=1024 uploads=1", "cache_kb=1024: no layer on the device");
    sl_model_close(m);
    /* every expert on the device: none on the host to keep */
    m = open_model(path, SL_PLACE_GPU, 0);
    refused(m, "mode=cpu hot_kb=1024", "hot_kb=1024: no layer on the device computes its "
            "routed experts on the host");
    sl_model_close(m);
    /* experts on the host, but a share smaller than one expert; the same with a cache */
    m = open_model(path, SL_PLACE_EXPERTS_CPU, 0);
    refused(m, "mode=cpu hot_kb=1", "hot_kb=1: a share of 0 KiB");
    refused(m, "mode=cpu cache_kb=1 uploads=2", "cache_kb=1: a share of 0 KiB");
    /* neuron statistics count every expert on the CPU: resident ones refused beside them */
    {
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = N_CTX;
        co.neuron_stats = true;
        co.sched = "mode=cpu hot_kb=100000";
        sl_ctx *c = NULL;
        sl_error e2 = {0};
        const sl_status cs = m ? sl_ctx_create(m, &co, &c, &e2) : SL_ERR_INVALID;
        CHECK_MSG(cs == SL_ERR_INVALID && !c && strstr(e2.msg, "hot_kb: not with neuron "
                  "statistics"), "hot_kb with neuron statistics: status %d (%s)", (int)cs,
                  e2.msg);
        sl_ctx_destroy(c);
    }
    /* Expert Deferral: at most the k routed experts; the CPU scheduler's alone */
    refused(m, "mode=cpu defer=3", "defer=3: the model routes 2 experts a token");
    refused(m, "mode=auto defer=1", "defer=1: deferred experts are computed by mode cpu's CPU "
            "scheduler alone, not with mode=auto");
    refused(m, "mode=cpu hot_kb=100000 defer=1", "defer=1: deferred experts are computed by "
            "mode cpu's CPU scheduler alone, not with hot_kb");
    /* a batch computes as its first context does: contexts that defer differently refused */
    {
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = N_CTX;
        sl_ctx *c2[2] = {NULL, NULL};
        sl_error e2 = {0};
        co.sched = "mode=cpu defer=1";
        const bool made = m && sl_ctx_create(m, &co, &c2[0], &e2) == SL_OK;
        co.sched = NULL;
        CHECK_MSG(made && sl_ctx_create(m, &co, &c2[1], &e2) == SL_OK, "contexts: %s", e2.msg);
        const int32_t *tk[2] = {k_prompt, k_prompt};
        const size_t nt[2] = {N_PROMPT, N_PROMPT};
        const sl_status bs = c2[1] ? sl_ctx_eval_batch(c2, tk, nt, 2, &e2) : SL_OK;
        CHECK_MSG(bs == SL_ERR_INVALID && strstr(e2.msg, "defer"), "a batch of a deferring "
                  "and a plain context: status %d (%s)", (int)bs, e2.msg);
        sl_ctx_destroy(c2[0]);
        sl_ctx_destroy(c2[1]);
    }
    sl_model_close(m);
    /* a dense model routes no experts to defer */
    tm_defaults("llama", &p);
    snprintf(path, sizeof path, "%s/refuse-dense.gguf", dir);
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    m = open_model(path, SL_PLACE_CPU, 0);
    refused(m, "mode=cpu defer=1", "defer=1: the model routes 0 experts a token");
    sl_model_close(m);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/hybrid_test_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *archs[] = {"qwen3moe", "mixtral", "gpt-oss", "deepseek2", "glm4moe",
                           "minimax-m2"};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) check_arch(archs[i], dir, false);
    check_refusals(dir);
    check_shared(dir);
    check_arch("qwen3moe", dir, true);
    check_arch("mixtral", dir, true);
    check_arch("mixtral-split", dir, true);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", dir);
    return sl_test_finish("hybrid_test");
}
