/* kernels/cpu/rows32_x86_tmpl.h: whole-row kernels (sl__mv_rows_fn) of the narrow 32-element
 * block types with Q8_0 activations, MXFP4, Q4_0 and Q5_0, for the AVX2 build. Included by
 * matvec_x86_tmpl.h after its group kernels, whose helpers (hx_fill, groups_acc, reduce8,
 * load_halves, qh_bytes, e8m0_bits) and per-type group_ / rows_ functions it reuses: short
 * rows (< 8 blocks), rows past SL_MV_HX_MAX blocks and a row's short last group go through
 * those. gemm_x86_tmpl.h also hands it the few tokens a panel pass would waste lanes on.
 *
 * Why a second kernel: per block the group kernels spend two vpsignb (the sign trick) and a
 * vpmaddwd, and per 8 blocks a vphaddd tree and a scalar gather of the E8M0 scales into
 * vector lanes. Here a block's weights enter vpmaddubsw unsigned, u = w + c (c: q32_offset.h),
 * and isum = sum u x - c sum x, where c sum x of every activation block is formed
 * once per call (all rows read the same x). The 8 blocks' int16 pair sums are added in int16
 * while that cannot overflow (8 products: 8 * 31 * 127 < 2^15; x in [-127, 127]), then one
 * vpmaddwd per 4 blocks finishes the sums in int32. The 16 nibbles come from one broadcast
 * load and one variable shift (0 in the low half, 4 in the high half).
 *
 * Exactness: isum is the reference's integer (exact arithmetic in any order); the float work
 * per lane is group_terms' (isum * (dx * dw) resp. isum * (dw * dx)), block b to lane b % 8,
 * then the reference's reduction: y has the reference's bits. */

#include "kernels/cpu/q32_offset.h"

enum { SL_R32_MXFP4, SL_R32_Q4_0, SL_R32_Q5_0 };

/* Bytes per weight block and G32_OFFSET's c (u = w + c) of a kind. */
static inline int SL_MV_SUFFIX(r32_wb)(int kind)
{
    return kind == SL_R32_MXFP4 ? (int)sizeof(sl_block_mxfp4)
           : kind == SL_R32_Q4_0 ? (int)sizeof(sl_block_q4_0)
                                 : (int)sizeof(sl_block_q5_0);
}
static inline int SL_MV_SUFFIX(r32_c)(int kind)
{
    return kind == SL_R32_MXFP4 ? SL_Q32_OFFSET_MXFP4
           : kind == SL_R32_Q4_0 ? SL_Q32_OFFSET_Q4_0
                                 : SL_Q32_OFFSET_Q5_0;
}

/* p[k]: block k's 16 int16 vpmaddubsw pair sums (low half: its elements 0..15, high half
 * 16..31), each |.| <= 2 * 31 * 127 (8 products: 31496 < 2^15). Returns the 8 blocks' sums, block k in element k. */
static inline __m256i SL_MV_SUFFIX(r32_tree)(const __m256i p[8])
{
    __m256i q[4], s[2];
    for (int k = 0; k < 4; k++) /* 4 products per int16; 32-bit slots alternate 2k, 2k+1 */
        q[k] = _mm256_add_epi16(_mm256_unpacklo_epi32(p[2 * k], p[2 * k + 1]),
                                _mm256_unpackhi_epi32(p[2 * k], p[2 * k + 1]));
    for (int k = 0; k < 2; k++) /* 8 products per int16, then int32: one per block and half */
        s[k] = _mm256_madd_epi16(
            _mm256_add_epi16(_mm256_unpacklo_epi64(q[2 * k], q[2 * k + 1]),
                             _mm256_unpackhi_epi64(q[2 * k], q[2 * k + 1])),
            _mm256_set1_epi16(1));
    return _mm256_add_epi32(_mm256_permute2x128_si256(s[0], s[1], 0x20),
                            _mm256_permute2x128_si256(s[0], s[1], 0x31));
}

/* c * (sum of the 32 quants) of activation blocks [0, nb8) (nb8 a multiple of 8) into cx. */
static inline void SL_MV_SUFFIX(r32_xsums)(const char *xq, int64_t nb8, int c, int32_t *cx)
{
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb8; b += 8) {
        __m256i p[8];
        for (int k = 0; k < 8; k++)
            p[k] = _mm256_maddubs_epi16(
                one, _mm256_loadu_si256((const __m256i *)(xq + (b + k) * 34 + 2)));
        _mm256_storeu_si256((__m256i *)(cx + b),
                            _mm256_mullo_epi32(SL_MV_SUFFIX(r32_tree)(p), _mm256_set1_epi32(c)));
    }
}

/* The 32 unsigned weights of the block at wp in element order. */
static inline __m256i SL_MV_SUFFIX(r32_u)(const char *wp, int kind, __m256i table)
{
    const int qofs = kind == SL_R32_MXFP4 ? 1 : kind == SL_R32_Q4_0 ? 2 : 6;
    const __m128i qs = _mm_loadu_si128((const __m128i *)(wp + qofs));
    const __m256i n = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_broadcastsi128_si256(qs), _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
        _mm256_set1_epi8(0x0F));
    if (kind == SL_R32_Q5_0) /* bit 4 from qh: the 5-bit q as stored */
        return _mm256_or_si256(n, _mm256_and_si256(SL_MV_SUFFIX(qh_bytes)(wp + 2),
                                                   _mm256_set1_epi8(0x10)));
    return kind == SL_R32_MXFP4 ? _mm256_shuffle_epi8(table, n) : n;
}

