/* kernels/cpu/quant_act.c: the activation quantizers (Q8_0, Q8_1, Q8_K, Q8_K8) in AVX2,
 * bit-exact to the reference ones (kernels/ref/matvec_blocks.c), and the driver that picks them.
 *
 * Why: a prefill batch quantizes every token of every matmul input; with the reference's
 * scalar roundf that was ~9% of a MoE prefill on the calling thread alone (the pool's other
 * threads wait), so it shows most at 2 threads.
 *
 * Why the bits match:
 * - Q8_0: amax is a max (exact in any order; vmaxps(|x|, acc) keeps acc for a NaN |x| as fmaxf
 *   does), d and id are the reference's scalar expressions, v = x * id is one rounding either
 *   way, and roundf (ties away from zero) is rebuilt exactly: t = trunc(v), v - t is exact, and
 *   t moves one away from zero when |v - t| >= 0.5. Q8_1 adds s = fp16(sum * d), the sum of
 *   the quants exact in int32.
 * - Q8_K: max is the first element of largest magnitude (found by a compare on amax, first set
 *   bit), nearest_int's 1.5 * 2^23 addition rounds ties to even as vroundps does for |v| <= 127,
 *   the clamp at 127 is a vpminsd, bsums are exact integer sums, d = 1 / iscale as there. Q8_K8
 *   adds the sums of 8, exact integers too.
 * - A block too small for a finite scale is zeros on both sides (sl__mv_inv; Q8_K: the
 *   reference's memset).
 * - A block holding a NaN or an infinity takes the reference's scalar code (its casts of
 *   non-finite values are not reproduced here). */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/blocks.h"
#include "kernels/ref/quant.h"

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>

#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)

/* max of |x| over n (a multiple of 8) floats, and whether any was a NaN or an infinity. */
static float qa_amax(const float *x, int n, bool *nonfinite)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 acc = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + j), absmask);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* NaN or inf */
        acc = _mm256_max_ps(a, acc);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    *nonfinite = _mm256_movemask_ps(bad) != 0;
    return _mm_cvtss_f32(m);
}

/* 32 int32 (4 vectors) to 32 int8 in element order (values in [-128, 127]). */
static __m256i qa_pack32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i q = _mm256_packs_epi16(ab, cd);
    /* the two packs interleave 128-bit lanes: elements come out as 0 2 1 3 (groups of 4) */
    return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* roundf(v) for finite v: trunc, then one away from zero when the rest is >= 0.5. */
static __m256i qa_roundf(__m256 v)
{
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 rest = _mm256_and_ps(_mm256_sub_ps(v, t), absmask);
    const __m256 up = _mm256_cmp_ps(rest, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f),
                                    _mm256_andnot_ps(absmask, v)); /* copysign(1, v) */
    return _mm256_cvtps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

/* One block of 32 as the reference's Q8_0 / Q8_1 quantizer: the quants in q (int32), d;
 * false for a block holding a NaN or an infinity (the caller runs the reference). */
static bool qa_block32(const float *x, __m256i q[4], float *d)
{
    bool bad;
    const float amax = qa_amax(x, 32, &bad);
    if (bad) return false;
    *d = amax / 127.0f;
    const float id = sl__mv_inv(*d);
    const __m256 vid = _mm256_set1_ps(id);
    for (int k = 0; k < 4; k++) q[k] = qa_roundf(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid));
    return true;
}

static void qa_q8_0(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK8_0; i++, x += SL_QK8_0) {
        char *yb = (char *)y + i * (int64_t)sizeof(sl_block_q8_0);
        __m256i q[4];
        float d;
        if (!qa_block32(x, q, &d)) {
            sl__mv_quant_q8_0(x, yb, SL_QK8_0);
            continue;
        }
        const uint16_t dh = sl_quant_fp32_to_fp16(d);
        memcpy(yb, &dh, 2);
        _mm256_storeu_si256((__m256i *)(yb + 2), qa_pack32(q[0], q[1], q[2], q[3]));
    }
}

/* Q8_0's quants, and s = fp16(d * their sum), the sum exact in int32 as in the reference */
static void qa_q8_1(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK8_1; i++, x += SL_QK8_1) {
        char *yb = (char *)y + i * (int64_t)sizeof(sl_block_q8_1);
        __m256i q[4];
        float d;
        if (!qa_block32(x, q, &d)) {
            sl__mv_quant_q8_1(x, yb, SL_QK8_1);
            continue;
        }
        const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                            _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        const uint16_t dh = sl_quant_fp32_to_fp16(d);
        const uint16_t sh = sl_quant_fp32_to_fp16((float)_mm_cvtsi128_si32(s4) * d);
        memcpy(yb, &dh, 2);
        memcpy(yb + 2, &sh, 2);
        _mm256_storeu_si256((__m256i *)(yb + 4), qa_pack32(q[0], q[1], q[2], q[3]));
    }
}

