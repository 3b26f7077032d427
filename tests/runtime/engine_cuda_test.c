/* The engine on a CUDA device: every architecture's tiny model (F32 weights, and Q8_0 with a
 * tied output) under each device placement — gpu, layers (1 layer), experts-cpu, and for MoE
 * models gpu with --n-cpu-moe 2 — against the
 * CPU placement's logits computed in the verification mode (SLUICE_ACT_F32=1: F32 activations,
 * as the GPU kernels keep them). Tolerances, relative to the largest |logit|: 1e-4 for F32
 * weights (both sides compute in float from the same weights; the GPU sums in a different
 * order), 2e-2 for Q8_0 (the GPU's cuBLAS GEMM for batches >= 8 rounds activations to F16).
 * Also: prefill == decodes on the device, F16 KV, chunked prefill, sl_ctx_eval_batch (three
 * sequences in one pass, then batched decodes; same tolerances); and routed experts split
 * hot/cold (qwen3moe, mixtral, gpt-oss: expert biases and the clamped SwiGLU; a random index
 * and one with empty parts), hot parts and their gate/up bias entries on the GPU, against the
 * CPU (its sim twin: hotcold_test); the decode graph against launched decoding (check_graph).
 * Without a usable GPU: prints "SKIPPED, no usable GPU" and passes (CI). Its CPU twin in CI is
 * engine_test, which runs the same placements on the sim device (bit-identical to the CPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/cuda/ctx.h"
#include "runtime/sluice.h"
#include "tests/runtime/testidx.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_TOK = 11 };
static const int32_t k_tokens[N_TOK] = {1, 17, 250, 3, 99, 42, 7, 7, 128, 5, 260};

/* deepseek2's F32 runs on cuda (every placement and mode of check_arch): the worst relative
 * difference from the CPU, printed as one "deepseek2-parity:" line that tools/gpu-summary puts
 * into summary.json (issue 32: within 1e-4). */
static double g_ds2_worst = -1;
static int g_ds2_runs;

/* idx: the neuron index of placement hot-cold, else NULL; n_cpu_moe: --n-cpu-moe. */
static sl_model *open_model_n(const char *path, sl_placement pl, const char *dev,
                              const char *idx, int n_cpu_moe)
{
    sl_model_options o = sl_model_options_default();
    o.placement = pl;
    o.gpu_index = idx;
    o.n_cpu_moe = n_cpu_moe;
    o.gpu_layers = 1;
    o.progress = false;
    o.n_threads = 2;
    o.device = dev;
    sl_model *m = NULL;
    sl_error e;
    sl_status st = sl_model_open(path, &o, &m, &e);
    CHECK_MSG(st == SL_OK, "open %s (%s, placement %d): %s", path, dev, (int)pl, e.msg);
    return m;
}

static sl_model *open_model(const char *path, sl_placement pl, const char *dev, const char *idx)
{
    return open_model_n(path, pl, dev, idx, 0);
}

/* run_with's `how`: 0 (the verification mode the test runs in), or these */
enum {
    /* without the verification mode (SLUICE_ACT_F32 off, read by sl_ctx_create: Q8
     * activations, the tensor-core grouped product and prefill attention) */
    RUN_DEFAULT_NUMERICS = 1,
    RUN_NO_FUSION = 2 /* sl_ctx_options.no_fusion */
};

/* All logits of k_tokens, in chunks of n_batch (decode: n_batch 1 through single evals), the
 * context made with scheduler options sched (NULL: none) and the RUN_* flags `how`; *st
 * (unless NULL): the context's stats at the end (graph_error then points nowhere: the context
 * is gone). */
static float *run_with(sl_model *m, int n_batch, bool f16, bool decode, const char *sched,
                       unsigned how, sl_ctx_stats *st)
{
    const bool default_numerics = how & RUN_DEFAULT_NUMERICS;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.n_batch = n_batch;
    co.kv_f16 = f16;
    co.all_logits = !decode;
    co.sched = sched;
    co.no_fusion = how & RUN_NO_FUSION;
    sl_ctx *c = NULL;
    sl_error e;
    if (st) memset(st, 0, sizeof *st);
    if (default_numerics) setenv("SLUICE_ACT_F32", "0", 1);
    const sl_status cs = sl_ctx_create(m, &co, &c, &e);
    if (default_numerics) setenv("SLUICE_ACT_F32", "1", 1);
    if (cs != SL_OK) {
        CHECK_MSG(false, "ctx (%s): %s", sched ? sched : "", e.msg);
        return NULL;
    }
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t V = (size_t)info.n_vocab;
    float *out = calloc(V * N_TOK, sizeof *out);
    bool ok = out != NULL;
    CHECK_MSG(ok, "out of memory (%zu logits)", V * N_TOK);
    if (decode) {
        for (int i = 0; i < N_TOK && ok; i++) {
            ok = sl_ctx_eval(c, &k_tokens[i], 1, &e) == SL_OK;
            CHECK_MSG(ok, "decode %d: %s", i, e.msg);
            const float *l = ok ? sl_ctx_logits(c, -1) : NULL;
            if (l) memcpy(out + i * V, l, V * sizeof *l);
        }
    } else if (ok) {
        ok = sl_ctx_eval(c, k_tokens, N_TOK, &e) == SL_OK;
        CHECK_MSG(ok, "eval: %s", e.msg);
        for (int i = 0; i < N_TOK && ok; i++) {
            const float *l = sl_ctx_logits(c, i);
            if (l) memcpy(out + i * V, l, V * sizeof *l);
        }
    }
    if (st) sl_ctx_stats_get(c, st);
    sl_ctx_destroy(c);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static float *run(sl_model *m, int n_batch, bool f16, bool decode)
{
    return run_with(m, n_batch, f16, decode, NULL, 0, NULL);
}

/* A prefill of the N_TOK tokens with every MoE layer's host experts streamed through the device
 * (prefill_stream=4, under the test's 11 tokens), in the default numerics (the streamed
 * experts through the tensor-core grouped product for quantized weights). */
static float *run_streamed(sl_model *m, uint64_t *layers)
{
    sl_ctx_stats st;
    float *l = run_with(m, 512, false, false, "prefill_stream=4", RUN_DEFAULT_NUMERICS, &st);
    *layers = st.stream_layers;
    return l;
}

static double rel_diff(const float *ref, const float *x, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        const double v = fabs((double)ref[i] - (double)x[i]);
        if (!(v <= d)) d = isnan(v) ? INFINITY : v;
        if (fabs(ref[i]) > s) s = fabs(ref[i]);
    }
    return d / (s > 0 ? s : 1);
}

