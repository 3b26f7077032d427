/* `tools/run bench <name>`: dispatch to one file per benchmark. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/json.h"

typedef struct bench {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} bench;

static const bench k_benches[] = {
    {"gguf", sl_bench_gguf, "GGUF parse time (vs gguf-py) and read GB/s by mmap, pread, O_DIRECT"},
    {"alloc", sl_bench_alloc, "BFC alloc+free ns vs device regions; churn fragmentation; compaction GB/s"},
    {"copy", sl_bench_copy, "H2D GB/s from the host pool, pageable and pinned memory; page-lock cost"},
    {"kernels", sl_bench_kernels, "CPU GEMV GB/s per type and ISA vs a streaming-read roofline"},
    {"decode", sl_bench_decode, "decode ms/token per placement vs weight bytes/token / bandwidth"},
    {"swap", sl_bench_swap, "live reload of one changed tensor vs B / read bandwidth + 1 ms"},
    {"compare", sl_bench_compare,
     "llama.cpp's llama-bench beside Sluice: pp/tg tok/s and ratios; PPL and greedy agreement"},
    {"moe", sl_bench_moe, "MoE expert offload: decode/prefill tok/s of scheduler modes cpu, post, full, auto+cache vs bounds"},
};

int sl_bench_parse_long(const char *s, const char *flag, long lo, long hi, long *out)
{
    sl_error err;
    int64_t v;
    if (sl_parse_i64(flag, s, (sl_irange){lo, hi}, &v, &err)) {
        fprintf(stderr, "sluice bench: %s\n", err.msg);
        return 1;
    }
    *out = (long)v;
    return 0;
}

int sl_bench_long_value(sl_cli_args *a, long lo, long hi, long *out)
{
    const char *v = sl_cli_value(a);
    return !v || sl_bench_parse_long(v, a->flag, lo, hi, out) ? 2 : 0;
}

/* The CPU expert path's GB/s between two sl_ctx_stats (0: it ran nothing). */
static double cpu_gbps(const sl_ctx_stats *before, const sl_ctx_stats *after)
{
    const double s = after->expert_cpu_seconds - before->expert_cpu_seconds;
    return s > 0 ? (double)(after->expert_cpu_bytes - before->expert_cpu_bytes) / 1e9 / s : 0;
}

sl_status sl_bench_decode_steps(sl_ctx *c, int32_t *tok, int32_t n, double *dt, double *gbps,
                                sl_error *err)
{
    sl_ctx_stats s[2];
    sl_ctx_stats_get(c, &s[0]);
    for (int32_t i = 0; i < n; i++) { /* s[i & 1]: before step i, s[~i & 1] after it */
        const double t0 = sl_cli_now_s();
        const sl_status st = sl_ctx_eval_greedy(c, tok, 1, tok, err);
        if (st) return st;
        dt[i] = sl_cli_now_s() - t0;
        sl_ctx_stats_get(c, &s[~i & 1]);
        gbps[i] = cpu_gbps(&s[i & 1], &s[~i & 1]);
    }
    return SL_OK;
}

sl_bench_dev_cost sl_bench_dev_cost_of(const sl_ctx_stats *s0, const sl_ctx_stats *s1,
                                       int64_t steps, int32_t n_layer, double *cpu_step_gbps)
{
    const double ls = (double)(steps > 0 ? steps : 1) * (n_layer > 0 ? n_layer : 1);
    size_t ran = 0; /* the steps whose experts ran on the CPU, first */
    for (int64_t i = 0; cpu_step_gbps && i < steps; i++)
        if (cpu_step_gbps[i] > 0) cpu_step_gbps[ran++] = cpu_step_gbps[i];
    return (sl_bench_dev_cost){
        .syncs_per_layer = (double)(s1->dev_syncs - s0->dev_syncs) / ls,
        .calls_per_layer = (double)(s1->dev_calls - s0->dev_calls) / ls,
        .pcie_expert_bytes_per_token =
            (double)(s1->copy_bytes - s0->copy_bytes) / (double)(steps > 0 ? steps : 1),
        .cpu_expert_gbps =
            ran ? sl_cli_median(cpu_step_gbps, ran) : cpu_gbps(s0, s1),
        .steps_per_layer = s1->dev_layers > s0->dev_layers
                               ? (double)(s1->dev_layer_steps - s0->dev_layer_steps) /
                                     (double)(s1->dev_layers - s0->dev_layers)
                               : -1,
        .launches_per_layer =
            s1->dev_layers > s0->dev_layers && s1->dev_layer_launches > s0->dev_layer_launches
                ? (double)(s1->dev_layer_launches - s0->dev_layer_launches) /
                      (double)(s1->dev_layers - s0->dev_layers)
                : -1,
        .graph_passes_per_step =
            (double)(s1->graph_passes - s0->graph_passes) / (double)(steps > 0 ? steps : 1),
        .hot_bytes = s1->hot_bytes};
}

void sl_bench_dev_cost_json(FILE *f, const sl_bench_dev_cost *c)
{
    fprintf(f, ",\"syncs_per_layer\":");
    sl_json_f64(f, c->syncs_per_layer);
    fprintf(f, ",\"device_calls_per_layer\":");
    sl_json_f64(f, c->calls_per_layer);
    fprintf(f, ",\"pcie_expert_bytes_per_token\":");
    sl_json_f64(f, c->pcie_expert_bytes_per_token);
    fprintf(f, ",\"cpu_expert_gbps\":");
    sl_json_f64(f, c->cpu_expert_gbps);
    fprintf(f, ",\"device_steps_per_layer\":");
    if (c->steps_per_layer < 0) fprintf(f, "null");
    else sl_json_f64(f, c->steps_per_layer);
    fprintf(f, ",\"device_launches_per_layer\":");
    if (c->launches_per_layer < 0) fprintf(f, "null");
    else sl_json_f64(f, c->launches_per_layer);
    fprintf(f, ",\"graph_passes_per_step\":");
    sl_json_f64(f, c->graph_passes_per_step);
    fprintf(f, ",\"hot_bytes\":%llu", (unsigned long long)c->hot_bytes);
}

