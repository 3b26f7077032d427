/* base/device/device_impl.h: private to base/device (device.c, sim.c, cuda.c).
 *
 * device.c owns everything both backends share, so that the two behave alike by construction:
 * argument checks, the tables of live regions and host registrations (pointer validation is
 * done there, for cuda too), the lists of live streams and events (close() frees leftovers),
 * fault injection and the counters. A backend only does the work, through sl__device_ops.
 *
 * Object layout: a backend's stream/event struct starts with the common header below
 * (`struct sim_stream { sl_stream base; ... }`), allocates it itself and hands it back; the
 * common layer links it into the device's list.
 *
 * Invariants (checked by sl__device_validate):
 *   regions sorted by base, pairwise disjoint, counters.regions_live == n_regions,
 *   counters.region_bytes_live == sum(region.bytes);
 *   registrations sorted and disjoint, registrations_live == n_regs;
 *   streams_live == length(streams list), events_live == length(events list).
 */
#ifndef SL_DEVICE_IMPL_H
#define SL_DEVICE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/device/device.h"

struct sl_stream {
    sl_device *dev;
    sl_stream *prev, *next; /* device's list of live streams (guarded by dev->mu) */
};

struct sl_event {
    sl_device *dev;
    sl_event *prev, *next;  /* device's list of live events (guarded by dev->mu) */
    atomic_bool recorded;   /* ever recorded: elapsed_ms needs it (cuda would say "invalid
                               resource handle"; we say which event) */
};

/* One live range [base, base + bytes): a device region or a host registration. `flags` is
 * the backend's per-range note (sim: whether mlock succeeded). */
typedef struct sl__range {
    uintptr_t base;
    uint64_t bytes;
    uint32_t flags;
} sl__range;

typedef struct sl__range_table {
    sl__range *v;   /* sorted by base, disjoint */
    size_t n, cap;
} sl__range_table;

/* Backend entry points. Arguments are already validated by device.c (non-NULL handles, pointers
 * inside live regions, no overlap, bytes > 0); counters and faults are handled there too. */
typedef struct sl__device_ops {
    sl_device_kind kind;
    /* Sets d->impl. opt is never NULL. */
    sl_status (*open)(sl_device *d, const sl_device_options *opt, sl_error *err);
    /* Frees d->impl; every stream, event, region and registration is gone already. */
    void (*close)(sl_device *d);
    sl_status (*props)(sl_device *d, sl_device_props *out, sl_error *err);
    /* Out of device memory: SL_ERR_NOMEM (the arena above tells it from other failures). */
    sl_status (*region_alloc)(sl_device *d, uint64_t bytes, void **d_ptr, sl_error *err);
    sl_status (*region_free)(sl_device *d, void *d_ptr, uint64_t bytes, sl_error *err);
    sl_status (*host_register)(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t *flags,
                               sl_error *err);
    sl_status (*host_unregister)(sl_device *d, void *h_ptr, uint64_t bytes, uint32_t flags,
                                 sl_error *err);
    sl_status (*stream_create)(sl_device *d, sl_stream **out, sl_error *err);
    void (*stream_destroy)(sl_device *d, sl_stream *s); /* waits for its work first */
    sl_status (*stream_sync)(sl_device *d, sl_stream *s, sl_error *err);
    sl_status (*event_create)(sl_device *d, sl_event **out, sl_error *err);
    void (*event_destroy)(sl_device *d, sl_event *e);
    sl_status (*event_record)(sl_device *d, sl_event *e, sl_stream *s, sl_error *err);
    sl_status (*event_query)(sl_device *d, sl_event *e, bool *done, sl_error *err);
    sl_status (*event_sync)(sl_device *d, sl_event *e, sl_error *err);
    sl_status (*stream_wait)(sl_device *d, sl_stream *s, sl_event *e, sl_error *err);
    /* Both events recorded and done (device.c checked). */
    sl_status (*event_elapsed_ms)(sl_device *d, sl_event *start, sl_event *end, float *ms,
                                  sl_error *err);
    sl_status (*copy)(sl_device *d, sl_stream *s, void *dst, const void *src, uint64_t bytes,
                      sl_copy_kind kind, sl_error *err);
    /* n ≥ 1 checked items (bytes > 0), in order. *issued: how many were enqueued (all on
     * SL_OK; a backend that enqueues them as one operation enqueues all or none); *calls: the
     * stream operations it enqueued for them (the counters' calls). */
    sl_status (*copy_batch)(sl_device *d, sl_stream *s, const sl_copy_item *items, size_t n,
                            sl_copy_kind kind, size_t *issued, size_t *calls, sl_error *err);
    sl_status (*launch_host)(sl_device *d, sl_stream *s, sl_host_fn fn, void *user,
                             sl_error *err);
    /* Graphs (device.h); NULL on a backend without them (sim): SL_ERR_UNSUPPORTED. */
    sl_status (*capture_begin)(sl_device *d, sl_stream *s, sl_error *err);
    sl_status (*capture_end)(sl_device *d, sl_stream *s, sl_graph **out, sl_error *err);
    sl_status (*graph_launch)(sl_device *d, sl_graph *g, sl_stream *s, sl_error *err);
    void (*graph_destroy)(sl_device *d, sl_graph *g);
    /* The backend's own stream handle (cudaStream_t), or NULL where there is none (sim). */
    void *(*stream_native)(sl_stream *s);
} sl__device_ops;

extern const sl__device_ops sl__sim_ops;
extern const sl__device_ops sl__cuda_ops;

/* How many CUDA devices are usable; an error (SL_ERR_DEVICE, CUDA's message) when none can be
 * counted. Used by `auto` to decide between cuda and sim. */
sl_status sl__cuda_probe(int *count, sl_error *err);

struct sl_device {
    const sl__device_ops *ops;
    void *impl;                 /* backend state */
    int ordinal;                /* options.cuda_ordinal (cuda), 0 (sim) */
    sl_fault_options faults;    /* the options' (the installed hook is asked as well) */

    pthread_mutex_t mu;         /* guards the tables and lists below */
    sl__range_table regions, regs;
    sl_stream *streams;
    sl_event *events;

    /* Counters are atomics so that counters_get (const, any thread) needs no lock. */
    atomic_uint_least64_t regions_live, region_bytes_live, registrations_live, streams_live,
        events_live, copies, copy_bytes[3], copy_batches, region_allocs, host_registers,
        copies_pageable, syncs, calls;
    atomic_uint_least64_t copy_calls; /* valid copy calls incl. injected failures: the fault
                                         counter (not public: `copies` counts enqueued ones) */
};

/* Checks the invariants above; SL_ERR_INVALID naming the first one broken. Takes d->mu. */
sl_status sl__device_validate(sl_device *d, sl_error *err);

#endif