/* One context of sched on m, in the default numerics (the streamed experts through the
 * tensor-core grouped product for quantized weights): k_tokens[0] alone, then the other
 * N_TOK - 1 as one pass; that pass's rows against ref's rows 1.. (ref: every row of k_tokens
 * on the CPU), INFINITY when a step failed; *st the stats after it, *streamed the expert bytes
 * the second pass streamed. */
static double two_passes(sl_model *m, const char *sched, const float *ref, size_t V,
                         sl_ctx_stats *st, uint64_t *streamed)
{
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 64;
    co.n_batch = 512;
    co.kv_f16 = false;
    co.all_logits = true;
    co.sched = sched;
    sl_ctx *c = NULL;
    sl_error e = {0};
    double worst = INFINITY;
    memset(st, 0, sizeof *st);
    *streamed = 0;
    setenv("SLUICE_ACT_F32", "0", 1);
    const sl_status cs = sl_ctx_create(m, &co, &c, &e);
    setenv("SLUICE_ACT_F32", "1", 1);
    sl_ctx_stats s0;
    if (!cs && sl_ctx_eval(c, k_tokens, 1, &e) == SL_OK) {
        sl_ctx_stats_get(c, &s0);
        if (sl_ctx_eval(c, k_tokens + 1, N_TOK - 1, &e) == SL_OK) {
            worst = 0;
            for (int i = 0; i < N_TOK - 1; i++) {
                const float *l = sl_ctx_logits(c, i);
                const double r = l ? rel_diff(ref + (size_t)(i + 1) * V, l, V) : INFINITY;
                if (!(r <= worst)) worst = r;
            }
            sl_ctx_stats_get(c, st);
            *streamed = st->stream_bytes - s0.stream_bytes;
        }
    }
    CHECK_MSG(worst < INFINITY, "%s, two passes: %s", sched, e.msg);
    sl_ctx_destroy(c);
    return worst;
}

/* experts-cpu with static hot experts made resident by a first token, then a streamed prefill
 * (prefill_stream=4) that reads them where they are (runtime/engine/stream.h): its rows
 * against the CPU's, and its streamed bytes a plain context's less exactly the resident set's
 * (so it cannot pass with nothing read in place). */
static void hot_streamed(sl_model *m, const float *ref, size_t V, double tol, const char *label)
{
    sl_ctx_stats hs, ps;
    uint64_t hot_str = 0, plain_str = 0;
    const double r = two_passes(m, "mode=cpu hot_kb=1048576 hot_warm=1 prefill_stream=4", ref,
                                V, &hs, &hot_str);
    const double rp = two_passes(m, "mode=cpu prefill_stream=4", ref, V, &ps, &plain_str);
    printf("%-30s hot, then streamed prefill vs CPU: rel %.3g (plain %.3g); streamed %llu bytes "
           "(plain %llu, resident %llu)\n", label, r, rp, (unsigned long long)hot_str,
           (unsigned long long)plain_str, (unsigned long long)hs.hot_bytes);
    CHECK_MSG(r <= tol && rp <= tol && hs.stream_layers > 0 && hs.hot_bytes > 0 &&
                  plain_str == hot_str + hs.hot_bytes,
              "%s: hot, then streamed prefill vs CPU rel %g (plain %g) > %g, or streamed %llu "
              "bytes where a plain context streams %llu less the %llu resident", label, r, rp,
              tol, (unsigned long long)hot_str, (unsigned long long)plain_str,
              (unsigned long long)hs.hot_bytes);
}

/* sl_ctx_eval_batch on m (issue 30): three sequences, prefixes of k_tokens of 3, 5 and 7
 * tokens, in one pass, then four batched decodes each taking the next of k_tokens; after every
 * pass each sequence's logits must be those of its last token in ref (k_tokens as one sequence
 * on the CPU) within tol. Returns the worst relative difference. */
