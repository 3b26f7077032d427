/* tests/kernels/ops_testlib.h: what ops_test.c (the references) and ops_cpu_test.c (the fast
 * kernels against them) share — a reproducible PRNG, random vectors, half conversions and the
 * tolerance checks (header-only, as tests/testing.h counts CHECKs per translation unit). */
#ifndef SL_TESTS_KERNELS_OPS_TESTLIB_H
#define SL_TESTS_KERNELS_OPS_TESTLIB_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ops.h"
#include "tests/testing.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* tests own their PRNG so runs are reproducible: testing.h's splitmix64 */
static inline uint64_t next_u64(uint64_t *s) { return sl_test_splitmix64(s); }

static inline double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1p-53; }
                             
                             static inline float gauss(uint64_t *s)
{
    double u1 = uniform(s), u2 = uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static inline float *fvec(int64_t n, uint64_t *rng, float sigma)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sigma * gauss(rng);
    return x;
}

static inline float *fcopy(const float *x, int64_t n)
{
    float *y = malloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

/* IEEE half bits of f, round to nearest even (test-local, independent of the code under test) */
static inline uint16_t to_half(float f)
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
static inline double half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}

/* per-element |got - want| <= atol + rtol |want|; reports the worst element once */
static inline int close_arr(const char *what, const float *got, const float *want, int64_t n,
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
static inline void close_gelu(const char *what, const float *got, const float *want, const float *x,
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

static inline double max_abs(const float *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* ---- random KV caches (attention tests) ------------------------------------------------- */

static inline void *make_cache(int32_t n_pos, int32_t n_kv, int32_t hd, sl_kv_type t,
                               uint64_t *rng, float sigma)
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

static inline double cache_max_abs(const void *c, size_t n, sl_kv_type t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(t == SL_KV_F16 ? half_value(((const uint16_t *)c)[i])
                                        : (double)((const float *)c)[i]));
    return m;
}

#endif
