/* kernels/cpu/gemm_float.c: the batch kernel of the float weight types (F32, F16, BF16) on
 * AVX-512 F (gemm.h's sl__gemm_float_avx512, under gemm.h's contract). A file of its own: it
 * needs no VNNI (matvec.c dispatches it on every AVX-512 CPU, as the F32 kernel it replaced),
 * and matvec_avx512.c's compile, the longest of the build, does not grow.
 *
 * Why: without it a batch ran the decode path's range kernel per (row, token): each pair
 * re-read its activation row from L2 and converted its weight row again, two loads and a
 * conversion per multiply-add (a 4-layer qwen3 F16 / BF16 file, dim 1024, FFN 3072, 1 thread:
 * prompt 0.30-0.38x llama.cpp's, whose F16 GEMM blocks rows and tokens). Here a block of GF_RB
 * rows is converted to float once per GF_KC-element chunk and GF_TB tokens, and a micro-kernel
 * of GF_MR rows x GF_MT tokens keeps their lanes in registers across the chunk: each weight
 * vector serves GF_MT tokens, each activation vector GF_MR rows (24 FMAs to 14 loads, no
 * spills). Measured (the same files, `bench compare -p 128,512 -t 1`, 2 alternations): prompt
 * 2.4-3.0x faster, 0.86-0.92x llama.cpp's, which multiplies in F16/BF16 where this keeps the
 * reference's F32 multiply-adds: the prompt's run at ~1.8 G zmm FMAs/s, what a loop of 24
 * independent zmm FMA chains reaches here (~1.6 G/s, turbo aside). F32 (routers) took the
 * place of a 2 x 4-tile kernel of its own (sweep MoE files, pp64/pp512, 1-2 threads: 0.97-1.01x).
 *
 * Why the bits are the reference's (kernels/ref/matvec_blocks.c sl__mv_dot_floats and
 * sl__mv_dot_row): every (row, token) keeps its own 32 lanes, lane i % 32 taking
 * fmaf(w_i, x_i, lane) in element order (F16 and BF16 widen exactly); elements past the last
 * multiple of 32 go through sl__mv_dot_floats itself; then sl__mv_fold32 and sl__mv_reduce8.
 * Rows past a block's end read zeros and tokens past it repeat the last token: their lanes
 * are computed and dropped. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/ref/matvec_impl.h"

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h> /* before the target region: the intrinsics carry their own targets */

#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), \
                             apply_to = function)

enum {
    GF_MR = 4,   /* rows a micro-kernel */
    GF_MT = 3,   /* tokens a micro-kernel: 4 x 3 x 2 accumulators, 6 activation vectors */
    GF_RB = 16,  /* rows a block (a multiple of GF_MR) */
    GF_KC = 256, /* elements a chunk (a multiple of 32): the block's floats, 16 KiB, in L1 */
    GF_TB = 48   /* tokens a block (a multiple of GF_MT): its lanes, 96 KiB, in L2 */
};

/* The lanes of a block: [row][token][32]. */
typedef struct gf_lanes {
    _Alignas(64) float l[GF_RB][GF_TB][32];
} gf_lanes;

/* Elements [k0, k0 + kc) of the row at w (ggml type) as floats into o (kc a multiple of 16). */
static inline void gf_widen(uint32_t type, const char *w, int64_t k0, int64_t kc, float *o)
{
    for (int64_t i = 0; i < kc; i += 16) {
        __m512 v;
        if (type == SL_GGML_F32) {
            v = _mm512_loadu_ps((const float *)w + k0 + i);
        } else {
            const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k0 + i));
            v = type == SL_GGML_F16
                    ? _mm512_cvtph_ps(h)
                    : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
        _mm512_store_ps(o + i, v);
    }
}

/* GF_MR rows of wf (GF_KC apart) x GF_MT tokens (x[j]: token j's elements from the chunk's
 * first) over kc elements, into their lanes lp[r][j] (zero first: a row's first chunk). */
