/* kernels/cuda/gemv_multi.cu: several matrices per GEMV launch (gemv_multi.h); the kernels'
 * bodies are gemv_multi.cuh's (run on the CPU by tests/kernels_cuda:gemv_multi_host_test). */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_multi.h"
#include "kernels/cuda/gemv_multi.cuh"

template <int W> static __global__ void __launch_bounds__(GM_THREADS) k_gemv_multi(gm_args a)
{
    gm_l2_prefetch<W>(a);
    sl_pdl_enter();
    gm_block<W>(a);
}

/* k_gemv_multi's rows (the router's logits), then their top-k in the last block */
template <int W>
static __global__ void __launch_bounds__(GM_THREADS)
    k_gemv_router(gm_args a, router_args ra, unsigned *done)
{
    gm_l2_prefetch<W>(a);
    sl_pdl_enter();
    gm_block<W>(a);
    extern __shared__ double rs[]; /* router_smem */
    __shared__ int32_t sel[SL_CUDA_ROUTER_MAX_EXPERT];
    gm_router_last(a, ra, done, rs, sel);
}

template <bool GLU>
static __global__ void __launch_bounds__(QX_THREADS, 2) k_gemv_multi_qx(gm_args a)
{
    qxm_l2_prefetch<GLU>(a);
    sl_pdl_enter();
    extern __shared__ __align__(16) uint8_t qsm[];
    qxm_block<GLU>(a, qsm);
}

static __global__ void __launch_bounds__(QX_THREADS, 2) k_gemv_experts_glu(gme_args a)
{
    sl_pdl_enter();
    extern __shared__ __align__(16) uint8_t qsm[];
    qxe_glu_block(a, qsm);
}

/* One matrix (its heads hs bytes apart; 0: one) where sl_cuda_gemv_q8_act would send one
 * launch of it to k_gemv_qx: the rule of k_gemv_multi_qx, matrix by matrix */
static bool q8_mat(uint32_t type, const void *w, int64_t hs, int64_t cols)
{
    const uintptr_t at = (uintptr_t)w | (uintptr_t)hs;
    const bool aligned = (at & (uintptr_t)(sl_qx_align(type) - 1)) == 0;
    return sl_cuda_gemv_q8_act(type, cols, 1, aligned, false);
}

extern "C" bool sl_cuda_gemv_multi_q8(const sl_cuda_gemv_mat *ms, int count, int64_t cols)
{
    if (!ms || count < 1 || count > SL_CUDA_GEMV_MULTI_MAX) return false;
    for (int i = 0; i < count; i++)
        if (!ms[i].w || !ms[i].y || ms[i].rows < 1 || !q8_mat(ms[i].type, ms[i].w, 0, cols))
            return false;
    return true;
}

extern "C" bool sl_cuda_gemv_heads_q8(uint32_t type, const void *d_w, int64_t head_bytes,
                                      int32_t n_head, int64_t cols)
{
    return d_w && n_head >= 1 && head_bytes >= 0 &&
           q8_mat(type, d_w, n_head > 1 ? head_bytes : 0, cols);
}

/* q8: the launch's matrices take k_gemv_multi_qx (sl_cuda_gemv_multi_q8 / _heads_q8), unless
 * the context keeps F32 activations */
