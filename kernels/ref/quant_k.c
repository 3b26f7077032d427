/* K-quants (QK_K = 256 super-blocks): reference dequantizers and quantizers for Q2_K..Q6_K
 * and Q8_K.
 *
 * Dequantizers follow ggml-quants.c's dequantize_row_*_K element order and float evaluation
 * order (e.g. Q6_K is (d * scale) * q, not d * (scale * q)); gguf-py's numpy ports use the same
 * order, which tests/kernels/dequant_vs_gguf_py.py checks bit for bit.
 *
 * Quantizers follow quantize_row_*_K_ref: Q4_K/Q5_K choose per-32 scales and mins with
 * make_qkx2_quants (weighted least squares over a small grid of trial inverse scales), quantize
 * those to 6 bits against the super-block maxima, then requantize every element with the
 * rounded scales; Q6_K uses make_qx_quants (x^2-weighted search over 18 trial scales) per 16;
 * Q2_K make_qkx2_quants per 16 with |x| weights and absolute error (use_mad), 4-bit scales and
 * mins; Q3_K make_q3_quants per 16 (x^2-weighted coordinate descent), 6-bit signed scales.
 * gguf-py has no K-quant quantizers, so these are checked by error bounds and by gguf-py
 * dequantizing our blocks to the same floats as we do (tests/kernels/quant_ref_test.c, ...).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/ref/quant.h"
#include "kernels/ref/quant_impl.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/* below this a group is treated as all zeros (ggml's GROUP_MAX_EPS) */
#define GROUP_MAX_EPS 1e-15f

static float h2f(uint16_t h)
{
    return sl_quant_fp16_to_fp32(h);
}

/* ---- dequantizers ----------------------------------------------------------------------- */

void sl__dequant_q2_K(const void *block, float *y)
{
    const sl_block_q2_K *b = block;
    const float d = h2f(b->d);
    const float min = h2f(b->dmin);
    const uint8_t *q = b->qs;
    int is = 0;
    /* two halves of 128: each holds 4 bit-planes (shift 0,2,4,6) of 32 bytes = 2 x 16 values */
    for (int n = 0; n < SL_QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = b->scales[is++];
                const float dl = d * (float)(sc & 0xF);
                const float ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; l++) {
                    const float v = dl * (float)((q[l + 16 * half] >> shift) & 3);
                    *y++ = v - ml;
                }
            }
        }
        q += 32;
    }
}

/* The 16 6-bit Q3_K scales: low 4 bits in bytes 0..7 (two nibbles each), high 2 bits in bytes
 * 8..11 (four pairs each); returned already offset by -32. */
static void q3_K_scales(const uint8_t *s, int8_t out[16])
{
    for (int i = 0; i < 16; i++) {
        const int lo = (s[i % 8] >> (4 * (i / 8))) & 0xF;
        const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

void sl__dequant_q3_K(const void *block, float *y)
{
    const sl_block_q3_K *b = block;
    const float d_all = h2f(b->d);
    int8_t scales[16];
    q3_K_scales(b->scales, scales);
    const uint8_t *q = b->qs;
    const uint8_t *hm = b->hmask;
    unsigned m = 1; /* hmask bit: one per bit-plane, running across both halves */
    int is = 0;
    for (int n = 0; n < SL_QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const float dl = d_all * (float)scales[is++];
                for (int l = 16 * half; l < 16 * half + 16; l++) {
                    /* the stored 2 bits are offset by -4 unless the high bit is set */
                    const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                    *y++ = dl * (float)v;
                }
            }
            m <<= 1;
        }
        q += 32;
    }
}

