/* Codebook and low-bit types: reference dequantizers for the IQ family (IQ1_S, IQ1_M, IQ2_XXS,
 * IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), the ternary TQ1_0/TQ2_0, and the FP4 formats
 * MXFP4 and NVFP4.
 *
 * Each follows ggml-quants.c's dequantize_row_* element order and float evaluation order
 * (e.g. IQ2: (db * grid) * sign with db = (d * (0.5 + s)) * 0.25), which gguf-py's numpy ports
 * share; tests/kernels/dequant_vs_gguf_py.py checks them bit for bit on random blocks. The
 * codebooks live in iq_tables.c (generated). Dequantize-only but for MXFP4 (its quantizer
 * needs no search tables) and IQ4_NL/IQ4_XS (quantizers in quant_iq4.c: a scale search over
 * one 16-value table): ggml's other IQ quantizers need an importance matrix and search tables
 * that a reference test harness does not.
 */
#include <math.h>

#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/quant_impl.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

static float h2f(uint16_t h)
{
    return sl_quant_fp16_to_fp32(h);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* byte j of a packed grid entry */
static float grid_u8(uint64_t g, int j)
{
    return (float)(uint8_t)(g >> (8 * j));
}

static float sign_of(uint8_t signs, int j)
{
    return (signs >> j) & 1 ? -1.f : 1.f;
}

/* ---- IQ2 -------------------------------------------------------------------------------- */

void sl__dequant_iq2_xxs(const void *block, float *y)
{
    const sl_block_iq2_xxs *b = block;
    const float d = h2f(b->d);
    for (int ib32 = 0; ib32 < SL_QK_K / 32; ib32++) {
        /* aux0: four 8-bit grid indices; aux1: four 7-bit sign indices, 4-bit scale on top */
        const uint32_t aux0 = (uint32_t)b->qs[4 * ib32] | (uint32_t)b->qs[4 * ib32 + 1] << 16;
        const uint32_t aux1 =
            (uint32_t)b->qs[4 * ib32 + 2] | (uint32_t)b->qs[4 * ib32 + 3] << 16;
        const float t = d * (0.5f + (float)(aux1 >> 28));
        const float db = t * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint64_t g = sl_iq2xxs_grid[(aux0 >> (8 * l)) & 0xFF];
            const uint8_t signs = sl_iq_ksigns[(aux1 >> (7 * l)) & 127];
            for (int j = 0; j < 8; j++) {
                const float v = db * grid_u8(g, j);
                y[j] = v * sign_of(signs, j);
            }
            y += 8;
        }
    }
}

void sl__dequant_iq2_xs(const void *block, float *y)
{
    const sl_block_iq2_xs *b = block;
    const float d = h2f(b->d);
    for (int ib32 = 0; ib32 < SL_QK_K / 32; ib32++) {
        float db[2];
        for (int h = 0; h < 2; h++) {
            const float t = d * (0.5f + (float)((b->scales[ib32] >> (4 * h)) & 0xF));
            db[h] = t * 0.25f;
        }
        for (int l = 0; l < 4; l++) {
            const uint16_t q = b->qs[4 * ib32 + l];
            const uint64_t g = sl_iq2xs_grid[q & 511];
            const uint8_t signs = sl_iq_ksigns[q >> 9];
            for (int j = 0; j < 8; j++) {
                const float v = db[l / 2] * grid_u8(g, j);
                y[j] = v * sign_of(signs, j);
            }
            y += 8;
        }
    }
}

