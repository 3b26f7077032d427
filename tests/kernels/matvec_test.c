/* matvec_test: kernels/ref/matvec against float64 and ggml's quantizers, kernels/cpu/matvec
 * (every ISA this CPU has x threads 1, 2, 3) against the reference bit for bit, the sparse
 * variants against dense results restricted to their lists (several matrices of one x, the
 * activation quantizers, the errors and the thread pool: matvec_multi_test.c).
 *
 * Exactness claims checked here (kernels/cpu/matvec.h): every fast path equals the reference
 * bit for bit for every type, shape, batch and thread count (memcmp of the outputs; at 2 and 3
 * threads a batch kernel's call of more than threads x chunk rows ends in quarter chunks,
 * matvec.c's run_rows tail, so a row's bits are checked whatever chunk it falls in). Against
 * float64 of the dequantized weights times the unquantized x, per output:
 *   float weights:  |y - y64| <= 1e-5 * S,             S = sum |w x|
 *   quantized:      |y - y64| <= sum_blocks ||w_b||_1 * amax_b(x) * (1/254 + 1/1024)
 *                                + |m| |s| 2^-10 (Q8_1 types) + 1e-5 * S
 * (half a quantization step of x per element, plus the half rounding of Q8_0's scale).
 * Weights come from kernels/ref/quant's quantizers where it has them, else random bytes with
 * finite half scales (which is harsher: qs may be -128). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/blocks.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "tests/kernels/matvec_testlib.h"
#include "tests/testing.h"

static const uint32_t k_types[] = {SL_GGML_F32,  SL_GGML_F16,  SL_GGML_BF16,  SL_GGML_Q8_0,
                                   SL_GGML_Q4_0, SL_GGML_Q4_1, SL_GGML_Q5_0,  SL_GGML_Q5_1,
                                   SL_GGML_Q2_K, SL_GGML_Q3_K, SL_GGML_Q4_K,  SL_GGML_Q5_K,
                                   SL_GGML_Q6_K, SL_GGML_MXFP4, SL_GGML_IQ4_NL, SL_GGML_IQ4_XS,
                                   SL_GGML_IQ2_XXS, SL_GGML_IQ2_XS, SL_GGML_IQ2_S,
                                   SL_GGML_IQ3_XXS, SL_GGML_IQ3_S, SL_GGML_IQ1_S, SL_GGML_IQ1_M};
enum { N_TYPES = sizeof k_types / sizeof k_types[0] };

static float *dequant(uint32_t type, const void *w, int64_t rows, int64_t cols)
{
    float *d = malloc((size_t)(rows * cols) * sizeof *d);
    const size_t rb = sl_ref_matvec_row_bytes(type, cols);
    for (int64_t r = 0; r < rows; r++) {
        sl_error e;
        CHECK(!sl_ref_matvec_dequant_row(type, (const char *)w + r * rb, cols, d + r * cols, &e));
        if (sl_quant_supported(type)) { /* the quantizer module's dequantizer agrees bit for bit */
            float *q = malloc((size_t)cols * sizeof *q);
            CHECK(!sl_quant_dequant_row(type, (const char *)w + r * rb, q, cols, &e));
            CHECK_MSG(!memcmp(q, d + r * cols, (size_t)cols * sizeof *q),
                      "%s dequant row %lld differs from sl_quant_dequant_row", tname(type),
                      (long long)r);
            free(q);
        }
    }
    return d;
}

/* ---- reference vs float64 -------------------------------------------------------------- */

static void check_ref_accuracy(uint32_t type, const void *w, int64_t rows, int64_t cols)
{
    float *x = make_x(cols), *y = malloc((size_t)rows * sizeof *y);
    sl_error e;
    CHECK(!sl_ref_matvec(type, w, rows, cols, x, 1, y, &e));
    float *wd = dequant(type, w, rows, cols);
    const int64_t blk = sl_gguf_type_get(type)->block_size;
    const uint32_t at = sl_ref_matvec_act_type(type);
    const int64_t qb = at == SL_GGML_Q8_K || at == SL_ACT_Q8_K8 ? 256 : 32;
    const bool q8_1 = sl_ref_matvec_act_type(type) == SL_GGML_Q8_1;
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        double y64 = 0, S = 0, bound = 0;
        for (int64_t c = 0; c < cols; c++) {
            y64 += (double)wd[r * cols + c] * x[c];
            S += fabs((double)wd[r * cols + c] * x[c]);
        }
        if (blk > 1) {
            for (int64_t b = 0; b < cols / qb; b++) {
                double l1 = 0, amax = 0, sumx = 0;
                for (int64_t k = 0; k < qb; k++) {
                    l1 += fabs(wd[r * cols + b * qb + k]);
                    amax = fmax(amax, fabs(x[b * qb + k]));
                    sumx += fabs(x[b * qb + k]);
                }
                bound += l1 * amax * (1.0 / 254 + 1.0 / 1024);
                if (q8_1) bound += sumx * 0.05 * 0x1p-10; /* |m| <= 0.05 here, s half-rounded */
            }
        }
        bound += 1e-5 * S + 1e-30;
        const double err = fabs((double)y[r] - y64);
        if (err / bound > worst) worst = err / bound;
        CHECK_MSG(err <= bound, "%s ref vs f64: row %lld cols %lld: |%.9g - %.9g| = %g > %g",
                  tname(type), (long long)r, (long long)cols, y[r], y64, err, bound);
    }
    free(wd);
    free(x);
    free(y);
}

