/* kernels/ref/blocks: the GGUF/ggml quantized block layouts, as C structs.
 *
 * One struct per block type, field for field as ggml-common.h defines it, so a tensor's bytes
 * in a mapped GGUF file can be read as an array of these structs (blocks are packed end to end
 * in a row, with no padding between them). Each struct is followed by a _Static_assert on its
 * GGUF block size (gguf/types.c's table): that equality is the whole invariant of this file.
 *
 * Conventions shared by every block:
 * - "half" fields (d, m, dmin, s) hold IEEE binary16 bits as uint16_t; decode them with
 *   sl_quant_fp16_to_fp32 (kernels/ref/quant.h). Multi-byte fields are little-endian (the
 *   host is assumed little-endian, as ggml assumes).
 * - Alignment: the largest member is uint16_t (float for block_q8_K), so a block pointer needs
 *   at most that alignment; blocks inside a mapped row are not guaranteed aligned beyond the
 *   row start, so portable readers memcpy a block out (as the reference kernels do).
 * - QK_K = 256 elements per K-quant/IQ/TQ super-block, split into sub-blocks of 16 or 32.
 *
 * The formulas in the comments use q for the stored quant and x for the reconstructed value;
 * kernels/ref/quant*.c holds the authoritative dequantizers.
 */
#ifndef SL_KERNELS_REF_BLOCKS_H
#define SL_KERNELS_REF_BLOCKS_H

#include <stdint.h>

enum {
    SL_QK4_0 = 32, SL_QK4_1 = 32, SL_QK5_0 = 32, SL_QK5_1 = 32, SL_QK8_0 = 32, SL_QK8_1 = 32,
    SL_QK4_NL = 32, SL_QK_MXFP4 = 32, SL_QK_NVFP4 = 64, SL_QK_NVFP4_SUB = 16,
    SL_QK_K = 256,
    SL_K_SCALE_SIZE = 12, /* packed 6-bit scales + mins of Q4_K/Q5_K (8 sub-blocks) */
};

/* Element types: F16 and BF16 are stored as their raw 16 bits. */
typedef uint16_t sl_fp16;
typedef uint16_t sl_bf16;

/* ---- 32-element blocks ------------------------------------------------------------------ */

/* x[i] = d * (q[i] - 8); byte j: low nibble q[j], high nibble q[j + 16]. */
typedef struct sl_block_q4_0 {
    uint16_t d;
    uint8_t qs[SL_QK4_0 / 2];
} sl_block_q4_0;
_Static_assert(sizeof(sl_block_q4_0) == 18, "block_q4_0 is 18 bytes in GGUF");

/* x[i] = d * q[i] + m; nibbles as Q4_0. */
typedef struct sl_block_q4_1 {
    uint16_t d, m;
    uint8_t qs[SL_QK4_1 / 2];
} sl_block_q4_1;
_Static_assert(sizeof(sl_block_q4_1) == 20, "block_q4_1 is 20 bytes in GGUF");

/* x[i] = d * (q[i] - 16); q low 4 bits as Q4_0, bit 4 of q[i] is bit i of qh (LE uint32). */
typedef struct sl_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[SL_QK5_0 / 2];
} sl_block_q5_0;
_Static_assert(sizeof(sl_block_q5_0) == 22, "block_q5_0 is 22 bytes in GGUF");

/* x[i] = d * q[i] + m; 5-bit q packed as Q5_0. */
typedef struct sl_block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[SL_QK5_1 / 2];
} sl_block_q5_1;
_Static_assert(sizeof(sl_block_q5_1) == 24, "block_q5_1 is 24 bytes in GGUF");

/* x[i] = d * qs[i]. */
typedef struct sl_block_q8_0 {
    uint16_t d;
    int8_t qs[SL_QK8_0];
} sl_block_q8_0;
_Static_assert(sizeof(sl_block_q8_0) == 34, "block_q8_0 is 34 bytes in GGUF");

/* x[i] = d * qs[i]; s = d * sum(qs) (precomputed for dot products with Q4_1/Q5_1). */
typedef struct sl_block_q8_1 {
    uint16_t d, s;
    int8_t qs[SL_QK8_1];
} sl_block_q8_1;
_Static_assert(sizeof(sl_block_q8_1) == 36, "block_q8_1 is 36 bytes in GGUF");

/* x[i] = d * kvalues_iq4nl[q[i]] (non-linear 4-bit codebook); nibbles as Q4_0. */
typedef struct sl_block_iq4_nl {
    uint16_t d;
    uint8_t qs[SL_QK4_NL / 2];
} sl_block_iq4_nl;
_Static_assert(sizeof(sl_block_iq4_nl) == 18, "block_iq4_nl is 18 bytes in GGUF");

/* x[i] = 2^(e - 128) * kvalues_mxfp4[q[i]] (e2m1 values doubled, hence the -128 not -127);
 * e is an E8M0 exponent byte; nibbles as Q4_0. */
