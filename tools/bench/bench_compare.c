/* `bench compare`: Sluice beside llama.cpp on the same GGUF, the same cores, in one run (issue
 * 14's harness).
 *
 * Speed: R rounds; each round runs `llama-bench -m FILE -p P -n N -t T -r 1 -o json` (one
 * sample of each test after llama-bench's own warm-up; with several prompt sizes, -p 64,512,
 * one llama-bench per size, the first with the tg test) and then one Sluice sample of each test,
 * so that both sides see the same machine state (other builds, thermal) as the round goes by.
 * Sluice measures with llama-bench's definitions (llama-bench.cpp test_prompt / test_gen):
 *   ppP: the cache cleared, one eval of P tokens (BOS first when the model adds one, then
 *        pseudo-random ids), timed from the call to its return: P / time;
 *   tgN: the cache cleared, N one-token evals (BOS, then pseudo-random ids): N / total time;
 *   "@ dD" (-d D): after the cache is cleared, D tokens (BOS first) are evaluated untimed
 *        before the test (llama-bench's depth run), so the test reads a D-token cache;
 * each as mean ± sample stddev over the R samples (llama-bench's avg_ts / stddev_ts), through
 * the public API (runtime/sluice.h) with placement cpu and T threads; the prefill batch is
 * Sluice's default (512, llama-bench's default ubatch). Sluice warms up once before round 1
 * (one eval of each test), as llama-bench does in each process.
 * The table is llama-bench's markdown table with a Sluice row under each of its rows and the
 * ratio Sluice / llama.cpp; --json prints the same as one object, with each side's median
 * beside the mean. --sweep runs this over a grid of MoE shapes (bench_sweep.c).
 *
 * Agreement (optional): --perplexity TEXT runs llama-perplexity and `sluice perplexity` on the
 * file and text with the same context, chunks and threads and reports both PPLs; --greedy
 * PROMPT runs llama-completion and `sluice generate --temp 0` for --greedy-n tokens and reports
 * how many leading tokens of the two texts agree (both texts tokenized by Sluice's tokenizer).
 * Sluice's side runs as a child process of this binary (/proc/self/exe), as a user would run it.
 *
 * llama.cpp's tools are found as tools/common/peer_llama.h says (tools/peer/llama.cpp builds them).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/json_doc.h"
#include "tools/common/model_flags.h"
#include "tools/common/peer_llama.h"
#include "tools/common/subproc.h"

static const char *const k_cmd = "bench compare";

enum {
    MAX_REPS = 64,           /* == SL_PEER_MAX_SAMPLES: one sample per round and side */
    MAX_PROMPTS = 4,         /* -p 64,512: llama-bench's comma list */
    N_TESTS = MAX_PROMPTS + 1, /* pp per prompt size, tg */
};

static void usage(FILE *f)
{
    fputs("usage: tools/run bench compare -m FILE [-p 128] [-n 64] [-t N] [-r 5] [--json]\n"
          "         [--perplexity TEXT [--ctx 512] [--chunks 4]] [--greedy PROMPT\n"
          "         [--greedy-n 32]]\n"
          "       tools/run bench compare --sweep [flags] (a grid of MoE shapes and types;\n"
          "         bench compare --sweep --help)\n"
          "\n"
          "llama.cpp's llama-bench and Sluice on the same file and threads, alternating round by\n"
          "round (R rounds: llama-bench -r 1, then one Sluice sample of each test). Prints\n"
          "llama-bench's table with a Sluice row under each row and the ratio Sluice/llama.cpp.\n"
          "Definitions (llama-bench's): ppP = P / time of one P-token eval from an empty cache;\n"
          "tgN = N / time of N one-token evals from an empty cache; mean ± stddev over rounds.\n"
          "Sluice runs placement cpu. Build llama.cpp with tools/peer/llama.cpp (or point\n"
          "SLUICE_PEER_LLAMA_BIN at a folder holding llama-bench, llama-perplexity and\n"
          "llama-completion).\n"
          "\n"
          "  -m, --model FILE       the GGUF both sides run\n"
          "  -p, --n-prompt P[,P]   prompt tokens of the pp tests, up to 4 sizes (default 128;\n"
          "                         0: no pp test)\n"
          "  -n, --n-gen N          generated tokens of the tg test (default 64; 0: no tg test)\n"
          "  -d, --n-depth D        tokens in the cache before each test, evaluated untimed as\n"
          "                         llama-bench -d does (default 0; tests read \"pp512 @ d4096\")\n"
          "  -t, --threads N        threads of both sides (default: the online CPUs)\n"
          "  -r, --repetitions R    rounds (default 5, at most 64)\n"
          "  --json                 one JSON object on stdout instead of the table\n"
          "  --perplexity TEXT      also run llama-perplexity and sluice perplexity on TEXT\n"
          "  --ctx C, --chunks K    their context (default 512) and chunks (default 4)\n"
          "  --greedy PROMPT        also compare greedy text: llama-completion --temp 0 and\n"
          "                         sluice generate --temp 0 from PROMPT\n"
          "  --greedy-n N           tokens generated for --greedy (default 32)\n"
          "  --cpus LIST, --numa-node N   Sluice's binding (model flags)\n",
          f);
}

