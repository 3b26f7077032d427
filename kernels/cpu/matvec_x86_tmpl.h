/* kernels/cpu/matvec_x86_tmpl.h: the x86 SIMD range kernels, written once and compiled twice:
 * matvec_avx2.c (AVX2 + FMA + F16C) and matvec_avx512.c (adds AVX-512 F/BW/VL + VNNI: 512-bit
 * float lanes and vpdpbusd for the 4-way byte dots). The includer defines
 *   SL_MV_SUFFIX(name)  the ISA-suffixed function name;
 *   SL_MV_AVX512        1 in the AVX-512 build, 0 otherwise;
 *   SL_MV_KERNELS_ONLY  (optional) leave out the entry points (sl__mv_range_<isa>, ...);
 * inside a `#pragma clang attribute push(target(...))` region.
 *
 * How bit-exactness with kernels/ref/matvec is kept (see kernels/cpu/matvec.h):
 * - integer block sums are exact: weights enter vpmaddubsw/vpdpbusd as unsigned bytes (|w| via
 *   vpsignb with the sign moved onto the activation, or unsigned nibbles), activations are in
 *   [-127, 127], so no int16 pair sum exceeds 128 * 127 * 2 < 2^15;
 * - 32-element block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, MXFP4): 8 consecutive blocks
 *   (b % 8 == 0 .. 7) are reduced into one vector of 8 block sums, converted, multiplied by the
 *   8 scale products and added to the 8 lanes: the reference's (float)isum * (dw * dx) (plus,
 *   for the Q8_1 types, a separately rounded + mw * sx) and lane += t, element for element.
 *   a short last group adds its m terms to lanes 0 .. m-1 only (a blend); an unaligned head
 *   (column-listed runs) goes through the scalar reference code on the same lanes;
 * - K-quants: one super-block's integer sums by SIMD; whole rows form the float terms of 8
 *   super-blocks at once as the 32-element types do (lane b % 8), column-listed runs one
 *   super-block at a time with the reference's scalar term;
 * - float weights: lane i % 32 of four 8-wide (or two 16-wide) accumulators, vfmadd = fmaf.
 */
/* The includer has included <immintrin.h>, <string.h>, gguf/gguf.h and matvec_impl.h before
 * opening the target region (declarations inside it would pick up the target attribute). */

static inline __m256i SL_MV_SUFFIX(u8s8_dot)(__m256i u, __m256i s)
{
    /* 8 int32, each the sum of 4 adjacent u8 * s8 products. */
#if SL_MV_AVX512
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* Signed byte dot: w any int8, x in [-127, 127]. */
static inline __m256i SL_MV_SUFFIX(s8s8_dot)(__m256i w, __m256i x)
{
    return SL_MV_SUFFIX(u8s8_dot)(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* v[k] (8 int32 each) -> one vector whose element k is the sum of v[k]'s elements. */
static inline __m256i SL_MV_SUFFIX(hsum8x8)(const __m256i v[8])
{
    const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                            _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* hsum8x8 of a group of m blocks (v[m..7] zero): for m <= 4 the upper four sums are 0 and
 * half the tree is skipped (rows of 2 or 4 super-blocks are one such group). */
static inline __m256i SL_MV_SUFFIX(hsum8x8_m)(const __m256i v[8], int m)
{
    if (m > 4) return SL_MV_SUFFIX(hsum8x8)(v);
    const __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
                                         _mm256_hadd_epi32(v[2], v[3]));
    return _mm256_zextsi128_si256(
        _mm_add_epi32(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1)));
}

static inline int32_t SL_MV_SUFFIX(hsum_i32)(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Which block feeds lane k of a group. pair 0: blocks 0..m-1 (m <= 8) of one row, p its
 * first. pair 1: blocks 0..m-1 (m <= 4) of two rows, p's in lanes 0..3 and q's in 4..7, so
 * one group serves two short rows (activations: the same x blocks for both, q = p). pair 2:
 * blocks 0..m-1 (m <= 2) of four rows q - p bytes apart, row i's in lanes 2i, 2i + 1 (rows of
 * 512 columns, a MoE expert's down projection, fill a group four at a time). */
static inline int SL_MV_SUFFIX(lane_on)(int k, int m, int pair)
{
    return pair == 2 ? (k & 1) < m : pair ? (k & 3) < m : k < m;
}

static inline const char *SL_MV_SUFFIX(lane_at)(const char *p, const char *q, int k,
                                               size_t stride, int pair)
{
    if (pair == 2) return p + (k >> 1) * (q - p) + (size_t)(k & 1) * stride;
    return pair ? (k < 4 ? p : q) + (size_t)(k & 3) * stride : p + (size_t)k * stride;
}

/* The half scales at p/q of the group's lanes (lane_on), as floats (F16C is exact, like the
 * reference's conversion); other lanes 0. Built in two 64-bit registers rather than stored to
 * memory and reloaded, which would stall on store-to-load forwarding. */
static inline __m256 SL_MV_SUFFIX(load_halves)(const char *p, const char *q, size_t stride,
                                               int m, int pair)
{
    uint64_t v[2] = {0, 0};
    for (int k = 0; k < 8; k++) {
        if (!SL_MV_SUFFIX(lane_on)(k, m, pair)) continue;
        uint16_t h;
        memcpy(&h, SL_MV_SUFFIX(lane_at)(p, q, k, stride, pair), 2);
        v[k >> 2] |= (uint64_t)h << (16 * (k & 3));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)v[1], (long long)v[0]));
}

/* Q4_0 nibbles of one block -> 32 bytes in element order (low nibbles 0..15, high 16..31). */
static inline __m256i SL_MV_SUFFIX(nibbles)(const uint8_t *qs)
{
    /* the 16 bytes in both halves (a broadcast load), the upper half shifted by 4 (a variable
     * shift of its 32-bit elements: bits cross into a byte's high nibble only, masked off):
     * three uops where two shifts, two ands and an insert were five */
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(0x0F));
}

/* The 32 bits of a Q5 block's qh -> 32 bytes, byte j 0xFF where bit j is set, else 0. */
static inline __m256i SL_MV_SUFFIX(qh_bytes)(const char *qh)
{
    uint32_t x32;
    memcpy(&x32, qh, sizeof x32);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe); /* all bits but j % 8 */
    return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi64x(-1));
}