static void qa_q8_K(const float *x, void *y, int64_t n)
{
    for (int64_t i = 0; i < n / SL_QK_K; i++, x += SL_QK_K) {
        /* bytes, not a struct pointer: rows of blocks need not be 4-byte aligned */
        char *yb = (char *)y + i * (int64_t)sizeof(sl_block_q8_K);
        char *const qs = yb + offsetof(sl_block_q8_K, qs);
        char *const bsums = yb + offsetof(sl_block_q8_K, bsums);
        bool bad;
        const float amax = qa_amax(x, SL_QK_K, &bad);
        /* the reference's zero block (amax 0, or too small for a finite scale) is a memset */
        if (bad || sl__mv_q8_K_zero(amax)) {
            sl__mv_quant_q8_K(x, yb, SL_QK_K);
            continue;
        }
        /* the reference's max: the first element whose magnitude is amax */
        const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        const __m256 va = _mm256_set1_ps(amax);
        float max = amax;
        for (int j = 0; j < SL_QK_K; j += 8) {
            const __m256 xv = _mm256_loadu_ps(x + j);
            const int m = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(xv, absmask), va, _CMP_EQ_OQ));
            if (m) {
                max = x[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127), ones = _mm256_set1_epi8(1);
        const __m256i ones16 = _mm256_set1_epi16(1);
        for (int j = 0; j < SL_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k));
                q[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT |
                                                              _MM_FROUND_NO_EXC)),
                    top);
            }
            const __m256i b = qa_pack32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(qs + j), b);
            /* the two 16-element sums: pairs (vpmaddubsw with 1s), then quads, then halves */
            const __m256i s4 =
                _mm256_madd_epi16(_mm256_maddubs_epi16(ones, b), ones16); /* 8 sums of 4 */
            const __m256i s8 = _mm256_hadd_epi32(s4, s4); /* per lane: 0+1, 2+3 (x2) */
            const __m256i s16 = _mm256_hadd_epi32(s8, s8); /* per lane: the lane's 16 */
            const int16_t two[2] = {(int16_t)_mm256_extract_epi32(s16, 0),
                                    (int16_t)_mm256_extract_epi32(s16, 4)};
            memcpy(bsums + (j / 16) * sizeof(int16_t), two, sizeof two);
        }
        const float d = 1 / iscale;
        memcpy(yb + offsetof(sl_block_q8_K, d), &d, sizeof d);
    }
}

/* IQ1_M's: Q8_K, then the sums of 8 (exact integers, so the reference's in any order) */
static void qa_q8_K8(const float *x, void *y, int64_t n)
{
    const __m256i ones = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < n / SL_QK_K; i++, x += SL_QK_K) {
        char *yb = (char *)y + i * (int64_t)sizeof(sl_block_q8_K8);
        qa_q8_K(x, yb, SL_QK_K);
        const char *qs = yb + offsetof(sl_block_q8_K, qs);
        for (int j = 0; j < SL_QK_K; j += 64) {
            /* per 32 bytes: sums of 4 (8 int32), then of 8 (per lane 0+1, 2+3): two rows of
             * 32 bytes give 8 sums of 8 in order after a pack and a lane permute */
            const __m256i a = _mm256_madd_epi16(
                _mm256_maddubs_epi16(ones, _mm256_loadu_si256((const __m256i *)(qs + j))), ones16);
            const __m256i b = _mm256_madd_epi16(
                _mm256_maddubs_epi16(ones, _mm256_loadu_si256((const __m256i *)(qs + j + 32))),
                ones16);
            /* hadd: lane 0 [a0+a1, a2+a3, b0+b1, b2+b3], lane 1 [a4+a5, a6+a7, b4+b5, b6+b7] */
            const __m256i h = _mm256_permutevar8x32_epi32(
                _mm256_hadd_epi32(a, b), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
            const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(h),
                                                _mm256_extracti128_si256(h, 1));
            _mm_storeu_si128((__m128i *)(yb + offsetof(sl_block_q8_K8, sums8) + 2 * (j / 8)),
                             p16);
        }
    }
}

#pragma clang attribute pop
#define SL_QA_X86 1
#else
#define SL_QA_X86 0
#endif

void sl__cpu_quant_rows(const sl_cpu_matvec_ctx *mv, const sl__mv_type *t, const float *x,
                        int64_t cols, int64_t n_batch, void *xq, size_t act_row_bytes)
{
#if SL_QA_X86
    if (mv->isa == SL_CPU_ISA_AVX2 || mv->isa == SL_CPU_ISA_AVX512) {
        void (*const qa)(const float *, void *, int64_t) =
            t->act_type == SL_GGML_Q8_0   ? qa_q8_0
            : t->act_type == SL_GGML_Q8_1 ? qa_q8_1
            : t->act_type == SL_GGML_Q8_K ? qa_q8_K
            : t->act_type == SL_ACT_Q8_K8 ? qa_q8_K8
                                          : NULL;
        if (qa) {
            for (int64_t b = 0; b < n_batch; b++)
                qa(x + b * cols, (char *)xq + (size_t)b * act_row_bytes, cols);
            return;
        }
    }
#else
    (void)mv;
#endif
    sl__mv_quant_rows(t, x, cols, n_batch, xq, act_row_bytes);
}
