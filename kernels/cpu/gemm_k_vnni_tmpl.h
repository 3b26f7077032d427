/* kernels/cpu/gemm_k_vnni_tmpl.h: the AVX-512 VNNI batch kernel of the K-quants (Q3_K, Q4_K,
 * Q5_K, Q6_K, Q4_K_R8) and IQ4_XS under gemm.h's contract. Included only by matvec_avx512.c,
 * right after gemm_k_x86_tmpl.h, whose row unpack (gk_buf, gk_unpack_*) and 8-token kernel
 * (gemm_k) it reuses.
 *
 * Why it is faster than gemm_k: activations are transposed into 16-token panels (one zmm holds
 * the same 4 elements of 16 tokens), and a broadcast 4-byte group of weights meets them in one
 * vpdpbusd, which multiplies and accumulates in int32 (no int16 stage, no separate add). A
 * micro-kernel holds 4 rows x 2 panels (32 tokens; 8 rows x 1 panel for a group of at most 16)
 * of sub-block sums in registers, so each activation load serves 4 rows and each weight
 * broadcast 2 panels. Ports 0 and 5 run the zmm vpdpbusd and vpdpwssd (two a cycle, latency
 * ~5, on Sapphire Rapids) and vpshufb (port 5 only), so their count sets the speed: each
 * sub-block sum s is split into int16 (s & 255, s >> 8) by one vpshufb and scaled by one
 * vpdpwssd against (sc, 256 sc), which also accumulates (a vpmulld and an add before: Q5_K
 * 1.06-1.11x, Q6_K 1.1-1.2x faster). The 4 x 2 loop issues at that bound (Q6_K: 48 such uops
 * in ~20 cycles a sub-block, a standalone copy of it), so more accumulator chains (6 x 2,
 * 8 x 1) ran no faster a vpdpbusd. Two kinds:
 * - GKV_MINS (Q4_K/Q5_K/Q4_K_R8): unsigned codes against signed x, the mins term from one
 *   vpdpwssd per pair of mins against the panels' 32-element block sums;
 * - the offset kinds (Q6_K, IQ4_XS): signed weights against x + 128 (unsigned), the 128 sum_i w_i
 *   of a row taken back once per row (gkv_unpack_q6's corr), not per token (no block-sum
 *   term).
 * A call's rows are unpacked once, 64 elements a zmm (GKV_UCAP; gemm_kv splits a longer call
 * into blocks of rows that fit; rows longer than 16 super-blocks once per token group), panels
 * are built by register transposes once per token group (once per 32 rows and chunk when a row is
 * longer than GKV_PCH super-blocks), contiguous output rows leave by 16x16 transposes and
 * vector stores; GKV_NARROW says which few tokens go to the few-token kernel or gemm_k.
 *
 * Why the bits are the reference's: the integer super-block sums are exact (vpdpbusd sums of at
 * most 32 products of |q| <= 63 by |x| <= 128, or |w| <= 128 by x + 128 <= 255; each sub-block
 * sum below 2^23, so its int16 split is exact; the scaled sums stay below 2^31), and the float
 * term of every (row, token) is the reference's expression (term_k / term_d of
 * kernels/ref/matvec_impl.h), added to lane b % 8 in super-block order; the final reduction is
 * sl__mv_reduce8's, element-wise over 16 tokens. A group short of 16 tokens repeats its last
 * token in the spare slots and drops their results.
 *
 * Another super-block type with integer sub-block scales plugs in through gk_buf and a kind:
 * a mins kind's unpack (gk_unpack_*: unsigned codes q, the scale of each 16 elements in s16, in
 * bw the weights of the block sums) takes term_k; an offset kind's (gkv_unpack_q6's form:
 * signed values, sp, corr) takes term_d. Q6_K is GKV_OFFSET (4 groups a scale); IQ4_XS is
 * GKV_IQ4 (its int8 table values, its signed scales per 32, 8 groups a scale). */

_Static_assert(GK_PCH == 4, "gkv_corr reduces 4 super-blocks' sums at once");

enum {
    GKV_V = 2,  /* 16-token panels per token group (and per micro-kernel at most) */
    GKV_R = 8,  /* rows per micro-kernel at most (4 with 2 panels) */
    GKV_SG = 32, /* rows whose float lanes live in memory at once (a multiple of 8: Q4_K_R8) */
    /* a call of at most this many tokens, and such a last group of a call whose rows are
     * unpacked per token group, goes to the few-token kernel (gemm.h; gemm_k's 8-token panels
     * for Q4_K_R8, which has none: ymm vpdpbusd, half the lanes, 1.2x faster than a 16-token
     * panel on 4 and 8 tokens, Q6_K 768 x 768 and 768 x 1024, gemm_bench); a last group of a
     * call unpacked once takes a panel without an unpack (Q6_K 40 tokens: 1.1x, IQ4_XS 1.25x
     * faster than gemm_k) */
    GKV_NARROW = 8,
    GKV_PCH = SL__GEMM_K_PCH, /* super-blocks per panel chunk (gemm.h) */
    /* unpacked row chunks (gk_buf, GK_PCH super-blocks each) a call keeps: 64 rows of 8
     * super-blocks, each row unpacked once per call instead of once per token group */
    GKV_UCAP = 128
};
_Static_assert(GKV_NARROW <= SL__GEMM_FEW_MAX, "the few-token kernel takes gemm_kv's narrow calls");

/* 16 tokens' Q8_K super-blocks [b0, b0 + GKV_PCH): q[i][g] holds bytes 4g..4g+3 of the tokens'
 * super-block b0 + i (plus 128, unsigned, for the offset kinds), token k at bytes 4k..4k+3;
 * bs[i][k] (the mins kind's) their 32-element block sums 2k, 2k+1 (int16 pairs); d their
 * scales. */
typedef struct gkv_panel {
    _Alignas(64) int8_t q[GKV_PCH][64][64];
    _Alignas(64) int32_t bs[GKV_PCH][4][16];
    _Alignas(64) float d[GKV_PCH][16];
} gkv_panel;

/* The 16x16 transpose of 32-bit groups: o[g] gets group g of r[0..15] (group g of r[k] at
 * group k). Three rounds of in-lane unpacks and 128-bit lane shuffles, 64 shuffles in all:
 * about half what 16 gathers of the same groups cost. */
static inline void SL_MV_SUFFIX(gkv_transpose16)(const __m512i r[16], __m512i o[16])
{
    __m512i t[16], u[16];
    for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
    }
    /* u[4i + e], 128-bit lane L: group 4L + e of r[4i..4i+3] */
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int e = 0; e < 4; e++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
        const __m512i v3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
        o[e] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        o[4 + e] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        o[8 + e] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        o[12 + e] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* Tokens t0..t0+15 (past n_tok: the last token again), super-blocks [b0, b1). off: the
 * tokens' row offsets from token t0 (gkv_offsets); x0: token t0's row. */
