/* Tests of kernels/ref/ops, the references (the fast kernels against them: ops_cpu_test.c;
 * shared helpers: ops_testlib.h).
 *
 * 1. Reference sanity against independent facts: closed forms (rms_norm of a constant vector,
 *    attention over one position), invariances (softmax shift, rope pair norms, NeoX = normal up
 *    to pairing, GQA = MHA with repeated KV heads, window = truncated cache) and the documented
 *    routing rules, and argument validation. The numpy cross-check (ops_vs_numpy.py) tests the
 *    definitions themselves.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/ref/half.h"
#include "kernels/ref/ops.h"
#include "tests/kernels/ops_testlib.h"
#include "tests/testing.h"

/* ---- half conversion -------------------------------------------------------------------- */

static void test_half(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const double want = half_value((uint16_t)h);
        const float got = sl_half_to_float((uint16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want || signbit(got) != signbit(want))
            bad++;
    }
    CHECK_MSG(bad == 0, "%d of 65536 halves decode wrongly", bad);
    /* the test's own encoder round-trips every finite half */
    int bad_enc = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 31) == 31) continue;
        if (to_half((float)half_value((uint16_t)h)) != h) bad_enc++;
    }
    CHECK_MSG(bad_enc == 0, "%d finite halves do not re-encode", bad_enc);
}

/* ---- reference sanity ------------------------------------------------------------------- */

static void test_ref_norms(void)
{
    sl_error err;
    float x[37], y[37], w[37], w1[37], y2[37];
    for (int i = 0; i < 37; i++) x[i] = -2.5f;
    CHECK(sl_ref_rms_norm(x, NULL, y, 37, 0.0f, false, &err) == SL_OK);
    for (int i = 0; i < 37; i++) CHECK(y[i] == -1.0f); /* c / sqrt(c^2) */
    CHECK(sl_ref_rms_norm(x, NULL, y, 37, 0.75f, false, &err) == SL_OK);
    CHECK(fabsf(y[0] - (float)(-2.5 / sqrt(6.25 + 0.75))) <= 1e-7f);
    uint64_t rng = 1;
    for (int i = 0; i < 37; i++) {
        x[i] = gauss(&rng);
        w[i] = gauss(&rng);
        w1[i] = 1.0f + w[i];
    }
    CHECK(sl_ref_rms_norm(x, w, y, 37, 1e-6f, true, &err) == SL_OK);
    CHECK(sl_ref_rms_norm(x, w1, y2, 37, 1e-6f, false, &err) == SL_OK);
    close_arr("rms_norm one_plus_w == weight 1 + w", y, y2, 37, 1e-6, 0.0);
    /* scale invariance: rms_norm(a x) == rms_norm(x) with eps 0 */
    float ax[37];
    for (int i = 0; i < 37; i++) ax[i] = 8.0f * x[i];
    CHECK(sl_ref_rms_norm(x, NULL, y, 37, 0.0f, false, &err) == SL_OK);
    CHECK(sl_ref_rms_norm(ax, NULL, y2, 37, 0.0f, false, &err) == SL_OK);
    close_arr("rms_norm scale invariant", y2, y, 37, 1e-7, 0.0);
    /* in place */
    memcpy(y2, x, sizeof x);
    CHECK(sl_ref_rms_norm(y2, NULL, y2, 37, 0.0f, false, &err) == SL_OK);
    close_arr("rms_norm in place", y2, y, 37, 0.0, 0.0);

    /* layer norm without affine: mean 0, variance 1 (eps 0) */
    CHECK(sl_ref_layer_norm(x, NULL, NULL, y, 37, 0.0f, &err) == SL_OK);
    double m = 0, v = 0;
    for (int i = 0; i < 37; i++) m += y[i];
    m /= 37;
    for (int i = 0; i < 37; i++) v += (y[i] - m) * (y[i] - m);
    v /= 37;
    CHECK_MSG(fabs(m) < 1e-6 && fabs(v - 1) < 1e-6, "layer_norm mean %g var %g", m, v);
    /* with affine: w y + b */
    float b[37];
    for (int i = 0; i < 37; i++) b[i] = gauss(&rng);
    CHECK(sl_ref_layer_norm(x, w, b, y2, 37, 0.0f, &err) == SL_OK);
    for (int i = 0; i < 37; i++) y[i] = y[i] * w[i] + b[i];
    close_arr("layer_norm affine", y2, y, 37, 1e-6, 1e-6);
    /* constant row: all zeros (+ b) with eps > 0 */
    for (int i = 0; i < 37; i++) x[i] = 3.0f;
    CHECK(sl_ref_layer_norm(x, NULL, b, y, 37, 1e-5f, &err) == SL_OK);
    close_arr("layer_norm of constant = b", y, b, 37, 0.0, 0.0);
}

