/* tools/dev/attn_bench: the CPU attention kernels timed on one thread, alternated in the same
 * run (min and median of many repetitions, thread CPU time: the machine is shared). Modes:
 * "decode", sl_cpu_attn_decode token by token (what the engine ran before the tiled kernel),
 * and "tiled", sl_cpu_attn_prefill over all its tiles (what it runs now, for a prompt and for
 * one token). NTOK query tokens sit at the last positions of an F16 cache of CTX positions
 * (NTOK 1: decode at depth CTX - 1). A developer tool:
 *   bazel build -c opt //tools/dev:attn_bench
 *   bazel-bin/tools/dev/attn_bench HEADS KV_HEADS HEAD_DIM CTX NTOK [REPS] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "kernels/cpu/ops.h"
#include "kernels/ref/quant.h"

enum { MODES = 2 };
static const char *const mode_name[MODES] = {"decode", "tiled"};

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

static float frand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static int parse_int(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    char *end;
    errno = 0;
    const long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        fprintf(stderr, "attn_bench: %s: '%s' is not an integer in [%lld, %lld]\n", what, s,
                (long long)lo, (long long)hi);
        return 1;
    }
    *v = x;
    return 0;
}

static sl_status run(int mode, const sl_cpu_ops *ops, const float *q, const uint16_t *k,
                     const uint16_t *v, const sl_attn_params *p, const int32_t *pos,
                     int64_t ntok, float *out, sl_error *err)
{
    if (mode == 1) {
        const int64_t tiles = sl_cpu_attn_prefill_tiles(ops, p, ntok);
        return sl_cpu_attn_prefill(ops, q, k, v, p, pos, ntok, 0, tiles, out, err);
    }
    const int64_t qd = (int64_t)p->n_head * p->head_dim;
    for (int64_t t = 0; t < ntok; t++) {
        sl_attn_params pt = *p;
        pt.n_pos = pos[t] + 1;
        sl_status st = sl_cpu_attn_decode(ops, q + t * qd, k, v, &pt, out + t * qd, err);
        if (st) return st;
    }
    return SL_OK;
}

int main(int argc, char **argv)
{
    int64_t a[6] = {0, 0, 0, 0, 0, 20};
    static const char *const what[6] = {"HEADS", "KV_HEADS", "HEAD_DIM", "CTX", "NTOK", "REPS"};
    static const int64_t hi[6] = {256, 256, 1024, 1 << 20, 1 << 14, 100000};
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: attn_bench HEADS KV_HEADS HEAD_DIM CTX NTOK [REPS]\n");
        return 2;
    }
    for (int i = 0; i < argc - 1; i++)
        if (parse_int(what[i], argv[i + 1], 1, hi[i], &a[i])) return 2;
    if (a[0] % a[1] || a[4] > a[3]) {
        fprintf(stderr, "attn_bench: HEADS must be a multiple of KV_HEADS, NTOK <= CTX\n");
        return 2;
    }
    sl_attn_params p = {.n_head = (int32_t)a[0], .n_kv_head = (int32_t)a[1],
                        .head_dim = (int32_t)a[2], .n_pos = (int32_t)a[3],
                        .kv_type = SL_KV_F16};
    const int64_t ctx = a[3], ntok = a[4], reps = a[5];
    const size_t qd = (size_t)p.n_head * (size_t)p.head_dim;
    const size_t kvn = (size_t)ctx * (size_t)p.n_kv_head * (size_t)p.head_dim;
    float *q = malloc((size_t)ntok * qd * sizeof *q);
    float *out = malloc((size_t)ntok * qd * sizeof *out);
    uint16_t *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
    int32_t *pos = malloc((size_t)ntok * sizeof *pos);
    double *tm[MODES] = {malloc((size_t)reps * sizeof(double)),
                         malloc((size_t)reps * sizeof(double))};
    int rc = 1;
    if (!q || !out || !k || !v || !pos || !tm[0] || !tm[1]) {
        fprintf(stderr, "attn_bench: out of memory\n");
        goto done;
    }
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < (size_t)ntok * qd; i++) q[i] = frand(&s);
    for (size_t i = 0; i < kvn; i++) {
        k[i] = sl_quant_fp32_to_fp16(frand(&s));
        v[i] = sl_quant_fp32_to_fp16(frand(&s));
    }
    for (int64_t t = 0; t < ntok; t++) pos[t] = (int32_t)(ctx - ntok + t);
    sl_cpu_ops ops;
    sl_error err = {0};
    if (sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, sl_cpu_features_detect(), &err)) {
        fprintf(stderr, "attn_bench: %s\n", err.msg);
        goto done;
    }
    for (int64_t r = 0; r < reps; r++)
        for (int m = 0; m < MODES; m++) {
            const double t0 = now_us();
            if (run(m, &ops, q, k, v, &p, pos, ntok, out, &err)) {
                fprintf(stderr, "attn_bench: %s: %s\n", mode_name[m], err.msg);
                goto done;
            }
            tm[m][r] = now_us() - t0;
        }
    printf("attn_bench heads %d/%d dim %d ctx %lld ntok %lld (%s, %lld reps):\n", p.n_head,
           p.n_kv_head, p.head_dim, (long long)ctx, (long long)ntok, sl_cpu_isa_name(ops.isa),
           (long long)reps);
    for (int m = 0; m < MODES; m++) {
        qsort(tm[m], (size_t)reps, sizeof(double), cmp_d);
        printf("  %-6s min %10.1f us  median %10.1f us\n", mode_name[m], tm[m][0],
               tm[m][reps / 2]);
    }
    rc = 0;
done:
    free(q);
    free(out);
    free(k);
    free(v);
    free(pos);
    free(tm[0]);
    free(tm[1]);
    return rc;
}
