/* tests/kernels_cuda/cuda_kernels_matmul_test.c: the matrix kernels of kernels/cuda (dequant,
 * GEMV and its rows / experts / expert-parts forms, GEMM) against kernels/ref; without a GPU, their
 * argument validation (cuda_kernels_harness.h: the two modes). The CPU twin that runs in CI is
 * //tests/kernels:matvec_test (kernels/cpu against the same references, kernels/ref/quant.h,
 * matvec.h). The other kernels: cuda_kernels_ops_test.c.
 *
 * What is checked, and the tolerance of each (S = sum_c |w_c| |x_c| in float64, M = max_c |w_c|,
 * X = sum_c |x_c|, all of the row being checked):
 * - dequant to F32: bit-exact vs sl_quant_dequant_row; to F16 / BF16: bit-exact vs
 *   sl_quant_fp32_to_fp16 / _bf16 of the reference floats. Every type; block counts 1, 7, 129
 *   (float types: n = 1, 37, 1029); a source pointer offset by 2 bytes.
 * - GEMV (dense, every type): |y - y64| <= 2e-5 (S + M X) against the float64 dot of the
 *   dequantised row with x (the GPU keeps x in F32; the M X term covers the cancellation inside
 *   factored K-quant terms d*sc*sum(q x) - dmin*m*sum(x)). Rows 1, 17, 100; cols = one block,
 *   three blocks, one chunk + one block, 4 chunks + 3 blocks (float types: 1, 7, 255, 1029);
 *   batches 1, 3, 6; plus weights at a 2-byte offset (the unaligned copy path).
 * - GEMV rows (compact and scatter, repeats, unlisted entries untouched) and experts (shared
 *   and per-expert x, an out-of-range id gives zeros): same tolerance.
 * - GEMM (cuBLAS after dequant): F16 |err| <= 2e-3 S + 1e-6, BF16 <= 1.6e-2 S + 1e-6; rows 1, 37;
 *   batches 1, 3, 17.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_grouped.h"
#include "kernels/cuda/repack.h"
#include "kernels/ref/repack.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_grouped.h"
#include "kernels/ref/quant.h"
#include "tests/kernels_cuda/cuda_kernels_harness.h"
#include "tests/kernels_cuda/gemv_ref.h"

static const uint32_t TYPES[] = {SL_GGML_F32,    SL_GGML_F16,    SL_GGML_BF16, SL_GGML_Q4_0,
                                 SL_GGML_Q4_1,   SL_GGML_Q5_0,   SL_GGML_Q5_1, SL_GGML_Q8_0,
                                 SL_GGML_MXFP4,  SL_GGML_IQ4_NL, SL_GGML_IQ4_XS, SL_GGML_Q2_K,
                                 SL_GGML_Q3_K,   SL_GGML_Q4_K,   SL_GGML_Q5_K, SL_GGML_Q6_K,
                                 SL_GGML_IQ2_XXS, SL_GGML_IQ2_XS, SL_GGML_IQ2_S, SL_GGML_IQ3_XXS,
                                 SL_GGML_IQ3_S,  SL_GGML_IQ1_S,  SL_GGML_IQ1_M};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static const char *tname(uint32_t t) { return sl_gguf_type_get(t)->name; }
static int64_t blk(uint32_t t) { return sl_gguf_type_get(t)->block_size; }

/* Random weights of `type`, n elements (n a multiple of the block): quantized from random
 * floats where a quantizer exists, random bytes with a sane exponent for MXFP4, random codes
 * under a random block scale for the codebook types (no quantizer; every code is valid). */
static uint8_t *make_weights(uint32_t type, int64_t n, size_t *bytes)
{
    *bytes = sl_quant_row_bytes(type, n);
    uint8_t *w = xmalloc(*bytes);
    if (type == SL_GGML_MXFP4) {
        for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)rnd_u32();
        for (size_t o = 0; o < *bytes; o += 17) w[o] = (uint8_t)(118 + rnd_u32() % 12);
        return w;
    }
    if (!sl_quant_can_quantize(type)) {
        const size_t bb = sl_gguf_type_get(type)->type_size;
        for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)rnd_u32();
        for (size_t o = 0; o < *bytes; o += bb)
            CHECK_MSG(sl_quant_block_set_scale(type, w + o, rnd_f(-0.05f, 0.05f), 0.0f), "%s",
                      tname(type));
        return w;
    }
    float *f = xmalloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = rnd_f(-1.0f, 1.0f) * (1.0f + (float)(i % 7));
    sl_error e;
    CHECK_MSG(sl_quant_row(type, f, w, n, &e) == SL_OK, "%s", e.msg);
    free(f);
    return w;
}

