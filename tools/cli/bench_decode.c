/* `bench decode`: decode time per token of a model next to its memory-bandwidth bound.
 *
 * Model: -m FILE, or a synthetic qwen3moe written here with tools/cli/synth.h (removed at the
 * end unless --keep): "small" (default; 4 layers, dim 512, 32 experts of FFN 256, top-4, vocab
 * 4096, Q4_K, ~33 MB: seconds to write) or "qwen3-30b-a3b" (Qwen3-30B-A3B's MoE shape: 48
 * layers, dim 2048, 128 experts of FFN 768, top-8, vocab 151936, Q4_K, ~17 GB of disk and as
 * much RAM; heads 16 x 128 because synth ties head_dim to dim / heads, where the real model
 * has 32 query heads).
 *
 * Measurement: per placement, a fresh context, a prefill of --prompt-tokens fixed ids, then -n
 * greedy one-token evals; decode ms/token is the median of those evals (tok/s their mean).
 *
 * Bound: a decode step reads every dense weight once, one row of token_embd (all of it when the
 * output matrix is tied to it) and, per MoE layer, n_expert_used of n_expert experts:
 *     bytes/token = dense + embd row + expert bytes * n_expert_used / n_expert
 * and cannot be faster than bytes/token / bandwidth. The bandwidth is a streaming read measured
 * in the same run with the same threads and binding (a multi-threaded sum over max(8 x LLC,
 * 1 GiB), median of 5, as `bench kernels` does for its roofline). On this CPU path every byte
 * comes from host memory: "cpu" computes on host weights, and "experts-cpu" on the simulated
 * device ("sim") keeps non-expert weights in sim regions that are host memory too, so the same
 * bound applies to both. A GPU bound (device bytes / HBM bandwidth + host bytes / host
 * bandwidth) needs the engine's CUDA forward pass, which does not exist yet: "gpu:
 * unavailable". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/cpu/pool.h"
#include "tools/cli/cli.h"
#include "tools/cli/bench.h"
#include "tools/cli/json.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/synth.h"

static const char *const k_cmd = "bench decode";

enum { MAX_RUNS = 5, ROOF_REPS = 5, CHUNK = 1 << 20 };

static void usage(FILE *f)
{
    fputs("usage: tools/run bench decode [-m FILE | --shape small|qwen3-30b-a3b] [-n N]\n"
          "         [--prompt-tokens P] [--dir DIR] [--keep] [--json] [model and placement\n"
          "         flags]\n"
          "\n"
          "Decode ms/token (median over N one-token evals after a P-token prefill) per\n"
          "placement, next to the bound bytes-read-per-token / bandwidth, the bandwidth being\n"
          "a streaming read measured in the same run with the same threads.\n"
          "\n"
          "  -m, --model FILE       model to run (default: a synthetic qwen3moe, see --shape)\n"
          "  --shape S              small (default; ~33 MB Q4_K: 4 layers, dim 512, 32 experts\n"
          "                         of 256, top-4) | qwen3-30b-a3b (48 layers, dim 2048, 128\n"
          "                         experts of 768, top-8, vocab 151936, Q4_K: ~17 GB of disk\n"
          "                         and RAM; writing it quantizes 17 GB on the CPU: tens of\n"
          "                         minutes on a small machine, so --keep it and reuse it\n"
          "                         with -m)\n"
          "  --dir DIR              where the synthetic model is written (default $TMPDIR or\n"
          "                         /tmp); removed at the end unless --keep\n"
          "  --keep                 keep the synthetic model file\n"
          "  -n, --n-predict N      decode steps measured (default 32)\n"
          "  --prompt-tokens P      prefill length before them (default 8)\n"
          "  --json                 one JSON object on stdout\n"
          "  -h, --help             this text\n"
          "Placements: --placement P runs that one; by default cpu, then experts-cpu on the\n"
          "simulated device (--device sim unless --device is given). gpu is reported as\n"
          "unavailable until the engine runs on CUDA. --sched applies to every placement;\n"
          "--trace writes the trace of the last placement that ran the fetch scheduler.\n",
          f);
    sl_cli_model_flags_help(f);
}

/* ---- streaming-read bandwidth --------------------------------------------------------- */

static size_t llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            const size_t b = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : 1ul);
            if (b > best) best = b;
        }
        fclose(f);
    }
    return best ? best : 32ul << 20;
}

typedef struct stream_job {
    uint64_t *p;
    size_t n; /* words */
    uint64_t part[SL_CPU_POOL_MAX_THREADS];
} stream_job;