/* ---- 32-element block types ------------------------------------------------------------- */

/* Integer dot of one weight block with one activation block: 8 int32 partial sums. */

static inline __m256i SL_MV_SUFFIX(dot_q8_0)(const char *wp, const char *xp)
{
    const __m256i wq = _mm256_loadu_si256((const __m256i *)(wp + 2));
    return SL_MV_SUFFIX(s8s8_dot)(wq, _mm256_loadu_si256((const __m256i *)(xp + 2)));
}

static inline __m256i SL_MV_SUFFIX(dot_q4_0)(const char *wp, const char *xp)
{
    const __m256i q = _mm256_sub_epi8(SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 2)),
                                      _mm256_set1_epi8(8));
    return SL_MV_SUFFIX(s8s8_dot)(q, _mm256_loadu_si256((const __m256i *)(xp + 2)));
}

/* Q5_0: q - 16 as a signed byte is the nibble with 0xF0 or-ed in where bit 4 is clear. */
static inline __m256i SL_MV_SUFFIX(dot_q5_0)(const char *wp, const char *xp)
{
    const __m256i hb = SL_MV_SUFFIX(qh_bytes)(wp + 2);
    const __m256i q = _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 6)),
                                      _mm256_andnot_si256(hb, _mm256_set1_epi8((char)0xF0)));
    return SL_MV_SUFFIX(s8s8_dot)(q, _mm256_loadu_si256((const __m256i *)(xp + 2)));
}

/* MXFP4 with Q8_0 activations: the nibbles index the doubled e2m1 table (sl__mv_kvalues_mxfp4,
 * values in [-12, 12]) through vpshufb, then the signed byte dot as Q4_0. */
static inline __m256i SL_MV_SUFFIX(dot_mxfp4)(const char *wp, const char *xp)
{
    const __m128i kv = _mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4);
    const __m256i table = _mm256_set_m128i(kv, kv); /* vpshufb looks up within each 128-bit half */
    const __m256i q =
        _mm256_shuffle_epi8(table, SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 1)));
    return SL_MV_SUFFIX(s8s8_dot)(q, _mm256_loadu_si256((const __m256i *)(xp + 2)));
}

/* IQ4_NL with Q8_0 activations: as MXFP4, through the non-linear table (sl_iq4nl_values, values
 * in [-127, 113]: |w| <= 127 keeps the sign trick's pair sums below 2^15). */
static inline __m256i SL_MV_SUFFIX(iq4_values)(const uint8_t *qs)
{
    const __m128i kv = _mm_loadu_si128((const __m128i *)sl_iq4nl_values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(kv, kv), SL_MV_SUFFIX(nibbles)(qs));
}

static inline __m256i SL_MV_SUFFIX(dot_iq4_nl)(const char *wp, const char *xp)
{
    return SL_MV_SUFFIX(s8s8_dot)(SL_MV_SUFFIX(iq4_values)((const uint8_t *)(wp + 2)),
                                  _mm256_loadu_si256((const __m256i *)(xp + 2)));
}

/* Q4_1/Q5_1 with Q8_1 activations: unsigned q, so the byte dot needs no sign trick; q5: bit 4
 * of q comes from qh at offset 4 and the nibbles start at 8. Pair sums: 2 * 31 * 127 < 2^15. */
static inline __m256i SL_MV_SUFFIX(dot_q4_1)(const char *wp, const char *xp)
{
    const __m256i q = SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 4));
    return SL_MV_SUFFIX(u8s8_dot)(q, _mm256_loadu_si256((const __m256i *)(xp + 4)));
}

static inline __m256i SL_MV_SUFFIX(dot_q5_1)(const char *wp, const char *xp)
{
    const __m256i q = _mm256_or_si256(
        SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 8)),
        _mm256_and_si256(SL_MV_SUFFIX(qh_bytes)(wp + 4), _mm256_set1_epi8(0x10)));
    return SL_MV_SUFFIX(u8s8_dot)(q, _mm256_loadu_si256((const __m256i *)(xp + 4)));
}

/* E8M0 exponents (8 int32 in [0, 255]) as sl__mv_e8m0_half gives them: 2^(e-128) as the float
 * with exponent field e - 1, or the subnormal 0x00200000 << e for e < 2. */
static inline __m256 SL_MV_SUFFIX(e8m0_bits)(__m256i ev)
{
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(ev, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ev);
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), ev);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, is_sub));
}

/* The MXFP4 block scales (E8M0 bytes) at p/q of the group's lanes (e8m0_bits). Other lanes
 * hold a finite value of no meaning (the caller masks them). */
static inline __m256 SL_MV_SUFFIX(load_e8m0_half)(const char *p, const char *q, size_t stride,
                                                  int m, int pair)
{
    int32_t e[8] = {0};
    for (int k = 0; k < 8; k++)
        if (SL_MV_SUFFIX(lane_on)(k, m, pair))
            e[k] = (uint8_t)*SL_MV_SUFFIX(lane_at)(p, q, k, stride, pair);
    return SL_MV_SUFFIX(e8m0_bits)(
        _mm256_setr_epi32(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]));
}

/* How a type's block term is formed from its integer sum (kernels/ref/matvec_blocks.c):
 * D: (float)isum * (dw * dx); E8M0: (float)isum * (dx * e8m0(w)); DM (Q8_1 activations):
 * a = (float)isum * (dw * dx), t = a + mw * sx, each a separate rounding. */
enum { SL_MV_TERM_D, SL_MV_TERM_E8M0, SL_MV_TERM_DM };

typedef __m256i (*SL_MV_SUFFIX(dot_fn))(const char *wp, const char *xp);

/* The x block scales of a group's lanes as floats: from hx (the row's precomputed scales,
 * 0 past its end; a pair's two rows share x) or from the blocks at xp, halves or (isfloat, Q8_K)
 * floats. Both are exact, so either gives the reference's values. */
static inline __m256 SL_MV_SUFFIX(load_floats)(const char *p, const char *q, size_t stride,
                                               int m, int pair);
