/* AVX2 + FMA + F16C kernels (8 float lanes). Every function in this file is compiled for those
 * extensions through a target attribute applied to the whole file (the pragma below), so the
 * library builds with default flags; sl_cpu_ops_init only hands out this table when cpuid says
 * the CPU has all three. Loop tails (n mod 8) use masked loads/stores for elementwise ops and
 * scalar code for the rest. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/ops_impl.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

/* lanes < rem set: the mask of a tail of rem (0..8) elements */
static inline __m256i tail_mask(int64_t rem)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Load/store 8 floats at p + i, or the n - i < 8 that remain (the rest load as 0 and are not
 * stored): full vectors take the plain unaligned path, only the tail pays for masking. */
static inline __m256 ld8(const float *p, int64_t i, int64_t n)
{
    return n - i >= 8 ? _mm256_loadu_ps(p + i) : _mm256_maskload_ps(p + i, tail_mask(n - i));
}

static inline __attribute__((always_inline)) void st8(float *p, int64_t i, int64_t n, __m256 v)
{
    if (n - i >= 8)
        _mm256_storeu_ps(p + i, v);
    else
        _mm256_maskstore_ps(p + i, tail_mask(n - i), v);
}

/* 8 halves at p + i widened, or the n - i < 8 that remain (copied to a zeroed buffer first:
 * F16C has no masked load) */
__attribute__((noinline)) static __m256 ld8_f16_tail(const uint16_t *p, int64_t rem)
{
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)rem * sizeof *tmp);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}

static inline __m256 ld8_f16(const uint16_t *p, int64_t i, int64_t n)
{
    if (n - i >= 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i)));
    return ld8_f16_tail(p + i, n - i);
}

static inline __attribute__((always_inline)) float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __attribute__((always_inline)) float hmax(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x, Cephes expf polynomial (relative error ~2 ulp on [-87.3, 88]). x > 88 saturates at e^88
 * (finite: the exponent 2^n must stay <= 2^127), x < -87.3 (or -inf) gives 0 instead of a
 * subnormal (absolute error < 1.2e-38). */
static inline __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    const __m256 zero = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* r = x - n ln2, ln2 split in two so n * hi is exact */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(zero, y);
}

static inline __m256 silu8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* GELU, tanh form: 0.5 x (1 + tanh u) = x / (1 + e^(-2u)), 2u = x (k + k a x^2) with
 * k = 2 sqrt(2/pi), a = 0.044715: one exp and one division, no cancellation for x < 0. For
 * 2u < -88 exp8 saturates and the result is x e^-88 where the true value is even smaller
 * (|y| < 1.2e-37). */
static inline __m256 gelu_tanh8(__m256 x)
{
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 k = _mm256_set1_ps(1.5957691216057308f), ka = _mm256_set1_ps(0.0713548162726f);
    const __m256 v = _mm256_mul_ps(x, _mm256_fmadd_ps(ka, x2, k));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f),
                                          exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
}

/* GELU, erf form: 0.5 x erfc(w), w = -x / sqrt 2, with Numerical Recipes' erfcc: for z = |w|,
 * t = 1 / (1 + z/2), erfc(z) = t e^(-z^2 + P(t)) (relative error < 1.2e-7 for all z >= 0) and
 * erfc(w) = 2 - erfc(z) for w < 0. Both branches are relative-accurate where they are used:
 * erfc(z) is small only for x < 0, and 2 - erfc(z) lies in [1, 2]. */
static inline __m256 gelu_erf8(__m256 x)
{
    const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x),
                                   _mm256_set1_ps(0.70710678118654752f));
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, one));
    __m256 p = _mm256_set1_ps(0.17087277f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
    const __m256 e = _mm256_mul_ps(t, exp8(_mm256_fnmadd_ps(z, z, p)));
    const __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ); /* w < 0 */
    const __m256 erfc = _mm256_blendv_ps(e, _mm256_sub_ps(_mm256_set1_ps(2.0f), e), pos);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), erfc);
}

