/* quant_ref_test: properties of the reference quantizers (kernels/ref/quant*.c) that do not need
 * an oracle. Bit-exactness against gguf-py lives in dequant_vs_gguf_py.py.
 *
 * - type table: every supported type's packed block size equals the GGUF table's type_size;
 * - round trip x -> quant -> dequant: per-element bounds derived from each format (stated next
 *   to each type below), plus an RMS bound on Gaussian data for the K-quants, whose least-squares
 *   scale search has no simple per-element guarantee;
 * - edge blocks: all zeros (exact zeros back), constants, a lone spike, huge and tiny values;
 * - determinism and block independence: a row quantizes to the same bytes twice, and each block
 *   of a row equals that block quantized on its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
#include "tests/testing.h"

enum { N_MAX = 8 * 256 };

/* deterministic xorshift + Box-Muller: the test must not depend on libc's rand */
typedef struct rng { uint64_t s; } rng;

static double uniform01(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return ((double)(r->s >> 11) + 0.5) / 9007199254740992.0;
}

static float gauss(rng *r)
{
    const double u = uniform01(r), v = uniform01(r);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static int64_t block_of(uint32_t type)
{
    return (int64_t)sl_gguf_type_get(type)->block_size;
}

/* Largest |x| and the min/max of block [x, x + n). */
static void block_stats(const float *x, int64_t n, float *amax, float *mn, float *mx)
{
    *amax = 0.0f;
    *mn = x[0];
    *mx = x[0];
    for (int64_t i = 0; i < n; i++) {
        *amax = fmaxf(*amax, fabsf(x[i]));
        *mn = fminf(*mn, x[i]);
        *mx = fmaxf(*mx, x[i]);
    }
}

/* The per-element error bound of one block, by format:
 *   Q8_0/Q8_1: d = amax/127 (then rounded to half): |e| <= d/2 + 127 * half rounding of d
 *              -> 0.56 * amax/127;
 *   Q8_K:      float d = amax/127: |e| <= d/2 (+ float rounding) -> 0.51 * amax/127;
 *   Q4_0:      |d| = amax/8, the code 16 for x = -max clips to 15: |e| <= |d| (+ half rounding)
 *              -> 1.01 * amax/8;   Q5_0: same with 16 levels each side -> 1.01 * amax/16;
 *   Q4_1/Q5_1: d = (max - min)/15 or /31, m = min as half: |e| <= d/2 + half rounding of m and
 *              of d times the top code -> 0.52 d + (|min| + 31 d) * 2^-11;
 *   F16: |x| 2^-11 + 2^-25; BF16: |x| 2^-8;
 *   Q4_K/Q5_K/Q6_K: scales and mins are least-squares fits, then 6- or 8-bit quantized
 *              against the super-block maximum, so only a loose bound holds per element:
 *              |e| <= amax(super-block) * {0.12, 0.07, 0.035} (observed maxima on the
 *              Gaussian, outlier and offset data here: 0.067, 0.038, 0.018); the RMS check
 *              below is the tighter one;
 *   Q2_K/Q3_K: the same over 16-element sub-blocks with 4 (Q2_K: 4-bit scale and min) or 8
 *              levels (Q3_K: symmetric, 6-bit scale), so an offset or a spike costs more:
 *              |e| <= {0.40, 0.20} amax(super-block) (observed above {0.25, 0.12});
 *   MXFP4:     d = 2^(floor(log2 amax) - 3), codes up to 12 d while amax < 16 d: values
 *              above 12 d clip, |e| <= 4 d <= amax / 4 (gaps below are at most 4 d too);
 *   IQ4_NL/IQ4_XS: least-squares scales over the 16-value table (gaps up to 24 of 127 at the
 *              ends), IQ4_XS's 6-bit block scales against the super-block's largest: a loose
 *              |e| <= 0.12 amax (of the block / super-block), the RMS check the tight one. */
static float elem_bound(uint32_t type, const float *x, int64_t n)
{
    float amax, mn, mx;
    block_stats(x, n, &amax, &mn, &mx);
    const float hr = 1.0f / 2048.0f; /* half rounding, relative */
    switch (type) {
    case SL_GGML_Q8_0:
    case SL_GGML_Q8_1: return 0.56f * amax / 127.0f;
    case SL_GGML_Q8_K: return 0.51f * amax / 127.0f;
    case SL_GGML_Q4_0: return 1.01f * amax / 8.0f;
    case SL_GGML_Q5_0: return 1.01f * amax / 16.0f;
    case SL_GGML_Q4_1: {
        const float d = (mx - mn) / 15.0f;
        return 0.52f * d + (fabsf(mn) + 15.0f * d) * hr;
    }
    case SL_GGML_Q5_1: {
        const float d = (mx - mn) / 31.0f;
        return 0.52f * d + (fabsf(mn) + 31.0f * d) * hr;
    }
    case SL_GGML_Q2_K: return 0.40f * amax;
    case SL_GGML_Q3_K: return 0.20f * amax;
    case SL_GGML_Q4_K: return 0.12f * amax;
    case SL_GGML_Q5_K: return 0.07f * amax;
    case SL_GGML_Q6_K: return 0.035f * amax;
    case SL_GGML_MXFP4: return 0.25f * amax;
    case SL_GGML_IQ4_NL: return 0.12f * amax;
    case SL_GGML_IQ4_XS: return 0.12f * amax;
    case SL_GGML_F16: return amax * hr + 0x1p-25f; /* + half a subnormal step */
    case SL_GGML_BF16: return amax / 256.0f;
    default: return 0.0f; /* F32: exact */
    }
}

/* RMS(error) / RMS(x) bound on standard-normal rows (K-quants and the simple types alike);
 * measured values are about 2/3 of these. */
static double rms_bound(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q4_0: return 0.14;
    case SL_GGML_Q4_1: return 0.12;
    case SL_GGML_Q5_0: return 0.07;
    case SL_GGML_Q5_1: return 0.06;
    case SL_GGML_Q8_0:
    case SL_GGML_Q8_1:
    case SL_GGML_Q8_K: return 0.01;
    case SL_GGML_Q2_K: return 0.42;
    case SL_GGML_Q3_K: return 0.22;
    case SL_GGML_Q4_K: return 0.11;
    case SL_GGML_Q5_K: return 0.055;
    case SL_GGML_Q6_K: return 0.03;
    case SL_GGML_MXFP4: return 0.17;
    case SL_GGML_IQ4_NL: return 0.11;
    case SL_GGML_IQ4_XS: return 0.11;
    default: return 0.01;
    }
}