static void SL_MV_SUFFIX(gkv_panel_build)(const char *x0, __m512i off, size_t xb, int64_t b0,
                                          int64_t b1, bool plus128, gkv_panel *p)
{
    int32_t o32[16];
    _mm512_storeu_si512(o32, off);
    /* x + 128 (the offset kinds): vpdpbusd's unsigned side */
    const __m512i x80 = _mm512_set1_epi8(plus128 ? (char)0x80 : 0);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0, sb = b * (int64_t)xb;
        for (int c = 0; c < 4; c++) { /* elements 64c..64c+63: groups 16c..16c+15 */
            __m512i r[16], o[16];
            for (int k = 0; k < 16; k++)
                r[k] = _mm512_loadu_si512(x0 + o32[k] + sb + 4 + 64 * c);
            SL_MV_SUFFIX(gkv_transpose16)(r, o);
            for (int g = 0; g < 16; g++)
                _mm512_store_si512(p->q[i][16 * c + g], _mm512_xor_si512(o[g], x80));
        }
        /* the mins kind's 32-element block sums (|sum| <= 32 x 128 fits int16), pairs 2k,
         * 2k + 1: the offset kinds need none */
        for (int k = 0; k < 4 && !plus128; k++) {
            __m512i t[2];
            for (int h = 0; h < 2; h++) /* Q8_K's 16-element sums 8k + 4h .. + 3, by pairs */
                t[h] = _mm512_madd_epi16(
                    _mm512_i32gather_epi32(off, x0 + sb + 4 + SL_QK_K + 4 * (2 * k + h), 1),
                    _mm512_set1_epi16(1));
            _mm512_store_si512(p->bs[i][k],
                               _mm512_or_si512(_mm512_and_si512(t[0], _mm512_set1_epi32(0xFFFF)),
                                               _mm512_slli_epi32(t[1], 16)));
        }
        _mm512_store_ps(p->d[i], _mm512_i32gather_ps(off, x0 + sb, 1));
    }
}

/* The kernel of a call too narrow for gemm_kv's panels: the type's few-token kernel, else its
 * 8-token one (the codebook types' own, matvec_iq_x86_tmpl.h; gemm_k for the K-quants). */
static sl__gemm_fn SL_MV_SUFFIX(gkv_narrow_fn)(uint32_t type)
{
    const sl__gemm_fn few = sl__gemm_few_avx512(type);
    if (few) return few;
    switch (type) {
#define SL_GKV_IQ_GEMM_(name, code, B, NAME) case code: return SL_MV_SUFFIX(gemm_##name);
        SL__IQ_TYPES(SL_GKV_IQ_GEMM_)
#undef SL_GKV_IQ_GEMM_
    default: return SL_MV_SUFFIX(gemm_k);
    }
}

/* in registers: a scalar array read back as a vector stalled on store forwarding */
static inline __m512i SL_MV_SUFFIX(gkv_offsets)(int64_t t0, int64_t n_tok, size_t arb)
{
    const int64_t last = n_tok - 1 - t0 < 15 ? n_tok - 1 - t0 : 15;
    const __m512i k = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_mullo_epi32(_mm512_min_epi32(k, _mm512_set1_epi32((int32_t)last)),
                              _mm512_set1_epi32((int32_t)arb));
}

/* The lanes of one row: lt[v][l] holds lane l of panel v's 16 tokens. */
typedef float gkv_lanes[GKV_V][8][16];

/* sl__mv_reduce8 element-wise over 16 tokens, of lanes l[0..nl) (nl = min(nb, 8)): the lanes
 * past nl, the reference's zeros, are left out of the sums. Exact: gkv_micro stores a lane's
 * first term as 0 + t, so no lane is -0, and x + (+0) is x for every other x. */
static inline __attribute__((always_inline)) __m512 SL_MV_SUFFIX(gkv_reduce)(
    const float (*l)[16], int nl)
{
    const __m512 s0 = _mm512_load_ps(l[0]);
    if (nl == 1) return s0;
    const __m512 s1 = _mm512_load_ps(l[1]);
    if (nl == 2) return _mm512_add_ps(s0, s1);
    const __m512 s2 = _mm512_load_ps(l[2]);
    if (nl == 3) return _mm512_add_ps(_mm512_add_ps(s0, s2), s1);
    const __m512 s3 = _mm512_load_ps(l[3]);
    if (nl == 4) return _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
    __m512 u[4] = {s0, s1, s2, s3};
    for (int q = 4; q < nl; q++) u[q - 4] = _mm512_add_ps(u[q - 4], _mm512_load_ps(l[q]));
    return _mm512_add_ps(_mm512_add_ps(u[0], u[2]), _mm512_add_ps(u[1], u[3]));
}

/* GKV_MINS: Q4_K/Q5_K (float min term, sub-blocks of 32); the offset kinds, signed values
 * against x + 128: GKV_OFFSET (sub-blocks of 16: Q6_K and Q3_K, codes = value + 32 / + 4, and
 * the codebook types with a scale per 16) and GKV_IQ4 (sub-blocks of 32: IQ4_XS, codes = table
 * value + 128, and the codebook types with a scale per 32). The offset kinds take the
 * reference's term_d. */
enum { GKV_MINS, GKV_OFFSET, GKV_IQ4, GKV_KINDS };

static inline int SL_MV_SUFFIX(gkv_kind)(uint32_t type)
{
    switch (type) {
    case SL_GGML_Q6_K:
    case SL_GGML_Q3_K: return GKV_OFFSET;
    case SL_GGML_IQ4_XS: return GKV_IQ4;
#define SL_GKV_IQ_KIND_(name, code, B, NAME)                                                          \
    case code: return sl__iq_group(code) == 16 ? GKV_OFFSET : GKV_IQ4;
        SL__IQ_TYPES(SL_GKV_IQ_KIND_)
#undef SL_GKV_IQ_KIND_
    default: return GKV_MINS;
    }
}

static inline bool SL_MV_SUFFIX(gkv_is_iq)(uint32_t type)
{
    switch (type) {
#define SL_GKV_IQ_CASE_(name, code, B, NAME) case code:
        SL__IQ_TYPES(SL_GKV_IQ_CASE_)
#undef SL_GKV_IQ_CASE_
        return true;
    default: return false;
    }
}

/* every loop of the micro-kernel unrolled: clang left some rolled (their arrays then lived on
 * the stack) */
#if defined(__clang__)
#define GKV_UNROLL _Pragma("clang loop unroll(full)")
#else
#define GKV_UNROLL
#endif

