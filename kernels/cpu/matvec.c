/* CPU matvec drivers: ISA resolution, argument checks (shared with the reference), activation
 * quantization, and the row / column-block splits over the pool. A single token's row is one
 * call of a range kernel (matvec_impl.h) on the reference lanes; a batch (prefill, expert
 * groups) of a type with a batch kernel (gemm.h) hands each chunk of rows to it, which
 * unpacks each weight block once for many tokens; otherwise the batch loop sits inside the row
 * loop with one range call per token.
 *
 * Split: dense and gathered calls split output rows into chunks of `grain` rows, handed out by
 * the pool; a row is always summed by one thread, which is why the thread count never changes
 * a result. The transposed call splits output columns (block-aligned). */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "kernels/cpu/matvec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/repack.h"

sl_status sl_cpu_matvec_init(sl_cpu_matvec_ctx *mv, sl_cpu_isa isa, sl_cpu_features f,
                             sl_error *err)
{
    if (!mv) return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_matvec_init: mv is NULL");
    if (isa < SL_CPU_ISA_AUTO || isa >= SL_CPU_ISA_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_matvec_init: isa = %d is out of range",
                            (int)isa);
    if (isa == SL_CPU_ISA_AUTO)
        isa = sl_cpu_isa_available(f, SL_CPU_ISA_AVX512) ? SL_CPU_ISA_AVX512
              : sl_cpu_isa_available(f, SL_CPU_ISA_AVX2) ? SL_CPU_ISA_AVX2
                                                          : SL_CPU_ISA_SCALAR;
    if (!sl_cpu_isa_available(f, isa))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "sl_cpu_matvec_init: this CPU cannot run isa %s (see sl_cpu_features)",
                            sl_cpu_isa_name(isa));
    mv->isa = isa;
    mv->vnni = isa == SL_CPU_ISA_AVX512 && f.avx512vnni;
    mv->amx = mv->vnni && f.amx_int8;
    mv->f32_act = false;
    return SL_OK;
}

const char *sl_cpu_matvec_name(const sl_cpu_matvec_ctx *mv)
{
    if (!mv) return "?";
    if (mv->isa == SL_CPU_ISA_AVX512)
        return mv->vnni && mv->amx ? "avx512-amx" : mv->vnni ? "avx512-vnni" : "avx512";
    return sl_cpu_isa_name(mv->isa);
}

/* Reference code on the same lanes: the fallback for types without a SIMD kernel. */
static void scalar_range(const sl__mv_type *t, const void *w, const void *xq, int64_t b0,
                         int64_t b1, float *lane)
{
    if (t->block == 1) sl__mv_dot_floats(t->type, w, xq, b0, b1, lane);
    else sl__mv_dot_blocks(t, w, xq, b0, b1, lane);
}

static sl__mv_range_fn simd_range(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    /* AVX-512 without VNNI runs the AVX2 kernels (same bits; see matvec_avx512.c). */
    if (mv->isa == SL_CPU_ISA_AVX512 && mv->vnni) return sl__mv_range_avx512(type);
    if (mv->isa == SL_CPU_ISA_AVX512 || mv->isa == SL_CPU_ISA_AVX2) return sl__mv_range_avx2(type);
    return NULL;
}

/* The batch row kernel (gemm.h) for a type on mv's ISA, NULL where there is none. */
static sl__gemm_fn gemm_for(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    const sl__gemm_fn f = mv->isa == SL_CPU_ISA_AVX512 ? sl__gemm_float_avx512(type) : NULL;
    if (f) return f;
    if (mv->isa == SL_CPU_ISA_AVX512 && mv->vnni) return sl__gemm_avx512(type);
    if (mv->isa == SL_CPU_ISA_AVX512 || mv->isa == SL_CPU_ISA_AVX2) return sl__gemm_avx2(type);
    return NULL;
}

static sl__mv_range_fn range_for(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    sl__mv_range_fn f = simd_range(mv, sl_repack_base_type(type));
    return f ? f : scalar_range;
}

void sl__cpu_row_range(sl__mv_range_fn range, const sl__mv_type *t, const void *w, size_t wrb,
                       int64_t nb, int64_t r, const void *xq, int64_t b0, int64_t b1,
                       float *lane)
{
    if (t->type != SL_TYPE_Q4_K_R8) {
        range(t, (const char *)w + (size_t)r * wrb, xq, b0, b1, lane);
        return;
    }
    const sl__mv_type *rt = sl__mv_row_type(t);
    /* chunks start at multiples of 8, so a block's lane (b % 8) is the same in the chunk */
    for (int64_t c = b0 - b0 % 8; c < b1; c += 8) {
        const int64_t lo = b0 > c ? b0 : c, hi = b1 < c + 8 ? b1 : c + 8;
        sl_block_q4_K buf[8];
        sl__q4_K_r8_row(w, nb, r, lo, hi, &buf[lo - c]);
        range(rt, buf, (const char *)xq + (size_t)c * rt->act_bytes, lo - c, hi - c, lane);
    }
}

sl__mv_range_fn sl__cpu_mv_range(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    return range_for(mv, type);
}

