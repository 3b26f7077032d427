/* `bench moe`: MoE expert offload — decode and prefill tok/s of the scheduler modes (scheduler/
 * fetch.h) with the routed experts in host memory, each next to its bandwidth bound.
 *
 * Model: -m FILE (a MoE GGUF), or a synthetic qwen3moe written here (tools/synth/synth.h; removed
 * at the end unless --keep) with Zipf-skewed routing (--router-skew): "small" (default; 4
 * layers, dim 512, 32 experts of FFN 256, top-4, vocab 4096, Q4_K, ~33 MB) or "qwen3-30b-a3b"
 * (48 layers, 128 experts top-8, hidden 2048, expert FFN 768, vocab 151936, Q4_K: ~17 GB).
 *
 * Setup: placement experts-cpu (non-expert weights on the device, routed experts in host
 * memory); VRAM budget = non-expert weights + 25% of the expert bytes, the 25% going to the
 * scheduler's expert cache (sched cache_kb) in the auto+cache row. Rows (sched strings):
 *   cpu         mode=cpu                       experts on the CPU (baseline), each device
 *                                              layer's host part a host function on the stream
 *   cpu sync    mode=cpu order=sync            the same, after a blocking sync per layer on
 *                                              the calling thread (fetch.h sl_fetch_order;
 *                                              decode only: a prefill's order costs the same)
 *   post        mode=post                      gate/up/act on the CPU, down copied + on device
 *   full        mode=full                      whole experts copied, computed on the device
 *   auto+cache  mode=auto cache_kb=<25%> cpu_gbs/pcie_gbs/dev_gbs=<measured>, dram_gbs=<the
 *               streaming read> (DMA and the CPU share it)
 *   static hot  mode=cpu hot_kb=<25%> hot_warm=<the prompt's assignments>: each layer's most
 *               routed experts in the prompt stay resident, computed on the device beside
 *               the CPU's misses in stream order (runtime/engine/hot.h: the CPU scheduler,
 *               no wait per layer); nothing crosses PCIe in decode
 *   cpu+uploads mode=cpu cache_kb=<25%> policy=lfu uploads=2: a run-time cache of at most two
 *               uploads per layer and step, by decayed frequency (the engine's, in stream
 *               order: runtime/engine/hot.h)
 *   cpu+defer   mode=cpu defer=<max(1, top-k / 4)>: Expert Deferral (runtime/engine/defer.h;
 *               opt-in, other numerics): each token's lowest-weighted experts join the next
 *               layer, computed while the device runs it (decode only: what it hides is a
 *               token's device work between two layers' host parts)
 *   cpu+stream  mode=cpu with the default prefill_stream: the prefill's host experts copied
 *               through the device (runtime/engine/stream.h); every row above has
 *               prefill_stream=0, so that its prefill is its scheduler's
 * Each row: one context; a --prompt of 8 tokens, then --tokens one-token decode steps (default
 * 32, timed; tok/s = steps / their total time, ms/token their mean, median and p90 beside it;
 * counters are deltas over those steps), then a fresh context evaluating --prefill tokens in
 * one batch (tok/s). Each row names what ran: placement experts-cpu, the MoE scheduler the
 * engine created (scheduler) and its configured mode (sched_mode), and per decode step the
 * (token, expert) evaluations by side and the fetch scheduler's MoE layer calls by the mode
 * each ran in (null for the CPU scheduler).
 *
 * Bound per decode step: max(CPU bytes / CPU BW, PCIe bytes / PCIe BW, HBM bytes / HBM BW).
 * The scheduler does not expose per-step byte counts, so they come from its counters:
 *   A = (token, expert) evaluations per step (n_moe_layers * top-k), g = those whose down ran on
 *   the device (expert_calls_gpu), c = A - g; Bgu, Bd = gate+up and down bytes of one expert;
 *   dense = non-expert bytes read per step (as bench decode: dense + one embedding row);
 *   post: CPU = A Bgu + c Bd              PCIe = copy bytes   HBM = dense + g Bd
 *   the others: CPU = c (Bgu + Bd)        PCIe = copy bytes   HBM = dense + g (Bgu + Bd)
 *   (cpu: g = 0, no copies; static hot, cpu+uploads: g the resident experts' evaluations)
 * (auto: the counters do not say which calls ran as post, so device-run experts are counted
 * as wholly on the device: its CPU term may be low and its HBM term high.) CPU BW: a streaming read measured in the
 * same run with the same threads (bench decode's); PCIe BW: a timed 64 MiB (sim) / 256 MiB
 * host-to-device copy from registered memory on a device of the same kind; HBM BW: a
 * device-to-device copy of the same size, counted as read + write (2 x bytes / time).
 *
 * On the sim device every number is a CPU number: copies are memcpy throttled to --sim-h2d-gbs
 * (SLUICE_SIM_H2D_GBS for the model's device) and "device" kernels are the CPU kernels; a
 * banner says so. On cuda the fetch scheduler's device groups run kernels/cuda GEMVs and the
 * engine's non-expert layers run on the GPU (runtime/engine/dx.h). --trace FILE writes the trace of
 * the post row's scheduler on a fresh context: an 8-token prompt, then one decode step (warm:
 * the decode step is the last pass over the layers in the file). Tracing stamps every copy and
 * device group with host functions, so the traced step is slower than the timed ones. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/cuda/ctx.h"
#include "base/device/device.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/model_flags.h"
#include "tools/synth/synth.h"
#include "runtime/engine/env.h"

static const char *const k_cmd = "bench moe";

enum { N_ROWS = 9, PROMPT = 8, COPY_REPS = 5 };

static void usage(FILE *f)
{
    fputs("usage: tools/run bench moe [-m FILE | --shape small|qwen3-30b-a3b] [--json]\n"
          "         [--tokens N] [--prefill N] [--device sim|cuda|auto] [--sim-h2d-gbs X]\n"
          "         [--router-skew Z] [--router-topics N] [--trace FILE] [-t N] [--dir DIR]\n"
          "         [--keep]\n"
          "\n"
          "Decode and prefill tok/s of a MoE model with its routed experts in host memory\n"
          "(placement experts-cpu), for the scheduler modes cpu (baseline; cpu sync: its\n"
          "host part after a blocking sync per layer, decode only), post, full and\n"
          "auto with an expert cache of 25% of the expert bytes (VRAM budget = non-expert\n"
          "weights + 25% of experts), static hot (mode cpu, the prompt's most routed experts\n"
          "resident in that 25%) and cpu+uploads (mode cpu, a cache of at most 2 uploads per\n"
          "layer and step), each next to its bound max(CPU bytes / CPU BW, PCIe\n"
          "bytes / PCIe BW, HBM bytes / HBM BW) with bandwidths measured in the same run,\n"
          "plus copy/compute overlap %, miss-fallback rate and cache hit rate.\n"
          "\n"
          "  -m, --model FILE       MoE model (default: a synthetic qwen3moe, see --shape)\n"
          "  --shape S              small (default; ~33 MB Q4_K: 4 layers, dim 512, 32 experts\n"
          "                         of 256, top-4) | qwen3-30b-a3b (48 layers, 128 experts\n"
          "                         top-8, hidden 2048, expert FFN 768, Q4_K: ~17 GB of disk\n"
          "                         and RAM; written by -t threads, ~10 s on 16 cores;\n"
          "                         --keep it and reuse it with -m). Synthetic models have\n"
          "                         neuron skew 1 (mkmodel --neuron-skew)\n"
          "  --router-skew Z        Zipf exponent of expert popularity of the synthetic model\n"
          "                         (default 1.2; 0 = uniform)\n"
          "  --router-topics N      the synthetic model's router has temporal locality instead\n"
          "                         (mkmodel --router-topics N --topic-run 16; use with\n"
          "                         --router-skew 0): static hot vs cpu+uploads\n"
          "  --dir DIR              where the synthetic model is written (default $TMPDIR or\n"
          "                         /tmp); removed at the end unless --keep\n"
          "  --keep                 keep the synthetic model file\n"
          "  --tokens N             decode steps timed per mode (default 32)\n"
          "  --prefill N            prefill length per mode (default 512; 64 on sim)\n"
          "  --device D             auto (default: cuda if a GPU is usable, else sim) | cuda |\n"
          "                         sim\n"
          "  --sim-h2d-gbs X        sim copy throttle in GB/s (default 25, PCIe 4 x16-like)\n"
          "  --trace FILE           write the post mode's scheduler spans of an 8-token\n"
          "                         prompt and one warm decode step (the last layer pass) as\n"
          "                         Chrome/Perfetto trace JSON (host-stamped)\n"
          "  -t, --threads N        CPU threads (default: all cores)\n"
          "  --json                 one JSON object on stdout\n"
          "  -h, --help             this text\n"
          "On the sim device the numbers are CPU-simulated (copies are throttled memcpy, device\n"
          "kernels are CPU kernels): they check the machinery, they are not evidence.\n",
          f);
}

/* ---- device bandwidths ----------------------------------------------------------------- */

