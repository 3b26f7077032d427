/* Block-level pieces of the matvec reference: the type table, ggml's reference activation
 * quantizers (quantize_row_q8_0_ref, _q8_1_ref, _q8_K_ref), one integer block dot per weight
 * type (ggml's scalar ggml_vec_dot_*: integer sums, then scales) and the weight dequantizers
 * (ggml's dequantize_row_*, used by the transposed sparse path).
 *
 * Integer ranges (why int32 never overflows): activation quants are in [-127, 127]; the
 * largest block sum is Q6_K's 256 * 127 * 32 * 127 < 2^31 in magnitude (scale 127, q in
 * [-32, 31]); Q4_K/Q5_K: 256 * 63 * 31 * 127 < 2^26.
 *
 * Float evaluation follows matvec_impl.h's sl__mv_term_* with contraction off, so the fast
 * kernels that use the same helpers produce the same bits. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/matvec_impl.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"

_Static_assert(SL_ACT_Q8_K8 != SL_TYPE_Q4_K_R8 && SL_ACT_Q8_K8 >= SL_GGML_TYPE_LIMIT &&
                   SL_TYPE_Q4_K_R8 >= SL_GGML_TYPE_LIMIT,
               "the private layout codes are distinct and outside GGUF's");

static const sl__mv_type k_types[] = {
    {SL_GGML_F32, 1, 4, SL_GGML_F32, 4, "F32"},
    {SL_GGML_F16, 1, 2, SL_GGML_F32, 4, "F16"},
    {SL_GGML_BF16, 1, 2, SL_GGML_F32, 4, "BF16"},
    {SL_GGML_Q8_0, 32, sizeof(sl_block_q8_0), SL_GGML_Q8_0, sizeof(sl_block_q8_0), "Q8_0"},
    {SL_GGML_Q4_0, 32, sizeof(sl_block_q4_0), SL_GGML_Q8_0, sizeof(sl_block_q8_0), "Q4_0"},
    {SL_GGML_Q4_1, 32, sizeof(sl_block_q4_1), SL_GGML_Q8_1, sizeof(sl_block_q8_1), "Q4_1"},
    {SL_GGML_Q5_0, 32, sizeof(sl_block_q5_0), SL_GGML_Q8_0, sizeof(sl_block_q8_0), "Q5_0"},
    {SL_GGML_Q5_1, 32, sizeof(sl_block_q5_1), SL_GGML_Q8_1, sizeof(sl_block_q8_1), "Q5_1"},
    {SL_GGML_Q2_K, 256, sizeof(sl_block_q2_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q2_K"},
    {SL_GGML_Q3_K, 256, sizeof(sl_block_q3_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q3_K"},
    {SL_GGML_Q4_K, 256, sizeof(sl_block_q4_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q4_K"},
    {SL_GGML_Q5_K, 256, sizeof(sl_block_q5_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q5_K"},
    {SL_GGML_Q6_K, 256, sizeof(sl_block_q6_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q6_K"},
    {SL_GGML_MXFP4, 32, sizeof(sl_block_mxfp4), SL_GGML_Q8_0, sizeof(sl_block_q8_0), "MXFP4"},
    {SL_GGML_IQ4_NL, 32, sizeof(sl_block_iq4_nl), SL_GGML_Q8_0, sizeof(sl_block_q8_0), "IQ4_NL"},
    {SL_GGML_IQ4_XS, 256, sizeof(sl_block_iq4_xs), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "IQ4_XS"},
#define IQ_ROW(name, code, B, NAME)                                                             \
    {code, 256, sizeof(B), code == SL_GGML_IQ1_M ? (uint32_t)SL_ACT_Q8_K8 : SL_GGML_Q8_K,       \
     code == SL_GGML_IQ1_M ? sizeof(sl_block_q8_K8) : sizeof(sl_block_q8_K), NAME},
    SL__IQ_TYPES(IQ_ROW)
#undef IQ_ROW
    /* a layout of Q4_K (repack.h): its rows are Q4_K's, read through sl__mv_row_at */
    {SL_TYPE_Q4_K_R8, 256, sizeof(sl_block_q4_K), SL_GGML_Q8_K, sizeof(sl_block_q8_K), "Q4_K_R8"},
};

const sl__mv_type *sl__mv_type_get(uint32_t type)
{
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].type == type) return &k_types[i];
    return NULL;
}

