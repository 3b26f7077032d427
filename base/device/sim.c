/* base/device/sim.c: the CPU "device" that lets every scheduler behaviour run in CI.
 *
 * Model
 * - Device memory: each region is an aligned host allocation (4 KiB, i.e. at least cudaMalloc's
 *   256 B), not zeroed (cudaMalloc does not zero either). A simulated capacity (mem_bytes,
 *   default 4 GiB) is enforced on the sum of live region bytes: beyond it, SL_ERR_NOMEM
 *   "out of device memory".
 * - Streams: one worker thread each, executing a FIFO of ops (copy, record, wait, host fn).
 * - Events: each record creates a refcounted *mark* that the record op completes (done flag and
 *   CLOCK_MONOTONIC timestamp). The event points at its latest mark; query/sync look at it;
 *   a stream wait captures the mark current at call time (CUDA semantics), so re-recording
 *   later does not change what an already enqueued wait waits for. A never-recorded event has
 *   no mark: query says done, waiting on it is a no-op, as in CUDA.
 * - Copies: memcpy (D2D overlap is rejected above). A batch is one op running its copies in
 *   order, so n small copies cost one enqueue and one wake-up of the worker, not n. Throttled per direction: the op takes
 *   latency_ns + bytes / gbs from the moment it starts (1 GB/s == 1 byte/ns), paced in 1 MiB
 *   slices against absolute CLOCK_MONOTONIC deadlines, so an observer sees the destination fill
 *   progressively, as with a DMA engine, and oversleeping one slice does not add up.
 * - Region free waits for the work enqueued on every stream of the device before the call
 *   (cudaFree synchronises the device too), so a copy still in flight never touches freed
 *   memory.
 * - Host registration is mlock. RLIMIT_MEMLOCK (often 8 MiB) may refuse it (EPERM, ENOMEM,
 *   EAGAIN): the registration still succeeds, flagged as not locked, because in sim pinning
 *   only affects speed, which is simulated anyway.
 *
 * Locks: sim->mu guards marks and `used` (sim->cv is broadcast whenever a mark completes);
 * stream->mu guards that stream's queue and counters. Order: d->mu (device.c) before
 * stream->mu; stream->mu and sim->mu are never held together; workers take neither d->mu.
 * Invariants: done <= enq per stream; used == sum of live region bytes <= capacity.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/clock.h"
#include "base/device/device_impl.h"

enum { SIM_REGION_ALIGN = 4096, SIM_SLICE_BYTES = 1 << 20, SIM_REG_LOCKED = 1 };

typedef struct sim_mark {
    bool done;
    uint64_t t_ns;  /* completion time, CLOCK_MONOTONIC */
    int refs;       /* event + ops that refer to it */
} sim_mark;

typedef enum { OP_COPY, OP_COPY_BATCH, OP_RECORD, OP_WAIT, OP_HOST } sim_op_kind;

typedef struct sim_op {
    struct sim_op *next;
    sim_op_kind kind;
    void *dst;
    const void *src;
    uint64_t bytes;
    sl_copy_kind copy_kind;
    sl_copy_item *items;  /* COPY_BATCH: n copies in order, owned by the op */
    size_t n;
    sim_mark *mark;  /* RECORD: completes it; WAIT: waits for it */
    sl_host_fn fn;
    void *user;
} sim_op;

typedef struct sim_dev {
    double gbs[3];
    uint64_t latency_ns, capacity;
    char name[256], pci[32];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t used;  /* live region bytes */
} sim_dev;

typedef struct sim_stream {
    sl_stream base;
    sim_dev *sim;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    sim_op *head, *tail;
    uint64_t enq, done;  /* ops enqueued / completed on this stream */
    /* Smallest `done` count a sync is waiting for (UINT64_MAX: none). The worker wakes syncing
     * threads only when it is reached, not after every op: a sync behind N small copies would
     * otherwise cost N wake-ups, a per-op host cost that a GPU's stream sync does not have. */
    uint64_t wake_at;
    bool quit;
} sim_stream;

