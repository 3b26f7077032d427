/* kernels/cpu/q32_offset.h: the offset c that makes the signed quants of a narrow 32-element
 * type unsigned, u = w + c, for the x86 kernels that feed weights to vpmaddubsw's unsigned
 * operand (rows32_x86_tmpl.h, gemm_x86_tmpl.h). c is the least that makes every quant >= 0:
 * Q4_0's w = nibble - 8 (u: the raw nibble), Q5_0's w = q - 16 (u: the raw 5-bit q), MXFP4's
 * doubled e2m1 value in [-12, 12] (u in [0, 24]). sum u x - c sum x is then the reference's
 * exact integer, and u stays small enough (<= 31) for the kernels' int16 pair-sum bounds. */
#ifndef SL_KERNELS_CPU_Q32_OFFSET_H
#define SL_KERNELS_CPU_Q32_OFFSET_H

#include <stdint.h>

#include "gguf/gguf.h"

enum { SL_Q32_OFFSET_Q4_0 = 8, SL_Q32_OFFSET_Q5_0 = 16, SL_Q32_OFFSET_MXFP4 = 12 };

/* c of a narrow type (Q4_0, Q5_0, MXFP4); 0 for any other (no offset). */
static inline int sl__q32_offset(uint32_t type)
{
    return type == SL_GGML_Q4_0    ? SL_Q32_OFFSET_Q4_0
           : type == SL_GGML_Q5_0  ? SL_Q32_OFFSET_Q5_0
           : type == SL_GGML_MXFP4 ? SL_Q32_OFFSET_MXFP4
                                   : 0;
}

#endif