static sl_status gm_run(const char *fn, sl_cuda_ctx *c, const gm_args &a, int64_t n_head,
                        int64_t n, bool q8_types, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    const bool q8 = !c->f32_act && q8_types;
    const int W = gm_split(a.row0[a.count] * n_head * n, a.cols, c->info.sm_count);
    const int64_t gx = q8 ? qxm_grid_x(a) : gm_grid_x(a.row0[a.count], W);
    if (gx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows exceed the grid", fn,
                            (long long)a.row0[a.count]);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    const dim3 grid((unsigned)gx, (unsigned)n_head, (unsigned)n);
    if (q8) {
        if (a.silu_glu)
            sl__cuda_launch(c, k_gemv_multi_qx<true>, grid, QX_THREADS, qx_smem(a.cols), a);
        else
            sl__cuda_launch(c, k_gemv_multi_qx<false>, grid, QX_THREADS, qx_smem(a.cols), a);
        SL_CU_LAUNCH(err, "k_gemv_multi_qx");
        return SL_OK;
    }
    if (W > 1) sl__cuda_launch(c, k_gemv_multi<GM_WARPS>, grid, GM_THREADS, 0, a);
    else sl__cuda_launch(c, k_gemv_multi<1>, grid, GM_THREADS, 0, a);
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

/* sl_cuda_gemv_multi's matrices (and _multi_norm's): count, each one's shape and pointers;
 * fills rb[i], each one's row bytes */
static sl_status gm_mats_check(const char *fn, const sl_cuda_gemv_mat *ms, int count,
                               int64_t cols, int64_t n, int64_t *rb, sl_error *err)
{
    if (!ms || count < 1 || count > SL_CUDA_GEMV_MULTI_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %d matrices (want 1 .. %d)", fn,
                            ms ? count : 0, (int)SL_CUDA_GEMV_MULTI_MAX);
    for (int i = 0; i < count; i++) {
        sl_status st = gm_check(fn, ms[i].type, ms[i].rows, cols, n, &rb[i], err);
        if (st) return st;
        if (!ms[i].w || !ms[i].y)
            return sl_error_set(err, SL_ERR_INVALID, "%s: matrix %d's %s is NULL", fn, i,
                                !ms[i].w ? "w" : "y");
    }
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv_heads(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                        int64_t head_bytes, int32_t n_head, int64_t rows,
                                        int64_t cols, const float *d_x, int64_t x_ts,
                                        int64_t x_hs, int64_t n, float *d_y, int64_t y_ts,
                                        int64_t y_hs, sl_error *err)
{
    int64_t rb = 0;
    sl_status st = gm_check(__func__, type, rows, cols, n, &rb, err);
    if (st) return st;
    if (n_head < 1 || n_head > 65535 || head_bytes < rows * rb)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_head = %d not in [1, 65535] or "
                            "head_bytes = %lld below one matrix", __func__, n_head,
                            (long long)head_bytes);
    if (!d_w || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : "d_y");
    const gm_args a = gm_heads_args(type, d_w, head_bytes, rows, rb, cols, d_x, x_ts, x_hs, d_y,
                                    y_ts, y_hs);
    return gm_run(__func__, c, a, n_head, n,
                  sl_cuda_gemv_heads_q8(type, d_w, head_bytes, n_head, cols), err);
}

extern "C" sl_status sl_cuda_gemv_multi(sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms, int count,
                                        int64_t cols, const float *d_x, int64_t n,
                                        bool silu_glu, sl_error *err)
{
    int64_t rb[SL_CUDA_GEMV_MULTI_MAX];
    sl_status st = gm_mats_check(__func__, ms, count, cols, n, rb, err);
    if (st) return st;
    if (!d_x) return sl_error_set(err, SL_ERR_INVALID, "%s: d_x is NULL", __func__);
    if (silu_glu && (count != 2 || ms[0].rows != ms[1].rows))
        return sl_error_set(err, SL_ERR_INVALID, "%s: silu_glu wants 2 matrices of equal rows "
                            "(gate, up), got %d", __func__, count);
    const gm_args a = gm_multi_args(ms, rb, count, cols, d_x, silu_glu);
    return gm_run(__func__, c, a, 1, n, sl_cuda_gemv_multi_q8(ms, count, cols), err);
}

extern "C" bool sl_cuda_gemv_multi_norm_q8(const sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms,
                                           int count, int64_t cols)
{
    return c && !c->f32_act && sl_cuda_gemv_multi_q8(ms, count, cols);
}

extern "C" sl_status sl_cuda_gemv_multi_norm(sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms,
                                             int count, int64_t cols, const float *d_in,
                                             const float *d_norm_w, float eps, float *d_xn,
                                             int64_t n, sl_error *err)
{
    if (!(eps >= 0.0f) || !isfinite(eps))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0",
                            __func__, (double)eps);
    if (!d_in || !d_xn)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_in ? "d_in" : "d_xn");
    int64_t rb[SL_CUDA_GEMV_MULTI_MAX];
    sl_status st = gm_mats_check(__func__, ms, count, cols, n, rb, err);
    if (st) return st;
    /* the launch's blocks read d_in while others write xn and the y's */
    bool over = sl__floats_overlap(d_xn, n * cols, d_in, n * cols);
    for (int i = 0; i < count; i++)
        over = over || sl__floats_overlap(ms[i].y, n * ms[i].rows, d_in, n * cols) ||
               sl__floats_overlap(ms[i].y, n * ms[i].rows, d_xn, n * cols);
    if (over)
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_in overlaps d_xn or a matrix's y, or "
                            "d_xn a y (the launch's blocks read d_in while others write them)",
                            __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!sl_cuda_gemv_multi_norm_q8(c, ms, count, cols))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: these matrices (or a context keeping "
                            "F32 activations) take no Q8-activation launch, which the norm "
                            "prologue is part of", __func__);
    gm_args a = gm_multi_args(ms, rb, count, cols, d_in, false);
    gm_norm(&a, d_norm_w, eps, d_xn);
    return gm_run(__func__, c, a, 1, n, true, err);
}

extern "C" bool sl_cuda_gemv_router_fused(const sl_cuda_ctx *c, const sl_cuda_gemv_mat *m,
                                          int64_t cols)
{
    /* the F32 body's launch (the router's F32 matrix, or any where the context keeps F32
     * activations): the Q8 body has no epilogue */
    return c && m && sl__cuda_counters(c) &&
           (c->f32_act || !sl_cuda_gemv_multi_q8(m, 1, cols));
}

