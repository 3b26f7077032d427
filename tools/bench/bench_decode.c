/* `bench decode`: decode time per token of a model next to its memory-bandwidth bound.
 *
 * Model: -m FILE, or a synthetic qwen3moe written here with tools/synth/synth.h (removed at the
 * end unless --keep): "small" (default; 4 layers, dim 512, 32 experts of FFN 256, top-4, vocab
 * 4096, Q4_K, ~33 MB: seconds to write) or "qwen3-30b-a3b" (Qwen3-30B-A3B's MoE shape: 48
 * layers, dim 2048, 128 experts of FFN 768, top-8, vocab 151936, Q4_K, ~17 GB of disk and as
 * much RAM; heads 16 x 128 because synth ties head_dim to dim / heads, where the real model
 * has 32 query heads), "gpt-oss-20b" (gpt-oss-20b's layer shape as its files store it: dim
 * 2880, 32 experts of FFN 2880 in MXFP4, top-4, the rest Q8_0, vocab 201088, sliding window
 * 128, but 4 of its 24 layers, ~3 GB; heads 45 x 64 with 5 KV heads, because synth ties the
 * head count to dim / head_dim, where the real model has 64 x 64 and 8 KV heads) or
 * "deepseek-v3" (a synthetic deepseek2, synth_shape_ds3).
 *
 * Device: --device, else SLUICE_DEVICE, else auto (cuda when a GPU is usable, else sim), opened
 * once up front so a bad value or a cuda request without a GPU fails before any work (exit 1).
 * Placements (unless --placement picks one): cpu, experts-cpu, then on cuda gpu when the
 * weights fit in the device's free memory ("gpu: unavailable: model N GiB > free M GiB"
 * otherwise). On sim the device placements run the same forward path with CPU kernels on
 * host memory; gpu is then left out of the default list (its numbers would be CPU numbers)
 * but runs with --placement gpu.
 *
 * Measurement: per placement, a fresh context, a prefill of --prompt-tokens fixed ids, then -n
 * greedy one-token evals (default 32). decode_tps = steps / their total time (llama-bench's
 * tg) and decode_ms_per_token = its inverse, the mean; the median and p90 (nearest rank) of
 * the steps beside them. Each row names what ran: the plan's resolved placement
 * (placement_ran: auto's choice, with ngl / n-cpu-moe), the MoE scheduler the engine created
 * (scheduler: cpu | fetch; a GPU model with host experts runs fetch in auto unless --sched
 * says otherwise) and its configured mode (sched_mode), and per decode step the (token,
 * expert) evaluations by side and the fetch scheduler's MoE layer calls by the mode each ran
 * in (null for the CPU scheduler, which has one mode).
 *
 * Bound: a decode step reads every dense weight once, one row of token_embd (all of it when the
 * output matrix is tied to it) and, per MoE layer, n_expert_used of n_expert experts:
 *     bytes/token = dense + embd row + expert bytes * n_expert_used / n_expert
 * Each placement splits those bytes into device bytes and host bytes by where its weights live
 * (the opened model's plan, scheduler/policy/placement.h) and cannot decode faster than
 *     device bytes / device bandwidth + host bytes / host bandwidth
 * (the two sides run one after the other within a step). Host bandwidth: a streaming read
 * measured in the same run with the same threads and binding (a multi-threaded sum over
 * max(8 x LLC, 1 GiB), median of 5, as `bench kernels` does for its roofline). Device
 * bandwidth on cuda: HBM, the device-to-device copy roofline of kernels/cuda/bench.h (read +
 * write traffic, as `bench kernels` compares its GEMVs with). So gpu is bound by HBM (plus the
 * token_embd row, looked up on the host), experts-cpu by its non-expert bytes over HBM plus its
 * expert bytes over the host rate (no PCIe term: the experts stay on the host), cpu by the host
 * rate. On sim, device memory is host memory: every byte counts at the host rate. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/cuda/bench.h"
#include "kernels/cpu/pool.h"
#include "base/device/device.h"
#include "scheduler/policy/placement.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/model_flags.h"
#include "tools/commands/place.h"
#include "tools/synth/synth.h"
#include "runtime/engine/env.h"

static const char *const k_cmd = "bench decode";

enum { MAX_RUNS = 8 };

static void usage(FILE *f)
{
    fputs("usage: tools/run bench decode [-m FILE | --shape small|qwen3-30b-a3b|gpt-oss-20b|"
          "deepseek-v3]\n"
          "         [-n N] [--prompt-tokens P] [--dir DIR] [--keep] [--json] [model and\n"
          "         placement flags]\n"
          "\n"
          "Decode ms/token (mean over N one-token evals after a P-token prefill; median and\n"
          "p90 beside it) per placement, next to that placement's bound: bytes read per token on\n"
          "the device /\n"
          "HBM bandwidth + bytes read on the host / host bandwidth, both measured in the same\n"
          "run (HBM: a device-to-device copy on cuda; host: a streaming read with the same\n"
          "threads; on sim, device memory is host memory, so all of it is host bandwidth).\n"
          "A row whose experts ran on the CPU adds the CPU expert path's GB/s (the expert\n"
          "weight bytes it read over its time; the median over the steps) and that as a\n"
          "share of the streaming read.\n"
          "\n"
          "  -m, --model FILE       model to run (default: a synthetic qwen3moe, see --shape)\n"
          "  --shape S              small (default; ~33 MB Q4_K: 4 layers, dim 512, 32 experts\n"
          "                         of 256, top-4) | qwen3-30b-a3b (48 layers, dim 2048, 128\n"
          "                         experts of 768, top-8, vocab 151936, Q4_K: ~17 GB of disk\n"
          "                         and RAM; written by -t threads, ~10 s on 16 cores;\n"
          "                         --keep it and reuse it with -m) | gpt-oss-20b (its layer\n"
          "                         shape, 4 of its 24 layers: dim 2880, 32 experts of 2880\n"
          "                         in MXFP4, top-4, the rest Q8_0, vocab 201088: ~3 GB) |\n"
          "                         deepseek-v3 (DeepSeek-V3's layer shape, MLA and 256\n"
          "                         experts of 2048 in 8 groups, top-8, with 2 layers: one\n"
          "                         dense, one MoE; Q4_K, ~7 GB). Synthetic models have\n"
          "                         neuron skew 1 (mkmodel --neuron-skew)\n"
          "  --dir DIR              where the synthetic model is written (default $TMPDIR or\n"
          "                         /tmp); removed at the end unless --keep\n"
          "  --keep                 keep the synthetic model file\n"
          "  -n, --n-predict N      decode steps measured (default 32)\n"
          "  --prompt-tokens P      prefill length before them (default 8)\n"
          "  --json                 one JSON object on stdout\n"
          "  --profile              time each step of the device executor (an event pair\n"
          "                         around each on cuda, the host clock on sim): per step kind\n"
          "                         calls, us per token and per call, and the device's idle\n"
          "                         time before it (launch gaps); the events slow the decode\n"
          "                         and add device calls, so the row's other figures are from\n"
          "                         a profiled run\n"
          "  --pdl-ab R             after the --placement row, R pairs of fresh contexts of its\n"
          "                         model with and without programmatic dependent launch\n"
          "                         (--no-pdl), alternating, each an 8-token prefill and -n\n"
          "                         steps: the median step of each side, whether all decoded\n"
          "                         the same tokens and whether PDL was in effect (cuda on\n"
          "                         compute capability 9.0+; elsewhere both sides launch the\n"
          "                         same way). Needs --placement; not with --profile, --trace\n"
          "  --fusion-ab R          the same with and without the fused launches\n"
          "                         (--no-fusion), and each side's kernel launches per device\n"
          "                         layer (in effect: fewer with fusion; cuda only)\n"
          "  -h, --help             this text\n"
          "Placements: --placement P runs that one. By default: cpu, experts-cpu, and on cuda\n"
          "gpu when the weights fit in free device memory. The device is --device, else\n"
          "$SLUICE_DEVICE, else auto (cuda if a GPU is usable, else sim); on sim, gpu runs\n"
          "only when asked for (--placement gpu --device sim: the GPU code path on CPU\n"
          "kernels). --sched applies to every placement; --trace writes the trace of the last\n"
          "placement that ran the fetch scheduler. With --vram-budget SIZE, rows for the same\n"
          "budget spent four ways: `ngl N` (the largest -ngl that fits), `n-cpu-moe K` (MoE:\n"
          "the smallest that fits), `hot-cold` (hot neurons solved from a CPU profile of\n"
          "the prompt tokens: a dense FFN's by activation, a MoE's experts' by routing rate)\n"
          "and `static hot` (MoE: --cpu-moe, the rest of the budget holding each layer's most\n"
          "routed experts of the prompt: --sched \"mode=cpu hot_kb=...\"), each with its bytes\n"
          "per side and bound.\n",
          f);
    sl_cli_model_flags_help(f);
}

/* ---- weight bytes per token ------------------------------------------------------------ */

