/* kernels/cpu/gemm_x86_tmpl.h: the batch row kernels of kernels/cpu/gemm.h, written once and
 * compiled per ISA by matvec_avx2.c / matvec_avx512.c right after matvec_x86_tmpl.h (same
 * SL_MV_SUFFIX, same target region; its helpers are reused here).
 *
 * Why it is faster than a range kernel per token: the range kernels unpack every weight block
 * (nibbles, high bits, |w| for the sign trick, scale conversions) once per token; here a chunk
 * of the row is unpacked once into a stack buffer and then dotted with each token of a group.
 * Why it gives the reference's bits: the unpacked values are the same integers and floats the
 * range kernels compute, integer sums are exact in any order, and each token's float work is
 * the range kernels' (8-block groups: one vector of 8 block terms added to the 8 lanes; other
 * blocks: lane[b % 8] += term, in block order). Chunks start at multiples of 8 blocks, so the
 * 8-block groups line up with the lanes. */

/* ---- 32-element blocks with Q8_0 activations: Q8_0, Q4_0, Q5_0, MXFP4 -------------------- */

enum { G32_CH = 256 }; /* blocks per unpacked chunk (a multiple of 8; 17 KiB of stack) */

typedef struct g32_buf {
    _Alignas(32) int8_t sw[G32_CH * 32]; /* signed weights, element order */
    _Alignas(32) int8_t aw[G32_CH * 32]; /* |w|: vpmaddubsw's unsigned operand */
    _Alignas(32) float dw[G32_CH];       /* block scales as the reference converts them */
} g32_buf;

static inline float SL_MV_SUFFIX(g_half)(const char *p)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

static void SL_MV_SUFFIX(g32_unpack)(uint32_t type, const char *w, int64_t b0, int64_t b1,
                                     g32_buf *u)
{
    const __m256i eight = _mm256_set1_epi8(8), f0 = _mm256_set1_epi8((char)0xF0);
    const __m128i kv = _mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4);
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
            q = _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(p + 6)),
                                _mm256_andnot_si256(SL_MV_SUFFIX(qh_bytes)(p + 2), f0));
            u->dw[i] = SL_MV_SUFFIX(g_half)(p);
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
        _mm256_store_si256((__m256i *)(u->aw + 32 * i), _mm256_sign_epi8(q, q));
    }
}

static inline __m256i SL_MV_SUFFIX(g32_block)(const g32_buf *u, int64_t i, const char *xblk)
{
    const __m256i xv = _mm256_loadu_si256((const __m256i *)(xblk + 2));
    const __m256i sw = _mm256_load_si256((const __m256i *)(u->sw + 32 * i));
    const __m256i aw = _mm256_load_si256((const __m256i *)(u->aw + 32 * i));
    return SL_MV_SUFFIX(u8s8_dot)(aw, _mm256_sign_epi8(xv, sw));
}

/* Blocks [b0, b1) of one token (activation row x) into its lanes; b0 % 8 == 0. The block
 * term is (float)isum * (dw * dx) (MXFP4's reference writes dx * dw: the same float). */
static void SL_MV_SUFFIX(g32_dot)(const g32_buf *u, const char *x, int64_t b0, int64_t b1,
                                  float lane[8])
{
    int64_t b = b0;
    __m256 acc = _mm256_loadu_ps(lane);
    for (; b + 8 <= b1; b += 8) {
        const int64_t i = b - b0;
        const char *xp = x + b * 34;
        __m256i v[8];
        for (int k = 0; k < 8; k++) v[k] = SL_MV_SUFFIX(g32_block)(u, i + k, xp + k * 34);
        const __m256 dd = _mm256_mul_ps(_mm256_load_ps(u->dw + i),
                                        SL_MV_SUFFIX(load_halves)(xp, 34));
        acc = _mm256_add_ps(acc,
                            _mm256_mul_ps(_mm256_cvtepi32_ps(SL_MV_SUFFIX(hsum8x8)(v)), dd));
    }
    _mm256_storeu_ps(lane, acc);
    for (; b < b1; b++) {
        const char *xp = x + b * 34;
        const int32_t isum = SL_MV_SUFFIX(hsum_i32)(SL_MV_SUFFIX(g32_block)(u, b - b0, xp));
        lane[b % 8] += sl__mv_term_d(isum, u->dw[b - b0] * SL_MV_SUFFIX(g_half)(xp));
    }
}