sl__mv_rows_fn sl__cpu_mv_rows(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    if (mv->isa == SL_CPU_ISA_AVX512 && mv->vnni) return sl__mv_rows_avx512(type);
    if (mv->isa == SL_CPU_ISA_AVX512 || mv->isa == SL_CPU_ISA_AVX2) return sl__mv_rows_avx2(type);
    return NULL;
}

static void scalar_axpy(float a, const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static sl__mv_axpy_fn axpy_for(const sl_cpu_matvec_ctx *mv)
{
    if (mv->isa == SL_CPU_ISA_AVX512 && mv->vnni) return sl__mv_axpy_avx512;
    if (mv->isa == SL_CPU_ISA_AVX512 || mv->isa == SL_CPU_ISA_AVX2) return sl__mv_axpy_avx2;
    return scalar_axpy;
}

bool sl_cpu_matvec_has_simd(const sl_cpu_matvec_ctx *mv, uint32_t type)
{
    if (mv && type == SL_TYPE_Q4_K_R8) return sl__cpu_mv_rows(mv, type) != NULL;
    return mv && sl__mv_type_get(type) && simd_range(mv, type) != NULL;
}

size_t sl_cpu_matvec_work_bytes(uint32_t type, int64_t cols, int64_t n_batch)
{
    const sl__mv_type *t = sl__mv_type_get(type);
    const size_t arb = sl_ref_matvec_act_bytes(type, cols);
    if (!t || !arb || n_batch < 1 || (uint64_t)n_batch > SIZE_MAX / arb) return 0;
    return arb * (size_t)n_batch;
}

static sl_status check_mv(const char *fn, const sl_cpu_matvec_ctx *mv, sl_error *err)
{
    if (!mv || mv->isa <= SL_CPU_ISA_AUTO || mv->isa >= SL_CPU_ISA_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "%s: mv is NULL or not initialised", fn);
    return SL_OK;
}

typedef struct quant_job {
    const sl_cpu_matvec_ctx *mv;
    const sl__mv_type *t;
    const float *x;
    int64_t cols;
    char *xq;
    size_t arb;
} quant_job;

static void quant_chunk(void *ctx, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const quant_job *j = ctx;
    sl__cpu_quant_rows(j->mv, j->t, j->x + b0 * j->cols, j->cols, b1 - b0,
                       j->xq + (size_t)b0 * j->arb, j->arb);
}

sl_status sl_cpu_matvec_quant_act_pool(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                       uint32_t type, const float *x, int64_t cols,
                                       int64_t n_batch, void *xq, size_t xq_bytes, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_quant_act";
    const sl__mv_type *t;
    type = sl_repack_base_type(type); /* the same activations */
    sl_status s = check_mv(fn, mv, err);
    if (!s) s = sl__mv_validate(fn, type, x, 1, cols, x, n_batch, xq, &t, err);
    if (s) return s;
    const size_t need = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    if (xq_bytes < need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: xq_bytes = %zu < %zu needed", fn, xq_bytes,
                            need);
    const quant_job j = {.mv = mv, .t = t, .x = x, .cols = cols, .xq = xq,
                         .arb = need / (size_t)n_batch};
    /* rows are independent; chunks of >= 16 rows (a few microseconds), several a thread, so
     * the call's ragged end is short (a chunk is handed out by one atomic add, the call by
     * one handoff however many chunks it has) */
    const int64_t parts = 8 * (int64_t)sl_cpu_pool_threads(pool);
    int64_t grain = (n_batch + parts - 1) / parts;
    if (grain < 16) grain = 16;
    return sl_cpu_pool_parallel_for(n_batch > 16 ? pool : NULL, n_batch, grain, quant_chunk,
                                    (void *)&j, err);
}

sl_status sl_cpu_matvec_quant_act(const sl_cpu_matvec_ctx *mv, uint32_t type, const float *x,
                                  int64_t cols, int64_t n_batch, void *xq, size_t xq_bytes,
                                  sl_error *err)
{
    return sl_cpu_matvec_quant_act_pool(mv, NULL, type, x, cols, n_batch, xq, xq_bytes, err);
}

/* ---- dense, gathered and column-listed rows ---------------------------------------------- */

typedef struct rows_job {
    const sl__mv_type *t;
    sl__mv_range_fn range;
    sl__mv_rows_fn rows_fn; /* dense rows, one token at a time (the decode kernel); NULL: none */
    sl__gemm_fn gemm; /* rows of a batch (n_batch > 1, not column-listed): gemm.h */
    sl__gemm_fn few;  /* its few-token kernel (gemm.h's sl__gemm_tail), NULL: none */
    bool amx;         /* the batch kernels may take their AMX tile path (sl__gemm_rows.amx) */
    bool kv; /* gemm is the AVX-512 VNNI K-quant kernel, which reads panels built once */
    const void *pan; /* the batch's activation panels (sl__gemm_rows.pan), NULL: none */
    bool pan_plus128;
    const char *w, *xq;
    size_t wrb, arb;
    int64_t nb, n_batch, rows;
    const int32_t *idx; /* NULL: dense */
    bool scatter;
    const uint8_t *listed; /* column-listed: blocks to visit; NULL: all */
    float *y;
    int64_t y_stride;
} rows_job;

/* Blocks [b0, b1) of row r against the activation row xb, into lane. */
static inline void row_range(const rows_job *j, int64_t r, const char *xb, int64_t b0,
                             int64_t b1, float *lane)
{
    sl__cpu_row_range(j->range, j->t, j->w, j->wrb, j->nb, r, xb, b0, b1, lane);
}

static void rows_chunk(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const rows_job *j = ctx;
    const int64_t per = j->t->block == 1 ? 32 : 8;
    int64_t b0 = 0; /* tokens before b0 went through the GEMM */
    if (j->gemm && j->n_batch > 1 && !j->listed) {
        /* K-quants: the tail (gemm.h's sl__gemm_tail) goes to the few-token kernel where the
         * type has one (a lone token to the row kernel), else token by token to the row
         * kernel; the 32-element types' GEMM takes its tail itself, to its whole-row kernel,
         * and so do the K-quants' AMX tiles (gemm.h's sl__gemm_amx_takes) */
        const int64_t tail = j->t->block == SL_QK_K &&
                                     !sl__gemm_amx_takes(j->amx, j->n_batch, end - begin)
                                 ? sl__gemm_tail(j->n_batch, j->few != NULL)
                                 : 0;
        b0 = j->n_batch - tail;
        sl__gemm_rows a = {.w = j->w, .xq = j->xq, .wrb = j->wrb, .arb = j->arb,
                           .xb = j->t->act_bytes, .nb = j->nb,
                           .n_tok = b0, .y_stride = j->y_stride, .idx = j->idx,
                           .scatter = j->scatter, .y = j->y, .amx = j->amx, .pan = j->pan,
                           .pan_np = (j->n_batch + 15) / 16, .pan_plus128 = j->pan_plus128};
        if (b0) j->gemm(j->t, &a, begin, end);
        if (!tail) return;
        if (j->few && tail > 1) {
            a.pan = NULL;
            a.xq += (size_t)b0 * j->arb;
            a.y += b0 * j->y_stride;
            a.n_tok = tail;
            j->few(j->t, &a, begin, end);
            return;
        }
    }
    if (j->rows_fn && !j->idx && !j->listed) {
        /* the whole-row kernel of the decode path (sl_cpu_matvec_multi), token by token: for
         * a lone token (an expert group of one, the GEMM's tail) it beats a range call per
         * row, with the same bits; Q4_K_R8 takes whole groups of 8 rows (row_grain) */
        for (int64_t b = b0; b < j->n_batch; b++)
            j->rows_fn(j->w, j->wrb, j->xq + (size_t)b * j->arb, j->nb, begin, end,
                       j->y + b * j->y_stride);
        return;
    }
    for (int64_t i = begin; i < end; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const int64_t out = j->idx && !j->scatter ? i : r;
        for (int64_t b = b0; b < j->n_batch; b++) {
            const char *xb = j->xq + (size_t)b * j->arb;
            float lane[32] = {0}, s8[8];
            if (!j->listed) {
                row_range(j, r, xb, 0, j->nb, lane);
            } else {
                for (int64_t k = 0; k < j->nb;) {
                    if (!j->listed[k]) {
                        k++;
                        continue;
                    }
                    int64_t k2 = k + 1;
                    while (k2 < j->nb && j->listed[k2]) k2++;
                    row_range(j, r, xb, k, k2, lane);
                    k = k2;
                }
            }
            if (per == 32) sl__mv_fold32(lane, s8);
            else memcpy(s8, lane, sizeof s8);
            const float v = sl__mv_reduce8(s8);
            if (j->listed) j->y[b * j->y_stride + out] += v;
            else j->y[b * j->y_stride + out] = v;
        }
    }
}

/* Rows per pool chunk, at most `max`; a multiple of `unit` (8 for Q4_K_R8: its row kernels take
 * whole groups). */
static int64_t row_grain(const sl_cpu_pool *pool, int64_t n, int64_t unit, int64_t max)
{
    const int64_t parts = (int64_t)sl_cpu_pool_threads(pool) * 4;
    int64_t g = (n + parts - 1) / parts;
    g = g < 1 ? 1 : g > max ? max : g;
    return (g + unit - 1) / unit * unit;
}

/* The kernels a job runs on mv's ISA: range per row, Q4_K_R8's row kernel for its dense rows,
 * the GEMM for a batch (rows_chunk runs it only for n_batch > 1: one token has nothing to
 * share an unpacked block with). */
static void job_kernels(rows_job *j, const sl_cpu_matvec_ctx *mv)
{
    j->range = range_for(mv, j->t->type);
    j->rows_fn = sl__cpu_mv_rows(mv, j->t->type);
    j->gemm = gemm_for(mv, j->t->type);
    j->few = mv->isa == SL_CPU_ISA_AVX512 && mv->vnni ? sl__gemm_few_avx512(j->t->type) : NULL;
    j->amx = mv->isa == SL_CPU_ISA_AVX512 && mv->vnni && mv->amx;
    j->kv = mv->isa == SL_CPU_ISA_AVX512 && mv->vnni &&
            sl__gemm_k_panels_form(j->t->type, false, NULL); /* reads panels at all */
}

/* ---- activation panels built once per batch (gemm.h's sl__gemm_rows.pan) ---------------- */

/* The K-quant kernels transpose a batch's activations into 16-token panels, per call and
 * block of rows, and per 32-row group where rows pass SL__GEMM_K_PCH super-blocks: there
 * they are built once here instead, on the pool, for every call of the batch (mixtral-shaped
 * d5120 Q4_K, 64-token prompt: 1.12x; the panel builds had been 12% of its compute). Rows of
 * fewer super-blocks keep their per-block builds: built once, their 2-thread prompts read
 * 0.88-0.94x by median (qwen2moe Q5_K e128 d1024, qwen3moe IQ4_XS e128 d768, pp512,
 * alternating; 1 thread and the best runs unchanged). PANEL_MIN_ROWS: fewer rows are one
 * kernel call at most (one build either way). */
enum { PANEL_MIN_ROWS = 64 };

/* Whether job j's batch of n_batch tokens on `rows` rows takes panels built once, and their
 * form (*plus128). */
static bool panels_wanted(const rows_job *j, int64_t rows, int64_t n_batch, bool *plus128)
{
    /* the kernels' gathers of 16 tokens' offsets in int32 (gemm_kv's own limit) */
    if (!j->kv || j->listed || n_batch <= SL__GEMM_FEW_MAX || rows <= PANEL_MIN_ROWS ||
        j->nb <= SL__GEMM_K_PCH || j->arb > (size_t)(INT32_MAX / 16))
        return false;
    return sl__gemm_k_panels_form(j->t->type, sl__gemm_amx_batch(j->amx, n_batch), plus128);
}

/* Batches b < n of a build (a GEMM's one, a grouped call's groups): tokens g[b].xq
 * (g[b].n_batch), panel items from first[b] (first[n]: all items), their form plus128[b], into
 * buf. */
typedef struct panels_job {
    const rows_job *j;
    const sl_cpu_matvec_group *g;
    const int64_t *first;
    const bool *plus128;
    int64_t n;
    char *buf; /* NULL: none built (the kernels build their own) */
    bool own;  /* buf is this call's own (else the pool's scratch) */
} panels_job;

/* Batch b's panels in pj's buffer, NULL where it has none. */
static const char *panels_at(const panels_job *pj, int64_t b)
{
    if (!pj->buf || pj->first[b + 1] == pj->first[b]) return NULL;
    return pj->buf + (size_t)pj->first[b] * sl__gemm_k_panel_bytes();
}

static void panels_chunk(void *ctx, int64_t k0, int64_t k1, int thread)
{
    (void)thread;
    const panels_job *pj = ctx;
    int64_t b = 0;
    for (int64_t k = k0; k < k1;) {
        while (pj->first[b + 1] <= k) b++;
        const int64_t e = k1 < pj->first[b + 1] ? k1 : pj->first[b + 1];
        const sl__gemm_rows a = {.xq = pj->g[b].xq, .arb = pj->j->arb,
                                 .xb = pj->j->t->act_bytes, .nb = pj->j->nb,
                                 .n_tok = pj->g[b].n_batch};
        sl__gemm_k_panels_avx512(&a, pj->plus128[b], (void *)panels_at(pj, b),
                                 k - pj->first[b], e - pj->first[b]);
        k = e;
    }
}

static void panels_done(sl_cpu_pool *pool, panels_job *pj)
{
    if (pj->own) free(pj->buf);
    else if (pj->buf) sl_cpu_pool_scratch_release(pool);
    pj->buf = NULL;
}

/* Builds the panels of pj's batches on the pool into pj->buf: the pool's scratch, else a
 * buffer of its own (pj->own); NULL, and no error, where memory is short (the kernels then
 * build their own). panels_done hands the buffer back. */
static sl_status panels_build(sl_cpu_pool *pool, panels_job *pj, sl_error *err)
{
    const int64_t items = pj->first[pj->n];
    const size_t item = sl__gemm_k_panel_bytes();
    pj->buf = NULL;
    pj->own = false;
    if (!items || !item || (uint64_t)items > SIZE_MAX / item) return SL_OK;
    pj->buf = sl_cpu_pool_scratch(pool, (size_t)items * item);
    if (!pj->buf) pj->buf = aligned_alloc(64, (size_t)items * item), pj->own = true;
    if (!pj->buf) return SL_OK;
    const int64_t parts = 4 * (int64_t)sl_cpu_pool_threads(pool);
    const int64_t grain = (items + parts - 1) / parts;
    const sl_status s = sl_cpu_pool_parallel_for(pool, items, grain, panels_chunk, pj, err);
    if (s) panels_done(pool, pj);
    return s;
}

/* A call's rows in chunks of `big` rows, then a tail of chunks of `small` rows (tail_row on):
 * the pool hands chunks out in order, so the call's ragged end (a thread finishing its last
 * chunk while the others have none left) is about a tail chunk, not a big one. */
typedef struct split_job {
    rows_job *j;
    int64_t n, big, small, tail_row, n_big;
} split_job;

static void split_chunk(void *ctx, int64_t c0, int64_t c1, int thread)
{
    const split_job *s = ctx;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t b = c < s->n_big ? c * s->big : s->tail_row + (c - s->n_big) * s->small;
        const int64_t e = c < s->n_big ? b + s->big : b + s->small < s->n ? b + s->small : s->n;
        rows_chunk(s->j, b, e, thread);
    }
}

