/* runtime/engine/dx_host.c: the host and sim executors (dx.h) — the CPU kernels, the latter after
 * draining the device stream. The step definitions here are the forward pass's CPU path. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/router.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "runtime/engine/dx.h"
#include "runtime/engine/rope_cache.h"

enum { MM_BATCH = 64 }; /* the small-batch matvec's intended upper batch */

typedef struct dx_host {
    sl__dx base; /* must be first */
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_cpu_pool *pool;
    sl_moe_sched *moe;
    void *work;
    size_t work_bytes;
    sl_device *dev;      /* sim only */
    sl_stream *stream;
    sl_moe_assign *assign;
    int64_t assign_cap;
    /* relu_ffn: the listed neurons and the column-listed matvec's workspace, grown on use */
    int32_t *idx;
    int64_t idx_cap;
    void *cols_work;
    size_t cols_work_bytes;
    void *multi_work; /* single-token groups' activations (grows to the largest group) */
    size_t multi_work_bytes;
    void *mm_xq; /* a prefill's quantized matmul input (mm_quantize), grown on use */
    size_t mm_xq_bytes;
    sl_cpu_matvec_group *mm_grp; /* mm_rows' batches as groups */
    size_t mm_grp_cap;
    void *heads_work; /* mm_heads: gathered inputs, their quantized form, the products */
    size_t heads_work_bytes;
    sl__rope_cache rope;
} dx_host;

/* Each step counts (dx.h steps); on sim it first waits for the stream (drains). */
static sl_status drain(dx_host *h, sl_error *err)
{
    h->base.steps++;
    if (!h->dev) return SL_OK;
    h->base.drains++;
    return sl_device_stream_sync(h->dev, h->stream, err);
}

#define DRAIN(h)                                                                            \
    do {                                                                                    \
        sl_status drain_st_ = drain((h), err);                                              \
        if (drain_st_) return drain_st_;                                                    \
    } while (0)

/* One token through count matrices of the same input: one sl_cpu_matvec_multi call. */
static sl_status token_many(dx_host *h, const sl_weight *const *ws, int count, const float *in,
                            float *const *ys, sl_error *err)
{
    sl_cpu_matvec_part parts[SL_CPU_SPLIT_MAX_PARTS];
    const int64_t cols = ws[0]->ne[0];
    for (int i = 0; i < count; i++) {
        if (ws[i]->ne[0] != cols)
            return sl_error_set(err, SL_ERR_INVALID, "matmul group: '%s' has %lld columns, '%s' "
                                "%lld", ws[0]->name, (long long)cols, ws[i]->name,
                                (long long)ws[i]->ne[0]);
        parts[i] = (sl_cpu_matvec_part){.type = ws[i]->type, .w = ws[i]->data,
                                        .rows = ws[i]->ne[1], .y = ys[i]};
    }
    const size_t need = sl_cpu_matvec_multi_work_bytes(parts, count, cols);
    if (need > h->multi_work_bytes) { /* grows once per shape, not per token */
        void *p = realloc(h->multi_work, need);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "matmul group: out of memory (%zu bytes)",
                                    need);
        h->multi_work = p;
        h->multi_work_bytes = need;
    }
    sl_status st = sl_cpu_matvec_multi(&h->mv, h->pool, parts, count, cols, in, h->multi_work,
                                       h->multi_work_bytes, err);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "matmul with '%s'%s: %s", ws[0]->name,
                            count > 1 ? " and the rest of its group" : "", why);
    }
    return SL_OK;
}

/* A prefill's rows of in [n][cols] quantized once for `type` (NULL: its matvec takes float x,
 * f32_act mode included), for every 64-token batch of every matrix of that type that reads
 * them: sl_cpu_matvec would quantize each batch again, per matrix, in a pool call of its
 * own. The same bytes row by row (sl_cpu_matvec_quant_act_pool), so the same bits. */
static sl_status mm_quantize(dx_host *h, uint32_t type, const float *in, int64_t cols, int64_t n,
                             const void **xq, sl_error *err)
{
    *xq = NULL;
    const uint32_t act = sl_ref_matvec_act_type(type);
    if (h->mv.f32_act || act == SL_GGML_F32 || act == UINT32_MAX) return SL_OK;
    const size_t need = sl_cpu_matvec_work_bytes(type, cols, n);
    if (!need) return SL_OK; /* a bad shape: sl_cpu_matvec names it */
    if (need > h->mm_xq_bytes) {
        void *p = realloc(h->mm_xq, need);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "matmul: out of memory (%zu bytes)", need);
        h->mm_xq = p;
        h->mm_xq_bytes = need;
    }
    const sl_status st = sl_cpu_matvec_quant_act_pool(&h->mv, h->pool, type, in, cols, n,
                                                      h->mm_xq, need, err);
    if (!st) *xq = h->mm_xq;
    return st;
}

