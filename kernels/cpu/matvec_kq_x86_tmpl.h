/* kernels/cpu/matvec_kq_x86_tmpl.h: the K-quant (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_K_R8 through
 * r8_x86_tmpl.h) and IQ4_XS range and row kernels of matvec_x86_tmpl.h, split out of it by
 * size. Not a normal header (no guard): included once by matvec_x86_tmpl.h, at the point where
 * this text used to stand, so each ISA's translation unit is unchanged; it uses that file's
 * common helpers (u8s8_dot, pf_span, pf_head, the 32-element types' reducers) and its macros,
 * and the bit-exactness rules of matvec_x86_tmpl.h's header hold here. */
/* ---- K-quants: SIMD integer sums per super-block, reference float term ------------------ */

/* Q4_K/Q5_K: ggml's 12-byte unpack of the six-bit sub-block scales and mins, in registers:
 * bytes 0..7 of the result are the 8 scales, 8..15 the 8 mins. Scale/min j < 4 is the low six
 * bits of byte j / j + 4; j >= 4 takes its low four bits from a nibble of byte j + 4 and its
 * top two from bits 6-7 of byte j - 4 / j. Two byte shuffles line those bytes up, so the
 * unpack is a few vector ops instead of a scalar round trip. Reads 16 bytes at scales (the
 * block's quants follow its 12 scale bytes; the extra 4 are shuffled away). */
static inline __m128i SL_MV_SUFFIX(k4_unpack_v)(const uint8_t *scales)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)scales);
    const __m128i a =
        _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i b =
        _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i low = _mm_and_si128(
        a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
    const __m128i nib = _mm_and_si128(
        _mm_srli_epi16(a, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
    const __m128i top = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(_mm_or_si128(low, nib), top);
}

/* The same with the scales stored to sc and the 8 mins returned as int16. Integer sums are
 * exact in any order. */
static inline __m128i SL_MV_SUFFIX(k4_unpack)(const uint8_t *scales, uint8_t sc[8])
{
    const __m128i v = SL_MV_SUFFIX(k4_unpack_v)(scales);
    _mm_storel_epi64((__m128i *)sc, v);
    return _mm_cvtepu8_epi16(_mm_unpackhi_epi64(v, v));
}

/* Q4_K/Q5_K's min terms of one super-block: min j (bytes 8..15 of the unpacked scm) times
 * Q8_K's bsums 2j and 2j + 1, as int32 pairs (|bsum| <= 16 * 127: the products fit). */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(k45_mins)(__m128i scm,
                                                                             const char *xp)
{
    const __m128i mins2 = _mm_shuffle_epi8(
        scm, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(mins2),
                             _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K)));
}

/* One Q4_K (q5 0) or Q5_K (q5 1) super-block at wp times the Q8_K block at xp: 8 int32 whose
 * sum is the reference's isum, and in *summ 8 int32 whose sum is its summ. The sub-block
 * scales sit as int16 pairs (s, s) in the 32-bit elements of s03 (scales 0..3) and s47, both
 * 128-bit halves, so one vpshufd broadcasts scale 2j (low nibbles of round j) or 2j + 1 (high
 * nibbles). Q5_K: round j holds qh >> 2j: bits 0 and 1 of each byte are qh bits 2j and 2j + 1,
 * which the epi16 shifts << 4 and << 3 move to bit 4 of the same byte; only those two bits
 * reach bit 4, so what the 16-bit shifts carry across the byte boundary is masked off.
 * q <= 31, x in [-127, 127]: the vpmaddubsw pair sums stay below 2^15. */
static inline __attribute__((always_inline)) __m256i
SL_MV_SUFFIX(k45_block)(const char *wp, const char *xp, int q5, __m256i *summ)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), x10 = _mm256_set1_epi8(0x10);
    const uint8_t *qs = (const uint8_t *)wp + (q5 ? 48 : 16);
    const __m128i scm = SL_MV_SUFFIX(k4_unpack_v)((const uint8_t *)wp + 4);
    *summ = SL_MV_SUFFIX(k45_mins)(scm, xp);
    const __m128i sc = _mm_cvtepu8_epi16(scm);
    const __m256i s03 = _mm256_broadcastsi128_si256(_mm_unpacklo_epi16(sc, sc));
    const __m256i s47 = _mm256_broadcastsi128_si256(_mm_unpackhi_epi16(sc, sc));
    __m256i h = q5 ? _mm256_loadu_si256((const __m256i *)(wp + 16)) : _mm256_setzero_si256();
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    /* round j: its 64 quants, scales s[2j], s[2j + 1] from S at vpshufd IL, IH */
#define SL_MV_K45_ROUND(j, S, IL, IH)                                                            \
    do {                                                                                         \
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j)));                  \
        __m256i lo = _mm256_and_si256(q, m4);                                                    \
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);                              \
        if (q5) {                                                                                \
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), x10));            \
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), x10));            \
            h = _mm256_srli_epi16(h, 2);                                                         \
        }                                                                                        \
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(xp + 4 + 64 * (j)));             \
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(xp + 4 + 64 * (j) + 32));        \
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl),            \
                                                        _mm256_shuffle_epi32(S, IL)));           \
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh),            \
                                                        _mm256_shuffle_epi32(S, IH)));           \
    } while (0)
    SL_MV_K45_ROUND(0, s03, 0x00, 0x55);
    SL_MV_K45_ROUND(1, s03, 0xaa, 0xff);
    SL_MV_K45_ROUND(2, s47, 0x00, 0x55);
    SL_MV_K45_ROUND(3, s47, 0xaa, 0xff);