/* H2D GB/s (registered host memory) and D2D GB/s (read + write) on a device of the kind the
 * model uses; 0 where it failed (*why says so). */
static void device_gbps(const char *kind, double sim_h2d, double *h2d, double *d2d, char *why,
                        size_t why_cap)
{
    *h2d = *d2d = 0;
    sl_device_options o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.sim.h2d_gbs = sim_h2d;
    sl_device *d = NULL;
    sl_stream *s = NULL;
    void *src = NULL, *dst = NULL, *host = NULL;
    bool reg = false;
    sl_error err = {0};
    if (sl_env_device_options(&o, &err) || sl_device_open(&o, &d, &err)) goto fail;
    const uint64_t bytes = sl_device_kind_get(d) == SL_DEVICE_SIM ? 64ull << 20 : 256ull << 20;
    if (sl_device_region_alloc(d, bytes, &src, &err) ||
        sl_device_region_alloc(d, bytes, &dst, &err) || sl_device_stream_create(d, &s, &err))
        goto fail;
    if (!(host = malloc(bytes))) {
        snprintf(err.msg, sizeof err.msg, "out of memory (%" PRIu64 " MiB)", bytes >> 20);
        goto fail;
    }
    memset(host, 1, bytes);
    reg = sl_device_host_register(d, host, bytes, &err) == SL_OK;
    double th[COPY_REPS], td[COPY_REPS];
    for (int r = 0; r < COPY_REPS; r++) {
        double t0 = sl_cli_now_s();
        if (sl_device_copy(d, s, src, host, bytes, SL_COPY_H2D, &err) ||
            sl_device_stream_sync(d, s, &err))
            goto fail;
        th[r] = sl_cli_now_s() - t0;
        t0 = sl_cli_now_s();
        if (sl_device_copy(d, s, dst, src, bytes, SL_COPY_D2D, &err) ||
            sl_device_stream_sync(d, s, &err))
            goto fail;
        td[r] = sl_cli_now_s() - t0;
    }
    qsort(th, COPY_REPS, sizeof *th, sl_cli_cmp_f64);
    qsort(td, COPY_REPS, sizeof *td, sl_cli_cmp_f64);
    *h2d = th[COPY_REPS / 2] > 0 ? (double)bytes / th[COPY_REPS / 2] / 1e9 : 0;
    *d2d = td[COPY_REPS / 2] > 0 ? 2.0 * (double)bytes / td[COPY_REPS / 2] / 1e9 : 0;
    goto out;
fail:
    snprintf(why, why_cap, "%s", err.msg);
out:
    if (d) {
        sl_device_stream_destroy(d, s);
        if (reg) sl_device_host_unregister(d, host, NULL);
        if (src) sl_device_region_free(d, src, NULL);
        if (dst) sl_device_region_free(d, dst, NULL);
        sl_device_close(d);
    }
    free(host);
}

