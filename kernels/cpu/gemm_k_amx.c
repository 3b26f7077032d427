/* kernels/cpu/gemm_k_amx.c: gemm_kv's block on Intel AMX tiles (the K-quants Q4_K, Q5_K,
 * Q4_K_R8, Q6_K and IQ4_XS; gemm.h's sl__gemm_k_amx, gemm_kv_block's bits). It compiles the
 * AVX-512 templates for their kernels only (SL_MV_KERNELS_ONLY: the types' code and value
 * unpacks, gkv_unpack for Q4_K_R8's row groups, the panels gkv_panel, the epilogue gkv_out,
 * which it shares with gemm_kv_block) in a file of its own, so that matvec_avx512.c's compile
 * (the longest of the build, under the sanitizers most of all) does not grow. gemm_kv
 * (gemm_k_vnni_tmpl.h) calls it for a block when the call may use the tiles (gemm.h's
 * sl__gemm_amx_takes: sl__gemm_rows.amx, i.e. the CPU has AMX-INT8 and the process was granted
 * its state, kernels/cpu/ops_dispatch.c; SL__GEMM_AMX_MIN_TOK tokens or more; rows in 16s).
 *
 * Why: one TDPBUSD / TDPBSSD multiplies 16 rows x 64 bytes by 16 x 64 bytes (the same 4-byte
 * groups of 16 tokens: gkv_panel's rows as they lie) into 16 x 16 int32, 16384 multiply-adds
 * in ~16 cycles on its own unit (Sapphire Rapids, measured here: 9.3x a core's vpdpbusd rate).
 * A sub-block's scale differs per row, and a tile's sum mixes sub-blocks, so each row is
 * unpacked once per call with its scales applied: p = w sc (int16: |p| <= 127 x 32 for IQ4_XS,
 * 32 x 128 for Q6_K, 31 x 63 for Q4_K/Q5_K) kept as its low byte lo = p & 255 (unsigned) and
 * high byte hi = p >> 8 (signed), so p = lo + 256 hi, and a super-block's sum is
 * sum lo x + 256 sum hi x: two tile products (TDPBUSD on lo, TDPBSSD on hi) per 64 elements,
 * accumulated over the super-block in the tiles and read out once, instead of one per sub-block
 * (a tile store per sub-block and its scaling ran no faster than the vector kernel here).
 *
 * Why the bits are gkv_micro's: the super-block's integer is the same exact sum
 * sum_j sc_j sum_{k in j} w_k x_k (products of bytes, |sum| < 2^31 as gkv_micro's; the lo part's
 * 256 x 255 x 127 and the hi part's 256 x 16 x 127 fit int32 on their own), and the float term of
 * each (row, token, super-block) is gkv_micro's expression, with its mins term for Q4_K/Q5_K,
 * added to the same lane. The activations enter signed (panels without gkv's + 128). */

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/cpu/q32_offset.h"

#if defined(__x86_64__)
#include <immintrin.h> /* before the target region: the intrinsics carry their own targets */
#endif

#if defined(__x86_64__) && defined(__clang__)
#pragma clang attribute push(                                                                  \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))),             \
    apply_to = function)

#define SL_MV_SUFFIX(name) name##_amx
#define SL_MV_AVX512 1
#define SL_MV_KERNELS_ONLY 1
/* the templates' other kernels: declared here, never emitted (nothing calls them) */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#include "kernels/cpu/matvec_x86_tmpl.h"
#include "kernels/cpu/gemm_x86_tmpl.h"
#include "kernels/cpu/gemm_k_x86_tmpl.h"
#include "kernels/cpu/gemm_k_vnni_tmpl.h"
#pragma clang diagnostic pop

/* the file's target region and the tiles (a function's own target replaces the region's) */
#define SL_GKA_TARGET                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")))

/* A row's super-blocks [c0, c0 + GK_PCH) with their scales applied (lo, hi as above, in element
 * order), and what the float term needs (gk_buf's d, dmin, and the mins pairs bw). */