const sl__mv_type *sl__mv_row_type(const sl__mv_type *t)
{
    return t->type == SL_TYPE_Q4_K_R8 ? sl__mv_type_get(sl_repack_base_type(t->type)) : t;
}

const void *sl__mv_row_at(const sl__mv_type *t, const void *w, int64_t r, int64_t nb, void *buf)
{
    if (t->type != SL_TYPE_Q4_K_R8) return (const char *)w + (size_t)r * (size_t)nb * t->bytes;
    sl__q4_K_r8_row(w, nb, r, 0, nb, buf);
    return buf;
}

/* ---- activation quantizers ------------------------------------------------------------- */

void sl__mv_quant_q8_0(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK8_0; i++, x += SL_QK8_0) {
        sl_block_q8_0 b;
        float amax = 0.0f;
        for (int j = 0; j < SL_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = sl__mv_inv(d);
        b.d = sl_quant_fp32_to_fp16(d);
        for (int j = 0; j < SL_QK8_0; j++) {
            const float v = x[j] * id;
            b.qs[j] = (int8_t)roundf(v);
        }
        memcpy((char *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* the sums of 8 of one Q8_K8 block at y whose Q8_K part is written */
static void sums8(void *y)
{
    sl_block_q8_K8 b;
    memcpy(&b, y, sizeof b.k);
    for (int g = 0; g < SL_QK_K / 8; g++) {
        int sum = 0;
        for (int k = 0; k < 8; k++) sum += b.k.qs[8 * g + k];
        b.sums8[g] = (int16_t)sum;
    }
    memcpy((char *)y + offsetof(sl_block_q8_K8, sums8), b.sums8, sizeof b.sums8);
}

void sl__mv_quant_q8_K8(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK_K; i++, x += SL_QK_K) {
        char *yb = (char *)y + i * (int64_t)sizeof(sl_block_q8_K8);
        sl__mv_quant_q8_K(x, yb, SL_QK_K);
        sums8(yb);
    }
}

void sl__mv_quant_q8_1(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK8_1; i++, x += SL_QK8_1) {
        sl_block_q8_1 b;
        float amax = 0.0f;
        for (int j = 0; j < SL_QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = sl__mv_inv(d);
        b.d = sl_quant_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < SL_QK8_1; j++) {
            const float v = x[j] * id;
            b.qs[j] = (int8_t)roundf(v);
            sum += b.qs[j];
        }
        b.s = sl_quant_fp32_to_fp16((float)sum * d);
        memcpy((char *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* ggml's nearest_int: ties to even via the 1.5 * 2^23 trick (|f| <= 127 here). */
static int nearest_int(float f)
{
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void sl__mv_quant_q8_K(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK_K; i++, x += SL_QK_K) {
        sl_block_q8_K b;
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < SL_QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (sl__mv_q8_K_zero(amax)) { /* zero, or too small to scale */
            memset(&b, 0, sizeof b);
        } else {
            const float iscale = -127.0f / max;
            for (int j = 0; j < SL_QK_K; j++) {
                const float v = iscale * x[j];
                const int q = nearest_int(v);
                b.qs[j] = (int8_t)(q < 127 ? q : 127);
            }
            for (int g = 0; g < SL_QK_K / 16; g++) {
                int sum = 0;
                for (int k = 0; k < 16; k++) sum += b.qs[16 * g + k];
                b.bsums[g] = (int16_t)sum;
            }
            b.d = 1.0f / iscale;
        }
        memcpy((char *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* ---- block dots ------------------------------------------------------------------------- */

static int32_t q5_hi(uint32_t qh, int j) /* bit 4 of element j (0..31) */
{
    return (int32_t)((qh >> j) & 1u) << 4;
}

static float term_q8_0(const void *wp, const void *xp)
{
    sl_block_q8_0 w, x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += w.qs[j] * x.qs[j];
    return sl__mv_term_d(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d));
}

static float term_q4_0(const void *wp, const void *xp)
{
    sl_block_q4_0 w;
    sl_block_q8_0 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += ((w.qs[j] & 0xF) - 8) * x.qs[j];
        s += ((w.qs[j] >> 4) - 8) * x.qs[j + 16];
    }
    return sl__mv_term_d(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d));
}

static float term_q4_1(const void *wp, const void *xp)
{
    sl_block_q4_1 w;
    sl_block_q8_1 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += (w.qs[j] & 0xF) * x.qs[j];
        s += (w.qs[j] >> 4) * x.qs[j + 16];
    }
    return sl__mv_term_dm(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d), sl__mv_h2f(w.m) * sl__mv_h2f(x.s));
}

static float term_q5_0(const void *wp, const void *xp)
{
    sl_block_q5_0 w;
    sl_block_q8_0 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    uint32_t qh;
    memcpy(&qh, w.qh, sizeof qh);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += (((w.qs[j] & 0xF) | q5_hi(qh, j)) - 16) * x.qs[j];
        s += (((w.qs[j] >> 4) | q5_hi(qh, j + 16)) - 16) * x.qs[j + 16];
    }
    return sl__mv_term_d(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d));
}

static float term_q5_1(const void *wp, const void *xp)
{
    sl_block_q5_1 w;
    sl_block_q8_1 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    uint32_t qh;
    memcpy(&qh, w.qh, sizeof qh);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += ((w.qs[j] & 0xF) | q5_hi(qh, j)) * x.qs[j];
        s += ((w.qs[j] >> 4) | q5_hi(qh, j + 16)) * x.qs[j + 16];
    }
    return sl__mv_term_dm(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d), sl__mv_h2f(w.m) * sl__mv_h2f(x.s));
}

/* The integer dot of 32 table-coded weights (16 bytes: element j in the low nibble of byte j,
 * j + 16 in the high one) with 32 activation quants: MXFP4, IQ4_NL and IQ4_XS's sub-blocks. */
static int32_t table_isum(const int8_t table[16], const uint8_t qs[16], const int8_t *x)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += table[qs[j] & 0xF] * x[j];
        s += table[qs[j] >> 4] * x[j + 16];
    }
    return s;
}

