/* base/device/device.c: the common layer of the device interface.
 *
 * Every public call lands here first: arguments are checked, device pointers are validated
 * against the table of live regions (for both backends, so a scheduler bug that copies outside
 * a block is caught by CI on sim exactly as it would misbehave on a GPU), faults are injected,
 * counters kept, and then the backend (sim.c or cuda.c) does the work through its ops table.
 * Backend choice and environment parsing live here too, so the two backends cannot disagree on
 * what an option means. See device_impl.h for the shared state and its invariants.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device/device_impl.h"
#include "base/fault.h"

/* ---- range tables ------------------------------------------------------------------------ */

/* Index of the last range with base <= p, or SIZE_MAX when none. */
static size_t range_floor(const sl__range_table *t, uintptr_t p)
{
    size_t lo = 0, hi = t->n; /* answer in [lo, hi) shifted by one */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? SIZE_MAX : lo - 1;
}

/* The range that contains [p, p + bytes) entirely, or NULL. bytes >= 1. */
static const sl__range *range_containing(const sl__range_table *t, uintptr_t p, uint64_t bytes)
{
    size_t i = range_floor(t, p);
    if (i == SIZE_MAX)
        return NULL;
    const sl__range *r = &t->v[i];
    uint64_t off = (uint64_t)(p - r->base);
    if (off >= r->bytes || bytes > r->bytes - off)
        return NULL;
    return r;
}

/* True when [p, p + bytes) intersects any range. */
static bool range_overlaps(const sl__range_table *t, uintptr_t p, uint64_t bytes)
{
    size_t i = range_floor(t, p + bytes - 1);
    if (i == SIZE_MAX)
        return false;
    const sl__range *r = &t->v[i];
    return r->base + r->bytes > p;
}

static sl_status range_insert(sl__range_table *t, sl__range r, sl_error *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        sl__range *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return sl_error_set(err, SL_ERR_NOMEM, "device: cannot grow a range table to %zu",
                                cap);
        t->v = v;
        t->cap = cap;
    }
    size_t i = range_floor(t, r.base) + 1; /* SIZE_MAX + 1 == 0 */
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
    t->v[i] = r;
    t->n++;
    return SL_OK;
}

/* Index of the range starting exactly at p, or SIZE_MAX. */
static size_t range_find_exact(const sl__range_table *t, uintptr_t p)
{
    size_t i = range_floor(t, p);
    return (i != SIZE_MAX && t->v[i].base == p) ? i : SIZE_MAX;
}

