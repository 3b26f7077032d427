/* scheduler/moe/moe_cpu.c: the CPU MoE scheduler — group tokens by expert, one small-batch matvec
 * per expert and projection; in a batch, every expert's gate and up in one pool call and
 * every down in another (run_slab), so threads stay busy across groups of very different
 * sizes and quantizes each token once. A slab's pool calls: the gather of its rows, gate/up,
 * activation + quantization, down, the join (a fixed few per slab, not per expert; only the
 * sort and the grouping run on the caller alone).
 *
 * Why grouping: an expert's weights are read from memory once per group of tokens (up to
 * SL__MOE_CHUNK rows per matvec call) instead of once per token, which is what makes prefill
 * of a MoE layer cost about (distinct experts) weight reads instead of (tokens * k).
 * The FFN itself is scheduler/moe/expert_ffn.h's, shared with the fetching scheduler.
 *
 * Order and invariance: assignments are bucketed by expert with a stable counting sort; the
 * experts are run in ascending index and each result row is added into out[token] at once, so
 * one token's outputs are summed in ascending expert order whatever the batch. The matvec
 * kernels give each batch column the bits of a lone call, so a token's result does not depend
 * on the other tokens in its group.
 *
 * Scratch (grown on demand, never shrunk): X, D [CHUNK][n_embd]; G, U [CHUNK][n_ff];
 * the activation workspace; the sort arrays [n_assign]; the grouped path's (ensure_groups:
 * per slab, and the join's token buckets [n_assign], [n_tok + 1], [n_tok]).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "scheduler/moe/expert_ffn.h"
#include "scheduler/moe/moe_impl.h"
#include "scheduler/weights.h"

enum { SL__MOE_CHUNK = 64 };
/* Assignments per slab of the grouped path (bounds its scratch: a 128-token top-8 batch is
 * one slab). */
enum { SL__MOE_SLAB = 1024 };
/* A lone token with at most this many assignments takes run_token (top-4 models; gate and up
 * of each expert are two parts of one multi call). */
enum { SL__MOE_TOKEN_MAX = SL_CPU_SPLIT_MAX_PARTS / 2 };

typedef struct moe_cpu {
    sl_moe_sched base;      /* must be first */
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_cpu_pool *pool;
    float *x, *g, *u, *d;
    size_t x_cap, f_cap;    /* floats per buffer: CHUNK * n_embd, CHUNK * n_ff */
    void *work;
    size_t work_cap;
    int32_t *order, *count;
    size_t order_cap, count_cap;
    /* grouped path (slabs of SL__MOE_SLAB assignments): the tokens' quantized x, its rows
     * gathered per assignment, G, U [SLAB][n_ff], G quantized, D [SLAB][n_embd], the groups */
    char *tq, *xq, *gq;
    float *sg, *su, *sd;
    size_t tq_cap, xq_cap, gq_cap, sg_cap, su_cap, sd_cap;
    int32_t *gexp;
    int64_t *gm;
    sl_cpu_matvec_group *grp;
    size_t gexp_cap, gm_cap, grp_cap;
    /* the join's token buckets: tpos[tbeg[t], tbeg[t + 1]) = the sorted positions (indices
     * into order) of token t's assignments, ascending; tcur[t] = the first not yet joined */
    int32_t *tpos, *tbeg, *tcur;
    size_t tpos_cap, tbeg_cap, tcur_cap;
    float *rows; /* cpu_rows: results go to rows[assignment], not summed into out */
} moe_cpu;

static sl_status grow(void **p, size_t *cap, size_t need, size_t elt, sl_error *err)
{
    if (need <= *cap) return SL_OK;
    void *n = realloc(*p, need * elt);
    if (!n) return sl_error_set(err, SL_ERR_NOMEM, "moe cpu: out of memory (%zu bytes of scratch)",
                                need * elt);
    *p = n;
    *cap = need;
    return SL_OK;
}

