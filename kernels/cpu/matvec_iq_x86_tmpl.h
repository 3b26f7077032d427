/* kernels/cpu/matvec_iq_x86_tmpl.h: range and batch kernels of the codebook types IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (included by matvec_x86_tmpl.h under SL_MV_SUFFIX).
 *
 * Each block is kernels/ref/matvec_iq.c's integer form, built 32 values at a time in a register:
 * four 8-byte codebook entries (IQ3: eight 4-byte ones) loaded by index as the magnitudes, and
 * the signs as +-1 bytes (four 8-byte entries of a 128-entry ksigns table, or sign bytes
 * expanded by iq_signs) applied to the activations with vpsignb (IQ1: v = 8 g + delta);
 * then the byte dot with the Q8_K activations signed by v (maddubs, then madd by the group's
 * odd scale: one instruction fewer than a VNNI dot and a multiply), summed exactly in int32.
 * The decode (range) kernels on AVX-512 take 64 values a step instead (the *_sums forms:
 * gathers, sign masks and one vpermw of scales a step, since the 256-bit form spends its time
 * on port-5 inserts and broadcasts); IQ1's decode also splits off the deltas (IQ1_M's against
 * the Q8_K8 activation's sums of 8). The block's term is the reference's expression,
 * (float)isum * (factor * d * x.d), so the sums are the reference's bits. */

/* byte 8 i + j: -1 where bit j of byte i of s is set, else +1 */
static inline __m256i SL_MV_SUFFIX(iq_signs)(uint32_t s)
{
#if SL_MV_AVX512
    /* the 32 bits as a mask register, its bytes set where they are set (vpmovm2b) */
    return _mm256_or_si256(_mm256_movm_epi8((__mmask32)s), _mm256_set1_epi8(1));
#else
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                         2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), idx);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_or_si256(on, _mm256_set1_epi8(1));
#endif
}

/* ksigns as +-1 bytes: entry i is byte j = -1 where bit j of ggml's ksigns_iq2xs[i] is set
 * (bits 0..6 of i, bit 7 their parity), else +1: four of them sign 32 activations at once */
#ifndef SL_MV_IQ_SIGN64
#define SL_MV_IQ_SIGN64
#define SL_IQ_SB_(i, j) (((i) >> (j)) & 1 ? 0xFFull : 0x01ull)
#define SL_IQ_PAR_(i) (((i) ^ (i) >> 1 ^ (i) >> 2 ^ (i) >> 3 ^ (i) >> 4 ^ (i) >> 5 ^ (i) >> 6) & 1)
#define SL_IQ_E_(i)                                                                              \
    (SL_IQ_SB_(i, 0) | SL_IQ_SB_(i, 1) << 8 | SL_IQ_SB_(i, 2) << 16 | SL_IQ_SB_(i, 3) << 24 |     \
     SL_IQ_SB_(i, 4) << 32 | SL_IQ_SB_(i, 5) << 40 | SL_IQ_SB_(i, 6) << 48 |                     \
     (SL_IQ_PAR_(i) ? 0xFFull : 0x01ull) << 56)
#define SL_IQ_E4_(i) SL_IQ_E_(i), SL_IQ_E_((i) + 1), SL_IQ_E_((i) + 2), SL_IQ_E_((i) + 3)
#define SL_IQ_E16_(i) SL_IQ_E4_(i), SL_IQ_E4_((i) + 4), SL_IQ_E4_((i) + 8), SL_IQ_E4_((i) + 12)
static const uint64_t sl_mv_iq_sign64[128] = {
    SL_IQ_E16_(0),  SL_IQ_E16_(16), SL_IQ_E16_(32), SL_IQ_E16_(48),
    SL_IQ_E16_(64), SL_IQ_E16_(80), SL_IQ_E16_(96), SL_IQ_E16_(112)};
#undef SL_IQ_SB_
#undef SL_IQ_PAR_
#undef SL_IQ_E_
#undef SL_IQ_E4_
#undef SL_IQ_E16_
#endif

static inline uint32_t SL_MV_SUFFIX(iq_le32)(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint16_t SL_MV_SUFFIX(iq_le16)(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

#define SL_IQ_G4(a, b, c, d)                                                                    \
    _mm256_set_epi64x((long long)(d), (long long)(c), (long long)(b), (long long)(a))
/* four ksigns indices (7 bits each from bit 0 of aux) as 32 +-1 bytes */
#define SL_IQ_KS4(aux)                                                                          \
    SL_IQ_G4(sl_mv_iq_sign64[(aux) & 127], sl_mv_iq_sign64[((aux) >> 7) & 127],                 \
             sl_mv_iq_sign64[((aux) >> 14) & 127], sl_mv_iq_sign64[((aux) >> 21) & 127])

/* Values 32 ib .. 32 ib + 31 of a block as magnitudes *a (unsigned bytes) and a sign carrier *sg
 * (a byte whose sign is the value's: +-1 bytes, or the value itself), their group scales into
 * *sc as int16 (per pair of the byte dot's int16 sums: 8 pairs per 16 values). */

/* sum over each 4 adjacent values of v * x times their group scale, 8 int32: maddubs of |v| and
 * x signed by v (|v| <= 62, |x| <= 127: no int16 saturation), then madd by the scales */
static inline __m256i SL_MV_SUFFIX(iq_sdot)(__m256i a, __m256i sg, __m256i x, __m256i sc)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(x, sg)), sc);
}
#if SL_MV_AVX512
/* 4 qword entries of a table by one gather; ix: 4 int32 indices */
static inline __m256i SL_MV_SUFFIX(iq_g4x)(const uint64_t *table, __m128i ix)
{
    return _mm256_i32gather_epi64((const long long *)table, ix, 8);
}
/* 4 index bytes at q as int32 */
static inline __m128i SL_MV_SUFFIX(iq_b4)(const uint8_t *q)
{
    return _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)SL_MV_SUFFIX(iq_le32)(q)));
}
#endif

/* The types with a scale per 16 build a block's 16 scales once (name##_S): the even ones (the
 * first 16 of each group of 32) as int16 in the low 128-bit lane, the odd ones in the high
 * lane, so that a group's pair is one vpshufb (iq_sc16) instead of two broadcasts and an insert
 * (ggml's layout). The types with a scale per 32 set theirs per group (their S is unused). */
