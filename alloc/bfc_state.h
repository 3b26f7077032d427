/* Private to alloc/bfc*.c: the arena's state (chunks, regions, bins, handles, the compaction
 * plan) and the small helpers that both the allocator (bfc.c) and compaction (bfc_compact.c)
 * use. The layout and its invariants are described at the top of bfc.c and checked by
 * sl__bfc_validate (bfc_impl.h); every function here runs with the arena's mutex held, except
 * lock/unlock themselves. */
#ifndef SL_BFC_STATE_H
#define SL_BFC_STATE_H

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"

#define NONE UINT32_MAX

enum {
    BIN_COUNT = 32,
    SPLIT_MIN_BYTES = SL_BFC_ALIGN,
    SPLIT_FRACTION = 16,
    HANDLE_INDEX_BITS = 24,
    HANDLE_REUSE_MIN = 64,
};
#define HANDLE_INDEX_MASK ((1u << HANDLE_INDEX_BITS) - 1u)
#define HANDLE_SLOT_LIMIT HANDLE_INDEX_MASK /* slots 0 .. 2^24 - 2 */
#define DEFAULT_REGION_BYTES (256ull << 20)

typedef enum chunk_state { CHUNK_UNUSED = 0, CHUNK_FREE = 1, CHUNK_USED = 2 } chunk_state;

typedef struct chunk {
    uint64_t off, size;       /* within the region; multiples of SL_BFC_ALIGN, size > 0 */
    uint64_t requested;       /* bytes asked for (used chunks); 0 otherwise */
    uint32_t prev, next;      /* address-order neighbours; for unused records next = free list */
    uint32_t bin_prev, bin_next; /* bin list links of a free chunk */
    uint32_t region;
    uint32_t handle;          /* handle slot of a used chunk; NONE otherwise */
    uint8_t state;            /* chunk_state */
    uint8_t pinned;           /* used chunks only */
    uint8_t moved;            /* used chunks, meaningful during a compaction only: this
                                 compaction has already moved the block */
} chunk;

typedef struct region {
    void *base;
    uint64_t size;
    uint32_t first;           /* lowest chunk */
} region;

/* Size-class bins: head[i] lists free chunks of bin i (unsorted, linked through bin_prev/next);
 * bit i of mask is set iff head[i] is non-empty. The arena has one set for every free chunk;
 * compaction borrows a second one (see fill_holes). */
typedef struct binset {
    uint32_t head[BIN_COUNT];
    uint32_t mask;
} binset;

/* Compaction's phase 1 plan: a run of consecutive movable blocks to move with one copy. */
typedef struct move_item {
    uint32_t first, last, blocks;
    uint64_t bytes, off;      /* total size; offset of `first` */
} move_item;

/* What a planned move is, for the message if it fails. */
typedef struct move_info {
    uint64_t blocks, bytes, from, to;  /* region offsets */
    uint32_t region;
    bool slide;                         /* phase 2 (else a hole fill) */
} move_info;

/* The arena's state that planning a compaction changes (see compact_locked). */
typedef struct snapshot {
    chunk *chunks;            /* copy of chunks[0, n) */
    uint32_t n, cap;          /* records copied; allocated */
    uint32_t *first;          /* regions[r].first */
    uint32_t first_cap;
    uint32_t chunk_free_head, chunk_unused;
    uint64_t chunk_count, free_chunk_count, free_bytes;
    binset bins;
} snapshot;

typedef struct handle_slot {
    uint32_t chunk;           /* NONE when the slot is free */
    uint32_t next_free;       /* FIFO of free slots */
    uint8_t gen;
} handle_slot;

struct sl_bfc {
    pthread_mutex_t mu;
    sl_bfc_backend be;
    void (*ctx_free)(void *ctx);   /* non-NULL when the arena owns be.ctx */
    sl_bfc_options opt;

    chunk *chunks;
    uint32_t chunk_cap, chunk_free_head, chunk_unused; /* unused = length of the record free list */

