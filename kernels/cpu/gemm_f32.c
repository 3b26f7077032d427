/* kernels/cpu/gemm_f32.c: F32 weights times a batch of F32 activations (AVX-512), the router's
 * logits (ffn_gate_inp, F32 in every MoE file) and any other F32 matrix in a prefill.
 *
 * Why: the row-by-row path (range_f32 per row and token) reloads both operands for every FMA
 * and folds 32 lanes per dot; at a 512-token prompt a 128-expert router cost as much as the
 * attention. Here 2 rows x 4 tokens share each load (16 accumulators, 12 loads per 16 FMAs).
 *
 * Same bits as every other F32 path (kernels/ref/matvec_blocks.c's sl__mv_dot_row): element i
 * of a dot goes into lane i % 32 by fmaf in increasing i (a zmm holds lanes 0-15, another
 * 16-31; the tail's masked FMA leaves the other lanes untouched), then sl__mv_fold32 and
 * sl__mv_reduce8. */
#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/matvec_impl.h"

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>

#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma"))), \
                             apply_to = function)

enum { GF_RB = 2, GF_TB = 4 };

typedef struct gf_job {
    const float *w, *x;
    int64_t rows, cols, n_batch;
    float *y;
} gf_job;

/* rows [r, r + RB) x tokens [b, b + TB), RB <= GF_RB, TB <= GF_TB (constants after inlining) */
static inline __attribute__((always_inline)) void gf_tile(const gf_job *j, int64_t r, int RB,
                                                          int64_t b, int TB)
{
    const int64_t n = j->cols, n32 = n & ~(int64_t)31;
    __m512 a[GF_RB][GF_TB][2];
    _Pragma("clang loop unroll(full)")
    for (int u = 0; u < RB; u++)
        _Pragma("clang loop unroll(full)")
        for (int t = 0; t < TB; t++) a[u][t][0] = a[u][t][1] = _mm512_setzero_ps();
    const float *wr[GF_RB], *xt[GF_TB];
    _Pragma("clang loop unroll(full)")
    for (int u = 0; u < RB; u++) wr[u] = j->w + (r + u) * n;
    _Pragma("clang loop unroll(full)")
    for (int t = 0; t < TB; t++) xt[t] = j->x + (b + t) * n;
    for (int64_t i = 0; i < n32; i += 32) {
        __m512 xv[GF_TB][2];
        _Pragma("clang loop unroll(full)")
        for (int t = 0; t < TB; t++) {
            xv[t][0] = _mm512_loadu_ps(xt[t] + i);
            xv[t][1] = _mm512_loadu_ps(xt[t] + i + 16);
        }
        _Pragma("clang loop unroll(full)")
        for (int u = 0; u < RB; u++) {
            const __m512 w0 = _mm512_loadu_ps(wr[u] + i), w1 = _mm512_loadu_ps(wr[u] + i + 16);
            _Pragma("clang loop unroll(full)")
            for (int t = 0; t < TB; t++) {
                a[u][t][0] = _mm512_fmadd_ps(w0, xv[t][0], a[u][t][0]);
                a[u][t][1] = _mm512_fmadd_ps(w1, xv[t][1], a[u][t][1]);
            }
        }
    }
    if (n32 < n) { /* lanes 0 .. n - n32 - 1 take the tail, the rest stay as they are */
        const int64_t rem = n - n32;
        const __mmask16 k0 = rem >= 16 ? 0xffff : (__mmask16)((1u << rem) - 1u);
        const __mmask16 k1 = rem <= 16 ? 0 : (__mmask16)((1u << (rem - 16)) - 1u);
        _Pragma("clang loop unroll(full)")
        for (int u = 0; u < RB; u++) {
            const __m512 w0 = _mm512_maskz_loadu_ps(k0, wr[u] + n32);
            const __m512 w1 = _mm512_maskz_loadu_ps(k1, wr[u] + n32 + 16);
            _Pragma("clang loop unroll(full)")
            for (int t = 0; t < TB; t++) {
                const __m512 x0 = _mm512_maskz_loadu_ps(k0, xt[t] + n32);
                const __m512 x1 = _mm512_maskz_loadu_ps(k1, xt[t] + n32 + 16);
                a[u][t][0] = _mm512_mask3_fmadd_ps(w0, x0, a[u][t][0], k0);
                a[u][t][1] = _mm512_mask3_fmadd_ps(w1, x1, a[u][t][1], k1);
            }
        }
    }
    _Pragma("clang loop unroll(full)")
    for (int u = 0; u < RB; u++)
        _Pragma("clang loop unroll(full)")
        for (int t = 0; t < TB; t++) {
            float lane[32], s8[8];
            _mm512_storeu_ps(lane, a[u][t][0]);
            _mm512_storeu_ps(lane + 16, a[u][t][1]);
            sl__mv_fold32(lane, s8);
            j->y[(b + t) * j->rows + r + u] = sl__mv_reduce8(s8);
        }
}

/* rows [r0, r1) of every token: 4 tokens (in L1) against the chunk's rows (L1 or L2) */
static void gf_rows(const gf_job *j, int64_t r0, int64_t r1)
{
    int64_t b = 0;
    for (; b + GF_TB <= j->n_batch; b += GF_TB) {
        int64_t r = r0;
        for (; r + GF_RB <= r1; r += GF_RB) gf_tile(j, r, GF_RB, b, GF_TB);
        for (; r < r1; r++) gf_tile(j, r, 1, b, GF_TB);
    }
    for (; b < j->n_batch; b++) {
        int64_t r = r0;
        for (; r + GF_RB <= r1; r += GF_RB) gf_tile(j, r, GF_RB, b, 1);
        for (; r < r1; r++) gf_tile(j, r, 1, b, 1);
    }
}

#pragma clang attribute pop

static void gf_chunk(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const gf_job *j = ctx;
    gf_rows(j, begin, end);
}

bool sl__cpu_gemm_f32_available(const sl_cpu_matvec_ctx *mv)
{
    return mv && mv->isa == SL_CPU_ISA_AVX512;
}

sl_status sl__cpu_gemm_f32(sl_cpu_pool *pool, const float *w, int64_t rows, int64_t cols,
                           const float *x, int64_t n_batch, float *y, sl_error *err)
{
    const gf_job j = {.w = w, .x = x, .rows = rows, .cols = cols, .n_batch = n_batch, .y = y};
    /* row chunks of at most 8 (even, so tiles stay 2 rows; 8 rows of 768 floats stay in L1
     * beside the 4 tokens), at least 4 per thread where rows allow */
    const int64_t parts = (int64_t)sl_cpu_pool_threads(pool) * 4;
    int64_t grain = (rows + parts - 1) / parts;
    grain = grain < 2 ? 2 : grain > 8 ? 8 : (grain + 1) & ~(int64_t)1;
    return sl_cpu_pool_parallel_for(pool, rows, grain, gf_chunk, (void *)&j, err);
}

#else

bool sl__cpu_gemm_f32_available(const sl_cpu_matvec_ctx *mv)
{
    (void)mv;
    return false;
}

sl_status sl__cpu_gemm_f32(sl_cpu_pool *pool, const float *w, int64_t rows, int64_t cols,
                           const float *x, int64_t n_batch, float *y, sl_error *err)
{
    (void)pool, (void)w, (void)rows, (void)cols, (void)x, (void)n_batch, (void)y;
    return sl_error_set(err, SL_ERR_UNSUPPORTED, "F32 GEMM: no AVX-512 build");
}

#endif
