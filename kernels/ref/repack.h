/* kernels/ref/repack: Q4_K_R8, Q4_K with eight rows interleaved — a load-time layout only the
 * CPU kernels read (llama.cpp's CPU backend repacks Q4_K the same way for the same reason), so
 * that one vector instruction serves eight rows and a decode matvec needs no horizontal sums.
 *
 * Contract: a Q4_K matrix of R rows (R % 8 == 0) and C columns (C % 256 == 0) is R / 8 groups
 * of eight consecutive rows; a group is C / 256 sl_block_q4_K_r8 in super-block order, and block
 * b of group g holds super-block b of rows 8g .. 8g + 7 (below). The bytes per group, per row
 * and in all are Q4_K's, so sizes, expert slices (rows per expert % 8 == 0) and byte budgets
 * do not change. The transform is lossless: sl_repack_q4_K_r8_undo returns the original bytes,
 * so the reference of a repacked matrix is Q4_K's of the original, bit for bit.
 *
 * SL_TYPE_Q4_K_R8 names the layout to the matvec kernels (kernels/ref/matvec.h, kernels/cpu/
 * matvec.h); it is not a GGUF type and never appears in a file. */
#ifndef SL_KERNELS_REF_REPACK_H
#define SL_KERNELS_REF_REPACK_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/ref/blocks.h"
#include "base/status.h"

/* Outside ggml's type numbers (< 64) and any GGUF file's. */
enum { SL_TYPE_Q4_K_R8 = 0x100 + 12 };

/* The GGUF type whose rows a matvec type's rows are (blocks, bytes, activations, names in
 * reports): Q4_K for Q4_K_R8, the type itself otherwise. */
static inline uint32_t sl_repack_base_type(uint32_t type)
{
    return type == SL_TYPE_Q4_K_R8 ? (uint32_t)SL_GGML_Q4_K : type;
}

/* Super-block b of rows 8g .. 8g + 7; row r (0..7), sub-block j = 2p + e (p 0..3, e 0..1):
 *   d[r], dmin[r]        row r's d and dmin (binary16, as in sl_block_q4_K);
 *   sc[16p + 2r + e]     its six-bit scale in bits 0-5, bits 4-5 of its six-bit min in 6-7;
 *   mn[k % 32]           bits 0-3 of min k = 16p + 2r + e: the low nibble for k < 32, the
 *                        high nibble for k >= 32;
 *   qs[256p + 32c + 4r + i]  row r's qs[32p + 4c + i] (c 0..7, i 0..3): the quant bytes of
 *                        round p (elements 64p .. 64p + 63: low nibbles sub-block 2p, high
 *                        nibbles 2p + 1), four bytes of each row in turn. */
typedef struct sl_block_q4_K_r8 {
    uint16_t d[8], dmin[8];
    uint8_t sc[64];
    uint8_t mn[32];
    uint8_t qs[1024];
} sl_block_q4_K_r8;
_Static_assert(sizeof(sl_block_q4_K_r8) == 8 * sizeof(sl_block_q4_K),
               "a Q4_K_R8 block is eight Q4_K super-blocks");

/* Repacks a Q4_K matrix [rows][cols] from src into dst (the same byte count); src == dst
 * repacks in place (one group of scratch is allocated), other overlaps are refused.
 * SL_ERR_INVALID naming the argument for NULL pointers, rows < 1 or not a multiple of 8, cols
 * not a positive multiple of 256; SL_ERR_NOMEM. */
sl_status sl_repack_q4_K_r8(const void *src, void *dst, int64_t rows, int64_t cols,
                            sl_error *err);
/* Whether an in-place repack of rows x cols Q4_K bytes at data would be taken (the checks
 * sl_repack_q4_K_r8 makes before it writes anything): SL_OK, or SL_ERR_INVALID naming the value. */
sl_status sl_repack_q4_K_r8_check(const void *data, int64_t rows, int64_t cols, sl_error *err);
/* The inverse: Q4_K_R8 at src back to row-major Q4_K at dst (same rules). */
sl_status sl_repack_q4_K_r8_undo(const void *src, void *dst, int64_t rows, int64_t cols,
                                 sl_error *err);

/* Super-blocks [b0, b1) of row r of the Q4_K_R8 matrix at w (nb super-blocks per row) as Q4_K
 * blocks at dst (b1 - b0 of them). Checks nothing: for the kernels' row-wise paths. */
void sl__q4_K_r8_row(const void *w, int64_t nb, int64_t r, int64_t b0, int64_t b1, void *dst);

#endif
