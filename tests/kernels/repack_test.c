/* repack_test: Q4_K_R8 (kernels/ref/repack.h). The repack is lossless (undo gives the bytes
 * back, in place or not) and refuses bad shapes; every CPU kernel entry point (each ISA this
 * CPU has x threads 0-3) computes a repacked matrix with the bits the reference gives the
 * original Q4_K matrix: decode (single and multi-part, mixed with row-major parts sharing x),
 * batches through the GEMM and its tails, grouped batches, gathered and column-listed rows, the
 * transposed layout and the f32-activation mode. Weights are random bytes with sane half
 * scales, so every six-bit scale/min pattern and quant occurs. The load's repack of many
 * matrices over a pool gives each one's bytes on every pool; the CPU's out-of-place undo gives
 * the original bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/repack.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "tests/kernels/matvec_ctxs.h"
#include "tests/testing.h"

static uint64_t rng = 0x2e9ac4b1d3f5ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float rndf(void) { return (float)((double)(rnd() >> 11) * 0x1p-53 * 2.0 - 1.0); }

static uint8_t *q4k_random(int64_t rows, int64_t cols)
{
    const size_t n = (size_t)(rows * (cols / 256));
    sl_block_q4_K *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = (uint8_t *)&w[i];
        for (size_t k = 0; k < sizeof *w; k++) p[k] = (uint8_t)rnd();
        const float d = 0.001f + 0.01f * (float)(rnd() % 100) / 100.0f;
        w[i].d = sl_quant_fp32_to_fp16(d);
        w[i].dmin = sl_quant_fp32_to_fp16(d * rndf());
    }
    return (uint8_t *)w;
}

static float *rand_x(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = rndf() * (i % 61 == 0 ? 8.0f : 1.0f);
    return x;
}

typedef struct env {
    sl_cpu_matvec_ctx mv[4]; /* scalar, avx2, avx512 (VNNI), and with AMX tiles */
    int n_mv;
    sl_cpu_pool *pools[4]; /* NULL (the caller), 1, 2, 3 threads */
} env;

static int64_t n_checks;

#define SAME(a, b, n, ...)                                                                   \
    do {                                                                                     \
        n_checks++;                                                                          \
        CHECK_MSG(!memcmp((a), (b), (size_t)(n) * sizeof(float)), __VA_ARGS__);              \
    } while (0)

