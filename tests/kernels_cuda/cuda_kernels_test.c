/* tests/kernels_cuda/cuda_kernels_test.c: every kernel of kernels/cuda against kernels/ref.
 *
 * Runs in two modes:
 * - no usable GPU (CI, developer machines): checks that argument validation works on the host
 *   and that CUDA failures come back as SL_ERR_DEVICE / SL_ERR_NOT_FOUND with CUDA's message and
 *   our file:line, then prints "cuda_kernels_test: SKIPPED, no usable GPU (<reason>)" and passes;
 * - on the GPU machine (tools/gpu-test run): everything below, on fresh random data.
 * The CPU twin that runs in CI is //tests/kernels:ops_test and //tests/kernels:matvec_test:
 * kernels/cpu checked against the same references (kernels/ref/ops.h, quant.h, matvec.h).
 *
 * What is checked, and the tolerance of each (S = sum_c |w_c| |x_c| in float64, M = max_c |w_c|,
 * X = sum_c |x_c|, all of the row being checked):
 * - dequant to F32: bit-exact vs sl_quant_dequant_row; to F16 / BF16: bit-exact vs
 *   sl_quant_fp32_to_fp16 / _bf16 of the reference floats. Every type; block counts 1, 7, 129
 *   (float types: n = 1, 37, 1029); a source pointer offset by 2 bytes.
 * - GEMV (dense, all 12 types): |y - y64| <= 2e-5 (S + M X) against the float64 dot of the
 *   dequantised row with x (the GPU keeps x in F32; the M X term covers the cancellation inside
 *   factored K-quant terms d*sc*sum(q x) - dmin*m*sum(x)). Rows 1, 17, 100; cols = one block,
 *   three blocks, one chunk + one block, 4 chunks + 3 blocks (float types: 1, 7, 255, 1029);
 *   batches 1, 3, 6; plus weights at a 2-byte offset (the unaligned copy path).
 * - GEMV rows (compact and scatter, repeats, unlisted entries untouched) and experts (shared
 *   and per-expert x, an out-of-range id gives zeros): same tolerance.
 * - GEMM (cuBLAS after dequant): F16 |err| <= 2e-3 S + 1e-6, BF16 <= 1.6e-2 S + 1e-6; rows 1, 37;
 *   batches 1, 3, 17.
 * - rms_norm: <= 1e-5 x max |ref| of the row; rope: <= 4e-6 x max |x|; the fused q/k norm +
 *   rope + KV store and add + rms_norm (issue 32) within the sum of their parts' tolerances; softmax: <= 1e-5 |ref| +
 *   1e-7; swiglu / geglu / swiglu_oai (limit 1.5: both clamps bite): <= 1e-5 |ref| +
 *   1e-6 |up| (1 + |gate|); add, mul, scale: bit-exact;
 *   router (also group-limited): indices exact, weights <= 1e-6 |ref| + 1e-7; attention (also
 *   head_dim 576, MLA's): <= 2e-5 max |v| + 1e-5 |ref|.
 * - forward glue (fwd.h): add_rows, kv_store (F32 and F16), moe_combine (ascending expert
 *   order, as the CPU scheduler sums), expert_bias (whole experts and per-expert widths with
 *   an empty one; entries past a width untouched), copy2d bit-exact vs C loops in float; gated_add
 *   <= 1e-6 |ref|.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cuda/ctx.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/fwd.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quant.h"
#include "base/status.h"
#include "tests/testing.h"

static const uint32_t TYPES[] = {SL_GGML_F32,  SL_GGML_F16,  SL_GGML_BF16, SL_GGML_Q4_0,
                                 SL_GGML_Q4_1, SL_GGML_Q5_0, SL_GGML_Q5_1, SL_GGML_Q8_0,
                                 SL_GGML_MXFP4, SL_GGML_Q4_K, SL_GGML_Q5_K, SL_GGML_Q6_K};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xFFFFFF) / 16777216.0f; }

static const char *tname(uint32_t t) { return sl_gguf_type_get(t)->name; }
static int64_t blk(uint32_t t) { return sl_gguf_type_get(t)->block_size; }

static void *dmalloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1); /* test harness only */
    }
    return p;
}
/* The kernels run on a non-blocking stream, which does not order with the legacy stream that
 * cudaMemcpy uses, and a pageable H2D may return before its DMA lands: fence the whole device on
 * both sides so an upload neither overwrites what a queued kernel still reads nor lands late. */
static void h2d(void *d, const void *h, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
static void d2h(void *h, const void *d, size_t n)
{
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) exit(1);
    return p;
}

/* Random weights of `type`, n elements (n a multiple of the block): quantized from random
 * floats where a quantizer exists, random bytes with a sane exponent for MXFP4. */
static uint8_t *make_weights(uint32_t type, int64_t n, size_t *bytes)
{
    *bytes = sl_quant_row_bytes(type, n);
    uint8_t *w = xmalloc(*bytes);
    if (type == SL_GGML_MXFP4) {
        for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)rnd_u32();
        for (size_t o = 0; o < *bytes; o += 17) w[o] = (uint8_t)(118 + rnd_u32() % 12);
        return w;
    }
    float *f = xmalloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = rnd_f(-1.0f, 1.0f) * (1.0f + (float)(i % 7));
    sl_error e;
    CHECK_MSG(sl_quant_row(type, f, w, n, &e) == SL_OK, "%s", e.msg);
    free(f);
    return w;
}

static float *dequant_ref(uint32_t type, const uint8_t *w, int64_t n)
{
    float *f = xmalloc((size_t)n * sizeof *f);
    sl_error e;
    CHECK_MSG(sl_quant_dequant_row(type, w, f, n, &e) == SL_OK, "%s", e.msg);
    return f;
}

static int fails_reported;
#define REPORT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond) && fails_reported++ < 30) CHECK_MSG(cond, __VA_ARGS__);                \
        else if (!(cond)) sl_test_g.failures++;                                            \
        else sl_test_g.checks++;                                                           \
    } while (0)

/* ---- no GPU: validation and clean errors --------------------------------------------------- */