typedef struct gka_row {
    _Alignas(64) uint8_t lo[GK_PCH][SL_QK_K];
    int8_t hi[GK_PCH][SL_QK_K];
    float d[GK_PCH], dmin[GK_PCH];
    int16_t bw[GK_PCH][16];
} gka_row;

/* The tile configuration (palette 1): the layout LDTILECFG reads. */
typedef struct gka_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} gka_tilecfg;

/* the sums of panels 0 and 1 (lo and hi parts), the rows' lo and hi, the panels' groups */
enum { GKA_L0, GKA_H0, GKA_L1, GKA_H1, GKA_AL, GKA_AH, GKA_B0, GKA_B1, GKA_TILES };

/* Every tile 16 rows of 64 bytes, on this thread; gka_release after. */
static SL_GKA_TARGET void SL_MV_SUFFIX(gka_config)(void)
{
    gka_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < GKA_TILES; i++) c.rows[i] = 16, c.colsb[i] = 64;
    _tile_loadconfig(&c);
}

/* Frees the thread's tile state (a thread holding it makes every context switch save 8 KiB). */
static SL_GKA_TARGET void SL_MV_SUFFIX(gka_release)(void) { _tile_release(); }

/* 64 elements' p = w sc from their int16 words of even (we) and odd (wo) elements and the
 * words' scales sc, as lo and hi bytes in element order: element 2i is pe's word i, element
 * 2i + 1 po's. */
static inline void SL_MV_SUFFIX(gka_put)(__m512i we, __m512i wo, __m512i sc, uint8_t *lo,
                                         int8_t *hi)
{
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    const __m512i pe = _mm512_mullo_epi16(we, sc), po = _mm512_mullo_epi16(wo, sc);
    _mm512_store_si512(lo, _mm512_mask_blend_epi8(odd, pe, _mm512_slli_epi16(po, 8)));
    _mm512_storeu_si512(hi, _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(pe, 8), po));
}

/* Super-block ui of gk_buf u (its codes and scales as gkv_unpack left them) into super-block ui
 * of r: p = w sc per element, split into lo and hi. 64 elements at a time in int16 words of
 * even and odd elements (shifts, no widening: the widening and vpmovwb narrowing it replaced
 * made twice the port-5 work; gemm_bench, IQ4_XS 768 x 768, 1 thread, min us: 128 tokens
 * 299.7 -> 273.7, a call's fixed cost 2 t(128) - t(256) 63 -> 44); a word's two elements share
 * their 16-element group's scale. */
static inline void SL_MV_SUFFIX(gka_scale)(const gk_buf *u, int64_t ui, int kind, gka_row *r)
{
    /* 128-bit lane L of a 64-element vector holds elements 16L..16L+15: its words take the
     * scale of group 4h + L, bytes 2L, 2L+1 of s16's qword (MINS) or 4L, 4L+1 of sp's 4 dwords
     * (the offset kinds: (sc, 256 sc) pairs, sc in the low half) */
    const __m512i ctl = kind == GKV_MINS
                            ? _mm512_set_epi64(0x0706070607060706, 0x0706070607060706,
                                               0x0504050405040504, 0x0504050405040504,
                                               0x0302030203020302, 0x0302030203020302,
                                               0x0100010001000100, 0x0100010001000100)
                            : _mm512_set_epi64(0x0D0C0D0C0D0C0D0C, 0x0D0C0D0C0D0C0D0C,
                                               0x0908090809080908, 0x0908090809080908,
                                               0x0504050405040504, 0x0504050405040504,
                                               0x0100010001000100, 0x0100010001000100);
    for (int h = 0; h < 4; h++) {
        const __m512i q = _mm512_loadu_si512(u->q[ui] + 64 * h);
        __m512i sc, we, wo;
        if (kind == GKV_MINS) { /* unsigned codes */
            int64_t s4;
            memcpy(&s4, &u->s16[ui][4 * h], sizeof s4);
            sc = _mm512_shuffle_epi8(_mm512_set1_epi64(s4), ctl);
            we = _mm512_and_si512(q, _mm512_set1_epi16(0x00FF));
            wo = _mm512_srli_epi16(q, 8);
        } else { /* signed codes */
            sc = _mm512_shuffle_epi8(
                _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)&u->sp[ui][4 * h])), ctl);
            we = _mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8);
            wo = _mm512_srai_epi16(q, 8);
        }
        SL_MV_SUFFIX(gka_put)(we, wo, sc, r->lo[ui] + 64 * h, r->hi[ui] + 64 * h);
    }
    r->d[ui] = u->d[ui];
    r->dmin[ui] = u->dmin[ui];
    memcpy(r->bw[ui], u->bw[ui], sizeof r->bw[ui]);
}