static inline __m256i SL_MV_SUFFIX(iq_sc16)(__m256i S, int ib)
{
    return _mm256_shuffle_epi8(S, _mm256_set1_epi16((short)(((2 * ib + 1) << 8) | (2 * ib))));
}
/* 8 bytes of nibble pairs (byte k: scale 2k low, 2k + 1 high) as 2 s + 1 */
static inline __m256i SL_MV_SUFFIX(iq_S_nib)(const uint8_t *q)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)q), m4 = _mm_set1_epi8(15);
    const __m128i v = _mm_unpacklo_epi64(_mm_and_si128(b, m4),
                                         _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    return _mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(v, v), _mm_set1_epi8(1)));
}
static inline __m256i SL_MV_SUFFIX(iq2_xs_S)(const uint8_t *p)
{
    return SL_MV_SUFFIX(iq_S_nib)(p + 66);
}
static inline __m256i SL_MV_SUFFIX(iq2_s_S)(const uint8_t *p)
{
    return SL_MV_SUFFIX(iq_S_nib)(p + 74);
}
/* IQ1_M: scale 2 ib of word ib / 2 at bit 6 (ib % 2), scale 2 ib + 1 three bits up */
static inline __m256i SL_MV_SUFFIX(iq1_m_S)(const uint8_t *p)
{
    const __m128i w = _mm_loadl_epi64((const __m128i *)(p + 48));
    const __m256i d = _mm256_cvtepu16_epi32(_mm_unpacklo_epi16(w, w));
    const __m256i m7 = _mm256_set1_epi32(7);
    const __m256i e =
        _mm256_and_si256(_mm256_srlv_epi32(d, _mm256_setr_epi32(0, 6, 0, 6, 0, 6, 0, 6)), m7);
    const __m256i o =
        _mm256_and_si256(_mm256_srlv_epi32(d, _mm256_setr_epi32(3, 9, 3, 9, 3, 9, 3, 9)), m7);
    /* per lane: 4 even words, then 4 odd; qwords reordered to even 0..7 | odd 0..7 */
    const __m256i v = _mm256_permute4x64_epi64(_mm256_packus_epi32(e, o), 0xD8);
    return _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1));
}
static inline __m256i SL_MV_SUFFIX(iq_S_none)(const uint8_t *p)
{
    (void)p;
    return _mm256_setzero_si256();
}
static inline __m256i SL_MV_SUFFIX(iq2_xxs_S)(const uint8_t *p)
{
    return SL_MV_SUFFIX(iq_S_none)(p);
}
static inline __m256i SL_MV_SUFFIX(iq3_xxs_S)(const uint8_t *p)
{
    return SL_MV_SUFFIX(iq_S_none)(p);
}
static inline __m256i SL_MV_SUFFIX(iq3_s_S)(const uint8_t *p) { return SL_MV_SUFFIX(iq_S_none)(p); }
static inline __m256i SL_MV_SUFFIX(iq1_s_S)(const uint8_t *p) { return SL_MV_SUFFIX(iq_S_none)(p); }

static inline void SL_MV_SUFFIX(iq2_xxs_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                            __m256i *sg, __m256i *sc)
{
    (void)S; /* a scale per 32: set per group */
    const uint8_t *q = p + 2 + 8 * ib;
    const uint32_t a1 = SL_MV_SUFFIX(iq_le32)(q + 4);
    /* the grid indices as byte loads (load ports, not shifts on the vector ports; two
     * gathers ran no faster) */
    *a = SL_IQ_G4(sl_iq2xxs_grid[q[0]], sl_iq2xxs_grid[q[1]], sl_iq2xxs_grid[q[2]],
                  sl_iq2xxs_grid[q[3]]);
    *sg = SL_IQ_KS4(a1);
    *sc = _mm256_set1_epi16((short)(2 * (a1 >> 28) + 1));
}

static inline void SL_MV_SUFFIX(iq2_xs_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                           __m256i *sg, __m256i *sc)
{
#if SL_MV_AVX512
    /* the 4 grid and 4 sign entries by two gathers */
    const __m128i q = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * ib)));
    *a = _mm256_i32gather_epi64((const long long *)sl_iq2xs_grid,
                                _mm_and_si128(q, _mm_set1_epi32(511)), 8);
    *sg = _mm256_i32gather_epi64((const long long *)sl_mv_iq_sign64, _mm_srli_epi32(q, 9), 8);
#else
    uint16_t q[4];
    memcpy(q, p + 2 + 8 * ib, 8);
    *a = SL_IQ_G4(sl_iq2xs_grid[q[0] & 511], sl_iq2xs_grid[q[1] & 511],
                  sl_iq2xs_grid[q[2] & 511], sl_iq2xs_grid[q[3] & 511]);
    *sg = SL_IQ_G4(sl_mv_iq_sign64[q[0] >> 9], sl_mv_iq_sign64[q[1] >> 9],
                   sl_mv_iq_sign64[q[2] >> 9], sl_mv_iq_sign64[q[3] >> 9]);
#endif
    *sc = SL_MV_SUFFIX(iq_sc16)(S, ib);
}

static inline void SL_MV_SUFFIX(iq2_s_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                          __m256i *sg, __m256i *sc)
{
    const uint8_t *qs = p + 2 + 4 * ib;
    const unsigned h = p[66 + ib];
#if SL_MV_AVX512
    /* the indices in a vector and one gather (four scalar index builds and inserts before) */
    *a = SL_MV_SUFFIX(iq_g4x)(sl_iq2s_grid,
                              _mm_or_si128(SL_MV_SUFFIX(iq_b4)(qs),
                                           _mm_and_si128(_mm_sllv_epi32(_mm_set1_epi32((int)h),
                                                                        _mm_setr_epi32(8, 6, 4, 2)),
                                                         _mm_set1_epi32(0x300))));
#else
    *a = SL_IQ_G4(
        sl_iq2s_grid[qs[0] | ((h << 8) & 0x300u)], sl_iq2s_grid[qs[1] | ((h << 6) & 0x300u)],
        sl_iq2s_grid[qs[2] | ((h << 4) & 0x300u)], sl_iq2s_grid[qs[3] | ((h << 2) & 0x300u)]);
#endif
    *sg = SL_MV_SUFFIX(iq_signs)(SL_MV_SUFFIX(iq_le32)(p + 34 + 4 * ib));
    *sc = SL_MV_SUFFIX(iq_sc16)(S, ib);
}

