/* alloc/bfc_device.c: the BFC backend over runtime/device: regions by sl_device_region_alloc,
 * moves as D2D copies on one stream, sync by sl_device_stream_sync.
 *
 * D2D copies must not overlap. Compaction's hole filling never asks for an overlapping move, but
 * its slides move a run down by the size d of the hole before it, which may be less than the
 * run's length (at most 8× less, or any amount when compacting on out-of-memory). Such a move
 * is done in pieces of at most d bytes, front to back: piece i copies source bytes [i·d, (i+1)·d) to dst + i·d, which only
 * overwrites source bytes that piece i−1 has already copied; one stream keeps them in order.
 *
 * Failure: the arena needs a failed move to leave the source intact. A failure of the first
 * piece (or of a single non-overlapping copy) has written nothing over the source. A failure
 * of piece k ≥ 1 leaves the bytes of pieces 0..k−2 overwritten at their source positions (their
 * copies live one piece lower), so the move waits for pieces 0..k−1 and rolls back: for
 * i = k−2 down to 0 it copies dst + i·d back to dst + (i+1)·d (adjacent, non-overlapping), which
 * restores the source exactly. If the rollback itself fails (a sticky device error) the run's
 * contents are lost; the status says so in words ("contents lost") and the arena still points
 * the handles at the source. Cost of a slide: ceil(n / d) copies (+ k−1 on rollback).
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

static sl_status dev_move(void *ctx, void *dst_v, const void *src_v, uint64_t n, sl_error *err)
{
    device_backend *b = ctx;
    char *dst = dst_v;
    const char *src = src_v;
    if (n == 0 || dst == src) return SL_OK;
    if (dst > src && (uint64_t)(dst - src) < n)
        return sl_error_set(err, SL_ERR_INVALID,
                            "bfc device move: dst %p is above src %p by less than %" PRIu64
                            " bytes; only downward slides are supported", dst_v, src_v, n);
    uint64_t d = dst > src ? (uint64_t)(dst - src) : (uint64_t)(src - dst);
    if (d >= n) return copy_d2d(b, dst, src, n, err);
    uint64_t pieces = (n + d - 1) / d;
    for (uint64_t k = 0; k < pieces; k++) {
        uint64_t off = k * d, len = n - off < d ? n - off : d;
        sl_error pe;
        sl_status s = copy_d2d(b, dst + off, src + off, len, &pe);
        if (!s) continue;
        if (k == 0)
            return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                                ": first piece failed, nothing moved: %s", n, d, pe.msg);
        sl_error re;
        sl_status rs = sl_device_stream_sync(b->dev, b->stream, &re);
        for (uint64_t i = k - 1; !rs && i-- > 0;) rs = copy_d2d(b, dst + (i + 1) * d, dst + i * d, d, &re);
        if (!rs) rs = sl_device_stream_sync(b->dev, b->stream, &re);
        if (rs)
            return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                                ": piece %" PRIu64 " of %" PRIu64 " failed (%s) and the rollback "
                                "failed too (%s): contents lost", n, d, k + 1, pieces, pe.msg,
                                re.msg);
        return sl_error_set(err, s, "bfc device move of %" PRIu64 " bytes by %" PRIu64
                            ": piece %" PRIu64 " of %" PRIu64 " failed, source restored with %"
                            PRIu64 " copies: %s", n, d, k + 1, pieces, k - 1, pe.msg);
    }
    return SL_OK;
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
        .sync = dev_sync,
        .kind = "device",
    };
    return sl__bfc_create_owned(&be, opt, free, out, err);
}