static double batch_vs(sl_model *m, const float *ref, size_t V, double tol, const char *label)
{
    enum { KB = 3, STEPS = 4 };
    const int32_t len[KB] = {3, 5, 7};
    sl_ctx *c[KB] = {0};
    sl_error e;
    double worst = 0;
    bool ok = true;
    for (int i = 0; i < KB && ok; i++) {
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = 64;
        co.n_batch = 32;
        co.kv_f16 = false;
        ok = sl_ctx_create(m, &co, &c[i], &e) == SL_OK;
        CHECK_MSG(ok, "%s: batch ctx: %s", label, e.msg);
    }
    for (int s = 0; s <= STEPS && ok; s++) {
        const int32_t *ts[KB];
        size_t ns[KB];
        for (int i = 0; i < KB; i++) {
            ts[i] = s ? &k_tokens[len[i] + s - 1] : k_tokens;
            ns[i] = s ? 1 : (size_t)len[i];
        }
        ok = sl_ctx_eval_batch(c, ts, ns, KB, &e) == SL_OK;
        CHECK_MSG(ok, "%s: batch step %d: %s", label, s, e.msg);
        for (int i = 0; i < KB && ok; i++) {
            const float *l = sl_ctx_logits(c[i], -1);
            const double r = l ? rel_diff(ref + (size_t)(len[i] + s - 1) * V, l, V) : INFINITY;
            if (!(r <= worst)) worst = r;
        }
    }
    for (int i = 0; i < KB; i++) sl_ctx_destroy(c[i]);
    CHECK_MSG(ok && worst <= tol, "%s: batched (3 sequences) vs CPU rel %g > %g", label, worst,
              tol);
    return worst;
}

/* The decode graph (sl_ctx_options.no_graphs): k_tokens decoded one at a time, then again
 * from position REW after a rewind, with graphs (the default) and without, give the same bits
 * (the re-decoded rows also those of the first time: the positions the replay reads live on
 * the device); the stats say what ran: a context whose layers all run on the GPU (routed
 * experts on the host in stream order included: graph 1) captures once and runs every pass as
 * one graph launch, one with host layers (graph 0) never captures, -1: either (a dense FFN on
 * the host waits on the stream: launched), no_graphs never captures; and none is captured
 * while the model has a second context. A third run without programmatic dependent launch
 * (sl_ctx_options.no_pdl; the default on the H100 / H200 is with it) gives the same bits and
 * the same graph counts; sl_ctx_stats.pdl says which ran with it (the first two where the
 * device has compute capability 9.0+, the third never). */
static void check_graph(sl_model *m, int graph, const char *label)
{
    enum { REW = 5, ROWS = 2 * N_TOK - REW };
    sl_model_info info;
    sl_model_info_get(m, &info);
    const size_t V = (size_t)info.n_vocab;
    static const char *const what[3] = {"graph", "launched", "graph without PDL"};
    float *out[3] = {calloc(V * ROWS, sizeof(float)), calloc(V * ROWS, sizeof(float)),
                     calloc(V * ROWS, sizeof(float))};
    sl_ctx_stats st[3];
    memset(st, 0, sizeof st);
    bool ok = out[0] && out[1] && out[2];
    for (int g = 0; g < 3 && ok; g++) {
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = 64;
        co.kv_f16 = false;
        co.no_graphs = g == 1;
        co.no_pdl = g == 2;
        sl_ctx *c = NULL;
        sl_error e;
        ok = sl_ctx_create(m, &co, &c, &e) == SL_OK;
        CHECK_MSG(ok, "%s: graph ctx: %s", label, e.msg);
        for (int i = 0; i < ROWS && ok; i++) {
            const int t = i < N_TOK ? i : i - N_TOK + REW;
            if (i == N_TOK) {
                ok = sl_ctx_rewind(c, REW, &e) == SL_OK;
                CHECK_MSG(ok, "%s: rewind: %s", label, e.msg);
            }
            ok = ok && sl_ctx_eval(c, &k_tokens[t], 1, &e) == SL_OK;
            CHECK_MSG(ok, "%s: %s decode %d: %s", label, what[g], i, e.msg);
            const float *l = ok ? sl_ctx_logits(c, -1) : NULL;
            if (l) memcpy(out[g] + (size_t)i * V, l, V * sizeof *l);
        }
        sl_ctx_stats_get(c, &st[g]);
        sl_ctx_destroy(c);
    }
    for (int i = 0; i < ROWS && ok; i++) {
        const size_t at = (size_t)i * V;
        CHECK_MSG(!memcmp(out[0] + at, out[1] + at, V * sizeof(float)),
                  "%s: decode %d: graph and launched logits differ", label, i);
        CHECK_MSG(!memcmp(out[0] + at, out[2] + at, V * sizeof(float)),
                  "%s: decode %d: logits with and without PDL differ", label, i);
        if (i >= N_TOK)
            CHECK_MSG(!memcmp(out[0] + at, out[0] + (size_t)(i - N_TOK + REW) * V,
                              V * sizeof(float)),
                      "%s: decode %d after the rewind differs from the first time", label, i);
    }
    const sl_ctx_stats *s = &st[0];
    if (ok && (graph == 1 || (graph < 0 && s->graph_passes)))
        CHECK_MSG(s->graph_captures == 1 && s->graph_passes == ROWS && !s->graph_failures,
                  "%s: graph: %llu captures, %llu passes of %d, %llu failures (%s)", label,
                  (unsigned long long)s->graph_captures, (unsigned long long)s->graph_passes,
                  ROWS, (unsigned long long)s->graph_failures,
                  s->graph_error ? s->graph_error : "no error");
    else if (ok)
        CHECK_MSG(!s->graph_captures && !s->graph_passes && !s->graph_failures,
                  "%s: graph with host parts: %llu captures, %llu passes", label,
                  (unsigned long long)s->graph_captures, (unsigned long long)s->graph_passes);
    CHECK_MSG(!st[1].graph_captures && !st[1].graph_passes, "%s: no_graphs captured", label);
    sl_cuda_ctx *cu = NULL;
    sl_cuda_ctx_info ci = {0};
    if (sl_cuda_ctx_create(0, NULL, &cu, NULL) == SL_OK) sl_cuda_ctx_info_get(cu, &ci);
    sl_cuda_ctx_destroy(cu);
    const bool has_pdl = ci.cc_major >= 9;
    if (ok && graph == 1)
        CHECK_MSG(st[0].pdl == has_pdl && st[1].pdl == has_pdl && !st[2].pdl,
                  "%s: stats.pdl %d %d %d, the device (cc %d.%d) %s it", label, st[0].pdl,
                  st[1].pdl, st[2].pdl, ci.cc_major, ci.cc_minor, has_pdl ? "has" : "lacks");
    CHECK_MSG(st[2].graph_captures == s->graph_captures && st[2].graph_passes == s->graph_passes
                  && st[2].graph_failures == s->graph_failures,
              "%s: without PDL %llu captures, %llu passes, %llu failures; with it %llu, %llu, "
              "%llu", label, (unsigned long long)st[2].graph_captures,
              (unsigned long long)st[2].graph_passes, (unsigned long long)st[2].graph_failures,
              (unsigned long long)s->graph_captures, (unsigned long long)s->graph_passes,
              (unsigned long long)s->graph_failures);
    /* a capture records everything on the model's stream: none while a second context lives */
    if (ok && graph == 1) {
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = 16;
        sl_ctx *c1 = NULL, *c2 = NULL;
        sl_error e;
        sl_ctx_stats s1, s2;
        if (sl_ctx_create(m, &co, &c1, &e) == SL_OK && sl_ctx_create(m, &co, &c2, &e) == SL_OK &&
            sl_ctx_eval(c1, &k_tokens[0], 1, &e) == SL_OK) {
            sl_ctx_stats_get(c1, &s1);
            sl_ctx_destroy(c2);
            c2 = NULL;
            if (sl_ctx_eval(c1, &k_tokens[1], 1, &e) == SL_OK) {
                sl_ctx_stats_get(c1, &s2);
                CHECK_MSG(!s1.graph_captures && !s1.graph_failures && s2.graph_captures == 1 &&
                              s2.graph_passes == 1,
                          "%s: two contexts: %llu captures; then alone: %llu captures, %llu "
                          "passes", label, (unsigned long long)s1.graph_captures,
                          (unsigned long long)s2.graph_captures,
                          (unsigned long long)s2.graph_passes);
            } else {
                CHECK_MSG(false, "%s: alone again: %s", label, e.msg);
            }
        } else {
            CHECK_MSG(false, "%s: two contexts: %s", label, e.msg);
        }
        sl_ctx_destroy(c2);
        sl_ctx_destroy(c1);
    }
    /* kernel launches inside the device layers: counted as captured on a graph's replay, so
     * the graph run's equal the launched run's */
    if (ok && s->dev_layers)
        CHECK_MSG(s->dev_layer_launches > 0 && s->dev_layers == st[1].dev_layers &&
                      s->dev_layer_launches == st[1].dev_layer_launches,
                  "%s: %llu kernel launches in %llu device layers (graph), %llu in %llu "
                  "(launched)", label, (unsigned long long)s->dev_layer_launches,
                  (unsigned long long)s->dev_layers,
                  (unsigned long long)st[1].dev_layer_launches,
                  (unsigned long long)st[1].dev_layers);
    if (ok)
        printf("%-30s graph: %llu passes, %llu captures, steps/layer %.2f, kernels/layer "
               "%.2f\n", label, (unsigned long long)s->graph_passes,
               (unsigned long long)s->graph_captures,
               s->dev_layers ? (double)s->dev_layer_steps / (double)s->dev_layers : 0.0,
               s->dev_layers ? (double)s->dev_layer_launches / (double)s->dev_layers : 0.0);
    free(out[0]);
    free(out[1]);
    free(out[2]);
}