static inline void SL_MV_SUFFIX(iq3_xxs_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                            __m256i *sg, __m256i *sc)
{
    (void)S; /* a scale per 32: set per group */
    const uint8_t *qs = p + 2 + 8 * ib;
    const uint32_t aux = SL_MV_SUFFIX(iq_le32)(p + 66 + 4 * ib);
#if SL_MV_AVX512
    /* one gather of the 8 grid dwords (eight inserts were port-5 bound; AVX2 builds keep them:
     * gathers are slow on the AMD cores without AVX-512) */
    *a = _mm256_i32gather_epi32((const int *)sl_iq3xxs_grid,
                                _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs)), 4);
#else
    *a = _mm256_setr_epi32(
        (int)sl_iq3xxs_grid[qs[0]], (int)sl_iq3xxs_grid[qs[1]], (int)sl_iq3xxs_grid[qs[2]],
        (int)sl_iq3xxs_grid[qs[3]], (int)sl_iq3xxs_grid[qs[4]], (int)sl_iq3xxs_grid[qs[5]],
        (int)sl_iq3xxs_grid[qs[6]], (int)sl_iq3xxs_grid[qs[7]]);
#endif
    *sg = SL_IQ_KS4(aux);
    *sc = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
}

static inline void SL_MV_SUFFIX(iq3_s_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                          __m256i *sg, __m256i *sc)
{
    (void)S; /* a scale per 32: set per group */
    const uint8_t *qs = p + 2 + 8 * ib;
    const unsigned h = p[66 + ib];
#if SL_MV_AVX512
    const __m256i ix = _mm256_or_si256(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs)),
        _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32((int)h),
                                           _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                         _mm256_set1_epi32(256)));
    *a = _mm256_i32gather_epi32((const int *)sl_iq3s_grid, ix, 4);
#else
    *a = _mm256_setr_epi32(
        (int)sl_iq3s_grid[qs[0] | ((h << 8) & 256u)], (int)sl_iq3s_grid[qs[1] | ((h << 7) & 256u)],
        (int)sl_iq3s_grid[qs[2] | ((h << 6) & 256u)], (int)sl_iq3s_grid[qs[3] | ((h << 5) & 256u)],
        (int)sl_iq3s_grid[qs[4] | ((h << 4) & 256u)], (int)sl_iq3s_grid[qs[5] | ((h << 3) & 256u)],
        (int)sl_iq3s_grid[qs[6] | ((h << 2) & 256u)], (int)sl_iq3s_grid[qs[7] | ((h << 1) & 256u)]);
#endif
    *sg = SL_MV_SUFFIX(iq_signs)(SL_MV_SUFFIX(iq_le32)(p + 74 + 4 * ib));
    *sc = _mm256_set1_epi16((short)(1 + 2 * ((p[106 + ib / 2] >> (4 * (ib % 2))) & 15)));
}

/* IQ1: 8 g + delta, g the grid's -1 / 0 / +1 bytes, delta +-1 per 8 bytes (dl) */
static inline __m256i SL_MV_SUFFIX(iq1_values)(__m256i g, __m256i dl)
{
    const __m256i g2 = _mm256_add_epi8(g, g), g4 = _mm256_add_epi8(g2, g2);
    return _mm256_add_epi8(_mm256_add_epi8(g4, g4), dl);
}

/* the four grid entries (-1 / 0 / +1 bytes) of IQ1_S group ib; qh its high-bits word */
static inline __m256i SL_MV_SUFFIX(iq1_s_grid)(const uint8_t *p, int ib, unsigned qh)
{
    const uint8_t *qs = p + 2 + 4 * ib;
#if SL_MV_AVX512
    return SL_MV_SUFFIX(iq_g4x)(
        sl_iq1s_grid,
        _mm_or_si128(SL_MV_SUFFIX(iq_b4)(qs),
                     _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)(qh << 8)),
                                                  _mm_setr_epi32(0, 3, 6, 9)),
                                   _mm_set1_epi32(0x700))));
#else
    return SL_IQ_G4(sl_iq1s_grid[qs[0] | ((qh << 8) & 0x700u)],
                    sl_iq1s_grid[qs[1] | ((qh << 5) & 0x700u)],
                    sl_iq1s_grid[qs[2] | ((qh << 2) & 0x700u)],
                    sl_iq1s_grid[qs[3] | ((qh >> 1) & 0x700u)]);
#endif
}

static inline void SL_MV_SUFFIX(iq1_s_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                          __m256i *sg, __m256i *sc)
{
    (void)S; /* a scale per 32: set per group */
    const unsigned qh = SL_MV_SUFFIX(iq_le16)(p + 34 + 2 * ib);
    const __m256i g = SL_MV_SUFFIX(iq1_s_grid)(p, ib, qh);
    *sg = SL_MV_SUFFIX(iq1_values)(g, _mm256_set1_epi8(qh & 0x8000u ? -1 : 1));
    *a = _mm256_sign_epi8(*sg, *sg);
    *sc = _mm256_set1_epi16((short)(2 * ((qh >> 12) & 7) + 1));
}

#if SL_MV_AVX512
/* The sign-carrying types' decode sums on 512 bits, two groups (64 values) a step: the
 * magnitudes by one 8-qword gather, the signs as a 64-bit mask (the ksigns entries' sign
 * bits, by one more gather) negating x (vpmaddubsw takes the magnitudes unsigned), each
 * step's scales one vpermw of the block's: no per-group inserts or broadcasts (the 256-bit
 * form's port-5 work). 8 int32 summing to the isum. */

/* 2 s + 1 for the 8 groups' 4-bit s at bit 28 of the odd dwords of IQ2_XXS's 64 bytes q,
 * in every word of each odd dword (words 4 ib + 2, 4 ib + 3 for group ib) */
static inline __m512i SL_MV_SUFFIX(iq2_xxs_sc)(const uint8_t *q)
{
    const __m512i s = _mm512_srli_epi32(_mm512_loadu_si512(q), 28);
    const __m512i t = _mm512_or_si512(_mm512_add_epi32(s, s), _mm512_set1_epi32(1));
    return _mm512_or_si512(t, _mm512_slli_epi32(t, 16));
}