/* ---- fast vs reference ------------------------------------------------------------------ */

/* Every fast path (ISAs x pools) against the reference on activations x [n_batch][cols]. */
static void check_fast_x(const ctx_set *cs, uint32_t type, const void *w, int64_t rows,
                         int64_t cols, int64_t n_batch, const float *x)
{
    float *yr = malloc((size_t)(rows * n_batch) * sizeof *yr);
    float *yf = malloc((size_t)(rows * n_batch) * sizeof *yf);
    sl_error e;
    CHECK(!sl_ref_matvec(type, w, rows, cols, x, n_batch, yr, &e));
    const size_t wb = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    void *work = malloc(wb ? wb : 1);
    for (int m = 0; m < cs->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            memset(yf, 0xff, (size_t)(rows * n_batch) * sizeof *yf);
            const sl_status s = sl_cpu_matvec(&cs->mv[m], cs->pools[p], type, w, rows, cols, x,
                                              n_batch, yf, work, wb, &e);
            CHECK_MSG(!s, "%s", e.msg);
            n_exact_checks++;
            CHECK_MSG(!memcmp(yf, yr, (size_t)(rows * n_batch) * sizeof *yf),
                      "%s %s threads %d: rows %lld cols %lld batch %lld differs from the reference",
                      tname(type), sl_cpu_matvec_name(&cs->mv[m]), sl_cpu_pool_threads(cs->pools[p]),
                      (long long)rows, (long long)cols, (long long)n_batch);
        }
    free(work);
    free(yr);
    free(yf);
}

static void check_fast(const ctx_set *cs, uint32_t type, const void *w, int64_t rows,
                       int64_t cols, int64_t n_batch)
{
    float *x = make_x(cols * n_batch);
    check_fast_x(cs, type, w, rows, cols, n_batch, x);
    free(x);
}

/* The 32-element block types on random bytes (every quant, every E8M0 edge of random_row)
 * across the row lengths the whole-row and GEMM kernels split differently: short rows (< 8
 * blocks), whole 8-block groups with and without a short last group, and rows past the
 * kernels' per-call x-scale buffer (1024 blocks); decode (batch 1) and a ragged GEMM batch.
 * Then the int16 bounds of the unsigned-weight kernels (matvec.h): every weight at the
 * extreme of its range against activations that all quantize to +127 or -127. */
static void check_blocks32_bytes(const ctx_set *cs, uint32_t type)
{
    static const int64_t nbs[] = {1, 5, 8, 16, 23, 40, 1024, 1031};
    for (int i = 0; i < 8; i++) {
        const int64_t rows = nbs[i] > 64 ? 3 : 13, cols = nbs[i] * 32;
        const size_t rb = sl_ref_matvec_row_bytes(type, cols);
        uint8_t *w = malloc(rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) random_row(type, w + (size_t)r * rb, rb, cols, r);
        check_fast(cs, type, w, rows, cols, 1);
        check_fast(cs, type, w, rows, cols, nbs[i] > 64 ? 9 : 20); /* tails of 1 and 4 */
        if (nbs[i] <= 64) check_fast(cs, type, w, rows, cols, 5); /* a half VNNI panel */
        free(w);
    }
    const int64_t rows = 4, cols = 24 * 32, n_batch = 9;
    const size_t rb = sl_ref_matvec_row_bytes(type, cols);
    const size_t qofs = type == SL_GGML_MXFP4 ? 1 : type == SL_GGML_Q5_0 ? 6 : 2;
    uint8_t *w = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)(cols * n_batch) * sizeof *x);
    for (int64_t r = 0; r < rows; r++) { /* rows: the largest weight, the smallest, mixed */
        uint8_t *wr = w + (size_t)r * rb;
        random_row(type, wr, rb, cols, 0);
        const size_t bb = rb / (size_t)(cols / 32);
        for (size_t b = 0; b < (size_t)(cols / 32); b++) {
            /* MXFP4: nibble 7 is +12, 15 is -12; Q4_0: 15 is +7, 0 is -8; Q5_0 with qh all
             * set or clear: 31 / 0; Q8_0: 127 / -128; IQ4_NL: 15 is +113, 0 is -127 */
            const bool mx = type == SL_GGML_MXFP4, q8 = type == SL_GGML_Q8_0;
            const uint8_t big = mx ? 0x77 : q8 ? 0x7F : 0xFF;
            const uint8_t small = mx ? 0xFF : q8 ? 0x80 : 0x00;
            const uint8_t q = r == 0 ? big : r == 1 ? small : (b % 2 ? big : small);
            memset(wr + b * bb + qofs, q, bb - qofs);
            if (type == SL_GGML_Q5_0) memset(wr + b * bb + 2, q ? 0xFF : 0x00, 4);
        }
    }
    for (int64_t i = 0; i < cols * n_batch; i++) x[i] = (i / cols) % 2 ? -1.0f : 1.0f;
    check_fast_x(cs, type, w, rows, cols, n_batch, x);
    check_fast_x(cs, type, w, rows, cols, 1, x);
    check_fast_x(cs, type, w, rows, cols, 6, x); /* a half VNNI panel */
    free(x);
    free(w);
}

