/* kernels/ref/matvec_impl.h: module-private pieces of the matvec reference, shared with the
 * fast kernels (kernels/cpu/matvec*.c) so that both compute the float part of every block term
 * with the same expressions — that, plus exact integer sums, is what makes them bit-exact.
 *
 * Functions here check nothing: callers (matvec.c, kernels/cpu/matvec.c) have validated type,
 * sizes and pointers. Block pointers need no alignment (blocks are copied with memcpy). */
#ifndef SL_KERNELS_REF_MATVEC_IMPL_H
#define SL_KERNELS_REF_MATVEC_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/blocks.h"
#include "kernels/ref/matvec.h"
#include "base/status.h"

/* Per weight type: elements and bytes per block, activation type and its bytes per block. */
typedef struct sl__mv_type {
    uint32_t type, block, bytes;
    uint32_t act_type, act_bytes; /* act_bytes per weight block (F32: 4 * block) */
    const char *name;
} sl__mv_type;

/* The descriptor of a supported weight type, NULL otherwise. */
const sl__mv_type *sl__mv_type_get(uint32_t type);
/* The descriptor the block functions below take for t's rows: Q4_K's for Q4_K_R8
 * (kernels/ref/repack.h), t itself for every row-major type. */
const sl__mv_type *sl__mv_row_type(const sl__mv_type *t);
/* Row r of W (nb blocks a row) in row-major form: its address for row-major types; for
 * Q4_K_R8 the row copied out into buf (nb Q4_K blocks). */
const void *sl__mv_row_at(const sl__mv_type *t, const void *w, int64_t r, int64_t nb, void *buf);

/* Argument checks shared by the reference and the fast kernels (`fn` names the caller in the
 * message). The shape: type supported, rows >= 1 (Q4_K_R8: a multiple of 8), cols >= 1 and a
 * multiple of the block, byte sizes without overflow; *t gets the descriptor. sl__mv_validate
 * adds one call's operands: w/x/y non-NULL, 1 <= n_batch <= SL__MV_MAX_BATCH. */
enum { SL__MV_MAX_BATCH = 1 << 20 };
sl_status sl__mv_validate_shape(const char *fn, uint32_t type, int64_t rows, int64_t cols,
                                const sl__mv_type **t, sl_error *err);
sl_status sl__mv_validate(const char *fn, uint32_t type, const void *w, int64_t rows,
                          int64_t cols, const void *x, int64_t n_batch, const void *y,
                          const sl__mv_type **t, sl_error *err);
/* idx non-NULL (when n_idx > 0), 0 <= n_idx <= INT32_MAX, every idx[i] in [0, limit);
 * `what` names the dimension ("rows", "cols"). */
sl_status sl__mv_validate_idx(const char *fn, const int32_t *idx, int64_t n_idx, int64_t limit,
                              const char *what, sl_error *err);
/* Quantizes n_batch rows of cols floats (row stride cols) into xq (row stride
 * act_row_bytes); F32 activations are copied. */
void sl__mv_quant_rows(const sl__mv_type *t, const float *x, int64_t cols, int64_t n_batch,
                       void *xq, size_t act_row_bytes);

/* Activation quantizers, one row of n (multiple of the act block) floats. A block too small
 * for a finite scale (amax below ~127 / FLT_MAX) quantizes to zeros, so every q lies in
 * [-127, 127] (ggml's would cast an infinity). */
static inline float sl__mv_inv(float d)
{
    const float r = 1.0f / d;
    return d != 0.0f && isfinite(r) ? r : 0.0f;
}
/* Q8_K's rule: a block of this amax (>= 0) quantizes to zeros (a memset) */
static inline bool sl__mv_q8_K_zero(float amax)
{
    return amax == 0.0f || !isfinite(127.0f / amax);
}
void sl__mv_quant_q8_0(const float *x, void *y, int64_t n);
void sl__mv_quant_q8_1(const float *x, void *y, int64_t n);
void sl__mv_quant_q8_K(const float *x, void *y, int64_t n);
void sl__mv_quant_q8_K8(const float *x, void *y, int64_t n);

/* One row dot in the reference order (matvec.h); nb = cols / block. Scalar. */
float sl__mv_dot_row(const sl__mv_type *t, const void *w, const void *xq, int64_t nb);
/* Blocks [b0, b1) of a row: their terms are added into lane[b % 8] (quantized types only). */
void sl__mv_dot_blocks(const sl__mv_type *t, const void *w, const void *xq, int64_t b0,
                       int64_t b1, float lane[8]);
/* Elements [i0, i1) of a float row: lane[i % 32] = fmaf(w_i, x_i, lane[i % 32]). */
void sl__mv_dot_floats(uint32_t type, const void *w, const float *x, int64_t i0, int64_t i1,
                       float lane[32]);
