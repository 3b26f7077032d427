/* matvec_test: kernels/ref/matvec against float64 and ggml's quantizers, kernels/cpu/matvec
 * (every ISA this CPU has x threads 1, 2, 3) against the reference bit for bit, the sparse
 * variants against dense results restricted to their lists, and the thread pool.
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
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
#include "tests/kernels/matvec_ctxs.h"
#include "tests/testing.h"

static uint64_t rng_state = 0x5eed1234abcdULL;

static uint64_t rnd(void) { return sl_test_splitmix64(&rng_state); }

static float rndf(void) { return sl_test_unit_float(&rng_state); }

static const uint32_t k_types[] = {SL_GGML_F32,  SL_GGML_F16,  SL_GGML_BF16,  SL_GGML_Q8_0,
                                   SL_GGML_Q4_0, SL_GGML_Q4_1, SL_GGML_Q5_0,  SL_GGML_Q5_1,
                                   SL_GGML_Q2_K, SL_GGML_Q3_K, SL_GGML_Q4_K,  SL_GGML_Q5_K,
                                   SL_GGML_Q6_K, SL_GGML_MXFP4, SL_GGML_IQ4_NL, SL_GGML_IQ4_XS,
                                   SL_GGML_IQ2_XXS, SL_GGML_IQ2_XS, SL_GGML_IQ2_S,
                                   SL_GGML_IQ3_XXS, SL_GGML_IQ3_S, SL_GGML_IQ1_S, SL_GGML_IQ1_M};
enum { N_TYPES = sizeof k_types / sizeof k_types[0] };

static const char *tname(uint32_t type)
{
    return type == SL_ACT_Q8_K8 ? "Q8_K8" : sl_gguf_type_get(type)->name;
}

static void put_half(uint8_t *p, float f)
{
    const uint16_t h = sl_quant_fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* rows x cols weights of `type`: quantized from random floats when kernels/ref/quant supports
 * the type, else random bytes with finite scales. */
/* Row r of `type` as random bytes with sane scales (the full range of every quant and
 * sub-block scale, which a quantizer of smooth data rarely reaches). */
static void random_row(uint32_t type, uint8_t *wr, size_t rb, int64_t cols, int64_t r)
{
    for (size_t i = 0; i < rb; i++) wr[i] = (uint8_t)rnd();
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    const int64_t nb = cols / ti->block_size;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = wr + b * ti->type_size;
        const float d = 0.001f + 0.01f * (float)(rnd() % 100) / 100.0f;
        switch (type) {
        case SL_GGML_F32: {
            const float f = rndf();
            memcpy(p, &f, 4);
            break;
        }
        case SL_GGML_F16: put_half(p, rndf()); break;
        case SL_GGML_BF16: {
            const uint16_t h = sl_quant_fp32_to_bf16(rndf());
            memcpy(p, &h, 2);
            break;
        }
        case SL_GGML_MXFP4: {
            /* Edges of the E8M0 decode: every row r % 3 == 2 has only the subnormal halves
             * (e = 0, 1) and the first normal (2), so their terms decide its sum; other
             * rows have ordinary exponents and, every 7th block, a large one (200). */
            if (r % 3 == 2) p[0] = (uint8_t)(rnd() % 3);
            else p[0] = b % 7 == 3 ? 200 : (uint8_t)(118 + rnd() % 8);
            break;
        }
        default: /* the block's scale fields (and dmin / m where it has one) */
            CHECK_MSG(sl_quant_block_set_scale(type, p, d, d * rndf()), "%s: no block scale",
                      tname(type));
            break;
        }
    }
}

static void *make_weights(uint32_t type, int64_t rows, int64_t cols, bool *quantized)
{
    const size_t rb = sl_ref_matvec_row_bytes(type, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc((size_t)cols * sizeof *row);
    /* sl_quant_supported covers dequantizers too: a type without a quantizer says so with
     * SL_ERR_UNSUPPORTED and gets random bytes. */
    *quantized = sl_quant_supported(type);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *wr = w + (size_t)r * rb;
        if (*quantized) {
            for (int64_t c = 0; c < cols; c++) row[c] = rndf() * (1.0f + (float)(r % 3));
            sl_error e;
            const sl_status s = sl_quant_row(type, row, wr, cols, &e);
            if (!s) continue;
            CHECK_MSG(s == SL_ERR_UNSUPPORTED && r == 0, "sl_quant_row: %s", e.msg);
            *quantized = false;
        }
        random_row(type, wr, rb, cols, r);
    }
    free(row);
    return w;
}

static float *make_x(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = rndf() * (i % 5 == 0 ? 3.0f : 1.0f);
    return x;
}

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

typedef struct ctx_set {
    /* scalar, avx2, avx512 (VNNI), with AMX tiles, and avx512 without VNNI (Skylake-SP: the
     * AVX2 kernels but the float types' batch kernel, gemm_float.c) */
    sl_cpu_matvec_ctx mv[5];
    int n_mv;
    sl_cpu_pool *pools[4]; /* NULL, 1, 2, 3 threads */
} ctx_set;

static int64_t n_exact_checks;

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
            printf("matvec_test: notice: kernels/ref/quant has no %s quantizer yet; activation "
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
    const sl_cpu_features f = sl_cpu_features_detect();
    ctx_set cs = {0};
    const sl_cpu_isa isas[] = {SL_CPU_ISA_SCALAR, SL_CPU_ISA_AVX2, SL_CPU_ISA_AVX512};
    for (int i = 0; i < 3; i++) {
        sl_error e;
        if (sl_cpu_matvec_init(&cs.mv[cs.n_mv], isas[i], f, &e) == SL_OK) {
            printf("matvec_test: testing %s\n", sl_cpu_matvec_name(&cs.mv[cs.n_mv]));
            cs.n_mv++;
        } else {
            printf("matvec_test: notice: %s not available on this CPU, its kernels are not "
                   "tested here (%s)\n", sl_cpu_isa_name(isas[i]), e.msg);
        }
    }
    sl_test_amx_split(cs.mv, &cs.n_mv, "matvec_test");
    for (int i = 0, n = cs.n_mv; i < n; i++)
        if (cs.mv[i].isa == SL_CPU_ISA_AVX512 && cs.mv[i].vnni && !cs.mv[i].amx) {
            cs.mv[cs.n_mv] = cs.mv[i];
            cs.mv[cs.n_mv++].vnni = false;
            printf("matvec_test: testing avx512 without VNNI too\n");
            break;
        }
    for (int nt = 1; nt <= 3; nt++) {
        sl_error e;
        sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1};
        CHECK(!sl_cpu_pool_create(&o, &cs.pools[nt], &e));
    }
    check_errors(&cs.mv[0]);
    check_act_quant();
    check_act_q8_K8();
    check_act_quant_fast(&cs);
    check_act_quant_pool(&cs);
    check_pool();
    check_pool_bursts();
    check_multi(&cs);

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
    for (int nt = 1; nt <= 3; nt++) sl_cpu_pool_destroy(cs.pools[nt]);
    printf("matvec_test: %lld bit-exact comparisons of fast vs reference\n",
           (long long)n_exact_checks);
    return sl_test_finish("matvec_test");
}
