/* kernels/cpu/gemm_k_x86_tmpl.h: the 8-token panel kernel of the K-quants and IQ4_XS over
 * Q8_K super-blocks (gemm_k: the row unpacks gk_unpack_*, the panels gk_panel, the dots
 * gk_dot_*) and gemm.h's sl__gemm_panel8_<isa>, the type dispatch over both families.
 * Included right after gemm_x86_tmpl.h, whose 8-token helpers (g_tok8, g_half, g_transpose8,
 * g_reduce8) it reuses (same SL_MV_SUFFIX, same target region); why the kernels are fast and
 * give the reference's bits: that file's header. */

/* ---- K-quants with Q8_K activations ----------------------------------------------------- */

enum {
    GK_PCH = 4,  /* super-blocks per unpacked row chunk and panel (1024 elements) */
    /* panels (8 tokens each) a row chunk meets once unpacked: AVX2 machines may have a
     * 32 KiB L1, which 4 panels (37 KiB) overflow (32 tokens ran 1.75x slower than 2 x 16
     * on a 2-core EPYC); AVX-512 ones have 48 KiB */
    GK_NP = SL_MV_AVX512 ? 4 : 2,
    GK_ROWS = 16 /* rows whose lanes live at once beside the panels */
};

/* Per super-block: q unsigned in element order (Q4_K/Q5_K: [0, 31], Q6_K: [0, 63]), s16 the
 * scale of each 16 elements (Q4_K/Q5_K's per-32 scales twice), bw the weights of the Q8_K block
 * sums (Q4_K/Q5_K: min j for sums 2j, 2j+1; Q6_K: the scales), and the float parts. */
typedef struct gk_buf {
    _Alignas(32) uint8_t q[GK_PCH][SL_QK_K];
    int16_t s16[GK_PCH][16], bw[GK_PCH][16];
    float d[GK_PCH], dmin[GK_PCH];
#if SL_MV_AVX512
    /* gemm_k_vnni_tmpl.h's offset kinds (gkv_unpack_q6): q signed, sp the scale of each 16
     * elements as the int16 pair (sc, 256 sc), corr -128 sum_j sc_j (sum of sub-block j's q) */
    int32_t sp[GK_PCH][16], corr[GK_PCH];
#endif
} gk_buf;

/* A Q4_K/Q5_K super-block's d, dmin, and its scales and mins as gk_buf holds them (each per-32
 * value twice, int16: entry j belongs to elements 16j..16j+15), into super-block i of u: the
 * part of gk_unpack_q45 and gemm_k_vnni_tmpl.h's gkv_unpack_q45 that does not touch the codes. */
static inline void SL_MV_SUFFIX(gk_q45_head)(const uint8_t *p, int64_t i, gk_buf *u)
{
    uint8_t sc[8];
    const __m128i mins = SL_MV_SUFFIX(k4_unpack)(p + 4, sc);
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
    _mm256_storeu_si256((__m256i *)u->s16[i], _mm256_set_m128i(_mm_unpackhi_epi16(sc16, sc16),
                                                               _mm_unpacklo_epi16(sc16, sc16)));
    _mm256_storeu_si256((__m256i *)u->bw[i], _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins),
                                                              _mm_unpacklo_epi16(mins, mins)));
    u->d[i] = SL_MV_SUFFIX(g_half)((const char *)p);
    u->dmin[i] = SL_MV_SUFFIX(g_half)((const char *)p + 2);
}

static void SL_MV_SUFFIX(gk_unpack_q45)(uint32_t type, const char *w, int64_t b0, int64_t b1,
                                        gk_buf *u)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), x10 = _mm256_set1_epi8(0x10);
    const bool q5 = type == SL_GGML_Q5_K;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const uint8_t *p = (const uint8_t *)w +
                           b * (int64_t)(q5 ? sizeof(sl_block_q5_K) : sizeof(sl_block_q4_K));
        const uint8_t *qs = p + (q5 ? 48 : 16); /* after d, dmin, scales[12] (and qh[32]) */
        SL_MV_SUFFIX(gk_q45_head)(p, i, u);
        __m256i h = q5 ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, h = _mm256_srli_epi16(h, 2)) {
            /* Q5_K high bits as range_q5_K: round j holds qh >> 2j */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 4), x10));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 3), x10));
            _mm256_store_si256((__m256i *)(u->q[i] + 64 * j), lo);
            _mm256_store_si256((__m256i *)(u->q[i] + 64 * j + 32), hi);
        }
    }
}