#undef SL_MV_K45_ROUND
    return _mm256_add_epi32(acc0, acc1);
}

#if SL_MV_AVX512
/* k45_block in 512-bit vectors: rounds 2h and 2h + 1 in one vector (their 64 quant bytes as
 * they lie; the low nibbles are elements 64j + 0..31, the high ones 64j + 32..63, so x comes
 * as two 32-byte pieces per vector, masked broadcast loads), each 256-bit half one sub-block:
 * its scale is one int16 broadcast by vpshufb and vpdpwssd weights and sums the vpmaddubsw
 * pairs. Q5_K: bit 2j (low nibbles) / 2j + 1 (high) of qh's bytes to bit 4, by 64-bit
 * variable shifts whose cross-byte bits the 0x10 mask drops. The same integers as k45_block:
 * the same sums in another order. */
/* Rounds 2h (its 32 quant bytes in the low half) and 2h + 1 of a Q4_K / Q5_K (q5) super-block
 * as codes in [0, 31]: *lo the low nibbles (elements 64j..64j+31 of round j), *hi the high ones
 * (64j+32..); qh Q5_K's 32 high-bit bytes in both halves. Q5_K: bit 2j (low nibbles) / 2j + 1
 * (high) of qh's bytes to bit 4, by 64-bit variable shifts whose cross-byte bits the 0x10 mask
 * drops. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(k45_codes512)(const uint8_t *qs, __m512i qh, int h, int q5, __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), x10 = _mm512_set1_epi8(0x10);
    const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
    *lo = _mm512_and_si512(q, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (q5) {
        const long long j0 = 4 * h, j1 = 4 * h + 2; /* bit 2j of rounds 2h, 2h + 1 */
        const __m512i sl = _mm512_setr_epi64(j0, j0, j0, j0, j1, j1, j1, j1);
        *lo = _mm512_or_si512(
            *lo, _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi64(qh, sl), 4), x10));
        *hi = _mm512_or_si512(
            *hi, _mm512_and_si512(
                     _mm512_slli_epi16(
                         _mm512_srlv_epi64(qh, _mm512_add_epi64(sl, _mm512_set1_epi64(1))), 4),
                     x10));
    }
}

static inline __attribute__((always_inline)) __m256i
SL_MV_SUFFIX(k45_block512)(const char *wp, const char *xp, int q5, __m256i *summ)
{
    const uint8_t *qs = (const uint8_t *)wp + (q5 ? 48 : 16);
    const __m128i scm = SL_MV_SUFFIX(k4_unpack_v)((const uint8_t *)wp + 4);
    *summ = SL_MV_SUFFIX(k45_mins)(scm, xp);
    /* the 8 scales as int16 in every 128-bit lane */
    const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scm));
    const __m512i qh = q5 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wp + 16)))
                          : _mm512_setzero_si512();
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        __m512i lo, hi;
        SL_MV_SUFFIX(k45_codes512)(qs, qh, h, q5, &lo, &hi);
        const char *x0 = xp + 4 + 128 * h; /* round 2h's 64 x; round 2h + 1's follow */
        const __m512i xl = SL_MV_SUFFIX(load_2x32)(x0, x0 + 64);
        const __m512i xh = SL_MV_SUFFIX(load_2x32)(x0 + 32, x0 + 96);
        /* scale 4h (+1 for the high nibbles) in the low half, 4h + 2 (+1) in the high one */
        const int a = 4 * h, b = 4 * h + 2;
        const __m512i pl = _mm512_setr_epi32(
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * a + 1) << 24 | (2 * a) << 16 | (2 * a + 1) << 8 | (2 * a),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b),
            (2 * b + 1) << 24 | (2 * b) << 16 | (2 * b + 1) << 8 | (2 * b));
        const __m512i ph = _mm512_add_epi8(pl, _mm512_set1_epi8(2)); /* int16 + 1 */
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(lo, xl), _mm512_shuffle_epi8(sc, pl));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(hi, xh), _mm512_shuffle_epi8(sc, ph));
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
}
#endif

/* Q6_K half n (elements 128n..128n+127) of a super-block: q[g] = its 32-element group g as
 * unsigned q in [0, 63] (ggml's ql/qh interleave), element order. */
static inline void SL_MV_SUFFIX(q6_half)(const sl_block_q6_K *wp, int n, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wp->ql + 64 * n));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wp->ql + 64 * n + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(wp->qh + 32 * n));
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                           _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_and_si256(h, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}