static void check_round_trip(void)
{
    sl_error e;
    const int64_t rows = 24, cols = 3 * 256;
    const size_t bytes = (size_t)rows * 3 * 144;
    uint8_t *a = q4k_random(rows, cols), *b = malloc(bytes), *c = malloc(bytes);
    CHECK(!sl_repack_q4_K_r8(a, b, rows, cols, &e));
    CHECK(memcmp(a, b, bytes) != 0);
    memcpy(c, a, bytes);
    CHECK(!sl_repack_q4_K_r8(c, c, rows, cols, &e)); /* in place */
    CHECK(!memcmp(b, c, bytes));
    CHECK(!sl_repack_q4_K_r8_undo(b, c, rows, cols, &e));
    CHECK(!memcmp(a, c, bytes));
    CHECK(!sl_repack_q4_K_r8_undo(b, b, rows, cols, &e));
    CHECK(!memcmp(a, b, bytes));
    /* the CPU's out-of-place undo (the fetching scheduler's uploads) gives the same bytes, for
     * one and several super-blocks per row; it refuses bad shapes and overlaps */
    for (int64_t nb = 1; nb <= 3; nb++) {
        const size_t nbytes = (size_t)rows * (size_t)nb * 144;
        uint8_t *q = q4k_random(rows, nb * 256), *r8 = malloc(nbytes), *back = malloc(nbytes);
        CHECK(!sl_repack_q4_K_r8(q, r8, rows, nb * 256, &e));
        CHECK(!sl_cpu_repack_q4_K_r8_undo(r8, back, rows, nb * 256, &e));
        CHECK_MSG(!memcmp(q, back, nbytes), "sl_cpu_repack_q4_K_r8_undo, %lld super-blocks: "
                  "not the original bytes", (long long)nb);
        free(q);
        free(r8);
        free(back);
    }
    CHECK(sl_cpu_repack_q4_K_r8_undo(b, c, 12, cols, &e) == SL_ERR_INVALID &&
          strstr(e.msg, "rows = 12"));
    CHECK(sl_cpu_repack_q4_K_r8_undo(b, c, 8, 300, &e) == SL_ERR_INVALID);
    CHECK(sl_cpu_repack_q4_K_r8_undo(NULL, c, 8, 256, &e) == SL_ERR_INVALID);
    CHECK(sl_cpu_repack_q4_K_r8_undo(b, b, 8, 256, &e) == SL_ERR_INVALID);
    /* a row copied out is the original row */
    CHECK(!sl_repack_q4_K_r8(a, b, rows, cols, &e));
    for (int64_t r = 0; r < rows; r++) {
        sl_block_q4_K row[3];
        sl__q4_K_r8_row(b, 3, r, 0, 3, row);
        CHECK(!memcmp(row, a + (size_t)r * 3 * 144, sizeof row));
        sl__q4_K_r8_row(b, 3, r, 1, 2, row);
        CHECK(!memcmp(row, a + (size_t)r * 3 * 144 + 144, 144));
    }
    /* refusals name the argument */
    CHECK(sl_repack_q4_K_r8(a, b, 12, cols, &e) == SL_ERR_INVALID && strstr(e.msg, "rows = 12"));
    CHECK(sl_repack_q4_K_r8(a, b, 0, cols, &e) == SL_ERR_INVALID);
    CHECK(sl_repack_q4_K_r8(a, b, 8, 300, &e) == SL_ERR_INVALID && strstr(e.msg, "cols = 300"));
    CHECK(sl_repack_q4_K_r8(NULL, b, 8, 256, &e) == SL_ERR_INVALID);
    CHECK(sl_repack_q4_K_r8(a, a + 144, 8, 256, &e) == SL_ERR_INVALID && strstr(e.msg, "overlap"));
    /* a repacked matrix has whole groups: the kernels refuse other row counts */
    float x[256] = {0}, y[12];
    CHECK(sl_ref_matvec(SL_TYPE_Q4_K_R8, b, 12, 256, x, 1, y, &e) == SL_ERR_INVALID &&
          strstr(e.msg, "groups of 8"));
    free(a);
    free(b);
    free(c);
}

/* The load's pass (kernels/cpu/repack.h) on every pool: several parts, some of many chunks
 * (whole and partial), each in place with the bytes sl_repack_q4_K_r8 gives it alone; a bad
 * part is refused by name before any part is written. */
static void check_pool_repack(const env *v)
{
    enum { N = 4 };
    static const int64_t rows[N] = {8, 2048, 136, 2000}, sb[N] = {1, 8, 11, 16};
    uint8_t *q[N], *want[N], *got[N];
    size_t bytes[N];
    sl_error e;
    int64_t chunks = 0;
    for (int p = 0; p < N; p++) {
        bytes[p] = (size_t)rows[p] * (size_t)sb[p] * 144;
        q[p] = q4k_random(rows[p], sb[p] * 256);
        want[p] = malloc(bytes[p]);
        got[p] = malloc(bytes[p]);
        CHECK(!sl_repack_q4_K_r8(q[p], want[p], rows[p], sb[p] * 256, &e));
        chunks += (int64_t)(bytes[p] / SL_CPU_REPACK_CHUNK_BYTES);
    }
    CHECK_MSG(chunks >= 4, "the parts are only %lld chunks", (long long)chunks);
    sl_cpu_repack_part parts[N];
    for (int pi = 0; pi < 4; pi++) {
        for (int p = 0; p < N; p++) {
            memcpy(got[p], q[p], bytes[p]);
            parts[p] = (sl_cpu_repack_part){.data = got[p], .rows = rows[p], .cols = sb[p] * 256};
        }
        CHECK_MSG(!sl_cpu_repack_q4_K_r8(v->pools[pi], parts, N, &e), "pool %d: %s", pi, e.msg);
        for (int p = 0; p < N; p++) {
            n_checks++;
            CHECK_MSG(!memcmp(got[p], want[p], bytes[p]), "pool of %d threads: part %d (%lld "
                      "x %lld) differs from the one-matrix repack",
                      sl_cpu_pool_threads(v->pools[pi]), p, (long long)rows[p],
                      (long long)sb[p] * 256);
        }
    }
    for (int p = 0; p < N; p++) memcpy(got[p], q[p], bytes[p]);
    parts[2].rows = 132;
    parts[2].name = "blk.0.bad";
    CHECK(sl_cpu_repack_q4_K_r8(v->pools[2], parts, N, &e) == SL_ERR_INVALID &&
          strstr(e.msg, "blk.0.bad") && strstr(e.msg, "rows = 132"));
    CHECK(!memcmp(got[0], q[0], bytes[0]) && !memcmp(got[1], q[1], bytes[1]));
    CHECK(!sl_cpu_repack_q4_K_r8(v->pools[2], NULL, 0, &e));
    for (int p = 0; p < N; p++) {
        free(q[p]);
        free(want[p]);
        free(got[p]);
    }
}