/* One byte per row of a Q4_K_R8 block's scale or min bytes v0 (rounds 0, 1) and v1 (2, 3),
 * stored as gk_buf wants them (each per-32 value twice, int16): dst(r)[16] for row r. Bytes
 * 2r, 2r + 1 of each round's 16 are row r's two sub-blocks: a word transpose gathers them. */
static inline void SL_MV_SUFFIX(gk_r8_pairs)(__m256i v0, __m256i v1, int16_t *dst[8])
{
    const __m128i p0 = _mm256_castsi256_si128(v0), p1 = _mm256_extracti128_si256(v0, 1);
    const __m128i p2 = _mm256_castsi256_si128(v1), p3 = _mm256_extracti128_si256(v1, 1);
    const __m128i a = _mm_unpacklo_epi16(p0, p1), b = _mm_unpackhi_epi16(p0, p1);
    const __m128i c = _mm_unpacklo_epi16(p2, p3), d = _mm_unpackhi_epi16(p2, p3);
    const __m128i rows[4] = {_mm_unpacklo_epi32(a, c), _mm_unpackhi_epi32(a, c),
                             _mm_unpacklo_epi32(b, d), _mm_unpackhi_epi32(b, d)};
    for (int k = 0; k < 8; k++) {
        const __m128i v = _mm_cvtepu8_epi16(k % 2 ? _mm_unpackhi_epi64(rows[k / 2], rows[k / 2])
                                                  : rows[k / 2]);
        _mm256_storeu_si256((__m256i *)dst[k],
                            _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v)));
    }
}

/* gk_unpack_q45 (Q4_K) of the eight rows of group g of a Q4_K_R8 matrix at once (nb super-
 * blocks a row) into u[0..7]: a round's eight 32-byte chunks, transposed by 4-byte groups,
 * are the eight rows' quant bytes. */
static void SL_MV_SUFFIX(gk_unpack_r8x8)(const char *w, int64_t nb, int64_t g, int64_t b0,
                                         int64_t b1, gk_buf u[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const char *gw = w + g * nb * (int64_t)sizeof(sl_block_q4_K_r8);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *p = gw + b * (int64_t)sizeof(sl_block_q4_K_r8);
        for (int j = 0; j < 4; j++) {
            __m256i q[8], o[8];
            for (int c = 0; c < 8; c++)
                q[c] = _mm256_loadu_si256((const __m256i *)(p + 128 + 256 * j + 32 * c));
            SL_MV_SUFFIX(g_transpose8v)(q, o); /* o[r]: row r's 32 quant bytes of round j */
            for (int r = 0; r < 8; r++) {
                _mm256_store_si256((__m256i *)(u[r].q[i] + 64 * j), _mm256_and_si256(o[r], m4));
                _mm256_store_si256((__m256i *)(u[r].q[i] + 64 * j + 32),
                                   _mm256_and_si256(_mm256_srli_epi16(o[r], 4), m4));
            }
        }
        /* scales and mins as the decode kernel reads them (r8_x86_tmpl.h) */
        __m256i sc[2], mk[2];
        SL_MV_SUFFIX(r8_scales)(p, sc, mk);
        int16_t *ds[8], *dm[8];
        for (int r = 0; r < 8; r++) {
            ds[r] = u[r].s16[i];
            dm[r] = u[r].bw[i];
        }
        SL_MV_SUFFIX(gk_r8_pairs)(sc[0], sc[1], ds);
        SL_MV_SUFFIX(gk_r8_pairs)(mk[0], mk[1], dm);
        float d[8], dmin[8];
        _mm256_storeu_ps(d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
        _mm256_storeu_ps(dmin, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))));
        for (int r = 0; r < 8; r++) {
            u[r].d[i] = d[r];
            u[r].dmin[i] = dmin[r];
        }
    }
}

