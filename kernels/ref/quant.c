/* Scalar reference quantizers. See quant.h for the contract.
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

#include <math.h>
#include <string.h>

#include "gguf/gguf.h"

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

/* ---- rows ------------------------------------------------------------------------------- */

static int64_t block_size(uint32_t type)
{
    switch (type) {
    case SL_GGML_F32:
    case SL_GGML_F16:
    case SL_GGML_BF16: return 1;
    case SL_GGML_Q8_0:
    case SL_GGML_Q4_0: return 32;
    default: return 0;
    }
}

static size_t block_bytes(uint32_t type)
{
    switch (type) {
    case SL_GGML_F32: return 4;
    case SL_GGML_F16:
    case SL_GGML_BF16: return 2;
    case SL_GGML_Q8_0: return sizeof(sl_block_q8_0);
    case SL_GGML_Q4_0: return sizeof(sl_block_q4_0);
    default: return 0;
    }
}

bool sl_quant_supported(uint32_t type)
{
    return block_size(type) != 0;
}

size_t sl_quant_row_bytes(uint32_t type, int64_t n)
{
    const int64_t bs = block_size(type);
    if (bs == 0 || n < 0 || n % bs != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / bs);
    const size_t bb = block_bytes(type);
    if (blocks > SIZE_MAX / bb) return 0;
    return (size_t)blocks * bb;
}

static sl_status check_row(const char *fn, uint32_t type, const void *a, const void *b, int64_t n,
                           sl_error *err)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    const int64_t bs = block_size(type);
    if (bs == 0) {
        if (ti)
            return sl_error_set(err, SL_ERR_UNSUPPORTED,
                                "%s: type %s (code %u) is not supported by the reference "
                                "quantizer (F32, F16, BF16, Q8_0, Q4_0 are)",
                                fn, ti->name, type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: unknown type code %u", fn, type);
    }
    if (n < 0 || n % bs != 0)
        return sl_error_set(err, SL_ERR_INVALID,
                            "%s: row length n = %lld is not a non-negative multiple of the %s "
                            "block size %lld",
                            fn, (long long)n, ti ? ti->name : "?", (long long)bs);
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
    sl_status st = check_row("sl_quant_row", type, src, dst, n, err);
    if (st != SL_OK) return st;
    uint8_t *out = dst;
    switch (type) {
    case SL_GGML_F32:
        if (n) memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case SL_GGML_F16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = sl_quant_fp32_to_fp16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        break;
    case SL_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = sl_quant_fp32_to_bf16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        break;
    case SL_GGML_Q8_0:
        for (int64_t b = 0; b < n / SL_QK8_0; b++) {
            sl_block_q8_0 blk;
            quant_block_q8_0(src + b * SL_QK8_0, &blk);
            memcpy(out + (size_t)b * sizeof blk, &blk, sizeof blk);
        }
        break;
    case SL_GGML_Q4_0:
        for (int64_t b = 0; b < n / SL_QK4_0; b++) {
            sl_block_q4_0 blk;
            quant_block_q4_0(src + b * SL_QK4_0, &blk);
            memcpy(out + (size_t)b * sizeof blk, &blk, sizeof blk);
        }
        break;
    }
    return SL_OK;
}

sl_status sl_quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n,
                               sl_error *err)
{
    sl_status st = check_row("sl_quant_dequant_row", type, src, dst, n, err);
    if (st != SL_OK) return st;
    const uint8_t *in = src;
    switch (type) {
    case SL_GGML_F32:
        if (n) memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case SL_GGML_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, in + 2 * i, 2);
            dst[i] = sl_quant_fp16_to_fp32(h);
        }
        break;
    case SL_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, in + 2 * i, 2);
            dst[i] = sl_quant_bf16_to_fp32(h);
        }
        break;
    case SL_GGML_Q8_0:
        for (int64_t b = 0; b < n / SL_QK8_0; b++) {
            sl_block_q8_0 blk;
            memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
            const float d = sl_quant_fp16_to_fp32(blk.d);
            for (int j = 0; j < SL_QK8_0; j++) dst[b * SL_QK8_0 + j] = (float)blk.qs[j] * d;
        }
        break;
    case SL_GGML_Q4_0:
        for (int64_t b = 0; b < n / SL_QK4_0; b++) {
            sl_block_q4_0 blk;
            memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
            const float d = sl_quant_fp16_to_fp32(blk.d);
            float *y = dst + b * SL_QK4_0;
            for (int j = 0; j < SL_QK4_0 / 2; j++) {
                const int q0 = (blk.qs[j] & 0x0f) - 8;
                const int q1 = (blk.qs[j] >> 4) - 8;
                y[j] = (float)q0 * d;
                y[j + SL_QK4_0 / 2] = (float)q1 * d;
            }
        }
        break;
    }
    return SL_OK;
}
