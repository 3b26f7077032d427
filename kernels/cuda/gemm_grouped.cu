/* kernels/cuda/gemm_grouped.cu: see gemm_grouped.h; the kernel is gemm_grouped.cuh. X goes to
 * F16 by gemm.cu's row-scaled conversion (one launch), then one k_gemm_grouped launch: grid x
 * over GM_BM-row tiles, y over the experts plus one for the out-of-range ids. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_grouped.cuh"
#include "kernels/cuda/gemm_grouped.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_grouped.h"

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

extern "C" size_t sl_cuda_gemm_grouped_work_bytes(int64_t n_x, int64_t cols)
{
    if (n_x < 1 || cols < 1 || n_x > INT32_MAX || (uint64_t)cols > (SIZE_MAX / 8) / (uint64_t)n_x)
        return 0;
    return align256((size_t)n_x * (size_t)cols * 2) + align256((size_t)n_x * sizeof(float));
}

struct gm_launch {
    gm_args a;
    dim3 grid;
    sl_cuda_ctx *c;
    template <uint32_t T> void operator()()
    {
        /* the float types have no kernel (sl_cuda_gemv_grouped_supported refused them) */
        if constexpr (!sl_qt_block<T>::FLOAT)
            sl__cuda_launch(c, k_gemm_grouped<T>, grid, GM_THREADS, 0, a);
    }
};

extern "C" sl_status sl_cuda_gemm_grouped(sl_cuda_ctx *c, uint32_t type,
                                          const void *const *d_wptrs, int32_t n_expert,
                                          const int32_t *d_order, int32_t n_sel, int64_t rows,
                                          int64_t cols, const float *d_x, int32_t x_group,
                                          float *d_y, void *d_work, size_t work_bytes,
                                          sl_error *err)
{
    const char *fn = __func__;
    size_t row_bytes = 0;
    sl_status st = sl__cuda_grouped_check(fn, type, n_expert, n_sel, rows, cols, x_group, GM_BM,
                                          &row_bytes, err);
    if (st) return st;
    const int64_t n_x = ((int64_t)n_sel + x_group - 1) / x_group;
    const size_t need = sl_cuda_gemm_grouped_work_bytes(n_x, cols);
    if (!need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld X rows of %lld columns are too many",
                            fn, (long long)n_x, (long long)cols);
    if (!d_wptrs || !d_order || !d_x || !d_y || !d_work)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn,
                            !d_wptrs ? "d_wptrs" : !d_order ? "d_order" : !d_x ? "d_x"
                                                 : !d_y     ? "d_y"
                                                            : "d_work");
    if (work_bytes < need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: work_bytes = %zu < %zu needed", fn,
                            work_bytes, need);
    if ((uintptr_t)d_work % 16)
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_work is not 16-byte aligned", fn);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    uint16_t *xh = (uint16_t *)d_work;
    float *xscale = (float *)((uint8_t *)d_work + align256((size_t)n_x * (size_t)cols * 2));
    if ((st = sl__cuda_x_f16_scaled(c, d_x, n_x, cols, xh, xscale, err))) return st;
    gm_launch L;
    sl_grouped_args_fill(&L.a, d_wptrs, n_expert, d_order, rows, cols, (int64_t)row_bytes,
                         x_group, d_y);
    L.a.xh = (const __half *)xh;
    L.a.xscale = xscale;
    L.grid = sl_grouped_grid(rows, GM_BM, n_expert);
    L.c = c;
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_gemm_grouped");
    return SL_OK;
}