/* run_rows's dispatch: the rows in chunks on the pool. */
static sl_status run_rows_split(sl_cpu_pool *pool, rows_job *j, int64_t n, sl_error *err)
{
    /* gathered rows of a Q4_K_R8 matrix are single rows: any grain; the K-quants' AMX tiles
     * take a batch's rows in 16s (gemm.h's sl__gemm_amx_takes) */
    const bool tiles = j->gemm && j->t->block == SL_QK_K && !j->listed &&
                       sl__gemm_amx_batch(j->amx, j->n_batch);
    const int64_t unit = tiles ? 16 : j->idx ? 1 : sl__cpu_row_unit(j->t->type);
    /* a batch kernel builds its activation panels once per chunk: 256-row chunks of a GEMM
     * (an expert's 1408 rows at one thread: 6 builds, not 22) ran 7% faster than 64-row ones
     * (gemm_bench, the AVX-512 VNNI MXFP4 kernel, 32 and 64 tokens) */
    const int64_t max = j->gemm && j->n_batch > 1 && !j->listed ? 256 : 64;
    const int64_t big = row_grain(pool, n, unit, max);
    const int threads = sl_cpu_pool_threads(pool);
    /* with threads to share a batch kernel's big chunks (a 64-token Q5_K chunk of 128 x 1024:
     * ~60 us), the last (threads - 1) x big rows go in quarter chunks: a quarter of the
     * ragged end for a few more panel builds. Chunking changes no bits (a row is summed
     * alone). */
    int64_t small = (big / 4 + unit - 1) / unit * unit;
    if (small < unit) small = unit;
    if (threads < 2 || !j->gemm || j->n_batch <= 1 || j->listed || small >= big ||
        n <= (int64_t)threads * big)
        return sl_cpu_pool_parallel_for(pool, n, big, rows_chunk, j, err);
    const int64_t n_big = (n - (int64_t)(threads - 1) * big) / big;
    split_job s = {.j = j, .n = n, .big = big, .small = small, .tail_row = n_big * big,
                   .n_big = n_big};
    const int64_t n_chunks = n_big + (n - s.tail_row + small - 1) / small;
    return sl_cpu_pool_parallel_for(pool, n_chunks, 1, split_chunk, &s, err);
}

