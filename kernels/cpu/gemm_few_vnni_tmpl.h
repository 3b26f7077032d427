/* kernels/cpu/gemm_few_vnni_tmpl.h: the AVX-512 VNNI few-token kernel of Q4_K, Q5_K, Q6_K and
 * IQ4_XS under gemm.h's contract, for batches of 1..SL__GEMM_FEW_MAX tokens (an MoE expert's
 * small groups, a batch's last few tokens; gemm.h's sl__gemm_tail says which): gemm.h's
 * sl__gemm_few_avx512. Included only by matvec_avx512.c after gemm_k_vnni_tmpl.h (it uses that
 * file's GKV_* kinds and GKV_UNROLL, and matvec_kq_x86_tmpl.h's k4_unpack_v / iq4xs_ls32).
 *
 * Why it is faster for few tokens: the decode row kernel run once per token unpacks every
 * weight block once per token, and gemm_kv's 16-token panels (gemm_k's 8-token ones) leave
 * most lanes empty. Here a row's super-block is unpacked once, in registers, into 4 vectors of
 * unsigned codes whose 128-bit lanes each hold 16 elements under one scale (gf_xoff), and meets
 * 4-token panels in which every 32-bit group holds one token's 4 bytes: lane k of panel vector
 * j holds bytes 4j..4j+3 of lane k's 16 elements for tokens 0..3, and the weights go in by one
 * vpshufd per j (their group j in all four dwords of lane k). Four vpdpbusd then leave in lane k
 * its 16 elements' sums of the 4 tokens, all under one scale, so one vpshufb split and one
 * vpdpwssd (gemm_k_vnni_tmpl.h's (sc, 256 sc) trick) scale 4 tokens at once. 5..8 tokens take
 * two panels against the same shuffled weights; Q6_K's and IQ4_XS's 1..2 tokens a layout of
 * their own (256-bit half t = token t, against a 256-bit half of the weights doubled by one
 * vshufi64x2: 2 shuffles a 64-element vector, not 4), which ran 1.1-1.25x faster than a
 * half-empty panel (gemm_bench; broadcasting the halves from a stored copy instead ran 1.35x
 * slower on rows of one super-block). The codes' offsets (Q6_K's 32, IQ4_XS's 128) and the
 * mins (Q4_K/Q5_K) meet the panels' Q8_K block sums in one vpdpwssd.
 *
 * Why the bits are the reference's: the integer sums are exact (a lane's sum of 16 or 32
 * elements is below 2^23: 32 x 255 x 127; the scaled sums of a super-block below 2^31), and
 * the float term of every (row, token, super-block) is the reference's term_k / term_d, added
 * to lane b % 8 (8 tokens a vector) in super-block order; the lanes end with sl__mv_reduce8's
 * expression, element-wise over the tokens. */

/* the types, compile-time parameters of the kernels */
enum { GF_Q4, GF_Q5, GF_Q6, GF_IQ4 };

enum {
    GF_PCH = 8,  /* super-blocks per panel chunk (a multiple of 8: a chunk starts at lane 0) */
    GF_ROWS = 64 /* rows whose lanes wait in memory while a longer row's next chunk is built */
};

/* 4 tokens' Q8_K super-blocks [b0, b0 + GF_PCH): q[i][c][j] lane k = bytes 4j..4j+3 of the
 * tokens' 16 elements at gf_xoff(kind, c, k) (token t in dword t), in the order the kind's
 * unpack leaves its weights; bs[i][h] dword 4k + t = token t's sums pair 4h + k (int16 pairs:
 * Q8_K's 16-element sums for Q6_K, their 32-element sums 2k, 2k + 1 otherwise); d the scales. */
typedef struct gf_panel {
    _Alignas(64) int8_t q[GF_PCH][4][4][64];
    _Alignas(64) int32_t bs[GF_PCH][2][16];
    _Alignas(16) float d[GF_PCH][4];
} gf_panel;

/* The element offset of lane k of weight vector c (gf_term's unpack order): Q6_K natural
 * (vector c = elements 64c..), IQ4_XS half c / 2's low (c even) or high nibbles of sub-blocks
 * 4h + k (vector c lane k: sub-block 4 (c / 2) + k), Q4_K/Q5_K the low / high nibbles of rounds
 * 2h, 2h + 1 (k45_block512's order). */