/* y = w in for n > 1 tokens in batches of MM_BATCH (xq: in quantized by mm_quantize, or NULL).
 * With threads to share and several batches, the batches are the groups of one grouped call
 * (sl_cpu_matvec_groups_q, each group's bits sl_cpu_matvec_q's): one handoff and one ragged
 * end per matrix, not one per batch. */
static sl_status mm_rows(dx_host *h, const sl_weight *w, const float *in, const void *xq,
                         int64_t n, float *y, sl_error *err)
{
    const int64_t cols = w->ne[0], rows = w->ne[1];
    const size_t arb = xq ? sl_cpu_matvec_work_bytes(w->type, cols, 1) : 0;
    int64_t b0 = 0; /* batches before b0 ran in the grouped call */
    if (xq && n > MM_BATCH && sl_cpu_pool_threads(h->pool) > 1) {
        const int64_t ng = (n - (n % MM_BATCH == 1)) / MM_BATCH + ((n % MM_BATCH) > 1);
        if ((size_t)ng > h->mm_grp_cap) {
            void *p = realloc(h->mm_grp, (size_t)ng * sizeof *h->mm_grp);
            if (!p) return sl_error_set(err, SL_ERR_NOMEM, "matmul: out of memory (groups)");
            h->mm_grp = p;
            h->mm_grp_cap = (size_t)ng;
        }
        for (int64_t g = 0; g < ng; g++, b0 += MM_BATCH)
            h->mm_grp[g] = (sl_cpu_matvec_group){
                .w = w->data, .xq = (const char *)xq + (size_t)b0 * arb,
                .n_batch = n - b0 < MM_BATCH ? n - b0 : MM_BATCH, .y = y + b0 * rows};
        b0 = b0 < n ? b0 : n;
        const sl_status st = sl_cpu_matvec_groups_q(&h->mv, h->pool, w->type, rows, cols,
                                                    h->mm_grp, ng, err);
        if (st) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "matmul with '%s': %s", w->name, why);
        }
    }
    for (int64_t b = b0; b < n; b += MM_BATCH) {
        const int64_t nb = n - b < MM_BATCH ? n - b : MM_BATCH;
        /* a lone last token keeps sl_cpu_matvec's decode path */
        sl_status st = xq && nb > 1
                           ? sl_cpu_matvec_q(&h->mv, h->pool, w->type, w->data, rows, cols,
                                             (const char *)xq + (size_t)b * arb, nb,
                                             y + b * rows, err)
                           : sl_cpu_matvec(&h->mv, h->pool, w->type, w->data, rows, cols,
                                           in + b * cols, nb, y + b * rows, h->work,
                                           h->work_bytes, err);
        if (st) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "matmul with '%s': %s", w->name, why);
        }
    }
    return SL_OK;
}

static sl_status h_mm(sl__dx *x, const sl_weight *w, const float *in, int64_t n, float *y,
                      sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    if (n == 1) return token_many(h, &w, 1, in, &y, err);
    const void *xq;
    sl_status st = mm_quantize(h, w->type, in, w->ne[0], n, &xq, err);
    return st ? st : mm_rows(h, w, in, xq, n, y, err);
}

static sl_status h_mm_many(sl__dx *x, const sl_weight *const *ws, int count, const float *in,
                           int64_t n, float *const *ys, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    if (n == 1) return token_many(h, ws, count, in, ys, err);
    const void *xq = NULL;
    for (int i = 0; i < count; i++) {
        DRAIN(h); /* a step per matrix, as h_mm per matrix counted */
        sl_status st = SL_OK;
        if (i == 0 || ws[i]->type != ws[i - 1]->type || ws[i]->ne[0] != ws[i - 1]->ne[0])
            st = mm_quantize(h, ws[i]->type, in, ws[i]->ne[0], n, &xq, err);
        if (!st) st = mm_rows(h, ws[i], in, xq, n, ys[i], err);
        if (st) return st;
    }
    return SL_OK;
}

/* Grows a workspace to `need` bytes (never shrinks: once per shape, not per token). */
static sl_status grow(void **p, size_t *cap, size_t need, const char *what, sl_error *err)
{
    if (need <= *cap) return SL_OK;
    void *q = realloc(*p, need);
    if (!q) return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory (%zu bytes)", what, need);
    *p = q;
    *cap = need;
    return SL_OK;
}

