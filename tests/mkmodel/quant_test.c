/* Unit tests of kernels/ref/quant: exhaustive half/bfloat16 round trips, rounding ties, and
 * Q8_0/Q4_0 error bounds and layouts. Bit-exactness against ggml's numpy port is checked
 * separately by quant_vs_gguf_py.py. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
#include "tests/testing.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Tests own their PRNG (testing.h's splitmix64) so runs are reproducible. */
static uint64_t next_u64(uint64_t *s) { return sl_test_splitmix64(s); }

static double uniform(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * 0x1p-53;
}

static float gauss(uint64_t *s)
{
    double u1 = uniform(s), u2 = uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Value of a half, computed independently of the code under test (double arithmetic). */
static double half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}

static void test_fp16_exhaustive(void)
{
    int bad_roundtrip = 0, bad_value = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = sl_quant_fp16_to_fp32((uint16_t)h);
        const int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m != 0) {
            /* NaN: payload kept on widening, quiet bit forced on narrowing */
            const uint32_t want = ((h & 0x8000u) << 16) | 0x7f800000u | ((uint32_t)m << 13);
            if (bits(f) != want) bad_nan++;
            if (sl_quant_fp32_to_fp16(f) != (uint16_t)(h | 0x0200u)) bad_nan++;
            continue;
        }
        const double v = half_value((uint16_t)h);
        if (!((double)f == v && signbit(f) == !!(h & 0x8000))) bad_value++;
        if (sl_quant_fp32_to_fp16(f) != h) bad_roundtrip++;
    }
    CHECK_MSG(bad_value == 0, "%d halves widened to the wrong float", bad_value);
    CHECK_MSG(bad_roundtrip == 0, "%d halves did not round-trip", bad_roundtrip);
    CHECK_MSG(bad_nan == 0, "%d NaN halves mishandled", bad_nan);
}

static void test_bf16_exhaustive(void)
{
    int bad = 0, bad_nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const float f = sl_quant_bf16_to_fp32((uint16_t)b);
        if (bits(f) != b << 16) bad++;
        const bool nan = ((b & 0x7f80u) == 0x7f80u) && (b & 0x7fu);
        const uint16_t back = sl_quant_fp32_to_bf16(f);
        if (nan) {
            if (back != (uint16_t)(b | 0x40u)) bad_nan++;
        } else if (back != b) {
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d bf16 patterns did not round-trip", bad);
    CHECK_MSG(bad_nan == 0, "%d bf16 NaNs not quieted as ggml does", bad_nan);
}

static void test_fp16_ties(void)
{
    CHECK(sl_quant_fp32_to_fp16(1.0f) == 0x3c00);
    CHECK(sl_quant_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);       /* tie -> even (down) */
    CHECK(sl_quant_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);   /* tie -> even (up) */
    CHECK(sl_quant_fp32_to_fp16(nextafterf(1.0f + 0x1p-11f, 2.0f)) == 0x3c01);
    CHECK(sl_quant_fp32_to_fp16(-1.0f - 0x1p-11f) == 0xbc00);
    CHECK(sl_quant_fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(sl_quant_fp32_to_fp16(nextafterf(65520.0f, 0.0f)) == 0x7bff);
    CHECK(sl_quant_fp32_to_fp16(65520.0f) == 0x7c00);              /* tie -> even = inf */
    CHECK(sl_quant_fp32_to_fp16(-1e10f) == 0xfc00);
    CHECK(sl_quant_fp32_to_fp16(INFINITY) == 0x7c00);
    CHECK(sl_quant_fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(sl_quant_fp32_to_fp16(0x1p-24f) == 0x0001);              /* smallest subnormal */
    CHECK(sl_quant_fp32_to_fp16(0x1p-25f) == 0x0000);              /* tie -> even = 0 */
    CHECK(sl_quant_fp32_to_fp16(nextafterf(0x1p-25f, 1.0f)) == 0x0001);
    CHECK(sl_quant_fp32_to_fp16(3 * 0x1p-25f) == 0x0002);          /* tie 1|2 -> 2 */
    CHECK(sl_quant_fp32_to_fp16(5 * 0x1p-25f) == 0x0002);          /* tie 2|3 -> 2 */
    CHECK(sl_quant_fp32_to_fp16(0x1p-14f) == 0x0400);              /* smallest normal */
    CHECK(sl_quant_fp32_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400);   /* tie 0x3ff|0x400 */
    CHECK(sl_quant_fp32_to_fp16(0x1p-14f - 3 * 0x1p-25f) == 0x03fe);
    CHECK(sl_quant_fp32_to_fp16(FLT_MIN) == 0x0000);
    CHECK(sl_quant_fp32_to_fp16(from_bits(1)) == 0x0000);          /* float denormal */

    /* Random floats over the half range: the result is a nearest half, ties to even. */
    uint64_t s = 42;
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        /* exponents from 2^-26 to 2^16 so subnormal, normal and overflow paths all occur */
        const uint32_t e = 101 + (uint32_t)(next_u64(&s) % 42);
        const uint32_t u = (uint32_t)(next_u64(&s) & 0x807fffffu) | (e << 23);
        const float f = from_bits(u);
        const uint16_t h = sl_quant_fp32_to_fp16(f);
        const double v = half_value(h), x = f;
        if (isinf(v)) {
            if (fabs(x) < 65520.0) bad++;
            continue;
        }
        const uint16_t mag = h & 0x7fff;
        const double err = fabs(v - x);
        /* neighbours: one ulp up and down in magnitude */
        const double up = half_value((uint16_t)((h & 0x8000) | (mag + 1)));
        const double dn = mag ? half_value((uint16_t)((h & 0x8000) | (mag - 1))) : -v;
        const double eu = isinf(up) ? INFINITY : fabs(up - x), ed = fabs(dn - x);
        if (err > eu || err > ed) bad++;
        if ((err == eu || err == ed) && (mag & 1)) bad++; /* a tie must land on even */
    }
    CHECK_MSG(bad == 0, "%d random floats not rounded to nearest-even half", bad);
}

static void test_bf16_ties(void)
{
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x3f808000u)) == 0x3f80); /* tie -> even (down) */
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x3f818000u)) == 0x3f82); /* tie -> even (up) */
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x3f808001u)) == 0x3f81);
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80); /* FLT_MAX -> inf */
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0); /* sNaN -> quiet */
    CHECK(sl_quant_fp32_to_bf16(from_bits(0xffc12345u)) == 0xffc1);
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x00008000u)) == 0x0000); /* denormal tie */
    CHECK(sl_quant_fp32_to_bf16(from_bits(0x00018000u)) == 0x0002);
}

