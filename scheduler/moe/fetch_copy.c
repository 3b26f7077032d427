/* scheduler/moe/fetch_copy.c: the fetching scheduler's H2D copies of one call (fetch_state.h:
 * sl__fetch_pump and its kin): enqueued on the copy stream in index order, at most
 * max_transfers in flight, retired in order by their events, each with its timestamps for the
 * trace and the cost model. Split from fetch.c, which plans the copies and waits on them.
 */
#include <stdlib.h>

#include "scheduler/moe/fetch_state.h"

/* Host-function timestamps on a stream stall it until the host callback thread runs them
 * (~5-20 us each on CUDA, against ~20 us expert copies): they are taken only for the trace.
 * Otherwise a copy is timed by events and its completion time is when the host saw it. */
bool sl__fetch_host_stamps(const fetch *f) { return f->trace.on; }

void sl__fetch_stamp(void *p)
{
    *(uint64_t *)p = sl__now_ns();
}

sl_status sl__fetch_ensure_events(fetch *f, int64_t n, sl_error *err)
{
    if (n <= f->n_ev) return SL_OK;
    sl_event **v = realloc(f->ev, (size_t)n * sizeof *v);
    if (!v) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory (events)");
    f->ev = v;
    v = realloc(f->ev0, (size_t)n * sizeof *v);
    if (!v) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory (events)");
    f->ev0 = v;
    for (; f->n_ev < n; f->n_ev++) {
        f->ev0[f->n_ev] = NULL;
        if (sl_device_event_create(f->dev, &f->ev[f->n_ev], err)) return SL_ERR_DEVICE;
        if (sl_device_event_create(f->dev, &f->ev0[f->n_ev], err)) {
            sl_device_event_destroy(f->dev, f->ev[f->n_ev]);
            return SL_ERR_DEVICE;
        }
    }
    return SL_OK;
}

void sl__fetch_copy_seen_done(const fetch *f, fcopy *c)
{
    if (!sl__fetch_host_stamps(f) && !c->t_done) c->t_done = sl__now_ns();
}

/* Waits for the copy stream when something was enqueued there since the last wait (a
 * blocking sync per layer costs the host as much as a small copy; mode cpu with a static hot
 * set enqueues nothing in steady decode). Arena compaction enqueues there too: every
 * admission marks it. */
bool sl__fetch_cs_drain(fetch *f)
{
    if (!f->cs_dirty) {
        sl__fetch_stage_reset(f);
        return true;
    }
    f->cs_dirty = false;
    const bool ok = sl_device_stream_sync(f->dev, f->cs, NULL) == SL_OK;
    if (ok) sl__fetch_stage_reset(f); /* else a copy may still read the staging: keep it */
    return ok;
}

static void enqueue_one(fetch *f, int64_t i)
{
    const uint64_t t0 = sl__now_ns();
    fcopy *c = &f->cps[i];
    uint8_t *dst = (uint8_t *)sl_bfc_ptr(f->arena, f->scratch) + c->dst_off;
    c->t_enq = sl__now_ns();
    c->t_start = c->t_done = 0;
    f->cs_dirty = true;
    const bool hs = sl__fetch_host_stamps(f);
    if ((hs ? sl_device_launch_host(f->dev, f->cs, sl__fetch_stamp, &c->t_start, NULL)
            : sl_device_event_record(f->dev, f->ev0[i], f->cs, NULL)) ||
        sl_device_copy(f->dev, f->cs, dst, c->src, c->bytes, SL_COPY_H2D, NULL) ||
        (hs && sl_device_launch_host(f->dev, f->cs, sl__fetch_stamp, &c->t_done, NULL)) ||
        sl_device_event_record(f->dev, f->ev[i], f->cs, NULL)) {
        c->state = C_FAILED;
        return;
    }
    c->state = C_INFLIGHT;
    f->cs_stats.copies++;
    f->cs_stats.bytes_copied += c->bytes;
    f->call_issue_ns += sl__now_ns() - t0; /* the cost model's host cost per operation */
    f->call_issue_ops++;
}

static int64_t inflight(const fetch *f)
{
    int64_t n = 0;
    for (int64_t i = f->c_ret; i < f->c_enq; i++) n += f->cps[i].state == C_INFLIGHT;
    return n;
}

/* Retires completed copies in order, then enqueues while fewer than max_transfers fly. With
 * `until` >= 0, blocks (on the oldest copy's event) until copy `until` has been enqueued. */
void sl__fetch_pump(fetch *f, int64_t until)
{
    for (;;) {
        while (f->c_ret < f->c_enq) {
            fcopy *c = &f->cps[f->c_ret];
            if (c->state == C_INFLIGHT) {
                bool done = false;
                if (sl_device_event_query(f->dev, f->ev[f->c_ret], &done, NULL)) {
                    c->state = C_FAILED;
                } else if (!done) {
                    break;
                } else {
                    c->state = C_DONE;
                    sl__fetch_copy_seen_done(f, c);
                }
            }
            f->c_ret++;
        }
        while (f->c_enq < f->n_c && inflight(f) < f->opt.max_transfers) enqueue_one(f, f->c_enq++);
        if (until < 0 || f->c_enq > until) return;
        /* the copy we need is not enqueued yet: wait for the oldest in flight */
        int64_t o = f->c_ret;
        while (o < f->c_enq && f->cps[o].state != C_INFLIGHT) o++;
        if (o < f->c_enq && sl_device_event_sync(f->dev, f->ev[o], NULL)) f->cps[o].state = C_FAILED;
    }
}

/* Expert xi's copies: ready (all done), failed, or still on the way. */
int sl__fetch_copy_status(fetch *f, int64_t xi)
{
    xinfo *x = &f->xs[xi];
    if (x->failed || x->last_copy < 0) return -1;
    sl__fetch_pump(f, -1);
    if (x->last_copy >= f->c_enq) return 0;
    fcopy *c = &f->cps[x->last_copy];
    if (c->state == C_INFLIGHT) {
        bool done = false;
        if (sl_device_event_query(f->dev, f->ev[x->last_copy], &done, NULL)) return -1;
        return done ? 1 : 0;
    }
    return c->state == C_DONE ? 1 : -1;
}

/* An expert fails if any copy carrying one of its pieces failed. */
bool sl__fetch_copies_failed(const fetch *f, const xinfo *x)
{
    for (int p = 0; p < 3; p++)
        if (x->copy[p] >= 0 && f->cps[x->copy[p]].state == C_FAILED) return true;
    return false;
}

bool sl__fetch_copies_landed(const fetch *f, const xinfo *x)
{
    for (int p = 0; p < 3; p++)
        if (x->copy[p] >= 0 && f->cps[x->copy[p]].state != C_DONE) return false;
    return x->last_copy >= 0;
}
