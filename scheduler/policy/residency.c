/* scheduler/policy/residency.c: the weight budget and the eviction choice (contract in residency.h). */
#include "scheduler/policy/residency.h"

#include <math.h>

const char *sl_res_state_name(sl_res_state s)
{
    static const char *const names[SL_RS_COUNT] = {"disk", "host", "device", "pinned"};
    return (unsigned)s < SL_RS_COUNT ? names[s] : "?";
}

/* frac * bytes, rounded down, without overflow for any frac in [0, 1]. */
static uint64_t share(uint64_t bytes, double frac)
{
    const double v = floor((double)bytes * frac);
    return v >= (double)bytes ? bytes : v <= 0 ? 0 : (uint64_t)v;
}

sl_status sl_res_budget_solve(const sl_res_budget_in *in, sl_res_budget *out, sl_error *err)
{
    if (!in || !out) return sl_error_set(err, SL_ERR_INVALID, "residency budget: NULL argument");
    if (!isfinite(in->weight_fraction) || in->weight_fraction < 0 || in->weight_fraction > 1)
        return sl_error_set(err, SL_ERR_INVALID, "residency budget: weight fraction %g outside "
                            "[0, 1]", in->weight_fraction);
    if (!isfinite(in->wiggle_fraction) || in->wiggle_fraction < 0 || in->wiggle_fraction >= 1)
        return sl_error_set(err, SL_ERR_INVALID, "residency budget: wiggle fraction %g outside "
                            "[0, 1)", in->wiggle_fraction);
    const uint64_t ceiling = in->arena_bytes - share(in->arena_bytes, in->wiggle_fraction);
    const uint64_t room = ceiling > in->max_scratch_bytes ? ceiling - in->max_scratch_bytes : 0;
    const uint64_t granted = share(in->arena_bytes, in->weight_fraction);
    out->scratch_ceiling = ceiling;
    out->weight_pool = granted < room ? granted : room;
    out->on_demand_budget =
        in->pinned_bytes < out->weight_pool ? out->weight_pool - in->pinned_bytes : 0;
    out->over_commit = in->pinned_bytes > out->weight_pool;
    return SL_OK;
}

sl_status sl_res_budget_validate(const sl_res_budget_in *in, const sl_res_budget *b,
                                 sl_error *err)
{
    const uint64_t pinned = in->pinned_bytes < b->weight_pool ? in->pinned_bytes : b->weight_pool;
    if (b->weight_pool > b->scratch_ceiling || b->scratch_ceiling > in->arena_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "residency budget invariant: weight pool %llu "
                            "<= scratch ceiling %llu <= arena %llu",
                            (unsigned long long)b->weight_pool,
                            (unsigned long long)b->scratch_ceiling,
                            (unsigned long long)in->arena_bytes);
    if (b->on_demand_budget + pinned != b->weight_pool)
        return sl_error_set(err, SL_ERR_INVALID, "residency budget invariant: on-demand %llu + "
                            "pinned %llu != weight pool %llu",
                            (unsigned long long)b->on_demand_budget, (unsigned long long)pinned,
                            (unsigned long long)b->weight_pool);
    if (b->over_commit != (in->pinned_bytes > b->weight_pool))
        return sl_error_set(err, SL_ERR_INVALID, "residency budget invariant: over-commit flag");
    return SL_OK;
}

static bool evictable(const sl_res_entry *e)
{
    return e->state == SL_RS_DEVICE && !e->busy;
}

sl_status sl_res_choose_evictions(const sl_res_entry *e, size_t n, size_t target,
                                  uint64_t on_demand_budget, size_t *evict, sl_res_choice *out,
                                  sl_error *err)
{
    if (!e || !evict || !out)
        return sl_error_set(err, SL_ERR_INVALID, "residency: NULL argument");
    if (target >= n)
        return sl_error_set(err, SL_ERR_RANGE, "residency: model %zu of %zu", target, n);
    if (e[target].state >= SL_RS_DEVICE)
        return sl_error_set(err, SL_ERR_INVALID, "residency: model %zu is already resident "
                            "(%s)", target, sl_res_state_name(e[target].state));
    *out = (sl_res_choice){0};
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].state == SL_RS_DEVICE) used += e[i].device_bytes;
    const uint64_t need = e[target].device_bytes;
    out->too_big = need > on_demand_budget;
    /* Selection by repeated minimum: n is the number of models of a process (a handful), and
     * it needs no scratch array. */
    while (out->too_big ? true : used + need > on_demand_budget) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            if (!evictable(&e[i])) continue;
            bool taken = false;
            for (size_t k = 0; k < out->n_evict && !taken; k++) taken = evict[k] == i;
            if (taken) continue;
            if (best == n || e[i].last_use < e[best].last_use) best = i;
        }
        if (best == n) break;
        evict[out->n_evict++] = best;
        used -= e[best].device_bytes;
    }
    out->over = used + need > on_demand_budget;
    return SL_OK;
}
