/* sluice place solve: PowerInfer's offline step — from a model, its neuron statistics (`place
 * profile`) and a VRAM budget, the hot neurons of each dense FFN, or of each routed expert of a
 * MoE model (scheduler/policy/hotcold_solve.h), written as a .gpuidx (scheduler/policy/gpuidx.h; a MoE model
 * gets the MoE index, generic.gpu_index.expert_count) that `--placement hot-cold --gpu-index`
 * (or MODEL.generated.gpuidx beside the model) uses.
 *
 * The budget for hot neurons is what the hot-cold plan leaves: --vram-budget less the weights
 * that placement puts on the device anyway (everything but the dense FFNs, or the routed
 * experts, and token_embd: a MoE model's attention, router, shared experts, leading dense
 * FFNs and output are base bytes, as non-FFN weights are for a dense one) and the KV cache /
 * buffer reserve (scheduler/policy/placement.h). Per-token bytes: a neuron costs its gate row + up
 * row + down column on the side it lives on; the FFNs of these models are gated
 * (SwiGLU/GeGLU: every neuron is read every token its FFN runs), so a dense FFN's neuron
 * weighs 1 and an expert's the probability that a token is routed to it (the profile's
 * blk.N.ffn_expert_count / tokens). Bandwidths: the host's measured streaming read; the
 * device's measured copy roofline on cuda, the host's on sim; --cpu-gbs / --gpu-gbs override.
 * Neurons are chosen in whole blocks of down's type (within each expert). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cuda/bench.h"
#include "base/device/device.h"
#include "scheduler/policy/hotcold_solve.h"
#include "scheduler/policy/placement.h"
#include "tools/bench/bench.h"
#include "tools/common/fileio.h"
#include "tools/common/model_flags.h"
#include "tools/commands/place.h"
#include "runtime/engine/env.h"

static void usage(FILE *f)
{
    fputs("usage: sluice place solve -m MODEL --stats STATS.gguf --vram-budget SIZE -o OUT\n"
          "                          [--cpu-gbs X] [--gpu-gbs X] [--gguf-magic]\n"
          "  Chooses each dense FFN's (MoE: each routed expert's, weighed by how often the\n"
          "  profile routed tokens to it) hot neurons under the budget to minimise the per-token\n"
          "  bound max(CPU bytes / CPU BW, GPU bytes / HBM BW) and writes PowerInfer's .gpuidx\n"
          "  (use it with --placement hot-cold --gpu-index OUT, or name it\n"
          "  MODEL.generated.gpuidx). --gguf-magic writes \"GGUF\" instead of PowerInfer's\n"
          "  \"PWRI\" magic.\n",
          f);
    sl_cli_model_flags_help(f);
}

/* A stats tensor: I32 [n], mapped; NULL after writing why into err. */
static const int32_t *stats_i32(const sl_gguf *g, const char *name, int64_t n, int32_t il,
                                const char *what, sl_error *err)
{
    const sl_gguf_tensor *t = sl_gguf_tensor_find(g, name);
    if (!t || t->type != SL_GGML_I32 || t->n_dims != 1 || t->ne[0] != n) {
        snprintf(err->msg, sizeof err->msg, "tensor %s: %s (the model's layer %d has %lld %s: "
                 "I32 [%lld] expected)", name, t ? "wrong type or shape" : "missing (a profile "
                 "of another model, or of an older sluice: run place profile again)", il,
                 (long long)n, what, (long long)n);
        return NULL;
    }
    const int32_t *v = sl_gguf_tensor_view(g, t);
    if (!v) snprintf(err->msg, sizeof err->msg, "tensor %s: no mapping", name);
    return v;
}

/* Checks counts v [lo, hi) of tensor `name` against [0, c]: 1 with err filled if one is out. */
static int counts_bad(const char *name, const int32_t *v, int64_t lo, int64_t hi, uint64_t c,
                      const char *of, sl_error *err)
{
    for (int64_t j = lo; j < hi; j++) {
        if (v[j] < 0 || (uint64_t)v[j] > c) {
            snprintf(err->msg, sizeof err->msg, "tensor %s: entry %lld: count %d outside [0, "
                     "%llu %s]", name, (long long)j, v[j], (unsigned long long)c, of);
            return 1;
        }
    }
    return 0;
}