/* The rows of job j on mv, its batch's panels built once first where the kernels read them. */
static sl_status run_rows(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, rows_job *j, int64_t n,
                          sl_error *err)
{
    job_kernels(j, mv);
    bool plus128;
    if (!panels_wanted(j, n, j->n_batch, &plus128)) return run_rows_split(pool, j, n, err);
    const int64_t first[2] = {0, sl__gemm_k_panel_items(j->n_batch, j->nb)};
    const sl_cpu_matvec_group g = {.xq = j->xq, .n_batch = j->n_batch};
    panels_job pj = {.j = j, .g = &g, .first = first, .plus128 = &plus128, .n = 1};
    sl_status s = panels_build(pool, &pj, err);
    if (s) return s;
    j->pan = pj.buf;
    j->pan_plus128 = plus128;
    s = run_rows_split(pool, j, n, err);
    panels_done(pool, &pj);
    j->pan = NULL;
    return s;
}

static void init_job(rows_job *j, const sl__mv_type *t, const void *w, int64_t rows,
                     int64_t cols, const void *xq, int64_t n_batch, float *y)
{
    memset(j, 0, sizeof *j);
    j->t = t;
    j->w = w;
    j->xq = xq;
    j->wrb = sl_ref_matvec_row_bytes(t->type, cols);
    j->arb = sl_ref_matvec_act_bytes(t->type, cols);
    j->nb = cols / t->block;
    j->n_batch = n_batch;
    j->rows = rows;
    j->y = y;
    j->y_stride = rows;
}

