/* tools/dev/gemm_bench: the batch kernels of kernels/cpu/gemm.h timed on one thread, the modes
 * alternated in the same run (min and median of many short repetitions, in thread CPU time: the
 * machine is shared), checked to agree bit for bit. Modes: the AVX-512 build's 8-token panel
 * kernels (sl__gemm_panel8_avx512, the baseline), its current dispatch (sl__gemm_avx512, "new":
 * the VNNI kernels of gemm_few32_vnni_tmpl.h and gemm_k_vnni_tmpl.h) and the decode path's
 * whole-row kernel token by token (sl__mv_rows_avx512, the reference's bits; the one the
 * few-token rules of gemm.h hand tokens to). Where panel8 is the same function as new (the
 * K-quants, IQ4_XS) it runs once and the line says "panel8 = new". "few" (every type with a
 * few-token kernel, sl__gemm_few_avx512): for Q4_K Q5_K Q6_K IQ4_XS matvec.c's dispatch with
 * it by gemm.h's sl__gemm_tail: the kernel alone at 2..SL__GEMM_FEW_MAX tokens, beside the
 * paths it replaces (new: gemm_k's 8-token panels; rows); past that the panels and the kernel
 * for the tail; for the 32-element types the kernel alone on every token (new is it with
 * sl__gemm_vnni_few's lone last token to the row kernel). Compare two versions (a kernel
 * before and after a change) by building two binaries. Calls go in chunks of CHUNK rows, as
 * matvec.c splits a GEMM job (row_grain: up to 256 for the 32-element types; the grouped
 * path's 64 for the K-quants, the defaults). "amx" (where the CPU has AMX-INT8): new with
 * sl__gemm_rows.amx, the K-quants' calls of SL__GEMM_AMX_MIN_TOK+ tokens on tiles
 * (gemm_k_amx.c). A developer tool (needs an AVX-512 VNNI CPU):
 *   bazel build -c opt //tools/dev:gemm_bench
 *   bazel-bin/tools/dev/gemm_bench TYPE ROWS COLS NTOK[,NTOK..] [REPS [CHUNK [MODES]]]
 * MODES (e.g. new,few): the modes timed, all by default (every mode still runs once for the
 * bit check; leaving out rows makes a sweep of many NTOK several times shorter).
 * TYPE: Q8_0 Q4_0 Q5_0 Q4_1 Q5_1 MXFP4 IQ4_NL (REPS 200, CHUNK 256 by default) or Q4_K Q5_K
 * Q6_K IQ4_XS (REPS 30, CHUNK 64 by default). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/cpu/ops.h"

enum { MODES = 5, MAX_TOK = 4096 };
static const char *const mode_name[MODES] = {"panel8", "new", "rows", "few", "amx"};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* xorshift64: the same weights and activations on every run */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A whole decimal integer in [lo, hi] into *v; false (with a message naming it) otherwise. */
static int parse_int(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    char *end;
    errno = 0;
    const long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        fprintf(stderr, "gemm_bench: %s: '%s' is not an integer in [%lld, %lld]\n", what, s,
                (long long)lo, (long long)hi);
        return 0;
    }
    *v = x;
    return 1;
}

/* Random weight blocks with finite small half scales (d, and the min/dmin where the type keeps
 * one), so every dot is finite and the bit check compares numbers. */
static void fill_weights(const sl__mv_type *t, uint8_t *w, int64_t rows, int64_t nb, uint64_t *s)
{
    const size_t wrb = (size_t)nb * t->bytes;
    for (size_t i = 0; i < wrb * (size_t)rows; i++) w[i] = (uint8_t)rnd(s);
    const uint32_t type = t->type;
    const size_t doff = type == SL_GGML_Q6_K ? 208 : 0; /* Q6_K keeps d after its quants */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = w + (size_t)r * wrb + (size_t)b * t->bytes + doff;
            if (type == SL_GGML_MXFP4) { /* one E8M0 scale byte */
                p[0] = (uint8_t)(118 + rnd(s) % 8);
                continue;
            }
            p[1] = (uint8_t)(0x14 + rnd(s) % 4);
            if (type == SL_GGML_Q4_1 || type == SL_GGML_Q5_1) p[3] = (uint8_t)(0x94 + rnd(s) % 4);
            if (type == SL_GGML_Q4_K || type == SL_GGML_Q5_K) p[3] = (uint8_t)(0x14 + rnd(s) % 4);
        }
}

typedef struct setup {
    const sl__mv_type *t;
    unsigned timed; /* bit m: mode m is timed */
    sl__gemm_fn gemm[2]; /* panel8, new */
    sl__gemm_fn few;     /* sl__gemm_few_avx512, NULL: the type has none */
    bool amx;            /* the CPU has AMX-INT8, granted to this process */
    sl__mv_rows_fn rows_fn;
    sl__gemm_rows a;
    int64_t rows, chunk;
} setup;

