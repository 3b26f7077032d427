/* kernels/cuda/gemv_grouped.cu: see gemv_grouped.h; the launches of gemv_grouped.cuh's
 * kernels (why they are shaped so: there). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_grouped.cuh"
#include "kernels/cuda/gemv_grouped.h"
#include "kernels/cuda/grouped_args.cuh"

/* ---- host side ------------------------------------------------------------------------------ */

struct gg_launch {
    gg_args a;
    dim3 grid;
    sl_cuda_ctx *c;
    template <uint32_t T> void operator()()
    {
        /* the float types have no kernel (sl_cuda_gemv_grouped_supported refused them) */
        if constexpr (!sl_qt_block<T>::FLOAT)
            sl__cuda_launch(c, k_gemv_grouped<T>, grid, GG_THREADS, 0, a);
    }
};

extern "C" bool sl_cuda_gemv_grouped_supported(uint32_t type)
{
    return sl_cuda_gemv_supported(type) && !sl_qt_is_float(type);
}

static bool counts_ok(int32_t n_expert, int32_t n_sel)
{
    return n_expert >= 1 && n_expert <= SL_CUDA_GROUPED_MAX_EXPERTS && n_sel >= 1 &&
           n_sel <= SL_CUDA_GROUPED_MAX_SLOTS;
}

extern "C" size_t sl_cuda_expert_order_bytes(int32_t n_expert, int32_t n_sel)
{
    if (!counts_ok(n_expert, n_sel)) return 0;
    return ((size_t)n_expert + 2 + (size_t)n_sel) * sizeof(int32_t);
}

static sl_status counts_check(const char *fn, int32_t n_expert, int32_t n_sel, sl_error *err)
{
    if (counts_ok(n_expert, n_sel)) return SL_OK;
    if (n_expert < 1 || n_expert > SL_CUDA_GROUPED_MAX_EXPERTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d not in [1, %d]", fn,
                            n_expert, (int)SL_CUDA_GROUPED_MAX_EXPERTS);
    return sl_error_set(err, SL_ERR_INVALID, "%s: n_sel = %d not in [1, %d]", fn, n_sel,
                        (int)SL_CUDA_GROUPED_MAX_SLOTS);
}

extern "C" sl_status sl_cuda_expert_order(sl_cuda_ctx *c, const int32_t *d_ids, int32_t n_sel,
                                          int32_t n_expert, int32_t *d_order, sl_error *err)
{
    sl_status st = counts_check(__func__, n_expert, n_sel, err);
    if (st) return st;
    if (!d_ids || !d_order)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_ids ? "d_ids" : "d_order");
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_expert_order, 1, GO_THREADS, 0, d_ids, n_sel, n_expert, d_order);
    SL_CU_LAUNCH(err, "k_expert_order");
    return SL_OK;
}

extern "C" sl_status sl__cuda_grouped_check(const char *fn, uint32_t type, int32_t n_expert,
                                           int32_t n_sel, int64_t rows, int64_t cols,
                                           int32_t x_group, int64_t tile_rows,
                                           size_t *row_bytes, sl_error *err)
{
    if (!sl_cuda_gemv_grouped_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u is not a quantized type "
                            "of the CUDA GEMV", fn, type);
    sl_status st = counts_check(fn, n_expert, n_sel, err);
    if (st) return st;
    if (rows < 1 || x_group < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s = %lld must be >= 1", fn,
                            rows < 1 ? "rows" : "x_group", rows < 1 ? (long long)rows
                                                                     : (long long)x_group);
    *row_bytes = sl_cuda_gemv_row_bytes(type, cols);
    if (!*row_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a positive multiple "
                            "of the type's block size", fn, (long long)cols);
    if ((rows + tile_rows - 1) / tile_rows > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows exceed the grid", fn,
                            (long long)rows);
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv_grouped(sl_cuda_ctx *c, uint32_t type,
                                          const void *const *d_wptrs, int32_t n_expert,
                                          const int32_t *d_order, int32_t n_sel, int64_t rows,
                                          int64_t cols, const float *d_x, int32_t x_group,
                                          float *d_y, sl_error *err)
{
    const char *fn = __func__;
    size_t row_bytes = 0;
    sl_status st = sl__cuda_grouped_check(fn, type, n_expert, n_sel, rows, cols, x_group,
                                          GG_ROWS, &row_bytes, err);
    if (st) return st;
    if (!d_wptrs || !d_order || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn,
                            !d_wptrs ? "d_wptrs" : !d_order ? "d_order" : !d_x ? "d_x" : "d_y");
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    gg_launch L;
    sl_grouped_args_fill(&L.a, d_wptrs, n_expert, d_order, rows, cols, (int64_t)row_bytes,
                         x_group, d_y);
    L.a.x = d_x;
    L.grid = sl_grouped_grid(rows, GG_ROWS, n_expert);
    L.c = c;
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_gemv_grouped");
    return SL_OK;
}