/* Checks quantize -> dequantize error against the format's bound and returns max |error|/d. */
static void check_q_row(uint32_t type, const float *x, int64_t n, const char *what)
{
    const size_t nb = sl_quant_row_bytes(type, n);
    uint8_t *q = malloc(nb ? nb : 1);
    float *y = malloc((size_t)(n ? n : 1) * sizeof(float));
    sl_error err;
    CHECK(q && y);
    if (!q || !y) goto out;
    CHECK(sl_quant_row(type, x, q, n, &err) == SL_OK);
    CHECK(sl_quant_dequant_row(type, q, y, n, &err) == SL_OK);
    int bad = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + b * 32, *yb = y + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
        /* d as the format defines it, before half rounding; then allow for that rounding */
        const double d = type == SL_GGML_Q8_0 ? amax / 127.0 : amax / 8.0;
        const double step = type == SL_GGML_Q8_0 ? 0.5 : 1.0; /* Q4_0 clamps +8 to +7 */
        const double qmax = type == SL_GGML_Q8_0 ? 127.0 : 8.0;
        /* half rounding of d: relative 2^-11 for normals, absolute 2^-25 for subnormals */
        const double d_err = fmax(d * 0x1p-11, 0x1p-25);
        const double bound = d * step + qmax * d_err;
        for (int j = 0; j < 32; j++)
            if (fabs((double)yb[j] - xb[j]) > bound) bad++;
    }
    CHECK_MSG(bad == 0, "%s %s: %d elements outside the error bound", what,
              type == SL_GGML_Q8_0 ? "Q8_0" : "Q4_0", bad);
out:
    free(q);
    free(y);
}

