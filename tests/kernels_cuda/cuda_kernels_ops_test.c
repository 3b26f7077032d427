/* tests/kernels_cuda/cuda_kernels_ops_test.c: the element-wise, norm, rope, router and attention
 * kernels of kernels/cuda (ops.h) and the forward glue (fwd.h) against kernels/ref and plain C
 * loops; without a GPU, their argument validation (cuda_kernels_harness.h: the two modes). The
 * CPU twin that runs in CI is //tests/kernels:ops_test (kernels/cpu against kernels/ref/ops.h).
 * The matrix kernels: cuda_kernels_matmul_test.c.
 *
 * What is checked, and the tolerance of each (ops_tol.h and attn_tol.h hold the rules, shared
 * with the host tests of the kernels' bodies):
 * - rms_norm: <= 1e-5 x max |ref| of the row; rope: <= 4e-6 x max |x|; the fused q/k norm +
 *   rope + KV store and add + rms_norm (issue 32) within the sum of their parts' tolerances;
 *   softmax: <= 1e-5 |ref| + 1e-7; swiglu / geglu / swiglu_oai (limit 1.5: both clamps bite):
 *   <= 1e-5 |ref| + 1e-6 |up| (1 + |gate|); add, mul, scale: bit-exact;
 *   router (also group-limited): indices exact, weights <= 1e-6 |ref| + 1e-7; attention (also
 *   head_dim 576, MLA's): <= 2e-5 max |v| + 1e-5 |ref| (attn_tol.h).
 * - forward glue (fwd.h): add_rows, kv_store (F32 and F16), moe_combine (ascending expert
 *   order, as the CPU scheduler sums), expert_bias (whole experts and per-expert widths with
 *   an empty one; entries past a width untouched), copy2d bit-exact vs C loops in float; gated_add
 *   <= 1e-6 |ref|.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/fwd.h"
#include "kernels/cuda/ops.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quant.h"
#include "tests/kernels_cuda/attn_tol.h"
#include "tests/kernels_cuda/ops_tol.h"
#include "tests/kernels_cuda/cuda_kernels_harness.h"

/* ---- no GPU: validation and clean errors --------------------------------------------------- */