/* ---- one mode ---------------------------------------------------------------------------- */

typedef struct row {
    const char *name;
    char sched[256];
    bool ok;
    char why[SL_ERROR_MSG_BYTES], trace_why[SL_ERROR_MSG_BYTES];
    bool traced;
    const char *scheduler, *sched_mode;
    double decode_tps, prefill_tps;
    bool no_prefill;                         /* decode only (prefill_tps not measured) */
    sl_cli_steps steps;                      /* decode steps: median, mean, p90 ms */
    /* per decode step: (token, expert) evaluations by side, fetch calls by the mode each ran */
    double calls_cpu, calls_gpu, mcalls_cpu, mcalls_post, mcalls_full;
    double overlap_pct, fallback_rate, hit_rate;
    double cpu_bytes, pcie_bytes, hbm_bytes; /* per decode step */
    double bound_s;                          /* per decode step */
    sl_bench_dev_cost cost;                  /* the decode steps' syncs, calls, PCIe bytes */
} row;

static void run_row(sl_model *m, const sl_model_info *info, const sl_bench_bytes *mb, bool fetch_mode,
                    bool post, int32_t n_dec, int32_t n_pre, const char *trace, row *r)
{
    sl_ctx *c = NULL;
    sl_error err = {0};
    int32_t *tok = malloc((size_t)(n_pre > PROMPT ? n_pre : PROMPT) * sizeof *tok);
    double *dt = malloc(2 * (size_t)n_dec * sizeof *dt); /* the steps' times, CPU GB/s */
    if (!tok || !dt) {
        snprintf(r->why, sizeof r->why, "out of memory");
        free(tok);
        free(dt);
        return;
    }
    for (int32_t i = 0; i < (n_pre > PROMPT ? n_pre : PROMPT); i++)
        tok[i] = (int32_t)((7 * (int64_t)i + 1) % info->n_vocab);
    sl_ctx_options co = sl_ctx_options_default();
    co.sched = r->sched;
    co.n_ctx = PROMPT + n_dec + 1;
    if (sl_ctx_create(m, &co, &c, &err)) goto fail;
    sl_ctx_stats s0, s1;
    sl_ctx_stats_get(c, &s0);
    r->scheduler = s0.moe_scheduler ? s0.moe_scheduler : "none";
    if (fetch_mode && strcmp(r->scheduler, "fetch")) {
        snprintf(r->why, sizeof r->why, "the engine ran the %s scheduler, not fetch "
                 "(a device placement and --sched mode=... are needed)", r->scheduler);
        goto out;
    }
    int32_t t;
    if (sl_ctx_eval_greedy(c, tok, PROMPT, &t, &err)) goto fail;
    sl_ctx_stats_get(c, &s0);
    double *eg = dt + n_dec; /* each step's CPU expert GB/s */
    if (sl_bench_decode_steps(c, &t, n_dec, dt, eg, &err)) goto fail;
    sl_ctx_stats_get(c, &s1);
    r->steps = sl_cli_steps_of(dt, (size_t)n_dec);
    r->decode_tps = r->steps.mean_ms > 0 ? 1e3 / r->steps.mean_ms : 0;
    r->sched_mode = s1.moe_mode;
    r->calls_cpu = (double)(s1.expert_calls_cpu - s0.expert_calls_cpu) / n_dec;
    r->calls_gpu = (double)(s1.expert_calls_gpu - s0.expert_calls_gpu) / n_dec;
    r->mcalls_cpu = (double)(s1.moe_calls_cpu - s0.moe_calls_cpu) / n_dec;
    r->mcalls_post = (double)(s1.moe_calls_post - s0.moe_calls_post) / n_dec;
    r->mcalls_full = (double)(s1.moe_calls_full - s0.moe_calls_full) / n_dec;
    r->cost = sl_bench_dev_cost_of(&s0, &s1, n_dec, info->n_layer, eg);
    r->overlap_pct = s1.copy_overlap_pct;
    const double fe = (double)(s1.expert_fetches - s0.expert_fetches);
    const double fb = (double)(s1.expert_fallbacks - s0.expert_fallbacks);
    const double lk = (double)(s1.expert_cache_lookups - s0.expert_cache_lookups);
    const double hit = (double)(s1.expert_cache_hits - s0.expert_cache_hits);
    r->fallback_rate = fe > 0 ? fb / fe : 0;
    r->hit_rate = lk > 0 ? hit / lk : 0;
    /* per-step bytes (see the top of the file) */
    const double n_exp = info->n_expert > 0 ? info->n_expert : 1;
    const double L = mb->n_moe_layers > 0 ? (double)mb->n_moe_layers : 1;
    const double Bgu = (double)mb->gate_up / (L * n_exp), Bd = (double)mb->down / (L * n_exp);
    const double A = L * info->n_expert_used;
    double g = (double)(s1.expert_calls_gpu - s0.expert_calls_gpu) / n_dec;
    if (g > A) g = A;
    const double cc = A - g;
    r->pcie_bytes = (double)(s1.copy_bytes - s0.copy_bytes) / n_dec;
    if (post) {
        r->cpu_bytes = A * Bgu + cc * Bd;
        r->hbm_bytes = ((double)mb->dense + (double)mb->embd_row) + g * Bd;
    } else {
        r->cpu_bytes = cc * (Bgu + Bd);
        r->hbm_bytes = ((double)mb->dense + (double)mb->embd_row) + g * (Bgu + Bd);
    }
    sl_ctx_destroy(c);
    c = NULL;
    r->ok = r->no_prefill;
    if (r->no_prefill) goto out;
    /* prefill in one batch on a fresh context */
    co.n_ctx = n_pre + 1;
    co.n_batch = n_pre;
    if (sl_ctx_create(m, &co, &c, &err)) goto fail;
    double t0 = sl_cli_now_s();
    if (sl_ctx_eval(c, tok, (size_t)n_pre, &err)) goto fail;
    t0 = sl_cli_now_s() - t0;
    r->prefill_tps = t0 > 0 ? n_pre / t0 : 0;
    sl_ctx_destroy(c);
    c = NULL;
    r->ok = true;
    /* one warm decode step's trace: the prompt, then one step (the file's last layer pass) */
    if (trace && post) {
        char spec[300];
        snprintf(spec, sizeof spec, "%s trace=1", r->sched);
        co = sl_ctx_options_default();
        co.sched = spec;
        co.n_ctx = PROMPT + 2;
        if (sl_ctx_create(m, &co, &c, &err) || sl_ctx_eval_greedy(c, tok, PROMPT, &t, &err) ||
            sl_ctx_eval(c, &t, 1, &err) || sl_ctx_trace_write(c, trace, &err))
            snprintf(r->trace_why, sizeof r->trace_why, "%s", err.msg);
        else
            r->traced = true;
    }
    goto out;
fail:
    snprintf(r->why, sizeof r->why, "%s", err.msg);
out:
    sl_ctx_destroy(c);
    free(tok);
    free(dt);
}

