/* kernels/cuda/gemm: prefill / large-batch matrix products through cuBLAS.
 *
 * Y [n_batch][rows] = X [n_batch][cols] . W^T with W [rows][cols] in any type of
 * kernels/cuda/dequant.h: W is dequantised into the caller's workspace as F16 or BF16 (the
 * `prec` choice; BF16 keeps F32's range, F16 keeps 3 more mantissa bits), X is rounded to the
 * same type, and cublasGemmEx multiplies with F32 accumulation (CUBLAS_COMPUTE_32F) into F32 Y.
 * F16 activations carry a power-of-two scale per row of X (applied to Y after the product), so
 * rows with |x| past F16's 65504 (outliers in real down-projection inputs) stay finite and keep
 * F16's relative precision; BF16 needs none.
 * In cuBLAS's column-major terms: C (rows x n) = op_T(A: cols x rows, lda = cols) . B (cols x n,
 * ldb = cols), ldc = rows, which is exactly the row-major [n_batch][rows] Y.
 *
 * Accuracy vs the float64 product of the dequantised W and X (S = sum_c |W[r][c]| |X[b][c]|):
 * F16 |err| <= ~2^-10 S (two roundings to 11-bit mantissas), BF16 <= ~2^-7 S.
 *
 * The cuBLAS handle is the context's (created on the first call, bound to its stream). The
 * workspace (device, sl_cuda_gemm_work_bytes, 256-byte aligned) is the caller's: no allocation
 * here; it must not be reused until the stream has passed this GEMM. Pointers are device
 * memory; enqueued on the context's stream; nothing synchronises. Errors as gemv.h, plus
 * SL_ERR_DEVICE naming the cuBLAS status. */
#ifndef SL_KERNELS_CUDA_GEMM_H
#define SL_KERNELS_CUDA_GEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "base/status.h"

typedef enum sl_cuda_gemm_prec { SL_CUDA_GEMM_F16 = 0, SL_CUDA_GEMM_BF16 = 1 } sl_cuda_gemm_prec;

/* Workspace bytes for W [rows][cols] and X [n_batch][cols] in 16-bit form plus X's row scales;
 * 0 for bad sizes. */
size_t sl_cuda_gemm_work_bytes(int64_t rows, int64_t cols, int64_t n_batch);

sl_status sl_cuda_gemm(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                       int64_t cols, const float *d_x, int64_t n_batch, float *d_y,
                       sl_cuda_gemm_prec prec, void *d_work, size_t work_bytes, sl_error *err);

/* Shared with gemm_grouped.cu: X [n][cols] (F32) to d_xh [n][cols] (F16 bits) divided by d_scale
 * [n], each row's power of two that brings its max |x| under 2^14 (1 for rows already there or
 * holding inf / NaN): the F16 GEMMs multiply their sums by it. One launch; no checks but n. */
sl_status sl__cuda_x_f16_scaled(sl_cuda_ctx *c, const float *d_x, int64_t n, int64_t cols,
                                uint16_t *d_xh, float *d_scale, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
