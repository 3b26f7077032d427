/* AVX-512 kernels (16 float lanes; F, BW, VL, plus FMA and F16C). Compiled for those extensions
 * by a file-wide target attribute (the pragma below); sl_cpu_ops_init only hands out this table
 * when cpuid reports all of them (Skylake-SP and later; the GPU hosts are Sapphire Rapids).
 * Tails use AVX-512 write masks, so every loop has one code path for all lengths; F16 tails use
 * the BW masked 16-bit load. Same algorithms as ops_avx2.c. */
#if defined(__x86_64__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/ops_impl.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
#endif

/* lanes < n - i set, all 16 when at least 16 remain */
static inline __mmask16 mask16(int64_t i, int64_t n)
{
    return n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
}

static inline __m512 ld16(const float *p, int64_t i, int64_t n)
{
    return _mm512_maskz_loadu_ps(mask16(i, n), p + i);
}

static inline __attribute__((always_inline)) void st16(float *p, int64_t i, int64_t n, __m512 v)
{
    _mm512_mask_storeu_ps(p + i, mask16(i, n), v);
}

/* e^x, the Cephes polynomial of ops_avx2.c's exp8; scalef applies 2^n without integer tricks.
 * x > 88 saturates at e^88, x < -87.3 (or -inf) gives 0. */
static inline __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    const __mmask16 zero = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps((__mmask16)~zero, y, n);
}

static inline __m512 silu16(__m512 x)
{
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f),
                                          exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

/* GELU, the forms and constants of ops_avx2.c's gelu_tanh8 / gelu_erf8 (see there why). */
static inline __m512 gelu_tanh16(__m512 x)
{
    const __m512 x2 = _mm512_mul_ps(x, x);
    const __m512 k = _mm512_set1_ps(1.5957691216057308f), ka = _mm512_set1_ps(0.0713548162726f);
    const __m512 v = _mm512_mul_ps(x, _mm512_fmadd_ps(ka, x2, k));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f),
                                          exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
}

static inline __m512 gelu_erf16(__m512 x)
{
    const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.5f), z, one));
    __m512 p = _mm512_set1_ps(0.17087277f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f));
    const __m512 e = _mm512_mul_ps(t, exp16(_mm512_fnmadd_ps(z, z, p)));
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ); /* w < 0 */
    const __m512 erfc = _mm512_mask_sub_ps(e, pos, _mm512_set1_ps(2.0f), e);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), erfc);
}

static void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps,
                     bool one_plus_w)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
        a1 = _mm512_fmadd_ps(v1, v1, a1);
    }
    for (; i < n; i += 16) { /* masked lanes load as 0 and add nothing */
        const __m512 v0 = ld16(x, i, n);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
    }
    const float r = 1.0f / sqrtf(_mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) / (float)n + eps);
    const __m512 vr = _mm512_set1_ps(r), one = _mm512_set1_ps(1.0f);
    for (i = 0; i < n; i += 16) {
        __m512 v = _mm512_mul_ps(ld16(x, i, n), vr);
        if (w) {
            __m512 g = ld16(w, i, n);
            if (one_plus_w) g = _mm512_add_ps(g, one);
            v = _mm512_mul_ps(v, g);
        }
        st16(y, i, n, v);
    }
}

static void softmax(float *x, int64_t n, float scale, const float *mask)
{
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 vmx = ninf;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mk = mask16(i, n);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), vs);
        if (mask) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, mask + i));
        _mm512_mask_storeu_ps(x + i, mk, v);
        vmx = _mm512_mask_max_ps(vmx, mk, vmx, v);
    }
    const float mx = _mm512_reduce_max_ps(vmx);
    if (mx == -INFINITY) { /* fully masked row: zeros, as the reference */
        for (int64_t i = 0; i < n; i += 16) st16(x, i, n, _mm512_setzero_ps());
        return;
    }
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mk = mask16(i, n);
        const __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(ld16(x, i, n), vm)));
        _mm512_mask_storeu_ps(x + i, mk, e);
        acc = _mm512_add_ps(acc, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc));
    for (int64_t i = 0; i < n; i += 16) st16(x, i, n, _mm512_mul_ps(ld16(x, i, n), inv));
}

static void silu(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) st16(y, i, n, silu16(ld16(x, i, n)));
}

static void swiglu(const float *gate, const float *up, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16)
        st16(out, i, n, _mm512_mul_ps(silu16(ld16(gate, i, n)), ld16(up, i, n)));
}