/* ggml's get_scale_min_k4: sub-block j's 6-bit scale and min from the 12 packed bytes. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void sl__dequant_q4_K(const void *block, float *y)
{
    const sl_block_q4_K *b = block;
    const float d = h2f(b->d);
    const float min = h2f(b->dmin);
    const uint8_t *q = b->qs;
    for (int j = 0, is = 0; j < SL_QK_K; j += 64, is += 2) {
        uint8_t sc, m;
        scale_min_k4(is, b->scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = min * (float)m;
        scale_min_k4(is + 1, b->scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = min * (float)m;
        for (int l = 0; l < 32; l++) {
            const float v = d1 * (float)(q[l] & 0xF);
            *y++ = v - m1;
        }
        for (int l = 0; l < 32; l++) {
            const float v = d2 * (float)(q[l] >> 4);
            *y++ = v - m2;
        }
        q += 32;
    }
}

void sl__dequant_q5_K(const void *block, float *y)
{
    const sl_block_q5_K *b = block;
    const float d = h2f(b->d);
    const float min = h2f(b->dmin);
    const uint8_t *ql = b->qs;
    const uint8_t *qh = b->qh;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < SL_QK_K; j += 64, is += 2) {
        uint8_t sc, m;
        scale_min_k4(is, b->scales, &sc, &m);
        const float d1 = d * (float)sc, m1 = min * (float)m;
        scale_min_k4(is + 1, b->scales, &sc, &m);
        const float d2 = d * (float)sc, m2 = min * (float)m;
        for (int l = 0; l < 32; l++) {
            const float v = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0));
            *y++ = v - m1;
        }
        for (int l = 0; l < 32; l++) {
            const float v = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0));
            *y++ = v - m2;
        }
        ql += 32;
        u1 <<= 2;
        u2 <<= 2;
    }
}

void sl__dequant_q6_K(const void *block, float *y)
{
    const sl_block_q6_K *b = block;
    const float d = h2f(b->d);
    const uint8_t *ql = b->ql;
    const uint8_t *qh = b->qh;
    const int8_t *sc = b->scales;
    for (int n = 0; n < SL_QK_K; n += 128) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            const float s1 = d * (float)sc[is + 0];
            const float s2 = d * (float)sc[is + 2];
            const float s3 = d * (float)sc[is + 4];
            const float s4 = d * (float)sc[is + 6];
            y[l + 0] = s1 * (float)q1;
            y[l + 32] = s2 * (float)q2;
            y[l + 64] = s3 * (float)q3;
            y[l + 96] = s4 * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

void sl__dequant_q8_K(const void *block, float *y)
{
    const sl_block_q8_K *b = block;
    for (int j = 0; j < SL_QK_K; j++) y[j] = b->d * (float)b->qs[j];
}

/* ---- quantizer helpers ------------------------------------------------------------------ */

/* ggml's make_qkx2_quants: asymmetric quantization of x[0..n) to L in [0, nmax] as
 * x ~ scale * L - the_min, minimising the weighted squared error (use_mad: absolute error) over
 * trial inverse scales (rmin + rdelta * is + nmax) / (max - min), is = 0..nstep. Returns scale;
 * *the_min >= 0. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad)
{
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        const float wx = w * x[i];
        sum_x += wx;
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        const int l = sl__nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        const float t = scale * (float)L[i];
        const float t2 = t + min;
        float diff = t2 - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        const float wd = weights[i] * diff;
        best_error += wd;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        const float r = rdelta * (float)is;
        const float r2 = rmin + r;
        iscale = (r2 + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = sl__nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            const float wl = w * (float)l;
            sum_l += wl;
            const float wll = wl * (float)l;
            sum_l2 += wll;
            const float wlx = wl * x[i];
            sum_xl += wlx;
        }
        const float a = sum_w * sum_l2;
        const float bb = sum_l * sum_l;
        const float D = a - bb;
        if (D > 0) {
            const float n1 = sum_w * sum_xl, n2 = sum_x * sum_l;
            float this_scale = (n1 - n2) / D;
            const float n3 = sum_l2 * sum_x, n4 = sum_l * sum_xl;
            float this_min = (n3 - n4) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                const float t = this_scale * (float)Laux[i];
                const float t2 = t + this_min;
                float diff = t2 - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                const float wd = weights[i] * diff;
                cur_error += wd;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ggml's make_qx_quants with rmse_type 1 and no importance weights (the Q6_K path): symmetric
 * quantization to L - nmax in [-nmax, nmax - 1], weights x^2, trial inverse scales
 * -(nmax + 0.1 * is) / max for is = -9..9. Returns the scale. */
