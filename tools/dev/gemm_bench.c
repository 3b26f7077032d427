/* tools/dev/gemm_bench: the batch kernels of kernels/cpu/gemm.h timed on one thread, old and new
 * alternated in the same run (min and median of many short repetitions): the AVX-512 build's
 * 8-token panel kernels (sl__gemm_panel8_avx512), its current dispatch (sl__gemm_avx512: the VNNI
 * kernels of gemm_q32_vnni_tmpl.h) and the decode path's whole-row kernel token by token
 * (sl__mv_rows_avx512, the one the few-token rule of gemm.h hands tokens to). Calls go in
 * chunks of CHUNK rows (matvec.c's row_grain gives a GEMM job up to 256). Times are thread CPU
 * time. Checks the three agree bit for bit.
 * A developer tool (needs an AVX-512 VNNI CPU), built outside Bazel from the opt objects:
 *   bazel build -c opt //kernels/cpu:matvec //kernels/ref:matvec //kernels/ref:quant
 *   o=bazel-out/k8-opt/bin
 *   clang -O2 -std=c17 -D_GNU_SOURCE -I. tools/dev/gemm_bench.c -Wl,--start-group \
 *     $(find $o/kernels $o/base $o/gguf $o/alloc -name '*.a' ! -name '*.pic.a') \
 *     $(find $o/gguf/_objs $o/base/_objs $o/alloc/_objs/topo -name '*.o' ! -name '*.pic.o') \
 *     -Wl,--end-group -lm -lpthread -lhwloc -o /tmp/gemm_bench
 *   /tmp/gemm_bench TYPE ROWS COLS NTOK[,NTOK..] [REPS [CHUNK]]
 * TYPE: Q8_0 Q4_0 Q5_0 Q4_1 Q5_1 MXFP4 IQ4_NL; REPS: 200 by default; CHUNK: 256 by default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matvec_impl.h"

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

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

typedef struct setup {
    const sl__mv_type *t;
    sl__gemm_rows a;
    int64_t rows, chunk;
} setup;

/* mode 0: panel8, 1: sl__gemm_avx512, 2: row kernel per token */
static void run(const setup *s, int mode)
{
    if (mode == 2) {
        const sl__mv_rows_fn f = sl__mv_rows_avx512(s->t->type);
        for (int64_t b = 0; b < s->a.n_tok; b++)
            f(s->a.w, s->a.wrb, s->a.xq + (size_t)b * s->a.arb, s->a.nb, 0, s->rows,
              s->a.y + b * s->a.y_stride);
        return;
    }
    const sl__gemm_fn f = mode ? sl__gemm_avx512(s->t->type) : sl__gemm_panel8_avx512(s->t->type);
    for (int64_t r0 = 0; r0 < s->rows; r0 += s->chunk)
        f(s->t, &s->a, r0, s->rows - r0 < s->chunk ? s->rows : r0 + s->chunk);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s TYPE ROWS COLS NTOK[,NTOK..] [REPS]\n", argv[0]);
        return 2;
    }
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(argv[1]);
    if (!ti) {
        fprintf(stderr, "unknown type %s\n", argv[1]);
        return 2;
    }
    const uint32_t type = ti->code;
    const int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
    const int reps = argc > 5 ? atoi(argv[5]) : 200;
    const int64_t chunk = argc > 6 ? atoll(argv[6]) : 256;
    const sl__mv_type *t = sl__mv_type_get(type);
    if (!t || t->block != 32 || rows < 1 || cols < 32 || cols % 32 || reps < 1 || chunk < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    const int64_t nb = cols / 32;
    const size_t wrb = (size_t)nb * t->bytes, arb = (size_t)nb * t->act_bytes;
    uint8_t *w = malloc(wrb * (size_t)rows);
    for (size_t i = 0; i < wrb * (size_t)rows; i++) w[i] = (uint8_t)rnd();
    for (int64_t r = 0; r < rows; r++) /* finite small half scales (and mins) */
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = w + (size_t)r * wrb + (size_t)b * t->bytes;
            if (type == SL_GGML_MXFP4) {
                p[0] = (uint8_t)(118 + rnd() % 8);
                continue;
            }
            p[1] = (uint8_t)(0x14 + rnd() % 4);
            if (type == SL_GGML_Q4_1 || type == SL_GGML_Q5_1) p[3] = (uint8_t)(0x94 + rnd() % 4);
        }
    char *spec = argv[4];
    for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
        const int64_t n = atoll(tok);
        float *x = malloc(sizeof(float) * (size_t)(cols * n));
        for (int64_t i = 0; i < cols * n; i++)
            x[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 997.0f;
        char *xq = malloc(arb * (size_t)n);
        sl__mv_quant_rows(t, x, cols, n, xq, arb);
        float *y[3];
        for (int m = 0; m < 3; m++) y[m] = malloc(sizeof(float) * (size_t)(rows * n));
        setup s = {.t = t, .rows = rows, .chunk = chunk,
                   .a = {.w = (const char *)w, .xq = xq, .wrb = wrb, .arb = arb, .nb = nb,
                         .n_tok = n, .y_stride = rows}};
        double *tm[3];
        for (int m = 0; m < 3; m++) tm[m] = malloc(sizeof(double) * (size_t)reps);
        for (int m = 0; m < 3; m++) {
            s.a.y = y[m];
            run(&s, m);
        }
        const int same = !memcmp(y[0], y[1], sizeof(float) * (size_t)(rows * n)) &&
                         !memcmp(y[0], y[2], sizeof(float) * (size_t)(rows * n));
        for (int k = 0; k < reps; k++)
            for (int m = 0; m < 3; m++) {
                s.a.y = y[m];
                const double t0 = now_us();
                run(&s, m);
                tm[m][k] = now_us() - t0;
            }
        double med[3];
        printf("%s %lldx%lld ntok %3lld:", argv[1], (long long)rows, (long long)cols, (long long)n);
        for (int m = 0; m < 3; m++) {
            qsort(tm[m], (size_t)reps, sizeof(double), cmp_d);
            med[m] = tm[m][reps / 2];
            static const char *names[] = {"panel8", "new", "rows"};
            printf("  %s min %8.1f med %8.1f us", names[m], tm[m][0], med[m]);
        }
        printf("  | panel8/new %.2fx rows/new %.2fx%s\n", med[0] / med[1], med[2] / med[1],
               same ? "" : "  BITS DIFFER");
        for (int m = 0; m < 3; m++) {
            free(tm[m]);
            free(y[m]);
        }
        free(xq);
        free(x);
    }
    free(w);
    return 0;
}