/* First touch on the pool threads (pages land on their node), distinct values per chunk. */
static void stream_fill(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    stream_job *j = ctx;
    const size_t w = CHUNK / 8;
    for (int64_t c = b; c < e; c++) {
        const size_t lo = (size_t)c * w, hi = lo + w < j->n ? lo + w : j->n;
        for (size_t i = lo; i < hi; i++) j->p[i] = i * 0x9E3779B97F4A7C15ull;
    }
}

static void stream_sum(void *ctx, int64_t b, int64_t e, int thread)
{
    stream_job *j = ctx;
    const size_t w = CHUNK / 8;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t c = b; c < e; c++) {
        const uint64_t *p = j->p + (size_t)c * w;
        const size_t n = (size_t)c * w + w <= j->n ? w : j->n - (size_t)c * w;
        for (size_t i = 0; i + 4 <= n; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
        }
    }
    j->part[thread] += s0 + s1 + s2 + s3; /* each thread writes only its own slot */
}

/* GB/s of a multi-threaded streaming read with the model's threads and binding; 0 on error
 * (printed). *threads_out: threads used, *mib_out: buffer size. */
double sl_bench_stream_gbps(const sl_model_options *mo, int *threads_out, size_t *mib_out)
{
    int nt = mo->n_threads;
    if (nt <= 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        nt = n > 0 ? (int)n : 1;
    }
    if (nt > SL_CPU_POOL_MAX_THREADS) nt = SL_CPU_POOL_MAX_THREADS;
    sl_cpu_pool_options po = {.n_threads = nt, .numa_node = mo->numa_node, .cpus = mo->cpus,
                              .topo = NULL};
    sl_cpu_pool *pool = NULL;
    sl_error err = {0};
    if (sl_cpu_pool_create(&po, &pool, &err)) {
        fprintf(stderr, "sluice bench: streaming read: thread pool: %s\n", err.msg);
        return 0;
    }
    size_t bytes = 8 * llc_bytes();
    if (bytes < (1ul << 30)) bytes = 1ul << 30;
    stream_job *j = calloc(1, sizeof *j);
    uint64_t *p = malloc(bytes);
    double gbps = 0;
    if (!j || !p) {
        fprintf(stderr, "sluice bench: streaming read: out of memory (%zu MiB)\n",
                bytes >> 20);
        goto out;
    }
    j->p = p;
    j->n = bytes / 8;
    const int64_t chunks = (int64_t)((bytes + CHUNK - 1) / CHUNK);
    if (sl_cpu_pool_parallel_for(pool, chunks, 1, stream_fill, j, &err)) goto fail;
    double t[ROOF_REPS];
    for (int r = 0; r < ROOF_REPS; r++) {
        const double t0 = sl_cli_now_s();
        if (sl_cpu_pool_parallel_for(pool, chunks, 1, stream_sum, j, &err)) goto fail;
        t[r] = sl_cli_now_s() - t0;
    }
    uint64_t sink = 0;
    for (int i = 0; i < nt; i++) sink += j->part[i];
    const double med = sl_cli_median(t, ROOF_REPS);
    gbps = med > 0 ? (double)bytes / med / 1e9 : 0;
    if (sink == 42) fputc(' ', stderr); /* keeps the sums observable */
    *threads_out = nt;
    *mib_out = bytes >> 20;
    goto out;
fail:
    fprintf(stderr, "sluice bench: streaming read: %s\n", err.msg);
out:
    free(p);
    free(j);
    sl_cpu_pool_destroy(pool);
    return gbps;
}

/* ---- weight bytes per token ------------------------------------------------------------ */

typedef struct weight_split {
    uint64_t dense, embd_row, experts, total;
    bool tied;
} weight_split;

static int weight_bytes(const char *path, weight_split *w)
{
    memset(w, 0, sizeof *w);
    sl_gguf *g = NULL;
    sl_error err = {0};
    sl_gguf_options go = {.no_shards = false, .notice = NULL, .notice_user = NULL};
    if (sl_gguf_open(path, &go, &g, &err)) {
        fprintf(stderr, "sluice bench decode: %s\n", err.msg);
        return 1;
    }
    const sl_gguf_tensor *embd = NULL;
    bool has_output = false;
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        w->total += t->nbytes;
        if (!strcmp(t->name, "token_embd.weight")) embd = t;
        else if (strstr(t->name, "_exps.")) w->experts += t->nbytes;
        else w->dense += t->nbytes;
        has_output |= !strcmp(t->name, "output.weight");
    }
    if (embd) {
        w->tied = !has_output;
        w->embd_row = w->tied || embd->ne[1] <= 0 ? embd->nbytes
                                                  : embd->nbytes / (uint64_t)embd->ne[1];
    }
    sl_gguf_close(g);
    return 0;
}

