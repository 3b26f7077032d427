/* kernels/cpu/gemm_few32_vnni_tmpl.h: the AVX-512 VNNI batch kernel of the 32-element block
 * types (IQ4_NL, Q8_0, MXFP4, Q4_0, Q5_0 with Q8_0 activations; Q4_1, Q5_1 with Q8_1) under
 * gemm.h's contract, built for few tokens (an MoE expert's small groups) and, measured, the
 * fastest for many too: gemm.h's sl__gemm_avx512 for these types (with sl__gemm_vnni_few's
 * rule) and sl__gemm_few_avx512 (alone). Included only by matvec_avx512.c after
 * gemm_k_vnni_tmpl.h (GKV_UNROLL) and matvec_x86_tmpl.h (the row kernels, pf_span).
 *
 * Why it is faster: the decode row kernel run once per token unpacks every weight block once
 * per token, and the 16-token panels this replaced cost the same at 3 tokens as at 8 and kept
 * their lanes in memory. Here, as in gemm_few_vnni_tmpl.h for the K-quants, a row's blocks are
 * unpacked once, four at a time, in registers: two vectors of unsigned codes u = w + c
 * (q32_offset.h; Q8_0, IQ4_NL: 128) whose 128-bit lane k holds elements 16h..16h+15 of block
 * k (h: the vector), in element order. They meet 4-token panels in which lane k of panel
 * vector (h, j) holds bytes 4j..4j+3 of those 16 elements for tokens 0..3 (token t in dword
 * t): one vpshufd per (h, j) puts the weights' group j in all four dwords of lane k, and 8
 * vpdpbusd leave in dword 4k + t the integer sum of block k and token t. The float terms of 4
 * blocks x 4 tokens then take one vector op each (the block scales broadcast per lane by one
 * vpermd), and a row's lanes stay in registers. Up to 4 panels (16 tokens, a pass) meet the
 * same shuffled weights. Every accumulator starts at its panel's -c sum x (formed once per panel), so there is no
 * correction op per row. Another 32-element type plugs in with its block bytes (gf32_bb), its
 * unpack to u = w + c (gf32_unpack), c (gv_offset) and a line in the tables at the end.
 *
 * Why the bits are the reference's: the integer sums are exact (32 x 255 x 127 < 2^31), the
 * float term of every (row, token, block) is the reference's (float)isum * (dw * dx) (MXFP4's
 * dx * dw: the same float), plus mw * sx for Q4_1 / Q5_1 (sl__mv_term_dm), added to lane b % 8
 * of its (row, token) in block order: blocks 8m..8m+3 go to the lanes vector L[0] (dword
 * 4 (b % 8) + t), 8m+4..8m+7 to L[1]; a row's last short group of blocks adds under a mask.
 * The lanes end with sl__mv_reduce8's expression, element-wise over the tokens. */

enum {
    GF32_PCH = 64,  /* blocks per panel chunk (a multiple of 8): rows of up to 2048 columns */
    GF32_ROWS = 64, /* rows whose lanes wait in memory while a longer row's next chunk is built */
    GF32_NP = 4,    /* 4-token panels of a pass */
    GF32_TOK = 4 * GF32_NP /* tokens per pass */
};

/* 4 tokens' activation blocks [b0, b0 + GF32_PCH) in groups of 4 (quad i: blocks b0 + 4i..):
 * q[i][h][j] lane k = bytes 4j..4j+3 of elements 16h.. of block 4i + k (token t in dword t);
 * cx, d, s dword 4k + t: -c * sum x, the scale, Q8_1's s of block 4i + k, token t. Blocks past
 * the chunk's end are zero. */
typedef struct gf32_panel {
    _Alignas(64) int8_t q[GF32_PCH / 4][2][4][64];
    _Alignas(64) int32_t cx[GF32_PCH / 4][16];
    _Alignas(64) float d[GF32_PCH / 4][16];
    _Alignas(64) float s[GF32_PCH / 4][16];
} gf32_panel;

/* Dword 4k + i of the result: element k (a per-lane broadcast of elements 0..3). */
#define SL_GF32_BCAST _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)

