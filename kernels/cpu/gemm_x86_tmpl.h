/* kernels/cpu/gemm_x86_tmpl.h: the batch kernels of kernels/cpu/gemm.h, written once and
 * compiled per ISA by matvec_avx2.c / matvec_avx512.c right after matvec_x86_tmpl.h (same
 * SL_MV_SUFFIX, same target region; its helpers are reused here). This file: the 8-token
 * helpers and the 32-element block types' kernel; gemm_k_x86_tmpl.h, included right after it,
 * the K-quants' kernel and the type dispatch.
 *
 * Why they are faster than a range kernel per token: the range kernels unpack every weight
 * block (nibbles, high bits, |w| for the sign trick, scale conversions) once per token, reduce
 * each block's integer sum horizontally, and finish odd blocks (a 640-wide row has 20 blocks,
 * 4 past the last 8-block group; a 1024-wide K-quant row has 4 super-blocks) with scalar float
 * work. Here:
 * - 32-element block types (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL; Q4_1, Q5_1 with Q8_1
 *   activations, whose block term adds the weight min times the activation block sum): a panel
 *   GEMM (the AVX2 build's; the AVX-512 VNNI build serves them with gemm_few32_vnni_tmpl.h's
 *   kernels). The activation blocks of 8 tokens are transposed
 *   once per 64 rows so one vector holds the same 4 elements of the 8 tokens; each row chunk is
 *   unpacked once per 16 tokens and each 4-byte weight group, broadcast, meets 8 tokens in one
 *   vpmaddubsw: a block's 8 integer sums come out as one vector, with no horizontal sums;
 * - K-quants (Q4_K, Q5_K, Q6_K) and IQ4_XS: the same panel scheme over Q8_K super-blocks
 *   (their block sums transposed too; IQ4_XS's signed table values: gk_dot_iq4xs; the
 *   AVX-512 VNNI build runs the K-quants through gemm_k_vnni_tmpl.h, which hands calls of at
 *   most 8 tokens here). A broadcast 4-byte group of unsigned weights meets 8 tokens in one
 *   vpmaddubsw; the int16 sums of the groups under one 6-bit scale (as many as cannot
 *   overflow) are scaled by one vpmaddwd (AVX-512: one vpdpbusd per group sums them in int32,
 *   one vpmulld per scale), so a super-block's 8 integer sums come out as one vector;
 *   Q4_K/Q5_K's mins and Q6_K's -32 go through the transposed block sums. Each row chunk is
 *   unpacked once per 32 tokens, each panel built once per 16 rows.
 * Why they give the reference's bits: the unpacked values are the same integers and floats the
 * range kernels compute, integer sums are exact in any order, and the float ops per (row,
 * token) are the reference's, lane for lane: the lanes are kept transposed (lt[l] holds lane l
 * of 8 tokens), block b's terms are added to lt[b % 8] in block order, and the final reduction
 * is sl__mv_reduce8's, element-wise over the 8 tokens. A group short of 8 tokens repeats its
 * last token in the spare slots and drops their results. */

#include "kernels/cpu/q32_offset.h"

/* The activation rows of 8 tokens (spare slots repeat the last real one). */
typedef struct g_tok8 {
    const char *x[8];
} g_tok8;

static g_tok8 SL_MV_SUFFIX(g_tokens)(const void *xq, size_t arb, int64_t t0, int64_t n_tok)
{
    g_tok8 g;
    for (int64_t k = 0; k < 8; k++)
        g.x[k] = (const char *)xq + (size_t)(t0 + k < n_tok ? t0 + k : n_tok - 1) * arb;
    return g;
}

