/* kernels/ref/quant_impl.h: module-private interface between quant.c (row dispatch) and the
 * per-family block converters in quant_k.c (K-quants), quant_iq.c (IQ, TQ, MXFP4, NVFP4) and
 * quant_iq4.c (the IQ4_NL / IQ4_XS quantizers).
 *
 * Block functions convert exactly one block. Their block pointer is suitably aligned for the
 * block struct (quant.c copies each block of a row into an sl__any_block first), never NULL,
 * and does not overlap the float buffer. They cannot fail: every bit pattern of a block
 * dequantizes to something (non-finite scales give non-finite values, as in ggml).
 *
 * Floating point: these files compile with contraction off (see quant.c's header) and keep
 * ggml's evaluation order statement for statement; that is what makes them bit-exact.
 */
#ifndef SL_KERNELS_REF_QUANT_IMPL_H
#define SL_KERNELS_REF_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels/ref/blocks.h"

/* Storage for any one block, aligned for every block struct. Every block type is a member so
 * that reading the storage through any block struct is a union-member access, not aliasing. */
typedef union sl__any_block {
    sl_block_q4_0 q4_0;
    sl_block_q4_1 q4_1;
    sl_block_q5_0 q5_0;
    sl_block_q5_1 q5_1;
    sl_block_q8_0 q8_0;
    sl_block_q8_1 q8_1;
    sl_block_iq4_nl iq4_nl;
    sl_block_mxfp4 mxfp4;
    sl_block_nvfp4 nvfp4;
    sl_block_q2_K q2_K;
    sl_block_q3_K q3_K;
    sl_block_q4_K q4_K;
    sl_block_q5_K q5_K;
    sl_block_q6_K q6_K;
    sl_block_q8_K q8_K; /* the largest (292 bytes) and the only float-aligned one */
    sl_block_iq2_xxs iq2_xxs;
    sl_block_iq2_xs iq2_xs;
    sl_block_iq2_s iq2_s;
    sl_block_iq3_xxs iq3_xxs;
    sl_block_iq3_s iq3_s;
    sl_block_iq1_s iq1_s;
    sl_block_iq1_m iq1_m;
    sl_block_iq4_xs iq4_xs;
    sl_block_tq1_0 tq1_0;
    sl_block_tq2_0 tq2_0;
} sl__any_block;

typedef void (*sl__dequant_fn)(const void *block, float *y);
typedef void (*sl__quant_fn)(const float *x, void *block);

/* ggml's nearest_int: round to nearest, ties to even, via the 1.5 * 2^23 trick; valid for
 * |f| <= 2^22 (larger or non-finite inputs give garbage, as in ggml, but never UB). */
static inline int sl__nearest_int(float f)
{
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* quant_k.c */
void sl__dequant_q2_K(const void *block, float *y);
void sl__dequant_q3_K(const void *block, float *y);
void sl__dequant_q4_K(const void *block, float *y);
void sl__dequant_q5_K(const void *block, float *y);
void sl__dequant_q6_K(const void *block, float *y);
void sl__dequant_q8_K(const void *block, float *y);
void sl__quant_q2_K(const float *x, void *block);
void sl__quant_q3_K(const float *x, void *block);
void sl__quant_q4_K(const float *x, void *block);
void sl__quant_q5_K(const float *x, void *block);
void sl__quant_q6_K(const float *x, void *block);
void sl__quant_q8_K(const float *x, void *block);

/* quant_iq.c */
void sl__dequant_iq2_xxs(const void *block, float *y);
void sl__quant_mxfp4(const float *x, void *block);
void sl__dequant_iq2_xs(const void *block, float *y);
void sl__dequant_iq2_s(const void *block, float *y);
void sl__dequant_iq3_xxs(const void *block, float *y);
void sl__dequant_iq3_s(const void *block, float *y);
void sl__dequant_iq1_s(const void *block, float *y);
void sl__dequant_iq1_m(const void *block, float *y);
void sl__dequant_iq4_nl(const void *block, float *y);
void sl__dequant_iq4_xs(const void *block, float *y);
void sl__dequant_tq1_0(const void *block, float *y);
void sl__dequant_tq2_0(const void *block, float *y);
void sl__dequant_mxfp4(const void *block, float *y);
void sl__dequant_nvfp4(const void *block, float *y);

/* quant_iq4.c */
void sl__quant_iq4_nl(const float *x, void *block);
void sl__quant_iq4_xs(const float *x, void *block);

#endif