static inline int SL_MV_SUFFIX(gf_xoff)(int kind, int c, int k)
{
    const int h = c / 2, hl = c % 2;
    return kind == GKV_OFFSET ? 64 * c + 16 * k
           : kind == GKV_IQ4  ? 128 * h + 32 * k + 16 * hl
                              : 128 * h + 64 * (k / 2) + 16 * (k % 2) + 32 * hl;
}

/* Tokens t0..t0+3 (past n_tok: the last token again, results dropped) of xq (rows arb bytes
 * apart), super-blocks [b0, b1). */
static void SL_MV_SUFFIX(gf_panel_build)(const char *xq, size_t arb, size_t xb, int64_t t0,
                                         int64_t n_tok, int64_t b0, int64_t b1, int kind,
                                         bool t2, gf_panel *p)
{
    const char *x[4];
    for (int k = 0; k < 4; k++)
        x[k] = xq + (size_t)(t0 + k < n_tok ? t0 + k : n_tok - 1) * arb;
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#define SL_GF_L(T, C, L)                                                                       \
    _mm_loadu_si128((const __m128i *)(x[T] + sb + 4 + SL_MV_SUFFIX(gf_xoff)(kind, C, L)))
    for (int64_t b = b0; b < b1 && t2; b++) {
        /* the 2-token layout (gf_term's P == 0): q[i][c][h] = token 0's lanes 2h, 2h + 1 of
         * vector c, then token 1's; bs[i][0] their 16-element sums as they lie */
        const int64_t i = b - b0, sb = b * (int64_t)xb;
        for (int c = 0; c < 4; c++)
            for (int h = 0; h < 2; h++)
                _mm512_store_si512(
                    p->q[i][c][h],
                    _mm512_inserti32x4(
                        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(
                                                                  SL_GF_L(0, c, 2 * h)),
                                                              SL_GF_L(0, c, 2 * h + 1), 1),
                                           SL_GF_L(1, c, 2 * h), 2),
                        SL_GF_L(1, c, 2 * h + 1), 3));
        _mm512_store_si512(
            p->bs[i][0],
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
                                   (const __m256i *)(x[0] + sb + 4 + SL_QK_K))),
                               _mm256_loadu_si256((const __m256i *)(x[1] + sb + 4 + SL_QK_K)),
                               1));
        for (int k = 0; k < 2; k++) memcpy(&p->d[i][k], x[k] + sb, 4);
    }
    for (int64_t b = b0; b < b1 && !t2; b++) {
        const int64_t i = b - b0, sb = b * (int64_t)xb;
        for (int c = 0; c < 4; c++) {
            __m512i r[4];
            for (int k = 0; k < 4; k++)
                r[k] = _mm512_inserti32x4(
                    _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(
                                                              SL_GF_L(k, c, 0)),
                                                          SL_GF_L(k, c, 1), 1),
                                       SL_GF_L(k, c, 2), 2),
                    SL_GF_L(k, c, 3), 3);
            const __m512i u0 = _mm512_unpacklo_epi32(r[0], r[1]);
            const __m512i u1 = _mm512_unpackhi_epi32(r[0], r[1]);
            const __m512i u2 = _mm512_unpacklo_epi32(r[2], r[3]);
            const __m512i u3 = _mm512_unpackhi_epi32(r[2], r[3]);
            _mm512_store_si512(p->q[i][c][0], _mm512_unpacklo_epi64(u0, u2));
            _mm512_store_si512(p->q[i][c][1], _mm512_unpackhi_epi64(u0, u2));
            _mm512_store_si512(p->q[i][c][2], _mm512_unpacklo_epi64(u1, u3));
            _mm512_store_si512(p->q[i][c][3], _mm512_unpackhi_epi64(u1, u3));
        }
        /* token k's pairs in lane k (the lanes rotate once per token), then dword 4t + k to
         * 4k + t */
        __m512i v[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int k = 0; k < 4; k++) {
            const __m256i s = _mm256_loadu_si256((const __m256i *)(x[k] + sb + 4 + SL_QK_K));
            __m128i h[2] = {_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)};
            if (kind != GKV_OFFSET) { /* 32-element sums: |s| <= 32 x 128 fits int16 */
                const __m256i s32 = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
                h[0] = _mm_packs_epi32(_mm256_castsi256_si128(s32),
                                       _mm256_extracti128_si256(s32, 1));
            }
            for (int q = 0; q < 2; q++)
                v[q] = _mm512_alignr_epi32(_mm512_inserti32x4(v[q], h[q], 0),
                                           _mm512_inserti32x4(v[q], h[q], 0), 4);
        }
        for (int q = 0; q < 2; q++)
            _mm512_store_si512(p->bs[i][q], _mm512_permutexvar_epi32(tr, v[q]));
        for (int k = 0; k < 4; k++) memcpy(&p->d[i][k], x[k] + sb, 4);
    }