static inline __m256 SL_MV_SUFFIX(x_scales)(const float *hx, const char *xp, size_t xb, int m,
                                            int pair, int isfloat)
{
    if (hx && pair == 2) {
        double two; /* hx[0], hx[1] in every 64-bit element */
        memcpy(&two, hx, sizeof two);
        return _mm256_castpd_ps(_mm256_set1_pd(two));
    }
    if (hx) return pair ? _mm256_broadcast_ps((const __m128 *)hx) : _mm256_loadu_ps(hx);
    return isfloat ? SL_MV_SUFFIX(load_floats)(xp, xp, xb, m, pair)
                   : SL_MV_SUFFIX(load_halves)(xp, xp, xb, m, pair);
}

/* The terms of the group's blocks (lane_on: one row's blocks at wp or two rows' at wp and
 * wq), x blocks from xp; other lanes finite and meaningless. Reads no block past the group. */
static inline __attribute__((always_inline)) __m256
SL_MV_SUFFIX(group_terms)(const char *wp, const char *xp, int m, const char *wq, int pair,
                          const float *hxs, int wbytes, int xbytes, SL_MV_SUFFIX(dot_fn) dot,
                          int term)
{
    const size_t wb = (size_t)wbytes, xb = (size_t)xbytes;
    __m256i v[8];
    for (int k = 0; k < 8; k++)
        v[k] = SL_MV_SUFFIX(lane_on)(k, m, pair)
                   ? dot(SL_MV_SUFFIX(lane_at)(wp, wq, k, wb, pair),
                         SL_MV_SUFFIX(lane_at)(xp, xp, k, xb, pair))
                   : _mm256_setzero_si256();
    const __m256 isum = _mm256_cvtepi32_ps(SL_MV_SUFFIX(hsum8x8_m)(v, pair ? 8 : m));
    const __m256 hx = SL_MV_SUFFIX(x_scales)(hxs, xp, xb, m, pair, 0);
    if (term == SL_MV_TERM_E8M0) /* the reference's dx * dw; IEEE products commute anyway */
        return _mm256_mul_ps(isum, _mm256_mul_ps(hx, SL_MV_SUFFIX(load_e8m0_half)(
                                                         wp, wq, wb, m, pair)));
    const __m256 dd = _mm256_mul_ps(SL_MV_SUFFIX(load_halves)(wp, wq, wb, m, pair), hx);
    const __m256 a = _mm256_mul_ps(isum, dd);
    if (term == SL_MV_TERM_D) return a;
    const __m256 ms = _mm256_mul_ps(SL_MV_SUFFIX(load_halves)(wp + 2, wq + 2, wb, m, pair),
                                    SL_MV_SUFFIX(load_halves)(xp + 2, xp + 2, xb, m, pair));
    return _mm256_add_ps(a, ms);
}

/* return FN(wp, xp, m, ...) with m (1..8) a constant in each case: the group's loops unroll
 * and its eight vectors stay in registers (with a run-time m they went through the stack, and
 * short rows, e.g. 4 super-blocks, are nothing but such a group). */
#define SL_MV_CONST_M(FN, m, ...)                                                                \
    switch (m) {                                                                                 \
    case 1: return FN(wp, xp, 1, __VA_ARGS__);                                                   \
    case 2: return FN(wp, xp, 2, __VA_ARGS__);                                                   \
    case 3: return FN(wp, xp, 3, __VA_ARGS__);                                                   \
    case 4: return FN(wp, xp, 4, __VA_ARGS__);                                                   \
    case 5: return FN(wp, xp, 5, __VA_ARGS__);                                                   \
    case 6: return FN(wp, xp, 6, __VA_ARGS__);                                                   \
    case 7: return FN(wp, xp, 7, __VA_ARGS__);                                                   \
    default: return FN(wp, xp, 8, __VA_ARGS__);                                                 \
    }
#define SL_MV_CONST_M4(FN, m, ...)                                                               \
    switch (m) {                                                                                 \
    case 1: return FN(wp, xp, 1, __VA_ARGS__);                                                   \
    case 2: return FN(wp, xp, 2, __VA_ARGS__);                                                   \
    case 3: return FN(wp, xp, 3, __VA_ARGS__);                                                   \
    default: return FN(wp, xp, 4, __VA_ARGS__);                                                 \
    }

/* The terms of a group of m (<= 8) blocks, lane k block k's; lanes m..7 finite, meaningless.
 * hx: the group's x block scales as floats (8 readable, 0 past the row), or NULL: from xp. */
typedef __m256 (*SL_MV_SUFFIX(group_fn))(const char *wp, const char *xp, int m, const float *hx);

/* Adds the terms of blocks [b, b1) (b a multiple of 8) to acc: whole 8-block groups (block b
 * to lane b % 8, one vector add per group, as the reference adds term by term), then a short
 * last group whose m terms go to lanes 0 .. m-1 only (a blend keeps the rest bit for bit). */
static inline __attribute__((always_inline)) __m256
SL_MV_SUFFIX(groups_acc)(__m256 acc, const char *wb, const char *xb, int64_t b, int64_t b1,
                         int wbytes, int xbytes, SL_MV_SUFFIX(group_fn) group, const float *hx)
{
    for (; b + 8 <= b1; b += 8)
        acc = _mm256_add_ps(acc, group(wb + b * wbytes, xb + b * xbytes, 8, hx ? hx + b : NULL));
    if (b < b1) {
        const int m = (int)(b1 - b);
        const __m256 tb = group(wb + b * wbytes, xb + b * xbytes, m, hx ? hx + b : NULL);
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(m),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        acc = _mm256_blendv_ps(acc, _mm256_add_ps(acc, tb), _mm256_castsi256_ps(live));
    }
    return acc;
}

/* Blocks [b0, b1) of a 32-element block type into lane[0..8): an unaligned head through the
 * scalar reference (only column-listed runs start mid-group), the rest by groups_acc. */
static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(range32)(const sl__mv_type *t, const void *w, const void *xq, int64_t b0,
                      int64_t b1, float *lane, int wbytes, int xbytes,
                      SL_MV_SUFFIX(group_fn) group)
{
    int64_t head = (b0 + 7) & ~(int64_t)7;
    if (head > b1) head = b1;
    if (head > b0) sl__mv_dot_blocks(t, w, xq, b0, head, lane);
    if (head >= b1) return;
    _mm256_storeu_ps(lane, SL_MV_SUFFIX(groups_acc)(_mm256_loadu_ps(lane), w, xq, head, b1,
                                                    wbytes, xbytes, group, NULL));
}