static void SL_MV_SUFFIX(gk_unpack_q6)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const sl_block_q6_K *wp = (const sl_block_q6_K *)(w + b * (int64_t)sizeof(sl_block_q6_K));
        for (int n = 0; n < 2; n++) {
            __m256i q[4];
            SL_MV_SUFFIX(q6_half)(wp, n, q);
            for (int g = 0; g < 4; g++)
                _mm256_store_si256((__m256i *)(u->q[i] + 128 * n + 32 * g), q[g]);
        }
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wp->scales));
        _mm256_storeu_si256((__m256i *)u->s16[i], s16);
        _mm256_storeu_si256((__m256i *)u->bw[i], s16);
        u->dmin[i] = 0.0f;
        uint16_t d;
        memcpy(&d, &wp->d, 2);
        u->d[i] = _cvtsh_ss(d);
    }
}

/* Q2_K: q the 2-bit codes, s16 the 4-bit scale and bw the 4-bit min of each 16 elements (the
 * mins kind with per-16 mins: summ = sum_s m_s bsums_s). Q3_K: q the codes | hmask bit << 2
 * ([0, 7]), s16 = bw its signed 6-bit scales; sum_s sc_s sum (q - 4) x = sum_s sc_s sum q x -
 * 4 sum_s sc_s bsums_s, as Q6_K's offset of 32. */
static void SL_MV_SUFFIX(gk_unpack_q23)(uint32_t type, const char *w, int64_t b0, int64_t b1,
                                        gk_buf *u)
{
    const bool q3 = type == SL_GGML_Q3_K;
    const int64_t bb = q3 ? (int64_t)sizeof(sl_block_q3_K) : (int64_t)sizeof(sl_block_q2_K);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *p = w + b * bb;
        const sl_block_q3_K *w3 = (const sl_block_q3_K *)p;
        const sl_block_q2_K *w2 = (const sl_block_q2_K *)p;
        const uint8_t *qs = q3 ? w3->qs : w2->qs;
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(q3 ? w3->hmask : w2->qs));
        for (int n = 0; n < 2; n++) {
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * n));
            const __m256i hn = SL_MV_SUFFIX(k23_hnib)(hm, n);
            for (int g = 0; g < 4; g++)
                _mm256_store_si256((__m256i *)(u->q[i] + 128 * n + 32 * g),
                                   SL_MV_SUFFIX(k23_codes)(qv, q3 ? &hn : NULL, g));
        }
        uint16_t d, dmin = 0;
        if (q3) {
            const __m256i sc = SL_MV_SUFFIX(q3k_scales)(w3->scales);
            _mm256_storeu_si256((__m256i *)u->s16[i], sc);
            _mm256_storeu_si256((__m256i *)u->bw[i], sc);
            memcpy(&d, &w3->d, 2);
        } else {
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)w2->scales);
            const __m128i m4 = _mm_set1_epi8(0x0F);
            _mm256_storeu_si256((__m256i *)u->s16[i], _mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
            _mm256_storeu_si256((__m256i *)u->bw[i],
                                _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4)));
            memcpy(&d, &w2->d, 2);
            memcpy(&dmin, &w2->dmin, 2);
        }
        u->d[i] = _cvtsh_ss(d);
        u->dmin[i] = _cvtsh_ss(dmin);
    }
}

/* IQ4_XS: q = table value + 128 (unsigned, [1, 241]: value ^ 0x80 as a byte), s16 the signed
 * per-32 scales ls - 32 twice, bw = s16 (the + 128 is taken back through the block sums as
 * Q6_K's - 32 is: sum_s sc_s sum q x - 128 sum_s sc_s bsums_s), no min. */
static void SL_MV_SUFFIX(gk_unpack_iq4xs)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *p = w + b * (int64_t)sizeof(sl_block_iq4_xs);
        for (int j = 0; j < 8; j++) {
            const __m256i v = SL_MV_SUFFIX(iq4_values)((const uint8_t *)p + 8 + 16 * j);
            _mm256_store_si256((__m256i *)(u->q[i] + 32 * j),
                               _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)));
        }
        const __m128i sc = _mm256_castsi256_si128(SL_MV_SUFFIX(iq4xs_scales)(p));
        const __m256i s2 =
            _mm256_set_m128i(_mm_unpackhi_epi16(sc, sc), _mm_unpacklo_epi16(sc, sc));
        _mm256_storeu_si256((__m256i *)u->s16[i], s2);
        _mm256_storeu_si256((__m256i *)u->bw[i], s2);
        u->d[i] = SL_MV_SUFFIX(g_half)(p);
        u->dmin[i] = 0.0f;
    }
}