/* Writes arch's tiny model of wtype to dir/PREFIXarch-wtype.gguf (path) with parameters *p. */
static bool write_model(const char *arch, uint32_t wtype, bool tie, const char *prefix,
                        const char *dir, tm_params *p, char path[700])
{
    tm_defaults(arch, p);
    /* a 256-element block type (the codebook types) needs rows of whole blocks */
    if (sl_gguf_type_get(wtype)->block_size == 256)
        p->n_embd = 256, p->n_head = 8, p->n_head_kv = 4, p->head_dim = 32, p->n_ff = 256;
    p->wtype = wtype;
    p->tie_output = tie;
    snprintf(path, 700, "%s/%s%s-%u.gguf", dir, prefix, arch, wtype);
    sl_error e;
    const bool ok = tm_write(p, path, &e) == SL_OK;
    CHECK_MSG(ok, "write %s: %s", arch, e.msg);
    return ok;
}

static void check_arch(const char *arch, uint32_t wtype, const char *dir)
{
    tm_params p;
    char path[700];
    if (!write_model(arch, wtype, wtype != SL_GGML_F32, "", dir, &p, path)) return;
    const double tol = wtype == SL_GGML_F32 ? 1e-4 : 2e-2;
    sl_model *mc = open_model(path, SL_PLACE_CPU, "sim", NULL);
    if (!mc) return;
    sl_model_info info;
    sl_model_info_get(mc, &info);
    const size_t NV = (size_t)info.n_vocab * N_TOK;
    float *ref = run(mc, 512, false, false), *ref16 = run(mc, 512, true, false);
    /* Expert Deferral's decode (defer.h) on the CPU: its reference on cuda below */
    float *refd = info.n_expert ? run_with(mc, 1, false, true, "mode=cpu defer=1", 0, NULL)
                                : NULL;
    sl_model_close(mc);
    /* the last: --placement gpu --n-cpu-moe 2 (a hybrid layer past deepseek2's leading dense
     * one), MoE models only */
    const sl_placement pls[] = {SL_PLACE_GPU, SL_PLACE_LAYERS, SL_PLACE_EXPERTS_CPU,
                                SL_PLACE_GPU};
    const bool ds2 = !strcmp(arch, "deepseek2") && wtype == SL_GGML_F32;
    for (size_t i = 0; i < 4 && ref && ref16; i++) {
        if (i == 3 && !info.n_expert) continue;
        sl_model *m = open_model_n(path, pls[i], "cuda", NULL, i == 3 ? 2 : 0);
        if (!m) continue;
        float *l = run(m, 512, false, false);
        float *d = run(m, 1, false, true);
        float *ch = run(m, 4, false, false);
        float *h = run(m, 512, true, false);
        const char *pn[] = {"gpu", "layers", "experts-cpu", "n-cpu-moe-2"};
        const float *got[4] = {l, d, ch, h};
        for (int j = 0; ds2 && j < 4; j++) {
            const double r = got[j] ? rel_diff(j == 3 ? ref16 : ref, got[j], NV) : INFINITY;
            g_ds2_runs++;
            if (!(r <= g_ds2_worst)) g_ds2_worst = r;
        }
        if (l) {
            const double r = rel_diff(ref, l, NV);
            printf("%-8s %-5s %-12s prefill vs CPU: rel %.3g\n", arch,
                   sl_gguf_type_get(wtype)->name, pn[i], r);
            CHECK_MSG(r <= tol, "%s %u %s: prefill vs CPU rel %g > %g", arch, wtype, pn[i], r, tol);
        }
        if (d) CHECK_MSG(rel_diff(ref, d, NV) <= tol, "%s %u %s: decode vs CPU rel %g", arch,
                         wtype, pn[i], rel_diff(ref, d, NV));
        if (ch) CHECK_MSG(rel_diff(ref, ch, NV) <= tol, "%s %u %s: chunked vs CPU rel %g", arch,
                          wtype, pn[i], rel_diff(ref, ch, NV));
        if (h) CHECK_MSG(rel_diff(ref16, h, NV) <= tol, "%s %u %s: F16 KV vs CPU rel %g", arch,
                         wtype, pn[i], rel_diff(ref16, h, NV));
        /* the default numerics (SLUICE_ACT_F32 off: Q8 activations in the GEMVs, the routed
         * experts' grouped product on the tensor cores, kernels/cuda/gemm_grouped.h) against
         * the same verification-mode CPU logits; quantized weights (F32 has neither path) */
        if (wtype != SL_GGML_F32 && i == 0) {
            float *dl = run_with(m, 512, false, false, NULL, RUN_DEFAULT_NUMERICS, NULL);
            if (dl) {
                const double r = rel_diff(ref, dl, NV);
                printf("%-8s %-5s %-12s prefill (default numerics) vs CPU: rel %.3g\n", arch,
                       sl_gguf_type_get(wtype)->name, pn[i], r);
                CHECK_MSG(r <= tol, "%s %u %s: default-numerics prefill vs CPU rel %g > %g",
                          arch, wtype, pn[i], r, tol);
            }
            free(dl);
        }
        /* experts-cpu: the prefill with the host experts streamed through the device */
        if (i == 2 && info.n_expert) {
            uint64_t sl = 0;
            float *sp = run_streamed(m, &sl);
            const double r = sp ? rel_diff(ref, sp, NV) : INFINITY;
            printf("%-8s %-5s %-12s streamed prefill vs CPU: rel %.3g (%llu layers)\n", arch,
                   sl_gguf_type_get(wtype)->name, pn[i], r, (unsigned long long)sl);
            CHECK_MSG(r <= tol && sl > 0, "%s %u experts-cpu: streamed prefill vs CPU rel %g "
                      "> %g, or no layer streamed (%llu)", arch, wtype, r, tol,
                      (unsigned long long)sl);
            free(sp);
        }
        /* experts-cpu with static hot residency (runtime/engine/hot.h): the experts the first
         * token routed resident, their slots through the device's expert GEMVs beside the
         * CPU's, joined on the device; decode against the CPU, every later pass a graph */
        if (i == 2 && info.n_expert) {
            sl_ctx_stats hs;
            float *hd = run_with(m, 1, false, true, "mode=cpu hot_kb=1048576 hot_warm=1", 0,
                                 &hs);
            const double r = hd ? rel_diff(ref, hd, NV) : INFINITY;
            printf("%-8s %-5s %-12s static hot decode vs CPU: rel %.3g (%llu of %llu on the "
                   "device; %llu graph passes, %llu failed captures)\n", arch,
                   sl_gguf_type_get(wtype)->name, pn[i], r,
                   (unsigned long long)hs.expert_calls_gpu,
                   (unsigned long long)(hs.expert_calls_gpu + hs.expert_calls_cpu),
                   (unsigned long long)hs.graph_passes, (unsigned long long)hs.graph_failures);
            CHECK_MSG(r <= tol && hs.expert_calls_gpu > 0 && hs.graph_failures == 0,
                      "%s %u static hot: decode vs CPU rel %g > %g, %llu assignments on the "
                      "device, graph capture failures %llu", arch, wtype, r, tol,
                      (unsigned long long)hs.expert_calls_gpu,
                      (unsigned long long)hs.graph_failures);
            free(hd);
        }
        /* experts-cpu: a streamed prefill after the hot experts are resident reads them in
         * place */
        if (i == 2 && info.n_expert) {
            char hl[96];
            snprintf(hl, sizeof hl, "%s %s %s", arch, sl_gguf_type_get(wtype)->name, pn[i]);
            hot_streamed(m, ref, (size_t)info.n_vocab, tol, hl);
        }
        /* experts-cpu with Expert Deferral: each layer's deferred part on the worker thread
         * while the device runs the next layer; decode against the CPU's deferred decode */
        if (i == 2 && refd) {
            sl_ctx_stats ds;
            float *dd = run_with(m, 1, false, true, "mode=cpu defer=1", 0, &ds);
            const double r = dd ? rel_diff(refd, dd, NV) : INFINITY;
            printf("%-8s %-5s %-12s defer=1 decode vs CPU: rel %.3g (%llu graph passes, %llu "
                   "failed captures)\n", arch, sl_gguf_type_get(wtype)->name, pn[i], r,
                   (unsigned long long)ds.graph_passes, (unsigned long long)ds.graph_failures);
            CHECK_MSG(r <= tol && ds.graph_failures == 0, "%s %u defer=1: decode vs CPU rel %g "
                      "> %g, graph capture failures %llu", arch, wtype, r, tol,
                      (unsigned long long)ds.graph_failures);
            free(dd);
        }
        char lab[96];
        snprintf(lab, sizeof lab, "%s %s %s", arch, sl_gguf_type_get(wtype)->name, pn[i]);
        printf("%-30s batched vs CPU: rel %.3g\n", lab,
               batch_vs(m, ref, (size_t)info.n_vocab, tol, lab));
        /* gpu: all on the device; layers: one layer there; experts-cpu and n-cpu-moe: host
         * experts in stream order (a dense model's experts-cpu: either) */
        check_graph(m, i == 0 ? 1 : i == 1 ? 0 : info.n_expert ? 1 : -1, lab);
        free(l);
        free(d);
        free(ch);
        free(h);
        sl_model_close(m);
    }
    free(ref);
    free(ref16);
    free(refd);
}