/* The reference's 8-lane reduction (sl__mv_reduce8): (s0 + s4) + (s2 + s6) and
 * (s1 + s5) + (s3 + s7), then their sum. */
static inline float SL_MV_SUFFIX(reduce8)(__m256 s)
{
    const __m128 u = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

/* Rows a and a + 1 from the terms of a pair group (lane_on, pair 1) of m blocks each: the
 * lanes each row would have on its own (0 + term, untouched lanes +0), reduced as the
 * reference reduces them. */
static inline void SL_MV_SUFFIX(pair_rows)(__m256 t, int m, float *y)
{
    const __m256i k3 = _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3);
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), k3);
    const __m256 z = _mm256_setzero_ps();
    const __m256 acc = _mm256_blendv_ps(z, _mm256_add_ps(z, t), _mm256_castsi256_ps(live));
    y[0] = SL_MV_SUFFIX(reduce8)(_mm256_zextps128_ps256(_mm256_castps256_ps128(acc)));
    y[1] = SL_MV_SUFFIX(reduce8)(_mm256_zextps128_ps256(_mm256_extractf128_ps(acc, 1)));
}

/* Rows a .. a + 3 from the terms of a four-row group (lane_on, pair 2) of m <= 2 blocks each:
 * each row's lanes start at 0 + term (never -0, so the + 0 of its unused lanes in the
 * reference's reduction changes nothing) and reduce to lane 0 + lane 1. */
static inline void SL_MV_SUFFIX(quad_rows)(__m256 t, float *y)
{
    const __m256 l = _mm256_add_ps(_mm256_setzero_ps(), t);
    const __m256 h = _mm256_hadd_ps(l, l); /* [l0+l1, l2+l3, .., l4+l5, l6+l7, ..] */
    const __m128 lo = _mm256_castps256_ps128(h), hi = _mm256_extractf128_ps(h, 1);
    _mm_storeu_ps(y, _mm_shuffle_ps(lo, hi, 0x44));
}

/* Software prefetch of the weights SL_MV_PF_BYTES ahead of the row (or 8-row group, block) a
 * rows kernel is about to read: the n bytes at p + SL_MV_PF_BYTES, one line at a time. Why: a
 * decode matvec reads each weight byte once, and a MoE layer's experts are small matrices
 * scattered over memory, so the hardware streamer (which restarts at every 4 KiB page and
 * needs a few misses to start) leaves the kernel waiting on loads; measured on row 4 of the
 * 2026-11-28 sweep (8 experts of 2048 x 1024 Q5_K, 1 thread), tg32 went from 1.0x to ~1.5x
 * llama.cpp. Prefetches past the matrix's end (at most SL_MV_PF_BYTES) never fault; they
 * only fetch a neighbour's lines. */
enum { SL_MV_PF_BYTES = 2048 };
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(pf_span)(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 64) _mm_prefetch(p + SL_MV_PF_BYTES + i, _MM_HINT_T0);
}

/* The first min(n, SL_MV_PF_BYTES) bytes at p, the part of a rows call's span that pf_span
 * (always SL_MV_PF_BYTES ahead) never fetches: issued on entry, so a pool chunk's first rows do
 * not walk in on one demand miss after another. A decode call's chunks are short (an expert's
 * 64 rows of 216 bytes: 2 KiB of 14 is its head), and the chunk before it, whose pf_span ran
 * into it, was often the other thread's. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(pf_head)(const char *p, size_t n)
{
    if (n > SL_MV_PF_BYTES) n = SL_MV_PF_BYTES;
    for (size_t i = 0; i < n; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

/* No four-row groups (the 32-element block types) / four-row groups of rows <= 2 blocks
 * (K-quants), inside SL_MV_ROWS. */