/* words 4 ib + 2 of sc for groups 2 j (lanes 0-1) and 2 j + 1 (lanes 2-3) */
static inline __m512i SL_MV_SUFFIX(iq_sc_pair)(__m512i sc, int j, int stride, int at)
{
    const __m512i lo = _mm512_set1_epi16((short)(stride * 2 * j + at));
    const __m512i hi = _mm512_set1_epi16((short)(stride * (2 * j + 1) + at));
    return _mm512_permutexvar_epi16(_mm512_mask_blend_epi64(0xF0, lo, hi), sc);
}

/* sc's words 4 j .. 4 j + 3 (the scales per 16 of groups 2 j, 2 j + 1), word 4 j + l in every
 * word of 128-bit lane l */
static inline __m512i SL_MV_SUFFIX(iq_sc_lanes)(__m512i sc, int j)
{
    return _mm512_permutexvar_epi16(
        _mm512_add_epi16(_mm512_set1_epi16((short)(4 * j)),
                         _mm512_setr_epi64(0, 0, 0x0001000100010001ll, 0x0001000100010001ll,
                                           0x0002000200020002ll, 0x0002000200020002ll,
                                           0x0003000300030003ll, 0x0003000300030003ll)),
        sc);
}

/* 16 scales per 16 as 2 s + 1, s the nibbles of the 8 bytes at q (k: byte k / 2, low first) */
static inline __m512i SL_MV_SUFFIX(iq_sc_nib16)(const uint8_t *q)
{
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)q));
    const __m128i lo = _mm_and_si128(w, _mm_set1_epi16(15)), hi = _mm_srli_epi16(w, 4);
    const __m256i s = _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
    return _mm512_castsi256_si512(
        _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1)));
}

/* the sign bits of 8 ksigns entries (7-bit indices, int32) as a mask of 64 values */
static inline __mmask64 SL_MV_SUFFIX(iq_ks_mask)(__m256i si)
{
    return _mm512_movepi8_mask(_mm512_i32gather_epi64(si, (const long long *)sl_mv_iq_sign64, 8));
}

/* one step's term: magnitudes a (unsigned), x negated where neg, scales sc per int16 pair */
static inline __m512i SL_MV_SUFFIX(iq_step)(__m512i acc, __m512i a, __mmask64 neg,
                                            const char *x64, __m512i sc)
{
    const __m512i x = _mm512_loadu_si512(x64);
    return _mm512_dpwssd_epi32(
        acc, _mm512_maddubs_epi16(a, _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x)),
        sc);
}

static inline __m256i SL_MV_SUFFIX(iq_fold)(__m512i acc)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
}

static inline __m256i SL_MV_SUFFIX(iq2_xs_sums)(const uint8_t *p, const char *xp)
{
    const __m512i sc = SL_MV_SUFFIX(iq_sc_nib16)(p + 66);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) { /* 8 words: 9-bit grid index | 7-bit ksigns << 9 */
        const __m256i q = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 + 16 * j)));
        const __m512i a = _mm512_i32gather_epi64(_mm256_and_si256(q, _mm256_set1_epi32(511)),
                                                 (const long long *)sl_iq2xs_grid, 8);
        acc = SL_MV_SUFFIX(iq_step)(acc, a, SL_MV_SUFFIX(iq_ks_mask)(_mm256_srli_epi32(q, 9)),
                                    xp + 4 + 64 * j, SL_MV_SUFFIX(iq_sc_lanes)(sc, j));
    }
    return SL_MV_SUFFIX(iq_fold)(acc);
}

static inline __m256i SL_MV_SUFFIX(iq2_s_sums)(const uint8_t *p, const char *xp)
{
    const __m512i sc = SL_MV_SUFFIX(iq_sc_nib16)(p + 74);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        /* grid index k: qs byte | 2 bits at 2 k of qh's two bytes, << 8 */
        const __m256i ix = _mm256_or_si256(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * j))),
            _mm256_slli_epi32(
                _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(SL_MV_SUFFIX(iq_le16)(
                                                       p + 66 + 2 * j)),
                                                   _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                 _mm256_set1_epi32(3)),
                8));
        uint64_t sg;
        memcpy(&sg, p + 34 + 8 * j, 8); /* one sign bit a value */
        acc = SL_MV_SUFFIX(iq_step)(
            acc, _mm512_i32gather_epi64(ix, (const long long *)sl_iq2s_grid, 8), (__mmask64)sg,
            xp + 4 + 64 * j, SL_MV_SUFFIX(iq_sc_lanes)(sc, j));
    }
    return SL_MV_SUFFIX(iq_fold)(acc);
}

static inline __m256i SL_MV_SUFFIX(iq3_xxs_sums)(const uint8_t *p, const char *xp)
{
    /* 2 s + 1 in the low word of dword ib, s at bit 28 of the group's sign-and-scale word */
    const __m256i s = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(p + 66)), 28);
    const __m512i sc = _mm512_castsi256_si512(_mm256_or_si256(_mm256_add_epi32(s, s),
                                                              _mm256_set1_epi32(1)));
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        const __m512i a = _mm512_i32gather_epi32(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2 + 16 * j))),
            (const int *)sl_iq3xxs_grid, 4);
        /* the 4 x 7 sign fields of the two groups' words */
        const __m256i si = _mm256_and_si256(
            _mm256_srlv_epi32(
                _mm256_permutevar8x32_epi32(
                    _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(p + 66 + 8 * j))),
                    _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
                _mm256_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21)),
            _mm256_set1_epi32(127));
        acc = SL_MV_SUFFIX(iq_step)(acc, a, SL_MV_SUFFIX(iq_ks_mask)(si), xp + 4 + 64 * j,
                                    SL_MV_SUFFIX(iq_sc_pair)(sc, j, 2, 0));
    }
    return SL_MV_SUFFIX(iq_fold)(acc);
}