static void range_remove(sl__range_table *t, size_t i)
{
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* ---- options ------------------------------------------------------------------------------ */

typedef enum { KIND_SIM, KIND_CUDA, KIND_AUTO } kind_choice;

static sl_status parse_kind(const char *what, const char *s, kind_choice *out, sl_error *err)
{
    if (!strcmp(s, "sim"))
        *out = KIND_SIM;
    else if (!strcmp(s, "cuda"))
        *out = KIND_CUDA;
    else if (!strcmp(s, "auto"))
        *out = KIND_AUTO;
    else
        return sl_error_set(err, SL_ERR_INVALID, "%s='%s': expected cuda, sim or auto", what,
                            s);
    return SL_OK;
}

sl_status sl_device_kind_check(const char *what, const char *s, sl_error *err)
{
    const char *w = what ? what : "device kind";
    if (!s) return sl_error_set(err, SL_ERR_INVALID, "%s: none given", w);
    kind_choice kc;
    return parse_kind(w, s, &kc, err);
}

/* Call n of a site fails: the device's own option (at, 0: never) or the installed test hook. */
static bool fault(uint64_t at, sl_fault_site site, uint64_t n)
{
    return (at && n == at) || sl__fault_hit(site, n);
}

static void notice(const sl_device_options *opt, const char *msg)
{
    if (opt->notice)
        opt->notice(opt->notice_user, msg);
    else
        fprintf(stderr, "sluice: %s\n", msg);
}

/* ---- open / close ------------------------------------------------------------------------ */

sl_status sl_device_open(const sl_device_options *opt_in, sl_device **out, sl_error *err)
{
    sl_error_clear(err);
    if (!out)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_open: out is NULL");
    *out = NULL;
    sl_device_options opt = {0};
    if (opt_in)
        opt = *opt_in;

    kind_choice kc = KIND_AUTO;
    sl_status st = SL_OK;
    /* the environment (SLUICE_DEVICE, SLUICE_SIM_*) reaches here through the options, filled
     * by runtime/engine/env.c */
    if (opt.kind && (st = parse_kind("options.kind", opt.kind, &kc, err)))
        return st;
    if (opt.cuda_ordinal < 0)
        return sl_error_set(err, SL_ERR_INVALID, "options.cuda_ordinal=%d: must be >= 0",
                            opt.cuda_ordinal);
    const double gbs[3] = {opt.sim.h2d_gbs, opt.sim.d2h_gbs, opt.sim.d2d_gbs};
    static const char *const gbs_name[3] = {"h2d_gbs", "d2h_gbs", "d2d_gbs"};
    for (int i = 0; i < 3; i++)
        if (!(gbs[i] >= 0.0) || gbs[i] > 1e6) /* also rejects NaN */
            return sl_error_set(err, SL_ERR_INVALID, "options.sim.%s=%g: must be in [0, 1e6]",
                                gbs_name[i], gbs[i]);

    const sl__device_ops *ops = &sl__sim_ops;
    if (kc == KIND_CUDA) {
        ops = &sl__cuda_ops;
    } else if (kc == KIND_AUTO) {
        int count = 0;
        sl_error perr = {0};
        if (sl__cuda_probe(&count, &perr) == SL_OK && count > 0) {
            ops = &sl__cuda_ops;
        } else {
            char msg[SL_ERROR_MSG_BYTES + 64];
            snprintf(msg, sizeof msg, "device auto: no usable CUDA device (%s); using sim",
                     count == 0 && perr.code == SL_OK ? "0 devices" : perr.msg);
            notice(&opt, msg);
        }
    }

    sl_device *d = calloc(1, sizeof *d);
    if (!d)
        return sl_error_set(err, SL_ERR_NOMEM, "sl_device_open: out of host memory");
    d->ops = ops;
    d->faults = opt.faults;
    d->ordinal = ops == &sl__cuda_ops ? opt.cuda_ordinal : 0;
    if (pthread_mutex_init(&d->mu, NULL)) {
        free(d);
        return sl_error_set(err, SL_ERR_NOMEM, "sl_device_open: pthread_mutex_init failed");
    }
    if ((st = ops->open(d, &opt, err))) {
        pthread_mutex_destroy(&d->mu);
        free(d);
        return st;
    }
    *out = d;
    return SL_OK;
}

void sl_device_close(sl_device *d)
{
    if (!d)
        return;
    /* Streams first: destroying one drains its queue, after which nothing refers to events,
     * regions or registrations any more. */
    while (d->streams)
        sl_device_stream_destroy(d, d->streams);
    while (d->events)
        sl_device_event_destroy(d, d->events);
    while (d->regs.n)
        sl_device_host_unregister(d, (void *)d->regs.v[d->regs.n - 1].base, NULL);
    while (d->regions.n) /* each call unlinks the entry, whatever the backend says */
        sl_device_region_free(d, (void *)d->regions.v[d->regions.n - 1].base, NULL);
    d->ops->close(d);
    free(d->regions.v);
    free(d->regs.v);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

sl_status sl_device_props_get(sl_device *d, sl_device_props *out, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !out)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_props_get: NULL argument");
    memset(out, 0, sizeof *out);
    out->kind = d->ops->kind;
    return d->ops->props(d, out, err);
}

sl_device_kind sl_device_kind_get(const sl_device *d)
{
    return d->ops->kind;
}

int sl_device_ordinal_get(const sl_device *d)
{
    return d ? d->ordinal : 0;
}

const char *sl_device_kind_name(sl_device_kind k)
{
    switch (k) {
    case SL_DEVICE_SIM: return "sim";
    case SL_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

/* ---- regions ----------------------------------------------------------------------------- */

sl_status sl_device_region_alloc(sl_device *d, uint64_t bytes, void **d_ptr, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !d_ptr)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_region_alloc: NULL argument");
    *d_ptr = NULL;
    if (bytes == 0)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_region_alloc: bytes=0");
    uint64_t n = atomic_fetch_add(&d->region_allocs, 1) + 1;
    if (fault(d->faults.region_alloc_at, SL_FAULT_REGION_ALLOC, n))
        return sl_error_set(err, SL_ERR_DEVICE,
                            "injected fault: region alloc #%" PRIu64 " (%" PRIu64 " bytes)", n,
                            bytes);
    void *p = NULL;
    sl_status st = d->ops->region_alloc(d, bytes, &p, err);
    if (st)
        return st;
    pthread_mutex_lock(&d->mu);
    st = range_insert(&d->regions, (sl__range){(uintptr_t)p, bytes, 0}, err);
    if (st == SL_OK) {
        atomic_fetch_add(&d->regions_live, 1);
        atomic_fetch_add(&d->region_bytes_live, bytes);
    }
    pthread_mutex_unlock(&d->mu);
    if (st) {
        d->ops->region_free(d, p, bytes, NULL);
        return st;
    }
    *d_ptr = p;
    return SL_OK;
}

sl_status sl_device_region_free(sl_device *d, void *d_ptr, sl_error *err)
{
    sl_error_clear(err);
    if (!d)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_region_free: device is NULL");
    if (!d_ptr)
        return SL_OK; /* like free(NULL) and cudaFree(NULL) */
    pthread_mutex_lock(&d->mu);
    size_t i = range_find_exact(&d->regions, (uintptr_t)d_ptr);
    if (i == SIZE_MAX) {
        pthread_mutex_unlock(&d->mu);
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_region_free: %p is not the base of a live region", d_ptr);
    }
    uint64_t bytes = d->regions.v[i].bytes;
    range_remove(&d->regions, i);
    atomic_fetch_sub(&d->regions_live, 1);
    atomic_fetch_sub(&d->region_bytes_live, bytes);
    pthread_mutex_unlock(&d->mu);
    /* Unlinked before the backend frees it, so that no new copy can be validated against a
     * region about to go; the backend waits for copies in flight (cudaFree synchronises). */
    return d->ops->region_free(d, d_ptr, bytes, err);
}

/* ---- host registration ------------------------------------------------------------------- */

sl_status sl_device_host_register(sl_device *d, void *h_ptr, uint64_t bytes, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !h_ptr)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_host_register: NULL argument");
    if (bytes == 0 || (uintptr_t)h_ptr + bytes < (uintptr_t)h_ptr)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_host_register: bad range %p + %" PRIu64, h_ptr, bytes);
    uint64_t n = atomic_fetch_add(&d->host_registers, 1) + 1;
    if (fault(d->faults.host_register_at, SL_FAULT_HOST_REGISTER, n))
        return sl_error_set(err, SL_ERR_DEVICE,
                            "injected fault: host register #%" PRIu64 " (%p, %" PRIu64 " bytes)",
                            n, h_ptr, bytes);
    pthread_mutex_lock(&d->mu);
    bool clash = range_overlaps(&d->regs, (uintptr_t)h_ptr, bytes);
    bool in_dev = range_overlaps(&d->regions, (uintptr_t)h_ptr, bytes);
    pthread_mutex_unlock(&d->mu);
    if (clash)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_host_register: %p + %" PRIu64
                            " overlaps an existing registration",
                            h_ptr, bytes);
    if (in_dev)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_host_register: %p + %" PRIu64 " lies in a device region",
                            h_ptr, bytes);
    uint32_t flags = 0;
    sl_status st = d->ops->host_register(d, h_ptr, bytes, &flags, err);
    if (st)
        return st;
    pthread_mutex_lock(&d->mu);
    /* Re-check: another thread may have registered an overlapping range meanwhile. */
    if (range_overlaps(&d->regs, (uintptr_t)h_ptr, bytes))
        st = sl_error_set(err, SL_ERR_INVALID,
                          "sl_device_host_register: %p + %" PRIu64
                          " overlaps an existing registration",
                          h_ptr, bytes);
    else
        st = range_insert(&d->regs, (sl__range){(uintptr_t)h_ptr, bytes, flags}, err);
    if (st == SL_OK)
        atomic_fetch_add(&d->registrations_live, 1);
    pthread_mutex_unlock(&d->mu);
    if (st)
        d->ops->host_unregister(d, h_ptr, bytes, flags, NULL);
    return st;
}

