/* kernels/cpu/gemm_q32_vnni_tmpl.h: the AVX-512 VNNI batch (prefill) kernel of the 32-element
 * block types (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL with Q8_0 activations; Q4_1, Q5_1 with Q8_1),
 * gemm.h's contract. Included only by matvec_avx512.c, after matvec_x86_tmpl.h and
 * gemm_x86_tmpl.h (whose helpers it reuses); it defines sl__gemm_avx512: these kernels first,
 * the 8-token panel kernels of gemm_x86_tmpl.h (sl__gemm_panel8_avx512) for the other types.
 *
 * The scheme (vs the 8-token panels: 256-bit vpdpbusd and a vpsignb per group and token set):
 * - activations are transposed once per 64 tokens and chunk of blocks into 4 panels of 16
 *   tokens: one zmm holds the same 4 elements of 16 tokens (signed, as quantized);
 * - weights are unpacked once per 64 tokens as unsigned u = w + c (Q8_0: w ^ 0x80, c 128;
 *   IQ4_NL: its table ^ 0x80, c 128; Q4_0, Q5_0: the raw quants, c 8 / 16; MXFP4: the e2m1
 *   table shifted by 12; Q4_1, Q5_1: c 0).
 *   One broadcast dword of a row meets 16 tokens in one vpdpbusd; 4 rows x 2 panels share the
 *   loads (8 accumulators); a last panel of at most 8 tokens runs on 256 bits (half the work);
 * - sum u x - c sum x is the reference's exact integer: each accumulator starts at -c sum x of
 *   its 16 tokens (formed once per panel block), so no correction op per row;
 * - a batch of 1-2 tokens (Q8_0, Q4_1: 1-3), or 1-2 past the last full panel, goes to the
 *   decode path's row kernel token by token (gemm.h's sl__gemm_vnni_few, gemm_bench's
 *   crossover).
 * Why the bits are the reference's: the integer block sums are exact; the float block term is
 * (float)isum * (dw * dx) (MXFP4's reference writes dx * dw: the same float), plus mw * sx for
 * Q4_1 / Q5_1 (sl__mv_term_dm), added to lane b % 8 of its (row, token) in block order (blocks
 * 0..7 as 0.0f + term, the reference's first add); the lanes are kept transposed (one zmm =
 * one lane of 16 tokens) and reduced as sl__mv_reduce8, element-wise. Spare slots of a short
 * panel repeat its last token; their results are dropped. Measured (tools/dev/gemm_bench.c,
 * one thread): 1.5x the 8-token panels at 8 tokens, ~2x from 32 tokens.
 *
 * Another 32-element type with Q8_0 activations plugs in with a case in gv_unpack (its u = w + c
 * bytes; a half scale at byte 0 takes the default path, else its own conversion), its block
 * bytes in gv_unpack's bb, its c in gv_offset and a line in sl__gemm_avx512, as IQ4_NL did
 * (ou_unsigned's table shuffle, c 128, 18-byte blocks). IQ4_NL vs the 8-token panels (one
 * thread, 1024x1408 and 1408x1024): 1.5x at 3-8 tokens, 1.6-2.2x from 16. */

enum {
    GV_PCH = 64, /* blocks per panel chunk: rows of up to 2048 columns are one chunk */
    GV_NP = 2,   /* panels of 16 tokens in one register block (GV_R x GV_NP accumulators) */
    GV_TP = 4,   /* panels each unpacked row chunk meets (64 tokens) */
    GV_R = 4,    /* rows of one register block */
    GV_RG = 32,  /* rows whose lanes live at once (in memory) across chunks */
};

/* A type's c: the offset that makes its weights vpdpbusd's unsigned operand. */
static inline int SL_MV_SUFFIX(gv_offset)(uint32_t type)
{
    return type == SL_GGML_Q8_0 || type == SL_GGML_IQ4_NL ? 128 : sl__q32_offset(type);
}

/* One row's blocks [b0, b1) unpacked: u = w + c in element order, the float scales. */
typedef struct gv_buf {
    _Alignas(64) uint8_t q[GV_PCH][32];
    _Alignas(64) float dw[GV_PCH + 16]; /* (converted 16 at a time) */
    _Alignas(64) float mw[GV_PCH + 16]; /* Q4_1 / Q5_1: block mins */
} gv_buf;

