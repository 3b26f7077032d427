/* kernels/cuda/gemv.cu: see gemv.h for the contract and gemv.cuh for the kernels' design. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv.h"

template <uint32_t T, int NB>
static __global__ void __launch_bounds__(GV_THREADS) k_gemv(gv_args a)
{
    sl_pdl_enter();
    extern __shared__ __align__(16) uint8_t smem[];
    gv_block<T, NB>(a, smem);
}

template <uint32_t T>
static __global__ void __launch_bounds__(QX_THREADS, 2) k_gemv_qx(gv_args a)
{
    qx_l2_prefetch(a);
    sl_pdl_enter();
    extern __shared__ __align__(16) uint8_t qsm[];
    qx_block<T>(a, qsm);
    if (a.done && a.c_out) qx_combine_last(a); /* uniform over the grid */
    else if (a.done) qx_norm_last(a);
}

/* k_gemv_qx on an x quantised before the launch (sl_cuda_gemv_q8x): no prologue, no barrier */
template <uint32_t T>
static __global__ void __launch_bounds__(QX_THREADS, 2) k_gemv_qx_pre(gv_args a)
{
    qx_l2_prefetch(a);
    sl_pdl_enter();
    qx_block<T, true>(a, nullptr);
}

/* sl_cuda_quant_q8x: one block */
static __global__ void __launch_bounds__(QX_THREADS) k_quant_q8x(const float *x, int64_t cols,
                                                                 uint8_t *out)
{
    sl_pdl_enter();
    qx_quant_block(x, cols, out);
}

/* ---- host side ------------------------------------------------------------------------------ */

struct gv_launch {
    gv_args a;
    dim3 grid;
    sl_cuda_ctx *c;
    int nb; /* template batch width: 1 or 4 */
    template <uint32_t T> void operator()()
    {
        if (nb == 1)
            sl__cuda_launch(c, k_gemv<T, 1>, grid, GV_THREADS, gv_cfg<T, 1>::BYTES, a);
        else
            sl__cuda_launch(c, k_gemv<T, 4>, grid, GV_THREADS, gv_cfg<T, 4>::BYTES, a);
    }
};

/* k_gemv_qx for the types sl_qx_type lists (the one list; sl_qt_dispatch picks T) */
struct qx_launch {
    gv_args a;
    dim3 grid;
    size_t smem;
    sl_cuda_ctx *c;
    bool pre = false; /* k_gemv_qx_pre (a.xq8), no dynamic shared memory */
    bool launched = false;
    template <uint32_t T> void operator()()
    {
        if constexpr (sl_qx_type(T)) {
            if (pre) sl__cuda_launch(c, k_gemv_qx_pre<T>, grid, QX_THREADS, 0, a);
            else sl__cuda_launch(c, k_gemv_qx<T>, grid, QX_THREADS, smem, a);
            launched = true;
        }
    }
};

/* Raises the dynamic shared memory limit of every instantiation (once per context). */
struct gv_attr {
    cudaError_t rc = cudaSuccess;
    size_t max_bytes = 0;
    template <uint32_t T> void operator()()
    {
        const size_t b1 = gv_cfg<T, 1>::BYTES, b4 = gv_cfg<T, 4>::BYTES;
        if (max_bytes < b4) max_bytes = b4;
        if (rc == cudaSuccess)
            rc = cudaFuncSetAttribute(k_gemv<T, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)b1);
        if (rc == cudaSuccess)
            rc = cudaFuncSetAttribute(k_gemv<T, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)b4);
    }
};

extern "C" bool sl_cuda_gemv_supported(uint32_t type)
{
    int64_t b, s;
    return sl_qt_block_shape(type, &b, &s);
}

extern "C" bool sl_cuda_gemv_q8_act(uint32_t type, int64_t cols, int64_t n_batch, bool aligned,
                                    bool down_part)
{
    const size_t rb = sl_cuda_gemv_row_bytes(type, cols);
    /* rows of 16-byte multiples (whole vectors; Q8_0's last block odd) but where the AL form
     * takes any (sl_qx_any_rows); a Q8_0 down' part's rows need not keep the 16-byte multiple
     * the widest has */
    return sl_qx_type(type) && n_batch == 1 && cols <= QX_MAX_COLS && rb && aligned &&
           (rb % 16 == 0 || sl_qx_any_rows(type)) && !(down_part && type == 8);
}

