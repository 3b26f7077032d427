/* kernels/cuda/gemm_grouped: routed experts of many tokens grouped by expert on the tensor cores
 * (MoE prefill).
 *
 * The product of sl_cuda_gemv_grouped (gemv_grouped.h) for the same slots and order, as the F16
 * GEMM computes it: Y[s][r] = dot(W_{ids[s]} row r, X_s), X_s = d_x + (s / x_group) * cols; a
 * slot with an id outside [0, n_expert) gets 0. W's values are the dequant kernel's (exact)
 * rounded to F16, X is rounded to F16 after a power-of-two scale per X row (sl_cuda_gemm's, so
 * outliers past F16's range stay finite), products are summed in F32 on the tensor cores (WMMA
 * 16 x 16 x 16): |err| <= ~2^-10 sum |w||x|, as sl_cuda_gemm's F16 precision. Why: the grouped
 * GEMV computes every slot's dots on the CUDA cores (a prefill of 512 tokens on the 30B shape is
 * ~1.9 TFLOP in its experts); here each W tile is decoded once per 32 slots and multiplied on
 * the tensor cores.
 * d_work (device, 16-byte aligned, sl_cuda_gemm_grouped_work_bytes for the X rows the slots read,
 * n_x = (n_sel + x_group - 1) / x_group) holds the F16 X and its scales; it must not be reused
 * until the stream has passed the call. Types: the quantized types of the GEMV (as
 * sl_cuda_gemv_grouped_supported). Pointers are device memory; enqueued on the context's
 * stream; nothing synchronises; no allocation. Errors as gemv_grouped.h, plus d_work's size. */
#ifndef SL_KERNELS_CUDA_GEMM_GROUPED_H
#define SL_KERNELS_CUDA_GEMM_GROUPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/status.h"
#include "kernels/cuda/ctx.h"

/* Bytes of d_work for n_x rows of cols columns; 0 for sizes out of range. */
size_t sl_cuda_gemm_grouped_work_bytes(int64_t n_x, int64_t cols);

/* d_order: sl_cuda_expert_order's for the same n_expert and n_sel (gemv_grouped.h). */
sl_status sl_cuda_gemm_grouped(sl_cuda_ctx *c, uint32_t type, const void *const *d_wptrs,
                               int32_t n_expert, const int32_t *d_order, int32_t n_sel,
                               int64_t rows, int64_t cols, const float *d_x, int32_t x_group,
                               float *d_y, void *d_work, size_t work_bytes, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
