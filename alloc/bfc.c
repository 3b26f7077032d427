/* alloc/bfc.c: best-fit-with-coalescing arena with copy-based compaction behind handles.
 *
 * Layout
 * - Regions come from the backend (one cudaMalloc, one NUMA slab, ...). Each region is tiled
 *   by chunks in address order, doubly linked (prev/next are indices into `chunks`, UINT32_MAX
 *   at the ends). Chunk records live in one growable array; unused records form a singly
 *   linked free list through `next`, so indices stay stable while records are reused.
 * - Free chunks sit in BIN_COUNT size-class bins: bin i holds sizes in [256 << i, 256 << (i+1)),
 *   the last bin everything from 256 << (BIN_COUNT-1) (= 512 GiB) up. Bins are unsorted
 *   doubly linked lists plus a bitmap of non-empty bins. Best fit: scan the request's own bin
 *   for the smallest adequate chunk; if none, every chunk of the next non-empty bin is
 *   adequate, and its smallest wins. Ties go to the lowest address, so placement is
 *   deterministic (tests check exact offsets).
 * - Split rule: a chunk of C bytes serving a request rounded to R is split when the remainder
 *   C - R is at least SPLIT_MIN_BYTES (256) and at least R / SPLIT_FRACTION (1/16 of the
 *   request). Below that the block keeps the slack (internal waste ≤ 6.25 %, reported as
 *   granted − requested), which avoids littering the arena with slivers next to big blocks.
 * - Handles: bits 31..24 generation, bits 23..0 slot index into the handle table, so at most
 *   2^24 − 1 = 16,777,215 live blocks (slot 0xFFFFFF is never used: with generation 0xFF it
 *   would spell SL_BLOCK_NONE). A slot's generation changes on every free, so a stale handle
 *   fails until that slot has been reused 256 times; freed slots queue FIFO and are reused only
 *   once HANDLE_REUSE_MIN of them wait, which pushes that out to ≥ 256 × 64 later frees.
 *   Generations start at a per-arena salt, so another arena's handle is usually refused too
 *   (a 1-in-256 chance per live slot is the limit of an 8-bit tag).
 *
 * Compaction aims at one large free chunk at the top of every region while moving each byte
 * about once, in few copies that never overlap (D2D copies must not; sliding a long run down
 * over a small gap used to take ceil(run / gap) pieces: 21,053 copies for 384 MiB in
 * `bench alloc`). Handles make block order irrelevant, so blocks may land anywhere lower in
 * their region. Per region, two phases:
 * 1. Fill holes from the top. `live` = the region's live bytes = where they would end if packed.
 *    The zone is the blocks that end above `live`, walking down from the top to the first
 *    pinned block; their bytes roughly equal the free bytes below them. Its maximal runs of
 *    adjacent blocks are the move items, placed best fit decreasing: the largest item first,
 *    into the smallest free chunk below the zone that holds it (ties: lowest address; items of
 *    equal size: higher address first), so large holes stay for large blocks and leftovers stay
 *    small; a run that fits nowhere whole goes back as its single blocks. An item lands at the
 *    front of its hole in one copy (source is live data, destination free space: no overlap);
 *    its old place becomes free and merges with its neighbours (destinations are only the free
 *    chunks that start below the zone). Each item is placed once, so every block moves at most
 *    once in this phase; items that fit nowhere stay.
 * 2. Slide what remains. Walking up from the base (a pinned block ends a stretch), the run of
 *    movable blocks after a free chunk slides down over it in one backend move — but only when
 *    the run is at most SLIDE_RATIO (8) times the gap: one copy when it is not longer than the
 *    gap, at most 8 pieces otherwise, never more than 8 bytes moved per byte of free space
 *    joined. This closes the gaps phase 1 leaves inside the zone (items that fit nowhere) and
 *    short gaps near the top. A small gap below a long run stays: closing it would move the
 *    whole run in ceil(run / gap) copies, far more work than the free space is worth. The
 *    trade-off is that such gaps (remainders of filled holes, slivers below runs of MiB) stay
 *    as fragmentation; `bench alloc` reports it. sl__bfc_check_compacted checks the result.
 *    Compaction on out-of-memory (compact_on_oom) is full: it slides every run whatever the
 *    ratio, since a failed allocation is the alternative.
 * Issuing: both phases of every region are planned first — each group becomes one entry of
 * the plan (one copy where it fits, the backend's pieces for a short slide) and the chunk map
 * is rewritten as if it had moved — then the whole plan goes to the backend in order, in one
 * move_batch where it has one (the device backend: one sl_device_copy_batch), and one sync
 * waits for it. Moves that depend on earlier ones (phase 2 slides blocks phase 1 placed) are
 * safe because the backend keeps the order.
 * Failure semantics: a backend move that fails must leave its source intact (phase 1 copies
 * write only free space; the device backend rolls back the pieces of a slide). The first
 * failure stops compaction: groups moved before it stay moved (epoch bumped), the failing one
 * and everything after stay where they were, the chunk map is valid either way — it is
 * restored from the copy taken before planning and re-planned up to the failing move (see
 * compact_locked). The moves are then synced; a failure of that final sync is an asynchronous
 * device error after which moved blocks' contents are undefined (CUDA errors are sticky; the
 * device is unusable anyway) and the status says so.
 *
 * Invariants (sl__bfc_validate):
 *   Σ chunk sizes of region r == regions[r].size, offsets contiguous from 0, links agree;
 *   no two neighbouring chunks are both free; free ⇔ in bin bin_index(size); offsets and
 *   sizes are multiples of 256; used chunk c: handles[c.handle].chunk == c;
 *   live slots == live_blocks; in_use == Σ used sizes; free == Σ free sizes;
 *   requested == Σ requested of used chunks; total == Σ region sizes.
 *
 * Locking: one mutex per arena around every entry point (const ones included).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void lock(const sl_bfc *a) { pthread_mutex_lock((pthread_mutex_t *)&a->mu); }
static void unlock(const sl_bfc *a) { pthread_mutex_unlock((pthread_mutex_t *)&a->mu); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t bin_index(uint64_t size)
{
    uint64_t units = size / SL_BFC_ALIGN; /* ≥ 1 for every chunk */
    uint32_t i = (uint32_t)(63 - __builtin_clzll(units));
    return i < BIN_COUNT - 1 ? i : BIN_COUNT - 1;
}

static uintptr_t chunk_addr(const sl_bfc *a, const chunk *c)
{
    return (uintptr_t)a->regions[c->region].base + (uintptr_t)c->off;
}

static void binset_init(binset *set)
{
    for (int i = 0; i < BIN_COUNT; i++) set->head[i] = NONE;
    set->mask = 0;
}

static void binset_insert(sl_bfc *a, binset *set, uint32_t ci)
{
    chunk *c = &a->chunks[ci];
    uint32_t b = bin_index(c->size);
    c->bin_prev = NONE;
    c->bin_next = set->head[b];
    if (set->head[b] != NONE) a->chunks[set->head[b]].bin_prev = ci;
    set->head[b] = ci;
    set->mask |= 1u << b;
}

static void binset_remove(sl_bfc *a, binset *set, uint32_t ci)
{
    chunk *c = &a->chunks[ci];
    uint32_t b = bin_index(c->size);
    if (c->bin_prev != NONE) a->chunks[c->bin_prev].bin_next = c->bin_next;
    else set->head[b] = c->bin_next;
    if (c->bin_next != NONE) a->chunks[c->bin_next].bin_prev = c->bin_prev;
    c->bin_prev = c->bin_next = NONE;
    if (set->head[b] == NONE) set->mask &= ~(1u << b);
}

static void bin_insert(sl_bfc *a, uint32_t ci) { binset_insert(a, &a->bins, ci); }
static void bin_remove(sl_bfc *a, uint32_t ci) { binset_remove(a, &a->bins, ci); }

/* Makes sure `n` unused chunk records are available (grows the array). */
static sl_status chunks_reserve(sl_bfc *a, uint32_t n, sl_error *err)
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
static uint32_t chunk_take(sl_bfc *a)
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

