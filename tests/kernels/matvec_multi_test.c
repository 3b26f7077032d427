/* matvec_multi_test: kernels/cpu/matvec's calls around the per-type kernels (matvec_test.c),
 * on every ISA this CPU has x threads 1, 2, 3: several matrices of one x (sl_cpu_matvec_multi)
 * bit for bit against the reference, the activation quantizers (reference vs kernels/ref/quant,
 * SIMD and pooled vs the reference), the argument errors, and the thread pool. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/topo.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/blocks.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "tests/kernels/matvec_testlib.h"
#include "tests/testing.h"

/* ---- several matrices of one x (sl_cpu_matvec_multi) ----------------------------------- */

/* Each part's y equals the reference bit for bit, every row written (y starts NaN), for mixes
 * of types that share an activation type or not, parts far larger than a chunk (split by
 * bytes) and parts of one row, on every ISA and pool. */
/* Parts with their own inputs (an expert's down projection each): parts 0 and 3 share x0,
 * part 2 shares the call's x with part 1's type, part 4 has x1; every part against a lone
 * reference call on its own input, then all inputs per part with no call x. */
static void check_multi_own_x(const ctx_set *cs)
{
    static const uint32_t types[] = {SL_GGML_Q4_K, SL_GGML_Q8_0, SL_GGML_Q8_0, SL_GGML_Q4_K,
                                     SL_GGML_Q6_K};
    const int64_t cols = 512, rows = 300;
    float *xs[3] = {make_x(cols), make_x(cols), make_x(cols)}; /* call x, x0, x1 */
    const int src[] = {1, 0, 0, 1, 2};
    sl_cpu_matvec_part parts[5];
    float *ref[5];
    bool quantized;
    sl_error e;
    for (int p = 0; p < 5; p++) {
        parts[p] = (sl_cpu_matvec_part){.type = types[p], .rows = rows,
                                        .w = make_weights(types[p], rows, cols, &quantized),
                                        .y = malloc((size_t)rows * sizeof(float)),
                                        .x = src[p] ? xs[src[p]] : NULL};
        ref[p] = malloc((size_t)rows * sizeof(float));
        CHECK(!sl_ref_matvec(types[p], parts[p].w, rows, cols, xs[src[p]], 1, ref[p], &e));
    }
    for (int no_call_x = 0; no_call_x < 2; no_call_x++) {
        if (no_call_x) { /* parts 1 and 2 bring the call's x themselves */
            parts[1].x = xs[0];
            parts[2].x = xs[0];
        }
        const size_t wb = sl_cpu_matvec_multi_work_bytes(parts, 5, cols);
        /* shared inputs are quantized once: Q8_K x0, Q8_0 x (call), Q8_K x1 */
        CHECK(wb == 2 * sl_ref_matvec_act_bytes(SL_GGML_Q4_K, cols) +
                        sl_ref_matvec_act_bytes(SL_GGML_Q8_0, cols));
        char *work = malloc(wb);
        for (int m = 0; m < cs->n_mv; m++)
            for (int pi = 0; pi < 4; pi++) {
                for (int p = 0; p < 5; p++)
                    for (int64_t r = 0; r < rows; r++) parts[p].y[r] = NAN;
                CHECK_MSG(!sl_cpu_matvec_multi(&cs->mv[m], cs->pools[pi], parts, 5, cols,
                                               no_call_x ? NULL : xs[0], work, wb, &e),
                          "multi own x: %s", e.msg);
                for (int p = 0; p < 5; p++) {
                    CHECK_MSG(!memcmp(parts[p].y, ref[p], (size_t)rows * 4),
                              "multi own x %s pool %d: part %d (%s) differs from the reference",
                              sl_cpu_matvec_name(&cs->mv[m]), pi, p, tname(types[p]));
                    n_exact_checks++;
                }
            }
        free(work);
    }
    for (int p = 0; p < 5; p++) {
        free((void *)parts[p].w);
        free(parts[p].y);
        free(ref[p]);
    }
    for (int i = 0; i < 3; i++) free(xs[i]);
}

