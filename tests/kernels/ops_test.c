/* Tests of kernels/ref/ops (the references) and kernels/cpu/ops (the fast kernels).
 *
 * 1. Reference sanity against independent facts: closed forms (rms_norm of a constant vector,
 *    attention over one position), invariances (softmax shift, rope pair norms, NeoX = normal up
 *    to pairing, GQA = MHA with repeated KV heads, window = truncated cache) and the documented
 *    routing rules. The numpy cross-check (ops_vs_numpy.py) tests the definitions themselves.
 * 2. Every fast op against the reference on fresh random data, for every ISA path this CPU has
 *    (the others are skipped with a notice), at lengths that hit every vector remainder
 *    (1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 4099), buffers allocated at their exact size so
 *    ASan sees any tail overrun. Tolerances (|fast - ref| <= atol + rtol |ref| per element):
 *      rms_norm          rtol 1e-5
 *      softmax           rtol 2e-5, atol 1e-30 (exp of the shifted logits; float x*scale)
 *      silu, swiglu      rtol 1e-5, atol 1e-30
 *      gelu, geglu       rtol 1e-5, atol 1e-16 |x| |up| + 1e-30, both kinds (tanh, erf): the
 *                        atol is the reference's own granularity: it evaluates 0.5 x (1 + tanh)
 *                        and 0.5 x (1 + erf) in double, which cancel to 0 below x ~ -9 (tanh)
 *                        and x ~ -6 (erf) where the fast forms stay relative-accurate (measured
 *                        worst: 0.37 of this bound on a 4M-point sweep of [-30, 30])
 *      rope              atol 1e-6 * max|x| (float angle table, float rotation)
 *      attention         atol 2e-6 * max|v| (<= 129 positions), 2e-5 * max|v| (4099 positions;
 *                        float dot products and online softmax; measured ~5e-8 relative)
 *      add, mul, scale   exact (one rounding in both)
 * 3. Argument validation and ISA selection (names, env override, refusal of missing ISAs).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/ref/half.h"
#include "kernels/ref/ops.h"
#include "tests/testing.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* splitmix64: tests own their PRNG so runs are reproducible */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1p-53; }

static float gauss(uint64_t *s)
{
    double u1 = uniform(s), u2 = uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float *fvec(int64_t n, uint64_t *rng, float sigma)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sigma * gauss(rng);
    return x;
}

static float *fcopy(const float *x, int64_t n)
{
    float *y = malloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

/* IEEE half bits of f, round to nearest even (test-local, independent of the code under test) */
static uint16_t to_half(float f)
{
    if (f == 0.0f) return signbit(f) ? 0x8000 : 0;
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    int ex = e - 1;  /* a = 1.x 2^ex */
    if (ex < -14) ex = -14; /* subnormal range: fixed quantum 2^-24 */
    const double q = ldexp(1.0, ex - 10);
    double r = nearbyint(a / q) * q; /* default rounding mode: nearest even */
    if (r >= 65520.0) return sign | 0x7c00;
    int re;
    frexp(r, &re);
    if (re - 1 < -14 || r == 0.0) return (uint16_t)(sign | (uint16_t)(r / ldexp(1.0, -24)));
    const int be = re - 1 + 15;
    const uint16_t man = (uint16_t)(r / ldexp(1.0, re - 1 - 10) - 1024.0);
    return (uint16_t)(sign | (be << 10) | man);
}

/* value of a half in double arithmetic (independent of sl_half_to_float) */
static double half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}

/* per-element |got - want| <= atol + rtol |want|; reports the worst element once */
static int close_arr(const char *what, const float *got, const float *want, int64_t n,
                     double rtol, double atol)
{
    int64_t worst = -1;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        const double lim = atol + rtol * fabs((double)want[i]);
        if (!(d <= lim) && (worst < 0 || d - lim > worst_excess)) {
            worst = i;
            worst_excess = d - lim;
        }
    }
    CHECK_MSG(worst < 0, "%s: element %lld: got %.9g want %.9g (n = %lld, rtol %g, atol %g)",
              what, (long long)worst, worst >= 0 ? (double)got[worst] : 0.0,
              worst >= 0 ? (double)want[worst] : 0.0, (long long)n, rtol, atol);
    return worst < 0;
}