static sl_status ensure(moe_cpu *c, const sl_moe_layer *L, int64_t n_assign, sl_error *err)
{
    sl_status st;
    const size_t xe = (size_t)SL__MOE_CHUNK * (size_t)L->n_embd;
    const size_t fe = (size_t)SL__MOE_CHUNK * (size_t)L->n_ff;
    if (xe > c->x_cap) {
        size_t cap = c->x_cap;
        if ((st = grow((void **)&c->x, &cap, xe, sizeof(float), err))) return st;
        cap = c->x_cap;
        if ((st = grow((void **)&c->d, &cap, xe, sizeof(float), err))) return st;
        c->x_cap = xe;
    }
    if (fe > c->f_cap) {
        size_t cap = c->f_cap;
        if ((st = grow((void **)&c->g, &cap, fe, sizeof(float), err))) return st;
        cap = c->f_cap;
        if ((st = grow((void **)&c->u, &cap, fe, sizeof(float), err))) return st;
        c->f_cap = fe;
    }
    const size_t wb = sl__expert_work_bytes(L, SL__MOE_CHUNK);
    if (!wb)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "moe layer %d: expert weight types %u/%u/%u have no CPU matvec",
                            L->layer, L->type_gate, L->type_up, L->type_down);
    if ((st = grow(&c->work, &c->work_cap, wb, 1, err))) return st;
    if ((st = grow((void **)&c->order, &c->order_cap, (size_t)n_assign + 1, sizeof(int32_t), err)))
        return st;
    return grow((void **)&c->count, &c->count_cap, (size_t)L->n_expert + 1, sizeof(int32_t), err);
}

/* out[:] += w * d[:] over E elements: the one place an expert's result joins a token's. A
 * product and a sum, each rounded (never contracted to an FMA), so every ISA gives the bits. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
static void add_weighted(float *out, float w, const float *d, int64_t E)
{
    for (int64_t j = 0; j < E; j++) out[j] += w * d[j];
}

#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx512f"))) static void add_weighted_avx512(float *out, float w,
                                                                   const float *d, int64_t E)
{
    for (int64_t j = 0; j < E; j++) out[j] += w * d[j];
}
#endif

/* A slab's results d [s1 - s0][E] (assignment order[i] in row i - s0) joining out: tokens
 * split over the pool, each token's rows of the slab taken from its bucket (tpos, ascending
 * sorted positions from tcur[t] on), so a token's sum keeps the ascending-expert order of the
 * serial join. The first slab zeroes every token's row first (out starts at +0.0f, as the
 * serial join's memset: the same bits, on the threads instead of the caller alone). */
typedef struct join_job {
    float *out;
    const sl_moe_assign *a;
    const int32_t *order, *tpos, *tbeg;
    int32_t *tcur;
    const float *d;
    int64_t s0, s1, E;
    bool avx512;
} join_job;

static void join_tokens(void *ctx, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const join_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        float *o = j->out + t * j->E;
        if (j->s0 == 0) memset(o, 0, (size_t)j->E * sizeof *o);
        int32_t k = j->tcur[t];
        for (; k < j->tbeg[t + 1] && j->tpos[k] < j->s1; k++) {
            const int64_t i = j->tpos[k];
            const float w = j->a[j->order[i]].weight, *d = j->d + (i - j->s0) * j->E;
#if defined(__x86_64__) && defined(__clang__)
            if (j->avx512) {
                add_weighted_avx512(o, w, d, j->E);
                continue;
            }
#endif
            add_weighted(o, w, d, j->E);
        }
        j->tcur[t] = k;
    }
}

/* Assignment i's result d joins token t's row of out, or (cpu_rows) is kept as row i. */
static void join(const moe_cpu *c, float *out, const sl_moe_assign *a, int64_t i,
                 const float *d, int64_t E)
{
    if (c->rows) memcpy(c->rows + i * E, d, (size_t)E * sizeof *d);
    else add_weighted(out + (int64_t)a[i].token * E, a[i].weight, d, E);
}

/* Runs expert e over the m assignments idx[0..m) (m <= CHUNK) and adds into out. */
static sl_status run_group(moe_cpu *c, const sl_moe_layer *L, int32_t e, const sl_moe_assign *a,
                           const int32_t *idx, int64_t m, const float *x, float *out,
                           sl_error *err)
{
    const int64_t E = L->n_embd;
    for (int64_t i = 0; i < m; i++)
        memcpy(c->x + i * E, x + (int64_t)a[idx[i]].token * E, (size_t)E * sizeof(float));
    sl_status st = sl__expert_gate_up(&c->ops, &c->mv, c->pool, L, e, L->gate[e], L->up[e], c->x,
                                      m, c->g, c->u, c->work, c->work_cap, err);
    const sl_moe_sched *b = &c->base;
    if (!st && b->nstats && !L->ff_at && L->layer >= 0 && L->layer < b->nstats_layers &&
        e < b->nstats_experts) {
        sl_neuron_stats *ns = &b->nstats[(int64_t)L->layer * b->nstats_experts + e];
        if (ns->n_neuron == L->n_ff) sl_neuron_stats_add(ns, c->g, m);
    }
    if (!st) st = sl__expert_down(&c->mv, c->pool, L, e, L->down[e], c->g, m, c->d, c->work,
                                  c->work_cap, err);
    if (st) return st;
    for (int64_t i = 0; i < m; i++) join(c, out, a, idx[i], c->d + i * E, E);
    return SL_OK;
}

