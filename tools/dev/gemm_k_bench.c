/* tools/dev/gemm_k_bench: the AVX-512 batch kernel of the K-quants and IQ4_XS (kernels/cpu/gemm.h:
 * sl__gemm_avx512, gemm_k_vnni_tmpl.h) timed on one thread in thread CPU time (the machine is
 * shared): min and median of many repetitions of one expert's matmul called in chunks of CHUNK
 * rows (matvec.c's grouped path), checked bit for bit against the decode path's row kernel
 * (sl__mv_rows_avx512, the reference's bits). Compare two versions by building two binaries.
 * A developer tool (needs an AVX-512 VNNI CPU), built outside Bazel from the opt objects:
 *   bazel build -c opt //kernels/cpu:matvec //kernels/ref:matvec //kernels/ref:quant \
 *     //gguf:gguf //base:status //base:file //base:parse
 *   o=bazel-out/k8-opt/bin
 *   clang -O2 -std=c17 -D_GNU_SOURCE -I. tools/dev/gemm_k_bench.c -Wl,--start-group \
 *     $(find $o/kernels $o/base $o/gguf $o/alloc -name '*.a' ! -name '*.pic.a') \
 *     -Wl,--end-group -lm -lpthread -lhwloc -o /tmp/gemm_k_bench
 *   /tmp/gemm_k_bench TYPE ROWS COLS NTOK[,NTOK..] [REPS [CHUNK]]
 * TYPE: Q4_K Q5_K Q6_K IQ4_XS; REPS: 30 by default; CHUNK: 64 by default. */
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
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
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

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s TYPE ROWS COLS NTOK[,NTOK..] [REPS [CHUNK]]\n", argv[0]);
        return 2;
    }
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(argv[1]);
    if (!ti) {
        fprintf(stderr, "unknown type %s\n", argv[1]);
        return 2;
    }
    const uint32_t type = ti->code;
    const int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
    const int reps = argc > 5 ? atoi(argv[5]) : 30;
    const int64_t chunk = argc > 6 ? atoll(argv[6]) : 64;
    const sl__mv_type *t = sl__mv_type_get(type);
    if (!t || t->block != 256 || rows < 1 || cols < 256 || cols % 256 || reps < 1 || chunk < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    const int64_t nb = cols / 256;
    const size_t wrb = (size_t)nb * t->bytes, arb = (size_t)nb * t->act_bytes;
    uint8_t *w = malloc(wrb * (size_t)rows);
    for (size_t i = 0; i < wrb * (size_t)rows; i++) w[i] = (uint8_t)rnd();
    /* finite small half scales: d (and dmin) where the type keeps them */
    const size_t doff = type == SL_GGML_Q6_K ? 208 : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = w + (size_t)r * wrb + (size_t)b * t->bytes + doff;
            p[1] = (uint8_t)(0x14 + rnd() % 4);
            if (type == SL_GGML_Q4_K || type == SL_GGML_Q5_K) p[3] = (uint8_t)(0x14 + rnd() % 4);
        }
    const sl__gemm_fn f = sl__gemm_avx512(type);
    const sl__mv_rows_fn fr = sl__mv_rows_avx512(type);
    for (char *tok = strtok(argv[4], ","); tok; tok = strtok(NULL, ",")) {
        const int64_t n = atoll(tok);
        float *x = malloc(sizeof(float) * (size_t)(cols * n));
        for (int64_t i = 0; i < cols * n; i++)
            x[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 997.0f;
        char *xq = malloc(arb * (size_t)n);
        sl__mv_quant_rows(t, x, cols, n, xq, arb);
        float *y = malloc(sizeof(float) * (size_t)(rows * n)),
              *yr = malloc(sizeof(float) * (size_t)(rows * n));
        for (int64_t b = 0; b < n; b++)
            fr((const char *)w, wrb, xq + (size_t)b * arb, nb, 0, rows, yr + b * rows);
        const sl__gemm_rows a = {.w = (const char *)w, .xq = xq, .wrb = wrb, .arb = arb,
                                 .nb = nb, .n_tok = n, .y_stride = rows, .y = y};
        double *tm = malloc(sizeof(double) * (size_t)reps);
        for (int k = -1; k < reps; k++) {
            const double t0 = now_us();
            for (int64_t r0 = 0; r0 < rows; r0 += chunk)
                f(t, &a, r0, rows - r0 < chunk ? rows : r0 + chunk);
            if (k >= 0) tm[k] = now_us() - t0;
        }
        const int same = !memcmp(y, yr, sizeof(float) * (size_t)(rows * n));
        qsort(tm, (size_t)reps, sizeof(double), cmp_d);
        printf("%s %lldx%lld ntok %3lld chunk %lld: min %8.1f med %8.1f us%s\n", argv[1],
               (long long)rows, (long long)cols, (long long)n, (long long)chunk, tm[0],
               tm[reps / 2], same ? "" : "  BITS DIFFER");
        free(tm);
        free(y);
        free(yr);
        free(xq);
        free(x);
    }
    free(w);
    return 0;
}