struct gv_chunk {
    int64_t elems = 0;
    template <uint32_t T> void operator()() { elems = gv_cfg<T, 1>::CE; }
};

extern "C" int64_t sl_cuda_gemv_chunk_elems(uint32_t type)
{
    gv_chunk c;
    sl_qt_dispatch(type, c);
    return c.elems;
}

extern "C" size_t sl_cuda_gemv_row_bytes(uint32_t type, int64_t cols)
{
    int64_t blk, bytes;
    if (!sl_qt_block_shape(type, &blk, &bytes) || cols < 1 || cols % blk) return 0;
    if (cols / blk > (int64_t)(SIZE_MAX / 2) / bytes) return 0;
    return (size_t)(cols / blk * bytes);
}

/* Shared checks of every entry point; fills a->row_bytes. */
static sl_status gv_check(const char *fn, uint32_t type, int64_t rows, int64_t cols,
                          int64_t n_batch, gv_args *a, sl_error *err)
{
    if (!sl_cuda_gemv_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: type code %u is not supported by the CUDA GEMV", fn, type);
    if (rows < 1 || cols < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld, cols = %lld must be >= 1", fn,
                            (long long)rows, (long long)cols);
    const size_t rb = sl_cuda_gemv_row_bytes(type, cols);
    if (!rb)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a multiple of the "
                            "type's block size", fn, (long long)cols);
    if (n_batch < 1 || n_batch > SL_CUDA_GEMV_MAX_BATCH)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_batch = %lld not in [1, %d]", fn,
                            (long long)n_batch, (int)SL_CUDA_GEMV_MAX_BATCH);
    a->row_bytes = (int64_t)rb;
    a->rows = rows;
    a->cols = cols;
    a->n_batch = (int)n_batch;
    a->x_group = 1; /* one X (slot 0) unless an experts launch groups its slots */
    return SL_OK;
}

static sl_status gv_run(const char *fn, sl_cuda_ctx *c, uint32_t type, const gv_args &a,
                        int n_slots, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    const int64_t gx = (a.n_out + GV_ROWS - 1) / GV_ROWS;
    if (gx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld output rows exceed the grid", fn,
                            (long long)a.n_out);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    if (!c->gemv_smem_ready) {
        gv_attr at;
        sl_qt_for_each(at);
        if (at.rc != cudaSuccess)
            return sl__cu_fail(err, at.rc, "cudaFuncSetAttribute(k_gemv)", __FILE__, __LINE__);
        if (at.max_bytes > c->info.smem_per_block_optin)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: the GEMV needs %zu bytes of shared "
                                "memory per block, the device allows %llu", fn, at.max_bytes,
                                (unsigned long long)c->info.smem_per_block_optin);
        c->gemv_smem_ready = true;
    }
    /* x of any alignment is read correctly by the kernel; a dense / rows matrix must have
     * sl_qx_align, expert matrices (a device-side pointer array) are checked in-kernel; x
     * quantised before the launch (a.xq8, sl_cuda_gemv_q8x, which checked the Q8 path) takes
     * k_gemv_qx_pre */
    const bool w_al = a.wptrs || ((uintptr_t)a.w & (uintptr_t)(sl_qx_align(type) - 1)) == 0;
    const bool part = a.ff_at && a.ff_cols;
    if (a.xq8 || (!c->f32_act && sl_cuda_gemv_q8_act(type, a.cols, a.n_batch, w_al, part))) {
        const gv_grid g = gv_grid_of(a, n_slots, true);
        qx_launch L{a, dim3(g.x, g.y, g.z), a.xq8 ? 0 : qx_smem(a.cols), c};
        L.pre = a.xq8 != nullptr;
        sl_qt_dispatch(type, L);
        if (!L.launched) /* sl_cuda_gemv_q8_act admits only sl_qx_type's types */
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u has no Q8-activation "
                                "kernel", fn, type);
        SL_CU_LAUNCH(err, "k_gemv_qx");
        return SL_OK;
    }
    const gv_grid g = gv_grid_of(a, n_slots, false);
    gv_launch L{a, dim3(g.x, g.y, g.z), c, g.nb};
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_gemv");
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                                  int64_t cols, const float *d_x, int64_t n_batch, float *d_y,
                                  sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, n_batch, &a, err);
    if (st) return st;
    if (!d_w || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : "d_y");
    a.w = (const uint8_t *)d_w;
    a.n_out = rows;
    a.x = d_x;
    a.y = d_y;
    a.y_bstride = rows;
    return gv_run(__func__, c, type, a, 1, err);
}