/* Bytes one decode step reads, by where they live under one placement (place.h). */
typedef sl_cli_token_bytes token_bytes;

/* ---- the device and its bandwidth ------------------------------------------------------ */

typedef struct dev_info {
    sl_device_kind kind;
    sl_device_props props;
    char notice[SL_ERROR_MSG_BYTES]; /* auto's fallback notice, "" if none */
    double hbm_gbps;                 /* cuda: D2D copy roofline; 0 on sim or if it failed */
    uint64_t hbm_copy_bytes;
    char hbm_why[SL_ERROR_MSG_BYTES]; /* why hbm_gbps is 0 on cuda */
} dev_info;

static void dev_notice(void *user, const char *msg)
{
    dev_info *d = user;
    if (!d->notice[0]) snprintf(d->notice, sizeof d->notice, "%s", msg);
}

/* Opens the device the model flags ask for (kind NULL: SLUICE_DEVICE, then auto), reads its
 * properties and closes it again (each placement's model opens its own); on cuda then measures
 * HBM before any model takes device memory. Prints the error and returns 1 when the device
 * cannot be opened (a cuda request without a GPU, a bad SLUICE_DEVICE). */
static int dev_resolve(const char *kind, dev_info *d)
{
    memset(d, 0, sizeof *d);
    sl_device_options o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.notice = dev_notice;
    o.notice_user = d;
    sl_device *dev = NULL;
    sl_error err = {0};
    if (sl_env_device_options(&o, &err) || sl_device_open(&o, &dev, &err) ||
        sl_device_props_get(dev, &d->props, &err)) {
        const char *env = getenv("SLUICE_DEVICE");
        fprintf(stderr, "sluice bench decode: cannot open device '%s' (%s): %s\n",
                kind ? kind : env ? env : "auto",
                kind ? "--device" : env ? "SLUICE_DEVICE" : "auto", err.msg);
        sl_device_close(dev);
        return 1;
    }
    d->kind = sl_device_kind_get(dev);
    sl_device_close(dev);
    if (d->kind != SL_DEVICE_CUDA) return 0;
    /* n_types 0: only the roofline copy (rows/cols are checked but unused) */
    sl_cuda_bench_result br;
    if (sl_cuda_bench_gemv(NULL, 0, 1, 1, 1, &br, &err)) {
        snprintf(d->hbm_why, sizeof d->hbm_why, "%s", err.msg);
        return 0;
    }
    d->hbm_gbps = br.copy_gbps;
    d->hbm_copy_bytes = br.copy_bytes;
    return 0;
}

/* ms/token no placement can beat: device bytes at the device rate plus host bytes at the host
 * rate (sim: device memory is host memory). 0 when a rate it needs is unknown. */
static double bound_ms(token_bytes b, const dev_info *d, double host_gbps)
{
    const double dev_gbps = d->kind == SL_DEVICE_CUDA ? d->hbm_gbps : host_gbps;
    if ((b.dev > 0 && dev_gbps <= 0) || (b.host > 0 && host_gbps <= 0)) return 0;
    return 1e3 * ((b.dev > 0 ? b.dev / (dev_gbps * 1e9) : 0) +
                  (b.host > 0 ? b.host / (host_gbps * 1e9) : 0));
}

/* What limits the placement: "cpu" (host bandwidth; also every placement on sim), "hbm" (gpu
 * on cuda; the token_embd row it reads on the host is counted but negligible), "hbm+cpu". */
static const char *bound_kind(sl_placement p, const char *device, token_bytes b)
{
    if (p == SL_PLACE_CPU || strcmp(device, "cuda") || b.dev <= 0) return "cpu";
    return p == SL_PLACE_GPU ? "hbm" : "hbm+cpu";
}

/* ---- one placement -------------------------------------------------------------------- */

/* The A/Bs after a row: R pairs of fresh contexts of its model, the default ([0]) and one
 * context option that changes no bits turned off ([1]). One table: flag, JSON key, what, and
 * the model flag that turns it off (the A/B's side 0 would not be the row's). */
typedef enum { AB_PDL, AB_FUSION, AB_N } ab_kind;
static const struct {
    const char *flag, *key, *what, *off_flag;
} k_ab[AB_N] = {
    [AB_PDL] = {"--pdl-ab", "pdl_ab", "PDL", "--no-pdl"},
    [AB_FUSION] = {"--fusion-ab", "fusion_ab", "fusion", "--no-fusion"},
};

enum { AB_PROMPT = 8, AB_MAX_REPS = 20 };

