/* tests/kernels_cuda/attn_tol.h: how close the per-token attention kernel (kernels/cuda/
 * attn_decode.cuh) must come to kernels/ref's float64 attention, one rule for the GPU test
 * (cuda_kernels_ops_test, C) and the host test of the kernel's body (attn_decode_host_test,
 * C++). Float logits, expf and sums: a few float ulps of the largest |v| (vmax) and of the
 * output; an indexing or masking error is O(vmax). */
#ifndef SL_TESTS_KERNELS_CUDA_ATTN_TOL_H
#define SL_TESTS_KERNELS_CUDA_ATTN_TOL_H

#include <math.h>
#include <stdbool.h>

static inline bool attn_close(double out, double ref, double vmax)
{
    return fabs(out - ref) <= 2e-5 * vmax + 1e-5 * fabs(ref);
}

#endif