sl_status sl_device_host_unregister(sl_device *d, void *h_ptr, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !h_ptr)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_host_unregister: NULL argument");
    pthread_mutex_lock(&d->mu);
    size_t i = range_find_exact(&d->regs, (uintptr_t)h_ptr);
    if (i == SIZE_MAX) {
        pthread_mutex_unlock(&d->mu);
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_host_unregister: %p is not a registered host pointer",
                            h_ptr);
    }
    sl__range r = d->regs.v[i];
    range_remove(&d->regs, i);
    atomic_fetch_sub(&d->registrations_live, 1);
    pthread_mutex_unlock(&d->mu);
    return d->ops->host_unregister(d, h_ptr, r.bytes, r.flags, err);
}

/* ---- streams and events ------------------------------------------------------------------ */

sl_status sl_device_stream_create(sl_device *d, sl_stream **out, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !out)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_stream_create: NULL argument");
    *out = NULL;
    sl_stream *s = NULL;
    sl_status st = d->ops->stream_create(d, &s, err);
    if (st)
        return st;
    s->dev = d;
    pthread_mutex_lock(&d->mu);
    s->prev = NULL;
    s->next = d->streams;
    if (d->streams)
        d->streams->prev = s;
    d->streams = s;
    atomic_fetch_add(&d->streams_live, 1);
    pthread_mutex_unlock(&d->mu);
    *out = s;
    return SL_OK;
}