typedef struct sim_event {
    sl_event base;
    sim_mark *mark;  /* latest record; NULL if never recorded; guarded by sim->mu */
} sim_event;

static sim_dev *SIM(sl_device *d) { return d->impl; }

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000u), (long)(t_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Called with sim->mu held. */
static void mark_unref(sim_mark *m)
{
    if (m && --m->refs == 0)
        free(m);
}

/* ---- worker ------------------------------------------------------------------------------ */

/* One copy, throttled as the file comment says (each copy of a batch pays its own latency,
 * as the separate copies it stands for would). */
static void run_copy(sim_dev *sim, void *dst, const void *src, uint64_t bytes, sl_copy_kind kind)
{
    double gbs = sim->gbs[kind];
    if (gbs <= 0.0 && sim->latency_ns == 0) {
        memcpy(dst, src, bytes);
        return;
    }
    uint64_t t0 = sl_clock_ns();
    uint64_t start = t0 + sim->latency_ns;
    sleep_until(start);
    if (gbs <= 0.0) {
        memcpy(dst, src, bytes);
        return;
    }
    for (uint64_t off = 0; off < bytes;) {
        uint64_t n = bytes - off < SIM_SLICE_BYTES ? bytes - off : SIM_SLICE_BYTES;
        memcpy((char *)dst + off, (const char *)src + off, n);
        off += n;
        sleep_until(start + (uint64_t)((double)off / gbs)); /* gbs GB/s == gbs bytes/ns */
    }
}

static void run_op(sim_dev *sim, sim_op *op)
{
    switch (op->kind) {
    case OP_COPY:
        run_copy(sim, op->dst, op->src, op->bytes, op->copy_kind);
        break;
    case OP_COPY_BATCH:
        for (size_t i = 0; i < op->n; i++)
            run_copy(sim, op->items[i].dst, op->items[i].src, op->items[i].bytes, op->copy_kind);
        free(op->items);
        break;
    case OP_HOST:
        op->fn(op->user);
        break;
    case OP_RECORD:
        pthread_mutex_lock(&sim->mu);
        op->mark->t_ns = sl_clock_ns();
        op->mark->done = true;
        mark_unref(op->mark);
        pthread_cond_broadcast(&sim->cv);
        pthread_mutex_unlock(&sim->mu);
        break;
    case OP_WAIT:
        pthread_mutex_lock(&sim->mu);
        while (!op->mark->done)
            pthread_cond_wait(&sim->cv, &sim->mu);
        mark_unref(op->mark);
        pthread_mutex_unlock(&sim->mu);
        break;
    }
}

static void *worker(void *arg)
{
    sim_stream *s = arg;
    sim_dev *sim = s->sim;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->quit)
            pthread_cond_wait(&s->work_cv, &s->mu);
        if (!s->head)
            break; /* quit with an empty queue */
        sim_op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);

        run_op(sim, op);
        free(op);

        pthread_mutex_lock(&s->mu);
        if (++s->done >= s->wake_at) {
            s->wake_at = UINT64_MAX; /* waiters still short of their target set it again */
            pthread_cond_broadcast(&s->done_cv);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static sl_status enqueue(sim_stream *s, sim_op *op)
{
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->enq++;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    return SL_OK;
}

static sim_op *op_new(sim_op_kind kind, sl_error *err)
{
    sim_op *op = calloc(1, sizeof *op);
    if (!op)
        sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory for a stream op");
    else
        op->kind = kind;
    return op;
}

/* ---- device ------------------------------------------------------------------------------ */

static sl_status sim_open(sl_device *d, const sl_device_options *opt, sl_error *err)
{
    sim_dev *sim = calloc(1, sizeof *sim);
    if (!sim)
        return sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory");
    sim->gbs[SL_COPY_H2D] = opt->sim.h2d_gbs;
    sim->gbs[SL_COPY_D2H] = opt->sim.d2h_gbs;
    sim->gbs[SL_COPY_D2D] = opt->sim.d2d_gbs;
    sim->latency_ns = opt->sim.latency_ns;
    sim->capacity = opt->sim.mem_bytes ? opt->sim.mem_bytes : (uint64_t)4 << 30;
    snprintf(sim->name, sizeof sim->name, "%s", opt->sim.name ? opt->sim.name : "sluice-sim");
    snprintf(sim->pci, sizeof sim->pci, "%s", opt->sim.pci_bus_id ? opt->sim.pci_bus_id : "");
    if (pthread_mutex_init(&sim->mu, NULL)) {
        free(sim);
        return sl_error_set(err, SL_ERR_DEVICE, "sim: pthread_mutex_init failed");
    }
    if (pthread_cond_init(&sim->cv, NULL)) {
        pthread_mutex_destroy(&sim->mu);
        free(sim);
        return sl_error_set(err, SL_ERR_DEVICE, "sim: pthread_cond_init failed");
    }
    d->impl = sim;
    return SL_OK;
}

static void sim_close(sl_device *d)
{
    sim_dev *sim = SIM(d);
    pthread_cond_destroy(&sim->cv);
    pthread_mutex_destroy(&sim->mu);
    free(sim);
    d->impl = NULL;
}

static sl_status sim_props(sl_device *d, sl_device_props *out, sl_error *err)
{
    (void)err;
    sim_dev *sim = SIM(d);
    snprintf(out->name, sizeof out->name, "%s", sim->name);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", sim->pci);
    out->total_mem_bytes = sim->capacity;
    pthread_mutex_lock(&sim->mu);
    out->free_mem_bytes = sim->capacity - sim->used;
    pthread_mutex_unlock(&sim->mu);
    return SL_OK;
}

static sl_status sim_region_alloc(sl_device *d, uint64_t bytes, void **d_ptr, sl_error *err)
{
    sim_dev *sim = SIM(d);
    pthread_mutex_lock(&sim->mu);
    uint64_t used = sim->used;
    bool fits = bytes <= sim->capacity - used;
    if (fits)
        sim->used += bytes;
    pthread_mutex_unlock(&sim->mu);
    if (!fits)
        return sl_error_set(err, SL_ERR_NOMEM,
                            "sim: out of device memory: %" PRIu64 " bytes requested, %" PRIu64
                            " of %" PRIu64 " in use",
                            bytes, used, sim->capacity);
    void *p = NULL;
    if (bytes > SIZE_MAX || posix_memalign(&p, SIM_REGION_ALIGN, (size_t)bytes)) {
        pthread_mutex_lock(&sim->mu);
        sim->used -= bytes;
        pthread_mutex_unlock(&sim->mu);
        return sl_error_set(err, SL_ERR_NOMEM,
                            "sim: out of device memory: host refused %" PRIu64 " bytes", bytes);
    }
    *d_ptr = p;
    return SL_OK;
}

static sl_status sim_stream_sync(sl_device *d, sl_stream *bs, sl_error *err);

static sl_status sim_region_free(sl_device *d, void *d_ptr, uint64_t bytes, sl_error *err)
{
    sim_dev *sim = SIM(d);
    /* Like cudaFree: wait for the work enqueued on every stream before this call (not for
     * work enqueued later, so a busy stream cannot starve the free). d->mu keeps streams from
     * being destroyed meanwhile; workers never take it. */
    pthread_mutex_lock(&d->mu);
    for (sl_stream *s = d->streams; s; s = s->next)
        sim_stream_sync(d, s, err);
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_lock(&sim->mu);
    sim->used -= bytes;
    pthread_mutex_unlock(&sim->mu);
    free(d_ptr);
    return SL_OK;
}

static sl_status sim_host_register(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t *flags,
                                   sl_error *err)
{
    (void)d;
    *flags = 0;
    if (mlock(h_ptr, (size_t)bytes) == 0) {
        *flags = SIM_REG_LOCKED;
        return SL_OK;
    }
    int e = errno;
    if (e == EPERM || e == ENOMEM || e == EAGAIN)
        return SL_OK; /* RLIMIT_MEMLOCK: recorded as not locked, see the file comment */
    return sl_error_set(err, SL_ERR_DEVICE, "sim: mlock(%p, %" PRIu64 "): %s", h_ptr, bytes,
                        strerror(e));
}

static sl_status sim_host_unregister(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t flags,
                                     sl_error *err)
{
    (void)d;
    if ((flags & SIM_REG_LOCKED) && munlock(h_ptr, (size_t)bytes) != 0)
        return sl_error_set(err, SL_ERR_DEVICE, "sim: munlock(%p, %" PRIu64 "): %s", h_ptr,
                            bytes, strerror(errno));
    return SL_OK;
}

/* ---- streams ----------------------------------------------------------------------------- */

static sl_status sim_stream_create(sl_device *d, sl_stream **out, sl_error *err)
{
    sim_stream *s = calloc(1, sizeof *s);
    if (!s)
        return sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory for a stream");
    s->sim = SIM(d);
    s->wake_at = UINT64_MAX;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    int rc = pthread_create(&s->thread, NULL, worker, s);
    if (rc) {
        pthread_cond_destroy(&s->done_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return sl_error_set(err, SL_ERR_DEVICE, "sim: pthread_create for a stream worker: %s",
                            strerror(rc));
    }
    *out = &s->base;
    return SL_OK;
}

static sl_status sim_stream_sync(sl_device *d, sl_stream *bs, sl_error *err)
{
    (void)d;
    (void)err;
    sim_stream *s = (sim_stream *)bs;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enq;
    while (s->done < target) {
        if (target < s->wake_at)
            s->wake_at = target;
        pthread_cond_wait(&s->done_cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return SL_OK;
}

static void sim_stream_destroy(sl_device *d, sl_stream *bs)
{
    sim_stream *s = (sim_stream *)bs;
    sim_stream_sync(d, bs, NULL);
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- events ------------------------------------------------------------------------------ */

static sl_status sim_event_create(sl_device *d, sl_event **out, sl_error *err)
{
    (void)d;
    sim_event *e = calloc(1, sizeof *e);
    if (!e)
        return sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory for an event");
    *out = &e->base;
    return SL_OK;
}

static void sim_event_destroy(sl_device *d, sl_event *be)
{
    sim_dev *sim = SIM(d);
    sim_event *e = (sim_event *)be;
    pthread_mutex_lock(&sim->mu);
    mark_unref(e->mark); /* a pending record op keeps its own reference */
    pthread_mutex_unlock(&sim->mu);
    free(e);
}

static sl_status sim_event_record(sl_device *d, sl_event *be, sl_stream *bs, sl_error *err)
{
    sim_dev *sim = SIM(d);
    sim_event *e = (sim_event *)be;
    sim_op *op = op_new(OP_RECORD, err);
    sim_mark *m = calloc(1, sizeof *m);
    if (!op || !m) {
        free(op);
        free(m);
        return sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory for an event record");
    }
    m->refs = 2; /* the event and the record op */
    op->mark = m;
    pthread_mutex_lock(&sim->mu);
    mark_unref(e->mark);
    e->mark = m;
    pthread_mutex_unlock(&sim->mu);
    return enqueue((sim_stream *)bs, op);
}

static sl_status sim_event_query(sl_device *d, sl_event *be, bool *done, sl_error *err)
{
    (void)err;
    sim_dev *sim = SIM(d);
    sim_event *e = (sim_event *)be;
    pthread_mutex_lock(&sim->mu);
    *done = !e->mark || e->mark->done;
    pthread_mutex_unlock(&sim->mu);
    return SL_OK;
}

static sl_status sim_event_sync(sl_device *d, sl_event *be, sl_error *err)
{
    (void)err;
    sim_dev *sim = SIM(d);
    sim_event *e = (sim_event *)be;
    pthread_mutex_lock(&sim->mu);
    sim_mark *m = e->mark;
    if (m) {
        m->refs++; /* the event may be re-recorded while we wait */
        while (!m->done)
            pthread_cond_wait(&sim->cv, &sim->mu);
        mark_unref(m);
    }
    pthread_mutex_unlock(&sim->mu);
    return SL_OK;
}

static sl_status sim_stream_wait(sl_device *d, sl_stream *bs, sl_event *be, sl_error *err)
{
    sim_dev *sim = SIM(d);
    sim_event *e = (sim_event *)be;
    sim_op *op = op_new(OP_WAIT, err);
    if (!op)
        return SL_ERR_NOMEM;
    pthread_mutex_lock(&sim->mu);
    sim_mark *m = e->mark;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&sim->mu);
    if (!m) { /* never recorded: nothing to wait for, as in CUDA */
        free(op);
        return SL_OK;
    }
    op->mark = m;
    return enqueue((sim_stream *)bs, op);
}

static sl_status sim_event_elapsed_ms(sl_device *d, sl_event *a, sl_event *b, float *ms,
                                      sl_error *err)
{
    sim_dev *sim = SIM(d);
    sl_status st = SL_OK;
    pthread_mutex_lock(&sim->mu);
    sim_mark *ma = ((sim_event *)a)->mark, *mb = ((sim_event *)b)->mark;
    if (!ma || !mb || !ma->done || !mb->done) /* re-recorded since device.c looked */
        st = sl_error_set(err, SL_ERR_INVALID, "sim: elapsed_ms: an event is not complete");
    else
        *ms = (float)(((double)mb->t_ns - (double)ma->t_ns) / 1e6);
    pthread_mutex_unlock(&sim->mu);
    return st;
}

/* ---- work -------------------------------------------------------------------------------- */

static sl_status sim_copy(sl_device *d, sl_stream *bs, void *dst, const void *src,
                          uint64_t bytes, sl_copy_kind kind, sl_error *err)
{
    (void)d;
    sim_op *op = op_new(OP_COPY, err);
    if (!op)
        return SL_ERR_NOMEM;
    op->dst = dst;
    op->src = src;
    op->bytes = bytes;
    op->copy_kind = kind;
    return enqueue((sim_stream *)bs, op);
}

/* All items in one op: one enqueue and at most one worker wake-up for the whole batch. */
static sl_status sim_copy_batch(sl_device *d, sl_stream *bs, const sl_copy_item *items, size_t n,
                                sl_copy_kind kind, size_t *issued, size_t *calls, sl_error *err)
{
    (void)d;
    *issued = 0;
    *calls = 1; /* one op, enqueued or refused */
    sim_op *op = op_new(OP_COPY_BATCH, err);
    if (!op)
        return SL_ERR_NOMEM;
    op->items = n <= SIZE_MAX / sizeof *items ? malloc(n * sizeof *items) : NULL;
    if (!op->items) {
        free(op);
        return sl_error_set(err, SL_ERR_NOMEM, "sim: out of host memory for a batch of %zu copies",
                            n);
    }
    memcpy(op->items, items, n * sizeof *items);
    op->n = n;
    op->copy_kind = kind;
    sl_status st = enqueue((sim_stream *)bs, op);
    if (!st)
        *issued = n;
    return st;
}

static sl_status sim_launch_host(sl_device *d, sl_stream *bs, sl_host_fn fn, void *user,
                                 sl_error *err)
{
    (void)d;
    sim_op *op = op_new(OP_HOST, err);
    if (!op)
        return SL_ERR_NOMEM;
    op->fn = fn;
    op->user = user;
    return enqueue((sim_stream *)bs, op);
}

const sl__device_ops sl__sim_ops = {
    .kind = SL_DEVICE_SIM,
    .open = sim_open,
    .close = sim_close,
    .props = sim_props,
    .region_alloc = sim_region_alloc,
    .region_free = sim_region_free,
    .host_register = sim_host_register,
    .host_unregister = sim_host_unregister,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_sync = sim_stream_sync,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .stream_wait = sim_stream_wait,
    .event_elapsed_ms = sim_event_elapsed_ms,
    .copy = sim_copy,
    .copy_batch = sim_copy_batch,
    .launch_host = sim_launch_host,
};