#undef SL_GF_L
}

/* The scale (dword of gf_term's spz) of lane k of weight vector c. */
static inline int SL_MV_SUFFIX(gf_sidx)(int ty, int c, int k)
{
    return ty == GF_IQ4  ? 4 * (c / 2) + k
           : ty == GF_Q6 ? 4 * c + k
                         : 4 * (c / 2) + 2 * (k / 2) + c % 2; /* round 2h: 4h, 4h + 2 */
}

/* Lane k of the result: dword 4 idx[k] .. (the index vector of a per-lane broadcast). */
#define SL_GF_IDX(a, b, c, d)                                                                  \
    _mm512_setr_epi32(a, a, a, a, b, b, b, b, c, c, c, c, d, d, d, d)

/* (sc, 256 sc) int16 pairs from int32 sc in [-128, 127] */
static inline __m512i SL_MV_SUFFIX(gf_pairs)(__m512i sc)
{
    return _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)),
                           _mm512_slli_epi32(sc, 24));
}

/* The float terms of the super-block at wp (one row's) against P panels' super-block pi: tokens
 * 0..3 of panel 0 in elements 0..3, panel 1's in 4..7 (P == 1: 0 there). The block is unpacked
 * in registers into 4 vectors of unsigned codes (Q4_K/Q5_K: q; Q6_K: q in [0, 63]; IQ4_XS: the
 * table value + 128), each 128-bit lane 16 elements under one scale, against signed x; the
 * codes' offsets (Q6_K's 32, IQ4_XS's 128) come back through the panels' sums by vpdpwssd as
 * the mins do, so there is no per-row correction: isum = sum_e sc_e (sum_e c x - off bsum_e). */