/* A single token's k assignments, in ascending expert order (order[0..k)): the gate/up
 * stage of all k experts in one pool call (they read the same x), the k downs in another,
 * then the weighted adds in that order — the bits of run_group per expert, fewer handoffs.
 * d holds the k results (k <= SL__MOE_TOKEN_MAX <= SL__MOE_CHUNK rows). */
static sl_status run_token(moe_cpu *c, const sl_moe_layer *L, const sl_moe_assign *a,
                           const int32_t *order, int k, const float *x, float *out,
                           sl_error *err)
{
    const int64_t E = L->n_embd;
    int32_t experts[SL__MOE_TOKEN_MAX];
    for (int i = 0; i < k; i++) experts[i] = a[order[i]].expert;
    sl_status st = sl__expert_gate_up_token(&c->ops, &c->mv, c->pool, L, experts, k, x, c->g,
                                            c->u, c->work, c->work_cap, err);
    if (!st) st = sl__expert_down_token(&c->mv, c->pool, L, experts, k, c->g, c->d, c->work,
                                        c->work_cap, err);
    for (int i = 0; !st && i < k; i++) join(c, out, a, order[i], c->d + i * E, E);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "kernel failed");
        return sl_error_set(err, st, "moe layer %d (one token, %d experts): %s", L->layer, k,
                            why);
    }
    return SL_OK;
}

/* The grouped path's scratch for n_tok tokens and n_assign assignments (grown on demand, never
 * shrunk). */
static sl_status ensure_groups(moe_cpu *c, const sl_moe_layer *L, int64_t n_tok,
                               int64_t n_assign, sl_error *err)
{
    const size_t S = SL__MOE_SLAB, E = (size_t)L->n_embd, F = (size_t)L->n_ff;
    const size_t ax = sl_cpu_matvec_work_bytes(L->type_gate, L->n_embd, 1);
    const size_t ag = sl_cpu_matvec_work_bytes(L->type_down, L->n_ff, 1);
    if (!ax || !ag)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "moe layer %d: expert weight types %u/%u "
                            "have no CPU matvec", L->layer, L->type_gate, L->type_down);
    sl_status st;
    if ((st = grow((void **)&c->tq, &c->tq_cap, (size_t)n_tok * ax, 1, err))) return st;
    if ((st = grow((void **)&c->xq, &c->xq_cap, S * ax, 1, err))) return st;
    if ((st = grow((void **)&c->gq, &c->gq_cap, S * ag, 1, err))) return st;
    if ((st = grow((void **)&c->sg, &c->sg_cap, S * F, sizeof(float), err))) return st;
    if ((st = grow((void **)&c->su, &c->su_cap, S * F, sizeof(float), err))) return st;
    if ((st = grow((void **)&c->sd, &c->sd_cap, S * E, sizeof(float), err))) return st;
    if ((st = grow((void **)&c->gexp, &c->gexp_cap, S, sizeof(int32_t), err))) return st;
    if ((st = grow((void **)&c->gm, &c->gm_cap, S, sizeof(int64_t), err))) return st;
    if ((st = grow((void **)&c->tpos, &c->tpos_cap, (size_t)n_assign, sizeof(int32_t), err)) ||
        (st = grow((void **)&c->tbeg, &c->tbeg_cap, (size_t)n_tok + 1, sizeof(int32_t), err)) ||
        (st = grow((void **)&c->tcur, &c->tcur_cap, (size_t)n_tok, sizeof(int32_t), err)))
        return st;
    return grow((void **)&c->grp, &c->grp_cap, 2 * S, sizeof(sl_cpu_matvec_group), err);
}