/* The 16 E8M0 bytes e[0..15] as sl__mv_e8m0_half: 2^(e - 128), subnormal for e < 2. */
static inline __m512 SL_MV_SUFFIX(gv_e8m0_half16)(const uint8_t *e)
{
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gv_unpack)(uint32_t type, const char *w, int64_t b0, int64_t b1, gv_buf *u)
{
    /* the scales' bits, converted 16 at a time below (a scalar conversion per block cost
     * as much as the rest of the unpack) */
    _Alignas(64) uint16_t hd[GV_PCH + 16], hm[GV_PCH + 16];
    _Alignas(64) uint8_t e8[GV_PCH + 16];
    const int64_t bb = type == SL_GGML_Q8_0   ? 34
                       : type == SL_GGML_Q4_0 ? 18
                       : type == SL_GGML_IQ4_NL ? 18
                       : type == SL_GGML_Q5_0 ? 22
                       : type == SL_GGML_Q4_1 ? 20
                       : type == SL_GGML_Q5_1 ? 24
                                              : 17;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *p = w + b * bb;
        __m256i q;
        switch (type) {
        case SL_GGML_Q4_1: /* unsigned 0..15 */
            q = SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 4));
            memcpy(&hm[i], p + 2, 2);
            break;
        case SL_GGML_Q5_1: /* unsigned 0..31 */
            q = _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 8)),
                                _mm256_and_si256(SL_MV_SUFFIX(qh_bytes)(p + 4),
                                                 _mm256_set1_epi8(0x10)));
            memcpy(&hm[i], p + 2, 2);
            break;
        case SL_GGML_MXFP4: /* E8M0 scale byte first */
            q = SL_MV_SUFFIX(ou_unsigned)(type, p);
            e8[i] = (uint8_t)p[0];
            break;
        default: /* Q8_0, Q4_0, Q5_0, IQ4_NL */
            q = SL_MV_SUFFIX(ou_unsigned)(type, p);
            break;
        }
        if (type != SL_GGML_MXFP4) memcpy(&hd[i], p, 2); /* the half scale first */
        _mm256_store_si256((__m256i *)u->q[i], q);
    }
    const bool dm = SL_MV_SUFFIX(g32_dm)(type);
    for (int64_t i = 0; i < b1 - b0; i += 16) {
        if (type == SL_GGML_MXFP4) {
            _mm512_store_ps(u->dw + i, SL_MV_SUFFIX(gv_e8m0_half16)(e8 + i));
            continue;
        }
        _mm512_store_ps(u->dw + i, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(hd + i))));
        if (dm)
            _mm512_store_ps(u->mw + i,
                            _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(hm + i))));
    }
}

/* The activation rows of 16 tokens (spare slots repeat the last real one). */
typedef struct gv_tok16 {
    const char *x[16];
} gv_tok16;

/* 16 tokens' activation blocks [b0, b0 + GV_PCH) transposed: q[i][g] holds bytes 4g..4g+3 of
 * token k's block b0 + i at bytes 4k..4k+3; cx the accumulators' start -c sum x. */
typedef struct gv_panel {
    _Alignas(64) int8_t q[GV_PCH][8][64];
    _Alignas(64) int32_t cx[GV_PCH][16];
    _Alignas(64) float d[GV_PCH][16]; /* the tokens' block scales */
    _Alignas(64) float s[GV_PCH][16]; /* Q8_1: the tokens' block s */
} gv_panel;