/* Q6_K super-blocks [c0, c1) of the row at w straight into r (codes - 32 times their
 * 16-element group's int8 scale, without the VNNI unpack's offset sums and corrections). */
static inline void SL_MV_SUFFIX(gka_unpack_q6)(const char *w, int64_t c0, int64_t c1,
                                               gka_row *r)
{
    const __m512i x20 = _mm512_set1_epi8(32);
    /* vector k = 2n + h holds groups 4k..4k+3, lane L group 4k + L: its scale byte into each
     * word's high byte (the low byte zeroed), then an arithmetic shift sign-extends it */
    _Alignas(64) uint8_t ctl[4][64];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) ctl[k][i] = (uint8_t)(i & 1 ? 4 * k + i / 16 : 0x80);
    for (int64_t b = c0; b < c1; b++) {
        const int64_t ui = b - c0;
        const sl_block_q6_K *wp =
            (const sl_block_q6_K *)(w + b * (int64_t)sizeof(sl_block_q6_K));
        const __m512i s8 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)wp->scales));
        for (int n = 0; n < 2; n++) {
            __m512i c[2];
            SL_MV_SUFFIX(q6_codes512)(wp, n, c);
            for (int h = 0; h < 2; h++) {
                const __m512i v = _mm512_sub_epi8(c[h], x20);
                const __m512i sc = _mm512_srai_epi16(
                    _mm512_shuffle_epi8(s8, _mm512_load_si512(ctl[2 * n + h])), 8);
                SL_MV_SUFFIX(gka_put)(_mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8),
                                      _mm512_srai_epi16(v, 8), sc,
                                      r->lo[ui] + 128 * n + 64 * h,
                                      r->hi[ui] + 128 * n + 64 * h);
            }
        }
        uint16_t d;
        memcpy(&d, &wp->d, 2);
        r->d[ui] = _cvtsh_ss(d);
        r->dmin[ui] = 0.0f;
    }
}

/* Q4_K (q5 false) or Q5_K super-blocks [c0, c1) of the row at w straight into r: codes times
 * their 32-element sub-block's scale; d, dmin and the mins pairs bw as gk_q45_head leaves them
 * in a gk_buf (it runs on one). */
