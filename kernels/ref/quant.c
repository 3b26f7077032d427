/* Scalar reference quantizers: element conversions, the 32-element block types (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q8_1), the integer/F64 conversions and the row dispatch for every type.
 * K-quants live in quant_k.c, IQ/TQ/FP4 types in quant_iq.c. See quant.h for the contract.
 *
 * Bit-exactness notes (why the code is written the way it is):
 * - Every float expression below is evaluated in float (no double intermediates, no fused
 *   multiply-add): ggml computes `x * id` and `+ 8.5f` as two roundings, so contraction into an
 *   FMA would change results. Statements are kept separate and contraction is switched off.
 * - Where ggml converts a non-finite float to an integer (C undefined behaviour; on x86 the
 *   conversion yields INT_MIN, whose low byte is 0) we produce 0 explicitly. This only happens
 *   for blocks whose scale is so tiny that 1/d overflows, and matches gguf-py's numpy output.
 */
#include "kernels/ref/quant.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant_impl.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- element conversions ---------------------------------------------------------------- */

uint16_t sl_quant_fp32_to_fp16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = 65504 + half an ulp: ties round to the even neighbour, which is 2^16 = inf. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: rebias exponent 127 -> 15, drop 13 bits */
        uint32_t h = (ax - 0x38000000u) >> 13;
        const uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry may bump exponent */
        return (uint16_t)(sign | h);
    }
    /* subnormal half (or zero): value / 2^-24, rounded to nearest even. 2^-25 is the tie
     * between 0 and the smallest subnormal and rounds to 0. */
    if (ax <= 0x33000000u) return sign;
    const uint32_t e = ax >> 23;                     /* 102 .. 112 */
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u; /* 24-bit significand */
    const uint32_t shift = 126u - e;                 /* 14 .. 24 */
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float sl_quant_fp16_to_fp32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        const float v = (float)mant * 0x1p-24f;
        return bits_f32(sign | f32_bits(v));
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t sl_quant_fp32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64u);
    /* x + 0x7fff + lsb cannot wrap: the largest finite/inf pattern is 0xff800000 */
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

float sl_quant_bf16_to_fp32(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

/* ---- blocks ----------------------------------------------------------------------------- */

/* quantize_row_q8_0_ref: d = amax / 127, q = round-half-away(x / d). */
static void quant_block_q8_0(const float *x, sl_block_q8_0 *y)
{
    float amax = 0.0f;
    for (int j = 0; j < SL_QK8_0; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a; /* MAX(amax, fabsf(v)) as ggml's macro */
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    for (int j = 0; j < SL_QK8_0; j++) {
        const float x0 = x[j] * id;
        const float r = roundf(x0);
        y->qs[j] = (r >= -128.0f && r <= 127.0f) ? (int8_t)r : 0; /* non-finite: see top */
    }
}

/* quantize_row_q4_0_ref: d = (signed value of largest magnitude) / -8,
 * q = min(15, trunc(x / d + 8.5)). */
static void quant_block_q4_0(const float *x, sl_block_q4_0 *y)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < SL_QK4_0; j++) {
        const float v = x[j];
        if (amax < fabsf(v)) { /* strict: the first of equal magnitudes wins */
            amax = fabsf(v);
            max = v;
        }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    for (int j = 0; j < SL_QK4_0 / 2; j++) {
        const float x0 = x[j] * id;
        const float x1 = x[SL_QK4_0 / 2 + j] * id;
        const float s0 = x0 + 8.5f;
        const float s1 = x1 + 8.5f;
        int q0 = (s0 >= 0.0f && s0 < 128.0f) ? (int)s0 : 0; /* (int8_t) truncation */
        int q1 = (s1 >= 0.0f && s1 < 128.0f) ? (int)s1 : 0;
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        y->qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
}


/* (int)trunc(s) for s in ggml's (int8_t) conversion range; anything else (only reachable from
 * non-finite inputs, where C leaves the conversion undefined and x86 yields INT_MIN, low byte 0)
 * gives 0. See the header comment. */
static int trunc_i8(float s)
{
    return (s > -129.0f && s < 128.0f) ? (int)s : 0;
}

/* quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)).
 * min/max start at +-FLT_MAX and use strict comparisons (first extreme wins). */
static void quant_block_q4_1(const float *x, sl_block_q4_1 *y)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < SL_QK4_1; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    y->m = sl_quant_fp32_to_fp16(min);
    for (int j = 0; j < SL_QK4_1 / 2; j++) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[SL_QK4_1 / 2 + j] - min) * id;
        int q0 = trunc_i8(x0 + 0.5f), q1 = trunc_i8(x1 + 0.5f);
        q0 = q0 < 15 ? q0 : 15;
        q1 = q1 < 15 ? q1 : 15;
        y->qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
    }
}