/* A small xorshift generator for the benchmark's token ids (llama-bench uses std::rand). */
static uint32_t next_id(uint64_t *s, int32_t n_vocab)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (uint32_t)((x >> 16) % (uint64_t)n_vocab);
}

typedef struct side_stats {
    double v[MAX_REPS];
    size_t n;
} side_stats;

/* The median of s's samples (0 with none): the sweep's figure, robust to a neighbour's build. */
static double median(const side_stats *s)
{
    double v[MAX_REPS];
    size_t n = s->n;
    memcpy(v, s->v, n * sizeof *v);
    for (size_t i = 1; i < n; i++) /* insertion sort: n <= 64 */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* mean and sample standard deviation (n - 1), as llama-bench's avg_ts / stdev */
static void stats(const side_stats *s, double *mean, double *sd)
{
    double sum = 0, sq = 0;
    for (size_t i = 0; i < s->n; i++) sum += s->v[i];
    *mean = s->n ? sum / (double)s->n : 0;
    for (size_t i = 0; i < s->n; i++) sq += (s->v[i] - *mean) * (s->v[i] - *mean);
    *sd = s->n > 1 ? sqrt(sq / (double)(s->n - 1)) : 0;
}

typedef struct test_row {
    int64_t n_prompt, n_gen;
    char name[32];
    side_stats llama, sluice;
} test_row;

typedef struct cmp {
    const char *model;
    int64_t p[MAX_PROMPTS], n, threads, reps;
    int64_t depth;                /* -d: tokens in the cache before each test (untimed) */
    size_t n_p;                   /* prompt sizes in p (0: no pp test) */
    char bin[4096];
    sl_peer_bench_row peer;       /* the last llama-bench row (model type, size, backend) */
    test_row t[N_TESTS];
    size_t n_tests;
    sl_model *m;
    sl_ctx *c;
    int32_t n_vocab;
    bool adds_bos;
    int32_t bos;
    uint64_t rng;
    uint64_t weight_bytes, n_params;
} cmp;

/* One eval of n tokens as llama-bench's test_prompt: BOS first when the model adds one, then
 * pseudo-random ids; *seconds its time. SL_ERR_NOMEM (message filled) without memory. */
static sl_status eval_prompt(cmp *x, int64_t n, double *seconds, sl_error *err)
{
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    if (!tok) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (%" PRId64 " tokens)", n);
    for (int64_t i = 0; i < n; i++)
        tok[i] = i == 0 && x->adds_bos ? x->bos : (int32_t)next_id(&x->rng, x->n_vocab);
    const double t0 = sl_cli_now_s();
    sl_status st = sl_ctx_eval(x->c, tok, (size_t)n, err);
    *seconds = sl_cli_now_s() - t0;
    free(tok);
    return st;
}

/* One Sluice sample of test t (tokens/s), or -1 after printing the error. */
static double sluice_sample(cmp *x, const test_row *t)
{
    sl_error err = {0};
    double dt = 0;
    if (sl_ctx_rewind(x->c, 0, &err)) goto fail;
    /* llama-bench's depth run: D tokens, untimed */
    if (x->depth > 0 && eval_prompt(x, x->depth, &dt, &err)) goto fail;
    if (t->n_prompt > 0) {
        if (eval_prompt(x, t->n_prompt, &dt, &err)) goto fail;
        return (double)t->n_prompt / dt;
    }
    int32_t tok = x->adds_bos ? x->bos : (int32_t)next_id(&x->rng, x->n_vocab);
    double t0 = sl_cli_now_s();
    for (int64_t i = 0; i < t->n_gen; i++) {
        if (sl_ctx_eval(x->c, &tok, 1, &err)) goto fail;
        tok = (int32_t)next_id(&x->rng, x->n_vocab);
    }
    return (double)t->n_gen / (sl_cli_now_s() - t0);
fail:
    fprintf(stderr, "sluice %s: %s: %s: %s\n", k_cmd, x->model, t->name, err.msg);
    return -1;
}

/* Runs llama-bench once (-r 1) and adds its samples; 1 after printing the error. */
static int llama_round(cmp *x)
{
    sl_peer_bench_row rows[4 * (MAX_PROMPTS + 1)];
    size_t nr = 0;
    sl_error err = {0};
    /* one llama-bench per prompt size (the first also runs tg), so each runs -r 1 */
    for (size_t i = 0; i < (x->n_p ? x->n_p : 1); i++) {
        size_t k = 0;
        if (sl_peer_bench_run(x->bin, x->model, x->n_p ? x->p[i] : 0, i == 0 ? x->n : 0,
                              x->depth, x->threads, 1, rows + nr, 4, &k, &err)) {
            fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
            return 1;
        }
        nr += k;
    }
    for (size_t i = 0; i < x->n_tests; i++) {
        test_row *tr = &x->t[i];
        size_t j = 0;
        while (j < nr && !(rows[j].n_prompt == tr->n_prompt && rows[j].n_gen == tr->n_gen &&
                           rows[j].n_depth == x->depth))
            j++;
        if (j == nr) {
            fprintf(stderr, "sluice %s: llama-bench printed no %s test\n", k_cmd, tr->name);
            return 1;
        }
        if (rows[j].n_threads != x->threads) {
            fprintf(stderr, "sluice %s: llama-bench ran %s with %" PRId64 " threads, not %" PRId64
                    "\n", k_cmd, tr->name, rows[j].n_threads, x->threads);
            return 1;
        }
        for (size_t s = 0; s < rows[j].n_samples && tr->llama.n < MAX_REPS; s++)
            tr->llama.v[tr->llama.n++] = rows[j].samples_ts[s];
        x->peer = rows[j];
    }
    return 0;
}

static void size_str(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes < 1024ull * 1024 * 1024) snprintf(buf, cap, "%.2f MiB", bytes / 1024.0 / 1024.0);
    else snprintf(buf, cap, "%.2f GiB", bytes / 1024.0 / 1024.0 / 1024.0);
}