/* The 8 tokens' half scales at byte offset off of their rows. */
static inline __m256 SL_MV_SUFFIX(g_halves8)(const g_tok8 *g, int64_t off)
{
    uint16_t h[8];
    for (int k = 0; k < 8; k++) memcpy(&h[k], g->x[k] + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* The 8 tokens' results from the transposed lanes (sl__mv_reduce8, element-wise). */
static inline void SL_MV_SUFFIX(g_reduce8)(const __m256 lt[8], float r[8])
{
    const __m256 u0 = _mm256_add_ps(lt[0], lt[4]), u1 = _mm256_add_ps(lt[1], lt[5]);
    const __m256 u2 = _mm256_add_ps(lt[2], lt[6]), u3 = _mm256_add_ps(lt[3], lt[7]);
    _mm256_storeu_ps(r, _mm256_add_ps(_mm256_add_ps(u0, u2), _mm256_add_ps(u1, u3)));
}

/* ---- 32-element blocks: Q8_0, Q4_0, Q5_0, MXFP4 (Q8_0 activations), Q4_1, Q5_1 (Q8_1) ---- */

enum { G32_CH = 32 }; /* blocks per unpacked chunk and activation panel (a multiple of 8) */

/* G32_OFFSET: the AVX2 kernel of the narrow types (Q4_0, Q5_0, MXFP4) feeds vpmaddubsw the
 * weights as unsigned u = w + c (c: q32_offset.h) against the signed x, which saves the vpsignb
 * per group that the sign trick costs; sum u x - c sum x is the same exact integer, and c sum x
 * of each token and block is formed once per panel (g32_panel.cx), not once per row. Pair sums
 * reach 2 * 31 * 127, so 4 groups stay below 2^15 in int16. */
#define G32_OFFSET(wide) (!(wide) && !SL_MV_AVX512)

typedef struct g32_buf {
    _Alignas(32) int8_t sw[G32_CH * 32]; /* weights, element order: signed, or (G32_OFFSET)
                                          * unsigned u = w + c */
    _Alignas(32) int8_t aw[G32_CH * 32]; /* |w|: vpmaddubsw's unsigned operand (sign trick) */
    _Alignas(32) float dw[G32_CH];       /* block scales as the reference converts them */
    _Alignas(32) float mw[G32_CH];       /* Q4_1/Q5_1: block mins (unused otherwise) */
} g32_buf;

/* Weights up to |w| = 128 (Q8_0) or 127 (IQ4_NL's table): the sign trick, each group widened
 * to int32 at once (g32_group's wide); the other types' |w| <= 16 or u = w + c <= 31. */
static inline bool SL_MV_SUFFIX(g32_wide)(uint32_t type)
{
    return type == SL_GGML_Q8_0 || type == SL_GGML_IQ4_NL;
}

/* Q4_1 and Q5_1: unsigned quants, a min per block, Q8_1 activations (their block sums). */
static inline bool SL_MV_SUFFIX(g32_dm)(uint32_t type)
{
    return type == SL_GGML_Q4_1 || type == SL_GGML_Q5_1;
}

static inline float SL_MV_SUFFIX(g_half)(const char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

static inline __attribute__((always_inline)) void SL_MV_SUFFIX(g32_unpack)(
    uint32_t type, const char *w, int64_t b0, int64_t b1, g32_buf *u)
{
    const bool offset = G32_OFFSET(SL_MV_SUFFIX(g32_wide)(type));
    /* G32_OFFSET: u = w + c, so the Q4_0 and Q5_0 quants stay as stored */
    const __m256i eight = _mm256_set1_epi8(offset ? 0 : 8);
    const __m256i f0 = _mm256_set1_epi8(offset ? 0x10 : (char)0xF0);
    const __m128i kv = _mm_add_epi8(_mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4),
                                    _mm_set1_epi8(offset ? SL_Q32_OFFSET_MXFP4 : 0));
    const __m256i table = _mm256_set_m128i(kv, kv);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i q;
        switch (type) {
        case SL_GGML_Q8_0: {
            const char *p = w + b * 34;
            q = _mm256_loadu_si256((const __m256i *)(p + 2));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            break;
        }
        case SL_GGML_Q4_0: {
            const char *p = w + b * 18;
            q = _mm256_sub_epi8(SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 2)), eight);
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            break;
        }
        case SL_GGML_Q5_0: {
            const char *p = w + b * 22;
            const __m256i hb = SL_MV_SUFFIX(qh_bytes)(p + 2); /* bit 4 set */
            q = _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 6)),
                                offset ? _mm256_and_si256(hb, f0) : _mm256_andnot_si256(hb, f0));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            break;
        }
        case SL_GGML_Q4_1: { /* unsigned 0..15: as stored, offset or sign trick alike */
            const char *p = w + b * 20;
            q = SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 4));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            u->mw[i] = SL_MV_SUFFIX(g_half)(p + 2);
            break;
        }
        case SL_GGML_IQ4_NL: { /* the non-linear table, signed (wide: never offset) */
            const char *p = w + b * 18;
            q = SL_MV_SUFFIX(iq4_values)((const uint8_t *)(p + 2));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            break;
        }
        case SL_GGML_Q5_1: { /* unsigned 0..31 */
            const char *p = w + b * 24;
            const __m256i hb = SL_MV_SUFFIX(qh_bytes)(p + 4);
            q = _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 8)),
                                _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
            u->mw[i] = SL_MV_SUFFIX(g_half)(p + 2);
            break;
        }
        default: { /* MXFP4 */
            const char *p = w + b * 17;
            q = _mm256_shuffle_epi8(table, SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 1)));
            u->dw[i] = sl__mv_e8m0_half((uint8_t)p[0]);
            break;
        }
        }
        _mm256_store_si256((__m256i *)(u->sw + 32 * i), q);
        if (!offset) _mm256_store_si256((__m256i *)(u->aw + 32 * i), _mm256_sign_epi8(q, q));
    }
}

