/* kernels/cuda/fwd.cu: see fwd.h. The row kernels' bodies and grid rules are fwd.cuh's (run on
 * the CPU by tests/kernels_cuda:fwd_host_test), the MoE combine's moe_combine.cuh's. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"

#include "kernels/cuda/fwd.cuh"
#include "kernels/cuda/moe_combine.cuh"

extern "C" {
#include "kernels/cuda/fwd.h"
}

static dim3 grid_for(int64_t dim, int64_t rows)
{
    return dim3(fwd_grid_x(dim), (unsigned)rows, 1);
}

static sl_status check_rows(const char *fn, int64_t rows, int64_t dim, sl_error *err)
{
    if (rows < 0 || dim < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_rows %lld / dim %lld: negative", fn,
                            (long long)rows, (long long)dim);
    if (rows > FWD_MAX_GRID_Y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_rows %lld: more than %d", fn,
                            (long long)rows, FWD_MAX_GRID_Y);
    return SL_OK;
}

static __global__ void k_add_rows(float *y, const float *b, int64_t dim)
{
    sl_pdl_enter();
    fw_add_rows(y, b, dim);
}

extern "C" sl_status sl_cuda_add_rows(sl_cuda_ctx *c, float *d_y, const float *d_b,
                                      int64_t n_rows, int64_t dim, sl_error *err)
{
    sl_status st = check_rows(__func__, n_rows, dim, err);
    if (st) return st;
    if (n_rows && dim && (!d_y || !d_b))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!n_rows || !dim) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_add_rows, grid_for(dim, n_rows), FWD_THREADS, 0, d_y, d_b, dim);
    SL_CU_LAUNCH(err, "k_add_rows");
    return SL_OK;
}

/* fwd.cuh's fw_expert_bias: ids outside [0, n_expert) add nothing */
static __global__ void k_expert_bias(float *y, const float *b, const int64_t *ff_at,
                                     const int32_t *ids, int32_t n_expert, int64_t stride)
{
    sl_pdl_enter();
    fw_expert_bias(y, b, ff_at, ids, n_expert, stride);
}

extern "C" sl_status sl_cuda_expert_bias(sl_cuda_ctx *c, float *d_y, const float *d_b,
                                         const int64_t *d_ff_at, int32_t n_expert,
                                         const int32_t *d_ids, int32_t k, int64_t stride,
                                         sl_error *err)
{
    sl_status st = check_rows(__func__, k, stride, err);
    if (st) return st;
    if (n_expert < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert %d", __func__, n_expert);
    if (k && stride && (!d_y || !d_b || !d_ids))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!k || !stride) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_expert_bias, grid_for(stride, k), FWD_THREADS, 0, d_y, d_b, d_ff_at, d_ids,
                    n_expert, stride);
    SL_CU_LAUNCH(err, "k_expert_bias");
    return SL_OK;
}

static __global__ void k_kv_store(const float *src, const int32_t *pos, int64_t row, bool f16,
                                  void *cache)
{
    sl_pdl_enter();
    fw_kv_store(src, pos, row, f16, cache);
}

extern "C" sl_status sl_cuda_kv_store(sl_cuda_ctx *c, const float *d_src, const int32_t *d_pos,
                                      int64_t n, int64_t row, bool f16, void *d_cache,
                                      sl_error *err)
{
    sl_status st = check_rows(__func__, n, row, err);
    if (st) return st;
    if (n && row && (!d_src || !d_pos || !d_cache))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!n || !row) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_kv_store, grid_for(row, n), FWD_THREADS, 0, d_src, d_pos, row, f16,
                    d_cache);
    SL_CU_LAUNCH(err, "k_kv_store");
    return SL_OK;
}

/* the bodies: moe_combine.cuh (k <= MC_MAX_K slots a token) */
static __global__ void k_moe_combine(const float *y, const float *y2, const int32_t *idx,
                                     const float *w, int k, int64_t dim, const float *res,
                                     float *out)
{
    sl_pdl_enter();
    mc_combine(y, y2, idx, w, k, dim, res, out);
}