static void chunk_release(sl_bfc *a, uint32_t ci)
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
static void merge_into_left(sl_bfc *a, uint32_t left, uint32_t right)
{
    chunk *l = &a->chunks[left], *r = &a->chunks[right];
    l->size += r->size;
    l->next = r->next;
    if (r->next != NONE) a->chunks[r->next].prev = left;
    chunk_release(a, right);
    a->free_chunk_count--;
}

/* ---- handles ---------------------------------------------------------------------------- */

static sl_block handle_encode(uint32_t slot, uint8_t gen)
{
    return ((uint32_t)gen << HANDLE_INDEX_BITS) | slot;
}

/* The chunk of a live handle, or NONE. */
static uint32_t handle_chunk(const sl_bfc *a, sl_block b)
{
    uint32_t slot = b & HANDLE_INDEX_MASK;
    if (b == SL_BLOCK_NONE || slot >= a->handle_used) return NONE;
    const handle_slot *h = &a->handles[slot];
    if (h->chunk == NONE || h->gen != (uint8_t)(b >> HANDLE_INDEX_BITS)) return NONE;
    return h->chunk;
}

static sl_status bad_handle(const sl_bfc *a, sl_block b, const char *what, sl_error *err)
{
    uint32_t slot = b & HANDLE_INDEX_MASK;
    unsigned gen = b >> HANDLE_INDEX_BITS;
    if (slot >= a->handle_used)
        return sl_error_set(err, SL_ERR_INVALID,
                            "bfc: %s of foreign handle 0x%08" PRIx32 ": slot %" PRIu32
                            " is beyond the %" PRIu32 " slots this arena has handed out",
                            what, b, slot, a->handle_used);
    const handle_slot *h = &a->handles[slot];
    return sl_error_set(err, SL_ERR_INVALID,
                        "bfc: %s of stale or foreign handle 0x%08" PRIx32 ": slot %" PRIu32
                        " has generation %u (%s), the handle carries %u",
                        what, b, slot, (unsigned)h->gen, h->chunk == NONE ? "free" : "live", gen);
}

/* Makes sure handle_take will succeed. */
static sl_status handles_reserve(sl_bfc *a, sl_error *err)
{
    if (a->hfree_count >= HANDLE_REUSE_MIN || a->handle_used < a->handle_cap) return SL_OK;
    if (a->handle_cap >= HANDLE_SLOT_LIMIT) {
        if (a->hfree_count > 0) return SL_OK;
        return sl_error_set(err, SL_ERR_RANGE,
                            "bfc: handle table full: %" PRIu64 " live blocks is the limit of "
                            "24-bit handle slots", a->live_blocks);
    }
    uint64_t cap = a->handle_cap ? (uint64_t)a->handle_cap * 2 : 64;
    if (cap > HANDLE_SLOT_LIMIT) cap = HANDLE_SLOT_LIMIT;
    handle_slot *nh = realloc(a->handles, (size_t)cap * sizeof *nh);
    if (!nh) {
        if (a->hfree_count > 0) return SL_OK;
        return sl_error_set(err, SL_ERR_NOMEM, "bfc: cannot grow the handle table to %" PRIu64
                            " slots", cap);
    }
    a->handles = nh;
    a->handle_cap = (uint32_t)cap;
    return SL_OK;
}

static sl_block handle_take(sl_bfc *a, uint32_t ci)
{
    uint32_t slot;
    if (a->hfree_count >= HANDLE_REUSE_MIN || (a->handle_used >= a->handle_cap && a->hfree_count)) {
        slot = a->hfree_head;
        a->hfree_head = a->handles[slot].next_free;
        if (a->hfree_head == NONE) a->hfree_tail = NONE;
        a->hfree_count--;
    } else {
        slot = a->handle_used++;
        a->handles[slot].gen = a->gen_salt;
    }
    a->handles[slot].chunk = ci;
    a->handles[slot].next_free = NONE;
    a->chunks[ci].handle = slot;
    return handle_encode(slot, a->handles[slot].gen);
}

static void handle_release(sl_bfc *a, uint32_t slot)
{
    handle_slot *h = &a->handles[slot];
    h->chunk = NONE;
    h->gen++;
    h->next_free = NONE;
    if (a->hfree_tail != NONE) a->handles[a->hfree_tail].next_free = slot;
    else a->hfree_head = slot;
    a->hfree_tail = slot;
    a->hfree_count++;
}

/* ---- creation ---------------------------------------------------------------------------- */

sl_status sl__bfc_create_owned(const sl_bfc_backend *backend, const sl_bfc_options *opt,
                               void (*ctx_free)(void *ctx), sl_bfc **out, sl_error *err)
{
    if (out) *out = NULL;
    sl_status s = SL_OK;
    if (!backend || !out)
        s = sl_error_set(err, SL_ERR_INVALID, "bfc: create needs a backend and an out pointer");
    else if (!backend->region_alloc || !backend->region_free || !backend->move)
        s = sl_error_set(err, SL_ERR_INVALID,
                         "bfc: backend '%s' lacks region_alloc, region_free or move",
                         backend->kind ? backend->kind : "?");
    sl_bfc_options o = {0};
    if (!s && opt) o = *opt;
    if (!s && (!(o.compact_threshold >= 0.0) || o.compact_threshold > 1.0))
        s = sl_error_set(err, SL_ERR_INVALID,
                         "bfc: compact_threshold %g is outside [0, 1] (0 turns it off)",
                         o.compact_threshold);
    if (!s && o.region_bytes > UINT64_MAX - (SL_BFC_ALIGN - 1))
        s = sl_error_set(err, SL_ERR_INVALID, "bfc: region_bytes %" PRIu64 " is too large",
                         o.region_bytes);
    sl_bfc *a = NULL;
    if (!s) {
        a = calloc(1, sizeof *a);
        if (!a) s = sl_error_set(err, SL_ERR_NOMEM, "bfc: out of memory creating an arena");
    }
    if (!s && pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        a = NULL;
        s = sl_error_set(err, SL_ERR_NOMEM, "bfc: pthread_mutex_init failed");
    }
    if (s) {
        if (ctx_free && backend) ctx_free(backend->ctx);
        return s;
    }
    if (o.region_bytes == 0) o.region_bytes = DEFAULT_REGION_BYTES;
    o.region_bytes = (o.region_bytes + SL_BFC_ALIGN - 1) / SL_BFC_ALIGN * SL_BFC_ALIGN;
    a->be = *backend;
    a->ctx_free = ctx_free;
    a->opt = o;
    a->chunk_free_head = NONE;
    a->hfree_head = a->hfree_tail = NONE;
    binset_init(&a->bins);
    /* Per-arena generation salt from the arena's address (no global state), so handles of two
     * arenas rarely coincide. */
    uint64_t h = (uint64_t)(uintptr_t)a * 0x9E3779B97F4A7C15ull;
    a->gen_salt = (uint8_t)(h >> 56);
    *out = a;
    return SL_OK;
}

sl_status sl_bfc_create(const sl_bfc_backend *backend, const sl_bfc_options *opt, sl_bfc **out,
                        sl_error *err)
{
    return sl__bfc_create_owned(backend, opt, NULL, out, err);
}

