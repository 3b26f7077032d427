/* kernels/cuda/gemm.cu: see gemm.h. Dequantise W and convert X (dequant.cu kernels, same
 * stream), then one cublasGemmEx. */
#include "kernels/cuda/blas.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm.h"

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

extern "C" size_t sl_cuda_gemm_work_bytes(int64_t rows, int64_t cols, int64_t n_batch)
{
    if (rows < 1 || cols < 1 || n_batch < 1) return 0;
    if ((uint64_t)rows > (SIZE_MAX / 4) / (uint64_t)cols ||
        (uint64_t)n_batch > (SIZE_MAX / 4) / (uint64_t)cols)
        return 0;
    return align256((size_t)rows * (size_t)cols * 2) +
           align256((size_t)n_batch * (size_t)cols * 2) + align256((size_t)n_batch * sizeof(float));
}

#include "kernels/cuda/x_f16.cuh"

/* the bodies: x_f16.cuh */
static __global__ void k_x_f16_scaled(const float *x, int64_t cols, uint16_t *xh, float *scale)
{
    sl_pdl_enter();
    __shared__ float red[XS_THREADS / 32];
    xs_row(x, cols, xh, scale, red);
}

static __global__ void k_rows_scale(float *y, int64_t rows, int64_t n_batch, const float *scale)
{
    sl_pdl_enter();
    xs_rows_scale(y, rows, n_batch, scale);
}

extern "C" sl_status sl__cuda_x_f16_scaled(sl_cuda_ctx *c, const float *d_x, int64_t n,
                                           int64_t cols, uint16_t *d_xh, float *d_scale,
                                           sl_error *err)
{
    if (n < 1 || n > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld not in [1, 2^31)", __func__,
                            (long long)n);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    sl__cuda_launch(c, k_x_f16_scaled, (unsigned)n, XS_THREADS, 0, d_x, cols, d_xh, d_scale);
    SL_CU_LAUNCH(err, "k_x_f16_scaled");
    return SL_OK;
}

static sl_status blas_fail(sl_error *err, const sl__cublas_api *b, cublasStatus_t s,
                           const char *call, int line)
{
    return sl_error_set(err, SL_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, line, call,
                        b->status_string(s));
}

/* c->blas, created on the context's first GEMM (this is where cuBLAS gets loaded, blas.h). */
static sl_status blas_handle(sl_cuda_ctx *c, const sl__cublas_api **out, sl_error *err)
{
    const sl__cublas_api *b = NULL;
    sl_status st = sl__cublas(&b, err);
    if (st) return st;
    *out = b;
    if (c->blas) return SL_OK;
    if ((st = sl__cuda_ctx_enter(c, err))) return st;
    cublasHandle_t h;
    cublasStatus_t bs = b->create(&h);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_fail(err, b, bs, "cublasCreate", __LINE__);
    bs = b->set_stream(h, c->stream);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        b->destroy(h);
        return blas_fail(err, b, bs, "cublasSetStream", __LINE__);
    }
    c->blas = h;
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemm(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                                  int64_t cols, const float *d_x, int64_t n_batch, float *d_y,
                                  sl_cuda_gemm_prec prec, void *d_work, size_t work_bytes,
                                  sl_error *err)
{
    const char *fn = __func__;
    if (!sl_cuda_dequant_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: type code %u is not supported by the "
                            "CUDA kernels", fn, type);
    if (prec != SL_CUDA_GEMM_F16 && prec != SL_CUDA_GEMM_BF16)
        return sl_error_set(err, SL_ERR_INVALID, "%s: prec = %d is not F16 (0) or BF16 (1)", fn,
                            (int)prec);
    const size_t need = sl_cuda_gemm_work_bytes(rows, cols, n_batch);
    if (!need || rows > INT32_MAX || cols > INT32_MAX || n_batch > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld, cols = %lld, n_batch = %lld "
                            "must be in [1, 2^31)", fn, (long long)rows, (long long)cols,
                            (long long)n_batch);
    if (!d_w || !d_x || !d_y || !d_work)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn,
                            !d_w ? "d_w" : !d_x ? "d_x" : !d_y ? "d_y" : "d_work");
    if (work_bytes < need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: work_bytes = %zu < %zu needed", fn,
                            work_bytes, need);
    if ((uintptr_t)d_work % 256)
        return sl_error_set(err, SL_ERR_INVALID, "%s: d_work is not 256-byte aligned", fn);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);

    /* before anything is enqueued: a missing cuBLAS fails the call with no work in flight */
    const sl__cublas_api *blas = NULL;
    sl_status st = blas_handle(c, &blas, err);
    if (st) return st;

    uint16_t *wh = (uint16_t *)d_work;
    uint16_t *xh = (uint16_t *)((uint8_t *)d_work + align256((size_t)rows * (size_t)cols * 2));
    float *xscale = (float *)((uint8_t *)xh + align256((size_t)n_batch * (size_t)cols * 2));
    const int64_t nw = rows * cols, nx = n_batch * cols;
    st = prec == SL_CUDA_GEMM_F16 ? sl_cuda_dequant_f16(c, type, d_w, nw, wh, err)
                                  : sl_cuda_dequant_bf16(c, type, d_w, nw, wh, err);
    if (st) return st;
    if (prec == SL_CUDA_GEMM_F16) {
        /* activations are not bounded like weights (outliers past 65504 in down-projection
         * inputs): per-row power-of-two scales keep them in F16's range */
        if ((st = sl__cuda_x_f16_scaled(c, d_x, n_batch, cols, xh, xscale, err))) return st;
    } else if ((st = sl_cuda_dequant_bf16(c, 0, d_x, nx, xh, err))) {
        return st;
    }

    const cudaDataType_t dt = prec == SL_CUDA_GEMM_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t bs =
        blas->gemm_ex(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n_batch, (int)cols,
                      &alpha, wh, dt, (int)cols, xh, dt, (int)cols, &beta, d_y, CUDA_R_32F,
                      (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS) return blas_fail(err, blas, bs, "cublasGemmEx", __LINE__);
    if (prec == SL_CUDA_GEMM_F16) {
        const xs_grid g = xs_rows_scale_grid(rows, n_batch);
        sl__cuda_launch(c, k_rows_scale, dim3(g.x, g.y), XS_SCALE_THREADS, 0, d_y, rows, n_batch,
                        xscale);
        SL_CU_LAUNCH(err, "k_rows_scale");
    }
    return SL_OK;
}