static inline __m512 SL_MV_SUFFIX(gv_halves16)(const gv_tok16 *g, int64_t off)
{
    uint16_t h[16];
    for (int k = 0; k < 16; k++) memcpy(&h[k], g->x[k] + off, 2);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

static void SL_MV_SUFFIX(gv_panel_build)(const gv_tok16 *g, int64_t b0, int64_t b1, int c,
                                         bool q81, gv_panel *p)
{
    const int64_t ab = q81 ? 36 : 34, qo = q81 ? 4 : 2;
    const __m512i ones = _mm512_set1_epi8(1), nc = _mm512_set1_epi32(-c);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i r[8], lo[8], hi[8];
        for (int k = 0; k < 8; k++)
            r[k] = _mm256_loadu_si256((const __m256i *)(g->x[k] + b * ab + qo));
        SL_MV_SUFFIX(g_transpose8v)(r, lo);
        for (int k = 0; k < 8; k++)
            r[k] = _mm256_loadu_si256((const __m256i *)(g->x[8 + k] + b * ab + qo));
        SL_MV_SUFFIX(g_transpose8v)(r, hi);
        __m512i sx = _mm512_setzero_si512();
        for (int gi = 0; gi < 8; gi++) {
            const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo[gi]), hi[gi], 1);
            _mm512_store_si512((__m512i *)p->q[i][gi], v);
            sx = _mm512_dpbusd_epi32(sx, ones, v); /* the exact sum of x */
        }
        _mm512_store_si512((__m512i *)p->cx[i], _mm512_mullo_epi32(sx, nc));
        _mm512_store_ps(p->d[i], SL_MV_SUFFIX(gv_halves16)(g, b * ab));
        if (q81) _mm512_store_ps(p->s[i], SL_MV_SUFFIX(gv_halves16)(g, b * ab + 2));
    }
}

/* Blocks [b0, b1) of GV_R unpacked rows against NP (1 or 2) panels, into the rows' lanes
 * lt[r][q][l] (lane l of panel q's 16 tokens). DM: Q4_1 / Q5_1 (c 0, mins). Blocks 0..7 of a
 * row start their lanes: 0.0f + t, the reference's first add (so the lanes need no zeroing).
 * One panel: two accumulators a (row, panel), even and odd groups, so that 8 chains hide
 * vpdpbusd's latency (integer sums: exact in any order). */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gv_dot)(const gv_buf *u, const gv_panel *p, const int NP, const bool DM, int64_t b0,
                     int64_t b1, __m512 (*lt)[GV_TP][8], int q0)
{
    const int A = NP == 1 ? 2 : 1;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m512i acc[GV_R][GV_NP][2];
        for (int q = 0; q < NP; q++) {
            const __m512i start =
                DM ? _mm512_setzero_si512() : _mm512_load_si512((const __m512i *)p[q].cx[i]);
            for (int r = 0; r < GV_R; r++) {
                acc[r][q][0] = start;
                acc[r][q][1] = _mm512_setzero_si512();
            }
        }
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int g = 0; g < 8; g++) {
            __m512i x[GV_NP];
            for (int q = 0; q < NP; q++) x[q] = _mm512_load_si512((const __m512i *)p[q].q[i][g]);
            for (int r = 0; r < GV_R; r++) {
                int32_t w4;
                memcpy(&w4, u[r].q[i] + 4 * g, 4);
                const __m512i wv = _mm512_set1_epi32(w4);
                for (int q = 0; q < NP; q++)
                    acc[r][q][g % A] = _mm512_dpbusd_epi32(acc[r][q][g % A], wv, x[q]);
            }
        }
        const bool first = b < 8;
        for (int q = 0; q < NP; q++) {
            const __m512 dx = _mm512_load_ps(p[q].d[i]);
            for (int r = 0; r < GV_R; r++) {
                const __m512i v =
                    A == 2 ? _mm512_add_epi32(acc[r][q][0], acc[r][q][1]) : acc[r][q][0];
                __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(v),
                                         _mm512_mul_ps(_mm512_set1_ps(u[r].dw[i]), dx));
                if (DM)
                    t = _mm512_add_ps(t, _mm512_mul_ps(_mm512_set1_ps(u[r].mw[i]),
                                                       _mm512_load_ps(p[q].s[i])));
                __m512 *l = &lt[r][q0 + q][b % 8];
                *l = _mm512_add_ps(first ? _mm512_setzero_ps() : *l, t);
            }
        }
    }
}

