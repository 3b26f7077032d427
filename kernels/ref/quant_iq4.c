/* The IQ4_NL and IQ4_XS quantizers: ggml-quants.c's quantize_row_iq4_nl_impl as llama.cpp's
 * quantize_iq4_nl / quantize_iq4_xs call it without an importance matrix (ntry 7, weights
 * x^2), statement for statement, so the bytes equal what llama-quantize writes for the same
 * floats (tests/mkmodel/iq4_vs_ggml.py checks against ggml's own object code).
 *
 * Per 32-element block: the element of largest magnitude fixes a first scale d = -max / -127;
 * each element takes the nearest of the 16 non-linear values (best_index_int8), d becomes the
 * weighted least-squares fit sum(w q x) / sum(w q^2), and 15 more trial scales
 * (itry - 127) / max, itry in [-7, 7], keep whichever fit explains the most (sumqx^2 / sumq2).
 * IQ4_NL stores that d as a half and re-picks every element against it. IQ4_XS stores the
 * super-block scale d = -(block scale of largest magnitude) / 32 as a half, each block's
 * nearest_int(scale / d) clamped to [-32, 31] as a 6-bit ls - 32, and re-picks the elements
 * against d * l (d as the float, not its half, exactly as ggml).
 * ggml's quantize_row_iq4_nl_ref (ntry -1, no search) is not what llama-quantize runs; we follow
 * quantize_iq4_nl. Floats: contraction off, one rounding per C operator as ggml's build (no
 * FMA in ggml-base) does. */
#include <math.h>
#include <string.h>

#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/quant_impl.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

enum { IQ4_NTRY = 7 };
#define IQ4_GROUP_MAX_EPS 1e-15f /* ggml's GROUP_MAX_EPS */

/* ggml's best_index_int8 over the 16 sorted values: the nearest, the lower on a tie. */
static int best_index(float x)
{
    const int8_t *val = sl_iq4nl_values;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* The sums of the fit of block xb (32 elements) at inverse scale id: sum w q x, sum w q^2 with
 * w = x^2; L (optional) gets the indices. */
static void fit(const float *xb, float id, float *sumqx, float *sumq2, uint8_t *L)
{
    float sx = 0.0f, s2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float al = id * xb[j];
        const int l = best_index(al);
        if (L) L[j] = (uint8_t)l;
        const float q = sl_iq4nl_values[l];
        const float w = xb[j] * xb[j];
        const float wq = w * q;
        const float a = wq * xb[j];
        const float b = wq * q;
        sx += a;
        s2 += b;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* The best scale of one 32-element block (0 for a block of magnitude < GROUP_MAX_EPS). */
static float block_scale(const float *xb, uint8_t *L)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < IQ4_GROUP_MAX_EPS) return 0.0f;
    float d = -max / (float)sl_iq4nl_values[0]; /* ntry > 0 */
    float id = 1 / d;
    float sumqx, sumq2;
    fit(xb, id, &sumqx, &sumq2, L);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; ++itry) {
        id = (float)(itry + sl_iq4nl_values[0]) / max;
        fit(xb, id, &sumqx, &sumq2, NULL);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 indices -> 16 bytes: element j in the low nibble of byte j, element j + 16 in the high. */
static void pack(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[16 + j] << 4));
}

void sl__quant_iq4_nl(const float *x, void *block)
{
    sl_block_iq4_nl *b = block;
    uint8_t L[32];
    const float d = block_scale(x, L);
    b->d = sl_quant_fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_index(id * x[j]);
    pack(L, b->qs);
}

void sl__quant_iq4_xs(const float *x, void *block)
{
    sl_block_iq4_xs *b = block;
    float scales[SL_QK_K / 32];
    uint8_t L[32];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        scales[ib] = block_scale(x + 32 * ib, L);
        const float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = scales[ib];
        }
    }
    memset(b, 0, sizeof *b);
    const float d = -max_scale / 32;
    b->d = sl_quant_fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        int l = sl__nearest_int(id * scales[ib]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const float dl = d * (float)l;
        const float idl = dl != 0.0f ? 1 / dl : 0.0f;
        const float *xb = x + 32 * ib;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_index(idl * xb[j]);
        pack(L, b->qs + 16 * ib);
        l += 32;
        const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
        if (ib % 2 == 0) b->scales_l[ib / 2] = l_l;
        else b->scales_l[ib / 2] |= (uint8_t)(l_l << 4);
        b->scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
    }
}