static inline void SL_MV_SUFFIX(gka_unpack_q45)(const char *w, bool q5, int64_t c0, int64_t c1,
                                                gka_row *r)
{
    const __m512i xff = _mm512_set1_epi16(0x00FF);
    /* vector k = 2n + h holds sub-blocks 2k, 2k + 1; lane L sub-block 2k + L / 2: its scale
     * byte (k4_unpack_v's bytes 0..7) into each word's low byte */
    _Alignas(64) uint8_t ctl[4][64];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) ctl[k][i] = (uint8_t)(i & 1 ? 0x80 : 2 * k + i / 32);
    gk_buf head; /* gk_q45_head's d, dmin, bw (its s16 unused) */
    for (int64_t b = c0; b < c1; b++) {
        const int64_t ui = b - c0;
        const uint8_t *p = (const uint8_t *)w +
                           b * (int64_t)(q5 ? sizeof(sl_block_q5_K) : sizeof(sl_block_q4_K));
        SL_MV_SUFFIX(gk_q45_head)(p, 0, &head);
        const __m512i s8 = _mm512_broadcast_i32x4(SL_MV_SUFFIX(k4_unpack_v)(p + 4));
        for (int n = 0; n < 2; n++) {
            __m512i c[2];
            SL_MV_SUFFIX(gkv_q45_codes)(p, q5, n, c);
            for (int h = 0; h < 2; h++)
                SL_MV_SUFFIX(gka_put)(_mm512_and_si512(c[h], xff), _mm512_srli_epi16(c[h], 8),
                                      _mm512_shuffle_epi8(s8, _mm512_load_si512(ctl[2 * n + h])),
                                      r->lo[ui] + 128 * n + 64 * h,
                                      r->hi[ui] + 128 * n + 64 * h);
        }
        r->d[ui] = head.d[0];
        r->dmin[ui] = head.dmin[0];
        memcpy(r->bw[ui], head.bw[0], sizeof r->bw[ui]);
    }
}

/* IQ4_XS super-blocks [c0, c1) of the row at w straight into r (gkv_unpack and gka_scale in one
 * pass, without the VNNI kernel's offset sums and corrections, which the tiles do not use):
 * the table values (gkv_iq4xs_values), 64 (two sub-blocks) a vector, times
 * their sub-block's scale ls - 32 (gemm_bench IQ4_XS 768 x 768, 128 tokens, 1 thread, min us
 * of 5 alternations on a loaded machine: 519-532 -> 498-507). */
static inline void SL_MV_SUFFIX(gka_unpack_iq4xs)(const char *w, int64_t c0, int64_t c1,
                                                  gka_row *r)
{
    /* vector k = 2n + h holds sub-blocks 2k, 2k + 1; its 128-bit lane L sub-block 2k + L / 2,
     * whose int16 scale is bytes 2 (2k + L / 2), + 1 of the 8 scales */
    _Alignas(64) uint8_t ctl[4][64];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) ctl[k][i] = (uint8_t)(2 * (2 * k + i / 32) + (i & 1));
    for (int64_t b = c0; b < c1; b++) {
        const int64_t ui = b - c0;
        const char *p = w + b * (int64_t)sizeof(sl_block_iq4_xs);
        const __m512i s8 =
            _mm512_broadcast_i32x4(_mm256_castsi256_si128(SL_MV_SUFFIX(iq4xs_scales)(p)));
        for (int n = 0; n < 2; n++) {
            __m512i v[2];
            SL_MV_SUFFIX(gkv_iq4xs_values)(p, n, v);
            for (int h = 0; h < 2; h++) {
                const __m512i sc =
                    _mm512_shuffle_epi8(s8, _mm512_load_si512(ctl[2 * n + h]));
                SL_MV_SUFFIX(gka_put)(_mm512_srai_epi16(_mm512_slli_epi16(v[h], 8), 8),
                                      _mm512_srai_epi16(v[h], 8), sc,
                                      r->lo[ui] + 128 * n + 64 * h,
                                      r->hi[ui] + 128 * n + 64 * h);
            }
        }
        r->d[ui] = SL_MV_SUFFIX(g_half)(p);
        r->dmin[ui] = 0.0f;
    }
}

/* A super-block's sums of 16 rows against up to GKV_V panels: the lo and hi parts. */
typedef struct gka_sums {
    _Alignas(64) int32_t c[GKV_V][2][16][16];
} gka_sums;

/* The tile half of one super-block: 16 rows u0[0..15] (their super-block ui) against V panels
 * (their super-block pi) into *o. Calls follow each other without reading their results (the
 * float half runs after a batch of them): a tile's load, product and store wait on the tile
 * before them (tiles are not renamed), and a result read back at once left the unit idle
 * (gemm_bench: 1.3x slower on IQ4_XS 768 x 768 at 256 tokens). */