static inline __attribute__((always_inline)) __m256 SL_MV_SUFFIX(gf_term)(
    const char *wp, const gf_panel *p, const int P, const int TY, int64_t pi)
{
    const __m512i split = _mm512_set4_epi32(0x0E0D800C, 0x0A098008, 0x06058004, 0x02018000);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i spz;   /* scale j's (sc, 256 sc) pair in dword j */
    __m512i cw[2]; /* lane k: the int16 pair that weighs the panels' sums pair 4h + k */
    __m512i cw2;   /* P == 0: dword m (both halves) weighs the 16-element sums 2m, 2m + 1 */
    __m512i w[4];  /* the codes: lane k of w[c] at gf_xoff(c, k) */
    float d, dmin = 0.0f;
    if (TY == GF_IQ4) {
        const __m256i ls = SL_MV_SUFFIX(iq4xs_ls32)(wp); /* ls - 32 in [-32, 31] */
        spz = SL_MV_SUFFIX(gf_pairs)(_mm512_castsi256_si512(ls));
        const __m256i c = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(ls, 7));
        cw[0] = _mm512_permutexvar_epi32(
            SL_GF_IDX(0, 1, 2, 3),
            _mm512_castsi128_si512(
                _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1))));
        cw[1] = _mm512_setzero_si512();
        cw2 = _mm512_broadcast_i64x4(_mm256_or_si256(
            _mm256_and_si256(c, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(c, 16)));
        const __m128i kv = _mm_xor_si128(_mm_loadu_si128((const __m128i *)sl_iq4nl_values),
                                         _mm_set1_epi8((char)0x80));
        const __m512i table = _mm512_broadcast_i32x4(kv);
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512((const void *)(wp + 8 + 64 * h));
            w[2 * h] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
            w[2 * h + 1] =
                _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        }
        d = SL_MV_SUFFIX(g_half)(wp);
    } else if (TY == GF_Q6) {
        const sl_block_q6_K *b = (const sl_block_q6_K *)wp;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
        spz = SL_MV_SUFFIX(gf_pairs)(_mm512_cvtepi8_epi32(s8));
        /* -32 sc_e: |.| <= 4096 */
        const __m512i c = _mm512_castsi256_si512(_mm256_sub_epi16(
            _mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5)));
        cw[0] = _mm512_permutexvar_epi32(SL_GF_IDX(0, 1, 2, 3), c);
        cw[1] = _mm512_permutexvar_epi32(SL_GF_IDX(4, 5, 6, 7), c);
        cw2 = _mm512_broadcast_i64x4(_mm512_castsi512_si256(c));
        const __m512i m30 = _mm512_set1_epi8(0x30);
        for (int n = 0; n < 2; n++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b->ql + 64 * n));
            const __m512i qh =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * n)));
            /* elements 128n..+63: low nibbles with qh bits 0-1 (first 32), 2-3; then the high
             * nibbles with bits 4-5, 6-7 (what the shifts carry across bytes misses 0x30) */
            const __m512i ha = _mm512_srlv_epi64(qh, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
            const __m512i hb = _mm512_srlv_epi64(qh, _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6));
            w[2 * n] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                       _mm512_and_si512(_mm512_slli_epi16(ha, 4), m30));
            w[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_and_si512(_mm512_slli_epi16(hb, 4), m30));
        }
        uint16_t h;
        memcpy(&h, &b->d, 2);
        d = _cvtsh_ss(h);
    } else {
        const __m128i scm = SL_MV_SUFFIX(k4_unpack_v)((const uint8_t *)wp + 4);
        spz = SL_MV_SUFFIX(gf_pairs)(_mm512_cvtepu8_epi32(scm));
        /* the mins (bytes 8..15) as int16: pairs (m_2k, m_2k+1) */
        cw[0] = _mm512_permutexvar_epi32(
            SL_GF_IDX(0, 1, 2, 3),
            _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_srli_si128(scm, 8))));
        cw[1] = _mm512_setzero_si512();
        const __m256i m32 = _mm256_cvtepu8_epi32(_mm_srli_si128(scm, 8));
        cw2 = _mm512_broadcast_i64x4(_mm256_or_si256(m32, _mm256_slli_epi32(m32, 16)));
        const uint8_t *qs = (const uint8_t *)wp + (TY == GF_Q5 ? 48 : 16);
        const __m512i qh = TY == GF_Q5 ? _mm512_broadcast_i64x4(
                                             _mm256_loadu_si256((const __m256i *)(wp + 16)))
                                       : _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i lo, hi;
            SL_MV_SUFFIX(k45_codes512)(qs, qh, h, TY == GF_Q5, &lo, &hi);
            w[2 * h] = lo;
            w[2 * h + 1] = hi;
        }
        d = SL_MV_SUFFIX(g_half)(wp);
        dmin = SL_MV_SUFFIX(g_half)(wp + 2);
    }
    const bool mins = TY == GF_Q4 || TY == GF_Q5;
    if (P == 0) {
        /* 2 tokens: 256-bit half t of a panel vector is token t's lanes 2h, 2h + 1 of weight
         * vector c, against those lanes doubled, each 128-bit lane under one scale */
        __m512i vm = _mm512_setzero_si512();
        __m512i s2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        __m512i t2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* two chains */
        GKV_UNROLL
        for (int c = 0; c < 4; c++) {
            GKV_UNROLL
            for (int h = 0; h < 2; h++)
                s2[h] = _mm512_dpbusd_epi32(
                    s2[h],
                    h ? _mm512_shuffle_i64x2(w[c], w[c], 0xEE)
                      : _mm512_shuffle_i64x2(w[c], w[c], 0x44),
                    _mm512_load_si512(p->q[pi][c][h]));
            if (TY == GF_IQ4 && c % 2 == 0) continue;
            GKV_UNROLL
            for (int h = 0; h < 2; h++) {
                const int k0 = SL_MV_SUFFIX(gf_sidx)(TY, c, 2 * h);
                const int k1 = SL_MV_SUFFIX(gf_sidx)(TY, c, 2 * h + 1);
                const __m512i sc = _mm512_permutexvar_epi32(SL_GF_IDX(k0, k1, k0, k1), spz);
                t2[h] = _mm512_dpwssd_epi32(t2[h], _mm512_shuffle_epi8(s2[h], split), sc);
                s2[h] = _mm512_setzero_si512();
            }
        }
        const __m512i bs = _mm512_load_si512(p->bs[pi][0]);
        if (mins) vm = _mm512_dpwssd_epi32(vm, bs, cw2);
        else t2[1] = _mm512_dpwssd_epi32(t2[1], bs, cw2);
        const __m512i tot = _mm512_add_epi32(t2[0], t2[1]);
        /* [isum 0, isum 1, summ 0, summ 1] */
        const __m256i ha =
            _mm256_hadd_epi32(_mm512_castsi512_si256(tot), _mm512_extracti64x4_epi64(tot, 1));
        const __m256i hb =
            mins ? _mm256_hadd_epi32(_mm512_castsi512_si256(vm), _mm512_extracti64x4_epi64(vm, 1))
                 : ha;
        const __m256i hc = _mm256_hadd_epi32(ha, hb);
        const __m128i r =
            _mm_add_epi32(_mm256_castsi256_si128(hc), _mm256_extracti128_si256(hc, 1));
        const __m256 dx = _mm256_castsi256_ps(
            _mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *)p->d[pi])));
        const __m256 a2 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_zextsi128_si256(_mm_move_epi64(r))),
                          _mm256_mul_ps(_mm256_set1_ps(d), dx));
        if (!mins) return a2;
        const __m256 b2 = _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_zextsi128_si256(_mm_move_epi64(_mm_srli_si128(r, 8)))),
            _mm256_mul_ps(_mm256_set1_ps(dmin), dx));
        return _mm256_sub_ps(a2, b2);
    }
    __m512i tot[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    __m512i tot1[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* a second chain */
    /* two chains per panel: one would wait on vpdpbusd's latency */
    __m512i s[2][2] = {{_mm512_setzero_si512(), _mm512_setzero_si512()},
                       {_mm512_setzero_si512(), _mm512_setzero_si512()}};
    GKV_UNROLL
    for (int c = 0; c < 4; c++) {
        const __m512i wj[4] = {_mm512_shuffle_epi32(w[c], _MM_PERM_AAAA),
                               _mm512_shuffle_epi32(w[c], _MM_PERM_BBBB),
                               _mm512_shuffle_epi32(w[c], _MM_PERM_CCCC),
                               _mm512_shuffle_epi32(w[c], _MM_PERM_DDDD)};
        GKV_UNROLL
        for (int j = 0; j < 4; j++)
            GKV_UNROLL
            for (int v = 0; v < P; v++)
                s[v][j % 2] = _mm512_dpbusd_epi32(s[v][j % 2], wj[j],
                                                  _mm512_load_si512(p[v].q[pi][c][j]));
        /* IQ4_XS: both nibble vectors of a half under the same scales, summed first (a lane's
         * 32 elements: below 2^23 still) */
        if (TY == GF_IQ4 && c % 2 == 0) continue;
#define SL_GF_S(K) SL_MV_SUFFIX(gf_sidx)(TY, c, K)
        const __m512i sc = _mm512_permutexvar_epi32(
            SL_GF_IDX(SL_GF_S(0), SL_GF_S(1), SL_GF_S(2), SL_GF_S(3)), spz);
#undef SL_GF_S
        GKV_UNROLL
        for (int v = 0; v < P; v++) {
            __m512i *tc = c < 2 ? &tot[v] : &tot1[v];
            *tc = _mm512_dpwssd_epi32(
                *tc, _mm512_shuffle_epi8(_mm512_add_epi32(s[v][0], s[v][1]), split), sc);
            s[v][0] = s[v][1] = _mm512_setzero_si512();
        }
    }
    /* the offsets' share (Q6_K, IQ4_XS) into isum, or the mins' summ (Q4_K, Q5_K) */
    __m512i vm[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    GKV_UNROLL
    for (int v = 0; v < P; v++) {
        if (TY == GF_Q6) {
            tot[v] = _mm512_dpwssd_epi32(tot[v], _mm512_load_si512(p[v].bs[pi][0]), cw[0]);
            tot1[v] = _mm512_dpwssd_epi32(tot1[v], _mm512_load_si512(p[v].bs[pi][1]), cw[1]);
        } else if (TY == GF_IQ4) {
            tot[v] = _mm512_dpwssd_epi32(tot[v], _mm512_load_si512(p[v].bs[pi][0]), cw[0]);
        } else {
            vm[v] = _mm512_dpwssd_epi32(vm[v], _mm512_load_si512(p[v].bs[pi][0]), cw[0]);
        }
        tot[v] = _mm512_add_epi32(tot[v], tot1[v]);
    }
    /* the 4 lanes' sums of each token (exact integers: any order) */
    __m256i h[2];
    GKV_UNROLL
    for (int v = 0; v < 2; v++) {
        const __m512i z = v == 0 ? tot[0] : mins && P == 1 ? vm[0] : tot[1];
        h[v] = _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
    }
    /* [panel 0 | panel 1] (P == 2) or [isum | summ] (P == 1, mins) or [isum | 0] */
    const __m256i is = _mm256_add_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                                        _mm256_permute2x128_si256(h[0], h[1], 0x31));
    __m256i isum = is, summ = _mm256_setzero_si256();
    if (mins && P == 2) {
        __m256i g[2];
        for (int v = 0; v < 2; v++)
            g[v] = _mm256_add_epi32(_mm512_castsi512_si256(vm[v]),
                                    _mm512_extracti64x4_epi64(vm[v], 1));
        summ = _mm256_add_epi32(_mm256_permute2x128_si256(g[0], g[1], 0x20),
                                _mm256_permute2x128_si256(g[0], g[1], 0x31));
    } else if (mins) {
        summ = _mm256_permute2x128_si256(is, is, 0x81); /* high half down, zero above */
        isum = _mm256_zextsi128_si256(_mm256_castsi256_si128(is));
    }
    const __m128i d0 = _mm_castps_si128(_mm_load_ps(p[0].d[pi]));
    const __m256 dx = _mm256_castsi256_ps(
        P == 2 ? _mm256_set_m128i(_mm_castps_si128(_mm_load_ps(p[1].d[pi])), d0)
               : _mm256_zextsi128_si256(d0));
    /* the reference's term_d / term_k, element-wise */
    const __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_set1_ps(d), dx));
    if (!mins) return a;
    const __m256 b =
        _mm256_mul_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(_mm256_set1_ps(dmin), dx));
    return _mm256_sub_ps(a, b);
}

