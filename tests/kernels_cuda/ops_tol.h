/* tests/kernels_cuda/ops_tol.h: how close ops.cu's row, rope, element-wise and router kernels
 * must come to kernels/ref, one rule each for the GPU test (cuda_kernels_ops_test, C) and the
 * host tests of their bodies (rows_host_test, rope_host_test, select_host_test, C++). The
 * kernels sum in float (rms_norm, softmax) or compute in double then round (rope, router), so a
 * few float ulps of the row's scale; an indexing or ordering error is O(1) of it. */
#ifndef SL_TESTS_KERNELS_CUDA_OPS_TOL_H
#define SL_TESTS_KERNELS_CUDA_OPS_TOL_H

#include <math.h>
#include <stdbool.h>

/* rms_norm (and add_rms_norm's y): row_max is the largest |ref| of the row */
static inline bool rms_norm_close(double out, double ref, double row_max)
{
    return fabs(out - ref) <= 1e-5 * row_max;
}

/* rope of inputs in [-1, 1]: the angle in double, the pair rounded to float */
static inline bool rope_close(double out, double ref)
{
    return fabs(out - ref) <= 4e-6;
}

/* the fused q/k norm + rope: rope's bound plus rms_norm's of the largest |ref| (head_max),
 * plus slack (an F16 cache entry: one half-precision rounding, |ref| / 1024) */
static inline bool qk_rope_close(double out, double ref, double head_max, double slack)
{
    return fabs(out - ref) <= slack + 4e-6 + 1e-5 * head_max;
}

static inline bool softmax_close(double out, double ref)
{
    return fabs(out - ref) <= 1e-5 * fabs(ref) + 1e-7;
}

/* the GLUs (swiglu, geglu, swiglu_oai) of gate and up: expf / tanhf / erff in float */
static inline bool glu_close(double out, double ref, double gate, double up)
{
    return fabs(out - ref) <= 1e-5 * fabs(ref) + 1e-6 * fabs(up) * (1 + fabs(gate));
}

/* gated_add's out + sigmoid(logit) * y against the double of the same: relative to the
 * operands, not the sum (where they nearly cancel, the F32 rounding of the O(1) operands
 * dominates and |ref| says nothing of the kernel) */
static inline bool gated_add_close(double out, double ref, double acc, double gy)
{
    return fabs(out - ref) <= 1e-5 * (fabs(acc) + fabs(gy) + 1e-6);
}

/* a router weight (the indices must be equal) */
static inline bool router_w_close(double out, double ref)
{
    return fabs(out - ref) <= 1e-6 * fabs(ref) + 1e-7;
}

#endif
