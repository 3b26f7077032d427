/* alloc/bfc: best-fit-with-coalescing arena over large regions, with copy-based compaction.
 *
 * One implementation serves two memory kinds through sl_bfc_backend: device memory (regions
 * from the device interface, moves as D2D copies on a stream) and pinned host memory (slabs of
 * the host pool, moves by memmove). Allocations are handles (sl_block); sl_bfc_ptr() gives the
 * current address, which changes only when compaction moves the block — then the arena's epoch
 * changes, so anything caching raw pointers knows to rebuild.
 *
 * Invariants (checked by sl__bfc_validate, run by tests after every operation):
 *   the chunks of a region tile it exactly in address order (prev/next links agree);
 *   no two neighbouring chunks are both free; every free chunk is in exactly the bin of its
 *   size class and no allocated chunk is in a bin; every chunk offset is 256-byte aligned;
 *   stats (in use, free, largest free, counts) equal the values recomputed from the chunks.
 *
 * Thread safety: every function may be called from any thread; one mutex per arena serialises
 * them. sl_bfc_ptr() results are stable until the next compaction (epoch change).
 */
#ifndef SL_BFC_H
#define SL_BFC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/device/device.h"
#include "base/status.h"

enum { SL_BFC_ALIGN = 256 };

typedef uint32_t sl_block;
#define SL_BLOCK_NONE UINT32_MAX

typedef struct sl_bfc_move {
    void *dst;
    const void *src;
    uint64_t bytes;
} sl_bfc_move;

/* Where regions come from and how bytes move. move(dst, src, n) must handle dst < src with
 * overlapping ranges (compaction slides blocks down); it may be asynchronous until sync(). A
 * failed move must leave its source intact (or say "contents lost" in its message).
 * move_batch (optional) does moves[0..n) in order, as n move() calls would (a move may read
 * what an earlier one wrote), in as few device operations as it can: compaction plans all its
 * moves first and hands them over in one call, so per-operation costs are paid once. On
 * failure *done = the moves issued in full before the failing one, which must be left as a
 * failed move() leaves it; later ones are not started. Without it, move() is called per move. */
typedef struct sl_bfc_backend {
    void *ctx;
    sl_status (*region_alloc)(void *ctx, uint64_t bytes, void **base, sl_error *err);
    void (*region_free)(void *ctx, void *base);
    sl_status (*move)(void *ctx, void *dst, const void *src, uint64_t bytes, sl_error *err);
    sl_status (*move_batch)(void *ctx, const sl_bfc_move *moves, size_t n, size_t *done,
                            sl_error *err);
    sl_status (*sync)(void *ctx, sl_error *err);
    const char *kind;   /* "device", "host", ... for dumps */
} sl_bfc_backend;

typedef struct sl_bfc_options {
    uint64_t region_bytes;      /* size of each new region; 0 = 256 MiB (larger requests get
                                   a region of their own size) */
    uint64_t max_bytes;         /* total over all regions; 0 = no limit */
    bool compact_on_oom;        /* compact and retry when an allocation fails although total
                                   free space would fit it */
    double compact_threshold;   /* compact after a free when fragmentation exceeds this (0 = off) */
    bool release_empty_regions; /* compaction gives wholly free regions back */
} sl_bfc_options;

typedef struct sl_bfc sl_bfc;

sl_status sl_bfc_create(const sl_bfc_backend *backend, const sl_bfc_options *opt, sl_bfc **out,
                        sl_error *err);
/* Backend over a device: regions by sl_device_region_alloc, moves as D2D copies on `stream`
 * (chunked so source and destination of one copy never overlap); a compaction's copies go to
 * the device as one sl_device_copy_batch. */
sl_status sl_bfc_create_device(sl_device *dev, sl_stream *stream, const sl_bfc_options *opt,
                               sl_bfc **out, sl_error *err);
/* Frees every region; live blocks are dropped (counted in the stats before destruction). */
void sl_bfc_destroy(sl_bfc *a);

enum { SL_BFC_PINNED = 1u << 0 };  /* never moved by compaction */

/* Rounds bytes up to SL_BFC_ALIGN. bytes == 0 is SL_ERR_INVALID. Out of memory is
 * SL_ERR_NOMEM with the request, free total and largest free chunk in the message. */
sl_status sl_bfc_alloc(sl_bfc *a, uint64_t bytes, uint32_t flags, sl_block *out, sl_error *err);
/* Freeing SL_BLOCK_NONE is a no-op; a stale or foreign handle is SL_ERR_INVALID. */
sl_status sl_bfc_free(sl_bfc *a, sl_block b, sl_error *err);
void *sl_bfc_ptr(const sl_bfc *a, sl_block b);          /* NULL for a bad handle */
uint64_t sl_bfc_size(const sl_bfc *a, sl_block b);      /* granted bytes; 0 for a bad handle */
sl_status sl_bfc_set_pinned(sl_bfc *a, sl_block b, bool pinned, sl_error *err);
uint64_t sl_bfc_epoch(const sl_bfc *a);

typedef struct sl_bfc_compact_result {
    uint64_t bytes_moved, blocks_moved, regions_released;
    double seconds;
} sl_bfc_compact_result;
/* Slides movable live blocks toward their region's base, updates handles, bumps the epoch if
 * anything moved, optionally releases empty regions; waits for the moves to finish (one
 * backend sync for the whole compaction). seconds covers all of it: planning, issuing the
 * moves and waiting for them. On failure the blocks of the failing group and every later one
 * are where they were, those before it have moved (the epoch says so), the map is valid. */
sl_status sl_bfc_compact(sl_bfc *a, sl_bfc_compact_result *out, sl_error *err);

typedef struct sl_bfc_stats {
    uint64_t in_use_bytes, peak_in_use_bytes, requested_bytes;
    uint64_t free_bytes, largest_free_bytes, total_bytes;
    double fragmentation;   /* 1 - largest_free / free (0 when nothing is free) */
    uint64_t chunks, free_chunks, regions, live_blocks;
    uint64_t allocs, frees, failed_allocs, compactions, bytes_moved;
} sl_bfc_stats;
void sl_bfc_stats_get(const sl_bfc *a, sl_bfc_stats *out);

/* Chunk map: one line per chunk (text) or one JSON object {regions:[{base,size,chunks:[...]}]}. */
sl_status sl_bfc_dump(const sl_bfc *a, FILE *f, bool json, sl_error *err);

#endif
