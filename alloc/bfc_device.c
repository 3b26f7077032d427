/* alloc/bfc_device.c: the BFC backend over base/device: regions by sl_device_region_alloc,
 * moves as D2D copies on one stream, sync by sl_device_stream_sync.
 *
 * D2D copies must not overlap. Compaction's hole filling never asks for an overlapping move, but
 * its slides move a run down by the size d of the hole before it, which may be less than the
 * run's length (at most 8× less, or any amount when compacting on out-of-memory). Such a move
 * is done in pieces of at most d bytes, front to back: piece i copies source bytes
 * [i·d, (i+1)·d) to dst + i·d, which only overwrites source bytes that piece i−1 has already
 * copied; one stream keeps them in order.
 *
 * Batches: compaction hands over all its moves at once (move_batch); their pieces, in order,
 * become one sl_device_copy_batch — on sim one worker operation, where a copy per piece cost
 * an enqueue and a worker wake-up each: on a busy host more than moving a typical block (the
 * stream worker preempts the planning thread once per copy). The batch stops at
 * the first failing copy with everything before it enqueued, as copying one by one would, so
 * the failure rules below apply to the move that holds the failing copy.
 *
 * Failure: the arena needs a failed move to leave the source intact. A failure of the first
 * piece (or of a single non-overlapping copy) has written nothing over the source. A failure
 * of piece k ≥ 1 leaves the bytes of pieces 0..k−2 overwritten at their source positions (their
 * copies live one piece lower), so the move waits for pieces 0..k−1 and rolls back: for
 * i = k−2 down to 0 it copies dst + i·d back to dst + (i+1)·d (adjacent, non-overlapping), which
 * restores the source exactly. If the rollback itself fails (a sticky device error) the run's
 * contents are lost; the status says so in words ("contents lost") and the arena still points
 * the handles at the source. Cost of a slide: ceil(n / d) copies (+ k−1 on rollback). Moves
 * before the failing one are enqueued and stay; later ones are not started.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"

typedef struct device_backend {
    sl_device *dev;
    sl_stream *stream;
} device_backend;

static sl_status dev_region_alloc(void *ctx, uint64_t bytes, void **base, sl_error *err)
{
    device_backend *b = ctx;
    return sl_device_region_alloc(b->dev, bytes, base, err);
}

static void dev_region_free(void *ctx, void *base)
{
    device_backend *b = ctx;
    sl_error e; /* nowhere to report: the arena frees idle regions only (after a sync) */
    (void)sl_device_region_free(b->dev, base, &e);
}

static sl_status dev_sync(void *ctx, sl_error *err)
{
    device_backend *b = ctx;
    return sl_device_stream_sync(b->dev, b->stream, err);
}

static sl_status copy_d2d(device_backend *b, char *dst, const char *src, uint64_t n, sl_error *err)
{
    return sl_device_copy(b->dev, b->stream, dst, src, n, SL_COPY_D2D, err);
}

/* How move m splits into copies: *pieces of *d bytes, the last one shorter (file comment);
 * only a downward slide may overlap its source. */
static sl_status move_pieces(const sl_bfc_move *m, uint64_t *d, uint64_t *pieces, sl_error *err)
{
    const char *dst = m->dst, *src = m->src;
    *pieces = 0;
    if (m->bytes == 0 || dst == src) return SL_OK;
    if (dst > src && (uint64_t)(dst - src) < m->bytes)
        return sl_error_set(err, SL_ERR_INVALID,
                            "bfc device move: dst %p is above src %p by less than %" PRIu64
                            " bytes; only downward slides are supported", m->dst, m->src, m->bytes);
    *d = dst > src ? (uint64_t)(dst - src) : (uint64_t)(src - dst);
    *pieces = *d >= m->bytes ? 1 : (m->bytes + *d - 1) / *d;
    if (*d >= m->bytes) *d = m->bytes;
    return SL_OK;
}

/* Piece k (0-based) of move m failed after pieces 0..k−1 were enqueued: restore its source
 * (file comment) and say what happened. */