void sl_device_stream_destroy(sl_device *d, sl_stream *s)
{
    if (!d || !s)
        return;
    pthread_mutex_lock(&d->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        d->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    atomic_fetch_sub(&d->streams_live, 1);
    pthread_mutex_unlock(&d->mu);
    d->ops->stream_destroy(d, s);
}

static sl_status check_stream(sl_device *d, sl_stream *s, const char *fn, sl_error *err)
{
    if (!d || !s)
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL device or stream", fn);
    if (s->dev != d)
        return sl_error_set(err, SL_ERR_INVALID, "%s: stream %p belongs to another device", fn,
                            (void *)s);
    return SL_OK;
}

static sl_status check_event(sl_device *d, sl_event *e, const char *fn, sl_error *err)
{
    if (!d || !e)
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL device or event", fn);
    if (e->dev != d)
        return sl_error_set(err, SL_ERR_INVALID, "%s: event %p belongs to another device", fn,
                            (void *)e);
    return SL_OK;
}

void *sl_device_stream_native(sl_device *d, sl_stream *s)
{
    if (!d || !s || !d->ops->stream_native) return NULL;
    return d->ops->stream_native(s);
}

/* One stream or event operation issued by the host (sync: one that blocks it). */
static void count_call(sl_device *d, bool sync)
{
    atomic_fetch_add(&d->calls, 1);
    if (sync) atomic_fetch_add(&d->syncs, 1);
}

sl_status sl_device_stream_sync(sl_device *d, sl_stream *s, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = check_stream(d, s, "sl_device_stream_sync", err);
    if (!st) count_call(d, true);
    return st ? st : d->ops->stream_sync(d, s, err);
}

sl_status sl_device_event_create(sl_device *d, sl_event **out, sl_error *err)
{
    sl_error_clear(err);
    if (!d || !out)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_event_create: NULL argument");
    *out = NULL;
    sl_event *e = NULL;
    sl_status st = d->ops->event_create(d, &e, err);
    if (st)
        return st;
    e->dev = d;
    atomic_init(&e->recorded, false);
    pthread_mutex_lock(&d->mu);
    e->prev = NULL;
    e->next = d->events;
    if (d->events)
        d->events->prev = e;
    d->events = e;
    atomic_fetch_add(&d->events_live, 1);
    pthread_mutex_unlock(&d->mu);
    *out = e;
    return SL_OK;
}

void sl_device_event_destroy(sl_device *d, sl_event *e)
{
    if (!d || !e)
        return;
    pthread_mutex_lock(&d->mu);
    if (e->prev)
        e->prev->next = e->next;
    else
        d->events = e->next;
    if (e->next)
        e->next->prev = e->prev;
    atomic_fetch_sub(&d->events_live, 1);
    pthread_mutex_unlock(&d->mu);
    d->ops->event_destroy(d, e);
}

sl_status sl_device_event_record(sl_device *d, sl_event *e, sl_stream *s, sl_error *err)
{
    sl_error_clear(err);
    sl_status st;
    if ((st = check_event(d, e, "sl_device_event_record", err)) ||
        (st = check_stream(d, s, "sl_device_event_record", err)))
        return st;
    count_call(d, false);
    if ((st = d->ops->event_record(d, e, s, err)))
        return st;
    atomic_store(&e->recorded, true);
    return SL_OK;
}

sl_status sl_device_event_query(sl_device *d, sl_event *e, bool *done, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = check_event(d, e, "sl_device_event_query", err);
    if (st)
        return st;
    if (!done)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_event_query: done is NULL");
    count_call(d, false);
    return d->ops->event_query(d, e, done, err);
}

sl_status sl_device_event_sync(sl_device *d, sl_event *e, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = check_event(d, e, "sl_device_event_sync", err);
    if (!st) count_call(d, true);
    return st ? st : d->ops->event_sync(d, e, err);
}

sl_status sl_device_stream_wait(sl_device *d, sl_stream *s, sl_event *e, sl_error *err)
{
    sl_error_clear(err);
    sl_status st;
    if ((st = check_stream(d, s, "sl_device_stream_wait", err)) ||
        (st = check_event(d, e, "sl_device_stream_wait", err)))
        return st;
    count_call(d, false);
    return d->ops->stream_wait(d, s, e, err);
}

sl_status sl_device_event_elapsed_ms(sl_device *d, sl_event *start, sl_event *end, float *ms,
                                     sl_error *err)
{
    sl_error_clear(err);
    sl_status st;
    if ((st = check_event(d, start, "sl_device_event_elapsed_ms", err)) ||
        (st = check_event(d, end, "sl_device_event_elapsed_ms", err)))
        return st;
    if (!ms)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_event_elapsed_ms: ms is NULL");
    sl_event *ev[2] = {start, end};
    static const char *const which[2] = {"start", "end"};
    for (int i = 0; i < 2; i++) {
        if (!atomic_load(&ev[i]->recorded))
            return sl_error_set(err, SL_ERR_INVALID,
                                "sl_device_event_elapsed_ms: %s event %p was never recorded",
                                which[i], (void *)ev[i]);
        bool done = false;
        if ((st = d->ops->event_query(d, ev[i], &done, err)))
            return st;
        if (!done)
            return sl_error_set(err, SL_ERR_INVALID,
                                "sl_device_event_elapsed_ms: %s event %p has not completed",
                                which[i], (void *)ev[i]);
    }
    return d->ops->event_elapsed_ms(d, start, end, ms, err);
}

/* ---- copies and host functions ----------------------------------------------------------- */

static const char *const copy_kind_name[3] = {"H2D", "D2H", "D2D"};

/* The device side of a copy must lie inside one live region; the host side must not touch
 * one (a swapped argument pair would otherwise go unnoticed on sim, where both are host
 * addresses). Called under d->mu. */
static sl_status check_side(sl_device *d, const void *p, uint64_t bytes, bool device_side,
                            const char *role, sl_copy_kind kind, sl_error *err)
{
    if ((uintptr_t)p + bytes < (uintptr_t)p)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_copy %s: %s %p + %" PRIu64 " wraps around",
                            copy_kind_name[kind], role, p, bytes);
    if (device_side && !range_containing(&d->regions, (uintptr_t)p, bytes))
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_copy %s: %s %p + %" PRIu64
                            " bytes is not inside a live device region",
                            copy_kind_name[kind], role, p, bytes);
    if (!device_side && range_overlaps(&d->regions, (uintptr_t)p, bytes))
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_copy %s: host %s %p + %" PRIu64
                            " bytes lies in a device region",
                            copy_kind_name[kind], role, p, bytes);
    return SL_OK;
}