static void params_str(uint64_t n, char *buf, size_t cap)
{
    if (n < 1000ull * 1000 * 1000) snprintf(buf, cap, "%.2f M", n / 1e6);
    else snprintf(buf, cap, "%.2f B", n / 1e9);
}

/* llama-bench's markdown table (its column widths: markdown_printer::get_field_width) plus a
 * column for the ratio, filled on Sluice's rows. */
static void print_table(const cmp *x)
{
    static const struct { const char *name; int width; } cols[] = {
        {"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"threads", 7},
        {"test", 15}, {"t/s", 20}, {"sluice/llama", 12}};
    enum { NC = sizeof cols / sizeof cols[0] };
    printf("|");
    for (int i = 0; i < NC; i++) printf(" %*s |", cols[i].width, cols[i].name);
    printf("\n|");
    for (int i = 0; i < NC; i++) {
        int w = abs(cols[i].width);
        printf(" ");
        for (int k = 0; k < w - 1; k++) putchar('-');
        printf("%s |", cols[i].width > 0 ? ":" : "-");
    }
    printf("\n");
    char lsize[32], lparams[32], ssize[32], sparams[32];
    size_str(x->peer.model_size, lsize, sizeof lsize);
    params_str(x->peer.model_n_params, lparams, sizeof lparams);
    size_str(x->weight_bytes, ssize, sizeof ssize);
    params_str(x->n_params, sparams, sizeof sparams);
    char backend[40];
    snprintf(backend, sizeof backend, "%s", x->peer.backend);
    for (size_t i = 0; i < x->n_tests; i++) {
        const test_row *t = &x->t[i];
        double lm, ls, sm, ss;
        stats(&t->llama, &lm, &ls);
        stats(&t->sluice, &sm, &ss);
        char lts[48], sts[48], ratio[32];
        snprintf(lts, sizeof lts, "%.2f ± %.2f", lm, ls);
        snprintf(sts, sizeof sts, "%.2f ± %.2f", sm, ss);
        snprintf(ratio, sizeof ratio, "%.2f", lm > 0 ? sm / lm : 0.0);
        /* "±" is two bytes in UTF-8 and one column: widen the field by one to keep alignment */
        printf("| %-30s | %10s | %10s | %-10s | %7" PRId64 " | %15s | %21s | %12s |\n",
               x->peer.model_type, lsize, lparams, backend, x->threads, t->name, lts, "");
        printf("| %-30s | %10s | %10s | %-10s | %7" PRId64 " | %15s | %21s | %12s |\n",
               x->peer.model_type, ssize, sparams, "Sluice CPU", x->threads, t->name, sts,
               ratio);
    }
}

/* ---- agreement ------------------------------------------------------------------------ */

typedef struct agree {
    bool ppl_run, greedy_run;
    double ppl_llama, ppl_llama_err, ppl_sluice, ppl_sluice_err;
    double ppl_llama_s, ppl_sluice_s;   /* wall time of each process */
    char *text_llama, *text_sluice;
    size_t same_tokens, n_tokens_llama, n_tokens_sluice, same_bytes;
} agree;

/* Runs argv; on a non-zero exit prints the tail of its stderr. 1 after printing an error. */
static int run_child(char *const argv[], sl_subproc_result *r)
{
    sl_error err = {0};
    if (sl_subproc_run(argv, NULL, r, &err)) {
        fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
        return 1;
    }
    if (r->exit_code) {
        size_t k = r->err_len > 2000 ? r->err_len - 2000 : 0;
        fprintf(stderr, "%s\nsluice %s: %s exited with status %d (its standard error above)\n",
                r->err + k, k_cmd, argv[0], r->exit_code);
        sl_subproc_result_free(r);
        return 1;
    }
    return 0;
}

static int run_perplexity(cmp *x, const char *text, int64_t ctx, int64_t chunks, agree *g)
{
    char exe[4200], self[4096], c[32], k[32], t[32];
    snprintf(exe, sizeof exe, "%s/llama-perplexity", x->bin);
    snprintf(c, sizeof c, "%" PRId64, ctx);
    snprintf(k, sizeof k, "%" PRId64, chunks);
    snprintf(t, sizeof t, "%" PRId64, x->threads);
    if (sl_cli_self_exe(k_cmd, self, sizeof self)) return 1;
    char *la[] = {exe, "-m", (char *)x->model, "-f", (char *)text, "-c", c, "--chunks", k,
                  "-t", t, NULL};
    char *sa[] = {self, "perplexity", "-m", (char *)x->model, "-f", (char *)text, "--ctx", c,
                  "--chunks", k, "-t", t, "--placement", "cpu", NULL};
    sl_subproc_result r;
    sl_error err = {0};
    fprintf(stderr, "bench compare: llama-perplexity ...\n");
    if (run_child(la, &r)) return 1;
    /* perplexity.cpp logs through LOG_INF: the final line may be on either stream */
    sl_status st = sl_peer_ppl_parse(r.err, r.err_len, &g->ppl_llama, &g->ppl_llama_err, &err);
    if (st) st = sl_peer_ppl_parse(r.out, r.out_len, &g->ppl_llama, &g->ppl_llama_err, &err);
    g->ppl_llama_s = r.seconds;
    sl_subproc_result_free(&r);
    if (st) {
        fprintf(stderr, "sluice %s: %s: %s\n", k_cmd, exe, err.msg);
        return 1;
    }
    fprintf(stderr, "bench compare: sluice perplexity ...\n");
    if (run_child(sa, &r)) return 1;
    st = sl_peer_ppl_parse(r.out, r.out_len, &g->ppl_sluice, &g->ppl_sluice_err, &err);
    g->ppl_sluice_s = r.seconds;
    sl_subproc_result_free(&r);
    if (st) {
        fprintf(stderr, "sluice %s: sluice perplexity: %s\n", k_cmd, err.msg);
        return 1;
    }
    g->ppl_run = true;
    return 0;
}

/* Leading tokens two texts share, both tokenized by Sluice without special tokens. */
static int same_prefix_tokens(cmp *x, agree *g)
{
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = 1;
    if (sl_cli_tokenize(x->m, k_cmd, x->model, g->text_llama, strlen(g->text_llama), false, false,
                        &a, &na) ||
        sl_cli_tokenize(x->m, k_cmd, x->model, g->text_sluice, strlen(g->text_sluice), false,
                        false, &b, &nb))
        goto done;
    size_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    g->same_tokens = k;
    g->n_tokens_llama = na;
    g->n_tokens_sluice = nb;
    size_t m = 0;
    while (g->text_llama[m] && g->text_llama[m] == g->text_sluice[m]) m++;
    g->same_bytes = m;
    rc = 0;
done:
    free(a);
    free(b);
    return rc;
}

static int run_greedy(cmp *x, const char *prompt, int64_t n_gen, agree *g)
{
    char exe[4200], self[4096], n[32], t[32];
    snprintf(exe, sizeof exe, "%s/llama-completion", x->bin);
    snprintf(n, sizeof n, "%" PRId64, n_gen);
    snprintf(t, sizeof t, "%" PRId64, x->threads);
    if (sl_cli_self_exe(k_cmd, self, sizeof self)) return 1;
    char *la[] = {exe, "-m", (char *)x->model, "-p", (char *)prompt, "-n", n, "--temp", "0",
                  "-t", t, "-no-cnv", "--no-display-prompt", "--no-warmup", NULL};
    char *sa[] = {self, "generate", "-m", (char *)x->model, "-p", (char *)prompt, "-n", n,
                  "--temp", "0", "-t", t, "--placement", "cpu", "--json", NULL};
    sl_subproc_result r;
    fprintf(stderr, "bench compare: llama-completion ...\n");
    if (run_child(la, &r)) return 1;
    size_t len = sl_peer_completion_text(r.out, r.out_len);
    g->text_llama = strndup(r.out, len);
    sl_subproc_result_free(&r);
    fprintf(stderr, "bench compare: sluice generate ...\n");
    if (!g->text_llama || run_child(sa, &r)) return 1;
    sl_jdoc *d = NULL;
    sl_error err = {0};
    const char *s = NULL;
    size_t sl = 0;
    if (!sl_jdoc_parse(r.out, r.out_len, 8, &d, &err)) {
        sl_jref v = sl_jdoc_get(d, 0, "text");
        s = v == SL_JNONE ? NULL : sl_jdoc_str(d, v, &sl);
    }
    if (s) g->text_sluice = strndup(s, sl);
    sl_jdoc_free(d);
    sl_subproc_result_free(&r);
    if (!s || !g->text_sluice) {
        fprintf(stderr, "sluice %s: sluice generate --json: no \"text\" (%s)\n", k_cmd,
                err.msg[0] ? err.msg : "out of memory");
        return 1;
    }
    if (same_prefix_tokens(x, g)) return 1;
    g->greedy_run = true;
    return 0;
}

/* ---- output ---------------------------------------------------------------------------- */

static void print_agree(const agree *g)
{
    if (g->ppl_run)
        printf("\nperplexity: llama.cpp %.4f +/- %.5f (%.1f s), Sluice %.4f +/- %.5f (%.1f s): "
               "difference %+.4f (%+.3f%%)\n",
               g->ppl_llama, g->ppl_llama_err, g->ppl_llama_s, g->ppl_sluice, g->ppl_sluice_err,
               g->ppl_sluice_s, g->ppl_sluice - g->ppl_llama,
               100 * (g->ppl_sluice - g->ppl_llama) / g->ppl_llama);
    if (g->greedy_run) {
        printf("\ngreedy text: the first %zu tokens agree (llama.cpp %zu, Sluice %zu tokens; "
               "%zu identical bytes)\n",
               g->same_tokens, g->n_tokens_llama, g->n_tokens_sluice, g->same_bytes);
        printf("  llama.cpp: %s\n  Sluice:    %s\n", g->text_llama, g->text_sluice);
    }
}

static void print_json(const cmp *x, const agree *g)
{
    printf("{\"model\":");
    sl_json_cstr(stdout, x->model);
    printf(",\"threads\":%" PRId64 ",\"repetitions\":%" PRId64 ",\"llama_cpp\":{\"bin\":",
           x->threads, x->reps);
    sl_json_cstr(stdout, x->bin);
    printf(",\"build_commit\":");
    sl_json_cstr(stdout, x->peer.build_commit);
    printf(",\"model_type\":");
    sl_json_cstr(stdout, x->peer.model_type);
    printf(",\"backend\":");
    sl_json_cstr(stdout, x->peer.backend);
    printf(",\"model_size\":%" PRIu64 ",\"model_n_params\":%" PRIu64 "},", x->peer.model_size,
           x->peer.model_n_params);
    printf("\"sluice\":{\"placement\":\"cpu\",\"weight_bytes\":%" PRIu64
           ",\"n_params\":%" PRIu64 "},\"rows\":[",
           x->weight_bytes, x->n_params);
    for (size_t i = 0; i < x->n_tests; i++) {
        const test_row *t = &x->t[i];
        double lm, ls, sm, ss;
        stats(&t->llama, &lm, &ls);
        stats(&t->sluice, &sm, &ss);
        printf("%s{\"test\":", i ? "," : "");
        sl_json_cstr(stdout, t->name);
        printf(",\"n_prompt\":%" PRId64 ",\"n_gen\":%" PRId64 ",\"n_depth\":%" PRId64
               ",\"llama_tps\":",
               t->n_prompt, t->n_gen, x->depth);
        sl_json_f64(stdout, lm);
        printf(",\"llama_tps_stddev\":");
        sl_json_f64(stdout, ls);
        printf(",\"sluice_tps\":");
        sl_json_f64(stdout, sm);
        printf(",\"sluice_tps_stddev\":");
        sl_json_f64(stdout, ss);
        printf(",\"ratio\":");
        sl_json_f64(stdout, lm > 0 ? sm / lm : 0);
        const double lmed = median(&t->llama), smed = median(&t->sluice);
        printf(",\"llama_tps_median\":");
        sl_json_f64(stdout, lmed);
        printf(",\"sluice_tps_median\":");
        sl_json_f64(stdout, smed);
        printf(",\"ratio_median\":");
        sl_json_f64(stdout, lmed > 0 ? smed / lmed : 0);
        const side_stats *sides[2] = {&t->llama, &t->sluice};
        for (int s = 0; s < 2; s++) {
            printf(s ? ",\"sluice_samples\":[" : ",\"llama_samples\":[");
            for (size_t k = 0; k < sides[s]->n; k++) {
                if (k) putchar(',');
                sl_json_f64(stdout, sides[s]->v[k]);
            }
            printf("]");
        }
        printf("}");
    }
    printf("]");
    if (g->ppl_run) {
        printf(",\"perplexity\":{\"llama\":");
        sl_json_f64(stdout, g->ppl_llama);
        printf(",\"llama_stderr\":");
        sl_json_f64(stdout, g->ppl_llama_err);
        printf(",\"sluice\":");
        sl_json_f64(stdout, g->ppl_sluice);
        printf(",\"sluice_stderr\":");
        sl_json_f64(stdout, g->ppl_sluice_err);
        printf(",\"llama_seconds\":");
        sl_json_f64(stdout, g->ppl_llama_s);
        printf(",\"sluice_seconds\":");
        sl_json_f64(stdout, g->ppl_sluice_s);
        printf("}");
    }
    if (g->greedy_run) {
        printf(",\"greedy\":{\"llama_text\":");
        sl_json_cstr(stdout, g->text_llama);
        printf(",\"sluice_text\":");
        sl_json_cstr(stdout, g->text_sluice);
        printf(",\"same_tokens\":%zu,\"llama_tokens\":%zu,\"sluice_tokens\":%zu,"
               "\"same_bytes\":%zu}",
               g->same_tokens, g->n_tokens_llama, g->n_tokens_sluice, g->same_bytes);
    }
    printf("}\n");
}

/* -p "64,512": up to MAX_PROMPTS distinct sizes in 1 .. 2^20, or "0" alone (no pp test).
 * Prints the usage error and returns 2 on a bad list. */
static int parse_prompts(const char *flag, const char *v, cmp *x)
{
    x->n_p = 0;
    char buf[128];
    if (strlen(v) >= sizeof buf) return sl_cli_usage_error(k_cmd, "%s '%s': too long", flag, v);
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    int64_t p;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (x->n_p == MAX_PROMPTS)
            return sl_cli_usage_error(k_cmd, "%s '%s': at most %d sizes", flag, v, MAX_PROMPTS);
        if (sl_cli_parse_i64(k_cmd, flag, tok, 0, 1 << 20, &p)) return 2;
        for (size_t i = 0; i < x->n_p; i++)
            if (x->p[i] == p) return sl_cli_usage_error(k_cmd, "%s '%s': %" PRId64 " twice",
                                                        flag, v, p);
        x->p[x->n_p++] = p;
    }
    if (x->n_p == 0) return sl_cli_usage_error(k_cmd, "%s '%s': no size", flag, v);
    for (size_t i = 0; i < x->n_p; i++)
        if (x->p[i] == 0) {
            if (x->n_p > 1)
                return sl_cli_usage_error(k_cmd, "%s '%s': 0 (no pp test) only alone", flag, v);
            x->n_p = 0;
        }
    return 0;
}

