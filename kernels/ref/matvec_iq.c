/* kernels/ref/matvec_iq.c: the codebook types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
 * and IQ3_S in integer form, and their block dot with Q8_K activations (matvec_impl.h).
 *
 * Why integers: every element of these blocks is factor * d * sc[g] * v with v a small integer
 * (a codebook byte times a sign; IQ1's grid value -1/0/1 plus its +-1/8 delta, scaled by 8:
 * v = 8 g +- 1) and sc[g] an odd integer per group of 16 or 32 (2 s + 1), so a block's dot with
 * Q8_K activations is one exact integer sum, then one float product — ggml's vec_dot_*_q8_K
 * shape (integer sums per group times the group scale, the fp16 and activation scales at the
 * end). The decode follows quant_iq.c's dequantizers (ggml's element order, the same tables):
 * factor * d * sc * v equals their value up to float rounding. */
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/matvec_impl.h"
#include "kernels/ref/quant.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* 8 codebook bytes (unsigned) with sign bit j of `signs` negating byte j */
static void put8(int8_t *v, uint64_t g, unsigned signs)
{
    for (int j = 0; j < 8; j++) {
        const int a = (int)(uint8_t)(g >> (8 * j));
        v[j] = (int8_t)((signs >> j) & 1 ? -a : a);
    }
}

/* 4 + 4 codebook bytes of IQ3 (two 4-value entries) under one sign byte */
static void put4x2(int8_t *v, uint32_t g1, uint32_t g2, unsigned signs)
{
    put8(v, (uint64_t)g1 | (uint64_t)g2 << 32, signs);
}

/* IQ1: v = 8 g + delta (g = -1, 0, 1 from the grid, delta = +-1: IQ1's +-1/8 times 8) */
static void put8_iq1(int8_t *v, uint64_t g, int delta)
{
    for (int j = 0; j < 8; j++) v[j] = (int8_t)(8 * (int8_t)(uint8_t)(g >> (8 * j)) + delta);
}