/* ---- main ------------------------------------------------------------------------------- */

static void synth_shape(bool big, double skew, uint32_t topics, sl_synth_params *p)
{
    sl_synth_defaults(SL_SYNTH_QWEN3MOE, p);
    p->type = SL_GGML_Q4_K;
    p->seed = 1;
    p->neuron_skew = 1.0; /* hot/cold FFN neurons, for placement to find (mkmodel's default 0) */
    p->router_skew = skew;
    p->router_topics = topics;
    if (big) {
        p->n_layer = 48, p->n_embd = 2048, p->n_ff = 768, p->n_expert = 128;
        p->n_expert_used = 8, p->n_head = 16, p->n_head_kv = 4, p->n_vocab = 151936;
        p->n_ctx = 4096;
    } else {
        p->n_layer = 4, p->n_embd = 512, p->n_ff = 256, p->n_expert = 32;
        p->n_expert_used = 4, p->n_head = 8, p->n_head_kv = 4, p->n_vocab = 4096;
        p->n_ctx = 1024;
    }
}

static void json_row(const row *r)
{
    printf("{\"mode\":\"%s\",\"sched\":", r->name);
    sl_json_cstr(stdout, r->sched);
    printf(",\"ok\":%s", r->ok ? "true" : "false");
    if (!r->ok) {
        printf(",\"error\":");
        sl_json_cstr(stdout, r->why);
        putchar('}');
        return;
    }
    printf(",\"placement\":\"experts-cpu\",\"scheduler\":\"%s\",\"sched_mode\":",
           r->scheduler);
    sl_json_cstr(stdout, r->sched_mode);
    printf(",\"decode_tps\":");
    sl_json_f64(stdout, r->decode_tps);
    sl_bench_decode_json(stdout, &r->steps, r->calls_cpu, r->calls_gpu,
                         !strcmp(r->scheduler, "fetch"), r->mcalls_cpu, r->mcalls_post,
                         r->mcalls_full);
    printf(",\"bound_tps\":");
    sl_json_f64(stdout, r->bound_s > 0 ? 1 / r->bound_s : 0);
    printf(",\"fraction_of_bound\":");
    sl_json_f64(stdout, r->bound_s > 0 && r->decode_tps > 0 ? r->decode_tps * r->bound_s : 0);
    printf(",\"cpu_bytes_per_step\":");
    sl_json_f64(stdout, r->cpu_bytes);
    printf(",\"pcie_bytes_per_step\":");
    sl_json_f64(stdout, r->pcie_bytes);
    printf(",\"hbm_bytes_per_step\":");
    sl_json_f64(stdout, r->hbm_bytes);
    printf(",\"overlap_pct\":");
    sl_json_f64(stdout, r->overlap_pct);
    printf(",\"fallback_rate\":");
    sl_json_f64(stdout, r->fallback_rate);
    printf(",\"hit_rate\":");
    sl_json_f64(stdout, r->hit_rate);
    printf(",\"prefill_tps\":");
    if (r->no_prefill) printf("null,\"prefill_skipped\":\"decode-only row\"");
    else sl_json_f64(stdout, r->prefill_tps);
    sl_bench_dev_cost_json(stdout, &r->cost);
    putchar('}');
}