static void SL_MV_SUFFIX(gemm_row_q32)(const sl__mv_type *t, const void *w, int64_t nb,
                                       const void *xq, size_t arb, int64_t n_tok, float *y,
                                       int64_t y_stride)
{
    g32_buf u;
    float lane[SL__GEMM_TOK][8];
    for (int64_t t0 = 0; t0 < n_tok; t0 += SL__GEMM_TOK) {
        const int64_t nt = n_tok - t0 < SL__GEMM_TOK ? n_tok - t0 : SL__GEMM_TOK;
        memset(lane, 0, sizeof lane);
        for (int64_t c0 = 0; c0 < nb; c0 += G32_CH) {
            const int64_t c1 = nb - c0 < G32_CH ? nb : c0 + G32_CH;
            SL_MV_SUFFIX(g32_unpack)(t->type, w, c0, c1, &u);
            for (int64_t k = 0; k < nt; k++)
                SL_MV_SUFFIX(g32_dot)(&u, (const char *)xq + (size_t)(t0 + k) * arb, c0, c1,
                                      lane[k]);
        }
        for (int64_t k = 0; k < nt; k++) y[(t0 + k) * y_stride] = sl__mv_reduce8(lane[k]);
    }
}

/* ---- K-quants with Q8_K activations ----------------------------------------------------- */

enum { GK_CH = 32 }; /* super-blocks per unpacked chunk (8192 elements) */

/* Per super-block: q unsigned in element order (Q4_K/Q5_K: [0, 31], Q6_K: [0, 63]), the
 * per-32 (Q4_K/Q5_K) or per-16-pair (Q6_K) scales as vpmaddwd operands, and the float parts. */
typedef struct gk_buf {
    _Alignas(32) uint8_t q[GK_CH][SL_QK_K];
    __m256i sc[GK_CH][8];
    __m128i mins[GK_CH];   /* Q4_K/Q5_K: the 8 mins as int16 */
    __m256i sc16[GK_CH];   /* Q6_K: the 16 scales as int16 (for the bsums correction) */
    float d[GK_CH], dmin[GK_CH];
} gk_buf;

static void SL_MV_SUFFIX(gk_unpack_q45)(uint32_t type, const char *w, int64_t b0, int64_t b1,
                                        gk_buf *u)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), x10 = _mm256_set1_epi8(0x10);
    const bool q5 = type == SL_GGML_Q5_K;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const uint8_t *p = (const uint8_t *)w + b * (q5 ? 176 : 144);
        const uint8_t *qs = p + (q5 ? 48 : 16); /* after d, dmin, scales[12] (and qh[32]) */
        uint8_t sc[8];
        u->mins[i] = SL_MV_SUFFIX(k4_unpack)(p + 4, sc);
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
            u->sc[i][2 * j] = _mm256_set1_epi16(sc[2 * j]);
            u->sc[i][2 * j + 1] = _mm256_set1_epi16(sc[2 * j + 1]);
        }
        u->d[i] = SL_MV_SUFFIX(g_half)((const char *)p);
        u->dmin[i] = SL_MV_SUFFIX(g_half)((const char *)p + 2);
    }
}

