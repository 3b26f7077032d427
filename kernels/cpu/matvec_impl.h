/* kernels/cpu/matvec_impl.h: module-private interface between the matvec drivers (matvec.c)
 * and the per-ISA kernels (matvec_avx2.c, matvec_avx512.c, both from matvec_x86_tmpl.h).
 *
 * A range kernel adds the contributions of blocks [b0, b1) of one weight row to the reference
 * lanes (kernels/ref/matvec_impl.h): lane[b % 8] for quantized types, lane[i % 32] for float
 * types (then b0, b1 count elements). Because the lanes carry across calls, a dense row is one
 * call over [0, nb) and a column-listed row is one call per run of listed blocks; both end with
 * the reference reduction. Kernels check nothing. */
#ifndef SL_KERNELS_CPU_MATVEC_IMPL_H
#define SL_KERNELS_CPU_MATVEC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/matvec_impl.h"
#include "kernels/ref/repack.h"

typedef void (*sl__mv_range_fn)(const sl__mv_type *t, const void *w, const void *xq, int64_t b0,
                                int64_t b1, float *lane);
/* Dense rows [r0, r1) of W (rows wrb bytes apart, nb blocks each) times one activation row:
 * y[r] = the row's dot with the reference's lanes and reduction (what a range kernel over
 * [0, nb) and sl__mv_reduce8 give), without the lanes going through memory. */
typedef void (*sl__mv_rows_fn)(const void *w, size_t wrb, const void *xq, int64_t nb, int64_t r0,
                               int64_t r1, float *y);
/* y[0..n) = fmaf(a, x[i], y[i]) element by element (bit-exact to the scalar loop). */
typedef void (*sl__mv_axpy_fn)(float a, const float *x, float *y, int64_t n);

/* Blocks [b0, b1) of row r of W (type t, rows wrb bytes apart, nb blocks each) against the
 * activation row xq, added into lane by range (sl__cpu_mv_range's for t). A Q4_K_R8 row is
 * copied out eight super-blocks at a time (kernels/ref/repack.h) and read as Q4_K: the paths
 * that read one row at a time (gathered and column-listed rows, ISAs without its kernel). */
void sl__cpu_row_range(sl__mv_range_fn range, const sl__mv_type *t, const void *w, size_t wrb,
                       int64_t nb, int64_t r, const void *xq, int64_t b0, int64_t b1,
                       float *lane);
/* Rows the row kernels of `type` take together: 8 for Q4_K_R8 (whole groups), else 1. Splits
 * of its rows between threads are multiples of it. */
static inline int64_t sl__cpu_row_unit(uint32_t type) { return type == SL_TYPE_Q4_K_R8 ? 8 : 1; }

/* Prefetches the first min(n, SL__CPU_PF_HEAD) bytes at p: a pool chunk that starts another
 * matrix (the next expert) is fetched while this one is computed; the rows kernels prefetch
 * ahead inside a matrix (matvec_x86_tmpl.h), not across to the next one. */
enum { SL__CPU_PF_HEAD = 2048 };
static inline void sl__cpu_prefetch_head(const void *p, size_t n)
{
    if (n > SL__CPU_PF_HEAD) n = SL__CPU_PF_HEAD;
    for (size_t i = 0; i < n; i += 64) __builtin_prefetch((const char *)p + i);
}

/* mv's range kernel for type (the scalar reference code where the ISA has none); Q4_K_R8's
 * is Q4_K's, for sl__cpu_r8_range. */
sl__mv_range_fn sl__cpu_mv_range(const sl_cpu_matvec_ctx *mv, uint32_t type);

/* NULL when the ISA has no kernel for the type. */
sl__mv_range_fn sl__mv_range_avx2(uint32_t type);
sl__mv_range_fn sl__mv_range_avx512(uint32_t type); /* AVX-512 F/BW/VL + VNNI */
/* NULL when the ISA has no whole-row kernel for the type (float types). */
sl__mv_rows_fn sl__mv_rows_avx2(uint32_t type);
sl__mv_rows_fn sl__mv_rows_avx512(uint32_t type);
/* mv's whole-row kernel for type, NULL where it has none (then: range kernel per row). */
sl__mv_rows_fn sl__cpu_mv_rows(const sl_cpu_matvec_ctx *mv, uint32_t type);
void sl__mv_axpy_avx2(float a, const float *x, float *y, int64_t n);
void sl__mv_axpy_avx512(float a, const float *x, float *y, int64_t n);

/* sl__mv_quant_rows (the reference's activation quantizers, row by row) with mv's SIMD
 * quantizers where it has them (quant_act.c): the same bytes, faster. */
void sl__cpu_quant_rows(const sl_cpu_matvec_ctx *mv, const sl__mv_type *t, const float *x,
                        int64_t cols, int64_t n_batch, void *xq, size_t act_row_bytes);

/* sl_cpu_matvec with mv->f32_act (matvec_f32act.c): dequantized rows · F32 x, in double. */
sl_status sl__cpu_matvec_f32act(sl_cpu_pool *pool, uint32_t type, const void *w, int64_t rows,
                                int64_t cols, const float *x, int64_t n_batch, float *y,
                                sl_error *err);

#endif