/* Every dense entry point on the repacked matrix against the reference on the original. */
static void check_dense(const env *v, const uint8_t *q, const uint8_t *r8, int64_t rows,
                        int64_t cols, int64_t n_batch)
{
    sl_error e;
    const size_t ny = (size_t)(rows * n_batch);
    float *x = rand_x(cols * n_batch), *yr = malloc(ny * 4), *yf = malloc(ny * 4);
    CHECK(!sl_ref_matvec(SL_GGML_Q4_K, q, rows, cols, x, n_batch, yr, &e));
    memset(yf, 0, ny * 4);
    CHECK(!sl_ref_matvec(SL_TYPE_Q4_K_R8, r8, rows, cols, x, n_batch, yf, &e));
    SAME(yf, yr, ny, "ref R8 vs ref Q4_K: rows %lld cols %lld batch %lld", (long long)rows,
         (long long)cols, (long long)n_batch);
    const size_t wb = sl_cpu_matvec_work_bytes(SL_TYPE_Q4_K_R8, cols, n_batch);
    void *work = malloc(wb);
    for (int m = 0; m < v->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            const sl_cpu_matvec_ctx *mv = &v->mv[m];
            memset(yf, 0xff, ny * 4);
            CHECK_MSG(!sl_cpu_matvec(mv, v->pools[p], SL_TYPE_Q4_K_R8, r8, rows, cols, x,
                                     n_batch, yf, work, wb, &e), "%s", e.msg);
            SAME(yf, yr, ny, "%s threads %d: rows %lld cols %lld batch %lld",
                 sl_cpu_matvec_name(mv), sl_cpu_pool_threads(v->pools[p]), (long long)rows,
                 (long long)cols, (long long)n_batch);
            /* grouped: the same matrix twice, each group its own batch */
            CHECK(!sl_cpu_matvec_quant_act(mv, SL_TYPE_Q4_K_R8, x, cols, n_batch, work, wb, &e));
            float *yg = malloc(ny * 4);
            memset(yg, 0xff, ny * 4);
            memset(yf, 0xff, ny * 4);
            const sl_cpu_matvec_group g[2] = {{.w = r8, .xq = work, .n_batch = n_batch, .y = yf},
                                              {.w = r8, .xq = work, .n_batch = n_batch, .y = yg}};
            CHECK_MSG(!sl_cpu_matvec_groups_q(mv, v->pools[p], SL_TYPE_Q4_K_R8, rows, cols, g, 2,
                                              &e), "%s", e.msg);
            SAME(yf, yr, ny, "%s groups: rows %lld batch %lld", sl_cpu_matvec_name(mv),
                 (long long)rows, (long long)n_batch);
            SAME(yg, yr, ny, "%s groups (2nd)", sl_cpu_matvec_name(mv));
            free(yg);
        }
    free(work);
    free(x);
    free(yr);
    free(yf);
}

/* Gathered rows, column-listed, transposed and f32-act on the repacked matrix == the same call
 * on the original (the row-major paths are checked against the reference in matvec_test). */