/* The block bytes of a 32-element type and the offset of its 16 quant bytes (nibble types). */
static inline int64_t SL_MV_SUFFIX(gf32_bb)(uint32_t type)
{
    return type == SL_GGML_Q8_0     ? (int64_t)sizeof(sl_block_q8_0)
           : type == SL_GGML_Q4_0   ? (int64_t)sizeof(sl_block_q4_0)
           : type == SL_GGML_IQ4_NL ? (int64_t)sizeof(sl_block_iq4_nl)
           : type == SL_GGML_Q5_0   ? (int64_t)sizeof(sl_block_q5_0)
           : type == SL_GGML_Q4_1   ? (int64_t)sizeof(sl_block_q4_1)
           : type == SL_GGML_Q5_1   ? (int64_t)sizeof(sl_block_q5_1)
                                    : (int64_t)sizeof(sl_block_mxfp4);
}
static inline int SL_MV_SUFFIX(gf32_qo)(uint32_t type)
{
    return type == SL_GGML_MXFP4  ? 1
           : type == SL_GGML_Q4_1 ? 4
           : type == SL_GGML_Q5_0 ? 6
           : type == SL_GGML_Q5_1 ? 8
                                  : 2;
}

/* 16 bytes at p[k] + off in lane k: masked broadcast loads (no lane-shuffle port, as
 * load_2x32). */
static inline __attribute__((always_inline)) __m512i
SL_MV_SUFFIX(gf32_load4)(const char *const p[4], int64_t off)
{
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[0] + off)));
    v = _mm512_mask_broadcast_i32x4(v, 0x00F0, _mm_loadu_si128((const __m128i *)(p[1] + off)));
    v = _mm512_mask_broadcast_i32x4(v, 0x0F00, _mm_loadu_si128((const __m128i *)(p[2] + off)));
    return _mm512_mask_broadcast_i32x4(v, 0xF000, _mm_loadu_si128((const __m128i *)(p[3] + off)));
}

/* Tokens t0..t0+3 (past n_tok: the last token again, results dropped) of xq (rows arb bytes
 * apart), blocks [b0, b1), into p; c the type's offset, q81: Q8_1 activations. */
static void SL_MV_SUFFIX(gf32_panel_build)(const char *xq, size_t arb, int64_t t0, int64_t n_tok,
                                           int64_t b0, int64_t b1, int c, bool q81,
                                           gf32_panel *p)
{
    const int64_t ab = q81 ? (int64_t)sizeof(sl_block_q8_1) : (int64_t)sizeof(sl_block_q8_0);
    const int64_t qo = q81 ? 4 : 2;
    const char *x[4];
    for (int t = 0; t < 4; t++) x[t] = xq + (size_t)(t0 + t < n_tok ? t0 + t : n_tok - 1) * arb;
    const __m512i ones = _mm512_set1_epi8(1), nc = _mm512_set1_epi32(-c);
    for (int64_t b = b0; b < b1; b += 4) {
        const int64_t i = (b - b0) / 4, nv = b1 - b < 4 ? b1 - b : 4;
        __m512i sx = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i r[4];
            for (int t = 0; t < 4; t++) {
                r[t] = _mm512_setzero_si512();
                for (int k = 0; k < nv; k++)
                    r[t] = _mm512_mask_broadcast_i32x4(
                        r[t], (__mmask16)(0xF << (4 * k)),
                        _mm_loadu_si128((const __m128i *)(x[t] + (b + k) * ab + qo + 16 * h)));
            }
            const __m512i u0 = _mm512_unpacklo_epi32(r[0], r[1]);
            const __m512i u1 = _mm512_unpackhi_epi32(r[0], r[1]);
            const __m512i u2 = _mm512_unpacklo_epi32(r[2], r[3]);
            const __m512i u3 = _mm512_unpackhi_epi32(r[2], r[3]);
            const __m512i v[4] = {_mm512_unpacklo_epi64(u0, u2), _mm512_unpackhi_epi64(u0, u2),
                                  _mm512_unpacklo_epi64(u1, u3), _mm512_unpackhi_epi64(u1, u3)};
            for (int j = 0; j < 4; j++) {
                _mm512_store_si512(p->q[i][h][j], v[j]);
                sx = _mm512_dpbusd_epi32(sx, ones, v[j]); /* the exact sum of x */
            }
        }
        _mm512_store_si512(p->cx[i], _mm512_mullo_epi32(sx, nc));
        uint16_t hd[16] = {0}, hs[16] = {0};
        for (int k = 0; k < nv; k++)
            for (int t = 0; t < 4; t++) {
                memcpy(&hd[4 * k + t], x[t] + (b + k) * ab, 2);
                if (q81) memcpy(&hs[4 * k + t], x[t] + (b + k) * ab + 2, 2);
            }
        _mm512_store_ps(p->d[i], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hd)));
        _mm512_store_ps(p->s[i], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)hs)));
    }
}