static sl_status piece_failed(device_backend *b, const sl_bfc_move *m, uint64_t d, uint64_t k,
                              uint64_t pieces, sl_status s, const sl_error *pe, sl_error *err)
{
    char *dst = m->dst;
    uint64_t n = m->bytes;
    if (pieces == 1) return sl_error_set(err, s, "%s", pe->msg);
    if (k == 0)
        return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                            ": first piece failed, nothing moved: %s", n, d, pe->msg);
    sl_error re;
    sl_status rs = sl_device_stream_sync(b->dev, b->stream, &re);
    for (uint64_t i = k - 1; !rs && i-- > 0;) rs = copy_d2d(b, dst + (i + 1) * d, dst + i * d, d, &re);
    if (!rs) rs = sl_device_stream_sync(b->dev, b->stream, &re);
    if (rs)
        return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                            ": piece %" PRIu64 " of %" PRIu64 " failed (%s) and the rollback "
                            "failed too (%s): contents lost", n, d, k + 1, pieces, pe->msg,
                            re.msg);
    return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                        ": piece %" PRIu64 " of %" PRIu64 " failed, source restored with %"
                        PRIu64 " copies: %s", n, d, k + 1, pieces, k - 1, pe->msg);
}

/* All pieces of all moves in one sl_device_copy_batch (one device operation on sim). The
 * batch stops at the first failing copy with everything before it enqueued — exactly what
 * copying piece by piece would leave — so the failing move is handled as a single one is. */
static sl_status dev_move_batch(void *ctx, const sl_bfc_move *moves, size_t n, size_t *done,
                                sl_error *err)
{
    device_backend *b = ctx;
    *done = 0;
    size_t valid = n, total = 0;
    sl_error ve;
    sl_status vs = SL_OK;
    for (size_t i = 0; i < n; i++) {
        uint64_t d, pieces;
        if ((vs = move_pieces(&moves[i], &d, &pieces, &ve))) {
            valid = i;
            break;
        }
        if (pieces > SIZE_MAX - total) {
            vs = sl_error_set(&ve, SL_ERR_NOMEM, "bfc device move: %" PRIu64 " pieces", pieces);
            valid = i;
            break;
        }
        total += (size_t)pieces;
    }
    sl_copy_item *items = NULL;
    if (total <= SIZE_MAX / sizeof *items) items = malloc((total ? total : 1) * sizeof *items);
    if (!items)
        return sl_error_set(err, SL_ERR_NOMEM, "bfc device move: out of host memory for %zu "
                            "copies", total);
    size_t k = 0;
    for (size_t i = 0; i < valid; i++) {
        uint64_t d, pieces;
        move_pieces(&moves[i], &d, &pieces, &ve);
        char *dst = moves[i].dst;
        const char *src = moves[i].src;
        for (uint64_t p = 0; p < pieces; p++) {
            uint64_t off = p * d, len = moves[i].bytes - off < d ? moves[i].bytes - off : d;
            items[k++] = (sl_copy_item){.dst = dst + off, .src = src + off, .bytes = len};
        }
    }
    size_t issued = 0;
    sl_error pe;
    sl_status s = sl_device_copy_batch(b->dev, b->stream, items, total, SL_COPY_D2D, &issued, &pe);
    free(items);
    /* Find the move that holds copy `issued` (the failing one) or, if all went, the first move
     * that was not valid. */
    size_t first = 0;
    for (size_t i = 0; i < valid; i++) {
        uint64_t d, pieces;
        move_pieces(&moves[i], &d, &pieces, &ve);
        if (s && issued < first + pieces) {
            *done = i;
            return piece_failed(b, &moves[i], d, issued - first, pieces, s, &pe, err);
        }
        first += (size_t)pieces;
    }
    *done = valid;
    if (s) return sl_error_set(err, s, "%s", pe.msg); /* not reached: every copy has a move */
    if (vs) return sl_error_set(err, vs, "%s", ve.msg);
    return SL_OK;
}

static sl_status dev_move(void *ctx, void *dst, const void *src, uint64_t n, sl_error *err)
{
    size_t done;
    sl_bfc_move m = {.dst = dst, .src = src, .bytes = n};
    return dev_move_batch(ctx, &m, 1, &done, err);
}

sl_status sl_bfc_create_device(sl_device *dev, sl_stream *stream, const sl_bfc_options *opt,
                               sl_bfc **out, sl_error *err)
{
    if (out) *out = NULL;
    if (!dev || !stream || !out)
        return sl_error_set(err, SL_ERR_INVALID, "bfc: create_device needs a device, a stream "
                            "and an out pointer (dev %p, stream %p)", (void *)dev, (void *)stream);
    device_backend *b = malloc(sizeof *b);
    if (!b) return sl_error_set(err, SL_ERR_NOMEM, "bfc: out of memory for the device backend");
    b->dev = dev;
    b->stream = stream;
    sl_bfc_backend be = {
        .ctx = b,
        .region_alloc = dev_region_alloc,
        .region_free = dev_region_free,
        .move = dev_move,
        .move_batch = dev_move_batch,
        .sync = dev_sync,
        .kind = "device",
    };
    return sl__bfc_create_owned(&be, opt, free, out, err);
}