static void check_multi(const ctx_set *cs)
{
    static const uint32_t mix_k[] = {SL_GGML_Q5_0, SL_GGML_Q8_0, SL_GGML_Q4_K, SL_GGML_Q6_K,
                                     SL_GGML_Q4_1, SL_GGML_F16};
    static const uint32_t mix_32[] = {SL_GGML_Q5_0, SL_GGML_Q5_0, SL_GGML_Q8_0, SL_GGML_MXFP4,
                                      SL_GGML_Q5_1, SL_GGML_F32};
    static const int64_t rows_of[] = {1024, 1, 256, 3000, 17, 64};
    for (int mix = 0; mix < 2; mix++) {
        const uint32_t *types = mix ? mix_32 : mix_k;
        const int64_t cols = mix ? 640 : 512; /* 640: 20 blocks, a short last group */
        for (int n_parts = 1; n_parts <= 6; n_parts++) {
            sl_cpu_matvec_part parts[6];
            float *ref[6];
            bool quantized;
            for (int p = 0; p < n_parts; p++) {
                const int64_t rows = rows_of[(p + mix) % 6];
                parts[p] = (sl_cpu_matvec_part){.type = types[p], .rows = rows,
                                                .w = make_weights(types[p], rows, cols, &quantized),
                                                .y = malloc((size_t)rows * sizeof(float))};
                ref[p] = malloc((size_t)rows * sizeof(float));
            }
            float *x = make_x(cols);
            sl_error e;
            for (int p = 0; p < n_parts; p++)
                CHECK(!sl_ref_matvec(parts[p].type, parts[p].w, parts[p].rows, cols, x, 1, ref[p],
                                     &e));
            const size_t wb = sl_cpu_matvec_multi_work_bytes(parts, n_parts, cols);
            CHECK(wb > 0);
            char *work = malloc(wb + 1);
            for (int m = 0; m < cs->n_mv; m++)
                for (int pi = 0; pi < 4; pi++) {
                    for (int p = 0; p < n_parts; p++)
                        for (int64_t r = 0; r < parts[p].rows; r++) parts[p].y[r] = NAN;
                    /* work + 1: any alignment */
                    const sl_status s = sl_cpu_matvec_multi(&cs->mv[m], cs->pools[pi], parts,
                                                            n_parts, cols, x, work + 1, wb, &e);
                    CHECK_MSG(!s, "multi: %s", e.msg);
                    for (int p = 0; p < n_parts; p++) {
                        CHECK_MSG(!memcmp(parts[p].y, ref[p], (size_t)parts[p].rows * 4),
                                  "multi %s pool %d: part %d (%s, %lld rows) differs from the "
                                  "reference", sl_cpu_matvec_name(&cs->mv[m]), pi, p,
                                  tname(parts[p].type), (long long)parts[p].rows);
                        n_exact_checks++;
                    }
                }
            CHECK(sl_cpu_matvec_multi(&cs->mv[0], NULL, parts, n_parts, cols, x, work, wb - 1,
                                      &e) == SL_ERR_INVALID);
            CHECK_CONTAINS(e.msg, "work_bytes");
            free(work);
            free(x);
            for (int p = 0; p < n_parts; p++) {
                free((void *)parts[p].w);
                free(parts[p].y);
                free(ref[p]);
            }
        }
    }
    check_multi_own_x(cs);
    float x[64] = {0}, y[2];
    uint8_t w[256] = {0}, work[256];
    sl_error e;
    sl_cpu_matvec_part bad = {.type = SL_GGML_Q8_0, .w = w, .rows = 2, .y = y};
    CHECK(sl_cpu_matvec_multi(&cs->mv[0], NULL, &bad, 1, 32, NULL, work, 256, &e) ==
          SL_ERR_INVALID); /* no x anywhere */
    CHECK(sl_cpu_matvec_multi(&cs->mv[0], NULL, &bad, 0, 32, x, work, 256, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_parts = 0");
    CHECK(sl_cpu_matvec_multi(&cs->mv[0], NULL, &bad, 1, 48, x, work, 256, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "part 0");
    CHECK_CONTAINS(e.msg, "cols = 48");
}

/* ---- activation quantizers vs kernels/ref/quant ---------------------------------------- */

static void check_act_quant(void)
{
    const uint32_t wt[] = {SL_GGML_Q8_0, SL_GGML_Q4_1, SL_GGML_Q4_K};
    for (int i = 0; i < 3; i++) {
        const uint32_t at = sl_ref_matvec_act_type(wt[i]);
        if (!sl_quant_supported(at)) {
            printf("matvec_multi_test: notice: kernels/ref/quant has no %s quantizer yet; activation "
                   "quantizer cross-check skipped\n", tname(at));
            continue;
        }
        const int64_t n = 1024;
        float *x = make_x(n);
        x[5] = 0.5f * (x[4] = 127.0f / 64); /* exact ties for the rounding rule */
        const size_t nb = sl_ref_matvec_act_bytes(wt[i], n);
        uint8_t *a = malloc(nb), *b = malloc(nb);
        sl_error e;
        CHECK(!sl_ref_matvec_quant_act(wt[i], x, n, a, &e));
        CHECK(!sl_quant_row(at, x, b, n, &e));
        CHECK_MSG(!memcmp(a, b, nb), "%s activation quantizer differs from sl_quant_row", tname(at));
        free(a);
        free(b);
        free(x);
    }
}

/* IQ1_M's activation rows: each block Q8_K's bytes, then its 32 sums of 8 (checked here by a
 * plain sum, and against Q8_K's 16-element sums: two of them make one); a zero block and one
 * too small for a finite scale quantize to zeros. */
static void check_act_q8_K8(void)
{
    const int64_t n = 1024, nb = n / 256;
    float *x = make_x(n);
    for (int64_t k = 0; k < 256; k++) x[256 + k] = 0.0f; /* a zero block */
    for (int64_t k = 0; k < 256; k++) x[768 + k] = k % 3 ? 2e-39f : -1e-39f; /* a tiny one */
    const size_t ab = sl_ref_matvec_act_bytes(SL_GGML_IQ1_M, n);
    CHECK(sl_ref_matvec_act_type(SL_GGML_IQ1_M) == SL_ACT_Q8_K8);
    CHECK(ab == (size_t)nb * sizeof(sl_block_q8_K8));
    uint8_t *a = malloc(ab), *k = malloc((size_t)nb * sizeof(sl_block_q8_K));
    sl_error e;
    CHECK(!sl_ref_matvec_quant_act(SL_GGML_IQ1_M, x, n, a, &e));
    CHECK(!sl_ref_matvec_quant_act(SL_GGML_Q4_K, x, n, k, &e));
    for (int64_t b = 0; b < nb; b++) {
        sl_block_q8_K8 q;
        memcpy(&q, a + b * sizeof q, sizeof q);
        CHECK_MSG(!memcmp(&q.k, k + b * sizeof(sl_block_q8_K), sizeof q.k),
                  "Q8_K8 block %lld: its Q8_K part differs from Q8_K's", (long long)b);
        for (int j = 0; j < 256 && (b == 1 || b == 3); j++)
            CHECK_MSG(q.k.qs[j] == 0, "Q8_K8 block %lld (zero or too small to scale): q[%d] = %d",
                      (long long)b, j, q.k.qs[j]);
        for (int g = 0; g < 32; g++) {
            int sum = 0;
            for (int j = 0; j < 8; j++) sum += q.k.qs[8 * g + j];
            CHECK_MSG(q.sums8[g] == sum, "Q8_K8 block %lld sum %d: %d, not %d", (long long)b, g,
                      q.sums8[g], sum);
            if (g % 2) CHECK(q.sums8[g - 1] + q.sums8[g] == q.k.bsums[g / 2]);
        }
    }
    free(a);
    free(k);
    free(x);
}

/* The SIMD activation quantizers (kernels/cpu/quant_act.c) give the reference's bytes: random
 * rows, rounding ties (amax 127 makes x * id exact: 2.5 rounds away from zero for Q8_0/1, to even
 * for Q8_K), an all-zero block, and +-amax in both orders (Q8_K's max is the first). */
static void check_act_quant_fast(const ctx_set *cs)
{
    /* Q8_0, Q8_K, Q8_1, Q8_K8 */
    const uint32_t wt[] = {SL_GGML_Q8_0, SL_GGML_Q4_K, SL_GGML_Q5_1, SL_GGML_IQ1_M};
    const int64_t n = 1024, n_batch = 3;
    for (int i = 0; i < 4; i++) {
        float *x = make_x(n * n_batch);
        for (int64_t k = 0; k < 32; k++) x[k] = 0.0f; /* block 0 (row 0): zeros */
        /* row 0's last 256: too small for a finite scale (zeros, not a cast of infinity) */
        for (int64_t k = 768; k < 1024; k++) x[k] = (k % 2 ? 1e-39f : -3e-39f);
        for (int64_t k = 256; k < 512; k++) x[k] = (float)(k % 9) - 4.5f; /* ties */
        x[256] = 127.0f;
        x[300] = -127.0f;
        x[n + 40] = -x[n + 40] * 3.0f; /* row 1: a large negative, then its positive twin */
        x[n + 41] = -x[n + 40];
        x[2 * n + 7] = 9.0f;           /* row 2: the positive one first */
        x[2 * n + 8] = -9.0f;
        const size_t rb = sl_ref_matvec_act_bytes(wt[i], n), nb = rb * (size_t)n_batch;
        uint8_t *a = malloc(nb), *b = malloc(nb);
        sl_error e;
        for (int64_t r = 0; r < n_batch; r++)
            CHECK(!sl_ref_matvec_quant_act(wt[i], x + r * n, n, a + (size_t)r * rb, &e));
        for (int m = 0; m < cs->n_mv; m++) {
            memset(b, 0x5a, nb);
            CHECK(!sl_cpu_matvec_quant_act(&cs->mv[m], wt[i], x, n, n_batch, b, nb, &e));
            CHECK_MSG(!memcmp(a, b, nb), "%s: %s activation quantizer differs from the reference",
                      sl_cpu_matvec_name(&cs->mv[m]), tname(sl_ref_matvec_act_type(wt[i])));
        }
        free(a);
        free(b);
        free(x);
    }
}

/* sl_cpu_matvec_quant_act_pool: rows split over 1-3 threads (70 rows: chunks of 16 and a
 * short last one) give sl_cpu_matvec_quant_act's bytes. */
static void check_act_quant_pool(const ctx_set *cs)
{
    const uint32_t wt[] = {SL_GGML_Q8_0, SL_GGML_Q4_K, SL_GGML_Q5_1, SL_GGML_IQ1_M};
    const int64_t n = 512, n_batch = 70;
    float *x = make_x(n * n_batch);
    for (int i = 0; i < 4; i++) {
        const size_t nb = sl_cpu_matvec_work_bytes(wt[i], n, n_batch);
        uint8_t *a = malloc(nb), *b = malloc(nb);
        sl_error e;
        for (int m = 0; m < cs->n_mv; m++) {
            CHECK(!sl_cpu_matvec_quant_act(&cs->mv[m], wt[i], x, n, n_batch, a, nb, &e));
            for (int p = 0; p < 4; p++) {
                memset(b, 0x5a, nb);
                CHECK(!sl_cpu_matvec_quant_act_pool(&cs->mv[m], cs->pools[p], wt[i], x, n,
                                                    n_batch, b, nb, &e));
                CHECK_MSG(!memcmp(a, b, nb), "%s: %s activations over %d threads differ",
                          sl_cpu_matvec_name(&cs->mv[m]), tname(wt[i]),
                          sl_cpu_pool_threads(cs->pools[p]));
            }
        }
        free(a);
        free(b);
    }
    free(x);
}

static void check_errors(const sl_cpu_matvec_ctx *mv)
{
    float x[64] = {0}, y[4];
    uint8_t w[1024] = {0};
    sl_error e;
    CHECK(sl_ref_matvec(SL_GGML_TQ1_0, w, 1, 256, x, 1, y, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "TQ1_0");
    CHECK(sl_ref_matvec(SL_GGML_Q8_0, w, 1, 48, x, 1, y, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "cols = 48");
    CHECK(sl_ref_matvec(SL_GGML_Q8_0, NULL, 1, 32, x, 1, y, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "w is NULL");
    const int32_t bad[2] = {0, 5};
    CHECK(sl_ref_matvec_rows(SL_GGML_Q8_0, w, 2, 32, bad, 2, false, x, 1, y, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "idx[1] = 5");
    CHECK(sl_cpu_matvec(mv, NULL, SL_GGML_Q8_0, w, 1, 32, x, 1, y, w, 10, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "xq_bytes");
    CHECK(sl_cpu_matvec(mv, NULL, SL_GGML_TQ1_0, w, 1, 256, x, 1, y, w, 1024, &e) ==
          SL_ERR_UNSUPPORTED);
    CHECK(sl_cpu_matvec_t_rows(mv, NULL, SL_GGML_Q8_0, w, 2, 32, bad, 2, x, 1, y, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "rows = 2");
    /* no groups: the type and the shape are still checked */
    CHECK(!sl_cpu_matvec_groups_q(mv, NULL, SL_GGML_Q8_0, 2, 32, NULL, 0, &e));
    CHECK(sl_cpu_matvec_groups_q(mv, NULL, SL_GGML_TQ2_0, 2, 256, NULL, 0, &e) ==
          SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "weight type TQ2_0");
    CHECK(sl_cpu_matvec_groups_q(mv, NULL, SL_GGML_Q8_0, 2, 48, NULL, 0, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "cols = 48");
    CHECK(sl_cpu_matvec_groups_q(mv, NULL, SL_GGML_Q8_0, 0, 32, NULL, 0, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "rows = 0");
    CHECK(sl_cpu_matvec_groups_q(mv, NULL, SL_TYPE_Q4_K_R8, 12, 256, NULL, 0, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "rows = 12");
}

/* ---- pool -------------------------------------------------------------------------------- */

typedef struct cover {
    atomic_int *hits;
    int n_threads;
    atomic_int bad_thread;
    const sl_topo_node *node; /* workers must run on its CPUs (NULL: not checked) */
    atomic_int off_node;
} cover;

static void cover_fn(void *ctx, int64_t b, int64_t e, int thread)
{
    cover *c = ctx;
    if (thread < 0 || thread >= c->n_threads) atomic_fetch_add(&c->bad_thread, 1);
    if (c->node && thread > 0) {
        const int cpu = sched_getcpu();
        bool on = false;
        for (int i = 0; i < c->node->ncpus; i++) on |= c->node->cpus[i] == cpu;
        if (!on) atomic_fetch_add(&c->off_node, 1);
    }
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

/* Back-to-back small calls, from a thread other than the pool's creator (as a host function on
 * a device stream's thread calls it): every index exactly once per call, whichever workers
 * joined (a worker that wakes late must not run a chunk of a call that has returned). */
typedef struct burst {
    sl_cpu_pool *p;
    int n_threads, wrong, failed;
} burst;

static void *burst_main(void *arg)
{
    burst *b = arg;
    enum { N = 64 };
    atomic_int hits[N];
    for (int rep = 0; rep < 2000; rep++) {
        const int64_t n = 1 + rep % N, grain = 1 + rep % 3;
        for (int i = 0; i < N; i++) atomic_store(&hits[i], 0);
        cover c = {.hits = hits, .n_threads = b->n_threads};
        sl_error e;
        b->failed += sl_cpu_pool_parallel_for(b->p, n, grain, cover_fn, &c, &e) != SL_OK;
        for (int64_t i = 0; i < N; i++) b->wrong += atomic_load(&hits[i]) != (i < n);
        b->wrong += atomic_load(&c.bad_thread);
    }
    return NULL;
}

static void check_pool_bursts(void)
{
    for (int nt = 2; nt <= 3; nt++) {
        sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1};
        burst b = {.n_threads = nt};
        sl_error e;
        CHECK_MSG(!sl_cpu_pool_create(&o, &b.p, &e), "%s", e.msg);
        if (!b.p) continue;
        pthread_t t;
        for (int round = 0; round < 2; round++) {
            CHECK(!pthread_create(&t, NULL, burst_main, &b) && !pthread_join(t, NULL));
            burst_main(&b); /* and from the creator */
        }
        CHECK_MSG(!b.wrong && !b.failed, "pool %d threads, bursts from two threads: %d indices "
                  "wrong, %d calls failed", nt, b.wrong, b.failed);
        sl_cpu_pool_destroy(b.p);
    }
}

static void check_pool(void)
{
    sl_error e;
    sl_topo *topo = NULL;
    sl_topo_options to = {.source = SL_TOPO_THIS_MACHINE};
    CHECK(!sl_topo_load(&to, &topo, &e));
    const sl_topo_node *node0 = topo ? sl_topo_node_at(topo, 0) : NULL;
    enum { N = 1000 };
    atomic_int *hits = malloc(N * sizeof *hits);
    for (int nt = 1; nt <= 3; nt++)
        for (int mode = 0; mode < 3; mode++) { /* unbound, node 0, cpu list "0" */
            sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1, .topo = topo};
            if (mode == 1 && node0) o.numa_node = node0->os_index;
            if (mode == 2) o.cpus = "0";
            sl_cpu_pool *p = NULL;
            const sl_status s = sl_cpu_pool_create(&o, &p, &e);
            CHECK_MSG(!s, "pool %d threads mode %d: %s", nt, mode, e.msg);
            if (s) continue;
            CHECK(sl_cpu_pool_threads(p) == nt);
            for (int rep = 0; rep < 50; rep++) {
                for (int i = 0; i < N; i++) atomic_store(&hits[i], 0);
                cover c = {.hits = hits, .n_threads = nt, .node = mode == 1 ? node0 : NULL};
                const int64_t n = rep % 2 ? N : 1 + rep * 7, grain = 1 + rep % 13;
                CHECK(!sl_cpu_pool_parallel_for(p, n, grain, cover_fn, &c, &e));
                int wrong = 0;
                for (int64_t i = 0; i < N; i++) wrong += atomic_load(&hits[i]) != (i < n);
                CHECK_MSG(!wrong, "pool %d threads: %d indices not covered exactly once", nt, wrong);
                CHECK(!atomic_load(&c.bad_thread));
                CHECK(!atomic_load(&c.off_node));
            }
            CHECK(!sl_cpu_pool_parallel_for(p, 0, 1, cover_fn, NULL, &e));
            CHECK(sl_cpu_pool_parallel_for(p, 5, 0, cover_fn, NULL, &e) == SL_ERR_INVALID);
            /* the scratch: aligned, writable to its size, one holder at a time, kept across
             * calls (the same buffer for a request it holds), grown for a bigger one */
            char *s0 = sl_cpu_pool_scratch(p, 0); /* a fresh pool: a buffer even for 0 */
            CHECK(s0 != NULL);
            sl_cpu_pool_scratch_release(p);
            char *s1 = sl_cpu_pool_scratch(p, 1000);
            CHECK(s1 && (uintptr_t)s1 % 64 == 0);
            if (s1) memset(s1, 1, 1000);
            CHECK(sl_cpu_pool_scratch(p, 10) == NULL); /* held */
            sl_cpu_pool_scratch_release(p);
            CHECK(sl_cpu_pool_scratch(p, 64) == s1);
            sl_cpu_pool_scratch_release(p);
            char *s2 = sl_cpu_pool_scratch(p, 1 << 20);
            CHECK(s2 && (uintptr_t)s2 % 64 == 0);
            if (s2) memset(s2, 2, 1 << 20);
            sl_cpu_pool_scratch_release(p);
            CHECK(sl_cpu_pool_scratch(p, SIZE_MAX) == NULL); /* refused, not held after */
            CHECK(sl_cpu_pool_scratch(p, 1) != NULL);
            sl_cpu_pool_scratch_release(p);
            sl_cpu_pool_destroy(p);
        }
    CHECK(sl_cpu_pool_scratch(NULL, 16) == NULL);
    sl_cpu_pool_scratch_release(NULL);
    /* keep_awake: workers spin through a gap far longer than their spin instead of sleeping
     * (sl_cpu_pool_sleeps unchanged across it); without it they sleep within it */
    {
        sl_cpu_pool_options o = {.n_threads = 2, .numa_node = -1, .topo = topo};
        sl_cpu_pool *kp = NULL;
        CHECK(!sl_cpu_pool_create(&o, &kp, &e));
        const struct timespec gap = {0, 60 * 1000 * 1000};
        for (int awake = 1; kp && awake >= 0; awake--) {
            for (int i = 0; i < N; i++) atomic_store(&hits[i], 0);
            cover c = {.hits = hits, .n_threads = 2};
            if (awake) sl_cpu_pool_keep_awake(kp, 400 * 1000 * 1000ull); /* capped at 100 ms */
            CHECK(!sl_cpu_pool_parallel_for(kp, N, 7, cover_fn, &c, &e));
            const uint64_t s0 = sl_cpu_pool_sleeps(kp);
            nanosleep(&gap, NULL);
            const uint64_t s1 = sl_cpu_pool_sleeps(kp);
            CHECK_MSG(awake ? s1 == s0 : s1 > s0, "keep_awake %d: %llu -> %llu worker sleeps "
                      "across a 60 ms gap", awake, (unsigned long long)s0,
                      (unsigned long long)s1);
            if (awake) nanosleep(&gap, NULL); /* past the 100 ms cap: they sleep again */
        }
        sl_cpu_pool_keep_awake(NULL, 1);
        CHECK(sl_cpu_pool_sleeps(NULL) == 0);
        sl_cpu_pool_destroy(kp);
    }
    sl_cpu_pool *p = (sl_cpu_pool *)1;
    sl_cpu_pool_options bad = {.n_threads = 0, .numa_node = -1};
    CHECK(sl_cpu_pool_create(&bad, &p, &e) == SL_ERR_INVALID && p == NULL);
    CHECK_CONTAINS(e.msg, "n_threads = 0");
    bad = (sl_cpu_pool_options){.n_threads = 2, .numa_node = 999, .topo = topo};
    CHECK(sl_cpu_pool_create(&bad, &p, &e) != SL_OK && p == NULL);
    CHECK_CONTAINS(e.msg, "worker 1");
    bad = (sl_cpu_pool_options){.n_threads = 2, .numa_node = -1, .cpus = "0-x", .topo = topo};
    CHECK(sl_cpu_pool_create(&bad, &p, &e) != SL_OK && p == NULL);
    free(hits);
    sl_topo_destroy(topo);
}

int main(void)
{
    ctx_set cs;
    ctx_set_init(&cs, "matvec_multi_test");
    check_errors(&cs.mv[0]);
    check_act_quant();
    check_act_q8_K8();
    check_act_quant_fast(&cs);
    check_act_quant_pool(&cs);
    check_pool();
    check_pool_bursts();
    check_multi(&cs);
    ctx_set_free(&cs);
    printf("matvec_multi_test: %lld bit-exact comparisons of fast vs reference\n",
           (long long)n_exact_checks);
    return sl_test_finish("matvec_multi_test");
}
