/* kernels/cpu/repack: see repack.h. */
#include "kernels/cpu/repack.h"

#include <stdlib.h>

#include "kernels/ref/repack.h"

/* Groups [g0, g1) of eight rows of one part. */
typedef struct chunk {
    const sl_cpu_repack_part *part;
    int64_t g0, g1;
} chunk;

typedef struct job {
    const chunk *chunk;
    sl_status *st; /* per thread: its first failure (its later chunks are skipped) */
    sl_error *err; /* per thread */
} job;

static size_t group_bytes(const sl_cpu_repack_part *p)
{
    return (size_t)(p->cols / SL_QK_K) * 8 * sizeof(sl_block_q4_K);
}

/* p's groups of eight rows (*groups) and the groups per chunk. */
static int64_t chunk_groups(const sl_cpu_repack_part *p, int64_t *groups)
{
    *groups = p->rows / 8;
    return (int64_t)(SL_CPU_REPACK_CHUNK_BYTES / group_bytes(p)) + 1;
}

static const char *name_of(const sl_cpu_repack_part *p)
{
    return p->name ? p->name : "(unnamed)";
}

static void run_chunks(void *ctx, int64_t b, int64_t e, int thread)
{
    const job *j = ctx;
    for (int64_t i = b; i < e && !j->st[thread]; i++) {
        const chunk *c = &j->chunk[i];
        uint8_t *data = (uint8_t *)c->part->data + (size_t)c->g0 * group_bytes(c->part);
        sl_error *err = &j->err[thread];
        sl_error why = {0}; /* err is formatted from it: the two must not alias */
        sl_status st = sl_repack_q4_K_r8(data, data, 8 * (c->g1 - c->g0), c->part->cols, &why);
        if (st)
            j->st[thread] = sl_error_set(err, st, "tensor '%s': repacking rows %lld..%lld to "
                                         "Q4_K_R8: %s", name_of(c->part), (long long)(8 * c->g0),
                                         (long long)(8 * c->g1), why.msg);
    }
}

/* Runs the n chunks on pool, each once; the first thread's failure is the answer. */
static sl_status run(sl_cpu_pool *pool, const chunk *ch, int64_t n, sl_error *err)
{
    const int nt = sl_cpu_pool_threads(pool);
    sl_status *st = calloc((size_t)nt, sizeof *st);
    sl_error *errs = calloc((size_t)nt, sizeof *errs);
    sl_status s = SL_OK;
    if (!st || !errs) {
        s = sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_repack_q4_K_r8: no memory for %d threads' "
                         "status", nt);
    } else {
        job j = {.chunk = ch, .st = st, .err = errs};
        s = sl_cpu_pool_parallel_for(pool, n, 1, run_chunks, &j, err);
        for (int t = 0; !s && t < nt; t++)
            if (st[t]) s = sl_error_set(err, st[t], "%s", errs[t].msg);
    }
    free(st);
    free(errs);
    return s;
}

sl_status sl_cpu_repack_q4_K_r8(sl_cpu_pool *pool, const sl_cpu_repack_part *parts,
                                int64_t n_parts, sl_error *err)
{
    if (n_parts < 0 || (n_parts && !parts))
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_repack_q4_K_r8: n_parts = %lld with "
                            "parts %s", (long long)n_parts, parts ? "set" : "NULL");
    int64_t n = 0;
    for (int64_t i = 0; i < n_parts; i++) {
        const sl_cpu_repack_part *p = &parts[i];
        /* the reference's own checks on the whole part, before anything is written */
        sl_error why = {0};
        if (sl_repack_q4_K_r8_check(p->data, p->rows, p->cols, &why))
            return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_repack_q4_K_r8: part %lld ('%s'): %s",
                                (long long)i, name_of(p), why.msg);
        int64_t groups;
        const int64_t per = chunk_groups(p, &groups);
        n += (groups + per - 1) / per;
    }
    if (!n) return SL_OK;
    chunk *ch = calloc((size_t)n, sizeof *ch);
    if (!ch)
        return sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_repack_q4_K_r8: no memory for %lld "
                            "chunks", (long long)n);
    int64_t c = 0;
    for (int64_t i = 0; i < n_parts; i++) {
        int64_t groups;
        const int64_t per = chunk_groups(&parts[i], &groups);
        for (int64_t g = 0; g < groups; g += per) {
            const int64_t g1 = g + per < groups ? g + per : groups;
            ch[c++] = (chunk){.part = &parts[i], .g0 = g, .g1 = g1};
        }
    }
    const sl_status st = run(pool, ch, n, err);
    free(ch);
    return st;
}
