/* runtime/engine/defer.c: see defer.h. */
#include "runtime/engine/defer.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/engine/ctx.h"

static void *worker(void *arg)
{
    sl_ctx *c = arg;
    sl__defer *D = &c->defer;
    pthread_mutex_lock(&D->mu);
    for (;;) {
        while (!D->job && !D->stop) pthread_cond_wait(&D->cv, &D->mu);
        if (D->stop) break;
        D->job = false;
        D->busy = true;
        pthread_mutex_unlock(&D->mu);
        sl_error e;
        const sl_status st = sl_moe_exec(D->moe, &c->m->layers[D->layer].moe, D->a_def,
                                         D->n_def, D->x, D->n, D->out, &e);
        pthread_mutex_lock(&D->mu);
        if (st && !D->st) {
            D->st = st;
            D->err = e;
        }
        D->busy = false;
        pthread_cond_broadcast(&D->cv);
    }
    pthread_mutex_unlock(&D->mu);
    return NULL;
}

/* Until the worker holds no job (its result, if any, is then in out). */
static void wait_idle(sl__defer *D)
{
    if (!D->started) return;
    pthread_mutex_lock(&D->mu);
    while (D->job || D->busy) pthread_cond_wait(&D->cv, &D->mu);
    pthread_mutex_unlock(&D->mu);
}

sl_status sl__defer_setup(sl_ctx *c, int32_t d, sl_error *err)
{
    sl__defer *D = &c->defer;
    const sl__hparams *hp = &c->m->hp;
    *D = (sl__defer){.layer = -1};
    if (!d) return SL_OK; /* (d <= n_expert_used: engine.c create_moe refused the rest) */
    const size_t rows = (size_t)c->cap * (size_t)hp->n_embd;
    const size_t slots = (size_t)c->cap * (size_t)hp->n_expert_used;
    D->d = d;
    D->on = calloc((size_t)hp->n_layer, sizeof *D->on);
    D->out = malloc(rows * sizeof *D->out);
    D->a_def = malloc(slots * sizeof *D->a_def);
    D->a_imm = malloc(slots * sizeof *D->a_imm);
    if (!D->on || !D->out || !D->a_def || !D->a_imm) {
        sl__defer_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "defer: out of memory");
    }
    /* no device: every part is computed on the host thread */
    if (!c->dev.dx) return sl__defer_validate(c, err);
    if (!(D->x = malloc(rows * sizeof *D->x))) {
        sl__defer_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "defer: out of memory");
    }
    /* cuda: the worker computes on the context's pool (the host thread only queues while a
     * device chain runs); sim: alone, since the sim's kernels use the pool meanwhile */
    sl_status st = sl_moe_cpu_create(&c->ops, &c->mv, sl__model_cuda(c->m) ? c->pool : NULL,
                                     &D->moe, err);
    if (st) {
        sl__defer_free(c);
        return st;
    }
    if (pthread_mutex_init(&D->mu, NULL)) {
        sl__defer_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "defer: cannot create its mutex");
    }
    if (pthread_cond_init(&D->cv, NULL)) {
        pthread_mutex_destroy(&D->mu);
        sl__defer_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "defer: cannot create its condition variable");
    }
    if (pthread_create(&D->th, NULL, worker, c)) {
        pthread_cond_destroy(&D->cv);
        pthread_mutex_destroy(&D->mu);
        sl__defer_free(c);
        return sl_error_set(err, SL_ERR_IO, "defer: cannot start its worker thread");
    }
    D->started = true;
    return sl__defer_validate(c, err);
}

void sl__defer_free(sl_ctx *c)
{
    sl__defer *D = &c->defer;
    if (D->started) {
        pthread_mutex_lock(&D->mu);
        D->stop = true;
        pthread_cond_broadcast(&D->cv);
        pthread_mutex_unlock(&D->mu);
        pthread_join(D->th, NULL);
        pthread_cond_destroy(&D->cv);
        pthread_mutex_destroy(&D->mu);
    }
    sl_moe_destroy(D->moe);
    free(D->on);
    free(D->x);
    free(D->out);
    free(D->a_def);
    free(D->a_imm);
    *D = (sl__defer){.layer = -1};
}

sl_status sl__defer_validate(const sl_ctx *c, sl_error *err)
{
    const sl__defer *D = &c->defer;
    if (!D->d) return D->on || D->started || D->layer != -1
                          ? sl_error_set(err, SL_ERR_INVALID, "defer: off but holding state")
                          : SL_OK;
    if (D->d < 0 || D->d > c->m->hp.n_expert_used || !D->on || !D->out || !D->a_def ||
        !D->a_imm)
        return sl_error_set(err, SL_ERR_INVALID, "defer: %d experts without their buffers",
                            D->d);
    if (D->started != (c->dev.dx != NULL) || (D->started && (!D->moe || !D->x)))
        return sl_error_set(err, SL_ERR_INVALID, "defer: a worker %s, %s device side",
                            D->started ? "running" : "missing", c->dev.dx ? "a" : "no");
    if (D->layer < -1 || D->layer >= c->m->hp.n_layer - 1 || (D->layer >= 0 && D->n > c->cap))
        return sl_error_set(err, SL_ERR_INVALID, "defer: layer %d's part of %lld tokens pending",
                            D->layer, (long long)D->n);
    return SL_OK;
}

