/* kernels/cuda/ctx.cu: sl_cuda_ctx (see ctx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/blas.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"

extern "C" sl_status sl_cuda_probe(int *count, sl_error *err)
{
    int n = 0;
    if (count) *count = 0;
    SL_CU(err, cudaGetDeviceCount(&n));
    if (n <= 0) return sl_error_set(err, SL_ERR_NOT_FOUND, "cuda: no CUDA device present");
    if (count) *count = n;
    return SL_OK;
}

sl_status sl__cuda_ctx_enter(sl_cuda_ctx *c, sl_error *err)
{
    SL_CU(err, cudaSetDevice(c->ordinal));
    return SL_OK;
}

extern "C" sl_status sl_cuda_ctx_create(int ordinal, void *cuda_stream, sl_cuda_ctx **out,
                                        sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_ctx_create: out is NULL");
    *out = NULL;
    int n = 0;
    sl_status st = sl_cuda_probe(&n, err);
    if (st) return st;
    if (ordinal < 0 || ordinal >= n)
        return sl_error_set(err, SL_ERR_NOT_FOUND,
                            "sl_cuda_ctx_create: ordinal %d but %d device(s) present", ordinal, n);
    SL_CU(err, cudaSetDevice(ordinal));
    cudaDeviceProp prop;
    SL_CU(err, cudaGetDeviceProperties(&prop, ordinal));
    sl_cuda_ctx *c = (sl_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return sl_error_set(err, SL_ERR_NOMEM, "sl_cuda_ctx_create: out of host memory");
    c->ordinal = ordinal;
    c->stream = (cudaStream_t)cuda_stream;
    c->info.ordinal = ordinal;
    snprintf(c->info.name, sizeof c->info.name, "%s", prop.name);
    c->info.cc_major = prop.major;
    c->info.cc_minor = prop.minor;
    c->info.sm_count = prop.multiProcessorCount;
    c->info.l2_bytes = (uint64_t)prop.l2CacheSize;
    c->info.smem_per_block_optin = (uint64_t)prop.sharedMemPerBlockOptin;
    c->pdl = prop.major >= 9;
    *out = c;
    return SL_OK;
}

extern "C" void sl_cuda_ctx_destroy(sl_cuda_ctx *c)
{
    if (!c) return;
    const sl__cublas_api *b = NULL;
    if (c->blas && sl__cublas(&b, NULL) == SL_OK) { /* loaded: c->blas came from it */
        cudaSetDevice(c->ordinal);
        b->destroy(c->blas);
    }
    free(c);
}

extern "C" sl_status sl_cuda_ctx_set_stream(sl_cuda_ctx *c, void *cuda_stream, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_ctx_set_stream: ctx is NULL");
    c->stream = (cudaStream_t)cuda_stream;
    const sl__cublas_api *b = NULL;
    if (c->blas && sl__cublas(&b, err) == SL_OK) { /* loaded: c->blas came from it */
        const cublasStatus_t bs = b->set_stream(c->blas, c->stream);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return sl_error_set(err, SL_ERR_DEVICE, "%s:%d: cublasSetStream: %s", __FILE__,
                                __LINE__, b->status_string(bs));
    }
    return SL_OK;
}

extern "C" void *sl_cuda_ctx_stream(const sl_cuda_ctx *c)
{
    return c ? (void *)c->stream : NULL;
}

extern "C" sl_status sl_cuda_ctx_sync(sl_cuda_ctx *c, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_ctx_sync: ctx is NULL");
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    SL_CU(err, cudaStreamSynchronize(c->stream));
    return SL_OK;
}

extern "C" void sl_cuda_ctx_info_get(const sl_cuda_ctx *c, sl_cuda_ctx_info *out)
{
    if (!out) return;
    if (!c) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = c->info;
}

extern "C" void sl_cuda_ctx_set_f32_act(sl_cuda_ctx *c, bool f32_act)
{
    if (c) c->f32_act = f32_act;
}

extern "C" void sl_cuda_ctx_set_pdl(sl_cuda_ctx *c, bool on)
{
    if (c) c->pdl = on && c->info.cc_major >= 9;
}

extern "C" bool sl_cuda_ctx_pdl(const sl_cuda_ctx *c)
{
    return c && c->pdl;
}

extern "C" sl_status sl_cuda_ctx_set_counters(sl_cuda_ctx *c, void *d_mem, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_ctx_set_counters: ctx is NULL");
    if ((uintptr_t)d_mem % sizeof(unsigned))
        return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_ctx_set_counters: d_mem %p is not "
                            "%zu-byte aligned", d_mem, sizeof(unsigned));
    c->d_done = NULL;
    if (!d_mem) return SL_OK;
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    SL_CU(err, cudaMemsetAsync(d_mem, 0, SL_CUDA_CTX_COUNTER_BYTES, c->stream));
    c->d_done = (unsigned *)d_mem;
    c->done_stream = c->stream;
    return SL_OK;
}

extern "C" uint64_t sl_cuda_ctx_launches(const sl_cuda_ctx *c)
{
    return c ? c->launches : 0;
}