/* 8 tokens' Q8_K super-blocks [b0, b1), transposed like g32_panel: q[i][g] holds bytes 4g..
 * 4g+3 of the 8 tokens' super-block b0 + i, bs[i][j] their block sums 2j, 2j+1 (int16 pairs). */
typedef struct gk_panel {
    _Alignas(32) int8_t q[GK_PCH][64][32];
    _Alignas(32) int16_t bs[GK_PCH][8][16];
    _Alignas(32) float d[GK_PCH][8]; /* the tokens' super-block scales */
} gk_panel;

static void SL_MV_SUFFIX(gk_panel_build)(const g_tok8 *g, size_t xb, int64_t b0, int64_t b1,
                                         gk_panel *p)
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0, off = b * (int64_t)xb;
        __m256i r[8];
        for (int c = 0; c <= 8; c++) {
            /* c < 8: elements 32c..32c+31; c == 8: the 16 block sums */
            for (int k = 0; k < 8; k++)
                r[k] = _mm256_loadu_si256((const __m256i *)(g->x[k] + off + 4 + 32 * c));
            SL_MV_SUFFIX(g_transpose8)(r, c < 8 ? (void *)p->q[i][8 * c] : (void *)p->bs[i]);
        }
        for (int k = 0; k < 8; k++) memcpy(&p->d[i][k], g->x[k] + off, 4);
    }
}

/* The integer sums of unpacked super-block i and NP panels' super-block i: sum over the 16-
 * element scale groups of scale * sum q x, and sum_j bw pair j . bsums pair j. G broadcast 4-byte
 * groups accumulate in int16 before widening: Q4_K (q <= 15) 8 groups reach 8 * 2 * 15 * 128 <
 * 2^15, Q5_K (q <= 31) 4, Q6_K (q <= 63) 2. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gk_isum)(
    const gk_buf *u, int64_t i, const gk_panel *p, const int NP, const int G, __m256i va[2],
    __m256i vm[2])
{
    __m256i acc[2], s16[2];
    for (int q = 0; q < NP; q++) acc[q] = s16[q] = _mm256_setzero_si256();
#if SL_MV_AVX512
    /* vpdpbusd sums a scale's groups in int32 at once (one op where vpmaddubsw and an add were
     * two), each scale's sum times the scale by one vpmulld; two chains per panel */
    (void)s16;
    const int VG = G == 2 ? 4 : 8; /* groups under one scale: Q6_K 16 elements, else 32 */
    for (int j = 0; j < 64 / VG; j++) {
        __m256i s[2][2];
        for (int q = 0; q < NP; q++) s[q][0] = s[q][1] = _mm256_setzero_si256();
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int g = j * VG; g < j * VG + VG; g++) {
            int32_t w4;
            memcpy(&w4, u->q[i] + 4 * g, 4);
            const __m256i wv = _mm256_set1_epi32(w4);
            for (int q = 0; q < NP; q++)
                s[q][g % 2] = _mm256_dpbusd_epi32(
                    s[q][g % 2], wv, _mm256_load_si256((const __m256i *)p[q].q[i][g]));
        }
        const __m256i sc = _mm256_set1_epi32(u->s16[i][j * VG / 4]);
        for (int q = 0; q < NP; q++)
            acc[q] = _mm256_add_epi32(
                acc[q], _mm256_mullo_epi32(_mm256_add_epi32(s[q][0], s[q][1]), sc));
    }
#else
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
    for (int g = 0; g < 64; g++) {
        int32_t w4;
        memcpy(&w4, u->q[i] + 4 * g, 4);
        const __m256i wv = _mm256_set1_epi32(w4);
        for (int q = 0; q < NP; q++) {
            const __m256i xv = _mm256_load_si256((const __m256i *)p[q].q[i][g]);
            s16[q] = _mm256_add_epi16(s16[q], _mm256_maddubs_epi16(wv, xv));
        }
        if ((g + 1) % G == 0) {
            const __m256i sc = _mm256_set1_epi16(u->s16[i][g / 4]);
            for (int q = 0; q < NP; q++) {
                acc[q] = _mm256_add_epi32(acc[q], _mm256_madd_epi16(s16[q], sc));
                s16[q] = _mm256_setzero_si256();
            }
        }
    }