/* Gathered rows idx[0..n_idx) of w, compact and scattered, on every SIMD path x pool against
 * the reference (sl_cpu_matvec_rows_q on the fast path's own quantized activations). */
static void check_gathered(const ctx_set *cs, uint32_t type, const void *w, int64_t rows,
                           int64_t cols, int64_t n_batch, const int32_t *idx, int64_t n_idx)
{
    float *x = make_x(cols * n_batch);
    const size_t ny_max = (size_t)((rows > n_idx ? rows : n_idx) * n_batch) * sizeof(float);
    float *yr = malloc(ny_max), *yf = malloc(ny_max);
    const size_t wb = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    void *xq = malloc(wb);
    sl_error e;
    for (int sc = 0; sc < 2; sc++) {
        const size_t ny = (size_t)(sc ? rows * n_batch : n_idx * n_batch) * sizeof *yr;
        memset(yr, 0, ny);
        CHECK(!sl_ref_matvec_rows(type, w, rows, cols, idx, n_idx, sc, x, n_batch, yr, &e));
        for (int m = 0; m < cs->n_mv; m++)
            for (int p = 0; p < 4 && cs->mv[m].isa != SL_CPU_ISA_SCALAR; p++) {
                memset(yf, 0, ny);
                CHECK(!sl_cpu_matvec_quant_act(&cs->mv[m], type, x, cols, n_batch, xq, wb, &e));
                CHECK_MSG(!sl_cpu_matvec_rows_q(&cs->mv[m], cs->pools[p], type, w, rows, cols,
                                                idx, n_idx, sc, xq, n_batch, yf, &e),
                          "%s", e.msg);
                n_exact_checks++;
                CHECK_MSG(!memcmp(yf, yr, ny),
                          "%s %s threads %d: gathered (scatter %d) rows %lld cols %lld "
                          "batch %lld differs from the reference", tname(type),
                          sl_cpu_matvec_name(&cs->mv[m]), sl_cpu_pool_threads(cs->pools[p]),
                          sc, (long long)rows, (long long)cols, (long long)n_batch);
            }
    }
    free(xq);
    free(yr);
    free(yf);
    free(x);
}

/* The 32-element types' batch kernels on the shapes their loops split differently (the AVX2
 * panels: 8-token panels, rows in groups of 4; the AVX-512 VNNI kernel, gemm_few32_vnni_tmpl.h:
 * 16-token passes of 4-token panels, blocks in quads, 64-block chunks, 64-row lane blocks, a
 * lone last token to the row kernel): 37 rows (neither a multiple of 4 nor of 8) of 20 blocks
 * (Gemma's 640), 44 (an expert's 1408) and 65 (two chunks, the second of one block) against
 * batches of 2, 5, 8, 17, 18, 19, 40 and 70; dense and gathered rows (8 of them, unsorted,
 * compact and scattered). */
static void check_blocks32_gemm(const ctx_set *cs, uint32_t type)
{
    static const int64_t nbs[] = {20, 44, 65};
    static const int64_t batches[] = {2, 5, 8, 17, 18, 19, 40, 70};
    const int64_t rows = 37;
    const int32_t idx[] = {36, 0, 5, 17, 33, 2, 31, 32};
    for (int c = 0; c < 3; c++) {
        const int64_t cols = nbs[c] * 32;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        for (int bi = 0; bi < 8; bi++) {
            check_fast(cs, type, w, rows, cols, batches[bi]);
            check_gathered(cs, type, w, rows, cols, batches[bi], idx, 8);
        }
        free(w);
    }
}

/* Batch shapes for the GEMM row kernels (kernels/cpu/gemm.h): random row lengths that cross
 * their unpack chunks (256 32-element blocks, 4 super-blocks) with ragged ends, row counts
 * past the K-quant kernel's 16-row groups, and batches past one 64-token lane set (32-token
 * K-quant groups) with ragged 8-token groups: tails of 1 to 3 tokens (9, 130, 19; 3 alone) take
 * the row kernels (gemm.h's sl__gemm_tail), one of 4 (68) is over the limit and takes a panel;
 * dense and row-gathered. */