static float xs[N_MAX], ys[N_MAX];
static uint8_t qa[N_MAX * 4 + 16], qb[N_MAX * 4 + 16];

/* Quantize+dequantize row x[0..n) of `type`; checks the per-block bounds. Returns the sum of
 * squared errors. */
static double round_trip(uint32_t type, const float *x, int64_t n, const char *what)
{
    sl_error err;
    const int64_t bs = block_of(type);
    CHECK_MSG(sl_quant_row(type, x, qa, n, &err) == SL_OK, "%s", err.msg);
    CHECK_MSG(sl_quant_dequant_row(type, qa, ys, n, &err) == SL_OK, "%s", err.msg);
    double sse = 0.0;
    int reported = 0;
    for (int64_t b = 0; b < n / bs; b++) {
        const float bound = elem_bound(type, x + b * bs, bs);
        for (int64_t i = b * bs; i < (b + 1) * bs; i++) {
            const float e = fabsf(ys[i] - x[i]);
            sse += (double)e * e;
            if (!(e <= bound) && !reported) {
                reported = 1;
                CHECK_MSG(0, "%s %s: element %lld: x %.9g -> %.9g, |e| %.3g > bound %.3g", what,
                          sl_gguf_type_get(type)->name, (long long)i, x[i], ys[i], e, bound);
            }
        }
    }
    return sse;
}

static const uint32_t QUANT_TYPES[] = {
    SL_GGML_F32,  SL_GGML_F16,  SL_GGML_BF16, SL_GGML_Q4_0, SL_GGML_Q4_1, SL_GGML_Q5_0,
    SL_GGML_Q5_1, SL_GGML_Q8_0, SL_GGML_Q8_1, SL_GGML_Q2_K, SL_GGML_Q3_K, SL_GGML_Q4_K,
    SL_GGML_Q5_K, SL_GGML_Q6_K, SL_GGML_Q8_K, SL_GGML_MXFP4, SL_GGML_IQ4_NL, SL_GGML_IQ4_XS,
};
enum { N_QUANT_TYPES = sizeof QUANT_TYPES / sizeof QUANT_TYPES[0] };