/* One Q6_K super-block times the Q8_K block at xp: 8 int32 whose sum is the reference's isum.
 * (q - 32) * x is summed as q * x per sub-block, less 32 * scale * bsum once per super-block
 * (vpmaddubsw pair sums <= 2 * 63 * 127 < 2^15; every partial sum fits int32). The 16 int8
 * scales are widened once; vpshufb broadcasts sub-block s to the low and s + 1 to the high
 * half of a round. */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(q6k_block)(const char *wp,
                                                                              const char *xp)
{
    const sl_block_q6_K *w = (const sl_block_q6_K *)wp;
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K));
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
    __m256i acc = _mm256_setzero_si256();
    for (int n = 0; n < 2; n++) {
        __m256i q[4];
        SL_MV_SUFFIX(q6_half)(w, n, q);
        const __m256i half = _mm256_broadcastsi128_si256(
            n ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
        for (int g = 0; g < 4; g++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xp + 4 + 128 * n + 32 * g));
            const __m256i scv = _mm256_shuffle_epi8(
                half, _mm256_set_m128i(_mm_set1_epi16((short)(((4 * g + 3) << 8) | (4 * g + 2))),
                                       _mm_set1_epi16((short)(((4 * g + 1) << 8) | 4 * g))));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], xv), scv));
        }
    }
    return _mm256_sub_epi32(acc, off);
}

#if SL_MV_AVX512
/* q6k_block in 512-bit vectors: half n's 128 quants as two vectors, A = groups 0 and 1 (ql's
 * low nibbles, qh bits 0-1 and 2-3), B = groups 2 and 3 (high nibbles, qh bits 4-5 and 6-7),
 * each 128-bit lane one 16-quant sub-block in element order, so x is read as it lies and a
 * lane's scale is one int16 broadcast by vpshufb; vpdpwssd weights and sums the vpmaddubsw
 * pairs. The same integer as q6k_block (the 64-bit variable shifts carry only bits the 0x30
 * mask drops, as its 16-bit ones do). */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(q6k_block512)(const char *wp,
                                                                                  const char *xp)
{
    const sl_block_q6_K *w = (const sl_block_q6_K *)wp;
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K));
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* int16 k (A) / 4 + k (B) of the half's 8 scales in every pair of lane k */
#define SL_MV_Q6P(k) ((2 * (k) + 1) << 24 | (2 * (k)) << 16 | (2 * (k) + 1) << 8 | (2 * (k)))
    const __m512i pa = _mm512_setr_epi32(SL_MV_Q6P(0), SL_MV_Q6P(0), SL_MV_Q6P(0), SL_MV_Q6P(0),
                                         SL_MV_Q6P(1), SL_MV_Q6P(1), SL_MV_Q6P(1), SL_MV_Q6P(1),
                                         SL_MV_Q6P(2), SL_MV_Q6P(2), SL_MV_Q6P(2), SL_MV_Q6P(2),
                                         SL_MV_Q6P(3), SL_MV_Q6P(3), SL_MV_Q6P(3), SL_MV_Q6P(3));
    const __m512i pb = _mm512_setr_epi32(SL_MV_Q6P(4), SL_MV_Q6P(4), SL_MV_Q6P(4), SL_MV_Q6P(4),
                                         SL_MV_Q6P(5), SL_MV_Q6P(5), SL_MV_Q6P(5), SL_MV_Q6P(5),
                                         SL_MV_Q6P(6), SL_MV_Q6P(6), SL_MV_Q6P(6), SL_MV_Q6P(6),
                                         SL_MV_Q6P(7), SL_MV_Q6P(7), SL_MV_Q6P(7), SL_MV_Q6P(7));
#undef SL_MV_Q6P
    __m512i acc = _mm512_setzero_si512();
    for (int n = 0; n < 2; n++) {
        const __m512i l = _mm512_loadu_si512((const void *)(w->ql + 64 * n));
        const __m512i h =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * n)));
        const __m512i a = _mm512_or_si512(
            _mm512_and_si512(l, m4),
            _mm512_and_si512(_mm512_sllv_epi64(h, _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2)),
                             m30));
        const __m512i b = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
            _mm512_and_si512(_mm512_srlv_epi64(h, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2)),
                             m30));
        const __m512i s = _mm512_broadcast_i32x4(n ? _mm256_extracti128_si256(sc16, 1)
                                                   : _mm256_castsi256_si128(sc16));
        const __m512i xa = _mm512_loadu_si512((const void *)(xp + 4 + 128 * n));
        const __m512i xb = _mm512_loadu_si512((const void *)(xp + 4 + 128 * n + 64));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(a, xa), _mm512_shuffle_epi8(s, pa));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(b, xb), _mm512_shuffle_epi8(s, pb));
    }
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc),
                                        _mm512_extracti64x4_epi64(acc, 1));
    return _mm256_sub_epi32(s8, off);
}
#endif

/* Q3_K: half n's four hmask bits of each of the 32 bytes at hm, as a nibble (bit g: group g) */
static inline __m256i SL_MV_SUFFIX(k23_hnib)(__m256i hm, int n)
{
    return _mm256_and_si256(n ? _mm256_srli_epi16(hm, 4) : hm, _mm256_set1_epi8(15));
}

