/* scheduler/moe/cache.c: which experts stay resident on the device, under a byte budget.
 *
 * Why two policies: decode traffic is skewed (a few experts per layer take most tokens), so LFU
 * with decay keeps the hot set through bursts of one-off experts; LRU adapts faster when the
 * prompt's topic shifts. Both evict only unpinned entries; LFU admits a newcomer only when its
 * score beats the victim's (no churn on a cold expert), LRU always admits (classic LRU).
 * Eviction frees the BFC block; a failed allocation after evictions is left to the arena's
 * compact_on_oom, and if it still fails the expert simply is not cached.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/moe/fetch_impl.h"

void sl__cache_init(sl__cache *c, sl_cache_policy policy, double decay, uint64_t budget)
{
    memset(c, 0, sizeof *c);
    c->policy = policy;
    c->decay = decay;
    c->budget = budget;
}

void sl__cache_free(sl__cache *c)
{
    for (int32_t l = 0; l < c->n_layer; l++) {
        sl__cache_layer *L = &c->layers[l];
        for (int32_t e = 0; e < L->n_expert; e++)
            if (L->e[e].resident && c->arena) sl_bfc_free(c->arena, L->e[e].block, NULL);
        free(L->e);
    }
    free(c->layers);
    c->layers = NULL;
    c->n_layer = 0;
}

void sl__cache_flush(sl__cache *c)
{
    sl__cache_free(c);
    c->used = 0;
}

sl__cache_layer *sl__cache_layer_get(sl__cache *c, int32_t layer, int32_t n_expert)
{
    if (layer < 0 || n_expert < 1) return NULL;
    if (layer >= c->n_layer) {
        sl__cache_layer *n = realloc(c->layers, (size_t)(layer + 1) * sizeof *n);
        if (!n) return NULL;
        memset(n + c->n_layer, 0, (size_t)(layer + 1 - c->n_layer) * sizeof *n);
        c->layers = n;
        c->n_layer = layer + 1;
    }
    sl__cache_layer *L = &c->layers[layer];
    if (!L->n_expert) {
        L->e = calloc((size_t)n_expert, sizeof *L->e);
        if (!L->e) return NULL;
        for (int32_t e = 0; e < n_expert; e++) L->e[e].block = SL_BLOCK_NONE;
        L->n_expert = n_expert;
    }
    return L->n_expert == n_expert ? L : NULL;
}

double sl__cache_score(const sl__cache *c, const sl__cache_layer *L, int32_t e)
{
    const sl__cache_entry *x = &L->e[e];
    return x->score * pow(c->decay, (double)(L->step - x->score_step));
}

void sl__cache_touch(sl__cache *c, sl__cache_layer *L, int32_t e)
{
    sl__cache_entry *x = &L->e[e];
    x->score = sl__cache_score(c, L, e) + 1.0;
    x->score_step = L->step;
    x->last_use = ++c->tick;
}

void sl__cache_drop(sl__cache *c, sl__cache_layer *L, int32_t e)
{
    sl__cache_entry *x = &L->e[e];
    if (!x->resident) return;
    sl_bfc_free(c->arena, x->block, NULL);
    if (!x->pinned) c->used -= x->bytes;
    x->block = SL_BLOCK_NONE;
    x->resident = false;
}

/* The unpinned resident entry to evict first (NULL: none), never `keep`. */
static sl__cache_entry *victim(sl__cache *c, const sl__cache_entry *keep, double *score,
                               sl__cache_layer **vl, int32_t *ve)
{
    sl__cache_entry *best = NULL;
    double best_key = 0;
    for (int32_t l = 0; l < c->n_layer; l++) {
        sl__cache_layer *L = &c->layers[l];
        for (int32_t e = 0; e < L->n_expert; e++) {
            sl__cache_entry *x = &L->e[e];
            if (!x->resident || x->pinned || x == keep) continue;
            const double key = c->policy == SL_CACHE_LRU ? (double)x->last_use
                                                         : sl__cache_score(c, L, e);
            if (!best || key < best_key) {
                best = x;
                best_key = key;
                *vl = L;
                *ve = e;
            }
        }
    }
    *score = best_key;
    return best;
}

bool sl__cache_admit(sl__cache *c, sl__cache_layer *L, int32_t e, uint64_t bytes,
                     const uint64_t off[3], bool pin)
{
    sl__cache_entry *x = &L->e[e];
    if (x->resident || !c->arena) return false;
    if (!pin) {
        if (bytes > c->budget) return false;
        const double mine = sl__cache_score(c, L, e);
        while (c->used + bytes > c->budget) {
            double vs;
            sl__cache_layer *vl = NULL;
            int32_t ve = -1;
            if (!victim(c, x, &vs, &vl, &ve)) return false;
            if (c->policy == SL_CACHE_LFU && !(mine > vs)) return false;
            sl__cache_drop(c, vl, ve);
            c->evictions++;
        }
    }
    if (sl_bfc_alloc(c->arena, bytes, 0, &x->block, NULL)) {
        x->block = SL_BLOCK_NONE;
        return false;
    }
    x->bytes = bytes;
    memcpy(x->off, off, sizeof x->off);
    x->resident = true;
    x->pinned = pin;
    if (!pin) c->used += bytes;
    return true;
}

sl_status sl__cache_validate(const sl__cache *c, sl_error *err)
{
    uint64_t used = 0;
    for (int32_t l = 0; l < c->n_layer; l++) {
        const sl__cache_layer *L = &c->layers[l];
        for (int32_t e = 0; e < L->n_expert; e++) {
            const sl__cache_entry *x = &L->e[e];
            if (x->resident != (x->block != SL_BLOCK_NONE))
                return sl_error_set(err, SL_ERR_INVALID, "cache: layer %d expert %d: resident %d "
                                    "but block %u", l, e, x->resident, x->block);
            if (x->resident && sl_bfc_size(c->arena, x->block) < x->bytes)
                return sl_error_set(err, SL_ERR_INVALID, "cache: layer %d expert %d: block of %llu "
                                    "bytes holds %llu", l, e,
                                    (unsigned long long)sl_bfc_size(c->arena, x->block),
                                    (unsigned long long)x->bytes);
            if (x->resident && !x->pinned) used += x->bytes;
        }
    }
    if (used != c->used)
        return sl_error_set(err, SL_ERR_INVALID, "cache: used %llu != resident unpinned %llu",
                            (unsigned long long)c->used, (unsigned long long)used);
    if (c->used > c->budget)
        return sl_error_set(err, SL_ERR_INVALID, "cache: used %llu over budget %llu",
                            (unsigned long long)c->used, (unsigned long long)c->budget);
    return SL_OK;
}