int sl_cli_hotcold_layer_freq(const sl_cli_hotcold_model *hm, int32_t il, uint64_t tokens,
                              const int32_t *routed, const int32_t *act, float *freq,
                              float *route_p, sl_error *err)
{
    const int64_t X = hm->n_expert ? hm->n_expert : 1, F = hm->n_ff, per = X * F;
    char rt_name[64], act_name[64];
    snprintf(rt_name, sizeof rt_name, "blk.%d.ffn_expert_count", il);
    snprintf(act_name, sizeof act_name, "blk.%d.ffn_act_count", il);
    if (hm->n_expert && counts_bad(rt_name, routed, 0, X, tokens, "tokens", err)) return 1;
    if (!tokens) { /* no evidence: a routing rate would be 0/0 */
        snprintf(err->msg, sizeof err->msg, "layer %d: the profile counted no tokens", il);
        return 1;
    }
    for (int64_t e = 0; e < X; e++) {
        const uint64_t d = hm->n_expert ? (uint64_t)routed[e] : tokens;
        if (hm->n_expert) route_p[il * X + e] = (float)((double)d / (double)tokens);
        if (counts_bad(act_name, act, e * F, (e + 1) * F, d,
                       hm->n_expert ? "tokens routed to its expert" : "tokens", err))
            return 1;
        for (int64_t j = e * F; j < (e + 1) * F; j++)
            freq[il * per + j] = d ? (float)((double)act[j] / (double)d) : 0.0f;
    }
    return 0;
}

/* Activation frequencies freq [n_layer][X * n_ff] (X = n_expert, 1 for dense; for an expert,
 * given it is routed) and, with experts, routing probabilities route_p [n_layer][X] from the
 * stats file, checked against the model. Layers without routed experts are not read. */
static int read_stats(const char *cmd, const char *path, const sl_cli_hotcold_model *hm,
                      float **freq_out, float **route_out)
{
    sl_gguf *g = NULL;
    sl_error err = {0};
    sl_gguf_options go = {0};
    const int64_t X = hm->n_expert ? hm->n_expert : 1, per = X * hm->n_ff;
    float *freq = NULL, *route = NULL;
    int rc = 1;
    if (sl_gguf_open(path, &go, &g, &err)) goto fail;
    uint64_t tokens = 0;
    uint32_t blocks = 0, experts = 0;
    if (sl_gguf_get_u64(g, "sluice.neuron_stats.tokens", &tokens, &err)) goto fail;
    if (!tokens) {
        snprintf(err.msg, sizeof err.msg, "sluice.neuron_stats.tokens is 0");
        goto fail;
    }
    if (!sl_gguf_get_u32(g, "sluice.neuron_stats.block_count", &blocks, &err) &&
        blocks != (uint32_t)hm->n_layer) {
        snprintf(err.msg, sizeof err.msg, "sluice.neuron_stats.block_count = %u, the model has "
                 "%d layers (a profile of another model)", blocks, hm->n_layer);
        goto fail;
    }
    const sl_status xs = sl_gguf_get_u32(g, "sluice.neuron_stats.expert_count", &experts, &err);
    if ((xs && xs != SL_ERR_NOT_FOUND) || experts != (uint32_t)hm->n_expert) {
        if (!xs || xs == SL_ERR_NOT_FOUND)
            snprintf(err.msg, sizeof err.msg, "sluice.neuron_stats.expert_count = %u%s, the "
                     "model has %d routed experts per layer (a profile of another model)",
                     experts, xs ? " (absent: a dense profile)" : "", hm->n_expert);
        goto fail;
    }
    freq = calloc((size_t)(hm->n_layer * per) + 1, sizeof *freq);
    route = calloc((size_t)(hm->n_layer * X) + 1, sizeof *route);
    if (!freq || !route) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    for (int32_t il = 0; il < hm->n_layer; il++) {
        if (hm->n_expert && !hm->bytes[il]) continue; /* no routed experts: base bytes */
        char name[64];
        const int32_t *rt = NULL;
        if (hm->n_expert) {
            snprintf(name, sizeof name, "blk.%d.ffn_expert_count", il);
            if (!(rt = stats_i32(g, name, X, il, "routed experts", &err))) goto fail;
        }
        snprintf(name, sizeof name, "blk.%d.ffn_act_count", il);
        const int32_t *cnt = stats_i32(g, name, per, il, hm->n_expert ? "expert FFN neurons "
                                       "(experts x width)" : "FFN neurons", &err);
        if (!cnt || sl_cli_hotcold_layer_freq(hm, il, tokens, rt, cnt, freq, route, &err))
            goto fail;
    }
    *freq_out = freq;
    *route_out = route;
    freq = route = NULL;
    rc = 0;
fail:
    if (rc) fprintf(stderr, "sluice %s: --stats %s: %s\n", cmd, path, err.msg);
    free(freq);
    free(route);
    sl_gguf_close(g);
    return rc;
}