void sl__dequant_iq2_s(const void *block, float *y)
{
    const sl_block_iq2_s *b = block;
    const float d = h2f(b->d);
    const uint8_t *qs = b->qs;
    const uint8_t *signs = b->qs + SL_QK_K / 8; /* second half of qs: explicit sign bytes */
    for (int ib32 = 0; ib32 < SL_QK_K / 32; ib32++) {
        float db[2];
        for (int h = 0; h < 2; h++) {
            const float t = d * (0.5f + (float)((b->scales[ib32] >> (4 * h)) & 0xF));
            db[h] = t * 0.25f;
        }
        for (int l = 0; l < 4; l++) {
            const unsigned idx = qs[l] | (((unsigned)b->qh[ib32] << (8 - 2 * l)) & 0x300u);
            const uint64_t g = sl_iq2s_grid[idx];
            for (int j = 0; j < 8; j++) {
                const float v = db[l / 2] * grid_u8(g, j);
                y[j] = v * sign_of(signs[l], j);
            }
            y += 8;
        }
        qs += 4;
        signs += 4;
    }
}

/* ---- IQ3 -------------------------------------------------------------------------------- */

void sl__dequant_iq3_xxs(const void *block, float *y)
{
    const sl_block_iq3_xxs *b = block;
    const float d = h2f(b->d);
    const uint8_t *qs = b->qs;
    const uint8_t *scales_and_signs = b->qs + SL_QK_K / 4;
    for (int ib32 = 0; ib32 < SL_QK_K / 32; ib32++) {
        const uint32_t aux = le32(scales_and_signs + 4 * ib32);
        const float t = d * (0.5f + (float)(aux >> 28));
        const float db = t * 0.5f;
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = sl_iq_ksigns[(aux >> (7 * l)) & 127];
            const uint32_t g1 = sl_iq3xxs_grid[qs[2 * l + 0]];
            const uint32_t g2 = sl_iq3xxs_grid[qs[2 * l + 1]];
            for (int j = 0; j < 4; j++) {
                const float v1 = db * grid_u8(g1, j);
                const float v2 = db * grid_u8(g2, j);
                y[j + 0] = v1 * sign_of(signs, j);
                y[j + 4] = v2 * sign_of(signs, j + 4);
            }
            y += 8;
        }
        qs += 8;
    }
}

void sl__dequant_iq3_s(const void *block, float *y)
{
    const sl_block_iq3_s *b = block;
    const float d = h2f(b->d);
    const uint8_t *qs = b->qs;
    const uint8_t *signs = b->signs;
    for (int ib32 = 0; ib32 < SL_QK_K / 32; ib32++) {
        /* one 4-bit scale per 32 values, two per byte; odd multipliers 1..31 */
        const int s = (b->scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xF;
        const float db = d * (float)(1 + 2 * s);
        const unsigned qh = b->qh[ib32];
        for (int l = 0; l < 4; l++) {
            const uint32_t g1 = sl_iq3s_grid[qs[2 * l + 0] | ((qh << (8 - 2 * l)) & 256u)];
            const uint32_t g2 = sl_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u)];
            for (int j = 0; j < 4; j++) {
                const float v1 = db * grid_u8(g1, j);
                const float v2 = db * grid_u8(g2, j);
                y[j + 0] = v1 * sign_of(signs[l], j);
                y[j + 4] = v2 * sign_of(signs[l], j + 4);
            }
            y += 8;
        }
        qs += 8;
        signs += 4;
    }
}

/* ---- IQ1 -------------------------------------------------------------------------------- */

#define IQ1S_DELTA 0.125f
#define IQ1M_DELTA 0.125f

/* element j of an iq1s_grid entry: int8 -1, 0 or +1 */
static float grid_i8(uint64_t g, int j)
{
    return (float)(int8_t)(uint8_t)(g >> (8 * j));
}

void sl__dequant_iq1_s(const void *block, float *y)
{
    const sl_block_iq1_s *b = block;
    const float d = h2f(b->d);
    const uint8_t *qs = b->qs;
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        const unsigned qh = b->qh[ib];
        const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
        const float delta = (qh & 0x8000u) ? -IQ1S_DELTA : IQ1S_DELTA;
        for (int l = 0; l < 4; l++) {
            const uint64_t g = sl_iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
            for (int j = 0; j < 8; j++) {
                const float v = grid_i8(g, j) + delta;
                y[j] = dl * v;
            }
            y += 8;
        }
        qs += 4;
    }
}