/* The blocks at p[0..3] unpacked: w[h] lane k = u of elements 16h..16h+15 of block p[k]. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gf32_codes)(const uint32_t type, const char *const p[4], __m512i w[2])
{
    if (type == SL_GGML_Q8_0) {
        for (int h = 0; h < 2; h++)
            w[h] = _mm512_xor_si512(SL_MV_SUFFIX(gf32_load4)(p, 2 + 16 * h),
                                    _mm512_set1_epi8((char)0x80));
        return;
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i q = SL_MV_SUFFIX(gf32_load4)(p, SL_MV_SUFFIX(gf32_qo)(type));
    w[0] = _mm512_and_si512(q, m4);
    w[1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (type == SL_GGML_IQ4_NL || type == SL_GGML_MXFP4) {
        const __m512i table = _mm512_broadcast_i32x4(SL_MV_SUFFIX(ou_table)(type));
        for (int h = 0; h < 2; h++) w[h] = _mm512_shuffle_epi8(table, w[h]);
    } else if (type == SL_GGML_Q5_0 || type == SL_GGML_Q5_1) {
        /* bit 4 of element e of block k is bit e of its qh: bits 16k.. of the masks */
        const int64_t ho = type == SL_GGML_Q5_0 ? 2 : 4;
        uint64_t m[2] = {0, 0};
        for (int k = 0; k < 4; k++) {
            uint32_t qh;
            memcpy(&qh, p[k] + ho, 4);
            m[0] |= (uint64_t)(qh & 0xFFFF) << (16 * k);
            m[1] |= (uint64_t)(qh >> 16) << (16 * k);
        }
        for (int h = 0; h < 2; h++)
            w[h] = _mm512_mask_add_epi8(w[h], (__mmask64)m[h], w[h], _mm512_set1_epi8(0x10));
    }
}

/* The halves at p[k] + off (k < N <= 8) as floats, dword i of the result element idx[i]. */
static inline __attribute__((always_inline)) __m512 SL_MV_SUFFIX(gf32_halves)(
    const char *const *p, const int N, int64_t off, __m512i idx)
{
    uint64_t v[2] = {0, 0};
    for (int k = 0; k < N; k++) {
        uint16_t h;
        memcpy(&h, p[k] + off, 2);
        v[k / 4] |= (uint64_t)h << (16 * (k % 4));
    }
    return _mm512_permutexvar_ps(
        idx, _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_set_epi64x((long long)v[1],
                                                                   (long long)v[0]))));
}

/* The scales of the blocks at p[0..N) as the reference converts them (mw: Q4_1 / Q5_1's
 * mins), dword i of each element idx[i]. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gf32_scales)(const uint32_t type, const char *const *p, const int N, __m512i idx,
                          __m512 *dw, __m512 *mw)
{
    if (type == SL_GGML_MXFP4) { /* sl__mv_e8m0_half: 2^(e - 128), subnormal for e < 2 */
        uint64_t ev = 0;
        for (int k = 0; k < N; k++) ev |= (uint64_t)(uint8_t)p[k][0] << (8 * k);
        const __m512i e = _mm512_permutexvar_epi32(
            idx, _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)ev)));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
        *dw = _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
    } else {
        *dw = SL_MV_SUFFIX(gf32_halves)(p, N, 0, idx);
    }
    if (SL_MV_SUFFIX(g32_dm)(type)) *mw = SL_MV_SUFFIX(gf32_halves)(p, N, 2, idx);
}