/* Q2_K/Q3_K: the unsigned codes of the 32 elements 128 n + 32 g .. + 31 in element order: plane
 * g of the 32 bytes qv at qs + 32 n (16-bit shifts carry only bits the mask drops), and for
 * Q3_K (hn: k23_hnib of its hmask) bit g of the nibble as 4, by a 16-entry byte table (one
 * vpshufb: 1.1-1.5x the compare-and-mask form's speed, Q3_K rows 4096 x 4096 hot). */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(k23_codes)(__m256i qv,
                                                                              const __m256i *hn,
                                                                              int g)
{
    __m256i u = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * g), _mm256_set1_epi8(3));
    if (hn) {
#define SL_MV_HB(i) (char)((((i) >> g) & 1) * 4)
        const __m128i lut = _mm_setr_epi8(SL_MV_HB(0), SL_MV_HB(1), SL_MV_HB(2), SL_MV_HB(3),
                                          SL_MV_HB(4), SL_MV_HB(5), SL_MV_HB(6), SL_MV_HB(7),
                                          SL_MV_HB(8), SL_MV_HB(9), SL_MV_HB(10), SL_MV_HB(11),
                                          SL_MV_HB(12), SL_MV_HB(13), SL_MV_HB(14), SL_MV_HB(15));
#undef SL_MV_HB
        u = _mm256_or_si256(u, _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(lut), *hn));
    }
    return u;
}

/* Sub-block scales s (low lane) and s + 1 (high lane) of a half's 8 int16 scales `half`
 * (broadcast to both lanes), each repeated over its lane: g = s / 2 within the half. */
static inline __m256i SL_MV_SUFFIX(k23_scv)(__m256i half, int g)
{
    return _mm256_shuffle_epi8(
        half, _mm256_set_m128i(_mm_set1_epi16((short)(((4 * g + 3) << 8) | (4 * g + 2))),
                               _mm_set1_epi16((short)(((4 * g + 1) << 8) | 4 * g))));
}

/* The 16-element sub-block sums of a Q2_K/Q3_K super-block against the Q8_K block at xp, each
 * weighted by its int16 scale in sc16: 8 int32 whose sum is sum_s sc_s sum_l u * q8, u the
 * unsigned quant (Q2_K's 2 bits; Q3_K's 2 bits | the hmask bit << 2). vpmaddubsw pair sums
 * <= 2 * 7 * 127 < 2^15. */
static inline __attribute__((always_inline)) __m256i
SL_MV_SUFFIX(k23_sums)(const uint8_t *qs, const uint8_t *hmask, const char *xp, __m256i sc16)
{
    __m256i acc = _mm256_setzero_si256();
    const __m256i hm = hmask ? _mm256_loadu_si256((const __m256i *)hmask) : _mm256_setzero_si256();
    for (int n = 0; n < 2; n++) {
        const __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * n));
        const __m256i half = _mm256_broadcastsi128_si256(
            n ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
        const __m256i hn = SL_MV_SUFFIX(k23_hnib)(hm, n);
        for (int g = 0; g < 4; g++) {
            const __m256i u = SL_MV_SUFFIX(k23_codes)(qv, hmask ? &hn : NULL, g);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xp + 4 + 128 * n + 32 * g));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, xv),
                                                          SL_MV_SUFFIX(k23_scv)(half, g)));
        }
    }
    return acc;
}

/* Q3_K's 16 scales less 32 as int16, from its 12 scale bytes unpacked as ggml's kmask
 * shuffle does: word k holds scales 4k..4k+3 (low nibbles from bytes 0..7, high pairs from
 * bytes 8..11). */
static inline __m256i SL_MV_SUFFIX(q3k_scales)(const uint8_t *scales)
{
    uint32_t a[4];
    memcpy(a, scales, 12);
    const uint32_t t = a[2], lo4 = 0x0f0f0f0fu, hi2 = 0x03030303u;
    a[2] = ((a[0] >> 4) & lo4) | (((t >> 4) & hi2) << 4);
    a[3] = ((a[1] >> 4) & lo4) | (((t >> 6) & hi2) << 4);
    a[0] = (a[0] & lo4) | ((t & hi2) << 4);
    a[1] = (a[1] & lo4) | (((t >> 2) & hi2) << 4);
    const __m128i sc8 = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)a), _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(sc8);
}

/* One Q3_K super-block times the Q8_K block at xp: 8 int32 whose sum is the reference's isum
 * (term_q3_K). (u - 4) * x is summed as u * x per sub-block, less 4 * scale * bsum once per
 * super-block. */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(q3k_block)(const char *wp,
                                                                              const char *xp)
{
    const sl_block_q3_K *w = (const sl_block_q3_K *)wp;
    const __m256i sc16 = SL_MV_SUFFIX(q3k_scales)(w->scales);
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K));
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 2);
    return _mm256_sub_epi32(SL_MV_SUFFIX(k23_sums)(w->qs, w->hmask, xp, sc16), off);
}

/* One Q2_K super-block times the Q8_K block at xp: 8 int32 whose sum is the reference's isum,
 * and in *s 8 int32 whose sum is its summ (sum_s m_s * bsums[s]), as k45_block gives them. */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(q2k_block)(const char *wp,
                                                                              const char *xp,
                                                                              __m256i *s)
{
    const sl_block_q2_K *w = (const sl_block_q2_K *)wp;
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)w->scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K));
    *s = _mm256_madd_epi16(m16, bs);
    return SL_MV_SUFFIX(k23_sums)(w->qs, NULL, xp, sc16);
}

