/* kernels/cuda/gemv_multi.cuh: the body of gemv_multi.cu's k_gemv_multi (gemv_multi.h: several
 * matrices in one GEMV launch, per head or of one input), in a header so that
 * tests/kernels_cuda:gemv_multi_host_test runs it on the CPU (host_shim/launch.h: every thread
 * of a block a host thread) against a float64 reference; gemv_multi.cu keeps the __global__
 * wrapper and the launches. No shared memory: one warp per output row, lanes over the row's
 * units, then sl_warp_sum. */
#ifndef SL_KERNELS_CUDA_GEMV_MULTI_CUH
#define SL_KERNELS_CUDA_GEMV_MULTI_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv_multi.h"

enum { GM_WARPS = 4, GM_THREADS = 32 * GM_WARPS };

/* the grid's x: blocks of GM_WARPS rows over all rows of a launch (gm_args.row0[count]) */
static __host__ __device__ inline int64_t gm_grid_x(int64_t rows)
{
    return (rows + GM_WARPS - 1) / GM_WARPS;
}

/* One matrix of a launch: row r of head h is at w + h * w_hs + r * row_bytes; its x and y of
 * token t, head h at x + t * x_ts + h * x_hs, y + t * y_ts + h * y_hs. */
struct gm_mat {
    const uint8_t *w;
    uint32_t type;
    int64_t rows, row_bytes, w_hs;
    const float *x;
    int64_t x_ts, x_hs;
    const float *bias; /* [rows] or NULL */
    float *y;
    int64_t y_ts, y_hs;
};

struct gm_args {
    gm_mat m[SL_CUDA_GEMV_MULTI_MAX];
    int64_t row0[SL_CUDA_GEMV_MULTI_MAX + 1]; /* first global row of each matrix; [count] all */
    int count;
    int64_t cols;
    bool silu_glu; /* count 2: a warp computes gate and up row r; y0 = silu(gate) * up */
};

/* ---- the launch's arguments (host: gemv_multi.cu after its checks, and the host test) ---- */

/* sl_cuda_gemv_heads': one matrix whose head h is at w + h * head_bytes, per-head x and y */
static __host__ inline gm_args gm_heads_args(uint32_t type, const void *w, int64_t head_bytes,
                                             int64_t rows, int64_t row_bytes, int64_t cols,
                                             const float *x, int64_t x_ts, int64_t x_hs,
                                             float *y, int64_t y_ts, int64_t y_hs)
{
    gm_args a = {};
    a.m[0] = gm_mat{(const uint8_t *)w, type, rows, row_bytes, head_bytes, x, x_ts, x_hs, NULL,
                    y, y_ts, y_hs};
    a.count = 1;
    a.row0[1] = rows;
    a.cols = cols;
    return a;
}

/* sl_cuda_gemv_multi's: matrix i (row_bytes rb[i]) on x [n][cols] into its y [n][rows_i] */
static __host__ inline gm_args gm_multi_args(const sl_cuda_gemv_mat *ms, const int64_t *rb,
                                             int count, int64_t cols, const float *x,
                                             bool silu_glu)
{
    gm_args a = {};
    for (int i = 0; i < count; i++) {
        a.m[i] = gm_mat{(const uint8_t *)ms[i].w, ms[i].type, ms[i].rows, rb[i], 0, x, cols, 0,
                        ms[i].bias, ms[i].y, ms[i].rows, 0};
        a.row0[i + 1] = a.row0[i] + ms[i].rows;
    }
    if (silu_glu) a.row0[2] = a.row0[1]; /* the warps run over gate's rows only */
    a.silu_glu = silu_glu;
    a.count = count;
    a.cols = cols;
    return a;
}

/* float types: element by element (any cols) */
template <uint32_t T> static __device__ float gm_dot_f(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane)
{
    float s = 0.0f;
    for (int64_t i = lane; i < cols; i += 32) s = fmaf(sl_qt<T>::elem(row, i), x[i], s);
    return s;
}

/* block types: unit by unit, dequantised exactly (any alignment) */
template <uint32_t T> static __device__ float gm_dot_q(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane)
{
    typedef sl_qt<T> Q;
    float s = 0.0f, v[Q::UNIT];
    for (int64_t u = lane; u < cols / Q::UNIT; u += 32) {
        Q::deq(row + (u / Q::SUBS) * Q::BB, (int)(u % Q::SUBS), v);
        const float *xu = x + u * Q::UNIT;
#pragma unroll
        for (int i = 0; i < Q::UNIT; i++) s = fmaf(v[i], xu[i], s);
    }
    return s;
}

/* this lane's share of the row's dot (type is uniform over the warp) */
template <uint32_t T> static __device__ float gm_dot_t(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane)
{
    if constexpr (sl_qt_block<T>::FLOAT) return gm_dot_f<T>(row, x, cols, lane);
    else return gm_dot_q<T>(row, x, cols, lane);
}

static __device__ float gm_dot(uint32_t type, const uint8_t *row, const float *x, int64_t cols,
                               int lane)
{
#define GM_CASE_(t) case t: return gm_dot_t<t>(row, x, cols, lane);
    switch (type) {
        SL_QT_TYPES(GM_CASE_)
    default: return 0.0f; /* unreachable: the host checks the type (sl_qt_block_shape) */
    }
#undef GM_CASE_
}

/* k_gemv_multi's body: grid x = global row blocks of GM_WARPS rows (gm_grid_x), y = head,
 * z = token; GM_THREADS threads, one warp per row */
static __device__ __forceinline__ void gm_block(gm_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t g = (int64_t)blockIdx.x * GM_WARPS + (threadIdx.x >> 5);
    if (g >= a.row0[a.count]) return; /* whole warps only: the reduction stays full */
    int i = 0;
    while (g >= a.row0[i + 1]) i++;
    const int64_t r = g - a.row0[i], h = blockIdx.y, t = blockIdx.z;
    float v[2];
    const int nm = a.silu_glu ? 2 : 1;
    for (int j = 0; j < nm; j++) {
        const gm_mat &m = a.m[i + j];
        const float *x = m.x + t * m.x_ts + h * m.x_hs;
        v[j] = sl_warp_sum(gm_dot(m.type, m.w + h * m.w_hs + r * m.row_bytes, x, a.cols, lane));
        if (m.bias) v[j] += m.bias[r];
    }
    if (lane) return;
    const gm_mat &m = a.m[i];
    if (!a.silu_glu) {
        m.y[t * m.y_ts + h * m.y_hs + r] = v[0];
        return;
    }
    const gm_mat &mu = a.m[1];
    mu.y[t * mu.y_ts + r] = v[1];
    m.y[t * m.y_ts + r] = v[0] / (1.0f + expf(-v[0])) * v[1];
}

#endif
