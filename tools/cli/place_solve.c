/* sluice place solve: PowerInfer's offline step — from a model, its neuron statistics (`place
 * profile`) and a VRAM budget, the hot neurons of each dense FFN (scheduler/hotcold_solve.h),
 * written as a .gpuidx (scheduler/gpuidx.h) that `--placement hot-cold --gpu-index` (or
 * MODEL.generated.gpuidx beside the model) uses.
 *
 * The budget for hot neurons is what the hot-cold plan leaves: --vram-budget less the weights
 * that placement puts on the device anyway (everything but the FFNs and token_embd) and the
 * KV cache / buffer reserve (scheduler/placement.h). Per-token bytes: a neuron costs its gate
 * row + up row + down column on the side it lives on; the FFNs of these models are dense
 * (SwiGLU/GeGLU: every neuron is read every token), so the solver balances bytes, using the
 * activation counts to rank neurons of equal cost (hot = most often active). Bandwidths: the
 * host's measured streaming read; the device's measured copy roofline on cuda, the host's on
 * sim; --cpu-gbs / --gpu-gbs override. Neurons are chosen in whole blocks of down's type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cuda/bench.h"
#include "runtime/device/device.h"
#include "scheduler/hotcold_solve.h"
#include "scheduler/placement.h"
#include "tools/cli/bench.h"
#include "tools/cli/fileio.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/place.h"

static void usage(FILE *f)
{
    fputs("usage: sluice place solve -m MODEL --stats STATS.gguf --vram-budget SIZE -o OUT\n"
          "                          [--cpu-gbs X] [--gpu-gbs X] [--gguf-magic]\n"
          "  Chooses each dense FFN's hot neurons under the budget to minimise the per-token\n"
          "  bound max(CPU bytes / CPU BW, GPU bytes / HBM BW) and writes PowerInfer's .gpuidx\n"
          "  (use it with --placement hot-cold --gpu-index OUT, or name it\n"
          "  MODEL.generated.gpuidx). --gguf-magic writes \"GGUF\" instead of PowerInfer's\n"
          "  \"PWRI\" magic.\n",
          f);
    sl_cli_model_flags_help(f);
}

/* Per-layer activation frequency from the stats file, checked against the model. */
static int read_stats(const char *cmd, const char *path, int32_t n_layer, const int64_t *n_ff,
                      float **freq_out)
{
    sl_gguf *g = NULL;
    sl_error err = {0};
    sl_gguf_options go = {0};
    float *freq = NULL;
    int rc = 1;
    if (sl_gguf_open(path, &go, &g, &err)) goto fail;
    uint64_t tokens = 0;
    if (sl_gguf_get_u64(g, "sluice.neuron_stats.tokens", &tokens, &err)) goto fail;
    if (!tokens) {
        snprintf(err.msg, sizeof err.msg, "sluice.neuron_stats.tokens is 0");
        goto fail;
    }
    int64_t total = 0;
    for (int32_t il = 0; il < n_layer; il++) total += n_ff[il];
    freq = malloc((size_t)total * sizeof *freq);
    if (!freq) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    int64_t at = 0;
    for (int32_t il = 0; il < n_layer; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_act_count", il);
        const sl_gguf_tensor *t = sl_gguf_tensor_find(g, name);
        if (!t || t->type != SL_GGML_I32 || t->n_dims != 1 || t->ne[0] != n_ff[il]) {
            snprintf(err.msg, sizeof err.msg, "tensor %s: %s (the model's layer %d has %lld "
                     "FFN neurons: I32 [%lld] expected)", name, t ? "wrong type or shape"
                     : "missing", il, (long long)n_ff[il], (long long)n_ff[il]);
            goto fail;
        }
        const int32_t *cnt = sl_gguf_tensor_view(g, t);
        if (!cnt) {
            snprintf(err.msg, sizeof err.msg, "tensor %s: no mapping", name);
            goto fail;
        }
        for (int64_t j = 0; j < n_ff[il]; j++) {
            if (cnt[j] < 0 || (uint64_t)cnt[j] > tokens) {
                snprintf(err.msg, sizeof err.msg, "tensor %s: neuron %lld: count %d outside "
                         "[0, %llu tokens]", name, (long long)j, cnt[j],
                         (unsigned long long)tokens);
                goto fail;
            }
            freq[at + j] = (float)((double)cnt[j] / (double)tokens);
        }
        at += n_ff[il];
    }
    *freq_out = freq;
    freq = NULL;
    rc = 0;
fail:
    if (rc) fprintf(stderr, "sluice %s: --stats %s: %s\n", cmd, path, err.msg);
    free(freq);
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
    if (!sl_device_open(&o, &dev, &err)) cuda = sl_device_kind_get(dev) == SL_DEVICE_CUDA;
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

int sl_cli_hotcold_model_get(const char *cmd, const char *path, sl_model_options mo,
                             sl_cli_hotcold_model *hm)
{
    memset(hm, 0, sizeof *hm);
    /* what the hot-cold plan puts on the device besides the FFNs, and the budget left */
    mo.plan_only = true;
    mo.placement = SL_PLACE_GPU;
    mo.override_tensor = "^blk\\.[0-9]+\\.ffn_(gate|up|down)\\.weight$=CPU";
    mo.gpu_index = NULL;
    sl_model *m = NULL;
    sl_error err = {0};
    if (sl_model_open(path, &mo, &m, &err)) {
        if (strstr(err.msg, path)) fprintf(stderr, "sluice %s: %s\n", cmd, err.msg);
        else fprintf(stderr, "sluice %s: %s: %s\n", cmd, path, err.msg);
        return 1;
    }
    int rc = 1;
    sl_model_info in;
    sl_model_info_get(m, &in);
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    if (in.n_expert) {
        fprintf(stderr, "sluice %s: %s: hot/cold neurons split dense FFNs; this model has "
                        "routed experts\n", cmd, path);
        goto done;
    }
    hm->bytes = calloc((size_t)in.n_layer + 1, sizeof *hm->bytes);
    if (!hm->bytes || sl_model_plan_get(m, &p, &t, &n, &err)) goto done;
    hm->n_layer = in.n_layer;
    hm->n_ff = in.n_ff;
    hm->granule = 1;
    for (size_t i = 0; i < n; i++) {
        if (t[i].group != SL_PG_FFN || t[i].layer < 0 || t[i].layer >= in.n_layer) continue;
        hm->bytes[t[i].layer] += (double)t[i].bytes;
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(t[i].type_name);
        if (strstr(t[i].name, "ffn_down") && ti && ti->block_size > hm->granule)
            hm->granule = ti->block_size;
    }
    hm->hot_budget = p->budget > p->device_bytes ? p->budget - p->device_bytes : 0;
    hm->base_device_bytes = (double)p->device_bytes;
    rc = 0;
done:
    if (rc) sl_cli_hotcold_model_free(hm);
    sl_model_close(m);
    return rc;
}

int sl_cli_hotcold_solve(const char *cmd, const sl_cli_hotcold_model *hm, const float *freq,
                         double cpu_gbs, double gpu_gbs, sl_hotcold_plan *plan)
{
    sl_hotcold_layer *L = calloc((size_t)hm->n_layer + 1, sizeof *L);
    if (!L) return 1;
    for (int32_t il = 0; il < hm->n_layer; il++)
        L[il] = (sl_hotcold_layer){.n_neuron = (uint32_t)hm->n_ff, .freq = freq + il * hm->n_ff,
                                   .dense = true,
                                   .neuron_bytes_cpu = hm->bytes[il] / (double)hm->n_ff,
                                   .neuron_bytes_gpu = hm->bytes[il] / (double)hm->n_ff};
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
    float *freq = NULL;
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
    int64_t *n_ff = calloc((size_t)hm.n_layer + 1, sizeof *n_ff);
    if (!n_ff) goto done;
    for (int32_t il = 0; il < hm.n_layer; il++) n_ff[il] = hm.n_ff;
    const int bad = read_stats(cmd, stats, hm.n_layer, n_ff, &freq);
    free(n_ff);
    if (bad) goto done;
    int threads = 0;
    size_t mib = 0;
    if (!cpu_gbs) cpu_gbs = sl_bench_stream_gbps(&mf.opt, &threads, &mib);
    if (!gpu_gbs) gpu_gbs = sl_cli_device_gbps(mf.opt.device, cpu_gbs);
    if (cpu_gbs <= 0 || gpu_gbs <= 0) {
        fprintf(stderr, "sluice %s: could not measure the bandwidths (--cpu-gbs, --gpu-gbs)\n",
                cmd);
        goto done;
    }
    if (sl_cli_hotcold_solve(cmd, &hm, freq, cpu_gbs, gpu_gbs, &plan)) goto done;
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
    printf("solve: %llu of %llu neurons hot (%.1f%%) in %.2f MiB of %.2f MiB for hot neurons; "
           "bound %.3f ms/token (cpu %.3f, gpu %.3f; within %.2f%% of optimal) at %.1f / %.1f "
           "GB/s -> %s\n", (unsigned long long)hot, (unsigned long long)all,
           all ? 100.0 * (double)hot / (double)all : 0.0, plan.cost.vram_bytes / 1048576.0,
           hm.hot_budget / 1048576.0, plan.cost.bound_s * 1e3, plan.cost.cpu_s * 1e3,
           plan.cost.gpu_s * 1e3,
           plan.lower_bound_s > 0 ? 100.0 * (plan.cost.bound_s / plan.lower_bound_s - 1) : 0.0,
           cpu_gbs, gpu_gbs, out);
    rc = sl_cli_stdout_check(cmd);
done:
    sl_cli_out_discard(&o);
    sl_cli_io_free(&io);
    sl_hotcold_plan_free(&plan);
    sl_cli_hotcold_model_free(&hm);
    free(freq);
    return rc;
}