static inline SL_GKA_TARGET __attribute__((always_inline)) void SL_MV_SUFFIX(gka_tiles)(
    const gka_row *u0, const gkv_panel *p, const int V, int64_t ui, int64_t pi, gka_sums *o)
{
    const size_t us = sizeof(gka_row);
    _tile_zero(GKA_L0);
    _tile_zero(GKA_H0);
    if (V == 2) {
        _tile_zero(GKA_L1);
        _tile_zero(GKA_H1);
    }
    for (int k = 0; k < 4; k++) { /* elements 64k..64k+63: groups 16k..16k+15 */
        _tile_loadd(GKA_AL, u0->lo[ui] + 64 * k, us);
        _tile_loadd(GKA_AH, u0->hi[ui] + 64 * k, us);
        _tile_loadd(GKA_B0, p[0].q[pi][16 * k], 64);
        _tile_dpbusd(GKA_L0, GKA_AL, GKA_B0);
        _tile_dpbssd(GKA_H0, GKA_AH, GKA_B0);
        if (V == 2) {
            _tile_loadd(GKA_B1, p[1].q[pi][16 * k], 64);
            _tile_dpbusd(GKA_L1, GKA_AL, GKA_B1);
            _tile_dpbssd(GKA_H1, GKA_AH, GKA_B1);
        }
    }
    _tile_stored(GKA_L0, o->c[0][0], 64);
    _tile_stored(GKA_H0, o->c[0][1], 64);
    if (V == 2) {
        _tile_stored(GKA_L1, o->c[1][0], 64);
        _tile_stored(GKA_H1, o->c[1][1], 64);
    }
}

static SL_GKA_TARGET void SL_MV_SUFFIX(gka_tiles_1)(const gka_row *u0, const gkv_panel *p,
                                                    int64_t ui, int64_t pi, gka_sums *o)
{
    SL_MV_SUFFIX(gka_tiles)(u0, p, 1, ui, pi, o);
}
static SL_GKA_TARGET void SL_MV_SUFFIX(gka_tiles_2)(const gka_row *u0, const gkv_panel *p,
                                                    int64_t ui, int64_t pi, gka_sums *o)
{
    SL_MV_SUFFIX(gka_tiles)(u0, p, 2, ui, pi, o);
}

/* The float half: super-block ui of the 16 rows u0 against V panels (super-block pi) from
 * their sums *s, its terms added to lane l of lt[r][v]; first as gkv_micro's. */
static inline __attribute__((always_inline)) void SL_MV_SUFFIX(gka_float)(
    const gka_row *u0, const gkv_panel *p, const int V, const int KIND, int64_t ui, int64_t pi,
    int l, bool first, const gka_sums *s, gkv_lanes *lt)
{
    for (int v = 0; v < V; v++) {
        /* gkv_micro's float term (and mins term), element-wise over the panel's 16 tokens */
        const __m512 dx = _mm512_load_ps(p[v].d[pi]);
        for (int r = 0; r < 16; r++) {
            const gka_row *u = &u0[r];
            const __m512i acc = _mm512_add_epi32(
                _mm512_load_si512(s->c[v][0][r]),
                _mm512_slli_epi32(_mm512_load_si512(s->c[v][1][r]), 8));
            const __m512 dw = _mm512_set1_ps(u->d[ui]);
            __m512 t;
            if (KIND != GKV_MINS) {
                t = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dw, dx));
            } else {
                __m512i vm = _mm512_setzero_si512();
                for (int k = 0; k < 4; k++) {
                    const uint32_t w2 = (uint16_t)u->bw[ui][4 * k] |
                                        (uint32_t)(uint16_t)u->bw[ui][4 * k + 2] << 16;
                    vm = _mm512_dpwssd_epi32(vm, _mm512_load_si512(p[v].bs[pi][k]),
                                             _mm512_set1_epi32((int32_t)w2));
                }
                const __m512 mw = _mm512_set1_ps(u->dmin[ui]);
                const __m512 a = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dw, dx));
                t = _mm512_sub_ps(a,
                                  _mm512_mul_ps(_mm512_cvtepi32_ps(vm), _mm512_mul_ps(mw, dx)));
            }
            float *lp = lt[r][v][l];
            const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(lp);
            _mm512_store_ps(lp, _mm512_add_ps(prev, t));
        }
    }
}