#define SL_MV_NO_QUAD(NAME)
#define SL_MV_QUAD(NAME)                                                                         \
    if (nb <= 2)                                                                                 \
        for (; r + 4 <= r1; r += 4) {                                                            \
            const char *wa = (const char *)w + (size_t)r * wrb;                                  \
            SL_MV_SUFFIX(pf_span)(wa, 4 * wrb);                                                  \
            SL_MV_SUFFIX(quad_rows)(SL_MV_SUFFIX(quad_##NAME)(wa, xq, (int)nb, wa + wrb, hx),    \
                                    y + r);                                                      \
        }

/* Whole rows for one batch column (sl__mv_rows_fn): a row's 8 lanes never leave a register;
 * rows of at most 4 blocks go two to a group (the group's fixed work is then shared). */
enum { SL_MV_HX_MAX = 1024 }; /* blocks whose x scales rows kernels convert once per call */

/* The x scales of nb (<= SL_MV_HX_MAX) activation blocks as floats into hx, zero-padded to a
 * multiple of 8: every row of a call reads the same ones (halves, or Q8_K's floats). */
static inline void SL_MV_SUFFIX(hx_fill)(const char *xq, size_t xb, int64_t nb, int isfloat,
                                         float *hx)
{
    int64_t b = 0;
    for (; b < nb; b++) {
        if (isfloat) {
            memcpy(&hx[b], xq + (size_t)b * xb, 4);
        } else {
            uint16_t h;
            memcpy(&h, xq + (size_t)b * xb, 2);
            hx[b] = _cvtsh_ss(h);
        }
    }
    for (; b % 8; b++) hx[b] = 0.0f;
}

/* Whole rows for one batch column (sl__mv_rows_fn): a row's 8 lanes never leave a register;
 * rows of at most 4 blocks go two to a group (the group's fixed work is then shared), K-quant
 * rows of at most 2 four to a group (QUAD); the x scales are converted once per call, not once
 * per row. */
#define SL_MV_ROWS(NAME, WBYTES, XBYTES, XFLOAT, QUAD)                                           \
    static void SL_MV_SUFFIX(rows_##NAME)(const void *w, size_t wrb, const void *xq, int64_t nb, \
                                          int64_t r0, int64_t r1, float *y)                      \
    {                                                                                            \
        SL_MV_SUFFIX(pf_head)((const char *)w + (size_t)r0 * wrb, (size_t)(r1 - r0) * wrb);     \
        float hxa[SL_MV_HX_MAX + 8];                                                             \
        const float *hx = NULL;                                                                  \
        if (nb <= SL_MV_HX_MAX) {                                                                \
            SL_MV_SUFFIX(hx_fill)(xq, (size_t)(XBYTES), nb, XFLOAT, hxa);                        \
            hx = hxa;                                                                            \
        }                                                                                        \
        int64_t r = r0;                                                                          \
        QUAD(NAME)                                                                               \
        if (nb <= 4)                                                                             \
            for (; r + 2 <= r1; r += 2) {                                                        \
                const char *wa = (const char *)w + (size_t)r * wrb;                              \
                SL_MV_SUFFIX(pf_span)(wa, 2 * wrb);                                              \
                SL_MV_SUFFIX(pair_rows)(                                                         \
                    SL_MV_SUFFIX(pair_##NAME)(wa, xq, (int)nb, wa + wrb, hx), (int)nb, y + r);   \
            }                                                                                    \
        for (; r < r1; r++) {                                                                    \
            SL_MV_SUFFIX(pf_span)((const char *)w + (size_t)r * wrb, wrb);                       \
            y[r] = SL_MV_SUFFIX(reduce8)(SL_MV_SUFFIX(groups_acc)(                               \
                _mm256_setzero_ps(), (const char *)w + (size_t)r * wrb, xq, 0, nb,               \
                (int)(WBYTES), (int)(XBYTES), SL_MV_SUFFIX(group_##NAME), hx));                  \
        }                                                                                        \
    }

#define SL_MV_RANGE32(NAME, WBYTES, XBYTES, TERM)                                                \
    static inline __attribute__((always_inline)) __m256 SL_MV_SUFFIX(group_##NAME)(              \
        const char *wp, const char *xp, int m, const float *hx)                                  \
    {                                                                                            \
        SL_MV_CONST_M(SL_MV_SUFFIX(group_terms), m, wp, 0, hx, (int)(WBYTES), (int)(XBYTES),    \
                      SL_MV_SUFFIX(dot_##NAME), TERM)                                            \
    }                                                                                            \
    static __m256 SL_MV_SUFFIX(pair_##NAME)(const char *wp, const char *xp, int m,               \
                                            const char *wq, const float *hx)                     \
    {                                                                                            \
        SL_MV_CONST_M4(SL_MV_SUFFIX(group_terms), m, wq, 1, hx, (int)(WBYTES), (int)(XBYTES),   \
                       SL_MV_SUFFIX(dot_##NAME), TERM)                                           \
    }                                                                                            \
    static void SL_MV_SUFFIX(range_##NAME)(const sl__mv_type *t, const void *w, const void *xq, \
                                           int64_t b0, int64_t b1, float *lane)                 \
    {                                                                                            \
        SL_MV_SUFFIX(range32)(t, w, xq, b0, b1, lane, (int)(WBYTES), (int)(XBYTES),             \
                              SL_MV_SUFFIX(group_##NAME));                                       \
    }                                                                                            \
    SL_MV_ROWS(NAME, WBYTES, XBYTES, 0, SL_MV_NO_QUAD)

SL_MV_RANGE32(q8_0, sizeof(sl_block_q8_0), sizeof(sl_block_q8_0), SL_MV_TERM_D)
SL_MV_RANGE32(q4_0, sizeof(sl_block_q4_0), sizeof(sl_block_q8_0), SL_MV_TERM_D)
SL_MV_RANGE32(q5_0, sizeof(sl_block_q5_0), sizeof(sl_block_q8_0), SL_MV_TERM_D)
SL_MV_RANGE32(mxfp4, sizeof(sl_block_mxfp4), sizeof(sl_block_q8_0), SL_MV_TERM_E8M0)
SL_MV_RANGE32(iq4_nl, sizeof(sl_block_iq4_nl), sizeof(sl_block_q8_0), SL_MV_TERM_D)
SL_MV_RANGE32(q4_1, sizeof(sl_block_q4_1), sizeof(sl_block_q8_1), SL_MV_TERM_DM)
SL_MV_RANGE32(q5_1, sizeof(sl_block_q5_1), sizeof(sl_block_q8_1), SL_MV_TERM_DM)

#undef SL_MV_RANGE32

#if !SL_MV_AVX512
#include "kernels/cpu/rows32_x86_tmpl.h"
#endif

#if SL_MV_AVX512
/* Rows of the signed 32-element types for VNNI (Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL): vpdpbusd takes
 * the weights as unsigned u = w + c (Q8_0, IQ4_NL: w ^ 0x80, c 128; the others' raw quants or
 * shifted table, q32_offset.h) against the signed x, and c * the block's sum of x, formed once per
 * call for every row, is taken back from the integer sum: the same exact integer as the sign
 * trick (|w| . sign(x, w)) without its two vpsignb per block. The float work is
 * group_terms' (SL_MV_TERM_D, or E8M0 for MXFP4) op for op, so the bits are the generic rows
 * kernel's; rows of fewer than 8 blocks, or more than SL_MV_HX_MAX, take that. */
static inline __attribute__((always_inline)) __m256i
SL_MV_SUFFIX(ou_unsigned)(uint32_t type, const char *wp)
{
    switch (type) {
    case SL_GGML_Q8_0:
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wp + 2)),
                                _mm256_set1_epi8((char)0x80));
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 2));
    case SL_GGML_IQ4_NL: /* the table as value + 128, c 128 as Q8_0 */
        return _mm256_xor_si256(SL_MV_SUFFIX(iq4_values)((const uint8_t *)(wp + 2)),
                                _mm256_set1_epi8((char)0x80));
    case SL_GGML_Q5_0:
        return _mm256_or_si256(SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 6)),
                               _mm256_and_si256(SL_MV_SUFFIX(qh_bytes)(wp + 2),
                                                _mm256_set1_epi8(0x10)));
    default: { /* MXFP4: the e2m1 table shifted by its offset */
        const __m128i kv =
            _mm_add_epi8(_mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4),
                         _mm_set1_epi8(SL_Q32_OFFSET_MXFP4));
        return _mm256_shuffle_epi8(_mm256_set_m128i(kv, kv),
                                   SL_MV_SUFFIX(nibbles)((const uint8_t *)(wp + 1)));
    }
    }
}

/* The 16 unsigned codes u = w + c of IQ4_NL (its table as value + 128, as ou_unsigned's) or
 * MXFP4 (the e2m1 table shifted by its offset), for a vpshufb of the nibbles. */
static inline __m128i SL_MV_SUFFIX(ou_table)(uint32_t type)
{
    return type == SL_GGML_IQ4_NL
               ? _mm_xor_si128(_mm_loadu_si128((const __m128i *)sl_iq4nl_values),
                               _mm_set1_epi8((char)0x80))
               : _mm_add_epi8(_mm_loadu_si128((const __m128i *)sl__mv_kvalues_mxfp4),
                              _mm_set1_epi8(SL_Q32_OFFSET_MXFP4));
}

/* 32 bytes at p (low half) and 32 at q (high half): a masked broadcast load for the high half,
 * which needs no lane-shuffle port the way vinserti64x4 does. */
static inline __m512i SL_MV_SUFFIX(load_2x32)(const char *p, const char *q)
{
    return _mm512_mask_broadcast_i64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)), 0xF0,
        _mm256_loadu_si256((const __m256i *)q));
}

/* ou_unsigned of blocks wp and wp + wb in one 512-bit vector (block wp's 32 bytes low), for
 * Q8_0, Q4_0, IQ4_NL and MXFP4 (Q5_0 stays per block, rows_offset). The 4-bit types unpack
 * both blocks' nibbles at once: their 16 quant bytes each in two 128-bit lanes, the upper one
 * shifted by 4 (low nibbles are elements 0..15, high ones 16..31). */
static inline __attribute__((always_inline)) __m512i
SL_MV_SUFFIX(ou_pair)(uint32_t type, const char *wp, size_t wb)
{
    if (type == SL_GGML_Q8_0)
        return _mm512_xor_si512(SL_MV_SUFFIX(load_2x32)(wp + 2, wp + wb + 2),
                                _mm512_set1_epi8((char)0x80));
    const size_t o = type == SL_GGML_MXFP4 ? 1 : 2;
    /* [qs, qs, qs', qs']: two broadcast loads, the second masked (no lane shuffle) */
    const __m512i q4 = _mm512_mask_broadcast_i32x4(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(wp + o))), 0xFF00,
        _mm_loadu_si128((const __m128i *)(wp + wb + o)));
    const __m512i n = _mm512_and_si512(
        _mm512_srlv_epi64(q4, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
    if (type == SL_GGML_Q4_0) return n;
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(SL_MV_SUFFIX(ou_table)(type)), n);
}