/* The A/B whose flag is the current one, or -1. */
static int ab_flag(const sl_cli_args *a)
{
    for (int i = 0; i < AB_N; i++)
        if (sl_cli_is(a, k_ab[i].flag, NULL)) return i;
    return -1;
}

/* One A/B's figures: reps 0 unless it ran; ms: each side's median decode step; launches: each
 * side's kernel launches a device layer (-1: none counted, sim and the CPU); same: every run
 * decoded the same tokens; effective: the option changed how the default side ran (PDL: each
 * of its contexts launched with it, sl_ctx_stats pdl; fusion: fewer launches a layer than the
 * other side); why: why it did not run ("" if it did or was not asked) */
typedef struct ab_result {
    int reps;
    double ms[2], launches[2];
    bool same, effective;
    char why[SL_ERROR_MSG_BYTES];
} ab_result;

typedef struct run_result {
    const char *placement, *device;
    char label[40];          /* placement's text for the budget rows ("ngl 12", ...) */
    bool ok;
    char why[SL_ERROR_MSG_BYTES];
    double load_s, prefill_tps, decode_ms, decode_tps;
    sl_cli_steps steps;      /* the decode steps: median, mean (== decode_ms) and p90 */
    char ran[48];            /* the plan's resolved placement (sl_cli_plan_describe) */
    const char *scheduler;   /* the MoE scheduler that ran ("cpu", "fetch"; NULL: dense) */
    const char *sched_mode;  /* its configured mode (sl_ctx_stats moe_mode) */
    /* per decode step: (token, expert) evaluations by side, fetch calls by the mode each ran */
    double calls_cpu, calls_gpu, mcalls_cpu, mcalls_post, mcalls_full;
    double copy_bytes;       /* expert weight bytes the MoE scheduler copied per decode step */
    uint64_t gpu_bytes, host_bytes;
    int compute_threads;     /* the contexts' CPU threads (sl_model_info n_threads) */
    bool traced;
    token_bytes tb;          /* bytes per token on each side, from the placement */
    double bound_ms;         /* this placement's bound (0: a rate it needs is unknown) */
    const char *bound_kind;  /* "cpu" | "hbm" | "hbm+cpu" */
    /* ReLU FFNs over the decode steps (sl_ctx_stats): the fraction of token x neuron pairs
     * with gate <= 0 and of those skipped; -1: no ReLU FFN ran */
    double relu_zero, relu_skip;
    const char *moe_scheduler; /* the MoE scheduler the context ran (NULL: dense) */
    sl_bench_dev_cost cost;  /* the decode steps' blocking syncs, device calls, PCIe bytes */
    char hot_sched[96];      /* the static hot budget row's scheduler string */
    sl_bench_step_prof prof; /* --profile: the device executor's steps over the decode */
    /* --profile: the same over the prefill, per prompt token (a streamed layer's expert copies
     * are no step: their time shows as the moe step's gap, the stream busy before it) */
    sl_bench_step_prof pprof;
    char graph_error[256];   /* why the CUDA graph capture failed (sl_ctx_stats), "" if not */
    /* the prefill's MoE layer calls whose host experts streamed through the device, and their
     * bytes (sl_ctx_stats stream_layers, stream_bytes; runtime/engine/stream.h) */
    uint64_t prefill_stream_layers, prefill_stream_bytes;
    ab_result ab[AB_N]; /* --pdl-ab, --fusion-ab (k_ab) */
    bool pdl; /* the row's context launched with PDL at its end (sl_ctx_stats pdl) */
} run_result;

/* The prompt every measured context prefills: n fixed ids spread over the vocabulary. */
static void prompt_ids(int32_t *p, int32_t n, int32_t n_vocab)
{
    for (int32_t i = 0; i < n; i++) p[i] = (int32_t)((7 * (int64_t)i + 1) % n_vocab);
}

/* An A/B of kind `kind` after the row's own run: reps pairs of fresh contexts of its model,
 * side 0 (the default) then side 1 (the option off), the order swapped every other pair, each
 * an AB_PROMPT-token prefill and n_gen greedy steps; per side the median of its pooled step
 * times (the first step of each context captures its CUDA graph: one outlier of n_gen). One
 * context at a time, as a graph needs. Neither option changes bits, so every run must decode
 * the same tokens. */
