/* Scalar (portable C, float) kernels: the fallback table of kernels/cpu/ops.h, and the baseline
 * the SIMD tables are measured against. Reductions use 4 partial sums, as the SIMD paths use
 * lanes, which both shortens the dependency chain and halves the float rounding error growth. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/ops_impl.h"
#include "kernels/ref/half.h"
#include "kernels/ref/quant.h"

static void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps,
                     bool one_plus_w)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * x[i];
        s1 += x[i + 1] * x[i + 1];
        s2 += x[i + 2] * x[i + 2];
        s3 += x[i + 3] * x[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * x[i];
    const float r = 1.0f / sqrtf((s0 + s1 + s2 + s3) / (float)n + eps);
    for (i = 0; i < n; i++) {
        const float g = w ? (one_plus_w ? 1.0f + w[i] : w[i]) : 1.0f;
        y[i] = x[i] * r * g;
    }
}

static void softmax(float *x, int64_t n, float scale, const float *mask)
{
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
        mx = x[i] > mx ? x[i] : mx;
    }
    if (mx == -INFINITY) { /* fully masked row: zeros, as the reference */
        for (int64_t i = 0; i < n; i++) x[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void silu(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu(const float *gate, const float *up, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* GELU forms without cancellation in the negative tail (ops.h): the tanh form as
 * x * sigmoid(2u), 2u = x (2 sqrt(2/pi) + 2 sqrt(2/pi) 0.044715 x^2); the erf form through
 * erfcf. */
static float gelu1(float x, sl_gelu_kind kind)
{
    if (kind == SL_GELU_ERF) return 0.5f * x * erfcf(x * -0.70710678118654752f);
    const float v = x * (1.5957691216057308f + 0.0713548162726f * (x * x));
    return x / (1.0f + expf(-v));
}

static void geglu(const float *gate, const float *up, float *out, int64_t n, sl_gelu_kind kind)
{
    for (int64_t i = 0; i < n; i++) out[i] = gelu1(gate[i], kind) * (up ? up[i] : 1.0f);
}

static void rope_rows(float *x, int32_t n_rows, int32_t head_dim, int32_t n_rot,
                      sl_rope_mode mode, const float *cs)
{
    const float *c = cs, *s = cs + n_rot;
    const int32_t h = n_rot / 2;
    for (int32_t r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * (size_t)head_dim;
        if (mode == SL_ROPE_NEOX) {
            for (int32_t i = 0; i < h; i++) {
                const float x0 = row[i], x1 = row[i + h];
                row[i] = x0 * c[i] - x1 * s[i];
                row[i + h] = x0 * s[i] + x1 * c[i];
            }
        } else {
            for (int32_t j = 0; j < n_rot; j += 2) {
                const float x0 = row[j], x1 = row[j + 1];
                row[j] = x0 * c[j] + x1 * s[j];
                row[j + 1] = x1 * c[j + 1] + x0 * s[j + 1];
            }
        }
    }
}

static void add(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void mul(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

static void to_f16(const float *x, uint16_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = sl_quant_fp32_to_fp16(x[i]);
}

static void scale(float *x, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

/* ---- attention primitives (attn_decode_tmpl.h) ----------------------------------------- */

static inline __attribute__((always_inline)) float k_dot_f32(const float *a, const float *b, int32_t n)
{
    float s0 = 0.0f, s1 = 0.0f;
    int32_t i = 0;
    for (; i + 2 <= n; i += 2) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
    }
    if (i < n) s0 += a[i] * b[i];
    return s0 + s1;
}

static inline __attribute__((always_inline)) float k_dot_f16(const float *a, const uint16_t *b, int32_t n)
{
    float s0 = 0.0f, s1 = 0.0f;
    int32_t i = 0;
    for (; i + 2 <= n; i += 2) {
        s0 += a[i] * sl_half_to_float(b[i]);
        s1 += a[i + 1] * sl_half_to_float(b[i + 1]);
    }
    if (i < n) s0 += a[i] * sl_half_to_float(b[i]);
    return s0 + s1;
}

static inline __attribute__((always_inline)) void k_wsum_f32(float *acc, const float *w, const float *v, size_t stride,
                              int32_t nb, int32_t n)
{
    for (int32_t t = 0; t < nb; t++)
        for (int32_t i = 0; i < n; i++) acc[i] += w[t] * v[(size_t)t * stride + (size_t)i];
}

static inline __attribute__((always_inline)) void k_wsum_f16(float *acc, const float *w, const uint16_t *v, size_t stride,
                              int32_t nb, int32_t n)
{
    for (int32_t t = 0; t < nb; t++)
        for (int32_t i = 0; i < n; i++)
            acc[i] += w[t] * sl_half_to_float(v[(size_t)t * stride + (size_t)i]);
}

static inline __attribute__((always_inline)) void k_scal(float *acc, float s, int32_t n)
{
    for (int32_t i = 0; i < n; i++) acc[i] *= s;
}

static inline __attribute__((always_inline)) float k_exp_sum(float *s, int32_t n, float m)
{
    float sum = 0.0f;
    for (int32_t i = 0; i < n; i++) sum += (s[i] = expf(s[i] - m));
    return sum;
}

#define SL_ATTN_DECODE_FN attn_decode
#include "kernels/cpu/attn_decode_tmpl.h"

/* ---- prompt-attention primitives (attn_prefill_tmpl.h): one-lane "vectors" ------------- */

typedef float sl_vf;
enum { SL_VW = 1, SL_ATTN_ROWS = 2, SL_PF_NJ = 4, SL_PF_PR = 2, SL_PF_NC = 4 };

static inline __attribute__((always_inline)) sl_vf v_zero(void) { return 0.0f; }
static inline __attribute__((always_inline)) sl_vf v_set1(float x) { return x; }
static inline __attribute__((always_inline)) sl_vf v_ld(const float *p) { return *p; }
static inline __attribute__((always_inline)) void v_st(float *p, sl_vf v) { *p = v; }
static inline __attribute__((always_inline)) sl_vf v_fma(sl_vf a, sl_vf b, sl_vf c) { return a * b + c; }
static inline __attribute__((always_inline)) sl_vf v_mul(sl_vf a, sl_vf b) { return a * b; }
static inline __attribute__((always_inline)) sl_vf v_add(sl_vf a, sl_vf b) { return a + b; }
static inline __attribute__((always_inline)) sl_vf v_sub(sl_vf a, sl_vf b) { return a - b; }
static inline __attribute__((always_inline)) sl_vf v_max(sl_vf a, sl_vf b) { return a > b ? a : b; }
static inline __attribute__((always_inline)) sl_vf v_exp(sl_vf x) { return expf(x); }
static inline __attribute__((always_inline)) sl_vf v_mask_inf(sl_vf s, float kp, sl_vf hi, sl_vf lo)
{
    return kp > hi || kp < lo ? -INFINITY : s;
}
static inline __attribute__((always_inline)) sl_vf v_softcap(sl_vf s, float cap, float inv_cap)
{
    return cap * tanhf(s * inv_cap);
}

static inline __attribute__((always_inline)) void k_cvt_row(float *dst, const void *src, bool f16, int32_t n, int32_t np)
{
    for (int32_t d = 0; d < np; d++)
        dst[d] = d >= n ? 0.0f
                 : f16  ? sl_half_to_float(((const uint16_t *)src)[d])
                        : ((const float *)src)[d];
}

#define SL_ATTN_PREFILL_FN attn_prefill
#include "kernels/cpu/attn_prefill_tmpl.h"

const sl__cpu_kernels sl__cpu_kernels_scalar = {
    .isa = SL_CPU_ISA_SCALAR,
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