/* The slab's rows of x: row i of xq = the quantized row of assignment order[i]'s token. */
typedef struct gather_job {
    char *xq;
    const char *tq;
    const sl_moe_assign *a;
    const int32_t *order;
    size_t ax;
} gather_job;

static void gather_rows(void *ctx, int64_t i0, int64_t i1, int thread)
{
    (void)thread;
    const gather_job *j = ctx;
    for (int64_t i = i0; i < i1; i++)
        memcpy(j->xq + (size_t)i * j->ax, j->tq + (size_t)j->a[j->order[i]].token * j->ax, j->ax);
}

/* Sorted assignments order[s0, s1) (at most SLAB) as groups of equal experts, every group's
 * gate/up in one pool call and every down in another; results join out[] in sorted order, as
 * run_group's do, so the bits are run_group's chunk by chunk (matvec.h: a batch column's bits
 * do not depend on the batch). tq: the n_tok tokens' x quantized for type_gate. */
static sl_status run_slab(moe_cpu *c, const sl_moe_layer *L, const sl_moe_assign *a,
                          const int32_t *order, int64_t s0, int64_t s1, int64_t n_tok,
                          float *out, sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff, M = s1 - s0;
    const size_t ax = sl_cpu_matvec_work_bytes(L->type_gate, E, 1);
    int64_t n = 0;
    for (int64_t i = s0; i < s1; i++) {
        const int32_t e = a[order[i]].expert;
        if (!n || c->gexp[n - 1] != e) {
            c->gexp[n] = e;
            c->gm[n++] = 0;
        }
        c->gm[n - 1]++;
    }
    const gather_job gj = {.xq = c->xq, .tq = c->tq, .a = a, .order = order + s0, .ax = ax};
    /* chunks of >= 32 rows (a few us of copies), several a thread: a short ragged end */
    const int64_t gparts = 8 * (int64_t)sl_cpu_pool_threads(c->pool);
    sl_status st = sl_cpu_pool_parallel_for(c->pool, M, M / gparts > 32 ? M / gparts : 32,
                                            gather_rows, (void *)&gj, err);
    if (!st) st = sl__expert_gate_up_groups(&c->mv, c->pool, L, c->gexp, c->gm, n, c->xq,
                                            c->sg, c->su, c->grp, err);
    if (!st) st = sl__expert_down_groups(&c->ops, &c->mv, c->pool, L, c->gexp, c->gm, n, c->sg,
                                         c->su, c->gq, c->gq_cap, c->sd, c->grp, err);
    const sl_moe_sched *b = &c->base;
    int64_t off = 0; /* sg holds the activations (the down stage applied them in place) */
    for (int64_t i = 0; !st && b->nstats && i < n; off += c->gm[i++]) {
        const int32_t e = c->gexp[i];
        if (L->layer < 0 || L->layer >= b->nstats_layers || e >= b->nstats_experts) continue;
        sl_neuron_stats *ns = &b->nstats[(int64_t)L->layer * b->nstats_experts + e];
        if (ns->n_neuron == F) sl_neuron_stats_add(ns, c->sg + off * F, c->gm[i]);
    }
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "kernel failed");
        return sl_error_set(err, st, "moe layer %d (%lld assignments of %lld experts): %s",
                            L->layer, (long long)M, (long long)n, why);
    }
    if (c->rows) {
        for (int64_t i = 0; i < M; i++) join(c, out, a, order[s0 + i], c->sd + i * E, E);
        return SL_OK;
    }
    const join_job jj = {.out = out, .a = a, .order = order, .tpos = c->tpos, .tbeg = c->tbeg,
                         .tcur = c->tcur, .d = c->sd, .s0 = s0, .s1 = s1, .E = E,
                         .avx512 = c->ops.isa == SL_CPU_ISA_AVX512};
    /* a token's rows cost the same whoever walks them (its bucket): fine chunks, a short
     * ragged end */
    const int64_t parts = 8 * (int64_t)sl_cpu_pool_threads(c->pool);
    return sl_cpu_pool_parallel_for(c->pool, n_tok, (n_tok + parts - 1) / parts, join_tokens,
                                    (void *)&jj, err);
}

/* The call, its results joined by join(): summed into out (c->rows NULL), or kept per
 * assignment. */