static void run_ab(sl_model *m, sl_cli_model_flags *mf, ab_kind kind, int32_t n_gen,
                   int32_t n_vocab, int reps, ab_result *r)
{
    const size_t n = (size_t)n_gen * (size_t)reps;
    double *dt[2] = {malloc(n * sizeof(double)), malloc(n * sizeof(double))};
    int32_t *tok0 = malloc((size_t)(n_gen + 1) * sizeof *tok0);
    int32_t *toks = malloc((size_t)(n_gen + 1) * sizeof *toks);
    size_t k[2] = {0, 0};
    uint64_t la[2] = {0, 0}, layers[2] = {0, 0}; /* decode steps' launches and device layers */
    bool same = true, pdl = true;
    sl_error err = {0};
    if (!dt[0] || !dt[1] || !tok0 || !toks) {
        snprintf(r->why, sizeof r->why, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2 * reps; i++) {
        const int side = (i / 2) % 2 ? 1 - i % 2 : i % 2; /* 0 1, 1 0, 0 1, ... */
        sl_ctx_options co = sl_ctx_options_default();
        co.n_ctx = AB_PROMPT + n_gen + 1;
        sl_cli_ctx_sched(mf, &co);
        if (kind == AB_PDL) co.no_pdl = side == 1;
        else co.no_fusion = side == 1;
        sl_ctx *c = NULL;
        int32_t p[AB_PROMPT], t = 0;
        prompt_ids(p, AB_PROMPT, n_vocab);
        sl_ctx_stats s0;
        if (sl_ctx_create(m, &co, &c, &err) || sl_ctx_eval_greedy(c, p, AB_PROMPT, &t, &err)) {
            sl_ctx_destroy(c);
            snprintf(r->why, sizeof r->why, "%s", err.msg);
            goto out;
        }
        sl_ctx_stats_get(c, &s0);
        toks[0] = t; /* the prefill's pick, then the steps' */
        for (int32_t j = 1; j <= n_gen; j++) {
            const double t0 = sl_cli_now_s();
            if (sl_ctx_eval_greedy(c, &t, 1, &t, &err)) {
                sl_ctx_destroy(c);
                snprintf(r->why, sizeof r->why, "%s", err.msg);
                goto out;
            }
            dt[side][k[side]++] = sl_cli_now_s() - t0;
            toks[j] = t;
        }
        sl_ctx_stats st;
        sl_ctx_stats_get(c, &st);
        if (side == 0) pdl = pdl && st.pdl;
        la[side] += st.dev_layer_launches - s0.dev_layer_launches;
        layers[side] += st.dev_layers - s0.dev_layers;
        sl_ctx_destroy(c);
        if (i == 0) memcpy(tok0, toks, (size_t)(n_gen + 1) * sizeof *toks);
        else same = same && !memcmp(tok0, toks, (size_t)(n_gen + 1) * sizeof *toks);
    }
    r->reps = reps;
    for (int side = 0; side < 2; side++) {
        r->ms[side] = sl_cli_steps_of(dt[side], k[side]).median_ms;
        r->launches[side] = la[side] && layers[side] ? (double)la[side] / layers[side] : -1;
    }
    r->same = same;
    r->effective = kind == AB_PDL ? pdl
                                  : r->launches[0] >= 0 && r->launches[0] < r->launches[1];
out:
    free(dt[0]);
    free(dt[1]);
    free(tok0);
    free(toks);
}

/* ,"KEY":{...} (null when it did not run), and ,"KEY_error":"..." when it failed */
static void ab_json(const char *key, const ab_result *r)
{
    printf(",\"%s\":", key);
    if (r->reps) {
        printf("{\"reps\":%d,\"prompt_tokens\":%d,\"on_ms_median\":", r->reps, (int)AB_PROMPT);
        sl_json_f64(stdout, r->ms[0]);
        printf(",\"off_ms_median\":");
        sl_json_f64(stdout, r->ms[1]);
        for (int side = 0; side < 2; side++) {
            printf(",\"%s_launches_per_layer\":", side ? "off" : "on");
            if (r->launches[side] < 0) printf("null");
            else sl_json_f64(stdout, r->launches[side]);
        }
        printf(",\"same_tokens\":%s,\"effective\":%s}", r->same ? "true" : "false",
               r->effective ? "true" : "false");
    } else {
        printf("null");
    }
    if (r->why[0]) {
        printf(",\"%s_error\":", key);
        sl_json_cstr(stdout, r->why);
    }
}

/* The text row's "; --pdl-ab R: ..." */
static void ab_text(int kind, const ab_result *r)
{
    if (r->reps) {
        printf("; %s %d: %.3f ms/token with %s, %.3f without (medians)", k_ab[kind].flag,
               r->reps, r->ms[0], k_ab[kind].what, r->ms[1]);
        if (r->launches[0] >= 0 && r->launches[1] >= 0)
            printf(", %.1f / %.1f kernel launches per device layer", r->launches[0],
                   r->launches[1]);
        printf("%s%s", r->effective ? "" : " (not in effect)",
               r->same ? "" : "; THE TOKENS DIFFER");
    }
    if (r->why[0]) printf("; %s failed: %s", k_ab[kind].flag, r->why);
}

/* Returns 0 (r->ok says whether it ran; r->why if not) or 1 on an out-of-memory. */
static int run_placement(const char *path, sl_model_options mo, sl_cli_model_flags *mf,
                         const char *trace_path, int32_t n_prompt, int32_t n_gen,
                         bool relu_dense, bool profile, const int *ab_reps, sl_placement *mode,
                         run_result *r)
{
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err = {0};
    double *dt = malloc(2 * (size_t)n_gen * sizeof *dt); /* the steps' times, CPU GB/s */
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
    r->compute_threads = info.n_threads;
    r->tb = sl_cli_plan_token_bytes(m, mode);
    sl_cli_plan_describe(m, r->ran, sizeof r->ran);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = n_prompt + n_gen + 1;
    co.relu_dense = relu_dense;
    co.profile_steps = profile;
    sl_cli_ctx_sched(mf, &co);
    if (sl_ctx_create(m, &co, &c, &err)) goto fail;
    if (profile && sl_ctx_step_profile(c, r->pprof.p0, SL_BENCH_STEP_KINDS, &r->pprof.n, &err))
        goto fail;
    prompt_ids(ptok, n_prompt, info.n_vocab);
    /* greedy decoding, the pick taken where the output layer runs (only the id crosses back
     * from a GPU), so each timed step is one sl_ctx_eval_greedy */
    int32_t tok;
    t0 = sl_cli_now_s();
    if (sl_ctx_eval_greedy(c, ptok, (size_t)n_prompt, &tok, &err)) goto fail;
    const double pf = sl_cli_now_s() - t0;
    r->prefill_tps = pf > 0 ? n_prompt / pf : 0;
    sl_ctx_stats s0, s1;
    sl_ctx_stats_get(c, &s0);
    r->prefill_stream_layers = s0.stream_layers;
    r->prefill_stream_bytes = s0.stream_bytes;
    if (profile && sl_ctx_step_profile(c, r->prof.p0, SL_BENCH_STEP_KINDS, &r->prof.n, &err))
        goto fail;
    if (profile) {
        memcpy(r->pprof.p1, r->prof.p0, sizeof r->pprof.p1);
        r->pprof.steps = n_prompt;
    }
    double *eg = dt + n_gen; /* each step's CPU expert GB/s */
    if (sl_bench_decode_steps(c, &tok, n_gen, dt, eg, &err)) goto fail;
    r->steps = sl_cli_steps_of(dt, (size_t)n_gen);
    r->decode_ms = r->steps.mean_ms;
    r->decode_tps = r->decode_ms > 0 ? 1e3 / r->decode_ms : 0;
    sl_ctx_stats_get(c, &s1);
    if (profile) {
        if (sl_ctx_step_profile(c, r->prof.p1, SL_BENCH_STEP_KINDS, &r->prof.n, &err)) goto fail;
        r->prof.steps = n_gen;
    }
    r->scheduler = s1.moe_scheduler;
    r->sched_mode = s1.moe_mode;
    r->calls_cpu = (double)(s1.expert_calls_cpu - s0.expert_calls_cpu) / n_gen;
    r->calls_gpu = (double)(s1.expert_calls_gpu - s0.expert_calls_gpu) / n_gen;
    r->mcalls_cpu = (double)(s1.moe_calls_cpu - s0.moe_calls_cpu) / n_gen;
    r->mcalls_post = (double)(s1.moe_calls_post - s0.moe_calls_post) / n_gen;
    r->mcalls_full = (double)(s1.moe_calls_full - s0.moe_calls_full) / n_gen;
    r->copy_bytes = (double)(s1.copy_bytes - s0.copy_bytes) / n_gen;
    const double nn = (double)(s1.ffn_neurons - s0.ffn_neurons);
    r->relu_zero = nn > 0 ? (double)(s1.ffn_neurons_zero - s0.ffn_neurons_zero) / nn : -1;
    r->relu_skip = nn > 0 ? (double)(s1.ffn_neurons_skipped - s0.ffn_neurons_skipped) / nn : -1;
    r->moe_scheduler = s1.moe_scheduler; /* a static name (sl_moe_name) */
    r->cost = sl_bench_dev_cost_of(&s0, &s1, n_gen, info.n_layer, eg);
    r->pdl = s1.pdl;
    snprintf(r->graph_error, sizeof r->graph_error, "%s", s1.graph_error ? s1.graph_error : "");
    r->ok = true;
    if (mf->trace) {
        sl_ctx_stats st;
        sl_ctx_stats_get(c, &st);
        if (st.moe_scheduler && !strcmp(st.moe_scheduler, "fetch")) {
            if (sl_ctx_trace_write(c, trace_path, &err)) goto fail;
            r->traced = true;
        }
    }
    sl_ctx_destroy(c);
    c = NULL;
    for (int i = 0; i < AB_N; i++)
        if (ab_reps[i]) run_ab(m, mf, (ab_kind)i, n_gen, info.n_vocab, ab_reps[i], &r->ab[i]);
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

/* DeepSeek-V3's per-layer shape (config.json of deepseek-ai/DeepSeek-V3: hidden 7168, 128 heads,
 * q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, 256 experts of 2048 in 8 groups of which
 * 4 are used, top-8, one shared expert, first_k_dense_replace 3 of width 18432, vocab 129280)
 * with 2 of its 61 layers: the first dense, the second MoE. Q4_K (the per-head MLA matrices,
 * 128 and 512 wide, stay F16: not whole super-blocks); ~7 GB. */
static void synth_shape_ds3(sl_synth_params *p)
{
    sl_synth_defaults(SL_SYNTH_DEEPSEEK2, p);
    p->type = SL_GGML_Q4_K;
    p->seed = 1;
    p->neuron_skew = 1.0;
    p->n_layer = 2, p->n_embd = 7168, p->n_ff = 2048, p->n_expert = 256;
    p->n_expert_used = 8, p->n_head = 128, p->n_head_kv = 1, p->n_vocab = 129280;
    p->n_ctx = 4096;
    p->mla_q_lora = 1536, p->mla_kv_lora = 512, p->mla_nope = 128, p->mla_rope = 64;
    p->mla_v = 128, p->n_dense_lead = 1, p->n_ff_dense = 18432;
}

typedef enum shape_kind {
    SHAPE_SMALL,
    SHAPE_QWEN3_30B,
    SHAPE_GPT_OSS_20B,
    SHAPE_DEEPSEEK_V3,
    SHAPE_COUNT
} shape_kind;
static const char *const k_shapes[] = {"small", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v3"};

static void synth_shape(shape_kind shape, sl_synth_params *p)
{
    if (shape == SHAPE_DEEPSEEK_V3) {
        synth_shape_ds3(p);
        return;
    }
    sl_synth_defaults(shape == SHAPE_GPT_OSS_20B ? SL_SYNTH_GPT_OSS : SL_SYNTH_QWEN3MOE, p);
    p->type = SL_GGML_Q4_K;
    p->seed = 1;
    p->neuron_skew = 1.0; /* hot/cold FFN neurons, for placement to find (mkmodel's default 0) */
    if (shape == SHAPE_GPT_OSS_20B) {
        /* gpt-oss-20b per layer (config.json): hidden 2880, 32 experts of intermediate 2880,
         * 4 per token, vocab 201088, window 128; head_dim 64 as there, so 45 heads */
        p->type = SL_GGML_MXFP4;
        p->n_layer = 4, p->n_embd = 2880, p->n_ff = 2880, p->n_expert = 32;
        p->n_expert_used = 4, p->n_head = 45, p->n_head_kv = 5, p->n_vocab = 201088;
        p->n_ctx = 4096, p->n_swa = 128;
    } else if (shape == SHAPE_QWEN3_30B) {
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
    bool json = false, keep = false, profile = false;
    shape_kind sk = SHAPE_SMALL;
    int64_t n_gen = 32, n_prompt = 8;
    int ab_reps[AB_N] = {0}, no_ab[AB_N] = {0}, abi;
    while (sl_cli_args_next(&a)) {
        const char *v;
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", "--keep") || sl_cli_is(&a, "--profile", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            if (!strcmp(a.flag, "--json")) json = true;
            else if (!strcmp(a.flag, "--profile")) profile = true;
            else keep = true;
        } else if (sl_cli_is(&a, "--shape", NULL)) {
            if (!(shape = sl_cli_value(&a))) return 2;
            int k = 0;
            while (k < SHAPE_COUNT && strcmp(shape, k_shapes[k])) k++;
            if (k == SHAPE_COUNT)
                return sl_cli_usage_error(k_cmd, "--shape '%s': unknown (small, qwen3-30b-a3b, "
                                          "gpt-oss-20b, deepseek-v3)", shape);
            sk = (shape_kind)k;
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
        } else if ((abi = ab_flag(&a)) >= 0) {
            int64_t reps = 0;
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, AB_MAX_REPS, &reps))
                return 2;
            ab_reps[abi] = (int)reps;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (mf.path && shape)
        return sl_cli_usage_error(k_cmd, "-m and --shape exclude each other");
    /* the A/B contexts replay graphs and keep no trace: beside a profiled or traced row they
     * would measure something else than it */
    for (int i = 0; i < AB_N; i++) {
        if (ab_reps[i] && (!mf.placement_given || profile || mf.trace))
            return sl_cli_usage_error(k_cmd, "%s needs --placement (the row it follows) and "
                                      "excludes --profile and --trace", k_ab[i].flag);
        if (ab_reps[i] && sl_cli_given_get(&a, k_ab[i].off_flag))
            return sl_cli_usage_error(k_cmd, "%s and %s exclude each other (the A/B runs both "
                                      "sides)", k_ab[i].flag, k_ab[i].off_flag);
    }

    /* the device first: a bad SLUICE_DEVICE or a cuda request without a GPU fails here, before
     * minutes of writing a synthetic model */
    dev_info dev;
    if (dev_resolve(mf.opt.device, &dev)) return 1;
    const bool cuda = dev.kind == SL_DEVICE_CUDA;
    const char *dev_name = sl_device_kind_name(dev.kind);
    if (dev.notice[0] && !json) fprintf(stderr, "bench decode: %s\n", dev.notice);
    if (cuda && dev.hbm_gbps <= 0)
        fprintf(stderr, "sluice bench decode: HBM bandwidth not measured (%s): device bounds "
                        "left out\n", dev.hbm_why);

    /* --trace is checked (and its temporary created) before a model is written or loaded */
    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    sl_cli_out tr = {0};
    int prc = 0;
    if (mf.trace && ((mf.path && sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index)) ||
                     (prc = sl_cli_out_prepare(&io, &tr, "--trace", mf.trace,
                                               SL_CLI_OUT_BY_NAME)))) {
        sl_cli_io_free(&io);
        return prc ? prc : 1;
    }
    char synth_path[4096] = "";
    const char *path = mf.path;
    if (!path) {
        const bool big = sk == SHAPE_QWEN3_30B;
        sl_synth_params sp;
        synth_shape(sk, &sp);
        if ((size_t)snprintf(synth_path, sizeof synth_path, "%s/sluice-bench-decode-%s-%d.gguf",
                             dir, k_shapes[sk], (int)getpid()) >=
            sizeof synth_path) {
            sl_cli_out_discard(&tr);
            sl_cli_io_free(&io);
            return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
        }
        if (big)
            fprintf(stderr, "bench decode: warning: --shape qwen3-30b-a3b writes ~17 GB to %s and "
                            "loads as much into RAM (writing takes ~10 s on 16 cores; "
                            "--keep, then -m FILE to reuse)\n", dir);
        if (sk == SHAPE_DEEPSEEK_V3)
            fprintf(stderr, "bench decode: warning: --shape deepseek-v3 writes ~7 GB to %s and "
                            "loads as much into RAM (--keep, then -m FILE to reuse)\n", dir);
        if (!json) fprintf(stderr, "bench decode: writing the %s synthetic model to %s ...\n",
                           k_shapes[sk], synth_path);
        sl_error err = {0};
        const double t0 = sl_cli_now_s();
        sl_synth_summary sum;
        /* -t threads write it too (0: every online CPU) */
        if (sl_synth_write(&sp, synth_path, mf.opt.n_threads, NULL, NULL, NULL, NULL, &sum,
                           &err)) {
            fprintf(stderr, "sluice bench decode: %s: %s\n", synth_path, err.msg);
            sl_cli_out_discard(&tr);
            sl_cli_io_free(&io);
            return 1;
        }
        if (!json)
            fprintf(stderr, "bench decode: written in %.1f s on %d threads\n",
                    sl_cli_now_s() - t0, sum.n_threads);
        path = synth_path;
    }

    int rc = 1;
    sl_bench_bytes ws;
    run_result runs[MAX_RUNS];
    size_t n_runs = 0;
    memset(runs, 0, sizeof runs);
    /* the model's expert ratio, from the engine's view of it */
    sl_model_info info = {0};
    {
        sl_model_options probe = mf.opt;
        probe.placement = SL_PLACE_CPU;
        sl_model *m = NULL;
        sl_error err = {0};
        if (sl_model_open(path, &probe, &m, &err)) {
            /* engine messages usually name the file already; say it once either way */
            if (strstr(err.msg, path)) fprintf(stderr, "sluice bench decode: %s\n", err.msg);
            else fprintf(stderr, "sluice bench decode: %s: %s\n", path, err.msg);
            goto done;
        }
        sl_model_info_get(m, &info);
        sl_model_close(m);
    }
    const double expert_frac = info.n_expert > 0 ? (double)info.n_expert_used / info.n_expert : 1;
    if (sl_bench_model_bytes(k_cmd, path, &ws)) goto done;
    const double bytes_tok = (double)ws.dense + (double)ws.embd_row + expert_frac * ws.experts;
    int threads = 0;
    size_t mib = 0;
    const double gbps = sl_bench_stream_gbps(&mf.opt, &threads, &mib);
    if (gbps <= 0) goto done;
    const double host_bound_ms = bytes_tok / (gbps * 1e9) * 1e3; /* every byte from the host */

    /* gpu joins the default list only on cuda: on sim its numbers would be CPU numbers */
    sl_placement list[3] = {SL_PLACE_CPU, SL_PLACE_EXPERTS_CPU, SL_PLACE_GPU};
    size_t n_list = cuda ? 3 : 2;
    if (mf.placement_given) {
        list[0] = mf.opt.placement;
        n_list = 1;
    }
    char gpu_why[SL_ERROR_MSG_BYTES] = "";
    if (!cuda)
        snprintf(gpu_why, sizeof gpu_why, "device is %s, not cuda (--placement gpu --device sim "
                 "runs its code path on CPU kernels)", dev_name);
    else if (ws.total > dev.props.free_mem_bytes / 10 * 9) /* the engine's auto rule */
        snprintf(gpu_why, sizeof gpu_why, "model %.1f GiB > 90%% of free %.1f GiB",
                 ws.total / 1073741824.0, dev.props.free_mem_bytes / 1073741824.0);
    for (size_t k = 0; k < n_list; k++) {
        sl_model_options mo = mf.opt;
        mo.placement = list[k];
        /* device placements run on the device resolved above, so auto is decided once */
        if (list[k] != SL_PLACE_CPU) mo.device = dev_name;
        run_result *r = &runs[n_runs++];
        r->placement = sl_cli_placement_name(list[k]);
        r->device = list[k] == SL_PLACE_CPU ? (mo.device ? mo.device : "none") : mo.device;
        if (list[k] == SL_PLACE_GPU && cuda && gpu_why[0]) {
            snprintf(r->why, sizeof r->why, "%s", gpu_why); /* would not fit: not tried */
            continue;
        }
        sl_placement p = SL_PLACE_CPU; /* what the plan resolved to (auto's choice) */
        if (run_placement(path, mo, &mf, sl_cli_out_name(&tr), (int32_t)n_prompt,
                          (int32_t)n_gen, false, profile, k ? no_ab : ab_reps, &p, r)) {
            fprintf(stderr, "sluice bench decode: out of memory\n");
            goto done;
        }
        r->bound_ms = bound_ms(r->tb, &dev, gbps);
        r->bound_kind = bound_kind(p, r->device, r->tb);
    }
    /* a ReLU model: the first placement again with every neuron computed (relu_dense), the
     * same-run baseline of the sparse FFN's speed-up */
    if (n_runs && runs[0].ok && runs[0].relu_zero >= 0 && n_runs < MAX_RUNS) {
        run_result *r = &runs[n_runs++];
        sl_model_options mo = mf.opt;
        mo.placement = list[0];
        if (list[0] != SL_PLACE_CPU) mo.device = dev_name;
        snprintf(r->label, sizeof r->label, "%s dense", runs[0].placement);
        r->placement = r->label;
        r->device = runs[0].device;
        sl_placement p = SL_PLACE_CPU;
        if (run_placement(path, mo, &mf, sl_cli_out_name(&tr), (int32_t)n_prompt,
                          (int32_t)n_gen, true, profile, no_ab, &p, r)) {
            fprintf(stderr, "sluice bench decode: out of memory\n");
            goto done;
        }
        r->bound_ms = bound_ms(r->tb, &dev, gbps);
        r->bound_kind = bound_kind(p, r->device, r->tb);
    }
    /* --vram-budget: the same budget spent four ways (llama.cpp's -ngl, --n-cpu-moe,
     * PowerInfer's hot/cold neurons, static hot experts), each the best of its kind that fits */
    for (int kind = 0; mf.opt.vram_budget && kind < 4 && n_runs < MAX_RUNS; kind++) {
        run_result *r = &runs[n_runs];
        sl_model_options mo = mf.opt;
        mo.device = dev_name;
        if (sl_bench_budget_row(k_cmd, path, kind, &mo, &info, (int32_t)n_prompt, gbps,
                       cuda ? dev.hbm_gbps : gbps, dir, r->label, sizeof r->label))
            continue;
        n_runs++;
        r->placement = r->label;
        r->device = dev_name;
        sl_placement p = SL_PLACE_CPU;
        /* static hot: its own scheduler string (over --sched) */
        sl_cli_model_flags rf = mf;
        if (kind == 3 && sl_bench_budget_hot_sched(path, &mo, &info, (int32_t)n_prompt,
                                                   r->hot_sched, sizeof r->hot_sched) == 0)
            rf.sched = r->hot_sched;
        if (run_placement(path, mo, &rf, sl_cli_out_name(&tr), (int32_t)n_prompt,
                          (int32_t)n_gen, false, profile, no_ab, &p, r)) {
            fprintf(stderr, "sluice bench decode: out of memory\n");
            sl_bench_budget_row_done(&mo);
            goto done;
        }
        sl_bench_budget_row_done(&mo);
        r->bound_ms = bound_ms(r->tb, &dev, gbps);
        r->bound_kind = bound_kind(p, r->device, r->tb);
    }
    bool gpu_ran = false;
    for (size_t i = 0; i < n_runs; i++) gpu_ran |= runs[i].ok && !strcmp(runs[i].placement, "gpu");
    const bool gpu_available = cuda && !gpu_why[0];

    if (json) {
        printf("{\"model\":");
        sl_json_cstr(stdout, path);
        printf(",\"shape\":");
        sl_json_cstr(stdout, mf.path ? NULL : shape ? shape : "small");
        printf(",\"arch\":");
        sl_json_cstr(stdout, info.arch);
        printf(",\"device_kind\":\"%s\",\"device_name\":", dev_name);
        sl_json_cstr(stdout, dev.props.name);
        printf(",\"device_free_bytes\":%" PRIu64 ",\"hbm_gbps\":", dev.props.free_mem_bytes);
        if (cuda && dev.hbm_gbps > 0) sl_json_f64(stdout, dev.hbm_gbps);
        else printf("null");
        printf(",\"threads\":%d,\"n_prompt\":%" PRId64 ",\"n_decode\":%" PRId64
               ",\"weight_bytes\":%" PRIu64 ",\"bytes_per_token\":%.0f,\"roofline_gbps\":",
               threads, n_prompt, n_gen, ws.total, bytes_tok);
        sl_json_f64(stdout, gbps);
        printf(",\"bound_ms_per_token\":"); /* all bytes at the host rate (the cpu bound) */
        sl_json_f64(stdout, host_bound_ms);
        printf(",\"runs\":[");
        for (size_t i = 0; i < n_runs; i++) {
            const run_result *r = &runs[i];
            printf("%s{\"placement\":\"%s\",\"device\":\"%s\",\"ok\":%s", i ? "," : "",
                   r->placement, r->device, r->ok ? "true" : "false");
            printf(",\"placement_ran\":");
            sl_json_cstr(stdout, r->ran[0] ? r->ran : NULL);
            printf(",\"sched\":");
            sl_json_cstr(stdout, mf.sched);
            if (r->ok) {
                printf(",\"scheduler\":");
                sl_json_cstr(stdout, r->scheduler);
                printf(",\"sched_mode\":");
                sl_json_cstr(stdout, r->sched_mode);
                printf(",\"copy_bytes_per_step\":%.0f", r->copy_bytes);
                sl_bench_decode_json(stdout, &r->steps, r->calls_cpu, r->calls_gpu,
                                     r->scheduler && !strcmp(r->scheduler, "fetch"),
                                     r->mcalls_cpu, r->mcalls_post, r->mcalls_full);
                printf(",\"load_s\":");
                sl_json_f64(stdout, r->load_s);
                printf(",\"prefill_tps\":");
                sl_json_f64(stdout, r->prefill_tps);
                printf(",\"prefill_stream_layers\":%" PRIu64 ",\"prefill_stream_bytes\":%" PRIu64,
                       r->prefill_stream_layers, r->prefill_stream_bytes);
                printf(",\"decode_ms_per_token\":");
                sl_json_f64(stdout, r->decode_ms);
                printf(",\"decode_tps\":");
                sl_json_f64(stdout, r->decode_tps);
                printf(",\"bound_kind\":\"%s\",\"bound_ms_per_token\":", r->bound_kind);
                if (r->bound_ms > 0) sl_json_f64(stdout, r->bound_ms);
                else printf("null");
                printf(",\"fraction_of_bound\":");
                if (r->bound_ms > 0 && r->decode_ms > 0)
                    sl_json_f64(stdout, r->bound_ms / r->decode_ms);
                else printf("null");
                printf(",\"device_bytes_per_token\":%.0f,\"host_bytes_per_token\":%.0f",
                       r->tb.dev, r->tb.host);
                printf(",\"gpu_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64
                       ",\"compute_threads\":%d", r->gpu_bytes, r->host_bytes,
                       r->compute_threads);
                printf(",\"moe_scheduler\":");
                sl_json_cstr(stdout, r->moe_scheduler);
                sl_bench_dev_cost_json(stdout, &r->cost);
                printf(",\"graph_error\":");
                sl_json_cstr(stdout, r->graph_error[0] ? r->graph_error : NULL);
                sl_bench_step_prof_json(stdout, "step_profile", &r->prof);
                sl_bench_step_prof_json(stdout, "prefill_step_profile", &r->pprof);
                printf(",\"pdl\":%s", r->pdl ? "true" : "false");
                for (int i = 0; i < AB_N; i++) ab_json(k_ab[i].key, &r->ab[i]);
                if (r->relu_zero >= 0) {
                    printf(",\"relu_zero_frac\":");
                    sl_json_f64(stdout, r->relu_zero);
                    printf(",\"relu_skip_frac\":");
                    sl_json_f64(stdout, r->relu_skip);
                }
            } else {
                printf(",\"error\":");
                sl_json_cstr(stdout, r->why);
            }
            putchar('}');
        }
        printf("],\"gpu\":{\"available\":%s,\"reason\":", gpu_available ? "true" : "false");
        sl_json_cstr(stdout, gpu_why[0] ? gpu_why : NULL);
        printf("}}\n");
    } else {
        printf("bench decode: %s (%s, %" PRId32 " layers", path, info.arch, info.n_layer);
        if (info.n_expert) printf(", %" PRId32 " experts top-%" PRId32, info.n_expert,
                                  info.n_expert_used);
        printf("), %d threads, prefill %" PRId64 ", decode %" PRId64 " tokens\n", threads,
               n_prompt, n_gen);
        printf("device: %s (%s, %.1f of %.1f GiB free)\n", dev.props.name, dev_name,
               dev.props.free_mem_bytes / 1073741824.0, dev.props.total_mem_bytes / 1073741824.0);
        printf("weights: %.1f MB; read per token %.2f MB = dense %.2f + embd row %.3f%s + "
               "experts %.2f x %.4f\n",
               ws.total / 1e6, bytes_tok / 1e6, ws.dense / 1e6, ws.embd_row / 1e6,
               ws.tied ? " (tied output: all of it)" : "", ws.experts / 1e6, expert_frac);
        printf("host bandwidth: streaming read %.2f GB/s (%zu MiB, %d threads) -> all-host bound "
               "%.3f ms/token (%.1f tok/s)\n",
               gbps, mib, threads, host_bound_ms, host_bound_ms > 0 ? 1e3 / host_bound_ms : 0.0);
        if (!cuda)
            printf("device bandwidth: sim device memory is host memory: device bytes count at "
                   "the host rate\n");
        else if (dev.hbm_gbps > 0)
            printf("device bandwidth: HBM %.1f GB/s (device-to-device copy, read + write of "
                   "%" PRIu64 " MiB)\n", dev.hbm_gbps, dev.hbm_copy_bytes >> 20);
        else
            printf("device bandwidth: HBM not measured (%s)\n", dev.hbm_why);
        printf("\n%-12s %-6s %8s %12s %14s %10s %15s %12s %9s  %s\n", "placement", "device",
               "load s", "prefill t/s", "decode ms/tok", "decode t/s", "median/p90 ms",
               "bound ms/tok", "of bound", "bound");
        for (size_t i = 0; i < n_runs; i++) {
            const run_result *r = &runs[i];
            if (!r->ok) {
                printf("%-12s %-6s unavailable: %s\n", r->placement, r->device, r->why);
                continue;
            }
            printf("%-12s %-6s %8.2f %12.1f %14.3f %10.1f %7.3f/%-7.3f", r->placement, r->device,
                   r->load_s, r->prefill_tps, r->decode_ms, r->decode_tps, r->steps.median_ms,
                   r->steps.p90_ms);
            if (r->bound_ms > 0)
                printf(" %12.3f %8.0f%%", r->bound_ms,
                       r->decode_ms > 0 ? 100 * r->bound_ms / r->decode_ms : 0.0);
            else
                printf(" %12s %9s", "-", "-");
            printf("  %s: %.2f MB dev + %.2f MB host", r->bound_kind, r->tb.dev / 1e6,
                   r->tb.host / 1e6);
            if (r->relu_zero >= 0)
                printf("; ReLU gate <= 0 %.1f%%, skipped %.1f%%", 100 * r->relu_zero,
                       100 * r->relu_skip);
            printf("; ran %s, %d CPU threads", r->ran, r->compute_threads);
            if (r->scheduler)
                printf(", %s scheduler (mode %s)", r->scheduler,
                       r->sched_mode ? r->sched_mode : "?");
            if (r->moe_scheduler)
                printf("; moe %s", r->moe_scheduler);
            if (r->cost.calls_per_layer > 0)
                printf("; per layer %.2f syncs, %.1f device calls; PCIe %.2f MB/token",
                       r->cost.syncs_per_layer, r->cost.calls_per_layer,
                       r->cost.pcie_expert_bytes_per_token / 1e6);
            if (r->cost.steps_per_layer >= 0)
                printf("; %.1f device steps per device layer", r->cost.steps_per_layer);
            if (r->cost.launches_per_layer >= 0)
                printf(" (%.1f kernel launches per device layer)",
                       r->cost.launches_per_layer);
            if (r->cost.graph_passes_per_step > 0)
                printf("; %.0f%% of the steps one CUDA graph launch",
                       100 * r->cost.graph_passes_per_step);
            if (r->graph_error[0]) printf("; CUDA graph capture failed: %s", r->graph_error);
            for (int i = 0; i < AB_N; i++) ab_text(i, &r->ab[i]);
            if (r->prefill_stream_layers)
                printf("; prefill streamed %" PRIu64 " MoE layers' host experts (%.1f MB)",
                       r->prefill_stream_layers, (double)r->prefill_stream_bytes / 1e6);
            if (r->cost.hot_bytes) /* issue 33: resident experts beside the host's */
                printf("; %.1f MB of experts resident, %.0f%% of the assignments there",
                       (double)r->cost.hot_bytes / 1e6,
                       r->calls_cpu + r->calls_gpu > 0
                           ? 100 * r->calls_gpu / (r->calls_cpu + r->calls_gpu) : 0.0);
            if (r->cost.cpu_expert_gbps > 0) /* issue 33: beside the read bound above */
                printf("; CPU experts %.2f GB/s (%.0f%% of the streaming read)",
                       r->cost.cpu_expert_gbps, gbps > 0 ? 100 * r->cost.cpu_expert_gbps / gbps
                                                         : 0.0);
            putchar('\n');
            sl_bench_step_prof_print(stdout, "decode", &r->prof);
            sl_bench_step_prof_print(stdout, "prefill", &r->pprof);
        }
        if (!gpu_ran && gpu_why[0] && !mf.placement_given)
            printf("%-12s unavailable: %s\n", "gpu", gpu_why);
        for (size_t i = 1; i < n_runs; i++) /* the ReLU baseline row, if there is one */
            if (runs[i].placement == runs[i].label && strstr(runs[i].label, " dense") &&
                runs[i].ok && runs[0].ok && runs[0].decode_ms > 0 && runs[0].prefill_tps > 0)
                printf("ReLU FFN, sparse vs dense (%s, same run): decode %.2fx, prefill %.2fx\n",
                       runs[0].placement, runs[i].decode_ms / runs[0].decode_ms,
                       runs[0].prefill_tps / runs[i].prefill_tps);
    }
    rc = 0;
    bool traced = false;
    for (size_t i = 0; i < n_runs; i++) {
        if (!runs[i].ok && mf.placement_given) { /* the one asked for did not run */
            fprintf(stderr, "sluice bench decode: --placement %s: %s\n", runs[i].placement,
                    runs[i].why);
            rc = 1;
        }
        traced |= runs[i].traced;
    }
    if (mf.trace && !traced) {
        fprintf(stderr, "sluice bench decode: --trace %s: no run used the fetch scheduler (needs "
                        "--sched mode=post|full|auto and a placement on the sim device)\n",
                mf.trace);
        rc = 1;
    }
    if (traced && sl_cli_out_commit(&io, &tr)) rc = 1;
done:
    sl_cli_out_discard(&tr);
    sl_cli_io_free(&io);
    if (synth_path[0] && !keep) unlink(synth_path);
    else if (synth_path[0] && !json) fprintf(stderr, "bench decode: kept %s\n", synth_path);
    return rc;
}