    region *regions;
    uint32_t region_count, region_cap;

    handle_slot *handles;
    uint32_t handle_cap, handle_used; /* slots [0, handle_used) have been handed out */
    uint32_t hfree_head, hfree_tail, hfree_count;
    uint8_t gen_salt;

    binset bins;

    move_item *items;         /* compaction scratch (kept between compactions) */
    uint32_t items_cap;
    sl_bfc_move *plan;        /* the moves of the compaction being planned, in order */
    move_info *plan_info;
    size_t plan_n, plan_cap;
    size_t plan_limit;        /* planning stops after this many moves */
    bool replay;              /* re-planning after a failure: check, do not record */
    size_t replay_mismatches;
    snapshot snap;

    uint64_t epoch;
    /* Maintained counters; validate recomputes them from the chunks. */
    uint64_t in_use_bytes, peak_in_use_bytes, requested_bytes, free_bytes, total_bytes;
    uint64_t chunk_count, free_chunk_count, live_blocks;
    uint64_t allocs, frees, failed_allocs, compactions, bytes_moved;
};

/* ---- small helpers --------------------------------------------------------------------- */

static inline void lock(const sl_bfc *a) { pthread_mutex_lock((pthread_mutex_t *)&a->mu); }
static inline void unlock(const sl_bfc *a) { pthread_mutex_unlock((pthread_mutex_t *)&a->mu); }

static inline uint32_t bin_index(uint64_t size)
{
    uint64_t units = size / SL_BFC_ALIGN; /* ≥ 1 for every chunk */
    uint32_t i = (uint32_t)(63 - __builtin_clzll(units));
    return i < BIN_COUNT - 1 ? i : BIN_COUNT - 1;
}

static inline uintptr_t chunk_addr(const sl_bfc *a, const chunk *c)
{
    return (uintptr_t)a->regions[c->region].base + (uintptr_t)c->off;
}

static inline void binset_init(binset *set)
{
    for (int i = 0; i < BIN_COUNT; i++) set->head[i] = NONE;
    set->mask = 0;
}

static inline void binset_insert(sl_bfc *a, binset *set, uint32_t ci)
{
    chunk *c = &a->chunks[ci];
    uint32_t b = bin_index(c->size);
    c->bin_prev = NONE;
    c->bin_next = set->head[b];
    if (set->head[b] != NONE) a->chunks[set->head[b]].bin_prev = ci;
    set->head[b] = ci;
    set->mask |= 1u << b;
}

static inline void binset_remove(sl_bfc *a, binset *set, uint32_t ci)
{
    chunk *c = &a->chunks[ci];
    uint32_t b = bin_index(c->size);
    if (c->bin_prev != NONE) a->chunks[c->bin_prev].bin_next = c->bin_next;
    else set->head[b] = c->bin_next;
    if (c->bin_next != NONE) a->chunks[c->bin_next].bin_prev = c->bin_prev;
    c->bin_prev = c->bin_next = NONE;
    if (set->head[b] == NONE) set->mask &= ~(1u << b);
}

static inline void bin_insert(sl_bfc *a, uint32_t ci) { binset_insert(a, &a->bins, ci); }
static inline void bin_remove(sl_bfc *a, uint32_t ci) { binset_remove(a, &a->bins, ci); }