static inline __m256i SL_MV_SUFFIX(iq3_s_sums)(const uint8_t *p, const char *xp)
{
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        /* grid index k: qs byte | bit k of qh's two bytes, << 8 */
        const __m512i ix = _mm512_or_si512(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2 + 16 * j))),
            _mm512_slli_epi32(
                _mm512_and_si512(
                    _mm512_srlv_epi32(_mm512_set1_epi32(SL_MV_SUFFIX(iq_le16)(p + 66 + 2 * j)),
                                      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                        12, 13, 14, 15)),
                    _mm512_set1_epi32(1)),
                8));
        uint64_t sg;
        memcpy(&sg, p + 74 + 8 * j, 8);
        /* scales per 32: lanes 0-1 the low nibble of byte 106 + j, 2-3 the high, as 2 s + 1 */
        const __m512i n = _mm512_and_si512(
            _mm512_srlv_epi16(_mm512_set1_epi16(p[106 + j]),
                              _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1)),
            _mm512_set1_epi16(15));
        acc = SL_MV_SUFFIX(iq_step)(
            acc, _mm512_i32gather_epi32(ix, (const int *)sl_iq3s_grid, 4), (__mmask64)sg,
            xp + 4 + 64 * j, _mm512_add_epi16(_mm512_add_epi16(n, n), _mm512_set1_epi16(1)));
    }
    return SL_MV_SUFFIX(iq_fold)(acc);
}

static inline __m256i SL_MV_SUFFIX(iq2_xxs_sums)(const uint8_t *p, const char *xp)
{
    const uint8_t *q = p + 2;
    const __m512i sc = SL_MV_SUFFIX(iq2_xxs_sc)(q);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        /* groups 2 j, 2 j + 1: 4 grid bytes, 4 x 7 sign bits (+ s) each */
        const __m128i b = _mm_loadu_si128((const __m128i *)(q + 16 * j));
        const __m256i gi = _mm256_cvtepu8_epi32(
            _mm_shuffle_epi8(b, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1,
                                              -1)));
        const __m256i si = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_permutevar8x32_epi32(_mm256_castsi128_si256(b),
                                                          _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3,
                                                                            3)),
                              _mm256_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21)),
            _mm256_set1_epi32(127));
        acc = SL_MV_SUFFIX(iq_step)(
            acc, _mm512_i32gather_epi64(gi, (const long long *)sl_iq2xxs_grid, 8),
            SL_MV_SUFFIX(iq_ks_mask)(si), xp + 4 + 64 * j, SL_MV_SUFFIX(iq_sc_pair)(sc, j, 4, 2));
    }
    return SL_MV_SUFFIX(iq_fold)(acc);
}
#endif

/* IQ1_S's block sums for the decode kernel in ggml's form of the same integer: with v = 8 g +
 * delta, sum_g sc_g sum v x = 8 sum_g sc_g sum g x + sum_g sc_g delta_g (x's sum over the
 * group: two of Q8_K's exact 16-element sums), so the values need no 8 g + delta per group
 * (its three adds and an abs), only |g| and x signed by g. 8 int32 whose sum is the isum. */
#if SL_MV_AVX512
/* On 512 bits, as IQ1_M's: two groups a step, the grid as u = g + 1 (sum g x = sum u x -
 * sum x, so a group's term is 8 sc sum u x + sc (delta - 8) sum x), each step's scales
 * (lanes 0-1: group 2 j's, 2-3: 2 j + 1's) from qh's two words by shifts, no shuffle. */
static inline __m256i SL_MV_SUFFIX(iq1_s_sums)(const uint8_t *p, const char *xp)
{
    const __m512i one8 = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        const uint32_t qh = SL_MV_SUFFIX(iq_le32)(p + 34 + 4 * j); /* groups 2 j, 2 j + 1 */
        const __m256i ix = _mm256_or_si256(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * j))),
            _mm256_and_si256(_mm256_slli_epi32(_mm256_srlv_epi32(_mm256_set1_epi32((int)qh),
                                                                 _mm256_setr_epi32(
                                                                     0, 3, 6, 9, 16, 19, 22, 25)),
                                               8),
                             _mm256_set1_epi32(0x700)));
        const __m512i u = _mm512_add_epi8(
            _mm512_i32gather_epi64(ix, (const long long *)sl_iq1s_grid, 8), one8);
        /* 2 s + 1 in both words of each dword: s at bit 12 (lanes 0-1) or 28 (lanes 2-3) */
        const __m512i s = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_set1_epi32((int)qh),
                              _mm512_inserti64x4(_mm512_set1_epi32(12), _mm256_set1_epi32(28), 1)),
            _mm512_set1_epi32(7));
        const __m512i s2 = _mm512_or_si512(_mm512_add_epi32(s, s), _mm512_set1_epi32(1));
        acc = _mm512_dpwssd_epi32(acc,
                                  _mm512_maddubs_epi16(u, _mm512_loadu_si512(xp + 4 + 64 * j)),
                                  _mm512_or_si512(s2, _mm512_slli_epi32(s2, 16)));
    }
    /* group ib's sc (delta - 8) times its sum of x (Q8_K's 16-element sums 2 ib, 2 ib + 1) */
    const __m256i q = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 34)));
    const __m256i sc = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(q, 12), _mm256_set1_epi32(7)), 1),
        _mm256_set1_epi32(1));
    const __m256i w = _mm256_sub_epi32(
        _mm256_sign_epi32(sc, _mm256_or_si256(_mm256_slli_epi32(q, 16), _mm256_set1_epi32(1))),
        _mm256_slli_epi32(sc, 3));
    const __m256i bs = _mm256_madd_epi16(
        _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K)), _mm256_set1_epi16(1));
    const __m512i a8 = _mm512_slli_epi32(acc, 3);
    return _mm256_add_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(a8), _mm512_extracti64x4_epi64(a8, 1)),
        _mm256_mullo_epi32(w, bs));
}
#else
static inline __m256i SL_MV_SUFFIX(iq1_s_sums)(const uint8_t *p, const char *xp)
{
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = SL_MV_SUFFIX(iq_le16)(p + 34 + 2 * ib);
        const __m256i g = SL_MV_SUFFIX(iq1_s_grid)(p, ib, qh);
        const __m256i x8 = _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * ib));
        acc = _mm256_add_epi32(
            acc, SL_MV_SUFFIX(iq_sdot)(_mm256_sign_epi8(g, g), g, x8,
                                       _mm256_set1_epi16((short)(2 * ((qh >> 12) & 7) + 1))));
    }
    /* the deltas: lane ib gets sc_ib * (+-1) * (bsums 2 ib + 2 ib + 1) */
    const __m256i q = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 34)));
    const __m256i sc = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(q, 12), _mm256_set1_epi32(7)), 1),
        _mm256_set1_epi32(1));
    /* bit 15 of the word as the sign of a nonzero dword */
    const __m256i w =
        _mm256_sign_epi32(sc, _mm256_or_si256(_mm256_slli_epi32(q, 16), _mm256_set1_epi32(1)));
    const __m256i bs = _mm256_madd_epi16(
        _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K)), _mm256_set1_epi16(1));
    return _mm256_add_epi32(_mm256_slli_epi32(acc, 3), _mm256_mullo_epi32(w, bs));
}
#endif