void sl__dequant_iq1_m(const void *block, float *y)
{
    const sl_block_iq1_m *b = block;
    uint16_t sc[4];
    for (int i = 0; i < 4; i++)
        sc[i] = (uint16_t)(b->scales[2 * i] | (b->scales[2 * i + 1] << 8));
    const float d = h2f(sl_block_iq1_m_d(b));
    const uint8_t *qs = b->qs;
    const uint8_t *qh = b->qh;
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        const float dl1 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
        const float dl2 = d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
        const unsigned idx[4] = {
            qs[0] | ((qh[0] << 8) & 0x700u),
            qs[1] | ((qh[0] << 4) & 0x700u),
            qs[2] | ((qh[1] << 8) & 0x700u),
            qs[3] | ((qh[1] << 4) & 0x700u),
        };
        const float delta[4] = {
            (qh[0] & 0x08) ? -IQ1M_DELTA : IQ1M_DELTA,
            (qh[0] & 0x80) ? -IQ1M_DELTA : IQ1M_DELTA,
            (qh[1] & 0x08) ? -IQ1M_DELTA : IQ1M_DELTA,
            (qh[1] & 0x80) ? -IQ1M_DELTA : IQ1M_DELTA,
        };
        for (int l = 0; l < 4; l++) {
            const uint64_t g = sl_iq1s_grid[idx[l]];
            const float dl = l < 2 ? dl1 : dl2;
            for (int j = 0; j < 8; j++) {
                const float v = grid_i8(g, j) + delta[l];
                y[j] = dl * v;
            }
            y += 8;
        }
        qs += 4;
        qh += 2;
    }
}

/* ---- IQ4 -------------------------------------------------------------------------------- */

void sl__dequant_iq4_nl(const void *block, float *y)
{
    const sl_block_iq4_nl *b = block;
    const float d = h2f(b->d);
    for (int j = 0; j < SL_QK4_NL / 2; j++) {
        y[j] = d * (float)sl_iq4nl_values[b->qs[j] & 0xF];
        y[j + SL_QK4_NL / 2] = d * (float)sl_iq4nl_values[b->qs[j] >> 4];
    }
}

void sl__dequant_iq4_xs(const void *block, float *y)
{
    const sl_block_iq4_xs *b = block;
    const float d = h2f(b->d);
    const uint8_t *qs = b->qs;
    for (int ib = 0; ib < SL_QK_K / 32; ib++) {
        const int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                       (((b->scales_h >> (2 * ib)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j + 0] = dl * (float)sl_iq4nl_values[qs[j] & 0xF];
            y[j + 16] = dl * (float)sl_iq4nl_values[qs[j] >> 4];
        }
        y += 32;
        qs += 16;
    }
}

/* ---- ternary ---------------------------------------------------------------------------- */

/* A TQ1_0 byte q stores 5 (or 4) trits as the fraction q / 256 ~ (base-3 number) / 243; the
 * n-th trit is the integer part of 3 * frac(q * 3^n / 256), i.e. ((uint8_t)(q * 3^n) * 3) >> 8
 * with the product wrapping mod 256 exactly as ggml's uint8_t arithmetic does. */
static float trit(uint8_t q, unsigned pow3, float d)
{
    const uint8_t s = (uint8_t)(q * pow3);
    const int xi = ((uint16_t)s * 3) >> 8;
    return (float)(xi - 1) * d;
}

void sl__dequant_tq1_0(const void *block, float *y)
{
    static const unsigned pow3[5] = {1, 3, 9, 27, 81};
    const sl_block_tq1_0 *b = block;
    const float d = h2f(b->d);
    /* qs[0..31]: 5 trits each -> 160 values; qs[32..47]: 5 each -> 80; qh[0..3]: 4 each -> 16 */
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) *y++ = trit(b->qs[m], pow3[n], d);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) *y++ = trit(b->qs[32 + m], pow3[n], d);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) *y++ = trit(b->qh[j], pow3[n], d);
}