#endif
    for (int q = 0; q < NP; q++) {
        va[q] = acc[q];
        vm[q] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; j++) {
        int32_t w2;
        memcpy(&w2, &u->bw[i][2 * j], 4);
        const __m256i bw = _mm256_set1_epi32(w2);
        for (int q = 0; q < NP; q++)
            vm[q] = _mm256_add_epi32(
                vm[q], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)p[q].bs[i][j]), bw));
    }
}

/* Super-blocks [b0, b1) of one unpacked row chunk against NP panels of 8 tokens. The mins
 * kinds (SH 0: Q4_K/Q5_K, Q2_K): isum = sum_j sc_j sum q x and summ = sum_j bw_j bsums_j,
 * then the reference's term_k; the offset kinds (Q6_K SH 5, Q3_K SH 2): sum_s sc_s sum (q -
 * 2^SH) x = sum_s sc_s sum q x - 2^SH sum_s sc_s bsums_s (exact integers), then term_d. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gk_dot_panels)(
    const gk_buf *u, const gk_panel *p, const int NP, const int G, const int SH, int64_t b0,
    int64_t b1, __m256 lt[GK_NP][8])
{
    const bool q6 = SH != 0;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const __m256 dw = _mm256_set1_ps(u->d[i]), mw = _mm256_set1_ps(u->dmin[i]);
        __m256i va[2], vm[2];
        SL_MV_SUFFIX(gk_isum)(u, i, p, NP, G, va, vm);
        for (int q = 0; q < NP; q++) {
            const __m256 dx = _mm256_load_ps(p[q].d[i]);
            __m256 t;
            if (q6) {
                const __m256i v = _mm256_sub_epi32(va[q], _mm256_slli_epi32(vm[q], SH));
                t = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(dw, dx));
            } else {
                const __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(va[q]), _mm256_mul_ps(dw, dx));
                t = _mm256_sub_ps(a,
                                  _mm256_mul_ps(_mm256_cvtepi32_ps(vm[q]), _mm256_mul_ps(mw, dx)));
            }
            lt[q][b % 8] = _mm256_add_ps(lt[q][b % 8], t);
        }
    }
}

typedef void (*gk_dot_fn)(const gk_buf *, const gk_panel *, int64_t, int64_t, __m256[GK_NP][8]);

/* IQ4_XS (gk_unpack_iq4xs) against NP panels: isum = sum_j (ls_j - 32) sum (q - 128) x, then the
 * reference's term_d. AVX-512: vpdpbusd takes q unsigned (no int16 pair sums to overflow), one
 * 32-element sub-block's sums times its scale, less 128 * (the scales . block sums). AVX2:
 * q up to 241 would overflow vpmaddubsw's pair sums, so the value (q ^ 0x80) goes through the
 * sign trick (|v| <= 127: pairs <= 2 * 127 * 127 < 2^15), each group scaled by vpmaddwd. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gk_dot_iq4xs)(
    const gk_buf *u, const gk_panel *p, const int NP, int64_t b0, int64_t b1, __m256 lt[GK_NP][8])
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#if SL_MV_AVX512
        for (int j = 0; j < 8; j++) {
            /* four chains per panel: vpdpbusd's latency, not its throughput, would bound one */
            __m256i s[2][4];
            for (int q = 0; q < NP; q++)
                for (int c = 0; c < 4; c++) s[q][c] = _mm256_setzero_si256();
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
            for (int g = 8 * j; g < 8 * j + 8; g++) {
                int32_t w4;
                memcpy(&w4, u->q[i] + 4 * g, 4);
                const __m256i wv = _mm256_set1_epi32(w4);
                for (int q = 0; q < NP; q++)
                    s[q][g % 4] = _mm256_dpbusd_epi32(
                        s[q][g % 4], wv, _mm256_load_si256((const __m256i *)p[q].q[i][g]));
            }
            const __m256i sc = _mm256_set1_epi32(u->s16[i][2 * j]);
            for (int q = 0; q < NP; q++) {
                const __m256i v = _mm256_add_epi32(_mm256_add_epi32(s[q][0], s[q][1]),
                                                   _mm256_add_epi32(s[q][2], s[q][3]));
                acc[q] = _mm256_add_epi32(acc[q], _mm256_mullo_epi32(v, sc));
            }
        }
        for (int j = 0; j < 8; j++) {
            int32_t w2;
            memcpy(&w2, &u->bw[i][2 * j], 4);
            const __m256i bw = _mm256_set1_epi32(w2);
            for (int q = 0; q < NP; q++)
                acc[q] = _mm256_sub_epi32(
                    acc[q], _mm256_slli_epi32(
                                _mm256_madd_epi16(
                                    _mm256_load_si256((const __m256i *)p[q].bs[i][j]), bw),
                                7));
        }