static size_t align64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

/* The heads are gathered to [H][n][cols], quantized per head and run as one grouped call
 * (sl_cpu_matvec_groups_q: one pool call; each group's bits are sl_cpu_matvec's, which are
 * every path's: kernels/cpu/matvec.h), then scattered. f32_act mode has no grouped call:
 * sl_cpu_matvec per head (the same bits as mm's). */
static sl_status h_mm_heads(sl__dx *x, const sl_weight *w, const float *src, int64_t src_ts,
                            int64_t src_hs, float *dst, int64_t dst_ts, int64_t dst_hs,
                            int64_t n, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const int64_t H = w->ne[2] > 0 ? w->ne[2] : 1, cols = w->ne[0], rows = w->ne[1];
    const size_t mat = (size_t)sl__weight_slice_bytes(w);
    const size_t qb = sl_cpu_matvec_work_bytes(w->type, cols, n);
    if (n < 1) return SL_OK;
    if (!qb || !mat)
        return sl_error_set(err, SL_ERR_INVALID, "per-head matmul '%s': type %u with %lld "
                            "columns", w->name, w->type, (long long)cols);
    const size_t xb = align64((size_t)(n * cols) * sizeof(float)),
                 yb = align64((size_t)(n * rows) * sizeof(float));
    const size_t gb = align64((size_t)H * sizeof(sl_cpu_matvec_group));
    sl_status st = grow(&h->heads_work, &h->heads_work_bytes,
                        gb + (size_t)H * (xb + align64(qb) + yb), "per-head matmul", err);
    if (st) return st;
    sl_cpu_matvec_group *grp = h->heads_work;
    uint8_t *base = (uint8_t *)h->heads_work + gb;
    float *xs = (float *)base, *ys = (float *)(base + (size_t)H * (xb + align64(qb)));
    uint8_t *xq = base + (size_t)H * xb;
    for (int64_t hd = 0; hd < H; hd++)
        for (int64_t t = 0; t < n; t++)
            memcpy(xs + (hd * n + t) * cols, src + t * src_ts + hd * src_hs,
                   (size_t)cols * sizeof *xs);
    const uint8_t *wd = w->data;
    if (h->mv.f32_act) {
        for (int64_t hd = 0; hd < H && !st; hd++)
            for (int64_t b = 0; b < n && !st; b += MM_BATCH) {
                const int64_t nb = n - b < MM_BATCH ? n - b : MM_BATCH;
                st = sl_cpu_matvec(&h->mv, h->pool, w->type, wd + (size_t)hd * mat, rows, cols,
                                   xs + (hd * n + b) * cols, nb, ys + (hd * n + b) * rows,
                                   h->work, h->work_bytes, err);
            }
    } else {
        for (int64_t hd = 0; hd < H && !st; hd++) {
            st = sl_cpu_matvec_quant_act(&h->mv, w->type, xs + hd * n * cols, cols, n,
                                         xq + (size_t)hd * align64(qb), qb, err);
            grp[hd] = (sl_cpu_matvec_group){.w = wd + (size_t)hd * mat,
                                            .xq = xq + (size_t)hd * align64(qb), .n_batch = n,
                                            .y = ys + hd * n * rows};
        }
        if (!st) st = sl_cpu_matvec_groups_q(&h->mv, h->pool, w->type, rows, cols, grp, H, err);
    }
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "per-head matmul with '%s': %s", w->name, why);
    }
    for (int64_t hd = 0; hd < H; hd++)
        for (int64_t t = 0; t < n; t++)
            memcpy(dst + t * dst_ts + hd * dst_hs, ys + (hd * n + t) * rows,
                   (size_t)rows * sizeof *dst);
    return SL_OK;
}

/* Per-token work of a prefill batch spread over the pool in runs of tokens: a token's result
 * depends on that token alone, so the bits are those of one loop. fn does tokens [t0, t1).
 * The first token runs alone on the calling thread, so argument errors come back with their
 * message; the rest cannot fail differently (same arguments), a failure is still reported. */
typedef sl_status (*tok_fn)(dx_host *h, const void *args, int64_t t0, int64_t t1,
                            sl_error *err);
typedef struct tok_job {
    dx_host *h;
    tok_fn fn;
    const void *args;
    atomic_int st; /* a worker's failure, 0: none */
} tok_job;

enum { TOK_GRAIN = 16 }; /* tokens per handout: short ops, few handoffs */

static void tok_chunk(void *ctx, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    tok_job *j = ctx;
    sl_error e;
    const sl_status st = j->fn(j->h, j->args, 1 + t0, 1 + t1, &e);
    if (st) atomic_store(&j->st, (int)st);
}