/* Everything sl_device_copy checks about one copy after the stream and kind, then the fault
 * counter (a copy that passes counts, even when the fault then fails it). d->mu is held. */
static sl_status check_copy(sl_device *d, void *dst, const void *src, uint64_t bytes,
                            sl_copy_kind kind, sl_error *err)
{
    if (!dst || !src)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_copy %s: NULL %s",
                            copy_kind_name[kind], dst ? "src" : "dst");
    sl_status st = check_side(d, dst, bytes, kind != SL_COPY_D2H, "dst", kind, err);
    if (!st)
        st = check_side(d, src, bytes, kind != SL_COPY_H2D, "src", kind, err);
    if (st)
        return st;
    uintptr_t a = (uintptr_t)dst, b = (uintptr_t)src;
    if (kind == SL_COPY_D2D && a < b + bytes && b < a + bytes)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_copy D2D: dst %p and src %p overlap (%" PRIu64 " bytes)",
                            dst, src, bytes);
    uint64_t n = atomic_fetch_add(&d->copy_calls, 1) + 1;
    if (fault(d->faults.copy_at, SL_FAULT_COPY, n))
        return sl_error_set(err, SL_ERR_DEVICE,
                            "injected fault: copy #%" PRIu64 " (%s, %" PRIu64 " bytes)", n,
                            copy_kind_name[kind], bytes);
    /* CUDA runs an async copy from or to pageable memory synchronously with the caller (and
     * serialises it behind earlier work): counted on every backend, so the sim twin shows it */
    if (kind != SL_COPY_D2D &&
        !range_containing(&d->regs, kind == SL_COPY_H2D ? b : a, bytes))
        atomic_fetch_add(&d->copies_pageable, 1);
    return SL_OK;
}