static void test_type_table(void)
{
    int n_supported = 0, n_quant = 0;
    for (uint32_t t = 0; t < SL_GGML_TYPE_LIMIT + 2; t++) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(t);
        if (!sl_quant_supported(t)) {
            CHECK(!sl_quant_can_quantize(t));
            CHECK(sl_quant_row_bytes(t, 256) == 0);
            continue;
        }
        n_supported++;
        n_quant += sl_quant_can_quantize(t);
        CHECK_MSG(ti != NULL, "supported code %u is not in the GGUF table", t);
        if (!ti) continue;
        CHECK_MSG(sl_quant_row_bytes(t, ti->block_size) == ti->type_size,
                  "%s: row bytes of one block %zu != GGUF type_size %u", ti->name,
                  sl_quant_row_bytes(t, ti->block_size), ti->type_size);
        CHECK(sl_quant_row_bytes(t, 3 * (int64_t)ti->block_size) == 3 * (size_t)ti->type_size);
        if (ti->block_size > 1) CHECK(sl_quant_row_bytes(t, ti->block_size + 1) == 0);
    }
    /* every live code but Q1_0 dequantizes; 18 quantize */
    CHECK_MSG(n_supported == 33, "n_supported %d", n_supported);
    CHECK_MSG(n_quant == N_QUANT_TYPES, "n_quant %d", n_quant);
    for (int k = 0; k < N_QUANT_TYPES; k++) CHECK(sl_quant_can_quantize(QUANT_TYPES[k]));
    CHECK(!sl_quant_supported(SL_GGML_Q1_0));
    CHECK(sl_quant_supported(SL_GGML_NVFP4) && !sl_quant_can_quantize(SL_GGML_NVFP4));

    sl_error err;
    float x[256] = {0};
    uint8_t q[512];
    CHECK(sl_quant_row(SL_GGML_IQ2_XXS, x, q, 256, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "IQ2_XXS");
    CHECK_CONTAINS(err.msg, "no reference quantizer");
    CHECK(sl_quant_dequant_row(SL_GGML_Q1_0, q, x, 128, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "Q1_0");
    CHECK(sl_quant_row(SL_GGML_Q4_K, x, q, 128, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "256");
    CHECK(sl_quant_dequant_row(SL_GGML_Q6_K, NULL, x, 256, &err) == SL_ERR_INVALID);
}

static void test_gaussian(void)
{
    rng r = {0x9e3779b97f4a7c15ull};
    for (int k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t t = QUANT_TYPES[k];
        const int64_t n = N_MAX;
        double sse = 0.0, ssx = 0.0;
        for (int rep = 0; rep < 8; rep++) {
            const float scale = rep % 2 ? 0.02f : 3.0f;
            for (int64_t i = 0; i < n; i++) {
                xs[i] = gauss(&r) * scale;
                ssx += (double)xs[i] * xs[i] / ((double)scale * scale);
            }
            sse += round_trip(t, xs, n, "gaussian") / ((double)scale * scale);
        }
        const double rel = sqrt(sse / ssx);
        CHECK_MSG(rel <= rms_bound(t), "%s: rms error %.4f > %.4f", sl_gguf_type_get(t)->name,
                  rel, rms_bound(t));
        if (getenv("SL_QUANT_REF_VERBOSE"))
            printf("%-5s rms rel error %.5f (bound %.3f)\n", sl_gguf_type_get(t)->name, rel,
                   rms_bound(t));
    }
}

/* Heavier-tailed data: outliers every 37 elements, and uniform positive data (the min/max
 * types' offset path). */
static void test_shapes(void)
{
    rng r = {12345};
    for (int k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t t = QUANT_TYPES[k];
        for (int64_t i = 0; i < N_MAX; i++) xs[i] = gauss(&r) * (i % 37 == 0 ? 30.0f : 1.0f);
        round_trip(t, xs, N_MAX, "outliers");
        for (int64_t i = 0; i < N_MAX; i++) xs[i] = 5.0f + (float)uniform01(&r);
        round_trip(t, xs, N_MAX, "uniform [5,6)");
    }
}

static void test_edges(void)
{
    sl_error err;
    for (int k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t t = QUANT_TYPES[k];
        const char *name = sl_gguf_type_get(t)->name;
        const int64_t n = 256; /* a multiple of every block size */

        /* zeros: exact zeros back (+0 or -0) */
        memset(xs, 0, sizeof xs);
        CHECK(sl_quant_row(t, xs, qa, n, &err) == SL_OK);
        CHECK(sl_quant_dequant_row(t, qa, ys, n, &err) == SL_OK);
        int nonzero = 0;
        for (int64_t i = 0; i < n; i++) nonzero += ys[i] != 0.0f;
        CHECK_MSG(nonzero == 0, "%s: zeros gave %d nonzero values", name, nonzero);

        /* constants, positive and negative, and a lone spike among zeros */
        for (int64_t i = 0; i < n; i++) xs[i] = 0.75f;
        round_trip(t, xs, n, "constant 0.75");
        for (int64_t i = 0; i < n; i++) xs[i] = -3.5f;
        round_trip(t, xs, n, "constant -3.5");
        memset(xs, 0, sizeof xs);
        xs[77] = -9.0f;
        round_trip(t, xs, n, "spike");

        /* huge: sigma 1e4, so amax < 65504 and every half scale (d = amax/8 at most) stays
         * finite; larger blocks give inf scales, as in ggml */
        rng r = {777};
        for (int64_t i = 0; i < n; i++) xs[i] = gauss(&r) * 1e4f;
        round_trip(t, xs, n, "huge (1e4)");

        /* tiny: the half scales underflow to subnormals or zero, so the relative error is
         * unbounded by design; the values must stay finite and within amax of the input */
        for (int64_t i = 0; i < n; i++) xs[i] = gauss(&r) * 1e-7f;
        CHECK(sl_quant_row(t, xs, qa, n, &err) == SL_OK);
        CHECK(sl_quant_dequant_row(t, qa, ys, n, &err) == SL_OK);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += !(isfinite(ys[i]) && fabsf(ys[i] - xs[i]) <= 1e-6f);
        CHECK_MSG(bad == 0, "%s: tiny values: %d bad", name, bad);
    }

    /* Q8_K keeps the per-16 sums of its quants */
    rng r = {99};
    for (int64_t i = 0; i < 512; i++) xs[i] = gauss(&r);
    CHECK(sl_quant_row(SL_GGML_Q8_K, xs, qa, 512, &err) == SL_OK);
    for (int b = 0; b < 2; b++) {
        sl_block_q8_K blk;
        memcpy(&blk, qa + b * sizeof blk, sizeof blk);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += blk.qs[16 * g + i];
            CHECK(blk.bsums[g] == s);
        }
    }
    /* Q8_1 keeps s = d * sum(q) as a half */
    CHECK(sl_quant_row(SL_GGML_Q8_1, xs, qa, 32, &err) == SL_OK);
    sl_block_q8_1 b81;
    memcpy(&b81, qa, sizeof b81);
    int s = 0;
    for (int i = 0; i < 32; i++) s += b81.qs[i];
    CHECK(b81.s == sl_quant_fp32_to_fp16((float)s * sl_quant_fp16_to_fp32(b81.d)));
}

static void test_determinism(void)
{
    rng r = {4242};
    sl_error err;
    for (int k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t t = QUANT_TYPES[k];
        const int64_t n = N_MAX;
        for (int64_t i = 0; i < n; i++) xs[i] = gauss(&r);
        const size_t bytes = sl_quant_row_bytes(t, n);
        CHECK(bytes > 0 && bytes < sizeof qb);
        CHECK(sl_quant_row(t, xs, qa, n, &err) == SL_OK);
        memset(qb, 0xA5, sizeof qb);
        CHECK(sl_quant_row(t, xs, qb, n, &err) == SL_OK);
        CHECK_MSG(memcmp(qa, qb, bytes) == 0, "%s: not deterministic", sl_gguf_type_get(t)->name);
        CHECK(qb[bytes] == 0xA5); /* writes exactly row_bytes */
        /* block independence, written at an odd (unaligned) offset */
        const int64_t bs = block_of(t);
        const size_t bb = sl_quant_row_bytes(t, bs);
        for (int64_t b = 0; b < n / bs; b += 3) {
            CHECK(sl_quant_row(t, xs + b * bs, qb + 1, bs, &err) == SL_OK);
            CHECK_MSG(memcmp(qa + (size_t)b * bb, qb + 1, bb) == 0, "%s: block %lld differs",
                      sl_gguf_type_get(t)->name, (long long)b);
        }
        /* dequantizing from an unaligned source gives the same floats */
        memmove(qb + 1, qa, bytes);
        CHECK(sl_quant_dequant_row(t, qa, ys, n, &err) == SL_OK);
        static float ys2[N_MAX];
        CHECK(sl_quant_dequant_row(t, qb + 1, ys2, n, &err) == SL_OK);
        CHECK(memcmp(ys, ys2, (size_t)n * sizeof(float)) == 0);
    }
}

int main(void)
{
    test_type_table();
    test_gaussian();
    test_shapes();
    test_edges();
    test_determinism();
    return sl_test_finish("quant_ref_test");
}
