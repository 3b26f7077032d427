/* kernels/cpu/r8_x86_tmpl.h: the Q4_K_R8 decode kernel (kernels/ref/repack.h), part of
 * matvec_x86_tmpl.h (same includer contract). Eight rows at once: each int32 lane of a vector
 * is one row, so the reference's per-row float work (lane b % 8 += term, the 8-lane reduction)
 * happens element-wise across rows and a group's 8 results are one store — no horizontal sums.
 *
 * Integer sums (exact, any order): a 32-byte chunk holds 4 quant bytes of each row; its low
 * nibbles meet 4 activation bytes of sub-block 2p broadcast to every row, its high nibbles 4 of
 * sub-block 2p + 1. vpmaddubsw pair sums are <= 2 * 15 * 127; the 8 chunks of a sub-block add
 * in int16 (<= 8 * 3810 < 2^15) before one vpmaddwd by the rows' scales. The mins term is
 * sum_j m_j (bsums 2j + 2j+1): the rows' mins of sub-blocks 2p, 2p + 1 (stored as int16
 * pairs by the layout) times the activation's two pair sums, one vpmaddwd per p. */

/* The scales (sc) and mins (mk) of Q4_K_R8 block p, one byte each in the layout's k order
 * (kernels/ref/repack.h): [0] k < 32 (rounds 0, 1), [1] k >= 32 (rounds 2, 3). Six-bit
 * scales are sc's low bits; a min's four low bits come from mn, its two high bits from bits 6-7
 * of the scale byte. */
static inline void SL_MV_SUFFIX(r8_scales)(const char *p, __m256i sc[2], __m256i mk[2])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i m63 = _mm256_set1_epi8(63);
    const __m256i s0 = _mm256_loadu_si256((const __m256i *)(p + 32));
    const __m256i s1 = _mm256_loadu_si256((const __m256i *)(p + 64));
    const __m256i mn = _mm256_loadu_si256((const __m256i *)(p + 96));
    sc[0] = _mm256_and_si256(s0, m63);
    sc[1] = _mm256_and_si256(s1, m63);
    mk[0] = _mm256_or_si256(_mm256_and_si256(mn, m4),
                            _mm256_and_si256(_mm256_srli_epi16(s0, 2), m30));
    mk[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(mn, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi16(s1, 2), m30));
}

/* Rows [r0, r1) (multiples of 8) of the Q4_K_R8 matrix at w: y[r] as the reference gives row
 * r of the original Q4_K matrix. wrb: bytes of one row (nb * 144). */
static void SL_MV_SUFFIX(rows_q4_K_r8)(const void *w, size_t wrb, const void *xq, int64_t nb,
                                       int64_t r0, int64_t r1, float *y)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* vpshufb patterns: (s_r, s_r) as int16 for rows 0-3 (low lane) and 4-7 (high lane) from
     * the 16 scale bytes of one p (byte 2r + e), e = 0 and e = 1 */
    const __m256i pe0 = _mm256_setr_epi8(0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1,
                                         8, -1, 8, -1, 10, -1, 10, -1, 12, -1, 12, -1, 14, -1, 14,
                                         -1);
    const __m256i pe1 = _mm256_add_epi8(pe0, _mm256_setr_epi8(1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
                                                              1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0,
                                                              1, 0, 1, 0, 1, 0, 1, 0));
    SL_MV_SUFFIX(pf_head)((const char *)w + (size_t)(r0 / 8) * 8 * wrb, (size_t)(r1 - r0) * wrb);
    for (int64_t g = r0 / 8; g < r1 / 8; g++) {
        const char *gw = (const char *)w + (size_t)g * 8 * wrb;
        __m256 lane[8];
        for (int k = 0; k < 8; k++) lane[k] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const char *bw = gw + b * (int64_t)sizeof(sl_block_q4_K_r8);
            SL_MV_SUFFIX(pf_span)(bw, sizeof(sl_block_q4_K_r8));
            const char *xp = (const char *)xq + b * (int64_t)sizeof(sl_block_q8_K);
            __m256i sc[2], mk[2];
            SL_MV_SUFFIX(r8_scales)(bw, sc, mk);
            /* bsums pairs j (8 int16), broadcast two at a time: (pair 2p, pair 2p + 1) */
            const __m128i bsp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(xp + 260)),
                                               _mm_loadu_si128((const __m128i *)(xp + 276)));
            const __m256i bsv = _mm256_broadcastsi128_si256(bsp);
            __m256i summ = _mm256_setzero_si256(), isum = _mm256_setzero_si256();
