/* kernels/cuda/ctx_impl.h: the layout of sl_cuda_ctx, private to kernels/cuda (*.cu only).
 *
 * Invariants: stream belongs to device `ordinal`; blas is NULL or a handle created on that
 * device whose stream is `stream` (set_stream keeps them equal); info is read once at create;
 * pdl only where info.cc_major >= 9; d_done NULL or the caller's device memory of that
 * device, zeroed in stream order. */
#ifndef SL_KERNELS_CUDA_CTX_IMPL_H
#define SL_KERNELS_CUDA_CTX_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/ctx.h"

/* The context's last-block counters (common.cuh sl_last_block), 0 between launches: one for
 * each grid-wide kind, and the experts' combine's SL__CUDA_COMBINE_COLS from
 * SL__CUDA_DONE_COMBINE, one per block column of its launch (gemv.cuh qx_combine_last). The
 * fused launches run on the stream the counters were zeroed on (sl__cuda_counters), where a
 * kind's launches are ordered: the next one's blocks wait for the one before to end. */
enum { SL__CUDA_COMBINE_COLS = 1024 };
enum {
    SL__CUDA_DONE_ADD_NORM,
    SL__CUDA_DONE_ROUTER,
    SL__CUDA_DONE_COMBINE,
    SL__CUDA_DONE_N = SL__CUDA_DONE_COMBINE + SL__CUDA_COMBINE_COLS
};
static_assert(SL__CUDA_DONE_N * sizeof(unsigned) <= SL_CUDA_CTX_COUNTER_BYTES,
              "ctx.h's counter bytes hold every kind");

struct sl_cuda_ctx {
    int ordinal;
    cudaStream_t stream;
    sl_cuda_ctx_info info;
    cublasHandle_t blas; /* lazily created by the first GEMM */
    bool gemv_smem_ready; /* gemv kernels' dynamic shared memory limit raised (gemv.cu) */
    bool f32_act;         /* GEMV keeps activations F32 (verification); else Q8 where it pays */
    bool pdl;             /* launches with programmatic stream serialisation (only where cc >= 9) */
    unsigned *d_done;     /* [SL__CUDA_DONE_N] device counters (sl_cuda_ctx_set_counters), or
                           * NULL: no last-block launch */
    cudaStream_t done_stream; /* the stream d_done was zeroed on: the only one they serve */
    uint64_t launches;    /* sl__cuda_launch calls, a failed one too (sl_cuda_ctx_launches) */
};

/* Whether c's last-block launches may run now: counters set, and c on the stream that zeroed
 * them (another stream, dx_cuda's side stream, could run them beside that one's) */
static inline bool sl__cuda_counters(const sl_cuda_ctx *c)
{
    return c->d_done && c->stream == c->done_stream;
}

/* Makes c's device current on the calling thread (cheap; CUDA state is per thread). */
sl_status sl__cuda_ctx_enter(sl_cuda_ctx *c, sl_error *err);

/* Launches k<<<grid, block, smem, c->stream>>>(args...), with programmatic stream serialisation
 * where c->pdl (common.cuh sl_pdl_enter: every kernel of kernels/cuda waits there before it
 * reads memory). A launch that fails with the attribute is made again without it; where that
 * one succeeds the attribute was the cause, and c->pdl goes off: the context goes on in plain
 * stream order, and sl_cuda_ctx_pdl says so. Where both fail (a
 * fault, an invalidated capture, no kernel image) PDL stays as it was. Errors as a <<<>>>
 * launch's: the thread's last CUDA error, which SL_CU_LAUNCH reads. */
template <typename... P, typename... A>
static inline void sl__cuda_launch(sl_cuda_ctx *c, void (*k)(P...), dim3 grid, dim3 block,
                                   size_t smem, A... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c->launches++;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cfg.attrs = at;
    cfg.numAttrs = c->pdl ? 1 : 0;
    if (cudaLaunchKernelEx(&cfg, k, args...) == cudaSuccess || !c->pdl) return;
    (void)cudaGetLastError();
    cfg.numAttrs = 0;
    if (cudaLaunchKernelEx(&cfg, k, args...) != cudaSuccess) return; /* not the attribute */
    c->pdl = false;
}

#endif
