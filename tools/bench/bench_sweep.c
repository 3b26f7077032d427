/* `bench compare --sweep`: Sluice beside llama.cpp on a grid of synthetic MoE shapes (issue 28).
 *
 * The grid (k_axes): experts {8, 32, 64, 128} x top-k {2, 4, 6, 8} x expert FFN {256, 384,
 * 768, 1408, 2048} x dim {768, 1024, 2048} x type {Q4_K, Q5_K, Q6_K, Q8_0, MXFP4, IQ4_XS} x
 * shared expert {off: qwen3moe, on: qwen2moe}. All of it would take days here, so a sweep runs
 * a deterministic sample of --rows rows: each axis is dealt out from its own seeded shuffle,
 * row i taking entry i mod |axis|, so with --rows >= 6 (the longest axis) every value of every
 * axis appears at least once (the type axis is dealt over the types mkmodel can write, and
 * each other type gets one more row, listed as skipped, with the shape of an earlier row);
 * rows too big to run here (the expert file over
 * k_max_file_bytes, or a 512-token prompt over k_max_pp_flops) are repaired by seeded swaps of
 * one axis's values between rows (sample()), so the sample depends on the seed only.
 *
 * --types replaces the type axis (1 to 6 types mkmodel writes: Q2_K and Q3_K, say).
 *
 * Each row is a file `mkmodel` writes (the library, tools/synth: --layers, heads dim / 128,
 * the shared expert 2 x the expert FFN); down projections whose rows are not whole 256-blocks
 * of a K-quant or IQ4_XS are written in llama.cpp's fallback type (sl_synth_fallback_type: what
 * its quantizer does), which the table shows as "Q4_K/down Q5_0". A type mkmodel cannot
 * quantize (none of today's axis) is listed as skipped.
 * Files are kept in --dir and reused when present (their names carry every parameter).
 *
 * Then for each thread count `bench compare -m FILE -p 64,512 -n 32 -t T -r R --json` runs
 * as a child (llama-bench and Sluice alternating round by round, bench_compare.c); the
 * sweep reports the medians of the R samples of each side and their ratio, and the 1-minute
 * load average before and after (the machine is shared: a row measured under load says so).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/prng.h"
#include "gguf/gguf.h"
#include "tools/bench/bench.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/json_doc.h"
#include "tools/common/model_flags.h"
#include "tools/common/subproc.h"
#include "tools/synth/synth.h"

static const char *const k_cmd = "bench compare --sweep";

enum {
    N_AXES = 6,
    AXIS_MAX = 6,
    MAX_ROWS = 64,
    MAX_THREADS = 4,
    N_SWEEP_TESTS = 3, /* pp64, pp512, tg32 */
};

/* the axes, in this order: experts, top-k, ffn, dim, type, shared expert */
enum { AX_EXPERTS, AX_TOPK, AX_FFN, AX_DIM, AX_TYPE, AX_SHEXP };
static const struct {
    const char *name;
    int n;
    uint32_t v[AXIS_MAX];
} k_axes[N_AXES] = {
    {"experts", 4, {8, 32, 64, 128}},
    {"top-k", 4, {2, 4, 6, 8}},
    {"ffn", 5, {256, 384, 768, 1408, 2048}},
    {"dim", 3, {768, 1024, 2048}},
    {"type", 6, {SL_GGML_Q4_K, SL_GGML_Q5_K, SL_GGML_Q6_K, SL_GGML_Q8_0, SL_GGML_MXFP4,
                 SL_GGML_IQ4_XS}},
    {"shared", 2, {0, 1}},
};

/* What "too big to run here" means: the routed experts' bytes of the file, and the matmul
 * FLOPs of one 512-token prompt (llama-bench runs it twice a round, warm-up included). */
static const double k_max_file_bytes = 160e6;
static const double k_max_pp_flops = 100e9;

static const int64_t k_prompts[] = {64, 512};
static const int64_t k_gen = 32;

/* One bench compare child: the medians of each test, the load around it, its JSON. */
typedef struct sweep_run {
    double llama[N_SWEEP_TESTS], sluice[N_SWEEP_TESTS];
    double load0, load1;
    char *json;               /* the child's bench compare --json object (malloc'd) */
} sweep_run;

enum { SIDE_THIS, SIDE_BASE, N_SIDES }; /* this binary, and the --baseline binary */