/* the four grid entries (-1 / 0 / +1 bytes) of IQ1_M group ib */
static inline __m256i SL_MV_SUFFIX(iq1_m_grid)(const uint8_t *p, int ib)
{
    const uint8_t *qs = p + 4 * ib;
    const unsigned h0 = p[32 + 2 * ib], h1 = p[33 + 2 * ib];
#if SL_MV_AVX512
    return SL_MV_SUFFIX(iq_g4x)(
        sl_iq1s_grid, _mm_or_si128(SL_MV_SUFFIX(iq_b4)(qs),
                                   _mm_and_si128(_mm_sllv_epi32(_mm_setr_epi32((int)h0, (int)h0,
                                                                               (int)h1, (int)h1),
                                                                _mm_setr_epi32(8, 4, 8, 4)),
                                                 _mm_set1_epi32(0x700))));
#else
    return SL_IQ_G4(sl_iq1s_grid[qs[0] | ((h0 << 8) & 0x700u)],
                    sl_iq1s_grid[qs[1] | ((h0 << 4) & 0x700u)],
                    sl_iq1s_grid[qs[2] | ((h1 << 8) & 0x700u)],
                    sl_iq1s_grid[qs[3] | ((h1 << 4) & 0x700u)]);
#endif
}

static inline void SL_MV_SUFFIX(iq1_m_ib)(const uint8_t *p, int ib, __m256i S, __m256i *a,
                                          __m256i *sg, __m256i *sc)
{
    const unsigned h0 = p[32 + 2 * ib], h1 = p[33 + 2 * ib];
    const __m256i g = SL_MV_SUFFIX(iq1_m_grid)(p, ib);
    const long long one = 0x0101010101010101ll, neg = -1ll;
    const __m256i dl = _mm256_set_epi64x(h1 & 0x80 ? neg : one, h1 & 0x08 ? neg : one,
                                         h0 & 0x80 ? neg : one, h0 & 0x08 ? neg : one);
    *sg = SL_MV_SUFFIX(iq1_values)(g, dl);
    *a = _mm256_sign_epi8(*sg, *sg);
    *sc = SL_MV_SUFFIX(iq_sc16)(S, ib);
}

/* IQ1_M's block sums for the decode kernel, as IQ1_S's: 8 sum_k sc_k sum g x over the groups
 * of 16, plus the deltas' sum_k sc_k (dl_2k s8_2k + dl_2k+1 s8_2k+1) with the activation's
 * sums of 8 (Q8_K8): octet o of the block has scale o / 2 and its delta in byte o / 2 of qh
 * (bit 3 for even o, bit 7 for odd). 8 int32 summing to the isum. */
#if SL_MV_AVX512
/* On 512 bits, two groups (64 values) a step and few shuffles (the 256-bit form was bound by
 * port 5: a scale broadcast a group, the gather's halves, the delta's lane orders):
 * - the grid entries as u = g + 1 (0..2, vpmaddubsw's unsigned side: no sign instructions),
 *   sum g x = sum u x - Q8_K's 16-element sums, taken once a block against the scales;
 * - each step's scales (128-bit lane l: scale 4 j + l) one vpermw of the block's 16;
 * - the deltas one vpermw of scale | qh byte << 8 per octet, negated by a bit test. */
static inline __m256i SL_MV_SUFFIX(iq1_m_sums)(const uint8_t *p, const char *xp)
{
    /* the 16 scales 2 s + 1 in order: s_k at bit 3 (k % 4) of scale word k / 4 */
    const __m256i w = _mm256_shuffle_epi8(
        _mm256_set1_epi64x((long long)(SL_MV_SUFFIX(iq_le32)(p + 48) |
                                       (uint64_t)SL_MV_SUFFIX(iq_le32)(p + 52) << 32)),
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4,
                         5, 6, 7, 6, 7, 6, 7, 6, 7));
    const __m256i s3 = _mm256_and_si256(
        _mm256_srlv_epi16(w, _mm256_setr_epi16(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)),
        _mm256_set1_epi16(7));
    const __m256i sc = _mm256_add_epi16(_mm256_add_epi16(s3, s3), _mm256_set1_epi16(1));
    const __m512i sc5 = _mm512_castsi256_si512(sc), one8 = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        /* index k of groups 8 j .. 8 j + 7: qs | the 3 bits at 4 k of qh's word j, << 8 */
        const __m256i ix = _mm256_or_si256(
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * j))),
            _mm256_and_si256(
                _mm256_slli_epi32(
                    _mm256_srlv_epi32(
                        _mm256_set1_epi32((int)SL_MV_SUFFIX(iq_le32)(p + 32 + 4 * j)),
                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                    8),
                _mm256_set1_epi32(0x700)));
        const __m512i u = _mm512_add_epi8(
            _mm512_i32gather_epi64(ix, (const long long *)sl_iq1s_grid, 8), one8);
        const __m512i x = _mm512_loadu_si512(xp + 4 + 64 * j);
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, x),
                                  SL_MV_SUFFIX(iq_sc_lanes)(sc5, j));
    }
    /* sum_k sc_k (Q8_K's 16-element sum k): the u side's excess */
    const __m256i ex =
        _mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K)));
    /* the deltas: word o = scale o / 2 | qh byte o / 2 << 8, its bit 3 (even o) or 7 (odd o)
     * of the byte set: negated */
    const __m512i sq = _mm512_permutexvar_epi16(
        _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6,
                         5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
        _mm512_castsi256_si512(_mm256_or_si256(
            sc, _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p + 32))),
                                  8))));
    const __mmask32 neg = _mm512_test_epi16_mask(sq, _mm512_set1_epi32((int)0x80000800u));
    const __m512i s16 = _mm512_and_si512(sq, _mm512_set1_epi16(0xFF));
    const __m512i dw = _mm512_mask_sub_epi16(s16, neg, _mm512_setzero_si512(), s16);
    const __m512i t = _mm512_add_epi32(
        _mm512_slli_epi32(acc, 3),
        _mm512_madd_epi16(dw, _mm512_loadu_si512(xp + offsetof(sl_block_q8_K8, sums8))));
    return _mm256_sub_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1)),
        _mm256_slli_epi32(ex, 3));
}
#else
/* The deltas are two madds in the order S's layout gives (iq1_m_S: even scales in the low
 * lane, odd in the high): per vector, octets [0 1 4 5 8 9 12 13 | 2 3 6 7 10 11 14 15], then
 * the same + 16. */