static void geglu(const float *gate, const float *up, float *out, int64_t n, sl_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 g = ld16(gate, i, n);
        __m512 y = kind == SL_GELU_ERF ? gelu_erf16(g) : gelu_tanh16(g);
        if (up) y = _mm512_mul_ps(y, ld16(up, i, n));
        st16(out, i, n, y);
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
            for (int32_t i = 0; i < h; i += 16) {
                const __m512 x0 = ld16(row, i, h), vc = ld16(c, i, h), vs = ld16(s, i, h);
                const __m512 x1 = ld16(row + h, i, h);
                st16(row, i, h, _mm512_fmsub_ps(x0, vc, _mm512_mul_ps(x1, vs)));
                st16(row + h, i, h, _mm512_fmadd_ps(x0, vs, _mm512_mul_ps(x1, vc)));
            }
        } else {
            /* pairs never straddle a vector: n_rot and i are even, so masks cover whole pairs */
            for (int32_t j = 0; j < n_rot; j += 16) {
                const __m512 v = ld16(row, j, n_rot);
                const __m512 sw = _mm512_permute_ps(v, 0xb1); /* (x1, x0, x3, x2, ...) */
                st16(row, j, n_rot,
                     _mm512_fmadd_ps(v, ld16(c, j, n_rot), _mm512_mul_ps(sw, ld16(s, j, n_rot))));
            }
        }
    }
}

static void add(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) st16(y, i, n, _mm512_add_ps(ld16(a, i, n), ld16(b, i, n)));
}

static void mul(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) st16(y, i, n, _mm512_mul_ps(ld16(a, i, n), ld16(b, i, n)));
}

/* F16C's rounding (see ops_avx2.c's to_f16); the tail by a masked 16-bit store */
static void to_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16)
        _mm256_mask_storeu_epi16(y + i, mask16(i, n),
                                 _mm512_cvtps_ph(ld16(x, i, n), _MM_FROUND_TO_NEAREST_INT));
}

static void scale(float *x, int64_t n, float s)
{
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) st16(x, i, n, _mm512_mul_ps(ld16(x, i, n), vs));
}

/* ---- attention primitives (attn_decode_tmpl.h) ----------------------------------------- */

static inline __m512 ld16_f16(const uint16_t *p, int64_t i, int64_t n)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(i, n), p + i));
}

static inline __attribute__((always_inline)) float k_dot_f32(const float *a, const float *b, int32_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int32_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) s0 = _mm512_fmadd_ps(ld16(a, i, n), ld16(b, i, n), s0);
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static inline __attribute__((always_inline)) float k_dot_f16(const float *a, const uint16_t *b, int32_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int32_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 b0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i)));
        const __m512 b1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i + 16)));
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), b0, s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), b1, s1);
    }
    for (; i < n; i += 16) s0 = _mm512_fmadd_ps(ld16(a, i, n), ld16_f16(b, i, n), s0);
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* Weighted sum of nb rows into acc: 64 columns at a time in 4 registers (4 independent FMA
 * chains), then 16 at a time with the last one masked. */
#define SL_WSUM_AVX512(NAME, T, LOAD)                                                        \
    static inline void NAME(float *acc, const float *w, const T *v, size_t stride, int32_t nb, \
                            int32_t n)                                                        \
    {                                                                                         \
        int32_t d = 0;                                                                        \
        for (; d + 64 <= n; d += 64) {                                                        \
            __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);         \
            __m512 a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);    \
            for (int32_t t = 0; t < nb; t++) {                                                \
                const T *r = v + (size_t)t * stride;                                          \
                const __m512 wt = _mm512_set1_ps(w[t]);                                       \
                a0 = _mm512_fmadd_ps(wt, LOAD(r, d, n), a0);                                  \
                a1 = _mm512_fmadd_ps(wt, LOAD(r, d + 16, n), a1);                             \
                a2 = _mm512_fmadd_ps(wt, LOAD(r, d + 32, n), a2);                             \
                a3 = _mm512_fmadd_ps(wt, LOAD(r, d + 48, n), a3);                             \
            }                                                                                 \
            _mm512_storeu_ps(acc + d, a0);                                                    \
            _mm512_storeu_ps(acc + d + 16, a1);                                               \
            _mm512_storeu_ps(acc + d + 32, a2);                                               \
            _mm512_storeu_ps(acc + d + 48, a3);                                               \
        }                                                                                     \
        for (; d < n; d += 16) {                                                              \
            __m512 a = ld16(acc, d, n);                                                       \
            for (int32_t t = 0; t < nb; t++)                                                  \
                a = _mm512_fmadd_ps(_mm512_set1_ps(w[t]), LOAD(v + (size_t)t * stride, d, n), \
                                    a);                                                       \
            st16(acc, d, n, a);                                                               \
        }                                                                                     \
    }

