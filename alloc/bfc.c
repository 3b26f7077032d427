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
#include "alloc/bfc_state.h"

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
        sl_status cs = sl__bfc_compact_locked(a, true, &cr, &ce);
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
        if (sl__bfc_compact_locked(a, false, &cr, &ce))
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