extern "C" size_t sl_cuda_q8x_bytes(int64_t cols)
{
    return cols >= 32 && cols % 32 == 0 && cols <= QX_MAX_COLS ? qx_smem(cols) : 0;
}

/* The Q8_1 x of sl_cuda_quant_q8x / sl_cuda_gemv_q8x (cols wide): 16-byte aligned for the
 * kernels' vector loads, and apart from the float buffer the call writes or reads beside it. */
static sl_status xq_check(const char *fn, const void *d_xq, int64_t cols, const float *d_f,
                          int64_t f_n, const char *f_name, sl_error *err)
{
    if ((uintptr_t)d_xq % 16)
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_xq %p is not 16-byte aligned", fn, d_xq);
    if (sl__floats_overlap(d_f, f_n, (const float *)d_xq,
                           (int64_t)(sl_cuda_q8x_bytes(cols) / sizeof(float))))
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s and d_xq overlap", fn, f_name);
    return SL_OK;
}

extern "C" sl_status sl_cuda_quant_q8x(sl_cuda_ctx *c, const float *d_x, int64_t cols,
                                       void *d_xq, sl_error *err)
{
    const size_t xb = sl_cuda_q8x_bytes(cols);
    if (!xb)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a multiple of 32 in "
                            "[32, %d]", __func__, (long long)cols, (int)QX_MAX_COLS);
    if (!d_x || !d_xq)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_x ? "d_x" : "d_xq");
    sl_status st = xq_check(__func__, d_xq, cols, d_x, cols, "d_x", err);
    if (st) return st;
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_quant_q8x, dim3(1), QX_THREADS, 0, d_x, cols, (uint8_t *)d_xq);
    SL_CU_LAUNCH(err, "k_quant_q8x");
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv_q8x(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                      int64_t rows, int64_t cols, const void *d_xq, float *d_y,
                                      sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, 1, &a, err);
    if (st) return st;
    if (!d_w || !d_xq || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_xq ? "d_xq" : "d_y");
    if ((st = xq_check(__func__, d_xq, cols, d_y, rows, "d_y", err))) return st;
    const bool al = ((uintptr_t)d_w & (uintptr_t)(sl_qx_align(type) - 1)) == 0;
    if (!sl_cuda_gemv_q8_act(type, cols, 1, al, false))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u with %lld columns at this "
                            "alignment has no Q8-activation kernel", __func__, type,
                            (long long)cols);
    a.w = (const uint8_t *)d_w;
    a.n_out = rows;
    a.y = d_y;
    a.y_bstride = rows;
    a.xq8 = (const uint8_t *)d_xq;
    return gv_run(__func__, c, type, a, 1, err);
}

extern "C" bool sl_cuda_gemv_add_norm_q8(const sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                         int64_t cols)
{
    const bool al = ((uintptr_t)d_w & (uintptr_t)(sl_qx_align(type) - 1)) == 0;
    return c && !c->f32_act && sl__cuda_counters(c) && d_w &&
           sl_cuda_gemv_q8_act(type, cols, 1, al, false);
}

extern "C" sl_status sl_cuda_gemv_add_norm(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                           int64_t rows, int64_t cols, const float *d_x,
                                           float *d_y, float *d_res, const float *d_norm_w,
                                           float eps, float *d_xn, sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, 1, &a, err);
    if (st) return st;
    if (!d_w || !d_x || !d_y || !d_res)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : !d_y ? "d_y" : "d_res");
    if (d_xn && (!(eps >= 0.0f) || !isfinite(eps)))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0",
                            __func__, (double)eps);
    /* the blocks read x while others write y and res; the last reads res while writing xn */
    if (sl__floats_overlap(d_res, rows, d_x, cols) ||
        sl__floats_overlap(d_res, rows, d_y, rows) ||
        sl__floats_overlap(d_xn, rows, d_res, rows) ||
        sl__floats_overlap(d_xn, rows, d_x, cols) ||
        sl__floats_overlap(d_xn, rows, d_y, rows) || sl__floats_overlap(d_y, rows, d_x, cols))
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_x, d_y, d_res and d_xn must not "
                            "overlap", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!sl_cuda_gemv_add_norm_q8(c, type, d_w, cols))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u with %lld columns at "
                            "this alignment has no Q8-activation launch (or the context keeps "
                            "F32 activations, or has no counters on its stream: "
                            "sl_cuda_ctx_set_counters), which the epilogue is part of",
                            __func__, type, (long long)cols);
    a.w = (const uint8_t *)d_w;
    a.n_out = rows;
    a.x = d_x;
    a.y = d_y;
    a.y_bstride = rows;
    a.res = d_res;
    if (d_xn) {
        a.nw = d_norm_w;
        a.eps = eps;
        a.xn = d_xn;
        a.done = c->d_done + SL__CUDA_DONE_ADD_NORM;
    }
    return gv_run(__func__, c, type, a, 1, err);
}