/* The floats at p/q of the group's lanes (the Q8_K scales), other lanes 0; built in
 * registers like load_halves. */
static inline __m256 SL_MV_SUFFIX(load_floats)(const char *p, const char *q, size_t stride,
                                               int m, int pair)
{
    uint64_t v[4] = {0, 0, 0, 0};
    for (int k = 0; k < 8; k++) {
        if (!SL_MV_SUFFIX(lane_on)(k, m, pair)) continue;
        uint32_t f;
        memcpy(&f, SL_MV_SUFFIX(lane_at)(p, q, k, stride, pair), 4);
        v[k >> 1] |= (uint64_t)f << (32 * (k & 1));
    }
    return _mm256_castsi256_ps(
        _mm256_set_epi64x((long long)v[3], (long long)v[2], (long long)v[1], (long long)v[0]));
}

/* IQ4_XS's eight sub-block scales ls - 32 of the super-block at wp, int32 lane j: ls_j =
 * nibble j of scales_l | bits 2j, 2j + 1 of scales_h << 4, unpacked in vector registers (a
 * scalar unpack per sub-block cost as much as its dot). */
static inline __m256i SL_MV_SUFFIX(iq4xs_ls32)(const char *wp)
{
    uint16_t sh;
    uint32_t sl;
    memcpy(&sh, wp + 2, 2);
    memcpy(&sl, wp + 4, 4);
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int)sl),
                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)),
                            _mm256_set1_epi32(32));
}

/* The same scales as int16 in both 128-bit halves. */
static inline __m256i SL_MV_SUFFIX(iq4xs_scales)(const char *wp)
{
    const __m256i ls = SL_MV_SUFFIX(iq4xs_ls32)(wp);
    const __m128i s16 =
        _mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1));
    return _mm256_broadcastsi128_si256(s16);
}

/* IQ4_XS super-block at wp times the Q8_K block at xp: 8 int32 whose sum is the reference's
 * isum = sum_j (ls_j - 32) * (sub-block j's table values . x). Values through vpshufb as
 * IQ4_NL, two sub-blocks from one 32-byte load (their low and high nibbles regrouped by
 * 128-bit lanes); |value| <= 127 with the sign moved onto x keeps vpmaddubsw's pair sums below
 * 2^15, and vpmaddwd with the signed scale (|ls - 32| <= 32, broadcast by vpshufb) both
 * weights and pairs them. */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(iq4xs_block)(const char *wp,
                                                                                const char *xp)
{
    const __m256i sc = SL_MV_SUFFIX(iq4xs_scales)(wp);
    const __m128i kv = _mm_loadu_si128((const __m128i *)sl_iq4nl_values);
    const __m256i table = _mm256_set_m128i(kv, kv), m4 = _mm256_set1_epi8(0x0F);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(wp + 8 + 16 * j));
        const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
        const __m256i hi =
            _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        for (int h = 0; h < 2; h++) {
            /* sub-block j + h: its 16 low-nibble values, then its 16 high-nibble ones */
            const __m256i v = h ? _mm256_permute2x128_si256(lo, hi, 0x31)
                                : _mm256_permute2x128_si256(lo, hi, 0x20);
            const __m256i x = _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * (j + h)));
            const __m256i p =
                _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v));
            const int k = j + h; /* int16 k of sc in every pair */
            const __m256i sck =
                _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((2 * k + 1) << 8 | 2 * k)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sck));
        }
    }
    return acc;
}

#if SL_MV_AVX512
/* IQ4_XS super-block at wp times a Q8_K block at xp whose quants are regrouped by
 * iq4xs_xperm: 8 int32 whose sum is the reference's isum. Four sub-blocks per 512-bit vector
 * (128-bit lane k: sub-block 4h + k's 16 low-nibble values, then in a second vector its 16
 * high-nibble ones, against x regrouped the same way), so no weight is moved across lanes.
 * vpdpbusd takes the values as u = v + 128 (the table xor 0x80, unsigned) against the signed
 * x: lane sums are sum (v + 128) x; times the sub-block's scale ls - 32 (vpmulld, the lane's
 * sub-block), less 128 * sum_j (ls_j - 32) * (x sum of sub-block j) (from Q8_K's bsums) once
 * per super-block, that is the same exact integer as iq4xs_block's. Bounds: a lane sums 8
 * products |u x| <= 255 * 128 per vector, times |ls - 32| <= 32, over two vectors and two
 * halves: < 2^27. */