static sl_status cpu_run(moe_cpu *c, const sl_moe_layer *L, const sl_moe_assign *a,
                         int64_t n_assign, const float *x, int64_t n_tok, float *out,
                         sl_error *err)
{
    sl_moe_sched *s = &c->base;
    if (!n_assign) {
        if (out) memset(out, 0, (size_t)n_tok * (size_t)L->n_embd * sizeof(float));
        return SL_OK;
    }
    sl_status st = ensure(c, L, n_assign, err);
    if (st) return st;
    /* stable counting sort of assignment indices by expert */
    int32_t *cnt = c->count;
    memset(cnt, 0, ((size_t)L->n_expert + 1) * sizeof *cnt);
    for (int64_t i = 0; i < n_assign; i++) cnt[a[i].expert + 1]++;
    for (int32_t e = 0; e < L->n_expert; e++) /* what the call reads: each used expert once */
        if (cnt[e + 1]) {
            const int64_t F = sl_moe_expert_ff(L, e);
            s->stats.cpu_bytes += (uint64_t)F * (sl__type_row_bytes(L->type_gate, L->n_embd) +
                                                 sl__type_row_bytes(L->type_up, L->n_embd)) +
                                  (uint64_t)L->n_embd * sl__type_row_bytes(L->type_down, F);
        }
    for (int32_t e = 0; e < L->n_expert; e++) cnt[e + 1] += cnt[e];
    for (int64_t i = 0; i < n_assign; i++) c->order[cnt[a[i].expert]++] = (int32_t)i;
    /* cnt[e] is now the end of expert e's bucket, cnt[e-1] its start */
    /* experts of one width (not a hot/cold part), gate and up sharing their activations */
    const bool grouped = L->type_gate == L->type_up && !c->mv.f32_act && !L->ff_at;
    const bool one_token = n_tok == 1 && n_assign <= SL__MOE_TOKEN_MAX;
    /* out starts at zero; the grouped path's first join zeroes it on the pool's threads */
    if (out && (one_token || !grouped))
        memset(out, 0, (size_t)n_tok * (size_t)L->n_embd * sizeof(float));
    if (one_token) {
        if ((st = run_token(c, L, a, c->order, (int)n_assign, x, out, err))) return st;
        for (int64_t i = 0; i < n_assign; i++) { /* a batch per distinct expert, as below */
            const int32_t e = a[c->order[i]].expert;
            s->stats.batches += i == 0 || a[c->order[i - 1]].expert != e;
            if (L->on_device && L->on_device[e]) s->stats.calls_gpu++;
            else s->stats.calls_cpu++;
        }
        return SL_OK;
    }
    if (grouped) {
        if ((st = ensure_groups(c, L, n_tok, n_assign, err))) return st;
        /* the join's token buckets: sorted positions per token, ascending */
        int32_t *tb = c->tbeg, *tc = c->tcur;
        memset(tb, 0, ((size_t)n_tok + 1) * sizeof *tb);
        for (int64_t i = 0; i < n_assign; i++) tb[a[i].token + 1]++;
        for (int64_t t = 0; t < n_tok; t++) tb[t + 1] += tb[t];
        memcpy(tc, tb, (size_t)n_tok * sizeof *tc);
        for (int64_t i = 0; i < n_assign; i++) c->tpos[tc[a[c->order[i]].token]++] = (int32_t)i;
        memcpy(tc, tb, (size_t)n_tok * sizeof *tc);
        st = sl_cpu_matvec_quant_act_pool(&c->mv, c->pool, L->type_gate, x, L->n_embd, n_tok,
                                          c->tq, c->tq_cap, err);
        for (int64_t s0 = 0; !st && s0 < n_assign; s0 += SL__MOE_SLAB)
            st = run_slab(c, L, a, c->order, s0,
                          n_assign - s0 < SL__MOE_SLAB ? n_assign : s0 + SL__MOE_SLAB, n_tok,
                          out, err);
        if (st) return st;
    }
    int64_t begin = 0;
    for (int32_t e = 0; e < L->n_expert; e++) {
        const int64_t end = cnt[e];
        if (grouped) /* run_slab ran them: counted as run_group's chunks */
            s->stats.batches += (uint64_t)((end - begin + SL__MOE_CHUNK - 1) / SL__MOE_CHUNK);
        for (int64_t b = begin; !grouped && b < end; b += SL__MOE_CHUNK) {
            const int64_t m = end - b < SL__MOE_CHUNK ? end - b : SL__MOE_CHUNK;
            st = run_group(c, L, e, a, c->order + b, m, x, out, err);
            if (st) {
                char why[SL_ERROR_MSG_BYTES];
                snprintf(why, sizeof why, "%s", err ? err->msg : "kernel failed");
                return sl_error_set(err, st, "moe layer %d expert %d: %s", L->layer, e, why);
            }
            s->stats.batches++;
        }
        const uint64_t n = (uint64_t)(end - begin);
        if (L->on_device && L->on_device[e])
            s->stats.calls_gpu += n;
        else
            s->stats.calls_cpu += n;
        begin = end;
    }
    return SL_OK;
}