sl_status sl_device_copy(sl_device *d, sl_stream *s, void *dst, const void *src, uint64_t bytes,
                         sl_copy_kind kind, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = check_stream(d, s, "sl_device_copy", err);
    if (st)
        return st;
    if ((unsigned)kind > SL_COPY_D2D)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_copy: kind=%d is not a copy kind",
                            (int)kind);
    if (bytes == 0 && dst && src)
        return SL_OK; /* nothing to move; not counted, never faulted */
    count_call(d, false);
    pthread_mutex_lock(&d->mu);
    st = check_copy(d, dst, src, bytes, kind, err);
    pthread_mutex_unlock(&d->mu);
    if (st)
        return st;
    if ((st = d->ops->copy(d, s, dst, src, bytes, kind, err)))
        return st;
    atomic_fetch_add(&d->copies, 1); /* copies enqueued; faulted or refused ones are not */
    atomic_fetch_add(&d->copy_bytes[kind], bytes);
    return SL_OK;
}

sl_status sl_device_copy_batch(sl_device *d, sl_stream *s, const sl_copy_item *items, size_t n,
                               sl_copy_kind kind, size_t *issued, sl_error *err)
{
    sl_error_clear(err);
    size_t dummy;
    if (!issued)
        issued = &dummy;
    *issued = 0;
    sl_status st = check_stream(d, s, "sl_device_copy_batch", err);
    if (st)
        return st;
    if ((unsigned)kind > SL_COPY_D2D)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_device_copy_batch: kind=%d is not a copy kind", (int)kind);
    if (n && !items)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_copy_batch: %zu items at NULL", n);
    /* Zero-byte items are no-ops (as sl_device_copy): the backend gets the others, and `at`
     * maps its positions back to the caller's. Without any, items go through as they are. */
    sl_copy_item *v = NULL;
    size_t *at = NULL, m = 0, j = 0;
    sl_error check_err;
    sl_status bad = SL_OK;
    pthread_mutex_lock(&d->mu);
    for (; j < n; j++) {
        const sl_copy_item *it = &items[j];
        if (it->bytes == 0 && it->dst && it->src)
            continue;
        if ((bad = check_copy(d, it->dst, it->src, it->bytes, kind, &check_err)))
            break;
        if (m != j && !v) { /* a zero-byte item was skipped: from here on, filter */
            v = malloc(n * sizeof *v);
            at = malloc(n * sizeof *at);
            if (!v || !at) {
                free(v);
                free(at);
                v = NULL;
                at = NULL;
                m = j = 0; /* enqueue nothing: the caller sees no item issued */
                bad = sl_error_set(&check_err, SL_ERR_NOMEM,
                                   "sl_device_copy_batch: out of host memory for %zu items", n);
                break;
            }
            for (size_t i = 0, k = 0; i < j; i++)
                if (items[i].bytes) {
                    v[k] = items[i];
                    at[k++] = i;
                }
        }
        if (v) {
            v[m] = *it;
            at[m] = j;
        }
        m++;
    }
    pthread_mutex_unlock(&d->mu);
    /* no item for the backend: one refused call, or none (zero bytes, as sl_device_copy) */
    size_t done = 0, calls = bad ? 1 : 0;
    if (m && (st = d->ops->copy_batch(d, s, v ? v : items, m, kind, &done, &calls, err)))
        bad = SL_OK; /* the backend's error wins; items from `done` on were not enqueued */
    uint64_t bytes = 0;
    for (size_t i = 0; i < done; i++)
        bytes += (v ? v : items)[i].bytes;
    atomic_fetch_add(&d->copies, done);
    atomic_fetch_add(&d->copy_bytes[kind], bytes);
    if (done)
        atomic_fetch_add(&d->copy_batches, 1);
    atomic_fetch_add(&d->calls, calls);
    *issued = done == m ? j : (v ? at[done] : done);
    free(v);
    free(at);
    if (st)
        return st;
    if (bad)
        return sl_error_set(err, bad, "%s", check_err.msg);
    return SL_OK;
}