/* ---- one placement -------------------------------------------------------------------- */

typedef struct run_result {
    const char *placement, *device;
    bool ok;
    char why[SL_ERROR_MSG_BYTES];
    double load_s, prefill_tps, decode_ms, decode_tps;
    uint64_t gpu_bytes, host_bytes;
    bool traced;
} run_result;

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Returns 0 (r->ok says whether it ran; r->why if not) or 1 on an out-of-memory. */
static int run_placement(const char *path, sl_model_options mo, sl_cli_model_flags *mf,
                         int32_t n_prompt, int32_t n_gen, run_result *r)
{
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err = {0};
    double *dt = malloc((size_t)n_gen * sizeof *dt);
    int32_t *ptok = malloc((size_t)n_prompt * sizeof *ptok);
    if (!dt || !ptok) {
        free(dt);
        free(ptok);
        return 1;
    }
    double t0 = sl_cli_now_s();
    if (sl_model_open(path, &mo, &m, &err)) goto fail;
    r->load_s = sl_cli_now_s() - t0;
    sl_model_info info;
    sl_model_info_get(m, &info);
    r->gpu_bytes = info.gpu_bytes;
    r->host_bytes = info.host_bytes;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = n_prompt + n_gen + 1;
    sl_cli_ctx_sched(mf, &co);
    if (sl_ctx_create(m, &co, &c, &err)) goto fail;
    for (int32_t i = 0; i < n_prompt; i++)
        ptok[i] = (int32_t)((7 * (int64_t)i + 1) % info.n_vocab);
    t0 = sl_cli_now_s();
    if (sl_ctx_eval(c, ptok, (size_t)n_prompt, &err)) goto fail;
    const double pf = sl_cli_now_s() - t0;
    r->prefill_tps = pf > 0 ? n_prompt / pf : 0;
    double sum = 0;
    for (int32_t i = 0; i < n_gen; i++) {
        int32_t tok = argmax(sl_ctx_logits(c, -1), info.n_vocab);
        t0 = sl_cli_now_s();
        if (sl_ctx_eval(c, &tok, 1, &err)) goto fail;
        dt[i] = sl_cli_now_s() - t0;
        sum += dt[i];
    }
    r->decode_tps = sum > 0 ? n_gen / sum : 0;
    r->decode_ms = 1e3 * sl_cli_median(dt, (size_t)n_gen);
    r->ok = true;
    if (mf->trace) {
        sl_ctx_stats st;
        sl_ctx_stats_get(c, &st);
        if (st.moe_scheduler && !strcmp(st.moe_scheduler, "fetch")) {
            if (sl_ctx_trace_write(c, mf->trace, &err)) goto fail;
            r->traced = true;
        }
    }
    goto out;
fail:
    snprintf(r->why, sizeof r->why, "%s", err.msg);
out:
    sl_ctx_destroy(c);
    sl_model_close(m);
    free(dt);
    free(ptok);
    return 0;
}

/* ---- main ----------------------------------------------------------------------------- */

static void synth_shape(bool big, sl_synth_params *p)
{
    sl_synth_defaults(SL_SYNTH_QWEN3MOE, p);
    p->type = SL_GGML_Q4_K;
    p->seed = 1;
    if (big) {
        p->n_layer = 48, p->n_embd = 2048, p->n_ff = 768, p->n_expert = 128;
        p->n_expert_used = 8, p->n_head = 16, p->n_head_kv = 4, p->n_vocab = 151936;
        p->n_ctx = 4096;
    } else {
        p->n_layer = 4, p->n_embd = 512, p->n_ff = 256, p->n_expert = 32;
        p->n_expert_used = 4, p->n_head = 8, p->n_head_kv = 4, p->n_vocab = 4096;
        p->n_ctx = 512;
    }
}