static void test_ref_softmax(void)
{
    sl_error err;
    uint64_t rng = 2;
    enum { N = 100 };
    float x[N], y[N], z[N], mask[N];
    for (int i = 0; i < N; i++) x[i] = 4.0f * gauss(&rng);
    memcpy(y, x, sizeof x);
    CHECK(sl_ref_softmax(y, N, 1.0f, NULL, &err) == SL_OK);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += y[i];
    CHECK_MSG(fabs(sum - 1.0) < 1e-6, "softmax sums to %.9g", sum);
    /* shift invariance: x + 7 (exactly representable shift keeps differences in range) */
    for (int i = 0; i < N; i++) z[i] = x[i] + 7.0f;
    CHECK(sl_ref_softmax(z, N, 1.0f, NULL, &err) == SL_OK);
    close_arr("softmax shift invariant", z, y, N, 1e-5, 1e-12);
    /* order preserving */
    int ordered = 1;
    for (int i = 1; i < N; i++)
        if ((x[i] > x[0]) != (y[i] > y[0]) && x[i] != x[0]) ordered = 0;
    CHECK(ordered);
    /* scale and mask: softmax(2x + m) with m[i] = -inf hides i, m = log(c) weighs by c */
    for (int i = 0; i < N; i++) mask[i] = i % 3 == 0 ? -INFINITY : 0.0f;
    memcpy(y, x, sizeof x);
    CHECK(sl_ref_softmax(y, N, 2.0f, mask, &err) == SL_OK);
    sum = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) CHECK(y[i] == 0.0f);
        sum += y[i];
    }
    CHECK(fabs(sum - 1.0) < 1e-6);
    float two[2] = {0.0f, 0.0f}, m2[2] = {0.0f, (float)log(3.0)};
    CHECK(sl_ref_softmax(two, 2, 1.0f, m2, &err) == SL_OK);
    CHECK(fabsf(two[0] - 0.25f) < 1e-7f && fabsf(two[1] - 0.75f) < 1e-7f);
    /* fully masked row: zeros */
    for (int i = 0; i < N; i++) mask[i] = -INFINITY;
    memcpy(y, x, sizeof x);
    CHECK(sl_ref_softmax(y, N, 1.0f, mask, &err) == SL_OK);
    CHECK(max_abs(y, N) == 0.0);
}