static uint64_t gpu_bytes(const sl_model *m)
{
    sl_model_info info;
    sl_model_info_get(m, &info);
    return info.gpu_bytes;
}

/* Routed experts split hot/cold (hot parts on the GPU through the per-expert-width expert
 * kernels, cold ones on the CPU) against the CPU placement, prefill and decode: a random
 * index, and one with parts of width 0 on either side (TIDX_MOE_EDGES); the split must hold
 * fewer device bytes than placement gpu. Granule g: 1 for F32, 32 for Q8_0 (the down blocks). */
static void check_hot_cold(const char *arch, uint32_t wtype, int g, const char *dir)
{
    tm_params p;
    char path[700], idx[720];
    if (!write_model(arch, wtype, false, "hc-", dir, &p, path)) return;
    snprintf(idx, sizeof idx, "%s.gpuidx", path);
    sl_error e;
    const double tol = wtype == SL_GGML_F32 ? 1e-4 : 2e-2;
    sl_model *mc = open_model(path, SL_PLACE_CPU, "sim", NULL);
    sl_model *mg = open_model(path, SL_PLACE_GPU, "cuda", NULL);
    if (!mc || !mg) {
        sl_model_close(mc);
        sl_model_close(mg);
        return;
    }
    const size_t NV = (size_t)p.n_vocab * N_TOK;
    float *ref = run(mc, 512, false, false);
    const uint64_t whole = gpu_bytes(mg);
    sl_model_close(mc);
    sl_model_close(mg);
    const int modes[] = {TIDX_MOE_RANDOM, TIDX_MOE_EDGES};
    for (size_t i = 0; i < 2 && ref; i++) {
        if (tidx_write(idx, p.n_layer, p.n_expert, p.n_ff, g, tidx_pick_moe, modes[i],
                       5 + (uint64_t)i, &e) != SL_OK) {
            CHECK_MSG(false, "index %s: %s", idx, e.msg);
            continue;
        }
        sl_model *m = open_model(path, SL_PLACE_HOT_COLD, "cuda", idx);
        if (!m) continue;
        CHECK_MSG(gpu_bytes(m) < whole, "%s %u hot-cold: %llu device bytes, gpu %llu", arch,
                  wtype, (unsigned long long)gpu_bytes(m), (unsigned long long)whole);
        float *l = run(m, 512, false, false), *d = run(m, 1, false, true);
        if (l) {
            const double r = rel_diff(ref, l, NV);
            printf("%-8s %-5s hot-cold %d prefill vs CPU: rel %.3g\n", arch,
                   sl_gguf_type_get(wtype)->name, modes[i], r);
            CHECK_MSG(r <= tol, "%s %u hot-cold %d: prefill vs CPU rel %g > %g", arch, wtype,
                      modes[i], r, tol);
        }
        if (d) CHECK_MSG(rel_diff(ref, d, NV) <= tol, "%s %u hot-cold %d: decode vs CPU rel %g",
                         arch, wtype, modes[i], rel_diff(ref, d, NV));
        free(l);
        free(d);
        sl_model_close(m);
    }
    free(ref);
}