static void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps,
                     bool one_plus_w)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    if (i + 8 <= n) {
        const __m256 v0 = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        i += 8;
    }
    if (i < n) { /* masked lanes load as 0 and add nothing */
        const __m256 v0 = _mm256_maskload_ps(x + i, tail_mask(n - i));
        a1 = _mm256_fmadd_ps(v0, v0, a1);
    }
    const float r = 1.0f / sqrtf(hsum(_mm256_add_ps(a0, a1)) / (float)n + eps);
    const __m256 vr = _mm256_set1_ps(r), one = _mm256_set1_ps(1.0f);
    for (i = 0; i < n; i += 8) {
        __m256 v = _mm256_mul_ps(ld8(x, i, n), vr);
        if (w) {
            __m256 g = ld8(w, i, n);
            if (one_plus_w) g = _mm256_add_ps(g, one);
            v = _mm256_mul_ps(v, g);
        }
        st8(y, i, n, v);
    }
}

static void softmax(float *x, int64_t n, float scale, const float *mask)
{
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        if (mask) v = _mm256_add_ps(v, _mm256_loadu_ps(mask + i));
        _mm256_storeu_ps(x + i, v);
        vmx = _mm256_max_ps(vmx, v);
    }
    float mx = hmax(vmx);
    for (; i < n; i++) {
        x[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
        mx = x[i] > mx ? x[i] : mx;
    }
    if (mx == -INFINITY) { /* fully masked row: zeros, as the reference */
        for (i = 0; i < n; i++) x[i] = 0.0f;
        return;
    }
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) { /* tail through the same exp: pad lanes with -inf, which exp8 maps to 0 */
        const __m256i mk = tail_mask(n - i);
        const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                          _mm256_maskload_ps(x + i, mk), _mm256_castsi256_ps(mk));
        const __m256 e = exp8(_mm256_sub_ps(v, vm));
        _mm256_maskstore_ps(x + i, mk, e);
        acc = _mm256_add_ps(acc, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(acc));
    for (i = 0; i < n; i += 8) st8(x, i, n, _mm256_mul_ps(ld8(x, i, n), inv));
}

static void silu(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) st8(y, i, n, silu8(ld8(x, i, n)));
}

static void swiglu(const float *gate, const float *up, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8)
        st8(out, i, n, _mm256_mul_ps(silu8(ld8(gate, i, n)), ld8(up, i, n)));
}

static void geglu(const float *gate, const float *up, float *out, int64_t n, sl_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 g = ld8(gate, i, n);
        __m256 y = kind == SL_GELU_ERF ? gelu_erf8(g) : gelu_tanh8(g);
        if (up) y = _mm256_mul_ps(y, ld8(up, i, n));
        st8(out, i, n, y);
    }
}

static void rope_rows(float *x, int32_t n_rows, int32_t head_dim, int32_t n_rot,
                      sl_rope_mode mode, const float *cs)
{
    const float *c = cs, *s = cs + n_rot;
    const int32_t h = n_rot / 2;
    for (int32_t r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * (size_t)head_dim;
        if (mode == SL_ROPE_NEOX) {
            int32_t i = 0;
            for (; i + 8 <= h; i += 8) {
                const __m256 x0 = _mm256_loadu_ps(row + i), x1 = _mm256_loadu_ps(row + i + h);
                const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
                _mm256_storeu_ps(row + i, _mm256_fmsub_ps(x0, vc, _mm256_mul_ps(x1, vs)));
                _mm256_storeu_ps(row + i + h, _mm256_fmadd_ps(x0, vs, _mm256_mul_ps(x1, vc)));
            }
            for (; i < h; i++) {
                const float x0 = row[i], x1 = row[i + h];
                row[i] = x0 * c[i] - x1 * s[i];
                row[i + h] = x0 * s[i] + x1 * c[i];
            }
        } else {
            int32_t j = 0;
            for (; j + 8 <= n_rot; j += 8) { /* pairs never straddle: n_rot and j are even */
                const __m256 v = _mm256_loadu_ps(row + j);
                const __m256 sw = _mm256_permute_ps(v, 0xb1); /* (x1, x0, x3, x2, ...) */
                const __m256 vs = _mm256_mul_ps(sw, _mm256_loadu_ps(s + j));
                _mm256_storeu_ps(row + j, _mm256_fmadd_ps(v, _mm256_loadu_ps(c + j), vs));
            }
            for (; j < n_rot; j += 2) {
                const float x0 = row[j], x1 = row[j + 1];
                row[j] = x0 * c[j] + x1 * s[j];
                row[j + 1] = x1 * c[j + 1] + x0 * s[j + 1];
            }
        }
    }
}