void sl_bfc_destroy(sl_bfc *a)
{
    if (!a) return;
    if (a->region_count && a->be.sync) {
        sl_error e;
        (void)a->be.sync(a->be.ctx, &e); /* regions must be idle before they are freed */
    }
    for (uint32_t r = 0; r < a->region_count; r++) a->be.region_free(a->be.ctx, a->regions[r].base);
    if (a->ctx_free) a->ctx_free(a->be.ctx);
    free(a->chunks);
    free(a->regions);
    free(a->handles);
    free(a->items);
    free(a->plan);
    free(a->plan_info);
    free(a->snap.chunks);
    free(a->snap.first);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* ---- allocation -------------------------------------------------------------------------- */

/* Smallest chunk of `set` with ≥ need bytes, ties by lowest address; NONE if there is none. */
static uint32_t best_fit_in(const sl_bfc *a, const binset *set, uint64_t need)
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

/* Smallest free chunk of ≥ need bytes, ties by lowest address; NONE if there is none. */
static uint32_t best_fit(const sl_bfc *a, uint64_t need) { return best_fit_in(a, &a->bins, need); }

static uint64_t largest_free(const sl_bfc *a)
{
    if (!a->bins.mask) return 0;
    uint32_t b = 31u - (uint32_t)__builtin_clz(a->bins.mask);
    uint64_t m = 0;
    for (uint32_t ci = a->bins.head[b]; ci != NONE; ci = a->chunks[ci].bin_next)
        if (a->chunks[ci].size > m) m = a->chunks[ci].size;
    return m;
}

static double fragmentation(const sl_bfc *a)
{
    if (!a->free_bytes) return 0.0;
    return 1.0 - (double)largest_free(a) / (double)a->free_bytes;
}

/* Adds a region big enough for `need` bytes; fills why[] on failure. */
static sl_status region_add(sl_bfc *a, uint64_t need, char *why, size_t why_len)
{
    uint64_t size = a->opt.region_bytes > need ? a->opt.region_bytes : need;
    if (a->opt.max_bytes) {
        uint64_t room = a->total_bytes < a->opt.max_bytes ? a->opt.max_bytes - a->total_bytes : 0;
        room = room / SL_BFC_ALIGN * SL_BFC_ALIGN;
        if (room < need) {
            snprintf(why, why_len, "a new region of %" PRIu64 " bytes would pass max_bytes %" PRIu64
                     " (%" PRIu64 " bytes left)", need, a->opt.max_bytes, room);
            return SL_ERR_NOMEM;
        }
        if (size > room) size = room; /* the last region takes what the budget leaves */
    }
    sl_error e;
    sl_error_clear(&e);
    if (a->region_count == a->region_cap) {
        uint32_t cap = a->region_cap ? a->region_cap * 2 : 4;
        region *nr = realloc(a->regions, (size_t)cap * sizeof *nr);
        if (!nr) {
            snprintf(why, why_len, "out of host memory for the region table");
            return SL_ERR_NOMEM;
        }
        a->regions = nr;
        a->region_cap = cap;
    }
    if (chunks_reserve(a, 1, &e)) {
        snprintf(why, why_len, "%s", e.msg);
        return SL_ERR_NOMEM;
    }
    void *base = NULL;
    sl_status s = a->be.region_alloc(a->be.ctx, size, &base, &e);
    if (s || !base) {
        snprintf(why, why_len, "%s region allocation of %" PRIu64 " bytes failed: %s",
                 a->be.kind ? a->be.kind : "backend", size, s ? e.msg : "returned NULL");
        return SL_ERR_NOMEM;
    }
    if ((uintptr_t)base % SL_BFC_ALIGN) {
        a->be.region_free(a->be.ctx, base);
        snprintf(why, why_len, "backend returned region base %p, not %d-byte aligned", base,
                 SL_BFC_ALIGN);
        return SL_ERR_NOMEM;
    }
    uint32_t r = a->region_count++;
    uint32_t ci = chunk_take(a);
    chunk *c = &a->chunks[ci];
    c->off = 0;
    c->size = size;
    c->region = r;
    c->state = CHUNK_FREE;
    a->regions[r] = (region){.base = base, .size = size, .first = ci};
    bin_insert(a, ci);
    a->total_bytes += size;
    a->free_bytes += size;
    a->free_chunk_count++;
    return SL_OK;
}

/* Hands out free chunk ci for `need` bytes (requested `req`), splitting per the rule above. */
static sl_block take_chunk(sl_bfc *a, uint32_t ci, uint64_t need, uint64_t req, uint32_t flags)
{
    bin_remove(a, ci);
    uint64_t rem = a->chunks[ci].size - need;
    sl_error e;
    if (rem >= SPLIT_MIN_BYTES && rem >= need / SPLIT_FRACTION && chunks_reserve(a, 1, &e) == SL_OK) {
        uint32_t ni = chunk_take(a); /* may move a->chunks: index again below */
        chunk *c = &a->chunks[ci], *n = &a->chunks[ni];
        n->off = c->off + need;
        n->size = rem;
        n->region = c->region;
        n->state = CHUNK_FREE;
        n->prev = ci;
        n->next = c->next;
        if (c->next != NONE) a->chunks[c->next].prev = ni;
        c->next = ni;
        c->size = need;
        bin_insert(a, ni);
        a->free_chunk_count++;
    }
    chunk *c = &a->chunks[ci];
    c->state = CHUNK_USED;
    c->requested = req;
    c->pinned = (flags & SL_BFC_PINNED) != 0;
    a->free_chunk_count--;
    a->free_bytes -= c->size;
    a->in_use_bytes += c->size;
    a->requested_bytes += req;
    if (a->in_use_bytes > a->peak_in_use_bytes) a->peak_in_use_bytes = a->in_use_bytes;
    a->live_blocks++;
    a->allocs++;
    return handle_take(a, ci);
}

static sl_status compact_locked(sl_bfc *a, bool full, sl_bfc_compact_result *res, sl_error *err);

sl_status sl_bfc_alloc(sl_bfc *a, uint64_t bytes, uint32_t flags, sl_block *out, sl_error *err)
{
    if (out) *out = SL_BLOCK_NONE;
    if (!a || !out) return sl_error_set(err, SL_ERR_INVALID, "bfc: alloc needs an arena and out");
    if (bytes == 0) return sl_error_set(err, SL_ERR_INVALID, "bfc: allocation of 0 bytes");
    if (flags & ~(uint32_t)SL_BFC_PINNED)
        return sl_error_set(err, SL_ERR_INVALID, "bfc: unknown allocation flags 0x%" PRIx32, flags);
    lock(a);
    char why[SL_ERROR_MSG_BYTES / 2] = "";   /* why growth failed */
    char note[160] = "";                     /* what compaction did about it */
    uint64_t need = (bytes + SL_BFC_ALIGN - 1) / SL_BFC_ALIGN * SL_BFC_ALIGN;
    if (bytes > UINT64_MAX - (SL_BFC_ALIGN - 1)) {
        need = 0;
        snprintf(why, sizeof why, "the request does not fit in 64 bits after rounding");
    } else {
        sl_status s = handles_reserve(a, err);
        if (s) {
            a->failed_allocs++;
            unlock(a);
            return s;
        }
    }
    for (int attempt = 0; need && attempt < 2; attempt++) {
        uint32_t ci = best_fit(a, need);
        if (ci == NONE && region_add(a, need, why, sizeof why) == SL_OK) ci = best_fit(a, need);
        if (ci != NONE) {
            *out = take_chunk(a, ci, need, bytes, flags);
            unlock(a);
            return SL_OK;
        }
        if (!a->opt.compact_on_oom && a->free_bytes >= need)
            snprintf(note, sizeof note, "; %" PRIu64 " bytes are free but fragmented "
                     "(compact_on_oom is off)", a->free_bytes);
        if (attempt == 1 || !a->opt.compact_on_oom || a->free_bytes < need) break;
        /* The free space would fit if it were in one piece: compact, then retry once. */
        sl_bfc_compact_result cr;
        sl_error ce;
        sl_status cs = compact_locked(a, true, &cr, &ce);
        if (cs) {
            a->failed_allocs++;
            unlock(a);
            return sl_error_set(err, cs, "bfc: allocation of %" PRIu64
                                " bytes failed and the compaction on out-of-memory failed: %s",
                                bytes, ce.msg);
        }
        snprintf(note, sizeof note, "; compaction on out-of-memory moved %" PRIu64
                 " bytes and did not help", cr.bytes_moved);
    }
    a->failed_allocs++;
    sl_status r = sl_error_set(err, SL_ERR_NOMEM,
                               "bfc: cannot allocate %" PRIu64 " bytes (%" PRIu64
                               " rounded): free %" PRIu64 " bytes in %" PRIu64
                               " chunks, largest free chunk %" PRIu64 " bytes, %" PRIu64
                               " bytes in %" PRIu32 " regions (max_bytes %" PRIu64 "): %s%s",
                               bytes, need, a->free_bytes, a->free_chunk_count, largest_free(a),
                               a->total_bytes, a->region_count, a->opt.max_bytes, why, note);
    unlock(a);
    return r;
}

sl_status sl_bfc_free(sl_bfc *a, sl_block b, sl_error *err)
{
    if (b == SL_BLOCK_NONE) return SL_OK;
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: free with a NULL arena");
    lock(a);
    uint32_t ci = handle_chunk(a, b);
    if (ci == NONE) {
        sl_status s = bad_handle(a, b, "free", err);
        unlock(a);
        return s;
    }
    chunk *c = &a->chunks[ci];
    handle_release(a, c->handle);
    a->in_use_bytes -= c->size;
    a->requested_bytes -= c->requested;
    a->free_bytes += c->size;
    a->live_blocks--;
    a->frees++;
    a->free_chunk_count++;
    c->state = CHUNK_FREE;
    c->requested = 0;
    c->pinned = 0;
    c->handle = NONE;
    if (c->prev != NONE && a->chunks[c->prev].state == CHUNK_FREE) {
        uint32_t p = c->prev;
        bin_remove(a, p);
        merge_into_left(a, p, ci);
        ci = p;
    }
    c = &a->chunks[ci];
    if (c->next != NONE && a->chunks[c->next].state == CHUNK_FREE) {
        uint32_t n = c->next;
        bin_remove(a, n);
        merge_into_left(a, ci, n);
    }
    bin_insert(a, ci);
    sl_status s = SL_OK;
    if (a->opt.compact_threshold > 0 && fragmentation(a) > a->opt.compact_threshold) {
        sl_bfc_compact_result cr;
        sl_error ce;
        if (compact_locked(a, false, &cr, &ce))
            s = sl_error_set(err, ce.code,
                             "bfc: block 0x%08" PRIx32 " was freed, but the automatic compaction "
                             "that followed failed: %s", b, ce.msg);
    }
    unlock(a);
    return s;
}

void *sl_bfc_ptr(const sl_bfc *a, sl_block b)
{
    if (!a) return NULL;
    lock(a);
    uint32_t ci = handle_chunk(a, b);
    void *p = ci == NONE ? NULL : (void *)chunk_addr(a, &a->chunks[ci]);
    unlock(a);
    return p;
}

uint64_t sl_bfc_size(const sl_bfc *a, sl_block b)
{
    if (!a) return 0;
    lock(a);
    uint32_t ci = handle_chunk(a, b);
    uint64_t n = ci == NONE ? 0 : a->chunks[ci].size;
    unlock(a);
    return n;
}

sl_status sl_bfc_set_pinned(sl_bfc *a, sl_block b, bool pinned, sl_error *err)
{
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: set_pinned with a NULL arena");
    lock(a);
    uint32_t ci = handle_chunk(a, b);
    sl_status s = SL_OK;
    if (ci == NONE) s = bad_handle(a, b, "set_pinned", err);
    else a->chunks[ci].pinned = pinned;
    unlock(a);
    return s;
}

uint64_t sl_bfc_epoch(const sl_bfc *a)
{
    if (!a) return 0;
    lock(a);
    uint64_t e = a->epoch;
    unlock(a);
    return e;
}

/* ---- compaction -------------------------------------------------------------------------- */

/* Phase 2 closes a gap only when the run after it is at most SLIDE_RATIO times the gap: at
 * most SLIDE_RATIO device copies and SLIDE_RATIO bytes moved per byte of free space joined. */
enum { SLIDE_RATIO = 8 };

static bool plan_full(const sl_bfc *a) { return a->plan_n >= a->plan_limit; }

/* Appends a move to the plan (the caller then rewrites the chunk map as if it had happened).
 * When replaying, the move must be the one recorded at that position before. */
static sl_status plan_add(sl_bfc *a, uint32_t r, uint64_t from, uint64_t to, uint64_t bytes,
                          uint64_t blocks, bool slide, sl_error *err)
{
    char *base = a->regions[r].base;
    sl_bfc_move m = {.dst = base + to, .src = base + from, .bytes = bytes};
    move_info mi = {.blocks = blocks, .bytes = bytes, .from = from, .to = to, .region = r,
                    .slide = slide};
    if (a->replay) {
        const sl_bfc_move *o = &a->plan[a->plan_n];
        a->replay_mismatches += o->dst != m.dst || o->src != m.src || o->bytes != m.bytes;
        a->plan_info[a->plan_n++] = mi;
        return SL_OK;
    }
    if (a->plan_n == a->plan_cap) {
        size_t cap = a->plan_cap ? a->plan_cap * 2 : 64;
        sl_bfc_move *np = realloc(a->plan, cap * sizeof *np);
        if (np) a->plan = np;
        move_info *ni = np ? realloc(a->plan_info, cap * sizeof *ni) : NULL;
        if (ni) a->plan_info = ni;
        if (!np || !ni)
            return sl_error_set(err, SL_ERR_NOMEM, "bfc: compaction: out of host memory "
                                "planning %zu moves", cap);
        a->plan_cap = cap;
    }
    a->plan[a->plan_n] = m;
    a->plan_info[a->plan_n++] = mi;
    return SL_OK;
}

/* Marks the chunks [first .. last] as moved by this compaction; returns how many were not yet
 * (a block slid in phase 2 after phase 1 placed it counts once in blocks_moved). */
static uint64_t mark_moved(sl_bfc *a, uint32_t first, uint32_t last)
{
    uint64_t fresh = 0;
    for (uint32_t ci = first;; ci = a->chunks[ci].next) {
        fresh += !a->chunks[ci].moved;
        a->chunks[ci].moved = 1;
        if (ci == last) break;
    }
    return fresh;
}

/* Phase 1 bookkeeping: while region r is planned, its free chunks that start below
 * `zone_start` (the destinations) sit in `low`, a bin set of their own, so best_fit_in looks at
 * nothing else; every other free chunk stays in the arena's bins. */
typedef struct fill_state {
    binset low;
    uint64_t zone_start;
} fill_state;

static void free_insert(sl_bfc *a, fill_state *fs, uint32_t ci)
{
    binset_insert(a, a->chunks[ci].off < fs->zone_start ? &fs->low : &a->bins, ci);
}

static void free_remove(sl_bfc *a, fill_state *fs, uint32_t ci)
{
    binset_remove(a, a->chunks[ci].off < fs->zone_start ? &fs->low : &a->bins, ci);
}

/* Plans moving the consecutive movable used chunks [x .. c] (`blocks` of them, `bytes` in
 * all, in the zone) into the free chunk h of `low` (≥ bytes) as one copy — source and
 * destination cannot overlap: one is live data, the other lies in a free chunk — and rewrites
 * the chunk map: the blocks take the front of h, h keeps the rest, and a free chunk takes their
 * old place, merged with its free neighbours. */
static sl_status move_group(sl_bfc *a, fill_state *fs, uint32_t h, uint32_t x, uint32_t c,
                            uint64_t bytes, uint32_t blocks, sl_error *err)
{
    /* Whatever can fail comes before the map changes, so a failure leaves it as it was. */
    sl_status s = chunks_reserve(a, 1, err);
    if (s) return s;
    uint32_t r = a->chunks[h].region;
    region *rg = &a->regions[r];
    uint64_t from = a->chunks[x].off, to = a->chunks[h].off;
    s = plan_add(a, r, from, to, bytes, blocks, false, err);
    if (s) return s;
    uint32_t v = chunk_take(a);
    chunk *ch = a->chunks; /* stable from here on: no more records are taken */
    uint32_t p = ch[x].prev, n = ch[c].next; /* p != NONE: h lies below x */
    ch[v].off = from;
    ch[v].size = bytes;
    ch[v].region = ch[h].region;
    ch[v].state = CHUNK_FREE;
    ch[v].prev = p;
    ch[v].next = n;
    ch[p].next = v;
    if (n != NONE) ch[n].prev = v;
    a->free_chunk_count++;
    a->free_bytes += bytes;

    free_remove(a, fs, h);
    uint32_t hp = ch[h].prev;
    for (uint32_t k = x;; k = ch[k].next) {
        ch[k].off -= from - to;
        ch[k].moved = 1;
        if (k == c) break;
    }
    ch[x].prev = hp;
    if (hp != NONE) ch[hp].next = x;
    else rg->first = x;
    ch[h].off += bytes;
    ch[h].size -= bytes;
    a->free_bytes -= bytes;
    if (ch[h].size) {
        ch[c].next = h;
        ch[h].prev = c;
        free_insert(a, fs, h);
    } else { /* exact fit: h disappears (it has a successor: v lies above) */
        uint32_t hn = ch[h].next;
        ch[c].next = hn;
        ch[hn].prev = c;
        chunk_release(a, h);
        a->free_chunk_count--;
    }
    if (ch[v].prev != NONE && ch[ch[v].prev].state == CHUNK_FREE) {
        uint32_t l = ch[v].prev;
        free_remove(a, fs, l);
        merge_into_left(a, l, v);
        v = l;
    }
    if (ch[v].next != NONE && ch[ch[v].next].state == CHUNK_FREE) {
        uint32_t r = ch[v].next;
        free_remove(a, fs, r);
        merge_into_left(a, v, r);
    }
    free_insert(a, fs, v);
    return SL_OK;
}

/* Max-heap of move items: more bytes first, ties to the higher address (deterministic). */
static bool item_before(const move_item *x, const move_item *y)
{
    return x->bytes != y->bytes ? x->bytes > y->bytes : x->off > y->off;
}

static void heap_push(move_item *h, uint32_t *n, move_item it)
{
    uint32_t i = (*n)++;
    while (i > 0 && item_before(&it, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = it;
}

static move_item heap_pop(move_item *h, uint32_t *n)
{
    move_item top = h[0], last = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= *n) break;
        if (k + 1 < *n && item_before(&h[k + 1], &h[k])) k++;
        if (!item_before(&h[k], &last)) break;
        h[i] = h[k];
        i = k;
    }
    if (*n) h[i] = last;
    return top;
}

/* Phase 1 for region r (see the file comment). */
static sl_status fill_holes(sl_bfc *a, uint32_t r, sl_bfc_compact_result *res, sl_error *err)
{
    uint64_t region_free = 0;
    uint32_t top = NONE, zone_blocks = 0;
    for (uint32_t ci = a->regions[r].first; ci != NONE; ci = a->chunks[ci].next) {
        a->chunks[ci].moved = 0;
        if (a->chunks[ci].state == CHUNK_FREE) region_free += a->chunks[ci].size;
        top = ci;
    }
    /* The zone: the blocks that end above `live`, where the region's live bytes would end if it
     * were packed — down to the first pinned block (below one, free space gathers under it in
     * phase 2 instead; moving blocks from there into holes lower down only made slivers). */
    uint64_t live = a->regions[r].size - region_free;
    fill_state fs = {.zone_start = a->regions[r].size};
    for (uint32_t ci = top; ci != NONE; ci = a->chunks[ci].prev) {
        const chunk *c = &a->chunks[ci];
        if (c->state == CHUNK_FREE) continue;
        if (c->pinned || c->off + c->size <= live) break;
        zone_blocks++;
        fs.zone_start = c->off;
    }
    if (!zone_blocks) return SL_OK;
    if (zone_blocks > a->items_cap) {
        move_item *ni = realloc(a->items, (size_t)zone_blocks * sizeof *ni);
        if (!ni)
            return sl_error_set(err, SL_ERR_NOMEM, "bfc: compaction of region %" PRIu32
                                ": out of host memory planning %" PRIu32 " moves", r, zone_blocks);
        a->items = ni;
        a->items_cap = zone_blocks;
    }
    /* Items: the zone's maximal runs of adjacent blocks (each one copy if a hole holds it). */
    move_item *heap = a->items;
    uint32_t n = 0;
    binset_init(&fs.low);
    for (uint32_t ci = a->regions[r].first; ci != NONE; ci = a->chunks[ci].next) {
        const chunk *c = &a->chunks[ci];
        if (c->off < fs.zone_start) {
            if (c->state == CHUNK_FREE) {
                bin_remove(a, ci);
                binset_insert(a, &fs.low, ci);
            }
            continue;
        }
        if (c->state == CHUNK_FREE || c->pinned) continue;
        move_item it = {.first = ci, .last = ci, .blocks = 1, .bytes = c->size, .off = c->off};
        while (it.last != top && a->chunks[a->chunks[it.last].next].state == CHUNK_USED &&
               !a->chunks[a->chunks[it.last].next].pinned) {
            it.last = a->chunks[it.last].next;
            it.bytes += a->chunks[it.last].size;
            it.blocks++;
        }
        heap_push(heap, &n, it);
        ci = it.last;
    }
    /* Best fit decreasing: the largest item first, into the smallest hole that holds it, so
     * large holes stay for large blocks. A run that fits nowhere whole goes back as its blocks
     * (fewer heap entries than zone blocks are ever live: a run of k makes k after leaving). */
    sl_status s = SL_OK;
    while (n && !plan_full(a)) {
        move_item it = heap_pop(heap, &n);
        uint32_t hole = best_fit_in(a, &fs.low, it.bytes);
        if (hole == NONE) {
            if (it.blocks > 1)
                for (uint32_t ci = it.first;; ci = a->chunks[ci].next) {
                    const chunk *c = &a->chunks[ci];
                    heap_push(heap, &n, (move_item){.first = ci, .last = ci, .blocks = 1,
                                                    .bytes = c->size, .off = c->off});
                    if (ci == it.last) break;
                }
            continue;
        }
        s = move_group(a, &fs, hole, it.first, it.last, it.bytes, it.blocks, err);
        if (s) break;
        res->bytes_moved += it.bytes;
        res->blocks_moved += it.blocks;
    }
    for (uint32_t b = 0; b < BIN_COUNT; b++)
        while (fs.low.head[b] != NONE) {
            uint32_t ci = fs.low.head[b];
            binset_remove(a, &fs.low, ci);
            bin_insert(a, ci);
        }
    return s;
}

/* Plans moving the run [first .. last] of used, unpinned chunks down over the free chunk
 * `hole` right before it, then relinks the hole after the run and merges it with a free
 * successor. */
static sl_status slide_run(sl_bfc *a, uint32_t hole, uint32_t first, uint32_t last,
                           uint64_t run_bytes, uint64_t blocks, sl_error *err)
{
    chunk *h = &a->chunks[hole];
    region *rg = &a->regions[h->region];
    uint64_t d = h->size;
    sl_status s = plan_add(a, h->region, a->chunks[first].off, h->off, run_bytes, blocks, true, err);
    if (s) return s;
    h = &a->chunks[hole];
    bin_remove(a, hole);
    for (uint32_t ci = first;; ci = a->chunks[ci].next) {
        a->chunks[ci].off -= d;
        if (ci == last) break;
    }
    uint32_t before = h->prev, after = a->chunks[last].next;
    a->chunks[first].prev = before;
    if (before != NONE) a->chunks[before].next = first;
    else rg->first = first;
    h->prev = last;
    h->next = after;
    h->off = a->chunks[last].off + a->chunks[last].size;
    a->chunks[last].next = hole;
    if (after != NONE) {
        a->chunks[after].prev = hole;
        if (a->chunks[after].state == CHUNK_FREE) {
            bin_remove(a, after);
            merge_into_left(a, hole, after);
        }
    }
    bin_insert(a, hole);
    return SL_OK;
}

/* Phase 2 for region r: walk up from the base keeping `hole`, the free chunk right before the
 * current one (at most one: free neighbours merge); slide the run of movable blocks after it
 * down over it when that is cheap enough (always when `full`), so the hole moves up, merges with
 * the next free chunk and grows. A pinned block ends the stretch; so does a run too long for
 * its hole, which keeps that hole where it is. */
static sl_status slide_region(sl_bfc *a, uint32_t r, bool full, sl_bfc_compact_result *res,
                              sl_error *err)
{
    uint32_t hole = NONE;
    uint32_t ci = a->regions[r].first;
    while (ci != NONE && !plan_full(a)) {
        const chunk *c = &a->chunks[ci];
        if (c->state == CHUNK_FREE) {
            hole = ci;
            ci = c->next;
            continue;
        }
        if (c->pinned || hole == NONE) {
            hole = NONE;
            ci = c->next;
            continue;
        }
        uint32_t last = ci;
        uint64_t run_bytes = c->size, blocks = 1;
        for (uint32_t n = c->next; n != NONE && a->chunks[n].state == CHUNK_USED &&
                                   !a->chunks[n].pinned;
             n = a->chunks[n].next) {
            last = n;
            run_bytes += a->chunks[n].size;
            blocks++;
        }
        uint64_t gap = a->chunks[hole].size;
        uint64_t pieces = (run_bytes - 1) / gap + 1; /* device copies of the slide */
        if (!full && pieces > SLIDE_RATIO) {
            hole = NONE;
            ci = a->chunks[last].next;
            continue;
        }
        sl_status s = slide_run(a, hole, ci, last, run_bytes, blocks, err);
        if (s) return s;
        res->bytes_moved += run_bytes;
        res->blocks_moved += mark_moved(a, ci, last);
        ci = a->chunks[hole].next;
    }
    return SL_OK;
}

static void release_region(sl_bfc *a, uint32_t r)
{
    uint32_t ci = a->regions[r].first;
    bin_remove(a, ci);
    chunk_release(a, ci);
    a->free_chunk_count--;
    a->free_bytes -= a->regions[r].size;
    a->total_bytes -= a->regions[r].size;
    a->be.region_free(a->be.ctx, a->regions[r].base);
    for (uint32_t q = r + 1; q < a->region_count; q++) {
        a->regions[q - 1] = a->regions[q];
        for (uint32_t c = a->regions[q - 1].first; c != NONE; c = a->chunks[c].next)
            a->chunks[c].region = q - 1;
    }
    a->region_count--;
}

/* Saves what planning changes: the chunk records, the record free list, the bins, each
 * region's first chunk and the free counters (regions and handles do not change). */
static sl_status snapshot_take(sl_bfc *a, sl_error *err)
{
    snapshot *sn = &a->snap;
    if (sn->cap < a->chunk_cap) {
        chunk *nc = realloc(sn->chunks, (size_t)a->chunk_cap * sizeof *nc);
        if (!nc)
            return sl_error_set(err, SL_ERR_NOMEM, "bfc: compaction: out of host memory saving "
                                "%" PRIu32 " chunk records", a->chunk_cap);
        sn->chunks = nc;
        sn->cap = a->chunk_cap;
    }
    if (sn->first_cap < a->region_count) {
        uint32_t *nf = realloc(sn->first, (size_t)a->region_count * sizeof *nf);
        if (!nf)
            return sl_error_set(err, SL_ERR_NOMEM, "bfc: compaction: out of host memory");
        sn->first = nf;
        sn->first_cap = a->region_count;
    }
    if (a->chunk_cap) memcpy(sn->chunks, a->chunks, (size_t)a->chunk_cap * sizeof *sn->chunks);
    sn->n = a->chunk_cap;
    for (uint32_t r = 0; r < a->region_count; r++) sn->first[r] = a->regions[r].first;
    sn->chunk_free_head = a->chunk_free_head;
    sn->chunk_unused = a->chunk_unused;
    sn->chunk_count = a->chunk_count;
    sn->free_chunk_count = a->free_chunk_count;
    sn->free_bytes = a->free_bytes;
    sn->bins = a->bins;
    return SL_OK;
}

/* Puts the saved state back. Records added since (the table grew) go back on the free list. */
static void snapshot_restore(sl_bfc *a)
{
    const snapshot *sn = &a->snap;
    if (sn->n) memcpy(a->chunks, sn->chunks, (size_t)sn->n * sizeof *a->chunks);
    a->chunk_free_head = sn->chunk_free_head;
    a->chunk_unused = sn->chunk_unused;
    for (uint32_t i = a->chunk_cap; i-- > sn->n;) {
        memset(&a->chunks[i], 0, sizeof a->chunks[i]);
        a->chunks[i].state = CHUNK_UNUSED;
        a->chunks[i].prev = a->chunks[i].bin_prev = a->chunks[i].bin_next = NONE;
        a->chunks[i].handle = NONE;
        a->chunks[i].next = a->chunk_free_head;
        a->chunk_free_head = i;
        a->chunk_unused++;
    }
    for (uint32_t r = 0; r < a->region_count; r++) a->regions[r].first = sn->first[r];
    a->chunk_count = sn->chunk_count;
    a->free_chunk_count = sn->free_chunk_count;
    a->free_bytes = sn->free_bytes;
    a->bins = sn->bins;
}

/* Plans every region (phase 1, then phase 2), up to plan_limit moves. */
static sl_status plan_all(sl_bfc *a, bool full, sl_bfc_compact_result *res, sl_error *err)
{
    sl_status s = SL_OK;
    for (uint32_t r = 0; !s && r < a->region_count && !plan_full(a); r++) {
        s = fill_holes(a, r, res, err);
        if (!s) s = slide_region(a, r, full, res, err);
    }
    return s;
}

/* Hands the plan to the backend: one move_batch, or move() per move. *done as in bfc.h. */
static sl_status issue_plan(sl_bfc *a, size_t *done, sl_error *err)
{
    *done = 0;
    if (a->be.move_batch) return a->be.move_batch(a->be.ctx, a->plan, a->plan_n, done, err);
    for (; *done < a->plan_n; ++*done) {
        const sl_bfc_move *m = &a->plan[*done];
        sl_status s = a->be.move(a->be.ctx, m->dst, m->src, m->bytes, err);
        if (s) return s;
    }
    return SL_OK;
}

/* Compaction plans first and moves after: planning rewrites the chunk map move by move as if
 * each had happened (later decisions depend on earlier ones), collecting the moves; then all of
 * them go to the backend at once and one sync waits for them. Per-move costs (an enqueue, a
 * device operation, a wake-up of a copy thread) are then paid once per compaction instead of
 * once per group of blocks. The price is undoing the map when a move fails: the state planning
 * changes is saved first (a copy of the chunk records, the same order of work as planning's
 * walk over them), and on a failure at move k it is restored and planning runs again, stopping
 * after k moves — it is deterministic (every choice is by size and address, never by record
 * index), so it rebuilds exactly the map of the k moves that were issued. */
static sl_status compact_locked(sl_bfc *a, bool full, sl_bfc_compact_result *res, sl_error *err)
{
    double t0 = now_s();
    memset(res, 0, sizeof *res);
    a->plan_n = 0;
    a->plan_limit = SIZE_MAX;
    sl_status s = snapshot_take(a, err);
    if (!s) s = plan_all(a, full, res, err); /* a failure here stops planning: what was planned
                                                 is consistent with the map and still issued */
    if (a->plan_n) {
        size_t done = 0;
        sl_error me;
        sl_status ms = issue_plan(a, &done, &me);
        if (ms) {
            if (done >= a->plan_n) done = a->plan_n - 1; /* a backend that failed "after" all */
            move_info fi = a->plan_info[done];
            snapshot_restore(a);
            memset(res, 0, sizeof *res);
            a->plan_n = 0;
            a->plan_limit = done;
            a->replay = true;
            a->replay_mismatches = 0;
            sl_error pe;
            sl_status ps = plan_all(a, full, res, &pe);
            a->replay = false;
            if (ps || a->plan_n != done || a->replay_mismatches)
                s = sl_error_set(err, SL_ERR_RANGE, "bfc: compaction: move %zu failed (%s) and "
                                 "re-planning the %zu moves before it did not repeat them (%zu "
                                 "moves, %zu differ%s%s): the chunk map is unreliable", done + 1,
                                 me.msg, done, a->plan_n, a->replay_mismatches, ps ? "; " : "",
                                 ps ? pe.msg : "");
            else if (fi.slide)
                s = sl_error_set(err, ms, "bfc: compaction stopped in region %" PRIu32
                                 ": moving %" PRIu64 " blocks (%" PRIu64 " bytes) down by %"
                                 PRIu64 " bytes failed, they stay in place: %s", fi.region,
                                 fi.blocks, fi.bytes, fi.from - fi.to, me.msg);
            else
                s = sl_error_set(err, ms, "bfc: compaction stopped in region %" PRIu32
                                 ": moving %" PRIu64 " blocks (%" PRIu64 " bytes) from offset %"
                                 PRIu64 " down to %" PRIu64 " failed, they stay in place: %s",
                                 fi.region, fi.blocks, fi.bytes, fi.from, fi.to, me.msg);
        }
    }
    if (res->blocks_moved && a->be.sync) {
        sl_error se;
        sl_status ss = a->be.sync(a->be.ctx, &se);
        if (ss) {
            if (!s)
                sl_error_set(err, ss, "bfc: compaction moved %" PRIu64 " blocks but waiting for "
                             "the moves failed; their contents are undefined: %s",
                             res->blocks_moved, se.msg);
            s = s ? s : ss;
        }
    }
    if (!s && a->opt.release_empty_regions) {
        for (uint32_t r = a->region_count; r-- > 0;) {
            const chunk *f = &a->chunks[a->regions[r].first];
            if (f->state == CHUNK_FREE && f->next == NONE) {
                release_region(a, r);
                res->regions_released++;
            }
        }
    }
    if (res->blocks_moved) a->epoch++;
    a->compactions++;
    a->bytes_moved += res->bytes_moved;
    res->seconds = now_s() - t0;
    return s;
}

sl_status sl_bfc_compact(sl_bfc *a, sl_bfc_compact_result *out, sl_error *err)
{
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: compact with a NULL arena");
    sl_bfc_compact_result r;
    lock(a);
    sl_status s = compact_locked(a, false, &r, err);
    unlock(a);
    if (out) *out = r;
    return s;
}

/* ---- stats, dump, validate ---------------------------------------------------------------- */

static void stats_locked(const sl_bfc *a, sl_bfc_stats *o)
{
    memset(o, 0, sizeof *o);
    o->in_use_bytes = a->in_use_bytes;
    o->peak_in_use_bytes = a->peak_in_use_bytes;
    o->requested_bytes = a->requested_bytes;
    o->free_bytes = a->free_bytes;
    o->largest_free_bytes = largest_free(a);
    o->total_bytes = a->total_bytes;
    o->fragmentation = fragmentation(a);
    o->chunks = a->chunk_count;
    o->free_chunks = a->free_chunk_count;
    o->regions = a->region_count;
    o->live_blocks = a->live_blocks;
    o->allocs = a->allocs;
    o->frees = a->frees;
    o->failed_allocs = a->failed_allocs;
    o->compactions = a->compactions;
    o->bytes_moved = a->bytes_moved;
}

void sl_bfc_stats_get(const sl_bfc *a, sl_bfc_stats *out)
{
    if (!out) return;
    if (!a) {
        memset(out, 0, sizeof *out);
        return;
    }
    lock(a);
    stats_locked(a, out);
    unlock(a);
}

static const char *state_name(const chunk *c)
{
    return c->state == CHUNK_FREE ? "free" : c->pinned ? "pinned" : "used";
}

sl_status sl_bfc_dump(const sl_bfc *a, FILE *f, bool json, sl_error *err)
{
    if (!a || !f) return sl_error_set(err, SL_ERR_INVALID, "bfc: dump needs an arena and a FILE");
    lock(a);
    sl_bfc_stats st;
    stats_locked(a, &st);
    const char *kind = a->be.kind ? a->be.kind : "unknown";
    if (json) {
        fprintf(f, "{\"kind\":\"%s\",\"epoch\":%" PRIu64 ",\"stats\":{\"in_use_bytes\":%" PRIu64
                ",\"peak_in_use_bytes\":%" PRIu64 ",\"requested_bytes\":%" PRIu64
                ",\"free_bytes\":%" PRIu64 ",\"largest_free_bytes\":%" PRIu64
                ",\"total_bytes\":%" PRIu64 ",\"fragmentation\":%.6f,\"chunks\":%" PRIu64
                ",\"free_chunks\":%" PRIu64 ",\"live_blocks\":%" PRIu64 ",\"allocs\":%" PRIu64
                ",\"frees\":%" PRIu64 ",\"failed_allocs\":%" PRIu64 ",\"compactions\":%" PRIu64
                ",\"bytes_moved\":%" PRIu64 "},\"regions\":[",
                kind, a->epoch, st.in_use_bytes, st.peak_in_use_bytes, st.requested_bytes,
                st.free_bytes, st.largest_free_bytes, st.total_bytes, st.fragmentation, st.chunks,
                st.free_chunks, st.live_blocks, st.allocs, st.frees, st.failed_allocs,
                st.compactions, st.bytes_moved);
        for (uint32_t r = 0; r < a->region_count; r++) {
            fprintf(f, "%s{\"base\":\"%p\",\"size\":%" PRIu64 ",\"chunks\":[", r ? "," : "",
                    a->regions[r].base, a->regions[r].size);
            for (uint32_t ci = a->regions[r].first; ci != NONE; ci = a->chunks[ci].next) {
                const chunk *c = &a->chunks[ci];
                fprintf(f, "%s{\"offset\":%" PRIu64 ",\"size\":%" PRIu64 ",\"state\":\"%s\"",
                        ci == a->regions[r].first ? "" : ",", c->off, c->size, state_name(c));
                if (c->state == CHUNK_USED)
                    fprintf(f, ",\"handle\":%" PRIu32 ",\"requested\":%" PRIu64,
                            handle_encode(c->handle, a->handles[c->handle].gen), c->requested);
                fputc('}', f);
            }
            fputs("]}", f);
        }
        fputs("]}\n", f);
    } else {
        fprintf(f, "bfc %s: %" PRIu32 " regions, %" PRIu64 " bytes; in use %" PRIu64
                " (requested %" PRIu64 ", peak %" PRIu64 "); free %" PRIu64 " in %" PRIu64
                " chunks, largest %" PRIu64 ", fragmentation %.4f; %" PRIu64
                " live blocks; epoch %" PRIu64 "\n",
                kind, a->region_count, st.total_bytes, st.in_use_bytes, st.requested_bytes,
                st.peak_in_use_bytes, st.free_bytes, st.free_chunks, st.largest_free_bytes,
                st.fragmentation, st.live_blocks, a->epoch);
        for (uint32_t r = 0; r < a->region_count; r++) {
            fprintf(f, "region %" PRIu32 " base %p size %" PRIu64 "\n", r, a->regions[r].base,
                    a->regions[r].size);
            for (uint32_t ci = a->regions[r].first; ci != NONE; ci = a->chunks[ci].next) {
                const chunk *c = &a->chunks[ci];
                fprintf(f, "  %#14" PRIx64 " %14" PRIu64 " %-6s", c->off, c->size, state_name(c));
                if (c->state == CHUNK_USED)
                    fprintf(f, " handle 0x%08" PRIx32 " requested %" PRIu64,
                            handle_encode(c->handle, a->handles[c->handle].gen), c->requested);
                fputc('\n', f);
            }
        }
    }
    sl_status s = ferror(f) ? sl_error_set(err, SL_ERR_IO, "bfc: writing the dump failed") : SL_OK;
    unlock(a);
    return s;
}

sl_status sl__bfc_check_compacted(const sl_bfc *a, bool full, sl_error *err)
{
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: check_compacted of a NULL arena");
    lock(a);
    sl_status s = SL_OK;
    for (uint32_t r = 0; !s && r < a->region_count; r++)
        for (uint32_t ci = a->regions[r].first; !s && ci != NONE; ci = a->chunks[ci].next) {
            const chunk *c = &a->chunks[ci];
            if (c->state != CHUNK_FREE || c->next == NONE || a->chunks[c->next].pinned) continue;
            uint64_t run = 0;
            for (uint32_t n = c->next; n != NONE && a->chunks[n].state == CHUNK_USED &&
                                       !a->chunks[n].pinned;
                 n = a->chunks[n].next)
                run += a->chunks[n].size;
            if (full || (run - 1) / c->size + 1 <= SLIDE_RATIO)
                s = sl_error_set(err, SL_ERR_RANGE,
                                 "bfc: not compacted: region %" PRIu32 " has %" PRIu64
                                 " free bytes at offset %" PRIu64 " before a run of %" PRIu64
                                 " movable bytes that %s compaction slides down",
                                 r, c->size, c->off, run, full ? "a full" : "every");
        }
    unlock(a);
    return s;
}

#define FAIL(...)                                      \
    do {                                               \
        s = sl_error_set(err, SL_ERR_RANGE, __VA_ARGS__); \
        goto done;                                     \
    } while (0)

sl_status sl__bfc_validate(const sl_bfc *a, sl_error *err)
{
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: validate of a NULL arena");
    lock(a);
    sl_status s = SL_OK;
    uint8_t *seen = calloc(a->chunk_cap ? a->chunk_cap : 1, 1); /* 1 = in a region, 2 = binned */
    if (!seen) {
        unlock(a);
        return sl_error_set(err, SL_ERR_NOMEM, "bfc: validate: out of memory");
    }
    uint64_t in_use = 0, free_b = 0, req = 0, total = 0, nchunks = 0, nfree = 0, live = 0;
    uint64_t largest = 0;
    for (uint32_t r = 0; r < a->region_count; r++) {
        const region *rg = &a->regions[r];
        if ((uintptr_t)rg->base % SL_BFC_ALIGN) FAIL("bfc invariant: region %u base %p unaligned", r, rg->base);
        uint64_t off = 0;
        uint32_t prev = NONE;
        for (uint32_t ci = rg->first; ci != NONE; ci = a->chunks[ci].next) {
            if (ci >= a->chunk_cap) FAIL("bfc invariant: region %u links to chunk %u beyond %u records", r, ci, a->chunk_cap);
            const chunk *c = &a->chunks[ci];
            if (seen[ci]) FAIL("bfc invariant: chunk %u reached twice (cycle or shared) in region %u", ci, r);
            seen[ci] = 1;
            if (c->state == CHUNK_UNUSED) FAIL("bfc invariant: unused record %u linked in region %u", ci, r);
            if (c->region != r) FAIL("bfc invariant: chunk %u in region %u says region %u", ci, r, c->region);
            if (c->prev != prev) FAIL("bfc invariant: chunk %u prev %u, expected %u", ci, c->prev, prev);
            if (c->off != off) FAIL("bfc invariant: region %u: chunk %u at offset %" PRIu64 ", expected %" PRIu64 " (gap or overlap)", r, ci, c->off, off);
            if (c->size == 0 || c->size % SL_BFC_ALIGN || c->off % SL_BFC_ALIGN)
                FAIL("bfc invariant: chunk %u offset %" PRIu64 " size %" PRIu64 " not positive multiples of %d", ci, c->off, c->size, SL_BFC_ALIGN);
            if (c->size > rg->size - off) FAIL("bfc invariant: chunk %u (offset %" PRIu64 ", size %" PRIu64 ") passes the end of region %u (%" PRIu64 " bytes)", ci, c->off, c->size, r, rg->size);
            if (c->state == CHUNK_FREE) {
                if (prev != NONE && a->chunks[prev].state == CHUNK_FREE)
                    FAIL("bfc invariant: free chunks %u and %u are neighbours (not merged)", prev, ci);
                if (c->handle != NONE || c->requested || c->pinned) FAIL("bfc invariant: free chunk %u carries a handle, request or pin", ci);
                free_b += c->size;
                nfree++;
                if (c->size > largest) largest = c->size;
            } else {
                uint32_t h = c->handle;
                if (h >= a->handle_used || a->handles[h].chunk != ci)
                    FAIL("bfc invariant: used chunk %u has handle slot %u that does not point back", ci, h);
                if (c->requested == 0 || c->requested > c->size)
                    FAIL("bfc invariant: used chunk %u requested %" PRIu64 " of %" PRIu64 " granted", ci, c->requested, c->size);
                in_use += c->size;
                req += c->requested;
                live++;
            }
            off += c->size;
            prev = ci;
            nchunks++;
        }
        if (off != rg->size) FAIL("bfc invariant: chunks of region %u cover %" PRIu64 " of %" PRIu64 " bytes", r, off, rg->size);
        total += rg->size;
    }
    uint64_t binned = 0;
    for (uint32_t b = 0; b < BIN_COUNT; b++) {
        if (((a->bins.mask >> b) & 1u) != (a->bins.head[b] != NONE)) FAIL("bfc invariant: bin %u mask bit disagrees with its list", b);
        uint32_t prev = NONE;
        for (uint32_t ci = a->bins.head[b]; ci != NONE; ci = a->chunks[ci].bin_next) {
            if (ci >= a->chunk_cap || seen[ci] != 1 || a->chunks[ci].state != CHUNK_FREE)
                FAIL("bfc invariant: bin %u holds chunk %u that is not a free chunk of a region (or is binned twice)", b, ci);
            seen[ci] = 2;
            binned++;
            if (a->chunks[ci].bin_prev != prev) FAIL("bfc invariant: bin %u: chunk %u bin_prev %u, expected %u", b, ci, a->chunks[ci].bin_prev, prev);
            if (bin_index(a->chunks[ci].size) != b) FAIL("bfc invariant: chunk %u of %" PRIu64 " bytes is in bin %u, belongs in %u", ci, a->chunks[ci].size, b, bin_index(a->chunks[ci].size));
            prev = ci;
        }
    }
    /* Every record is either reached from a region (nchunks) or on the record free list. */
    uint64_t listed = 0;
    if (binned != nfree) FAIL("bfc invariant: %" PRIu64 " free chunks but %" PRIu64 " binned", nfree, binned);
    for (uint32_t ci = a->chunk_free_head; ci != NONE; ci = a->chunks[ci].next) {
        if (ci >= a->chunk_cap || seen[ci] || a->chunks[ci].state != CHUNK_UNUSED)
            FAIL("bfc invariant: record free list holds chunk %u that is in use or listed twice", ci);
        seen[ci] = 3;
        listed++;
    }
    if (listed != a->chunk_unused || nchunks + listed != a->chunk_cap)
        FAIL("bfc invariant: %" PRIu64 " records in regions + %" PRIu64 " on the free list != %u "
             "records (kept unused count %u)", nchunks, listed, a->chunk_cap, a->chunk_unused);
    uint64_t live_slots = 0, free_slots = 0;
    for (uint32_t h = 0; h < a->handle_used; h++) {
        if (a->handles[h].chunk == NONE) {
            free_slots++;
            continue;
        }
        uint32_t ci = a->handles[h].chunk;
        if (ci >= a->chunk_cap || a->chunks[ci].state != CHUNK_USED || a->chunks[ci].handle != h)
            FAIL("bfc invariant: handle slot %u points at chunk %u that is not its used chunk", h, ci);
        live_slots++;
    }
    if (free_slots != a->hfree_count) FAIL("bfc invariant: %" PRIu64 " free handle slots but the free queue counts %u", free_slots, a->hfree_count);
    if (live_slots != live) FAIL("bfc invariant: %" PRIu64 " live handle slots but %" PRIu64 " used chunks", live_slots, live);
    if (in_use != a->in_use_bytes || free_b != a->free_bytes || req != a->requested_bytes ||
        total != a->total_bytes || nchunks != a->chunk_count || nfree != a->free_chunk_count ||
        live != a->live_blocks)
        FAIL("bfc invariant: stats disagree with the chunks: in use %" PRIu64 "/%" PRIu64
             ", free %" PRIu64 "/%" PRIu64 ", requested %" PRIu64 "/%" PRIu64 ", total %" PRIu64
             "/%" PRIu64 ", chunks %" PRIu64 "/%" PRIu64 ", free chunks %" PRIu64 "/%" PRIu64
             ", live %" PRIu64 "/%" PRIu64 " (recomputed/kept)",
             in_use, a->in_use_bytes, free_b, a->free_bytes, req, a->requested_bytes, total,
             a->total_bytes, nchunks, a->chunk_count, nfree, a->free_chunk_count, live, a->live_blocks);
    if (largest != largest_free(a)) FAIL("bfc invariant: largest free chunk %" PRIu64 " but the bins say %" PRIu64, largest, largest_free(a));
    if (a->peak_in_use_bytes < a->in_use_bytes) FAIL("bfc invariant: peak %" PRIu64 " below in use %" PRIu64, a->peak_in_use_bytes, a->in_use_bytes);
done:
    free(seen);
    unlock(a);
    return s;
}