/* Blocks wp, wp + bb, .. (nv of them, 1..4; the others repeat the first, their terms are
 * dropped) unpacked: w[h] lane k = u of elements 16h..16h+15 of block k; dw (mw) the block
 * scales broadcast over lane k. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gf32_unpack)(const uint32_t type, const char *wp, int nv, __m512i w[2], __m512 *dw,
                          __m512 *mw)
{
    const int64_t bb = SL_MV_SUFFIX(gf32_bb)(type);
    const char *p[4];
    for (int k = 0; k < 4; k++) p[k] = wp + (k < nv ? k : 0) * bb;
    SL_MV_SUFFIX(gf32_codes)(type, p, w);
    SL_MV_SUFFIX(gf32_scales)(type, p, 4, SL_GF32_BCAST, dw, mw);
}

/* The 2-token layout (gf32_rows' P == 0), for 1..2 tokens, where a 4-token panel would be half
 * empty: 8 blocks x 2 tokens in a vector, dword 4L + 2k + t = block 2L + k, token t (= 2 m + t
 * for block m of 8), half the vpdpbusd and vpshufd of a panel. The weights: lane L of
 * unpacklo_epi64 of the two blocks' codes holds groups 0, 1 (4 elements each) of block 2L, then
 * of 2L + 1; vpshufd (0, 0, 2, 2) / (1, 1, 3, 3) puts group 0 / 1 of each in its token pair.
 * Eight blocks cover the 8 lanes: one lanes vector per row, dword 2 (b % 8) + t. */

/* Tokens 0..1 (past n_tok: the last again) of xq, blocks [b0, b1) in octets (octet o: the
 * panel's slot o): q[o][g / 4][g % 4] dword 2m + t = bytes 4g..4g+3 of block 8o + m, token t;
 * cx, d, s the same dwords. Built in scalar code: once per call, for two tokens. */
static void SL_MV_SUFFIX(gf32_panel_build2)(const char *xq, size_t arb, int64_t n_tok,
                                            int64_t b0, int64_t b1, int c, bool q81,
                                            gf32_panel *p)
{
    const int64_t ab = q81 ? (int64_t)sizeof(sl_block_q8_1) : (int64_t)sizeof(sl_block_q8_0);
    const int64_t qo = q81 ? 4 : 2;
    for (int64_t b = b0; b < b1; b += 8) {
        const int64_t o = (b - b0) / 8, nv = b1 - b < 8 ? b1 - b : 8;
        _Alignas(64) int32_t q[8][16] = {{0}}, cx[16] = {0};
        _Alignas(64) uint16_t hd[16] = {0}, hs[16] = {0};
        for (int m = 0; m < nv; m++)
            for (int t = 0; t < 2; t++) {
                const char *xb = xq + (size_t)(t < n_tok ? t : n_tok - 1) * arb + (b + m) * ab;
                int32_t sx = 0;
                for (int e = 0; e < 32; e++) sx += (int8_t)xb[qo + e];
                for (int g = 0; g < 8; g++) memcpy(&q[g][2 * m + t], xb + qo + 4 * g, 4);
                cx[2 * m + t] = -c * sx;
                memcpy(&hd[2 * m + t], xb, 2);
                if (q81) memcpy(&hs[2 * m + t], xb + 2, 2);
            }
        for (int g = 0; g < 8; g++)
            _mm512_store_si512(p->q[o][g / 4][g % 4], _mm512_load_si512(q[g]));
        _mm512_store_si512(p->cx[o], _mm512_load_si512(cx));
        _mm512_store_ps(p->d[o], _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)hd)));
        _mm512_store_ps(p->s[o], _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)hs)));
    }
}