extern "C" sl_status sl_cuda_gemv_rows(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                       int64_t rows, int64_t cols, const int32_t *d_idx,
                                       int64_t n_idx, bool scatter, const float *d_x,
                                       int64_t n_batch, float *d_y, sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, n_batch, &a, err);
    if (st) return st;
    if (n_idx < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_idx = %lld < 0", __func__,
                            (long long)n_idx);
    if (n_idx == 0)
        return c ? SL_OK : sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!d_w || !d_x || !d_y || !d_idx)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : !d_y ? "d_y" : "d_idx");
    a.w = (const uint8_t *)d_w;
    a.idx = d_idx;
    a.n_out = n_idx;
    a.x = d_x;
    a.y = d_y;
    a.scatter = scatter;
    a.y_bstride = scatter ? rows : n_idx;
    return gv_run(__func__, c, type, a, 1, err);
}

/* The arguments of sl_cuda_gemv_experts, _expert_parts (ff_at NULL: one width) and
 * _experts_combine into *a, checked. */
static sl_status gv_experts_args(const char *fn, uint32_t type, const void *const *d_wptrs,
                                 int32_t n_expert, const int64_t *ff_at, bool ff_cols,
                                 const int32_t *d_ids, int32_t n_sel, int64_t rows, int64_t cols,
                                 const float *d_x, int32_t x_group, float *d_y, gv_args *pa,
                                 sl_error *err)
{
    gv_args &a = *pa;
    a = gv_args{};
    sl_status st = gv_check(fn, type, rows, cols, 1, &a, err);
    if (st) return st;
    if (n_expert < 1 || n_sel < 1 || n_sel > 65535 || x_group < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d must be >= 1, n_sel = %d "
                            "in [1, 65535] and x_group = %d >= 1", fn, n_expert, n_sel, x_group);
    if (!d_wptrs || !d_ids || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn,
                            !d_wptrs ? "d_wptrs" : !d_ids ? "d_ids" : !d_x ? "d_x" : "d_y");
    a.ff_at = ff_at;
    a.ff_cols = ff_cols;
    a.wptrs = d_wptrs;
    a.ids = d_ids;
    a.n_expert = n_expert;
    a.n_out = rows;
    a.x = d_x;
    a.x_group = x_group < n_sel ? x_group : n_sel; /* >= n_sel: every slot in group 0 */
    a.x_estride = cols;
    a.y = d_y;
    a.y_bstride = rows;
    a.y_estride = rows;
    return SL_OK;
}

static sl_status gv_experts(const char *fn, sl_cuda_ctx *c, uint32_t type,
                            const void *const *d_wptrs, int32_t n_expert, const int64_t *ff_at,
                            bool ff_cols, const int32_t *d_ids, int32_t n_sel, int64_t rows,
                            int64_t cols, const float *d_x, int32_t x_group, float *d_y,
                            sl_error *err)
{
    gv_args a;
    sl_status st = gv_experts_args(fn, type, d_wptrs, n_expert, ff_at, ff_cols, d_ids, n_sel,
                                   rows, cols, d_x, x_group, d_y, &a, err);
    return st ? st : gv_run(fn, c, type, a, n_sel, err);
}