static inline __m256i SL_MV_SUFFIX(iq1_m_sums)(const uint8_t *p, const char *xp)
{
    const __m256i S = SL_MV_SUFFIX(iq1_m_S)(p);
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i g = SL_MV_SUFFIX(iq1_m_grid)(p, ib);
        const __m256i x8 = _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * ib));
        acc = _mm256_add_epi32(acc, SL_MV_SUFFIX(iq_sdot)(_mm256_sign_epi8(g, g), g, x8,
                                                          SL_MV_SUFFIX(iq_sc16)(S, ib)));
    }
    /* qh's bytes even | odd as int16, like S */
    const __m256i H = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
        _mm_loadu_si128((const __m128i *)(p + 32)),
        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    const __m256i bit = _mm256_set1_epi32(0x00800008), one = _mm256_set1_epi16(1);
    const __m256i h1 = _mm256_and_si256(_mm256_unpacklo_epi16(H, H), bit);
    const __m256i h2 = _mm256_and_si256(_mm256_unpackhi_epi16(H, H), bit);
    const __m256i w1 = _mm256_sign_epi16(_mm256_unpacklo_epi16(S, S),
                                         _mm256_or_si256(_mm256_cmpeq_epi16(h1, bit), one));
    const __m256i w2 = _mm256_sign_epi16(_mm256_unpackhi_epi16(S, S),
                                         _mm256_or_si256(_mm256_cmpeq_epi16(h2, bit), one));
    /* the sums of 8 as int32 pairs (octets 2k, 2k + 1) into that order */
    const __m256i ord = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const char *s8 = xp + offsetof(sl_block_q8_K8, sums8);
    const __m256i x1 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)s8), ord);
    const __m256i x2 =
        _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(s8 + 32)), ord);
    return _mm256_add_epi32(_mm256_slli_epi32(acc, 3),
                            _mm256_add_epi32(_mm256_madd_epi16(w1, x1), _mm256_madd_epi16(w2, x2)));
}
#endif

/* the block's fp16 scale (IQ1_M's split one; code is a constant where the kernels call it),
 * by F16C: sl__mv_h2f's bits */
static inline float SL_MV_SUFFIX(iq_scale)(uint32_t code, const uint8_t *p)
{
    return _cvtsh_ss(code == SL_GGML_IQ1_M ? sl_block_iq1_m_d((const sl_block_iq1_m *)p)
                                           : SL_MV_SUFFIX(iq_le16)(p));
}

/* The types whose decode has a whole-block form: *acc its 8 int32 (false: the per-group one) */
static inline bool SL_MV_SUFFIX(iq_block_sums)(uint32_t code, const uint8_t *p, const char *xp,
                                               __m256i *acc)
{
    switch (code) {
    case SL_GGML_IQ1_S: *acc = SL_MV_SUFFIX(iq1_s_sums)(p, xp); return true;
    case SL_GGML_IQ1_M: *acc = SL_MV_SUFFIX(iq1_m_sums)(p, xp); return true;
#if SL_MV_AVX512
    case SL_GGML_IQ2_XXS: *acc = SL_MV_SUFFIX(iq2_xxs_sums)(p, xp); return true;
    case SL_GGML_IQ2_XS: *acc = SL_MV_SUFFIX(iq2_xs_sums)(p, xp); return true;
    case SL_GGML_IQ2_S: *acc = SL_MV_SUFFIX(iq2_s_sums)(p, xp); return true;
    case SL_GGML_IQ3_XXS: *acc = SL_MV_SUFFIX(iq3_xxs_sums)(p, xp); return true;
    case SL_GGML_IQ3_S: *acc = SL_MV_SUFFIX(iq3_s_sums)(p, xp); return true;
#endif
    default: return false;
    }
}

/* the types: kernels/ref/matvec_impl.h's SL__IQ_TYPES (kernel name, GGUF code, block, name);
 * each type's decoder is SL_MV_SUFFIX(name##_ib), its per-block scale vector
 * SL_MV_SUFFIX(name##_S); the range kernel takes iq_block_sums' whole-block form where a type
 * has one (every type on AVX-512, IQ1 on AVX2) */

/* Per type: acc_ (one block's 8 int32, summing to its isum), term_ (its factor * d * x.d),
 * range_ (blocks into lane[b % 8]) and rows_ (whole rows: each group of 8 blocks' sums as one
 * vector (hsum8x8) times their factors, added to 8 lanes held in a register, then the
 * reference's reduction: the range kernel's lanes and bits without a lane array in memory, a
 * call and a scalar reduction a row, which cost ~15% on rows of 4 blocks). */
