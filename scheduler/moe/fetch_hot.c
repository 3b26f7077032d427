/* scheduler/moe/fetch_hot.c: what the fetching scheduler makes resident — pinned experts, static
 * hot residency, bounded uploads, promotions of fetched experts (fetch.h: pinned, hot_bytes,
 * hot_warm, uploads, cache_bytes; issue 33).
 *
 * Why: at batch 1 a copied expert serves one token, so PCIe loses to the CPU; what wins is
 * keeping the experts the router picks most often resident (a profile-seeded static set) and
 * computing the misses on the CPU beside them. Some routers have little static skew but
 * strong temporal locality, so a small run-time cache may follow the recent routing too —
 * bounded per layer and step, so a miss never costs a copy by itself. */
#include <stdlib.h>

#include "scheduler/moe/fetch_state.h"

bool sl__fetch_pin(fetch *f, sl__cache_layer *CL, int32_t e, const uint64_t off[3])
{
    const sl_moe_layer *L = &f->cur;
    if (L->on_device && L->on_device[e]) return false;
    f->cs_dirty = true; /* an admission may compact the arena on cs */
    if (!sl__cache_admit(&f->cache, CL, e, off[2] + f->pb[2], off, true)) return false;
    if (!sl__fetch_fill(f, &CL->e[e], e, f->pb, NULL)) sl__cache_drop(&f->cache, CL, e);
    return true;
}

void sl__fetch_pins_land(fetch *f, sl__cache_layer *CL)
{
    if (sl_device_stream_sync(f->dev, f->cs, NULL) == SL_OK) {
        sl__fetch_stage_reset(f); /* a hot set's staging is held one layer at a time */
        return;
    }
    for (int32_t e = 0; e < CL->n_expert; e++)
        if (CL->e[e].pinned) sl__cache_drop(&f->cache, CL, e);
}

void sl__fetch_load_pins(fetch *f, sl__cache_layer *CL, const uint64_t off[3])
{
    CL->pins_loaded = true;
    const sl_moe_layer *L = &f->cur;
    bool any = false;
    for (int i = 0; i < f->n_pins; i++)
        if (f->pins[i][0] == L->layer && f->pins[i][1] < L->n_expert)
            any |= sl__fetch_pin(f, CL, f->pins[i][1], off);
    if (any) sl__fetch_pins_land(f, CL);
}

/* The layer's share of hot_bytes in whole experts (entries as admitted, off[2] + down, in
 * the arena's granules: the arena holds exactly hot_bytes for them). */
static int32_t hot_count(const fetch *f, const uint64_t off[3], int32_t n_expert)
{
    const uint64_t a = SL_BFC_ALIGN, xb = (off[2] + f->pb[2] + a - 1) / a * a;
    const int32_t layers = f->opt.hot_layers > 0 ? f->opt.hot_layers : 1;
    const uint64_t n = xb ? f->opt.hot_bytes / (uint64_t)layers / xb : 0;
    return n < (uint64_t)n_expert ? (int32_t)n : n_expert;
}

void sl__fetch_hot(fetch *f, sl__cache_layer *CL, const sl_moe_assign *a, int64_t n_assign,
                   const uint64_t off[3])
{
    for (int64_t i = 0; i < n_assign; i++) CL->e[a[i].expert].routed++;
    CL->routed += (uint64_t)n_assign;
    if (CL->routed < (uint64_t)(f->opt.hot_warm > 0 ? f->opt.hot_warm : 1)) return;
    CL->hot_chosen = true;
    /* the n most routed, by repeated selection (n and n_expert are small; ties: lower index) */
    const int32_t n = hot_count(f, off, CL->n_expert);
    bool any = false;
    for (int32_t k = 0; k < n; k++) {
        int32_t best = -1;
        for (int32_t e = 0; e < CL->n_expert; e++)
            if (!CL->e[e].resident && CL->e[e].routed &&
                (best < 0 || CL->e[e].routed > CL->e[best].routed))
                best = e;
        if (best < 0) break;
        CL->e[best].routed = 0; /* taken: not a candidate again (the profile is done) */
        any |= sl__fetch_pin(f, CL, best, off);
    }
    if (any) sl__fetch_pins_land(f, CL);
}

void sl__fetch_upload(fetch *f, sl__cache_layer *CL, const uint64_t off[3])
{
    const uint64_t before = f->cache.evictions;
    double prev = 0;
    int32_t prev_e = -1;
    for (int k = 0; k < f->opt.uploads; k++) {
        /* the next CPU-computed expert of this call in (decayed frequency desc, index asc)
         * order after the previous pick */
        int32_t best = -1;
        double best_score = 0;
        for (int64_t xi = 0; xi < f->n_x; xi++) {
            const int32_t e = f->xs[xi].e;
            if (f->xs[xi].kind != X_CPU || CL->e[e].resident) continue;
            const double sc = sl__cache_score(&f->cache, CL, e);
            if (prev_e >= 0 && !(sc < prev || (sc == prev && e > prev_e))) continue;
            if (best < 0 || sc > best_score) {
                best = e;
                best_score = sc;
            }
        }
        if (best < 0) break;
        prev = best_score;
        prev_e = best;
        f->cs_dirty = true; /* an admission may compact the arena on cs */
        if (!sl__cache_admit(&f->cache, CL, best, off[2] + f->pb[2], off, false)) continue;
        if (sl__fetch_fill(f, &CL->e[best], best, f->pb, NULL)) f->cs_stats.promotions++;
        else sl__cache_drop(&f->cache, CL, best);
    }
    f->cs_stats.evictions += f->cache.evictions - before;
}

void sl__fetch_promote(fetch *f, sl__cache_layer *CL, const uint64_t off[3])
{
    const uint64_t before = f->cache.evictions;
    int admitted = 0;
    for (int64_t xi = 0; xi < f->n_x && (!f->opt.uploads || admitted < f->opt.uploads); xi++) {
        const xinfo *xx = &f->xs[xi];
        if (xx->kind != X_FETCH || xx->failed) continue;
        f->cs_dirty = true; /* an admission may compact the arena on cs */
        if (!sl__cache_admit(&f->cache, CL, xx->e, off[2] + f->pb[2], off, false)) continue;
        /* slots are a source only when every copy into them completed (post with
         * block_on_miss 0 may leave a late expert's copy never enqueued) */
        if (sl__fetch_fill(f, &CL->e[xx->e], xx->e, f->pb,
                           sl__fetch_copies_landed(f, xx) ? xx->dp : NULL)) {
            f->cs_stats.promotions++;
            admitted++;
        } else {
            sl__cache_drop(&f->cache, CL, xx->e);
        }
    }
    f->cs_stats.evictions += f->cache.evictions - before;
}