int sl_bench_decode(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    const char *shape = NULL, *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR")
                                                                            : "/tmp";
    bool json = false, keep = false;
    int64_t n_gen = 32, n_prompt = 8;
    while (sl_cli_args_next(&a)) {
        const char *v;
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", "--keep")) {
            if (a.inline_val) return sl_cli_usage_error(k_cmd, "%s takes no value", a.flag);
            if (!strcmp(a.flag, "--json")) json = true;
            else keep = true;
        } else if (sl_cli_is(&a, "--shape", NULL)) {
            if (!(shape = sl_cli_value(&a))) return 2;
            if (strcmp(shape, "small") && strcmp(shape, "qwen3-30b-a3b"))
                return sl_cli_usage_error(k_cmd, "--shape '%s': unknown (small, qwen3-30b-a3b)",
                                          shape);
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(dir = sl_cli_value(&a))) return 2;
            if (!*dir) return sl_cli_usage_error(k_cmd, "--dir: empty folder name");
        } else if (sl_cli_is(&a, "-n", "--n-predict")) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 100000, &n_gen))
                return 2;
        } else if (sl_cli_is(&a, "--prompt-tokens", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, 100000, &n_prompt))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (mf.path && shape)
        return sl_cli_usage_error(k_cmd, "-m and --shape exclude each other");
    if (mf.opt.numa_node >= 0 && mf.opt.cpus)
        return sl_cli_usage_error(k_cmd, "--numa-node and --cpus exclude each other");

    char synth_path[4096] = "";
    const char *path = mf.path;
    if (!path) {
        const bool big = shape && !strcmp(shape, "qwen3-30b-a3b");
        sl_synth_params sp;
        synth_shape(big, &sp);
        if ((size_t)snprintf(synth_path, sizeof synth_path, "%s/sluice-bench-decode-%s-%d.gguf",
                             dir, big ? "qwen3-30b-a3b" : "small", (int)getpid()) >=
            sizeof synth_path)
            return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
        if (big)
            fprintf(stderr, "bench decode: warning: --shape qwen3-30b-a3b writes ~17 GB to %s and "
                            "loads as much into RAM; writing takes long (--keep, then -m FILE to reuse)\n", dir);
        if (!json) fprintf(stderr, "bench decode: writing the %s synthetic model to %s ...\n",
                           big ? "qwen3-30b-a3b" : "small", synth_path);
        sl_error err = {0};
        const double t0 = sl_cli_now_s();
        if (sl_synth_write(&sp, synth_path, NULL, &err)) {
            fprintf(stderr, "sluice bench decode: %s: %s\n", synth_path, err.msg);
            return 1;
        }
        if (!json) fprintf(stderr, "bench decode: written in %.1f s\n", sl_cli_now_s() - t0);
        path = synth_path;
    }

    int rc = 1;
    weight_split ws;
    run_result runs[MAX_RUNS];
    size_t n_runs = 0;
    memset(runs, 0, sizeof runs);
    if (weight_bytes(path, &ws)) goto done;
    /* the model's expert ratio, from the engine's view of it */
    sl_model_info info = {0};
    {
        sl_model_options probe = mf.opt;
        probe.placement = SL_PLACE_CPU;
        probe.device = mf.opt.device;
        sl_model *m = NULL;
        sl_error err = {0};
        if (sl_model_open(path, &probe, &m, &err)) {
            fprintf(stderr, "sluice bench decode: %s\n", err.msg);
            goto done;
        }
        sl_model_info_get(m, &info);
        sl_model_close(m);
    }
    const double expert_frac = info.n_expert > 0 ? (double)info.n_expert_used / info.n_expert : 1;
    const double bytes_tok = (double)ws.dense + (double)ws.embd_row + expert_frac * ws.experts;
    int threads = 0;
    size_t mib = 0;
    const double gbps = sl_bench_stream_gbps(&mf.opt, &threads, &mib);
    if (gbps <= 0) goto done;
    const double bound_ms = bytes_tok / (gbps * 1e9) * 1e3;

    sl_placement list[2] = {SL_PLACE_CPU, SL_PLACE_EXPERTS_CPU};
    size_t n_list = 2;
    if (mf.placement_given) {
        list[0] = mf.opt.placement;
        n_list = 1;
    }
    for (size_t k = 0; k < n_list; k++) {
        sl_model_options mo = mf.opt;
        mo.placement = list[k];
        if (list[k] != SL_PLACE_CPU && !mo.device) mo.device = "sim";
        run_result *r = &runs[n_runs++];
        r->placement = sl_cli_placement_name(list[k]);
        r->device = list[k] == SL_PLACE_CPU ? (mo.device ? mo.device : "none") : mo.device;
        if (run_placement(path, mo, &mf, (int32_t)n_prompt, (int32_t)n_gen, r)) {
            fprintf(stderr, "sluice bench decode: out of memory\n");
            goto done;
        }
    }
    const char *gpu_why = "the engine has no CUDA forward pass yet (placements other than cpu "
                          "run on the CPU-simulated 'sim' device, whose numbers are CPU "
                          "numbers)";

    if (json) {
        printf("{\"model\":");
        sl_json_cstr(stdout, path);
        printf(",\"shape\":");
        sl_json_cstr(stdout, mf.path ? NULL : shape ? shape : "small");
        printf(",\"arch\":");
        sl_json_cstr(stdout, info.arch);
        printf(",\"threads\":%d,\"n_prompt\":%" PRId64 ",\"n_decode\":%" PRId64
               ",\"weight_bytes\":%" PRIu64 ",\"bytes_per_token\":%.0f,\"roofline_gbps\":",
               threads, n_prompt, n_gen, ws.total, bytes_tok);
        sl_json_f64(stdout, gbps);
        printf(",\"bound_ms_per_token\":");
        sl_json_f64(stdout, bound_ms);
        printf(",\"runs\":[");
        for (size_t i = 0; i < n_runs; i++) {
            const run_result *r = &runs[i];
            printf("%s{\"placement\":\"%s\",\"device\":\"%s\",\"ok\":%s", i ? "," : "",
                   r->placement, r->device, r->ok ? "true" : "false");
            if (r->ok) {
                printf(",\"load_s\":");
                sl_json_f64(stdout, r->load_s);
                printf(",\"prefill_tps\":");
                sl_json_f64(stdout, r->prefill_tps);
                printf(",\"decode_ms_per_token\":");
                sl_json_f64(stdout, r->decode_ms);
                printf(",\"decode_tps\":");
                sl_json_f64(stdout, r->decode_tps);
                printf(",\"fraction_of_bound\":");
                sl_json_f64(stdout, r->decode_ms > 0 ? bound_ms / r->decode_ms : 0);
                printf(",\"gpu_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64, r->gpu_bytes,
                       r->host_bytes);
            } else {
                printf(",\"error\":");
                sl_json_cstr(stdout, r->why);
            }
            putchar('}');
        }
        printf("],\"gpu\":{\"available\":false,\"reason\":");
        sl_json_cstr(stdout, gpu_why);
        printf("}}\n");
    } else {
        printf("bench decode: %s (%s, %" PRId32 " layers", path, info.arch, info.n_layer);
        if (info.n_expert) printf(", %" PRId32 " experts top-%" PRId32, info.n_expert,
                                  info.n_expert_used);
        printf("), %d threads, prefill %" PRId64 ", decode %" PRId64 " tokens\n", threads,
               n_prompt, n_gen);
        printf("weights: %.1f MB; read per token %.2f MB = dense %.2f + embd row %.3f%s + "
               "experts %.2f x %.4f\n",
               ws.total / 1e6, bytes_tok / 1e6, ws.dense / 1e6, ws.embd_row / 1e6,
               ws.tied ? " (tied output: all of it)" : "", ws.experts / 1e6, expert_frac);
        printf("bandwidth: streaming read %.2f GB/s (%zu MiB, %d threads) -> bound %.3f "
               "ms/token (%.1f tok/s)\n\n",
               gbps, mib, threads, bound_ms, bound_ms > 0 ? 1e3 / bound_ms : 0.0);
        printf("%-12s %-6s %8s %12s %14s %10s %12s %9s\n", "placement", "device", "load s",
               "prefill t/s", "decode ms/tok", "decode t/s", "bound ms/tok", "of bound");
        for (size_t i = 0; i < n_runs; i++) {
            const run_result *r = &runs[i];
            if (!r->ok) {
                printf("%-12s %-6s unavailable: %s\n", r->placement, r->device, r->why);
                continue;
            }
            printf("%-12s %-6s %8.2f %12.1f %14.3f %10.1f %12.3f %8.0f%%\n", r->placement,
                   r->device, r->load_s, r->prefill_tps, r->decode_ms, r->decode_tps, bound_ms,
                   r->decode_ms > 0 ? 100 * bound_ms / r->decode_ms : 0.0);
        }
        printf("%-12s unavailable: %s\n", "gpu", gpu_why);
    }
    rc = 0;
    bool traced = false;
    for (size_t i = 0; i < n_runs; i++) {
        if (!runs[i].ok && mf.placement_given) rc = 1; /* the one asked for did not run */
        traced |= runs[i].traced;
    }
    if (mf.trace && !traced) {
        fprintf(stderr, "sluice bench decode: --trace %s: no run used the fetch scheduler (needs "
                        "--sched mode=post|full|auto and a placement on the sim device)\n",
                mf.trace);
        rc = 1;
    }
done:
    if (synth_path[0] && !keep) unlink(synth_path);
    else if (synth_path[0] && !json) fprintf(stderr, "bench decode: kept %s\n", synth_path);
    return rc;
}
