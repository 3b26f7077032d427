/* bench decode's --vram-budget rows (bench.h): the same device budget spent three ways —
 * llama.cpp's -ngl (the largest that fits), --n-cpu-moe (MoE: the smallest that fits) and
 * PowerInfer's hot/cold neurons (an index solved from a CPU profile of the prompt tokens).
 *
 * Hot/cold of a MoE model: the solver (scheduler/hotcold_solve.h) is given each MoE layer's
 * n_expert x n_ff expert neurons as one sparse layer whose neuron j of expert e is read with
 * the probability that a token is routed to e (its routing rate in the profile): a routed
 * expert computes all its neurons (SwiGLU, no activation sparsity), an unrouted one none. The
 * solution is the MoE .gpuidx (expert-major, scheduler/gpuidx.h) that --placement hot-cold
 * runs; granules never straddle experts because n_ff is a multiple of down's block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "scheduler/gpuidx.h"
#include "scheduler/placement.h"
#include "tools/cli/bench.h"
#include "tools/cli/place.h"

/* Routed experts' tensors (merged or per expert, weights and biases), for -ot. */
static const char k_experts_cpu[] =
    "^blk\\.[0-9]+\\.ffn_(gate|up|down)(_exps|\\.[0-9]+)\\.(weight|bias)$=CPU";

/* The hot/cold problem of MoE model `path` under mo's budget, from the CPU profile c (routing
 * counts of n_prompt tokens): layers[] and freq (owned by the caller), the granule, the
 * device bytes besides the experts and the budget left for hot neurons. 0, or 1 with err. */
static int moe_problem(const char *path, sl_model_options mo, const sl_ctx *c,
                       const sl_model_info *in, int32_t n_prompt, sl_hotcold_layer *layers,
                       float *freq, sl_hotcold_problem *prob, sl_error *err)
{
    mo.plan_only = true;
    mo.placement = SL_PLACE_GPU;
    mo.override_tensor = k_experts_cpu;
    mo.gpu_index = NULL;
    sl_model *m = NULL;
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    if (sl_model_open(path, &mo, &m, err) || sl_model_plan_get(m, &p, &t, &n, err)) {
        sl_model_close(m);
        return 1;
    }
    const int64_t X = in->n_expert, F = in->n_ff_exp;
    double *bytes = calloc((size_t)in->n_layer + 1, sizeof *bytes);
    uint32_t granule = 1;
    for (size_t i = 0; bytes && i < n; i++) {
        if (t[i].group != SL_PG_EXPERTS || t[i].layer < 0 || t[i].layer >= in->n_layer) continue;
        bytes[t[i].layer] += (double)t[i].bytes;
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(t[i].type_name);
        if (strstr(t[i].name, "ffn_down") && ti && ti->block_size > granule)
            granule = ti->block_size;
    }
    prob->vram_budget_bytes = p->budget > p->device_bytes ? p->budget - p->device_bytes : 0;
    prob->gpu_base_bytes = (double)p->device_bytes;
    prob->granularity = granule;
    sl_model_close(m);
    if (!bytes) return 1;
    int rc = 0;
    for (int32_t il = 0; il < in->n_layer && !rc; il++) {
        float *fl = freq + (int64_t)il * X * F;
        layers[il] = (sl_hotcold_layer){.n_neuron = bytes[il] > 0 ? (uint32_t)(X * F) : 0,
                                        .freq = fl, .dense = false,
                                        .neuron_bytes_cpu = bytes[il] / (double)(X * F),
                                        .neuron_bytes_gpu = bytes[il] / (double)(X * F)};
        for (int32_t e = 0; bytes[il] > 0 && e < X; e++) {
            int64_t nn;
            uint64_t nt;
            const uint64_t *act;
            const double *mag;
            if (sl_ctx_neuron_stats(c, il, e, &nn, &nt, &act, &mag, err)) {
                rc = 1;
                break;
            }
            const float rate = n_prompt > 0 ? (float)nt / (float)n_prompt : 0.0f;
            for (int64_t j = 0; j < F; j++) fl[e * F + j] = rate > 1.0f ? 1.0f : rate;
        }
    }
    free(bytes);
    return rc;
}

/* The MoE index of the problem: the solver's, with the expert count it was posed with. */
static int moe_solve(const char *path, sl_model_options mo, const sl_ctx *c,
                     const sl_model_info *in, int32_t n_prompt, double cpu_gbs, double gpu_gbs,
                     sl_hotcold_plan *plan, sl_error *err)
{
    const size_t nf = (size_t)in->n_layer * (size_t)in->n_expert * (size_t)in->n_ff_exp;
    sl_hotcold_layer *layers = calloc((size_t)in->n_layer + 1, sizeof *layers);
    float *freq = calloc(nf ? nf : 1, sizeof *freq);
    sl_hotcold_problem prob = {.n_layer = (uint32_t)in->n_layer, .layers = layers,
                               .cpu_bytes_per_s = cpu_gbs * 1e9,
                               .gpu_bytes_per_s = gpu_gbs * 1e9};
    int rc = !layers || !freq ||
             moe_problem(path, mo, c, in, n_prompt, layers, freq, &prob, err) ||
             sl_hotcold_solve(&prob, plan, err) != SL_OK;
    if (!rc) plan->idx.n_expert = (uint32_t)in->n_expert;
    free(layers);
    free(freq);
    return rc;
}

