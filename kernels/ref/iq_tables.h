/* kernels/ref/iq_tables: the constant codebooks of the IQ types, MXFP4/NVFP4 and IQ4_NL/XS.
 *
 * Same contents and layout as ggml-common.h's tables (iq2xxs_grid, ksigns_iq2xs, ...), so fast
 * kernels can copy them verbatim (e.g. into CUDA constant memory). Grid entry k packs 8 (uint64)
 * or 4 (uint32) byte-sized values, value j in bits 8j..8j+7: read value j of a grid entry g as
 * (uint8_t)(g >> 8 * j) (int8_t for sl_iq1s_grid). The tables are const data: thread-safe.
 *
 * Generated into iq_tables.c by tools/gen_iq_tables.py from gguf-py (see that file).
 */
#ifndef SL_KERNELS_REF_IQ_TABLES_H
#define SL_KERNELS_REF_IQ_TABLES_H

#include <stdint.h>

/* 8 magnitudes from {0x08, 0x19, 0x2b} per entry (IQ2_XXS: 8-bit index). */
extern const uint64_t sl_iq2xxs_grid[256];
/* 8 magnitudes from {0x08, 0x19, 0x2b} per entry (IQ2_XS: 9-bit index). */
extern const uint64_t sl_iq2xs_grid[512];
/* 8 magnitudes from {0x08, 0x19, 0x2b} per entry (IQ2_S: 10-bit index). */
extern const uint64_t sl_iq2s_grid[1024];
/* 4 magnitudes from {0x04, 0x0c, ..., 0x34, 0x3e} per entry (IQ3_XXS: 8-bit index). */
extern const uint32_t sl_iq3xxs_grid[256];
/* 4 odd magnitudes 1..15 per entry (IQ3_S: 9-bit index). */
extern const uint32_t sl_iq3s_grid[512];
/* 8 int8 values from {-1, 0, +1} per entry (IQ1_S / IQ1_M: 11-bit index). */
extern const uint64_t sl_iq1s_grid[2048];
/* 7-bit sign index -> 8 sign bits (bit j set: value j negative); bit 7 makes the count even. */
extern const uint8_t sl_iq_ksigns[128];
/* IQ4_NL / IQ4_XS non-linear 4-bit codebook. */
extern const int8_t sl_iq4nl_values[16];
/* E2M1 (FP4) values doubled, indexed by the 4-bit code: MXFP4 and NVFP4. */
extern const int8_t sl_mxfp4_values[16];

#endif