double sl_cli_device_gbps(const char *kind, double host_gbps)
{
    sl_device_options o = {0};
    o.kind = kind;
    sl_device *dev = NULL;
    sl_error err = {0};
    bool cuda = false;
    if (!sl_env_device_options(&o, &err) && !sl_device_open(&o, &dev, &err)) cuda = sl_device_kind_get(dev) == SL_DEVICE_CUDA;
    sl_device_close(dev);
    if (!cuda) return host_gbps;
    sl_cuda_bench_result br;
    return sl_cuda_bench_gemv(NULL, 0, 1, 1, 1, &br, &err) ? 0 : br.copy_gbps;
}

void sl_cli_hotcold_model_free(sl_cli_hotcold_model *hm)
{
    free(hm->bytes);
    hm->bytes = NULL;
}

/* Opens path's plan with every FFN that may be split on the host (dense FFNs and routed
 * experts) and the rest on the device: the budget check must not fail on what will be split. */
static int open_plan(const char *cmd, const char *path, sl_model_options mo, sl_model **m)
{
    mo.plan_only = true;
    mo.placement = SL_PLACE_GPU;
    mo.override_tensor = "^blk\\.[0-9]+\\.ffn_(gate|up|down)\\.weight$=CPU";
    mo.cpu_moe = true;
    mo.n_cpu_moe = 0;
    mo.gpu_index = NULL;
    sl_error err = {0};
    if (!sl_model_open(path, &mo, m, &err)) return 0;
    if (strstr(err.msg, path)) fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
    else fprintf(stderr, "sluice %s: %s: %s\n", cmd, path, err.msg);
    return 1;
}

int sl_cli_hotcold_model_get(const char *cmd, const char *path, sl_model_options mo,
                             sl_cli_hotcold_model *hm)
{
    memset(hm, 0, sizeof *hm);
    sl_model *m = NULL;
    if (open_plan(cmd, path, mo, &m)) return 1;
    sl_model_info in;
    sl_model_info_get(m, &in);
    int rc = 1;
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    sl_place_plan moe_plan = {0};
    sl_error err = {0};
    if (sl_model_plan_get(m, &p, &t, &n, &err)) goto done;
    if (in.n_expert) {
        /* a MoE model splits its routed experts alone: its dense FFNs (leading dense layers)
         * are base bytes on the device. The placement resolves the same tensors again so,
         * under the same budget (the plan's, with the reserve the open took off it). */
        const uint64_t cap = mo.vram_budget ? mo.vram_budget : p->budget;
        const sl_place_options po = {
            .mode = SL_PLACE_GPU, .cpu_moe = true, .vram_budget = p->budget_known ? cap : 0,
            .reserve_bytes = p->budget_known && cap > p->budget ? cap - p->budget : 0};
        if (sl_place_resolve(t, n, in.n_layer, &po, &moe_plan, &err)) goto done;
        p = &moe_plan;
    }
    const sl_place_group split = in.n_expert ? SL_PG_EXPERTS : SL_PG_FFN;
    hm->bytes = calloc((size_t)in.n_layer + 1, sizeof *hm->bytes);
    if (!hm->bytes) goto done;
    hm->n_layer = in.n_layer;
    hm->n_expert = in.n_expert;
    hm->n_ff = in.n_expert ? in.n_ff_exp : in.n_ff;
    hm->granule = 1;
    for (size_t i = 0; i < n; i++) {
        if (t[i].group != split || t[i].layer < 0 || t[i].layer >= in.n_layer) continue;
        hm->bytes[t[i].layer] += (double)t[i].bytes;
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(t[i].type_name);
        if (strstr(t[i].name, "ffn_down") && ti && ti->block_size > hm->granule)
            hm->granule = ti->block_size;
    }
    hm->hot_budget = p->budget > p->device_bytes ? p->budget - p->device_bytes : 0;
    hm->base_device_bytes = (double)p->device_bytes;
    rc = hm->n_ff > 0 ? 0 : 1;
    if (rc) fprintf(stderr, "sluice %s: %s: FFN width %lld\n", cmd, path, (long long)hm->n_ff);
done:
    if (rc && err.msg[0]) fprintf(stderr, "sluice %s: %s: %s\n", cmd, path, err.msg);
    if (rc) sl_cli_hotcold_model_free(hm);
    sl_place_plan_free(&moe_plan);
    sl_model_close(m);
    return rc;
}