static void check_sparse(const env *v, const uint8_t *q, const uint8_t *r8, int64_t rows,
                         int64_t cols, int64_t n_batch)
{
    sl_error e;
    const int64_t n_idx = rows / 2 + 1;
    int32_t *idx = malloc((size_t)n_idx * sizeof *idx), *cidx = malloc((size_t)cols * 4);
    for (int64_t i = 0; i < n_idx; i++) idx[i] = (int32_t)(rnd() % (uint64_t)rows);
    const int64_t n_cidx = cols / 5 + 1;
    for (int64_t i = 0; i < n_cidx; i++) cidx[i] = (int32_t)(rnd() % (uint64_t)cols);
    const int64_t big = (rows > cols ? rows : cols) * n_batch;
    float *x = rand_x(cols * n_batch), *xt = rand_x(rows * n_batch);
    float *ya = malloc((size_t)big * 4), *yb = malloc((size_t)big * 4);
    const size_t wb = sl_cpu_matvec_work_bytes(SL_GGML_Q4_K, cols, n_batch);
    const size_t cwb = sl_cpu_matvec_cols_work_bytes(SL_GGML_Q4_K, cols, n_batch);
    void *xq = malloc(wb), *cw = malloc(cwb);
    for (int m = 0; m < v->n_mv; m++)
        for (int p = 0; p < 4; p += 2) {
            const sl_cpu_matvec_ctx *mv = &v->mv[m];
            sl_cpu_pool *pool = v->pools[p];
            CHECK(!sl_cpu_matvec_quant_act(mv, SL_GGML_Q4_K, x, cols, n_batch, xq, wb, &e));
            for (int sc = 0; sc < 2; sc++) {
                memset(ya, 0, (size_t)big * 4);
                memset(yb, 0, (size_t)big * 4);
                CHECK(!sl_cpu_matvec_rows_q(mv, pool, SL_GGML_Q4_K, q, rows, cols, idx, n_idx, sc,
                                            xq, n_batch, ya, &e));
                CHECK_MSG(!sl_cpu_matvec_rows_q(mv, pool, SL_TYPE_Q4_K_R8, r8, rows, cols, idx,
                                                n_idx, sc, xq, n_batch, yb, &e), "%s", e.msg);
                SAME(ya, yb, big, "%s rows_q scatter %d", sl_cpu_matvec_name(mv), sc);
            }
            memset(ya, 0, (size_t)big * 4);
            memset(yb, 0, (size_t)big * 4);
            CHECK(!sl_cpu_matvec_cols(mv, pool, SL_GGML_Q4_K, q, rows, cols, cidx, n_cidx, x,
                                      n_batch, ya, cw, cwb, &e));
            CHECK_MSG(!sl_cpu_matvec_cols(mv, pool, SL_TYPE_Q4_K_R8, r8, rows, cols, cidx, n_cidx,
                                          x, n_batch, yb, cw, cwb, &e), "%s", e.msg);
            SAME(ya, yb, big, "%s cols", sl_cpu_matvec_name(mv));
            memset(ya, 0, (size_t)big * 4);
            memset(yb, 0, (size_t)big * 4);
            CHECK(!sl_cpu_matvec_t_rows(mv, pool, SL_GGML_Q4_K, q, rows, cols, idx, n_idx, xt,
                                        n_batch, ya, &e));
            CHECK_MSG(!sl_cpu_matvec_t_rows(mv, pool, SL_TYPE_Q4_K_R8, r8, rows, cols, idx, n_idx,
                                            xt, n_batch, yb, &e), "%s", e.msg);
            SAME(ya, yb, big, "%s t_rows", sl_cpu_matvec_name(mv));
            sl_cpu_matvec_ctx f = *mv;
            f.f32_act = true;
            CHECK(!sl_cpu_matvec(&f, pool, SL_GGML_Q4_K, q, rows, cols, x, n_batch, ya, xq, wb,
                                 &e));
            CHECK_MSG(!sl_cpu_matvec(&f, pool, SL_TYPE_Q4_K_R8, r8, rows, cols, x, n_batch, yb, xq,
                                     wb, &e), "%s", e.msg);
            SAME(ya, yb, rows * n_batch, "%s f32_act", sl_cpu_matvec_name(mv));
        }
    free(idx);
    free(cidx);
    free(x);
    free(xt);
    free(ya);
    free(yb);
    free(xq);
    free(cw);
}

/* The batch kernels (gemm.h; on AVX-512 VNNI gemm_k_vnni_tmpl.h) at every batch 1..70 on 40
 * rows (five groups: past the VNNI kernel's 32-row lane set by one group), 1 to 5 super-blocks
 * a row: dense (check_dense, against the reference) and gathered rows, compact and scattered,
 * a repeated row among them, against the reference on the original Q4_K. */
