/* kernels/cuda/x_f16.cuh: the F16 GEMMs' activation scaling (gemm.cu: sl_cuda_gemm's F16 path
 * and sl__cuda_x_f16_scaled, which the tensor-core grouped GEMM takes its X from): each row of X
 * to F16 under a power-of-two scale that keeps it in F16's range, and Y's rows scaled back.
 * Bodies and grid rules in a header so that tests/kernels_cuda:x_f16_host_test runs them on the
 * CPU (host_shim/launch.h) with the grids gemm.cu launches. */
#ifndef SL_KERNELS_CUDA_X_F16_CUH
#define SL_KERNELS_CUDA_X_F16_CUH

#include "kernels/cuda/common.cuh"

enum { XS_THREADS = 256 };
/* Largest |x| an activation keeps after its row's scale: products with |w| <= 2 stay far
 * below F16's 65504, and F32 accumulation takes the sums. */
#define XS_LIMIT 16384.0f

/* One block per row of X: scale[b] = the power of two that brings max |x| under XS_LIMIT (1 if
 * it is already, or if the row holds inf; a NaN is ignored by the max and propagates), xh = x /
 * scale in F16. A power of two changes no mantissa, so an in-range row converts exactly as before. */
static __device__ __forceinline__ void xs_row(const float *x, int64_t cols, uint16_t *xh,
                                              float *scale, float *red)
{
    const int64_t b = blockIdx.x;
    const float *xr = x + b * cols;
    float m = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += XS_THREADS) m = fmaxf(m, fabsf(xr[j]));
    m = sl_warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < XS_THREADS / 32 ? red[threadIdx.x] : 0.0f;
        v = sl_warp_max(v);
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    const float amax = red[0];
    float s = 1.0f;
    if (amax > XS_LIMIT && isfinite(amax)) s = exp2f(ceilf(log2f(amax / XS_LIMIT)));
    const float inv = 1.0f / s; /* exact: s is a power of two */
    for (int64_t j = threadIdx.x; j < cols; j += XS_THREADS)
        xh[b * cols + j] = __half_as_ushort(__float2half_rn(xr[j] * inv));
    if (threadIdx.x == 0) scale[b] = s;
}

static __device__ __forceinline__ void xs_rows_scale(float *y, int64_t rows, int64_t n_batch,
                                                     const float *scale)
{
    /* rows of Y over grid y with a stride: n_batch may pass the 65535 limit of gridDim.y */
    for (int64_t b = blockIdx.y; b < n_batch; b += gridDim.y) {
        const float s = scale[b];
        if (s == 1.0f) continue;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < rows;
             j += (int64_t)gridDim.x * blockDim.x)
            y[b * rows + j] *= s;
    }
}

/* xs_rows_scale's grid: blocks of 256 over a row (at most 1024, then threads stride), a block
 * row per Y row up to gridDim.y's limit (then block rows stride) */
enum { XS_SCALE_THREADS = 256 };
struct xs_grid {
    unsigned x, y;
};
static __host__ __device__ inline xs_grid xs_rows_scale_grid(int64_t rows, int64_t n_batch)
{
    const int64_t gx = (rows + XS_SCALE_THREADS - 1) / XS_SCALE_THREADS;
    return xs_grid{(unsigned)(gx < 1024 ? gx : 1024),
                   (unsigned)(n_batch < 65535 ? n_batch : 65535)};
}

#endif