/* hsum8x8 of four 512-bit vectors, v[k] holding block 2k's 8 int32 (low half) and block
 * 2k + 1's: element j of the result is block j's sum. Lane pairs first (two vectors -> one
 * with a block's 4 partial sums per 128-bit lane), then within lanes, then one permute:
 * 12 uops where hsum8x8's six vphaddd and two lane permutes are 21. */
static inline __m256i SL_MV_SUFFIX(hsum8x8_z)(const __m512i v[4])
{
    const __m512i p = _mm512_add_epi32(_mm512_shuffle_i64x2(v[0], v[1], 0x88),
                                       _mm512_shuffle_i64x2(v[0], v[1], 0xDD)); /* b0..b3 */
    const __m512i q = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2], v[3], 0x88),
                                       _mm512_shuffle_i64x2(v[2], v[3], 0xDD)); /* b4..b7 */
    const __m512i r = _mm512_add_epi32(_mm512_unpacklo_epi32(p, q), _mm512_unpackhi_epi32(p, q));
    const __m512i t = _mm512_add_epi32(r, _mm512_shuffle_epi32(r, (_MM_PERM_ENUM)0x4E));
    /* lane k: [b_k, b_k+4, b_k, b_k+4] */
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), t));
}

static inline __attribute__((always_inline)) void
SL_MV_SUFFIX(rows_offset)(uint32_t type, const void *w, size_t wrb, const void *xq, int64_t nb,
                          int64_t r0, int64_t r1, float *y)
{
    enum { XB = sizeof(sl_block_q8_0) };
    const size_t wb = type == SL_GGML_Q8_0     ? sizeof(sl_block_q8_0)
                      : type == SL_GGML_Q4_0   ? sizeof(sl_block_q4_0)
                      : type == SL_GGML_Q5_0   ? sizeof(sl_block_q5_0)
                      : type == SL_GGML_IQ4_NL ? sizeof(sl_block_iq4_nl)
                                               : sizeof(sl_block_mxfp4);
    const int32_t c =
        type == SL_GGML_Q8_0 || type == SL_GGML_IQ4_NL ? 128 : sl__q32_offset(type);
    SL_MV_SUFFIX(pf_head)((const char *)w + (size_t)r0 * wrb, (size_t)(r1 - r0) * wrb);
    float hx[SL_MV_HX_MAX + 8];
    int32_t cx[SL_MV_HX_MAX + 8];
    SL_MV_SUFFIX(hx_fill)((const char *)xq, XB, nb, 0, hx);
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i x =
            _mm256_loadu_si256((const __m256i *)((const char *)xq + (size_t)b * XB + 2));
        /* c * sum x: the bias of u = w + c (vpdpbusd of 1s against x sums x exactly) */
        cx[b] = c * SL_MV_SUFFIX(hsum_i32)(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, x));
    }
    for (int64_t b = nb; b % 8; b++) cx[b] = 0;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i sidx = _mm256_mullo_epi32(lanes, _mm256_set1_epi32((int)wb));
    for (int64_t r = r0; r < r1; r++) {
        const char *wr = (const char *)w + (size_t)r * wrb;
        SL_MV_SUFFIX(pf_span)(wr, wrb);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b += 8) {
            const int m = nb - b < 8 ? (int)(nb - b) : 8;
            __m256i hs;
            if (type == SL_GGML_Q5_0) { /* its qh unpack is lane shuffles already: per block */
                __m256i v[8];
                const char *xg = (const char *)xq + (size_t)b * XB + 2;
                const char *wg = wr + (size_t)b * wb;
                if (m == 8) /* the whole group unrolled */
                    for (int k = 0; k < 8; k++)
                        v[k] = _mm256_dpbusd_epi32(
                            _mm256_setzero_si256(),
                            SL_MV_SUFFIX(ou_unsigned)(type, wg + (size_t)k * wb),
                            _mm256_loadu_si256((const __m256i *)(xg + (size_t)k * XB)));
                else
                    for (int k = 0; k < 8; k++)
                        v[k] = k < m ? _mm256_dpbusd_epi32(
                                           _mm256_setzero_si256(),
                                           SL_MV_SUFFIX(ou_unsigned)(type, wg + (size_t)k * wb),
                                           _mm256_loadu_si256(
                                               (const __m256i *)(xg + (size_t)k * XB)))
                                     : _mm256_setzero_si256();
                hs = SL_MV_SUFFIX(hsum8x8)(v);
            } else {
                /* two blocks a 512-bit vpdpbusd; a short group's odd last block alone (its
                 * upper half 0), pairs past the row 0 */
                __m512i v[4];
                for (int k = 0; k < 4; k++) {
                    const char *wk = wr + (size_t)(b + 2 * k) * wb;
                    const char *xk = (const char *)xq + (size_t)(b + 2 * k) * XB + 2;
                    if (2 * k + 1 < m)
                        v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                   SL_MV_SUFFIX(ou_pair)(type, wk, wb),
                                                   SL_MV_SUFFIX(load_2x32)(xk, xk + XB));
                    else if (2 * k < m)
                        v[k] = _mm512_zextsi256_si512(_mm256_dpbusd_epi32(
                            _mm256_setzero_si256(), SL_MV_SUFFIX(ou_unsigned)(type, wk),
                            _mm256_loadu_si256((const __m256i *)xk)));
                    else
                        v[k] = _mm512_setzero_si512();
                }
                hs = SL_MV_SUFFIX(hsum8x8_z)(v);
            }
            const __m256 isum = _mm256_cvtepi32_ps(
                _mm256_sub_epi32(hs, _mm256_loadu_si256((const __m256i *)(cx + b))));
            const char *wg = wr + (size_t)b * wb;
            const __m256 hxv = _mm256_loadu_ps(hx + b);
            __m256 ws; /* the 8 blocks' scales: one gather of a whole group (its first bytes) */
            if (m == 8) {
                const __m256i g = _mm256_i32gather_epi32((const int *)(const void *)wg, sidx, 1);
                ws = type == SL_GGML_MXFP4
                         ? SL_MV_SUFFIX(e8m0_bits)(_mm256_and_si256(g, _mm256_set1_epi32(0xFF)))
                         : _mm256_cvtph_ps(_mm256_cvtepi32_epi16(g));
            } else {
                ws = type == SL_GGML_MXFP4 ? SL_MV_SUFFIX(load_e8m0_half)(wg, wg, wb, m, 0)
                                           : SL_MV_SUFFIX(load_halves)(wg, wg, wb, m, 0);
            }
            const __m256 t =
                type == SL_GGML_MXFP4 /* the reference's dx * dw */
                    ? _mm256_mul_ps(isum, _mm256_mul_ps(hxv, ws))
                    : _mm256_mul_ps(isum, _mm256_mul_ps(ws, hxv));
            if (m == 8) {
                acc = _mm256_add_ps(acc, t);
            } else { /* groups_acc's short last group: lanes 0 .. m-1 only */
                const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), lanes);
                acc = _mm256_blendv_ps(acc, _mm256_add_ps(acc, t), _mm256_castsi256_ps(live));
            }
        }
        y[r] = SL_MV_SUFFIX(reduce8)(acc);
    }
}