sl_status sl_cpu_matvec_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                          const void *w, int64_t rows, int64_t cols, const void *xq,
                          int64_t n_batch, float *y, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_q";
    const sl__mv_type *t;
    sl_status s = check_mv(fn, mv, err);
    if (!s) s = sl__mv_validate(fn, type, w, rows, cols, xq, n_batch, y, &t, err);
    if (s) return s;
    rows_job j;
    init_job(&j, t, w, rows, cols, xq, n_batch, y);
    return run_rows(mv, pool, &j, rows, err);
}

sl_status sl_cpu_matvec(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                        const void *w, int64_t rows, int64_t cols, const float *x,
                        int64_t n_batch, float *y, void *work, size_t work_bytes, sl_error *err)
{
    const sl__mv_type *t = sl__mv_type_get(type);
    if (mv && mv->f32_act && t && t->act_type != SL_GGML_F32)
        return sl__cpu_matvec_f32act(pool, type, w, rows, cols, x, n_batch, y, err);
    if (t && t->act_type == SL_GGML_F32) /* float weights read x in place: no workspace */
        return sl_cpu_matvec_q(mv, pool, type, w, rows, cols, x, n_batch, y, err);
    if (n_batch == 1 && t && work && work_bytes >= sl_cpu_matvec_work_bytes(type, cols, 1)) {
        /* one token: the decode path (split by bytes, whole-row kernels), the same bits */
        const sl_cpu_matvec_part part = {.type = type, .w = w, .rows = rows, .y = y};
        return sl_cpu_matvec_multi(mv, pool, &part, 1, cols, x, work, work_bytes, err);
    }
    sl_status s =
        sl_cpu_matvec_quant_act_pool(mv, pool, type, x, cols, n_batch, work, work_bytes, err);
    if (s) return s;
    return sl_cpu_matvec_q(mv, pool, type, w, rows, cols, work, n_batch, y, err);
}