void sl__defer_plan(sl_ctx *c, sl__defer_kind_fn kind, int64_t n, int64_t n_out)
{
    sl__defer *D = &c->defer;
    const int32_t L = c->m->hp.n_layer;
    sl__defer_kind next = L > 0 && D->d ? kind(c, 0, n) : SL__DEFER_NONE;
    for (int32_t il = 0; D->d && il < L; il++) {
        const sl__defer_kind k = next;
        next = il + 1 < L ? kind(c, il + 1, n) : SL__DEFER_NONE;
        D->on[il] = k != SL__DEFER_NONE && k == next && (il + 2 < L || n_out > 0);
    }
}

bool sl__defer_takes(const sl_ctx *c, int32_t il)
{
    const sl__defer *D = &c->defer;
    return D->d && (D->on[il] || (il > 0 && D->on[il - 1]));
}

/* The pass's assignments of layer il split into immediate (a_imm) and deferred (a_def): a
 * token's k - d highest-weighted slots (ties: the lower slot) are immediate, the rest
 * deferred; all immediate where the layer does not defer. */
static void split(sl__defer *D, int32_t X, int32_t K, bool defers, const int32_t *idx,
                  const float *w, int64_t n, int64_t *n_imm)
{
    const int32_t keep_k = K - D->d;
    *n_imm = 0;
    D->n_def = 0;
    for (int64_t t = 0; t < n; t++)
        for (int32_t i = 0; i < K; i++) {
            const float *wt = w + t * K;
            int32_t above = 0; /* the token's slots ranked before slot i */
            for (int32_t j = 0; defers && j < K; j++)
                above += wt[j] > wt[i] || (wt[j] == wt[i] && j < i);
            const int32_t e = idx[t * K + i];
            const sl_moe_assign a = {(int32_t)t, e, wt[i]};
            /* an id out of range stays immediate: sl_moe_exec names it */
            if (!defers || above < keep_k || e < 0 || e >= X) D->a_imm[(*n_imm)++] = a;
            else D->a_def[D->n_def++] = a;
        }
}

sl_status sl__defer_moe(sl_ctx *c, int32_t il, int64_t n, const float *x, const int32_t *idx,
                        const float *w, float *out, bool async, sl_error *err)
{
    sl__defer *D = &c->defer;
    const sl__hparams *hp = &c->m->hp;
    const sl_moe_layer *H = &c->m->layers[il].moe;
    const int64_t E = hp->n_embd;
    if (D->layer >= 0 && D->layer != il - 1) {
        wait_idle(D);
        return sl_error_set(err, SL_ERR_INVALID, "defer: layer %d's deferred part reached layer "
                            "%d", D->layer, il);
    }
    /* the worker's part first: it reads a_def and x, and on cuda computes on the pool this
     * layer's immediate experts need next (so the overlap is with the device's work between
     * the two layers' host parts, not with this one) */
    const bool pending = D->layer >= 0;
    sl_status st = SL_OK;
    if (pending) {
        wait_idle(D);
        if (D->st) st = sl_error_set(err, D->st, "defer: layer %d: %s", D->layer, D->err.msg);
        D->st = SL_OK;
        /* the last layer past its attention: the rows with logits alone (forward.c) */
        const int64_t kept = !st && D->n != n && il == hp->n_layer - 1
                                 ? sl__forward_keep_rows(c, D->out, E)
                                 : D->n;
        if (!st && kept != n)
            st = sl_error_set(err, SL_ERR_INVALID, "defer: layer %d's deferred part of %lld "
                              "tokens reached layer %d of %lld", D->layer, (long long)kept, il,
                              (long long)n);
        D->layer = -1;
    }
    const bool defers = D->on[il];
    int64_t n_imm = 0;
    split(D, hp->n_expert, hp->n_expert_used, defers, idx, w, n, &n_imm);
    if (!st) st = sl_moe_exec(c->moe, H, D->a_imm, n_imm, x, n, out, err);
    /* the previous layer's deferred sum joins this layer's immediate one (D->out is only
     * rewritten by this layer's own part, below) */
    for (int64_t i = 0; !st && pending && i < n * E; i++) out[i] += D->out[i];
    if (st || !defers) return st;
    D->n = n;
    if (!async || !D->started) { /* computed now: the same sums, in the same order */
        st = sl_moe_exec(c->moe, H, D->a_def, D->n_def, x, n, D->out, err);
        if (!st) D->layer = il;
        return st;
    }
    memcpy(D->x, x, (size_t)(n * E) * sizeof *x); /* the stream reuses x for the next layer */
    pthread_mutex_lock(&D->mu);
    D->layer = il;
    D->job = true;
    pthread_cond_broadcast(&D->cv);
    pthread_mutex_unlock(&D->mu);
    return SL_OK;
}

sl_status sl__defer_end(sl_ctx *c, bool ok, sl_error *err)
{
    sl__defer *D = &c->defer;
    if (!D->d) return SL_OK;
    wait_idle(D);
    const int32_t left = D->layer;
    D->layer = -1;
    D->st = SL_OK;
    if (ok && left >= 0)
        return sl_error_set(err, SL_ERR_INVALID, "defer: layer %d's deferred part was never "
                            "added", left);
    return SL_OK;
}

void sl__defer_stats_add(const sl_ctx *c, sl_moe_stats *s)
{
    if (!c->defer.moe) return;
    sl_moe_stats w;
    sl_moe_stats_get(c->defer.moe, &w);
    s->calls_cpu += w.calls_cpu;
    s->batches += w.batches;
    s->cpu_bytes += w.cpu_bytes;
    s->cpu_ns += w.cpu_ns;
}
