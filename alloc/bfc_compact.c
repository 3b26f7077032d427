/* alloc/bfc_compact.c: the arena's copy-based compaction (the "Compaction" part of bfc.c's
 * opening comment says what it guarantees and why): holes filled from the top, bounded
 * slides, the moves planned first against a snapshot of the state, then issued as one batch
 * of device copies and synced once. */
#include "alloc/bfc_state.h"

/* ---- compaction -------------------------------------------------------------------------- */


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
sl_status sl__bfc_compact_locked(sl_bfc *a, bool full, sl_bfc_compact_result *res, sl_error *err)
{
    double t0 = sl_clock_s();
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
    res->seconds = sl_clock_s() - t0;
    return s;
}

sl_status sl_bfc_compact(sl_bfc *a, sl_bfc_compact_result *out, sl_error *err)
{
    if (!a) return sl_error_set(err, SL_ERR_INVALID, "bfc: compact with a NULL arena");
    sl_bfc_compact_result r;
    lock(a);
    sl_status s = sl__bfc_compact_locked(a, false, &r, err);
    unlock(a);
    if (out) *out = r;
    return s;
}