static sl_status cpu_exec(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                          int64_t n_assign, const float *x, int64_t n_tok, float *out,
                          sl_error *err)
{
    const uint64_t t0 = sl_clock_ns();
    const sl_status st = cpu_run((moe_cpu *)s, L, a, n_assign, x, n_tok, out, err);
    s->stats.cpu_ns += sl_clock_ns() - t0;
    return st;
}

static void cpu_destroy(sl_moe_sched *s)
{
    moe_cpu *c = (moe_cpu *)s;
    free(c->x);
    free(c->d);
    free(c->g);
    free(c->u);
    free(c->work);
    free(c->order);
    free(c->count);
    free(c->tq);
    free(c->xq);
    free(c->gq);
    free(c->sg);
    free(c->su);
    free(c->sd);
    free(c->gexp);
    free(c->gm);
    free(c->grp);
    free(c->tpos);
    free(c->tbeg);
    free(c->tcur);
    free(c);
}

/* sl_moe_exec_rows: cpu_run keeping each result (join() copies it to rows[assignment]) */
static sl_status cpu_rows(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                          int64_t n_assign, const float *x, int64_t n_tok, float *rows,
                          sl_error *err)
{
    moe_cpu *c = (moe_cpu *)s;
    const uint64_t t0 = sl_clock_ns();
    c->rows = rows;
    const sl_status st = cpu_run(c, L, a, n_assign, x, n_tok, NULL, err);
    c->rows = NULL;
    s->stats.cpu_ns += sl_clock_ns() - t0;
    return st;
}

static const sl__moe_vtable k_cpu_vt = {
    .name = "cpu", .exec = cpu_exec, .rows = cpu_rows, .destroy = cpu_destroy,
    .caps = SL_MOE_CAP_HOST_ONLY | SL_MOE_CAP_NEURON_STATS,
};

/* (contracted nowhere in this file: the pragma above add_weighted) */
void sl_moe_rows_join(const float *ra, const float *rb, const int32_t *idx, const float *w,
                      int64_t n_tok, int32_t k, int64_t dim, float *out)
{
    for (int64_t t = 0; t < n_tok; t++) {
        float *o = out + t * dim;
        memset(o, 0, (size_t)dim * sizeof *o);
        const int32_t *id = idx + t * k;
        int32_t order[SL_MOE_JOIN_MAX_K]; /* the slots by expert, stable (insertion) */
        for (int32_t i = 0; i < k; i++) {
            int32_t j = i;
            for (; j > 0 && id[order[j - 1]] > id[i]; j--) order[j] = order[j - 1];
            order[j] = i;
        }
        for (int32_t i = 0; i < k; i++) {
            const int64_t s = t * k + order[i];
            const float ws = w[s], *a = ra + s * dim, *b = rb ? rb + s * dim : NULL;
            if (!b) {
                add_weighted(o, ws, a, dim);
                continue;
            }
            for (int64_t j = 0; j < dim; j++) o[j] += ws * (a[j] + b[j]);
        }
    }
}

sl_status sl_moe_cpu_create(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                            sl_cpu_pool *pool, sl_moe_sched **out, sl_error *err)
{
    if (!ops || !mv || !out)
        return sl_error_set(err, SL_ERR_INVALID, "moe cpu: NULL ops, matvec context or out");
    moe_cpu *c = calloc(1, sizeof *c);
    if (!c) return sl_error_set(err, SL_ERR_NOMEM, "moe cpu: out of memory");
    c->base.vt = &k_cpu_vt;
    c->ops = *ops;
    c->mv = *mv;
    c->pool = pool;
    *out = &c->base;
    return SL_OK;
}