/* gv_dot for one panel of at most 8 real tokens: its low 256 bits only (tokens 0..7 of every
 * panel vector and of d, s, cx), with 256-bit vpdpbusd, which runs on two ports where the
 * 512-bit one has one: half the work of a full panel for the same bits. The lanes are the low
 * halves of lt's vectors (their high halves are never read: only tokens 0..7 are stored). */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gv_dot_half)(const gv_buf *u, const gv_panel *p, const bool DM, int64_t b0,
                          int64_t b1, __m512 (*lt)[GV_TP][8], int q0)
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        __m256i acc[GV_R][2];
        const __m256i start = DM ? _mm256_setzero_si256()
                                 : _mm256_load_si256((const __m256i *)p->cx[i]);
        for (int r = 0; r < GV_R; r++) {
            acc[r][0] = start;
            acc[r][1] = _mm256_setzero_si256();
        }
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int g = 0; g < 8; g++) {
            const __m256i x = _mm256_load_si256((const __m256i *)p->q[i][g]);
            for (int r = 0; r < GV_R; r++) {
                int32_t w4;
                memcpy(&w4, u[r].q[i] + 4 * g, 4);
                acc[r][g % 2] = _mm256_dpbusd_epi32(acc[r][g % 2], _mm256_set1_epi32(w4), x);
            }
        }
        const bool first = b < 8;
        const __m256 dx = _mm256_load_ps(p->d[i]);
        for (int r = 0; r < GV_R; r++) {
            __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(acc[r][0], acc[r][1])),
                                     _mm256_mul_ps(_mm256_set1_ps(u[r].dw[i]), dx));
            if (DM)
                t = _mm256_add_ps(t, _mm256_mul_ps(_mm256_set1_ps(u[r].mw[i]),
                                                   _mm256_load_ps(p->s[i])));
            __m256 *l = (__m256 *)&lt[r][q0][b % 8];
            _mm256_store_ps((float *)l, _mm256_add_ps(first ? _mm256_setzero_ps()
                                                            : _mm256_load_ps((const float *)l),
                                                      t));
        }
    }
}

typedef void (*gv_dot_fn)(const gv_buf *, const gv_panel *, int64_t, int64_t,
                          __m512 (*)[GV_TP][8], int);
#define SL_GV_DOT(NAME, NP, DM)                                                               \
    static void SL_MV_SUFFIX(NAME)(const gv_buf *u, const gv_panel *p, int64_t b0, int64_t b1, \
                                   __m512 (*lt)[GV_TP][8], int q0)                            \
    {                                                                                         \
        SL_MV_SUFFIX(gv_dot)(u, p, NP, DM, b0, b1, lt, q0);                                   \
    }
SL_GV_DOT(gv_dot_1o, 1, false)
SL_GV_DOT(gv_dot_2o, 2, false)
SL_GV_DOT(gv_dot_1d, 1, true)
SL_GV_DOT(gv_dot_2d, 2, true)
#undef SL_GV_DOT
static void SL_MV_SUFFIX(gv_dot_ho)(const gv_buf *u, const gv_panel *p, int64_t b0, int64_t b1,
                                    __m512 (*lt)[GV_TP][8], int q0)
{
    SL_MV_SUFFIX(gv_dot_half)(u, p, false, b0, b1, lt, q0);
}
static void SL_MV_SUFFIX(gv_dot_hd)(const gv_buf *u, const gv_panel *p, int64_t b0, int64_t b1,
                                    __m512 (*lt)[GV_TP][8], int q0)
{
    SL_MV_SUFFIX(gv_dot_half)(u, p, true, b0, b1, lt, q0);
}

/* sl__mv_reduce8 of 16 tokens' transposed lanes. */
static inline __m512 SL_MV_SUFFIX(gv_reduce8)(const __m512 lt[8])
{
    const __m512 u0 = _mm512_add_ps(lt[0], lt[4]), u1 = _mm512_add_ps(lt[1], lt[5]);
    const __m512 u2 = _mm512_add_ps(lt[2], lt[6]), u3 = _mm512_add_ps(lt[3], lt[7]);
    return _mm512_add_ps(_mm512_add_ps(u0, u2), _mm512_add_ps(u1, u3));
}

/* Output index of call row i (gemm.h). */
static inline int64_t SL_MV_SUFFIX(gv_out)(const sl__gemm_rows *a, int64_t i)
{
    return a->idx && !a->scatter ? i : a->idx ? a->idx[i] : i;
}