int sl_cli_bench(int argc, char **argv)
{
    size_t n = sizeof k_benches / sizeof k_benches[0];
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: tools/run bench <name> [flags]   (tools/run bench <name> --help)\n");
        for (size_t i = 0; i < n; i++) fprintf(f, "  %-8s %s\n", k_benches[i].name, k_benches[i].help);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!strcmp(argv[1], k_benches[i].name)) return k_benches[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sluice bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
}

void sl_bench_decode_json(FILE *f, const sl_cli_steps *s, double calls_cpu, double calls_gpu,
                          bool fetches, double mcalls_cpu, double mcalls_post,
                          double mcalls_full)
{
    fprintf(f, ",\"decode_steps\":%zu,\"decode_ms_per_token_mean\":", s->n);
    sl_json_f64(f, s->mean_ms);
    fprintf(f, ",\"decode_ms_per_token_median\":");
    sl_json_f64(f, s->median_ms);
    fprintf(f, ",\"decode_ms_per_token_p90\":");
    sl_json_f64(f, s->p90_ms);
    fprintf(f, ",\"expert_calls_cpu_per_step\":");
    sl_json_f64(f, calls_cpu);
    fprintf(f, ",\"expert_calls_gpu_per_step\":");
    sl_json_f64(f, calls_gpu);
    fprintf(f, ",\"moe_calls_per_step\":");
    if (!fetches) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"cpu\":");
    sl_json_f64(f, mcalls_cpu);
    fprintf(f, ",\"post\":");
    sl_json_f64(f, mcalls_post);
    fprintf(f, ",\"full\":");
    sl_json_f64(f, mcalls_full);
    fputc('}', f);
}

/* the kinds that ran between p0 and p1, by time (descending): their indexes into idx */
static size_t step_prof_order(const sl_bench_step_prof *p, size_t idx[SL_BENCH_STEP_KINDS])
{
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->p1[i].calls > p->p0[i].calls) idx[m++] = i;
    for (size_t i = 1; i < m; i++) /* insertion sort: a few dozen kinds at most */
        for (size_t j = i; j > 0; j--) {
            const double a = p->p1[idx[j]].seconds - p->p0[idx[j]].seconds;
            const double b = p->p1[idx[j - 1]].seconds - p->p0[idx[j - 1]].seconds;
            if (a <= b) break;
            const size_t t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    return m;
}

void sl_bench_step_prof_json(FILE *f, const char *key, const sl_bench_step_prof *p)
{
    fprintf(f, ",\"%s\":", key);
    if (!p->n || p->steps <= 0) {
        fprintf(f, "null");
        return;
    }
    size_t idx[SL_BENCH_STEP_KINDS];
    const size_t m = step_prof_order(p, idx);
    const double st = (double)p->steps;
    fputc('[', f);
    for (size_t k = 0; k < m; k++) {
        const sl_step_profile *a = &p->p0[idx[k]], *b = &p->p1[idx[k]];
        const double calls = (double)(b->calls - a->calls), s = b->seconds - a->seconds;
        fprintf(f, "%s{\"op\":", k ? "," : "");
        sl_json_cstr(f, b->op);
        fprintf(f, ",\"calls_per_token\":");
        sl_json_f64(f, calls / st);
        fprintf(f, ",\"us_per_token\":");
        sl_json_f64(f, 1e6 * s / st);
        fprintf(f, ",\"us_per_call\":");
        sl_json_f64(f, 1e6 * s / calls);
        fprintf(f, ",\"gap_us_per_token\":");
        sl_json_f64(f, 1e6 * (b->gap_seconds - a->gap_seconds) / st);
        fputc('}', f);
    }
    fputc(']', f);
}

void sl_bench_step_prof_print(FILE *f, const char *what, const sl_bench_step_prof *p)
{
    if (!p->n || p->steps <= 0) return;
    size_t idx[SL_BENCH_STEP_KINDS];
    const size_t m = step_prof_order(p, idx);
    double tot = 0, gap = 0;
    for (size_t k = 0; k < m; k++) {
        tot += p->p1[idx[k]].seconds - p->p0[idx[k]].seconds;
        gap += p->p1[idx[k]].gap_seconds - p->p0[idx[k]].gap_seconds;
    }
    const double st = (double)p->steps;
    fprintf(f, "    %s steps per token (--profile): %.1f us in steps + %.1f us idle before "
            "them\n", what, 1e6 * tot / st, 1e6 * gap / st);
    fprintf(f, "    %-14s %10s %10s %10s %7s %10s\n", "step", "calls/tok", "us/tok", "us/call",
            "share", "gap us/tok");
    for (size_t k = 0; k < m; k++) {
        const sl_step_profile *a = &p->p0[idx[k]], *b = &p->p1[idx[k]];
        const double calls = (double)(b->calls - a->calls), s = b->seconds - a->seconds;
        fprintf(f, "    %-14s %10.1f %10.1f %10.2f %6.1f%% %10.1f\n", b->op, calls / st,
                1e6 * s / st, 1e6 * s / calls, tot > 0 ? 100 * s / tot : 0.0,
                1e6 * (b->gap_seconds - a->gap_seconds) / st);
    }
}