static void check_batch_shapes(const ctx_set *cs, uint32_t type)
{
    const int64_t blk = sl_gguf_type_get(type)->block_size;
    const int64_t chunk = blk == 256 ? 4 : blk == 32 ? 256 : 1024; /* in blocks */
    for (int i = 0; i < 6; i++) {
        /* long rows with few tokens, short rows with many: the cost stays small; the last
         * case is rows of at most one chunk (an MoE expert's), several row groups of them */
        const bool long_row = i % 2 == 0, one_chunk = i == 5;
        const int64_t rows = one_chunk ? 40 : 1 + (int64_t)(rnd() % (long_row ? 2 : 20));
        const int64_t nb = one_chunk  ? 1 + (int64_t)(rnd() % (uint64_t)chunk)
                           : long_row ? chunk + 1 + (int64_t)(rnd() % 9)
                                      : 1 + (int64_t)(rnd() % 40);
        const int64_t batches[] = {9, 130, 68, 2 + (int64_t)(rnd() % 70), 3, 19};
        const int64_t n_batch = batches[i], cols = nb * blk;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        check_fast(cs, type, w, rows, cols, n_batch);
        /* gathered rows, compact and scattered, against the reference */
        const int32_t idx[] = {(int32_t)(rows - 1), 0, (int32_t)(rows / 2)};
        check_gathered(cs, type, w, rows, cols, n_batch, idx, 3);
        free(w);
    }
}

/* The K-quant batch kernel on AMX tiles (gemm_k_amx.c: calls of SL__GEMM_AMX_MIN_TOK = 17
 * tokens or more, rows in 16s, whole; every context runs these, the AMX one where the CPU has
 * it): 16 to 144 rows (one block; blocks of 128 and 16), rows of 1 to 9 super-blocks (one to
 * three unpack chunks) and of 21, 22, 25 and 37 (past its once-unpack: walked in pieces of 4
 * chunks, a ragged last piece, 1 to 5 token groups; 256 rows: chunks of 64, two row groups),
 * 17 to 200 tokens (the fewest, one token group, whole 32-token groups, ragged ends, the
 * counts the VNNI kernels split off a tail at: 17, 33..40, 49), dense and gathered (16 rows,
 * compact and scattered), against the reference. */
static void check_gemm_k_amx(const ctx_set *cs, uint32_t type)
{
    static const int64_t cases[][3] = {/* rows, super-blocks, tokens */
                                       {16, 1, 128}, {16, 9, 161}, {48, 3, 150},
                                       {48, 5, 128}, {144, 3, 137}, {32, 2, 200},
                                       {16, 2, 33},  {64, 3, 47},   {32, 4, 64},
                                       {16, 1, 17},  {48, 3, 24},   {32, 2, 32},
                                       {16, 5, 40},  {32, 1, 49},   {64, 2, 38},
                                       {32, 21, 40}, {256, 22, 20}, {16, 37, 70},
                                       {16, 25, 150}};
    const int32_t idx[] = {31, 0, 7, 3, 8, 9, 10, 11, 12, 13, 14, 1, 2, 4, 5, 15};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t rows = cases[c][0], cols = cases[c][1] * 256, n_batch = cases[c][2];
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        check_fast(cs, type, w, rows, cols, n_batch);
        if (rows >= 32) check_gathered(cs, type, w, rows, cols, n_batch, idx, 16);
        free(w);
    }
}

/* The K-quant batch kernels (gemm.h; on AVX-512 VNNI gemm_k_vnni_tmpl.h) at every batch 1..70:
 * 16-token panels and their 32-token pairs with every ragged end, the tails of gemm.h's
 * sl__gemm_tail, 1 to 5 super-blocks a row (one and two unpack chunks, lanes 0..4), 37 rows
 * (past one 32-row lane set, not a multiple of the 4- or 8-row micro-kernels), dense and
 * gathered (compact and scattered, a repeated row among them), against the reference. */
static void check_gemm_k_batches(const ctx_set *cs, uint32_t type)
{
    const int64_t rows = 37;
    const int32_t idx[] = {36, 0, 5, 5, 33, 12};
    const int64_t n_idx = 6;
    for (int64_t n_batch = 1; n_batch <= 70; n_batch++) {
        const int64_t cols = (1 + n_batch % 5) * 256;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        float *x = make_x(cols * n_batch);
        check_fast_x(cs, type, w, rows, cols, n_batch, x);
        const size_t ny = (size_t)(rows * n_batch) * sizeof(float);
        float *yr = malloc(ny), *yf = malloc(ny);
        const size_t wb = sl_cpu_matvec_work_bytes(type, cols, n_batch);
        void *xq = malloc(wb);
        sl_error e;
        for (int sc = 0; sc < 2; sc++) {
            const size_t nyi = (size_t)(sc ? rows : n_idx) * (size_t)n_batch * sizeof(float);
            memset(yr, 0, nyi);
            CHECK(!sl_ref_matvec_rows(type, w, rows, cols, idx, n_idx, sc, x, n_batch, yr, &e));
            for (int m = 0; m < cs->n_mv; m++) {
                if (cs->mv[m].isa == SL_CPU_ISA_SCALAR) continue;
                CHECK(!sl_cpu_matvec_quant_act(&cs->mv[m], type, x, cols, n_batch, xq, wb, &e));
                for (int p = 0; p < 4; p += 3) {
                    memset(yf, 0, nyi);
                    CHECK_MSG(!sl_cpu_matvec_rows_q(&cs->mv[m], cs->pools[p], type, w, rows,
                                                    cols, idx, n_idx, sc, xq, n_batch, yf, &e),
                              "%s", e.msg);
                    n_exact_checks++;
                    CHECK_MSG(!memcmp(yf, yr, nyi),
                              "%s %s threads %d: gathered (scatter %d) cols %lld batch %lld "
                              "differs from the reference", tname(type),
                              sl_cpu_matvec_name(&cs->mv[m]), sl_cpu_pool_threads(cs->pools[p]),
                              sc, (long long)cols, (long long)n_batch);
                }
            }
        }
        free(xq);
        free(yr);
        free(yf);
        free(x);
        free(w);
    }
}