/* The terms of blocks wp.. (nv of them, 1..8) against the 2-token panel's octet o, added to
 * *l under a mask when nv < 8. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gf32_oct)(const uint32_t type, const char *wp, int nv, const gf32_panel *p,
                       int64_t o, __m512 *l)
{
    const int64_t bb = SL_MV_SUFFIX(gf32_bb)(type);
    const char *pb[8];
    for (int k = 0; k < 8; k++) pb[k] = wp + (k < nv ? k : 0) * bb;
    const char *const pe[4] = {pb[0], pb[2], pb[4], pb[6]}, *const po[4] = {pb[1], pb[3], pb[5],
                                                                             pb[7]};
    __m512i we[2], wo[2];
    SL_MV_SUFFIX(gf32_codes)(type, pe, we);
    SL_MV_SUFFIX(gf32_codes)(type, po, wo);
    __m512 dw, mw = _mm512_setzero_ps();
    SL_MV_SUFFIX(gf32_scales)(type, pb, 8,
                              _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                              &dw, &mw);
    __m512i acc[2] = {_mm512_load_si512(p->cx[o]), _mm512_setzero_si512()};
    GKV_UNROLL
    for (int h = 0; h < 2; h++) {
        const __m512i w2[2] = {_mm512_unpacklo_epi64(we[h], wo[h]),
                               _mm512_unpackhi_epi64(we[h], wo[h])};
        GKV_UNROLL
        for (int c = 0; c < 2; c++) {
            acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_shuffle_epi32(w2[c], 0xA0),
                                         _mm512_load_si512(p->q[o][h][2 * c]));
            acc[1] = _mm512_dpbusd_epi32(acc[1], _mm512_shuffle_epi32(w2[c], 0xF5),
                                         _mm512_load_si512(p->q[o][h][2 * c + 1]));
        }
    }
    const __m512 fs = _mm512_cvtepi32_ps(_mm512_add_epi32(acc[0], acc[1]));
    __m512 t = _mm512_mul_ps(fs, _mm512_mul_ps(dw, _mm512_load_ps(p->d[o])));
    if (SL_MV_SUFFIX(g32_dm)(type)) t = _mm512_add_ps(t, _mm512_mul_ps(mw, _mm512_load_ps(p->s[o])));
    *l = nv == 8 ? _mm512_add_ps(*l, t)
                 : _mm512_mask_add_ps(*l, (__mmask16)((1u << (2 * nv)) - 1), *l, t);
}

/* The terms of blocks wp.. (nv of them) against P panels' quad i, added to l0[2 v] (panel v's
 * lanes vector of these blocks), under a mask when nv < 4. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(gf32_quad)(const uint32_t type, const char *wp, int nv, const gf32_panel *p,
                        const int P, int64_t i, __m512 *l0)
{
    __m512i w[2];
    __m512 dw, mw = _mm512_setzero_ps();
    SL_MV_SUFFIX(gf32_unpack)(type, wp, nv, w, &dw, &mw);
    /* two chains per panel: one would wait on vpdpbusd's latency */
    __m512i acc[GF32_NP][2];
    for (int v = 0; v < P; v++) {
        acc[v][0] = _mm512_load_si512(p[v].cx[i]);
        acc[v][1] = _mm512_setzero_si512();
    }
    GKV_UNROLL
    for (int h = 0; h < 2; h++) {
        const __m512i wj[4] = {_mm512_shuffle_epi32(w[h], _MM_PERM_AAAA),
                               _mm512_shuffle_epi32(w[h], _MM_PERM_BBBB),
                               _mm512_shuffle_epi32(w[h], _MM_PERM_CCCC),
                               _mm512_shuffle_epi32(w[h], _MM_PERM_DDDD)};
        GKV_UNROLL
        for (int j = 0; j < 4; j++)
            GKV_UNROLL
            for (int v = 0; v < P; v++)
                acc[v][j % 2] =
                    _mm512_dpbusd_epi32(acc[v][j % 2], wj[j], _mm512_load_si512(p[v].q[i][h][j]));
    }
    const __mmask16 m = (__mmask16)((1u << (4 * nv)) - 1);
    GKV_UNROLL
    for (int v = 0; v < P; v++) {
        const __m512 fs = _mm512_cvtepi32_ps(_mm512_add_epi32(acc[v][0], acc[v][1]));
        __m512 t = _mm512_mul_ps(fs, _mm512_mul_ps(dw, _mm512_load_ps(p[v].d[i])));
        if (SL_MV_SUFFIX(g32_dm)(type))
            t = _mm512_add_ps(t, _mm512_mul_ps(mw, _mm512_load_ps(p[v].s[i])));
        __m512 *l = &l0[2 * v];
        *l = nv == 4 ? _mm512_add_ps(*l, t) : _mm512_mask_add_ps(*l, m, *l, t);
    }
}

