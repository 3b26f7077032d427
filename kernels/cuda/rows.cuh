/* kernels/cuda/rows.cuh: the bodies of ops.cu's row and element kernels (sl_cuda_rms_norm,
 * sl_cuda_add_rms_norm, sl_cuda_softmax: one block a row; the element-wise ops: a grid-stride
 * loop), in a header so that tests/kernels_cuda:rows_host_test runs them on the CPU
 * (host_shim/launch.h) against kernels/ref. ops.cu's __global__ wrappers declare the shared
 * memory and call these; its launch code takes the grids from the helpers here, which the
 * test calls too. */
#ifndef SL_KERNELS_CUDA_ROWS_CUH
#define SL_KERNELS_CUDA_ROWS_CUH

#include "kernels/cuda/common.cuh"

enum { ROW_THREADS = 256, EW_THREADS = 256 };

/* blocks of EW_THREADS covering n items, one each */
static __host__ __device__ inline int64_t ew_blocks(int64_t n)
{
    return (n + EW_THREADS - 1) / EW_THREADS;
}

/* the element-wise grid: one item a thread, at most 65535 * 8 blocks (the loop strides past) */
static __host__ __device__ inline unsigned ew_grid(int64_t n)
{
    const int64_t b = ew_blocks(n);
    return (unsigned)(b < 65535 * 8 ? b : 65535 * 8);
}

/* ---- rms_norm: block blockIdx.x is row blockIdx.x; red: 32 floats of shared memory ------- */

static __device__ __forceinline__ void rms_norm_body(const float *x, const float *w, float *y,
                                                     int64_t n, float eps, bool one_plus_w,
                                                     float *red)
{
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    const float r = sl_rms_scale(xr, n, eps, red); /* ROW_THREADS threads */
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS) {
        float g = 1.0f;
        if (w) g = one_plus_w ? 1.0f + w[i] : w[i];
        yr[i] = xr[i] * r * g;
    }
}

/* x = x + t (rounded as the element-wise add), then y = rms_norm(x) w: one block per row. */
static __device__ __forceinline__ void add_rms_norm_body(float *x, const float *t, const float *w,
                                                         float *y, int64_t n, float eps,
                                                         float *red)
{
    float *xr = x + (int64_t)blockIdx.x * n;
    const float *tr = t + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS) xr[i] = __fadd_rn(xr[i], tr[i]);
    /* each thread reads back its own sums: sl_rms_scale strides as the loop above */
    const float r = sl_rms_scale(xr, n, eps, red);
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS) yr[i] = xr[i] * r * (w ? w[i] : 1.0f);
}

/* ---- softmax: in place, one block a row ------------------------------------------------- */

static __device__ __forceinline__ void softmax_body(float *x, int64_t n, float scale,
                                                    const float *mask, int64_t mask_stride,
                                                    float *red)
{
    float *xr = x + (int64_t)blockIdx.x * n;
    const float *mr = mask ? mask + (int64_t)blockIdx.x * mask_stride : NULL;
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS)
        mx = fmaxf(mx, xr[i] * scale + (mr ? mr[i] : 0.0f));
    mx = sl_block_max(mx, red);
    if (mx == -INFINITY) { /* fully masked row: zeros, as the reference */
        for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS) xr[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS)
        sum += expf(xr[i] * scale + (mr ? mr[i] : 0.0f) - mx);
    sum = sl_block_sum(sum, red);
    const float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < n; i += ROW_THREADS)
        xr[i] = expf(xr[i] * scale + (mr ? mr[i] : 0.0f) - mx) * inv;
}

/* ---- element-wise ------------------------------------------------------------------------ */

/* the GLUs first (EW_GLU_LAST: names their operands gate / up / out) */
enum ew_op { EW_SWIGLU, EW_GEGLU_TANH, EW_GEGLU_ERF, EW_SWIGLU_OAI, EW_ADD, EW_MUL, EW_SCALE };
enum { EW_GLU_LAST = EW_SWIGLU_OAI };

static __device__ __forceinline__ float gelu_f(float x, bool erf_kind)
{
    if (erf_kind) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
}

/* y = OP(a, b) over n items, striding by the grid (ew_grid) */
template <int OP>
static __device__ __forceinline__ void ew_body(const float *a, const float *b, float *y,
                                               int64_t n, float s, float s2)
{
    for (int64_t i = (int64_t)blockIdx.x * EW_THREADS + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * EW_THREADS) {
        const float va = a[i];
        float r;
        if (OP == EW_SWIGLU) r = sl_swiglu1(va, b[i]);
        else if (OP == EW_GEGLU_TANH) r = gelu_f(va, false) * b[i];
        else if (OP == EW_GEGLU_ERF) r = gelu_f(va, true) * b[i];
        else if (OP == EW_SWIGLU_OAI) { /* s: alpha, s2: limit (sl_ref_swiglu_oai) */
            const float g = fminf(va, s2), u = fmaxf(fminf(b[i], s2), -s2);
            r = g / (1.0f + expf(-s * g)) * (u + 1.0f);
        }
        else if (OP == EW_ADD) r = va + b[i];
        else if (OP == EW_MUL) r = va * b[i];
        else r = va * s;
        y[i] = r;
    }
}

#endif