/* The grouped path (sl_cpu_matvec_groups_q) of the few-token kernels: 9 groups of 1..9 tokens
 * (one of 1: the row kernel), each its own weights, in one call against the reference. */
static void check_few_groups(const ctx_set *cs, uint32_t type, int64_t rows, int64_t cols)
{
    enum { NG = 9 };
    sl_cpu_matvec_group g[NG];
    void *ws[NG];
    float *xs[NG], *yr[NG];
    void *xq[NG];
    sl_error e;
    for (int64_t k = 0; k < NG; k++) {
        bool quantized;
        const int64_t n = 1 + k;
        ws[k] = make_weights(type, rows, cols, &quantized);
        xs[k] = make_x(cols * n);
        yr[k] = malloc((size_t)(rows * n) * sizeof(float));
        CHECK(!sl_ref_matvec(type, ws[k], rows, cols, xs[k], n, yr[k], &e));
        xq[k] = malloc(sl_cpu_matvec_work_bytes(type, cols, n));
        g[k] = (sl_cpu_matvec_group){.w = ws[k], .xq = xq[k], .n_batch = n,
                                     .y = malloc((size_t)(rows * n) * sizeof(float))};
    }
    for (int m = 0; m < cs->n_mv; m++) {
        if (cs->mv[m].isa == SL_CPU_ISA_SCALAR) continue;
        for (int64_t k = 0; k < NG; k++)
            CHECK(!sl_cpu_matvec_quant_act(&cs->mv[m], type, xs[k], cols, g[k].n_batch, xq[k],
                                           sl_cpu_matvec_work_bytes(type, cols, g[k].n_batch),
                                           &e));
        for (int p = 0; p < 4; p += 2) {
            for (int64_t k = 0; k < NG; k++)
                memset(g[k].y, 0xff, (size_t)(rows * g[k].n_batch) * sizeof(float));
            CHECK_MSG(!sl_cpu_matvec_groups_q(&cs->mv[m], cs->pools[p], type, rows, cols, g, NG,
                                              &e),
                      "%s", e.msg);
            for (int64_t k = 0; k < NG; k++) {
                n_exact_checks++;
                CHECK_MSG(!memcmp(g[k].y, yr[k], (size_t)(rows * g[k].n_batch) * sizeof(float)),
                          "%s %s threads %d: group of %lld tokens differs from the reference",
                          tname(type), sl_cpu_matvec_name(&cs->mv[m]),
                          sl_cpu_pool_threads(cs->pools[p]), (long long)g[k].n_batch);
            }
        }
    }
    for (int64_t k = 0; k < NG; k++) {
        free(g[k].y);
        free(xq[k]);
        free(yr[k]);
        free(xs[k]);
        free(ws[k]);
    }
}

/* The few-token kernel (gemm.h's sl__gemm_tail with a few-token kernel; on AVX-512 VNNI
 * gemm_few_vnni_tmpl.h) at 2..8 tokens (2: its 2-token layout, 3..4 one panel, 5..8 two) and
 * the tails it takes past 32-token groups (34, 36, 40; 33 leaves one token to the row
 * kernel, 20 none): 67 rows (past its 64-row lane block, odd), rows of 3
 * super-blocks (one panel chunk), 9 and 17 (lanes carried across its 8-super-block chunks),
 * IQ4_XS's 66 (past the decode kernel's regrouped-x limit); dense, gathered (compact and
 * scattered) and grouped (check_few_groups) against the reference. */
static void check_few_tokens(const ctx_set *cs, uint32_t type)
{
    const int64_t shapes[][2] = {{67, 3}, {5, 9}, {3, 17}, {2, 66}}; /* rows, super-blocks */
    const int n_shapes = type == SL_GGML_IQ4_XS ? 4 : 3;
    for (int si = 0; si < n_shapes; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1] * 256;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        const int32_t idx[] = {(int32_t)(rows - 1), 0, (int32_t)(rows / 2), 0};
        for (int64_t n = 2; n <= 8; n++) {
            check_fast(cs, type, w, rows, cols, n);
            check_gathered(cs, type, w, rows, cols, n, idx, 4);
        }
        if (si < 2) {
            const int64_t tails[] = {20, 33, 34, 36, 40};
            for (int i = 0; i < 5; i++) check_fast(cs, type, w, rows, cols, tails[i]);
        }
        free(w);
    }
    check_few_groups(cs, type, 67, 3 * 256);
}