/* One super-block of R unpacked rows u[] (their super-block ui) against V panels (their
 * super-block pi), its float terms added to lane l of lt[r][v]; first: the lane's first term,
 * stored as 0 + t (no zeroed lanes to read; + 0 turns -0 into the reference's +0). */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gkv_micro)(
    const gk_buf *const *u, const gkv_panel *p, const int R, const int V, const int KIND,
    int64_t ui, int64_t pi, int l, bool first, gkv_lanes *lt)
{
    const int G = KIND == GKV_OFFSET ? 4 : 8; /* 4-byte groups per sub-block */
    /* a sub-block sum s as the int16 pair (s & 255, s >> 8): byte 0 and bytes 1-2 of each
     * dword (|s| < 2^23: gkv_unpack_q6, and 32 x 31 x 128 for Q4_K/Q5_K) */
    const __m512i split = _mm512_set4_epi32(0x0E0D800C, 0x0A098008, 0x06058004, 0x02018000);
    __m512i acc[GKV_R][GKV_V], vm[GKV_R][GKV_V];
    GKV_UNROLL
    for (int r = 0; r < R; r++) {
        const __m512i c =
            KIND == GKV_MINS ? _mm512_setzero_si512() : _mm512_set1_epi32(u[r]->corr[ui]);
        GKV_UNROLL
        for (int v = 0; v < V; v++) {
            acc[r][v] = c;
            vm[r][v] = _mm512_setzero_si512();
        }
    }
    for (int j = 0; j < 64 / G; j++) {
        /* a sub-block of 8 groups sums in two chains of 4 (vpdpbusd's latency ~5 against two
         * issues a cycle: 8 chains of 8 left the ports idle), added back exactly */
        const int NH = G == 8 ? 2 : 1;
        __m512i s[GKV_R][GKV_V], s2[2][GKV_R][GKV_V];
        GKV_UNROLL
        for (int h = 0; h < NH; h++)
            GKV_UNROLL
            for (int r = 0; r < R; r++)
                GKV_UNROLL
                for (int v = 0; v < V; v++) s2[h][r][v] = _mm512_setzero_si512();
        GKV_UNROLL
        for (int g = j * G; g < j * G + G; g++) {
            const int h = NH == 2 ? (g & 1) : 0;
            __m512i x[GKV_V];
            GKV_UNROLL
            for (int v = 0; v < V; v++) x[v] = _mm512_load_si512(p[v].q[pi][g]);
            GKV_UNROLL
            for (int r = 0; r < R; r++) {
                int32_t w4;
                memcpy(&w4, u[r]->q[ui] + 4 * g, 4);
                const __m512i wv = _mm512_set1_epi32(w4);
                GKV_UNROLL
                for (int v = 0; v < V; v++)
                    s2[h][r][v] = KIND == GKV_MINS
                                      ? _mm512_dpbusd_epi32(s2[h][r][v], wv, x[v])
                                      : _mm512_dpbusd_epi32(s2[h][r][v], x[v], wv);
            }
        }
        GKV_UNROLL
        for (int r = 0; r < R; r++)
            GKV_UNROLL
            for (int v = 0; v < V; v++)
                s[r][v] = NH == 2 ? _mm512_add_epi32(s2[0][r][v], s2[1][r][v]) : s2[0][r][v];
        GKV_UNROLL
        for (int r = 0; r < R; r++) {
            /* (s & 255) sc + (s >> 8) 256 sc: one vpdpwssd in place of a vpmulld (two port-0
             * uops) and an add; sc << 8 fits int16 (|sc| <= 128) */
            const int32_t sc = u[r]->s16[ui][j * G / 4];
            const __m512i sp = _mm512_set1_epi32(
                KIND == GKV_MINS ? (int32_t)((uint32_t)sc << 24 | (uint32_t)(sc & 0xFFFF))
                                 : u[r]->sp[ui][j * G / 4]);
            GKV_UNROLL
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm512_dpwssd_epi32(acc[r][v], _mm512_shuffle_epi8(s[r][v], split), sp);
        }
    }
    /* mins 2k, 2k + 1 (bw holds min j at 2j, 2j + 1) against the 32-element sums: one
     * vpdpwssd per pair of sub-blocks, not per pair of 16-element sums */
    for (int k = 0; KIND == GKV_MINS && k < 4; k++) {
        __m512i bs[GKV_V];
        GKV_UNROLL
        for (int v = 0; v < V; v++) bs[v] = _mm512_load_si512(p[v].bs[pi][k]);
        GKV_UNROLL
        for (int r = 0; r < R; r++) {
            const uint32_t w2 = (uint16_t)u[r]->bw[ui][4 * k] |
                                (uint32_t)(uint16_t)u[r]->bw[ui][4 * k + 2] << 16;
            const __m512i bw = _mm512_set1_epi32((int32_t)w2);
            GKV_UNROLL
            for (int v = 0; v < V; v++) vm[r][v] = _mm512_dpwssd_epi32(vm[r][v], bs[v], bw);
        }
    }
    /* the reference's term_k (Q4_K/Q5_K) or term_d (Q6_K), element-wise */
    GKV_UNROLL
    for (int r = 0; r < R; r++) {
        const __m512 dw = _mm512_set1_ps(u[r]->d[ui]), mw = _mm512_set1_ps(u[r]->dmin[ui]);
        GKV_UNROLL
        for (int v = 0; v < V; v++) {
            const __m512 dx = _mm512_load_ps(p[v].d[pi]);
            __m512 t;
            if (KIND != GKV_MINS) {
                t = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), _mm512_mul_ps(dw, dx));
            } else {
                const __m512 a =
                    _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), _mm512_mul_ps(dw, dx));
                t = _mm512_sub_ps(
                    a, _mm512_mul_ps(_mm512_cvtepi32_ps(vm[r][v]), _mm512_mul_ps(mw, dx)));
            }
            float *lp = lt[r][v][l];
            const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(lp);
            _mm512_store_ps(lp, _mm512_add_ps(prev, t));
        }
    }
}

typedef void (*gkv_micro_fn)(const gk_buf *const *, const gkv_panel *, int64_t, int64_t, int,
                             bool, gkv_lanes *);

#define SL_GKV_MICRO(KIND, R, V)                                                              \
    static void SL_MV_SUFFIX(gkv_##KIND##_##R##_##V)(const gk_buf *const *u,                 \
                                                      const gkv_panel *p, int64_t ui,         \
                                                      int64_t pi, int l, bool first,          \
                                                      gkv_lanes *lt)                          \
    {                                                                                         \
        SL_MV_SUFFIX(gkv_micro)(u, p, R, V, KIND, ui, pi, l, first, lt);                      \
    }
#define SL_GKV_MICRO_R4(KIND, V)                                                              \
    SL_GKV_MICRO(KIND, 1, V) SL_GKV_MICRO(KIND, 2, V) SL_GKV_MICRO(KIND, 3, V)                \
    SL_GKV_MICRO(KIND, 4, V)
#define SL_GKV_MICRO_R8(KIND, V)                                                              \
    SL_GKV_MICRO_R4(KIND, V) SL_GKV_MICRO(KIND, 5, V) SL_GKV_MICRO(KIND, 6, V)                \
    SL_GKV_MICRO(KIND, 7, V) SL_GKV_MICRO(KIND, 8, V)
SL_GKV_MICRO_R8(GKV_MINS, 1)
SL_GKV_MICRO_R4(GKV_MINS, 2)
SL_GKV_MICRO_R8(GKV_OFFSET, 1)
SL_GKV_MICRO_R4(GKV_OFFSET, 2)
SL_GKV_MICRO_R8(GKV_IQ4, 1)
SL_GKV_MICRO_R4(GKV_IQ4, 2)
#undef SL_GKV_MICRO_R8
#undef SL_GKV_MICRO_R4
#undef SL_GKV_MICRO

/* [kind][V - 1][R - 1]; two panels take at most GKV_R / 2 rows */
#define GKV_F(K, R, V) SL_MV_SUFFIX(gkv_##K##_##R##_##V)
#define GKV_ROW(K)                                                                            \
    {{GKV_F(K, 1, 1), GKV_F(K, 2, 1), GKV_F(K, 3, 1), GKV_F(K, 4, 1), GKV_F(K, 5, 1),           \
      GKV_F(K, 6, 1), GKV_F(K, 7, 1), GKV_F(K, 8, 1)},                                        \
     {GKV_F(K, 1, 2), GKV_F(K, 2, 2), GKV_F(K, 3, 2), GKV_F(K, 4, 2)}}