/* The 8x8 transpose of 32-bit groups: o[g] gets group g of r[0..7]. */
static inline void SL_MV_SUFFIX(g_transpose8v)(const __m256i r[8], __m256i o[8])
{
    __m256i t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
        u[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
        u[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
        u[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
    }
    for (int k = 0; k < 4; k++) {
        o[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        o[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

/* The same stored: row g of dst (32 bytes) gets group g of r[0..7]. */
static inline void SL_MV_SUFFIX(g_transpose8)(const __m256i r[8], void *dst)
{
    __m256i o[8];
    SL_MV_SUFFIX(g_transpose8v)(r, o);
    for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)dst + k, o[k]);
}

/* 8 tokens' Q8_0 blocks [b0, b0 + G32_CH), transposed so that one vector holds the same 4
 * elements of the 8 tokens: q[i][g] = token k's bytes 4g..4g+3 of block b0 + i at bytes 4k..
 * 4k+3. A broadcast 4-byte weight group then meets all 8 tokens in one vpmaddubsw, and a
 * block's 8 integer sums come out as one vector (no horizontal sums). */
typedef struct g32_panel {
    _Alignas(32) int8_t q[G32_CH][8][32];
    _Alignas(32) float d[G32_CH][8]; /* the tokens' block scales */
    _Alignas(32) int32_t cx[G32_CH][8]; /* c * the tokens' block sums of x (G32_OFFSET) */
    _Alignas(32) float s[G32_CH][8]; /* Q8_1 activations: the tokens' block s (d * sum q) */
} g32_panel;

/* c: G32_OFFSET's c of the weight type, 0 when not offset (cx then unused). q81: the
 * activations are Q8_1 (36-byte blocks d, s, qs), else Q8_0 (34 bytes: d, qs). */
static void SL_MV_SUFFIX(g32_panel_build)(const g_tok8 *g, int64_t b0, int64_t b1, int c,
                                          bool q81, g32_panel *p)
{
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    const int64_t ab = q81 ? 36 : 34, qo = q81 ? 4 : 2;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i r[8];
        for (int k = 0; k < 8; k++) {
            r[k] = _mm256_loadu_si256((const __m256i *)(g->x[k] + b * ab + qo));
            p->d[i][k] = SL_MV_SUFFIX(g_half)(g->x[k] + b * ab);
            if (q81) p->s[i][k] = SL_MV_SUFFIX(g_half)(g->x[k] + b * ab + 2);
        }
        SL_MV_SUFFIX(g_transpose8)(r, p->q[i]);
        if (!c) continue;
        __m256i h = _mm256_setzero_si256(); /* int16 pair sums: 8 * 2 * 127 at most */
        for (int gi = 0; gi < 8; gi++)
            h = _mm256_add_epi16(h, _mm256_maddubs_epi16(
                                        one8, _mm256_load_si256((const __m256i *)p->q[i][gi])));
        _mm256_store_si256((__m256i *)p->cx[i],
                           _mm256_mullo_epi32(_mm256_madd_epi16(h, one16), _mm256_set1_epi32(c)));
    }
}

/* Adds |w| . (x signed by w) of one broadcast group to the 8 tokens' sums s. wide (Q8_0
 * weights, |w| <= 128): pair sums reach 2 * 128 * 127, so each group widens to int32 at once;
 * otherwise (|w| <= 16) the int16 pair sums of a block's 8 groups stay below 8 * 2 * 16 * 127
 * < 2^15 and widen once per block. */
static inline __m256i SL_MV_SUFFIX(g32_group)(__m256i s, __m256i aw, __m256i sw, const int8_t *x,
                                              bool wide)
{
    const __m256i xs = _mm256_sign_epi8(_mm256_load_si256((const __m256i *)x), sw);
#if SL_MV_AVX512
    (void)wide;
    return _mm256_dpbusd_epi32(s, aw, xs);
#else
    const __m256i m = _mm256_maddubs_epi16(aw, xs);
    return wide ? _mm256_add_epi32(s, _mm256_madd_epi16(m, _mm256_set1_epi16(1)))
                : _mm256_add_epi16(s, m);
#endif
}

static inline __m256i SL_MV_SUFFIX(g32_widen)(__m256i s, bool wide)
{
#if SL_MV_AVX512
    (void)wide;
    return s;
#else
    return wide ? s : _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
}

/* One unpacked row chunk [b0, b1) against NP (1 or 2, a constant after inlining) panels of 8
 * tokens. The block term is (float)isum * (dw * dx) (MXFP4's reference writes dx * dw: the
 * same float); DM (Q4_1, Q5_1: unsigned quants, no offset to take back) adds mw * sx to it
 * before it joins the lane, as sl__mv_term_dm. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(g32_dot_panels)(
    const g32_buf *u, const g32_panel *p, const int NP, int64_t b0, int64_t b1, const bool wide,
    const bool DM, __m256 lt[2][8])
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if (G32_OFFSET(wide)) {
            __m256i h[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            const __m256i one = _mm256_set1_epi16(1);
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
            for (int g = 0; g < 8; g++) {
                int32_t w4;
                memcpy(&w4, u->sw + 32 * i + 4 * g, 4);
                const __m256i uw = _mm256_set1_epi32(w4);
                for (int q = 0; q < NP; q++)
                    h[q] = _mm256_add_epi16(
                        h[q], _mm256_maddubs_epi16(
                                  uw, _mm256_load_si256((const __m256i *)p[q].q[i][g])));
                if (g % 4 == 3)
                    for (int q = 0; q < NP; q++) {
                        s[q] = _mm256_add_epi32(s[q], _mm256_madd_epi16(h[q], one));
                        h[q] = _mm256_setzero_si256();
                    }
            }
            for (int q = 0; q < NP; q++) {
                const __m256i v =
                    DM ? s[q]
                       : _mm256_sub_epi32(s[q], _mm256_load_si256((const __m256i *)p[q].cx[i]));
                __m256 t = _mm256_mul_ps(
                    _mm256_cvtepi32_ps(v),
                    _mm256_mul_ps(_mm256_set1_ps(u->dw[i]), _mm256_load_ps(p[q].d[i])));
                if (DM)
                    t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_set1_ps(u->mw[i]),
                                                       _mm256_load_ps(p[q].s[i])));
                lt[q][b % 8] = _mm256_add_ps(lt[q][b % 8], t);
            }
            continue;
        }
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int g = 0; g < 8; g++) {
            int32_t a4, w4;
            memcpy(&a4, u->aw + 32 * i + 4 * g, 4);
            memcpy(&w4, u->sw + 32 * i + 4 * g, 4);
            const __m256i aw = _mm256_set1_epi32(a4), sw = _mm256_set1_epi32(w4);
            for (int q = 0; q < NP; q++)
                s[q] = SL_MV_SUFFIX(g32_group)(s[q], aw, sw, p[q].q[i][g], wide);
        }
        const __m256 dw = _mm256_set1_ps(u->dw[i]);
        for (int q = 0; q < NP; q++) {
            const __m256 isum = _mm256_cvtepi32_ps(SL_MV_SUFFIX(g32_widen)(s[q], wide));
            __m256 t = _mm256_mul_ps(isum, _mm256_mul_ps(dw, _mm256_load_ps(p[q].d[i])));
            if (DM)
                t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_set1_ps(u->mw[i]),
                                                   _mm256_load_ps(p[q].s[i])));
            lt[q][b % 8] = _mm256_add_ps(lt[q][b % 8], t);
        }
    }
}

/* The six specialisations (panels x widening / mins) the row loop picks from. */
#define SL_G32_DOT(NAME, NP, WIDE, DM)                                                        \
    static void SL_MV_SUFFIX(NAME)(const g32_buf *u, const g32_panel *p, int64_t b0,         \
                                   int64_t b1, __m256 lt[2][8])                               \
    {                                                                                         \
        SL_MV_SUFFIX(g32_dot_panels)(u, p, NP, b0, b1, WIDE, DM, lt);                         \
    }
SL_G32_DOT(g32_dot_1n, 1, false, false)
SL_G32_DOT(g32_dot_2n, 2, false, false)
SL_G32_DOT(g32_dot_1w, 1, true, false)
SL_G32_DOT(g32_dot_2w, 2, true, false)
SL_G32_DOT(g32_dot_1d, 1, false, true)
SL_G32_DOT(g32_dot_2d, 2, false, true)
#undef SL_G32_DOT

enum { G32_ROWS = 64 }; /* rows whose lanes live at once beside one pair of panels */

/* The results of rows [r0, r0 + nr) of a call for tokens [t0, t0 + 8 np) (the real ones)
 * from their transposed lanes lt[k][q] (row r0 + k, tokens t0 + 8q ..), stored token by
 * token: a token's stores of the row group then share cache lines, where row by row they go
 * y_stride floats apart (at 1024 rows, 4 KiB: every token's line in one L1 set). */
static void SL_MV_SUFFIX(g_store_rows)(const sl__gemm_rows *a, const __m256 (*lt)[2][8],
                                       int64_t r0, int64_t nr, int64_t t0, int np)
{
    float res[G32_ROWS][16];
    for (int64_t k = 0; k < nr; k++)
        for (int q = 0; q < np; q++) SL_MV_SUFFIX(g_reduce8)(lt[k][q], res[k] + 8 * q);
    const int64_t nt = a->n_tok - t0 < 8 * np ? a->n_tok - t0 : 8 * np;
    for (int64_t tt = 0; tt < nt; tt++) {
        float *y = a->y + (t0 + tt) * a->y_stride;
        for (int64_t k = 0; k < nr; k++) {
            const int64_t i = r0 + k;
            y[a->idx && !a->scatter ? i : a->idx ? a->idx[i] : i] = res[k][tt];
        }
    }
}

#if !SL_MV_AVX512
/* Whether the panels' leftover tokens (sl__gemm_tail) may go to the whole-row kernel
 * (rows32_x86_tmpl.h: MXFP4 and Q4_0, rows of 8 .. SL_MV_HX_MAX blocks; Q5_0's row kernel,
 * which also unpacks qh per token, gains too little to pay). */
static inline bool SL_MV_SUFFIX(g32_few_ok)(uint32_t type, const sl__gemm_rows *a)
{
    return (type == SL_GGML_MXFP4 || type == SL_GGML_Q4_0) && a->nb >= 8 &&
           a->nb <= SL_MV_HX_MAX;
}

/* Tokens [t0, n_tok) of rows [i0, i1) (the tail, when g32_few_ok): one row kernel call per
 * (row, token), which unpacks each block once per token but fills no 8-token panel with
 * repeats (the bits are the same either way). */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(g32_few)(uint32_t type, const sl__gemm_rows *a, int64_t t0, int64_t i0, int64_t i1)
{
    const int kind = type == SL_GGML_MXFP4 ? SL_R32_MXFP4 : SL_R32_Q4_0;
    r32_x p;
    for (int64_t t = t0; t < a->n_tok; t++) {
        const char *xq = a->xq + (size_t)t * a->arb;
        SL_MV_SUFFIX(r32_prep)(xq, a->nb, kind, &p);
        for (int64_t i = i0; i < i1; i++) {
            const int64_t r = a->idx ? a->idx[i] : i;
            const int64_t out = a->idx && !a->scatter ? i : r;
            a->y[t * a->y_stride + out] =
                SL_MV_SUFFIX(r32_row)(a->w + (size_t)r * a->wrb, xq, a->nb, &p, kind);
        }
    }
}
#endif

/* Rows in groups of G32_ROWS, tokens in groups of 16 (two panels): each panel pair is built
 * once per row group and chunk, each row chunk unpacked once per 16 tokens. The tail
 * (sl__gemm_tail) goes to the whole-row kernel where g32_few_ok. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gemm_q32)(
    const uint32_t type, const sl__gemm_rows *call, int64_t i0, int64_t i1)
{
    const bool wide = SL_MV_SUFFIX(g32_wide)(type), dm = SL_MV_SUFFIX(g32_dm)(type);
#if !SL_MV_AVX512
    const int64_t tail = SL_MV_SUFFIX(g32_few_ok)(type, call) ? sl__gemm_tail(call->n_tok, false) : 0;
#else
    const int64_t tail = 0;
#endif
    sl__gemm_rows pan = *call; /* the tokens the panels take */
    pan.n_tok -= tail;
    const sl__gemm_rows *a = &pan;
    g32_buf u;
    g32_panel p[2];
    __m256 lt[G32_ROWS][2][8];
    for (int64_t r0 = i0; r0 < i1; r0 += G32_ROWS) {
        const int64_t nr = i1 - r0 < G32_ROWS ? i1 - r0 : G32_ROWS;
        int np = 2;
        for (int64_t t0 = 0; t0 < a->n_tok; t0 += 8 * np) {
            np = a->n_tok - t0 > 8 ? 2 : 1;
            void (*dot)(const g32_buf *, const g32_panel *, int64_t, int64_t, __m256[2][8]) =
                wide ? (np > 1 ? SL_MV_SUFFIX(g32_dot_2w) : SL_MV_SUFFIX(g32_dot_1w))
                : dm ? (np > 1 ? SL_MV_SUFFIX(g32_dot_2d) : SL_MV_SUFFIX(g32_dot_1d))
                     : (np > 1 ? SL_MV_SUFFIX(g32_dot_2n) : SL_MV_SUFFIX(g32_dot_1n));
            /* an opaque zero: stored by vector stores (a zero constant became a memset call
             * of nr * 512 bytes per row group and token group) */
            __m256 zero = _mm256_setzero_ps();
            __asm__("" : "+x"(zero));
            for (int64_t k = 0; k < nr; k++)
                for (int l = 0; l < 8; l++) lt[k][0][l] = lt[k][1][l] = zero;
            for (int64_t c0 = 0; c0 < a->nb; c0 += G32_CH) {
                const int64_t c1 = a->nb - c0 < G32_CH ? a->nb : c0 + G32_CH;
                for (int q = 0; q < np; q++) {
                    const g_tok8 g = SL_MV_SUFFIX(g_tokens)(a->xq, a->arb, t0 + 8 * q, a->n_tok);
                    SL_MV_SUFFIX(g32_panel_build)(
                        &g, c0, c1, G32_OFFSET(wide) ? sl__q32_offset(type) : 0, dm, &p[q]);
                }
                for (int64_t k = 0; k < nr; k++) {
                    const int64_t r = a->idx ? a->idx[r0 + k] : r0 + k;
                    SL_MV_SUFFIX(g32_unpack)(type, a->w + (size_t)r * a->wrb, c0, c1, &u);
                    dot(&u, p, c0, c1, lt[k]);
                }
            }
            SL_MV_SUFFIX(g_store_rows)(a, (const __m256(*)[2][8])lt, r0, nr, t0, np);
        }
    }
#if !SL_MV_AVX512
    if (tail) SL_MV_SUFFIX(g32_few)(type, call, pan.n_tok, i0, i1);
#endif
}

/* One kernel per type, so that its unpack is compiled for it. */
#define SL_G32_GEMM(NAME, TYPE)                                                               \
    static void SL_MV_SUFFIX(NAME)(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0, \
                                   int64_t i1)                                                \
    {                                                                                         \
        (void)t;                                                                              \
        SL_MV_SUFFIX(gemm_q32)(TYPE, a, i0, i1);                                              \
    }
SL_G32_GEMM(gemm_q8_0, SL_GGML_Q8_0)
SL_G32_GEMM(gemm_q4_0, SL_GGML_Q4_0)
SL_G32_GEMM(gemm_q5_0, SL_GGML_Q5_0)
SL_G32_GEMM(gemm_mxfp4, SL_GGML_MXFP4)
SL_G32_GEMM(gemm_q4_1, SL_GGML_Q4_1)
SL_G32_GEMM(gemm_q5_1, SL_GGML_Q5_1)
SL_G32_GEMM(gemm_iq4_nl, SL_GGML_IQ4_NL)
#undef SL_G32_GEMM