static inline __attribute__((always_inline)) __m256i SL_MV_SUFFIX(iq4xs_block_p)(const char *wp,
                                                                                  const char *xp)
{
    const __m256i ls = SL_MV_SUFFIX(iq4xs_ls32)(wp); /* int32 ls_j - 32, j = 0..7 */
    /* 128 * sum_j ls_j * (bsums[2j] + bsums[2j + 1]): the u offset's share, in 8 lanes */
    const __m256i bs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K)),
                                         _mm256_set1_epi16(1));
    const __m256i off = _mm256_slli_epi32(_mm256_mullo_epi32(ls, bs), 7);
    const __m512i lsz = _mm512_castsi256_si512(ls);
    const __m128i kv = _mm_xor_si128(_mm_loadu_si128((const __m128i *)sl_iq4nl_values),
                                     _mm_set1_epi8((char)0x80));
    const __m512i table = _mm512_broadcast_i32x4(kv), m4 = _mm512_set1_epi8(0x0F);
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i q = _mm512_loadu_si512((const void *)(wp + 8 + 64 * h));
        const __m512i ul = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
        const __m512i uh =
            _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        const __m512i xl = _mm512_loadu_si512((const void *)(xp + 4 + 128 * h));
        const __m512i xh = _mm512_loadu_si512((const void *)(xp + 4 + 128 * h + 64));
        const __m512i d =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ul, xl), uh, xh);
        /* lane k's scale: ls_{4h+k} in its four int32 */
        const __m512i sk = _mm512_permutexvar_epi32(
            h ? _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)
              : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
            lsz);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(d, sk));
    }
    const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(acc),
                                        _mm512_extracti64x4_epi64(acc, 1));
    return _mm256_sub_epi32(s8, off);
}

/* Q8_K blocks [0, nb) at xq into dst (the same 292-byte blocks) with each super-block's quants
 * regrouped for iq4xs_block_p: half h (sub-blocks 4h .. 4h + 3) as 64 bytes of their first 16
 * quants (sub-block 4h + k at 16k), then 64 of their last 16. */
static inline void SL_MV_SUFFIX(iq4xs_xperm)(const char *xq, int64_t nb, char *dst)
{
    for (int64_t b = 0; b < nb; b++) {
        const char *s = xq + (size_t)b * sizeof(sl_block_q8_K);
        char *d = dst + (size_t)b * sizeof(sl_block_q8_K);
        memcpy(d, s, 4);
        memcpy(d + 4 + SL_QK_K, s + 4 + SL_QK_K, sizeof(((sl_block_q8_K *)0)->bsums));
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {
                memcpy(d + 4 + 128 * h + 16 * k, s + 4 + 32 * (4 * h + k), 16);
                memcpy(d + 4 + 128 * h + 64 + 16 * k, s + 4 + 32 * (4 * h + k) + 16, 16);
            }
    }
}
#endif

/* which K-quant (or IQ4_XS, a super-block type on Q8_K with one scale) a kgroup / krange call
 * is for */
enum { SL_MV_K4, SL_MV_K5, SL_MV_K6, SL_MV_IQ4XS, SL_MV_IQ4XS_P, SL_MV_K2, SL_MV_K3 };

/* Bytes of a super-block of a kind (the block structs of kernels/ref/blocks.h). */
static inline size_t SL_MV_SUFFIX(k_bytes)(int kind)
{
    return kind == SL_MV_K4   ? sizeof(sl_block_q4_K)
           : kind == SL_MV_K5 ? sizeof(sl_block_q5_K)
           : kind == SL_MV_K6 ? sizeof(sl_block_q6_K)
           : kind == SL_MV_K2 ? sizeof(sl_block_q2_K)
           : kind == SL_MV_K3 ? sizeof(sl_block_q3_K)
                              : sizeof(sl_block_iq4_xs); /* IQ4XS, IQ4XS_P */
}

/* Byte offsets of a super-block's half scale d and (kinds with mins: Q2_K, Q4_K, Q5_K) dmin. */
static inline size_t SL_MV_SUFFIX(k_dofs)(int kind)
{
    return kind == SL_MV_K6   ? offsetof(sl_block_q6_K, d)
           : kind == SL_MV_K2 ? offsetof(sl_block_q2_K, d)
           : kind == SL_MV_K3 ? offsetof(sl_block_q3_K, d)
                              : 0;
}
static inline size_t SL_MV_SUFFIX(k_mofs)(int kind)
{
    return kind == SL_MV_K2 ? offsetof(sl_block_q2_K, dmin) : 2;
}

/* Kinds whose term is sl__mv_term_d (one scale, no mins). */
static inline int SL_MV_SUFFIX(k_no_min)(int kind)
{
    return kind == SL_MV_K6 || kind == SL_MV_K3 || kind == SL_MV_IQ4XS || kind == SL_MV_IQ4XS_P;
}

/* Lane k of a K-quant group (kgroup): its integer sums v (and s, the mins', Q4_K/Q5_K), 0 when
 * the lane is off. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(klane)(const char *wp, const char *xp, int m, const char *wq, int pair, int kind,
                    int k, __m256i *v, __m256i *s)
{
    const size_t wb = SL_MV_SUFFIX(k_bytes)(kind);
    const char *w = SL_MV_SUFFIX(lane_at)(wp, wq, k, wb, pair);
    const char *x = SL_MV_SUFFIX(lane_at)(xp, xp, k, sizeof(sl_block_q8_K), pair);
    *s = _mm256_setzero_si256();
    if (!SL_MV_SUFFIX(lane_on)(k, m, pair)) *v = _mm256_setzero_si256();
    else if (kind == SL_MV_K3) *v = SL_MV_SUFFIX(q3k_block)(w, x);
    else if (kind == SL_MV_K2) *v = SL_MV_SUFFIX(q2k_block)(w, x, s);
#if SL_MV_AVX512
    else if (kind == SL_MV_K6) *v = SL_MV_SUFFIX(q6k_block512)(w, x);
#else
    else if (kind == SL_MV_K6) *v = SL_MV_SUFFIX(q6k_block)(w, x);
#endif
    else if (kind == SL_MV_IQ4XS) *v = SL_MV_SUFFIX(iq4xs_block)(w, x);
#if SL_MV_AVX512
    else if (kind == SL_MV_IQ4XS_P) *v = SL_MV_SUFFIX(iq4xs_block_p)(w, x);
#endif
#if SL_MV_AVX512
    else *v = SL_MV_SUFFIX(k45_block512)(w, x, kind == SL_MV_K5, s);
#else
    else *v = SL_MV_SUFFIX(k45_block)(w, x, kind == SL_MV_K5, s);
#endif
}

/* The terms of a group of K-quant super-blocks (lane_on: one row's at wp or two rows' at wp
 * and wq), as the reference forms them (sl__mv_term_k / sl__mv_term_d): a = (float)isum *
 * (d * dx), minus b = (float)summ * (dmin * dx) for Q4_K/Q5_K, each a separate rounding,
 * eight at a time. Other lanes are 0 (their scales are); no block past the group is read. */
