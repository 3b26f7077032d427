/* kernels/cuda/gemv_multi.cu: several matrices per GEMV launch (gemv_multi.h). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_multi.h"

enum { GM_WARPS = 4 };

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

/* grid: x = global row blocks of GM_WARPS rows, y = head, z = token; one warp per row */
static __global__ void __launch_bounds__(32 * GM_WARPS) k_gemv_multi(gm_args a)
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

static sl_status gm_run(const char *fn, sl_cuda_ctx *c, const gm_args &a, int64_t n_head,
                        int64_t n, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    const int64_t gx = (a.row0[a.count] + GM_WARPS - 1) / GM_WARPS;
    if (gx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows exceed the grid", fn,
                            (long long)a.row0[a.count]);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    k_gemv_multi<<<dim3((unsigned)gx, (unsigned)n_head, (unsigned)n), 32 * GM_WARPS, 0,
                   c->stream>>>(a);
    SL_CU_LAUNCH(err, "k_gemv_multi");
    return SL_OK;
}

/* type, shape and batch checks shared by both entry points; fills *row_bytes */
static sl_status gm_check(const char *fn, uint32_t type, int64_t rows, int64_t cols, int64_t n,
                          int64_t *row_bytes, sl_error *err)
{
    if (!sl_cuda_gemv_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: type code %u is not supported by the CUDA GEMV", fn, type);
    if (rows < 1 || cols < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld, cols = %lld must be >= 1", fn,
                            (long long)rows, (long long)cols);
    *row_bytes = (int64_t)sl_cuda_gemv_row_bytes(type, cols);
    if (!*row_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a multiple of the "
                            "type's block size", fn, (long long)cols);
    if (n < 1 || n > SL_CUDA_GEMV_MULTI_MAX_N)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld not in [1, %d]", fn, (long long)n,
                            (int)SL_CUDA_GEMV_MULTI_MAX_N);
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv_heads(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                        int64_t head_bytes, int32_t n_head, int64_t rows,
                                        int64_t cols, const float *d_x, int64_t x_ts,
                                        int64_t x_hs, int64_t n, float *d_y, int64_t y_ts,
                                        int64_t y_hs, sl_error *err)
{
    gm_args a = {};
    sl_status st = gm_check(__func__, type, rows, cols, n, &a.m[0].row_bytes, err);
    if (st) return st;
    if (n_head < 1 || n_head > 65535 || head_bytes < rows * a.m[0].row_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_head = %d not in [1, 65535] or "
                            "head_bytes = %lld below one matrix", __func__, n_head,
                            (long long)head_bytes);
    if (!d_w || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : "d_y");
    a.m[0] = gm_mat{(const uint8_t *)d_w, type, rows, a.m[0].row_bytes, head_bytes, d_x, x_ts,
                    x_hs, NULL, d_y, y_ts, y_hs};
    a.count = 1;
    a.row0[1] = rows;
    a.cols = cols;
    return gm_run(__func__, c, a, n_head, n, err);
}

extern "C" sl_status sl_cuda_gemv_multi(sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms, int count,
                                        int64_t cols, const float *d_x, int64_t n,
                                        bool silu_glu, sl_error *err)
{
    if (!ms || count < 1 || count > SL_CUDA_GEMV_MULTI_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %d matrices (want 1 .. %d)", __func__,
                            ms ? count : 0, (int)SL_CUDA_GEMV_MULTI_MAX);
    if (!d_x) return sl_error_set(err, SL_ERR_INVALID, "%s: d_x is NULL", __func__);
    gm_args a = {};
    for (int i = 0; i < count; i++) {
        int64_t rb = 0;
        sl_status st = gm_check(__func__, ms[i].type, ms[i].rows, cols, n, &rb, err);
        if (st) return st;
        if (!ms[i].w || !ms[i].y)
            return sl_error_set(err, SL_ERR_INVALID, "%s: matrix %d's %s is NULL", __func__, i,
                                !ms[i].w ? "w" : "y");
        a.m[i] = gm_mat{(const uint8_t *)ms[i].w, ms[i].type, ms[i].rows, rb, 0, d_x, cols, 0,
                        ms[i].bias, ms[i].y, ms[i].rows, 0};
        a.row0[i + 1] = a.row0[i] + ms[i].rows;
    }
    if (silu_glu && (count != 2 || ms[0].rows != ms[1].rows))
        return sl_error_set(err, SL_ERR_INVALID, "%s: silu_glu wants 2 matrices of equal rows "
                            "(gate, up), got %d", __func__, count);
    if (silu_glu) a.row0[2] = a.row0[1]; /* the warps run over gate's rows only */
    a.silu_glu = silu_glu;
    a.count = count;
    a.cols = cols;
    return gm_run(__func__, c, a, 1, n, err);
}