/* The GELU tolerance of the header: |got - want| <= 1e-5 |want| + 1e-16 |x| |up| + 1e-30 (up
 * NULL: 1). */
static void close_gelu(const char *what, const float *got, const float *want, const float *x,
                       const float *up, int64_t n)
{
    int64_t worst = -1;
    double worst_ratio = 1.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        const double lim = 1e-5 * fabs((double)want[i]) +
                           1e-16 * fabs((double)x[i]) * (up ? fabs((double)up[i]) : 1.0) + 1e-30;
        if (!(d <= lim * worst_ratio)) {
            worst = i;
            worst_ratio = d / lim;
        }
    }
    CHECK_MSG(worst < 0, "%s: element %lld: x %.9g got %.9g want %.9g (%.3g x the tolerance)",
              what, (long long)worst, worst >= 0 ? (double)x[worst] : 0.0,
              worst >= 0 ? (double)got[worst] : 0.0, worst >= 0 ? (double)want[worst] : 0.0,
              worst_ratio);
}

static double max_abs(const float *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

static const int64_t k_lengths[] = {1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 4096 + 3};
enum { N_LENGTHS = sizeof k_lengths / sizeof k_lengths[0] };

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

static void *make_cache(int32_t n_pos, int32_t n_kv, int32_t hd, sl_kv_type t, uint64_t *rng,
                        float sigma)
{
    const size_t n = (size_t)n_pos * (size_t)n_kv * (size_t)hd;
    if (t == SL_KV_F16) {
        uint16_t *c = malloc(n * sizeof *c);
        for (size_t i = 0; i < n; i++) c[i] = to_half(sigma * gauss(rng));
        return c;
    }
    float *c = malloc(n * sizeof *c);
    for (size_t i = 0; i < n; i++) c[i] = sigma * gauss(rng);
    return c;
}

static double cache_max_abs(const void *c, size_t n, sl_kv_type t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(t == SL_KV_F16 ? half_value(((const uint16_t *)c)[i])
                                        : (double)((const float *)c)[i]));
    return m;
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

/* ---- fast kernels vs the reference --------------------------------------------------------- */

static void fast_elementwise(const sl_cpu_ops *ops, uint64_t *rng)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[96];
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = k_lengths[li];
        float *x = fvec(n, rng, 3.0f), *w = fvec(n, rng, 1.0f), *b = fvec(n, rng, 4.0f);
        float *want = fvec(n, rng, 0.0f), *got = fvec(n, rng, 0.0f);

        for (int variant = 0; variant < 3; variant++) { /* no weight, w, 1 + w */
            const float *wp = variant ? w : NULL;
            const bool opw = variant == 2;
            CHECK(sl_ref_rms_norm(x, wp, want, n, 1e-6f, opw, &err) == SL_OK);
            CHECK(sl_cpu_rms_norm(ops, x, wp, got, n, 1e-6f, opw, &err) == SL_OK);
            snprintf(what, sizeof what, "%s rms_norm n=%lld variant %d", isa, (long long)n,
                     variant);
            close_arr(what, got, want, n, 1e-5, 0.0);
        }
        /* in place */
        float *xi = fcopy(x, n);
        CHECK(sl_cpu_rms_norm(ops, xi, w, xi, n, 1e-6f, false, &err) == SL_OK);
        CHECK(sl_ref_rms_norm(x, w, want, n, 1e-6f, false, &err) == SL_OK);
        snprintf(what, sizeof what, "%s rms_norm in place n=%lld", isa, (long long)n);
        close_arr(what, xi, want, n, 1e-5, 0.0);
        free(xi);

        for (int variant = 0; variant < 3; variant++) { /* plain, scale + mask, mask with -inf */
            float *mask = NULL;
            float sc = 1.0f;
            if (variant) {
                mask = fvec(n, rng, 1.0f);
                sc = 0.37f;
                if (variant == 2)
                    for (int64_t i = 0; i < n; i += 3) mask[i] = -INFINITY;
            }
            memcpy(want, x, (size_t)n * 4);
            memcpy(got, x, (size_t)n * 4);
            CHECK(sl_ref_softmax(want, n, sc, mask, &err) == SL_OK);
            CHECK(sl_cpu_softmax(ops, got, n, sc, mask, &err) == SL_OK);
            snprintf(what, sizeof what, "%s softmax n=%lld variant %d", isa, (long long)n, variant);
            close_arr(what, got, want, n, 2e-5, 1e-30);
            free(mask);
        }
        /* fully masked row -> zeros */
        {
            float *mask = fvec(n, rng, 0.0f);
            for (int64_t i = 0; i < n; i++) mask[i] = -INFINITY;
            memcpy(got, x, (size_t)n * 4);
            CHECK(sl_cpu_softmax(ops, got, n, 1.0f, mask, &err) == SL_OK);
            CHECK(max_abs(got, n) == 0.0);
            free(mask);
        }

        CHECK(sl_ref_silu(x, want, n, &err) == SL_OK);
        CHECK(sl_cpu_silu(ops, x, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s silu n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 1e-5, 1e-30);

        CHECK(sl_ref_swiglu(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_swiglu(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s swiglu n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 1e-5, 1e-30);
        xi = fcopy(x, n); /* out aliases gate */
        CHECK(sl_cpu_swiglu(ops, xi, b, xi, n, &err) == SL_OK);
        close_arr(what, xi, want, n, 1e-5, 1e-30);
        free(xi);

        for (int kind = SL_GELU_TANH; kind <= SL_GELU_ERF; kind++) {
            const char *kn = kind == SL_GELU_ERF ? "erf" : "tanh";
            CHECK(sl_ref_gelu(x, want, n, (sl_gelu_kind)kind, &err) == SL_OK);
            CHECK(sl_cpu_gelu(ops, x, got, n, (sl_gelu_kind)kind, &err) == SL_OK);
            snprintf(what, sizeof what, "%s gelu %s n=%lld", isa, kn, (long long)n);
            close_gelu(what, got, want, x, NULL, n);
            CHECK(sl_ref_geglu(x, b, want, n, (sl_gelu_kind)kind, &err) == SL_OK);
            CHECK(sl_cpu_geglu(ops, x, b, got, n, (sl_gelu_kind)kind, &err) == SL_OK);
            snprintf(what, sizeof what, "%s geglu %s n=%lld", isa, kn, (long long)n);
            close_gelu(what, got, want, x, b, n);
            xi = fcopy(x, n); /* out aliases gate */
            CHECK(sl_cpu_geglu(ops, xi, b, xi, n, (sl_gelu_kind)kind, &err) == SL_OK);
            close_gelu(what, xi, want, x, b, n);
            free(xi);
        }

        CHECK(sl_ref_add(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_add(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s add n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);
        CHECK(sl_ref_mul(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_mul(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s mul n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);
        memcpy(want, x, (size_t)n * 4);
        memcpy(got, x, (size_t)n * 4);
        CHECK(sl_ref_scale(want, n, -0.3f, &err) == SL_OK);
        CHECK(sl_cpu_scale(ops, got, n, -0.3f, &err) == SL_OK);
        snprintf(what, sizeof what, "%s scale n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);

        free(x);
        free(w);
        free(b);
        free(want);
        free(got);
    }
    /* silu at the exp clamps: large |x| stay finite and right */
    const float ext[9] = {-200.0f, -100.0f, -88.5f, -87.0f, -30.0f, 30.0f, 87.0f, 88.5f, 200.0f};
    float want[9], got[9];
    CHECK(sl_ref_silu(ext, want, 9, &err) == SL_OK);
    CHECK(sl_cpu_silu(ops, ext, got, 9, &err) == SL_OK);
    snprintf(what, sizeof what, "%s silu extremes", isa);
    close_arr(what, got, want, 9, 1e-5, 1e-30);
    /* gelu on a fine grid over [-30, 30] (both tails, the exp clamps, the erfc branch switch
     * at 0) plus far values; odd length, so the vector tail runs too */
    enum { NG = 6001 + 7 };
    float *gx = malloc(NG * sizeof *gx), *gw = malloc(NG * sizeof *gw);
    float *gg = malloc(NG * sizeof *gg);
    for (int i = 0; i < 6001; i++) gx[i] = -30.0f + 0.01f * (float)i;
    const float far[7] = {-1e4f, -100.0f, -0.0f, 0.0f, 1e-30f, 100.0f, 1e4f};
    memcpy(gx + 6001, far, sizeof far);
    for (int kind = SL_GELU_TANH; kind <= SL_GELU_ERF; kind++) {
        CHECK(sl_ref_gelu(gx, gw, NG, (sl_gelu_kind)kind, &err) == SL_OK);
        CHECK(sl_cpu_gelu(ops, gx, gg, NG, (sl_gelu_kind)kind, &err) == SL_OK);
        snprintf(what, sizeof what, "%s gelu %s grid", isa, kind == SL_GELU_ERF ? "erf" : "tanh");
        close_gelu(what, gg, gw, gx, NULL, NG);
    }
    free(gx);
    free(gw);
    free(gg);
}

static void fast_rope(const sl_cpu_ops *ops, uint64_t *rng)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[128];
    /* n_rot / 2 hits every remainder of 8 and 16; head_dim > n_rot checks partial rotary */
    const int32_t rots[] = {2, 14, 16, 30, 32, 34, 62, 66, 128, 200};
    enum { T = 3, H = 5 };
    const int32_t pos[T] = {0, 77, 131071};
    for (size_t ri = 0; ri < sizeof rots / sizeof rots[0]; ri++) {
        for (int extra = 0; extra <= 6; extra += 6) {
            const int32_t n_rot = rots[ri], hd = n_rot + extra;
            for (int mode = 0; mode <= 2; mode += 2) {
                for (int yarn = 0; yarn < 2; yarn++) {
                    sl_rope_params p = sl_rope_params_make((sl_rope_mode)mode, n_rot, 1e6f);
                    if (yarn) {
                        p.freq_scale = 0.25f;
                        p.ext_factor = 1.0f;
                        p.attn_factor = 0.9f;
                        p.n_ctx_orig = 8192;
                    }
                    const int64_t n = (int64_t)T * H * hd;
                    float *x = fvec(n, rng, 2.0f), *a = fcopy(x, n), *b = fcopy(x, n);
                    CHECK(sl_ref_rope(a, T, H, hd, pos, &p, &err) == SL_OK);
                    CHECK(sl_cpu_rope(ops, b, T, H, hd, pos, &p, &err) == SL_OK);
                    snprintf(what, sizeof what, "%s rope n_rot=%d hd=%d mode=%d yarn=%d", isa,
                             n_rot, hd, mode, yarn);
                    close_arr(what, b, a, n, 0.0, 1e-6 * max_abs(x, n));
                    free(x);
                    free(a);
                    free(b);
                }
            }
        }
    }
}

static void fast_attention_case(const sl_cpu_ops *ops, uint64_t *rng, sl_attn_params p,
                                double tol)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[192];
    float *q = fvec((int64_t)p.n_head * p.head_dim, rng, 1.0f);
    void *k = make_cache(p.n_pos, p.n_kv_head, p.head_dim, p.kv_type, rng, 1.0f);
    void *v = make_cache(p.n_pos, p.n_kv_head, p.head_dim, p.kv_type, rng, 1.0f);
    float *sinks = NULL;
    if (p.sinks) {
        sinks = fvec(p.n_head, rng, 2.0f);
        p.sinks = sinks;
    }
    const int64_t no = (int64_t)p.n_head * p.head_dim;
    float *want = fvec(no, rng, 0.0f), *got = fvec(no, rng, 0.0f);
    CHECK(sl_ref_attn_decode(q, k, v, &p, want, &err) == SL_OK);
    CHECK_MSG(sl_cpu_attn_decode(ops, q, k, v, &p, got, &err) == SL_OK, "%s", err.msg);
    const double vmax =
        cache_max_abs(v, (size_t)p.n_pos * (size_t)p.n_kv_head * (size_t)p.head_dim, p.kv_type);
    snprintf(what, sizeof what,
             "%s attn hd=%d heads=%d/%d n_pos=%d %s window=%d sinks=%d cap=%g", isa, p.head_dim,
             p.n_head, p.n_kv_head, p.n_pos, p.kv_type == SL_KV_F16 ? "f16" : "f32", p.window,
             sinks != NULL, (double)p.softcap);
    close_arr(what, got, want, no, 0.0, tol * vmax);
    free(q);
    free(k);
    free(v);
    free(sinks);
    free(want);
    free(got);
}

static void fast_attention(const sl_cpu_ops *ops, uint64_t *rng)
{
    static const float dummy_sinks[1] = {0.0f}; /* non-NULL marks "make sinks" */
    /* head_dim over every remainder; a few positions; f32 and f16 */
    for (int li = 0; li < N_LENGTHS - 1; li++) {
        for (int t = 0; t < 2; t++) {
            sl_attn_params p = {.n_head = 4, .n_kv_head = 2, .head_dim = (int32_t)k_lengths[li],
                                .n_pos = 37, .kv_type = (sl_kv_type)t};
            fast_attention_case(ops, rng, p, 2e-6);
        }
    }
    /* positions around the block size, GQA groups above the head chunk, features */
    const int32_t nps[] = {1, 7, 63, 64, 65, 129};
    for (size_t i = 0; i < sizeof nps / sizeof nps[0]; i++) {
        for (int t = 0; t < 2; t++) {
            sl_attn_params p = {.n_head = 24, .n_kv_head = 2, .head_dim = 64, .n_pos = nps[i],
                                .kv_type = (sl_kv_type)t};
            fast_attention_case(ops, rng, p, 2e-6);
            p.window = 5;
            p.sinks = dummy_sinks;
            fast_attention_case(ops, rng, p, 2e-6);
            p.window = 0;
            p.sinks = NULL;
            p.softcap = 5.0f;
            p.scale = 0.3f;
            fast_attention_case(ops, rng, p, 2e-6);
        }
    }
    /* a long cache: 4099 positions, llama-like heads; then gpt-oss-like (sinks + window) and
     * gemma-like (head_dim 256, window) */
    for (int t = 0; t < 2; t++) {
        sl_attn_params p = {.n_head = 8, .n_kv_head = 2, .head_dim = 128, .n_pos = 4096 + 3,
                            .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, p, 2e-5);
        sl_attn_params g = {.n_head = 8, .n_kv_head = 8, .head_dim = 64, .n_pos = 4096 + 3,
                            .window = 128, .sinks = dummy_sinks, .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, g, 2e-5);
        sl_attn_params m = {.n_head = 4, .n_kv_head = 1, .head_dim = 256, .n_pos = 4096 + 3,
                            .window = 1024, .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, m, 2e-5);
    }
}

static void test_fast_paths(void)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    printf("cpu features: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d "
           "avx512bf16=%d avx512vnni=%d\n",
           f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512vl, f.avx512bf16,
           f.avx512vnni);
    /* SLUICE_TEST_REQUIRE_ISA=avx512 (or avx2) turns that path's skip into a failure: for runs
     * on a machine known to have it (the GPU hosts), where a skip would hide a regression */
    const char *req = getenv("SLUICE_TEST_REQUIRE_ISA");
    sl_cpu_isa required = SL_CPU_ISA_AUTO;
    if (req && *req) {
        sl_error e;
        CHECK_MSG(sl_cpu_isa_parse(req, &required, &e) == SL_OK, "SLUICE_TEST_REQUIRE_ISA: %s",
                  e.msg);
    }
    for (int isa = SL_CPU_ISA_SCALAR; isa < SL_CPU_ISA_COUNT; isa++) {
        if (!sl_cpu_isa_available(f, (sl_cpu_isa)isa)) {
            CHECK_MSG(isa != (int)required, "SLUICE_TEST_REQUIRE_ISA=%s but the CPU lacks it", req);
            printf("NOTICE: skipping the %s path: this CPU lacks it\n",
                   sl_cpu_isa_name((sl_cpu_isa)isa));
            continue;
        }
        sl_cpu_ops ops;
        sl_error err;
        CHECK(sl_cpu_ops_init(&ops, (sl_cpu_isa)isa, f, &err) == SL_OK);
        CHECK(ops.isa == (sl_cpu_isa)isa);
        uint64_t rng = 100 + (uint64_t)isa;
        const int before = sl_test_g.failures;
        fast_elementwise(&ops, &rng);
        fast_rope(&ops, &rng);
        fast_attention(&ops, &rng);
        printf("%s path: %s\n", sl_cpu_isa_name(ops.isa),
               sl_test_g.failures == before ? "ok" : "FAILED");
    }
}

/* ---- dispatch and validation of the fast entry points ---------------------------------------- */

static void test_dispatch(void)
{
    sl_error err;
    sl_cpu_isa isa;
    CHECK(sl_cpu_isa_parse("avx2", &isa, &err) == SL_OK && isa == SL_CPU_ISA_AVX2);
    CHECK(sl_cpu_isa_parse("scalar", &isa, &err) == SL_OK && isa == SL_CPU_ISA_SCALAR);
    CHECK(sl_cpu_isa_parse("AVX2", &isa, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "'AVX2'");
    CHECK(sl_cpu_isa_parse("", &isa, &err) == SL_ERR_INVALID);

    sl_cpu_ops ops;
    const sl_cpu_features none = {0};
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, none, &err) == SL_OK &&
          ops.isa == SL_CPU_ISA_SCALAR);
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AVX2, none, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "avx2");
    sl_cpu_features only2 = {.avx2 = true, .fma = true, .f16c = true};
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AVX512, only2, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "avx512f");
#if defined(__x86_64__)
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, only2, &err) == SL_OK &&
          ops.isa == SL_CPU_ISA_AVX2);