typedef struct sl_block_mxfp4 {
    uint8_t e;
    uint8_t qs[SL_QK_MXFP4 / 2];
} sl_block_mxfp4;
_Static_assert(sizeof(sl_block_mxfp4) == 17, "block_mxfp4 is 17 bytes in GGUF");

/* 64 elements in 4 sub-blocks of 16: x = ue4m3(d[s]) / 2 * kvalues_mxfp4[q]; sub-block s
 * uses qs[8s .. 8s+7]: low nibbles give elements 0..7, high nibbles 8..15. */
typedef struct sl_block_nvfp4 {
    uint8_t d[SL_QK_NVFP4 / SL_QK_NVFP4_SUB];
    uint8_t qs[SL_QK_NVFP4 / 2];
} sl_block_nvfp4;
_Static_assert(sizeof(sl_block_nvfp4) == 36, "block_nvfp4 is 36 bytes in GGUF");

/* ---- K-quants (256-element super-blocks) ------------------------------------------------ */

/* 16 sub-blocks of 16: x = d * (scales & 15) * q - dmin * (scales >> 4), q 2-bit. */
typedef struct sl_block_q2_K {
    uint8_t scales[SL_QK_K / 16];
    uint8_t qs[SL_QK_K / 4];
    uint16_t d, dmin;
} sl_block_q2_K;
_Static_assert(sizeof(sl_block_q2_K) == 84, "block_q2_K is 84 bytes in GGUF");

/* 16 sub-blocks of 16: x = d * (scale6 - 32) * (q2 | hbit << 2) - 4 when hmask bit clear;
 * 6-bit scales packed into 12 bytes. */
typedef struct sl_block_q3_K {
    uint8_t hmask[SL_QK_K / 8];
    uint8_t qs[SL_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} sl_block_q3_K;
_Static_assert(sizeof(sl_block_q3_K) == 110, "block_q3_K is 110 bytes in GGUF");

/* 8 sub-blocks of 32: x = d * sc * q - dmin * m, 6-bit sc/m packed in scales[12], q 4-bit. */
typedef struct sl_block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[SL_K_SCALE_SIZE];
    uint8_t qs[SL_QK_K / 2];
} sl_block_q4_K;
_Static_assert(sizeof(sl_block_q4_K) == 144, "block_q4_K is 144 bytes in GGUF");

/* As Q4_K with a fifth bit per element in qh. */
typedef struct sl_block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[SL_K_SCALE_SIZE];
    uint8_t qh[SL_QK_K / 8];
    uint8_t qs[SL_QK_K / 2];
} sl_block_q5_K;
_Static_assert(sizeof(sl_block_q5_K) == 176, "block_q5_K is 176 bytes in GGUF");

/* 16 sub-blocks of 16: x = d * scales[s] * (q6 - 32); low 4 bits in ql, high 2 in qh. */
typedef struct sl_block_q6_K {
    uint8_t ql[SL_QK_K / 2];
    uint8_t qh[SL_QK_K / 4];
    int8_t scales[SL_QK_K / 16];
    uint16_t d;
} sl_block_q6_K;
_Static_assert(sizeof(sl_block_q6_K) == 210, "block_q6_K is 210 bytes in GGUF");

/* Intermediate for K-quant dot products: x = d * qs; bsums[g] = sum of qs[16g .. 16g+15].
 * The only block with a float (not half) scale. */
typedef struct sl_block_q8_K {
    float d;
    int8_t qs[SL_QK_K];
    int16_t bsums[SL_QK_K / 16];
} sl_block_q8_K;
_Static_assert(sizeof(sl_block_q8_K) == 292, "block_q8_K is 292 bytes in GGUF");

/* IQ1_M's activation (SL_ACT_Q8_K8, kernels/ref/matvec.h; not in GGUF): a Q8_K block and
 * sums8[g] = sum of k.qs[8g .. 8g+7] (|sum| <= 1016). */
typedef struct sl_block_q8_K8 {
    sl_block_q8_K k;
    int16_t sums8[SL_QK_K / 8];
} sl_block_q8_K8;
_Static_assert(sizeof(sl_block_q8_K8) == 356, "block_q8_K8 is a q8_K block and 32 int16");

/* ---- IQ types (grid codebooks, 256-element super-blocks except IQ4_NL) ------------------ */

/* 8 groups of 32; per group two uint32: 4 grid bytes (iq2xxs_grid index per 8 values), then
 * 4 x 7-bit sign indices (ksigns) + 4-bit scale in the top bits. */
typedef struct sl_block_iq2_xxs {
    uint16_t d;
    uint16_t qs[SL_QK_K / 8];
} sl_block_iq2_xxs;
_Static_assert(sizeof(sl_block_iq2_xxs) == 66, "block_iq2_xxs is 66 bytes in GGUF");

/* qs[l]: 9-bit iq2xs_grid index + 7-bit ksigns index per 8 values; 4-bit scales per 16. */
typedef struct sl_block_iq2_xs {
    uint16_t d;
    uint16_t qs[SL_QK_K / 8];
    uint8_t scales[SL_QK_K / 32];
} sl_block_iq2_xs;
_Static_assert(sizeof(sl_block_iq2_xs) == 74, "block_iq2_xs is 74 bytes in GGUF");