typedef struct sweep_row {
    uint32_t v[N_AXES];
    char path[4096];
    uint32_t down_type;       /* the routed experts' down type (a fallback, or the type) */
    bool skipped;             /* the type cannot be written */
    sweep_run run[N_SIDES][MAX_THREADS];
} sweep_row;

typedef struct sweep {
    uint64_t seed;
    int64_t rows, reps, layers;
    int64_t threads[MAX_THREADS];
    int n_threads;
    const char *dir, *json_path;
    const char *baseline;     /* --baseline BIN: also run its bench compare, row by row */
    uint32_t types[AXIS_MAX]; /* the type axis: k_axes's, or --types (distinct, 1..AXIS_MAX) */
    int n_types;
    bool dry_run;
    sweep_row r[MAX_ROWS];
} sweep;

static void usage(FILE *f)
{
    fputs("usage: tools/run bench compare --sweep [--rows 8] [--seed 1] [-r 5] [-t 1,2]\n"
          "         [--layers 2] [--types LIST] [--dir DIR] [--json FILE] [--baseline BIN]\n"
          "         [--dry-run]\n"
          "\n"
          "Sluice beside llama.cpp on a seeded sample of synthetic MoE shapes: experts {8, 32,\n"
          "64, 128}, top-k {2, 4, 6, 8}, expert FFN {256, 384, 768, 1408, 2048}, dim {768,\n"
          "1024, 2048}, types {Q4_K, Q5_K, Q6_K, Q8_0, MXFP4, IQ4_XS}, shared expert off\n"
          "(qwen3moe) / on (qwen2moe); every value of every axis in at least one row when\n"
          "--rows >= 6. Each row: mkmodel writes the file (K-quant down projections whose rows\n"
          "are not whole 256-blocks take llama.cpp's fallback type), then for each thread\n"
          "count `bench compare -p 64,512 -n 32 -r R` runs llama-bench and Sluice alternating;\n"
          "the table shows the medians of the R rounds, their ratio and the load average.\n"
          "\n"
          "  --rows N        rows sampled from the grid (default 8, 1..64), each type\n"
          "                  mkmodel cannot write one of them, listed as skipped\n"
          "  --seed S        the sample's seed (default 1)\n"
          "  -r R            rounds per row and thread count (default 5)\n"
          "  -t LIST         thread counts (default 1,2; at most 4)\n"
          "  --layers N      transformer blocks of each file (default 2)\n"
          "  --types LIST    the type axis instead of the six above: 1 to 6 distinct types\n"
          "                  mkmodel writes (e.g. Q2_K,Q3_K; mkmodel --help lists them)\n"
          "  --dir DIR       where the files are written and reused (default\n"
          "                  /tmp/sluice-sweep)\n"
          "  --json FILE     also write the results (with every sample) as JSON to FILE\n"
          "  --baseline BIN  another sluice binary (an older build): after each of this\n"
          "                  binary's bench compare runs, BIN's runs on the same row and\n"
          "                  threads, so the table holds before and after, each with its\n"
          "                  own llama.cpp rounds\n"
          "  --dry-run       print the sampled rows and exit\n",
          f);
}

static double row_file_bytes(const uint32_t *v, int64_t layers)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(v[AX_TYPE]);
    double bpw = ti ? 8.0 * ti->type_size / ti->block_size : 8;
    return (double)layers * v[AX_EXPERTS] * 3.0 * v[AX_DIM] * v[AX_FFN] * bpw / 8;
}

static double row_pp_flops(const uint32_t *v, int64_t layers)
{
    const double d = v[AX_DIM], f = v[AX_FFN];
    const double active = v[AX_TOPK] * 3 * d * f + v[AX_SHEXP] * 3 * d * 2 * f + 2.5 * d * d;
    return 2.0 * 512 * (double)layers * active;
}

static double row_excess(const uint32_t *v, int64_t layers)
{
    const double f = row_file_bytes(v, layers) / k_max_file_bytes;
    const double c = row_pp_flops(v, layers) / k_max_pp_flops;
    return (f > 1 ? f - 1 : 0) + (c > 1 ? c - 1 : 0);
}

/* Deals the axes out (see the header), then repairs rows that are too big by swapping one
 * axis's values between two rows (so every axis keeps its values), a swap kept when the total
 * excess does not grow, and draws new shuffles when that gets stuck; false when no sample
 * within the limits turned up. */