static float term_mxfp4(const void *wp, const void *xp)
{
    sl_block_mxfp4 w;
    sl_block_q8_0 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    const int32_t s = table_isum(sl__mv_kvalues_mxfp4, w.qs, x.qs);
    return sl__mv_term_d(s, sl__mv_h2f(x.d) * sl__mv_e8m0_half(w.e));
}

/* IQ4_NL with Q8_0 activations (ggml's vec_dot_iq4_nl_q8_0): the nibbles index the non-linear
 * table; one scale product per block. */
static float term_iq4_nl(const void *wp, const void *xp)
{
    sl_block_iq4_nl w;
    sl_block_q8_0 x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    const int32_t s = table_isum(sl_iq4nl_values, w.qs, x.qs);
    return sl__mv_term_d(s, sl__mv_h2f(w.d) * sl__mv_h2f(x.d));
}

/* IQ4_XS's 6-bit scale of sub-block j (0..7), stored ls = scale + 32: four bits from
 * scales_l, two from scales_h. */
static int iq4xs_scale(const sl_block_iq4_xs *b, int j)
{
    return ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b->scales_h >> (2 * j)) & 3) << 4);
}

/* IQ4_XS with Q8_K activations: isum = sum_j (ls_j - 32) * sum_l value * q8 over the eight
 * 32-element sub-blocks, then one term per super-block, as ggml's AVX2 vec_dot_iq4_xs_q8_K
 * (its scalar version rounds per sub-block pair; the integer form is the exact one). |isum| <=
 * 256 * 32 * 127 * 127 < 2^31. */
static float term_iq4_xs(const void *wp, const void *xp)
{
    sl_block_iq4_xs w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t isum = 0;
    for (int j = 0; j < 8; j++)
        isum += (iq4xs_scale(&w, j) - 32) *
                table_isum(sl_iq4nl_values, w.qs + 16 * j, x.qs + 32 * j);
    return sl__mv_term_d(isum, sl__mv_h2f(w.d) * x.d);
}

/* Q4_K/Q5_K: isum = sum_j sc_j * sum_l q * q8, summ = sum_j m_j * (bsums[2j] + bsums[2j+1]). */
static float term_q4_K(const void *wp, const void *xp)
{
    sl_block_q4_K w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t isum = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        sl__mv_scale_min_k4(j, w.scales, &sc, &m);
        const uint8_t *q = w.qs + 32 * (j / 2);
        int32_t s = 0;
        for (int l = 0; l < 32; l++) s += ((j & 1) ? q[l] >> 4 : q[l] & 0xF) * x.qs[32 * j + l];
        isum += sc * s;
        summ += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    return sl__mv_term_k(isum, sl__mv_h2f(w.d) * x.d, summ, sl__mv_h2f(w.dmin) * x.d);
}

