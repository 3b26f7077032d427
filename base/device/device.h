/* base/device: the device interface every Sluice module talks to, and its two backends.
 *
 * - cuda: regions by cudaMalloc, page-locking by cudaHostRegister, real streams and events,
 *   cudaMemcpyAsync. Every CUDA error becomes a status carrying CUDA's own message.
 * - sim:  a CPU stand-in so every scheduler behaviour runs in CI. Regions are host memory; each
 *   stream is a worker thread executing its queue in order; events are real completion
 *   markers; copies can be throttled to a bandwidth (GB/s) plus a per-operation latency, so
 *   overlap and late copies happen as on hardware.
 *
 * Contract
 * - Pointers: `d_` = device memory (from sl_device_region_alloc or offsets inside it), `h_` =
 *   host memory. In sim, device pointers are host addresses (dereferenceable; tests use it).
 * - Every enqueue (copy, record, wait, host function) is asynchronous with respect to the
 *   caller and ordered within its stream; nothing synchronises implicitly.
 * - A device handle may be used from several threads at once; a stream must be fed by one
 *   thread at a time (as with CUDA streams in practice).
 * - Backend choice: options.kind, else auto. auto picks cuda when a GPU is usable, otherwise
 *   sim with a one-line notice. An invalid value is an error naming it. Nothing here reads
 *   the environment: SLUICE_DEVICE and the sim throttle SLUICE_SIM_H2D_GBS /
 *   SLUICE_SIM_LATENCY_NS fill these options in runtime/engine/env.c.
 * - Fault injection (tests): the Nth region allocation, host registration or copy (1-based,
 *   counted per device) fails with SL_ERR_DEVICE and an "injected fault" message; the Nth is
 *   options.faults (0: never) or the installed hook's choice (base/fault.h).
 */
#ifndef SL_DEVICE_H
#define SL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct sl_device sl_device;
typedef struct sl_stream sl_stream;
typedef struct sl_event sl_event;

typedef enum sl_device_kind { SL_DEVICE_SIM = 0, SL_DEVICE_CUDA = 1 } sl_device_kind;

typedef enum sl_copy_kind { SL_COPY_H2D = 0, SL_COPY_D2H = 1, SL_COPY_D2D = 2 } sl_copy_kind;

typedef struct sl_sim_options {
    double h2d_gbs, d2h_gbs, d2d_gbs;   /* throttle per direction; 0 = as fast as memcpy */
    uint64_t latency_ns;                /* added to every copy */
    uint64_t mem_bytes;                 /* simulated device memory; 0 = 4 GiB */
    const char *pci_bus_id;             /* reported bus id (topology tests); NULL = none */
    const char *name;                   /* reported name; NULL = "sluice-sim" */
} sl_sim_options;

typedef struct sl_fault_options {
    uint64_t region_alloc_at, host_register_at, copy_at;  /* Nth call fails; 0 = never */
} sl_fault_options;

typedef void (*sl_device_notice_fn)(void *user, const char *msg);

typedef struct sl_device_options {
    const char *kind;       /* "cuda", "sim", "auto" or NULL (auto) */
    int cuda_ordinal;       /* which GPU for cuda */
    sl_sim_options sim;
    sl_fault_options faults;
    sl_device_notice_fn notice; /* one-line notices (auto fallback); NULL: stderr */
    void *notice_user;
} sl_device_options;

typedef struct sl_device_props {
    sl_device_kind kind;
    char name[256];
    char pci_bus_id[32];        /* "0000:65:00.0" form, "" if unknown */
    uint64_t total_mem_bytes;
    uint64_t free_mem_bytes;
    int cc_major, cc_minor;     /* 0 for sim */
} sl_device_props;

/* opt may be NULL (the defaults). */
sl_status sl_device_open(const sl_device_options *opt, sl_device **out, sl_error *err);
/* Waits for all streams, frees what is left (leaks are reported by the counters below). */
void sl_device_close(sl_device *d);
sl_status sl_device_props_get(sl_device *d, sl_device_props *out, sl_error *err);
sl_device_kind sl_device_kind_get(const sl_device *d);
/* The CUDA device ordinal the device was opened on (kernels/cuda contexts need it); 0 for sim
 * and for NULL. */
int sl_device_ordinal_get(const sl_device *d);
const char *sl_device_kind_name(sl_device_kind k);
/* Whether s names a device kind sl_device_open takes ("cuda", "sim" or "auto"); otherwise an
 * SL_ERR_INVALID naming `what` (the option, flag or variable) and s. */
sl_status sl_device_kind_check(const char *what, const char *s, sl_error *err);

/* Device memory regions (one cudaMalloc each). Freed regions must be idle (no copy in flight).
 * Out of device memory (cudaMalloc's, or sim's mem_bytes) is SL_ERR_NOMEM; other failures are
 * SL_ERR_DEVICE. */
sl_status sl_device_region_alloc(sl_device *d, uint64_t bytes, void **d_ptr, sl_error *err);
sl_status sl_device_region_free(sl_device *d, void *d_ptr, sl_error *err);

/* Page-locks existing host memory for fast async copies (cudaHostRegister; sim: mlock, which
 * may be refused by RLIMIT_MEMLOCK and is then recorded but not fatal). */
sl_status sl_device_host_register(sl_device *d, void *h_ptr, uint64_t bytes, sl_error *err);
sl_status sl_device_host_unregister(sl_device *d, void *h_ptr, sl_error *err);