#define SL_MV_IQ_RANGE(name, code, B, NAME)                                                   \
    static inline __m256i SL_MV_SUFFIX(acc_##name)(const uint8_t *p, const char *xp)           \
    {                                                                                           \
        __m256i acc = _mm256_setzero_si256();                                                   \
        if (SL_MV_SUFFIX(iq_block_sums)(code, p, xp, &acc)) return acc;                         \
        const __m256i S = SL_MV_SUFFIX(name##_S)(p);                                            \
        for (int ib = 0; ib < 8; ib++) {                                                        \
            __m256i a, sg, sc;                                                                  \
            SL_MV_SUFFIX(name##_ib)(p, ib, S, &a, &sg, &sc);                                    \
            const __m256i x8 = _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * ib));         \
            acc = _mm256_add_epi32(acc, SL_MV_SUFFIX(iq_sdot)(a, sg, x8, sc));                  \
        }                                                                                       \
        return acc;                                                                             \
    }                                                                                           \
    static inline float SL_MV_SUFFIX(term_##name)(const uint8_t *p, const char *xp)            \
    {                                                                                           \
        float xd;                                                                               \
        memcpy(&xd, xp, 4);                                                                     \
        return sl__iq_factor(code) * SL_MV_SUFFIX(iq_scale)(code, p) * xd;                      \
    }                                                                                           \
    static void SL_MV_SUFFIX(range_##name)(const sl__mv_type *t, const void *w, const void *xq, \
                                           int64_t b0, int64_t b1, float *lane)                \
    {                                                                                           \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const uint8_t *p = (const uint8_t *)w + b * t->bytes;                               \
            const char *xp = (const char *)xq + b * t->act_bytes;                               \
            lane[b % 8] += (float)SL_MV_SUFFIX(hsum_i32)(SL_MV_SUFFIX(acc_##name)(p, xp)) *     \
                           SL_MV_SUFFIX(term_##name)(p, xp);                                    \
        }                                                                                       \
    }                                                                                           \
    static void SL_MV_SUFFIX(rows_##name)(const void *w, size_t wrb, const void *xq, int64_t nb, \
                                          int64_t r0, int64_t r1, float *y)                     \
    {                                                                                           \
        const size_t xb = sl__mv_type_get(code)->act_bytes; /* the type table's, once a call */ \
        SL_MV_SUFFIX(pf_head)((const char *)w + (size_t)r0 * wrb, (size_t)(r1 - r0) * wrb);     \
        for (int64_t r = r0; r < r1; r++) {                                                     \
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * wrb;                           \
            SL_MV_SUFFIX(pf_span)((const char *)wr, wrb);                                       \
            __m256 acc = _mm256_setzero_ps();                                                   \
            for (int64_t g = 0; g < nb; g += 8) {                                               \
                const int m = nb - g < 8 ? (int)(nb - g) : 8;                                   \
                __m256i s[8];                                                                   \
                float f[8];                                                                     \
                for (int k = 0; k < 8; k++) {                                                   \
                    s[k] = _mm256_setzero_si256();                                              \
                    f[k] = 0.0f;                                                                \
                    if (k >= m) continue;                                                       \
                    const uint8_t *p = wr + (g + k) * (int64_t)sizeof(B);                       \
                    const char *xp = (const char *)xq + (size_t)(g + k) * xb;                   \
                    s[k] = SL_MV_SUFFIX(acc_##name)(p, xp);                                     \
                    f[k] = SL_MV_SUFFIX(term_##name)(p, xp);                                    \
                }                                                                               \
                acc = _mm256_add_ps(acc,                                                        \
                                    _mm256_mul_ps(_mm256_cvtepi32_ps(                           \
                                                      SL_MV_SUFFIX(hsum8x8_m)(s, m)),           \
                                                  _mm256_loadu_ps(f)));                         \
            }                                                                                   \
            y[r] = SL_MV_SUFFIX(reduce8)(acc);                                                  \
        }                                                                                       \
    }

SL__IQ_TYPES(SL_MV_IQ_RANGE)

#undef SL_MV_IQ_RANGE

/* The batch kernel (gemm.h's contract): each block decoded once per row and group of 8 tokens,
 * its |v| once, then each token's exact integer sum (the range kernel's), the 8 tokens' sums as
 * one vector (hsum8x8) and their float terms in one multiply, added to a lane array held
 * transposed (lane j of the 8 tokens in one vector): every (row, token) gets the range
 * kernel's terms in the reference's lane order, so the reference's bits. */
#define SL_MV_IQ_GEMM(name, code, B, NAME)                                                    \
    static void SL_MV_SUFFIX(gemm_##name)(const sl__mv_type *t, const sl__gemm_rows *a,          \
                                          int64_t i0, int64_t i1)                               \
    {                                                                                           \
        for (int64_t i = i0; i < i1; i++) {                                                     \
            const int64_t r = a->idx ? a->idx[i] : i, out = a->idx && !a->scatter ? i : r;      \
            const uint8_t *wr = (const uint8_t *)a->w + (size_t)r * a->wrb;                     \
            for (int64_t t0 = 0; t0 < a->n_tok; t0 += 8) {                                      \
                const int nt = (int)(a->n_tok - t0 < 8 ? a->n_tok - t0 : 8);                    \
                __m256 lt[8];                                                                   \
                for (int j = 0; j < 8; j++) lt[j] = _mm256_setzero_ps();                        \
                for (int64_t b = 0; b < a->nb; b++) {                                           \
                    const uint8_t *p = wr + b * t->bytes;                                       \
                    __m256i av[8], sg[8], sc[8], s[8];                                          \
                    const __m256i S = SL_MV_SUFFIX(name##_S)(p);                                \
                    for (int ib = 0; ib < 8; ib++)                                              \
                        SL_MV_SUFFIX(name##_ib)(p, ib, S, &av[ib], &sg[ib], &sc[ib]);           \
                    const float fd = sl__iq_factor(code) * SL_MV_SUFFIX(iq_scale)(code, p);                \
                    float xd[8] = {0};                                                          \
                    for (int k = 0; k < 8; k++) {                                               \
                        s[k] = _mm256_setzero_si256();                                          \
                        if (k >= nt) continue;                                                  \
                        const char *xp = a->xq + (size_t)(t0 + k) * a->arb + b * t->act_bytes;  \
                        for (int ib = 0; ib < 8; ib++) {                                        \
                            const __m256i x8 =                                                  \
                                _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * ib));        \
                            s[k] = _mm256_add_epi32(                                            \
                                s[k], SL_MV_SUFFIX(iq_sdot)(av[ib], sg[ib], x8, sc[ib]));       \
                        }                                                                       \
                        memcpy(&xd[k], xp, 4);                                                  \
                    }                                                                           \
                    const __m256 fx = _mm256_mul_ps(_mm256_set1_ps(fd), _mm256_loadu_ps(xd));  \
                    lt[b % 8] = _mm256_add_ps(                                                  \
                        lt[b % 8],                                                              \
                        _mm256_mul_ps(_mm256_cvtepi32_ps(SL_MV_SUFFIX(hsum8x8)(s)), fx));       \
                }                                                                               \
                float l[8][8];                                                                  \
                for (int j = 0; j < 8; j++) _mm256_storeu_ps(l[j], lt[j]);                      \
                for (int k = 0; k < nt; k++) {                                                  \
                    float s8[8];                                                                \
                    for (int j = 0; j < 8; j++) s8[j] = l[j][k];                                \
                    a->y[(t0 + k) * a->y_stride + out] = sl__mv_reduce8(s8);                    \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

SL__IQ_TYPES(SL_MV_IQ_GEMM)

#undef SL_MV_IQ_GEMM
#undef SL_IQ_G4
#undef SL_IQ_KS4