static void test_q_random(void)
{
    uint64_t s = 7;
    const int64_t sizes[] = {32, 64, 32 * 7, 32 * 1000};
    const float scales[] = {1.0f, 1e-3f, 1e3f, 1e-6f, 3e4f};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
            const int64_t n = sizes[si];
            float *x = malloc((size_t)n * sizeof(float));
            if (!x) { CHECK(x != NULL); return; }
            for (int64_t i = 0; i < n; i++) x[i] = gauss(&s) * scales[k];
            char what[64];
            snprintf(what, sizeof what, "n=%lld scale=%g", (long long)n, (double)scales[k]);
            check_q_row(SL_GGML_Q8_0, x, n, what);
            check_q_row(SL_GGML_Q4_0, x, n, what);
            free(x);
        }
    }
}

static void test_q_layouts(void)
{
    sl_error err;
    /* Q8_0: amax 127 gives d = 1 exactly, so q = round-half-away(x). */
    float x[32];
    for (int j = 0; j < 31; j++) x[j] = (float)j - 15.5f;
    x[31] = 127.0f;
    sl_block_q8_0 b8;
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, &b8, 32, &err) == SL_OK);
    CHECK(b8.d == 0x3c00);
    for (int j = 0; j < 31; j++) {
        const int want = j < 16 ? j - 16 : j - 15; /* -15.5 -> -16, 0.5 -> 1 */
        CHECK_MSG(b8.qs[j] == want, "q8_0 qs[%d] = %d, want %d", j, b8.qs[j], want);
    }
    CHECK(b8.qs[31] == 127);

    /* Q4_0: x[0] = -8 is the largest magnitude, so d = 1 and q = x + 8 (first half) ... */
    for (int j = 0; j < 16; j++) x[j] = (float)j - 8.0f;
    for (int j = 0; j < 16; j++) x[16 + j] = 7.0f - (float)j; /* q = 15 - j */
    sl_block_q4_0 b4;
    CHECK(sl_quant_row(SL_GGML_Q4_0, x, &b4, 32, &err) == SL_OK);
    CHECK(b4.d == 0x3c00);
    for (int j = 0; j < 16; j++)
        CHECK_MSG(b4.qs[j] == (uint8_t)(j | ((15 - j) << 4)), "q4_0 qs[%d] = 0x%02x", j,
                  b4.qs[j]);
    float y[32];
    CHECK(sl_quant_dequant_row(SL_GGML_Q4_0, &b4, y, 32, &err) == SL_OK);
    for (int j = 0; j < 32; j++) CHECK(y[j] == x[j]);

    /* ... and d keeps the sign of that element: all-positive data gives a negative d. */
    for (int j = 0; j < 32; j++) x[j] = (float)(j + 1);
    CHECK(sl_quant_row(SL_GGML_Q4_0, x, &b4, 32, &err) == SL_OK);
    CHECK(sl_quant_fp16_to_fp32(b4.d) == -4.0f);
    CHECK((b4.qs[15] >> 4) == 0); /* x[31] = 32 -> -8 -> q 0 */
    /* equal magnitudes: the first one decides the sign */
    memset(x, 0, sizeof x);
    x[3] = -2.0f;
    x[9] = 2.0f;
    CHECK(sl_quant_row(SL_GGML_Q4_0, x, &b4, 32, &err) == SL_OK);
    CHECK(sl_quant_fp16_to_fp32(b4.d) == 0.25f);
}

static void test_q_edges(void)
{
    sl_error err;
    float x[64] = {0}, y[64];
    uint8_t q[2 * 34];
    /* all-zero blocks: d = 0, q8 zeros, q4 nibbles 8 (value 0); q4's d is -0 (0 / -8) */
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, q, 64, &err) == SL_OK);
    int nz = 0;
    for (int i = 0; i < 68; i++) nz += q[i] != 0;
    CHECK(nz == 0);
    CHECK(sl_quant_row(SL_GGML_Q4_0, x, q, 64, &err) == SL_OK);
    CHECK(q[0] == 0 && q[1] == 0x80 && q[2] == 0x88 && q[17] == 0x88 && q[20] == 0x88);
    CHECK(sl_quant_dequant_row(SL_GGML_Q4_0, q, y, 64, &err) == SL_OK);
    for (int i = 0; i < 64; i++) CHECK(y[i] == 0.0f);

    /* huge: the scale overflows half to inf, which is what ggml stores */
    for (int i = 0; i < 32; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * 1e30f;
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, q, 32, &err) == SL_OK);
    CHECK((q[0] | q[1] << 8) == 0x7c00);
    CHECK((int8_t)q[2] == 127 && (int8_t)q[3] == -127);
    /* largest representable scale: amax = 65504 * 127 keeps d finite */
    for (int i = 0; i < 32; i++) x[i] = (float)i * 65504.0f * 127.0f / 31.0f;
    check_q_row(SL_GGML_Q8_0, x, 32, "huge-finite");

    /* tiny: d underflows in half; values reconstruct as 0 (error <= amax) */
    for (int i = 0; i < 32; i++) x[i] = 1e-30f * (float)(i - 16);
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, q, 32, &err) == SL_OK);
    CHECK(sl_quant_dequant_row(SL_GGML_Q8_0, q, y, 32, &err) == SL_OK);
    for (int i = 0; i < 32; i++) CHECK(fabsf(y[i]) <= 16e-30f);
    /* float denormals so small that 1/d overflows: ggml's x86 result is all-zero quants */
    for (int i = 0; i < 32; i++) x[i] = from_bits((uint32_t)i * 3u);
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, q, 32, &err) == SL_OK);
    nz = 0;
    for (int i = 2; i < 34; i++) nz += q[i] != 0;
    CHECK(nz == 0);
    CHECK(sl_quant_row(SL_GGML_Q4_0, x, q, 32, &err) == SL_OK);
    nz = 0;
    for (int i = 2; i < 18; i++) nz += q[i] != 0;
    CHECK(nz == 0);
}