static bool writable(uint32_t type)
{
    sl_synth_params p;
    sl_synth_defaults(SL_SYNTH_QWEN3MOE, &p);
    p.n_embd = p.n_ff = 256;
    p.type = type;
    sl_error err;
    return sl_synth_validate(&p, &err) != SL_ERR_UNSUPPORTED;
}

static bool sample(sweep *s)
{
    int n_deal = 0;      /* the writable types first in types[] */
    uint32_t types[AXIS_MAX];
    for (int i = 0; i < s->n_types; i++)
        if (writable(s->types[i])) types[n_deal++] = s->types[i];
    int n_types = n_deal;
    for (int i = 0; i < s->n_types; i++)
        if (!writable(s->types[i])) types[n_types++] = s->types[i];
    if (!n_deal) return false;
    const int64_t n_run = s->rows - (n_types - n_deal);
    if (n_run < 1) return false;
    uint64_t st[4];
    sl_prng_seed(st, s->seed);
    for (int attempt = 0; attempt < 1000; attempt++) {
        int perm[N_AXES][AXIS_MAX];
        for (int a = 0; a < N_AXES; a++) {
            const int n = a == AX_TYPE ? n_deal : k_axes[a].n;
            for (int i = 0; i < n; i++) perm[a][i] = i;
            for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
                int j = (int)(sl_prng_next(st) % (uint64_t)(i + 1));
                int t = perm[a][i];
                perm[a][i] = perm[a][j];
                perm[a][j] = t;
            }
        }
        for (int64_t i = 0; i < n_run; i++)
            for (int a = 0; a < N_AXES; a++)
                s->r[i].v[a] = a == AX_TYPE ? types[perm[a][i % n_deal]]
                                            : k_axes[a].v[perm[a][i % k_axes[a].n]];
        for (int step = 0; step < 4000; step++) {
            double total = 0;
            for (int64_t i = 0; i < n_run; i++) total += row_excess(s->r[i].v, s->layers);
            if (total == 0) {
                for (int64_t i = n_run; i < s->rows; i++) { /* listed, not run */
                    memcpy(s->r[i].v, s->r[i - n_run].v, sizeof s->r[i].v);
                    s->r[i].v[AX_TYPE] = types[n_deal + (i - n_run)];
                }
                return true;
            }
            const int64_t i = (int64_t)(sl_prng_next(st) % (uint64_t)n_run);
            const int64_t j = (int64_t)(sl_prng_next(st) % (uint64_t)n_run);
            const int a = (int)(sl_prng_next(st) % N_AXES);
            const double before =
                row_excess(s->r[i].v, s->layers) + row_excess(s->r[j].v, s->layers);
            const uint32_t t = s->r[i].v[a];
            s->r[i].v[a] = s->r[j].v[a];
            s->r[j].v[a] = t;
            if (row_excess(s->r[i].v, s->layers) + row_excess(s->r[j].v, s->layers) > before) {
                s->r[j].v[a] = s->r[i].v[a]; /* undo */
                s->r[i].v[a] = t;
            }
        }
    }
    return false;
}

static void type_label(const sweep_row *r, char *buf, size_t cap)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(r->v[AX_TYPE]);
    const sl_gguf_type_info *di = sl_gguf_type_get(r->down_type);
    if (r->down_type != r->v[AX_TYPE] && di)
        snprintf(buf, cap, "%s/down %s", ti ? ti->name : "?", di->name);
    else snprintf(buf, cap, "%s", ti ? ti->name : "?");
}