#else
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int g = 0; g < 64; g++) {
            int32_t w4;
            memcpy(&w4, u->q[i] + 4 * g, 4);
            const __m256i wv =
                _mm256_xor_si256(_mm256_set1_epi32(w4), _mm256_set1_epi8((char)0x80));
            const __m256i aw = _mm256_sign_epi8(wv, wv);
            const __m256i sc = _mm256_set1_epi16(u->s16[i][g / 4]);
            for (int q = 0; q < NP; q++) {
                const __m256i xv = _mm256_sign_epi8(
                    _mm256_load_si256((const __m256i *)p[q].q[i][g]), wv);
                acc[q] = _mm256_add_epi32(
                    acc[q], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xv), sc));
            }
        }
#endif
        const __m256 dw = _mm256_set1_ps(u->d[i]);
        for (int q = 0; q < NP; q++) {
            const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[q]),
                                           _mm256_mul_ps(dw, _mm256_load_ps(p[q].d[i])));
            lt[q][b % 8] = _mm256_add_ps(lt[q][b % 8], t);
        }
    }
}

static void SL_MV_SUFFIX(gk_dot_iq4xs_1)(const gk_buf *u, const gk_panel *p, int64_t b0,
                                         int64_t b1, __m256 lt[GK_NP][8])
{
    SL_MV_SUFFIX(gk_dot_iq4xs)(u, p, 1, b0, b1, lt);
}

static void SL_MV_SUFFIX(gk_dot_iq4xs_2)(const gk_buf *u, const gk_panel *p, int64_t b0,
                                         int64_t b1, __m256 lt[GK_NP][8])
{
    SL_MV_SUFFIX(gk_dot_iq4xs)(u, p, 2, b0, b1, lt);
}

#define SL_GK_DOT(NAME, NP, G, SH)                                                            \
    static void SL_MV_SUFFIX(NAME)(const gk_buf *u, const gk_panel *p, int64_t b0, int64_t b1, \
                                   __m256 lt[GK_NP][8])                                       \
    {                                                                                         \
        SL_MV_SUFFIX(gk_dot_panels)(u, p, NP, G, SH, b0, b1, lt);                             \
    }
SL_GK_DOT(gk_dot_1_8, 1, 8, 0)
SL_GK_DOT(gk_dot_2_8, 2, 8, 0)
SL_GK_DOT(gk_dot_1_4, 1, 4, 0)
SL_GK_DOT(gk_dot_2_4, 2, 4, 0)
SL_GK_DOT(gk_dot_1_2, 1, 2, 5)
SL_GK_DOT(gk_dot_2_2, 2, 2, 5)
SL_GK_DOT(gk_dot_q2_1, 1, 2, 0)
SL_GK_DOT(gk_dot_q2_2, 2, 2, 0)
SL_GK_DOT(gk_dot_q3_1, 1, 2, 2)
SL_GK_DOT(gk_dot_q3_2, 2, 2, 2)
#undef SL_GK_DOT

/* Rows in groups of GK_ROWS, tokens in groups of 8 * GK_NP: the panels are built once per row
 * group and chunk of GK_PCH super-blocks, each row chunk unpacked once per token group. */