static void test_ref_activations(void)
{
    sl_error err;
    const float xs[] = {-20.0f, -3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f, 20.0f};
    float y[8], g[8], up[8], o[8];
    CHECK(sl_ref_silu(xs, y, 8, &err) == SL_OK);
    CHECK(y[3] == 0.0f && fabsf(y[5] - 0.7310585786f) < 1e-7f && fabsf(y[7] - 20.0f) < 1e-5f);
    CHECK(sl_ref_gelu(xs, g, 8, SL_GELU_ERF, &err) == SL_OK);
    /* exact gelu(1) = 0.5 (1 + erf(1/sqrt2)) = 0.8413447460685429 */
    CHECK(fabsf(g[5] - 0.8413447461f) < 1e-7f);
    CHECK(sl_ref_gelu(xs, g, 8, SL_GELU_TANH, &err) == SL_OK);
    /* the tanh form at 1: 0.5 (1 + tanh(0.7978845608 * 1.044715)) = 0.8411919906 */
    CHECK_MSG(fabsf(g[5] - 0.8411919906f) < 1e-7f, "gelu_tanh(1) = %.9g", (double)g[5]);
    CHECK(g[3] == 0.0f && fabsf(g[0]) < 1e-6f && fabsf(g[7] - 20.0f) < 1e-5f);
    for (int i = 0; i < 8; i++) up[i] = (float)(i + 1);
    CHECK(sl_ref_swiglu(xs, up, o, 8, &err) == SL_OK);
    for (int i = 0; i < 8; i++) CHECK(fabsf(o[i] - y[i] * up[i]) <= 1e-6f * fabsf(o[i]) + 1e-30f);
    CHECK(sl_ref_geglu(xs, up, o, 8, SL_GELU_TANH, &err) == SL_OK);
    for (int i = 0; i < 8; i++) CHECK(fabsf(o[i] - g[i] * up[i]) <= 1e-6f * fabsf(o[i]) + 1e-30f);
    /* in place aliasing */
    float a[8];
    memcpy(a, xs, sizeof a);
    CHECK(sl_ref_swiglu(a, up, a, 8, &err) == SL_OK);
    CHECK(sl_ref_swiglu(xs, up, o, 8, &err) == SL_OK);
    CHECK(memcmp(a, o, sizeof a) == 0);
    CHECK(sl_ref_gelu(xs, y, 8, (sl_gelu_kind)7, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "kind");
}

/* rows [n_tok][n_head][hd] */
static void test_ref_rope(void)
{
    sl_error err;
    uint64_t rng = 3;
    enum { T = 3, H = 2, HD = 24 };
    float x[T * H * HD], y[T * H * HD], z[T * H * HD];
    const int32_t pos[T] = {0, 17, 40000};
    for (int i = 0; i < T * H * HD; i++) x[i] = gauss(&rng);

    for (int mode = 0; mode <= 2; mode += 2) {
        sl_rope_params p = sl_rope_params_make((sl_rope_mode)mode, 16, 10000.0f);
        memcpy(y, x, sizeof x);
        CHECK(sl_ref_rope(y, T, H, HD, pos, &p, &err) == SL_OK);
        /* pos 0 is the identity; partial rotary leaves dims >= n_rot alone */
        CHECK(memcmp(y, x, sizeof(float) * H * HD) == 0);
        for (int r = 0; r < T * H; r++)
            CHECK(memcmp(y + r * HD + 16, x + r * HD + 16, sizeof(float) * (HD - 16)) == 0);
        /* pair norms are preserved */
        double worst = 0;
        for (int r = 0; r < T * H; r++)
            for (int i = 0; i < 8; i++) {
                const int a = mode == SL_ROPE_NEOX ? i : 2 * i;
                const int b = mode == SL_ROPE_NEOX ? i + 8 : 2 * i + 1;
                const double n0 = hypot(x[r * HD + a], x[r * HD + b]);
                const double n1 = hypot(y[r * HD + a], y[r * HD + b]);
                worst = fmax(worst, fabs(n1 - n0) / n0);
            }
        CHECK_MSG(worst < 3e-7, "rope mode %d changes a pair norm by %g", mode, worst);
        /* position additivity: rope(rope(x, p1), p2) == rope(x, p1 + p2) */
        const int32_t p1[T] = {5, 5, 5}, p2[T] = {11, 11, 11}, p12[T] = {16, 16, 16};
        memcpy(y, x, sizeof x);
        memcpy(z, x, sizeof x);
        CHECK(sl_ref_rope(y, T, H, HD, p1, &p, &err) == SL_OK);
        CHECK(sl_ref_rope(y, T, H, HD, p2, &p, &err) == SL_OK);
        CHECK(sl_ref_rope(z, T, H, HD, p12, &p, &err) == SL_OK);
        close_arr("rope composes", y, z, T * H * HD, 0.0, 1e-6);
    }

    /* NeoX == normal after moving x[i], x[i + h] to x[2i], x[2i + 1] */
    {
        sl_rope_params pn = sl_rope_params_make(SL_ROPE_NEOX, 16, 10000.0f);
        sl_rope_params pm = sl_rope_params_make(SL_ROPE_NORMAL, 16, 10000.0f);
        memcpy(y, x, sizeof x);
        for (int r = 0; r < T * H; r++)
            for (int i = 0; i < 8; i++) {
                z[r * HD + 2 * i] = x[r * HD + i];
                z[r * HD + 2 * i + 1] = x[r * HD + i + 8];
            }
        for (int r = 0; r < T * H; r++)
            memcpy(z + r * HD + 16, x + r * HD + 16, sizeof(float) * (HD - 16));
        CHECK(sl_ref_rope(y, T, H, HD, pos, &pn, &err) == SL_OK);
        CHECK(sl_ref_rope(z, T, H, HD, pos, &pm, &err) == SL_OK);
        int same = 1;
        for (int r = 0; r < T * H; r++)
            for (int i = 0; i < 8; i++)
                same &= y[r * HD + i] == z[r * HD + 2 * i] &&
                        y[r * HD + i + 8] == z[r * HD + 2 * i + 1];
        CHECK_MSG(same, "NeoX differs from normal by more than the pairing");
        /* and they do differ as layouts */
        memcpy(z, x, sizeof x);
        CHECK(sl_ref_rope(z, T, H, HD, pos, &pm, &err) == SL_OK);
        CHECK(memcmp(y + H * HD, z + H * HD, sizeof(float) * HD) != 0);
    }

    /* linear scaling: freq_scale s at position p == freq_scale 1 at position s p; and YaRN
     * parameters with ext_factor 0 change nothing else */
    {
        sl_rope_params lin = sl_rope_params_make(SL_ROPE_NORMAL, 16, 10000.0f);
        lin.freq_scale = 0.25f;
        sl_rope_params yarn0 = lin;
        yarn0.ext_factor = 0.0f;
        yarn0.n_ctx_orig = 4096;
        yarn0.beta_fast = 32.0f;
        yarn0.beta_slow = 1.0f;
        sl_rope_params one = sl_rope_params_make(SL_ROPE_NORMAL, 16, 10000.0f);
        const int32_t p8[T] = {8, 400, 4000}, p2[T] = {2, 100, 1000};
        memcpy(y, x, sizeof x);
        memcpy(z, x, sizeof x);
        float w[T * H * HD];
        memcpy(w, x, sizeof x);
        CHECK(sl_ref_rope(y, T, H, HD, p8, &lin, &err) == SL_OK);
        CHECK(sl_ref_rope(z, T, H, HD, p8, &yarn0, &err) == SL_OK);
        CHECK(sl_ref_rope(w, T, H, HD, p2, &one, &err) == SL_OK);
        CHECK(memcmp(y, z, sizeof y) == 0);
        CHECK(memcmp(y, w, sizeof y) == 0);
    }

    /* YaRN, ext_factor 1: pairs below the correction range keep the unscaled (extrapolated)
     * angle, pairs above it the interpolated one; every rotated pair is scaled by
     * mscale = attn_factor (1 + 0.1 ln(1/s)) */
    {
        const float s = 0.125f;
        sl_rope_params py = sl_rope_params_make(SL_ROPE_NORMAL, 64, 10000.0f);
        py.freq_scale = s;
        py.ext_factor = 1.0f;
        py.n_ctx_orig = 4096;
        float corr[2];
        sl_ref_rope_corr_dims(&py, corr);
        CHECK_MSG(corr[0] > 0 && corr[1] < 31 && corr[0] < corr[1], "corr [%g, %g]",
                  (double)corr[0], (double)corr[1]);
        const double msc = 1.0 + 0.1 * log(1.0 / s);
        double c, sn;
        sl_ref_rope_cos_sin(&py, corr, 1000, 0, &c, &sn);
        CHECK(fabs(c - msc * cos(1000.0)) < 1e-12 && fabs(sn - msc * sin(1000.0)) < 1e-12);
        const int32_t last = 31;
        const double th = 1000.0 * s * pow(10000.0, -2.0 * last / 64.0);
        sl_ref_rope_cos_sin(&py, corr, 1000, last, &c, &sn);
        CHECK(fabs(c - msc * cos(th)) < 1e-12 && fabs(sn - msc * sin(th)) < 1e-12);
        /* without YaRN mscale is attn_factor alone */
        sl_rope_params pl = py;
        pl.ext_factor = 0.0f;
        pl.attn_factor = 2.0f;
        sl_ref_rope_cos_sin(&pl, corr, 3, 5, &c, &sn);
        CHECK(fabs(hypot(c, sn) - 2.0) < 1e-12);
    }

    /* validation names the field */
    sl_rope_params bad = sl_rope_params_make(SL_ROPE_NORMAL, 25, 10000.0f);
    CHECK(sl_ref_rope(x, T, H, HD, pos, &bad, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_rot = 25");
    bad = sl_rope_params_make(SL_ROPE_NORMAL, 16, 10000.0f);
    bad.ext_factor = 1.0f;
    CHECK(sl_ref_rope(x, T, H, HD, pos, &bad, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_ctx_orig");
    bad = sl_rope_params_make((sl_rope_mode)1, 16, 10000.0f);
    CHECK(sl_ref_rope(x, T, H, HD, pos, &bad, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "mode");
}

static void test_ref_router(void)
{
    sl_error err;
    int32_t idx[8];
    float w[8];
    /* softmax then top-k, weights are the full-softmax probabilities in decreasing order */
    const float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
    sl_router_params p = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 6, .k = 3,
                          .weight_scale = 1.0f};
    CHECK(sl_ref_router_topk(lg, &p, idx, w, &err) == SL_OK);
    CHECK_MSG(idx[0] == 1 && idx[1] == 3 && idx[2] == 4, "idx %d %d %d", idx[0], idx[1], idx[2]);
    double z = 0;
    for (int e = 0; e < 6; e++) z += exp(lg[e]);
    CHECK(fabs(w[0] - exp(2.0) / z) < 1e-7 && w[0] == w[1] && w[1] > w[2]);
    CHECK(fabs(w[2] - exp(1.0) / z) < 1e-7);
    /* renormalised (Qwen3 norm_topk_prob, Mixtral): sum 1, same ratios */
    float wn[8];
    p.norm_topk = true;
    CHECK(sl_ref_router_topk(lg, &p, idx, wn, &err) == SL_OK);
    CHECK(fabs((double)wn[0] + wn[1] + wn[2] - 1.0) < 1e-6);
    CHECK(fabs(wn[0] / wn[2] - w[0] / w[2]) < 1e-5);
    /* gpt-oss top-k then softmax == softmax-topk renormalised */
    float wt[8];
    int32_t it[8];
    sl_router_params pt = p;
    pt.gating = SL_GATING_TOPK_SOFTMAX;
    pt.norm_topk = false;
    CHECK(sl_ref_router_topk(lg, &pt, it, wt, &err) == SL_OK);
    CHECK(memcmp(it, idx, 3 * sizeof *it) == 0);
    close_arr("topk_softmax == softmax_topk normalised", wt, wn, 3, 1e-6, 0.0);
    /* weight_scale multiplies */
    pt.weight_scale = 2.5f;
    CHECK(sl_ref_router_topk(lg, &pt, it, w, &err) == SL_OK);
    CHECK(fabs(w[0] - 2.5 * wt[0]) < 1e-6);
    /* ties broken by lower index, all equal logits: 0, 1, 2 */
    const float eq[5] = {1, 1, 1, 1, 1};
    sl_router_params pe = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 5, .k = 3,
                           .weight_scale = 1.0f};
    CHECK(sl_ref_router_topk(eq, &pe, idx, w, &err) == SL_OK);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && w[0] == 0.2f);

    /* sigmoid with selection bias: the bias changes which experts are chosen, but the weights
     * are the unbiased sigmoids (then normalised) */
    const float sl[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    const float bias[4] = {0.0f, 0.0f, 0.0f, 2.0f};
    sl_router_params ps = {.gating = SL_GATING_SIGMOID, .n_expert = 4, .k = 2,
                           .weight_scale = 1.0f};
    CHECK(sl_ref_router_topk(sl, &ps, idx, w, &err) == SL_OK);
    CHECK(idx[0] == 0 && idx[1] == 1);
    CHECK(fabs(w[0] - 1 / (1 + exp(-2.0))) < 1e-7 && fabs(w[1] - 1 / (1 + exp(-1.0))) < 1e-7);
    ps.bias = bias;
    ps.norm_topk = true;
    CHECK(sl_ref_router_topk(sl, &ps, idx, w, &err) == SL_OK);
    /* scores: 0.881, 0.731, 0.5, 0.269 + 2 = 2.269 -> experts 3 then 0 */
    CHECK_MSG(idx[0] == 3 && idx[1] == 0, "idx %d %d", idx[0], idx[1]);
    const double s3 = 1 / (1 + exp(1.0)), s0 = 1 / (1 + exp(-2.0));
    CHECK(fabs(w[0] - s3 / (s3 + s0)) < 1e-7 && fabs(w[1] - s0 / (s3 + s0)) < 1e-7);
    CHECK(w[0] < w[1]); /* selected first, weighted less: selection != weighting */

    /* group-limited (DeepSeek-V3): 4 groups of 2; a group scores its two best selection
     * scores summed; only the best 2 groups may be chosen, so expert 6 (the best single score,
     * in a group whose partner is poor) loses to the pair groups */
    const float gl[8] = {1.0f, 1.0f, -3.0f, -3.0f, 0.5f, 0.5f, 3.0f, -6.0f};
    sl_router_params pg = {.gating = SL_GATING_SIGMOID, .n_expert = 8, .k = 2,
                           .weight_scale = 2.5f, .norm_topk = true, .n_group = 4,
                           .top_group = 2};
    CHECK(sl_ref_router_topk(gl, &pg, idx, w, &err) == SL_OK);
    /* group sums: g0 1.46, g1 0.09, g2 1.25, g3 0.95+0.0025: groups 0 and 2 */
    CHECK_MSG(idx[0] == 0 && idx[1] == 1, "grouped idx %d %d", idx[0], idx[1]);
    CHECK(fabs(w[0] - 1.25) < 1e-6 && fabs(w[1] - 1.25) < 1e-6); /* normalised, x 2.5 */
    pg.top_group = 4; /* no limit: expert 6 first */
    CHECK(sl_ref_router_topk(gl, &pg, idx, w, &err) == SL_OK);
    CHECK_MSG(idx[0] == 6 && idx[1] == 0, "ungrouped idx %d %d", idx[0], idx[1]);
    pg.top_group = 5;
    CHECK(sl_ref_router_topk(gl, &pg, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "top_group = 5");
    pg.top_group = 2;
    pg.n_group = 3;
    CHECK(sl_ref_router_topk(gl, &pg, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_group = 3");

    /* validation */
    ps.k = 5;
    CHECK(sl_ref_router_topk(sl, &ps, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "k = 5");
    ps.k = 2;
    const float nanl[4] = {0, NAN, 0, 0};
    CHECK(sl_ref_router_topk(nanl, &ps, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "logits[1]");
}

/* cache helpers: [n_pos][n_kv][hd] */
/* The greedy pick: lowest index of the maximum, -inf masks, NaN / +inf reported (lowest),
 * never picked; its token form turns each case into a token or a named error. */
static void test_ref_argmax(void)
{
    sl_error err;
    sl_argmax_result r;
    int32_t tok = -7;
    const float ties[6] = {-1.0f, 3.0f, 2.0f, 3.0f, -INFINITY, 3.0f};
    CHECK(sl_ref_argmax(ties, 6, &r, &err) == SL_OK && r.best == 1 && r.bad == -1);
    CHECK(sl_ref_argmax_token(&r, 6, &tok, &err) == SL_OK && tok == 1);
    const float masked[3] = {-INFINITY, -1e30f, -INFINITY};
    CHECK(sl_ref_argmax(masked, 3, &r, &err) == SL_OK && r.best == 1);
    const float all_inf[2] = {-INFINITY, -INFINITY};
    CHECK(sl_ref_argmax(all_inf, 2, &r, &err) == SL_OK && r.best == -1 && r.bad == -1);
    CHECK(sl_ref_argmax_token(&r, 2, &tok, &err) == SL_ERR_INVALID && strstr(err.msg, "-inf"));
    float bad[5] = {1.0f, 2.0f, INFINITY, NAN, 9.0f};
    CHECK(sl_ref_argmax(bad, 5, &r, &err) == SL_OK && r.best == 4 && r.bad == 2);
    CHECK(sl_ref_argmax_token(&r, 5, &tok, &err) == SL_ERR_INVALID &&
          strstr(err.msg, "logits[2] = inf"));
    bad[2] = 0.0f;
    CHECK(sl_ref_argmax(bad, 5, &r, &err) == SL_OK && r.bad == 3);
    CHECK(sl_ref_argmax_token(&r, 5, &tok, &err) == SL_ERR_INVALID &&
          strstr(err.msg, "logits[3] = nan"));
    CHECK(sl_ref_argmax(NULL, 0, &r, &err) == SL_OK && r.best == -1);
    CHECK(sl_ref_argmax(NULL, 3, &r, &err) == SL_ERR_INVALID);
    CHECK(sl_ref_argmax(ties, -1, &r, &err) == SL_ERR_INVALID);
    CHECK(sl_ref_argmax(ties, 6, NULL, &err) == SL_ERR_INVALID);
}

static void test_ref_attention(void)
{
    sl_error err;
    uint64_t rng = 4;
    enum { NH = 6, NKV = 2, HD = 20, NP = 50 };
    float *q = fvec(NH * HD, &rng, 1.0f);
    float *k = make_cache(NP, NKV, HD, SL_KV_F32, &rng, 1.0f);
    float *v = make_cache(NP, NKV, HD, SL_KV_F32, &rng, 1.0f);
    float out[NH * HD], out2[NH * HD];
    sl_attn_params p = {.n_head = NH, .n_kv_head = NKV, .head_dim = HD, .n_pos = 1};

    /* one position: the output is that position's V row, whatever q and k are */
    CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
    for (int h = 0; h < NH; h++)
        CHECK(memcmp(out + h * HD, v + (h / (NH / NKV)) * HD, HD * sizeof(float)) == 0);

    /* window W == attention over the last W positions only */
    p.n_pos = NP;
    p.window = 9;
    CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
    sl_attn_params pt = p;
    pt.window = 0;
    pt.n_pos = 9;
    const size_t skip = (size_t)(NP - 9) * NKV * HD;
    CHECK(sl_ref_attn_decode(q, k + skip, v + skip, &pt, out2, &err) == SL_OK);
    CHECK(memcmp(out, out2, sizeof out) == 0);
    /* a window of n_pos or more is no window */
    p.window = NP;
    CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
    p.window = 0;
    CHECK(sl_ref_attn_decode(q, k, v, &p, out2, &err) == SL_OK);
    CHECK(memcmp(out, out2, sizeof out) == 0);

    /* GQA == MHA with each kv head repeated for its group */
    {
        float *k2 = malloc(sizeof(float) * NP * NH * HD);
        float *v2 = malloc(sizeof(float) * NP * NH * HD);
        for (int t = 0; t < NP; t++)
            for (int h = 0; h < NH; h++) {
                memcpy(k2 + ((size_t)t * NH + h) * HD, k + ((size_t)t * NKV + h / 3) * HD, HD * 4);
                memcpy(v2 + ((size_t)t * NH + h) * HD, v + ((size_t)t * NKV + h / 3) * HD, HD * 4);
            }
        sl_attn_params pm = p;
        pm.n_kv_head = NH;
        CHECK(sl_ref_attn_decode(q, k2, v2, &pm, out2, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
        CHECK(memcmp(out, out2, sizeof out) == 0);
        free(k2);
        free(v2);
    }

    /* a sink scales every head's output by sum e^l / (sum e^l + e^sink) < 1: test with a V
     * whose dim 0 is all ones (then out[0] is that factor) */
    {
        float sinks[NH];
        for (int h = 0; h < NH; h++) sinks[h] = 0.5f * (float)h - 1.0f;
        for (int t = 0; t < NP; t++)
            for (int j = 0; j < NKV; j++) v[((size_t)t * NKV + j) * HD] = 1.0f;
        CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
        sl_attn_params ps = p;
        ps.sinks = sinks;
        CHECK(sl_ref_attn_decode(q, k, v, &ps, out2, &err) == SL_OK);
        for (int h = 0; h < NH; h++) {
            const double f = out2[h * HD];
            CHECK_MSG(fabs(out[h * HD] - 1.0) < 1e-6 && f > 0 && f < 1, "head %d factor %g", h, f);
            for (int d = 1; d < HD; d++)
                CHECK(fabs(out2[h * HD + d] - f * out[h * HD + d]) < 1e-6);
        }
        /* a larger sink lowers the weights more */
        for (int h = 0; h < NH; h++) sinks[h] += 1.0f;
        CHECK(sl_ref_attn_decode(q, k, v, &ps, out, &err) == SL_OK);
        for (int h = 0; h < NH; h++) CHECK(out[h * HD] < out2[h * HD]);
    }

    /* a huge soft cap is no cap; a cap of 1e-5 makes the weights nearly uniform */
    {
        sl_attn_params pc = p;
        pc.softcap = 1e6f;
        CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, k, v, &pc, out2, &err) == SL_OK);
        close_arr("softcap 1e6 == none", out2, out, NH * HD, 1e-5, 1e-6);
        pc.softcap = 1e-5f;
        CHECK(sl_ref_attn_decode(q, k, v, &pc, out, &err) == SL_OK);
        double mean0 = 0;
        for (int t = 0; t < NP; t++) mean0 += v[(size_t)t * NKV * HD + 1];
        mean0 /= NP;
        CHECK(fabs(out[1] - mean0) < 1e-4);
    }

    /* the temperature (Mistral Large 3) at the query's position NP - 1 is the scale times
     * sl_attn_temp, its known value; below temp_len it is none; NaN or a length of 0 refused */
    {
        sl_attn_params pt = p, ps = p;
        pt.temp_scale = 0.5f;
        pt.temp_len = 2;
        const double f = 1.0 + 0.5 * log(floor((NP - 1) / 2.0) + 1.0);
        CHECK(fabs(sl_attn_temp(0.5f, 2, NP - 1) - f) < 1e-6 && sl_attn_temp(0.5f, 2, 1) == 1.0f);
        ps.scale = (float)(f / sqrt((double)HD));
        CHECK(sl_ref_attn_decode(q, k, v, &pt, out, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, k, v, &ps, out2, &err) == SL_OK);
        close_arr("temperature == scale x its factor", out, out2, NH * HD, 1e-6, 1e-7);
        pt.temp_len = NP + 1; /* the query below the first step: no change */
        CHECK(sl_ref_attn_decode(q, k, v, &pt, out, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, k, v, &p, out2, &err) == SL_OK);
        close_arr("temperature below temp_len", out, out2, NH * HD, 0, 0);
        pt.temp_len = 0;
        CHECK(sl_ref_attn_decode(q, k, v, &pt, out, &err) == SL_ERR_INVALID &&
              strstr(err.msg, "temp_len"));
        pt.temp_len = 2;
        pt.temp_scale = NAN;
        CHECK(sl_ref_attn_decode(q, k, v, &pt, out, &err) == SL_ERR_INVALID &&
              strstr(err.msg, "temp_scale"));
    }

    /* scale 0 means 1/sqrt(head_dim) */
    {
        sl_attn_params ps = p;
        ps.scale = 1.0f / sqrtf((float)HD);
        CHECK(sl_ref_attn_decode(q, k, v, &p, out, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, k, v, &ps, out2, &err) == SL_OK);
        close_arr("default scale", out2, out, NH * HD, 1e-6, 1e-7);
    }

    /* F16 caches == F32 caches holding the same (half) values */
    {
        const size_t n = (size_t)NP * NKV * HD;
        uint16_t *kh = malloc(n * 2), *vh = malloc(n * 2);
        float *kf = malloc(n * 4), *vf = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            kh[i] = to_half(k[i]);
            vh[i] = to_half(v[i]);
            kf[i] = (float)half_value(kh[i]);
            vf[i] = (float)half_value(vh[i]);
        }
        sl_attn_params ph = p;
        ph.kv_type = SL_KV_F16;
        CHECK(sl_ref_attn_decode(q, kh, vh, &ph, out, &err) == SL_OK);
        CHECK(sl_ref_attn_decode(q, kf, vf, &p, out2, &err) == SL_OK);
        CHECK(memcmp(out, out2, sizeof out) == 0);
        free(kh);
        free(vh);
        free(kf);
        free(vf);
    }

    /* validation */
    sl_attn_params bad = p;
    bad.n_kv_head = 4;
    CHECK(sl_ref_attn_decode(q, k, v, &bad, out, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_kv_head = 4");
    bad = p;
    bad.n_pos = 0;
    CHECK(sl_ref_attn_decode(q, k, v, &bad, out, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_pos");
    CHECK(sl_ref_attn_decode(q, NULL, v, &p, out, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "k is NULL");
    free(q);
    free(k);
    free(v);
}

static void test_ref_validation(void)
{
    sl_error err;
    float x[4] = {1, 2, 3, 4};
    CHECK(sl_ref_rms_norm(x, NULL, x, -1, 0.0f, false, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n = -1");
    CHECK(sl_ref_rms_norm(NULL, NULL, x, 4, 0.0f, false, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "x is NULL");
    CHECK(sl_ref_rms_norm(x, NULL, x, 4, -1.0f, false, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "eps");
    CHECK(sl_ref_softmax(x, 4, INFINITY, NULL, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "scale");
    CHECK(sl_ref_add(NULL, NULL, NULL, 0, &err) == SL_OK); /* n = 0 needs no pointers */
    CHECK(sl_ref_swiglu(x, NULL, x, 4, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "up is NULL");
}

int main(void)
{
    test_half();
    test_ref_norms();
    test_ref_softmax();
    test_ref_activations();
    test_ref_rope();
    test_ref_router();
    test_ref_argmax();
    test_ref_attention();
    test_ref_validation();
    return sl_test_finish("ops_test");
}