/* Tokens [t0, n_tok) of rows [i0, i1) one at a time through the decode path's whole-row
 * kernel (the same bits): for the few tokens that would fill a panel mostly with repeats. */
static void SL_MV_SUFFIX(gv_few)(uint32_t type, const sl__gemm_rows *a, int64_t t0, int64_t i0,
                                 int64_t i1)
{
    const sl__mv_rows_fn rows = SL_MV_SUFFIX(sl__mv_rows)(type);
    for (int64_t t = t0; t < a->n_tok; t++) {
        const char *xq = a->xq + (size_t)t * a->arb;
        float *y = a->y + t * a->y_stride;
        if (!a->idx) {
            rows(a->w, a->wrb, xq, a->nb, i0, i1, y);
            continue;
        }
        for (int64_t i = i0; i < i1; i++)
            rows(a->w + (size_t)a->idx[i] * a->wrb, a->wrb, xq, a->nb, 0, 1,
                 y + SL_MV_SUFFIX(gv_out)(a, i));
    }
}

/* Tokens in groups of 16 * GV_TP (panels built once per group and chunk: once per group for
 * rows of one chunk), rows in groups of GV_RG (lanes in memory) and GV_R (registers); each
 * row chunk unpacked once per token group and run against its panels GV_NP at a time (a last
 * panel of at most 8 tokens: gv_dot_half). A row group short of GV_R repeats its last row. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gemm_q32_vnni)(const uint32_t type, const sl__gemm_rows *call, int64_t i0, int64_t i1)
{
    const bool dm = SL_MV_SUFFIX(g32_dm)(type);
    const int c = SL_MV_SUFFIX(gv_offset)(type);
    const gv_dot_fn d1 = dm ? SL_MV_SUFFIX(gv_dot_1d) : SL_MV_SUFFIX(gv_dot_1o);
    const gv_dot_fn d2 = dm ? SL_MV_SUFFIX(gv_dot_2d) : SL_MV_SUFFIX(gv_dot_2o);
    const gv_dot_fn dh = dm ? SL_MV_SUFFIX(gv_dot_hd) : SL_MV_SUFFIX(gv_dot_ho);
    const int64_t few = sl__gemm_vnni_few(call->n_tok, type == SL_GGML_Q8_0 || type == SL_GGML_Q4_1
                                                           ? SL__GEMM_VNNI_FEW_CHEAP
                                                           : SL__GEMM_VNNI_FEW);
    sl__gemm_rows pan = *call; /* the tokens the panels take */
    pan.n_tok -= few;
    const sl__gemm_rows *a = &pan;
    const bool one_chunk = a->nb <= GV_PCH;
    gv_buf u[GV_R];
    gv_panel p[GV_TP];
    __m512 lt[GV_RG + GV_R][GV_TP][8];
    for (int64_t t0 = 0; t0 < a->n_tok; t0 += 16 * GV_TP) {
        const int64_t left = a->n_tok - t0;
        const int np = left >= 16 * GV_TP ? GV_TP : (int)((left + 15) / 16);
        /* the panel pairs' kernels; a last lone panel of at most 8 tokens runs on 256 bits */
        gv_dot_fn dots[GV_TP / GV_NP];
        for (int q = 0; q < np; q += GV_NP)
            dots[q / GV_NP] = np - q > 1 ? d2 : left - 16 * q > 8 ? d1 : dh;
        gv_tok16 g[GV_TP];
        for (int q = 0; q < np; q++)
            for (int k = 0; k < 16; k++) {
                const int64_t t = t0 + 16 * q + k < a->n_tok ? t0 + 16 * q + k : a->n_tok - 1;
                g[q].x[k] = a->xq + (size_t)t * a->arb;
            }
        for (int q = 0; one_chunk && q < np; q++)
            SL_MV_SUFFIX(gv_panel_build)(&g[q], 0, a->nb, c, dm, &p[q]);
        for (int64_t g0 = i0; g0 < i1; g0 += GV_RG) {
            const int64_t nr = i1 - g0 < GV_RG ? i1 - g0 : GV_RG;
            /* lanes of rows with fewer than 8 blocks: never written by gv_dot */
            for (int64_t k = 0; a->nb < 8 && k < nr + GV_R; k++)
                for (int q = 0; q < np; q++)
                    for (int l = (int)a->nb; l < 8; l++) lt[k][q][l] = _mm512_setzero_ps();
            for (int64_t c0 = 0; c0 < a->nb; c0 += GV_PCH) {
                const int64_t c1 = a->nb - c0 < GV_PCH ? a->nb : c0 + GV_PCH;
                for (int q = 0; !one_chunk && q < np; q++)
                    SL_MV_SUFFIX(gv_panel_build)(&g[q], c0, c1, c, dm, &p[q]);
                for (int64_t k0 = 0; k0 < nr; k0 += GV_R) {
                    for (int r = 0; r < GV_R; r++) {
                        const int64_t i = g0 + (k0 + r < nr ? k0 + r : nr - 1);
                        const int64_t row = a->idx ? a->idx[i] : i;
                        SL_MV_SUFFIX(gv_unpack)(type, a->w + (size_t)row * a->wrb, c0, c1, &u[r]);
                    }
                    for (int q = 0; q < np; q += GV_NP)
                        dots[q / GV_NP](u, &p[q], c0, c1, &lt[k0], q);
                }
            }
            /* token by token: a token's stores of the row group share cache lines */
            const int64_t nt = left < 16 * GV_TP ? left : 16 * GV_TP;
            float res[GV_RG][16 * GV_TP];
            for (int64_t k = 0; k < nr; k++)
                for (int q = 0; q < np; q++) {
                    if (left - 16 * q <= 8 && dots[q / GV_NP] == dh) {
                        /* gv_dot_half's lanes: the low halves */
                        __m256 h[8];
                        for (int l = 0; l < 8; l++)
                            h[l] = _mm256_load_ps((const float *)&lt[k][q][l]);
                        SL_MV_SUFFIX(g_reduce8)(h, res[k] + 16 * q);
                        continue;
                    }
                    _mm512_storeu_ps(res[k] + 16 * q, SL_MV_SUFFIX(gv_reduce8)(lt[k][q]));
                }
            for (int64_t tt = 0; tt < nt; tt++) {
                float *y = a->y + (t0 + tt) * a->y_stride;
                for (int64_t k = 0; k < nr; k++) y[SL_MV_SUFFIX(gv_out)(a, g0 + k)] = res[k][tt];
            }
        }
    }
    if (few) SL_MV_SUFFIX(gv_few)(type, call, pan.n_tok, i0, i1);
}