static void add(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) st8(y, i, n, _mm256_add_ps(ld8(a, i, n), ld8(b, i, n)));
}

static void mul(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) st8(y, i, n, _mm256_mul_ps(ld8(a, i, n), ld8(b, i, n)));
}

/* F16C rounds to nearest even and quiets a NaN keeping its top payload bits, as the
 * reference does; the tail goes through a zeroed buffer (no masked 16-bit store) */
static void to_f16(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        uint16_t tmp[8];
        _mm_storeu_si128((__m128i *)tmp,
                         _mm256_cvtps_ph(ld8(x, i, n), _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, tmp, (size_t)(n - i) * sizeof *y);
    }
}

static void scale(float *x, int64_t n, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    for (int64_t i = 0; i < n; i += 8) st8(x, i, n, _mm256_mul_ps(ld8(x, i, n), vs));
}

/* ---- attention primitives (attn_decode_tmpl.h) ----------------------------------------- */

static inline __attribute__((always_inline)) float k_dot_f32(const float *a, const float *b, int32_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i < n; i += 8) s0 = _mm256_fmadd_ps(ld8(a, i, n), ld8(b, i, n), s0);
    return hsum(_mm256_add_ps(s0, s1));
}

static inline __attribute__((always_inline)) float k_dot_f16(const float *a, const uint16_t *b, int32_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i + 8)));
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, s1);
    }
    for (; i < n; i += 8) s0 = _mm256_fmadd_ps(ld8(a, i, n), ld8_f16(b, i, n), s0);
    return hsum(_mm256_add_ps(s0, s1));
}

/* Weighted sum of nb rows into acc: 64 columns at a time in 8 registers (8 independent FMA
 * chains hide the FMA latency), then 32 in 4 (head sizes 80, 96, 112), then 8 at a time, then
 * the masked tail. Every column is the same chain over t in any of them. The wide steps load
 * whole vectors (FULL): a tail load's call would make the compiler spill the accumulators
 * around it on every row. SL_WSUM_STEP: one step of U vectors (8 U columns). */
#define SL_WSUM_STEP(T, FULL, U)                                                             \
    for (; d + 8 * (U) <= n; d += 8 * (U)) {                                                  \
        __m256 a[U];                                                                          \
        for (int u = 0; u < (U); u++) a[u] = _mm256_loadu_ps(acc + d + 8 * u);               \
        for (int32_t t = 0; t < nb; t++) {                                                    \
            const T *r = v + (size_t)t * stride + d;                                          \
            const __m256 wt = _mm256_set1_ps(w[t]);                                           \
            for (int u = 0; u < (U); u++) a[u] = _mm256_fmadd_ps(wt, FULL(r + 8 * u), a[u]);   \
        }                                                                                     \
        for (int u = 0; u < (U); u++) _mm256_storeu_ps(acc + d + 8 * u, a[u]);               \
    }
#define SL_WSUM_AVX2(NAME, T, LOAD, FULL)                                                    \
    static inline void NAME(float *acc, const float *w, const T *v, size_t stride, int32_t nb, \
                            int32_t n)                                                        \
    {                                                                                         \
        int32_t d = 0;                                                                        \
        SL_WSUM_STEP(T, FULL, 8)                                                              \
        SL_WSUM_STEP(T, FULL, 4)                                                              \
        for (; d < n; d += 8) {                                                               \
            __m256 a = ld8(acc, d, n);                                                        \
            for (int32_t t = 0; t < nb; t++)                                                  \
                a = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), LOAD(v + (size_t)t * stride, d, n), \
                                    a);                                                       \
            st8(acc, d, n, a);                                                                \
        }                                                                                     \
    }

static inline __m256 full8_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

SL_WSUM_AVX2(k_wsum_f32, float, ld8, _mm256_loadu_ps)
SL_WSUM_AVX2(k_wsum_f16, uint16_t, ld8_f16, full8_f16)

static inline __attribute__((always_inline)) void k_scal(float *acc, float s, int32_t n) { scale(acc, n, s); }

static inline __attribute__((always_inline)) float k_exp_sum(float *s, int32_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {
        const __m256i mk = tail_mask(n - i);
        const __m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                          _mm256_maskload_ps(s + i, mk), _mm256_castsi256_ps(mk));
        const __m256 e = exp8(_mm256_sub_ps(v, vm));
        _mm256_maskstore_ps(s + i, mk, e);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum(acc);
}