static const gkv_micro_fn SL_MV_SUFFIX(gkv_micros)[GKV_KINDS][GKV_V][GKV_R] = {
    GKV_ROW(GKV_MINS), GKV_ROW(GKV_OFFSET), GKV_ROW(GKV_IQ4)};
#undef GKV_ROW
#undef GKV_F

/* The offset kinds' unpack (Q6_K, IQ4_XS), one row's super-blocks [b0, b1): q signed (Q6_K's
 * value, IQ4_XS's table value) against x + 128: sum_j sc_j sum_i q_i (x_i + 128) is the
 * reference's sum_j sc_j sum_i q_i x_i plus 128 sum_j sc_j sum_i q_i, which corr takes back;
 * sp holds each 16 elements' scale as the int16 pair (sc, 256 sc). Each sub-block sum stays
 * below 2^23 (16 x 32 x 255 for Q6_K, 32 x 127 x 255 for IQ4_XS), so gkv_micro's int16 split
 * of it is exact. sum_i q_i sc_i is formed from the unsigned codes c = q + bias that the
 * unpack has in registers: sum_i c_i sc_i (vpdpbusd against the scales as bytes, gkv_cs64)
 * less 16 bias sum_j sc_j. Both unpack 64 elements a zmm. */
/* Super-block i's scales (16 int8 entries in x16) into sp, and the start of its sums */
static inline __m256i SL_MV_SUFFIX(gkv_scales)(gk_buf *u, int64_t i, __m128i x16, int sh)
{
    const __m512i sc = _mm512_cvtepi8_epi32(x16);
    /* (sc, 256 sc) as int16: sc's low half, and sc << 24 (256 sc in the high half) */
    _mm512_storeu_si512(u->sp[i],
                        _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)),
                                        _mm512_slli_epi32(sc, 24)));
    /* - 16 bias sc_j (16 bias = 2^sh), folded to 8 lanes */
    const __m512i m = _mm512_slli_epi32(sc, sh);
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_add_epi32(_mm512_castsi512_si256(m),
                                             _mm512_extracti64x4_epi64(m, 1)));
}

/* corr of the n super-blocks from their 8-lane sums (all at once: a reduction each cost more
 * than the rest of the unpack) */
static inline void SL_MV_SUFFIX(gkv_corr)(gk_buf *u, int64_t n, const __m256i cs[GK_PCH])
{
    __m256i v[GK_PCH];
    for (int i = 0; i < GK_PCH; i++) v[i] = i < n ? cs[i] : _mm256_setzero_si256();
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]),
                                        _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]),
                                        _mm256_unpackhi_epi32(v[2], v[3]));
    /* 128-bit lane L: the partial sums of super-blocks 0..3 */
    const __m256i t2 =
        _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
    const __m128i t3 = _mm_add_epi32(_mm256_castsi256_si128(t2), _mm256_extracti128_si256(t2, 1));
    /* a masked store: the copy of n ints was a memcpy call (and a vzeroupper) per row */
    _mm_mask_storeu_epi32(u->corr, (__mmask8)((1u << n) - 1u),
                          _mm_mullo_epi32(t3, _mm_set1_epi32(-128)));
}

/* 64 codes of a super-block (unsigned bytes) against its scales: lane k of cs gains
 * sum c sc over bytes 4k..4k+3, which lie in 16-element sub-block j0 + k / 4 (scales as bytes
 * in every 128-bit lane of e8) */
static inline __m512i SL_MV_SUFFIX(gkv_cs64)(__m512i cs, __m512i c, __m512i e8, int j0)
{
    const __m512i ix = _mm512_set_epi64(
        0x0101010101010101 * (j0 + 3), 0x0101010101010101 * (j0 + 3),
        0x0101010101010101 * (j0 + 2), 0x0101010101010101 * (j0 + 2),
        0x0101010101010101 * (j0 + 1), 0x0101010101010101 * (j0 + 1),
        0x0101010101010101 * j0, 0x0101010101010101 * j0);
    return _mm512_dpbusd_epi32(cs, c, _mm512_shuffle_epi8(e8, ix));
}

/* q6_half on 512 bits: c[0] the codes (q + 32) of elements 128n..128n+63, c[1] of
 * 128n+64..128n+127. ql's 64 bytes of the half hold the low nibbles of the first 64 elements
 * and the high nibbles of the last; qh's 32 bytes, read twice, the high bits of element
 * 128n + 32h + e at bits 2h, 2h + 1 of byte e: shifted by 4, 2 (h = 0, 1: c[0]'s 256-bit
 * halves) or 0, -2 (h = 2, 3) into bits 4-5. */
static inline void SL_MV_SUFFIX(q6_codes512)(const sl_block_q6_K *wp, int n, __m512i c[2])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i l = _mm512_loadu_si512(wp->ql + 64 * n);
    const __m512i h =
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wp->qh + 32 * n)));
    const __m512i up = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
                                        0x0002000200020002, 0x0002000200020002,
                                        0x0004000400040004, 0x0004000400040004,
                                        0x0004000400040004, 0x0004000400040004);
    const __m512i dn = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
                                        0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0);
    /* (a & m4) | b: ternary-logic table 0xEA of (a, m4, b) */
    c[0] = _mm512_ternarylogic_epi32(l, m4, _mm512_and_si512(_mm512_sllv_epi16(h, up), m30),
                                     0xEA);
    c[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), m4,
                                     _mm512_and_si512(_mm512_srlv_epi16(h, dn), m30), 0xEA);
}

/* The end of an offset kind's super-block i (Q6_K, Q3_K): the codes' scale sums of its two
 * chains c2 into its 8-lane sums *cs, and its half scale at dp (blocks are not 2-aligned:
 * copied out) with no min. */
static inline void SL_MV_SUFFIX(gkv_offset_end)(gk_buf *u, int64_t i, const __m512i c2[2],
                                                __m256i *cs, const void *dp)
{
    const __m512i c4 = _mm512_add_epi32(c2[0], c2[1]);
    *cs = _mm256_add_epi32(*cs, _mm256_add_epi32(_mm512_castsi512_si256(c4),
                                                 _mm512_extracti64x4_epi64(c4, 1)));
    uint16_t d;
    memcpy(&d, dp, 2);
    u->d[i] = _cvtsh_ss(d);
    u->dmin[i] = 0.0f;
}

static void SL_MV_SUFFIX(gkv_unpack_q6)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    __m256i cs[GK_PCH];
    const __m512i x20 = _mm512_set1_epi8(32);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const sl_block_q6_K *wp =
            (const sl_block_q6_K *)(w + b * (int64_t)sizeof(sl_block_q6_K));
        const __m128i x16 = _mm_loadu_si128((const __m128i *)wp->scales);
        const __m512i e8 = _mm512_broadcast_i32x4(x16);
        cs[i] = SL_MV_SUFFIX(gkv_scales)(u, i, x16, 9);
        __m512i c2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int n = 0; n < 2; n++) {
            __m512i c[2];
            SL_MV_SUFFIX(q6_codes512)(wp, n, c);
            for (int h = 0; h < 2; h++) {
                /* two chains of vpdpbusd */
                c2[h] = SL_MV_SUFFIX(gkv_cs64)(c2[h], c[h], e8, 8 * n + 4 * h);
                _mm512_storeu_si512(u->q[i] + 128 * n + 64 * h, _mm512_sub_epi8(c[h], x20));
            }
        }
        SL_MV_SUFFIX(gkv_offset_end)(u, i, c2, &cs[i], &wp->d);
    }
    SL_MV_SUFFIX(gkv_corr)(u, b1 - b0, cs);
}