sl_status sl_device_launch_host(sl_device *d, sl_stream *s, sl_host_fn fn, void *user,
                                sl_error *err)
{
    sl_error_clear(err);
    sl_status st = check_stream(d, s, "sl_device_launch_host", err);
    if (st)
        return st;
    if (!fn)
        return sl_error_set(err, SL_ERR_INVALID, "sl_device_launch_host: fn is NULL");
    count_call(d, false);
    return d->ops->launch_host(d, s, fn, user, err);
}

/* ---- graphs --------------------------------------------------------------------------------- */

static sl_status graph_ops(sl_device *d, sl_stream *s, const char *fn, sl_error *err)
{
    sl_status st = check_stream(d, s, fn, err);
    if (st) return st;
    if (!d->ops->capture_begin)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: the %s device has no graphs", fn,
                            sl_device_kind_name(d->ops->kind));
    return SL_OK;
}

sl_status sl_device_capture_begin(sl_device *d, sl_stream *s, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = graph_ops(d, s, "sl_device_capture_begin", err);
    if (st) return st;
    count_call(d, false);
    return d->ops->capture_begin(d, s, err);
}

sl_status sl_device_capture_end(sl_device *d, sl_stream *s, sl_graph **out, sl_error *err)
{
    sl_error_clear(err);
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_device_capture_end: out is NULL");
    *out = NULL;
    sl_status st = graph_ops(d, s, "sl_device_capture_end", err);
    if (st) return st;
    count_call(d, false);
    return d->ops->capture_end(d, s, out, err);
}