/* quantize_row_q5_0_ref: as Q4_0 with 5 bits: d = max / -16, q = min(31, trunc(x/d + 16.5));
 * bit 4 of q[j] goes to bit j of qh. */
static void quant_block_q5_0(const float *x, sl_block_q5_0 *y)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < SL_QK5_0; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < SL_QK5_0 / 2; j++) {
        const float x0 = x[j] * id;
        const float x1 = x[SL_QK5_0 / 2 + j] * id;
        int q0 = trunc_i8(x0 + 16.5f), q1 = trunc_i8(x1 + 16.5f);
        q0 = q0 < 31 ? q0 : 31;
        q1 = q1 < 31 ? q1 : 31;
        y->qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= (((uint32_t)q0 & 0x10u) >> 4) << j;
        qh |= (((uint32_t)q1 & 0x10u) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(qh >> (8 * k));
}

/* quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5). ggml
 * does not clamp q here; q <= 31 holds for finite inputs (x - min <= max - min), and we clamp
 * only so that garbage input cannot spill into the neighbouring nibble. */
static void quant_block_q5_1(const float *x, sl_block_q5_1 *y)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < SL_QK5_1; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    y->m = sl_quant_fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < SL_QK5_1 / 2; j++) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[SL_QK5_1 / 2 + j] - min) * id;
        const unsigned q0 = (unsigned)trunc_i8(x0 + 0.5f) & 31u;
        const unsigned q1 = (unsigned)trunc_i8(x1 + 0.5f) & 31u;
        y->qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= ((q0 & 0x10u) >> 4) << j;
        qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t)(qh >> (8 * k));
}

/* quantize_row_q8_1_ref: Q8_0's d and q, plus s = sum(q) * d as a half. */
static void quant_block_q8_1(const float *x, sl_block_q8_1 *y)
{
    float amax = 0.0f;
    for (int j = 0; j < SL_QK8_1; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = sl_quant_fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < SL_QK8_1; j++) {
        const float r = roundf(x[j] * id);
        y->qs[j] = (r >= -128.0f && r <= 127.0f) ? (int8_t)r : 0;
        sum += y->qs[j];
    }
    y->s = sl_quant_fp32_to_fp16((float)sum * d);
}

/* ---- 32-element dequantizers ------------------------------------------------------------ */

static void dequant_q4_0(const void *block, float *y)
{
    const sl_block_q4_0 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    for (int j = 0; j < SL_QK4_0 / 2; j++) {
        y[j] = (float)((b->qs[j] & 0x0F) - 8) * d;
        y[j + SL_QK4_0 / 2] = (float)((b->qs[j] >> 4) - 8) * d;
    }
}

static void dequant_q4_1(const void *block, float *y)
{
    const sl_block_q4_1 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    const float m = sl_quant_fp16_to_fp32(b->m);
    for (int j = 0; j < SL_QK4_1 / 2; j++) {
        const float v0 = (float)(b->qs[j] & 0x0F) * d;
        const float v1 = (float)(b->qs[j] >> 4) * d;
        y[j] = v0 + m;
        y[j + SL_QK4_1 / 2] = v1 + m;
    }
}

