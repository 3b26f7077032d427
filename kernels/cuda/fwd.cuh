/* kernels/cuda/fwd.cuh: the bodies of fwd.cu's row kernels (fwd.h: add_rows, expert_bias,
 * kv_store, gated_add, copy2d) and their grid rules, in a header so that
 * tests/kernels_cuda:fwd_host_test runs them on the CPU (host_shim/launch.h) with the grids
 * fwd.cu launches; fwd.cu keeps the __global__ wrappers and the launches. Grids are (dim
 * chunks) x (rows): rows are few (a batch of tokens), dim is thousands, so FWD_THREADS threads
 * stride over dim and blockIdx.y picks the row. */
#ifndef SL_KERNELS_CUDA_FWD_CUH
#define SL_KERNELS_CUDA_FWD_CUH

#include "kernels/cuda/common.cuh"

enum { FWD_THREADS = 256, FWD_MAX_GRID_Y = 65535 };

/* the grid's x for rows of dim floats: a thread per float, at most 1024 blocks (then threads
 * stride) */
static __host__ __device__ inline unsigned fwd_grid_x(int64_t dim)
{
    int64_t gx = (dim + FWD_THREADS - 1) / FWD_THREADS;
    if (gx > 1024) gx = 1024; /* threads stride */
    return (unsigned)(gx ? gx : 1);
}

/* k_copy2d's 1-D grid over total floats: at most 4096 blocks (then threads stride) */
static __host__ __device__ inline unsigned fwd_copy2d_blocks(int64_t total)
{
    int64_t blocks = (total + FWD_THREADS - 1) / FWD_THREADS;
    if (blocks > 4096) blocks = 4096; /* threads stride */
    return (unsigned)blocks;
}

static __device__ __forceinline__ void fw_add_rows(float *y, const float *b, int64_t dim)
{
    float *yr = y + (int64_t)blockIdx.y * dim;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < dim;
         j += (int64_t)gridDim.x * blockDim.x)
        yr[j] += b[j];
}

/* Row i of y (stride floats) is expert ids[i]'s: bias entries from at on, w of them. An id
 * outside [0, n_expert) adds nothing and a width is clamped to [0, stride], as the expert GEMVs
 * treat such ids: a bad id from the router never reads or writes out of bounds. */
static __device__ __forceinline__ void fw_expert_bias(float *y, const float *b,
                                                      const int64_t *ff_at, const int32_t *ids,
                                                      int32_t n_expert, int64_t stride)
{
    const int64_t i = blockIdx.y;
    const int32_t e = ids[i];
    if (e < 0 || e >= n_expert) return;
    const int64_t at = ff_at ? ff_at[e] : (int64_t)e * stride;
    int64_t w = ff_at ? ff_at[e + 1] - at : stride;
    if (w < 0) w = 0;
    if (w > stride) w = stride;
    float *yr = y + i * stride;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < w;
         j += (int64_t)gridDim.x * blockDim.x)
        yr[j] += b[at + j];
}

static __device__ __forceinline__ void fw_kv_store(const float *src, const int32_t *pos,
                                                   int64_t row, bool f16, void *cache)
{
    const int64_t t = blockIdx.y;
    const float *s = src + t * row;
    const int64_t base = (int64_t)pos[t] * row;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < row;
         j += (int64_t)gridDim.x * blockDim.x) {
        if (f16) ((__half *)cache)[base + j] = __float2half_rn(s[j]);
        else ((float *)cache)[base + j] = s[j];
    }
}

static __device__ __forceinline__ void fw_gated_add(float *out, const float *y,
                                                    const float *logit, int64_t dim)
{
    const int64_t t = blockIdx.y;
    const float g = 1.0f / (1.0f + expf(-logit[t]));
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < dim;
         j += (int64_t)gridDim.x * blockDim.x)
        out[t * dim + j] = __fadd_rn(out[t * dim + j], __fmul_rn(g, y[t * dim + j]));
}

static __device__ __forceinline__ void fw_copy2d(float *dst, int64_t ds, const float *src,
                                                 int64_t ss, int64_t width, int64_t total)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width, j = i - r * width;
        dst[r * ds + j] = src[r * ss + j];
    }
}

#endif