static sl_status tok_run(dx_host *h, tok_fn fn, const void *args, int64_t n, sl_error *err)
{
    if (n < 2 * TOK_GRAIN || sl_cpu_pool_threads(h->pool) < 2) return fn(h, args, 0, n, err);
    sl_status st = fn(h, args, 0, 1, err);
    if (st) return st;
    tok_job j = {.h = h, .fn = fn, .args = args};
    atomic_init(&j.st, 0);
    if ((st = sl_cpu_pool_parallel_for(h->pool, n - 1, TOK_GRAIN, tok_chunk, &j, err))) return st;
    st = (sl_status)atomic_load(&j.st);
    return st ? sl_error_set(err, st, "a per-token host op failed on a worker thread") : SL_OK;
}

typedef struct rms_args {
    const float *in, *w;
    float *y;
    int64_t dim;
    float eps;
} rms_args;

static sl_status rms_tokens(dx_host *h, const void *args, int64_t t0, int64_t t1, sl_error *err)
{
    const rms_args *a = args;
    for (int64_t t = t0; t < t1; t++) {
        sl_status st = sl_cpu_rms_norm(&h->ops, a->in + t * a->dim, a->w, a->y + t * a->dim,
                                       a->dim, a->eps, false, err);
        if (st) return st;
    }
    return SL_OK;
}

static sl_status h_rms_norm(sl__dx *x, const float *in, const float *w, float *y, int64_t rows,
                            int64_t dim, float eps, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const rms_args a = {.in = in, .w = w, .y = y, .dim = dim, .eps = eps};
    return tok_run(h, rms_tokens, &a, rows, err);
}

/* Elementwise ops over n floats go over the pool in pieces of ELT_PIECE floats, as tok_run's
 * "tokens" (the kernels are elementwise with masked tails: a float's bits do not depend on
 * the piece it is in); like the per-token stores and adds below, only from POOL_MIN_FLOATS
 * floats on (a pp512 batch's residual add, not a pp64 batch's: tens of us of streaming work
 * pay for a handoff, a few us do not, and an extra handoff costs most on a loaded machine). */
enum { ELT_PIECE = 1024, POOL_MIN_FLOATS = 1 << 17 };

/* tok_run for n tokens of `floats` floats of work in all, on the caller alone below
 * POOL_MIN_FLOATS. */
static sl_status tok_run_big(dx_host *h, tok_fn fn, const void *args, int64_t n, int64_t floats,
                             sl_error *err)
{
    return floats < POOL_MIN_FLOATS ? fn(h, args, 0, n, err) : tok_run(h, fn, args, n, err);
}

typedef struct elt_args {
    sl_moe_act act;
    const float *a, *b;
    float *y;
    int64_t n;
} elt_args;

static sl_status elt_pieces(dx_host *h, const void *args, int64_t p0, int64_t p1, sl_error *err)
{
    const elt_args *e = args;
    const int64_t i = p0 * ELT_PIECE, m = (p1 * ELT_PIECE < e->n ? p1 * ELT_PIECE : e->n) - i;
    float *g = e->y + i;
    const float *u = e->b + i;
    switch (e->act) {
    case SL_MOE_SILU: return sl_cpu_swiglu(&h->ops, g, u, g, m, err);
    case SL_MOE_RELU:
        for (int64_t j = 0; j < m; j++) g[j] = g[j] > 0 ? g[j] * u[j] : 0.0f;
        return SL_OK;
    case SL_MOE_SWIGLU_OAI:
        return sl_cpu_swiglu_oai(&h->ops, g, u, g, m, SL_OAI_ALPHA, SL_OAI_LIMIT, err);
    default: return sl_cpu_geglu(&h->ops, g, u, g, m, SL_GELU_TANH, err);
    }
}

static sl_status add_pieces(dx_host *h, const void *args, int64_t p0, int64_t p1, sl_error *err)
{
    const elt_args *e = args;
    const int64_t i = p0 * ELT_PIECE, m = (p1 * ELT_PIECE < e->n ? p1 * ELT_PIECE : e->n) - i;
    return sl_cpu_add(&h->ops, e->a + i, e->b + i, e->y + i, m, err);
}

static sl_status h_add(sl__dx *x, const float *a, const float *b, float *y, int64_t n,
                       sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const elt_args e = {.a = a, .b = b, .y = y, .n = n};
    return tok_run_big(h, add_pieces, &e, (n + ELT_PIECE - 1) / ELT_PIECE, n, err);
}

typedef struct rows_args {
    float *y;
    const float *b, *logit;
    int64_t dim;
} rows_args;