int sl_cli_hotcold_solve(const char *cmd, const sl_cli_hotcold_model *hm, const float *freq,
                         const float *route_p, double cpu_gbs, double gpu_gbs,
                         sl_hotcold_plan *plan)
{
    const int64_t X = hm->n_expert ? hm->n_expert : 1, per = X * hm->n_ff;
    sl_hotcold_layer *L = calloc((size_t)hm->n_layer + 1, sizeof *L);
    if (!L) return 1;
    /* Every FFN these models have is gated (SwiGLU/GeGLU): each neuron of a dense FFN is read
     * every token, each of an expert every token routed to it (route_p); freq is the profile's
     * activation frequency, what a ReLU FFN's skipping would read. */
    for (int32_t il = 0; il < hm->n_layer; il++) {
        const bool none = hm->n_expert && !hm->bytes[il]; /* no routed experts here */
        const double nb = none ? 0 : hm->bytes[il] / (double)per;
        L[il] = (sl_hotcold_layer){.n_neuron = none ? 0 : (uint32_t)per, .freq = freq + il * per,
                                   .dense = true, .neuron_bytes_cpu = nb, .neuron_bytes_gpu = nb,
                                   .n_expert = none ? 0 : (uint32_t)hm->n_expert,
                                   .route_p = route_p ? route_p + il * X : NULL};
    }
    const sl_hotcold_problem prob = {
        .n_layer = (uint32_t)hm->n_layer, .layers = L, .vram_budget_bytes = hm->hot_budget,
        .cpu_bytes_per_s = cpu_gbs * 1e9, .gpu_bytes_per_s = gpu_gbs * 1e9,
        .cpu_base_bytes = 0, /* token_embd: one row a token */
        .gpu_base_bytes = hm->base_device_bytes, .granularity = hm->granule};
    sl_error err = {0};
    const sl_status st = sl_hotcold_solve(&prob, plan, &err);
    free(L);
    if (st) fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
    return st ? 1 : 0;
}

/* The plan per layer and expert: hot neurons of each expert that has any, hottest first. */
/* Hot neurons of expert e in layer Y (F neurons per expert). */
static int64_t expert_hot(const sl_gpuidx_layer *Y, int64_t e, int64_t F)
{
    int64_t h = 0;
    for (int64_t j = 0; j < F; j++) h += Y->hot[e * F + j];
    return h;
}

static void print_experts(const sl_hotcold_plan *plan, const sl_cli_hotcold_model *hm,
                          const float *route_p)
{
    const int64_t X = hm->n_expert, F = hm->n_ff;
    for (uint32_t il = 0; il < plan->idx.n_layer; il++) {
        const sl_gpuidx_layer *Y = &plan->idx.layers[il];
        if (!Y->n_neuron) {
            printf("  blk.%u: no routed experts (dense, with the base)\n", il);
            continue;
        }
        int64_t whole = 0, part = 0;
        for (int64_t e = 0; e < X; e++) {
            const int64_t h = expert_hot(Y, e, F);
            whole += h == F;
            part += h && h < F;
        }
        printf("  blk.%u: %u of %u neurons hot; %lld experts whole, %lld in part, %lld cold "
               "(hot neurons / %lld, routed %%):", il, Y->n_hot, Y->n_neuron, (long long)whole,
               (long long)part, (long long)(X - whole - part), (long long)F);
        for (int64_t e = 0; e < X; e++) {
            const int64_t h = expert_hot(Y, e, F);
            if (h) printf(" e%lld %lld (%.0f%%)", (long long)e, (long long)h,
                          100.0 * route_p[il * X + e]);
        }
        printf("\n");
    }
}