static float *dequant_ref(uint32_t type, const uint8_t *w, int64_t n)
{
    float *f = xmalloc((size_t)n * sizeof *f);
    sl_error e;
    CHECK_MSG(sl_quant_dequant_row(type, w, f, n, &e) == SL_OK, "%s", e.msg);
    return f;
}

/* ---- no GPU: validation and clean errors --------------------------------------------------- */

static void test_host_side(void)
{
    sl_error e;
    float *p = (float *)(uintptr_t)64; /* never dereferenced: validation fails first */
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q4_K, p, 4, 100, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "cols");
    CHECK(sl_cuda_gemv(NULL, SL_GGML_TQ2_0, p, 4, 256, p, 1, p, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q8_0, p, 4, 64, p, 0, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_batch");
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q8_0, p, 4, 64, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    CHECK(sl_cuda_gemv_rows(NULL, SL_GGML_Q8_0, p, 4, 64, NULL, 3, false, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_idx");
    CHECK(sl_cuda_gemv_experts(NULL, SL_GGML_Q8_0, NULL, 4, NULL, 2, 4, 64, p, 2, p, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_experts(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, (const int32_t *)p, 2,
                               4, 64, p, 0, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "x_group");
    CHECK(sl_cuda_gemv_expert_parts(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, NULL, true,
                                    (const int32_t *)p, 2, 4, 64, p, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_ff_at");
    CHECK(sl_cuda_gemv_expert_parts(NULL, SL_GGML_Q8_0, (const void *const *)p, 4,
                                    (const int64_t *)p, true, (const int32_t *)p, 2, 4, 33, p, p,
                                    &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "multiple");
    CHECK(sl_cuda_dequant_f32(NULL, SL_GGML_Q8_0, p, 33, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "multiple");
    CHECK(sl_cuda_dequant_f16(NULL, SL_GGML_TQ2_0, p, 256, (uint16_t *)p, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemm(NULL, SL_GGML_Q8_0, p, 4, 64, p, 2, p, SL_CUDA_GEMM_F16, p, 1, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "work_bytes");
    /* W 4x64 F16 (512), X 2x64 F16 (256), X row scales 2 floats (256 after alignment) */
    CHECK(sl_cuda_gemm_work_bytes(4, 64, 2) == 1024);
    CHECK(sl_cuda_gemv_supported(SL_GGML_MXFP4) && sl_cuda_gemv_supported(SL_GGML_Q3_K) &&
          sl_cuda_gemv_supported(SL_GGML_IQ3_XXS) && sl_cuda_gemv_supported(SL_GGML_IQ1_M) &&
          !sl_cuda_gemv_supported(SL_GGML_TQ1_0) && !sl_cuda_gemv_supported(SL_GGML_NVFP4));
    CHECK(sl_cuda_gemv_chunk_elems(SL_GGML_Q4_K) == 1024 &&
          sl_cuda_gemv_chunk_elems(SL_GGML_Q6_K) == 2048 &&
          sl_cuda_gemv_chunk_elems(SL_GGML_IQ2_XXS) == 2048 &&
          sl_cuda_gemv_chunk_elems(SL_GGML_IQ1_M) == 1024 &&
          sl_cuda_gemv_chunk_elems(SL_GGML_F16) == 512 &&
          sl_cuda_gemv_chunk_elems(SL_GGML_TQ1_0) == 0);
    CHECK(sl_cuda_gemv_row_bytes(SL_GGML_Q3_K, 512) == 220);
    CHECK(sl_cuda_gemv_row_bytes(SL_GGML_Q6_K, 512) == 420);
    CHECK(sl_cuda_gemv_row_bytes(SL_GGML_F16, 7) == 14);
    /* grouped experts (gemv_grouped.h) */
    const int32_t *ip = (const int32_t *)p;
    CHECK(sl_cuda_gemv_grouped_supported(SL_GGML_Q4_K) &&
          sl_cuda_gemv_grouped_supported(SL_GGML_MXFP4) &&
          !sl_cuda_gemv_grouped_supported(SL_GGML_F32) &&
          !sl_cuda_gemv_grouped_supported(SL_GGML_BF16) &&
          sl_cuda_gemv_grouped_supported(SL_GGML_IQ2_XXS) &&
          !sl_cuda_gemv_grouped_supported(SL_GGML_TQ2_0));
    CHECK(sl_cuda_expert_order_bytes(4, 10) == 64 && sl_cuda_expert_order_bytes(0, 10) == 0);
    CHECK(sl_cuda_expert_order(NULL, ip, 8, 0, (int32_t *)p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_expert");
    CHECK(sl_cuda_expert_order(NULL, ip, 8, SL_CUDA_GROUPED_MAX_EXPERTS + 1, (int32_t *)p, &e) ==
          SL_ERR_INVALID);
    CHECK(sl_cuda_expert_order(NULL, ip, 0, 4, (int32_t *)p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_sel");
    CHECK(sl_cuda_expert_order(NULL, NULL, 8, 4, (int32_t *)p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_ids");
    CHECK(sl_cuda_expert_order(NULL, ip, 8, 4, (int32_t *)p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    CHECK(sl_cuda_gemv_grouped(NULL, SL_GGML_F16, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemv_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 33, p, 1,
                               p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "multiple");
    CHECK(sl_cuda_gemv_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, NULL, 8, 4, 64, p,
                               1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_order");
    CHECK(sl_cuda_gemv_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    /* the tensor-core grouped GEMM (gemm_grouped.h): X in F16 (64 rows x 64 columns) + scales */
    CHECK(sl_cuda_gemm_grouped_work_bytes(64, 64) == 8192 + 256 &&
          sl_cuda_gemm_grouped_work_bytes(0, 64) == 0);
    CHECK(sl_cuda_gemm_grouped(NULL, SL_GGML_BF16, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, p, 1 << 20, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemm_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, p, 100, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "work_bytes");
    CHECK(sl_cuda_gemm_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, NULL, 1 << 20, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_work");
    CHECK(sl_cuda_gemm_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 64, p, 0,
                               p, p, 1 << 20, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "x_group");
    CHECK(sl_cuda_gemm_grouped(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, ip, 8, 4, 64, p, 1,
                               p, p, 1 << 20, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
}

/* ---- dequant ------------------------------------------------------------------------------- */

static void test_dequant(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t counts[3] = {1, 7, 129}, fcounts[3] = {1, 37, 1029};
        for (int k = 0; k < 3; k++) {
            const int64_t n = blk(t) == 1 ? fcounts[k] : counts[k] * blk(t);
            size_t wb;
            uint8_t *w = make_weights(t, n, &wb);
            float *ref = dequant_ref(t, w, n);
            uint8_t *dw = dmalloc(wb + 2);
            float *df = dmalloc((size_t)n * 4);
            uint16_t *dh = dmalloc((size_t)n * 2), *db = dmalloc((size_t)n * 2);
            const int off = k == 1 ? 2 : 0; /* unaligned source */
            h2d(dw + off, w, wb);
            sl_error e;
            CHECK_MSG(sl_cuda_dequant_f32(c, t, dw + off, n, df, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_dequant_f16(c, t, dw + off, n, dh, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_dequant_bf16(c, t, dw + off, n, db, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            float *f = xmalloc((size_t)n * 4);
            uint16_t *h = xmalloc((size_t)n * 2), *b = xmalloc((size_t)n * 2);
            d2h(f, df, (size_t)n * 4);
            d2h(h, dh, (size_t)n * 2);
            d2h(b, db, (size_t)n * 2);
            int bad = 0;
            for (int64_t i = 0; i < n && bad < 3; i++) {
                uint32_t fb, rb;
                memcpy(&fb, &f[i], 4);
                memcpy(&rb, &ref[i], 4);
                const bool ok = fb == rb && h[i] == sl_quant_fp32_to_fp16(ref[i]) &&
                                b[i] == sl_quant_fp32_to_bf16(ref[i]);
                if (!ok) bad++;
                REPORT(ok, "dequant %s n=%lld [%lld]: f32 %a vs %a, f16 %04x vs %04x, bf16 %04x vs %04x",
                       tname(t), (long long)n, (long long)i, (double)f[i], (double)ref[i], h[i],
                       sl_quant_fp32_to_fp16(ref[i]), b[i], sl_quant_fp32_to_bf16(ref[i]));
            }
            free(f), free(h), free(b), free(w), free(ref);
            cudaFree(dw), cudaFree(df), cudaFree(dh), cudaFree(db);
        }
    }
}

/* ---- GEMV ---------------------------------------------------------------------------------- */

/* Checks y against row r of wf [rows][cols] and x (gemv_ref.h's rule). */
static void check_dot(const char *what, uint32_t t, const float *wf, int64_t r, int64_t cols,
                      const float *x, float y, double tol_s, double tol_abs)
{
    double d, tol;
    gemv_ref_dot(wf + r * cols, x, cols, tol_s, tol_abs, &d, &tol);
    REPORT(fabs((double)y - d) <= tol, "%s %s row %lld cols %lld: %.9g vs %.9g (tol %.3g)", what,
           tname(t), (long long)r, (long long)cols, (double)y, d, tol);
}

/* Which GEMV numerics the context runs (sl_cuda_ctx_set_f32_act): with Q8 activations, the
 * launches sl_cuda_gemv_q8_act names quantize x per 32 values (ggml's Q8_1), so they are checked
 * against the float64 dot with that same x; everything else keeps F32 activations. */
static bool g_q8act = false;

/* Whether a call takes the Q8-activation path (`aligned`: the matrix pointer is 16-byte
 * aligned, or it comes through the experts' pointer array, which is not checked). */
static bool q8_path(uint32_t t, int64_t cols, int64_t nb, bool aligned)
{
    return g_q8act && sl_cuda_gemv_q8_act(t, cols, nb, aligned, false);
}

static void check_gemv(const char *what, uint32_t t, const float *wf, int64_t r, int64_t cols,
                       const float *x, float y, bool q8)
{
    if (!q8) {
        check_dot(what, t, wf, r, cols, x, y, GEMV_REF_TOL_S, GEMV_REF_TOL_ABS);
        return;
    }
    float *xr = xmalloc((size_t)cols * 4);
    gemv_ref_q8_x(x, cols, xr);
    char w[64];
    snprintf(w, sizeof w, "%s(q8 act)", what);
    check_dot(w, t, wf, r, cols, xr, y, GEMV_REF_TOL_S, GEMV_REF_TOL_ABS);
    free(xr);
}

static void test_gemv(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t B = blk(t);
        /* elements per GEMV chunk (sl_qt's 32 * UPL units) */
        const int64_t chunk = sl_cuda_gemv_chunk_elems(t);
        CHECK_MSG(chunk >= 256, "%s: chunk of %lld elements", tname(t), (long long)chunk);
        int64_t colsv[4] = {B, 3 * B, chunk + B, 4 * chunk + 3 * B};
        if (B == 1) colsv[0] = 1, colsv[1] = 7, colsv[2] = 255, colsv[3] = 1029;
        const int64_t rowsv[3] = {1, 17, 100}, batchv[3] = {1, 3, 6};
        for (int ci = 0; ci < 4; ci++)
            for (int ri = 0; ri < 3; ri++)
                for (int bi = 0; bi < 3; bi++) {
                    const int64_t cols = colsv[ci], rows = rowsv[ri], nb = batchv[bi];
                    if (bi != 0 && ri == 2 && ci == 3) continue; /* keep the run short */
                    const int off = (ci == 2 && ri == 1) ? 2 : 0;
                    size_t wb;
                    uint8_t *w = make_weights(t, rows * cols, &wb);
                    float *wf = dequant_ref(t, w, rows * cols);
                    float *x = xmalloc((size_t)(nb * cols) * 4), *y = xmalloc((size_t)(nb * rows) * 4);
                    for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
                    uint8_t *dw = dmalloc(wb + 16);
                    float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
                    h2d(dw + off, w, wb);
                    h2d(dx, x, (size_t)(nb * cols) * 4);
                    sl_error e;
                    CHECK_MSG(sl_cuda_gemv(c, t, dw + off, rows, cols, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
                    CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
                    d2h(y, dy, (size_t)(nb * rows) * 4);
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t r = 0; r < rows; r++)
                            check_gemv(off ? "gemv(unaligned)" : "gemv", t, wf, r, cols,
                                       x + b * cols, y[b * rows + r], q8_path(t, cols, nb, !off));
                    free(w), free(wf), free(x), free(y);
                    cudaFree(dw), cudaFree(dx), cudaFree(dy);
                }
    }
}

static void test_gemv_rows_experts(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        /* 8 blocks of 32 make Q8_0 rows 16-byte multiples (272 B): the Q8-activation path */
        const int64_t cols = blk(t) == 1 ? 300 : blk(t) == 32 ? 8 * 32 : 5 * blk(t), rows = 50, nb = 2;
        size_t wb;
        uint8_t *w = make_weights(t, rows * cols, &wb);
        float *wf = dequant_ref(t, w, rows * cols);
        float *x = xmalloc((size_t)(nb * cols) * 4);
        for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
        const int32_t idx[7] = {49, 0, 7, 7, 23, 31, 48};
        uint8_t *dw = dmalloc(wb);
        float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
        int32_t *di = dmalloc(sizeof idx);
        h2d(dw, w, wb);
        h2d(dx, x, (size_t)(nb * cols) * 4);
        h2d(di, idx, sizeof idx);
        sl_error e;
        float y[2 * 50];
        /* compact */
        CHECK_MSG(sl_cuda_gemv_rows(c, t, dw, rows, cols, di, 7, false, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dy, (size_t)(nb * 7) * 4);
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < 7; i++)
                check_gemv("gemv_rows", t, wf, idx[i], cols, x + b * cols, y[b * 7 + i],
                           q8_path(t, cols, nb, true));
        /* scatter: unlisted entries keep their sentinel */
        for (int i = 0; i < nb * rows; i++) y[i] = 12345.0f;
        h2d(dy, y, (size_t)(nb * rows) * 4);
        CHECK_MSG(sl_cuda_gemv_rows(c, t, dw, rows, cols, di, 7, true, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dy, (size_t)(nb * rows) * 4);
        for (int b = 0; b < nb; b++)
            for (int r = 0; r < rows; r++) {
                bool listed = false;
                for (int i = 0; i < 7; i++) listed |= idx[i] == r;
                if (listed)
                    check_gemv("gemv_rows(scatter)", t, wf, r, cols, x + b * cols, y[b * rows + r],
                               q8_path(t, cols, nb, true));
                else REPORT(y[b * rows + r] == 12345.0f, "scatter %s touched row %d", tname(t), r);
            }
        /* experts: 5 experts, separately allocated; ids {4, 1, 9 (invalid), 2} */
        enum { NE = 5, NS = 4 };
        const int64_t erows = 20;
        uint8_t *ew[NE];
        float *ewf[NE];
        void *dptr[NE], *dbase[NE];
        for (int k = 0; k < NE; k++) {
            ew[k] = make_weights(t, erows * cols, &wb);
            ewf[k] = dequant_ref(t, ew[k], erows * cols);
            /* experts 1 and 3 start 2 and 1 bytes off alignment (the kernels cannot check a
             * device-side pointer array, so they must read such matrices correctly) */
            const int eoff = k == 1 ? 2 : k == 3 ? 1 : 0;
            dbase[k] = dmalloc(wb + 16);
            dptr[k] = (uint8_t *)dbase[k] + eoff;
            h2d(dptr[k], ew[k], wb);
        }
        const int32_t ids[NS] = {4, 1, 9, 3};
        void **dp = dmalloc(sizeof dptr);
        int32_t *dids = dmalloc(sizeof ids);
        h2d(dp, dptr, sizeof dptr);
        h2d(dids, ids, sizeof ids);
        float *xe = xmalloc((size_t)(NS * cols) * 4), ye[NS * 20];
        for (int64_t i = 0; i < NS * cols; i++) xe[i] = rnd_f(-1, 1);
        float *dxe = dmalloc((size_t)(NS * cols) * 4), *dye = dmalloc(sizeof ye);
        h2d(dxe, xe, (size_t)(NS * cols) * 4);
        /* x_group: NS (one x for all: a token's gate/up), 1 (each slot its own: down), 2 (two
         * tokens of k = 2: a prefill chunk's gate/up) */
        const int32_t groups[3] = {NS, 1, 2};
        for (int per = 0; per < 3; per++) {
            CHECK_MSG(sl_cuda_gemv_experts(c, t, (const void *const *)dp, NE, dids, NS, erows, cols, dxe,
                                           groups[per], dye, &e) == SL_OK, "%s", e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(ye, dye, sizeof ye);
            for (int s = 0; s < NS; s++)
                for (int r = 0; r < erows; r++) {
                    if (ids[s] >= NE) {
                        REPORT(ye[s * erows + r] == 0.0f, "experts %s bad id gives %g", tname(t), (double)ye[s * erows + r]);
                        continue;
                    }
                    check_gemv(per == 0 ? "gemv_experts" : per == 1 ? "gemv_experts(per-expert x)"
                                                                     : "gemv_experts(x per 2 slots)",
                               t, ewf[ids[s]], r, cols, xe + (s / groups[per]) * cols,
                               ye[s * erows + r], q8_path(t, cols, 1, true));
                }
        }
        /* grouped by expert (gemv_grouped.h): GS slots over the 5 experts and two bad ids, each
         * x_group; against the float64 dot (F32 activations always), and in the F32-activation
         * mode bit for bit the per-slot GEMV's (offset experts 1 and 3 too) */
        if (sl_cuda_gemv_grouped_supported(t)) {
            enum { GS = 37 };
            int32_t gids[GS];
            for (int s = 0; s < GS; s++) gids[s] = s == 5 ? 9 : s == 30 ? -1 : (7 * s + s / 3) % NE;
            float *gx = xmalloc((size_t)(GS * cols) * 4), *gy = xmalloc((size_t)(GS * erows) * 4);
            float *gp = xmalloc((size_t)(GS * erows) * 4);
            for (int64_t i = 0; i < GS * cols; i++) gx[i] = rnd_f(-1, 1);
            float *dgx = dmalloc((size_t)(GS * cols) * 4), *dgy = dmalloc((size_t)(GS * erows) * 4);
            int32_t *dgi = dmalloc(sizeof gids);
            int32_t *dord = dmalloc(sl_cuda_expert_order_bytes(NE, GS));
            h2d(dgx, gx, (size_t)(GS * cols) * 4);
            h2d(dgi, gids, sizeof gids);
            CHECK_MSG(sl_cuda_expert_order(c, dgi, GS, NE, dord, &e) == SL_OK, "%s", e.msg);
            int32_t ord[NE + 2 + GS];
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(ord, dord, sizeof ord);
            /* the order: starts ascend to GS, every slot once, each under its expert */
            int seen[GS] = {0}, bad_order = ord[0] != 0 || ord[NE + 1] != GS;
            for (int x2 = 0; x2 <= NE; x2++)
                for (int i = ord[x2]; !bad_order && i < ord[x2 + 1]; i++) {
                    const int s = ord[NE + 2 + i];
                    bad_order |= s < 0 || s >= GS || seen[s]++ ||
                                 (x2 < NE ? gids[s] != x2 : gids[s] >= 0 && gids[s] < NE);
                }
            for (int s = 0; s < GS; s++) bad_order |= !seen[s]; /* (starts that go down) */
            CHECK_MSG(!bad_order, "expert_order %s: not a sort of the ids by expert", tname(t));
            const int32_t gg[3] = {GS, 1, 3};
            for (int per = 0; per < 3; per++) {
                for (int i = 0; i < GS * erows; i++) gy[i] = 12345.0f;
                h2d(dgy, gy, (size_t)(GS * erows) * 4);
                CHECK_MSG(sl_cuda_gemv_grouped(c, t, (const void *const *)dp, NE, dord, GS, erows,
                                               cols, dgx, gg[per], dgy, &e) == SL_OK, "%s", e.msg);
                CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
                d2h(gy, dgy, (size_t)(GS * erows) * 4);
                CHECK_MSG(sl_cuda_gemv_experts(c, t, (const void *const *)dp, NE, dgi, GS, erows,
                                               cols, dgx, gg[per], dgy, &e) == SL_OK, "%s", e.msg);
                CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
                d2h(gp, dgy, (size_t)(GS * erows) * 4);
                int differ = 0;
                for (int s = 0; s < GS; s++)
                    for (int r = 0; r < erows; r++) {
                        const float v = gy[s * erows + r];
                        if (gids[s] < 0 || gids[s] >= NE) {
                            REPORT(v == 0.0f, "grouped %s bad id gives %g", tname(t), (double)v);
                            continue;
                        }
                        check_gemv("gemv_grouped", t, ewf[gids[s]], r, cols,
                                   gx + (s / gg[per]) * cols, v, false);
                        if (!g_q8act)
                            differ += memcmp(&v, &gp[s * erows + r], 4) != 0;
                    }
                CHECK_MSG(differ == 0, "grouped %s x_group %d: %d outputs differ from the "
                          "per-slot GEMV's bits", tname(t), gg[per], differ);
                /* the same slots on the tensor cores (gemm_grouped.h), F16's bound as
                 * sl_cuda_gemm's; X row 1 with outliers past F16's range (its scale) */
                const int64_t nx = (GS + gg[per] - 1) / gg[per];
                float *ox = xmalloc((size_t)(nx * cols) * 4);
                memcpy(ox, gx, (size_t)(nx * cols) * 4);
                ox[cols] = 1e6f, ox[cols + cols / 2] = -3e5f;
                h2d(dgx, ox, (size_t)(nx * cols) * 4);
                const size_t gwb = sl_cuda_gemm_grouped_work_bytes(nx, cols);
                void *gw = dmalloc(gwb);
                for (int i = 0; i < GS * erows; i++) gy[i] = 12345.0f;
                h2d(dgy, gy, (size_t)(GS * erows) * 4);
                CHECK_MSG(sl_cuda_gemm_grouped(c, t, (const void *const *)dp, NE, dord, GS, erows,
                                               cols, dgx, gg[per], dgy, gw, gwb, &e) == SL_OK,
                          "%s", e.msg);
                CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
                d2h(gy, dgy, (size_t)(GS * erows) * 4);
                for (int s = 0; s < GS; s++)
                    for (int r = 0; r < erows; r++) {
                        const float v = gy[s * erows + r];
                        if (gids[s] < 0 || gids[s] >= NE)
                            REPORT(v == 0.0f, "gemm_grouped %s bad id gives %g", tname(t),
                                   (double)v);
                        else
                            check_dot("gemm_grouped", t, ewf[gids[s]], r, cols,
                                      ox + (s / gg[per]) * cols, v, 2e-3, 1e-6);
                    }
                h2d(dgx, gx, (size_t)(nx * cols) * 4);
                free(ox);
                cudaFree(gw);
            }
            free(gx), free(gy), free(gp);
            cudaFree(dgx), cudaFree(dgy), cudaFree(dgi), cudaFree(dord);
        }
        for (int k = 0; k < NE; k++) free(ew[k]), free(ewf[k]), cudaFree(dbase[k]);
        free(w), free(wf), free(x), free(xe);
        cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(di), cudaFree(dp), cudaFree(dids);
        cudaFree(dxe), cudaFree(dye);
    }
}

/* Experts split by neurons (sl_cuda_gemv_expert_parts): 4 experts of widths {2, 0, 1, 3}
 * granules (a block; 5 for float types) packed as ffn_split.h does — gate' [sum w][E] rows,
 * each expert's down' [E][w_e] after the previous one — selected as {3, 1, 0, 2}. gate': the
 * first w_e outputs are its rows' dots, the rest 0; down': the dot over w_e columns of the
 * slot's x (stride the widest), a width of 0 gives 0. */
static void test_gemv_expert_parts(sl_cuda_ctx *c)
{
    enum { NE = 4, NS = 4 };
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t G = blk(t) == 1 ? 5 : blk(t), E = blk(t) == 1 ? 70 : 2 * blk(t);
        const int64_t wdt[NE] = {2 * G, 0, G, 3 * G}, F = 3 * G;
        int64_t at[NE + 1] = {0};
        for (int k = 0; k < NE; k++) at[k + 1] = at[k] + wdt[k];
        size_t gb, db[NE], dtot = 0;
        uint8_t *gw = make_weights(t, at[NE] * E, &gb), *dw[NE];
        float *gwf = dequant_ref(t, gw, at[NE] * E), *dwf[NE];
        for (int k = 0; k < NE; k++) {
            dw[k] = wdt[k] ? make_weights(t, E * wdt[k], &db[k]) : NULL;
            dwf[k] = wdt[k] ? dequant_ref(t, dw[k], E * wdt[k]) : NULL;
            if (!wdt[k]) db[k] = 0;
            dtot += db[k];
        }
        uint8_t *dg = dmalloc(gb), *dd = dmalloc(dtot + 16);
        h2d(dg, gw, gb);
        const void *pg[NE], *pd[NE];
        for (size_t k = 0, off = 0; k < NE; off += db[k], k++) {
            pg[k] = dg + (size_t)at[k] * sl_quant_row_bytes(t, E);
            pd[k] = dd + off;
            if (db[k]) h2d(dd + off, dw[k], db[k]);
        }
        const int32_t ids[NS] = {3, 1, 0, 2};
        /* x: gate' reads E values (one token, shared), down' NS slots of F; for the float
         * types E (70) exceeds NS * F (60), and a buffer of NS * F was read past its end */
        const int64_t XN = NS * F > E ? NS * F : E;
        float *x = xmalloc((size_t)XN * 4), yg[NS * 3 * 256], yd[NS * 512];
        for (int64_t i = 0; i < XN; i++) x[i] = rnd_f(-1, 1);
        void **dpg = dmalloc(sizeof pg), **dpd = dmalloc(sizeof pd);
        int64_t *dat = dmalloc(sizeof at);
        int32_t *dids = dmalloc(sizeof ids);
        float *dx = dmalloc((size_t)XN * 4), *dyg = dmalloc(sizeof yg);
        float *dyd = dmalloc(sizeof yd);
        h2d(dpg, pg, sizeof pg), h2d(dpd, pd, sizeof pd), h2d(dat, at, sizeof at);
        h2d(dids, ids, sizeof ids), h2d(dx, x, (size_t)XN * 4);
        sl_error e;
        const void *const *cpg = (const void *const *)dpg, *const *cpd = (const void *const *)dpd;
        CHECK_MSG(sl_cuda_gemv_expert_parts(c, t, cpg, NE, dat, false, dids, NS, F, E, dx, dyg,
                                            &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_gemv_expert_parts(c, t, cpd, NE, dat, true, dids, NS, E, F, dx, dyd,
                                            &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(yg, dyg, (size_t)(NS * F) * 4);
        d2h(yd, dyd, (size_t)(NS * E) * 4);
        /* the Q8-activation rule of gemv.cu, on the widest shape; never for a Q8_0 down' */
        const bool q8g = q8_path(t, E, 1, true),
                   q8d = g_q8act && sl_cuda_gemv_q8_act(t, F, 1, true, true);
        for (int s = 0; s < NS; s++) {
            const int32_t k = ids[s];
            for (int64_t r = 0; r < F; r++) {
                if (r < wdt[k])
                    check_gemv("gemv_expert_parts(gate')", t, gwf, at[k] + r, E, x,
                               yg[s * F + r], q8g);
                else
                    REPORT(yg[s * F + r] == 0.0f, "expert parts %s: gate' past width %lld gives %g",
                           tname(t), (long long)wdt[k], (double)yg[s * F + r]);
            }
            for (int64_t r = 0; r < E; r++) {
                if (wdt[k])
                    check_gemv("gemv_expert_parts(down')", t, dwf[k], r, wdt[k], x + s * F,
                               yd[s * E + r], q8d);
                else
                    REPORT(yd[s * E + r] == 0.0f, "expert parts %s: down' of width 0 gives %g",
                           tname(t), (double)yd[s * E + r]);
            }
        }
        CHECK(sl_cuda_gemv_expert_parts(c, t, cpg, NE, NULL, false, dids, NS, F, E, dx, dyg,
                                        &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "d_ff_at");
        for (int k = 0; k < NE; k++) free(dw[k]), free(dwf[k]);
        free(gw), free(gwf), free(x);
        cudaFree(dg), cudaFree(dd), cudaFree(dpg), cudaFree(dpd), cudaFree(dat), cudaFree(dids);
        cudaFree(dx), cudaFree(dyg), cudaFree(dyd);
    }
}

/* ---- GEMM ---------------------------------------------------------------------------------- */

static void test_gemm(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t cols = blk(t) == 1 ? 333 : (blk(t) == 256 ? 3 : 11) * blk(t);
        const int64_t rowsv[2] = {1, 37}, batchv[3] = {1, 3, 17};
        for (int ri = 0; ri < 2; ri++)
            for (int bi = 0; bi < 3; bi++)
                for (int prec = 0; prec < 2; prec++) {
                    const int64_t rows = rowsv[ri], nb = batchv[bi];
                    size_t wb;
                    uint8_t *w = make_weights(t, rows * cols, &wb);
                    float *wf = dequant_ref(t, w, rows * cols);
                    float *x = xmalloc((size_t)(nb * cols) * 4), *y = xmalloc((size_t)(nb * rows) * 4);
                    for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
                    /* outliers past F16's range in every other row (real down-projection
                     * inputs have them): the result must stay finite and as accurate */
                    for (int64_t b = 1; b < nb; b += 2) {
                        x[b * cols] = 1e6f;
                        x[b * cols + cols / 2] = -3e5f;
                    }
                    const size_t work = sl_cuda_gemm_work_bytes(rows, cols, nb);
                    uint8_t *dw = dmalloc(wb);
                    float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
                    void *dwork = dmalloc(work);
                    h2d(dw, w, wb);
                    h2d(dx, x, (size_t)(nb * cols) * 4);
                    sl_error e;
                    CHECK_MSG(sl_cuda_gemm(c, t, dw, rows, cols, dx, nb, dy, (sl_cuda_gemm_prec)prec,
                                           dwork, work, &e) == SL_OK, "%s", e.msg);
                    CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
                    d2h(y, dy, (size_t)(nb * rows) * 4);
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t r = 0; r < rows; r++)
                            check_dot(prec ? "gemm(bf16)" : "gemm(f16)", t, wf, r, cols, x + b * cols,
                                      y[b * rows + r], prec ? 1.6e-2 : 2e-3, 1e-6);
                    free(w), free(wf), free(x), free(y);
                    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dwork);
                }
    }
}

/* Q4_K_R8 back to Q4_K on the device (kernels/cuda/repack.h): the bytes the CPU repacked from,
 * for 24 rows of 1, 3 and 8 super-blocks, in place. */
static void test_r8_undo(sl_cuda_ctx *c)
{
    const int64_t colsv[3] = {256, 768, 2048}, rows = 24;
    for (int ci = 0; ci < 3; ci++) {
        size_t wb;
        uint8_t *w = make_weights(SL_GGML_Q4_K, rows * colsv[ci], &wb);
        uint8_t *r8 = xmalloc(wb);
        sl_error e;
        CHECK_MSG(sl_repack_q4_K_r8(w, r8, rows, colsv[ci], &e) == SL_OK, "%s", e.msg);
        uint8_t *d = dmalloc(wb);
        h2d(d, r8, wb);
        CHECK_MSG(sl_cuda_q4_K_r8_undo(c, d, rows, colsv[ci], &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
        d2h(r8, d, wb);
        CHECK_MSG(!memcmp(r8, w, wb), "q4_K_r8_undo cols %lld: not the original Q4_K bytes",
                  (long long)colsv[ci]);
        free(w), free(r8);
        cudaFree(d);
    }
    sl_error e;
    CHECK(sl_cuda_q4_K_r8_undo(c, NULL, 12, 256, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "rows");
}

static void on_device(sl_cuda_ctx *c)
{
    test_r8_undo(c);
    test_dequant(c);
    for (int q8 = 0; q8 < 2; q8++) {
        g_q8act = q8;
        sl_cuda_ctx_set_f32_act(c, !q8);
        test_gemv(c);
        test_gemv_rows_experts(c);
        test_gemv_expert_parts(c);
    }
    test_gemm(c);
}

int main(void)
{
    return cuda_harness_main("cuda_kernels_matmul_test", test_host_side, on_device);
}