/* Rows [r0, r1) (at most GF_ROWS) against P panels' super-blocks [c0, c1) (c0 % 8 == 0):
 * lanes lt[m] of row r0 + m carry over from the previous chunk (c0 > 0) and to the next
 * (c1 < nb); the last chunk reduces them and stores the n_tok results of each row. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gf_rows)(
    const sl__gemm_rows *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1, const gf_panel *p,
    const int P, const int TY, __m256 (*lt)[8])
{
    const size_t wb = TY == GF_Q4   ? sizeof(sl_block_q4_K)
                      : TY == GF_Q5 ? sizeof(sl_block_q5_K)
                      : TY == GF_Q6 ? sizeof(sl_block_q6_K)
                                    : sizeof(sl_block_iq4_xs);
    /* dense rows of one chunk (an expert's) stream: prefetch as the decode kernels do */
    const bool pf = !a->idx && c0 == 0 && c1 == a->nb;
    if (pf) SL_MV_SUFFIX(pf_head)(a->w + (size_t)r0 * a->wrb, (size_t)(r1 - r0) * a->wrb);
    for (int64_t i = r0; i < r1; i++) {
        const int64_t r = a->idx ? a->idx[i] : i;
        const char *w = a->w + (size_t)r * a->wrb;
        if (pf) SL_MV_SUFFIX(pf_span)(w, a->wrb);
        __m256 *l = lt[i - r0];
        if (c0 == 0)
            for (int q = 0; q < 8; q++) l[q] = _mm256_setzero_ps();
        for (int64_t b = c0; b < c1; b++)
            l[b - c0] = _mm256_add_ps(
                l[b - c0], SL_MV_SUFFIX(gf_term)(w + (size_t)b * wb, p, P, TY, b - c0));
        if (c1 < a->nb) continue;
        /* sl__mv_reduce8, element-wise over the tokens */
        const __m256 s = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(l[0], l[4]), _mm256_add_ps(l[2], l[6])),
            _mm256_add_ps(_mm256_add_ps(l[1], l[5]), _mm256_add_ps(l[3], l[7])));
        float res[8];
        _mm256_storeu_ps(res, s);
        const int64_t out = a->idx && !a->scatter ? i : r;
        for (int64_t k = 0; k < a->n_tok; k++) a->y[k * a->y_stride + out] = res[k];
    }
}