/* Q3_K in gkv_unpack_q6's form: codes c = the 2 plane bits | the hmask bit << 2 (value + 4),
 * 64 elements a zmm (groups 2h, 2h + 1 of half n: the 32 plane bytes in both 256-bit halves,
 * shifted by 4h and 4h + 2; hmask bits 4n + 2h and + 1), q = c - 4 signed; corr's bias sum
 * 16 * 4 sc_j (sh 6). Its scales are per 16 elements, as Q6_K's (GKV_OFFSET). */
static void SL_MV_SUFFIX(gkv_unpack_q3)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    __m256i cs[GK_PCH];
    const __m512i four = _mm512_set1_epi8(4), three = _mm512_set1_epi8(3);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const sl_block_q3_K *wp =
            (const sl_block_q3_K *)(w + b * (int64_t)sizeof(sl_block_q3_K));
        const __m256i sc16 = SL_MV_SUFFIX(q3k_scales)(wp->scales);
        const __m128i x16 = _mm256_cvtepi16_epi8(sc16);
        const __m512i e8 = _mm512_broadcast_i32x4(x16);
        cs[i] = SL_MV_SUFFIX(gkv_scales)(u, i, x16, 6);
        const __m512i hm =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)wp->hmask));
        __m512i c2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int n = 0; n < 2; n++) {
            const __m512i qv =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wp->qs + 32 * n)));
            for (int h = 0; h < 2; h++) {
                const __m512i sh = _mm512_set_epi64(4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 2,
                                                    4 * h, 4 * h, 4 * h, 4 * h);
                const int b_lo = 4 * n + 2 * h;
                /* bit b_lo of every byte (low half), b_lo + 1 (high half); unsigned shifts */
                const long long lo_bit = (long long)(0x0101010101010101ull << b_lo),
                                hi_bit = (long long)(0x0101010101010101ull << (b_lo + 1));
                const __m512i bit = _mm512_set_epi64(hi_bit, hi_bit, hi_bit, hi_bit, lo_bit,
                                                     lo_bit, lo_bit, lo_bit);
                const __m512i lo = _mm512_and_si512(_mm512_srlv_epi64(qv, sh), three);
                const __m512i c =
                    _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hm, bit), lo, four);
                c2[h] = SL_MV_SUFFIX(gkv_cs64)(c2[h], c, e8, 8 * n + 4 * h);
                _mm512_storeu_si512(u->q[i] + 128 * n + 64 * h, _mm512_sub_epi8(c, four));
            }
        }
        SL_MV_SUFFIX(gkv_offset_end)(u, i, c2, &cs[i], &wp->d);
    }
    SL_MV_SUFFIX(gkv_corr)(u, b1 - b0, cs);
}

/* The table values of elements 128n..128n+127 of the IQ4_XS super-block at p, in element order
 * (v[0] 128n.., v[1] 128n+64..): a 64-byte load holds 4 sub-blocks' nibbles (elements
 * 32k..32k+15 low, 32k+16..32k+31 high, 16 bytes each); their low and high nibbles regrouped
 * by 128-bit lanes (vpermt2q) into the element order, then the table (vpshufb in every lane).
 * gkv_unpack_iq4xs's and the AMX kernel's. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gkv_iq4xs_values)(const char *p,
                                                                                 int n,
                                                                                 __m512i v[2])
{
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)sl_iq4nl_values));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* qwords of (low nibbles, high nibbles): sub-blocks 0, 1 of the load, then 2, 3 */
    const __m512i ix[2] = {_mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                           _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4)};
    const __m512i q = _mm512_loadu_si512(p + 8 + 64 * n);
    const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    for (int h = 0; h < 2; h++)
        v[h] = _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(lo, ix[h], hi));
}

static void SL_MV_SUFFIX(gkv_unpack_iq4xs)(const char *w, int64_t b0, int64_t b1, gk_buf *u)
{
    __m256i cs[GK_PCH];
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const char *p = w + b * (int64_t)sizeof(sl_block_iq4_xs);
        /* the 8 per-32 scales (int16) as bytes, each twice: entry e = scale e / 2 */
        const __m128i s8 = _mm_packs_epi16(
            _mm256_castsi256_si128(SL_MV_SUFFIX(iq4xs_scales)(p)), _mm_setzero_si128());
        const __m128i x16 = _mm_unpacklo_epi8(s8, s8);
        const __m512i e8 = _mm512_broadcast_i32x4(x16);
        cs[i] = SL_MV_SUFFIX(gkv_scales)(u, i, x16, 11);
        __m512i c2[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int n = 0; n < 2; n++) {
            __m512i v[2];
            SL_MV_SUFFIX(gkv_iq4xs_values)(p, n, v);
            for (int h = 0; h < 2; h++) {
                /* two chains of vpdpbusd; codes v + 128 */
                c2[h] = SL_MV_SUFFIX(gkv_cs64)(c2[h], _mm512_xor_si512(v[h], x80), e8,
                                               8 * n + 4 * h);
                _mm512_storeu_si512(u->q[i] + 128 * n + 64 * h, v[h]);
            }
        }
        const __m512i c4 = _mm512_add_epi32(c2[0], c2[1]);
        cs[i] = _mm256_add_epi32(cs[i], _mm256_add_epi32(_mm512_castsi512_si256(c4),
                                                         _mm512_extracti64x4_epi64(c4, 1)));
        u->d[i] = SL_MV_SUFFIX(g_half)(p);
        u->dmin[i] = 0.0f;
    }
    SL_MV_SUFFIX(gkv_corr)(u, b1 - b0, cs);
}

/* The codebook types (matvec_iq_x86_tmpl.h's decoders, 32 values a step) in gkv_unpack_q6's
 * form: q the signed values v (IQ1: 8 g +- 1; the decoders' magnitudes signed by their sign
 * carriers), sp each 16 elements' odd scale (a scale per 32 written twice, so both kinds and
 * the tiles' gka_scale read it), corr -128 sum sc v, d the reference's factor * d (its
 * factor * d * x.d is (factor * d) * x.d: gkv_micro's dw * dx, the same bits). Sub-block sums
 * stay below 32 x 62 x 255 < 2^23, the scaled ones below 2^31. Once per row and call, so the
 * decoders' table loads are paid once, not once per token group (the 8-token kernel's). */
