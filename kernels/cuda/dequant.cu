/* kernels/cuda/dequant.cu: see dequant.h; the kernels' bodies and design: dequant.cuh. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/dequant.h"

template <uint32_t T, typename OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    k_dequant_q(const uint8_t *__restrict__ src, int64_t n_units, OUT *__restrict__ dst)
{
    sl_pdl_enter();
    dq_units<T, OUT>(src, n_units, dst);
}

template <uint32_t T, typename OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    k_dequant_f(const uint8_t *__restrict__ src, int64_t n, OUT *__restrict__ dst)
{
    sl_pdl_enter();
    dq_elems<T, OUT>(src, n, dst);
}

template <typename OUT> struct dq_launch {
    const uint8_t *src;
    int64_t n;
    OUT *dst;
    sl_cuda_ctx *c;
    template <uint32_t T> void operator()()
    {
        if constexpr (sl_qt_block<T>::FLOAT)
            sl__cuda_launch(c, k_dequant_f<T, OUT>, dq_blocks<T>(n), DQ_THREADS, 0, src, n, dst);
        else
            sl__cuda_launch(c, k_dequant_q<T, OUT>, dq_blocks<T>(n), DQ_THREADS, 0, src,
                            n / sl_qt<T>::UNIT, dst);
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
    dq_launch<OUT> L{(const uint8_t *)d_src, n, d_dst, c};
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