/* The 32-element types' batch kernel on AVX-512 VNNI (gemm_few32_vnni_tmpl.h, for every
 * batch: gemm.h's sl__gemm_vnni_few) on every row length of 1..70 blocks (quads of 4 blocks, a
 * short last quad of 1..3 added under a mask, one and two 64-block chunks) against batches of
 * 2..17 (1..4 panels of one 16-token pass; 17: a lone last token to the row kernel), 5..7
 * rows, dense and gathered (compact and scattered, a repeated row); 67 rows (past the
 * kernel's 64-row lane block) of 3 and 66 blocks against 2..8 tokens and batches past whole
 * passes (20, 31, 33, 34, 49); the grouped path. */
static void check_few32(const ctx_set *cs, uint32_t type)
{
    const int32_t idx[] = {4, 0, 2, 2};
    for (int64_t nb = 1; nb <= 70; nb++) {
        const int64_t rows = 5 + nb % 3, cols = nb * 32, n = 2 + nb % 16;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        check_fast(cs, type, w, rows, cols, n);
        check_gathered(cs, type, w, rows, cols, n, idx, 4);
        free(w);
    }
    static const int64_t nbs[] = {3, 66}, batches[] = {2, 3, 4, 5, 8, 20, 31, 33, 34, 49};
    const int64_t rows = 67;
    const int32_t idx67[] = {66, 0, 33, 64, 65, 1};
    for (int c = 0; c < 2; c++) {
        const int64_t cols = nbs[c] * 32;
        bool quantized;
        void *w = make_weights(type, rows, cols, &quantized);
        for (int bi = 0; bi < 10; bi++) {
            check_fast(cs, type, w, rows, cols, batches[bi]);
            if (bi < 5 || c == 0) check_gathered(cs, type, w, rows, cols, batches[bi], idx67, 6);
        }
        free(w);
    }
    check_few_groups(cs, type, rows, 3 * 32);
}