static uint32_t qh32(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void dequant_q5_0(const void *block, float *y)
{
    const sl_block_q5_0 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    const uint32_t qh = qh32(b->qh);
    for (int j = 0; j < SL_QK5_0 / 2; j++) {
        const int x0 = ((b->qs[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10)) - 16;
        const int x1 = ((b->qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10)) - 16;
        y[j] = (float)x0 * d;
        y[j + SL_QK5_0 / 2] = (float)x1 * d;
    }
}

static void dequant_q5_1(const void *block, float *y)
{
    const sl_block_q5_1 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    const float m = sl_quant_fp16_to_fp32(b->m);
    const uint32_t qh = qh32(b->qh);
    for (int j = 0; j < SL_QK5_1 / 2; j++) {
        const int x0 = (b->qs[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10);
        const int x1 = (b->qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        const float v0 = (float)x0 * d;
        const float v1 = (float)x1 * d;
        y[j] = v0 + m;
        y[j + SL_QK5_1 / 2] = v1 + m;
    }
}

static void dequant_q8_0(const void *block, float *y)
{
    const sl_block_q8_0 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    for (int j = 0; j < SL_QK8_0; j++) y[j] = (float)b->qs[j] * d;
}

/* ggml has no Q8_1 to_float (the type only feeds dot products); x = qs * d as Q8_0, s unused. */
static void dequant_q8_1(const void *block, float *y)
{
    const sl_block_q8_1 *b = block;
    const float d = sl_quant_fp16_to_fp32(b->d);
    for (int j = 0; j < SL_QK8_1; j++) y[j] = (float)b->qs[j] * d;
}

/* sl__quant_fn adapters for the typed block quantizers above */
static void quant_q4_0(const float *x, void *b) { quant_block_q4_0(x, b); }
static void quant_q4_1(const float *x, void *b) { quant_block_q4_1(x, b); }
static void quant_q5_0(const float *x, void *b) { quant_block_q5_0(x, b); }
static void quant_q5_1(const float *x, void *b) { quant_block_q5_1(x, b); }
static void quant_q8_0(const float *x, void *b) { quant_block_q8_0(x, b); }
static void quant_q8_1(const float *x, void *b) { quant_block_q8_1(x, b); }

/* ---- type table ------------------------------------------------------------------------- */

/* How each type converts: one row per type beside gguf/types.c's row of its format facts
 * (block size and bytes, name), which conv_of joins to it, as ggml's type_traits_cpu sits
 * beside type_traits. Element types (block 1) have no block functions: the row loops handle
 * them directly. Invariant: a type with quant has dequant; the block structs' sizes equal the
 * GGUF type_size (kernels/ref/blocks.h asserts each, quant_ref_test checks the table). */
typedef struct type_ops {
    bool element;         /* an element type (block 1): converted by the row loops */
    sl__dequant_fn dequant;
    sl__quant_fn quant;
} type_ops;

/* A type's row joined with its format facts; block 0: no reference conversion. */
typedef struct type_conv {
    int64_t block;        /* elements per block */
    size_t block_bytes;   /* bytes per block (element size for block 1) */
    sl__dequant_fn dequant;
    sl__quant_fn quant;
} type_conv;

static const type_ops TYPE_OPS[SL_GGML_TYPE_LIMIT] = {
    [SL_GGML_F32] = {true, NULL, NULL},
    [SL_GGML_F16] = {true, NULL, NULL},
    [SL_GGML_BF16] = {true, NULL, NULL},
    [SL_GGML_I8] = {true, NULL, NULL},
    [SL_GGML_I16] = {true, NULL, NULL},
    [SL_GGML_I32] = {true, NULL, NULL},
    [SL_GGML_I64] = {true, NULL, NULL},
    [SL_GGML_F64] = {true, NULL, NULL},
    [SL_GGML_Q4_0] = {false, dequant_q4_0, quant_q4_0},
    [SL_GGML_Q4_1] = {false, dequant_q4_1, quant_q4_1},
    [SL_GGML_Q5_0] = {false, dequant_q5_0, quant_q5_0},
    [SL_GGML_Q5_1] = {false, dequant_q5_1, quant_q5_1},
    [SL_GGML_Q8_0] = {false, dequant_q8_0, quant_q8_0},
    [SL_GGML_Q8_1] = {false, dequant_q8_1, quant_q8_1},
    [SL_GGML_Q2_K] = {false, sl__dequant_q2_K, sl__quant_q2_K},
    [SL_GGML_Q3_K] = {false, sl__dequant_q3_K, sl__quant_q3_K},
    [SL_GGML_Q4_K] = {false, sl__dequant_q4_K, sl__quant_q4_K},
    [SL_GGML_Q5_K] = {false, sl__dequant_q5_K, sl__quant_q5_K},
    [SL_GGML_Q6_K] = {false, sl__dequant_q6_K, sl__quant_q6_K},
    [SL_GGML_Q8_K] = {false, sl__dequant_q8_K, sl__quant_q8_K},
    [SL_GGML_IQ2_XXS] = {false, sl__dequant_iq2_xxs, NULL},
    [SL_GGML_IQ2_XS] = {false, sl__dequant_iq2_xs, NULL},
    [SL_GGML_IQ2_S] = {false, sl__dequant_iq2_s, NULL},
    [SL_GGML_IQ3_XXS] = {false, sl__dequant_iq3_xxs, NULL},
    [SL_GGML_IQ3_S] = {false, sl__dequant_iq3_s, NULL},
    [SL_GGML_IQ1_S] = {false, sl__dequant_iq1_s, NULL},
    [SL_GGML_IQ1_M] = {false, sl__dequant_iq1_m, NULL},
    [SL_GGML_IQ4_NL] = {false, sl__dequant_iq4_nl, sl__quant_iq4_nl},
    [SL_GGML_IQ4_XS] = {false, sl__dequant_iq4_xs, sl__quant_iq4_xs},
    [SL_GGML_TQ1_0] = {false, sl__dequant_tq1_0, NULL},
    [SL_GGML_TQ2_0] = {false, sl__dequant_tq2_0, NULL},
    [SL_GGML_MXFP4] = {false, sl__dequant_mxfp4, sl__quant_mxfp4},
    [SL_GGML_NVFP4] = {false, sl__dequant_nvfp4, NULL},
};

static type_conv conv_of(uint32_t type)
{
    type_conv c = {0};
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    if (!ti || type >= SL_GGML_TYPE_LIMIT) return c;
    const type_ops *o = &TYPE_OPS[type];
    if (!o->element && !o->dequant) return c;
    c.block = ti->block_size;
    c.block_bytes = ti->type_size;
    c.dequant = o->dequant;
    c.quant = o->quant;
    return c;
}

static bool elementwise_quantizable(uint32_t type)
{
    return type == SL_GGML_F32 || type == SL_GGML_F16 || type == SL_GGML_BF16;
}

/* ---- rows ------------------------------------------------------------------------------- */

bool sl_quant_supported(uint32_t type)
{
    return conv_of(type).block != 0;
}

bool sl_quant_can_quantize(uint32_t type)
{
    const type_conv o = conv_of(type);
    return o.block && (o.quant || elementwise_quantizable(type));
}

size_t sl_quant_row_bytes(uint32_t type, int64_t n)
{
    const type_conv o = conv_of(type);
    if (!o.block || n < 0 || n % o.block != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / o.block);
    if (blocks > SIZE_MAX / o.block_bytes) return 0;
    return (size_t)blocks * o.block_bytes;
}

static sl_status check_row(const char *fn, uint32_t type, bool quant, const void *a,
                           const void *b, int64_t n, sl_error *err)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    const type_conv o = conv_of(type);
    if (!o.block) {
        if (ti)
            return sl_error_set(err, SL_ERR_UNSUPPORTED,
                                "%s: type %s (code %u) has no reference conversion "
                                "(its format is not public: Q1_0 and retired codes)",
                                fn, ti->name, type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: unknown type code %u", fn, type);
    }
    if (quant && !sl_quant_can_quantize(type)) {
        char have[256];
        size_t len = 0;
        have[0] = '\0';
        for (uint32_t k = 0; k < SL_GGML_TYPE_LIMIT && len < sizeof have; k++) {
            const sl_gguf_type_info *tk = sl_gguf_type_get(k);
            if (!tk || !sl_quant_can_quantize(k)) continue;
            const int w = snprintf(have + len, sizeof have - len, "%s%s", len ? ", " : "",
                                   tk->name);
            if (w > 0) len += (size_t)w;
        }
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: type %s (code %u) can be dequantized but has no reference "
                            "quantizer (%s have)",
                            fn, ti ? ti->name : "?", type, have);
    }
    if (n < 0 || n % o.block != 0)
        return sl_error_set(err, SL_ERR_INVALID,
                            "%s: row length n = %lld is not a non-negative multiple of the %s "
                            "block size %lld",
                            fn, (long long)n, ti ? ti->name : "?", (long long)o.block);
    if (n > 0 && (a == NULL || b == NULL))
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL %s pointer for n = %lld", fn,
                            a == NULL ? "source" : "destination", (long long)n);
    if (sl_quant_row_bytes(type, n) == 0 && n != 0)
        return sl_error_set(err, SL_ERR_RANGE, "%s: row of %lld elements overflows size_t", fn,
                            (long long)n);
    return SL_OK;
}

sl_status sl_quant_row(uint32_t type, const float *src, void *dst, int64_t n, sl_error *err)
{
    sl_status st = check_row("sl_quant_row", type, true, src, dst, n, err);
    if (st != SL_OK) return st;
    uint8_t *out = dst;
    const type_conv o = conv_of(type);
    switch (type) {
    case SL_GGML_F32:
        if (n) memcpy(dst, src, (size_t)n * sizeof(float));
        return SL_OK;
    case SL_GGML_F16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = sl_quant_fp32_to_fp16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return SL_OK;
    case SL_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = sl_quant_fp32_to_bf16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        return SL_OK;
    default: break;
    }
    /* blocks are built in aligned storage, then copied to the (possibly unaligned) row */
    for (int64_t b = 0; b < n / o.block; b++) {
        sl__any_block blk;
        memset(&blk, 0, sizeof blk);
        o.quant(src + b * o.block, &blk);
        memcpy(out + (size_t)b * o.block_bytes, &blk, o.block_bytes);
    }
    return SL_OK;
}

/* little-endian signed integer of `bytes` bytes at p, widened */
static int64_t load_int(const uint8_t *p, size_t bytes)
{
    switch (bytes) {
    case 1: return (int8_t)p[0];
    case 2: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

sl_status sl_quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n,
                               sl_error *err)
{
    sl_status st = check_row("sl_quant_dequant_row", type, false, src, dst, n, err);
    if (st != SL_OK) return st;
    const uint8_t *in = src;
    const type_conv o = conv_of(type);
    switch (type) {
    case SL_GGML_F32:
        if (n) memcpy(dst, src, (size_t)n * sizeof(float));
        return SL_OK;
    case SL_GGML_F16:
    case SL_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, in + 2 * i, 2);
            dst[i] = type == SL_GGML_F16 ? sl_quant_fp16_to_fp32(h) : sl_quant_bf16_to_fp32(h);
        }
        return SL_OK;
    case SL_GGML_F64:
        for (int64_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, in + 8 * i, 8);
            /* round to nearest even. Out of float range the C cast is undefined, so do what
             * IEEE (and x86) does: from FLT_MAX + half an ulp (the tie rounds to even, 2^128)
             * up, +-inf. NaN stays NaN (quieted). */
            if (fabs(v) >= 0x1.ffffffp127)
                dst[i] = v > 0 ? INFINITY : -INFINITY;
            else
                dst[i] = (float)v;
        }
        return SL_OK;
    case SL_GGML_I8:
    case SL_GGML_I16:
    case SL_GGML_I32:
    case SL_GGML_I64:
        /* round to nearest even where the integer has more than 24 significant bits */
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)load_int(in + (size_t)i * o.block_bytes, o.block_bytes);
        return SL_OK;
    default: break;
    }
    for (int64_t b = 0; b < n / o.block; b++) {
        sl__any_block blk;
        memcpy(&blk, in + (size_t)b * o.block_bytes, o.block_bytes);
        o.dequant(&blk, dst + b * o.block);
    }
    return SL_OK;
}