static void test_api(void)
{
    sl_error err;
    float x[64] = {0};
    uint8_t q[256];
    CHECK(sl_quant_row_bytes(SL_GGML_Q8_0, 64) == 68);
    CHECK(sl_quant_row_bytes(SL_GGML_Q4_0, 64) == 36);
    CHECK(sl_quant_row_bytes(SL_GGML_F16, 3) == 6);
    CHECK(sl_quant_row_bytes(SL_GGML_BF16, 5) == 10);
    CHECK(sl_quant_row_bytes(SL_GGML_F32, 5) == 20);
    CHECK(sl_quant_row_bytes(SL_GGML_Q8_0, 33) == 0);
    CHECK(sl_quant_row_bytes(SL_GGML_Q8_0, -32) == 0);
    CHECK(sl_quant_row_bytes(SL_GGML_Q4_K, 256) == 144);
    CHECK(sl_quant_row_bytes(SL_GGML_Q1_0, 128) == 0);
    CHECK(sl_quant_supported(SL_GGML_BF16) && !sl_quant_supported(SL_GGML_Q1_0));
    CHECK(sl_quant_supported(SL_GGML_IQ2_XXS) && !sl_quant_can_quantize(SL_GGML_IQ2_XXS));

    CHECK(sl_quant_row(SL_GGML_IQ3_XXS, x, q, 256, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "IQ3_XXS");
    CHECK(sl_quant_dequant_row(99, q, x, 32, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "99");
    CHECK(sl_quant_row(SL_GGML_Q8_0, x, q, 33, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "33");
    CHECK(sl_quant_row(SL_GGML_Q8_0, NULL, q, 32, &err) == SL_ERR_INVALID);
    CHECK(sl_quant_row(SL_GGML_Q8_0, NULL, NULL, 0, &err) == SL_OK);
    CHECK(sl_quant_row(SL_GGML_F16, x, q, 0, NULL) == SL_OK);

    /* F16/BF16 rows are the element conversions, little-endian */
    const float v[3] = {1.0f, -2.0f, 65520.0f};
    CHECK(sl_quant_row(SL_GGML_F16, v, q, 3, &err) == SL_OK);
    CHECK(q[0] == 0x00 && q[1] == 0x3c && q[2] == 0x00 && q[3] == 0xc0 && q[5] == 0x7c);
    CHECK(sl_quant_row(SL_GGML_BF16, v, q, 3, &err) == SL_OK);
    CHECK(q[0] == 0x80 && q[1] == 0x3f && q[2] == 0x00 && q[3] == 0xc0);
    float back[3];
    CHECK(sl_quant_dequant_row(SL_GGML_BF16, q, back, 3, &err) == SL_OK);
    CHECK(back[0] == 1.0f && back[1] == -2.0f && back[2] == 65536.0f);
}

int main(void)
{
    test_fp16_exhaustive();
    test_bf16_exhaustive();
    test_fp16_ties();
    test_bf16_ties();
    test_q_random();
    test_q_layouts();
    test_q_edges();
    test_api();
    return sl_test_finish("quant_test");
}