/* Row-gathered (compact and scattered), column-listed and transposed, ref and fast. */
static void check_sparse(const ctx_set *cs, uint32_t type, const void *w, int64_t rows,
                         int64_t cols, int64_t n_batch)
{
    sl_error e;
    float *x = make_x(cols * n_batch);
    float *dense = malloc((size_t)(rows * n_batch) * sizeof *dense);
    CHECK(!sl_ref_matvec(type, w, rows, cols, x, n_batch, dense, &e));

    /* rows: a random list with repeats */
    const int64_t n_idx = rows / 2 + 1;
    int32_t *idx = malloc((size_t)n_idx * sizeof *idx);
    for (int64_t i = 0; i < n_idx; i++) idx[i] = (int32_t)(rnd() % (uint64_t)rows);
    float *yc = malloc((size_t)(n_idx * n_batch) * sizeof *yc);
    float *ys = malloc((size_t)(rows * n_batch) * sizeof *ys);
    float *yf = malloc((size_t)(rows * n_batch + n_idx * n_batch) * sizeof *yf);
    CHECK(!sl_ref_matvec_rows(type, w, rows, cols, idx, n_idx, false, x, n_batch, yc, &e));
    for (int64_t i = 0; i < rows * n_batch; i++) ys[i] = 7.0f;
    CHECK(!sl_ref_matvec_rows(type, w, rows, cols, idx, n_idx, true, x, n_batch, ys, &e));
    for (int64_t b = 0; b < n_batch; b++) {
        for (int64_t i = 0; i < n_idx; i++)
            CHECK(!memcmp(&yc[b * n_idx + i], &dense[b * rows + idx[i]], sizeof(float)));
        for (int64_t r = 0; r < rows; r++) {
            bool listed = false;
            for (int64_t i = 0; i < n_idx; i++) listed |= idx[i] == r;
            CHECK(listed ? !memcmp(&ys[b * rows + r], &dense[b * rows + r], 4)
                         : ys[b * rows + r] == 7.0f);
        }
    }
    const size_t wb = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    void *xq = malloc(wb ? wb : 1);
    const bool f32_act = sl_ref_matvec_act_type(type) == SL_GGML_F32;
    for (int m = 0; m < cs->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            const sl_cpu_matvec_ctx *mv = &cs->mv[m];
            if (!f32_act) CHECK(!sl_cpu_matvec_quant_act(mv, type, x, cols, n_batch, xq, wb, &e));
            const void *a = f32_act ? (const void *)x : xq;
            CHECK(!sl_cpu_matvec_rows_q(mv, cs->pools[p], type, w, rows, cols, idx, n_idx, false,
                                        a, n_batch, yf, &e));
            CHECK_MSG(!memcmp(yf, yc, (size_t)(n_idx * n_batch) * 4), "%s %s rows compact",
                      tname(type), sl_cpu_matvec_name(mv));
            for (int64_t i = 0; i < rows * n_batch; i++) yf[i] = 7.0f;
            CHECK(!sl_cpu_matvec_rows_q(mv, cs->pools[p], type, w, rows, cols, idx, n_idx, true,
                                        a, n_batch, yf, &e));
            CHECK_MSG(!memcmp(yf, ys, (size_t)(rows * n_batch) * 4), "%s %s rows scattered",
                      tname(type), sl_cpu_matvec_name(mv));
        }

    /* cols (ggml order): ref == dense of the masked x; fast == ref */
    const int64_t n_cidx = cols / 3 + 1;
    int32_t *cidx = malloc((size_t)n_cidx * sizeof *cidx);
    for (int64_t i = 0; i < n_cidx; i++) cidx[i] = (int32_t)(rnd() % (uint64_t)cols);
    float *xm = calloc((size_t)(cols * n_batch), sizeof *xm);
    for (int64_t b = 0; b < n_batch; b++)
        for (int64_t i = 0; i < n_cidx; i++) xm[b * cols + cidx[i]] = x[b * cols + cidx[i]];
    float *dm = malloc((size_t)(rows * n_batch) * sizeof *dm);
    float *ycol = calloc((size_t)(rows * n_batch), sizeof *ycol);
    CHECK(!sl_ref_matvec(type, w, rows, cols, xm, n_batch, dm, &e));
    CHECK(!sl_ref_matvec_cols(type, w, rows, cols, cidx, n_cidx, x, n_batch, ycol, &e));
    for (int64_t i = 0; i < rows * n_batch; i++)
        CHECK_MSG(ycol[i] == dm[i], "%s cols: %.9g != masked dense %.9g", tname(type), ycol[i],
                  dm[i]);
    const size_t cwb = sl_cpu_matvec_cols_work_bytes(type, cols, n_batch);
    void *cw = malloc(cwb);
    for (int m = 0; m < cs->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            memset(yf, 0, (size_t)(rows * n_batch) * 4);
            CHECK(!sl_cpu_matvec_cols(&cs->mv[m], cs->pools[p], type, w, rows, cols, cidx, n_cidx,
                                      x, n_batch, yf, cw, cwb, &e));
            CHECK_MSG(!memcmp(yf, ycol, (size_t)(rows * n_batch) * 4), "%s %s cols", tname(type),
                      sl_cpu_matvec_name(&cs->mv[m]));
        }

    /* transposed: W is read as Wt [rows = n_ff][cols = n_embd]; x is [n_batch][rows] */
    float *xt = make_x(rows * n_batch);
    float *yt = malloc((size_t)(cols * n_batch) * sizeof *yt);
    float *ytf = malloc((size_t)(cols * n_batch) * sizeof *ytf);
    for (int64_t i = 0; i < cols * n_batch; i++) yt[i] = 0.5f;
    CHECK(!sl_ref_matvec_t_rows(type, w, rows, cols, idx, n_idx, xt, n_batch, yt, &e));
    float *wd = dequant(type, w, rows, cols);
    for (int64_t b = 0; b < n_batch; b++)
        for (int64_t c = 0; c < cols; c++) {
            double y64 = 0.5, S = 0.5;
            for (int64_t i = 0; i < n_idx; i++) {
                y64 += (double)xt[b * rows + idx[i]] * wd[idx[i] * cols + c];
                S += fabs((double)xt[b * rows + idx[i]] * wd[idx[i] * cols + c]);
            }
            CHECK_MSG(fabs(yt[b * cols + c] - y64) <= 1e-6 * S, "%s t_rows: %.9g vs %.9g",
                      tname(type), yt[b * cols + c], y64);
        }
    for (int m = 0; m < cs->n_mv; m++)
        for (int p = 0; p < 4; p++) {
            for (int64_t i = 0; i < cols * n_batch; i++) ytf[i] = 0.5f;
            CHECK(!sl_cpu_matvec_t_rows(&cs->mv[m], cs->pools[p], type, w, rows, cols, idx, n_idx,
                                        xt, n_batch, ytf, &e));
            CHECK_MSG(!memcmp(ytf, yt, (size_t)(cols * n_batch) * 4), "%s %s t_rows", tname(type),
                      sl_cpu_matvec_name(&cs->mv[m]));
        }
    free(wd);
    free(xt);
    free(yt);
    free(ytf);
    free(cw);
    free(cidx);
    free(xm);
    free(dm);
    free(ycol);
    free(xq);
    free(idx);
    free(yc);
    free(ys);
    free(yf);
    free(dense);
    free(x);
}