static float term_q5_K(const void *wp, const void *xp)
{
    sl_block_q5_K w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int32_t isum = 0, summ = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        sl__mv_scale_min_k4(j, w.scales, &sc, &m);
        const uint8_t *q = w.qs + 32 * (j / 2);
        int32_t s = 0;
        for (int l = 0; l < 32; l++) {
            const int lo = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
            const int hi = ((w.qh[l] >> j) & 1) << 4;
            s += (lo | hi) * x.qs[32 * j + l];
        }
        isum += sc * s;
        summ += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    return sl__mv_term_k(isum, sl__mv_h2f(w.d) * x.d, summ, sl__mv_h2f(w.dmin) * x.d);
}

/* Q2_K/Q3_K: the two low bits of element e (0..255) of a super-block, and its 16-element
 * sub-block is e / 16: plane (e % 128) / 32 of byte 32 (e / 128) + e % 32. */
static int q2_bits(const uint8_t *qs, int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* The super-block sum of the types with 16 sub-blocks of 16 and integer scales (Q2_K, Q3_K,
 * Q6_K): sum_s sc[s] * sum_k v[16 s + k] * q8[16 s + k], v the element values (exact in int32:
 * matvec_impl.h's ranges). */
static int32_t isum16(const int8_t v[SL_QK_K], const int sc[16], const int8_t *q8)
{
    int32_t isum = 0;
    for (int s = 0; s < 16; s++) {
        int32_t sub = 0;
        for (int k = 0; k < 16; k++) sub += v[16 * s + k] * q8[16 * s + k];
        isum += sc[s] * sub;
    }
    return isum;
}

/* Q2_K: isum = sum_s sc_s * sum_l q * q8, summ = sum_s m_s * bsums[s] over the 16 sub-blocks
 * (scales: sc low nibble, m high), as ggml's vec_dot_q2_K_q8_K. */
static float term_q2_K(const void *wp, const void *xp)
{
    sl_block_q2_K w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int8_t v[SL_QK_K];
    int sc[16];
    int32_t summ = 0;
    for (int e = 0; e < SL_QK_K; e++) v[e] = (int8_t)q2_bits(w.qs, e);
    for (int s = 0; s < 16; s++) {
        sc[s] = w.scales[s] & 0xF;
        summ += (w.scales[s] >> 4) * x.bsums[s];
    }
    const int32_t isum = isum16(v, sc, x.qs);
    return sl__mv_term_k(isum, sl__mv_h2f(w.d) * x.d, summ, sl__mv_h2f(w.dmin) * x.d);
}

/* Q3_K's 6-bit scale of sub-block s (0..15) less 32: low nibble in scales[s % 8] (high half
 * for s >= 8), two high bits in scales[8 + s % 4] at 2 (s / 4). */
static int q3_scale(const uint8_t *sc, int s)
{
    return (((sc[s % 8] >> (4 * (s / 8))) & 0xF) | (((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4)) -
           32;
}

/* Q3_K: q = low bits | hmask bit (hmask[e % 32] bit e / 32) << 2, value q - 4; isum = sum_s
 * sc_s * sum_l (q - 4) * q8, as ggml's vec_dot_q3_K_q8_K. |isum| <= 256 * 32 * 4 * 127. */
static float term_q3_K(const void *wp, const void *xp)
{
    sl_block_q3_K w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int8_t v[SL_QK_K];
    int sc[16];
    for (int e = 0; e < SL_QK_K; e++)
        v[e] = (int8_t)((q2_bits(w.qs, e) | ((w.hmask[e % 32] >> (e / 32)) & 1) << 2) - 4);
    for (int s = 0; s < 16; s++) sc[s] = q3_scale(w.scales, s);
    return sl__mv_term_d(isum16(v, sc, x.qs), sl__mv_h2f(w.d) * x.d);
}

/* Q6_K element e of a super-block (0..255): ggml's ql/qh interleave. */
static int q6_value(const sl_block_q6_K *w, int e)
{
    const int n = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t *ql = w->ql + 64 * n, *qh = w->qh + 32 * n;
    const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
    const int lo4 = quarter < 2 ? lo & 0xF : lo >> 4;
    const int hi2 = (qh[l] >> (2 * quarter)) & 3;
    return (lo4 | (hi2 << 4)) - 32;
}

static float term_q6_K(const void *wp, const void *xp)
{
    sl_block_q6_K w;
    sl_block_q8_K x;
    memcpy(&w, wp, sizeof w);
    memcpy(&x, xp, sizeof x);
    int8_t v[SL_QK_K];
    int sc[16];
    for (int e = 0; e < SL_QK_K; e++) v[e] = (int8_t)q6_value(&w, e);
    for (int s = 0; s < 16; s++) sc[s] = w.scales[s];
    return sl__mv_term_d(isum16(v, sc, x.qs), sl__mv_h2f(w.d) * x.d);
}

typedef float (*term_fn)(const void *w, const void *x);

/* the codebook types' terms (matvec_iq.c), one per type for term_for */
#define IQ_TERM(name, code, B, NAME)                                                           \
    static float term_##name(const void *w, const void *x) { return sl__mv_term_iq(code, w, x); }
SL__IQ_TYPES(IQ_TERM)
#undef IQ_TERM

static term_fn term_for(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q8_0: return term_q8_0;
    case SL_GGML_Q4_0: return term_q4_0;
    case SL_GGML_Q4_1: return term_q4_1;
    case SL_GGML_Q5_0: return term_q5_0;
    case SL_GGML_Q5_1: return term_q5_1;
    case SL_GGML_MXFP4: return term_mxfp4;
    case SL_GGML_Q2_K: return term_q2_K;
    case SL_GGML_Q3_K: return term_q3_K;
    case SL_GGML_Q4_K: return term_q4_K;
    case SL_GGML_Q5_K: return term_q5_K;
    case SL_GGML_Q6_K: return term_q6_K;
    case SL_GGML_IQ4_NL: return term_iq4_nl;
    case SL_GGML_IQ4_XS: return term_iq4_xs;
#define IQ_CASE(name, code, B, NAME) case code: return term_##name;
        SL__IQ_TYPES(IQ_CASE)
#undef IQ_CASE
    default: return NULL;
    }
}

void sl__mv_dot_blocks(const sl__mv_type *t, const void *w, const void *xq, int64_t b0,
                       int64_t b1, float lane[8])
{
    const term_fn f = term_for(t->type);
    const char *wb = (const char *)w, *xb = (const char *)xq;
    for (int64_t b = b0; b < b1; b++) lane[b % 8] += f(wb + b * t->bytes, xb + b * t->act_bytes);
}

static float load_w(uint32_t type, const void *w, int64_t i)
{
    uint16_t h;
    switch (type) {
    case SL_GGML_F32: {
        float f;
        memcpy(&f, (const char *)w + 4 * i, sizeof f);
        return f;
    }
    case SL_GGML_F16:
        memcpy(&h, (const char *)w + 2 * i, sizeof h);
        return sl__mv_h2f(h);
    default: /* BF16 */
        memcpy(&h, (const char *)w + 2 * i, sizeof h);
        return sl__mv_bf2f(h);
    }
}

void sl__mv_dot_floats(uint32_t type, const void *w, const float *x, int64_t i0, int64_t i1,
                       float lane[32])
{
    for (int64_t i = i0; i < i1; i++) lane[i % 32] = fmaf(load_w(type, w, i), x[i], lane[i % 32]);
}

float sl__mv_dot_row(const sl__mv_type *t, const void *w, const void *xq, int64_t nb)
{
    float s[8] = {0};
    if (t->block == 1) {
        float l[32] = {0};
        sl__mv_dot_floats(t->type, w, (const float *)xq, 0, nb, l);
        sl__mv_fold32(l, s);
    } else {
        sl__mv_dot_blocks(t, w, xq, 0, nb, s);
    }
    return sl__mv_reduce8(s);
}

/* ---- dequantizers (ggml's dequantize_row_*, statement for statement) --------------------- */

static void dequant_k4(const uint8_t *scales, uint16_t dh, uint16_t mh, const uint8_t *qs,
                       const uint8_t *qh, float *y)
{
    const float d = sl__mv_h2f(dh), min = sl__mv_h2f(mh);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        sl__mv_scale_min_k4(j, scales, &sc, &m);
        const float d1 = d * sc;
        const float m1 = min * m;
        const uint8_t *q = qs + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            int v = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
            if (qh) v |= ((qh[l] >> j) & 1) << 4;
            const float a = d1 * (float)v;
            y[32 * j + l] = a - m1;
        }
    }
}

void sl__mv_dequant_block(const sl__mv_type *t, const void *block, float *y)
{
    switch (t->type) {
    case SL_GGML_F32:
    case SL_GGML_F16:
    case SL_GGML_BF16: y[0] = load_w(t->type, block, 0); return;
    case SL_GGML_Q8_0: {
        sl_block_q8_0 b;
        memcpy(&b, block, sizeof b);
        const float d = sl__mv_h2f(b.d);
        for (int j = 0; j < 32; j++) y[j] = (float)b.qs[j] * d;
        return;
    }
    case SL_GGML_Q4_0: {
        sl_block_q4_0 b;
        memcpy(&b, block, sizeof b);
        const float d = sl__mv_h2f(b.d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b.qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((b.qs[j] >> 4) - 8) * d;
        }
        return;
    }
    case SL_GGML_Q4_1: {
        sl_block_q4_1 b;
        memcpy(&b, block, sizeof b);
        const float d = sl__mv_h2f(b.d), m = sl__mv_h2f(b.m);
        for (int j = 0; j < 16; j++) {
            const float a = (float)(b.qs[j] & 0xF) * d, c = (float)(b.qs[j] >> 4) * d;
            y[j] = a + m;
            y[j + 16] = c + m;
        }
        return;
    }
    case SL_GGML_Q5_0:
    case SL_GGML_Q5_1: {
        /* Q5_1 is Q5_0 with a min: both start (d, [m,] qh, qs). */
        sl_block_q5_1 b1;
        sl_block_q5_0 b0;
        const bool one = t->type == SL_GGML_Q5_1;
        if (one) memcpy(&b1, block, sizeof b1); else memcpy(&b0, block, sizeof b0);
        const float d = sl__mv_h2f(one ? b1.d : b0.d), m = one ? sl__mv_h2f(b1.m) : 0.0f;
        const uint8_t *qs = one ? b1.qs : b0.qs;
        uint32_t qh;
        memcpy(&qh, one ? b1.qh : b0.qh, sizeof qh);
        for (int j = 0; j < 16; j++) {
            const int x0 = ((qs[j] & 0xF) | q5_hi(qh, j)) - (one ? 0 : 16);
            const int x1 = ((qs[j] >> 4) | q5_hi(qh, j + 16)) - (one ? 0 : 16);
            const float a = (float)x0 * d, c = (float)x1 * d;
            y[j] = one ? a + m : a;
            y[j + 16] = one ? c + m : c;
        }
        return;
    }
    case SL_GGML_MXFP4: {
        sl_block_mxfp4 b;
        memcpy(&b, block, sizeof b);
        const float d = sl__mv_e8m0_half(b.e);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)sl__mv_kvalues_mxfp4[b.qs[j] & 0xF] * d;
            y[j + 16] = (float)sl__mv_kvalues_mxfp4[b.qs[j] >> 4] * d;
        }
        return;
    }
    case SL_GGML_Q4_K: {
        sl_block_q4_K b;
        memcpy(&b, block, sizeof b);
        dequant_k4(b.scales, b.d, b.dmin, b.qs, NULL, y);
        return;
    }
    case SL_GGML_Q5_K: {
        sl_block_q5_K b;
        memcpy(&b, block, sizeof b);
        dequant_k4(b.scales, b.d, b.dmin, b.qs, b.qh, y);
        return;
    }
    case SL_GGML_Q6_K: {
        sl_block_q6_K b;
        memcpy(&b, block, sizeof b);
        const float d = sl__mv_h2f(b.d);
        for (int e = 0; e < SL_QK_K; e++) {
            const float ds = d * (float)b.scales[e / 16];
            y[e] = ds * (float)q6_value(&b, e);
        }
        return;
    }
    case SL_GGML_Q2_K:
    case SL_GGML_Q3_K:
    case SL_GGML_IQ4_NL:
    case SL_GGML_IQ4_XS:
#define IQ_CASE(name, code, B, NAME) case code:
        SL__IQ_TYPES(IQ_CASE)
#undef IQ_CASE
        /* kernels/ref/quant's dequantizers (ggml's), one block */
        sl_quant_dequant_row(t->type, block, y, t->block, NULL);
        return;
    default: return;
    }
}