extern "C" sl_status sl_cuda_gemv_router(sl_cuda_ctx *c, const sl_cuda_gemv_mat *m,
                                         int64_t cols, const float *d_x, int64_t n,
                                         const sl_router_params *p, int32_t *d_idx, float *d_w,
                                         sl_error *err)
{
    router_args ra;
    sl_status st = sl__cuda_router_check(__func__, p, &ra, err);
    if (st) return st;
    int64_t rb = 0;
    if (!m) return sl_error_set(err, SL_ERR_INVALID, "%s: m is NULL", __func__);
    if ((st = gm_check(__func__, m->type, m->rows, cols, n, &rb, err))) return st;
    if (m->rows != ra.E)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows for %d experts", __func__,
                            (long long)m->rows, ra.E);
    if (!m->w || !m->y || !d_x || !d_idx || !d_w)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !m->w ? "m->w" : !m->y ? "m->y" : !d_x ? "d_x" : !d_idx ? "d_idx"
                                                                                : "d_w");
    /* the blocks read x while others write the logits; the last block reads the logits while
     * it writes the picks and weights */
    const int64_t nl = m->rows * n, nk = (int64_t)ra.k * n;
    if (sl__floats_overlap(m->y, nl, d_x, cols * n) || sl__floats_overlap(d_w, nk, m->y, nl) ||
        sl__floats_overlap((const float *)d_idx, nk, m->y, nl) ||
        sl__floats_overlap((const float *)d_idx, nk, d_x, cols * n) ||
        sl__floats_overlap(d_w, nk, d_x, cols * n) ||
        sl__floats_overlap((const float *)d_idx, nk, d_w, nk))
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_x, m->y, d_idx and d_w must not "
                            "overlap", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!sl_cuda_gemv_router_fused(c, m, cols))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: a router of type %u takes the "
                            "Q8-activation launch, which has no top-k epilogue (or the context "
                            "has no counters on its stream: sl_cuda_ctx_set_counters)", __func__,
                            m->type);
    ra.idx = d_idx;
    ra.w = d_w;
    const gm_args a = gm_multi_args(m, &rb, 1, cols, d_x, false);
    const int W = gm_split(a.row0[1] * n, cols, c->info.sm_count);
    const int64_t gx = gm_grid_x(a.row0[1], W);
    if (gx * n > (int64_t)UINT32_MAX) /* sl_last_block counts the blocks in 32 bits */
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld blocks exceed a launch's count",
                            __func__, (long long)(gx * n));
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    const dim3 grid((unsigned)gx, 1, (unsigned)n);
    const size_t smem = router_smem(ra.E, ra.n_group);
    unsigned *done = c->d_done + SL__CUDA_DONE_ROUTER;
    if (W > 1) sl__cuda_launch(c, k_gemv_router<GM_WARPS>, grid, GM_THREADS, smem, a, ra, done);
    else sl__cuda_launch(c, k_gemv_router<1>, grid, GM_THREADS, smem, a, ra, done);
    SL_CU_LAUNCH(err, "k_gemv_router");
    return SL_OK;
}

extern "C" bool sl_cuda_gemv_experts_glu_q8(const sl_cuda_ctx *c, uint32_t type_gate,
                                            uint32_t type_up, int64_t cols)
{
    /* expert matrices: their alignment is taken in-kernel, as sl_cuda_gemv_experts does */
    return c && !c->f32_act && sl_cuda_gemv_q8_act(type_gate, cols, 1, true, false) &&
           sl_cuda_gemv_q8_act(type_up, cols, 1, true, false);
}

extern "C" sl_status sl_cuda_gemv_experts_glu(sl_cuda_ctx *c, uint32_t type_gate,
                                              const void *const *d_gate, uint32_t type_up,
                                              const void *const *d_up, int32_t n_expert,
                                              const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                              int64_t cols, const float *d_x, int32_t x_group,
                                              float *d_y, sl_error *err)
{
    if (rows < 1 || n_expert < 1 || n_sel < 1 || n_sel > 65535 || x_group < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld, n_expert = %d must be >= 1, "
                            "n_sel = %d in [1, 65535], x_group = %d >= 1", __func__,
                            (long long)rows, n_expert, n_sel, x_group);
    if (!d_gate || !d_up || !d_ids || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_gate ? "d_gate" : !d_up ? "d_up" : !d_ids ? "d_ids"
                            : !d_x ? "d_x" : "d_y");
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!sl_cuda_gemv_experts_glu_q8(c, type_gate, type_up, cols))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: gate type %u / up type %u with %lld "
                            "columns have no Q8-activation kernel (or the context keeps F32 "
                            "activations)", __func__, type_gate, type_up, (long long)cols);
    const int64_t rb_g = (int64_t)sl_cuda_gemv_row_bytes(type_gate, cols),
                  rb_u = (int64_t)sl_cuda_gemv_row_bytes(type_up, cols);
    const gme_args a = gme_make(type_gate, d_gate, rb_g, type_up, d_up, rb_u, n_expert, d_ids,
                                n_sel, rows, cols, d_x, x_group, d_y);
    const int64_t gx = gme_grid_x(a);
    if (gx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld rows exceed the grid", __func__,
                            (long long)rows);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    sl__cuda_launch(c, k_gemv_experts_glu, dim3((unsigned)gx, 1, (unsigned)n_sel), QX_THREADS,
                    qx_smem(cols), a);
    SL_CU_LAUNCH(err, "k_gemv_experts_glu");
    return SL_OK;
}