#define SL_ATTN_DECODE_FN attn_decode
#include "kernels/cpu/attn_decode_tmpl.h"

/* ---- prompt-attention primitives (attn_prefill_tmpl.h) ---------------------------------- */

typedef __m256 sl_vf;
/* QK: 6 keys x 2 vectors = 12 accumulators; PV: 4 rows x 2 vectors = 8 (of 16 registers,
 * leaving room for the loaded operands and the broadcast) */
enum { SL_VW = 8, SL_ATTN_ROWS = 16, SL_PF_NJ = 6, SL_PF_PR = 4, SL_PF_NC = 2 };

static inline __attribute__((always_inline)) sl_vf v_zero(void) { return _mm256_setzero_ps(); }
static inline __attribute__((always_inline)) sl_vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline __attribute__((always_inline)) sl_vf v_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline __attribute__((always_inline)) void v_st(float *p, sl_vf v) { _mm256_storeu_ps(p, v); }
static inline __attribute__((always_inline)) sl_vf v_fma(sl_vf a, sl_vf b, sl_vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline __attribute__((always_inline)) sl_vf v_mul(sl_vf a, sl_vf b) { return _mm256_mul_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_add(sl_vf a, sl_vf b) { return _mm256_add_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_sub(sl_vf a, sl_vf b) { return _mm256_sub_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_max(sl_vf a, sl_vf b) { return _mm256_max_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_exp(sl_vf x) { return exp8(x); }

static inline __attribute__((always_inline)) sl_vf v_mask_inf(sl_vf s, float kp, sl_vf hi, sl_vf lo)
{
    const sl_vf vk = _mm256_set1_ps(kp);
    const sl_vf out = _mm256_or_ps(_mm256_cmp_ps(vk, hi, _CMP_GT_OQ),
                                   _mm256_cmp_ps(vk, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(s, _mm256_set1_ps(-INFINITY), out);
}

/* cap tanh(s / cap): the form of ops_avx512.c's v_softcap */
static inline __attribute__((always_inline)) sl_vf v_softcap(sl_vf s, float cap, float inv_cap)
{
    const sl_vf y = _mm256_mul_ps(s, _mm256_set1_ps(inv_cap)), one = _mm256_set1_ps(1.0f);
    const sl_vf sign = _mm256_set1_ps(-0.0f);
    const sl_vf e = exp8(_mm256_mul_ps(_mm256_andnot_ps(sign, y), _mm256_set1_ps(-2.0f)));
    const sl_vf r = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    return _mm256_mul_ps(_mm256_xor_ps(r, _mm256_and_ps(sign, y)), _mm256_set1_ps(cap));
}

static inline __attribute__((always_inline)) void k_cvt_row(float *dst, const void *src, bool f16, int32_t n, int32_t np)
{
    /* whole vectors first without the tail's care: this runs twice per key in the tiled kernel */
    int32_t d = 0;
    if (f16)
        for (; d + 8 <= n; d += 8)
            _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(
                                          (const __m128i *)((const uint16_t *)src + d))));
    else
        for (; d + 8 <= n; d += 8)
            _mm256_storeu_ps(dst + d, _mm256_loadu_ps((const float *)src + d));
    for (; d < np; d += 8)
        _mm256_storeu_ps(dst + d, d >= n ? _mm256_setzero_ps()
                                  : f16  ? ld8_f16((const uint16_t *)src, d, n)
                                         : ld8((const float *)src, d, n));
}

#define SL_ATTN_PREFILL_FN attn_prefill
#include "kernels/cpu/attn_prefill_tmpl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const sl__cpu_kernels sl__cpu_kernels_avx2 = {
    .isa = SL_CPU_ISA_AVX2,
    .rms_norm = rms_norm,
    .softmax = softmax,
    .silu = silu,
    .swiglu = swiglu,
    .geglu = geglu,
    .rope_rows = rope_rows,
    .attn_decode = attn_decode,
    .attn_prefill = attn_prefill,
    .attn_rows = SL_ATTN_ROWS,
    .to_f16 = to_f16,
    .add = add,
    .mul = mul,
    .scale = scale,
};

#endif /* __x86_64__ */
