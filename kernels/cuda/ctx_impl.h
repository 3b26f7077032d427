/* kernels/cuda/ctx_impl.h: the layout of sl_cuda_ctx, private to kernels/cuda (*.cu only).
 *
 * Invariants: stream belongs to device `ordinal`; blas is NULL or a handle created on that
 * device whose stream is `stream` (set_stream keeps them equal); info is read once at create. */
#ifndef SL_KERNELS_CUDA_CTX_IMPL_H
#define SL_KERNELS_CUDA_CTX_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/ctx.h"

struct sl_cuda_ctx {
    int ordinal;
    cudaStream_t stream;
    sl_cuda_ctx_info info;
    cublasHandle_t blas; /* lazily created by the first GEMM */
    bool gemv_smem_ready; /* gemv kernels' dynamic shared memory limit raised (gemv.cu) */
    bool f32_act;         /* GEMV keeps activations F32 (verification); else Q8 where it pays */
    bool pdl;             /* launches with programmatic stream serialisation (only where cc >= 9) */
};

/* Makes c's device current on the calling thread (cheap; CUDA state is per thread). */
sl_status sl__cuda_ctx_enter(sl_cuda_ctx *c, sl_error *err);

#endif
