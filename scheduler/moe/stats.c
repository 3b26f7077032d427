/* scheduler/moe/stats.c: the fetching scheduler's counters and derived rates (definitions in
 * fetch.h: overlap %, fallback rate, hit rate). */
#include "scheduler/moe/fetch_impl.h"

uint64_t sl__overlap_ns(sl__iv a, const sl__iv *cpu, int64_t n)
{
    uint64_t hidden = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t lo = a.t0 > cpu[i].t0 ? a.t0 : cpu[i].t0;
        const uint64_t hi = a.t1 < cpu[i].t1 ? a.t1 : cpu[i].t1;
        if (hi > lo) hidden += hi - lo;
    }
    return hidden;
}

void sl__fetch_stats_derive(sl_fetch_stats *s)
{
    s->overlap_pct = s->copy_ns > 0 ? 100.0 * s->hidden_ns / s->copy_ns : 0.0;
    s->fallback_rate = s->fetch_experts ? (double)(s->fallbacks_miss + s->fallbacks_fail) /
                                              (double)s->fetch_experts
                                        : 0.0;
    s->hit_rate = s->cache_lookups ? (double)s->cache_hits / (double)s->cache_lookups : 0.0;
}

void sl__fetch_stats_add(sl_fetch_stats *d, const sl_fetch_stats *s)
{
    d->calls += s->calls;
    for (int i = 0; i < 4; i++) d->calls_mode[i] += s->calls_mode[i];
    d->groups_cpu += s->groups_cpu;
    d->groups_dev += s->groups_dev;
    d->fetch_experts += s->fetch_experts;
    d->fallbacks_miss += s->fallbacks_miss;
    d->fallbacks_fail += s->fallbacks_fail;
    d->copies += s->copies;
    d->bytes_copied += s->bytes_copied;
    d->cache_lookups += s->cache_lookups;
    d->cache_hits += s->cache_hits;
    d->promotions += s->promotions;
    d->evictions += s->evictions;
    d->scratch_bytes = s->scratch_bytes;
    if (s->scratch_peak_bytes > d->scratch_peak_bytes) d->scratch_peak_bytes = s->scratch_peak_bytes;
    d->cache_bytes_used = s->cache_bytes_used;
    d->compactions += s->compactions;
    d->copy_ns += s->copy_ns;
    d->hidden_ns += s->hidden_ns;
    sl__fetch_stats_derive(d);
}