/* ---- grouped batches ---------------------------------------------------------------------- */

enum { GROUP_ROWS = 64 }; /* at most this many rows per chunk (gemm_few32's lane block) */

/* base: what every group shares (type, shape, kernels), built once per call; a chunk adds
 * its group's operands. */
typedef struct groups_job {
    rows_job base;
    const sl_cpu_matvec_group *g;
    int64_t per, chunk_rows, n_chunks; /* chunks per group, rows per chunk, chunks */
    int64_t tail0; /* groups from this one on keep unmerged chunks (groups_tail) */
    const panels_job *pj; /* the groups' panels built once (panels_at), NULL: none */
} groups_job;

/* Chunks of a group that one call of the K-quant GEMM takes together: the batch kernels build
 * their activation panels once per call (gemm_kv once per block of up to 128 rows), so a group
 * past SL__GEMM_FEW_MAX tokens (gemm.h: fewer go whole to the few-token kernel) goes in calls
 * of up to GROUP_GEMM_ROWS rows (the first chunk of each runs it, the others return at once;
 * Q6_K 768 x 1024, 64-300 tokens: 1.05-1.2x, gemm_bench CHUNK 256 vs 64); fewer tokens keep
 * GROUP_ROWS chunks (the threads' balance). */
enum { GROUP_GEMM_ROWS = 256 };
static int64_t groups_merge_n(const groups_job *gj, int64_t n_batch)
{
    if (!gj->base.gemm || gj->base.t->block != SL_QK_K || n_batch <= SL__GEMM_FEW_MAX)
        return 1;
    const int64_t m = GROUP_GEMM_ROWS / gj->chunk_rows;
    return m < 1 ? 1 : m;
}

static int64_t groups_merge(const groups_job *gj, int64_t gi)
{
    return gi >= gj->tail0 ? 1 : groups_merge_n(gj, gj->g[gi].n_batch);
}

/* The first group of the call's tail, whose chunks stay unmerged: the pool hands chunks out
 * in group order, so the call's ragged end (one thread finishing its last chunk while the
 * others have none left) is about the cost of the last chunks claimed. The tail holds at
 * least (threads - 1) x the costliest merged chunk's work (rows x tokens) in GROUP_ROWS
 * chunks, so while one thread runs the last big chunk the others share small ones (Q5_K
 * 1024 x 1024, 64-token batches: merged chunks of 256 rows take ~0.3 ms). One thread has no
 * ragged end: no tail, every group merged. Which chunks merge changes no bits (a row is
 * summed alone, whatever rows share its call). */
static int64_t groups_tail(const groups_job *gj, int64_t n_groups, int threads)
{
    if (threads < 2) return n_groups;
    int64_t big = 0;
    for (int64_t i = 0; i < n_groups; i++) {
        const int64_t m = groups_merge_n(gj, gj->g[i].n_batch);
        if (m > 1 && m * gj->g[i].n_batch > big) big = m * gj->g[i].n_batch;
    }
    if (!big) return n_groups; /* nothing merges */
    /* work in chunk_rows x tokens units: a merged chunk of group i costs m * n_batch */
    const int64_t need = big * (threads - 1);
    int64_t acc = 0, i = n_groups;
    while (i > 0 && acc < need) acc += gj->per * gj->g[--i].n_batch;
    return i;
}

static void groups_chunk(void *ctx, int64_t c0, int64_t c1, int thread)
{
    const groups_job *gj = ctx;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t gi = c / gj->per, k = c % gj->per;
        const sl_cpu_matvec_group *G = &gj->g[gi];
        const int64_t m = groups_merge(gj, gi);
        if (k % m) continue; /* a merged chunk's first chunk ran it */
        const int64_t r0 = k * gj->chunk_rows, rows = gj->base.rows;
        const int64_t r1 = r0 + m * gj->chunk_rows < rows ? r0 + m * gj->chunk_rows : rows;
        if (r1 == rows && (gi + 1) * gj->per < gj->n_chunks) /* the next group's matrix */
            sl__cpu_prefetch_head(gj->g[gi + 1].w, gj->base.wrb * (size_t)rows);
        rows_job j = gj->base;
        j.w = G->w;
        j.xq = G->xq;
        j.n_batch = G->n_batch;
        j.y = G->y;
        if (gj->pj && (j.pan = panels_at(gj->pj, gi))) j.pan_plus128 = gj->pj->plus128[gi];
        rows_chunk(&j, r0, r1, thread);
    }
}