/* The first pass of ggml's symmetric quantizers (make_qx_quants, make_q3_quants): max, the
 * signed value of largest magnitude; l = clamp(nearest(-nmax / max * x_i), -nmax, nmax - 1)
 * stored as L_i = l + add; with weights x^2, sumlx = sum w x l and suml2 = sum w l^2. False
 * (L all 0) for a group below GROUP_MAX_EPS. */
static bool sym_first(int n, int nmax, const float *x, int8_t *L, int add, float *max_out,
                      float *sumlx_out, float *suml2_out)
{
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return false;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = sl__nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + add);
        const float w = x[i] * x[i];
        const float wx = w * x[i];
        const float wxl = wx * (float)l;
        sumlx += wxl;
        const float wl = w * (float)l;
        const float wll = wl * (float)l;
        suml2 += wll;
    }
    *max_out = max;
    *sumlx_out = sumlx;
    *suml2_out = suml2;
    return true;
}

static float make_qx_quants_rmse1(int n, int nmax, const float *x, int8_t *L)
{
    float max, sumlx, suml2, iscale;
    if (!sym_first(n, nmax, x, L, nmax, &max, &sumlx, &suml2)) return 0.f;
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float t = 0.1f * (float)is;
        const float t2 = (float)nmax + t;
        iscale = -t2 / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = sl__nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            const float w = x[i] * x[i];
            const float wx = w * x[i];
            const float wxl = wx * (float)l;
            sumlx += wxl;
            const float wl = w * (float)l;
            const float wll = wl * (float)l;
            suml2 += wll;
        }
        const float lhs = sumlx * sumlx;
        const float rhs = best * suml2;
        if (suml2 > 0 && lhs > rhs) {
            for (int i = 0; i < n; i++) {
                int l = sl__nearest_int(iscale * x[i]);
                l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
                L[i] = (int8_t)(nmax + l);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ggml's make_q3_quants with do_rmse (the Q3_K path): symmetric quantization to L - nmax in
 * [-nmax, nmax - 1] from the inverse scale -nmax / max, then up to 5 passes of coordinate
 * descent on the x^2-weighted fit, each element moved to its best level while the fit's
 * sumlx^2 / suml2 grows. Returns sumlx / suml2 (0 for an all-zero group, whose L stay 0). */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max, sumlx, suml2;
    if (!sym_first(n, nmax, x, L, 0, &max, &sumlx, &suml2)) return 0.f;
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            const float wx = w * x[i];
            float slx = sumlx - wx * (float)L[i];
            if (slx > 0) {
                const float wl = w * (float)L[i];
                float sl2 = suml2 - wl * (float)L[i];
                const float t = x[i] * sl2;
                int new_l = sl__nearest_int(t / slx);
                new_l = new_l < -nmax ? -nmax : new_l > nmax - 1 ? nmax - 1 : new_l;
                if (new_l != L[i]) {
                    slx += wx * (float)new_l;
                    const float wn = w * (float)new_l;
                    sl2 += wn * (float)new_l;
                    const float lhs = slx * slx;
                    const float rhs = sumlx * sumlx;
                    if (sl2 > 0 && lhs * suml2 > rhs * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Shared first half of quantize_row_q4_K_ref / q5_K: per-32 scales and mins, their 6-bit
 * packing and the super-block d/dmin, then each element requantized with the rounded scales to
 * L in [0, nmax]. Sub-blocks whose rounded scale is 0 keep the search's L (as ggml does; they
 * dequantize to -min regardless). */
static void quant_k_scales_mins(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                                uint16_t *dmin_out, uint8_t scales_out[SL_K_SCALE_SIZE],
                                uint8_t L[SL_QK_K])
{
    uint8_t Laux[32];
    float weights[32];
    float mins[SL_QK_K / 32];
    float scales[SL_QK_K / 32];
    float max_scale = 0; /* the mins are subtracted, so scales are never negative */
    float max_min = 0;
    for (int j = 0; j < SL_QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) {
            const float sq = x[32 * j + l] * x[32 * j + l];
            sum_x2 += sq;
        }
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales_out, 0, SL_K_SCALE_SIZE);
    for (int j = 0; j < SL_QK_K / 32; j++) {
        /* ggml stores nearest_int into a uint8_t before the MIN: keep that truncation */
        uint8_t ls = (uint8_t)sl__nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)sl__nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = sl_quant_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = sl_quant_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < SL_QK_K / 32; j++) {
        uint8_t sc, m;
        scale_min_k4(j, scales_out, &sc, &m);
        const float d = h2f(*d_out) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = h2f(*dmin_out) * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            const float t = x[32 * j + ii] + dm;
            int l = sl__nearest_int(t / d);
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

/* ---- quantizers ------------------------------------------------------------------------- */

/* Q2_K/Q3_K: four 2-bit planes per 128 elements, qs[32 n + l] holding elements 128 n + l,
 * + 32, + 64, + 96 at bits 0, 2, 4, 6. */
static void pack_2bit_planes(const uint8_t L[SL_QK_K], uint8_t qs[SL_QK_K / 4])
{
    for (int j = 0; j < SL_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

void sl__quant_q2_K(const float *x, void *block)
{
    sl_block_q2_K *y = block;
    uint8_t L[SL_QK_K], Laux[16];
    float weights[16], mins[SL_QK_K / 16], scales[SL_QK_K / 16];
    float max_scale = 0; /* the mins are subtracted, so scales are never negative */
    float max_min = 0;
    for (int j = 0; j < SL_QK_K / 16; j++) {
        for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
        scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                     -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 15.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 15.f / max_min : 0.f;
    for (int j = 0; j < SL_QK_K / 16; j++) {
        const int ls = max_scale > 0 ? sl__nearest_int(inv_scale * scales[j]) : 0;
        const int lm = max_min > 0 ? sl__nearest_int(inv_min * mins[j]) : 0;
        y->scales[j] = (uint8_t)(ls | (lm << 4));
    }
    y->d = sl_quant_fp32_to_fp16(max_scale > 0 ? max_scale / 15.f : 0.f);
    y->dmin = sl_quant_fp32_to_fp16(max_min > 0 ? max_min / 15.f : 0.f);
    for (int j = 0; j < SL_QK_K / 16; j++) {
        const float d = h2f(y->d) * (float)(y->scales[j] & 0xF);
        if (d == 0.0f) continue;
        const float dm = h2f(y->dmin) * (float)(y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++) {
            const float t = x[16 * j + ii] + dm;
            int l = sl__nearest_int(t / d);
            l = l < 0 ? 0 : l > 3 ? 3 : l;
            L[16 * j + ii] = (uint8_t)l;
        }
    }
    pack_2bit_planes(L, y->qs);
}

void sl__quant_q3_K(const float *x, void *block)
{
    sl_block_q3_K *y = block;
    int8_t L[SL_QK_K];
    float scales[SL_QK_K / 16];
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < SL_QK_K / 16; j++) {
        scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        const float a = fabsf(scales[j]);
        if (a > amax) {
            amax = a;
            max_scale = scales[j];
        }
    }
    memset(y->scales, 0, sizeof y->scales);
    if (max_scale != 0.0f) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < SL_QK_K / 16; j++) {
            int l = sl__nearest_int(iscale * scales[j]);
            l = (l < -32 ? -32 : l > 31 ? 31 : l) + 32; /* 6 bits, stored + 32 */
            if (j < 8) y->scales[j] = (uint8_t)(l & 0xF);
            else y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y->d = sl_quant_fp32_to_fp16(1 / iscale);
    } else {
        y->d = sl_quant_fp32_to_fp16(0.f);
    }
    int8_t sc[16];
    q3_K_scales(y->scales, sc);
    for (int j = 0; j < SL_QK_K / 16; j++) {
        const float d = h2f(y->d) * (float)sc[j];
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ii++) {
            int l = sl__nearest_int(x[16 * j + ii] / d);
            l = l < -4 ? -4 : l > 3 ? 3 : l;
            L[16 * j + ii] = (int8_t)(l + 4);
        }
    }
    /* element e's third bit in hmask[e % 32], bit e / 32; its low two bits in the planes */
    memset(y->hmask, 0, sizeof y->hmask);
    uint8_t low[SL_QK_K];
    for (int e = 0; e < SL_QK_K; e++) {
        if (L[e] > 3) y->hmask[e % 32] |= (uint8_t)(1u << (e / 32));
        low[e] = (uint8_t)(L[e] & 3);
    }
    pack_2bit_planes(low, y->qs);
}

void sl__quant_q4_K(const float *x, void *block)
{
    sl_block_q4_K *y = block;
    uint8_t L[SL_QK_K];
    quant_k_scales_mins(x, 15, -1.f, 20, &y->d, &y->dmin, y->scales, L);
    uint8_t *q = y->qs;
    for (int j = 0; j < SL_QK_K; j += 64) {
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

void sl__quant_q5_K(const float *x, void *block)
{
    sl_block_q5_K *y = block;
    uint8_t L[SL_QK_K];
    quant_k_scales_mins(x, 31, -0.5f, 15, &y->d, &y->dmin, y->scales, L);
    uint8_t *qh = y->qh;
    uint8_t *ql = y->qs;
    memset(qh, 0, sizeof y->qh);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < SL_QK_K; n += 64) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            int l2 = L[n + j + 32];
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
        ql += 32;
    }
}

void sl__quant_q6_K(const float *x, void *block)
{
    sl_block_q6_K *y = block;
    int8_t L[SL_QK_K];
    float scales[SL_QK_K / 16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < SL_QK_K / 16; ib++) {
        const float scale = make_qx_quants_rmse1(16, 32, x + 16 * ib, L + 16 * ib);
        scales[ib] = scale;
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = sl_quant_fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < SL_QK_K / 16; ib++) {
        const int v = sl__nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < SL_QK_K / 16; j++) {
        const float d = h2f(y->d) * (float)y->scales[j];
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ii++) {
            int l = sl__nearest_int(x[16 * j + ii] / d);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            L[16 * j + ii] = (int8_t)(l + 32);
        }
    }
    uint8_t *ql = y->ql;
    uint8_t *qh = y->qh;
    for (int j = 0; j < SL_QK_K; j += 128) {
        for (int l = 0; l < 32; l++) {
            const uint8_t q1 = L[j + l + 0] & 0xF;
            const uint8_t q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF;
            const uint8_t q4 = L[j + l + 96] & 0xF;
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                              ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

void sl__quant_q8_K(const float *x, void *block)
{
    sl_block_q8_K *y = block;
    float max = 0;
    float amax = 0;
    for (int j = 0; j < SL_QK_K; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        /* ggml leaves bsums unwritten here; we zero them (they are the sums of zero quants) */
        memset(y, 0, sizeof *y);
        return;
    }
    /* -127 rather than -128 (ggml: keeps IQ2_XXS's AVX dot products simple) */
    const float iscale = -127.f / max;
    for (int j = 0; j < SL_QK_K; j++) {
        const int v = sl__nearest_int(iscale * x[j]);
        y->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < SL_QK_K / 16; j++) {
        int sum = 0;
        for (int ii = 0; ii < 16; ii++) sum += y->qs[j * 16 + ii];
        y->bsums[j] = (int16_t)sum;
    }
    y->d = 1 / iscale;
}