static void check_gemm_batches(const env *v)
{
    sl_error e;
    const int64_t rows = 40, n_idx = 5;
    const int32_t idx[] = {39, 0, 9, 9, 30};
    for (int64_t n_batch = 1; n_batch <= 70; n_batch++) {
        const int64_t sb = 1 + n_batch % 5, cols = sb * 256;
        uint8_t *q = q4k_random(rows, cols), *r8 = malloc((size_t)(rows * sb) * 144);
        CHECK(!sl_repack_q4_K_r8(q, r8, rows, cols, &e));
        check_dense(v, q, r8, rows, cols, n_batch);
        float *x = rand_x(cols * n_batch);
        const size_t ny = (size_t)(rows * n_batch);
        float *yr = malloc(ny * 4), *yf = malloc(ny * 4);
        const size_t wb = sl_cpu_matvec_work_bytes(SL_TYPE_Q4_K_R8, cols, n_batch);
        void *xq = malloc(wb);
        for (int sc = 0; sc < 2; sc++) {
            const size_t n = (size_t)((sc ? rows : n_idx) * n_batch);
            memset(yr, 0, n * 4);
            CHECK(!sl_ref_matvec_rows(SL_GGML_Q4_K, q, rows, cols, idx, n_idx, sc, x, n_batch,
                                      yr, &e));
            /* no pool: one call takes every row (the micro-kernels' row groups); 2 threads:
             * chunks of one row */
            for (int m = 0; m < v->n_mv; m++)
                for (int p = 0; p < 4; p += 2) {
                    CHECK(!sl_cpu_matvec_quant_act(&v->mv[m], SL_TYPE_Q4_K_R8, x, cols, n_batch,
                                                   xq, wb, &e));
                    memset(yf, 0, n * 4);
                    CHECK_MSG(!sl_cpu_matvec_rows_q(&v->mv[m], v->pools[p], SL_TYPE_Q4_K_R8, r8,
                                                    rows, cols, idx, n_idx, sc, xq, n_batch, yf,
                                                    &e),
                              "%s", e.msg);
                    SAME(yf, yr, n, "%s threads %d: gathered (scatter %d) cols %lld batch %lld",
                         sl_cpu_matvec_name(&v->mv[m]), sl_cpu_pool_threads(v->pools[p]), sc,
                         (long long)cols, (long long)n_batch);
                }
        }
        free(xq);
        free(yr);
        free(yf);
        free(x);
        free(q);
        free(r8);
    }
}

/* Decode of several parts of one x: repacked gate/up beside a row-major Q8_0 part and a part
 * with its own input, each == its lone reference. */
static void check_multi(const env *v)
{
    sl_error e;
    const int64_t cols = 1024, rows[4] = {512, 40, 512, 1032};
    uint8_t *q[4], *w[4];
    float *xs = rand_x(cols), *xo = rand_x(cols), *y[4], *yr[4];
    const uint32_t types[4] = {SL_TYPE_Q4_K_R8, SL_GGML_Q8_0, SL_TYPE_Q4_K_R8, SL_TYPE_Q4_K_R8};
    sl_cpu_matvec_part parts[4];
    for (int p = 0; p < 4; p++) {
        const bool r8 = types[p] == SL_TYPE_Q4_K_R8;
        const size_t bytes = sl_ref_matvec_row_bytes(types[p], cols) * (size_t)rows[p];
        q[p] = r8 ? q4k_random(rows[p], cols) : malloc(bytes);
        if (!r8) {
            float *f = rand_x(rows[p] * cols);
            CHECK(!sl_quant_row(SL_GGML_Q8_0, f, q[p], rows[p] * cols, &e));
            free(f);
        }
        w[p] = malloc(bytes);
        if (r8) CHECK(!sl_repack_q4_K_r8(q[p], w[p], rows[p], cols, &e));
        else memcpy(w[p], q[p], bytes);
        y[p] = malloc((size_t)rows[p] * 4);
        yr[p] = malloc((size_t)rows[p] * 4);
        const float *in = p == 3 ? xo : xs;
        CHECK(!sl_ref_matvec(r8 ? SL_GGML_Q4_K : types[p], q[p], rows[p], cols, in, 1, yr[p],
                             &e));
        parts[p] = (sl_cpu_matvec_part){.type = types[p], .w = w[p], .rows = rows[p], .y = y[p],
                                        .x = p == 3 ? xo : NULL};
    }
    const size_t wb = sl_cpu_matvec_multi_work_bytes(parts, 4, cols);
    void *work = malloc(wb);
    for (int m = 0; m < v->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            for (int k = 0; k < 4; k++) memset(y[k], 0xff, (size_t)rows[k] * 4);
            CHECK_MSG(!sl_cpu_matvec_multi(&v->mv[m], v->pools[p], parts, 4, cols, xs, work, wb,
                                           &e), "%s", e.msg);
            for (int k = 0; k < 4; k++)
                SAME(y[k], yr[k], rows[k], "%s threads %d: multi part %d",
                     sl_cpu_matvec_name(&v->mv[m]), sl_cpu_pool_threads(v->pools[p]), k);
        }
    for (int p = 0; p < 4; p++) {
        free(q[p]);
        free(w[p]);
        free(y[p]);
        free(yr[p]);
    }
    free(work);
    free(xs);
    free(xo);
}