sl_status sl_device_stream_create(sl_device *d, sl_stream **out, sl_error *err);
/* Waits for the stream's work, then destroys it. NULL is allowed. */
void sl_device_stream_destroy(sl_device *d, sl_stream *s);
sl_status sl_device_stream_sync(sl_device *d, sl_stream *s, sl_error *err);
/* The backend's stream handle for kernels launched outside the interface (kernels/cuda takes
 * it as its `void *cuda_stream`): the cudaStream_t on cuda, NULL on sim or for NULL args. */
void *sl_device_stream_native(sl_device *d, sl_stream *s);

sl_status sl_device_event_create(sl_device *d, sl_event **out, sl_error *err);
void sl_device_event_destroy(sl_device *d, sl_event *e);
/* Marks the point in s after everything enqueued so far; re-recording re-arms the event. */
sl_status sl_device_event_record(sl_device *d, sl_event *e, sl_stream *s, sl_error *err);
/* *done = the recorded point has been reached (true for a never-recorded event, as CUDA). */
sl_status sl_device_event_query(sl_device *d, sl_event *e, bool *done, sl_error *err);
sl_status sl_device_event_sync(sl_device *d, sl_event *e, sl_error *err);
/* Work enqueued on s after this call starts only once e's recorded point is reached. */
sl_status sl_device_stream_wait(sl_device *d, sl_stream *s, sl_event *e, sl_error *err);
/* Milliseconds between two completed events (both recorded, both done). */
sl_status sl_device_event_elapsed_ms(sl_device *d, sl_event *start, sl_event *end, float *ms,
                                     sl_error *err);

/* Asynchronous copy on stream s. D2D source and destination must not overlap. */
sl_status sl_device_copy(sl_device *d, sl_stream *s, void *dst, const void *src, uint64_t bytes,
                         sl_copy_kind kind, sl_error *err);

typedef struct sl_copy_item {
    void *dst;
    const void *src;
    uint64_t bytes;
} sl_copy_item;
/* n copies of one kind on stream s, exactly as n sl_device_copy calls in order would do them
 * (same checks, counters and fault numbering; an item may read what an earlier one wrote), but
 * enqueued as one operation where the backend can: many small copies (compaction) then cost
 * one enqueue, not n (sim: one worker op; cuda: D2D items up to 4 MiB as two gather kernels
 * per phase through a bounce buffer (cuda_gather.h), larger ones and other kinds one
 * cudaMemcpyAsync each; cudaMemcpyBatchAsync does not keep the order that dependent items
 * need). *issued = the items enqueued: all
 * on SL_OK; on an error at item j (bad arguments, injected fault), items [0, j) are enqueued
 * and item j and later are not, as if the calls had stopped at the failing one. */
sl_status sl_device_copy_batch(sl_device *d, sl_stream *s, const sl_copy_item *items, size_t n,
                               sl_copy_kind kind, size_t *issued, sl_error *err);

/* Runs fn(user) on the host in stream order (cudaLaunchHostFunc; sim: on the stream's worker).
 * fn must not call into the device. The sim backend runs reference kernels this way. */
typedef void (*sl_host_fn)(void *user);
sl_status sl_device_launch_host(sl_device *d, sl_stream *s, sl_host_fn fn, void *user,
                                sl_error *err);

/* Graphs: a stream's work recorded once and replayed as one operation (the decode pass of a
 * cuda context, runtime/engine/forward.c). Between capture_begin and capture_end the work the
 * calling thread enqueues on s (copies, host functions, kernels on its native handle) is
 * recorded, not run; capture_end turns it into a graph that graph_launch enqueues on a stream
 * as one operation: the same work on the same addresses, so what differs between replays
 * must differ in memory, not in arguments. Nothing may wait on s while it captures (a stream
 * sync, an event sync or query of work in the capture, a pageable copy): the capture is then
 * spoiled, capture_end says so (SL_ERR_DEVICE) and gives no graph, and s runs work again.
 * cuda: cudaStreamBeginCapture (relaxed mode), EndCapture + GraphInstantiate, GraphLaunch.
 * sim: SL_ERR_UNSUPPORTED (its executor runs kernels on the calling thread, not on a stream).
 * graph_destroy: NULL allowed; a launched graph may be destroyed at once (cuda completes it). */
typedef struct sl_graph sl_graph;
sl_status sl_device_capture_begin(sl_device *d, sl_stream *s, sl_error *err);
sl_status sl_device_capture_end(sl_device *d, sl_stream *s, sl_graph **out, sl_error *err);
sl_status sl_device_graph_launch(sl_device *d, sl_graph *g, sl_stream *s, sl_error *err);
void sl_device_graph_destroy(sl_device *d, sl_graph *g);

/* Counters for tests and stats: live regions/registrations/streams/events, bytes copied.
 * copies counts every copy enqueued, batched or not; copy_batches the batch calls that
 * enqueued at least one. */
typedef struct sl_device_counters {
    uint64_t regions_live, region_bytes_live, registrations_live, streams_live, events_live;
    uint64_t copies, copy_bytes[3], copy_batches;
    uint64_t region_allocs, host_registers; /* calls, including injected failures */
    /* H2D / D2H copy calls whose host side is not inside one host registration: on CUDA such
     * a copy is synchronous with the caller (a stall, or a deadlock behind a gated stream) */
    uint64_t copies_pageable;
    /* what the host pays per operation, whatever the bytes: syncs = blocking waits (stream and
     * event syncs); calls = stream and event operations issued (a copy; a copy batch: one on
     * sim, on cuda two a gather phase and one a plain copy; event record / query / sync,
     * stream wait / sync, host function, capture begin / end, graph launch), refused ones
     * included */
    uint64_t syncs, calls;
} sl_device_counters;
void sl_device_counters_get(const sl_device *d, sl_device_counters *out);

#endif