/* Rows [r0, r1) (at most GF32_ROWS) against P panels' blocks [c0, c1) (c0 % 8 == 0): lanes
 * lt[m] of row r0 + m carry over from the previous chunk (c0 > 0) and to the next (c1 < nb);
 * the last chunk reduces them and stores the n_tok (<= 4 P) results of each row. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gf32_rows)(
    const uint32_t type, const sl__gemm_rows *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
    const gf32_panel *p, const int P, __m512 (*lt)[GF32_NP][2])
{
    const int64_t bb = SL_MV_SUFFIX(gf32_bb)(type);
    /* dense rows of one chunk (an expert's) stream: prefetch as the decode kernels do */
    const bool pf = !a->idx && c0 == 0 && c1 == a->nb;
    if (pf) SL_MV_SUFFIX(pf_head)(a->w + (size_t)r0 * a->wrb, (size_t)(r1 - r0) * a->wrb);
    for (int64_t i = r0; i < r1; i++) {
        const int64_t r = a->idx ? a->idx[i] : i;
        const char *w = a->w + (size_t)r * a->wrb;
        if (pf) SL_MV_SUFFIX(pf_span)(w, a->wrb);
        const int64_t out = a->idx && !a->scatter ? i : r;
        if (P == 0) { /* the 2-token layout: one lanes vector, octets of blocks */
            __m512 l2 = c0 == 0 ? _mm512_setzero_ps() : lt[i - r0][0][0];
            int64_t b = c0;
            for (; b + 8 <= c1; b += 8)
                SL_MV_SUFFIX(gf32_oct)(type, w + b * bb, 8, p, (b - c0) / 8, &l2);
            if (b < c1) /* the row's last 1..7 blocks (c1 == nb) */
                SL_MV_SUFFIX(gf32_oct)(type, w + b * bb, (int)(c1 - b), p, (b - c0) / 8, &l2);
            if (c1 < a->nb) {
                lt[i - r0][0][0] = l2;
                continue;
            }
            /* sl__mv_reduce8: uk = sk + sk+4 (lanes L, L + 2), (u0 + u2) + (u1 + u3) */
            const __m512 u = _mm512_add_ps(l2, _mm512_shuffle_f32x4(l2, l2, 0x4E));
            const __m512 v = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0xB1));
            const __m512 f = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
            float res[4];
            _mm_storeu_ps(res, _mm512_castps512_ps128(f));
            for (int64_t k = 0; k < a->n_tok; k++) a->y[k * a->y_stride + out] = res[k];
            continue;
        }
        __m512 l[GF32_NP][2]; /* [panel][lanes 0..3 / 4..7] */
        for (int v = 0; v < P; v++)
            for (int e = 0; e < 2; e++)
                l[v][e] = c0 == 0 ? _mm512_setzero_ps() : lt[i - r0][v][e];
        int64_t b = c0;
        for (; b + 8 <= c1; b += 8) {
            SL_MV_SUFFIX(gf32_quad)(type, w + b * bb, 4, p, P, (b - c0) / 4, &l[0][0]);
            SL_MV_SUFFIX(gf32_quad)(type, w + (b + 4) * bb, 4, p, P, (b - c0) / 4 + 1, &l[0][1]);
        }
        if (b + 4 <= c1) {
            SL_MV_SUFFIX(gf32_quad)(type, w + b * bb, 4, p, P, (b - c0) / 4, &l[0][0]);
            b += 4;
        }
        if (b < c1) { /* the row's last 1..3 blocks (c1 == nb): lanes 0..2 or 4..6 */
            const int e = (int)((b / 4) % 2);
            SL_MV_SUFFIX(gf32_quad)(type, w + b * bb, (int)(c1 - b), p, P, (b - c0) / 4,
                                    &l[0][e]);
        }
        if (c1 < a->nb) {
            for (int v = 0; v < P; v++)
                for (int e = 0; e < 2; e++) lt[i - r0][v][e] = l[v][e];
            continue;
        }
        /* sl__mv_reduce8, element-wise over the tokens: (u0 + u2) + (u1 + u3), uk = sk + sk+4 */
        float res[GF32_TOK];
        for (int v = 0; v < P; v++) {
            const __m512 u = _mm512_add_ps(l[v][0], l[v][1]);
            const __m512 s = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0x4E));
            const __m512 f = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0xB1));
            _mm_storeu_ps(res + 4 * v, _mm512_castps512_ps128(f));
        }
        for (int64_t k = 0; k < a->n_tok; k++) a->y[k * a->y_stride + out] = res[k];
    }
}