/* What every row of one activation row reads: its x scales as floats (hx, zero-padded to a
 * multiple of 8) and c * its block sums (cx, whole groups). nb <= SL_MV_HX_MAX. */
typedef struct r32_x {
    float hx[SL_MV_HX_MAX + 8];
    int32_t cx[SL_MV_HX_MAX];
} r32_x;

static inline void SL_MV_SUFFIX(r32_prep)(const char *xq, int64_t nb, int kind, r32_x *p)
{
    SL_MV_SUFFIX(hx_fill)(xq, sizeof(sl_block_q8_0), nb, 0, p->hx);
    SL_MV_SUFFIX(r32_xsums)(xq, nb & ~(int64_t)7, SL_MV_SUFFIX(r32_c)(kind), p->cx);
}

/* One row at wr (nb >= 1 blocks) times the activation row xq prepared in p. */
static inline __attribute__((always_inline)) float
SL_MV_SUFFIX(r32_row)(const char *wr, const char *xq, int64_t nb, const r32_x *p, int kind)
{
    const int wb = SL_MV_SUFFIX(r32_wb)(kind), xb = (int)sizeof(sl_block_q8_0);
    const int64_t nb8 = nb & ~(int64_t)7;
    const __m128i kv = _mm_add_epi8(_mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4),
                                    _mm_set1_epi8(SL_Q32_OFFSET_MXFP4));
    const __m256i table = _mm256_broadcastsi128_si256(kv);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb8; b += 8) {
        const char *wp = wr + b * wb, *xp = xq + b * xb;
        __m256i q[8];
        for (int k = 0; k < 8; k++)
            q[k] = _mm256_maddubs_epi16(SL_MV_SUFFIX(r32_u)(wp + k * wb, kind, table),
                                        _mm256_loadu_si256((const __m256i *)(xp + k * xb + 2)));
        const __m256i isum = _mm256_sub_epi32(SL_MV_SUFFIX(r32_tree)(q),
                                              _mm256_loadu_si256((const __m256i *)(p->cx + b)));
        const __m256 fs = _mm256_cvtepi32_ps(isum), hxv = _mm256_loadu_ps(p->hx + b);
        __m256 t;
        if (kind == SL_R32_MXFP4) {
            uint64_t ev = 0;
            for (int k = 0; k < 8; k++) {
                ev |= (uint64_t)(uint8_t)wp[k * wb] << (8 * k);
                __asm__("" : "+r"(ev)); /* scalar ALU work, not vpinsrb on the shuffle ports */
            }
            const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)ev));
            t = _mm256_mul_ps(fs, _mm256_mul_ps(hxv, SL_MV_SUFFIX(e8m0_bits)(e)));
        } else {
            t = _mm256_mul_ps(
                fs, _mm256_mul_ps(SL_MV_SUFFIX(load_halves)(wp, wp, (size_t)wb, 8, 0), hxv));
        }
        acc = _mm256_add_ps(acc, t);
    }
    if (nb8 < nb)
        acc = SL_MV_SUFFIX(groups_acc)(acc, wr, xq, nb8, nb, wb, xb,
                                       kind == SL_R32_MXFP4  ? SL_MV_SUFFIX(group_mxfp4)
                                       : kind == SL_R32_Q4_0 ? SL_MV_SUFFIX(group_q4_0)
                                                             : SL_MV_SUFFIX(group_q5_0),
                                       p->hx);
    return SL_MV_SUFFIX(reduce8)(acc);
}

static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(r32_rows)(const void *w, size_t wrb, const void *xq, int64_t nb, int64_t r0,
                       int64_t r1, float *y, int kind)
{
    r32_x p;
    SL_MV_SUFFIX(r32_prep)(xq, nb, kind, &p);
    for (int64_t r = r0; r < r1; r++)
        y[r] = SL_MV_SUFFIX(r32_row)((const char *)w + (size_t)r * wrb, xq, nb, &p, kind);
}

static void SL_MV_SUFFIX(rows32_mxfp4)(const void *w, size_t wrb, const void *xq, int64_t nb,
                                       int64_t r0, int64_t r1, float *y)
{
    if (nb < 8 || nb > SL_MV_HX_MAX) SL_MV_SUFFIX(rows_mxfp4)(w, wrb, xq, nb, r0, r1, y);
    else SL_MV_SUFFIX(r32_rows)(w, wrb, xq, nb, r0, r1, y, SL_R32_MXFP4);
}

static void SL_MV_SUFFIX(rows32_q4_0)(const void *w, size_t wrb, const void *xq, int64_t nb,
                                      int64_t r0, int64_t r1, float *y)
{
    if (nb < 8 || nb > SL_MV_HX_MAX) SL_MV_SUFFIX(rows_q4_0)(w, wrb, xq, nb, r0, r1, y);
    else SL_MV_SUFFIX(r32_rows)(w, wrb, xq, nb, r0, r1, y, SL_R32_Q4_0);
}

static void SL_MV_SUFFIX(rows32_q5_0)(const void *w, size_t wrb, const void *xq, int64_t nb,
                                      int64_t r0, int64_t r1, float *y)
{
    if (nb < 8 || nb > SL_MV_HX_MAX) SL_MV_SUFFIX(rows_q5_0)(w, wrb, xq, nb, r0, r1, y);
    else SL_MV_SUFFIX(r32_rows)(w, wrb, xq, nb, r0, r1, y, SL_R32_Q5_0);
}