/* The whole call: rows in blocks of GF_ROWS, each over the panel chunks (built once when the
 * row is one chunk long, an MoE expert's rows; else once per row block and chunk). */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gemm_few_k)(
    const sl__gemm_rows *a, int64_t i0, int64_t i1, const int P, const int TY)
{
    gf_panel p[2];
    __m256 lt[GF_ROWS][8];
    const bool one_chunk = a->nb <= GF_PCH;
    const int kind = TY == GF_Q6 ? GKV_OFFSET : TY == GF_IQ4 ? GKV_IQ4 : GKV_MINS;
    for (int64_t r0 = i0; r0 < i1; r0 += GF_ROWS) {
        const int64_t r1 = i1 - r0 < GF_ROWS ? i1 : r0 + GF_ROWS;
        for (int64_t c0 = 0; c0 < a->nb; c0 += GF_PCH) {
            const int64_t c1 = a->nb - c0 < GF_PCH ? a->nb : c0 + GF_PCH;
            if (!one_chunk || r0 == i0)
                for (int v = 0; v < (P ? P : 1); v++)
                    SL_MV_SUFFIX(gf_panel_build)(a->xq, a->arb, a->xb, 4 * v, a->n_tok, c0, c1,
                                                 kind, P == 0, &p[v]);
            SL_MV_SUFFIX(gf_rows)(a, r0, r1, c0, c1, p, P, TY, lt);
        }
    }
}