/* A type's c: the offset that makes its weights vpdpbusd's unsigned operand. */
static inline int SL_MV_SUFFIX(gv_offset)(uint32_t type)
{
    return type == SL_GGML_Q8_0 || type == SL_GGML_IQ4_NL ? 128 : sl__q32_offset(type);
}

/* At most GF32_TOK tokens: rows in blocks of GF32_ROWS, each over the panel chunks (built once
 * when the row is one chunk long, an MoE expert's rows; else once per row block and chunk). */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gemm_few32_pass)(
    const uint32_t type, const sl__gemm_rows *a, int64_t i0, int64_t i1, const int P)
{
    gf32_panel p[GF32_NP];
    __m512 lt[GF32_ROWS][GF32_NP][2];
    const bool one_chunk = a->nb <= GF32_PCH;
    const int c = SL_MV_SUFFIX(gv_offset)(type);
    for (int64_t r0 = i0; r0 < i1; r0 += GF32_ROWS) {
        const int64_t r1 = i1 - r0 < GF32_ROWS ? i1 : r0 + GF32_ROWS;
        for (int64_t c0 = 0; c0 < a->nb; c0 += GF32_PCH) {
            const int64_t c1 = a->nb - c0 < GF32_PCH ? a->nb : c0 + GF32_PCH;
            if ((!one_chunk || r0 == i0) && P == 0)
                SL_MV_SUFFIX(gf32_panel_build2)(a->xq, a->arb, a->n_tok, c0, c1, c,
                                                SL_MV_SUFFIX(g32_dm)(type), &p[0]);
            if (!one_chunk || r0 == i0)
                for (int v = 0; v < P; v++)
                    SL_MV_SUFFIX(gf32_panel_build)(a->xq, a->arb, 4 * v, a->n_tok, c0, c1, c,
                                                   SL_MV_SUFFIX(g32_dm)(type), &p[v]);
            SL_MV_SUFFIX(gf32_rows)(type, a, r0, r1, c0, c1, p, P, lt);
        }
    }
}

/* Tokens [t0, t0 + n) of rows [i0, i1) one at a time through the decode path's whole-row
 * kernel (the same bits): gemm.h's sl__gemm_vnni_few. */
static void SL_MV_SUFFIX(gf32_by_row)(uint32_t type, const sl__gemm_rows *a, int64_t t0,
                                      int64_t n, int64_t i0, int64_t i1)
{
    const sl__mv_rows_fn rows = SL_MV_SUFFIX(sl__mv_rows)(type);
    for (int64_t t = t0; t < t0 + n; t++) {
        const char *xq = a->xq + (size_t)t * a->arb;
        float *y = a->y + t * a->y_stride;
        if (!a->idx) {
            rows(a->w, a->wrb, xq, a->nb, i0, i1, y);
            continue;
        }
        for (int64_t i = i0; i < i1; i++)
            rows(a->w + (size_t)a->idx[i] * a->wrb, a->wrb, xq, a->nb, 0, 1,
                 y + (a->scatter ? a->idx[i] : i));
    }
}

/* Whether 1..2 tokens take the 2-token layout on rows of nb blocks: an octet of it cost ~1.6x
 * a 4-token panel's quad (gemm_bench, 2 tokens, min us, a panel / the layout: Q8_0 768x1024
 * 49.6 / 39.7, MXFP4 256x2048 31.9 / 24.1), so rows whose last octet is mostly empty (IQ4_NL
 * 768x384, 12 blocks: 19.5 / 20.0) keep the panel. */
static inline bool SL_MV_SUFFIX(gf32_two)(int64_t nb)
{
    return 16 * ((nb + 7) / 8) < 10 * ((nb + 3) / 4);
}

