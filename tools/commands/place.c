/* sluice place: the placement policy from the command line (scheduler/policy/placement.h).
 *
 *   place show -m M [model and placement flags] [--json] [--summary]
 *   place profile -m M -f TEXT -o STATS.gguf      (place_profile.c)
 *   place solve -m M --stats STATS.gguf --vram-budget SIZE -o M.gpuidx   (place_solve.c)
 *
 * `show` resolves the plan exactly as a model command with the same flags would (the model is
 * opened with plan_only: header, binding and placement, no weight read, no device memory
 * taken) and prints it: the summary (how it was decided, bytes per side, the budget) and one
 * line per tensor (name, type, bytes, CPU or CUDA0, the rule that decided it). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "scheduler/policy/placement.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/model_flags.h"
#include "tools/commands/place.h"

sl_cli_token_bytes sl_cli_plan_token_bytes(const sl_model *m, sl_placement *mode)
{
    sl_cli_token_bytes b = {0, 0};
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    if (mode) *mode = SL_PLACE_CPU;
    if (sl_model_plan_get(m, &p, &t, &n, NULL)) return b;
    if (mode) *mode = p->mode;
    sl_model_info in;
    sl_model_info_get(m, &in);
    const double frac = in.n_expert > 0 ? (double)in.n_expert_used / in.n_expert : 1.0;
    for (size_t i = 0; i < n; i++) {
        const double per = t[i].group == SL_PG_EXPERTS ? frac * (double)t[i].bytes
                           : t[i].group == SL_PG_EMBD && !t[i].tied && in.n_vocab > 0
                               ? (double)t[i].bytes / in.n_vocab
                               : (double)t[i].bytes;
        const double hot = p->split[i] ? per * p->hot_frac[i] : 0;
        if (p->on_device[i]) b.dev += per;
        else b.dev += hot, b.host += per - hot;
    }
    return b;
}

void sl_cli_plan_describe(const sl_model *m, char *buf, size_t cap)
{
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    if (!cap) return;
    if (!m || sl_model_plan_get(m, &p, &t, &n, NULL)) {
        snprintf(buf, cap, "unknown");
        return;
    }
    const char *name = sl_cli_placement_name(p->mode);
    if (p->mode == SL_PLACE_LAYERS)
        snprintf(buf, cap, "%s ngl %" PRId32, name, p->n_gpu_layers);
    else if (p->mode != SL_PLACE_CPU && p->n_cpu_moe > 0)
        snprintf(buf, cap, "%s n-cpu-moe %" PRId32, name, p->n_cpu_moe);
    else
        snprintf(buf, cap, "%s", name);
}

static void usage(FILE *f)
{
    fputs("usage: sluice place show|profile|solve ... (sluice place SUBCOMMAND --help)\n"
          "usage: sluice place show -m MODEL [model and placement flags] [--json] [--summary]\n"
          "  Prints where every tensor of MODEL lives under the given flags (-ngl, -ot,\n"
          "  --cpu-moe, --n-cpu-moe, --vram-budget, --placement, --device): how the plan was\n"
          "  decided, bytes per side, then one line per tensor with the rule that decided it.\n"
          "  No weight is read.\n"
          "  --json      one JSON object (with a \"tensors\" array unless --summary)\n"
          "  --summary   the summary only\n"
          "  --no-bound  skip the bandwidth measurement behind the per-token bound\n",
          f);
    sl_cli_model_flags_help(f);
}

static int show(int argc, char **argv)
{
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    bool json = false, summary = false, bound = true;
    sl_cli_args a;
    sl_cli_args_init(&a, "place show", argc, argv);
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", NULL)) {
            json = true;
        } else if (sl_cli_is(&a, "--summary", NULL)) {
            summary = true;
        } else if (sl_cli_is(&a, "--no-bound", NULL)) {
            bound = false;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error("place show", "-m MODEL is required");
    mf.opt.plan_only = true;
    sl_model *m = NULL;
    int rc = sl_cli_model_open(&mf, "place show", &m);
    if (rc) return rc;
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    sl_error err = {0};
    if (sl_model_plan_get(m, &p, &t, &n, &err)) {
        fprintf(stderr, "sluice place show: %s\n", err.msg);
        sl_model_close(m);
        return 1;
    }
    /* per token: the bytes each side reads and the bound they set — bench decode's rule, the
     * sum of the two sides' times (a layer split runs them one after the other; nothing
     * crosses PCIe per token under a static plan) */
    const sl_cli_token_bytes tb = sl_cli_plan_token_bytes(m, NULL);
    int threads = 0;
    size_t mib = 0;
    const double hgbps = bound ? sl_bench_stream_gbps(&mf.opt, &threads, &mib) : 0;
    const double dgbps = hgbps > 0 ? sl_cli_device_gbps(mf.opt.device, hgbps) : 0;
    const double hms = hgbps > 0 ? tb.host / (hgbps * 1e6) : 0;
    const double dms = dgbps > 0 ? tb.dev / (dgbps * 1e6) : 0;
    if (json) {
        printf("{\"plan\": ");
        sl_place_plan_write(stdout, p, t, n,
                            SL_PLACE_WRITE_SUMMARY | (summary ? 0 : SL_PLACE_WRITE_TENSORS), true);
        printf(", \"device_bytes_per_token\": %.0f, \"host_bytes_per_token\": %.0f, "
               "\"host_gbps\": %g, \"device_gbps\": %g, \"bound_ms_per_token\": %g}\n", tb.dev,
               tb.host, hgbps, dgbps, hms + dms);
    } else {
        sl_place_plan_write(stdout, p, t, n, SL_PLACE_WRITE_SUMMARY, false);
        printf("  per token:      %10.2f MB device + %.2f MB host", tb.dev / 1e6, tb.host / 1e6);
        if (hgbps > 0)
            printf("; bound %.3f ms (host %.3f ms at %.1f GB/s, device %.3f ms at %.1f GB/s)",
                   hms + dms, hms, hgbps, dms, dgbps);
        printf("\n");
        if (!summary) sl_place_plan_write(stdout, p, t, n, SL_PLACE_WRITE_TENSORS, false);
    }
    sl_model_close(m);
    if (fflush(stdout) || ferror(stdout)) {
        perror("sluice place show: standard output");
        return 1;
    }
    return 0;
}

int sl_cli_place(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "show")) return show(argc - 1, argv + 1);
    if (!strcmp(argv[1], "profile")) return sl_cli_place_profile(argc - 1, argv + 1);
    if (!strcmp(argv[1], "solve")) return sl_cli_place_solve(argc - 1, argv + 1);
    fprintf(stderr, "sluice place: unknown subcommand '%s' (show, profile, solve)\n", argv[1]);
    return 2;
}
