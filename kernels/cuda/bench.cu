/* kernels/cuda/bench.cu: see bench.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/bench.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_multi.h"

static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Random bytes; scale fields of every block set to a small finite value. */
static void fill_host(uint8_t *p, size_t n, uint32_t type, size_t row_bytes, int64_t cols)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (uint8_t)s;
    }
    const uint16_t h = 0x211f; /* ~0.01 in binary16 */
    const size_t bb = row_bytes / (size_t)(type == 12 || type == 13 || type == 14 ? cols / 256
                                          : type == 0 || type == 1 || type == 30 ? cols : cols / 32);
    for (size_t o = 0; o + bb <= n; o += bb) {
        uint8_t *q = p + o;
        switch (type) {
        case 0: { const float f = 0.5f; memcpy(q, &f, 4); break; }
        case 1: case 30: { const uint16_t v = type == 1 ? 0x3800 : 0x3f00; memcpy(q, &v, 2); break; }
        case 14: memcpy(q + 208, &h, 2); break;
        case 39: q[0] = 120; break;
        default: memcpy(q, &h, 2); memcpy(q + 2, &h, 2); break;
        }
    }
}

struct bench_res {
    sl_cuda_ctx *ctx = nullptr;
    cudaStream_t s = nullptr;
    cudaEvent_t ev[2] = {nullptr, nullptr};
    void *a = nullptr, *b = nullptr;
    void **w = nullptr;
    int n_w = 0;
    float *x = nullptr, *y = nullptr;
    void *xq = nullptr; /* x quantised once (sl_cuda_quant_q8x): the q8-pre rows */
    cudaEvent_t *tev = nullptr;
    int n_tev = 0;
    uint8_t *h = nullptr;
    ~bench_res()
    {
        if (s) cudaStreamSynchronize(s);
        cudaFree(a);
        cudaFree(b);
        for (int i = 0; i < n_w; i++) cudaFree(w ? w[i] : nullptr);
        free(w);
        cudaFree(x);
        cudaFree(y);
        cudaFree(xq);
        for (int i = 0; i < 2; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
        for (int i = 0; tev && i < n_tev; i++) cudaEventDestroy(tev[i]);
        free(tev);
        free(h);
        sl_cuda_ctx_destroy(ctx);
        if (s) cudaStreamDestroy(s);
    }
};

extern "C" sl_status sl_cuda_bench_gemv(const uint32_t *types, int n_types, int64_t rows,
                                        int64_t cols, int reps, sl_cuda_bench_result *out,
                                        sl_error *err)
{
    if (!out || (n_types > 0 && !types) || n_types < 0 || n_types > SL_CUDA_BENCH_MAX_TYPES ||
        reps < 1 || rows < 1 || cols < 1)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cuda_bench_gemv: bad arguments");
    memset(out, 0, sizeof *out);
    sl_status st = sl_cuda_probe(NULL, err);
    if (st) return st;
    bench_res R;
    SL_CU(err, cudaSetDevice(0));
    SL_CU(err, cudaStreamCreateWithFlags(&R.s, cudaStreamNonBlocking));
    st = sl_cuda_ctx_create(0, R.s, &R.ctx, err);
    if (st) return st;
    snprintf(out->device, sizeof out->device, "%s", R.ctx->info.name);
    SL_CU(err, cudaEventCreate(&R.ev[0]));
    SL_CU(err, cudaEventCreate(&R.ev[1]));

    /* roofline: D2D copy */
    const uint64_t l2 = R.ctx->info.l2_bytes;
    const size_t cb = (size_t)(8 * l2 > (1ull << 30) ? 8 * l2 : 1ull << 30);
    SL_CU(err, cudaMalloc(&R.a, cb));
    SL_CU(err, cudaMalloc(&R.b, cb));
    SL_CU(err, cudaMemsetAsync(R.a, 1, cb, R.s));
    SL_CU(err, cudaMemcpyAsync(R.b, R.a, cb, cudaMemcpyDeviceToDevice, R.s)); /* warm-up */
    float ct[9];
    for (int i = 0; i < 9; i++) {
        SL_CU(err, cudaEventRecord(R.ev[0], R.s));
        SL_CU(err, cudaMemcpyAsync(R.b, R.a, cb, cudaMemcpyDeviceToDevice, R.s));
        SL_CU(err, cudaEventRecord(R.ev[1], R.s));
        SL_CU(err, cudaEventSynchronize(R.ev[1]));
        SL_CU(err, cudaEventElapsedTime(&ct[i], R.ev[0], R.ev[1]));
    }
    qsort(ct, 9, sizeof *ct, cmp_f);
    out->copy_bytes = cb;
    out->copy_gbps = 2.0 * (double)cb / ((double)ct[4] * 1e6);
    cudaFree(R.a);
    cudaFree(R.b);
    R.a = R.b = nullptr;

    SL_CU(err, cudaMalloc((void **)&R.x, (size_t)cols * sizeof(float)));
    SL_CU(err, cudaMalloc((void **)&R.y, 2 * (size_t)rows * sizeof(float))); /* gate, up */
    /* 0x3c bytes: every float ~0.0115, so the Q8 path quantizes real values */
    SL_CU(err, cudaMemsetAsync(R.x, 0x3c, (size_t)cols * sizeof(float), R.s));
    const size_t xqb = sl_cuda_q8x_bytes(cols); /* 0: no Q8-activation kernel at this width */
    if (xqb) {
        SL_CU(err, cudaMalloc(&R.xq, xqb));
        if ((st = sl_cuda_quant_q8x(R.ctx, R.x, cols, R.xq, err))) return st;
    }
    R.tev = (cudaEvent_t *)calloc((size_t)reps + 1, sizeof *R.tev);
    float *t = (float *)calloc((size_t)reps, sizeof *t);
    if (!R.tev || !t) {
        free(t);
        return sl_error_set(err, SL_ERR_NOMEM, "sl_cuda_bench_gemv: out of host memory");
    }
    for (int i = 0; i <= reps; i++) {
        cudaError_t rc = cudaEventCreate(&R.tev[i]);
        if (rc != cudaSuccess) {
            free(t);
            return sl__cu_fail(err, rc, "cudaEventCreate", __FILE__, __LINE__);
        }
        R.n_tev = i + 1;
    }
    for (int ti = 0; ti < n_types && !st; ti++) {
        const uint32_t type = types[ti];
        const size_t rb = sl_cuda_gemv_row_bytes(type, cols);
        if (!rb) {
            st = sl_error_set(err, SL_ERR_INVALID, "sl_cuda_bench_gemv: type %u with cols %lld",
                              type, (long long)cols);
            break;
        }
        const size_t wb = rb * (size_t)rows;
        /* even and >= 4: the gate / up rows take disjoint pairs, so no launch reads a matrix
         * the one before it read */
        int copies = (int)((4 * l2 + wb - 1) / wb);
        if (copies < 4) copies = 4;
        copies += copies & 1;
        R.w = (void **)calloc((size_t)copies, sizeof *R.w);
        R.h = (uint8_t *)malloc(wb);
        if (!R.w || !R.h) {
            st = sl_error_set(err, SL_ERR_NOMEM, "sl_cuda_bench_gemv: out of host memory");
            break;
        }
        fill_host(R.h, wb, type, rb, cols);
        cudaError_t rc = cudaSuccess;
        for (int c = 0; c < copies && rc == cudaSuccess; c++) {
            rc = cudaMalloc(&R.w[c], wb);
            if (rc == cudaSuccess) R.n_w = c + 1;
            if (rc == cudaSuccess) rc = cudaMemcpy(R.w[c], R.h, wb, cudaMemcpyHostToDevice);
        }
        if (rc != cudaSuccess) {
            st = sl__cu_fail(err, rc, "weights", __FILE__, __LINE__);
            break;
        }
        /* the Q8-activation kernel's types also run in the F32 mode, for the ratio, as a
         * gate / up pair (copies 2j and 2j + 1) through the multi-matrix GEMV's SwiGLU, and on
         * x quantised before the launches (sl_cuda_gemv_q8x: the kernel without its per-block
         * quantisation of x, issue 32's "x quantised once a launch") */
        const int n_act = sl_cuda_gemv_q8_act(type, cols, 1, true, false) ? 2 : 1;
        for (int v = 0; v < 2 * n_act + (n_act == 2) && !st; v++) {
            const int act = v % n_act;
            const bool glu = v >= n_act && v < 2 * n_act, pre = v == 2 * n_act;
            sl_cuda_ctx_set_f32_act(R.ctx, !pre && (n_act == 1 || act == 1));
            auto launch = [&](int c) {
                if (pre) return sl_cuda_gemv_q8x(R.ctx, type, R.w[c], rows, cols, R.xq, R.y, err);
                if (!glu) return sl_cuda_gemv(R.ctx, type, R.w[c], rows, cols, R.x, 1, R.y, err);
                const int j = 2 * (c % (copies / 2));
                const sl_cuda_gemv_mat gu[2] = {{type, R.w[j], rows, nullptr, R.y},
                                                {type, R.w[j + 1], rows, nullptr, R.y + rows}};
                return sl_cuda_gemv_multi(R.ctx, gu, 2, cols, R.x, 1, true, err);
            };
            for (int c = 0; c < copies && !st; c++) st = launch(c); /* warm-up */
            for (int r = 0; r < reps && !st; r++) {
                rc = cudaEventRecord(R.tev[r], R.s);
                if (rc == cudaSuccess) st = launch(r % copies);
            }
            if (!st && rc == cudaSuccess) rc = cudaEventRecord(R.tev[reps], R.s);
            if (!st && rc == cudaSuccess) rc = cudaEventSynchronize(R.tev[reps]);
            for (int r = 0; r < reps && !st && rc == cudaSuccess; r++)
                rc = cudaEventElapsedTime(&t[r], R.tev[r], R.tev[r + 1]);
            if (!st && rc != cudaSuccess) st = sl__cu_fail(err, rc, "timing", __FILE__, __LINE__);
            if (!st) {
                qsort(t, (size_t)reps, sizeof *t, cmp_f);
                const double ms = t[reps / 2], mb = (glu ? 2.0 : 1.0) * (double)wb;
                const bool q8 = n_act == 2 && act == 0;
                out->rows[out->n_rows++] = {type, mb / 1e6, ms, mb / (ms * 1e6),
                                            pre ? "q8-pre" : glu ? (q8 ? "q8-glu" : "f32-glu")
                                                             : (q8 ? "q8" : "f32")};
            }
        }
        sl_cuda_ctx_set_f32_act(R.ctx, false);
        cudaStreamSynchronize(R.s);
        for (int c = 0; c < R.n_w; c++) cudaFree(R.w[c]);
        free(R.w);
        free(R.h);
        R.w = nullptr;
        R.h = nullptr;
        R.n_w = 0;
    }
    free(t);
    return st;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

extern "C" sl_status sl_cuda_bench_malloc_async(const uint64_t *sizes, uint64_t n,
                                                uint64_t *ns_out, sl_error *err)
{
    if (!sizes || !ns_out || !n)
        return sl_error_set(err, SL_ERR_INVALID, "%s: sizes, ns_out and n are required", __func__);
    cudaError_t rc = cudaSetDevice(0);
    if (rc != cudaSuccess) return sl__cu_fail(err, rc, "cudaSetDevice", __FILE__, __LINE__);
    cudaMemPool_t pool;
    if ((rc = cudaDeviceGetDefaultMemPool(&pool, 0)) != cudaSuccess)
        return sl__cu_fail(err, rc, "cudaDeviceGetDefaultMemPool", __FILE__, __LINE__);
    uint64_t keep = UINT64_MAX, old = 0;
    if ((rc = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &old)) != cudaSuccess ||
        (rc = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess)
        return sl__cu_fail(err, rc, "cudaMemPool{Get,Set}Attribute", __FILE__, __LINE__);
    cudaStream_t s = nullptr;
    if ((rc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) {
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &old);
        return sl__cu_fail(err, rc, "cudaStreamCreateWithFlags", __FILE__, __LINE__);
    }
    sl_status st = SL_OK;
    for (uint64_t i = 0; i < n; i++) {
        void *p = nullptr;
        const uint64_t t0 = mono_ns();
        rc = cudaMallocAsync(&p, sizes[i], s);
        if (rc == cudaSuccess) rc = cudaFreeAsync(p, s);
        ns_out[i] = mono_ns() - t0;
        if (rc != cudaSuccess) {
            st = sl__cu_fail(err, rc, "cudaMallocAsync/cudaFreeAsync", __FILE__, __LINE__);
            break;
        }
    }
    const cudaError_t rs = cudaStreamSynchronize(s);
    if (!st && rs != cudaSuccess) st = sl__cu_fail(err, rs, "cudaStreamSynchronize", __FILE__, __LINE__);
    cudaStreamDestroy(s);
    cudaMemPoolTrimTo(pool, 0);
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &old);
    return st;
}
