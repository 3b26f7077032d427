/* bench decode's --vram-budget rows (bench.h): the same device budget spent four ways —
 * llama.cpp's -ngl (the largest that fits), --n-cpu-moe (MoE: the smallest that fits),
 * PowerInfer's hot/cold neurons (an index solved from a CPU profile of the prompt tokens) and
 * static hot experts (MoE: every routed expert on the host, the budget the rest leaves holding
 * each layer's most routed experts of the prompt, scheduler/moe/fetch.h hot_kb).
 *
 * The hot-cold row poses the problem exactly as place solve does (place.h: the same model
 * bytes, budget, conversion of the profile's counts and solver), from a profile taken in
 * memory (sl_cli_hotcold_profile) instead of a stats file: for a MoE model each expert's
 * neurons weigh the rate at which the prompt's tokens were routed to it. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scheduler/policy/gpuidx.h"
#include "tools/bench/bench.h"
#include "tools/commands/place.h"

/* Whether budget row `kind` with k (-ngl or --n-cpu-moe) has a plan under o's budget. */
static bool budget_fits(const char *path, int kind, int32_t k, sl_model_options o)
{
    o.plan_only = true;
    o.placement = kind == 0 ? SL_PLACE_LAYERS : SL_PLACE_GPU;
    o.gpu_layers = kind == 0 ? k : 0;
    o.n_cpu_moe = kind == 1 ? k : 0;
    sl_model *m = NULL;
    sl_error err = {0};
    const bool fits = sl_model_open(path, &o, &m, &err) == SL_OK;
    sl_model_close(m);
    return fits;
}

int sl_bench_budget_row(const char *cmd, const char *path, int kind, sl_model_options *mo,
                        const sl_model_info *in, int32_t n_prompt, double cpu_gbs,
                        double gpu_gbs, const char *dir, char *label, size_t cap)
{
    if ((kind == 1 || kind == 3) && !in->n_expert) return 1;
    if (kind == 3) {
        /* --cpu-moe's plan, and what it leaves of the budget beside the context's buffers */
        sl_model_options o = *mo;
        o.placement = SL_PLACE_GPU;
        o.gpu_layers = 0;
        o.cpu_moe = true;
        o.n_cpu_moe = 0;
        sl_footprint fp;
        sl_error err = {0};
        if (sl_model_footprint(path, &o, &fp, &err)) {
            fprintf(stderr, "bench decode: static hot: %s\n", err.msg);
            return 1;
        }
        const uint64_t used = fp.device_bytes + fp.scratch_bytes;
        if (used >= mo->vram_budget) {
            fprintf(stderr, "bench decode: static hot: --cpu-moe needs %.1f MiB of the %.1f MiB "
                    "budget: no room for hot experts\n", used / 1048576.0,
                    mo->vram_budget / 1048576.0);
            return 1;
        }
        *mo = o;
        snprintf(label, cap, "static hot"); /* its hot_kb: sl_bench_budget_hot_sched */
        return 0;
    }
    if (kind < 2) {
        /* the device bytes grow with -ngl and shrink with --n-cpu-moe: with j counting from
         * the most device-heavy end, "fits" is false up to a point and true after it, so a
         * bisection finds it in log2(n_layer) plan-only opens */
        const int32_t L = in->n_layer, J = kind == 0 ? L + 1 : L;
        int32_t lo = 0, hi = J + 1; /* fits(j) is false below lo, true from hi (J + 1: none) */
        while (lo < hi) {
            const int32_t j = lo + (hi - lo) / 2;
            if (budget_fits(path, kind, kind == 0 ? L + 1 - j : j, *mo)) hi = j;
            else lo = j + 1;
        }
        if (hi > J) {
            fprintf(stderr, "bench decode: %s: nothing fits the budget\n",
                    kind == 0 ? "-ngl" : "--n-cpu-moe");
            return 1;
        }
        const int32_t k = kind == 0 ? L + 1 - hi : hi;
        mo->placement = kind == 0 ? SL_PLACE_LAYERS : SL_PLACE_GPU;
        mo->gpu_layers = kind == 0 ? k : 0;
        mo->n_cpu_moe = kind == 1 ? k : 0;
        snprintf(label, cap, kind == 0 ? "ngl %d" : "n-cpu-moe %d", k);
        return 0;
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
    float *freq = NULL, *route_p = NULL;
    int32_t *tok = malloc((size_t)n_prompt * sizeof *tok);
    int rc = 1;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = n_prompt + 1;
    co.neuron_stats = true;
    /* the plan first (cheap, and refused when nothing fits), then the profile (a CPU load) */
    if (!tok || sl_cli_hotcold_model_get(cmd, path, *mo, &hm)) goto out;
    if (sl_model_open(path, &po, &m, &err) || sl_ctx_create(m, &co, &c, &err)) goto out;
    for (int32_t i = 0; i < n_prompt; i++) tok[i] = (int32_t)((7 * (int64_t)i + 1) % in->n_vocab);
    if (sl_ctx_eval(c, tok, (size_t)n_prompt, &err)) goto out;
    const int64_t X = hm.n_expert ? hm.n_expert : 1;
    freq = calloc((size_t)(hm.n_layer * X * hm.n_ff) + 1, sizeof *freq);
    route_p = calloc((size_t)(hm.n_layer * X) + 1, sizeof *route_p);
    if (!freq || !route_p || sl_cli_hotcold_profile(c, in, &hm, freq, route_p, &err) ||
        sl_cli_hotcold_solve(cmd, &hm, freq, hm.n_expert ? route_p : NULL, cpu_gbs, gpu_gbs,
                             &plan))
        goto out;
    char *idx = malloc(4096);
    if (!idx) goto out;
    snprintf(idx, 4096, "%s/sluice-bench-decode-%d.gpuidx", dir, (int)getpid());
    if (sl_gpuidx_write(idx, &plan.idx, NULL, &err)) {
        free(idx);
        goto out;
    }
    mo->placement = SL_PLACE_HOT_COLD;
    mo->gpu_index = idx; /* sl_bench_budget_row_done removes and frees it */
    snprintf(label, cap, "%s", sl_place_mode_name(SL_PLACE_HOT_COLD));
    rc = 0;
out:
    if (rc && err.msg[0]) fprintf(stderr, "bench decode: hot-cold: %s\n", err.msg);
    sl_hotcold_plan_free(&plan);
    sl_cli_hotcold_model_free(&hm);
    free(freq);
    free(route_p);
    free(tok);
    sl_ctx_destroy(c);
    sl_model_close(m);
    return rc;
}

int sl_bench_budget_hot_sched(const char *path, const sl_model_options *mo,
                              const sl_model_info *in, int32_t n_prompt, char *buf, size_t cap)
{
    sl_footprint fp;
    sl_error err = {0};
    if (sl_model_footprint(path, mo, &fp, &err) ||
        fp.device_bytes + fp.scratch_bytes >= mo->vram_budget)
        return 1;
    const uint64_t hot = mo->vram_budget - fp.device_bytes - fp.scratch_bytes;
    const int64_t warm = (int64_t)n_prompt * in->n_expert_used;
    return snprintf(buf, cap, "mode=cpu hot_kb=%llu hot_warm=%lld",
                    (unsigned long long)(hot >> 10), (long long)(warm > 0 ? warm : 1)) >=
           (int)cap;
}

void sl_bench_budget_row_done(sl_model_options *mo)
{
    if (!mo->gpu_index) return;
    unlink(mo->gpu_index);
    free((char *)mo->gpu_index);
    mo->gpu_index = NULL;
}