/* Makes sure `n` unused chunk records are available (grows the array). */
static inline sl_status chunks_reserve(sl_bfc *a, uint32_t n, sl_error *err)
{
    uint32_t avail = a->chunk_unused;
    if (avail >= n) return SL_OK;
    uint64_t cap = a->chunk_cap ? (uint64_t)a->chunk_cap * 2 : 64;
    if (cap < (uint64_t)a->chunk_cap + n) cap = (uint64_t)a->chunk_cap + n;
    if (cap >= NONE) cap = NONE - 1;
    if (cap < (uint64_t)a->chunk_cap + (n - avail))
        return sl_error_set(err, SL_ERR_NOMEM, "bfc: chunk table full at %" PRIu32 " records",
                            a->chunk_cap);
    chunk *nc = realloc(a->chunks, (size_t)cap * sizeof *nc);
    if (!nc)
        return sl_error_set(err, SL_ERR_NOMEM, "bfc: cannot grow the chunk table to %" PRIu64
                            " records", cap);
    a->chunks = nc;
    /* Push the new records in reverse so low indices are used first. */
    for (uint64_t i = cap; i-- > a->chunk_cap;) {
        memset(&nc[i], 0, sizeof nc[i]);
        nc[i].state = CHUNK_UNUSED;
        nc[i].prev = nc[i].bin_prev = nc[i].bin_next = NONE;
        nc[i].handle = NONE;
        nc[i].next = a->chunk_free_head;
        a->chunk_free_head = (uint32_t)i;
    }
    a->chunk_unused += (uint32_t)(cap - a->chunk_cap);
    a->chunk_cap = (uint32_t)cap;
    return SL_OK;
}

/* Takes a record reserved by chunks_reserve. */
static inline uint32_t chunk_take(sl_bfc *a)
{
    uint32_t ci = a->chunk_free_head;
    a->chunk_free_head = a->chunks[ci].next;
    chunk *c = &a->chunks[ci];
    c->prev = c->next = c->bin_prev = c->bin_next = NONE;
    c->handle = NONE;
    c->requested = 0;
    c->pinned = 0;
    c->moved = 0;
    a->chunk_unused--;
    a->chunk_count++;
    return ci;
}

static inline void chunk_release(sl_bfc *a, uint32_t ci)
{
    chunk *c = &a->chunks[ci];
    c->state = CHUNK_UNUSED;
    c->prev = c->bin_prev = c->bin_next = NONE;
    c->handle = NONE;
    c->next = a->chunk_free_head;
    a->chunk_free_head = ci;
    a->chunk_unused++;
    a->chunk_count--;
}

/* Merges the free chunk `right` (the address successor of free `left`, both out of their
 * bins) into `left`. */
static inline void merge_into_left(sl_bfc *a, uint32_t left, uint32_t right)
{
    chunk *l = &a->chunks[left], *r = &a->chunks[right];
    l->size += r->size;
    l->next = r->next;
    if (r->next != NONE) a->chunks[r->next].prev = left;
    chunk_release(a, right);
    a->free_chunk_count--;
}

/* Smallest chunk of `set` with ≥ need bytes, ties by lowest address; NONE if there is none. */
static inline uint32_t best_fit_in(const sl_bfc *a, const binset *set, uint64_t need)
{
    uint32_t b = bin_index(need);
    uint32_t best = NONE;
    for (int pass = 0; pass < 2 && best == NONE; pass++) {
        if (pass == 1) {
            uint32_t higher = b + 1 < BIN_COUNT ? set->mask & ~((2u << b) - 1u) : 0;
            if (!higher) break;
            b = (uint32_t)__builtin_ctz(higher);
        }
        for (uint32_t ci = set->head[b]; ci != NONE; ci = a->chunks[ci].bin_next) {
            const chunk *c = &a->chunks[ci];
            if (c->size < need) continue;
            if (best == NONE || c->size < a->chunks[best].size ||
                (c->size == a->chunks[best].size && chunk_addr(a, c) < chunk_addr(a, &a->chunks[best])))
                best = ci;
        }
    }
    return best;
}

/* Phase 2 closes a gap only when the run after it is at most SLIDE_RATIO times the gap: at
 * most SLIDE_RATIO device copies and SLIDE_RATIO bytes moved per byte of free space joined. */
enum { SLIDE_RATIO = 8 };

/* Compaction with the mutex held (bfc_compact.c): `full` slides every run (out of memory). */
sl_status sl__bfc_compact_locked(sl_bfc *a, bool full, sl_bfc_compact_result *res,
                                 sl_error *err);

#endif