static sl_status add_rows_tokens(dx_host *h, const void *args, int64_t t0, int64_t t1,
                                 sl_error *err)
{
    (void)h;
    (void)err;
    const rows_args *a = args;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t j = 0; j < a->dim; j++) a->y[t * a->dim + j] += a->b[j];
    return SL_OK;
}

static sl_status h_add_rows(sl__dx *x, float *y, const float *b, int64_t rows, int64_t dim,
                            sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const rows_args a = {.y = y, .b = b, .dim = dim};
    return tok_run_big(h, add_rows_tokens, &a, rows, rows * dim, err);
}

static sl_status h_scale(sl__dx *x, float *v, int64_t n, float s, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    return sl_cpu_scale(&h->ops, v, n, s, err);
}

static sl_status h_glu(sl__dx *x, sl_moe_act act, float *g, const float *u, int64_t n,
                       sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const elt_args e = {.act = act, .b = u, .y = g, .n = n};
    return tok_run_big(h, elt_pieces, &e, (n + ELT_PIECE - 1) / ELT_PIECE, n, err);
}

/* Why it is exact: a neuron no token activates (gate <= 0) has relu(g) * u == 0 whatever u
 * is, so its up row need not be computed (u is zeroed, then the row-listed matvec writes the
 * listed rows with the same bits as the full one: rows are never split) and its column of
 * down multiplies zeros: the column-listed matvec quantizes the same activations and skips only
 * quantization blocks without a listed column, whose activations are all zero and add exactly
 * nothing to the block lanes. So the logits equal the dense FFN's bit for bit. Up's saving is
 * per neuron; down's only per block of its type (32 or 256 neurons all inactive; none for
 * float types). A transposed down (row j = column j, PowerInfer's ffn_down_t) would skip per
 * neuron, but it sums in another order (not these bits) and needs down requantized along the
 * other axis for block types; an F16 trial was not faster on 2 shared cores (issue 11). */
static sl_status relu_chunk(dx_host *h, const sl_weight *wg, const sl_weight *wu,
                            const sl_weight *wd, const float *x, int64_t n, float *g, float *u,
                            float *y, uint64_t cnt[3], sl_error *err)
{
    const int64_t E = wg->ne[0], F = wg->ne[1], O = wd->ne[1];
    sl_status st = sl_cpu_matvec(&h->mv, h->pool, wg->type, wg->data, F, E, x, n, g, h->work,
                                 h->work_bytes, err);
    if (st) return st;
    int64_t n_idx = 0;
    for (int64_t j = 0; j < F; j++) {
        bool on = false;
        for (int64_t t = 0; t < n; t++) {
            on |= g[t * F + j] > 0;
            cnt[1] += !(g[t * F + j] > 0);
        }
        if (on) h->idx[n_idx++] = (int32_t)j;
    }
    cnt[0] += (uint64_t)(n * F);
    cnt[2] += (uint64_t)(n * (F - n_idx));
    memset(u, 0, (size_t)(n * F) * sizeof *u);
    memset(y, 0, (size_t)(n * O) * sizeof *y);
    if (!n_idx) return SL_OK;
    if ((st = sl_cpu_matvec_quant_act(&h->mv, wu->type, x, E, n, h->work, h->work_bytes, err)) ||
        (st = sl_cpu_matvec_rows_q(&h->mv, h->pool, wu->type, wu->data, F, E, h->idx, n_idx,
                                   true, h->work, n, u, err)))
        return st;
    for (int64_t i = 0; i < n * F; i++) g[i] = g[i] > 0 ? g[i] * u[i] : 0.0f;
    /* down's blocks with no listed neuron; none, or a float down (blocks of one neuron, whose
     * listed columns still touch every cache line while the column-listed kernel masks element
     * by element: 10-12x the plain matvec's decode time on F16): the plain matvec (same bits,
     * no masking) */
    const sl_gguf_type_info *ti = sl_gguf_type_get(sl_repack_base_type(wd->type));
    const int64_t G = ti && ti->block_size ? (int64_t)ti->block_size : 1;
    int64_t skip = 0, last = -1;
    for (int64_t i = 0; i < n_idx; i++) {
        const int64_t b = h->idx[i] / G;
        skip += b - last - 1;
        last = b;
    }
    skip += F / G - last - 1;
    if (!skip || G == 1)
        return sl_cpu_matvec(&h->mv, h->pool, wd->type, wd->data, O, F, g, n, y, h->work,
                             h->work_bytes, err);
    return sl_cpu_matvec_cols(&h->mv, h->pool, wd->type, wd->data, O, F, h->idx, n_idx, g, n,
                              y, h->cols_work, h->cols_work_bytes, err);
}