static double load_1min(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* Writes row r's file unless it is there; 1 after printing an error. */
static int make_file(sweep *s, sweep_row *r)
{
    sl_synth_params p;
    sl_synth_defaults(r->v[AX_SHEXP] ? SL_SYNTH_QWEN2MOE : SL_SYNTH_QWEN3MOE, &p);
    p.n_layer = (uint32_t)s->layers;
    p.n_embd = r->v[AX_DIM];
    p.n_ff = r->v[AX_FFN];
    p.n_expert = r->v[AX_EXPERTS];
    p.n_expert_used = r->v[AX_TOPK];
    p.n_head = p.n_embd / 128;
    p.n_head_kv = p.n_head % 4 ? 2 : p.n_head / 4;
    p.n_ctx = 1024;
    p.n_ff_shexp = r->v[AX_SHEXP] ? 2 * p.n_ff : 0;
    p.type = r->v[AX_TYPE];
    const sl_gguf_type_info *ti = sl_gguf_type_get(p.type);
    r->down_type = p.n_ff % ti->block_size ? sl_synth_fallback_type(p.type) : p.type;
    snprintf(r->path, sizeof r->path, "%s/sweep-%s-e%u-k%u-f%u-d%u-%s-l%u-s%" PRIu64 ".gguf",
             s->dir, sl_synth_arch_name(p.arch), p.n_expert, p.n_expert_used, p.n_ff, p.n_embd,
             ti->name, p.n_layer, p.seed);
    sl_error err = {0};
    const sl_status vst = sl_synth_validate(&p, &err);
    if (vst == SL_ERR_UNSUPPORTED) {
        r->skipped = true; /* a type without a quantizer */
        fprintf(stderr, "%s: row skipped: %s\n", k_cmd, err.msg);
        return 0;
    }
    if (vst) {
        fprintf(stderr, "sluice %s: %s: %s\n", k_cmd, r->path, err.msg);
        return 1;
    }
    if (s->dry_run) return 0;
    struct stat stt;
    if (stat(r->path, &stt) == 0 && S_ISREG(stt.st_mode)) return 0;
    fprintf(stderr, "%s: mkmodel %s ...\n", k_cmd, r->path);
    if (sl_synth_write(&p, r->path, 0, NULL, NULL, NULL, NULL, NULL, &err)) {
        fprintf(stderr, "sluice %s: mkmodel %s: %s\n", k_cmd, r->path, err.msg);
        return 1;
    }
    return 0;
}

/* Runs bench compare of side `side` (this binary or --baseline) on row r with thread count
 * index ti; 1 after printing an error. */
static int run_compare(sweep *s, sweep_row *r, int side, int ti)
{
    char self[4096], t[32], reps[32], p[64];
    sweep_run *run = &r->run[side][ti];
    if (side == SIDE_BASE) snprintf(self, sizeof self, "%s", s->baseline);
    else if (sl_cli_self_exe(k_cmd, self, sizeof self)) return 1;
    snprintf(t, sizeof t, "%" PRId64, s->threads[ti]);
    snprintf(reps, sizeof reps, "%" PRId64, s->reps);
    snprintf(p, sizeof p, "%" PRId64 ",%" PRId64, k_prompts[0], k_prompts[1]);
    char n[32];
    snprintf(n, sizeof n, "%" PRId64, k_gen);
    char *argv[] = {self, "bench", "compare", "-m", r->path, "-p", p, "-n", n, "-t", t,
                    "-r", reps, "--json", NULL};
    sl_subproc_result res;
    sl_error err = {0};
    run->load0 = load_1min();
    if (sl_subproc_run(argv, NULL, &res, &err)) {
        fprintf(stderr, "sluice %s: %s\n", k_cmd, err.msg);
        return 1;
    }
    run->load1 = load_1min();
    if (res.exit_code) {
        size_t k = res.err_len > 2000 ? res.err_len - 2000 : 0;
        fprintf(stderr, "%s\nsluice %s: %s bench compare on %s exited with status %d\n",
                res.err + k, k_cmd, self, r->path, res.exit_code);
        sl_subproc_result_free(&res);
        return 1;
    }
    sl_jdoc *d = NULL;
    int rc = 1;
    if (sl_jdoc_parse(res.out, res.out_len, 16, &d, &err)) {
        fprintf(stderr, "sluice %s: bench compare --json: %s\n", k_cmd, err.msg);
        goto done;
    }
    sl_jref rows = sl_jdoc_get(d, 0, "rows");
    int found = 0;
    for (sl_jref v = rows == SL_JNONE ? SL_JNONE : sl_jdoc_first(d, rows); v != SL_JNONE;
         v = sl_jdoc_next(d, v)) {
        int64_t np = 0, ng = 0;
        if (!sl_jdoc_int(d, sl_jdoc_get(d, v, "n_prompt"), 0, 1 << 20, &np) ||
            !sl_jdoc_int(d, sl_jdoc_get(d, v, "n_gen"), 0, 1 << 20, &ng))
            continue;
        int k = np == k_prompts[0] ? 0 : np == k_prompts[1] ? 1 : ng == k_gen ? 2 : -1;
        if (k < 0) continue;
        run->llama[k] = sl_jdoc_num(d, sl_jdoc_get(d, v, "llama_tps_median"));
        run->sluice[k] = sl_jdoc_num(d, sl_jdoc_get(d, v, "sluice_tps_median"));
        found++;
    }
    if (found != N_SWEEP_TESTS) {
        fprintf(stderr, "sluice %s: bench compare --json: %d of %d tests\n", k_cmd, found,
                N_SWEEP_TESTS);
        goto done;
    }
    run->json = strndup(res.out, res.out_len);
    rc = run->json ? 0 : 1;
done:
    sl_jdoc_free(d);
    sl_subproc_result_free(&res);
    return rc;
}

static const char *const k_test_names[N_SWEEP_TESTS] = {"pp64", "pp512", "tg32"};

static void print_header(bool base)
{
    printf("| row | shared | experts | top-k |  ffn |  dim | type               | test  | t |"
           "%s   llama t/s |  sluice t/s | ratio | load      |\n"
           "|----:|:------:|--------:|------:|-----:|-----:|:-------------------|:------|--:|"
           "%s------------:|------------:|------:|:----------|\n",
           base ? " base llama | base sluice | base ratio |" : "",
           base ? "-----------:|------------:|-----------:|" : "");
}

static void print_row(FILE *f, const sweep *s, int64_t i)
{
    const sweep_row *r = &s->r[i];
    char ty[48];
    type_label(r, ty, sizeof ty);
    if (r->skipped) {
        fprintf(f, "| %3" PRId64 " | %-6s | %7u | %5u | %4u | %4u | %-18s | skipped: mkmodel cannot "
               "write this type |\n", i, r->v[AX_SHEXP] ? "on" : "off", r->v[AX_EXPERTS],
               r->v[AX_TOPK], r->v[AX_FFN], r->v[AX_DIM], ty);
        return;
    }
    for (int ti = 0; ti < s->n_threads; ti++)
        for (int k = 0; k < N_SWEEP_TESTS; k++) {
            const sweep_run *a = &r->run[SIDE_THIS][ti], *b = &r->run[SIDE_BASE][ti];
            fprintf(f, "| %3" PRId64 " | %-6s | %7u | %5u | %4u | %4u | %-18s | %-5s | %" PRId64
                   " |", i, r->v[AX_SHEXP] ? "on" : "off", r->v[AX_EXPERTS], r->v[AX_TOPK],
                   r->v[AX_FFN], r->v[AX_DIM], ty, k_test_names[k], s->threads[ti]);
            if (s->baseline)
                fprintf(f, " %10.2f | %11.2f | %10.2f |", b->llama[k], b->sluice[k],
                       b->llama[k] > 0 ? b->sluice[k] / b->llama[k] : 0.0);
            fprintf(f, " %11.2f | %11.2f | %5.2f | %4.1f-%4.1f |\n", a->llama[k], a->sluice[k],
                   a->llama[k] > 0 ? a->sluice[k] / a->llama[k] : 0.0, a->load0, a->load1);
        }
}

static int write_json(const sweep *s)
{
    FILE *f = fopen(s->json_path, "w");
    if (!f) {
        fprintf(stderr, "sluice %s: --json %s: cannot create\n", k_cmd, s->json_path);
        return 1;
    }
    fprintf(f, "{\"seed\":%" PRIu64 ",\"repetitions\":%" PRId64 ",\"layers\":%" PRId64
            ",\"baseline\":", s->seed, s->reps, s->layers);
    if (s->baseline) sl_json_cstr(f, s->baseline);
    else fprintf(f, "null");
    fprintf(f, ",\"rows\":[");
    for (int64_t i = 0; i < s->rows; i++) {
        const sweep_row *r = &s->r[i];
        const sl_gguf_type_info *ti = sl_gguf_type_get(r->v[AX_TYPE]);
        const sl_gguf_type_info *di = sl_gguf_type_get(r->down_type);
        fprintf(f, "%s{\"shared_expert\":%s,\"experts\":%u,\"top_k\":%u,\"ffn\":%u,\"dim\":%u,"
                "\"type\":", i ? "," : "", r->v[AX_SHEXP] ? "true" : "false", r->v[AX_EXPERTS],
                r->v[AX_TOPK], r->v[AX_FFN], r->v[AX_DIM]);
        sl_json_cstr(f, ti ? ti->name : "?");
        fprintf(f, ",\"down_type\":");
        sl_json_cstr(f, di ? di->name : "?");
        fprintf(f, ",\"file\":");
        sl_json_cstr(f, r->path);
        fprintf(f, ",\"skipped\":%s,\"results\":[", r->skipped ? "true" : "false");
        bool first = true;
        for (int side = 0; side < (s->baseline ? N_SIDES : 1); side++)
            for (int t = 0; t < s->n_threads && !r->skipped; t++)
                for (int k = 0; k < N_SWEEP_TESTS; k++) {
                    const sweep_run *u = &r->run[side][t];
                    fprintf(f, "%s{\"side\":\"%s\",\"threads\":%" PRId64 ",\"test\":\"%s\","
                            "\"llama_tps_median\":", first ? "" : ",",
                            side == SIDE_BASE ? "baseline" : "sluice", s->threads[t],
                            k_test_names[k]);
                    first = false;
                    sl_json_f64(f, u->llama[k]);
                    fprintf(f, ",\"sluice_tps_median\":");
                    sl_json_f64(f, u->sluice[k]);
                    fprintf(f, ",\"ratio\":");
                    sl_json_f64(f, u->llama[k] > 0 ? u->sluice[k] / u->llama[k] : 0);
                    fprintf(f, ",\"load_before\":");
                    sl_json_f64(f, u->load0);
                    fprintf(f, ",\"load_after\":");
                    sl_json_f64(f, u->load1);
                    fprintf(f, "}");
                }
        fprintf(f, "],\"compare\":[");
        first = true;
        for (int side = 0; side < (s->baseline ? N_SIDES : 1); side++)
            for (int t = 0; t < s->n_threads && !r->skipped; t++) {
                fprintf(f, "%s%s", first ? "" : ",",
                        r->run[side][t].json ? r->run[side][t].json : "null");
                first = false;
            }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    if (fclose(f)) {
        fprintf(stderr, "sluice %s: --json %s: write failed\n", k_cmd, s->json_path);
        return 1;
    }
    return 0;
}

static int parse_threads(sweep *s, const char *flag, const char *v)
{
    char buf[64];
    if (strlen(v) >= sizeof buf) return sl_cli_usage_error(k_cmd, "%s '%s': too long", flag, v);
    snprintf(buf, sizeof buf, "%s", v);
    s->n_threads = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (s->n_threads == MAX_THREADS)
            return sl_cli_usage_error(k_cmd, "%s '%s': at most %d counts", flag, v, MAX_THREADS);
        if (sl_cli_parse_i64(k_cmd, flag, tok, 1, 1024, &s->threads[s->n_threads])) return 2;
        s->n_threads++;
    }
    if (!s->n_threads) return sl_cli_usage_error(k_cmd, "%s '%s': no count", flag, v);
    return 0;
}

/* --types: names of distinct types mkmodel writes, at most AXIS_MAX */
static int parse_types(sweep *s, const char *flag, const char *v)
{
    char buf[256];
    if (strlen(v) >= sizeof buf) return sl_cli_usage_error(k_cmd, "%s '%s': too long", flag, v);
    snprintf(buf, sizeof buf, "%s", v);
    s->n_types = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (s->n_types == AXIS_MAX)
            return sl_cli_usage_error(k_cmd, "%s '%s': at most %d types", flag, v, AXIS_MAX);
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(tok);
        if (!ti || !writable(ti->code))
            return sl_cli_usage_error(k_cmd, "%s '%s': '%s' is not a type mkmodel writes (%s)",
                                      flag, v, tok, SL_SYNTH_TYPES);
        for (int i = 0; i < s->n_types; i++)
            if (s->types[i] == ti->code)
                return sl_cli_usage_error(k_cmd, "%s '%s': '%s' twice", flag, v, tok);
        s->types[s->n_types++] = ti->code;
    }
    if (!s->n_types) return sl_cli_usage_error(k_cmd, "%s '%s': no type", flag, v);
    return 0;
}