static inline __attribute__((always_inline)) __m256
SL_MV_SUFFIX(kgroup)(const char *wp, const char *xp, int m, const char *wq, int pair,
                     const float *hx, int kind)
{
    const size_t wb = SL_MV_SUFFIX(k_bytes)(kind);
    const size_t xb = sizeof(sl_block_q8_K);
    __m256i v[8];
    __m256i s[8];
    if (pair == 2) {
        /* four rows' blocks: unrolled, their addresses are constants off wp, wq (measured:
         * 8% less time for 1024 x 512 Q4_K; two-row and one-row groups measured no gain) */
#pragma clang loop unroll(full)
        for (int k = 0; k < 8; k++) SL_MV_SUFFIX(klane)(wp, xp, m, wq, pair, kind, k, &v[k], &s[k]);
    } else {
        for (int k = 0; k < 8; k++) SL_MV_SUFFIX(klane)(wp, xp, m, wq, pair, kind, k, &v[k], &s[k]);
    }
    const int n = pair ? 8 : m; /* lanes that may be live, for the sum trees */
    const __m256 dx = SL_MV_SUFFIX(x_scales)(hx, xp, xb, m, pair, 1);
    const __m256 isum = _mm256_cvtepi32_ps(SL_MV_SUFFIX(hsum8x8_m)(v, n));
    const size_t dofs = SL_MV_SUFFIX(k_dofs)(kind), mofs = SL_MV_SUFFIX(k_mofs)(kind);
    const __m256 dd =
        _mm256_mul_ps(SL_MV_SUFFIX(load_halves)(wp + dofs, wq + dofs, wb, m, pair), dx);
    const __m256 a = _mm256_mul_ps(isum, dd);
    if (SL_MV_SUFFIX(k_no_min)(kind)) return a;
    const __m256 dmd =
        _mm256_mul_ps(SL_MV_SUFFIX(load_halves)(wp + mofs, wq + mofs, wb, m, pair), dx);
    const __m256 summ = _mm256_cvtepi32_ps(SL_MV_SUFFIX(hsum8x8_m)(s, n));
    return _mm256_sub_ps(a, _mm256_mul_ps(summ, dmd));
}