static void test_host_side(void)
{
    sl_error e;
    float *p = (float *)(uintptr_t)64; /* never dereferenced: validation fails first */
    sl_rope_params rp = sl_rope_params_make(SL_ROPE_NEOX, 3, 10000.0f);
    CHECK(sl_cuda_rope(NULL, p, 1, 1, 8, (const int32_t *)p, &rp, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_rot");
    sl_attn_params ap = {.n_head = 6, .n_kv_head = 4, .head_dim = 64, .n_pos = 1};
    CHECK(sl_cuda_attn_decode(NULL, p, p, p, &ap, p, &e) == SL_ERR_INVALID);
    ap.n_kv_head = 2;
    ap.head_dim = SL_CUDA_ATTN_MAX_HEAD_DIM + 1;
    CHECK(sl_cuda_attn_decode(NULL, p, p, p, &ap, p, &e) == SL_ERR_UNSUPPORTED);
    ap.head_dim = 64;
    const int32_t *pp = (const int32_t *)p;
    CHECK(sl_cuda_attn_at(NULL, p, p, p, &ap, pp, 0, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_tok");
    CHECK(sl_cuda_attn_at(NULL, p, p, p, &ap, pp, 65536, p, &e) == SL_ERR_INVALID);
    CHECK(sl_cuda_attn_at(NULL, p, p, p, &ap, pp, 4, p, &e) == SL_ERR_INVALID); /* no ctx */
    CHECK_CONTAINS(e.msg, "ctx");
    ap.n_pos = 0; /* unused beside device positions: still only the context is missing */
    CHECK(sl_cuda_attn_at(NULL, p, p, p, &ap, pp, 4, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "ctx");
    ap.n_pos = 1;
    CHECK(sl_cuda_attn_at(NULL, p, p, p, &ap, NULL, 4, p, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "d_pos");
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
                    REPORT(rms_norm_close(y[r * n + i], ref[i], mx),
                           "rms_norm n %lld [%lld]: %g vs %g",
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
            REPORT(rope_close(y[i], x[i]), "rope variant %d [%d]: %g vs %g", variant, i,
                   (double)y[i], (double)x[i]);
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
            REPORT(qk_rope_close(gq[i], q[i], qmax, 0), "qk_rope_store %d q[%lld]: %g vs %g",
                   variant, (long long)i, (double)gq[i], (double)q[i]);
        for (int32_t t = 0; t < T; t++)
            for (int64_t j = 0; j < row; j++) {
                const int64_t at = (int64_t)pos[t] * row + j;
                const float rk = k[t * row + j], rv = v[t * row + j];
                const float ck = f16 ? sl_quant_fp16_to_fp32(((uint16_t *)gkc)[at]) : ((float *)gkc)[at];
                const float cv = f16 ? sl_quant_fp16_to_fp32(((uint16_t *)gvc)[at]) : ((float *)gvc)[at];
                REPORT(qk_rope_close(ck, rk, qmax, f16 ? fabs(rk) / 1024 : 0),
                       "qk_rope_store %d k cache [%d][%lld]: %g vs %g", variant, t,
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
                REPORT(rms_norm_close(gy[r * n + i], ref[i], mx),
                       "add_rms_norm y [%lld][%lld]: %g vs %g",
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
                REPORT(softmax_close(y[r * n + i], x[r * n + i]),
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
                REPORT(exact ? y[i] == ref[i] : glu_close(y[i], ref[i], g[i], u[i]),
                       "elementwise op %d [%lld]: %a vs %a", op, (long long)i, (double)y[i],
                       (double)ref[i]);
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
                REPORT(router_w_close(gw[t * k + j], rw[j]), "router weight %g vs %g",
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
     * variants 8-9: deepseek2's MLA shape, 8 heads on one latent head of 576 (F32, F16), 9 with
     * Mistral Large 3's temperature (through attn_launch's copy of it) */
    for (int variant = 0; variant < 10; variant++) {
        const int32_t Dv[3] = {64, 80, 128}, npv[4] = {1, 37, 1000, 333};
        const bool mla = variant >= 8;
        sl_attn_params p = {.n_head = 8, .n_kv_head = mla ? 1 : variant & 1 ? 2 : 8,
                            .head_dim = mla ? 576 : Dv[variant % 3],
                            .n_pos = npv[variant % 4], .scale = variant == 5 ? 0.1f : 0.0f,
                            .window = variant >= 6 ? 100 : 0, .softcap = variant == 4 ? 30.0f : 0.0f,
                            .kv_type = variant & 2 ? SL_KV_F16 : SL_KV_F32,
                            .temp_scale = variant == 9 ? 0.5f : 0.0f, .temp_len = 8};
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
            REPORT(attn_close(o[i], ref[i], vmax), "attn variant %d [%lld]: %g vs %g",
                   variant, (long long)i, (double)o[i], (double)ref[i]);
        free(q), free(o), free(ref), free(k), free(v);
        cudaFree(dq), cudaFree(do_), cudaFree(ds), cudaFree(dk), cudaFree(dv);
    }

    /* attention at positions read on the device (sl_cuda_attn_at): NT tokens in one launch,
     * at consecutive positions (a prefill chunk) and in reverse order with their q rows (and a
     * stale host n_pos), give the bits of NT decode launches, with a window (variant 1) and
     * sinks (variant 2) per token, F16 KV and GQA (variant 3), separate K and V caches; and
     * MLA (variant 4: 16 heads over one 576-wide latent row, V the K rows) */
    for (int variant = 0; variant < 5; variant++) {
        enum { NT = 37, NPOS = 300 };
        const bool mla = variant == 4;
        sl_attn_params p = {.n_head = mla ? 16 : 8,
                            .n_kv_head = variant == 3 ? 2 : mla ? 1 : 8,
                            .head_dim = mla ? 576 : 128,
                            .n_pos = NPOS - NT + 1, .window = variant == 1 ? 50 : 0,
                            .kv_type = variant >= 3 ? SL_KV_F16 : SL_KV_F32};
        const int64_t nq = (int64_t)NT * p.n_head * p.head_dim,
                      nkv = (int64_t)NPOS * p.n_kv_head * p.head_dim;
        const size_t es = p.kv_type == SL_KV_F16 ? 2 : 4;
        float *q = xmalloc((size_t)nq * 4), *o1 = xmalloc((size_t)nq * 4);
        float *on = xmalloc((size_t)nq * 4), sinks[8];
        uint8_t *kv = xmalloc((size_t)nkv * es);
        for (int64_t i = 0; i < nq; i++) q[i] = rnd_f(-1, 1);
        for (int i = 0; i < 8; i++) sinks[i] = rnd_f(-2, 2);
        for (size_t i = 0; i < (size_t)nkv * es; i++) kv[i] = (uint8_t)(rnd_f(0, 1) * 60); /* finite */
        float *dq = dup_d(q, nq), *dop = dmalloc((size_t)nq * 4), *dod = dmalloc((size_t)nq * 4);
        float *ds = dup_d(sinks, 8);
        void *dk = dmalloc((size_t)nkv * es), *dvb = NULL, *dv = dk;
        h2d(dk, kv, (size_t)nkv * es);
        if (!mla) { /* a V cache of its own: the bytes in reverse */
            for (size_t i = 0; i < (size_t)nkv * es / 2; i++) {
                const uint8_t t = kv[i];
                kv[i] = kv[(size_t)nkv * es - 1 - i], kv[(size_t)nkv * es - 1 - i] = t;
            }
            dv = dvb = dmalloc((size_t)nkv * es);
            h2d(dv, kv, (size_t)nkv * es);
        }
        if (variant == 2) p.sinks = ds;
        const int64_t qd = (int64_t)p.n_head * p.head_dim;
        for (int t = 0; t < NT; t++) {
            sl_attn_params pt = p;
            pt.n_pos = p.n_pos + t;
            CHECK_MSG(sl_cuda_attn_decode(c, dq + t * qd, dk, dv, &pt, dod + t * qd, &e) == SL_OK,
                      "%s", e.msg);
        }
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(on, dod, (size_t)nq * 4);
        int32_t pos[NT], *dpos = (int32_t *)dmalloc(sizeof pos);
        float *qr = xmalloc((size_t)nq * 4), *dqr = dmalloc((size_t)nq * 4);
        for (int rev = 0; rev < 2; rev++) {
            for (int t = 0; t < NT; t++) { /* token t of the launch is decode token s */
                const int s = rev ? NT - 1 - t : t;
                pos[t] = p.n_pos - 1 + s;
                memcpy(qr + t * qd, q + s * qd, (size_t)qd * 4);
            }
            h2d(dpos, pos, sizeof pos);
            h2d(dqr, qr, (size_t)nq * 4);
            sl_attn_params pa = p;
            if (rev) pa.n_pos = 1; /* stale: the device's positions rule */
            /* the F32-activation mode: the decode kernel per token, its bits */
            sl_cuda_ctx_set_f32_act(c, true);
            CHECK_MSG(sl_cuda_attn_at(c, dqr, dk, dv, &pa, dpos, NT, dop, &e) == SL_OK, "%s",
                      e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(o1, dop, (size_t)nq * 4);
            int bad = 0;
            for (int t = 0; t < NT; t++)
                bad += memcmp(o1 + t * qd, on + (rev ? NT - 1 - t : t) * qd, (size_t)qd * 4) != 0;
            CHECK_MSG(bad == 0, "attn at positions (%s) variant %d: %d of %d tokens differ from "
                      "decode launches", rev ? "reversed" : "consecutive", variant, bad, (int)NT);
            /* the default: the tiled prefill kernel on the tensor cores (attn_prefill.cuh),
             * F16 operands: within 3e-3 of the largest |output| */
            sl_cuda_ctx_set_f32_act(c, false);
            CHECK_MSG(sl_cuda_attn_at(c, dqr, dk, dv, &pa, dpos, NT, dop, &e) == SL_OK, "%s",
                      e.msg);
            CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
            d2h(o1, dop, (size_t)nq * 4);
            double omax = 0.0, worst = 0.0;
            for (int64_t i = 0; i < nq; i++) omax = fmax(omax, fabs((double)on[i]));
            for (int t = 0; t < NT; t++)
                for (int64_t i = 0; i < qd; i++)
                    worst = fmax(worst, fabs((double)o1[t * qd + i] -
                                             on[(rev ? NT - 1 - t : t) * qd + i]));
            CHECK_MSG(worst <= 3e-3 * omax, "attn prefill kernel (%s) variant %d: max |diff| %g "
                      "vs decode launches (max |out| %g)", rev ? "reversed" : "consecutive",
                      variant, worst, omax);
        }
        free(qr);
        CHECK(sl_cuda_attn_at(c, dq, dk, dk, &p, dpos, 0, dop, &e) == SL_ERR_INVALID);
        CHECK_CONTAINS(e.msg, "n_tok");
        cudaFree(dpos), cudaFree(dqr);
        free(q), free(o1), free(on), free(kv);
        cudaFree(dq), cudaFree(dop), cudaFree(dod), cudaFree(ds), cudaFree(dk);
        if (dvb) cudaFree(dvb);
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
    CHECK(sl_cuda_moe_combine(c, dey, NULL, didx, dw, R, (int32_t)K, D, NULL, dout, &e) ==
          SL_OK);
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
    { /* with the residual, in place: res + the combine above, bit for bit */
        float *res = xmalloc((size_t)(R * D) * 4), *got = xmalloc((size_t)(R * D) * 4);
        for (int64_t i = 0; i < R * D; i++) res[i] = rnd_f(-50, 50);
        float *dres = dup_d(res, R * D);
        CHECK(sl_cuda_moe_combine(c, dey, NULL, didx, dw, R, (int32_t)K, D, dres, dres, &e) ==
              SL_OK);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(got, dres, (size_t)(R * D) * 4);
        int rbad = 0;
        for (int64_t i = 0; i < R * D; i++) rbad += got[i] != res[i] + out[i];
        CHECK_MSG(rbad == 0, "moe_combine with the residual in place: %d mismatches", rbad);
        free(res);
        free(got);
        cudaFree(dres);
    }
    /* the same rows split over two buffers by a mask of experts (moe_mask_ids picks the
     * first's slots), zeros in the other: the same bits */
    {
        uint8_t mask[64];
        for (int i = 0; i < 64; i++) mask[i] = (uint8_t)(rnd_u32() & 1);
        float *ya = xmalloc((size_t)(R * K * D) * 4), *yb = xmalloc((size_t)(R * K * D) * 4);
        int32_t got[5 * 4];
        for (int64_t s = 0; s < R * K; s++)
            for (int64_t j = 0; j < D; j++) {
                const bool a = mask[idx[s]];
                ya[s * D + j] = a ? ey[s * D + j] : 0.0f;
                yb[s * D + j] = a ? 0.0f : ey[s * D + j];
            }
        float *dya = dup_d(ya, R * K * D), *dyb = dup_d(yb, R * K * D);
        uint8_t *dmask = dmalloc(sizeof mask);
        int32_t *dids = dmalloc(sizeof got);
        h2d(dmask, mask, sizeof mask);
        float *out2 = xmalloc((size_t)(R * D) * 4);
        CHECK(sl_cuda_moe_combine(c, dya, dyb, didx, dw, R, (int32_t)K, D, NULL, dout, &e) ==
              SL_OK);
        CHECK(sl_cuda_moe_mask_ids(c, didx, dmask, R * K, 64, dids, &e) == SL_OK);
        CHECK(sl_cuda_ctx_sync(c, &e) == SL_OK);
        d2h(out2, dout, (size_t)(R * D) * 4);
        d2h(got, dids, sizeof got);
        CHECK_MSG(!memcmp(out, out2, (size_t)(R * D) * 4), "moe_combine of two buffers: bits "
                  "differ from one buffer's");
        bad = 0;
        for (int64_t s = 0; s < R * K; s++) bad += got[s] != (mask[idx[s]] ? idx[s] : -1);
        CHECK_MSG(bad == 0, "moe_mask_ids: %d wrong ids", bad);
        CHECK(sl_cuda_moe_mask_ids(c, didx, dmask, R * K, 0, dids, &e) == SL_ERR_INVALID);
        free(ya);
        free(yb);
        free(out2);
        cudaFree(dya);
        cudaFree(dyb);
        cudaFree(dmask);
        cudaFree(dids);
    }
    CHECK(sl_cuda_moe_combine(c, dey, NULL, didx, dw, R, 0, D, NULL, dout, &e) ==
          SL_ERR_INVALID);
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
    bad = 0;
    for (int64_t t = 0; t < R; t++) {
        const double g = 1.0 / (1.0 + exp(-(double)logit[t]));
        for (int64_t j = 0; j < D; j++) {
            const double gy = g * ey[t * D + j], ref = y[t * D + j] + gy;
            bad += !gated_add_close(out[t * D + j], ref, y[t * D + j], gy);
        }
    }
    CHECK_MSG(bad == 0, "gated_add: %d values past ops_tol.h's bound", bad);
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

static void on_device(sl_cuda_ctx *c)
{
    test_ops(c);
    test_fwd(c);
}

int main(void)
{
    return cuda_harness_main("cuda_kernels_ops_test", test_host_side, on_device);
}
