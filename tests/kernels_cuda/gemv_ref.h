/* tests/kernels_cuda/gemv_ref.h: the GEMV kernels' reference and tolerance, one rule for the
 * GPU test (cuda_kernels_matmul_test, C) and the host test of the kernels' bodies
 * (gemv_host_test, C++).
 * - gemv_ref_dot: the float64 dot of a dequantised row w and x, and the bound a kernel's float
 *   sum must meet: tol_s * (sum |w||x| + max |w| * sum |x|) + tol_abs (a few float ulps of
 *   the terms; the max term covers the min/offset factoring of ggml's block dots).
 * - gemv_ref_q8_x: x as the Q8-activation kernel sees it (ggml's Q8_1 per 32 values: d =
 *   max|x| / 127, q = round-to-even(x * 127 / max|x|), each value d * q), so that kernel is
 *   checked with gemv_ref_dot against the same x. cols a multiple of 32. */
#ifndef SL_TESTS_KERNELS_CUDA_GEMV_REF_H
#define SL_TESTS_KERNELS_CUDA_GEMV_REF_H

#include <math.h>
#include <stdint.h>

/* The GEMV kernels' bound (gemv.cuh, gemv_grouped.cuh), for gemv_ref_dot: their float sums are
 * within a few ulps of the terms. */
#define GEMV_REF_TOL_S 2e-5
#define GEMV_REF_TOL_ABS 1e-30

/* The multi-matrix GEMV's bound (gemv_multi.cuh: a lane's units in turn, each dequantised
 * and summed by fmaf, then sl_warp_sum), for gemv_ref_dot, with margin; cuda_fused_test on the
 * GPU and gemv_multi_host_test on the CPU. */
#define GEMV_MULTI_TOL_S 3e-5
#define GEMV_MULTI_TOL_ABS 1e-6

/* Its SwiGLU epilogue's bound: silu(gate) * up against the float64 ref of it, from the gate's
 * and up's bounds tg, tu (silu' <= 1.1) */
static inline double gemv_ref_glu_tol(double tg, double tu, double up, double silu, double ref)
{
    return 1.2 * tg * fabs(up) + tu * fabs(silu) + 1e-5 * fabs(ref) + 1e-6;
}

static inline void gemv_ref_dot(const float *w, const float *x, int64_t cols, double tol_s,
                                double tol_abs, double *dot, double *tol)
{
    double d = 0, S = 0, M = 0, X = 0;
    for (int64_t k = 0; k < cols; k++) {
        const double wk = w[k];
        d += wk * x[k];
        S += fabs(wk) * fabs(x[k]);
        X += fabs(x[k]);
        if (fabs(wk) > M) M = fabs(wk);
    }
    *dot = d;
    *tol = tol_s * (S + M * X) + tol_abs;
}

static inline void gemv_ref_q8_x(const float *x, int64_t cols, float *xr)
{
    for (int64_t u = 0; u < cols / 32; u++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * u + i]));
        const float d = amax / 127.0f, id = d > 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) xr[32 * u + i] = d * rintf(x[32 * u + i] * id);
    }
}

#endif