static sl_status h_relu_ffn(sl__dx *x, const sl_weight *wg, const sl_weight *wu,
                            const sl_weight *wd, const float *in, int64_t n, float *g, float *u,
                            float *y, uint64_t cnt[3], sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const int64_t E = wg->ne[0], F = wg->ne[1], O = wd->ne[1];
    if (wu->ne[0] != E || wu->ne[1] != F || wd->ne[0] != F)
        return sl_error_set(err, SL_ERR_INVALID, "relu ffn: shapes of '%s', '%s', '%s' differ",
                            wg->name, wu->name, wd->name);
    const int64_t nb_max = n < MM_BATCH ? n : MM_BATCH;
    const size_t cwb = sl_cpu_matvec_cols_work_bytes(wd->type, F, nb_max);
    if (F > h->idx_cap) {
        int32_t *p = realloc(h->idx, (size_t)F * sizeof *p);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "relu ffn: out of memory");
        h->idx = p, h->idx_cap = F;
    }
    if (cwb > h->cols_work_bytes) {
        void *p = realloc(h->cols_work, cwb);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "relu ffn: out of memory (%zu bytes)", cwb);
        h->cols_work = p, h->cols_work_bytes = cwb;
    }
    for (int64_t b = 0; b < n; b += MM_BATCH) {
        const int64_t nb = n - b < MM_BATCH ? n - b : MM_BATCH;
        sl_status st = relu_chunk(h, wg, wu, wd, in + b * E, nb, g + b * F, u + b * F,
                                  y + b * O, cnt, err);
        if (st) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "relu ffn '%s': %s", wd->name, why);
        }
    }
    return SL_OK;
}

typedef struct rope_args {
    float *v;
    int32_t n_head, head_dim;
    const sl_rope_params *p;
    const float *cs; /* the tables of the n_tok positions */
} rope_args;

static sl_status rope_tokens(dx_host *h, const void *args, int64_t t0, int64_t t1, sl_error *err)
{
    const rope_args *a = args;
    return sl_cpu_rope_apply(&h->ops, a->v + t0 * a->n_head * a->head_dim, t1 - t0, a->n_head,
                             a->head_dim, a->p, a->cs + t0 * 2 * a->p->n_rot, err);
}

static sl_status h_rope(sl__dx *x, float *v, int64_t n_tok, int32_t n_head, int32_t head_dim,
                        const int32_t *pos, const sl_rope_params *p, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    if (n_tok < 1) return sl_cpu_rope_apply(&h->ops, v, n_tok, n_head, head_dim, p, NULL, err);
    /* the angles (pow, cos and sin in double) once per position and rope configuration: q and
     * k of every layer with the same configuration reuse them */
    rope_args a = {.v = v, .n_head = n_head, .head_dim = head_dim, .p = p};
    sl_status st = sl__rope_cache_get(&h->rope, p, pos, n_tok, &a.cs, err);
    if (st) return st;
    return tok_run(h, rope_tokens, &a, n_tok, err);
}

/* F16 entries are rounded to nearest even from the F32 projections (ggml's cpy to an F16
 * cache does the same). */
typedef struct kv_args {
    uint8_t *cb;
    bool f16;
    int64_t row;
    const int32_t *pos;
    const float *src;
} kv_args;

static sl_status kv_tokens(dx_host *h, const void *args, int64_t t0, int64_t t1, sl_error *err)
{
    const kv_args *a = args;
    const int64_t row = a->row;
    for (int64_t t = t0; t < t1; t++) {
        const float *s = a->src + t * row;
        if (!a->f16) {
            memcpy(a->cb + (size_t)a->pos[t] * (size_t)row * 4, s, (size_t)row * 4);
        } else {
            sl_status st = sl_cpu_to_f16(&h->ops, s,
                                         (uint16_t *)(a->cb + (size_t)a->pos[t] * (size_t)row * 2),
                                         row, err);
            if (st) return st;
        }
    }
    return SL_OK;
}

static sl_status h_kv_store(sl__dx *x, void *cache, bool f16, int64_t row, const int32_t *pos,
                            int64_t n, const float *src, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const kv_args a = {.cb = cache, .f16 = f16, .row = row, .pos = pos, .src = src};
    return tok_run_big(h, kv_tokens, &a, n, n * row, err);
}

typedef struct attn_job {
    dx_host *h;
    const float *q;
    const void *kc, *vc;
    sl_attn_params p;
    const int32_t *pos;
    float *out;
    int64_t n;
    sl_status st;
} attn_job;