/* One kernel per type, so that its unpack is compiled for it. */
#define SL_GV_GEMM(NAME, TYPE)                                                                \
    static void SL_MV_SUFFIX(NAME)(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0, \
                                   int64_t i1)                                                \
    {                                                                                         \
        (void)t;                                                                              \
        SL_MV_SUFFIX(gemm_q32_vnni)(TYPE, a, i0, i1);                                         \
    }
SL_GV_GEMM(gv_q8_0, SL_GGML_Q8_0)
SL_GV_GEMM(gv_q4_0, SL_GGML_Q4_0)
SL_GV_GEMM(gv_q5_0, SL_GGML_Q5_0)
SL_GV_GEMM(gv_mxfp4, SL_GGML_MXFP4)
SL_GV_GEMM(gv_q4_1, SL_GGML_Q4_1)
SL_GV_GEMM(gv_q5_1, SL_GGML_Q5_1)
SL_GV_GEMM(gv_iq4_nl, SL_GGML_IQ4_NL)
#undef SL_GV_GEMM

sl__gemm_fn sl__gemm_avx512(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(gv_q8_0);
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(gv_q4_0);
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(gv_q5_0);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(gv_mxfp4);
    case SL_GGML_Q4_1: return SL_MV_SUFFIX(gv_q4_1);
    case SL_GGML_Q5_1: return SL_MV_SUFFIX(gv_q5_1);
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(gv_iq4_nl);
    default: return sl__gemm_panel8_avx512(type);
    }
}