int sl_bench_budget_row(const char *cmd, const char *path, int kind, sl_model_options *mo,
                        const sl_model_info *in, int32_t n_prompt, double cpu_gbs,
                        double gpu_gbs, const char *dir, char *label, size_t cap)
{
    if (kind == 1 && !in->n_expert) return 1;
    if (kind < 2) {
        sl_model_options o = *mo;
        o.plan_only = true;
        const int32_t L = in->n_layer;
        for (int32_t i = 0; i <= L + 1; i++) {
            const int32_t k = kind == 0 ? L + 1 - i : i;
            if (kind == 1 && k > L) break;
            o.placement = kind == 0 ? SL_PLACE_LAYERS : SL_PLACE_GPU;
            o.gpu_layers = kind == 0 ? k : 0;
            o.n_cpu_moe = kind == 1 ? k : 0;
            sl_model *m = NULL;
            sl_error err = {0};
            const bool fits = sl_model_open(path, &o, &m, &err) == SL_OK;
            sl_model_close(m);
            if (!fits) continue;
            *mo = o;
            mo->plan_only = false;
            snprintf(label, cap, kind == 0 ? "ngl %d" : "n-cpu-moe %d", k);
            return 0;
        }
        fprintf(stderr, "bench decode: %s: nothing fits the budget\n",
                kind == 0 ? "-ngl" : "--n-cpu-moe");
        return 1;
    }
    /* hot-cold: profile on the CPU, solve, write the index */
    sl_model_options po = *mo;
    po.placement = SL_PLACE_CPU;
    po.device = NULL;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err = {0};
    sl_cli_hotcold_model hm = {0};
    sl_hotcold_plan plan = {0};
    float *freq = NULL;
    int32_t *tok = malloc((size_t)n_prompt * sizeof *tok);
    int rc = 1;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = n_prompt + 1;
    co.neuron_stats = true;
    if (!tok || sl_model_open(path, &po, &m, &err) || sl_ctx_create(m, &co, &c, &err)) goto out;
    for (int32_t i = 0; i < n_prompt; i++) tok[i] = (int32_t)((7 * (int64_t)i + 1) % in->n_vocab);
    if (sl_ctx_eval(c, tok, (size_t)n_prompt, &err)) goto out;
    if (in->n_expert) {
        if (moe_solve(path, *mo, c, in, n_prompt, cpu_gbs, gpu_gbs, &plan, &err)) goto out;
    } else {
        if (sl_cli_hotcold_model_get(cmd, path, *mo, &hm)) goto out;
        freq = malloc((size_t)(hm.n_layer * hm.n_ff) * sizeof *freq);
        for (int32_t il = 0; freq && il < hm.n_layer; il++) {
            int64_t nn;
            uint64_t nt;
            const uint64_t *act;
            const double *mag;
            if (sl_ctx_neuron_stats(c, il, -1, &nn, &nt, &act, &mag, &err)) goto out;
            for (int64_t j = 0; j < nn; j++) freq[il * hm.n_ff + j] = (float)act[j] / (float)nt;
        }
        if (!freq || sl_cli_hotcold_solve(cmd, &hm, freq, cpu_gbs, gpu_gbs, &plan)) goto out;
    }
    char *idx = malloc(4096);
    if (!idx) goto out;
    snprintf(idx, 4096, "%s/sluice-bench-decode-%d.gpuidx", dir, (int)getpid());
    if (sl_gpuidx_write(idx, &plan.idx, NULL, &err)) {
        free(idx);
        goto out;
    }
    mo->placement = SL_PLACE_HOT_COLD;
    mo->gpu_index = idx; /* sl_bench_budget_row_done removes and frees it */
    snprintf(label, cap, "hot-cold");
    rc = 0;
out:
    if (rc && err.msg[0]) fprintf(stderr, "bench decode: hot-cold: %s\n", err.msg);
    sl_hotcold_plan_free(&plan);
    sl_cli_hotcold_model_free(&hm);
    free(freq);
    free(tok);
    sl_ctx_destroy(c);
    sl_model_close(m);
    return rc;
}

void sl_bench_budget_row_done(sl_model_options *mo)
{
    if (!mo->gpu_index) return;
    unlink(mo->gpu_index);
    free((char *)mo->gpu_index);
    mo->gpu_index = NULL;
}