static void attn_tiles(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    sl_error e;
    sl_status st = sl_cpu_attn_prefill(&j->h->ops, j->q, j->kc, j->vc, &j->p, j->pos, j->n,
                                       begin, end, j->out, &e);
    if (st) j->st = st; /* cannot fail on validated params; recorded anyway */
}

/* The tiled kernel for a prompt and for one token alike: a row's bits do not depend on its
 * tile, so a prompt's logits equal token-by-token decoding's and any chunking's. Its tiles (a
 * kv head's queries in groups that share each K/V row read) go over the pool. */
static sl_status h_attn(sl__dx *x, const float *q, const void *kc, const void *vc,
                        const sl_attn_params *p, const int32_t *pos, int64_t n, float *out,
                        sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    attn_job j = {.h = h, .q = q, .kc = kc, .vc = vc, .p = *p, .pos = pos, .out = out, .n = n};
    j.p.n_pos = 0; /* the tiles' bound: the largest position attended */
    for (int64_t t = 0; t < n; t++)
        if (pos[t] + 1 > j.p.n_pos) j.p.n_pos = pos[t] + 1;
    sl_status st = sl_ref_attn_validate(&j.p, err);
    if (st) return st;
    const int64_t tiles = sl_cpu_attn_prefill_tiles(&h->ops, &j.p, n);
    st = sl_cpu_pool_parallel_for(tiles > 1 ? h->pool : NULL, tiles, 1, attn_tiles, &j, err);
    if (st) return st;
    if (j.st) return sl_error_set(err, j.st, "attention kernel failed");
    return SL_OK;
}

static sl_status h_router(sl__dx *x, const float *logits, int64_t n, const sl_router_params *p,
                          int32_t *idx, float *w, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    return sl_cpu_router_topk(n > 1 ? h->pool : NULL, logits, n, p, idx, w, err);
}

static sl_status grow_assign(dx_host *h, int64_t n, sl_error *err)
{
    if (n <= h->assign_cap) return SL_OK;
    sl_moe_assign *a = realloc(h->assign, (size_t)n * sizeof *a);
    if (!a) return sl_error_set(err, SL_ERR_NOMEM, "moe: out of memory (assignments)");
    h->assign = a;
    h->assign_cap = n;
    return SL_OK;
}

/* res += out through the add step's code, counted in the step that called it (moe's or
 * moe_join's residual: the bits of the add that would follow) */
static sl_status add_res(sl__dx *x, const float *out, float *res, int64_t n, sl_error *err)
{
    const uint64_t steps = x->steps;
    const sl_status st = x->vt->add(x, res, out, res, n, err);
    x->steps = steps;
    return st;
}

static sl_status h_moe(sl__dx *x, const sl__dx_moe *L, const int32_t *idx, const float *w,
                       int64_t n, int32_t k, const float *in, float *out, float *res,
                       sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    sl_status st = grow_assign(h, n * k, err);
    if (st) return st;
    for (int64_t t = 0; t < n; t++)
        for (int32_t i = 0; i < k; i++)
            h->assign[t * k + i] = (sl_moe_assign){(int32_t)t, idx[t * k + i], w[t * k + i]};
    st = sl_moe_exec(h->moe, L->L, h->assign, n * k, in, n, out, err);
    return st || !res ? st : add_res(x, out, res, n * L->L->n_embd, err);
}

static sl_status h_moe_rows(sl__dx *x, const sl__dx_moe *L, const uint8_t *mask,
                            const int32_t *idx, int64_t n, int32_t k, const float *in,
                            float *rows, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const sl_status st = grow_assign(h, n * k, err);
    return st ? st : sl_moe_exec_slots(L->rows, L->L, mask, true, idx, n, k, in, rows,
                                       h->assign, err);
}

static sl_status h_moe_join(sl__dx *x, const float *ra, const float *rb, const int32_t *idx,
                            const float *w, int64_t n, int32_t k, int64_t dim, float *out,
                            float *res, sl_error *err)
{
    DRAIN((dx_host *)x);
    if (k < 1 || k > SL_MOE_JOIN_MAX_K)
        return sl_error_set(err, SL_ERR_INVALID, "moe join: k %d outside [1, %d]", k,
                            (int)SL_MOE_JOIN_MAX_K);
    sl_moe_rows_join(ra, rb, idx, w, n, k, dim, out);
    return res ? add_res(x, out, res, n * dim, err) : SL_OK;
}