sl_status sl_cpu_matvec_groups_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                                 int64_t rows, int64_t cols, const sl_cpu_matvec_group *groups,
                                 int64_t n_groups, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_groups_q";
    sl_status s = check_mv(fn, mv, err);
    if (s) return s;
    if (mv->f32_act)
        return sl_error_set(err, SL_ERR_INVALID, "%s: not in f32_act mode (it takes float x)", fn);
    if (n_groups < 0 || (n_groups > 0 && !groups))
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_groups = %lld (groups %s)", fn,
                            (long long)n_groups, groups ? "set" : "NULL");
    /* the shape first: a call with no groups is still a call on a (type, rows, cols) */
    const sl__mv_type *t;
    s = sl__mv_validate_shape(fn, type, rows, cols, &t, err);
    if (s) return s;
    for (int64_t i = 0; i < n_groups; i++) {
        const sl_cpu_matvec_group *G = &groups[i];
        s = sl__mv_validate(fn, type, G->w, rows, cols, G->xq, G->n_batch, G->y, &t, err);
        if (s) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, s, "group %lld: %s", (long long)i, why);
        }
    }
    if (!n_groups) return SL_OK;
    const int64_t per0 = (rows + GROUP_ROWS - 1) / GROUP_ROWS, unit = sl__cpu_row_unit(t->type);
    const int64_t chunk_rows = ((rows + per0 - 1) / per0 + unit - 1) / unit * unit;
    const int64_t per = (rows + chunk_rows - 1) / chunk_rows;
    if (n_groups > INT64_MAX / per)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld groups of %lld chunks overflow", fn,
                            (long long)n_groups, (long long)per);
    groups_job gj = {.g = groups, .per = per, .chunk_rows = chunk_rows,
                     .n_chunks = n_groups * per};
    init_job(&gj.base, t, NULL, rows, cols, NULL, 0, NULL);
    job_kernels(&gj.base, mv);
    gj.tail0 = groups_tail(&gj, n_groups, sl_cpu_pool_threads(pool));
    /* the groups' panels, built once on the pool (panels_wanted); without memory for the
     * lists or the panels the kernels build their own */
    int64_t *first = gj.base.kv ? malloc((size_t)(n_groups + 1) * sizeof *first) : NULL;
    bool *plus = gj.base.kv ? malloc((size_t)n_groups * sizeof *plus) : NULL;
    panels_job pj = {.j = &gj.base, .g = groups, .first = first, .plus128 = plus,
                     .n = n_groups};
    if (first && plus) {
        first[0] = 0;
        for (int64_t i = 0; i < n_groups; i++) {
            plus[i] = false;
            const int64_t n = groups[i].n_batch;
            const bool want = panels_wanted(&gj.base, rows, n, &plus[i]);
            first[i + 1] = first[i] + (want ? sl__gemm_k_panel_items(n, gj.base.nb) : 0);
        }
        s = panels_build(pool, &pj, err);
        gj.pj = &pj;
    }
    if (!s) s = sl_cpu_pool_parallel_for(pool, n_groups * per, 1, groups_chunk, &gj, err);
    panels_done(pool, &pj);
    free(first);
    free(plus);
    return s;
}

sl_status sl_cpu_matvec_rows_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                               const void *w, int64_t rows, int64_t cols, const int32_t *idx,
                               int64_t n_idx, bool scatter, const void *xq, int64_t n_batch,
                               float *y, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_rows_q";
    const sl__mv_type *t;
    sl_status s = check_mv(fn, mv, err);
    if (!s) s = sl__mv_validate(fn, type, w, rows, cols, xq, n_batch, y, &t, err);
    if (!s) s = sl__mv_validate_idx(fn, idx, n_idx, rows, "rows", err);
    if (s || n_idx == 0) return s;
    rows_job j;
    init_job(&j, t, w, rows, cols, xq, n_batch, y);
    j.idx = idx;
    j.scatter = scatter;
    j.y_stride = scatter ? rows : n_idx;
    return run_rows(mv, pool, &j, n_idx, err);
}

size_t sl_cpu_matvec_cols_work_bytes(uint32_t type, int64_t cols, int64_t n_batch)
{
    const size_t act = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    if (!act || (uint64_t)cols > SIZE_MAX / 8 / (uint64_t)n_batch) return 0;
    return act + (size_t)cols * (size_t)n_batch * sizeof(float) + (size_t)cols + 64;
}