int main(void)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    env v = {0};
    const sl_cpu_isa isas[] = {SL_CPU_ISA_SCALAR, SL_CPU_ISA_AVX2, SL_CPU_ISA_AVX512};
    for (int i = 0; i < 3; i++) {
        sl_error e;
        if (sl_cpu_matvec_init(&v.mv[v.n_mv], isas[i], f, &e) == SL_OK) {
            printf("repack_test: testing %s\n", sl_cpu_matvec_name(&v.mv[v.n_mv]));
            v.n_mv++;
        } else {
            printf("repack_test: notice: %s not available on this CPU (%s)\n",
                   sl_cpu_isa_name(isas[i]), e.msg);
        }
    }
    sl_test_amx_split(v.mv, &v.n_mv, "repack_test");
    for (int nt = 1; nt <= 3; nt++) {
        sl_error e;
        sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1};
        CHECK(!sl_cpu_pool_create(&o, &v.pools[nt], &e));
    }
    check_round_trip();
    check_pool_repack(&v);
    check_multi(&v);
    check_gemm_batches(&v);
    /* rows: one group, an MoE expert's 512 and 1024, groups past the pool's 64-row grain;
     * cols: 1, 2 (the down projection's 512), 4 (1024), 9 and 11 super-blocks (whole lane
     * groups and a tail) */
    static const int64_t rows_list[] = {8, 24, 512, 136};
    static const int64_t sb_list[] = {1, 2, 4, 9, 11};
    static const int64_t batch_list[] = {1, 2, 3, 8, 10, 17, 33};
    for (int ri = 0; ri < 4; ri++)
        for (int si = 0; si < 5; si++) {
            sl_error e;
            const int64_t rows = rows_list[ri], cols = sb_list[si] * 256;
            uint8_t *q = q4k_random(rows, cols);
            const size_t bytes = (size_t)rows * (size_t)sb_list[si] * 144;
            uint8_t *r8 = malloc(bytes);
            CHECK(!sl_repack_q4_K_r8(q, r8, rows, cols, &e));
            for (int bi = 0; bi < 7; bi++) {
                if (rows * cols * batch_list[bi] > (3 << 20)) continue; /* keep it short */
                check_dense(&v, q, r8, rows, cols, batch_list[bi]);
            }
            if (rows <= 136 && cols <= 2304) check_sparse(&v, q, r8, rows, cols, ri % 2 ? 3 : 1);
            /* the AMX tiles' batches (128 tokens or more, rows in 16s) */
            if (rows == 24 && sb_list[si] <= 4) {
                uint8_t *q32 = q4k_random(32, cols), *r32 = malloc((size_t)32 * sb_list[si] * 144);
                CHECK(!sl_repack_q4_K_r8(q32, r32, 32, cols, &e));
                check_dense(&v, q32, r32, 32, cols, 130);
                free(q32);
                free(r32);
            }
            free(q);
            free(r8);
        }
    for (int nt = 1; nt <= 3; nt++) sl_cpu_pool_destroy(v.pools[nt]);
    printf("repack_test: %lld bit-exact comparisons\n", (long long)n_checks);
    return sl_test_finish("repack_test");
}