int sl__iq_int(uint32_t type, const void *block, int8_t v[SL_QK_K], int16_t sc[16], float *d,
               float *factor)
{
    const uint8_t *p = block;
    *factor = sl__iq_factor(type);
    switch (type) {
    case SL_GGML_IQ2_XXS: { /* d; 8 x (4 grid bytes, 4 x 7 sign bits + 4-bit scale) */
        *d = sl_quant_fp16_to_fp32(le16(p));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = p + 2 + 8 * ib;
            const uint32_t aux0 = le32(q), aux1 = le32(q + 4);
            sc[ib] = (int16_t)(2 * (aux1 >> 28) + 1);
            for (int l = 0; l < 4; l++)
                put8(v + 32 * ib + 8 * l, sl_iq2xxs_grid[(aux0 >> (8 * l)) & 0xFF],
                     sl_iq_ksigns[(aux1 >> (7 * l)) & 127]);
        }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ2_XS: { /* d; 32 x (9-bit grid, 7-bit signs); 16 x 4-bit scales */
        *d = sl_quant_fp16_to_fp32(le16(p));
        const uint8_t *scales = p + 2 + 64;
        for (int s = 0; s < 16; s++) sc[s] = (int16_t)(2 * ((scales[s / 2] >> (4 * (s % 2))) & 0xF) + 1);
        for (int k = 0; k < 32; k++) {
            const uint16_t q = le16(p + 2 + 2 * k);
            put8(v + 8 * k, sl_iq2xs_grid[q & 511], sl_iq_ksigns[q >> 9]);
        }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ2_S: { /* d; qs 32 low grid bytes + 32 sign bytes; qh 2 high bits each */
        *d = sl_quant_fp16_to_fp32(le16(p));
        const uint8_t *qs = p + 2, *signs = p + 2 + 32, *qh = p + 2 + 64, *scales = qh + 8;
        for (int s = 0; s < 16; s++) sc[s] = (int16_t)(2 * ((scales[s / 2] >> (4 * (s % 2))) & 0xF) + 1);
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                const unsigned idx = qs[4 * ib + l] | (((unsigned)qh[ib] << (8 - 2 * l)) & 0x300u);
                put8(v + 32 * ib + 8 * l, sl_iq2s_grid[idx], signs[4 * ib + l]);
            }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ3_XXS: { /* d; 64 grid bytes; 8 x (4 x 7 sign bits + 4-bit scale) */
        *d = sl_quant_fp16_to_fp32(le16(p));
        const uint8_t *qs = p + 2, *ss = p + 2 + 64;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t aux = le32(ss + 4 * ib);
            sc[ib] = (int16_t)(2 * (aux >> 28) + 1);
            for (int l = 0; l < 4; l++)
                put4x2(v + 32 * ib + 8 * l, sl_iq3xxs_grid[qs[8 * ib + 2 * l]],
                       sl_iq3xxs_grid[qs[8 * ib + 2 * l + 1]], sl_iq_ksigns[(aux >> (7 * l)) & 127]);
        }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ3_S: { /* d; qs 64 low grid bytes; qh 1 high bit each; signs; 8 scales */
        *d = sl_quant_fp16_to_fp32(le16(p));
        const uint8_t *qs = p + 2, *qh = p + 2 + 64, *signs = qh + 8, *scales = signs + 32;
        for (int ib = 0; ib < 8; ib++) {
            sc[ib] = (int16_t)(1 + 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0xF));
            const unsigned h = qh[ib];
            for (int l = 0; l < 4; l++) {
                const uint32_t g1 = sl_iq3s_grid[qs[8 * ib + 2 * l] | ((h << (8 - 2 * l)) & 256u)];
                const uint32_t g2 = sl_iq3s_grid[qs[8 * ib + 2 * l + 1] | ((h << (7 - 2 * l)) & 256u)];
                put4x2(v + 32 * ib + 8 * l, g1, g2, signs[4 * ib + l]);
            }
        }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ1_S: { /* d; 32 low grid bytes; 8 x qh (3-bit highs, scale, delta sign) */
        *d = sl_quant_fp16_to_fp32(le16(p));
        const uint8_t *qs = p + 2;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = le16(p + 2 + 32 + 2 * ib);
            sc[ib] = (int16_t)(2 * ((qh >> 12) & 7) + 1);
            const int delta = qh & 0x8000u ? -1 : 1;
            for (int l = 0; l < 4; l++)
                put8_iq1(v + 32 * ib + 8 * l, sl_iq1s_grid[qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)],
                         delta);
        }
        return sl__iq_group(type);
    }
    case SL_GGML_IQ1_M: { /* qs 32; qh 16; scales 8: 3-bit scales per 16, fp16 d in the tops */
        const uint8_t *qs = p, *qh = p + 32, *scb = p + 48;
        uint16_t s4[4];
        for (int i = 0; i < 4; i++) s4[i] = le16(scb + 2 * i);
        *d = sl_quant_fp16_to_fp32(sl_block_iq1_m_d(block));
        for (int ib = 0; ib < 8; ib++) {
            sc[2 * ib] = (int16_t)(2 * ((s4[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
            sc[2 * ib + 1] = (int16_t)(2 * ((s4[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
            const uint8_t h0 = qh[2 * ib], h1 = qh[2 * ib + 1];
            const unsigned idx[4] = {qs[4 * ib] | ((h0 << 8) & 0x700u), qs[4 * ib + 1] | ((h0 << 4) & 0x700u),
                                     qs[4 * ib + 2] | ((h1 << 8) & 0x700u),
                                     qs[4 * ib + 3] | ((h1 << 4) & 0x700u)};
            const int delta[4] = {h0 & 0x08 ? -1 : 1, h0 & 0x80 ? -1 : 1, h1 & 0x08 ? -1 : 1,
                                  h1 & 0x80 ? -1 : 1};
            for (int l = 0; l < 4; l++) put8_iq1(v + 32 * ib + 8 * l, sl_iq1s_grid[idx[l]], delta[l]);
        }
        return sl__iq_group(type);
    }
    default: return 0;
    }
}

float sl__mv_term_iq(uint32_t type, const void *wp, const void *xp)
{
    int8_t v[SL_QK_K];
    int16_t sc[16];
    float d, factor;
    const int group = sl__iq_int(type, wp, v, sc, &d, &factor);
    sl_block_q8_K x;
    memcpy(&x, xp, sizeof x);
    /* |v| <= 62, |q8| <= 127, sc <= 31: |isum| < 256 * 62 * 127 * 31, inside int32 */
    int32_t isum = 0;
    for (int g = 0; g < SL_QK_K / group; g++) {
        int32_t s = 0;
        for (int k = 0; k < group; k++) s += v[group * g + k] * x.qs[group * g + k];
        isum += sc[g] * s;
    }
    return sl__mv_term_d(isum, factor * d * x.d);
}