/* The contexts' CPU threads beside the GPU (runtime/engine/cpu_threads.h): with the count
 * left open, --n-cpu-moe (experts of some layers on the host) leaves one CPU to the driver's
 * and the waiting thread when the whole model on the GPU (the same node's CPUs, its count
 * first) has >= 4. */
static void check_threads(const char *dir)
{
    tm_params p;
    char path[700];
    if (!write_model("qwen3moe", SL_GGML_F32, false, "", dir, &p, path)) return;
    int all = 0;
    for (int hybrid = 0; hybrid < 2; hybrid++) {
        sl_model_options o = sl_model_options_default();
        o.placement = SL_PLACE_GPU;
        o.n_cpu_moe = hybrid ? 1 : 0;
        o.progress = false;
        o.device = "cuda";
        sl_model *m = NULL;
        sl_error e;
        CHECK_MSG(sl_model_open(path, &o, &m, &e) == SL_OK, "open: %s", e.msg);
        if (!m) continue;
        sl_model_info mi;
        sl_model_info_get(m, &mi);
        if (!hybrid) all = mi.n_threads;
        const int want = hybrid && all >= 4 ? all - 1 : all;
        CHECK_MSG(mi.n_threads == want && all >= 1, "%s: %d CPU threads, want %d",
                  hybrid ? "--n-cpu-moe 1" : "gpu", mi.n_threads, want);
        sl_model_close(m);
    }
}