#define SL_GKV_IQ_UNPACK(name, code, B, NAME)                                                         \
    static void SL_MV_SUFFIX(gkv_unpack_##name)(const char *w, size_t bytes, int64_t b0,           \
                                                int64_t b1, gk_buf *u)                           \
    {                                                                                            \
        __m256i cs[GK_PCH];                                                                      \
        const __m256i one = _mm256_set1_epi8(1);                                                 \
        for (int64_t b = b0; b < b1; b++) {                                                      \
            const int64_t i = b - b0;                                                            \
            const uint8_t *p = (const uint8_t *)w + b * (int64_t)bytes;                          \
            __m256i s = _mm256_setzero_si256();                                                  \
            const __m256i S = SL_MV_SUFFIX(name##_S)(p);                                         \
            for (int ib = 0; ib < 8; ib++) {                                                     \
                __m256i a, sg, sc;                                                               \
                SL_MV_SUFFIX(name##_ib)(p, ib, S, &a, &sg, &sc);                                 \
                const __m256i v = _mm256_sign_epi8(a, sg);                                       \
                _mm256_storeu_si256((__m256i *)(u->q[i] + 32 * ib), v);                          \
                s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(one, v), sc));    \
                const uint32_t lo = (uint16_t)_mm256_extract_epi16(sc, 0),                       \
                               hi = (uint16_t)_mm256_extract_epi16(sc, 8);                       \
                u->sp[i][2 * ib] = (int32_t)(lo | lo << 24);                                     \
                u->sp[i][2 * ib + 1] = (int32_t)(hi | hi << 24);                                 \
            }                                                                                    \
            cs[i] = s;                                                                           \
            u->d[i] = sl__iq_factor(code) * SL_MV_SUFFIX(iq_scale)(code, p);                                \
            u->dmin[i] = 0.0f;                                                                   \
        }                                                                                        \
        SL_MV_SUFFIX(gkv_corr)(u, b1 - b0, cs);                                                  \
    }
SL__IQ_TYPES(SL_GKV_IQ_UNPACK)
#undef SL_GKV_IQ_UNPACK

/* gk_unpack_q45 (Q4_K, Q5_K: the same bytes) on 512 bits: one load holds rounds 2n and 2n + 1
 * (their 32 bytes of nibbles in the two 256-bit halves); Q5_K's qh, read twice, shifted by 4n
 * and 4n + 2 (range_q5_K's qh >> 2j per round j) so that one pair of shifts serves both; the
 * halves' low and high nibbles are regrouped into element order by 128-bit lanes. */
/* Elements 128n..128n+127 of the Q4_K (q5 false) or Q5_K super-block at p as codes 0..31, in
 * element order: c[0] 128n.., c[1] 128n+64.. (gkv_unpack_q45's and the AMX kernel's). */
static inline void SL_MV_SUFFIX(gkv_q45_codes)(const uint8_t *p, bool q5, int n, __m512i c[2])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), x10 = _mm512_set1_epi8(0x10);
    const uint8_t *qs = p + (q5 ? 48 : 16); /* after d, dmin, scales[12] (and qh[32]) */
    const __m512i q = _mm512_loadu_si512(qs + 64 * n);
    /* (a & m4) | b: ternary-logic table 0xEA of (a, m4, b) */
    __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (q5) {
        const __m512i h2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
        const __m512i h = _mm512_srlv_epi16(
            h2, _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * n)),
                                   _mm256_set1_epi16((short)(4 * n + 2)), 1));
        lo = _mm512_ternarylogic_epi32(q, m4, _mm512_and_si512(_mm512_slli_epi16(h, 4), x10),
                                       0xEA);
        hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16(h, 3), x10));
    }
    c[0] = _mm512_shuffle_i64x2(lo, hi, 0x44);
    c[1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
}

static void SL_MV_SUFFIX(gkv_unpack_q45)(uint32_t type, const char *w, int64_t b0, int64_t b1,
                                         gk_buf *u)
{
    const bool q5 = type == SL_GGML_Q5_K;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i = b - b0;
        const uint8_t *p = (const uint8_t *)w +
                           b * (int64_t)(q5 ? sizeof(sl_block_q5_K) : sizeof(sl_block_q4_K));
        SL_MV_SUFFIX(gk_q45_head)(p, i, u);
        for (int n = 0; n < 2; n++) {
            __m512i c[2];
            SL_MV_SUFFIX(gkv_q45_codes)(p, q5, n, c);
            _mm512_storeu_si512(u->q[i] + 128 * n, c[0]);
            _mm512_storeu_si512(u->q[i] + 128 * n + 64, c[1]);
        }
    }
}

/* Unpacks super-blocks [c0, c1) of the nr rows from call row row0 into ub (the offset kinds in
 * gkv_unpack_q6's form),
 * pointing ur[m] at row m's. */
