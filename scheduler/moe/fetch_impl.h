/* scheduler/moe/fetch_impl.h: the fetching scheduler's private parts (cache.c, stats.c, trace.c),
 * shared inside scheduler/ only. */
#ifndef SL_SCHEDULER_FETCH_IMPL_H
#define SL_SCHEDULER_FETCH_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/bfc.h"
#include "scheduler/moe/fetch.h"

/* ---- cache.c: resident experts ---------------------------------------------------------- */

/* One (layer, expert). Invariants (sl__cache_validate):
 *   resident  <=>  block != SL_BLOCK_NONE, and then sl_bfc_size(block) >= bytes;
 *   cache.used == sum of bytes over resident entries that are not pinned;
 *   a pinned entry, once resident, never stops being resident. */
typedef struct sl__cache_entry {
    sl_block block;
    uint64_t bytes;
    uint64_t off[3];        /* gate, up, down offsets inside the block */
    bool resident, pinned;
    uint64_t last_use;      /* LRU: the cache tick of the last use */
    double score;           /* LFU: decayed use count, as of score_step */
    uint64_t score_step;
    uint64_t routed;        /* assignments counted for static hot residency (fetch_hot.c) */
} sl__cache_entry;

typedef struct sl__cache_layer {
    int32_t n_expert;       /* 0: layer not seen yet */
    uint64_t step;          /* calls of this layer */
    bool pins_loaded;
    bool hot_chosen;        /* static hot residency: the layer's hot set is resident */
    uint64_t routed;        /* assignments counted so far (sum of e[].routed) */
    sl__cache_entry *e;     /* [n_expert] */
} sl__cache_layer;

typedef struct sl__cache {
    sl_bfc *arena;          /* borrowed */
    sl_cache_policy policy;
    double decay;
    uint64_t budget, used;
    uint64_t tick;
    int32_t n_layer;        /* entries of layers[] */
    sl__cache_layer *layers;
    uint64_t evictions;
} sl__cache;

void sl__cache_init(sl__cache *c, sl_cache_policy policy, double decay, uint64_t budget);
void sl__cache_free(sl__cache *c);
/* Drops every entry, pinned ones too (their pins load again at the layer's next call). */
void sl__cache_flush(sl__cache *c);
/* The layer's row, created with n_expert entries on first sight. NULL on out of memory or a
 * changed n_expert. */
sl__cache_layer *sl__cache_layer_get(sl__cache *c, int32_t layer, int32_t n_expert);
/* Counts a use (LRU tick, LFU score). */
void sl__cache_touch(sl__cache *c, sl__cache_layer *L, int32_t e);
/* LFU score of an entry at the layer's current step. */
double sl__cache_score(const sl__cache *c, const sl__cache_layer *L, int32_t e);
/* Decides whether expert e (bytes) of layer L may become resident, evicts as needed, and
 * allocates its block (pinned entries always try, outside the budget). true: the entry is now
 * resident (its bytes must be filled before the next use). */
bool sl__cache_admit(sl__cache *c, sl__cache_layer *L, int32_t e, uint64_t bytes,
                     const uint64_t off[3], bool pin);
/* Makes an entry non-resident and frees its block (failed fill). */
void sl__cache_drop(sl__cache *c, sl__cache_layer *L, int32_t e);
sl_status sl__cache_validate(const sl__cache *c, sl_error *err);

/* ---- trace.c: spans for Chrome/Perfetto JSON ------------------------------------------ */

enum { SL__TID_CPU = 0, SL__TID_COPY = 1, SL__TID_DEV = 2 };

typedef struct sl__span {
    char name[48];
    uint64_t t0_ns, t1_ns;
    int tid;
} sl__span;

typedef struct sl__trace {
    bool on;
    uint64_t cap, n, dropped;
    uint64_t origin_ns;     /* ts 0 */
    sl__span *v;
} sl__trace;

void sl__trace_add(sl__trace *t, int tid, uint64_t t0_ns, uint64_t t1_ns, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
sl_status sl__trace_write(const sl__trace *t, const char *path, sl_error *err);
void sl__trace_free(sl__trace *t);

/* ---- stats.c ------------------------------------------------------------------------- */

typedef struct sl__iv {
    uint64_t t0, t1;
} sl__iv;

/* |[a.t0, a.t1] ∩ union(cpu[0..n))| in ns; cpu spans are disjoint and in time order. */
uint64_t sl__overlap_ns(sl__iv a, const sl__iv *cpu, int64_t n);
/* dst += src (counters and sums); then the derived fields of dst are recomputed. */
void sl__fetch_stats_add(sl_fetch_stats *dst, const sl_fetch_stats *src);
void sl__fetch_stats_derive(sl_fetch_stats *s);

uint64_t sl__now_ns(void);

#endif
