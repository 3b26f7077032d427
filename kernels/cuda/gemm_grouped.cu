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
    cudaStream_t s;
    template <uint32_t T> void operator()()
    {
        /* the float types have no kernel (sl_cuda_gemv_grouped_supported refused them) */
        if constexpr (!sl_qt_block<T>::FLOAT) k_gemm_grouped<T><<<grid, GM_THREADS, 0, s>>>(a);
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
    if (!sl_cuda_gemv_grouped_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u is not a quantized type "
                            "of the CUDA GEMV", fn, type);
    if (n_expert < 1 || n_expert > SL_CUDA_GROUPED_MAX_EXPERTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d not in [1, %d]", fn,
                            n_expert, (int)SL_CUDA_GROUPED_MAX_EXPERTS);
    if (n_sel < 1 || n_sel > SL_CUDA_GROUPED_MAX_SLOTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_sel = %d not in [1, %d]", fn, n_sel,
                            (int)SL_CUDA_GROUPED_MAX_SLOTS);
    if (rows < 1 || x_group < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s = %lld must be >= 1", fn,
                            rows < 1 ? "rows" : "x_group", rows < 1 ? (long long)rows
                                                                     : (long long)x_group);
    const size_t row_bytes = sl_cuda_gemv_row_bytes(type, cols);
    if (!row_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a positive multiple "
                            "of the type's block size", fn, (long long)cols);
    if ((rows + GM_BM - 1) / GM_BM > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows exceed the grid", fn,
                            (long long)rows);
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
    sl_status st = sl__cuda_x_f16_scaled(c, d_x, n_x, cols, xh, xscale, err);
    if (st) return st;
    gm_launch L;
    L.a.wptrs = d_wptrs;
    L.a.n_expert = n_expert;
    L.a.start = d_order;
    L.a.slots = d_order + n_expert + 2;
    L.a.rows = rows;
    L.a.cols = cols;
    L.a.row_bytes = (int64_t)row_bytes;
    L.a.xh = (const __half *)xh;
    L.a.xscale = xscale;
    L.a.x_group = x_group;
    L.a.y = d_y;
    L.grid = dim3((unsigned)((rows + GM_BM - 1) / GM_BM), (unsigned)n_expert + 1, 1);
    L.s = c->stream;
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_gemm_grouped");
    return SL_OK;
}