static inline void SL_MV_SUFFIX(gkv_unpack)(const sl__mv_type *t, const sl__gemm_rows *a,
                                           int64_t row0, int nr, int64_t c0, int64_t c1,
                                           gk_buf ub[8], const gk_buf *ur[GKV_R])
{
    const uint32_t ty = t->type;
    for (int m = 0; m < nr; m++) {
        const int64_t r = a->idx ? a->idx[row0 + m] : row0 + m;
        const char *w = a->w + (size_t)r * a->wrb;
        if (ty == SL_TYPE_Q4_K_R8 && !a->idx) {
            /* whole groups of 8 rows (matvec.c: row_grain; GKV_SG and GKV_R divide them):
             * the group is unpacked at its first row, its other rows read ub then */
            if (r % 8 == 0) SL_MV_SUFFIX(gk_unpack_r8x8)(a->w, a->nb, r / 8, c0, c1, ub);
            ur[m] = &ub[r % 8];
            continue;
        }
        if (ty == SL_TYPE_Q4_K_R8) { /* a gathered row: copied out, read as Q4_K */
            sl_block_q4_K row[GK_PCH];
            sl__q4_K_r8_row(a->w, a->nb, r, c0, c1, row);
            SL_MV_SUFFIX(gkv_unpack_q45)(SL_GGML_Q4_K, (const char *)row, 0, c1 - c0, &ub[m]);
        } else if (ty == SL_GGML_Q6_K) {
            SL_MV_SUFFIX(gkv_unpack_q6)(w, c0, c1, &ub[m]);
        } else if (ty == SL_GGML_Q3_K) {
            SL_MV_SUFFIX(gkv_unpack_q3)(w, c0, c1, &ub[m]);
        } else if (ty == SL_GGML_IQ4_XS) {
            SL_MV_SUFFIX(gkv_unpack_iq4xs)(w, c0, c1, &ub[m]);
        } else if (SL_MV_SUFFIX(gkv_is_iq)(ty)) {
            switch (ty) {
#define SL_GKV_IQ_CALL_(name, code, B, NAME)                                                          \
    case code: SL_MV_SUFFIX(gkv_unpack_##name)(w, t->bytes, c0, c1, &ub[m]); break;
                SL__IQ_TYPES(SL_GKV_IQ_CALL_)
#undef SL_GKV_IQ_CALL_
            default: break;
            }
        } else {
            SL_MV_SUFFIX(gkv_unpack_q45)(ty, w, c0, c1, &ub[m]);
        }
        ur[m] = &ub[m];
    }
}

/* Token group t0 of call a, nv panels of 16 tokens: each panel's first activation row x0 and
 * its gather offsets off, and, where a's rows are one panel chunk, the panels p themselves
 * (plus128: the offset kinds' x + 128); gemm_kv_block's and the AMX kernel's. */
static inline void SL_MV_SUFFIX(gkv_group_panels)(const sl__gemm_rows *a, int64_t t0, int nv,
                                                  bool one_chunk, bool plus128,
                                                  const char *x0[GKV_V], __m512i off[GKV_V],
                                                  gkv_panel *p)
{
    for (int v = 0; v < nv; v++) {
        x0[v] = a->xq + (size_t)(t0 + 16 * v) * a->arb;
        off[v] = SL_MV_SUFFIX(gkv_offsets)(t0 + 16 * v, a->n_tok, a->arb);
        if (one_chunk)
            SL_MV_SUFFIX(gkv_panel_build)(x0[v], off[v], a->xb, 0, a->nb, plus128, &p[v]);
    }
}

/* Rows [s0, s0 + ns) of tokens [t0, t0 + nt) (nv panels) from their lanes lt (nl in use) into
 * a's outputs: gemm_kv_block's epilogue, and gemm_k_amx.c's. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gkv_out)(
    const sl__gemm_rows *a, gkv_lanes *lt, int64_t s0, int64_t ns, int64_t t0, int64_t nt,
    int nv, int nl)
{
    if (!(a->idx && a->scatter)) {
        /* rows s0.. are contiguous in each token's output row: per 16 rows and panel,
         * their lanes reduced in registers, a 16 x 16 transpose (register shuffles)
         * and one (masked) vector store per token; the loops unrolled, so that the
         * transpose's outputs stay in registers */
        for (int64_t k0 = 0; k0 < ns; k0 += 16) {
            const int nk = ns - k0 < 16 ? (int)(ns - k0) : 16;
            const __mmask16 km = (__mmask16)((1u << nk) - 1u);
            for (int v = 0; v < nv; v++) {
                __m512i r[16], o[16];
                float *y = a->y + (t0 + 16 * v) * a->y_stride + s0 + k0;
                const int ng = nt - 16 * v < 16 ? (int)(nt - 16 * v) : 16;
                GKV_UNROLL
                for (int q = 0; q < 16; q++)
                    r[q] = q < nk ? _mm512_castps_si512(SL_MV_SUFFIX(gkv_reduce)(
                                        lt[k0 + q][v], nl))
                                  : r[0];
                SL_MV_SUFFIX(gkv_transpose16)(r, o);
                GKV_UNROLL
                for (int g = 0; g < 16; g++)
                    if (g < ng)
                        _mm512_mask_storeu_ps(y + g * a->y_stride, km,
                                              _mm512_castsi512_ps(o[g]));
            }
        }
    } else {
        /* token by token, so that a token's stores of the row group share cache
         * lines */
        _Alignas(64) float res[GKV_SG][16 * GKV_V];
        int64_t out[GKV_SG];
        for (int64_t k = 0; k < ns; k++) {
            out[k] = a->idx[s0 + k];
            for (int v = 0; v < nv; v++)
                _mm512_store_ps(res[k] + 16 * v, SL_MV_SUFFIX(gkv_reduce)(lt[k][v], nl));
        }
        for (int64_t tt = 0; tt < nt; tt++) {
            float *y = a->y + (t0 + tt) * a->y_stride;
            /* plain stores: the empty asm keeps clang from turning them into slower
             * gathers and scatters */
            for (int64_t k = 0; k < ns; k++) {
                __asm__("" : "+r"(y));
                y[out[k]] = res[k][tt];
            }
        }
    }
}

/* Tokens in groups of 16 * GKV_V (a last group of at most 16 takes one panel; GKV_NARROW
 * says when the few-token kernel or gemm_k takes a call's last group), rows in groups of
 * GKV_SG whose lanes live in memory, micro-kernels of GKV_R rows (GKV_R / 2 with two panels)
 * within them. The rows are unpacked once per call (once: up to GKV_UCAP chunks), per row
 * group and chunk (fused: one token group, rows of at most GK_PCH super-blocks; 10-32 tokens,
 * the sweep's shapes, gemm_bench CHUNK 256: IQ4_XS 1.03-1.09x, Q6_K 1.05-1.2x, Q4_K and Q5_K
 * 1.0-1.1x faster than once and the offset kinds' blocks of 128 rows), or per row group and
 * super-block. */
static void SL_MV_SUFFIX(gemm_kv_block)(const sl__mv_type *t, const sl__gemm_rows *a,
                                        int64_t i0, int64_t i1)
{
    const int kind = SL_MV_SUFFIX(gkv_kind)(t->type);
    const bool one_chunk = a->nb <= GKV_PCH;
    const int nl = a->nb < 8 ? (int)a->nb : 8; /* lanes in use */
    /* the call's panels where they were built once in the form this kernel reads */
    const gkv_panel *pre =
        a->pan && a->pan_plus128 == (kind != GKV_MINS) ? (const gkv_panel *)a->pan : NULL;
    gkv_panel p[GKV_V];
    gk_buf ub[8];
    _Alignas(64) gkv_lanes lt[GKV_SG];
    /* the call's rows unpacked once (chunk c of row i0 + m at uc[c * nrow + m]) when they fit,
     * else each row group's super-block once per token group */
    const int64_t nrow = i1 - i0, nch = (a->nb + GK_PCH - 1) / GK_PCH;
    /* one token group and rows of one chunk: each row group's chunk unpacked right before its
     * micro-kernels (into ub, in L1), not the whole call's rows first (uc, in L2) */
    const bool fused = a->n_tok <= 16 * GKV_V && nch == 1;
    const bool once = !fused && nrow * nch <= GKV_UCAP;
    gk_buf uc[GKV_UCAP];
    for (int64_t c = 0; once && c < nch; c++) {
        const int64_t c0 = c * GK_PCH, c1 = a->nb - c0 < GK_PCH ? a->nb : c0 + GK_PCH;
        /* groups of 8 rows: a dense Q4_K_R8 group (i0 % 8 == 0: row_grain) unpacks at once */
        for (int64_t m0 = 0; m0 < nrow; m0 += 8) {
            const gk_buf *ur[GKV_R];
            SL_MV_SUFFIX(gkv_unpack)(t, a, i0 + m0, nrow - m0 < 8 ? (int)(nrow - m0) : 8, c0, c1,
                                     &uc[c * nrow + m0], ur);
        }
    }
    for (int64_t t0 = 0; t0 < a->n_tok;) {
        const int64_t left = a->n_tok - t0;
        if (left <= GKV_NARROW && !once) { /* the few-token kernel (or gemm_k) */
            sl__gemm_rows b = *a;
            b.pan = NULL; /* built from token 0 */
            b.xq += (size_t)t0 * a->arb;
            b.y += t0 * a->y_stride;
            b.n_tok = left;
            SL_MV_SUFFIX(gkv_narrow_fn)(t->type)(t, &b, i0, i1);
            return;
        }
        const int nv = left > 16 ? GKV_V : 1;
        const int rmax = nv == 1 ? GKV_R : GKV_R / 2; /* registers: 2 x R x V accumulators */
        const int64_t nt = left < 16 * nv ? left : 16 * nv;
        const char *x0[GKV_V];
        __m512i off[GKV_V];
        if (!pre)
            SL_MV_SUFFIX(gkv_group_panels)(a, t0, nv, one_chunk, kind != GKV_MINS, x0, off, p);
        for (int64_t s0 = i0; s0 < i1; s0 += GKV_SG) {
            const int64_t ns = i1 - s0 < GKV_SG ? i1 - s0 : GKV_SG;
            for (int64_t c0 = 0; c0 < a->nb; c0 += GKV_PCH) {
                const int64_t c1 = a->nb - c0 < GKV_PCH ? a->nb : c0 + GKV_PCH;
                const gkv_panel *pp = pre ? &pre[c0 / GKV_PCH * a->pan_np + t0 / 16] : p;
                for (int v = 0; !pre && !one_chunk && v < nv; v++)
                    SL_MV_SUFFIX(gkv_panel_build)(x0[v], off[v], a->xb, c0, c1,
                                                  kind != GKV_MINS, &p[v]);
                for (int64_t k0 = 0; fused && k0 < ns; k0 += rmax) {
                    const int nr = ns - k0 < rmax ? (int)(ns - k0) : rmax;
                    const gk_buf *ur[GKV_R];
                    SL_MV_SUFFIX(gkv_unpack)(t, a, s0 + k0, nr, 0, a->nb, ub, ur);
                    const gkv_micro_fn f = SL_MV_SUFFIX(gkv_micros)[kind][nv - 1][nr - 1];
                    for (int64_t b = 0; b < a->nb; b++) f(ur, pp, b, b, (int)b, true, &lt[k0]);
                }
                /* super-block by super-block: the panels' one super-block (8 KiB) and the
                 * rows' stay in L1 while every row group meets them */
                for (int64_t b = c0; b < c1 && !fused; b++)
                    for (int64_t k0 = 0; k0 < ns; k0 += rmax) {
                        const int nr = ns - k0 < rmax ? (int)(ns - k0) : rmax;
                        const gk_buf *ur[GKV_R];
                        int64_t ui = 0;
                        if (once) {
                            const gk_buf *uc0 = &uc[b / GK_PCH * nrow + (s0 - i0 + k0)];
                            for (int m = 0; m < nr; m++) ur[m] = uc0 + m;
                            ui = b % GK_PCH;
                        } else {
                            SL_MV_SUFFIX(gkv_unpack)(t, a, s0 + k0, nr, b, b + 1, ub, ur);
                        }
                        const gkv_micro_fn f = SL_MV_SUFFIX(gkv_micros)[kind][nv - 1][nr - 1];
                        f(ur, pp, ui, b - c0, (int)(b % 8), b < 8, &lt[k0]);
                    }
            }
            SL_MV_SUFFIX(gkv_out)(a, lt, s0, ns, t0, nt, nv, nl);
        }
        t0 += nt;
    }
}