/* Dequantizes one block (t->block elements) into y. */
void sl__mv_dequant_block(const sl__mv_type *t, const void *block, float *y);

/* The codebook types, the one list every table of them expands (the reference's type table,
 * terms and dequantizers; the x86 kernels and their dispatch): X(kernel name, GGUF code, block
 * struct, GGUF name). */
#define SL__IQ_TYPES(X)                                                                         \
    X(iq2_xxs, SL_GGML_IQ2_XXS, sl_block_iq2_xxs, "IQ2_XXS")                                   \
    X(iq2_xs, SL_GGML_IQ2_XS, sl_block_iq2_xs, "IQ2_XS")                                       \
    X(iq2_s, SL_GGML_IQ2_S, sl_block_iq2_s, "IQ2_S")                                           \
    X(iq3_xxs, SL_GGML_IQ3_XXS, sl_block_iq3_xxs, "IQ3_XXS")                                   \
    X(iq3_s, SL_GGML_IQ3_S, sl_block_iq3_s, "IQ3_S")                                           \
    X(iq1_s, SL_GGML_IQ1_S, sl_block_iq1_s, "IQ1_S")                                           \
    X(iq1_m, SL_GGML_IQ1_M, sl_block_iq1_m, "IQ1_M")

/* The codebook types (matvec_iq.c: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) in
 * integer form: element e of the block is factor * d * sc[e / group] * v[e] (v small
 * integers, sc odd); returns group (16 or 32), 0 for another type. */
int sl__iq_int(uint32_t type, const void *block, int8_t v[256], int16_t sc[16], float *d,
               float *factor);
/* The factor of a codebook type's integer form: 1/4 for IQ3_XXS, 1 for IQ3_S, 1/8 for the rest
 * (IQ2's (0.5 + s) / 4 = (2 s + 1) / 8; IQ1's +-1/8 delta folded into v as 8 g +- 1). */
static inline float sl__iq_factor(uint32_t type)
{
    return type == SL_GGML_IQ3_XXS ? 0.25f : type == SL_GGML_IQ3_S ? 1.0f : 0.125f;
}
/* The elements a scale of a codebook type's integer form covers: 16 for IQ2_XS, IQ2_S and
 * IQ1_M, 32 for the rest (sl__iq_int's return). */
static inline int sl__iq_group(uint32_t type)
{
    return type == SL_GGML_IQ2_XS || type == SL_GGML_IQ2_S || type == SL_GGML_IQ1_M ? 16 : 32;
}
/* Their block dot with a Q8_K block (IQ1_M: its Q8_K8 block's Q8_K part):
 * (float)(sum_g sc[g] sum v q8) * (factor * d * x.d). */
float sl__mv_term_iq(uint32_t type, const void *w, const void *x);

/* Exact binary16 -> binary32 (F16C gives the same bits). */
static inline float sl__mv_h2f(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t bits;
    if (e == 0x1fu) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e) {
        bits = sign | ((e + 112u) << 23) | (m << 13);
    } else {
        const float v = (float)m * 0x1p-24f; /* zero or subnormal: exact */
        memcpy(&bits, &v, sizeof bits);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float sl__mv_bf2f(uint16_t b)
{
    const uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ggml_e8m0_to_fp32_half: 2^(e - 128), exact (subnormal for e < 2). */
static inline float sl__mv_e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ggml's kvalues_mxfp4: e2m1 values doubled. */
static const int8_t sl__mv_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12,
                                                0, -1, -2, -3, -4, -6, -8, -12};

/* Q4_K/Q5_K 6-bit scale and min of sub-block j (ggml's get_scale_min_k4). */
static inline void sl__mv_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The 8-lane reduction of the reference order. */
static inline float sl__mv_reduce8(const float s[8])
{
    const float u0 = s[0] + s[4], u1 = s[1] + s[5], u2 = s[2] + s[6], u3 = s[3] + s[7];
    return (u0 + u2) + (u1 + u3);
}

/* 32 float lanes -> 8: s[k] = (l[k] + l[k+8]) + (l[k+16] + l[k+24]). */
static inline void sl__mv_fold32(const float l[32], float s[8])
{
    for (int k = 0; k < 8; k++) s[k] = (l[k] + l[k + 8]) + (l[k + 16] + l[k + 24]);
}

/* Float block terms (see matvec_blocks.c for which type uses which). */
static inline float sl__mv_term_d(int32_t isum, float dd) { return (float)isum * dd; }
static inline float sl__mv_term_dm(int32_t isum, float dd, float ms)
{
    const float a = (float)isum * dd;
    return a + ms;
}
static inline float sl__mv_term_k(int32_t isum, float dd, int32_t summ, float dmd)
{
    const float a = (float)isum * dd;
    const float b = (float)summ * dmd;
    return a - b;
}

#endif
