/* kernels/cuda/dequant: GGUF weights -> F32 / F16 / BF16 on the GPU.
 *
 * Types: those of the GEMV (gemv.h: the list SL_QT_TYPES of kernels/cuda/common.cuh).
 * Layout: n elements stored as consecutive blocks of the type (a whole [rows][cols] GGUF matrix
 * is one such run when cols is a multiple of the block size, since rows are packed end to end);
 * n must be a multiple of the block size (1 for the float types).
 *
 * Exactness: the F32 output is bit-identical to kernels/ref/quant's sl_quant_dequant_row (the
 * same float operations, no contraction into FMA); F16 / BF16 outputs are those floats rounded
 * to nearest even (__float2half_rn / __float2bfloat16_rn), which equals sl_quant_fp32_to_fp16 /
 * sl_quant_fp32_to_bf16 of the reference for every finite value.
 *
 * Pointers are device memory; d_src needs no alignment, d_dst its element's. Enqueued on the
 * context's stream; nothing synchronises. Errors: SL_ERR_INVALID naming the argument (NULL ctx
 * or pointer with n > 0, n < 0 or not a multiple of the block), SL_ERR_UNSUPPORTED naming the
 * type, SL_ERR_DEVICE with CUDA's message for a failed launch. Arguments are checked before
 * the context, so a NULL ctx with bad arguments reports the arguments. n == 0 is a no-op. */
#ifndef SL_KERNELS_CUDA_DEQUANT_H
#define SL_KERNELS_CUDA_DEQUANT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "base/status.h"

/* True for the types above. */
bool sl_cuda_dequant_supported(uint32_t type);

sl_status sl_cuda_dequant_f32(sl_cuda_ctx *c, uint32_t type, const void *d_src, int64_t n,
                              float *d_dst, sl_error *err);
/* d_dst: n IEEE binary16 values (the GEMM's F16 input). */
sl_status sl_cuda_dequant_f16(sl_cuda_ctx *c, uint32_t type, const void *d_src, int64_t n,
                              uint16_t *d_dst, sl_error *err);
/* d_dst: n bfloat16 values (the GEMM's BF16 input). */
sl_status sl_cuda_dequant_bf16(sl_cuda_ctx *c, uint32_t type, const void *d_src, int64_t n,
                               uint16_t *d_dst, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