#define SL_MV_ROWS_OFFSET(NAME, TYPE)                                                            \
    static void SL_MV_SUFFIX(rows_##NAME##_vnni)(const void *w, size_t wrb, const void *xq,      \
                                                 int64_t nb, int64_t r0, int64_t r1, float *y)   \
    {                                                                                            \
        if (nb < 8 || nb > SL_MV_HX_MAX)                                                         \
            SL_MV_SUFFIX(rows_##NAME)(w, wrb, xq, nb, r0, r1, y);                                \
        else                                                                                     \
            SL_MV_SUFFIX(rows_offset)(TYPE, w, wrb, xq, nb, r0, r1, y);                          \
    }
SL_MV_ROWS_OFFSET(q8_0, SL_GGML_Q8_0)
SL_MV_ROWS_OFFSET(q4_0, SL_GGML_Q4_0)
SL_MV_ROWS_OFFSET(q5_0, SL_GGML_Q5_0)
SL_MV_ROWS_OFFSET(mxfp4, SL_GGML_MXFP4)
SL_MV_ROWS_OFFSET(iq4_nl, SL_GGML_IQ4_NL)
#undef SL_MV_ROWS_OFFSET
#endif

/* ---- K-quants and IQ4_XS: matvec_kq_x86_tmpl.h ------------------------------------------ */

#include "kernels/cpu/matvec_kq_x86_tmpl.h"

/* ---- float weights ---------------------------------------------------------------------- */

#if SL_MV_AVX512
#define SL_MV_FLOAT_RANGE(NAME, LOAD16)                                                          \
    static void SL_MV_SUFFIX(NAME)(const sl__mv_type *t, const void *w, const void *xq,          \
                                   int64_t i0, int64_t i1, float *lane)                          \
    {                                                                                            \
        const float *x = xq;                                                                     \
        int64_t i = i0, head = (i0 + 31) & ~(int64_t)31;                                         \
        if (head > i1) head = i1;                                                                \
        if (head > i) sl__mv_dot_floats(t->type, w, x, i, head, lane);                           \
        i = head;                                                                                \
        __m512 a0 = _mm512_loadu_ps(lane), a1 = _mm512_loadu_ps(lane + 16);                      \
        for (; i + 32 <= i1; i += 32) {                                                          \
            a0 = _mm512_fmadd_ps(LOAD16(w, i), _mm512_loadu_ps(x + i), a0);                      \
            a1 = _mm512_fmadd_ps(LOAD16(w, i + 16), _mm512_loadu_ps(x + i + 16), a1);           \
        }                                                                                        \
        _mm512_storeu_ps(lane, a0);                                                              \
        _mm512_storeu_ps(lane + 16, a1);                                                         \
        if (i < i1) sl__mv_dot_floats(t->type, w, x, i, i1, lane);                               \
    }
#define LOAD_F32(w, i) _mm512_loadu_ps((const float *)(w) + (i))
#define LOAD_F16(w, i) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)(w) + (i))))
#define LOAD_BF16(w, i)                                                                          \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                       \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)(w) + (i)))), 16))
#else
#define SL_MV_FLOAT_RANGE(NAME, LOAD8)                                                           \
    static void SL_MV_SUFFIX(NAME)(const sl__mv_type *t, const void *w, const void *xq,          \
                                   int64_t i0, int64_t i1, float *lane)                          \
    {                                                                                            \
        const float *x = xq;                                                                     \
        int64_t i = i0, head = (i0 + 31) & ~(int64_t)31;                                         \
        if (head > i1) head = i1;                                                                \
        if (head > i) sl__mv_dot_floats(t->type, w, x, i, head, lane);                           \
        i = head;                                                                                \
        __m256 a[4];                                                                             \
        for (int k = 0; k < 4; k++) a[k] = _mm256_loadu_ps(lane + 8 * k);                        \
        for (; i + 32 <= i1; i += 32)                                                            \
            for (int k = 0; k < 4; k++)                                                          \
                a[k] = _mm256_fmadd_ps(LOAD8(w, i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), a[k]); \
        for (int k = 0; k < 4; k++) _mm256_storeu_ps(lane + 8 * k, a[k]);                        \
        if (i < i1) sl__mv_dot_floats(t->type, w, x, i, i1, lane);                               \
    }
#define LOAD_F32(w, i) _mm256_loadu_ps((const float *)(w) + (i))
#define LOAD_F16(w, i) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)(w) + (i))))
#define LOAD_BF16(w, i)                                                                          \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                       \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)(w) + (i)))), 16))
#endif

SL_MV_FLOAT_RANGE(range_f32, LOAD_F32)
SL_MV_FLOAT_RANGE(range_f16, LOAD_F16)
SL_MV_FLOAT_RANGE(range_bf16, LOAD_BF16)

#undef SL_MV_FLOAT_RANGE
#undef LOAD_F32
#undef LOAD_F16
#undef LOAD_BF16

#include "kernels/cpu/r8_x86_tmpl.h"
#include "kernels/cpu/matvec_iq_x86_tmpl.h"

/* ---- tables ----------------------------------------------------------------------------- */

/* the entry points (one per ISA build); a file that compiles these templates only for their
 * kernels (gemm_k_amx.c) defines SL_MV_KERNELS_ONLY */
#ifndef SL_MV_KERNELS_ONLY

sl__mv_range_fn SL_MV_SUFFIX(sl__mv_range)(uint32_t type)
{
    switch (type) {
    case SL_GGML_F32: return SL_MV_SUFFIX(range_f32);
    case SL_GGML_F16: return SL_MV_SUFFIX(range_f16);
    case SL_GGML_BF16: return SL_MV_SUFFIX(range_bf16);
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(range_q8_0);
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(range_q4_0);
    case SL_GGML_Q4_1: return SL_MV_SUFFIX(range_q4_1);
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(range_q5_0);
    case SL_GGML_Q5_1: return SL_MV_SUFFIX(range_q5_1);
    case SL_GGML_Q2_K: return SL_MV_SUFFIX(range_q2_K);
    case SL_GGML_Q3_K: return SL_MV_SUFFIX(range_q3_K);
    case SL_GGML_Q4_K: return SL_MV_SUFFIX(range_q4_K);
    case SL_GGML_Q5_K: return SL_MV_SUFFIX(range_q5_K);
    case SL_GGML_Q6_K: return SL_MV_SUFFIX(range_q6_K);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(range_mxfp4);
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(range_iq4_nl);
    case SL_GGML_IQ4_XS: return SL_MV_SUFFIX(range_iq4_xs);
#define SL_MV_IQ_CASE_(name, code, B, NAME) case code: return SL_MV_SUFFIX(range_##name);
        SL__IQ_TYPES(SL_MV_IQ_CASE_)
#undef SL_MV_IQ_CASE_
    default: return NULL;
    }
}

sl__mv_rows_fn SL_MV_SUFFIX(sl__mv_rows)(uint32_t type)
{
    switch (type) {
#if SL_MV_AVX512
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(rows_q8_0_vnni);
#else
    case SL_GGML_Q8_0: return SL_MV_SUFFIX(rows_q8_0);
#endif
#if SL_MV_AVX512
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(rows_q4_0_vnni);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(rows_mxfp4_vnni);
#else
    case SL_GGML_Q4_0: return SL_MV_SUFFIX(rows32_q4_0);
    case SL_GGML_MXFP4: return SL_MV_SUFFIX(rows32_mxfp4);
#endif
    case SL_GGML_Q4_1: return SL_MV_SUFFIX(rows_q4_1);
#if SL_MV_AVX512
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(rows_q5_0_vnni);
#else
    case SL_GGML_Q5_0: return SL_MV_SUFFIX(rows32_q5_0);
#endif
    case SL_GGML_Q5_1: return SL_MV_SUFFIX(rows_q5_1);
    case SL_GGML_Q2_K: return SL_MV_SUFFIX(rows_q2_K);
    case SL_GGML_Q3_K: return SL_MV_SUFFIX(rows_q3_K);
    case SL_GGML_Q4_K: return SL_MV_SUFFIX(rows_q4_K);
    case SL_TYPE_Q4_K_R8: return SL_MV_SUFFIX(rows_q4_K_r8);
    case SL_GGML_Q5_K: return SL_MV_SUFFIX(rows_q5_K);
    case SL_GGML_Q6_K: return SL_MV_SUFFIX(rows_q6_K);
#if SL_MV_AVX512
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(rows_iq4_nl_vnni);
#else
    case SL_GGML_IQ4_NL: return SL_MV_SUFFIX(rows_iq4_nl);
#endif
#if SL_MV_AVX512
    case SL_GGML_IQ4_XS: return SL_MV_SUFFIX(rows_iq4_xs_vnni);
#else
    case SL_GGML_IQ4_XS: return SL_MV_SUFFIX(rows_iq4_xs);
#endif
#define SL_MV_IQ_CASE_(name, code, B, NAME) case code: return SL_MV_SUFFIX(rows_##name);
        SL__IQ_TYPES(SL_MV_IQ_CASE_)
#undef SL_MV_IQ_CASE_
    default: return NULL;
    }
}

void SL_MV_SUFFIX(sl__mv_axpy)(float a, const float *x, float *y, int64_t n)
{
    int64_t i = 0;
#if SL_MV_AVX512
    const __m512 av = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#else
    const __m256 av = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}
#endif /* SL_MV_KERNELS_ONLY */
