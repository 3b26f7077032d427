/* kernels/cuda/dequant.cu: see dequant.h.
 *
 * Quantized types: one thread per 32-element unit (a block, or a K-quant sub-block), decoded by
 * sl_qt<T>::deq (common.cuh) with the reference's float operations, written as OUT. Float types:
 * one thread per element. Throughput is not critical here (prefill converts each weight once
 * per GEMM; decode uses the fused GEMV), simplicity and exactness are. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/dequant.h"

enum { DQ_THREADS = 256 };

template <typename OUT> static __device__ __forceinline__ OUT dq_cvt(float v);
template <> __device__ __forceinline__ float dq_cvt<float>(float v) { return v; }
template <> __device__ __forceinline__ __half dq_cvt<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 dq_cvt<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

template <uint32_t T, typename OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    k_dequant_q(const uint8_t *__restrict__ src, int64_t n_units, OUT *__restrict__ dst)
{
    typedef sl_qt<T> Q;
    const int64_t u = (int64_t)blockIdx.x * DQ_THREADS + threadIdx.x;
    if (u >= n_units) return;
    float v[Q::UNIT];
    Q::deq(src + (u / Q::SUBS) * Q::BB, (int)(u % Q::SUBS), v);
    OUT *o = dst + u * Q::UNIT;
#pragma unroll
    for (int i = 0; i < Q::UNIT; i++) o[i] = dq_cvt<OUT>(v[i]);
}

template <uint32_t T, typename OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    k_dequant_f(const uint8_t *__restrict__ src, int64_t n, OUT *__restrict__ dst)
{
    for (int64_t i = (int64_t)blockIdx.x * DQ_THREADS + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DQ_THREADS)
        dst[i] = dq_cvt<OUT>(sl_qt<T>::elem(src, i));
}

template <typename OUT> struct dq_launch {
    const uint8_t *src;
    int64_t n;
    OUT *dst;
    cudaStream_t s;
    template <uint32_t T> void operator()()
    {
        typedef sl_qt<T> Q;
        if constexpr (sl_qt_block<T>::FLOAT) {
            const int64_t blocks = (n + DQ_THREADS - 1) / DQ_THREADS;
            const unsigned g = (unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16);
            k_dequant_f<T, OUT><<<g, DQ_THREADS, 0, s>>>(src, n, dst);
        } else {
            const int64_t units = n / Q::UNIT;
            k_dequant_q<T, OUT><<<(unsigned)((units + DQ_THREADS - 1) / DQ_THREADS), DQ_THREADS, 0,
                                  s>>>(src, units, dst);
        }
    }
};

struct dq_nop {
    template <uint32_t T> void operator()() {}
};

extern "C" bool sl_cuda_dequant_supported(uint32_t type)
{
    return sl_qt_dispatch(type, dq_nop{});
}

template <typename OUT>
static sl_status dequant(const char *fn, sl_cuda_ctx *c, uint32_t type, const void *d_src,
                         int64_t n, OUT *d_dst, sl_error *err)
{
    int64_t blk, blk_bytes;
    if (!sl_qt_block_shape(type, &blk, &blk_bytes))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u is not supported by the "
                            "CUDA kernels", fn, type);
    if (n < 0 || n % blk)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld is not a non-negative multiple "
                            "of the block size %lld", fn, (long long)n, (long long)blk);
    if (n > 0 && (!d_src || !d_dst))
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn, d_src ? "d_dst" : "d_src");
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    if (n == 0) return SL_OK;
    if (n / 32 > (int64_t)INT32_MAX * DQ_THREADS)
        return sl_error_set(err, SL_ERR_RANGE, "%s: n = %lld is too large", fn, (long long)n);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    dq_launch<OUT> L{(const uint8_t *)d_src, n, d_dst, c->stream};
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_dequant");
    return SL_OK;
}

extern "C" sl_status sl_cuda_dequant_f32(sl_cuda_ctx *c, uint32_t type, const void *d_src,
                                         int64_t n, float *d_dst, sl_error *err)
{
    return dequant(__func__, c, type, d_src, n, d_dst, err);
}

extern "C" sl_status sl_cuda_dequant_f16(sl_cuda_ctx *c, uint32_t type, const void *d_src,
                                         int64_t n, uint16_t *d_dst, sl_error *err)
{
    return dequant(__func__, c, type, d_src, n, (__half *)d_dst, err);
}

extern "C" sl_status sl_cuda_dequant_bf16(sl_cuda_ctx *c, uint32_t type, const void *d_src,
                                          int64_t n, uint16_t *d_dst, sl_error *err)
{
    return dequant(__func__, c, type, d_src, n, (__nv_bfloat16 *)d_dst, err);
}