#define SL_R8_MINS(p, IMM)                                                                    \
    summ = _mm256_add_epi32(                                                                  \
        summ, _mm256_madd_epi16(                                                              \
                  _mm256_cvtepu8_epi16((p) % 2 ? _mm256_extracti128_si256(mk[(p) / 2], 1)     \
                                               : _mm256_castsi256_si128(mk[(p) / 2])),         \
                  _mm256_shuffle_epi32(bsv, IMM)))
            SL_R8_MINS(0, 0x00);
            SL_R8_MINS(1, 0x55);
            SL_R8_MINS(2, 0xaa);
            SL_R8_MINS(3, 0xff);
#undef SL_R8_MINS
            /* round p: sub-blocks 2p (low nibbles) and 2p + 1 (high) */
#define SL_R8_ROUND(p, IMM)                                                                   \
    do {                                                                                      \
        const char *qp = bw + 128 + 256 * (p);                                                \
        const char *xl = xp + 4 + 64 * (p), *xh = xl + 32;                                    \
        __m256i al = _mm256_setzero_si256(), ah = _mm256_setzero_si256();                     \
        for (int c = 0; c < 8; c++) {                                                         \
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qp + 32 * c));             \
            int32_t l4, h4;                                                                   \
            memcpy(&l4, xl + 4 * c, 4);                                                       \
            memcpy(&h4, xh + 4 * c, 4);                                                       \
            al = _mm256_add_epi16(al, _mm256_maddubs_epi16(_mm256_and_si256(q, m4),           \
                                                           _mm256_set1_epi32(l4)));           \
            ah = _mm256_add_epi16(                                                            \
                ah, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),       \
                                         _mm256_set1_epi32(h4)));                             \
        }                                                                                     \
        const __m256i sp = _mm256_permute4x64_epi64(sc[(p) / 2], IMM);                        \
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(al, _mm256_shuffle_epi8(sp, pe0)));   \
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(ah, _mm256_shuffle_epi8(sp, pe1)));   \
    } while (0)
            SL_R8_ROUND(0, 0x44);
            SL_R8_ROUND(1, 0xEE);
            SL_R8_ROUND(2, 0x44);
            SL_R8_ROUND(3, 0xEE);
#undef SL_R8_ROUND
            /* the reference's term_k, row by row in the lanes */
            float dxf;
            memcpy(&dxf, xp, 4);
            const __m256 dx = _mm256_set1_ps(dxf);
            const __m256 dd = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)bw)), dx);
            const __m256 dm = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bw + 16))), dx);
            const __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd);
            const __m256 t = _mm256_sub_ps(a, _mm256_mul_ps(_mm256_cvtepi32_ps(summ), dm));
            lane[b % 8] = _mm256_add_ps(lane[b % 8], t);
        }
        /* sl__mv_reduce8, element-wise */
        const __m256 u0 = _mm256_add_ps(lane[0], lane[4]), u1 = _mm256_add_ps(lane[1], lane[5]);
        const __m256 u2 = _mm256_add_ps(lane[2], lane[6]), u3 = _mm256_add_ps(lane[3], lane[7]);
        _mm256_storeu_ps(y + 8 * g,
                         _mm256_add_ps(_mm256_add_ps(u0, u2), _mm256_add_ps(u1, u3)));
    }
}