/* noinline: gemm_kv (AVX-512 VNNI) calls it for short groups; inlined, their stacks would add */
static __attribute__((noinline)) void SL_MV_SUFFIX(gemm_k)(const sl__mv_type *t,
                                                         const sl__gemm_rows *a, int64_t i0,
                                                         int64_t i1)
{
    const bool r8 = t->type == SL_TYPE_Q4_K_R8, iq4 = t->type == SL_GGML_IQ4_XS;
    const bool q2 = t->type == SL_GGML_Q2_K, q3 = t->type == SL_GGML_Q3_K;
    /* 4-byte groups per int16 stage on AVX2 (gk_isum), and whether a scale covers 16 (G 2) */
    const int G = t->type == SL_GGML_Q4_K || r8 ? 8 : t->type == SL_GGML_Q5_K ? 4 : 2;
    const gk_dot_fn d1 = iq4      ? SL_MV_SUFFIX(gk_dot_iq4xs_1)
                         : q2     ? SL_MV_SUFFIX(gk_dot_q2_1)
                         : q3     ? SL_MV_SUFFIX(gk_dot_q3_1)
                         : G == 8 ? SL_MV_SUFFIX(gk_dot_1_8)
                         : G == 4 ? SL_MV_SUFFIX(gk_dot_1_4)
                                  : SL_MV_SUFFIX(gk_dot_1_2);
    const gk_dot_fn d2 = iq4      ? SL_MV_SUFFIX(gk_dot_iq4xs_2)
                         : q2     ? SL_MV_SUFFIX(gk_dot_q2_2)
                         : q3     ? SL_MV_SUFFIX(gk_dot_q3_2)
                         : G == 8 ? SL_MV_SUFFIX(gk_dot_2_8)
                         : G == 4 ? SL_MV_SUFFIX(gk_dot_2_4)
                                  : SL_MV_SUFFIX(gk_dot_2_2);
    gk_buf u;
    gk_buf u8[8]; /* Q4_K_R8 dense rows: a group's eight rows unpacked together */
    gk_panel p[GK_NP];
    __m256 lt[GK_ROWS][GK_NP][8];
    /* a row of one chunk (an MoE expert's 1024-wide rows): its panels serve every row group */
    const bool one_chunk = a->nb <= GK_PCH;
    for (int64_t t0 = 0; t0 < a->n_tok; t0 += 8 * GK_NP) {
        const int64_t left = a->n_tok - t0;
        const int np = left >= 8 * GK_NP ? GK_NP : (int)((left + 7) / 8);
        for (int q = 0; one_chunk && q < np; q++) {
            const g_tok8 g = SL_MV_SUFFIX(g_tokens)(a->xq, a->arb, t0 + 8 * q, a->n_tok);
            SL_MV_SUFFIX(gk_panel_build)(&g, a->xb, 0, a->nb, &p[q]);
        }
        for (int64_t r0 = i0; r0 < i1; r0 += GK_ROWS) {
            const int64_t nr = i1 - r0 < GK_ROWS ? i1 - r0 : GK_ROWS;
            __m256 zero = _mm256_setzero_ps(); /* opaque: vector stores, no memset call */
            __asm__("" : "+x"(zero));
            for (int64_t k = 0; k < nr; k++)
                for (int q = 0; q < np; q++)
                    for (int l = 0; l < 8; l++) lt[k][q][l] = zero;
            for (int64_t c0 = 0; c0 < a->nb; c0 += GK_PCH) {
                const int64_t c1 = a->nb - c0 < GK_PCH ? a->nb : c0 + GK_PCH;
                for (int q = 0; !one_chunk && q < np; q++) {
                    const g_tok8 g = SL_MV_SUFFIX(g_tokens)(a->xq, a->arb, t0 + 8 * q, a->n_tok);
                    SL_MV_SUFFIX(gk_panel_build)(&g, a->xb, c0, c1, &p[q]);
                }
                for (int64_t k = 0; k < nr; k++) {
                    const int64_t r = a->idx ? a->idx[r0 + k] : r0 + k;
                    const char *w = a->w + (size_t)r * a->wrb;
                    const gk_buf *ur = &u;
                    if (r8 && !a->idx) { /* i0, i1 whole groups (matvec.c: row_grain) */
                        if (r % 8 == 0)
                            SL_MV_SUFFIX(gk_unpack_r8x8)(a->w, a->nb, r / 8, c0, c1, u8);
                        ur = &u8[r % 8];
                    } else if (r8) { /* a gathered row: copied out, read as Q4_K */
                        sl_block_q4_K row[GK_PCH];
                        sl__q4_K_r8_row(a->w, a->nb, r, c0, c1, row);
                        SL_MV_SUFFIX(gk_unpack_q45)(SL_GGML_Q4_K, (const char *)row, 0, c1 - c0,
                                                    &u);
                    } else if (iq4) {
                        SL_MV_SUFFIX(gk_unpack_iq4xs)(w, c0, c1, &u);
                    } else if (q2 || q3) {
                        SL_MV_SUFFIX(gk_unpack_q23)(t->type, w, c0, c1, &u);
                    } else if (G == 2) {
                        SL_MV_SUFFIX(gk_unpack_q6)(w, c0, c1, &u);
                    } else {
                        SL_MV_SUFFIX(gk_unpack_q45)(t->type, w, c0, c1, &u);
                    }
                    for (int q = 0; q < np; q += 2)
                        (np - q > 1 ? d2 : d1)(ur, &p[q], c0, c1, &lt[k][q]);
                }
            }
            /* token by token, so that a token's stores of the row group share cache lines
             * (y is token-major: one token's rows are y_stride floats from the next's) */
            float res[GK_ROWS][8 * GK_NP];
            int64_t out[GK_ROWS];
            for (int64_t k = 0; k < nr; k++) {
                const int64_t i = r0 + k;
                out[k] = a->idx && !a->scatter ? i : a->idx ? a->idx[i] : i;
                for (int q = 0; q < np; q++) SL_MV_SUFFIX(g_reduce8)(lt[k][q], res[k] + 8 * q);
            }
            const int64_t nt = left < 8 * GK_NP ? left : 8 * GK_NP;
            for (int64_t tt = 0; tt < nt; tt++) {
                float *y = a->y + (t0 + tt) * a->y_stride;
                for (int64_t k = 0; k < nr; k++) {
                    __asm__("" : "+r"(y)); /* AVX-512: else gathers and scatters (slower) */
                    y[out[k]] = res[k][tt];
                }
            }
        }
    }
}