static void run_rows(const setup *s, const sl__gemm_rows *a)
{
    for (int64_t b = 0; b < a->n_tok; b++)
        s->rows_fn(a->w, a->wrb, a->xq + (size_t)b * a->arb, a->nb, 0, s->rows,
                   a->y + b * a->y_stride);
}

static void run_chunks(const setup *s, sl__gemm_fn f, const sl__gemm_rows *a)
{
    for (int64_t r0 = 0; r0 < s->rows; r0 += s->chunk)
        f(s->t, a, r0, s->rows - r0 < s->chunk ? s->rows : r0 + s->chunk);
}

static void run(const setup *s, int mode)
{
    if (mode == 2) {
        run_rows(s, &s->a);
        return;
    }
    if (mode < 3) {
        run_chunks(s, s->gemm[mode], &s->a);
        return;
    }
    if (mode == 4) { /* new with its multiply-adds on AMX tiles */
        sl__gemm_rows a = s->a;
        a.amx = true;
        run_chunks(s, s->gemm[1], &a);
        return;
    }
    if (s->t->block == 32) { /* the 32-element types' few-token kernel alone, every token */
        run_chunks(s, s->few, &s->a);
        return;
    }
    /* matvec.c's dispatch with the few-token kernel: gemm.h's sl__gemm_tail */
    const int64_t tail = sl__gemm_tail(s->a.n_tok, true), b0 = s->a.n_tok - tail;
    sl__gemm_rows a = s->a;
    a.n_tok = b0;
    if (b0) run_chunks(s, s->gemm[1], &a);
    a.xq += (size_t)b0 * a.arb;
    a.y += b0 * a.y_stride;
    a.n_tok = tail;
    if (tail == 1) run_rows(s, &a);
    else if (tail) run_chunks(s, s->few, &a);
}

/* Whether mode m runs: panel8 unless it is new, few where the type has it, amx where the CPU
 * has it. */
static bool active(const setup *s, int m)
{
    if (m == 0) return s->gemm[0] != s->gemm[1];
    if (m == 3) return s->few != NULL;
    if (m == 4) return s->amx && s->t->block != 32;
    return true;
}