static void test_host_side(void)
{
    sl_error e;
    float *p = (float *)(uintptr_t)64; /* never dereferenced: validation fails first */
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q4_K, p, 4, 100, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "cols");
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q2_K, p, 4, 256, p, 1, p, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q8_0, p, 4, 64, p, 0, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_batch");
    CHECK(sl_cuda_gemv(NULL, SL_GGML_Q8_0, p, 4, 64, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    CHECK(sl_cuda_gemv_rows(NULL, SL_GGML_Q8_0, p, 4, 64, NULL, 3, false, p, 1, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_idx");
    CHECK(sl_cuda_gemv_experts(NULL, SL_GGML_Q8_0, NULL, 4, NULL, 2, 4, 64, p, false, p, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_gemv_expert_parts(NULL, SL_GGML_Q8_0, (const void *const *)p, 4, NULL, true,
                                    (const int32_t *)p, 2, 4, 64, p, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_ff_at");
    CHECK(sl_cuda_gemv_expert_parts(NULL, SL_GGML_Q8_0, (const void *const *)p, 4,
                                    (const int64_t *)p, true, (const int32_t *)p, 2, 4, 33, p, p,
                                    &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "multiple");
    CHECK(sl_cuda_dequant_f32(NULL, SL_GGML_Q8_0, p, 33, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "multiple");
    CHECK(sl_cuda_dequant_f16(NULL, SL_GGML_IQ2_XXS, p, 256, (uint16_t *)p, &e) == SL_ERR_UNSUPPORTED);
    CHECK(sl_cuda_gemm(NULL, SL_GGML_Q8_0, p, 4, 64, p, 2, p, SL_CUDA_GEMM_F16, p, 1, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "work_bytes");
    /* W 4x64 F16 (512), X 2x64 F16 (256), X row scales 2 floats (256 after alignment) */
    CHECK(sl_cuda_gemm_work_bytes(4, 64, 2) == 1024);
    sl_rope_params rp = sl_rope_params_make(SL_ROPE_NEOX, 3, 10000.0f);
    CHECK(sl_cuda_rope(NULL, p, 1, 1, 8, (const int32_t *)p, &rp, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_rot");
    sl_attn_params ap = {.n_head = 6, .n_kv_head = 4, .head_dim = 64, .n_pos = 1};
    CHECK(sl_cuda_attn_decode(NULL, p, p, p, &ap, p, &e) == SL_ERR_INVALID);
    ap.n_kv_head = 2;
    ap.head_dim = SL_CUDA_ATTN_MAX_HEAD_DIM + 1;
    CHECK(sl_cuda_attn_decode(NULL, p, p, p, &ap, p, &e) == SL_ERR_UNSUPPORTED);
    sl_router_params rt = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 8, .k = 9, .weight_scale = 1};
    CHECK(sl_cuda_router_topk(NULL, p, 1, &rt, (int32_t *)p, p, &e) == SL_ERR_INVALID);
    rt.k = 2, rt.n_group = 3, rt.top_group = 1; /* 8 experts do not split into 3 groups */
    CHECK(sl_cuda_router_topk(NULL, p, 1, &rt, (int32_t *)p, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_group");
    rt.n_group = 4, rt.top_group = 5;
    CHECK(sl_cuda_router_topk(NULL, p, 1, &rt, (int32_t *)p, p, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_copy2d(NULL, p, 3, p, 8, 2, 4, &e) == SL_ERR_INVALID); /* stride < width */
    CHECK(sl_cuda_copy2d(NULL, p, 4, p, 8, 2, 4, &e) == SL_ERR_INVALID); /* no context */
    CHECK_CONTAINS(e.msg, "context");
    CHECK(sl_cuda_rms_norm(NULL, p, NULL, p, 1, 8, 1e-5f, false, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    CHECK(sl_cuda_gemv_supported(SL_GGML_MXFP4) && !sl_cuda_gemv_supported(SL_GGML_Q3_K));
    CHECK(sl_cuda_gemv_row_bytes(SL_GGML_Q6_K, 512) == 420);
    CHECK(sl_cuda_gemv_row_bytes(SL_GGML_F16, 7) == 14);
}

/* ---- dequant ------------------------------------------------------------------------------- */

static void test_dequant(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t counts[3] = {1, 7, 129}, fcounts[3] = {1, 37, 1029};
        for (int k = 0; k < 3; k++) {
            const int64_t n = blk(t) == 1 ? fcounts[k] : counts[k] * blk(t);
            size_t wb;
            uint8_t *w = make_weights(t, n, &wb);
            float *ref = dequant_ref(t, w, n);
            uint8_t *dw = dmalloc(wb + 2);
            float *df = dmalloc((size_t)n * 4);
            uint16_t *dh = dmalloc((size_t)n * 2), *db = dmalloc((size_t)n * 2);
            const int off = k == 1 ? 2 : 0; /* unaligned source */
            h2d(dw + off, w, wb);
            sl_error e;
            CHECK_MSG(sl_cuda_dequant_f32(c, t, dw + off, n, df, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_dequant_f16(c, t, dw + off, n, dh, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_dequant_bf16(c, t, dw + off, n, db, &e) == SL_OK, "%s", e.msg);
            CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
            float *f = xmalloc((size_t)n * 4);
            uint16_t *h = xmalloc((size_t)n * 2), *b = xmalloc((size_t)n * 2);
            d2h(f, df, (size_t)n * 4);
            d2h(h, dh, (size_t)n * 2);
            d2h(b, db, (size_t)n * 2);
            int bad = 0;
            for (int64_t i = 0; i < n && bad < 3; i++) {
                uint32_t fb, rb;
                memcpy(&fb, &f[i], 4);
                memcpy(&rb, &ref[i], 4);
                const bool ok = fb == rb && h[i] == sl_quant_fp32_to_fp16(ref[i]) &&
                                b[i] == sl_quant_fp32_to_bf16(ref[i]);
                if (!ok) bad++;
                REPORT(ok, "dequant %s n=%lld [%lld]: f32 %a vs %a, f16 %04x vs %04x, bf16 %04x vs %04x",
                       tname(t), (long long)n, (long long)i, (double)f[i], (double)ref[i], h[i],
                       sl_quant_fp32_to_fp16(ref[i]), b[i], sl_quant_fp32_to_bf16(ref[i]));
            }
            free(f), free(h), free(b), free(w), free(ref);
            cudaFree(dw), cudaFree(df), cudaFree(dh), cudaFree(db);
        }
    }
}

/* ---- GEMV ---------------------------------------------------------------------------------- */

/* Checks y [n_batch][ystride] at output o against row r of wf [rows][cols] and x. */
static void check_dot(const char *what, uint32_t t, const float *wf, int64_t r, int64_t cols,
                      const float *x, float y, double tol_s, double tol_abs)
{
    double d = 0, S = 0, M = 0, X = 0;
    for (int64_t k = 0; k < cols; k++) {
        const double w = wf[r * cols + k];
        d += w * x[k];
        S += fabs(w) * fabs(x[k]);
        X += fabs(x[k]);
        if (fabs(w) > M) M = fabs(w);
    }
    const double tol = tol_s * (S + M * X) + tol_abs;
    REPORT(fabs((double)y - d) <= tol, "%s %s row %lld cols %lld: %.9g vs %.9g (tol %.3g)", what,
           tname(t), (long long)r, (long long)cols, (double)y, d, tol);
}

/* Which GEMV numerics the context runs (sl_cuda_ctx_set_f32_act): with Q8 activations, Q4_K and
 * Q8_0 at n_batch 1 quantize x per 32 values (ggml's Q8_1), so they are checked against the
 * float64 dot with that same x; everything else keeps F32 activations. */
static bool g_q8act = false;

/* Whether a call takes the Q8-activation path (gemv.cu's rule; `aligned`: the matrix pointer is
 * 16-byte aligned, or it comes through the experts' pointer array, which is not checked). */
static bool q8_path(uint32_t t, int64_t cols, int64_t nb, bool aligned)
{
    return g_q8act && nb == 1 && (t == SL_GGML_Q4_K || t == SL_GGML_Q8_0) && aligned &&
           sl_quant_row_bytes(t, cols) % 16 == 0;
}

static void check_gemv(const char *what, uint32_t t, const float *wf, int64_t r, int64_t cols,
                       const float *x, float y, bool q8)
{
    if (!q8) {
        check_dot(what, t, wf, r, cols, x, y, 2e-5, 1e-30);
        return;
    }
    float *xr = xmalloc((size_t)cols * 4);
    for (int64_t u = 0; u < cols / 32; u++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * u + i]));
        const float d = amax / 127.0f, id = d > 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) xr[32 * u + i] = d * rintf(x[32 * u + i] * id);
    }
    char w[64];
    snprintf(w, sizeof w, "%s(q8 act)", what);
    check_dot(w, t, wf, r, cols, xr, y, 2e-5, 1e-30);
    free(xr);
}

static void test_gemv(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t B = blk(t);
        const int64_t chunk = t == SL_GGML_Q6_K ? 2048 : B == 1 ? 512 : 1024;
        int64_t colsv[4] = {B, 3 * B, chunk + B, 4 * chunk + 3 * B};
        if (B == 1) colsv[0] = 1, colsv[1] = 7, colsv[2] = 255, colsv[3] = 1029;
        const int64_t rowsv[3] = {1, 17, 100}, batchv[3] = {1, 3, 6};
        for (int ci = 0; ci < 4; ci++)
            for (int ri = 0; ri < 3; ri++)
                for (int bi = 0; bi < 3; bi++) {
                    const int64_t cols = colsv[ci], rows = rowsv[ri], nb = batchv[bi];
                    if (bi != 0 && ri == 2 && ci == 3) continue; /* keep the run short */
                    const int off = (ci == 2 && ri == 1) ? 2 : 0;
                    size_t wb;
                    uint8_t *w = make_weights(t, rows * cols, &wb);
                    float *wf = dequant_ref(t, w, rows * cols);
                    float *x = xmalloc((size_t)(nb * cols) * 4), *y = xmalloc((size_t)(nb * rows) * 4);
                    for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
                    uint8_t *dw = dmalloc(wb + 16);
                    float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
                    h2d(dw + off, w, wb);
                    h2d(dx, x, (size_t)(nb * cols) * 4);
                    sl_error e;
                    CHECK_MSG(sl_cuda_gemv(c, t, dw + off, rows, cols, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
                    CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
                    d2h(y, dy, (size_t)(nb * rows) * 4);
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t r = 0; r < rows; r++)
                            check_gemv(off ? "gemv(unaligned)" : "gemv", t, wf, r, cols,
                                       x + b * cols, y[b * rows + r], q8_path(t, cols, nb, !off));
                    free(w), free(wf), free(x), free(y);
                    cudaFree(dw), cudaFree(dx), cudaFree(dy);
                }
    }
}

static void test_gemv_rows_experts(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        /* 8 blocks of 32 make Q8_0 rows 16-byte multiples (272 B): the Q8-activation path */
        const int64_t cols = blk(t) == 1 ? 300 : blk(t) == 32 ? 8 * 32 : 5 * blk(t), rows = 50, nb = 2;
        size_t wb;
        uint8_t *w = make_weights(t, rows * cols, &wb);
        float *wf = dequant_ref(t, w, rows * cols);
        float *x = xmalloc((size_t)(nb * cols) * 4);
        for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
        const int32_t idx[7] = {49, 0, 7, 7, 23, 31, 48};
        uint8_t *dw = dmalloc(wb);
        float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
        int32_t *di = dmalloc(sizeof idx);
        h2d(dw, w, wb);
        h2d(dx, x, (size_t)(nb * cols) * 4);
        h2d(di, idx, sizeof idx);
        sl_error e;
        float y[2 * 50];
        /* compact */
        CHECK_MSG(sl_cuda_gemv_rows(c, t, dw, rows, cols, di, 7, false, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dy, (size_t)(nb * 7) * 4);
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < 7; i++)
                check_gemv("gemv_rows", t, wf, idx[i], cols, x + b * cols, y[b * 7 + i],
                           q8_path(t, cols, nb, true));
        /* scatter: unlisted entries keep their sentinel */
        for (int i = 0; i < nb * rows; i++) y[i] = 12345.0f;
        h2d(dy, y, (size_t)(nb * rows) * 4);
        CHECK_MSG(sl_cuda_gemv_rows(c, t, dw, rows, cols, di, 7, true, dx, nb, dy, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dy, (size_t)(nb * rows) * 4);
        for (int b = 0; b < nb; b++)
            for (int r = 0; r < rows; r++) {
                bool listed = false;
                for (int i = 0; i < 7; i++) listed |= idx[i] == r;
                if (listed)
                    check_gemv("gemv_rows(scatter)", t, wf, r, cols, x + b * cols, y[b * rows + r],
                               q8_path(t, cols, nb, true));
                else REPORT(y[b * rows + r] == 12345.0f, "scatter %s touched row %d", tname(t), r);
            }
        /* experts: 5 experts, separately allocated; ids {4, 1, 9 (invalid), 2} */
        enum { NE = 5, NS = 4 };
        const int64_t erows = 20;
        uint8_t *ew[NE];
        float *ewf[NE];
        void *dptr[NE], *dbase[NE];
        for (int k = 0; k < NE; k++) {
            ew[k] = make_weights(t, erows * cols, &wb);
            ewf[k] = dequant_ref(t, ew[k], erows * cols);
            /* experts 1 and 3 start 2 and 1 bytes off alignment (the kernels cannot check a
             * device-side pointer array, so they must read such matrices correctly) */
            const int eoff = k == 1 ? 2 : k == 3 ? 1 : 0;
            dbase[k] = dmalloc(wb + 16);
            dptr[k] = (uint8_t *)dbase[k] + eoff;
            h2d(dptr[k], ew[k], wb);
        }
        const int32_t ids[NS] = {4, 1, 9, 3};
        void **dp = dmalloc(sizeof dptr);
        int32_t *dids = dmalloc(sizeof ids);
        h2d(dp, dptr, sizeof dptr);
        h2d(dids, ids, sizeof ids);
        float *xe = xmalloc((size_t)(NS * cols) * 4), ye[NS * 20];
        for (int64_t i = 0; i < NS * cols; i++) xe[i] = rnd_f(-1, 1);
        float *dxe = dmalloc((size_t)(NS * cols) * 4), *dye = dmalloc(sizeof ye);
        h2d(dxe, xe, (size_t)(NS * cols) * 4);
        for (int per = 0; per < 2; per++) {
            CHECK_MSG(sl_cuda_gemv_experts(c, t, (const void *const *)dp, NE, dids, NS, erows, cols, dxe,
                                           per, dye, &e) == SL_OK, "%s", e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(ye, dye, sizeof ye);
            for (int s = 0; s < NS; s++)
                for (int r = 0; r < erows; r++) {
                    if (ids[s] >= NE) {
                        REPORT(ye[s * erows + r] == 0.0f, "experts %s bad id gives %g", tname(t), (double)ye[s * erows + r]);
                        continue;
                    }
                    check_gemv(per ? "gemv_experts(per-expert x)" : "gemv_experts", t, ewf[ids[s]], r,
                               cols, xe + (per ? s * cols : 0), ye[s * erows + r],
                               q8_path(t, cols, 1, true));
                }
        }
        for (int k = 0; k < NE; k++) free(ew[k]), free(ewf[k]), cudaFree(dbase[k]);
        free(w), free(wf), free(x), free(xe);
        cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(di), cudaFree(dp), cudaFree(dids);
        cudaFree(dxe), cudaFree(dye);
    }
}

/* Experts split by neurons (sl_cuda_gemv_expert_parts): 4 experts of widths {2, 0, 1, 3}
 * granules (a block; 5 for float types) packed as ffn_split.h does — gate' [sum w][E] rows,
 * each expert's down' [E][w_e] after the previous one — selected as {3, 1, 0, 2}. gate': the
 * first w_e outputs are its rows' dots, the rest 0; down': the dot over w_e columns of the
 * slot's x (stride the widest), a width of 0 gives 0. */
static void test_gemv_expert_parts(sl_cuda_ctx *c)
{
    enum { NE = 4, NS = 4 };
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t G = blk(t) == 1 ? 5 : blk(t), E = blk(t) == 1 ? 70 : 2 * blk(t);
        const int64_t wdt[NE] = {2 * G, 0, G, 3 * G}, F = 3 * G;
        int64_t at[NE + 1] = {0};
        for (int k = 0; k < NE; k++) at[k + 1] = at[k] + wdt[k];
        size_t gb, db[NE], dtot = 0;
        uint8_t *gw = make_weights(t, at[NE] * E, &gb), *dw[NE];
        float *gwf = dequant_ref(t, gw, at[NE] * E), *dwf[NE];
        for (int k = 0; k < NE; k++) {
            dw[k] = wdt[k] ? make_weights(t, E * wdt[k], &db[k]) : NULL;
            dwf[k] = wdt[k] ? dequant_ref(t, dw[k], E * wdt[k]) : NULL;
            if (!wdt[k]) db[k] = 0;
            dtot += db[k];
        }
        uint8_t *dg = dmalloc(gb), *dd = dmalloc(dtot + 16);
        h2d(dg, gw, gb);
        const void *pg[NE], *pd[NE];
        for (size_t k = 0, off = 0; k < NE; off += db[k], k++) {
            pg[k] = dg + (size_t)at[k] * sl_quant_row_bytes(t, E);
            pd[k] = dd + off;
            if (db[k]) h2d(dd + off, dw[k], db[k]);
        }
        const int32_t ids[NS] = {3, 1, 0, 2};
        float *x = xmalloc((size_t)(NS * F) * 4), yg[NS * 3 * 256], yd[NS * 512];
        for (int64_t i = 0; i < NS * F; i++) x[i] = rnd_f(-1, 1);
        void **dpg = dmalloc(sizeof pg), **dpd = dmalloc(sizeof pd);
        int64_t *dat = dmalloc(sizeof at);
        int32_t *dids = dmalloc(sizeof ids);
        float *dx = dmalloc((size_t)(NS * F) * 4), *dyg = dmalloc(sizeof yg);
        float *dyd = dmalloc(sizeof yd);
        h2d(dpg, pg, sizeof pg), h2d(dpd, pd, sizeof pd), h2d(dat, at, sizeof at);
        h2d(dids, ids, sizeof ids), h2d(dx, x, (size_t)(NS * F) * 4);
        sl_error e;
        const void *const *cpg = (const void *const *)dpg, *const *cpd = (const void *const *)dpd;
        CHECK_MSG(sl_cuda_gemv_expert_parts(c, t, cpg, NE, dat, false, dids, NS, F, E, dx, dyg,
                                            &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(sl_cuda_gemv_expert_parts(c, t, cpd, NE, dat, true, dids, NS, E, F, dx, dyd,
                                            &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(yg, dyg, (size_t)(NS * F) * 4);
        d2h(yd, dyd, (size_t)(NS * E) * 4);
        /* the Q8-activation rule of gemv.cu, on the widest shape; never for a Q8_0 down' */
        const bool q8g = q8_path(t, E, 1, true), q8d = t != SL_GGML_Q8_0 && q8_path(t, F, 1, true);
        for (int s = 0; s < NS; s++) {
            const int32_t k = ids[s];
            for (int64_t r = 0; r < F; r++) {
                if (r < wdt[k])
                    check_gemv("gemv_expert_parts(gate')", t, gwf, at[k] + r, E, x,
                               yg[s * F + r], q8g);
                else
                    REPORT(yg[s * F + r] == 0.0f, "expert parts %s: gate' past width %lld gives %g",
                           tname(t), (long long)wdt[k], (double)yg[s * F + r]);
            }
            for (int64_t r = 0; r < E; r++) {
                if (wdt[k])
                    check_gemv("gemv_expert_parts(down')", t, dwf[k], r, wdt[k], x + s * F,
                               yd[s * E + r], q8d);
                else
                    REPORT(yd[s * E + r] == 0.0f, "expert parts %s: down' of width 0 gives %g",
                           tname(t), (double)yd[s * E + r]);
            }
        }
        CHECK(sl_cuda_gemv_expert_parts(c, t, cpg, NE, NULL, false, dids, NS, F, E, dx, dyg,
                                        &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "d_ff_at");
        for (int k = 0; k < NE; k++) free(dw[k]), free(dwf[k]);
        free(gw), free(gwf), free(x);
        cudaFree(dg), cudaFree(dd), cudaFree(dpg), cudaFree(dpd), cudaFree(dat), cudaFree(dids);
        cudaFree(dx), cudaFree(dyg), cudaFree(dyd);
    }
}

/* ---- GEMM ---------------------------------------------------------------------------------- */

static void test_gemm(sl_cuda_ctx *c)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = TYPES[ti];
        const int64_t cols = blk(t) == 1 ? 333 : (blk(t) == 256 ? 3 : 11) * blk(t);
        const int64_t rowsv[2] = {1, 37}, batchv[3] = {1, 3, 17};
        for (int ri = 0; ri < 2; ri++)
            for (int bi = 0; bi < 3; bi++)
                for (int prec = 0; prec < 2; prec++) {
                    const int64_t rows = rowsv[ri], nb = batchv[bi];
                    size_t wb;
                    uint8_t *w = make_weights(t, rows * cols, &wb);
                    float *wf = dequant_ref(t, w, rows * cols);
                    float *x = xmalloc((size_t)(nb * cols) * 4), *y = xmalloc((size_t)(nb * rows) * 4);
                    for (int64_t i = 0; i < nb * cols; i++) x[i] = rnd_f(-1, 1);
                    /* outliers past F16's range in every other row (real down-projection
                     * inputs have them): the result must stay finite and as accurate */
                    for (int64_t b = 1; b < nb; b += 2) {
                        x[b * cols] = 1e6f;
                        x[b * cols + cols / 2] = -3e5f;
                    }
                    const size_t work = sl_cuda_gemm_work_bytes(rows, cols, nb);
                    uint8_t *dw = dmalloc(wb);
                    float *dx = dmalloc((size_t)(nb * cols) * 4), *dy = dmalloc((size_t)(nb * rows) * 4);
                    void *dwork = dmalloc(work);
                    h2d(dw, w, wb);
                    h2d(dx, x, (size_t)(nb * cols) * 4);
                    sl_error e;
                    CHECK_MSG(sl_cuda_gemm(c, t, dw, rows, cols, dx, nb, dy, (sl_cuda_gemm_prec)prec,
                                           dwork, work, &e) == SL_OK, "%s", e.msg);
                    CHECK_MSG(sl_cuda_ctx_sync(c, &e) == SL_OK, "%s", e.msg);
                    d2h(y, dy, (size_t)(nb * rows) * 4);
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t r = 0; r < rows; r++)
                            check_dot(prec ? "gemm(bf16)" : "gemm(f16)", t, wf, r, cols, x + b * cols,
                                      y[b * rows + r], prec ? 1.6e-2 : 2e-3, 1e-6);
                    free(w), free(wf), free(x), free(y);
                    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dwork);
                }
    }
}

/* ---- ops ----------------------------------------------------------------------------------- */

static float *dup_d(const float *h, int64_t n)
{
    float *d = dmalloc((size_t)n * 4);
    h2d(d, h, (size_t)n * 4);
    return d;
}

static void test_ops(sl_cuda_ctx *c)
{
    sl_error e;
    /* rms_norm */
    const int64_t nv[3] = {1, 37, 4096};
    for (int k = 0; k < 3; k++)
        for (int variant = 0; variant < 3; variant++) {
            const int64_t n = nv[k], R = 3;
            float *x = xmalloc((size_t)(R * n) * 4), *w = xmalloc((size_t)n * 4), *y = xmalloc((size_t)(R * n) * 4);
            float *ref = xmalloc((size_t)n * 4);
            for (int64_t i = 0; i < R * n; i++) x[i] = rnd_f(-3, 3);
            for (int64_t i = 0; i < n; i++) w[i] = rnd_f(-1, 1);
            float *dx = dup_d(x, R * n), *dw = dup_d(w, n), *dy = dmalloc((size_t)(R * n) * 4);
            const bool has_w = variant > 0, opw = variant == 2;
            CHECK_MSG(sl_cuda_rms_norm(c, dx, has_w ? dw : NULL, dy, R, n, 1e-6f, opw, &e) == SL_OK, "%s", e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(y, dy, (size_t)(R * n) * 4);
            for (int64_t r = 0; r < R; r++) {
                sl_ref_rms_norm(x + r * n, has_w ? w : NULL, ref, n, 1e-6f, opw, &e);
                double mx = 0;
                for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(ref[i]));
                for (int64_t i = 0; i < n; i++)
                    REPORT(fabs(y[r * n + i] - ref[i]) <= 1e-5 * mx, "rms_norm n %lld [%lld]: %g vs %g",
                           (long long)n, (long long)i, (double)y[r * n + i], (double)ref[i]);
            }
            free(x), free(w), free(y), free(ref);
            cudaFree(dx), cudaFree(dw), cudaFree(dy);
        }

    /* rope: normal / neox, partial rotary, YaRN with freq_factors, large positions */
    for (int variant = 0; variant < 4; variant++) {
        const int32_t T = 3, H = 4, D = 80;
        sl_rope_params p = sl_rope_params_make(variant & 1 ? SL_ROPE_NEOX : SL_ROPE_NORMAL,
                                               variant == 3 ? 64 : 80, variant ? 1e6f : 10000.0f);
        float ff[40];
        for (int i = 0; i < 40; i++) ff[i] = 1.0f + 0.1f * (float)i;
        float *dff = dup_d(ff, 40);
        if (variant >= 2) {
            p.freq_scale = 0.25f;
            p.ext_factor = 1.0f;
            p.n_ctx_orig = 4096;
            p.attn_factor = 1.0f;
        }
        const int32_t pos[3] = {0, 17, 100000 + variant};
        float *x = xmalloc((size_t)(T * H * D) * 4), *y = xmalloc((size_t)(T * H * D) * 4);
        for (int i = 0; i < T * H * D; i++) x[i] = rnd_f(-1, 1);
        float *dx = dup_d(x, T * H * D);
        int32_t *dpos = dmalloc(sizeof pos);
        h2d(dpos, pos, sizeof pos);
        sl_rope_params dp = p;
        if (variant == 3) dp.freq_factors = dff, p.freq_factors = ff;
        CHECK_MSG(sl_cuda_rope(c, dx, T, H, D, dpos, &dp, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dx, (size_t)(T * H * D) * 4);
        CHECK_MSG(sl_ref_rope(x, T, H, D, pos, &p, &e) == SL_OK, "%s", e.msg);
        for (int i = 0; i < T * H * D; i++)
            REPORT(fabs(y[i] - x[i]) <= 4e-6, "rope variant %d [%d]: %g vs %g", variant, i, (double)y[i], (double)x[i]);
        free(x), free(y);
        cudaFree(dx), cudaFree(dpos), cudaFree(dff);
    }

    /* fused q/k norm + rope + KV store (issue 32): against rms_norm per head, rope and the
     * stores of the references; with and without norm weights, F32 and F16 caches, NEOX and
     * normal rope. Tolerance: rope's 4e-6 plus rms_norm's 1e-5 of the head's largest value;
     * an F16 entry within one half-precision rounding of the reference (2^-10 relative). */
    for (int variant = 0; variant < 4; variant++) {
        const int32_t T = 3, H = 4, Hk = 2, D = 64, NCTX = 8;
        const bool norm = variant & 1, f16 = variant & 2;
        sl_rope_params p = sl_rope_params_make(variant < 2 ? SL_ROPE_NEOX : SL_ROPE_NORMAL, 32,
                                               1e6f);
        const int32_t pos[3] = {0, 5, 7};
        const int64_t nq = (int64_t)T * H * D, nk = (int64_t)T * Hk * D, row = (int64_t)Hk * D;
        float *q = xmalloc((size_t)nq * 4), *k = xmalloc((size_t)nk * 4), *v = xmalloc((size_t)nk * 4);
        float *qw = xmalloc((size_t)D * 4), *kw = xmalloc((size_t)D * 4);
        float *gq = xmalloc((size_t)nq * 4);
        const size_t es = f16 ? 2 : 4, cb = (size_t)(NCTX * row) * es;
        uint8_t *gkc = xmalloc(cb), *gvc = xmalloc(cb);
        for (int64_t i = 0; i < nq; i++) q[i] = rnd_f(-2, 2);
        for (int64_t i = 0; i < nk; i++) k[i] = rnd_f(-2, 2), v[i] = rnd_f(-2, 2);
        for (int i = 0; i < D; i++) qw[i] = rnd_f(0.5f, 1.5f), kw[i] = rnd_f(0.5f, 1.5f);
        float *dq = dup_d(q, nq), *dk = dup_d(k, nk), *dv = dup_d(v, nk);
        float *dqw = dup_d(qw, D), *dkw = dup_d(kw, D);
        int32_t *dpos = dmalloc(sizeof pos);
        h2d(dpos, pos, sizeof pos);
        void *dkc = dmalloc(cb), *dvc = dmalloc(cb);
        cudaMemset(dkc, 0, cb);
        cudaMemset(dvc, 0, cb);
        CHECK_MSG(sl_cuda_qk_rope_store(c, dq, dk, dv, T, H, Hk, D, norm ? dqw : NULL,
                                        norm ? dkw : NULL, 1e-6f, dpos, &p, f16, dkc, dvc,
                                        &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(gq, dq, (size_t)nq * 4);
        d2h(gkc, dkc, cb);
        d2h(gvc, dvc, cb);
        if (norm) {
            for (int64_t h = 0; h < T * H; h++) sl_ref_rms_norm(q + h * D, qw, q + h * D, D, 1e-6f, false, &e);
            for (int64_t h = 0; h < T * Hk; h++) sl_ref_rms_norm(k + h * D, kw, k + h * D, D, 1e-6f, false, &e);
        }
        CHECK(sl_ref_rope(q, T, H, D, pos, &p, &e) == SL_OK && sl_ref_rope(k, T, Hk, D, pos, &p, &e) == SL_OK);
        double qmax = 0;
        for (int64_t i = 0; i < nq; i++) qmax = fmax(qmax, fabs(q[i]));
        for (int64_t i = 0; i < nq; i++)
            REPORT(fabs(gq[i] - q[i]) <= 4e-6 + 1e-5 * qmax, "qk_rope_store %d q[%lld]: %g vs %g",
                   variant, (long long)i, (double)gq[i], (double)q[i]);
        for (int32_t t = 0; t < T; t++)
            for (int64_t j = 0; j < row; j++) {
                const int64_t at = (int64_t)pos[t] * row + j;
                const float rk = k[t * row + j], rv = v[t * row + j];
                const float ck = f16 ? sl_quant_fp16_to_fp32(((uint16_t *)gkc)[at]) : ((float *)gkc)[at];
                const float cv = f16 ? sl_quant_fp16_to_fp32(((uint16_t *)gvc)[at]) : ((float *)gvc)[at];
                const double tk = (f16 ? fabs(rk) / 1024 : 0) + 4e-6 + 1e-5 * qmax;
                REPORT(fabs(ck - rk) <= tk, "qk_rope_store %d k cache [%d][%lld]: %g vs %g", variant, t,
                       (long long)j, (double)ck, (double)rk);
                REPORT(f16 ? ((uint16_t *)gvc)[at] == sl_quant_fp32_to_fp16(rv) : cv == rv,
                       "qk_rope_store %d v cache [%d][%lld]: %g vs %g", variant, t, (long long)j,
                       (double)cv, (double)rv);
            }
        free(q), free(k), free(v), free(qw), free(kw), free(gq), free(gkc), free(gvc);
        cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dqw), cudaFree(dkw), cudaFree(dpos);
        cudaFree(dkc), cudaFree(dvc);
    }
    CHECK(sl_cuda_qk_rope_store(c, NULL, NULL, NULL, 1, 4, 2, 64, NULL, NULL, 1e-6f, NULL,
                                NULL, false, NULL, NULL, &e) == SL_ERR_INVALID);

    /* fused residual add + rms_norm: x bit-exact as the element-wise add, y as rms_norm */
    {
        const int64_t R = 3, n = 1029;
        float *x = xmalloc((size_t)(R * n) * 4), *t = xmalloc((size_t)(R * n) * 4);
        float *w = xmalloc((size_t)n * 4), *gx = xmalloc((size_t)(R * n) * 4), *gy = xmalloc((size_t)(R * n) * 4);
        for (int64_t i = 0; i < R * n; i++) x[i] = rnd_f(-3, 3), t[i] = rnd_f(-3, 3);
        for (int64_t i = 0; i < n; i++) w[i] = rnd_f(0.5f, 1.5f);
        float *dx = dup_d(x, R * n), *dt = dup_d(t, R * n), *dw = dup_d(w, n), *dy = dmalloc((size_t)(R * n) * 4);
        CHECK_MSG(sl_cuda_add_rms_norm(c, dx, dt, dw, dy, R, n, 1e-5f, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(gx, dx, (size_t)(R * n) * 4);
        d2h(gy, dy, (size_t)(R * n) * 4);
        for (int64_t r = 0; r < R; r++) {
            for (int64_t i = 0; i < n; i++) x[r * n + i] = x[r * n + i] + t[r * n + i];
            float *ref = t + r * n; /* t is spent */
            sl_ref_rms_norm(x + r * n, w, ref, n, 1e-5f, false, &e);
            double mx = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(ref[i]));
            for (int64_t i = 0; i < n; i++) {
                REPORT(gx[r * n + i] == x[r * n + i], "add_rms_norm x [%lld][%lld]", (long long)r, (long long)i);
                REPORT(fabs(gy[r * n + i] - ref[i]) <= 1e-5 * mx, "add_rms_norm y [%lld][%lld]: %g vs %g",
                       (long long)r, (long long)i, (double)gy[r * n + i], (double)ref[i]);
            }
        }
        free(x), free(t), free(w), free(gx), free(gy);
        cudaFree(dx), cudaFree(dt), cudaFree(dw), cudaFree(dy);
    }
    CHECK(sl_cuda_add_rms_norm(c, NULL, NULL, NULL, NULL, 1, 8, 1e-5f, &e) == SL_ERR_INVALID);

    /* softmax: scale, a mask with -inf entries, one fully masked row (zeros) */
    {
        const int64_t R = 4, n = 1000;
        float *x = xmalloc((size_t)(R * n) * 4), *m = xmalloc((size_t)(R * n) * 4), *y = xmalloc((size_t)(R * n) * 4);
        for (int64_t i = 0; i < R * n; i++) {
            x[i] = rnd_f(-10, 10);
            m[i] = (i % 5 == 0) ? -INFINITY : rnd_f(-1, 0);
        }
        for (int64_t i = 2 * n; i < 3 * n; i++) m[i] = -INFINITY;
        float *dx = dup_d(x, R * n), *dm = dup_d(m, R * n);
        CHECK_MSG(sl_cuda_softmax(c, dx, R, n, 0.7f, dm, n, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(y, dx, (size_t)(R * n) * 4);
        for (int64_t r = 0; r < R; r++) {
            sl_ref_softmax(x + r * n, n, 0.7f, m + r * n, &e);
            for (int64_t i = 0; i < n; i++)
                REPORT(fabs(y[r * n + i] - x[r * n + i]) <= 1e-5 * fabs(x[r * n + i]) + 1e-7,
                       "softmax row %lld [%lld]: %g vs %g", (long long)r, (long long)i,
                       (double)y[r * n + i], (double)x[r * n + i]);
        }
        free(x), free(m), free(y);
        cudaFree(dx), cudaFree(dm);
    }

    /* activations and elementwise */
    {
        const int64_t n = 5003;
        float *g = xmalloc((size_t)n * 4), *u = xmalloc((size_t)n * 4), *y = xmalloc((size_t)n * 4), *ref = xmalloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) g[i] = rnd_f(-12, 12), u[i] = rnd_f(-2, 2);
        float *dg = dup_d(g, n), *du = dup_d(u, n), *dy = dmalloc((size_t)n * 4);
        for (int op = 0; op < 7; op++) {
            sl_status st;
            if (op == 0) st = sl_cuda_swiglu(c, dg, du, dy, n, &e), sl_ref_swiglu(g, u, ref, n, &e);
            else if (op == 1) st = sl_cuda_geglu(c, dg, du, dy, n, SL_GELU_TANH, &e), sl_ref_geglu(g, u, ref, n, SL_GELU_TANH, &e);
            else if (op == 2) st = sl_cuda_geglu(c, dg, du, dy, n, SL_GELU_ERF, &e), sl_ref_geglu(g, u, ref, n, SL_GELU_ERF, &e);
            else if (op == 3) st = sl_cuda_add(c, dg, du, dy, n, &e), sl_ref_add(g, u, ref, n, &e);
            else if (op == 4) st = sl_cuda_mul(c, dg, du, dy, n, &e), sl_ref_mul(g, u, ref, n, &e);
            else if (op == 6)
                st = sl_cuda_swiglu_oai(c, dg, du, dy, n, SL_OAI_ALPHA, 1.5f, &e),
                sl_ref_swiglu_oai(g, u, ref, n, SL_OAI_ALPHA, 1.5f, &e);
            else {
                h2d(dy, g, (size_t)n * 4);
                memcpy(ref, g, (size_t)n * 4);
                st = sl_cuda_scale(c, dy, n, 0.37f, &e), sl_ref_scale(ref, n, 0.37f, &e);
            }
            CHECK_MSG(st == SL_OK, "op %d: %s", op, e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(y, dy, (size_t)n * 4);
            for (int64_t i = 0; i < n; i++) {
                const bool exact = op >= 3 && op <= 5;
                const double tol =
                    exact ? 0.0 : 1e-5 * fabs(ref[i]) + 1e-6 * fabs(u[i]) * (1 + fabs(g[i]));
                REPORT(fabs(y[i] - ref[i]) <= tol, "elementwise op %d [%lld]: %a vs %a", op,
                       (long long)i, (double)y[i], (double)ref[i]);
            }
        }
        free(g), free(u), free(y), free(ref);
        cudaFree(dg), cudaFree(du), cudaFree(dy);
    }

    /* router: three gatings, bias, renorm, weight scale; E = 8, 60, 128; then (variants 6-9)
     * deepseek2's group limit: sigmoid + bias + renorm + scale over 64 experts in 8 groups
     * (top 3, 1, 8) and 60 in 60 groups of one (top 4) */
    for (int variant = 0; variant < 10; variant++) {
        const int32_t Ev[3] = {8, 60, 128}, T = 5;
        const bool grp = variant >= 6;
        const int32_t E = grp ? (variant == 9 ? 60 : 64) : Ev[variant % 3];
        const int32_t k = variant % 3 == 0 && !grp ? 2 : 8;
        float *lg = xmalloc((size_t)(T * E) * 4), *bias = xmalloc((size_t)E * 4);
        for (int i = 0; i < T * E; i++) lg[i] = rnd_f(-4, 4);
        for (int i = 0; i < E; i++) bias[i] = rnd_f(-0.1f, 0.1f);
        float *dl = dup_d(lg, T * E), *db = dup_d(bias, E), *dw = dmalloc((size_t)(T * k) * 4);
        int32_t *di = dmalloc((size_t)(T * k) * 4);
        sl_router_params p = {.gating = grp ? SL_GATING_SIGMOID : (sl_gating)(variant % 3),
                              .n_expert = E, .k = k,
                              .norm_topk = variant >= 3, .bias = variant >= 3 ? db : NULL,
                              .weight_scale = variant == 4 || grp ? 2.5f : 1.0f,
                              .n_group = grp ? (variant == 9 ? 60 : 8) : 0,
                              .top_group = variant == 6 ? 3 : variant == 7 ? 1 : variant == 8 ? 8 : 4};
        CHECK_MSG(sl_cuda_router_topk(c, dl, T, &p, di, dw, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        int32_t gi[8 * 5], ri[8];
        float gw[8 * 5], rw[8];
        d2h(gi, di, (size_t)(T * k) * 4);
        d2h(gw, dw, (size_t)(T * k) * 4);
        p.bias = variant >= 3 ? bias : NULL;
        for (int t = 0; t < T; t++) {
            CHECK_MSG(sl_ref_router_topk(lg + t * E, &p, ri, rw, &e) == SL_OK, "%s", e.msg);
            for (int j = 0; j < k; j++) {
                REPORT(gi[t * k + j] == ri[j], "router variant %d token %d [%d]: %d vs %d", variant, t, j, gi[t * k + j], ri[j]);
                REPORT(fabs(gw[t * k + j] - rw[j]) <= 1e-6 * fabs(rw[j]) + 1e-7, "router weight %g vs %g",
                       (double)gw[t * k + j], (double)rw[j]);
            }
        }
        free(lg), free(bias);
        cudaFree(dl), cudaFree(db), cudaFree(dw), cudaFree(di);
    }

    /* greedy pick: random rows (a 262k vocabulary and a ragged 1000), ties at the maximum,
     * -inf masks, NaN / +inf reported at their lowest index; the reference decides */
    for (int variant = 0; variant < 6; variant++) {
        const int64_t n = variant < 3 ? 262144 : 1000;
        float *x = xmalloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) x[i] = rnd_f(-30, 30);
        if (variant == 1 || variant == 4) x[n / 3] = x[n - 1] = x[7] = 31.0f; /* ties: 7 */
        if (variant == 2) x[5] = INFINITY, x[n - 2] = NAN;
        if (variant == 5) for (int64_t i = 0; i < n; i++) x[i] = i == 999 ? -1.0f : -INFINITY;
        float *dx = dup_d(x, n);
        sl_argmax_result *dr = dmalloc(sizeof *dr), got, want;
        CHECK_MSG(sl_cuda_argmax(c, dx, n, dr, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(&got, dr, sizeof got);
        CHECK(sl_ref_argmax(x, n, &want, &e) == SL_OK);
        REPORT(got.best == want.best && got.bad == want.bad && got.bad_bits == want.bad_bits,
               "argmax variant %d: (%d, %d, %08x) vs the reference (%d, %d, %08x)", variant,
               got.best, got.bad, got.bad_bits, want.best, want.bad, want.bad_bits);
        free(x);
        cudaFree(dx), cudaFree(dr);
    }
    CHECK(sl_cuda_argmax(c, NULL, 5, (sl_argmax_result *)&e, &e) == SL_ERR_INVALID);

    /* decode attention: F32 / F16 KV, GQA, window, softcap, sinks, head dims 64 / 80 / 128;
     * variants 8-9: deepseek2's MLA shape, 8 heads on one latent head of 576 (F32, F16) */
    for (int variant = 0; variant < 10; variant++) {
        const int32_t Dv[3] = {64, 80, 128}, npv[4] = {1, 37, 1000, 333};
        const bool mla = variant >= 8;
        sl_attn_params p = {.n_head = 8, .n_kv_head = mla ? 1 : variant & 1 ? 2 : 8,
                            .head_dim = mla ? 576 : Dv[variant % 3],
                            .n_pos = npv[variant % 4], .scale = variant == 5 ? 0.1f : 0.0f,
                            .window = variant >= 6 ? 100 : 0, .softcap = variant == 4 ? 30.0f : 0.0f,
                            .kv_type = variant & 2 ? SL_KV_F16 : SL_KV_F32};
        const int64_t nq = (int64_t)p.n_head * p.head_dim, nkv = (int64_t)p.n_pos * p.n_kv_head * p.head_dim;
        const size_t es = p.kv_type == SL_KV_F16 ? 2 : 4;
        float *q = xmalloc((size_t)nq * 4), *o = xmalloc((size_t)nq * 4), *ref = xmalloc((size_t)nq * 4);
        float sinks[8];
        void *k = xmalloc((size_t)nkv * es), *v = xmalloc((size_t)nkv * es);
        double vmax = 0;
        for (int64_t i = 0; i < nq; i++) q[i] = rnd_f(-1, 1);
        for (int i = 0; i < 8; i++) sinks[i] = rnd_f(-2, 2);
        for (int64_t i = 0; i < nkv; i++) {
            const float kf = rnd_f(-1, 1), vf = rnd_f(-1, 1);
            if (es == 2) {
                ((uint16_t *)k)[i] = sl_quant_fp32_to_fp16(kf);
                ((uint16_t *)v)[i] = sl_quant_fp32_to_fp16(vf);
            } else {
                ((float *)k)[i] = kf;
                ((float *)v)[i] = vf;
            }
            vmax = fmax(vmax, fabs(vf));
        }
        float *dq = dup_d(q, nq), *do_ = dmalloc((size_t)nq * 4), *ds = dup_d(sinks, 8);
        void *dk = dmalloc((size_t)nkv * es), *dv = dmalloc((size_t)nkv * es);
        h2d(dk, k, (size_t)nkv * es);
        h2d(dv, v, (size_t)nkv * es);
        sl_attn_params dp = p;
        if (variant == 7) dp.sinks = ds, p.sinks = sinks;
        CHECK_MSG(sl_cuda_attn_decode(c, dq, dk, dv, &dp, do_, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(o, do_, (size_t)nq * 4);
        CHECK_MSG(sl_ref_attn_decode(q, k, v, &p, ref, &e) == SL_OK, "%s", e.msg);
        for (int64_t i = 0; i < nq; i++)
            REPORT(fabs(o[i] - ref[i]) <= 2e-5 * vmax + 1e-5 * fabs(ref[i]), "attn variant %d [%lld]: %g vs %g",
                   variant, (long long)i, (double)o[i], (double)ref[i]);
        free(q), free(o), free(ref), free(k), free(v);
        cudaFree(dq), cudaFree(do_), cudaFree(ds), cudaFree(dk), cudaFree(dv);
    }
}

/* kernels/cuda/fwd.h against plain C loops in float (the sim executor's definitions). */
static void test_fwd(sl_cuda_ctx *c)
{
    sl_error e;
    const int64_t R = 5, D = 1029, NCTX = 16, K = 4;
    float *y = xmalloc((size_t)(R * D) * 4), *b = xmalloc((size_t)D * 4);
    float *out = xmalloc((size_t)(R * D) * 4);
    for (int64_t i = 0; i < R * D; i++) y[i] = rnd_f(-2, 2);
    for (int64_t i = 0; i < D; i++) b[i] = rnd_f(-1, 1);
    /* add_rows */
    float *dy = dup_d(y, R * D), *db = dup_d(b, D);
    CHECK(sl_cuda_add_rows(c, dy, db, R, D, &e) == SL_OK);
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    d2h(out, dy, (size_t)(R * D) * 4);
    int bad = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < D; j++) bad += out[r * D + j] != y[r * D + j] + b[j];
    CHECK_MSG(bad == 0, "add_rows: %d mismatches", bad);
    /* kv_store, F32 and F16, positions out of order */
    const int32_t pos[5] = {7, 0, 15, 3, 8};
    int32_t *dpos = dmalloc(sizeof pos);
    h2d(dpos, pos, sizeof pos);
    for (int f16 = 0; f16 < 2; f16++) {
        const size_t elt = f16 ? 2 : 4;
        uint8_t *dc = dmalloc((size_t)(NCTX * D) * elt);
        CHECK(cudaMemset(dc, 0, (size_t)(NCTX * D) * elt) == cudaSuccess);
        float *dsrc = dup_d(y, R * D);
        CHECK(sl_cuda_kv_store(c, dsrc, dpos, R, D, f16, dc, &e) == SL_OK);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        uint8_t *hc = xmalloc((size_t)(NCTX * D) * elt);
        d2h(hc, dc, (size_t)(NCTX * D) * elt);
        bad = 0;
        for (int64_t t = 0; t < R; t++)
            for (int64_t j = 0; j < D; j++) {
                const size_t at = (size_t)pos[t] * (size_t)D + (size_t)j;
                if (f16) bad += ((uint16_t *)hc)[at] != sl_quant_fp32_to_fp16(y[t * D + j]);
                else bad += ((float *)hc)[at] != y[t * D + j];
            }
        CHECK_MSG(bad == 0, "kv_store f16=%d: %d mismatches", f16, bad);
        CHECK(((float *)hc)[1 * D] == 0 || f16); /* row 1 untouched */
        free(hc);
        cudaFree(dc);
        cudaFree(dsrc);
    }
    cudaFree(dpos);
    /* moe_combine: R tokens x K experts, y [R*K][D] */
    float *ey = xmalloc((size_t)(R * K * D) * 4), *w = xmalloc((size_t)(R * K) * 4);
    int32_t idx[5 * 4];
    for (int64_t i = 0; i < R * K * D; i++) ey[i] = rnd_f(-3, 3);
    for (int64_t i = 0; i < R * K; i++) {
        w[i] = rnd_f(0, 1);
        idx[i] = (int32_t)(rnd_u32() % 64);
    }
    float *dey = dup_d(ey, R * K * D), *dw = dup_d(w, R * K), *dout = dmalloc((size_t)(R * D) * 4);
    int32_t *didx = dmalloc(sizeof idx);
    h2d(didx, idx, sizeof idx);
    CHECK(sl_cuda_moe_combine(c, dey, didx, dw, R, (int32_t)K, D, dout, &e) == SL_OK);
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    d2h(out, dout, (size_t)(R * D) * 4);
    bad = 0;
    for (int64_t t = 0; t < R; t++) {
        int order[4] = {0, 1, 2, 3};
        for (int i = 1; i < K; i++) /* stable insertion sort by expert id */
            for (int j = i; j > 0 && idx[t * K + order[j - 1]] > idx[t * K + order[j]]; j--) {
                const int s = order[j];
                order[j] = order[j - 1];
                order[j - 1] = s;
            }
        for (int64_t j = 0; j < D; j++) {
            float acc = 0.0f;
            for (int i = 0; i < K; i++) {
                const float p = w[t * K + order[i]] * ey[(t * K + order[i]) * D + j];
                acc = acc + p;
            }
            bad += out[t * D + j] != acc;
        }
    }
    CHECK_MSG(bad == 0, "moe_combine: %d mismatches", bad);
    CHECK(sl_cuda_moe_combine(c, dey, didx, dw, R, 0, D, dout, &e) == SL_ERR_INVALID);
    /* expert_bias: rows R (ids of 4 experts), whole experts (bias [4][D]) and per-expert
     * widths 300, 0, 729, 471 (bias [1500]) */
    {
        const int64_t ff_at[5] = {0, 300, 300, 1029, 1500};
        const int32_t ids[5] = {2, 0, 3, 1, 3};
        float *eb = xmalloc((size_t)(4 * D) * 4);
        for (int64_t i = 0; i < 4 * D; i++) eb[i] = rnd_f(-1, 1);
        float *deb = dup_d(eb, 4 * D);
        int64_t *dat = dmalloc(sizeof ff_at);
        int32_t *dids = dmalloc(sizeof ids);
        h2d(dat, ff_at, sizeof ff_at);
        h2d(dids, ids, sizeof ids);
        for (int parts = 0; parts < 2; parts++) {
            float *dyb = dup_d(y, R * D);
            CHECK(sl_cuda_expert_bias(c, dyb, deb, parts ? dat : NULL, 4, dids, (int32_t)R, D,
                                      &e) == SL_OK);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(out, dyb, (size_t)(R * D) * 4);
            bad = 0;
            for (int64_t i = 0; i < R; i++) {
                const int32_t x = ids[i];
                const int64_t at = parts ? ff_at[x] : x * D, w = parts ? ff_at[x + 1] - at : D;
                for (int64_t j = 0; j < D; j++)
                    bad += out[i * D + j] != (j < w ? y[i * D + j] + eb[at + j] : y[i * D + j]);
            }
            CHECK_MSG(bad == 0, "expert_bias (parts %d): %d mismatches", parts, bad);
            cudaFree(dyb);
        }
        CHECK(sl_cuda_expert_bias(c, dy, NULL, NULL, 4, dids, (int32_t)R, D, &e) ==
              SL_ERR_INVALID);
        CHECK(sl_cuda_expert_bias(c, dy, deb, NULL, 0, dids, (int32_t)R, D, &e) ==
              SL_ERR_INVALID);
        cudaFree(deb);
        cudaFree(dat);
        cudaFree(dids);
        free(eb);
    }
    /* copy2d: rows of 5 of y [R][D] into a wider destination, exact; the gaps untouched */
    {
        const int64_t W = 5, DS = 9;
        float *dst = xmalloc((size_t)(R * DS) * 4);
        for (int64_t i = 0; i < R * DS; i++) dst[i] = -7.0f;
        float *dd = dup_d(dst, R * DS), *ds = dup_d(y, R * D);
        CHECK(sl_cuda_copy2d(c, dd, DS, ds + 3, D, R, W, &e) == SL_OK);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(dst, dd, (size_t)(R * DS) * 4);
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < DS; j++)
                REPORT(dst[r * DS + j] == (j < W ? y[r * D + 3 + j] : -7.0f),
                       "copy2d [%lld][%lld]: %g", (long long)r, (long long)j,
                       (double)dst[r * DS + j]);
        cudaFree(dd);
        cudaFree(ds);
        free(dst);
    }
    /* gated_add */
    float logit[5];
    for (int t = 0; t < R; t++) logit[t] = rnd_f(-4, 4);
    float *dl = dup_d(logit, R), *dacc = dup_d(y, R * D);
    CHECK(sl_cuda_gated_add(c, dacc, dey, dl, R, D, &e) == SL_OK);
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    d2h(out, dacc, (size_t)(R * D) * 4);
    double worst = 0;
    for (int64_t t = 0; t < R; t++) {
        const double g = 1.0 / (1.0 + exp(-(double)logit[t]));
        for (int64_t j = 0; j < D; j++) {
            const double ref = y[t * D + j] + g * ey[t * D + j];
            /* relative to the operands, not the sum: where y and g*ey nearly cancel, the F32
             * rounding of the O(1) operands dominates and |ref| says nothing of the kernel */
            const double scale = fabs((double)y[t * D + j]) + fabs(g * ey[t * D + j]) + 1e-6;
            const double d = fabs(out[t * D + j] - ref) / scale;
            if (d > worst) worst = d;
        }
    }
    CHECK_MSG(worst <= 1e-5, "gated_add: rel err %g", worst);
    cudaFree(dy);
    cudaFree(db);
    cudaFree(dey);
    cudaFree(dw);
    cudaFree(dout);
    cudaFree(didx);
    cudaFree(dl);
    cudaFree(dacc);
    free(y);
    free(b);
    free(out);
    free(ey);
    free(w);
}

int main(void)
{
    test_host_side();

    sl_error e;
    int n = 0;
    if (sl_cuda_probe(&n, &e) != SL_OK) {
        CHECK(e.code == SL_ERR_DEVICE || e.code == SL_ERR_NOT_FOUND);
        CHECK(e.msg[0] != '\0');
        sl_error e2;
        sl_cuda_ctx *c = (sl_cuda_ctx *)(uintptr_t)1;
        CHECK(sl_cuda_ctx_create(0, NULL, &c, &e2) != SL_OK);
        CHECK(c == NULL);
        CHECK_CONTAINS(e2.msg, "kernels/cuda/ctx.cu:");
        printf("cuda_kernels_test: SKIPPED, no usable GPU (%s)\n", e.msg);
        return sl_test_finish("cuda_kernels_test");
    }
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    sl_cuda_ctx *c = NULL;
    if (sl_cuda_ctx_create(0, s, &c, &e) != SL_OK) {
        CHECK_MSG(false, "ctx: %s", e.msg);
        return sl_test_finish("cuda_kernels_test");
    }
    sl_cuda_ctx_info info;
    sl_cuda_ctx_info_get(c, &info);
    printf("cuda_kernels_test: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major, info.cc_minor, info.sm_count);
    test_dequant(c);
    for (int q8 = 0; q8 < 2; q8++) {
        g_q8act = q8;
        sl_cuda_ctx_set_f32_act(c, !q8);
        test_gemv(c);
        test_gemv_rows_experts(c);
        test_gemv_expert_parts(c);
    }
    test_gemm(c);
    test_ops(c);
    test_fwd(c);
    CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
    sl_cuda_ctx_destroy(c);
    cudaStreamDestroy(s);
    return sl_test_finish("cuda_kernels_test");
}