int sl_bench_moe(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    const char *path_arg = NULL, *shape = NULL, *device = "auto", *trace = NULL;
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    bool json = false, keep = false, prefill_given = false;
    int64_t n_dec = 32, n_pre = 512, threads = 0;
    double sim_gbs = 25, skew = 1.2;
    long topics = 0;
    while (sl_cli_args_next(&a)) {
        const char *v;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", "--keep")) {
            if (sl_cli_no_value(&a)) return 2;
            if (!strcmp(a.flag, "--json")) json = true;
            else keep = true;
        } else if (sl_cli_is(&a, "-m", "--model")) {
            if (!(path_arg = sl_cli_value(&a))) return 2;
            if (!*path_arg) return sl_cli_usage_error(k_cmd, "%s: empty file name", a.flag);
        } else if (sl_cli_is(&a, "--shape", NULL)) {
            if (!(shape = sl_cli_value(&a))) return 2;
            if (strcmp(shape, "small") && strcmp(shape, "qwen3-30b-a3b"))
                return sl_cli_usage_error(k_cmd, "--shape '%s': unknown (small, qwen3-30b-a3b)",
                                          shape);
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(dir = sl_cli_value(&a))) return 2;
            if (!*dir) return sl_cli_usage_error(k_cmd, "--dir: empty folder name");
        } else if (sl_cli_is(&a, "--trace", NULL)) {
            if (!(trace = sl_cli_value(&a))) return 2;
            if (!*trace) return sl_cli_usage_error(k_cmd, "--trace: empty file name");
        } else if (sl_cli_is(&a, "--device", NULL)) {
            if (!(device = sl_cli_device_value(&a))) return 2;
        } else if (sl_cli_is(&a, "--tokens", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 100000, &n_dec))
                return 2;
        } else if (sl_cli_is(&a, "--prefill", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 65536, &n_pre))
                return 2;
            prefill_given = true;
        } else if (sl_cli_is(&a, "-t", "--threads")) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, SL_N_THREADS_MAX, &threads))
                return 2;
        } else if (sl_cli_is(&a, "--sim-h2d-gbs", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_f64(k_cmd, a.flag, v, (sl_frange){0.001, 1e4, false, false}, &sim_gbs))
                return 2;
        } else if (sl_cli_is(&a, "--router-topics", NULL)) {
            if (sl_bench_long_value(&a, 0, 128, &topics)) return 2;
        } else if (sl_cli_is(&a, "--router-skew", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_f64(k_cmd, a.flag, v, (sl_frange){0, 16, false, false}, &skew))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (path_arg && shape) return sl_cli_usage_error(k_cmd, "-m and --shape exclude each other");
    if (!strcmp(device, "auto")) {
        /* resolved here: the banner, the prefill default and the sim throttle depend on it */
        int n_gpu = 0;
        sl_error pe = {0};
        device = sl_cuda_probe(&n_gpu, &pe) == SL_OK && n_gpu > 0 ? "cuda" : "sim";
        if (!json) fprintf(stderr, "bench moe: --device auto: %s\n", device);
    }
    const bool sim = !strcmp(device, "sim");
    if (sim && !prefill_given) n_pre = 64;
    if (sim) {
        /* the model's sim device reads its throttle from the environment */
        char gbs[64];
        snprintf(gbs, sizeof gbs, "%.17g", sim_gbs);
        if (setenv("SLUICE_SIM_H2D_GBS", gbs, 1)) {
            perror("sluice bench moe: setenv");
            return 1;
        }
        fprintf(stderr,
                "bench moe: *** SIMULATED: device 'sim' = CPU memory; copies are memcpy throttled "
                "to %g GB/s, 'device' kernels are CPU kernels. These numbers check the machinery; "
                "they are NOT evidence of GPU performance. ***\n",
                sim_gbs);
    }

    /* --trace is checked (and its temporary created) before a model is written or loaded */
    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    sl_cli_out tr = {0};
    int prc = 0;
    if (trace && ((path_arg && sl_cli_io_add_model(&io, path_arg, NULL)) ||
                  (prc = sl_cli_out_prepare(&io, &tr, "--trace", trace, SL_CLI_OUT_BY_NAME)))) {
        sl_cli_io_free(&io);
        return prc ? prc : 1;
    }
    char synth_path[4096] = "";
    const char *path = path_arg;
    if (!path) {
        const bool big = shape && !strcmp(shape, "qwen3-30b-a3b");
        sl_synth_params sp;
        synth_shape(big, skew, (uint32_t)topics, &sp);
        if ((size_t)snprintf(synth_path, sizeof synth_path, "%s/sluice-bench-moe-%s-%d.gguf", dir,
                             big ? "qwen3-30b-a3b" : "small", (int)getpid()) >= sizeof synth_path) {
            sl_cli_out_discard(&tr);
            sl_cli_io_free(&io);
            return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
        }
        if (big)
            fprintf(stderr, "bench moe: warning: --shape qwen3-30b-a3b is ~17 GB: it is written to "
                            "%s and loaded into RAM (writing takes ~10 s on 16 cores; "
                            "--keep, then -m FILE to reuse)\n", dir);
        if (!json)
            fprintf(stderr, "bench moe: writing the %s synthetic model (router skew %g, %ld "
                    "topics) to %s ...\n", big ? "qwen3-30b-a3b" : "small", skew, topics,
                    synth_path);
        sl_error err = {0};
        sl_synth_summary sum;
        const double t0 = sl_cli_now_s();
        /* -t threads write it too (0: every online CPU) */
        if (sl_synth_write(&sp, synth_path, (int)threads, NULL, NULL, NULL, NULL, &sum, &err)) {
            fprintf(stderr, "sluice %s: %s: %s\n", k_cmd, synth_path, err.msg);
            sl_cli_out_discard(&tr);
            sl_cli_io_free(&io);
            return 1;
        }
        if (!json)
            fprintf(stderr, "bench moe: written in %.1f s on %d threads\n", sl_cli_now_s() - t0,
                    sum.n_threads);
        path = synth_path;
    }

    int rc = 1;
    sl_model *m = NULL;
    row rows[N_ROWS];
    memset(rows, 0, sizeof rows);
    sl_bench_bytes mb;
    if (sl_bench_model_bytes(k_cmd, path, &mb)) goto done;
    sl_model_options mo = sl_model_options_default();
    mo.progress = false;
    mo.placement = SL_PLACE_EXPERTS_CPU;
    mo.device = device;
    mo.n_threads = (int)threads;
    sl_error err = {0};
    if (sl_model_open(path, &mo, &m, &err)) {
        if (strstr(err.msg, path)) fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
        else fprintf(stderr, "sluice %s: %s: %s\n", k_cmd, path, err.msg);
        goto done;
    }
    sl_model_info info;
    sl_model_info_get(m, &info);
    if (info.n_expert <= 0 || mb.n_moe_layers <= 0) {
        fprintf(stderr, "sluice %s: %s: not a MoE model (no routed experts)\n", k_cmd, path);
        goto done;
    }
    if (n_pre > info.n_ctx_train) {
        rc = sl_cli_usage_error(k_cmd, "--prefill %" PRId64 ": more than the model's context "
                                "(%" PRId32 ")", n_pre, info.n_ctx_train);
        goto done;
    }
    /* bandwidths */
    int nthr = 0;
    size_t mib = 0;
    const double cpu_gbs = sl_bench_stream_gbps(&mo, &nthr, &mib);
    if (cpu_gbs <= 0) goto done;
    double h2d_gbs, d2d_gbs;
    char dev_why[SL_ERROR_MSG_BYTES] = "";
    device_gbps(device, sim ? sim_gbs : 0, &h2d_gbs, &d2d_gbs, dev_why, sizeof dev_why);
    if (h2d_gbs <= 0 && !json)
        fprintf(stderr, "bench moe: device bandwidth unavailable: %s\n", dev_why);
    /* VRAM budget: non-expert weights + 25% of experts; the 25% is the expert cache */
    const uint64_t cache_bytes = mb.experts / 4;
    const uint64_t vram_budget = (mb.total - mb.experts) + cache_bytes;
    /* scratch: every expert of one layer (a prefill may touch all), at least the default */
    const double per_layer = (double)mb.experts / (double)mb.n_moe_layers;
    uint64_t scratch_kb = (uint64_t)(per_layer / 1024) + 1024;
    if (scratch_kb < 64 * 1024) scratch_kb = 64 * 1024;
    const char *names[N_ROWS] = {"cpu", "cpu sync", "post", "full", "auto+cache", "static hot",
                                 "cpu+uploads", "cpu+defer", "cpu+stream"};
    /* rows R_POST .. R_AUTO run the fetching scheduler; static hot's and cpu+uploads'
     * resident experts are the engine's (runtime/engine/hot.h) beside the CPU scheduler */
    enum { R_POST = 2, R_AUTO = 4, R_HOT = 5, R_UPLOADS = 6, R_DEFER = 7 };
    snprintf(rows[0].sched, sizeof rows[0].sched, "mode=cpu");
    snprintf(rows[1].sched, sizeof rows[1].sched, "mode=cpu order=sync");
    rows[1].no_prefill = true;
    snprintf(rows[R_POST].sched, sizeof rows[R_POST].sched, "mode=post scratch_kb=%" PRIu64,
             scratch_kb);
    snprintf(rows[3].sched, sizeof rows[3].sched, "mode=full scratch_kb=%" PRIu64, scratch_kb);
    snprintf(rows[R_AUTO].sched, sizeof rows[R_AUTO].sched,
             "mode=auto scratch_kb=%" PRIu64 " cache_kb=%" PRIu64 " cpu_gbs=%.3f dram_gbs=%.3f",
             scratch_kb, cache_bytes >> 10, cpu_gbs, cpu_gbs);
    if (h2d_gbs > 0) {
        const size_t n = strlen(rows[R_AUTO].sched);
        snprintf(rows[R_AUTO].sched + n, sizeof rows[R_AUTO].sched - n, " pcie_gbs=%.3f dev_gbs=%.3f",
                 h2d_gbs, d2d_gbs / 2);
    }
    snprintf(rows[R_HOT].sched, sizeof rows[R_HOT].sched, "mode=cpu hot_kb=%" PRIu64 " hot_warm=%d",
             cache_bytes >> 10, PROMPT * info.n_expert_used);
    snprintf(rows[R_UPLOADS].sched, sizeof rows[R_UPLOADS].sched,
             "mode=cpu cache_kb=%" PRIu64 " policy=lfu uploads=2", cache_bytes >> 10);
    snprintf(rows[R_DEFER].sched, sizeof rows[R_DEFER].sched, "mode=cpu defer=%d",
             info.n_expert_used / 4 > 1 ? info.n_expert_used / 4 : 1);
    rows[R_DEFER].no_prefill = true;
    /* the scheduler rows' prefill is their own: a prefill's experts streamed through the
     * device (the default, runtime/engine/stream.h) would bypass every scheduler; the last
     * row is that default */
    for (int k = 0; k < N_ROWS - 1; k++) {
        const size_t n = strlen(rows[k].sched);
        snprintf(rows[k].sched + n, sizeof rows[k].sched - n, " prefill_stream=0");
    }
    snprintf(rows[N_ROWS - 1].sched, sizeof rows[N_ROWS - 1].sched, "mode=cpu");
    bool trace_done = false;
    for (int k = 0; k < N_ROWS; k++) {
        row *r = &rows[k];
        r->name = names[k];
        if (!json) fprintf(stderr, "bench moe: %s ...\n", r->name);
        run_row(m, &info, &mb, k >= R_POST && k <= R_AUTO, k == R_POST, (int32_t)n_dec,
                (int32_t)n_pre,
                trace ? sl_cli_out_name(&tr) : NULL, r);
        trace_done |= r->traced;
        const double tc = r->cpu_bytes / (cpu_gbs * 1e9);
        const double tp = h2d_gbs > 0 ? r->pcie_bytes / (h2d_gbs * 1e9) : 0;
        const double th = d2d_gbs > 0 ? r->hbm_bytes / (d2d_gbs * 1e9) : 0;
        r->bound_s = tc > tp ? (tc > th ? tc : th) : (tp > th ? tp : th);
    }

    if (json) {
        printf("{\"model\":");
        sl_json_cstr(stdout, path);
        printf(",\"shape\":");
        sl_json_cstr(stdout, path_arg ? NULL : shape ? shape : "small");
        printf(",\"device\":\"%s\",\"simulated\":%s,\"sim_h2d_gbs\":", device,
               sim ? "true" : "false");
        sl_json_f64(stdout, sim ? sim_gbs : 0);
        printf(",\"placement\":\"experts-cpu\",\"n_layer\":%" PRId32 ",\"n_expert\":%" PRId32 ",\"n_expert_used\":%" PRId32
               ",\"tokens\":%" PRId64 ",\"prefill\":%" PRId64 ",\"threads\":%d"
               ",\"weight_bytes\":%" PRIu64 ",\"expert_bytes\":%" PRIu64
               ",\"vram_budget_bytes\":%" PRIu64 ",\"cache_bytes\":%" PRIu64 ",\"cpu_gbps\":",
               info.n_layer, info.n_expert, info.n_expert_used, n_dec, n_pre, nthr, mb.total,
               mb.experts, vram_budget, cache_bytes);
        sl_json_f64(stdout, cpu_gbs);
        printf(",\"pcie_gbps\":");
        sl_json_f64(stdout, h2d_gbs);
        printf(",\"hbm_gbps\":");
        sl_json_f64(stdout, d2d_gbs);
        printf(",\"rows\":[");
        for (int k = 0; k < N_ROWS; k++) {
            if (k) putchar(',');
            json_row(&rows[k]);
        }
        printf("]");
        if (trace) {
            printf(",\"trace\":");
            sl_json_cstr(stdout, trace_done ? trace : NULL);
            printf(",\"trace_token\":\"post mode, fresh context: an %d-token prompt, then one "
                   "warm decode step (the last pass over the layers); host-stamped\"", PROMPT);
        }
        printf("}\n");
    } else {
        if (sim)
            printf("*** SIMULATED (device sim): copies are memcpy throttled to %g GB/s, device "
                   "kernels run on the CPU. Not evidence. ***\n", sim_gbs);
        printf("bench moe: %s (%s, %" PRId32 " layers, %" PRId32 " experts top-%" PRId32
               "), placement experts-cpu, device %s, %d threads\n",
               path, info.arch, info.n_layer, info.n_expert, info.n_expert_used, device, nthr);
        printf("weights %.1f MB, experts %.1f MB; VRAM budget %.1f MB = non-expert %.1f + cache "
               "(25%% of experts) %.1f\n",
               mb.total / 1e6, mb.experts / 1e6, vram_budget / 1e6, (mb.total - mb.experts) / 1e6,
               cache_bytes / 1e6);
        printf("bandwidth: CPU streaming read %.2f GB/s (%zu MiB); H2D %.2f GB/s; D2D %.2f GB/s "
               "(read + write)%s%s\n\n",
               cpu_gbs, mib, h2d_gbs, d2d_gbs, dev_why[0] ? " -- " : "", dev_why);
        printf("%-11s %9s %9s %6s %8s %8s %8s %8s %6s %6s %11s %6s %6s %8s\n", "mode",
               "dec t/s", "bound t/s", "of bd", "CPU MB", "PCIe MB", "HBM MB", "overlap",
               "fallbk", "hit", "prefill t/s", "sync/L", "call/L", "CPU GB/s");
        for (int k = 0; k < N_ROWS; k++) {
            const row *r = &rows[k];
            if (!r->ok) {
                printf("%-11s unavailable: %s\n", r->name, r->why);
                continue;
            }
            char pre[32] = "-"; /* a decode-only row */
            if (!r->no_prefill) snprintf(pre, sizeof pre, "%.1f", r->prefill_tps);
            printf("%-11s %9.1f %9.1f %5.0f%% %8.3f %8.3f %8.3f %7.1f%% %5.1f%% %5.1f%% %11s "
                   "%6.2f %6.1f %8.2f\n",
                   r->name, r->decode_tps, r->bound_s > 0 ? 1 / r->bound_s : 0.0,
                   r->bound_s > 0 ? 100 * r->decode_tps * r->bound_s : 0.0, r->cpu_bytes / 1e6,
                   r->pcie_bytes / 1e6, r->hbm_bytes / 1e6, r->overlap_pct,
                   100 * r->fallback_rate, 100 * r->hit_rate, pre,
                   r->cost.syncs_per_layer, r->cost.calls_per_layer, r->cost.cpu_expert_gbps);
        }
        printf("(MB per decode step; sync/L, call/L: blocking syncs and device calls per layer "
               "and step; CPU GB/s: the CPU expert path's weight reads over its time (median "
               "of the steps), beside the streaming read of %.2f GB/s above; decode %" PRId64
               " steps after an %d-token "
               "prompt; prefill %" PRId64 " tokens in one batch)\n", cpu_gbs, n_dec, PROMPT,
               n_pre);
        if (trace_done) printf("trace of one post decode step: %s\n", trace);
    }
    rc = 0;
    for (int k = 0; k < N_ROWS; k++) {
        if (rows[k].ok || !(sim || k == 0)) continue; /* on sim every mode must run */
        fprintf(stderr, "sluice %s: %s: %s\n", k_cmd, rows[k].name, rows[k].why);
        rc = 1;
    }
    if (trace && !trace_done) {
        fprintf(stderr, "sluice %s: --trace %s: not written: %s\n", k_cmd, trace,
                rows[R_POST].trace_why[0] ? rows[R_POST].trace_why : rows[R_POST].why);
        rc = 1;
    }
    if (trace_done && sl_cli_out_commit(&io, &tr)) rc = 1;
done:
    sl_cli_out_discard(&tr);
    sl_cli_io_free(&io);
    sl_model_close(m);
    if (synth_path[0] && !keep) unlink(synth_path);
    else if (synth_path[0] && !json) fprintf(stderr, "bench moe: kept %s\n", synth_path);
    return rc;
}