static sl_status gated_add_tokens(dx_host *h, const void *args, int64_t t0, int64_t t1,
                                  sl_error *err)
{
    (void)h;
    (void)err;
    const rows_args *a = args;
    for (int64_t t = t0; t < t1; t++) {
        const float gate = 1.0f / (1.0f + expf(-a->logit[t]));
        for (int64_t j = 0; j < a->dim; j++) a->y[t * a->dim + j] += gate * a->b[t * a->dim + j];
    }
    return SL_OK;
}

static sl_status h_gated_add(sl__dx *x, float *out, const float *y, const float *logit,
                             int64_t n, int64_t dim, sl_error *err)
{
    dx_host *h = (dx_host *)x;
    DRAIN(h);
    const rows_args a = {.y = out, .b = y, .logit = logit, .dim = dim};
    return tok_run_big(h, gated_add_tokens, &a, n, n * dim, err);
}

static sl_status h_argmax(sl__dx *x, const float *in, int64_t n, sl_argmax_result *r,
                          sl_error *err)
{
    DRAIN((dx_host *)x);
    return sl_ref_argmax(in, n, r, err);
}

static void h_destroy(sl__dx *x)
{
    dx_host *h = (dx_host *)x;
    free(h->work);
    free(h->assign);
    free(h->idx);
    free(h->cols_work);
    free(h->multi_work);
    free(h->heads_work);
    free(h->mm_xq);
    free(h->mm_grp);
    sl__rope_cache_free(&h->rope);
    free(h);
}

static sl_status h_copy2d(sl__dx *x, float *dst, int64_t dst_stride, const float *src,
                          int64_t src_stride, int64_t rows, int64_t width, sl_error *err)
{
    DRAIN((dx_host *)x);
    for (int64_t r = 0; r < rows; r++)
        memmove(dst + r * dst_stride, src + r * src_stride, (size_t)width * sizeof *dst);
    return SL_OK;
}

/* host and sim differ only in `dev` (drain() is a no-op without it) */
static const sl__dx_vt host_vt = {
    .mm = h_mm, .mm_many = h_mm_many, .rms_norm = h_rms_norm, .add = h_add,
    .add_rows = h_add_rows, .scale = h_scale,
    .glu = h_glu, .rope = h_rope, .kv_store = h_kv_store, .attn = h_attn, .router = h_router,
    .moe = h_moe, .moe_rows = h_moe_rows, .moe_join = h_moe_join, .gated_add = h_gated_add,
    .copy2d = h_copy2d, .mm_heads = h_mm_heads,
    .argmax = h_argmax,
    .relu_ffn = h_relu_ffn, .norm_mm = sl__dx_fused_norm_mm,
    .qk_rope_store = sl__dx_fused_qk_rope_store, .mm_add_norm = sl__dx_fused_mm_add_norm,
    .mm_router = sl__dx_fused_mm_router, .mm_glu = sl__dx_fused_mm_glu,
    .destroy = h_destroy};

static sl_status create(sl_device *dev, sl_stream *stream,
                        const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                        sl_moe_sched *moe, size_t work_bytes, sl__dx **out, sl_error *err)
{
    *out = NULL;
    dx_host *h = calloc(1, sizeof *h);
    if (!h) return sl_error_set(err, SL_ERR_NOMEM, "executor: out of memory");
    h->base.vt = &host_vt;
    h->base.sparse_ffn = !mv->f32_act;
    h->ops = *ops;
    h->mv = *mv;
    h->pool = pool;
    h->moe = moe;
    h->dev = dev;
    h->stream = stream;
    h->work_bytes = work_bytes ? work_bytes : 1;
    h->work = malloc(h->work_bytes);
    if (!h->work) {
        free(h);
        return sl_error_set(err, SL_ERR_NOMEM, "executor: out of memory (%zu bytes of matvec "
                            "workspace)", work_bytes);
    }
    *out = &h->base;
    return SL_OK;
}

sl_status sl__dx_host_create(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                             sl_cpu_pool *pool, sl_moe_sched *moe, size_t work_bytes,
                             sl__dx **out, sl_error *err)
{
    return create(NULL, NULL, ops, mv, pool, moe, work_bytes, out, err);
}

sl_status sl__dx_sim_create(sl_device *dev, sl_stream *stream, const sl_cpu_ops *ops,
                            const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, sl_moe_sched *moe,
                            size_t work_bytes, sl__dx **out, sl_error *err)
{
    if (!dev || !stream)
        return sl_error_set(err, SL_ERR_INVALID, "sim executor: NULL device or stream");
    return create(dev, stream, ops, mv, pool, moe, work_bytes, out, err);
}

void sl__dx_destroy(sl__dx *x)
{
    if (x) x->vt->destroy(x);
}