SL_WSUM_AVX512(k_wsum_f32, float, ld16)
SL_WSUM_AVX512(k_wsum_f16, uint16_t, ld16_f16)

static inline __attribute__((always_inline)) void k_scal(float *acc, float s, int32_t n) { scale(acc, n, s); }

static inline __attribute__((always_inline)) float k_exp_sum(float *s, int32_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (int32_t i = 0; i < n; i += 16) {
        const __mmask16 mk = mask16(i, n);
        const __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(ld16(s, i, n), vm)));
        _mm512_mask_storeu_ps(s + i, mk, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

#define SL_ATTN_DECODE_FN attn_decode
#include "kernels/cpu/attn_decode_tmpl.h"

/* ---- prompt-attention primitives (attn_prefill_tmpl.h) ---------------------------------- */

typedef __m512 sl_vf;
/* QK: 8 keys x 2 vectors = 16 accumulators; PV: 4 rows x 4 vectors = 16 (of 32 registers) */
enum { SL_VW = 16, SL_ATTN_ROWS = 32, SL_PF_NJ = 8, SL_PF_PR = 4, SL_PF_NC = 4 };

static inline __attribute__((always_inline)) sl_vf v_zero(void) { return _mm512_setzero_ps(); }
static inline __attribute__((always_inline)) sl_vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline __attribute__((always_inline)) sl_vf v_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline __attribute__((always_inline)) void v_st(float *p, sl_vf v) { _mm512_storeu_ps(p, v); }
static inline __attribute__((always_inline)) sl_vf v_fma(sl_vf a, sl_vf b, sl_vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline __attribute__((always_inline)) sl_vf v_mul(sl_vf a, sl_vf b) { return _mm512_mul_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_add(sl_vf a, sl_vf b) { return _mm512_add_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_sub(sl_vf a, sl_vf b) { return _mm512_sub_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_max(sl_vf a, sl_vf b) { return _mm512_max_ps(a, b); }
static inline __attribute__((always_inline)) sl_vf v_exp(sl_vf x) { return exp16(x); }

static inline __attribute__((always_inline)) sl_vf v_mask_inf(sl_vf s, float kp, sl_vf hi, sl_vf lo)
{
    const sl_vf vk = _mm512_set1_ps(kp);
    const __mmask16 out = _mm512_cmp_ps_mask(vk, hi, _CMP_GT_OQ) |
                          _mm512_cmp_ps_mask(vk, lo, _CMP_LT_OQ);
    return _mm512_mask_mov_ps(s, out, _mm512_set1_ps(-INFINITY));
}

/* cap tanh(y), y = s / cap, as sign(y) (1 - e) / (1 + e), e = e^(-2|y|): no overflow; the
 * absolute error near 0 is ~cap ulp(1), far below the logits' own rounding */
static inline __attribute__((always_inline)) sl_vf v_softcap(sl_vf s, float cap, float inv_cap)
{
    const sl_vf y = _mm512_mul_ps(s, _mm512_set1_ps(inv_cap)), one = _mm512_set1_ps(1.0f);
    const sl_vf e = exp16(_mm512_mul_ps(_mm512_abs_ps(y), _mm512_set1_ps(-2.0f)));
    const sl_vf r = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
    const __mmask16 neg = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mul_ps(_mm512_mask_sub_ps(r, neg, _mm512_setzero_ps(), r),
                         _mm512_set1_ps(cap));
}

static inline __attribute__((always_inline)) void k_cvt_row(float *dst, const void *src, bool f16, int32_t n, int32_t np)
{
    /* whole vectors first without masks: this runs twice per key in the tiled kernel */
    int32_t d = 0;
    if (f16)
        for (; d + 16 <= n; d += 16)
            _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(
                                          (const __m256i *)((const uint16_t *)src + d))));
    else
        for (; d + 16 <= n; d += 16)
            _mm512_storeu_ps(dst + d, _mm512_loadu_ps((const float *)src + d));
    for (; d < np; d += 16)
        _mm512_storeu_ps(dst + d, d >= n ? _mm512_setzero_ps()
                                  : f16  ? ld16_f16((const uint16_t *)src, d, n)
                                         : ld16((const float *)src, d, n));
}

#define SL_ATTN_PREFILL_FN attn_prefill
#include "kernels/cpu/attn_prefill_tmpl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const sl__cpu_kernels sl__cpu_kernels_avx512 = {
    .isa = SL_CPU_ISA_AVX512,
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