static void SL_MV_SUFFIX(gk_unpack_q6)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const sl_block_q6_K *wp = (const sl_block_q6_K *)(w + b * 210);
        for (int n = 0; n < 2; n++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wp->ql + 64 * n));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wp->ql + 64 * n + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)(wp->qh + 32 * n));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(h, m30));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            for (int g = 0; g < 4; g++) {
                const int s = 8 * n + 2 * g;
                _mm256_store_si256((__m256i *)(u->q[i] + 128 * n + 32 * g), q[g]);
                u->sc[i][4 * n + g] = _mm256_set_m128i(_mm_set1_epi16(wp->scales[s + 1]),
                                                       _mm_set1_epi16(wp->scales[s]));
            }
        }
        u->sc16[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wp->scales));
        uint16_t d;
        memcpy(&d, &wp->d, 2);
        u->d[i] = _cvtsh_ss(d);
    }
}

/* One token's super-blocks [b0, b1). Q4_K/Q5_K: isum = sum_j sc_j sum q x, the reference's
 * term_k with summ; Q6_K: sum_s sc_s sum (q - 32) x = sum_s sc_s sum q x - 32 sum_s sc_s
 * bsums_s (exact integers; bsums are the Q8_K block's sums of 16), then term_d. */
static void SL_MV_SUFFIX(gk_dot)(const gk_buf *u, bool q6, const char *x, int64_t b0,
                                 int64_t b1, float lane[8])
{
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *xp = x + b * (int64_t)sizeof(sl_block_q8_K);
        __m256i acc = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i q = _mm256_load_si256((const __m256i *)(u->q[i] + 32 * g));
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xp + 4 + 32 * g));
            acc = _mm256_add_epi32(acc,
                                   _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), u->sc[i][g]));
        }
        float dx;
        memcpy(&dx, xp, sizeof dx);
        if (q6) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *)(xp + 4 + SL_QK_K));
            const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(bs, u->sc16[i]), 5);
            const int32_t isum = SL_MV_SUFFIX(hsum_i32)(_mm256_sub_epi32(acc, corr));
            lane[b % 8] += sl__mv_term_d(isum, u->d[i] * dx);
        } else {
            const int32_t summ = SL_MV_SUFFIX(k4_summ)(u->mins[i], xp);
            lane[b % 8] += sl__mv_term_k(SL_MV_SUFFIX(hsum_i32)(acc), u->d[i] * dx, summ,
                                         u->dmin[i] * dx);
        }
    }
}

static void SL_MV_SUFFIX(gemm_row_k)(const sl__mv_type *t, const void *w, int64_t nb,
                                     const void *xq, size_t arb, int64_t n_tok, float *y,
                                     int64_t y_stride)
{
    gk_buf u;
    float lane[SL__GEMM_TOK][8];
    const bool q6 = t->type == SL_GGML_Q6_K;
    for (int64_t t0 = 0; t0 < n_tok; t0 += SL__GEMM_TOK) {
        const int64_t nt = n_tok - t0 < SL__GEMM_TOK ? n_tok - t0 : SL__GEMM_TOK;
        memset(lane, 0, sizeof lane);
        for (int64_t c0 = 0; c0 < nb; c0 += GK_CH) {
            const int64_t c1 = nb - c0 < GK_CH ? nb : c0 + GK_CH;
            if (q6) SL_MV_SUFFIX(gk_unpack_q6)(w, c0, c1, &u);
            else SL_MV_SUFFIX(gk_unpack_q45)(t->type, w, c0, c1, &u);
            for (int64_t k = 0; k < nt; k++)
                SL_MV_SUFFIX(gk_dot)(&u, q6, (const char *)xq + (size_t)(t0 + k) * arb, c0, c1,
                                     lane[k]);
        }
        for (int64_t k = 0; k < nt; k++) y[(t0 + k) * y_stride] = sl__mv_reduce8(lane[k]);
    }
}

sl__gemm_row_fn SL_MV_SUFFIX(sl__gemm_row)(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q8_0:
    case SL_GGML_Q4_0:
    case SL_GGML_Q5_0:
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(gemm_row_q32);
    case SL_GGML_Q4_K:
    case SL_GGML_Q5_K:
    case SL_GGML_Q6_K: return SL_MV_SUFFIX(gemm_row_k);
    default: return NULL;
    }
}