/* 10-bit iq2s_grid index (qs low 8 bits + 2 bits of qh) per 8 values; explicit sign bytes
 * (the second half of qs); 4-bit scales per 16. */
typedef struct sl_block_iq2_s {
    uint16_t d;
    uint8_t qs[SL_QK_K / 4];
    uint8_t qh[SL_QK_K / 32];
    uint8_t scales[SL_QK_K / 32];
} sl_block_iq2_s;
_Static_assert(sizeof(sl_block_iq2_s) == 82, "block_iq2_s is 82 bytes in GGUF");

/* qs[0..63]: iq3xxs_grid bytes (4 values each); qs[64..95]: per group of 32 a uint32 of
 * 4 x 7-bit ksigns indices + 4-bit scale. */
typedef struct sl_block_iq3_xxs {
    uint16_t d;
    uint8_t qs[3 * SL_QK_K / 8];
} sl_block_iq3_xxs;
_Static_assert(sizeof(sl_block_iq3_xxs) == 98, "block_iq3_xxs is 98 bytes in GGUF");

/* 9-bit iq3s_grid index (qs + 1 bit of qh) per 4 values; explicit sign bits; 4-bit scales
 * per 32 (two per byte). */
typedef struct sl_block_iq3_s {
    uint16_t d;
    uint8_t qs[SL_QK_K / 4];
    uint8_t qh[SL_QK_K / 32];
    uint8_t signs[SL_QK_K / 8];
    uint8_t scales[SL_QK_K / 64];
} sl_block_iq3_s;
_Static_assert(sizeof(sl_block_iq3_s) == 110, "block_iq3_s is 110 bytes in GGUF");

/* 11-bit iq1s_grid index (qs + 3 bits of qh) per 8 values; qh[g] also holds a 3-bit scale
 * and the sign of a per-group delta (+-IQ1S_DELTA) in its top bits. */
typedef struct sl_block_iq1_s {
    uint16_t d;
    uint8_t qs[SL_QK_K / 8];
    uint16_t qh[SL_QK_K / 32];
} sl_block_iq1_s;
_Static_assert(sizeof(sl_block_iq1_s) == 50, "block_iq1_s is 50 bytes in GGUF");

/* No d field: the half super-block scale is spread over the top nibbles of the four uint16 in
 * scales; 3-bit sub-scales per 16; qh nibbles: 3 grid-index bits + delta sign per 8 values. */
typedef struct sl_block_iq1_m {
    uint8_t qs[SL_QK_K / 8];
    uint8_t qh[SL_QK_K / 16];
    uint8_t scales[SL_QK_K / 32];
} sl_block_iq1_m;
_Static_assert(sizeof(sl_block_iq1_m) == 56, "block_iq1_m is 56 bytes in GGUF");
/* IQ1_M's fp16 super-block scale: nibble i is the top nibble of its little-endian scale word i
 * (ggml's iq1m_scale_t); read and written through these two only. */
static inline uint16_t sl_block_iq1_m_d(const sl_block_iq1_m *b)
{
    uint16_t h = 0;
    for (int i = 0; i < 4; i++) h = (uint16_t)(h | (b->scales[2 * i + 1] >> 4) << (4 * i));
    return h;
}
static inline void sl_block_iq1_m_set_d(sl_block_iq1_m *b, uint16_t h)
{
    for (int i = 0; i < 4; i++)
        b->scales[2 * i + 1] =
            (uint8_t)((b->scales[2 * i + 1] & 0x0F) | ((h >> (4 * i)) & 0xF) << 4);
}

/* 8 sub-blocks of 32: x = d * (ls - 32) * kvalues_iq4nl[q]; 6-bit ls = 4 bits of scales_l +
 * 2 bits of scales_h. */
typedef struct sl_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[SL_QK_K / 64];
    uint8_t qs[SL_QK_K / 2];
} sl_block_iq4_xs;
_Static_assert(sizeof(sl_block_iq4_xs) == 136, "block_iq4_xs is 136 bytes in GGUF");

/* ---- ternary ---------------------------------------------------------------------------- */

/* x = d * (t - 1), t in {0,1,2}: 5 trits per byte in qs (240 values), 4 per byte in qh (16),
 * stored as fixed-point fractions (byte = ceil(value * 256 / 243)). */
typedef struct sl_block_tq1_0 {
    uint8_t qs[(SL_QK_K - 4 * SL_QK_K / 64) / 5];
    uint8_t qh[SL_QK_K / 64];
    uint16_t d;
} sl_block_tq1_0;
_Static_assert(sizeof(sl_block_tq1_0) == 54, "block_tq1_0 is 54 bytes in GGUF");

/* x = d * (q - 1), q 2-bit, four per byte. */
typedef struct sl_block_tq2_0 {
    uint8_t qs[SL_QK_K / 4];
    uint16_t d;
} sl_block_tq2_0;
_Static_assert(sizeof(sl_block_tq2_0) == 66, "block_tq2_0 is 66 bytes in GGUF");

#endif
