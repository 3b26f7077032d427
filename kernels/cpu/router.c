/* kernels/cpu/router.c: see router.h. The reference validates the parameters (on the first
 * token, before the others start); the fast path then only checks each token's logits. */
#include "kernels/cpu/router.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct router_job {
    const float *logits;
    const sl_router_params *p;
    int32_t *idx;
    float *w;
    bool fast;
    atomic_llong first_bad; /* lowest token whose routing failed; n when none */
} router_job;

/* The reference's arithmetic for one token (see sl_ref_router_topk): false when a logit is
 * not finite (the caller lets the reference report it). */
static bool route_fast(const float *l, const sl_router_params *p, int32_t *idx, float *w)
{
    const int32_t E = p->n_expert, k = p->k;
    double prob[SL_CPU_ROUTER_MAX_EXPERTS];
    for (int32_t e = 0; e < E; e++)
        if (!isfinite(l[e])) return false;
    sl__router_probs(l, p, prob);
    /* top k by insertion into idx, kept sorted; an equal score never passes an earlier
     * expert, so ties go to the lower index as in the reference */
    int32_t cnt = 0;
    for (int32_t e = 0; e < E; e++) {
        if (cnt == k && !(prob[e] > prob[idx[k - 1]])) continue;
        int32_t j = cnt < k ? cnt++ : k - 1;
        for (; j > 0 && prob[e] > prob[idx[j - 1]]; j--) idx[j] = idx[j - 1];
        idx[j] = e;
    }
    sl__router_weights(prob, idx, p, w);
    return true;
}

static void router_chunk(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    router_job *j = ctx;
    const int32_t E = j->p->n_expert, k = j->p->k;
    for (int64_t t = begin; t < end; t++) {
        const float *l = j->logits + t * E;
        int32_t *idx = j->idx + t * k;
        float *w = j->w + t * k;
        if (j->fast && route_fast(l, j->p, idx, w)) continue;
        if (sl_ref_router_topk(l, j->p, idx, w, NULL)) {
            long long prev = atomic_load(&j->first_bad);
            while (t < prev && !atomic_compare_exchange_weak(&j->first_bad, &prev, t)) {
            }
            return;
        }
    }
}

sl_status sl_cpu_router_topk(sl_cpu_pool *pool, const float *logits, int64_t n,
                             const sl_router_params *p, int32_t *idx, float *w, sl_error *err)
{
    if (n < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld < 0", __func__, (long long)n);
    if (n == 0) return SL_OK;
    /* the reference checks p and the pointers (routing token 0, again below: idempotent) */
    sl_status st = sl_ref_router_topk(logits, p, idx, w, err);
    if (st || n == 1) return st;
    const bool common =
        p->gating == SL_GATING_SOFTMAX_TOPK || p->gating == SL_GATING_TOPK_SOFTMAX;
    router_job j = {.logits = logits, .p = p, .idx = idx, .w = w,
                    .fast = common && !p->bias && p->n_group <= 1 &&
                            p->n_expert <= SL_CPU_ROUTER_MAX_EXPERTS};
    atomic_init(&j.first_bad, n);
    /* a token costs about E exps (~1 us): chunks of 4..32 tokens, several a thread, so the
     * call's ragged end is short (a chunk is one atomic add; the call one handoff) */
    const int64_t parts = 8 * (int64_t)sl_cpu_pool_threads(pool);
    const int64_t grain = n / parts < 4 ? 4 : n / parts > 32 ? 32 : n / parts;
    st = sl_cpu_pool_parallel_for(pool, n, grain, router_chunk, &j, err);
    if (st) return st;
    const int64_t bad = atomic_load(&j.first_bad);
    if (bad < n) /* again, for the reference's message */
        return sl_ref_router_topk(logits + bad * p->n_expert, p, idx + bad * p->k,
                                  w + bad * p->k, err);
    return SL_OK;
}