/* Super-blocks [b0, b1) one at a time into lane[b % 8] (column-listed runs start anywhere):
 * the same integer sums, the reference's scalar term. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(krange)(const void *w, const void *xq, int64_t b0, int64_t b1, float *lane,
                     int kind)
{
    const int64_t wbytes = (int64_t)SL_MV_SUFFIX(k_bytes)(kind);
    for (int64_t b = b0; b < b1; b++) {
        const char *wp = (const char *)w + b * wbytes;
        const char *xp = (const char *)xq + b * (int64_t)sizeof(sl_block_q8_K);
        float dx;
        memcpy(&dx, xp, sizeof dx);
        uint16_t d, dmin;
        memcpy(&d, wp + SL_MV_SUFFIX(k_dofs)(kind), 2);
        memcpy(&dmin, wp + SL_MV_SUFFIX(k_mofs)(kind), 2);
        if (SL_MV_SUFFIX(k_no_min)(kind)) {
            const int32_t isum = SL_MV_SUFFIX(hsum_i32)(
                kind == SL_MV_K6   ? SL_MV_SUFFIX(q6k_block)(wp, xp)
                : kind == SL_MV_K3 ? SL_MV_SUFFIX(q3k_block)(wp, xp)
                                   : SL_MV_SUFFIX(iq4xs_block)(wp, xp));
            lane[b % 8] += sl__mv_term_d(isum, _cvtsh_ss(d) * dx);
        } else {
            __m256i s;
            const __m256i v = kind == SL_MV_K2
                                  ? SL_MV_SUFFIX(q2k_block)(wp, xp, &s)
                                  : SL_MV_SUFFIX(k45_block)(wp, xp, kind == SL_MV_K5, &s);
            const int32_t isum = SL_MV_SUFFIX(hsum_i32)(v);
            lane[b % 8] += sl__mv_term_k(isum, _cvtsh_ss(d) * dx, SL_MV_SUFFIX(hsum_i32)(s),
                                         _cvtsh_ss(dmin) * dx);
        }
    }
}

#define SL_MV_KQUANT(NAME, KIND, WBYTES)                                                         \
    static inline __attribute__((always_inline)) __m256 SL_MV_SUFFIX(group_##NAME)(              \
        const char *wp, const char *xp, int m, const float *hx)                                  \
    {                                                                                            \
        SL_MV_CONST_M(SL_MV_SUFFIX(kgroup), m, wp, 0, hx, KIND)                                  \
    }                                                                                            \
    static __m256 SL_MV_SUFFIX(pair_##NAME)(const char *wp, const char *xp, int m,               \
                                            const char *wq, const float *hx)                     \
    {                                                                                            \
        SL_MV_CONST_M4(SL_MV_SUFFIX(kgroup), m, wq, 1, hx, KIND)                                 \
    }                                                                                            \
    static void SL_MV_SUFFIX(range_##NAME)(const sl__mv_type *t, const void *w, const void *xq, \
                                           int64_t b0, int64_t b1, float *lane)                 \
    {                                                                                            \
        (void)t;                                                                                 \
        SL_MV_SUFFIX(krange)(w, xq, b0, b1, lane, KIND);                                         \
    }                                                                                            \
    static __m256 SL_MV_SUFFIX(quad_##NAME)(const char *wp, const char *xp, int m,               \
                                            const char *wq, const float *hx)                     \
    {                                                                                            \
        if (m <= 1) return SL_MV_SUFFIX(kgroup)(wp, xp, 1, wq, 2, hx, KIND);                     \
        return SL_MV_SUFFIX(kgroup)(wp, xp, 2, wq, 2, hx, KIND);                                 \
    }                                                                                            \
    SL_MV_ROWS(NAME, WBYTES, sizeof(sl_block_q8_K), 1, SL_MV_QUAD)

SL_MV_KQUANT(q2_K, SL_MV_K2, sizeof(sl_block_q2_K))
SL_MV_KQUANT(q3_K, SL_MV_K3, sizeof(sl_block_q3_K))
SL_MV_KQUANT(q4_K, SL_MV_K4, sizeof(sl_block_q4_K))
SL_MV_KQUANT(q5_K, SL_MV_K5, sizeof(sl_block_q5_K))
SL_MV_KQUANT(q6_K, SL_MV_K6, sizeof(sl_block_q6_K))
SL_MV_KQUANT(iq4_xs, SL_MV_IQ4XS, sizeof(sl_block_iq4_xs))

#if SL_MV_AVX512
/* IQ4_XS rows on regrouped activations (iq4xs_block_p): the group, pair and quad forms of
 * SL_MV_KQUANT with kind IQ4XS_P, the float work op for op the same, so the bits are
 * rows_iq4_xs's. rows_iq4_xs_vnni regroups x once per call (rows of up to SL_MV_XP_MAX
 * super-blocks: 64 x 292 bytes of stack) and falls back to rows_iq4_xs for longer rows. */
enum { SL_MV_XP_MAX = 64 };
static inline __attribute__((always_inline)) __m256 SL_MV_SUFFIX(group_iq4_xs_p)(
    const char *wp, const char *xp, int m, const float *hx)
{
    SL_MV_CONST_M(SL_MV_SUFFIX(kgroup), m, wp, 0, hx, SL_MV_IQ4XS_P)
}
static __m256 SL_MV_SUFFIX(pair_iq4_xs_p)(const char *wp, const char *xp, int m, const char *wq,
                                          const float *hx)
{
    SL_MV_CONST_M4(SL_MV_SUFFIX(kgroup), m, wq, 1, hx, SL_MV_IQ4XS_P)
}
static __m256 SL_MV_SUFFIX(quad_iq4_xs_p)(const char *wp, const char *xp, int m, const char *wq,
                                          const float *hx)
{
    if (m <= 1) return SL_MV_SUFFIX(kgroup)(wp, xp, 1, wq, 2, hx, SL_MV_IQ4XS_P);
    return SL_MV_SUFFIX(kgroup)(wp, xp, 2, wq, 2, hx, SL_MV_IQ4XS_P);
}
SL_MV_ROWS(iq4_xs_p, sizeof(sl_block_iq4_xs), sizeof(sl_block_q8_K), 1, SL_MV_QUAD)

static void SL_MV_SUFFIX(rows_iq4_xs_vnni)(const void *w, size_t wrb, const void *xq, int64_t nb,
                                           int64_t r0, int64_t r1, float *y)
{
    if (nb > SL_MV_XP_MAX) {
        SL_MV_SUFFIX(rows_iq4_xs)(w, wrb, xq, nb, r0, r1, y);
        return;
    }
    _Alignas(64) char xp[SL_MV_XP_MAX * sizeof(sl_block_q8_K)];
    SL_MV_SUFFIX(iq4xs_xperm)(xq, nb, xp);
    SL_MV_SUFFIX(rows_iq4_xs_p)(w, wrb, xp, nb, r0, r1, y);
}
#endif

#undef SL_MV_KQUANT
#undef SL_MV_ROWS
#undef SL_MV_QUAD
#undef SL_MV_NO_QUAD
#undef SL_MV_CONST_M
#undef SL_MV_CONST_M4