extern "C" bool sl_cuda_gemv_experts_combine_q8(const sl_cuda_ctx *c, uint32_t type,
                                                int64_t rows, int64_t cols, int32_t k)
{
    /* expert matrices: their alignment is taken in-kernel, as sl_cuda_gemv_experts does; a
     * counter per block column (qx_combine_last) */
    return c && !c->f32_act && sl__cuda_counters(c) && k >= 1 && k <= MC_MAX_K && rows >= 1 &&
           (rows + QX_ROWS - 1) / QX_ROWS <= SL__CUDA_COMBINE_COLS &&
           sl_cuda_gemv_q8_act(type, cols, 1, true, false);
}

extern "C" sl_status sl_cuda_gemv_experts_combine(sl_cuda_ctx *c, uint32_t type,
                                                  const void *const *d_wptrs, int32_t n_expert,
                                                  const int32_t *d_ids, int32_t n_sel,
                                                  int64_t rows, int64_t cols, const float *d_x,
                                                  float *d_y, int32_t k, const float *d_w,
                                                  const float *d_res, float *d_out,
                                                  sl_error *err)
{
    gv_args a;
    sl_status st = gv_experts_args(__func__, type, d_wptrs, n_expert, NULL, false, d_ids, n_sel,
                                   rows, cols, d_x, 1, d_y, &a, err);
    if (st) return st;
    if (k < 1 || k > MC_MAX_K || n_sel % k)
        return sl_error_set(err, SL_ERR_INVALID, "%s: k = %d not in [1, %d] or not dividing "
                            "n_sel = %d", __func__, k, (int)MC_MAX_K, n_sel);
    const int64_t n_tok = n_sel / k;
    if (!d_w || !d_out)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : "d_out");
    /* the last block reads y (every slot's rows) while writing out; res may be out */
    if (sl__floats_overlap(d_out, n_tok * rows, d_y, n_sel * rows) ||
        sl__floats_overlap(d_out, n_tok * rows, d_x, n_sel * cols) ||
        sl__floats_overlap(d_y, n_sel * rows, d_x, n_sel * cols) ||
        sl__floats_overlap(d_res, n_tok * rows, d_y, n_sel * rows) ||
        sl__floats_overlap(d_res, n_tok * rows, d_x, n_sel * cols) ||
        (d_res != d_out && sl__floats_overlap(d_res, n_tok * rows, d_out, n_tok * rows)))
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_x, d_y, d_res and d_out must not "
                            "overlap (but d_res may be d_out)", __func__);
    if ((rows + QX_ROWS - 1) / QX_ROWS * n_sel > (int64_t)UINT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows x %d slots exceed a launch's "
                            "block count", __func__, (long long)rows, n_sel);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!sl_cuda_gemv_experts_combine_q8(c, type, rows, cols, k))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u with %lld columns has no "
                            "Q8-activation launch (or the context keeps F32 activations, or has "
                            "no counters on its stream: sl_cuda_ctx_set_counters, or %lld rows "
                            "need over %d of them), which the combine is part of", __func__,
                            type, (long long)cols, (long long)rows, (int)SL__CUDA_COMBINE_COLS);
    a.c_idx = d_ids;
    a.c_w = d_w;
    a.c_k = k;
    a.c_res = d_res;
    a.c_out = d_out;
    a.done = c->d_done + SL__CUDA_DONE_COMBINE;
    return gv_run(__func__, c, type, a, n_sel, err);
}

extern "C" sl_status sl_cuda_gemv_experts(sl_cuda_ctx *c, uint32_t type,
                                          const void *const *d_wptrs, int32_t n_expert,
                                          const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                          int64_t cols, const float *d_x, int32_t x_group,
                                          float *d_y, sl_error *err)
{
    return gv_experts(__func__, c, type, d_wptrs, n_expert, NULL, false, d_ids, n_sel, rows,
                      cols, d_x, x_group, d_y, err);
}

extern "C" sl_status sl_cuda_gemv_expert_parts(sl_cuda_ctx *c, uint32_t type,
                                               const void *const *d_wptrs, int32_t n_expert,
                                               const int64_t *d_ff_at, bool down,
                                               const int32_t *d_ids, int32_t n_sel,
                                               int64_t rows, int64_t cols, const float *d_x,
                                               float *d_y, sl_error *err)
{
    if (!d_ff_at) return sl_error_set(err, SL_ERR_INVALID, "%s: d_ff_at is NULL", __func__);
    return gv_experts(__func__, c, type, d_wptrs, n_expert, d_ff_at, down, d_ids, n_sel, rows,
                      cols, d_x, down ? 1 : n_sel, d_y, err);
}