void sl__dequant_tq2_0(const void *block, float *y)
{
    const sl_block_tq2_0 *b = block;
    const float d = h2f(b->d);
    for (int j = 0; j < SL_QK_K / 4; j += 32)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) {
                const int q = (b->qs[j + m] >> (2 * l)) & 3;
                *y++ = (float)(q - 1) * d;
            }
}

/* ---- FP4 -------------------------------------------------------------------------------- */

/* ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 127) / 2 (the half folds the doubled E2M1 values);
 * e = 0 and 1 give the subnormals 2^-128 and 2^-127, e = 255 gives 2^127 (no NaN). */
static float e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void sl__dequant_mxfp4(const void *block, float *y)
{
    const sl_block_mxfp4 *b = block;
    const float d = e8m0_half(b->e);
    for (int j = 0; j < SL_QK_MXFP4 / 2; j++) {
        y[j] = (float)sl_mxfp4_values[b->qs[j] & 0xF] * d;
        y[j + SL_QK_MXFP4 / 2] = (float)sl_mxfp4_values[b->qs[j] >> 4] * d;
    }
}

/* ggml's quantize_row_mxfp4_ref: e = floor(log2f(amax)) - 2 + 127 (so 12 * d covers amax), then
 * each element takes the first code of least |d * value - x|, computed in float. For amax below
 * 2^-125 the exponent is negative: ggml's float-to-uint8 cast wraps it on x86 (as gguf-py's
 * astype does), so we wrap it explicitly, through int, where C leaves the cast undefined; an
 * infinite amax gives e = 0. NaNs never raise amax. */
void sl__quant_mxfp4(const float *x, void *block)
{
    sl_block_mxfp4 *b = block;
    float amax = 0.0f;
    for (int j = 0; j < SL_QK_MXFP4; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    const float e = amax > 0.0f ? floorf(log2f(amax)) - 2.0f + 127.0f : 0.0f;
    b->e = isfinite(e) ? (uint8_t)(int)e : 0;
    const float d = e8m0_half(b->e);
    for (int j = 0; j < SL_QK_MXFP4; j++) {
        int best = 0;
        float best_err = fabsf((float)sl_mxfp4_values[0] * d - x[j]);
        for (int k = 1; k < 16; k++) {
            const float err = fabsf((float)sl_mxfp4_values[k] * d - x[j]);
            if (err < best_err) {
                best = k;
                best_err = err;
            }
        }
        if (j < SL_QK_MXFP4 / 2) b->qs[j] = (uint8_t)best;
        else b->qs[j - SL_QK_MXFP4 / 2] |= (uint8_t)(best << 4);
    }
}

/* Unsigned E4M3 sub-block scale (bias 7), halved for the doubled E2M1 values. As gguf-py's
 * NVFP4.ue4m3_to_fp32: bit 7 is ignored, and 0x00 and 0x7F (E4M3's NaN) decode to 0. Every
 * value is exact in float, so evaluation order cannot matter. */
static float ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (x >> 3) & 0xF;
    const int man = x & 0x7;
    if (exp == 0) return ldexpf((float)man, -10);      /* man * 2^-9 * 0.5 */
    return ldexpf((float)(8 + man), exp - 7 - 3 - 1);  /* (1 + man/8) * 2^(exp-7) * 0.5 */
}

void sl__dequant_nvfp4(const void *block, float *y)
{
    const sl_block_nvfp4 *b = block;
    for (int s = 0; s < SL_QK_NVFP4 / SL_QK_NVFP4_SUB; s++) {
        const float d = ue4m3_half(b->d[s]);
        const uint8_t *qs = b->qs + 8 * s;
        for (int j = 0; j < 8; j++) {
            y[j] = d * (float)sl_mxfp4_values[qs[j] & 0xF];
            y[j + 8] = d * (float)sl_mxfp4_values[qs[j] >> 4];
        }
        y += SL_QK_NVFP4_SUB;
    }
}
