/* sl_cpu_matvec_multi (matvec.h): the single-token matvec of several matrices that read the
 * same x, in one pool call.
 *
 * Why one call: a decode step is a chain of small matvecs (q, k, v, gate, up ... for a
 * 640-wide model each is well under a millisecond), so the pool handoff and the activation
 * quantization are a real share of a step when every matrix pays for its own; here they are
 * paid once per group. Rows are split by bytes (split.h), so a Q8_0 part and a Q5_0 part of
 * the same call keep both threads equally busy.
 *
 * Exactness: a row is computed by one thread with the kernel and lane order sl_cpu_matvec
 * uses for a batch of one (range kernel over all blocks, 32-lane fold for float types, the
 * reference's 8-lane reduction), so each part's y has the same bits as its own call. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/matvec.h"

typedef struct multi_part {
    const sl__mv_type *t;
    int64_t unit; /* rows per split row: sl__cpu_row_unit */
    sl__mv_range_fn range;
    sl__mv_rows_fn rows; /* NULL: range per row */
    const char *w, *xq; /* xq: this part's activations (x itself for float weights) */
    size_t wrb;
    int64_t nb;
    float *y;
} multi_part;

typedef struct multi_job {
    sl_cpu_split split;
    multi_part part[SL_CPU_SPLIT_MAX_PARTS];
} multi_job;

static void multi_chunk(void *ctx, int64_t c0, int64_t c1, int thread)
{
    (void)thread;
    const multi_job *j = ctx;
    for (int64_t c = c0; c < c1; c++) {
        int p;
        int64_t r0, r1;
        sl_cpu_split_chunk(&j->split, c, &p, &r0, &r1);
        const multi_part *P = &j->part[p];
        if (c + 1 == j->split.first[p + 1] && p + 1 < j->split.n_parts) { /* the next matrix */
            const multi_part *N = &j->part[p + 1];
            sl__cpu_prefetch_head(N->w, N->wrb * (size_t)j->split.rows[p + 1]);
        }
        r0 *= P->unit;
        r1 *= P->unit;
        if (P->rows) {
            P->rows(P->w, P->wrb, P->xq, P->nb, r0, r1, P->y);
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            float lane[32] = {0}, s8[8];
            sl__cpu_row_range(P->range, P->t, P->w, P->wrb, P->nb, r, P->xq, 0, P->nb, lane);
            if (P->t->block == 1) sl__mv_fold32(lane, s8);
            else memcpy(s8, lane, sizeof s8);
            P->y[r] = sl__mv_reduce8(s8);
        }
    }
}

/* The earlier part whose quantized activations part p shares (same input, same activation
 * type), -1 when none does. */
static int shares_with(const sl_cpu_matvec_part *parts, int p)
{
    const uint32_t at = sl_ref_matvec_act_type(parts[p].type);
    for (int q = 0; q < p; q++)
        if (parts[q].x == parts[p].x && sl_ref_matvec_act_type(parts[q].type) == at) return q;
    return -1;
}

/* Bytes of quantized activations of part p, 0 when it shares an earlier part's or the
 * activations are its x itself (F32). */
static size_t own_act_bytes(const sl_cpu_matvec_part *parts, int p, int64_t cols)
{
    if (sl_ref_matvec_act_type(parts[p].type) == SL_GGML_F32 || shares_with(parts, p) >= 0)
        return 0;
    return sl_ref_matvec_act_bytes(parts[p].type, cols);
}

size_t sl_cpu_matvec_multi_work_bytes(const sl_cpu_matvec_part *parts, int n_parts,
                                      int64_t cols)
{
    if (!parts || n_parts < 1 || n_parts > SL_CPU_SPLIT_MAX_PARTS || cols < 1) return 0;
    size_t total = 0;
    for (int p = 0; p < n_parts; p++) {
        if (!sl__mv_type_get(parts[p].type)) return 0;
        const bool f32 = sl_ref_matvec_act_type(parts[p].type) == SL_GGML_F32;
        if (!f32 && !sl_ref_matvec_act_bytes(parts[p].type, cols)) return 0;
        total += own_act_bytes(parts, p, cols);
    }
    return total ? total : 1;
}

