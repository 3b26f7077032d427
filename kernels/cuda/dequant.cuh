/* kernels/cuda/dequant.cuh: the bodies of dequant.cu's kernels (dequant.h) and their grid rule,
 * in a header so that tests/kernels_cuda:dequant_host_test runs them on the CPU
 * (host_shim/launch.h) with the grids dequant.cu launches. Quantized types: one thread per
 * 32-element unit (a block, or a K-quant sub-block), decoded by sl_qt<T>::deq (common.cuh)
 * with the reference's float operations, written as OUT. Float types: one thread per element.
 * Throughput is not critical here (prefill converts each weight once per GEMM; decode uses the
 * fused GEMV), simplicity and exactness are. */
#ifndef SL_KERNELS_CUDA_DEQUANT_CUH
#define SL_KERNELS_CUDA_DEQUANT_CUH

#include "kernels/cuda/common.cuh"

enum { DQ_THREADS = 256 };

template <typename OUT> static __device__ __forceinline__ OUT dq_cvt(float v);
template <> __device__ __forceinline__ float dq_cvt<float>(float v) { return v; }
template <> __device__ __forceinline__ __half dq_cvt<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 dq_cvt<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* k_dequant_q's body: one thread per unit */
template <uint32_t T, typename OUT>
static __device__ __forceinline__ void dq_units(const uint8_t *__restrict__ src, int64_t n_units,
                                                OUT *__restrict__ dst)
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

/* k_dequant_f's body: one thread per element, a grid-stride loop */
template <uint32_t T, typename OUT>
static __device__ __forceinline__ void dq_elems(const uint8_t *__restrict__ src, int64_t n,
                                                OUT *__restrict__ dst)
{
    for (int64_t i = (int64_t)blockIdx.x * DQ_THREADS + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DQ_THREADS)
        dst[i] = dq_cvt<OUT>(sl_qt<T>::elem(src, i));
}

/* the blocks of a launch over n elements of type T: a unit a thread (quantized), an element a
 * thread up to 65535 * 16 blocks (float types; then threads stride) */
template <uint32_t T> static __host__ __device__ inline unsigned dq_blocks(int64_t n)
{
    if constexpr (sl_qt_block<T>::FLOAT) {
        const int64_t blocks = (n + DQ_THREADS - 1) / DQ_THREADS;
        return (unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16);
    } else {
        const int64_t units = n / sl_qt<T>::UNIT;
        return (unsigned)((units + DQ_THREADS - 1) / DQ_THREADS);
    }
}

#endif