/* One float half per kind and panel count. */
typedef void (*gka_float_fn)(const gka_row *, const gkv_panel *, int64_t, int64_t, int, bool,
                             const gka_sums *, gkv_lanes *);
#define SL_GKA_FLOAT(KIND, V)                                                                 \
    static void SL_MV_SUFFIX(gka_##KIND##_##V)(const gka_row *u0, const gkv_panel *p,         \
                                               int64_t ui, int64_t pi, int l, bool first,     \
                                               const gka_sums *s, gkv_lanes *lt)              \
    {                                                                                         \
        SL_MV_SUFFIX(gka_float)(u0, p, V, KIND, ui, pi, l, first, s, lt);                     \
    }
SL_GKA_FLOAT(GKV_MINS, 1)
SL_GKA_FLOAT(GKV_MINS, 2)
SL_GKA_FLOAT(GKV_OFFSET, 1)
SL_GKA_FLOAT(GKV_OFFSET, 2)
SL_GKA_FLOAT(GKV_IQ4, 1)
SL_GKA_FLOAT(GKV_IQ4, 2)
#undef SL_GKA_FLOAT

/* [kind][V - 1] */
static const gka_float_fn SL_MV_SUFFIX(gka_floats)[GKV_KINDS][GKV_V] = {
    {SL_MV_SUFFIX(gka_GKV_MINS_1), SL_MV_SUFFIX(gka_GKV_MINS_2)},
    {SL_MV_SUFFIX(gka_GKV_OFFSET_1), SL_MV_SUFFIX(gka_GKV_OFFSET_2)},
    {SL_MV_SUFFIX(gka_GKV_IQ4_1), SL_MV_SUFFIX(gka_GKV_IQ4_2)}};

/* Chunks [c_lo, c_hi) of rows i0 .. i0 + nrow - 1 of call a unpacked with their scales applied:
 * chunk c of row i0 + m at ua[(c - c_lo) * nrow + m]. */
static void SL_MV_SUFFIX(gka_unpack_rows)(const sl__mv_type *t, const sl__gemm_rows *a, int kind,
                                          int64_t i0, int64_t nrow, int64_t c_lo, int64_t c_hi,
                                          gka_row *ua)
{
    /* straight into ua where the type has its unpack here (a row of its own bytes) */
    const uint32_t ty = t->type;
    const bool direct = ty == SL_GGML_IQ4_XS || ty == SL_GGML_Q6_K || ty == SL_GGML_Q4_K ||
                        ty == SL_GGML_Q5_K;
    for (int64_t c = c_lo; c < c_hi; c++) {
        const int64_t c0 = c * GK_PCH, c1 = a->nb - c0 < GK_PCH ? a->nb : c0 + GK_PCH;
        gka_row *uc = &ua[(c - c_lo) * nrow];
        for (int64_t m = 0; direct && m < nrow; m++) {
            const int64_t row = a->idx ? a->idx[i0 + m] : i0 + m;
            const char *w = a->w + (size_t)row * a->wrb;
            if (ty == SL_GGML_IQ4_XS) SL_MV_SUFFIX(gka_unpack_iq4xs)(w, c0, c1, &uc[m]);
            else if (ty == SL_GGML_Q6_K) SL_MV_SUFFIX(gka_unpack_q6)(w, c0, c1, &uc[m]);
            else SL_MV_SUFFIX(gka_unpack_q45)(w, ty == SL_GGML_Q5_K, c0, c1, &uc[m]);
        }
        /* Q4_K_R8: its groups of 8 rows through gkv_unpack */
        for (int64_t m0 = 0; !direct && m0 < nrow; m0 += 8) {
            gk_buf ub[8];
            const gk_buf *ur[GKV_R];
            const int n8 = nrow - m0 < 8 ? (int)(nrow - m0) : 8;
            SL_MV_SUFFIX(gkv_unpack)(t, a, i0 + m0, n8, c0, c1, ub, ur);
            for (int m = 0; m < n8; m++)
                for (int64_t ui = 0; ui < c1 - c0; ui++)
                    SL_MV_SUFFIX(gka_scale)(ur[m], ui, kind, &uc[m0 + m]);
        }
    }
}