/* One NTOK: every mode once (the bit check), then reps rounds of the modes alternated. */
static int bench(const char *name, setup *s, int64_t cols, int64_t n, int reps, uint64_t *rs)
{
    const int64_t rows = s->rows;
    const size_t arb = s->a.arb, ny = (size_t)(rows * n);
    const int skip0 = s->gemm[0] == s->gemm[1]; /* panel8 is new: time it once */
    float *x = malloc(sizeof(float) * (size_t)(cols * n));
    char *xq = malloc(arb * (size_t)n);
    float *y[MODES] = {0};
    double *tm[MODES] = {0};
    int ok = x && xq;
    for (int m = 0; m < MODES; m++) {
        y[m] = malloc(sizeof(float) * ny);
        tm[m] = malloc(sizeof(double) * (size_t)reps);
        ok = ok && y[m] && tm[m];
    }
    if (ok) {
        for (int64_t i = 0; i < cols * n; i++)
            x[i] = (float)((int64_t)(rnd(rs) % 2001) - 1000) / 997.0f;
        sl__mv_quant_rows(s->t, x, cols, n, xq, arb);
        s->a.xq = xq;
        s->a.n_tok = n;
        for (int m = 0; m < MODES; m++) {
            if (!active(s, m)) continue;
            s->a.y = y[m];
            run(s, m);
        }
        int same = 1; /* every mode gives the row kernel's bits (mode 2: the reference's) */
        for (int m = 0; m < MODES; m++)
            same = same && (!active(s, m) || !memcmp(y[m], y[2], sizeof(float) * ny));
        for (int k = 0; k < reps; k++)
            for (int m = 0; m < MODES; m++) {
                if (!active(s, m) || !(s->timed >> m & 1)) continue;
                s->a.y = y[m];
                const double t0 = now_us();
                run(s, m);
                tm[m][k] = now_us() - t0;
            }
        double med[MODES];
        printf("%s %lldx%lld ntok %3lld:", name, (long long)rows, (long long)cols, (long long)n);
        for (int m = 0; m < MODES; m++) {
            med[m] = 0;
            if (!active(s, m) || !(s->timed >> m & 1)) continue;
            qsort(tm[m], (size_t)reps, sizeof(double), cmp_d);
            med[m] = tm[m][reps / 2];
            printf("  %s min %8.1f med %8.1f us", mode_name[m], tm[m][0], med[m]);
        }
        printf("  |%s", skip0 ? " panel8 = new" : "");
        /* a / b for the timed pairs: panel8/new, rows/new, new/few, rows/few, new/amx */
        static const int pair[][2] = {{0, 1}, {2, 1}, {1, 3}, {2, 3}, {1, 4}};
        for (size_t q = 0; q < sizeof pair / sizeof pair[0]; q++)
            if (med[pair[q][0]] > 0 && med[pair[q][1]] > 0)
                printf(" %s/%s %.2fx", mode_name[pair[q][0]], mode_name[pair[q][1]],
                       med[pair[q][0]] / med[pair[q][1]]);
        printf("%s\n", same ? "" : "  BITS DIFFER");
    } else {
        fprintf(stderr, "gemm_bench: out of memory for %lld tokens\n", (long long)n);
    }
    for (int m = 0; m < MODES; m++) {
        free(tm[m]);
        free(y[m]);
    }
    free(xq);
    free(x);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 8) {
        fprintf(stderr, "usage: %s TYPE ROWS COLS NTOK[,NTOK..] [REPS [CHUNK [MODES]]]\n",
                argv[0]);
        return 2;
    }
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni")) {
        fprintf(stderr, "gemm_bench: needs a CPU with AVX-512 F/BW/VL and VNNI\n");
        return 2;
    }
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(argv[1]);
    const sl__mv_type *t = ti ? sl__mv_type_get(ti->code) : NULL;
    const sl__gemm_fn fnew = t ? sl__gemm_avx512(t->type) : NULL;
    const sl__mv_rows_fn fr = t ? sl__mv_rows_avx512(t->type) : NULL;
    if (!fnew || !fr || (t->block != 32 && t->block != 256)) {
        fprintf(stderr, "gemm_bench: TYPE '%s' has no AVX-512 batch kernel here (Q8_0 Q4_0 Q5_0 "
                        "Q4_1 Q5_1 MXFP4 IQ4_NL Q4_K Q5_K Q6_K IQ4_XS)\n", argv[1]);
        return 2;
    }
    const int k_quant = t->block == 256;
    int64_t rows, cols, reps = k_quant ? 30 : 200, chunk = k_quant ? 64 : 256;
    if (!parse_int("ROWS", argv[2], 1, 1 << 20, &rows) ||
        !parse_int("COLS", argv[3], t->block, 1 << 20, &cols) ||
        (argc > 5 && !parse_int("REPS", argv[5], 1, 1000000, &reps)) ||
        (argc > 6 && !parse_int("CHUNK", argv[6], 1, 1 << 20, &chunk)))
        return 2;
    if (cols % t->block) {
        fprintf(stderr, "gemm_bench: COLS %lld is not a multiple of %s's block %u\n",
                (long long)cols, argv[1], t->block);
        return 2;
    }
    unsigned timed = (1u << MODES) - 1;
    if (argc > 7) {
        timed = 0;
        for (char *m = strtok(argv[7], ","); m; m = strtok(NULL, ",")) {
            int k = 0;
            while (k < MODES && strcmp(m, mode_name[k])) k++;
            if (k == MODES) {
                fprintf(stderr, "gemm_bench: MODES: '%s' is not one of panel8 new rows few amx\n", m);
                return 2;
            }
            timed |= 1u << k;
        }
    }
    const int64_t nb = cols / t->block;
    const size_t wrb = (size_t)nb * t->bytes;
    uint8_t *w = malloc(wrb * (size_t)rows);
    if (!w) {
        fprintf(stderr, "gemm_bench: out of memory for %lldx%lld weights\n", (long long)rows,
                (long long)cols);
        return 1;
    }
    uint64_t rs = 88172645463325252ULL;
    fill_weights(t, w, rows, nb, &rs);
    setup s = {.t = t, .timed = timed, .gemm = {sl__gemm_panel8_avx512(t->type), fnew},
               .few = sl__gemm_few_avx512(t->type), .rows_fn = fr,
               .rows = rows, .chunk = chunk,
               /* also asks for the tiles (arch_prctl) */
               .amx = sl_cpu_features_detect().amx_int8,
               .a = {.w = (const char *)w, .wrb = wrb, .arb = (size_t)nb * t->act_bytes,
                     .xb = t->act_bytes, .nb = nb, .y_stride = rows}};
    int rc = 0;
    for (char *tok = strtok(argv[4], ","); tok && !rc; tok = strtok(NULL, ",")) {
        int64_t n;
        if (!parse_int("NTOK", tok, 1, MAX_TOK, &n)) rc = 2;
        else if (!bench(argv[1], &s, cols, n, (int)reps, &rs)) rc = 1;
    }
    free(w);
    return rc;
}