sl_status sl_cpu_matvec_multi(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                              const sl_cpu_matvec_part *parts, int n_parts, int64_t cols,
                              const float *x, void *work, size_t work_bytes, sl_error *err)
{
    static const char fn[] = "sl_cpu_matvec_multi";
    if (!mv || mv->isa <= SL_CPU_ISA_AUTO || mv->isa >= SL_CPU_ISA_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "%s: mv is NULL or not initialised", fn);
    if (!parts || n_parts < 1 || n_parts > SL_CPU_SPLIT_MAX_PARTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_parts = %d is not in [1, %d] (parts %s)",
                            fn, n_parts, SL_CPU_SPLIT_MAX_PARTS, parts ? "set" : "NULL");
    multi_job j;
    int64_t rows[SL_CPU_SPLIT_MAX_PARTS];
    size_t row_bytes[SL_CPU_SPLIT_MAX_PARTS];
    for (int p = 0; p < n_parts; p++) {
        const sl_cpu_matvec_part *P = &parts[p];
        const sl__mv_type *t;
        sl_status s = sl__mv_validate(fn, P->type, P->w, P->rows, cols, P->x ? P->x : x, 1, P->y,
                                      &t, err);
        if (s) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, s, "part %d: %s", p, why);
        }
        /* a Q4_K_R8 part is split in whole groups of 8 rows (its row kernels take groups) */
        const int64_t unit = sl__cpu_row_unit(P->type);
        const size_t wrb = sl_ref_matvec_row_bytes(P->type, cols);
        rows[p] = P->rows / unit;
        row_bytes[p] = wrb * (size_t)unit;
        j.part[p] = (multi_part){.t = t, .unit = unit,
                                 .range = sl__cpu_mv_range(mv, P->type),
                                 .rows = sl__cpu_mv_rows(mv, P->type), .w = P->w, .wrb = wrb,
                                 .nb = cols / t->block, .y = P->y};
    }
    if (mv->f32_act) { /* verification mode: each part as its own call computes it */
        for (int p = 0; p < n_parts; p++) {
            const sl_cpu_matvec_part *P = &parts[p];
            sl_status s = sl_cpu_matvec(mv, pool, P->type, P->w, P->rows, cols,
                                        P->x ? P->x : x, 1, P->y, work, work_bytes, err);
            if (s) return s;
        }
        return SL_OK;
    }
    const size_t need = sl_cpu_matvec_multi_work_bytes(parts, n_parts, cols);
    if (!work || work_bytes < need)
        return sl_error_set(err, SL_ERR_INVALID, "%s: work_bytes = %zu < %zu needed (work %s)",
                            fn, work ? work_bytes : 0, need, work ? "set" : "NULL");
    /* quantize each input once per activation type; parts of the same input and type share
     * the region */
    size_t off = 0;
    for (int p = 0; p < n_parts; p++) {
        const float *xp = parts[p].x ? parts[p].x : x;
        const size_t own = own_act_bytes(parts, p, cols);
        if (sl_ref_matvec_act_type(parts[p].type) == SL_GGML_F32) {
            j.part[p].xq = (const char *)xp;
        } else if (own) {
            j.part[p].xq = (const char *)work + off;
            sl__cpu_quant_rows(mv, j.part[p].t, xp, cols, 1, (char *)work + off, own);
            off += own;
        } else {
            j.part[p].xq = j.part[shares_with(parts, p)].xq;
        }
    }
    sl_status s = sl_cpu_split_plan(rows, row_bytes, n_parts, sl_cpu_pool_threads(pool),
                                    &j.split, err);
    if (s) return s;
    return sl_cpu_pool_parallel_for(pool, j.split.n_chunks, 1, multi_chunk, &j, err);
}