int sl_bench_compare(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--sweep")) return sl_bench_sweep(argc, argv);
    cmp x = {.p = {128}, .n_p = 1, .n = 64, .reps = 5, .rng = 0x9e3779b97f4a7c15ull};
    bool json = false;
    const char *ppl_text = NULL, *greedy = NULL;
    int64_t ppl_ctx = 512, ppl_chunks = 4, greedy_n = 32;
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        const char *v;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else if (sl_cli_is(&a, "-p", "--n-prompt")) {
            if (!(v = sl_cli_value(&a)) || parse_prompts(a.flag, v, &x)) return 2;
        } else if (sl_cli_is(&a, "-n", "--n-gen")) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 0, 1 << 20, &x.n))
                return 2;
        } else if (sl_cli_is(&a, "-d", "--n-depth")) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 0, 1 << 20, &x.depth))
                return 2;
        } else if (sl_cli_is(&a, "-r", "--repetitions")) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, MAX_REPS, &x.reps))
                return 2;
        } else if (sl_cli_is(&a, "--perplexity", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(k_cmd, "--perplexity: empty file name");
            ppl_text = v;
        } else if (sl_cli_is(&a, "--ctx", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 8, 1 << 20,
                                                            &ppl_ctx))
                return 2;
        } else if (sl_cli_is(&a, "--chunks", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, 1 << 20, &ppl_chunks))
                return 2;
        } else if (sl_cli_is(&a, "--greedy", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(k_cmd, "--greedy: empty prompt");
            greedy = v;
        } else if (sl_cli_is(&a, "--greedy-n", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, 1, 4096, &greedy_n))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (!x.n_p && !x.n) return sl_cli_usage_error(k_cmd, "-p 0 and -n 0: no test to run");
    if (mf.placement_given && mf.opt.placement != SL_PLACE_CPU)
        return sl_cli_usage_error(k_cmd, "--placement: only cpu is compared (llama.cpp runs "
                                         "CPU only here)");
    mf.opt.placement = SL_PLACE_CPU;
    x.model = mf.path;
    mf.opt.n_threads = sl_model_options_threads(&mf.opt);
    x.threads = mf.opt.n_threads;

    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    int rc = 1;
    agree g = {0};
    sl_error err = {0};
    if (sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index)) goto done;
    if (ppl_text) {
        FILE *f;
        uint64_t sz;
        if (sl_cli_io_open_input(&io, "--perplexity", ppl_text, &f, &sz)) goto done;
        fclose(f);
    }
    if (sl_peer_bin_dir(x.bin, sizeof x.bin, &err)) {
        fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
        goto done;
    }
    int64_t p_max = 0;
    for (size_t i = 0; i < x.n_p; i++) {
        x.t[x.n_tests] = (test_row){.n_prompt = x.p[i]};
        sl_peer_test_name(x.p[i], 0, x.depth, x.t[x.n_tests].name, sizeof x.t[0].name);
        x.n_tests++;
        if (x.p[i] > p_max) p_max = x.p[i];
    }
    if (x.n) {
        x.t[x.n_tests] = (test_row){.n_gen = x.n};
        sl_peer_test_name(0, x.n, x.depth, x.t[x.n_tests].name, sizeof x.t[0].name);
        x.n_tests++;
    }
    if ((rc = sl_cli_model_open(&mf, k_cmd, &x.m))) goto done;
    rc = 1;
    sl_model_info info;
    sl_model_info_get(x.m, &info);
    x.n_vocab = info.n_vocab;
    x.bos = info.bos;
    x.adds_bos = info.bos >= 0 && sl_cli_model_adds_bos(x.m);
    x.weight_bytes = info.weight_bytes;
    x.n_params = info.n_params;
    sl_ctx_options co = sl_ctx_options_default();
    /* as llama-bench: room for the prompt and the generation, no more */
    co.n_ctx = (int32_t)(p_max + x.n + x.depth);
    if ((rc = sl_cli_ctx_create(&mf, k_cmd, x.m, &co, &x.c))) goto done;
    rc = 1;
    for (size_t i = 0; i < x.n_tests; i++) /* warm-up: pages, pool threads, scratch */
        if (sluice_sample(&x, &x.t[i]) < 0) goto done;
    const bool tty = isatty(STDERR_FILENO);
    for (int64_t round = 0; round < x.reps; round++) {
        if (tty) fprintf(stderr, "\rbench compare: round %" PRId64 "/%" PRId64 " llama-bench ...",
                         round + 1, x.reps);
        if (llama_round(&x)) goto done;
        if (tty) fprintf(stderr, "\rbench compare: round %" PRId64 "/%" PRId64 " Sluice ...     ",
                         round + 1, x.reps);
        for (size_t i = 0; i < x.n_tests; i++) {
            double ts = sluice_sample(&x, &x.t[i]);
            if (ts < 0) goto done;
            x.t[i].sluice.v[x.t[i].sluice.n++] = ts;
        }
    }
    if (tty) fprintf(stderr, "\r%60s\r", "");
    if (ppl_text && run_perplexity(&x, ppl_text, ppl_ctx, ppl_chunks, &g)) goto done;
    if (greedy && run_greedy(&x, greedy, greedy_n, &g)) goto done;
    if (json) {
        print_json(&x, &g);
    } else {
        printf("llama.cpp %s (%s) and Sluice, %" PRId64 " threads, %" PRId64
               " rounds alternating; Sluice placement cpu\n\n",
               x.peer.build_commit, x.bin, x.threads, x.reps);
        print_table(&x);
        print_agree(&g);
    }
    rc = sl_cli_stdout_check(k_cmd);
done:
    free(g.text_llama);
    free(g.text_sluice);
    sl_ctx_destroy(x.c);
    sl_model_close(x.m);
    sl_cli_io_free(&io);
    return rc;
}