static inline void gf_micro(const float *wf, const float *const x[GF_MT],
                                          int64_t kc, bool first, float *const lp[GF_MR][GF_MT])
{
    __m512 acc[GF_MR][GF_MT][2];
    for (int r = 0; r < GF_MR; r++)
        for (int j = 0; j < GF_MT; j++)
            for (int h = 0; h < 2; h++)
                acc[r][j][h] = first ? _mm512_setzero_ps() : _mm512_load_ps(lp[r][j] + 16 * h);
    for (int64_t i = 0; i < kc; i += 32) {
        __m512 xv[GF_MT][2];
        for (int j = 0; j < GF_MT; j++)
            for (int h = 0; h < 2; h++) xv[j][h] = _mm512_loadu_ps(x[j] + i + 16 * h);
        for (int r = 0; r < GF_MR; r++)
            for (int h = 0; h < 2; h++) {
                const __m512 wv = _mm512_load_ps(wf + r * GF_KC + i + 16 * h);
                for (int j = 0; j < GF_MT; j++)
                    acc[r][j][h] = _mm512_fmadd_ps(wv, xv[j][h], acc[r][j][h]);
            }
    }
    for (int r = 0; r < GF_MR; r++)
        for (int j = 0; j < GF_MT; j++)
            for (int h = 0; h < 2; h++) _mm512_store_ps(lp[r][j] + 16 * h, acc[r][j][h]);
}

static void gemm_float(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0,
                                     int64_t i1)
{
    const uint32_t type = t->type;
    const int64_t cols = a->nb, kv = cols / 32 * 32; /* vector part; the rest scalar */
    _Alignas(64) float wf[GF_RB * GF_KC];
    gf_lanes ln;
    const char *wr[GF_RB];
    /* token blocks outside: a block's activations (GF_TB rows) stay in L2 for all the call's
     * rows (row blocks outside ran as fast: the 4-layer F16 file, pp128/pp512, 1 thread,
     * 1.00-1.04x; the micro-kernel's multiply-adds, ~1 zmm FMA a cycle here, set the speed) */
    for (int64_t t0 = 0; t0 < a->n_tok; t0 += GF_TB) {
        const int nt = a->n_tok - t0 < GF_TB ? (int)(a->n_tok - t0) : GF_TB;
        for (int64_t r0 = i0; r0 < i1; r0 += GF_RB) {
            const int nr = i1 - r0 < GF_RB ? (int)(i1 - r0) : GF_RB;
            for (int r = 0; r < nr; r++)
                wr[r] = a->w + (size_t)(a->idx ? a->idx[r0 + r] : r0 + r) * a->wrb;
            /* rows past the block's end: zeros, computed and dropped */
            memset(wf + nr * GF_KC, 0, (size_t)(GF_RB - nr) * GF_KC * sizeof *wf);
            if (kv == 0) memset(&ln, 0, sizeof ln);
            for (int64_t k0 = 0; k0 < kv; k0 += GF_KC) {
                const int64_t kc = kv - k0 < GF_KC ? kv - k0 : GF_KC;
                for (int r = 0; r < nr; r++)
                    gf_widen(type, wr[r], k0, kc, wf + r * GF_KC);
                for (int j0 = 0; j0 < nt; j0 += GF_MT) {
                    const float *x[GF_MT];
                    for (int j = 0; j < GF_MT; j++) {
                        const int64_t tk = t0 + (j0 + j < nt ? j0 + j : nt - 1);
                        x[j] = (const float *)(a->xq + (size_t)tk * a->arb) + k0;
                    }
                    for (int m0 = 0; m0 < nr; m0 += GF_MR) {
                        float *lp[GF_MR][GF_MT];
                        for (int r = 0; r < GF_MR; r++)
                            for (int j = 0; j < GF_MT; j++) lp[r][j] = ln.l[m0 + r][j0 + j];
                        gf_micro(wf + m0 * GF_KC, x, kc, k0 == 0, lp);
                    }
                }
            }
            for (int r = 0; r < nr; r++) {
                const int64_t i = r0 + r, row = a->idx ? a->idx[i] : i;
                const int64_t out = a->idx && !a->scatter ? i : row;
                for (int j = 0; j < nt; j++) {
                    const float *x = (const float *)(a->xq + (size_t)(t0 + j) * a->arb);
                    float s8[8];
                    if (kv < cols) sl__mv_dot_floats(type, wr[r], x, kv, cols, ln.l[r][j]);
                    sl__mv_fold32(ln.l[r][j], s8);
                    a->y[(t0 + j) * a->y_stride + out] = sl__mv_reduce8(s8);
                }
            }
        }
    }
}

#pragma clang attribute pop

sl__gemm_fn sl__gemm_float_avx512(uint32_t type)
{
    switch (type) {
    case SL_GGML_F32:
    case SL_GGML_F16:
    case SL_GGML_BF16: return gemm_float;
    default: return NULL;
    }
}

#else
sl__gemm_fn sl__gemm_float_avx512(uint32_t type)
{
    (void)type;
    return NULL;
}
#endif