#if SL_MV_AVX512
/* the K-quants' VNNI kernel: gemm_k_vnni_tmpl.h, which matvec_avx512.c includes next */
static void SL_MV_SUFFIX(gemm_kv)(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0,
                                  int64_t i1);
#define SL_GEMM_K SL_MV_SUFFIX(gemm_kv)
#else
#define SL_GEMM_K SL_MV_SUFFIX(gemm_k)
#endif

/* gemm.h's sl__gemm_panel8_<isa>: matvec_avx2.c's sl__gemm_avx2 is this; the AVX-512 build's
 * (gemm_few32_vnni_tmpl.h) puts its VNNI kernels of the 32-element types first, and its K-quant
 * entries here are already the VNNI gemm_kv. */
#ifndef SL_MV_KERNELS_ONLY
sl__gemm_fn SL_MV_SUFFIX(sl__gemm_panel8)(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(gemm_q8_0);
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(gemm_q4_0);
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(gemm_q5_0);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(gemm_mxfp4);
    case SL_GGML_Q4_1: return SL_MV_SUFFIX(gemm_q4_1);
    case SL_GGML_Q5_1: return SL_MV_SUFFIX(gemm_q5_1);
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(gemm_iq4_nl);
    case SL_GGML_Q4_K:
    case SL_TYPE_Q4_K_R8:
    case SL_GGML_Q5_K:
    case SL_GGML_Q6_K:
    case SL_GGML_Q3_K: /* an offset kind of gemm_kv, as Q6_K */
    case SL_GGML_IQ4_XS: return SL_GEMM_K;
    case SL_GGML_Q2_K: /* 8-token panels on both ISAs (gemm_kv's mins are per 32) */
        return SL_MV_SUFFIX(gemm_k);
    /* the codebook types: AVX-512 VNNI unpacks them once per row and call into gemm_kv's
     * offset kinds; AVX2 decodes once per row and 8 tokens (matvec_iq_x86_tmpl.h) */
#if SL_MV_AVX512
#define SL_MV_IQ_CASE_(name, code, B, NAME) case code: return SL_GEMM_K;
#else
#define SL_MV_IQ_CASE_(name, code, B, NAME) case code: return SL_MV_SUFFIX(gemm_##name);
#endif
        SL__IQ_TYPES(SL_MV_IQ_CASE_)
#undef SL_MV_IQ_CASE_
    default: return NULL;
    }
}
#endif
#undef SL_GEMM_K