int main(void)
{
    ctx_set cs;
    ctx_set_init(&cs, "matvec_test");

    static const int64_t rows_list[] = {1, 3, 17, 64, 257};
    static const int64_t batch_list[] = {1, 2, 3, 7, 64};
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = k_types[ti];
        const int64_t blk = sl_gguf_type_get(type)->block_size;
        int64_t cols_list[8], n_cols = 0;
        if (blk == 1) {
            const int64_t c[] = {1, 7, 33, 4096 + 3};
            for (int i = 0; i < 4; i++) cols_list[n_cols++] = c[i];
        } else if (blk == 256) { /* 9 and 11: a whole 8-super-block group and a tail */
            const int64_t c[] = {1, 2, 3, 9, 11, 16};
            for (int i = 0; i < 6; i++) cols_list[n_cols++] = c[i] * blk;
        } else { /* 8-block groups: 9, 17 and 20 (Gemma's 640) hit the group loop with a
                  * short last group; 128 = 4096 */
            const int64_t c[] = {1, 2, 3, 7, 9, 17, 20, 128};
            for (int i = 0; i < 8; i++) cols_list[n_cols++] = c[i] * blk;
        }
        /* Every type has x86 SIMD kernels: the fast path under test must be the SIMD one. */
        for (int hi = 0; hi < cs.n_mv; hi++)
            if (cs.mv[hi].isa != SL_CPU_ISA_SCALAR)
                CHECK_MSG(sl_cpu_matvec_has_simd(&cs.mv[hi], type), "%s has no %s kernel",
                          tname(type), sl_cpu_matvec_name(&cs.mv[hi]));
        bool quantized = false;
        for (int ci = 0; ci < n_cols; ci++)
            for (int ri = 0; ri < 5; ri++) {
                const int64_t rows = rows_list[ri], cols = cols_list[ci];
                void *w = make_weights(type, rows, cols, &quantized);
                check_ref_accuracy(type, w, rows, cols);
                for (int bi = 0; bi < 5; bi++) {
                    const int64_t nb = batch_list[bi];
                    if (rows * cols * nb > (4 << 20)) continue; /* keep the run short */
                    check_fast(&cs, type, w, rows, cols, nb);
                }
                if (rows <= 64 && cols <= 2048) check_sparse(&cs, type, w, rows, cols, ri % 2 ? 3 : 1);
                free(w);
            }
        /* Every batch 1..70 on a small shape with both a full 8-block group and a tail (32-
         * element blocks) or 3 super-blocks, so each batch column's lanes restart correctly
         * (past 64: the VNNI kernel's third 32-token group, of 1 to 6 tokens). */
        {
            const int64_t rows = 5;
            const int64_t cols = blk == 1 ? 3 * 32 + 5 : blk == 256 ? 3 * blk : 11 * blk;
            void *w = make_weights(type, rows, cols, &quantized);
            for (int64_t nb = 1; nb <= 70; nb++) check_fast(&cs, type, w, rows, cols, nb);
            free(w);
        }
        check_batch_shapes(&cs, type);
        if (type == SL_GGML_IQ4_XS) {
            /* rows past the VNNI IQ4_XS kernel's regrouped-x limit (64 super-blocks) take the
             * generic rows kernel: one such row length */
            const int64_t rows = 3, cols = 65 * blk;
            void *w = make_weights(type, rows, cols, &quantized);
            check_fast(&cs, type, w, rows, cols, 1);
            free(w);
        }
        if (blk == 256) check_gemm_k_batches(&cs, type);
        if (blk == 256) check_gemm_k_amx(&cs, type);
        if (type == SL_GGML_Q4_K || type == SL_GGML_Q5_K || type == SL_GGML_Q6_K ||
            type == SL_GGML_IQ4_XS)
            check_few_tokens(&cs, type);
        if (blk == 32) {
            check_blocks32_gemm(&cs, type);
            check_few32(&cs, type);
        }
        /* Quantizer output rarely reaches the extremes the integer-range argument of matvec.h
         * is about (Q6_K scale -128, every quant at its limit) or every bit pattern of the
         * packed Q4_K/Q5_K six-bit scales and mins: random bytes do. K-quant rows of 4
         * super-blocks (a MoE expert's 1024 columns) take the two-rows-per-group decode path,
         * 1 and 2 (its 512) the four-rows-per-group one, 11 the 8-block groups with a tail. */
        for (int n = 0; quantized && blk > 1 && n < (blk == 256 ? 4 : 1); n++) {
            static const int64_t k_blocks[] = {11, 4, 2, 1};
            const int64_t rows = 17, cols = (blk == 256 ? k_blocks[n] : 20) * blk;
            const size_t rb = sl_ref_matvec_row_bytes(type, cols);
            uint8_t *w = malloc(rb * (size_t)rows);
            for (int64_t r = 0; r < rows; r++) random_row(type, w + (size_t)r * rb, rb, cols, r);
            check_fast(&cs, type, w, rows, cols, 1);
            check_fast(&cs, type, w, rows, cols, 3);
            /* the 16-token panels of the VNNI K kernel (and IQ4_XS's) at the extremes too */
            if (blk == 256) check_fast(&cs, type, w, rows, cols, 40);
            free(w);
        }
        if (blk == 32 && sl_ref_matvec_act_type(type) == SL_GGML_Q8_0)
            check_blocks32_bytes(&cs, type);
        printf("matvec_test: %-5s weights %s\n", tname(type),
               quantized ? "from kernels/ref/quant" : "random bytes (no quantizer yet)");
    }
    ctx_set_free(&cs);
    printf("matvec_test: %lld bit-exact comparisons of fast vs reference\n",
           (long long)n_exact_checks);
    return sl_test_finish("matvec_test");
}