static int sweep_main(sweep *s, int argc, char **argv);

int sl_bench_sweep(int argc, char **argv)
{
    sweep *sp = calloc(1, sizeof *sp); /* ~100 KiB of rows: not on the stack */
    if (!sp) {
        fprintf(stderr, "sluice %s: out of memory\n", k_cmd);
        return 1;
    }
    int rc = sweep_main(sp, argc, argv);
    for (int64_t i = 0; i < MAX_ROWS; i++)
        for (int side = 0; side < N_SIDES; side++)
            for (int t = 0; t < MAX_THREADS; t++) free(sp->r[i].run[side][t].json);
    free(sp);
    return rc;
}

static int sweep_main(sweep *s, int argc, char **argv)
{
    s->seed = 1;
    s->rows = 8;
    s->reps = 5;
    s->layers = 2;
    s->threads[0] = 1;
    s->threads[1] = 2;
    s->n_threads = 2;
    s->dir = "/tmp/sluice-sweep";
    s->n_types = k_axes[AX_TYPE].n;
    memcpy(s->types, k_axes[AX_TYPE].v, sizeof s->types);
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        const char *v;
        int64_t x;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--sweep", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
        } else if (sl_cli_is(&a, "--dry-run", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            s->dry_run = true;
        } else if (sl_cli_is(&a, "--rows", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, MAX_ROWS,
                                                            &s->rows))
                return 2;
        } else if (sl_cli_is(&a, "--seed", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 0, INT64_MAX, &x))
                return 2;
            s->seed = (uint64_t)x;
        } else if (sl_cli_is(&a, "-r", "--repetitions")) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 64, &s->reps))
                return 2;
        } else if (sl_cli_is(&a, "-t", "--threads")) {
            if (!(v = sl_cli_value(&a)) || parse_threads(s, a.flag, v)) return 2;
        } else if (sl_cli_is(&a, "--layers", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(k_cmd, a.flag, v, 1, 64, &s->layers))
                return 2;
        } else if (sl_cli_is(&a, "--types", NULL)) {
            if (!(v = sl_cli_value(&a)) || parse_types(s, a.flag, v)) return 2;
        } else if (sl_cli_is(&a, "--dir", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(k_cmd, "--dir: empty name");
            s->dir = v;
        } else if (sl_cli_is(&a, "--baseline", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (access(v, X_OK))
                return sl_cli_usage_error(k_cmd, "--baseline %s: not an executable file", v);
            s->baseline = v;
        } else if (sl_cli_is(&a, "--json", NULL)) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(k_cmd, "--json: empty file name");
            s->json_path = v;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!sample(s)) {
        fprintf(stderr, "sluice %s: no sample of %" PRId64 " rows fits the limits\n", k_cmd,
                s->rows);
        return 1;
    }
    if (!s->dry_run && mkdir(s->dir, 0755) && access(s->dir, W_OK)) {
        fprintf(stderr, "sluice %s: --dir %s: cannot create or write\n", k_cmd, s->dir);
        return 1;
    }
    int rc = 1;
    const double t0 = sl_cli_now_s();
    for (int64_t i = 0; i < s->rows; i++)
        if (make_file(s, &s->r[i])) goto done;
    if (s->dry_run) {
        print_header(s->baseline != NULL);
        for (int64_t i = 0; i < s->rows; i++) {
            char ty[48];
            type_label(&s->r[i], ty, sizeof ty);
            printf("| %3" PRId64 " | %-6s | %7u | %5u | %4u | %4u | %-18s | %s |\n", i,
                   s->r[i].v[AX_SHEXP] ? "on" : "off", s->r[i].v[AX_EXPERTS], s->r[i].v[AX_TOPK],
                   s->r[i].v[AX_FFN], s->r[i].v[AX_DIM], ty, s->r[i].skipped ? "skipped" : "");
        }
        rc = 0;
        goto done;
    }
    for (int64_t i = 0; i < s->rows; i++) {
        if (s->r[i].skipped) continue;
        for (int t = 0; t < s->n_threads; t++) {
            fprintf(stderr, "%s: row %" PRId64 "/%" PRId64 ", %" PRId64 " threads (%.0f s) ...\n",
                    k_cmd, i + 1, s->rows, s->threads[t], sl_cli_now_s() - t0);
            if (run_compare(s, &s->r[i], SIDE_THIS, t)) goto done;
            if (s->baseline && run_compare(s, &s->r[i], SIDE_BASE, t)) goto done;
        }
        print_row(stderr, s, i); /* progress: what a stopped sweep has measured */
    }
    printf("llama.cpp and Sluice (placement cpu), seed %" PRIu64 ", %" PRId64 " rounds "
           "alternating, medians; %" PRId64 " layers; %.0f s\n\n", s->seed, s->reps, s->layers,
           sl_cli_now_s() - t0);
    print_header(s->baseline != NULL);
    for (int64_t i = 0; i < s->rows; i++) print_row(stdout, s, i);
    rc = s->json_path ? write_json(s) : 0;
    if (!rc) rc = sl_cli_stdout_check(k_cmd);
done:
    return rc;
}