int sl_cli_place_solve(int argc, char **argv)
{
    const char *cmd = "place solve";
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    const char *stats = NULL, *out = NULL;
    double cpu_gbs = 0, gpu_gbs = 0;
    bool gguf_magic = false;
    sl_cli_io io;
    sl_cli_io_init(&io, cmd);
    sl_cli_args a;
    sl_cli_args_init(&a, cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        const char *v;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--stats", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            stats = v;
        } else if (sl_cli_is(&a, "-o", "--output")) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(cmd, "%s: empty file name", a.flag);
            out = v;
        } else if (sl_cli_is(&a, "--cpu-gbs", NULL) || sl_cli_is(&a, "--gpu-gbs", NULL)) {
            const bool cpu = !strcmp(a.flag, "--cpu-gbs");
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_f64(cmd, a.flag, v, (sl_frange){0, 1e6, true, false},
                                 cpu ? &cpu_gbs : &gpu_gbs))
                return 2;
        } else if (sl_cli_is(&a, "--gguf-magic", NULL)) {
            gguf_magic = true;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path || !stats || !out || !mf.opt.vram_budget)
        return sl_cli_usage_error(cmd, "-m MODEL, --stats STATS.gguf, --vram-budget SIZE and "
                                  "-o OUT are required");
    sl_cli_out o = {0};
    sl_cli_hotcold_model hm = {0};
    sl_hotcold_plan plan = {0};
    float *freq = NULL, *route_p = NULL;
    sl_error err = {0};
    int rc = 1;
    /* the file rules for --stats (a regular file, registered as an input) before -o is
     * checked against the inputs and before the reader maps it */
    FILE *probe = NULL;
    uint64_t stats_bytes = 0;
    if (sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index) ||
        sl_cli_io_open_input(&io, "--stats", stats, &probe, &stats_bytes))
        goto done;
    fclose(probe);
    if ((rc = sl_cli_out_prepare(&io, &o, "-o", out, SL_CLI_OUT_BY_NAME)) ||
        (rc = sl_cli_hotcold_model_get(cmd, mf.path, mf.opt, &hm)))
        goto done;
    rc = 1;
    if (read_stats(cmd, stats, &hm, &freq, &route_p)) goto done;
    int threads = 0;
    size_t mib = 0;
    if (!cpu_gbs) cpu_gbs = sl_bench_stream_gbps(&mf.opt, &threads, &mib);
    if (!gpu_gbs) gpu_gbs = sl_cli_device_gbps(mf.opt.device, cpu_gbs);
    if (cpu_gbs <= 0 || gpu_gbs <= 0) {
        fprintf(stderr, "sluice %s: could not measure the bandwidths (--cpu-gbs, --gpu-gbs)\n",
                cmd);
        goto done;
    }
    if (sl_cli_hotcold_solve(cmd, &hm, freq, hm.n_expert ? route_p : NULL, cpu_gbs, gpu_gbs,
                             &plan))
        goto done;
    const sl_gpuidx_write_options wo = {.gguf_magic = gguf_magic};
    if (sl_gpuidx_write(sl_cli_out_name(&o), &plan.idx, &wo, &err)) {
        fprintf(stderr, "sluice %s: -o %s: %s\n", cmd, out, err.msg);
        goto done;
    }
    if (sl_cli_out_commit(&io, &o)) goto done;
    uint64_t hot = 0, all = 0;
    for (uint32_t il = 0; il < plan.idx.n_layer; il++) {
        hot += plan.idx.layers[il].n_hot;
        all += plan.idx.layers[il].n_neuron;
    }
    printf("solve: %llu of %llu %sneurons hot (%.1f%%) in %.2f MiB of %.2f MiB for hot "
           "neurons; per token %.3f MB cpu, %.3f MB gpu; bound %.3f ms/token (cpu %.3f, gpu "
           "%.3f; within %.2f%% of optimal) at %.1f / %.1f GB/s -> %s\n",
           (unsigned long long)hot, (unsigned long long)all, hm.n_expert ? "expert " : "",
           all ? 100.0 * (double)hot / (double)all : 0.0, plan.cost.vram_bytes / 1048576.0,
           hm.hot_budget / 1048576.0, plan.cost.cpu_bytes / 1e6, plan.cost.gpu_bytes / 1e6,
           plan.cost.bound_s * 1e3, plan.cost.cpu_s * 1e3, plan.cost.gpu_s * 1e3,
           plan.lower_bound_s > 0 ? 100.0 * (plan.cost.bound_s / plan.lower_bound_s - 1) : 0.0,
           cpu_gbs, gpu_gbs, out);
    if (hm.n_expert) print_experts(&plan, &hm, route_p);
    rc = sl_cli_stdout_check(cmd);
done:
    sl_cli_out_discard(&o);
    sl_cli_io_free(&io);
    sl_hotcold_plan_free(&plan);
    sl_cli_hotcold_model_free(&hm);
    free(freq);
    free(route_p);
    return rc;
}