sl_status sl_device_graph_launch(sl_device *d, sl_graph *g, sl_stream *s, sl_error *err)
{
    sl_error_clear(err);
    sl_status st = graph_ops(d, s, "sl_device_graph_launch", err);
    if (st) return st;
    if (!g) return sl_error_set(err, SL_ERR_INVALID, "sl_device_graph_launch: graph is NULL");
    count_call(d, false);
    return d->ops->graph_launch(d, g, s, err);
}

void sl_device_graph_destroy(sl_device *d, sl_graph *g)
{
    if (d && g && d->ops->graph_destroy) d->ops->graph_destroy(d, g);
}

/* ---- counters and validation ------------------------------------------------------------- */

void sl_device_counters_get(const sl_device *d, sl_device_counters *out)
{
    sl_device *m = (sl_device *)d; /* atomics are read-only here; C atomics want non-const */
    out->regions_live = atomic_load(&m->regions_live);
    out->region_bytes_live = atomic_load(&m->region_bytes_live);
    out->registrations_live = atomic_load(&m->registrations_live);
    out->streams_live = atomic_load(&m->streams_live);
    out->events_live = atomic_load(&m->events_live);
    out->copies = atomic_load(&m->copies);
    for (int i = 0; i < 3; i++)
        out->copy_bytes[i] = atomic_load(&m->copy_bytes[i]);
    out->copy_batches = atomic_load(&m->copy_batches);
    out->copies_pageable = atomic_load(&m->copies_pageable);
    out->region_allocs = atomic_load(&m->region_allocs);
    out->host_registers = atomic_load(&m->host_registers);
    out->syncs = atomic_load(&m->syncs);
    out->calls = atomic_load(&m->calls);
}

static sl_status validate_table(const sl__range_table *t, const char *what, sl_error *err)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i].bytes == 0)
            return sl_error_set(err, SL_ERR_INVALID, "device: %s[%zu] is empty", what, i);
        if (i && t->v[i - 1].base + t->v[i - 1].bytes > t->v[i].base)
            return sl_error_set(err, SL_ERR_INVALID,
                                "device: %s[%zu] and [%zu] overlap or are unsorted", what, i - 1,
                                i);
    }
    return SL_OK;
}

sl_status sl__device_validate(sl_device *d, sl_error *err)
{
    sl_status st = SL_OK;
    pthread_mutex_lock(&d->mu);
    uint64_t sum = 0, ns = 0, ne = 0;
    for (size_t i = 0; i < d->regions.n; i++)
        sum += d->regions.v[i].bytes;
    for (sl_stream *s = d->streams; s; s = s->next)
        ns++;
    for (sl_event *e = d->events; e; e = e->next)
        ne++;
    if ((st = validate_table(&d->regions, "regions", err)) ||
        (st = validate_table(&d->regs, "registrations", err)))
        goto out;
    if (atomic_load(&d->regions_live) != d->regions.n || atomic_load(&d->region_bytes_live) != sum)
        st = sl_error_set(err, SL_ERR_INVALID, "device: region counters disagree with table");
    else if (atomic_load(&d->registrations_live) != d->regs.n)
        st = sl_error_set(err, SL_ERR_INVALID, "device: registration counter disagrees");
    else if (atomic_load(&d->streams_live) != ns || atomic_load(&d->events_live) != ne)
        st = sl_error_set(err, SL_ERR_INVALID, "device: stream/event counters disagree");
out:
    pthread_mutex_unlock(&d->mu);
    return st;
}
