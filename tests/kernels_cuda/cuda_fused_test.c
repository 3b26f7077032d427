/* tests/kernels_cuda/cuda_fused_test.c: the multi-matrix GEMV launches of kernels/cuda/gemv_multi.h
 * (issue 32: deepseek2's per-head k_b / v_b in one launch; Q/K/V, gate/up + SwiGLU and the
 * router's GEMV + bias in one launch each) against the host executor's kernels.
 *
 * Reference: what the host executor computes for the same step (runtime/engine/dx_host.c,
 * dx_fused.c): sl_cpu_matvec per head / per matrix in its SLUICE_ACT_F32 mode (dequantised rows
 * dotted with F32 activations in double, as the GPU keeps x F32), the bias added per row, then
 * sl_cpu_swiglu. Tolerance per output (gemv_ref.h GEMV_MULTI_TOL_S, _ABS): 3e-5 (S + M X) + 1e-6
 * with S = sum |w| |x|, M = max |w|, X = sum |x| of the row (cuda_kernels_test's GEMV bound,
 * with margin); the SwiGLU output within 1.2 tol(gate) |up| + tol(up) |silu(gate)| + 1e-5 |ref|
 * + 1e-6 (silu' <= 1.1: gemv_ref_glu_tol).
 * Checked: every type with a quantizer; strided per-head inputs and outputs whose padding stays
 * untouched; 1 and 3 tokens; three matrices of mixed types; bias; the SwiGLU epilogue. Twice:
 * in the F32-activation mode, then in the default one, where launches that
 * sl_cuda_gemv_multi_q8 / _heads_q8 admit run with Q8 activations: their reference takes x as
 * that kernel sees it (gemv_ref_q8_x, per token), the same bound; at least one launch of each
 * entry point must have taken that path. And the routed experts' gate / up + SwiGLU launch
 * (sl_cuda_gemv_experts_glu) against sl_cuda_gemv_experts of each then sl_cuda_swiglu (the
 * same bits expected; within 2 ulps checked), with an id out of range, one x and one a slot.
 * Without a usable GPU: the host-side argument checks, then "SKIPPED, no usable GPU" (CI);
 * on the GPU machine tools/gpu-test runs it fully. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ctx.h"
#include "kernels/cuda/fwd.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_multi.h"
#include "kernels/cuda/ops.h"
#include "kernels/ref/quant.h"
#include "base/status.h"
#include "tests/kernels_cuda/gemv_ref.h"
#include "tests/testing.h"

static const uint32_t TYPES[] = {SL_GGML_F32,    SL_GGML_F16,    SL_GGML_BF16, SL_GGML_Q4_0,
                                 SL_GGML_Q4_1,   SL_GGML_Q5_0,   SL_GGML_Q5_1, SL_GGML_Q8_0,
                                 SL_GGML_IQ4_NL, SL_GGML_IQ4_XS, SL_GGML_Q2_K, SL_GGML_Q3_K,
                                 SL_GGML_Q4_K,   SL_GGML_Q5_K,   SL_GGML_Q6_K};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rnd_f(float lo, float hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 16) & 0xFFFFFF) / 16777216.0f;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) exit(1); /* test harness only */
    return p;
}
static void *dmalloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) exit(1); /* test harness only */
    return p;
}
static void h2d(void *d, const void *h, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
static void d2h(void *h, const void *d, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static int64_t blk(uint32_t t) { return sl_gguf_type_get(t)->block_size; }
static const char *tname(uint32_t t) { return sl_gguf_type_get(t)->name; }

/* rows x cols random weights of type t, quantized from random floats; *wf their dequantised
 * values */
static uint8_t *make_w(uint32_t t, int64_t rows, int64_t cols, size_t *bytes, float **wf)
{
    const int64_t n = rows * cols;
    *bytes = sl_quant_row_bytes(t, n);
    uint8_t *w = xmalloc(*bytes);
    float *f = xmalloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = rnd_f(-1.0f, 1.0f) * (1.0f + (float)(i % 5));
    sl_error e;
    CHECK_MSG(sl_quant_row(t, f, w, n, &e) == SL_OK, "%s", e.msg);
    CHECK_MSG(sl_quant_dequant_row(t, w, f, n, &e) == SL_OK, "%s", e.msg);
    *wf = f;
    return w;
}

static sl_cpu_matvec_ctx g_mv;
static sl_cpu_ops g_ops;

/* the host executor's product (f32_act): y [n][rows] = W x, x [n][cols] contiguous */
static void host_mm(uint32_t t, const void *w, int64_t rows, int64_t cols, const float *x,
                    int64_t n, float *y)
{
    const size_t wb = sl_cpu_matvec_work_bytes(t, cols, n);
    void *work = xmalloc(wb);
    sl_error e;
    CHECK_MSG(sl_cpu_matvec(&g_mv, NULL, t, w, rows, cols, x, n, y, work, wb, &e) == SL_OK,
              "host matvec %s: %s", tname(t), e.msg);
    free(work);
}

/* the GEMV bound of row r of wf against x */
static double tol(const float *wf, int64_t r, int64_t cols, const float *x)
{
    double S = 0, M = 0, X = 0;
    for (int64_t c = 0; c < cols; c++) {
        const double a = fabs(wf[r * cols + c]);
        S += a * fabs(x[c]);
        X += fabs(x[c]);
        if (a > M) M = a;
    }
    return GEMV_MULTI_TOL_S * (S + M * X) + GEMV_MULTI_TOL_ABS;
}

static int fails;
#define REPORT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond) && fails++ < 30) CHECK_MSG(cond, __VA_ARGS__);                         \
        else if (!(cond)) sl_test_g.failures++;                                            \
    } while (0)

static bool g_q8_mode; /* the context is in the default mode (Q8 activations where they apply) */
static int g_q8_launches;

/* x [n][cols] as the launch's kernel reads it: quantised per 32 values (in place) when it runs
 * with Q8 activations */
static void as_launch_sees(bool q8, float *x, int64_t n, int64_t cols)
{
    if (!q8) return;
    g_q8_launches++;
    for (int64_t b = 0; b < n; b++) gemv_ref_q8_x(x + b * cols, cols, x + b * cols);
}

/* columns of type t's cases of n tokens: float types 1100 at one token, so that their few
 * rows split over a block's warps (gemv_multi.cuh gm_split), 300 else */
static int64_t cols_of(uint32_t t, int64_t n)
{
    return blk(t) == 1 ? (n == 1 ? 1100 : 300) : blk(t) == 32 ? 8 * 32 : 2 * blk(t);
}

/* H heads of [rows][cols], inputs and outputs strided with padding, n tokens */
static void test_heads(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int64_t n = 1; n <= 3; n += 2) {
            const uint32_t t = TYPES[ti];
            const int64_t H = 3, rows = 17, cols = cols_of(t, n);
            const int64_t xhs = cols + 5, xts = H * xhs + 2, yhs = rows + 3, yts = H * yhs + 1;
            size_t hb;
            float *wf;
            uint8_t *w = make_w(t, H * rows, cols, &hb, &wf);
            const size_t mat = hb / (size_t)H;
            float *x = xmalloc((size_t)(n * xts) * 4), *y = xmalloc((size_t)(n * yts) * 4);
            float *xc = xmalloc((size_t)(n * cols) * 4), *yr = xmalloc((size_t)(n * rows) * 4);
            for (int64_t i = 0; i < n * xts; i++) x[i] = rnd_f(-1, 1);
            for (int64_t i = 0; i < n * yts; i++) y[i] = -7.0f;
            uint8_t *dw = dmalloc(hb);
            float *dx = dmalloc((size_t)(n * xts) * 4), *dy = dmalloc((size_t)(n * yts) * 4);
            h2d(dw, w, hb);
            h2d(dx, x, (size_t)(n * xts) * 4);
            h2d(dy, y, (size_t)(n * yts) * 4);
            sl_error e;
            CHECK_MSG(sl_cuda_gemv_heads(c, t, dw, (int64_t)mat, (int32_t)H, rows, cols, dx, xts,
                                         xhs, n, dy, yts, yhs, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            d2h(y, dy, (size_t)(n * yts) * 4);
            const bool q8 = g_q8_mode && sl_cuda_gemv_heads_q8(t, dw, (int64_t)mat, (int32_t)H,
                                                               cols);
            for (int64_t h = 0; h < H; h++) {
                for (int64_t b = 0; b < n; b++)
                    memcpy(xc + b * cols, x + b * xts + h * xhs, (size_t)cols * 4);
                as_launch_sees(q8, xc, n, cols);
                host_mm(t, w + (size_t)h * mat, rows, cols, xc, n, yr);
                for (int64_t b = 0; b < n; b++)
                    for (int64_t r = 0; r < rows; r++) {
                        const float got = y[b * yts + h * yhs + r], want = yr[b * rows + r];
                        const double tl = tol(wf + h * rows * cols, r, cols, xc + b * cols);
                        REPORT(fabs((double)got - want) <= tl, "heads %s%s n %lld head %lld tok "
                               "%lld row %lld: %g vs host %g (tol %g)", tname(t),
                               q8 ? " (q8)" : "", (long long)n,
                               (long long)h, (long long)b, (long long)r, got, want, tl);
                    }
            }
            int64_t touched = 0; /* the padding between heads and tokens */
            for (int64_t b = 0; b < n; b++)
                for (int64_t i = 0; i < yts; i++) {
                    const int64_t h = i / yhs, r = i % yhs;
                    if ((h >= H || r >= rows) && y[b * yts + i] != -7.0f) touched++;
                }
            REPORT(touched == 0, "heads %s: %lld padding entries written", tname(t),
                   (long long)touched);
            free(w), free(wf), free(x), free(y), free(xc), free(yr);
            cudaFree(dw), cudaFree(dx), cudaFree(dy);
        }
}

/* three matrices of mixed types (Q, K, V-like: rows 17, 5, 9) of one x, the first with a
 * bias; then gate/up (rows 23) with the SwiGLU epilogue */
static void test_multi(sl_cuda_ctx *c)
{
    const uint32_t sets[3][3] = {{SL_GGML_Q4_K, SL_GGML_Q6_K, SL_GGML_Q5_K},
                                 {SL_GGML_Q8_0, SL_GGML_Q4_0, SL_GGML_Q5_1},
                                 {SL_GGML_F16, SL_GGML_F32, SL_GGML_BF16}};
    for (int si = 0; si < 3; si++)
        for (int64_t n = 1; n <= 3; n += 2) {
            const int64_t cols = cols_of(sets[si][0], n);
            const int64_t rowsv[3] = {17, 5, 9};
            uint8_t *w[3];
            float *wf[3], *y[3], *dy[3];
            void *dw[3];
            size_t wb[3];
            float *x = xmalloc((size_t)(n * cols) * 4), *bias = xmalloc(17 * 4);
            for (int64_t i = 0; i < n * cols; i++) x[i] = rnd_f(-1, 1);
            for (int i = 0; i < 17; i++) bias[i] = rnd_f(-2, 2);
            float *dx = dmalloc((size_t)(n * cols) * 4), *dbias = dmalloc(17 * 4);
            h2d(dx, x, (size_t)(n * cols) * 4);
            h2d(dbias, bias, 17 * 4);
            sl_cuda_gemv_mat ms[3];
            for (int i = 0; i < 3; i++) {
                w[i] = make_w(sets[si][i], rowsv[i], cols, &wb[i], &wf[i]);
                dw[i] = dmalloc(wb[i]);
                h2d(dw[i], w[i], wb[i]);
                y[i] = xmalloc((size_t)(n * rowsv[i]) * 4);
                dy[i] = dmalloc((size_t)(n * rowsv[i]) * 4);
                ms[i] = (sl_cuda_gemv_mat){.type = sets[si][i], .w = dw[i], .rows = rowsv[i],
                                           .bias = i ? NULL : dbias, .y = dy[i]};
            }
            sl_error e;
            CHECK_MSG(sl_cuda_gemv_multi(c, ms, 3, cols, dx, n, false, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            /* x as the launches read it: the reference's input (the GLU pair below is of the
             * set's first two types, whose rule holds where the three's does) */
            const bool q8 = g_q8_mode && sl_cuda_gemv_multi_q8(ms, 3, cols);
            as_launch_sees(q8, x, n, cols);
            for (int i = 0; i < 3; i++) {
                d2h(y[i], dy[i], (size_t)(n * rowsv[i]) * 4);
                float *yr = xmalloc((size_t)(n * rowsv[i]) * 4);
                host_mm(sets[si][i], w[i], rowsv[i], cols, x, n, yr);
                for (int64_t b = 0; b < n; b++)
                    for (int64_t r = 0; r < rowsv[i]; r++) {
                        const float want = yr[b * rowsv[i] + r] + (i ? 0.0f : bias[r]);
                        const float got = y[i][b * rowsv[i] + r];
                        const double tl = tol(wf[i], r, cols, x + b * cols);
                        REPORT(fabs((double)got - want) <= tl, "multi %s%s (matrix %d of 3) n "
                               "%lld tok %lld row %lld: %g vs host %g (tol %g)",
                               tname(sets[si][i]), q8 ? " (q8)" : "", i,
                               (long long)n, (long long)b, (long long)r, got, want, tl);
                    }
                free(yr);
            }
            /* gate (set's first type) and up (its second), 23 rows each, SwiGLU epilogue */
            const int64_t F = 23;
            size_t gb, ub;
            float *gf, *uf;
            uint8_t *wg = make_w(sets[si][0], F, cols, &gb, &gf), *wu = make_w(sets[si][1], F, cols,
                                                                                &ub, &uf);
            void *dwg = dmalloc(gb), *dwu = dmalloc(ub);
            float *dg = dmalloc((size_t)(n * F) * 4), *du = dmalloc((size_t)(n * F) * 4);
            h2d(dwg, wg, gb);
            h2d(dwu, wu, ub);
            const sl_cuda_gemv_mat gu[2] = {
                {.type = sets[si][0], .w = dwg, .rows = F, .y = dg},
                {.type = sets[si][1], .w = dwu, .rows = F, .y = du}};
            CHECK_MSG(sl_cuda_gemv_multi(c, gu, 2, cols, dx, n, true, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            CHECK(q8 == (g_q8_mode && sl_cuda_gemv_multi_q8(gu, 2, cols)));
            float *g = xmalloc((size_t)(n * F) * 4), *u = xmalloc((size_t)(n * F) * 4);
            float *gr = xmalloc((size_t)(n * F) * 4), *ur = xmalloc((size_t)(n * F) * 4);
            float *hr = xmalloc((size_t)(n * F) * 4);
            d2h(g, dg, (size_t)(n * F) * 4);
            d2h(u, du, (size_t)(n * F) * 4);
            host_mm(sets[si][0], wg, F, cols, x, n, gr);
            host_mm(sets[si][1], wu, F, cols, x, n, ur);
            CHECK(sl_cpu_swiglu(&g_ops, gr, ur, hr, n * F, &e) == SL_OK);
            for (int64_t b = 0; b < n; b++)
                for (int64_t r = 0; r < F; r++) {
                    const int64_t i = b * F + r;
                    const double tg = tol(gf, r, cols, x + b * cols),
                                 tu = tol(uf, r, cols, x + b * cols);
                    REPORT(fabs((double)u[i] - ur[i]) <= tu, "glu up %s tok %lld row %lld: %g vs "
                           "host %g", tname(sets[si][1]), (long long)b, (long long)r, u[i], ur[i]);
                    const double silu = gr[i] / (1.0 + exp(-(double)gr[i]));
                    const double tl = gemv_ref_glu_tol(tg, tu, ur[i], silu, hr[i]);
                    REPORT(fabs((double)g[i] - hr[i]) <= tl, "glu %s/%s tok %lld row %lld: %g vs "
                           "host %g (tol %g)", tname(sets[si][0]), tname(sets[si][1]),
                           (long long)b, (long long)r, g[i], hr[i], tl);
                }
            free(g), free(u), free(gr), free(ur), free(hr), free(wg), free(wu), free(gf), free(uf);
            cudaFree(dwg), cudaFree(dwu), cudaFree(dg), cudaFree(du);
            for (int i = 0; i < 3; i++) {
                free(w[i]), free(wf[i]), free(y[i]);
                cudaFree(dw[i]), cudaFree(dy[i]);
            }
            free(x), free(bias);
            cudaFree(dx), cudaFree(dbias);
        }
}

/* sl_cuda_gemv_experts_glu against its three unfused launches: 3 experts, gate Q4_K, up Q6_K,
 * 40 rows (a partial block), 5 slots with a bad id; one x for all, then one a slot */
static void test_experts_glu(sl_cuda_ctx *c)
{
    enum { NE = 3, F = 40, NS = 5 };
    const int64_t E = 512;
    const int32_t ids[NS] = {1, -1, 0, 2, 1};
    void *gp[NE], *up[NE];
    for (int e = 0; e < NE; e++) {
        size_t gb, ub;
        float *gf, *uf;
        uint8_t *g = make_w(SL_GGML_Q4_K, F, E, &gb, &gf), *u = make_w(SL_GGML_Q6_K, F, E, &ub,
                                                                        &uf);
        gp[e] = dmalloc(gb);
        up[e] = dmalloc(ub);
        h2d(gp[e], g, gb);
        h2d(up[e], u, ub);
        free(g), free(u), free(gf), free(uf);
    }
    void **dgp = dmalloc(sizeof gp), **dup = dmalloc(sizeof up);
    int32_t *dids = dmalloc(sizeof ids);
    h2d(dgp, gp, sizeof gp);
    h2d(dup, up, sizeof up);
    h2d(dids, ids, sizeof ids);
    float *x = xmalloc((size_t)(NS * E) * 4);
    for (int64_t i = 0; i < NS * E; i++) x[i] = rnd_f(-1, 1);
    float *dx = dmalloc((size_t)(NS * E) * 4), *dy = dmalloc((size_t)(NS * F) * 4);
    float *dg = dmalloc((size_t)(NS * F) * 4), *du = dmalloc((size_t)(NS * F) * 4);
    h2d(dx, x, (size_t)(NS * E) * 4);
    float *y = xmalloc((size_t)(NS * F) * 4), *want = xmalloc((size_t)(NS * F) * 4);
    CHECK(sl_cuda_gemv_experts_glu_q8(c, SL_GGML_Q4_K, SL_GGML_Q6_K, E));
    for (int32_t xg = NS; xg >= 1; xg -= NS - 1) {
        sl_error e;
        CHECK_MSG(sl_cuda_gemv_experts_glu(c, SL_GGML_Q4_K, (const void *const *)dgp,
                                           SL_GGML_Q6_K, (const void *const *)dup, NE, dids, NS,
                                           F, E, dx, xg, dy, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_gemv_experts(c, SL_GGML_Q4_K, (const void *const *)dgp, NE, dids, NS,
                                       F, E, dx, xg, dg, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_gemv_experts(c, SL_GGML_Q6_K, (const void *const *)dup, NE, dids, NS,
                                       F, E, dx, xg, du, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_swiglu(c, dg, du, dg, NS * F, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
        d2h(y, dy, (size_t)(NS * F) * 4);
        d2h(want, dg, (size_t)(NS * F) * 4);
        /* the same sums and formula: the bits are expected equal (the log says how many
         * are); the check allows 2 ulps, should nvcc contract the two kernels' SwiGLU apart */
        int64_t same = 0, far = 0;
        for (int64_t i = 0; i < NS * F; i++) {
            same += memcmp(&y[i], &want[i], 4) == 0;
            far += !(fabsf(y[i] - want[i]) <= 2.4e-7f * fabsf(want[i]));
        }
        REPORT(far == 0, "experts glu x_group %d: %lld of %d values past 2 ulps of the unfused "
               "launches'", xg, (long long)far, NS * F);
        printf("cuda_fused_test: experts glu x_group %d: %lld of %d values the unfused bits\n",
               xg, (long long)same, NS * F);
    }
    free(x), free(y), free(want);
    for (int e = 0; e < NE; e++) cudaFree(gp[e]), cudaFree(up[e]);
    cudaFree(dgp), cudaFree(dup), cudaFree(dids), cudaFree(dx), cudaFree(dy), cudaFree(dg);
    cudaFree(du);
}

/* sl_cuda_gemv_multi_norm (the attention norm in Q/K/V's launch) against sl_cuda_rms_norm then
 * sl_cuda_gemv_multi: Q4_K, Q8_0 and Q6_K matrices (a partial block each), 2 tokens, with and
 * without a norm weight: xn and y the plain launches' bits (the same sums: sl_rms_scale over
 * the same 256 threads; the log says how many match, the check allows 2 ulps of y should
 * nvcc contract the two kernels apart) */
static void test_norm_multi(sl_cuda_ctx *c)
{
    enum { NM = 3, NT = 2 };
    const int64_t cols = 2048, rows[NM] = {72, 40, 33};
    const uint32_t types[NM] = {SL_GGML_Q4_K, SL_GGML_Q8_0, SL_GGML_Q6_K};
    void *dw[NM];
    float *dy[NM], *dyp[NM];
    for (int i = 0; i < NM; i++) {
        size_t b;
        float *wf;
        uint8_t *w = make_w(types[i], rows[i], cols, &b, &wf);
        dw[i] = dmalloc(b);
        h2d(dw[i], w, b);
        free(w), free(wf);
        dy[i] = dmalloc((size_t)(NT * rows[i]) * 4);
        dyp[i] = dmalloc((size_t)(NT * rows[i]) * 4);
    }
    float *x = xmalloc((size_t)(NT * cols) * 4), *nw = xmalloc((size_t)cols * 4);
    for (int64_t i = 0; i < NT * cols; i++) x[i] = rnd_f(-3, 3);
    for (int64_t i = 0; i < cols; i++) nw[i] = rnd_f(0.5f, 1.5f);
    float *dx = dmalloc((size_t)(NT * cols) * 4), *dnw = dmalloc((size_t)cols * 4);
    float *dxn = dmalloc((size_t)(NT * cols) * 4), *dxnp = dmalloc((size_t)(NT * cols) * 4);
    h2d(dx, x, (size_t)(NT * cols) * 4);
    h2d(dnw, nw, (size_t)cols * 4);
    float *got = xmalloc((size_t)(NT * cols) * 4), *want = xmalloc((size_t)(NT * cols) * 4);
    for (int with_w = 0; with_w < 2; with_w++) {
        sl_cuda_gemv_mat ms[NM], mp[NM];
        for (int i = 0; i < NM; i++) {
            ms[i] = (sl_cuda_gemv_mat){.type = types[i], .w = dw[i], .rows = rows[i],
                                       .y = dy[i]};
            mp[i] = ms[i];
            mp[i].y = dyp[i];
        }
        const float *w = with_w ? dnw : NULL;
        sl_error e;
        CHECK(sl_cuda_gemv_multi_norm_q8(c, ms, NM, cols));
        CHECK_MSG(sl_cuda_gemv_multi_norm(c, ms, NM, cols, dx, w, 1e-6f, dxn, NT, &e) == SL_OK,
                  "%s", e.msg);
        CHECK_MSG(sl_cuda_rms_norm(c, dx, w, dxnp, NT, cols, 1e-6f, false, &e) == SL_OK, "%s",
                  e.msg);
        CHECK_MSG(sl_cuda_gemv_multi(c, mp, NM, cols, dxnp, NT, false, &e) == SL_OK, "%s",
                  e.msg);
        CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
        d2h(got, dxn, (size_t)(NT * cols) * 4);
        d2h(want, dxnp, (size_t)(NT * cols) * 4);
        int64_t same = 0, far = 0, n = NT * cols;
        for (int64_t i = 0; i < n; i++) same += memcmp(&got[i], &want[i], 4) == 0;
        REPORT(same == n, "norm multi (weight %d): xn %lld of %lld values rms_norm's bits",
               with_w, (long long)same, (long long)n);
        int64_t ny = 0;
        same = 0;
        for (int i = 0; i < NM; i++) {
            d2h(got, dy[i], (size_t)(NT * rows[i]) * 4);
            d2h(want, dyp[i], (size_t)(NT * rows[i]) * 4);
            for (int64_t j = 0; j < NT * rows[i]; j++, ny++) {
                same += memcmp(&got[j], &want[j], 4) == 0;
                far += !(fabsf(got[j] - want[j]) <= 2.4e-7f * fabsf(want[j]));
            }
        }
        REPORT(far == 0, "norm multi (weight %d): %lld of %lld y values past 2 ulps of the norm "
               "then the GEMV", with_w, (long long)far, (long long)ny);
        printf("cuda_fused_test: norm multi (weight %d): %lld of %lld y values the plain "
               "launches' bits\n", with_w, (long long)same, (long long)ny);
    }
    sl_cuda_gemv_mat bad = {.type = SL_GGML_Q4_0, .w = dw[0], .rows = 4, .y = dy[0]};
    sl_error e;
    CHECK(!sl_cuda_gemv_multi_norm_q8(c, &bad, 1, cols)); /* no Q8-activation kernel */
    CHECK(sl_cuda_gemv_multi_norm(c, &bad, 1, cols, dx, dnw, 1e-6f, dxn, 1, &e) ==
          SL_ERR_UNSUPPORTED);
    free(x), free(nw), free(got), free(want);
    for (int i = 0; i < NM; i++) cudaFree(dw[i]), cudaFree(dy[i]), cudaFree(dyp[i]);
    cudaFree(dx), cudaFree(dnw), cudaFree(dxn), cudaFree(dxnp);
}

/* sl_cuda_gemv_add_norm (wo + residual add + FFN norm in one launch) against sl_cuda_gemv then
 * sl_cuda_add_rms_norm (and the add alone against sl_cuda_add): Q4_K and Q8_0, 2048 rows (64
 * blocks: the last-block counter over a real grid), three launches in a row each (the counter
 * back at 0 between them, or the second's norm would run early or never): y, res and xn the
 * plain launches' bits (the same sums over the same threads) */
static void test_add_norm(sl_cuda_ctx *c)
{
    enum { ROWS = 2048, COLS = 4096, REPS = 3 };
    const uint32_t types[2] = {SL_GGML_Q4_K, SL_GGML_Q8_0};
    float *x = xmalloc(COLS * 4), *res = xmalloc(ROWS * 4), *nw = xmalloc(ROWS * 4);
    float *got = xmalloc(ROWS * 4), *want = xmalloc(ROWS * 4);
    for (int i = 0; i < COLS; i++) x[i] = rnd_f(-1, 1);
    for (int i = 0; i < ROWS; i++) res[i] = rnd_f(-4, 4), nw[i] = rnd_f(0.5f, 1.5f);
    float *dx = dmalloc(COLS * 4), *dnw = dmalloc(ROWS * 4), *dy = dmalloc(ROWS * 4),
          *dyp = dmalloc(ROWS * 4), *dres = dmalloc(ROWS * 4), *dresp = dmalloc(ROWS * 4),
          *dxn = dmalloc(ROWS * 4), *dxnp = dmalloc(ROWS * 4);
    h2d(dx, x, COLS * 4);
    h2d(dnw, nw, ROWS * 4);
    for (int ti = 0; ti < 2; ti++)
        for (int mode = 0; mode < 2; mode++) { /* 0: add + norm, 1: the add alone */
            size_t b;
            float *wf;
            uint8_t *w = make_w(types[ti], ROWS, COLS, &b, &wf);
            void *dw = dmalloc(b);
            h2d(dw, w, b);
            h2d(dres, res, ROWS * 4);
            h2d(dresp, res, ROWS * 4);
            sl_error e;
            CHECK(sl_cuda_gemv_add_norm_q8(c, types[ti], dw, COLS));
            for (int rep = 0; rep < REPS; rep++) {
                CHECK_MSG(sl_cuda_gemv_add_norm(c, types[ti], dw, ROWS, COLS, dx, dy, dres, dnw,
                                                1e-5f, mode ? NULL : dxn, &e) == SL_OK, "%s",
                          e.msg);
                CHECK_MSG(sl_cuda_gemv(c, types[ti], dw, ROWS, COLS, dx, 1, dyp, &e) == SL_OK,
                          "%s", e.msg);
                CHECK_MSG((mode ? sl_cuda_add(c, dresp, dyp, dresp, ROWS, &e)
                                : sl_cuda_add_rms_norm(c, dresp, dyp, dnw, dxnp, 1, ROWS, 1e-5f,
                                                       &e)) == SL_OK, "%s", e.msg);
            }
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            float *const pairs[3][2] = {{dy, dyp}, {dres, dresp}, {dxn, dxnp}};
            const char *names[3] = {"y", "res", "xn"};
            for (int k = 0; k < (mode ? 2 : 3); k++) {
                d2h(got, pairs[k][0], ROWS * 4);
                d2h(want, pairs[k][1], ROWS * 4);
                int same = 0;
                for (int i = 0; i < ROWS; i++) same += memcmp(&got[i], &want[i], 4) == 0;
                REPORT(same == ROWS, "add%s %s after %d launches: %s %d of %d values the plain "
                       "launches' bits", mode ? "" : " norm", tname(types[ti]), REPS, names[k],
                       same, ROWS);
            }
            printf("cuda_fused_test: add%s %s checked over %d launches\n", mode ? "" : " norm",
                   tname(types[ti]), REPS);
            free(w), free(wf);
            cudaFree(dw);
        }
    sl_error e;
    CHECK(!sl_cuda_gemv_add_norm_q8(c, SL_GGML_Q4_0, dx, COLS)); /* no Q8-activation kernel */
    CHECK(sl_cuda_gemv_add_norm(c, SL_GGML_Q4_0, dnw, 4, 256, dx, dy, dres, NULL, 0.0f, NULL,
                                &e) == SL_ERR_UNSUPPORTED);
    free(x), free(res), free(nw), free(got), free(want);
    cudaFree(dx), cudaFree(dnw), cudaFree(dy), cudaFree(dyp), cudaFree(dres), cudaFree(dresp);
    cudaFree(dxn), cudaFree(dxnp);
}

/* sl_cuda_quant_q8x then sl_cuda_gemv_q8x (x quantised once a launch) against sl_cuda_gemv in
 * the default mode: the Q8-activation types at 1024 x 4096 (x not 16-byte aligned), y the
 * plain launch's bits */
static void test_q8x(sl_cuda_ctx *c)
{
    enum { ROWS = 1024, COLS = 4096 };
    const uint32_t types[6] = {SL_GGML_Q4_K, SL_GGML_Q5_K, SL_GGML_Q6_K, SL_GGML_Q8_0,
                               SL_GGML_IQ4_XS, SL_GGML_MXFP4};
    float *x = xmalloc(COLS * 4), *got = xmalloc(ROWS * 4), *want = xmalloc(ROWS * 4);
    for (int i = 0; i < COLS; i++) x[i] = rnd_f(-1, 1);
    float *dx = dmalloc(COLS * 4 + 16), *dy = dmalloc(ROWS * 4), *dyp = dmalloc(ROWS * 4);
    void *dxq = dmalloc(sl_cuda_q8x_bytes(COLS));
    h2d(dx + 1, x, COLS * 4);
    for (int ti = 0; ti < 6; ti++) {
        size_t b;
        float *wf;
        uint8_t *w = make_w(types[ti], ROWS, COLS, &b, &wf);
        void *dw = dmalloc(b);
        h2d(dw, w, b);
        sl_error e;
        CHECK_MSG(sl_cuda_quant_q8x(c, dx + 1, COLS, dxq, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_gemv_q8x(c, types[ti], dw, ROWS, COLS, dxq, dy, &e) == SL_OK, "%s",
                  e.msg);
        CHECK_MSG(sl_cuda_gemv(c, types[ti], dw, ROWS, COLS, dx + 1, 1, dyp, &e) == SL_OK, "%s",
                  e.msg);
        CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
        d2h(got, dy, ROWS * 4);
        d2h(want, dyp, ROWS * 4);
        int same = 0;
        for (int i = 0; i < ROWS; i++) same += memcmp(&got[i], &want[i], 4) == 0;
        REPORT(same == ROWS, "q8x %s: %d of %d values the plain launch's bits",
               tname(types[ti]), same, ROWS);
        printf("cuda_fused_test: q8x %s: %s\n", tname(types[ti]),
               same == ROWS ? "the plain launch's bits" : "DIFFERENT");
        free(w), free(wf);
        cudaFree(dw);
    }
    free(x), free(got), free(want);
    cudaFree(dx), cudaFree(dy), cudaFree(dyp), cudaFree(dxq);
}

/* sl_cuda_gemv_router (router GEMV + top-k in one launch) against sl_cuda_gemv_multi then
 * sl_cuda_router_topk: an F32 router of 128 experts x 2048 (a block's warps a row), top-8
 * softmax with a matrix bias, and 256 experts of BF16 with DeepSeek's sigmoid, 8 groups, top
 * 4, a selection bias, scaled; 1 and 3 tokens, three launches in a row (the counter back at 0
 * between them): logits, picks and weights the two launches' bits */
static void test_router(sl_cuda_ctx *c)
{
    enum { COLS = 2048, NT = 3, REPS = 3 };
    for (int v = 0; v < 2; v++) {
        const int32_t E = v ? 256 : 128, K = 8;
        const uint32_t t = v ? SL_GGML_BF16 : SL_GGML_F32;
        size_t b;
        float *wf;
        uint8_t *w = make_w(t, E, COLS, &b, &wf);
        void *dw = dmalloc(b);
        h2d(dw, w, b);
        float *x = xmalloc(NT * COLS * 4), *bias = xmalloc((size_t)E * 4);
        for (int i = 0; i < NT * COLS; i++) x[i] = rnd_f(-1, 1);
        for (int i = 0; i < E; i++) bias[i] = rnd_f(-0.5f, 0.5f);
        float *dx = dmalloc(NT * COLS * 4), *dbias = dmalloc((size_t)E * 4);
        float *dlg = dmalloc((size_t)(NT * E) * 4), *dlgp = dmalloc((size_t)(NT * E) * 4);
        float *dwt = dmalloc(NT * K * 4), *dwtp = dmalloc(NT * K * 4);
        int32_t *di = dmalloc(NT * K * 4), *dip = dmalloc(NT * K * 4);
        h2d(dx, x, NT * COLS * 4);
        h2d(dbias, bias, (size_t)E * 4);
        const sl_router_params p = {.gating = v ? SL_GATING_SIGMOID : SL_GATING_SOFTMAX_TOPK,
                                    .n_expert = E, .k = K, .norm_topk = v == 1,
                                    .bias = v ? dbias : NULL, .weight_scale = v ? 2.5f : 1.0f,
                                    .n_group = v ? 8 : 0, .top_group = v ? 4 : 0};
        sl_cuda_gemv_mat m = {.type = t, .w = dw, .rows = E, .bias = v ? NULL : dbias,
                              .y = dlg};
        sl_cuda_gemv_mat mp = m;
        mp.y = dlgp;
        CHECK(sl_cuda_gemv_router_fused(c, &m, COLS));
        for (int n = 1; n <= NT; n += NT - 1) {
            sl_error e;
            cudaStream_t cs = (cudaStream_t)sl_cuda_ctx_stream(c);
            for (int rep = 0; rep < REPS; rep++) {
                /* poisoned in stream order: a launch that skipped its routing shows */
                CHECK(cudaMemsetAsync(di, 0xFF, NT * K * 4, cs) == cudaSuccess &&
                      cudaMemsetAsync(dwt, 0xFF, NT * K * 4, cs) == cudaSuccess);
                CHECK_MSG(sl_cuda_gemv_router(c, &m, COLS, dx, n, &p, di, dwt, &e) == SL_OK,
                          "%s", e.msg);
                CHECK_MSG(sl_cuda_gemv_multi(c, &mp, 1, COLS, dx, n, false, &e) == SL_OK, "%s",
                          e.msg);
                CHECK_MSG(sl_cuda_router_topk(c, dlgp, n, &p, dip, dwtp, &e) == SL_OK, "%s",
                          e.msg);
            }
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            float lg[NT * 256], lgp[NT * 256], wt[NT * K], wtp[NT * K];
            int32_t id[NT * K], idp[NT * K];
            d2h(lg, dlg, (size_t)(n * E) * 4), d2h(lgp, dlgp, (size_t)(n * E) * 4);
            d2h(wt, dwt, (size_t)(n * K) * 4), d2h(wtp, dwtp, (size_t)(n * K) * 4);
            d2h(id, di, (size_t)(n * K) * 4), d2h(idp, dip, (size_t)(n * K) * 4);
            const bool same = !memcmp(lg, lgp, (size_t)(n * E) * 4) &&
                              !memcmp(wt, wtp, (size_t)(n * K) * 4) &&
                              !memcmp(id, idp, (size_t)(n * K) * 4);
            REPORT(same, "router %s, %d experts, %d tokens: logits, picks or weights differ "
                   "from the GEMV then the top-k", tname(t), E, n);
            printf("cuda_fused_test: router %s, %d experts, %d tokens: %s\n", tname(t), E, n,
                   same ? "the two launches' bits" : "DIFFERENT");
        }
        free(w), free(wf), free(x), free(bias);
        cudaFree(dw), cudaFree(dx), cudaFree(dbias), cudaFree(dlg), cudaFree(dlgp);
        cudaFree(dwt), cudaFree(dwtp), cudaFree(di), cudaFree(dip);
    }
}

/* sl_cuda_gemv_experts_combine (a MoE decode's down + combine + residual in one launch) against
 * sl_cuda_gemv_experts then sl_cuda_moe_combine: 8 experts of Q4_K and Q6_K, 2048 x 768 (64
 * blocks a slot), 1 token of top-8 and 2 of top-4 with a repeated id and a bad one, the
 * residual in place; three launches in a row (the counter back at 0): y and out the two
 * launches' bits */
static void test_experts_combine(sl_cuda_ctx *c)
{
    enum { NE = 8, ROWS = 2048, COLS = 768, NS = 8, REPS = 3 };
    const uint32_t types[2] = {SL_GGML_Q4_K, SL_GGML_Q6_K};
    const int32_t ids[2][NS] = {{3, 0, 7, 5, 1, 6, 2, 4}, {2, 2, -1, 5, 0, 7, 1, 7}};
    for (int ti = 0; ti < 2; ti++) {
        void *wp[NE];
        for (int e = 0; e < NE; e++) {
            size_t b;
            float *wf;
            uint8_t *w = make_w(types[ti], ROWS, COLS, &b, &wf);
            wp[e] = dmalloc(b);
            h2d(wp[e], w, b);
            free(w), free(wf);
        }
        void **dwp = dmalloc(sizeof wp);
        h2d(dwp, wp, sizeof wp);
        float *x = xmalloc(NS * COLS * 4), *wt = xmalloc(NS * 4), *res = xmalloc(NS * ROWS * 4);
        for (int i = 0; i < NS * COLS; i++) x[i] = rnd_f(-1, 1);
        for (int i = 0; i < NS; i++) wt[i] = rnd_f(0, 1);
        for (int i = 0; i < NS * ROWS; i++) res[i] = rnd_f(-3, 3);
        float *dx = dmalloc(NS * COLS * 4), *dwt = dmalloc(NS * 4), *dy = dmalloc(NS * ROWS * 4);
        float *dyp = dmalloc(NS * ROWS * 4), *dres = dmalloc(NS * ROWS * 4),
              *dresp = dmalloc(NS * ROWS * 4);
        int32_t *dids = dmalloc(sizeof ids[0]);
        h2d(dx, x, NS * COLS * 4);
        h2d(dwt, wt, NS * 4);
        float *got = xmalloc(NS * ROWS * 4), *want = xmalloc(NS * ROWS * 4);
        for (int v = 0; v < 2; v++) {
            const int32_t k = v ? 4 : 8, n = NS / k;
            h2d(dids, ids[v], sizeof ids[v]);
            h2d(dres, res, NS * ROWS * 4);
            h2d(dresp, res, NS * ROWS * 4);
            sl_error e;
            CHECK(sl_cuda_gemv_experts_combine_q8(c, types[ti], ROWS, COLS, k));
            for (int rep = 0; rep < REPS; rep++) {
                CHECK_MSG(sl_cuda_gemv_experts_combine(c, types[ti], (const void *const *)dwp,
                                                       NE, dids, NS, ROWS, COLS, dx, dy, k, dwt,
                                                       dres, dres, &e) == SL_OK, "%s", e.msg);
                CHECK_MSG(sl_cuda_gemv_experts(c, types[ti], (const void *const *)dwp, NE, dids,
                                               NS, ROWS, COLS, dx, 1, dyp, &e) == SL_OK, "%s",
                          e.msg);
                CHECK_MSG(sl_cuda_moe_combine(c, dyp, NULL, dids, dwt, n, k, ROWS, dresp, dresp,
                                              &e) == SL_OK, "%s", e.msg);
            }
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            float *const pairs[2][2] = {{dy, dyp}, {dres, dresp}};
            const int64_t cnt[2] = {NS * ROWS, (int64_t)n * ROWS};
            for (int q = 0; q < 2; q++) {
                d2h(got, pairs[q][0], (size_t)cnt[q] * 4);
                d2h(want, pairs[q][1], (size_t)cnt[q] * 4);
                int64_t same = 0;
                for (int64_t i = 0; i < cnt[q]; i++) same += !memcmp(&got[i], &want[i], 4);
                REPORT(same == cnt[q], "experts combine %s, %d tokens of top-%d: %s %lld of "
                       "%lld values the two launches' bits", tname(types[ti]), n, k,
                       q ? "out" : "y", (long long)same, (long long)cnt[q]);
            }
            printf("cuda_fused_test: experts combine %s, %d tokens of top-%d checked over %d "
                   "launches\n", tname(types[ti]), n, k, REPS);
        }
        free(x), free(wt), free(res), free(got), free(want);
        for (int e = 0; e < NE; e++) cudaFree(wp[e]);
        cudaFree(dwp), cudaFree(dx), cudaFree(dwt), cudaFree(dy), cudaFree(dyp);
        cudaFree(dres), cudaFree(dresp), cudaFree(dids);
    }
}

/* argument checks: all before the context, so they run without a GPU */
static void test_host_side(void)
{
    sl_error e;
    float *p = (float *)(uintptr_t)256; /* never dereferenced: every call here is refused */
    const sl_cuda_gemv_mat ok = {.type = SL_GGML_F32, .w = p, .rows = 4, .y = p};
    CHECK(sl_cuda_gemv_multi(NULL, &ok, 1, 8, p, 1, false, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    CHECK(sl_cuda_gemv_multi(NULL, &ok, 0, 8, p, 1, false, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi(NULL, &ok, SL_CUDA_GEMV_MULTI_MAX + 1, 8, p, 1, false, &e) ==
          SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi(NULL, NULL, 1, 8, p, 1, false, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi(NULL, &ok, 1, 8, NULL, 1, false, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_x");
    CHECK(sl_cuda_gemv_multi(NULL, &ok, 1, 8, p, 0, false, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi(NULL, &ok, 1, 8, p, 1, true, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "silu_glu");
    sl_cuda_gemv_mat two[2] = {ok, ok};
    two[1].rows = 5;
    CHECK(sl_cuda_gemv_multi(NULL, two, 2, 8, p, 1, true, &e) == SL_ERR_INVALID);
    two[1] = ok;
    two[1].type = 99;
    CHECK(sl_cuda_gemv_multi(NULL, two, 2, 8, p, 1, false, &e) == SL_ERR_UNSUPPORTED);
    two[1] = ok;
    two[1].w = NULL;
    CHECK(sl_cuda_gemv_multi(NULL, two, 2, 8, p, 1, false, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "matrix 1");
    CHECK(sl_cuda_gemv_heads(NULL, SL_GGML_Q8_0, p, 34 * 4, 2, 4, 33, p, 66, 33, 1, p, 8, 4,
                             &e) == SL_ERR_INVALID); /* cols not a multiple of 32 */
    CHECK(sl_cuda_gemv_heads(NULL, SL_GGML_F32, p, 4 * 8 * 4, 0, 4, 8, p, 16, 8, 1, p, 8, 4,
                             &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_heads(NULL, SL_GGML_F32, p, 4 * 8 * 4 - 1, 2, 4, 8, p, 16, 8, 1, p, 8, 4,
                             &e) == SL_ERR_INVALID); /* heads overlap */
    CHECK(sl_cuda_gemv_heads(NULL, SL_GGML_F32, p, 4 * 8 * 4, 2, 4, 8, p, 16, 8, 1, NULL, 8, 4,
                             &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_y");
    CHECK(sl_cuda_gemv_heads(NULL, SL_GGML_F32, p, 4 * 8 * 4, 2, 4, 8, p, 16, 8, 1, p, 8, 4,
                             &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* the Q8-activation rule (no device needed): types, alignment, columns, heads' stride */
    const uint8_t *w16 = (const uint8_t *)p; /* 256: aligned for every type */
    sl_cuda_gemv_mat q = {.type = SL_GGML_Q4_K, .w = w16, .rows = 4, .y = p};
    CHECK(sl_cuda_gemv_multi_q8(&q, 1, 256));
    CHECK(!sl_cuda_gemv_multi_q8(&q, 1, 32768 + 256)); /* past QX_MAX_COLS */
    CHECK(!sl_cuda_gemv_multi_q8(&q, 1, 300));         /* no whole blocks */
    sl_cuda_gemv_mat q2[2] = {q, q};
    q2[1].w = w16 + 4; /* Q4_K's loads want 16 bytes */
    CHECK(!sl_cuda_gemv_multi_q8(q2, 2, 256));
    q2[1].w = w16;
    q2[1].type = SL_GGML_Q4_0; /* no Q8-activation kernel */
    CHECK(!sl_cuda_gemv_multi_q8(q2, 2, 256));
    q2[1].type = SL_GGML_Q8_0;
    CHECK(sl_cuda_gemv_multi_q8(q2, 2, 256));  /* 272-byte rows */
    CHECK(!sl_cuda_gemv_multi_q8(q2, 2, 32)); /* Q8_0's 34-byte rows: 16 bytes no multiple */
    q2[1].w = NULL;
    CHECK(!sl_cuda_gemv_multi_q8(q2, 2, 256));
    CHECK(sl_cuda_gemv_heads_q8(SL_GGML_Q4_K, w16, 4 * 144, 2, 256));
    CHECK(!sl_cuda_gemv_heads_q8(SL_GGML_Q4_K, w16, 4 * 144 + 8, 2, 256));
    CHECK(sl_cuda_gemv_heads_q8(SL_GGML_Q4_K, w16, 4 * 144 + 8, 1, 256)); /* one head */
    CHECK(!sl_cuda_gemv_heads_q8(SL_GGML_Q4_K, NULL, 4 * 144, 2, 256));
    CHECK(!sl_cuda_gemv_heads_q8(SL_GGML_F16, w16, 4 * 512, 2, 256));
    const void *const *pp = (const void *const *)p;
    const int32_t *ip = (const int32_t *)p;
    CHECK(!sl_cuda_gemv_experts_glu_q8(NULL, SL_GGML_Q4_K, SL_GGML_Q4_K, 256));
    CHECK(sl_cuda_gemv_experts_glu(NULL, SL_GGML_Q4_K, pp, SL_GGML_Q4_K, pp, 2, ip, 1, 4, 256,
                                   p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    CHECK(sl_cuda_ctx_set_counters(NULL, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* the norm launch's own checks */
    float *xin = (float *)(uintptr_t)4096, *xo = (float *)(uintptr_t)65536;
    CHECK(!sl_cuda_gemv_multi_norm_q8(NULL, &q, 1, 256));
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, p, NAN, xo, 1, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "eps");
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, p, -1.0f, xo, 1, &e) ==
          SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, p, 1e-6f, NULL, 1, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_xn");
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, p, 1e-6f, xin + 8, 1, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "overlaps");
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 0, 256, xin, p, 1e-6f, xo, 1, &e) ==
          SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, p, 1e-6f, xo, 0, &e) ==
          SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_multi_norm(NULL, &q, 1, 256, xin, NULL, 1e-6f, xo, 1, &e) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* the add + norm launch's */
    float *yo = (float *)(uintptr_t)131072, *ro = (float *)(uintptr_t)262144;
    CHECK(!sl_cuda_gemv_add_norm_q8(NULL, SL_GGML_Q4_K, w16, 256));
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 256, xin, yo, NULL, p, 1e-5f, xo,
                                &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_res");
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 256, xin, yo, ro, p, INFINITY, xo,
                                &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "eps");
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 256, xin, yo, yo + 2, p, 1e-5f, xo,
                                &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "overlap");
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 256, xin, yo, ro, p, 1e-5f, ro + 3,
                                &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 300, xin, yo, ro, p, 1e-5f, xo,
                                &e) == SL_ERR_INVALID); /* no whole blocks */
    CHECK(sl_cuda_gemv_add_norm(NULL, SL_GGML_Q4_K, w16, 4, 256, xin, yo, ro, p, 1e-5f, xo,
                                &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* the router launch's */
    int32_t *io = (int32_t *)(uintptr_t)524288;
    const sl_cuda_gemv_mat rm = {.type = SL_GGML_F32, .w = w16, .rows = 8, .y = yo};
    sl_router_params rp = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 8, .k = 2,
                           .weight_scale = 1.0f};
    CHECK(!sl_cuda_gemv_router_fused(NULL, &rm, 256));
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 1, NULL, io, xo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "params");
    rp.k = 9;
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 1, &rp, io, xo, &e) == SL_ERR_INVALID);
    rp.k = 2;
    rp.n_expert = 16; /* the matrix has 8 rows */
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 1, &rp, io, xo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "rows");
    rp.n_expert = 8;
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 1, &rp, NULL, xo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_idx");
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 0, &rp, io, xo, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_router(NULL, &rm, 256, xin, 1, &rp, io, xo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* x quantised once, and the GEMV on it */
    CHECK(sl_cuda_q8x_bytes(4096) == 4096 + 128 * 8 && !sl_cuda_q8x_bytes(48) &&
          !sl_cuda_q8x_bytes(0) && !sl_cuda_q8x_bytes(32768 + 32));
    CHECK(sl_cuda_quant_q8x(NULL, xin, 48, yo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "cols = 48");
    CHECK(sl_cuda_quant_q8x(NULL, NULL, 256, yo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_x");
    CHECK(sl_cuda_quant_q8x(NULL, xin, 256, (char *)yo + 4, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "16-byte aligned");
    CHECK(sl_cuda_quant_q8x(NULL, xin, 256, xin, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "overlap");
    CHECK(sl_cuda_quant_q8x(NULL, xin, 256, yo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    CHECK(sl_cuda_gemv_q8x(NULL, SL_GGML_Q4_K, w16, 8, 256, NULL, yo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_xq");
    CHECK(sl_cuda_gemv_q8x(NULL, SL_GGML_Q4_0, w16, 8, 256, xin, yo, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemv_q8x(NULL, SL_GGML_Q4_K, w16, 8, 256, xin, yo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
    /* the experts + combine launch's */
    CHECK(!sl_cuda_gemv_experts_combine_q8(NULL, SL_GGML_Q4_K, 64, 256, 2));
    CHECK(sl_cuda_gemv_experts_combine(NULL, SL_GGML_Q4_K, pp, 2, ip, 4, 8, 256, xin, yo, 3, xo,
                                       ro, ro, &e) == SL_ERR_INVALID); /* 3 does not divide 4 */
    CHECK_CONTAINS(e.msg, "k = 3");
    CHECK(sl_cuda_gemv_experts_combine(NULL, SL_GGML_Q4_K, pp, 2, ip, 4, 8, 256, xin, yo, 2,
                                       NULL, ro, ro, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_w");
    CHECK(sl_cuda_gemv_experts_combine(NULL, SL_GGML_Q4_K, pp, 2, ip, 4, 8, 256, xin, yo, 2, xo,
                                       ro, yo + 4, &e) == SL_ERR_INVALID); /* out over y */
    CHECK_CONTAINS(e.msg, "overlap");
    CHECK(sl_cuda_gemv_experts_combine(NULL, SL_GGML_Q4_K, pp, 2, ip, 4, 8, 256, xin, yo, 2, xo,
                                       ro, ro, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx is NULL");
}

int main(void)
{
    test_host_side();
    sl_error e;
    int n = 0;
    if (sl_cuda_probe(&n, &e) != SL_OK) {
        CHECK(e.code == SL_ERR_DEVICE || e.code == SL_ERR_NOT_FOUND);
        printf("cuda_fused_test: SKIPPED, no usable GPU (%s)\n", e.msg);
        return sl_test_finish("cuda_fused_test");
    }
    const sl_cpu_features f = sl_cpu_features_detect();
    CHECK(sl_cpu_ops_init(&g_ops, SL_CPU_ISA_AUTO, f, &e) == SL_OK);
    CHECK(sl_cpu_matvec_init(&g_mv, g_ops.isa, f, &e) == SL_OK);
    g_mv.f32_act = true;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    sl_cuda_ctx *c = NULL;
    if (sl_cuda_ctx_create(0, s, &c, &e) != SL_OK) {
        CHECK_MSG(false, "ctx: %s", e.msg);
        return sl_test_finish("cuda_fused_test");
    }
    for (int mode = 0; mode < 2; mode++) {
        g_q8_mode = mode == 1;
        sl_cuda_ctx_set_f32_act(c, !g_q8_mode);
        const int q0 = g_q8_launches;
        test_heads(c);
        const int q1 = g_q8_launches;
        test_multi(c);
        CHECK_MSG(!g_q8_mode || (q1 > q0 && g_q8_launches > q1), "Q8-activation launches: "
                  "%d of heads, %d of multi (want some of each)", q1 - q0, g_q8_launches - q1);
        printf("cuda_fused_test: %s mode done (%d launches with Q8 activations)\n",
               g_q8_mode ? "default" : "F32-activation", g_q8_launches - q0);
    }
    /* the last-block launches' counters (without them those launches are refused) */
    void *dcnt = dmalloc(SL_CUDA_CTX_COUNTER_BYTES);
    {
        const sl_cuda_gemv_mat f = {.type = SL_GGML_F32, .w = dcnt, .rows = 8, .y = dcnt};
        CHECK(!sl_cuda_gemv_router_fused(c, &f, 256) &&
              !sl_cuda_gemv_add_norm_q8(c, SL_GGML_Q4_K, dcnt, 256) &&
              !sl_cuda_gemv_experts_combine_q8(c, SL_GGML_Q4_K, 64, 256, 2));
        CHECK(sl_cuda_ctx_set_counters(c, (char *)dcnt + 1, &e) == SL_ERR_INVALID);
        CHECK_MSG(sl_cuda_ctx_set_counters(c, dcnt, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_gemv_router_fused(c, &f, 256));
        /* a counter per block column of 32 rows, 1024 of them */
        CHECK(sl_cuda_gemv_experts_combine_q8(c, SL_GGML_Q4_K, 32768, 256, 2) &&
              !sl_cuda_gemv_experts_combine_q8(c, SL_GGML_Q4_K, 32769, 256, 2));
        /* the counters serve the stream that set them: on another, the predicates are false */
        cudaStream_t s2;
        CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
        CHECK_MSG(sl_cuda_ctx_set_stream(c, s2, &e) == SL_OK, "%s", e.msg);
        CHECK(!sl_cuda_gemv_router_fused(c, &f, 256) &&
              !sl_cuda_gemv_experts_combine_q8(c, SL_GGML_Q4_K, 64, 256, 2));
        CHECK_MSG(sl_cuda_ctx_set_stream(c, s, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_gemv_router_fused(c, &f, 256));
        cudaStreamDestroy(s2);
    }
    test_experts_glu(c); /* the default mode, left by the loop */
    test_norm_multi(c);
    test_add_norm(c);
    test_q8x(c);
    test_router(c);
    test_experts_combine(c);
    {
        /* every fused launch above left its counters at 0 */
        unsigned cnt[SL_CUDA_CTX_COUNTER_BYTES / sizeof(unsigned)];
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(cnt, dcnt, sizeof cnt);
        size_t nz = 0;
        for (size_t i = 0; i < sizeof cnt / sizeof cnt[0]; i++) nz += cnt[i] != 0;
        REPORT(nz == 0, "%zu counters not back at 0 after the fused launches", nz);
    }
    sl_cuda_ctx_set_f32_act(c, true);
    CHECK(!sl_cuda_gemv_experts_glu_q8(c, SL_GGML_Q4_K, SL_GGML_Q6_K, 512));
    CHECK(sl_cuda_gemv_experts_glu(c, SL_GGML_Q4_K, (const void *const *)&c, SL_GGML_Q4_K,
                                   (const void *const *)&c, 1, (const int32_t *)&c, 1, 4, 512,
                                   (const float *)&c, 1, (float *)&c, &e) ==
          SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "F32 activations");
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    CHECK(sl_cuda_ctx_set_counters(c, NULL, &e) == SL_OK);
    sl_cuda_ctx_destroy(c);
    cudaFree(dcnt);
    cudaStreamDestroy(s);
    return sl_test_finish("cuda_fused_test");
}