#endif
    CHECK(sl_cpu_ops_init(&ops, (sl_cpu_isa)9, none, &err) == SL_ERR_INVALID);

    /* the environment override: validated, and honoured */
    setenv("SLUICE_CPU_ISA", "scalar", 1);
    CHECK(sl_cpu_ops_init_env(&ops, &err) == SL_OK && ops.isa == SL_CPU_ISA_SCALAR);
    setenv("SLUICE_CPU_ISA", "sse9", 1);
    CHECK(sl_cpu_ops_init_env(&ops, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "SLUICE_CPU_ISA");
    CHECK_CONTAINS(err.msg, "sse9");
    setenv("SLUICE_CPU_ISA", "", 1);
    CHECK(sl_cpu_ops_init_env(&ops, &err) == SL_OK && ops.isa != SL_CPU_ISA_AUTO);
    unsetenv("SLUICE_CPU_ISA");

    /* wrappers validate like the references */
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_SCALAR, none, &err) == SL_OK);
    float x[4] = {1, 2, 3, 4};
    CHECK(sl_cpu_rms_norm(NULL, x, NULL, x, 4, 0.0f, false, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ops");
    CHECK(sl_cpu_softmax(&ops, x, -2, 1.0f, NULL, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n = -2");
    CHECK(sl_cpu_swiglu(&ops, x, NULL, x, 4, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "up is NULL");
    CHECK(sl_cpu_add(&ops, NULL, NULL, NULL, 0, &err) == SL_OK);
    CHECK(sl_cpu_geglu(&ops, x, x, x, 4, (sl_gelu_kind)7, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "kind = 7");
    CHECK(sl_cpu_geglu(&ops, x, NULL, x, 4, SL_GELU_TANH, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "up is NULL");
    CHECK(sl_cpu_gelu(&ops, NULL, x, 4, SL_GELU_ERF, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "x is NULL");
    CHECK(sl_cpu_gelu(&ops, NULL, NULL, 0, SL_GELU_ERF, &err) == SL_OK);
    sl_rope_params big = sl_rope_params_make(SL_ROPE_NEOX, 2048, 10000.0f);
    int32_t pos = 0;
    float *row = calloc(2048, sizeof *row);
    CHECK(sl_cpu_rope(&ops, row, 1, 1, 2048, &pos, &big, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "n_rot = 2048");
    free(row);
    sl_attn_params ap = {.n_head = 3, .n_kv_head = 2, .head_dim = 4, .n_pos = 1};
    CHECK(sl_cpu_attn_decode(&ops, x, x, x, &ap, x, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_head = 3");
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
    test_dispatch();
    test_fast_paths();
    return sl_test_finish("ops_test");
}