/* Per type: the kernel alone (gf32_<type>: gemm.h's sl__gemm_few_avx512), passes of GF32_TOK
 * tokens, each of 1..GF32_NP panels (the last pass as short as its tokens); and the batch
 * kernel (gv_<type>: sl__gemm_avx512), which hands sl__gemm_vnni_few's last tokens to the row
 * kernel. */
_Static_assert(GF32_TOK == SL__GEMM_VNNI_PASS, "gemm.h's pass is the kernel's");
#define SL_GF32_KERNEL(NAME, TYPE)                                                              \
    static void SL_MV_SUFFIX(gf32_##NAME)(const sl__mv_type *t, const sl__gemm_rows *a,        \
                                          int64_t i0, int64_t i1)                               \
    {                                                                                           \
        (void)t;                                                                                \
        for (int64_t t0 = 0; t0 < a->n_tok; t0 += GF32_TOK) {                                   \
            sl__gemm_rows s = *a;                                                               \
            s.xq += (size_t)t0 * a->arb;                                                        \
            s.y += t0 * a->y_stride;                                                            \
            s.n_tok = a->n_tok - t0 < GF32_TOK ? a->n_tok - t0 : GF32_TOK;                      \
            if (s.n_tok > 12) SL_MV_SUFFIX(gemm_few32_pass)(TYPE, &s, i0, i1, 4);               \
            else if (s.n_tok > 8) SL_MV_SUFFIX(gemm_few32_pass)(TYPE, &s, i0, i1, 3);           \
            else if (s.n_tok > 4) SL_MV_SUFFIX(gemm_few32_pass)(TYPE, &s, i0, i1, 2);           \
            else if (s.n_tok > 2 || !SL_MV_SUFFIX(gf32_two)(a->nb))                           \
                SL_MV_SUFFIX(gemm_few32_pass)(TYPE, &s, i0, i1, 1);                             \
            else SL_MV_SUFFIX(gemm_few32_pass)(TYPE, &s, i0, i1, 0);                            \
        }                                                                                       \
    }                                                                                           \
    static void SL_MV_SUFFIX(gv_##NAME)(const sl__mv_type *t, const sl__gemm_rows *a,          \
                                        int64_t i0, int64_t i1)                                 \
    {                                                                                           \
        const int64_t few = sl__gemm_vnni_few(a->n_tok);                                        \
        sl__gemm_rows s = *a;                                                                   \
        s.n_tok -= few;                                                                         \
        if (s.n_tok) SL_MV_SUFFIX(gf32_##NAME)(t, &s, i0, i1);                                  \
        if (few) SL_MV_SUFFIX(gf32_by_row)(TYPE, a, s.n_tok, few, i0, i1);                      \
    }
SL_GF32_KERNEL(q8_0, SL_GGML_Q8_0)
SL_GF32_KERNEL(q4_0, SL_GGML_Q4_0)
SL_GF32_KERNEL(q5_0, SL_GGML_Q5_0)
SL_GF32_KERNEL(mxfp4, SL_GGML_MXFP4)
SL_GF32_KERNEL(q4_1, SL_GGML_Q4_1)
SL_GF32_KERNEL(q5_1, SL_GGML_Q5_1)
SL_GF32_KERNEL(iq4_nl, SL_GGML_IQ4_NL)
#undef SL_GF32_KERNEL
#undef SL_GF32_BCAST

/* The kernel alone of a 32-element type (sl__gemm_few_avx512's), NULL for other types. */
static sl__gemm_fn SL_MV_SUFFIX(gf32_kernel)(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(gf32_q8_0);
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(gf32_q4_0);
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(gf32_q5_0);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(gf32_mxfp4);
    case SL_GGML_Q4_1: return SL_MV_SUFFIX(gf32_q4_1);
    case SL_GGML_Q5_1: return SL_MV_SUFFIX(gf32_q5_1);
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(gf32_iq4_nl);
    default: return NULL;
    }
}

/* gemm.h's sl__gemm_avx512: these batch kernels first, the 8-token panel kernels of
 * gemm_x86_tmpl.h / gemm_k_x86_tmpl.h (sl__gemm_panel8_avx512: the K-quants' entries are
 * gemm_kv) for the rest. */
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