/* The whole Q4_K model at `path` on the device, decode in the default numerics (the Q8
 * kernels: 256 columns) with a decode graph, against the CPU's logits ref: every step one
 * kernel (issue 32: the attention norm in Q / K / V's launch, wo + add + FFN norm, the routed
 * gate / up + SwiGLU, down + combine + add), `launches` kernels a layer: 6 for llama, 8 for
 * the test model's qwen3moe (its router is Q4_K: the Q8 GEMV, then the top-k; an F32 router,
 * as real files have, is one launch with it: 7) */
static void gpu_decode_q4k(const char *path, const float *ref, size_t n_vocab, const char *arch,
                           int launches)
{
    sl_model *m = open_model(path, SL_PLACE_GPU, "cuda", NULL);
    if (!m) return;
    sl_ctx_stats gs;
    float *gd = run_with(m, 1, false, true, NULL, RUN_DEFAULT_NUMERICS, &gs);
    const double r = gd ? rel_diff(ref, gd, n_vocab * N_TOK) : INFINITY;
    const double per = gs.dev_layers ? (double)gs.dev_layer_launches / (double)gs.dev_layers : 0;
    printf("%s Q4_K gpu decode (default numerics) vs CPU: rel %.3g, %.2f kernels a layer, %llu "
           "graph passes\n", arch, r, per, (unsigned long long)gs.graph_passes);
    CHECK_MSG(r <= 2e-2, "%s Q4_K gpu decode (default numerics) vs CPU: rel %g", arch, r);
    CHECK_MSG(gs.dev_layers > 0 && gs.dev_layer_launches == (uint64_t)launches * gs.dev_layers
                  && gs.graph_passes > 0,
              "%s Q4_K gpu decode: %llu kernels in %llu layers (want %d a layer), %llu graph "
              "passes", arch, (unsigned long long)gs.dev_layer_launches,
              (unsigned long long)gs.dev_layers, launches, (unsigned long long)gs.graph_passes);
    /* --no-fusion: the separate launches, the same bits (the kernel tests hold each fused
     * launch to them), more kernels a layer */
    sl_ctx_stats us;
    float *ud = run_with(m, 1, false, true, NULL, RUN_DEFAULT_NUMERICS | RUN_NO_FUSION, &us);
    const double uper = us.dev_layers ? (double)us.dev_layer_launches / (double)us.dev_layers : 0;
    printf("%s Q4_K gpu decode without fusion: %.2f kernels a layer\n", arch, uper);
    CHECK_MSG(gd && ud && !memcmp(gd, ud, n_vocab * N_TOK * sizeof *gd),
              "%s Q4_K gpu decode: logits with and without fusion differ", arch);
    CHECK_MSG(uper > (double)launches, "%s Q4_K gpu decode without fusion: %.2f kernels a "
              "layer, not more than fused (%d)", arch, uper, launches);
    free(ud);
    free(gd);
    sl_model_close(m);
}

/* No argument: everything below. "deepseek2": only deepseek2's F32 runs and the parity line
 * (tools/gpu-test all's ds2-parity step: a few seconds). */
/* A Q4_K qwen3moe under experts-cpu: its host experts are repacked into Q4_K_R8 for the CPU,
 * so a streamed prefill copies those bytes and turns them back into Q4_K on the device
 * (kernels/cuda/repack.h) before the grouped product; against the CPU placement. Then its
 * decode in the default numerics with static hot experts, and on the gpu placement (the
 * decode's Q8 kernels: Q8_0 at the other models' width takes none). */