sl_status sl_cpu_matvec_cols(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                             const void *w, int64_t rows, int64_t cols, const int32_t *idx,
                             int64_t n_idx, const float *x, int64_t n_batch, float *y,
                             void *work, size_t work_bytes, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_cols";
    const sl__mv_type *t;
    sl_status s = check_mv(fn, mv, err);
    if (!s) s = sl__mv_validate(fn, type, w, rows, cols, x, n_batch, y, &t, err);
    if (!s) s = sl__mv_validate_idx(fn, idx, n_idx, cols, "cols", err);
    if (s) return s;
    const size_t need = sl_cpu_matvec_cols_work_bytes(type, cols, n_batch);
    if (!work || work_bytes < need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: work_bytes = %zu < %zu needed (work %s)", fn,
                            work ? work_bytes : 0, need, work ? "set" : "NULL");
    /* work = [pad to 64][masked x floats][quantized activations][listed-block flags]: the
     * caller's buffer may have any alignment, the floats need theirs (64 bytes of slack). */
    const size_t act = sl_cpu_matvec_work_bytes(type, cols, n_batch);
    float *xm = (float *)(void *)((char *)work + ((64 - (uintptr_t)work % 64) % 64));
    char *xq = (char *)(xm + cols * n_batch);
    uint8_t *listed = (uint8_t *)(xq + act);
    memset(xm, 0, (size_t)(cols * n_batch) * sizeof *xm);
    memset(listed, 0, (size_t)cols);
    for (int64_t i = 0; i < n_idx; i++) {
        listed[idx[i] / t->block] = 1;
        for (int64_t b = 0; b < n_batch; b++) xm[b * cols + idx[i]] = x[b * cols + idx[i]];
    }
    sl__cpu_quant_rows(mv, t, xm, cols, n_batch, xq, act / (size_t)n_batch);
    rows_job j;
    init_job(&j, t, w, rows, cols, xq, n_batch, y);
    j.listed = listed;
    return run_rows(mv, pool, &j, rows, err);
}

/* ---- transposed rows -------------------------------------------------------------------- */

enum { T_CHUNK_ELEMS = 4096 }; /* dequantized floats per chunk (16 KiB of stack) */

typedef struct t_job {
    const sl__mv_type *t;
    sl__mv_axpy_fn axpy;
    const char *wt;
    size_t wrb;
    int64_t rows, cols, n_batch, n_idx;
    const int32_t *idx;
    const float *x;
    float *y;
} t_job;

/* Blocks [k0, k1) of row r of W into buf (Q4_K_R8: copied out of its group first). */
static void dequant_range(const sl__mv_type *t, const char *w, size_t wrb, int64_t nb, int64_t r,
                          int64_t k0, int64_t k1, float *buf)
{
    const char *row = w + (size_t)r * wrb;
    if (t->type == SL_GGML_F32) {
        memcpy(buf, row + 4 * k0, (size_t)(k1 - k0) * 4);
        return;
    }
    if (t->type == SL_TYPE_Q4_K_R8) {
        sl_block_q4_K b;
        for (int64_t k = k0; k < k1; k++) {
            sl__q4_K_r8_row(w, nb, r, k, k + 1, &b);
            sl__mv_dequant_block(sl__mv_row_type(t), &b, buf + (k - k0) * t->block);
        }
        return;
    }
    for (int64_t k = k0; k < k1; k++)
        sl__mv_dequant_block(t, row + k * t->bytes, buf + (k - k0) * t->block);
}

static void t_chunk(void *ctx, int64_t k0, int64_t k1, int thread)
{
    (void)thread;
    const t_job *j = ctx;
    float buf[T_CHUNK_ELEMS];
    const int64_t c0 = k0 * j->t->block, n = (k1 - k0) * j->t->block;
    for (int64_t i = 0; i < j->n_idx; i++) {
        const int64_t r = j->idx[i];
        dequant_range(j->t, j->wt, j->wrb, j->cols / j->t->block, r, k0, k1, buf);
        for (int64_t b = 0; b < j->n_batch; b++)
            j->axpy(j->x[b * j->rows + r], buf, j->y + b * j->cols + c0, n);
    }
}

sl_status sl_cpu_matvec_t_rows(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                               const void *wt, int64_t rows, int64_t cols, const int32_t *idx,
                               int64_t n_idx, const float *x, int64_t n_batch, float *y,
                               sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_t_rows";
    const sl__mv_type *t;
    sl_status s = check_mv(fn, mv, err);
    if (!s) s = sl__mv_validate(fn, type, wt, rows, cols, x, n_batch, y, &t, err);
    if (!s) s = sl__mv_validate_idx(fn, idx, n_idx, rows, "rows", err);
    if (s || n_idx == 0) return s;
    t_job j = {.t = t, .axpy = axpy_for(mv), .wt = wt, .wrb = sl_ref_matvec_row_bytes(type, cols),
               .rows = rows, .cols = cols, .n_batch = n_batch, .n_idx = n_idx, .idx = idx,
               .x = x, .y = y};
    const int64_t nb = cols / t->block, max_blocks = T_CHUNK_ELEMS / t->block;
    const int64_t parts = (int64_t)sl_cpu_pool_threads(pool) * 2;
    int64_t grain = (nb + parts - 1) / parts;
    if (grain > max_blocks) grain = max_blocks;
    if (grain < 1) grain = 1;
    return sl_cpu_pool_parallel_for(pool, nb, grain, t_chunk, &j, err);
}