/* Token groups a row group's piece serves when rows are walked in pieces: their lanes are kept
 * (lt, 32 KiB a group), so that each piece is unpacked once per GKA_TG token groups, not once
 * per group (gemm_bench, 1 thread, 256 x 5120 and x 7168, Q4_K and Q6_K, 128-512 tokens: the
 * unpack had been a third of the time). */
enum { GKA_TG = 4 };

/* gemm_kv_block on the tiles (gemm.h's sl__gemm_amx_takes holds): tokens in groups of 32 (a
 * last one of at most 16 takes one panel), each row group's super-blocks against the panels 16
 * rows at a time. The rows are unpacked once with their scales applied where they fit (nrow x
 * nch <= GKV_UCAP); else each row group's rows in pieces of the chunks that fit, once for
 * every GKA_TG token groups, whose lanes hold the whole row's sums until its end. Its own
 * frame (~560 KiB, gemm.h: the rows, the lanes, a chunk's sums, the panels), never inlined
 * beside gemm_kv_block's. */
static __attribute__((noinline)) void SL_MV_SUFFIX(gemm_kv_block_amx)(const sl__mv_type *t,
                                                                      const sl__gemm_rows *a,
                                                                      int64_t i0, int64_t i1)
{
    const int kind = SL_MV_SUFFIX(gkv_kind)(t->type);
    const bool one_chunk = a->nb <= GKV_PCH;
    const int nl = a->nb < 8 ? (int)a->nb : 8; /* lanes in use */
    const int64_t nrow = i1 - i0, nch = (a->nb + GK_PCH - 1) / GK_PCH;
    const bool once = nrow * nch <= GKV_UCAP;
    /* chunks a piece: whole panel chunks (GKV_PCH super-blocks) when the rows are walked */
    enum { CPP = GKV_PCH / GK_PCH };
    const int64_t pc = once ? nch : GKV_UCAP / GKV_SG / CPP * CPP;
    /* token groups at once: one where the panels are built once per group (one_chunk) */
    const int tg_max = once || one_chunk ? 1 : GKA_TG;
    /* the call's panels where they were built once (signed: the tiles' form) */
    const gkv_panel *pre = a->pan && !a->pan_plus128 ? (const gkv_panel *)a->pan : NULL;
    gkv_panel p[GKV_V];
    _Alignas(64) gkv_lanes lt[GKA_TG][GKV_SG];
    /* once: chunk c of row i0 + m at ua[c * nrow + m]; else chunk c of the row group's row
     * s0 + k at ua[(c - the piece's first) * ns + k] */
    gka_row ua[GKV_UCAP];
    gka_sums sums[GKV_PCH * (GKV_SG / 16)]; /* a row group's chunk: super-block, 16 rows */
    if (once) SL_MV_SUFFIX(gka_unpack_rows)(t, a, kind, i0, nrow, 0, nch, ua);
    SL_MV_SUFFIX(gka_config)();
    for (int64_t t0 = 0; t0 < a->n_tok;) {
        /* token groups g < ng: tokens gt0[g] + [0, gnt[g]) in gnv[g] panels */
        int ng = 0, gnv[GKA_TG];
        int64_t gt0[GKA_TG], gnt[GKA_TG];
        const char *x0[GKA_TG][GKV_V];
        __m512i off[GKA_TG][GKV_V];
        for (; t0 < a->n_tok && ng < tg_max; ng++) {
            const int64_t left = a->n_tok - t0;
            gnv[ng] = left > 16 ? GKV_V : 1;
            gnt[ng] = left < 16 * gnv[ng] ? left : 16 * gnv[ng];
            gt0[ng] = t0;
            if (!pre)
                SL_MV_SUFFIX(gkv_group_panels)(a, t0, gnv[ng], one_chunk, false, x0[ng], off[ng],
                                               p);
            t0 += gnt[ng];
        }
        for (int64_t s0 = i0; s0 < i1; s0 += GKV_SG) {
            const int64_t ns = i1 - s0 < GKV_SG ? i1 - s0 : GKV_SG; /* a multiple of 16 */
            const int64_t us = once ? nrow : ns, uo = once ? s0 - i0 : 0; /* ua's layout */
            for (int64_t q0 = 0; q0 < nch; q0 += pc) {
                const int64_t q1 = nch - q0 < pc ? nch : q0 + pc;
                if (!once) SL_MV_SUFFIX(gka_unpack_rows)(t, a, kind, s0, ns, q0, q1, ua);
                const int64_t b1 = q1 * GK_PCH < a->nb ? q1 * GK_PCH : a->nb;
                for (int64_t c0 = q0 * GK_PCH; c0 < b1; c0 += GKV_PCH) {
                    const int64_t c1 = b1 - c0 < GKV_PCH ? b1 : c0 + GKV_PCH;
                    for (int g = 0; g < ng; g++) {
                        const int nv = gnv[g];
                        const gkv_panel *pp =
                            pre ? &pre[c0 / GKV_PCH * a->pan_np + gt0[g] / 16] : p;
                        for (int v = 0; !pre && !one_chunk && v < nv; v++)
                            SL_MV_SUFFIX(gkv_panel_build)(x0[g][v], off[g][v], a->xb, c0, c1,
                                                          false, &p[v]);
                        /* the chunk's tile halves, then its float halves */
                        for (int64_t b = c0; b < c1; b++)
                            for (int64_t k0 = 0; k0 < ns; k0 += 16) {
                                const gka_row *u0 = &ua[(b / GK_PCH - q0) * us + uo + k0];
                                gka_sums *o = &sums[(b - c0) * (GKV_SG / 16) + k0 / 16];
                                if (nv == 2)
                                    SL_MV_SUFFIX(gka_tiles_2)(u0, pp, b % GK_PCH, b - c0, o);
                                else SL_MV_SUFFIX(gka_tiles_1)(u0, pp, b % GK_PCH, b - c0, o);
                            }
                        for (int64_t b = c0; b < c1; b++)
                            for (int64_t k0 = 0; k0 < ns; k0 += 16)
                                SL_MV_SUFFIX(gka_floats)[kind][nv - 1](
                                    &ua[(b / GK_PCH - q0) * us + uo + k0], pp, b % GK_PCH,
                                    b - c0, (int)(b % 8), b < 8,
                                    &sums[(b - c0) * (GKV_SG / 16) + k0 / 16], &lt[g][k0]);
                    }
                }
            }
            for (int g = 0; g < ng; g++)
                SL_MV_SUFFIX(gkv_out)(a, lt[g], s0, ns, gt0[g], gnt[g], gnv[g], nl);
        }
    }
    SL_MV_SUFFIX(gka_release)();
}

bool sl__gemm_k_amx(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0, int64_t i1)
{
    SL_MV_SUFFIX(gemm_kv_block_amx)(t, a, i0, i1);
    return true;
}

#pragma clang attribute pop
#else
bool sl__gemm_k_amx(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0, int64_t i1)
{
    (void)t, (void)a, (void)i0, (void)i1;
    return false;
}
#endif