static void check_stream_q4k(const char *dir)
{
    tm_params p;
    char path[700];
    tm_defaults("qwen3moe", &p);
    p.wtype = SL_GGML_Q4_K;
    p.n_embd = p.n_ff = 256;
    p.n_head = 8, p.n_head_kv = 4, p.head_dim = 32;
    snprintf(path, sizeof path, "%s/stream-qwen3moe-q4k.gguf", dir);
    sl_error e;
    const bool wrote = tm_write(&p, path, &e) == SL_OK;
    CHECK_MSG(wrote, "write: %s", e.msg);
    if (!wrote) return;
    sl_model *mc = open_model(path, SL_PLACE_CPU, "sim", NULL);
    float *ref = mc ? run(mc, 512, false, false) : NULL;
    sl_model_info info;
    if (mc) sl_model_info_get(mc, &info);
    sl_model_close(mc);
    sl_model *m = ref ? open_model(path, SL_PLACE_EXPERTS_CPU, "cuda", NULL) : NULL;
    if (m) {
        sl_model_info mi;
        sl_model_info_get(m, &mi);
        uint64_t sl = 0;
        float *sp = run_streamed(m, &sl);
        const double r = sp ? rel_diff(ref, sp, (size_t)info.n_vocab * N_TOK) : INFINITY;
        printf("qwen3moe Q4_K experts-cpu (%llu tensors repacked) streamed prefill vs CPU: rel "
               "%.3g (%llu layers)\n", (unsigned long long)mi.repacked_tensors, r,
               (unsigned long long)sl);
        CHECK_MSG(mi.repacked_tensors > 0 && sl > 0 && r <= 2e-2, "qwen3moe Q4_K streamed: "
                  "%llu repacked, %llu layers, rel %g", (unsigned long long)mi.repacked_tensors,
                  (unsigned long long)sl, r);
        free(sp);
        /* the resident copies undone from Q4_K_R8 beside a partly copied staging buffer */
        hot_streamed(m, ref, (size_t)info.n_vocab, 2e-2, "qwen3moe Q4_K (repacked) experts-cpu");
        /* decode in the default numerics with hot experts: their gate / up + SwiGLU as one
         * launch on the side stream (sl_cuda_gemv_experts_glu), masked ids in the slots */
        sl_ctx_stats hs;
        float *hd = run_with(m, 1, false, true, "mode=cpu hot_kb=1048576 hot_warm=1",
                             RUN_DEFAULT_NUMERICS, &hs);
        const double rh = hd ? rel_diff(ref, hd, (size_t)info.n_vocab * N_TOK) : INFINITY;
        printf("qwen3moe Q4_K experts-cpu static hot decode (default numerics) vs CPU: rel %.3g "
               "(%llu on the device)\n", rh, (unsigned long long)hs.expert_calls_gpu);
        CHECK_MSG(rh <= 2e-2 && hs.expert_calls_gpu > 0, "qwen3moe Q4_K static hot decode "
                  "(default numerics): rel %g, %llu on the device", rh,
                  (unsigned long long)hs.expert_calls_gpu);
        free(hd);
    }
    sl_model_close(m);
    sl_model_close(m);
    if (ref) gpu_decode_q4k(path, ref, (size_t)info.n_vocab, "qwen3moe", 8);
    free(ref);
    /* a dense llama of the same width: wo + add + norm, gate / up + SwiGLU, down + add */
    tm_defaults("llama", &p);
    p.wtype = SL_GGML_Q4_K;
    p.n_embd = p.n_ff = 256;
    p.n_head = 8, p.n_head_kv = 4, p.head_dim = 32;
    snprintf(path, sizeof path, "%s/gpu-llama-q4k.gguf", dir);
    const bool wrote2 = tm_write(&p, path, &e) == SL_OK;
    CHECK_MSG(wrote2, "write: %s", e.msg);
    mc = wrote2 ? open_model(path, SL_PLACE_CPU, "sim", NULL) : NULL;
    ref = mc ? run(mc, 512, false, false) : NULL;
    if (mc) sl_model_info_get(mc, &info);
    sl_model_close(mc);
    if (ref) gpu_decode_q4k(path, ref, (size_t)info.n_vocab, "llama", 6);
    free(ref);
}

int main(int argc, char **argv)
{
    const bool ds2_only = argc > 1 && !strcmp(argv[1], "deepseek2");
    if (argc > 1 && !ds2_only) {
        fprintf(stderr, "engine_cuda_test: unknown argument '%s' (none, or deepseek2)\n",
                argv[1]);
        return 2;
    }
    int n = 0;
    sl_error e;
    if (sl_cuda_probe(&n, &e) != SL_OK) {
        printf("engine_cuda_test: SKIPPED, no usable GPU (%s)\n", e.msg);
        return 0;
    }
    /* the CPU reference in the verification mode (see the file comment) */
    setenv("SLUICE_ACT_F32", "1", 1);
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/engine_cuda_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *archs[] = {"llama", "mixtral", "mixtral-split", "qwen2moe", "qwen3moe", "olmoe",
                           "gemma3", "gpt-oss", "deepseek2", "glm4moe", "minimax-m2"};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        if (ds2_only && strcmp(archs[i], "deepseek2")) continue;
        check_arch(archs[i], SL_GGML_F32, dir);
        if (!ds2_only) check_arch(archs[i], SL_GGML_Q8_0, dir);
    }
    /* the codebook types on the device (kernels/cuda/qt_iq.cuh: GEMV, expert GEMV, dequant
     * for the GEMM), every matmul weight of the type (testmodel's random codes) */
    const uint32_t iq[] = {SL_GGML_IQ2_XXS, SL_GGML_IQ3_S, SL_GGML_IQ1_M};
    for (size_t i = 0; !ds2_only && i < sizeof iq / sizeof *iq; i++)
        check_arch("qwen3moe", iq[i], dir);
    /* F32: prefill, decode, chunked and F16 KV under gpu, layers, experts-cpu, n-cpu-moe 2 */
    printf("deepseek2-parity: runs %d max_rel %.6g tolerance 1e-4 %s\n", g_ds2_runs,
           g_ds2_worst, g_ds2_runs == 16 && g_ds2_worst <= 1e-4 ? "PASS" : "FAIL");
    CHECK_MSG(g_ds2_runs == 16, "deepseek2: %d of 16 cuda runs", g_ds2_runs);
    const char *hc[] = {"qwen3moe", "mixtral", "gpt-oss"};
    for (size_t i = 0; !ds2_only && i < sizeof hc / sizeof *hc; i++) {
        check_hot_cold(hc[i], SL_GGML_F32, 1, dir);
        check_hot_cold(hc[i], SL_GGML_Q8_0, 32, dir);
    }
    if (!ds2_only) check_threads(dir);
    if (!ds2_only) check_stream_q4k(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", dir);
    return sl_test_finish("engine_cuda_test");
}