/* gemm_kv_block (or its tiles) on blocks of rows that its once-unpack holds (a multiple of
 * GKV_SG, so Q4_K_R8's groups of 8 stay whole) when there are several token groups or the
 * tiles take the call: matvec.c hands it up to 256
 * rows, and a block's panels cost less than unpacking every row once per token group (Q6_K
 * 768 x 1024 in chunks of 192 rows, 40 tokens: 1.3x, gemm_bench) */
static void SL_MV_SUFFIX(gemm_kv)(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0,
                                  int64_t i1)
{
    /* the gathers' int32 offsets reach 15 rows past a group's first token */
    if (a->arb > (size_t)(INT32_MAX / 16)) {
        const sl__gemm_fn few = sl__gemm_few_avx512(t->type);
        (few ? SL_MV_SUFFIX(gemm_k) : SL_MV_SUFFIX(gkv_narrow_fn)(t->type))(t, a, i0, i1);
        return;
    }
    if (a->n_tok <= GKV_NARROW) {
        /* the few-token kernel where the type has one (gemm.h: SL__GEMM_FEW_MAX tokens) */
        SL_MV_SUFFIX(gkv_narrow_fn)(t->type)(t, a, i0, i1);
        return;
    }
    /* one token group unpacks each row once anyway: blocks would only add panel builds (Q4_K
     * 2048 x 2048, 16 tokens: 10% slower; Q4_K, Q5_K 256 x 1024, 9-24 tokens: 5-8%). Rows of
     * one chunk take it whole per row group (gemm_kv_block's fused), which once made the offset
     * kinds' blocks of 128 rows 1.03-1.2x faster than super-block by super-block unpacks, each
     * with its own corr reduction. The AMX tiles take blocks at any token count they take. */
    const int64_t nch = (a->nb + GK_PCH - 1) / GK_PCH;
    const bool tiles = sl__gemm_amx_takes(a->amx, a->n_tok, i1 - i0);
    const bool blocks = a->n_tok > 16 * GKV_V || tiles;
    /* Rows too long for GKV_SG of them (more than 16 super-blocks) go whole, and the tile
     * kernel walks each row group's rows in pieces: blocks of 16 rows that it would unpack
     * once ran no faster at 48-128 tokens (their panels built per 16 rows) and 1.15-1.2x
     * slower at 17-32 than pieces unpacked once per token group (gemm_bench, 1 thread,
     * 256 x 7168, Q4_K Q5_K Q6_K IQ4_XS, alternated in one run; 256 tokens 0.95-0.97x), which
     * now serve 4 token groups each. */
    const int64_t rb = blocks ? GKV_UCAP / nch / GKV_SG * GKV_SG : 0;
    for (int64_t r0 = i0; r0 < i1; r0 += rb ? rb : i1 - i0) {
        const int64_t r1 = rb && i1 - r0 > rb ? r0 + rb : i1;
        if (!(tiles && sl__gemm_k_amx(t, a, r0, r1))) SL_MV_SUFFIX(gemm_kv_block)(t, a, r0, r1);
    }
}

#ifndef SL_MV_KERNELS_ONLY
/* gemm.h's panels built once per call: gkv_panel structs, chunk c8 of GKV_PCH super-blocks of
 * panel P (tokens 16P..16P+15, the last one's spare slots repeating token n_tok - 1) at
 * [c8 * np + P], the form the kernels' own gkv_group_panels / gkv_panel_build make. */
size_t sl__gemm_k_panel_bytes(void) { return sizeof(gkv_panel); }

bool sl__gemm_k_panels_form(uint32_t type, bool tiles, bool *plus128)
{
    switch (type) {
    case SL_GGML_Q4_K:
    case SL_TYPE_Q4_K_R8:
    case SL_GGML_Q5_K:
    case SL_GGML_Q6_K:
    case SL_GGML_Q3_K:
    case SL_GGML_IQ4_XS: break;
    default:
        if (!SL_MV_SUFFIX(gkv_is_iq)(type)) return false;
    }
    if (plus128) *plus128 = !tiles && SL_MV_SUFFIX(gkv_kind)(type) != GKV_MINS;
    return true;
}

void sl__gemm_k_panels_avx512(const sl__gemm_rows *a, bool plus128, void *pan, int64_t k0,
                              int64_t k1)
{
    const int64_t np = (a->n_tok + 15) / 16;
    gkv_panel *pp = pan;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t c0 = k / np * GKV_PCH, t0 = k % np * 16;
        const int64_t c1 = a->nb - c0 < GKV_PCH ? a->nb : c0 + GKV_PCH;
        SL_MV_SUFFIX(gkv_panel_build)(a->xq + (size_t)t0 * a->arb,
                                      SL_MV_SUFFIX(gkv_offsets)(t0, a->n_tok, a->arb), a->xb,
                                      c0, c1, plus128, &pp[k]);
    }
}
#endif
