/* scheduler/policy/residency: the policy of a model-level weight cache for serving several models
 * from one device arena (seed: ReactantServer's weight budget). Pure arithmetic and choice:
 * no I/O, no allocation; the engine (runtime/serve/runtime.c) moves the bytes.
 *
 * Budget. The arena holds weights and execution scratch (KV caches, activations). A wiggle
 * fraction of it is kept free for the allocator's slack, so scratch may grow up to
 *     scratch_ceiling  = (1 - wiggle) * arena
 * and weights get what the user grants (weight_fraction) but never the room the largest
 * execution scratch needs under that ceiling:
 *     weight_pool      = min(weight_fraction * arena, scratch_ceiling - max_scratch)  (>= 0)
 * Pinned models are always resident; what is left is the budget of models loaded on demand:
 *     on_demand_budget = clamp(weight_pool - pinned_bytes, 0, weight_pool)
 *     over_commit      = pinned_bytes > weight_pool
 * (over-commit is reported, not refused: the pinned models still load if the arena holds them,
 * and every on-demand model then loads alone after evicting the others).
 *
 * Eviction. Models are entries with a state, device bytes, a last-use tick and a busy flag (a
 * context is evaluating it). To make room for one model, evict the least recently used
 * unpinned, idle, resident entries (ticks ascending, ties by index) until the resident
 * on-demand bytes plus the newcomer's fit the on-demand budget. A newcomer larger than the
 * whole budget evicts every evictable entry and loads anyway (too_big says so, the engine
 * warns); busy entries are never chosen, so a plan may end above the budget (over says so).
 */
#ifndef SL_SCHEDULER_RESIDENCY_H
#define SL_SCHEDULER_RESIDENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Residency of one model, in increasing order of closeness to the device. The values are
 * sluice.h's sl_residency (the engine checks they agree). */
typedef enum sl_res_state {
    SL_RS_DISK = 0,     /* only the file: nothing read */
    SL_RS_HOST = 1,     /* the host floor: every weight in host memory, none on the device */
    SL_RS_DEVICE = 2,   /* host floor + the plan's device weights in the arena (evictable) */
    SL_RS_PINNED = 3,   /* as DEVICE, never evicted or moved */
    SL_RS_COUNT
} sl_res_state;

/* Stable lower-case name ("disk", "host", "device", "pinned"; "?" outside the enum). */
const char *sl_res_state_name(sl_res_state s);

typedef struct sl_res_budget_in {
    uint64_t arena_bytes;       /* the device arena's size */
    double weight_fraction;     /* share of the arena weights may take, in [0, 1] */
    double wiggle_fraction;     /* share kept free for the allocator, in [0, 1) */
    uint64_t max_scratch_bytes; /* the largest execution scratch of any model */
    uint64_t pinned_bytes;      /* device bytes of the pinned models */
} sl_res_budget_in;

/* Invariants (sl_res_budget_validate): weight_pool <= scratch_ceiling <= arena_bytes;
 * on_demand_budget + min(pinned_bytes, weight_pool) == weight_pool;
 * over_commit == (pinned_bytes > weight_pool). */
typedef struct sl_res_budget {
    uint64_t scratch_ceiling;
    uint64_t weight_pool;
    uint64_t on_demand_budget;
    bool over_commit;
} sl_res_budget;

/* Solves the budget above. SL_ERR_INVALID naming the field for a fraction outside its range
 * (or not finite). */
sl_status sl_res_budget_solve(const sl_res_budget_in *in, sl_res_budget *out, sl_error *err);
/* Checks the invariants against the input; SL_ERR_INVALID naming the broken one. */
sl_status sl_res_budget_validate(const sl_res_budget_in *in, const sl_res_budget *b,
                                 sl_error *err);

typedef struct sl_res_entry {
    sl_res_state state;
    uint64_t device_bytes;      /* device bytes when resident (its placement's share) */
    uint64_t last_use;          /* tick of its last acquire; larger is more recent */
    bool busy;                  /* being evaluated: never evicted or moved */
} sl_res_entry;

typedef struct sl_res_choice {
    size_t n_evict;             /* victims written to evict[], least recently used first */
    bool too_big;               /* the newcomer alone exceeds the on-demand budget */
    bool over;                  /* even after the evictions the budget is exceeded (busy
                                   entries or too_big) */
} sl_res_choice;

/* Chooses the entries to evict so that entry `target` (not resident: state DISK or HOST) fits
 * the on-demand budget. evict has room for n indices. SL_ERR_RANGE if target >= n,
 * SL_ERR_INVALID if target is already resident. */
sl_status sl_res_choose_evictions(const sl_res_entry *e, size_t n, size_t target,
                                  uint64_t on_demand_budget, size_t *evict, sl_res_choice *out,
                                  sl_error *err);

#endif