/* 1..2 tokens the 2-token layout (Q6_K, IQ4_XS), 3..4 one panel (Q4_K, Q5_K: 1..4),
 * 5..SL__GEMM_FEW_MAX two. At 2 tokens the layout's extra reduction of the mins' sums cost
 * more than a half-empty panel: gemm_bench CHUNK 64, min us, layout / panel: Q4_K 2048x2048
 * 360 / 309, 256x1024 23.1 / 21.0, 768x768 54.7 / 43.7; Q5_K 1024x256 33.7 / 30.0, 2048x2048
 * 405 / 389, 256x1024 26.2 / 25.3, 768x768 59.7 / 59.0; the others kept it: IQ4_XS 768x768
 * 34.3 / 38.3, 384x768 18.3 / 19.7, Q6_K 768x1024 53.1 / 57.2, 1024x768 54.1 / 61.1. */
#define SL_GF_KERNEL(TY)                                                                       \
    static void SL_MV_SUFFIX(gf_##TY)(const sl__mv_type *t, const sl__gemm_rows *a,            \
                                      int64_t i0, int64_t i1)                                  \
    {                                                                                          \
        (void)t;                                                                               \
        if (a->n_tok > 4) SL_MV_SUFFIX(gemm_few_k)(a, i0, i1, 2, TY);                          \
        else if (a->n_tok > 2 || TY == GF_Q4 || TY == GF_Q5)                                   \
            SL_MV_SUFFIX(gemm_few_k)(a, i0, i1, 1, TY);                                        \
        else SL_MV_SUFFIX(gemm_few_k)(a, i0, i1, 0, TY);                                       \
    }
SL_GF_KERNEL(GF_Q4)
SL_GF_KERNEL(GF_Q5)
SL_GF_KERNEL(GF_Q6)
SL_GF_KERNEL(GF_IQ4)
#undef SL_GF_KERNEL
#undef SL_GF_IDX

/* gemm.h's few-token kernel */
sl__gemm_fn sl__gemm_few_avx512(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q4_K: return SL_MV_SUFFIX(gf_GF_Q4);
    case SL_GGML_Q5_K: return SL_MV_SUFFIX(gf_GF_Q5);
    case SL_GGML_Q6_K: return SL_MV_SUFFIX(gf_GF_Q6);
    case SL_GGML_IQ4_XS: return SL_MV_SUFFIX(gf_GF_IQ4);
    default: return SL_MV_SUFFIX(gf32_kernel)(type); /* gemm_few32_vnni_tmpl.h */
    }
}