extern "C" sl_status sl_cuda_moe_combine(sl_cuda_ctx *c, const float *d_y, const float *d_y2,
                                         const int32_t *d_idx, const float *d_w, int64_t n_tok,
                                         int32_t k, int64_t dim, const float *d_res,
                                         float *d_out, sl_error *err)
{
    sl_status st = check_rows(__func__, n_tok, dim, err);
    if (st) return st;
    if (k < 1 || k > MC_MAX_K)
        return sl_error_set(err, SL_ERR_INVALID, "%s: k %d outside [1, %d]", __func__, k,
                            (int)MC_MAX_K);
    if (n_tok && dim && (!d_y || !d_idx || !d_w || !d_out))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!n_tok || !dim) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_moe_combine, grid_for(dim, n_tok), FWD_THREADS, 0, d_y, d_y2, d_idx, d_w,
                    k, dim, d_res, d_out);
    SL_CU_LAUNCH(err, "k_moe_combine");
    return SL_OK;
}

static __global__ void k_moe_mask_ids(const int32_t *idx, const uint8_t *mask, int64_t n_sel,
                                      int32_t n_expert, int32_t *out)
{
    sl_pdl_enter();
    mc_mask_ids(idx, mask, n_sel, n_expert, out);
}

extern "C" sl_status sl_cuda_moe_mask_ids(sl_cuda_ctx *c, const int32_t *d_idx,
                                          const uint8_t *d_mask, int64_t n_sel, int32_t n_expert,
                                          int32_t *d_out, sl_error *err)
{
    if (n_sel < 0 || n_expert < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_sel %lld < 0 or n_expert %d < 1",
                            __func__, (long long)n_sel, n_expert);
    if (n_sel && (!d_idx || !d_mask || !d_out))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!n_sel) return SL_OK;
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    sl__cuda_launch(c, k_moe_mask_ids, grid_for(n_sel, 1), FWD_THREADS, 0, d_idx, d_mask, n_sel,
                    n_expert, d_out);
    SL_CU_LAUNCH(err, "k_moe_mask_ids");
    return SL_OK;
}

static __global__ void k_gated_add(float *out, const float *y, const float *logit, int64_t dim)
{
    sl_pdl_enter();
    fw_gated_add(out, y, logit, dim);
}

extern "C" sl_status sl_cuda_gated_add(sl_cuda_ctx *c, float *d_out, const float *d_y,
                                       const float *d_logit, int64_t n_tok, int64_t dim,
                                       sl_error *err)
{
    sl_status st = check_rows(__func__, n_tok, dim, err);
    if (st) return st;
    if (n_tok && dim && (!d_out || !d_y || !d_logit))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!n_tok || !dim) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    sl__cuda_launch(c, k_gated_add, grid_for(dim, n_tok), FWD_THREADS, 0, d_out, d_y, d_logit, dim);
    SL_CU_LAUNCH(err, "k_gated_add");
    return SL_OK;
}

static __global__ void k_copy2d(float *dst, int64_t ds, const float *src, int64_t ss,
                                int64_t width, int64_t total)
{
    sl_pdl_enter();
    fw_copy2d(dst, ds, src, ss, width, total);
}

extern "C" sl_status sl_cuda_copy2d(sl_cuda_ctx *c, float *d_dst, int64_t dst_stride,
                                    const float *d_src, int64_t src_stride, int64_t rows,
                                    int64_t width, sl_error *err)
{
    if (rows < 0 || width < 0 || dst_stride < width || src_stride < width)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows %lld, width %lld, strides %lld / "
                            "%lld (negative, or a stride below the width)", __func__,
                            (long long)rows, (long long)width, (long long)dst_stride,
                            (long long)src_stride);
    if (rows && width && (!d_dst || !d_src))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL pointer", __func__);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL context", __func__);
    if (!rows || !width) return SL_OK;
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    const int64_t total = rows * width;
    sl__cuda_launch(c, k_copy2d, fwd_copy2d_blocks(total), FWD_THREADS, 0, d_dst, dst_stride, d_src,
                    src_stride, width, total);
    SL_CU_LAUNCH(err, "k_copy2d");
    return SL_OK;
}
