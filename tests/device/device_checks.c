/* tests/device/device_checks.c: see device_checks.h. */
#include "tests/device/device_checks.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/device/gather_plan.h"
#include "tests/testing.h"

#define OK(call)                                                                           \
    do {                                                                                   \
        sl_status ok_st_ = (call);                                                         \
        CHECK_MSG(ok_st_ == SL_OK, "%s -> %s: %s", #call, sl_status_name(ok_st_), err.msg);  \
    } while (0)

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_next(&s);
}

static void check_counters_zero(sl_device *d)
{
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    CHECK_MSG(c.regions_live == 0 && c.region_bytes_live == 0 && c.registrations_live == 0 &&
                  c.streams_live == 0 && c.events_live == 0,
              "live: regions %" PRIu64 " bytes %" PRIu64 " regs %" PRIu64 " streams %" PRIu64
              " events %" PRIu64,
              c.regions_live, c.region_bytes_live, c.registrations_live, c.streams_live,
              c.events_live);
}

/* The end of a check: its stream and region (r may be NULL) released, nothing left live on
 * the device, the device closed. */
static void close_checked(sl_device *d, sl_stream *s, void *r)
{
    sl_error err;
    sl_device_stream_destroy(d, s);
    if (r)
        OK(sl_device_region_free(d, r, &err));
    check_counters_zero(d);
    sl_device_close(d);
}

static sl_device *open_dev(const sl_device_options *base, sl_fault_options faults)
{
    sl_device_options o = *base;
    o.faults = faults;
    sl_device *d = NULL;
    sl_error err;
    OK(sl_device_open(&o, &d, &err));
    return d;
}

/* ---- gate: a host function that holds its stream until released ------------------------- */

typedef struct gate {
    atomic_int open, entered;
} gate;

static void gate_fn(void *user)
{
    gate *g = user;
    atomic_store(&g->entered, 1);
    struct timespec ts = {0, 200000};
    while (!atomic_load(&g->open))
        nanosleep(&ts, NULL);
}

/* ---- checks ------------------------------------------------------------------------------ */

static void check_props(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    sl_device_props p;
    OK(sl_device_props_get(d, &p, &err));
    CHECK(p.kind == sl_device_kind_get(d));
    CHECK(p.name[0] != '\0');
    CHECK(p.total_mem_bytes > 0 && p.free_mem_bytes <= p.total_mem_bytes);
    check_counters_zero(d);
    sl_device_close(d);
}

static void check_regions(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    void *r[8] = {0};
    uint64_t sizes[8], total = 0;
    for (int i = 0; i < 8; i++) {
        sizes[i] = (uint64_t)(i + 1) * 4096 + (uint64_t)i * 3;
        OK(sl_device_region_alloc(d, sizes[i], &r[i], &err));
        CHECK(r[i] != NULL && ((uintptr_t)r[i] & 255) == 0);
        total += sizes[i];
    }
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    CHECK(c.regions_live == 8 && c.region_bytes_live == total && c.region_allocs == 8);

    void *p = (void *)1;
    CHECK(sl_device_region_alloc(d, 0, &p, &err) == SL_ERR_INVALID && p == NULL);
    CHECK(sl_device_region_free(d, (char *)r[0] + 256, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "not the base of a live region");
    CHECK(sl_device_region_free(d, NULL, &err) == SL_OK);

    for (int i = 0; i < 8; i += 2)
        OK(sl_device_region_free(d, r[i], &err));
    CHECK(sl_device_region_free(d, r[0], &err) == SL_ERR_INVALID); /* double free */
    for (int i = 1; i < 8; i += 2)
        OK(sl_device_region_free(d, r[i], &err));
    check_counters_zero(d);
    sl_device_close(d);
}

/* Random-size H2D, D2D, D2H round trips at random offsets; data must survive exactly. */
static void check_copies(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { REGION = 4 << 20 };
    void *r = NULL;
    sl_stream *s = NULL;
    uint8_t *src = malloc(REGION / 2), *dst = malloc(REGION / 2);
    OK(sl_device_region_alloc(d, REGION, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    /* kernels/cuda launches on the native stream: present exactly on the cuda backend. */
    CHECK((sl_device_stream_native(d, s) != NULL) == (sl_device_kind_get(d) == SL_DEVICE_CUDA));
    CHECK(sl_device_stream_native(d, NULL) == NULL);
    uint64_t seed = 0x9E3779B97F4A7C15u, h2d = 0, d2h = 0, d2d = 0;
    if (r && s && src && dst) {
        for (int it = 0; it < 24; it++) {
            uint64_t n = 1 + rng_next(&seed) % (REGION / 4 - 1);
            if (it % 6 == 0)
                n = 1 + (uint64_t)it; /* tiny ones too */
            uint64_t a = rng_next(&seed) % (REGION / 2 - n);          /* first half */
            uint64_t b = REGION / 2 + rng_next(&seed) % (REGION / 2 - n); /* second half */
            fill(src, n, seed);
            memset(dst, 0xA5, n + 1);
            uint8_t *ra = (uint8_t *)r + a, *rb = (uint8_t *)r + b;
            OK(sl_device_copy(d, s, ra, src, n, SL_COPY_H2D, &err));
            OK(sl_device_copy(d, s, rb, ra, n, SL_COPY_D2D, &err));
            OK(sl_device_copy(d, s, dst, rb, n, SL_COPY_D2H, &err));
            OK(sl_device_stream_sync(d, s, &err));
            CHECK_MSG(memcmp(src, dst, n) == 0, "round trip of %" PRIu64 " bytes differs", n);
            CHECK(dst[n] == 0xA5); /* nothing past the end */
            h2d += n;
            d2h += n;
            d2d += n;
        }
    }
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    CHECK(c.copies == 72 && c.copy_bytes[SL_COPY_H2D] == h2d &&
          c.copy_bytes[SL_COPY_D2H] == d2h && c.copy_bytes[SL_COPY_D2D] == d2d);
    /* malloc'd host buffers: every H2D and D2H is flagged, D2D never */
    CHECK_MSG(c.copies_pageable == 48, "copies_pageable = %llu",
              (unsigned long long)c.copies_pageable);
    /* per-operation cost: 3 copies and 1 blocking sync per round */
    CHECK_MSG(c.calls == 96 && c.syncs == 24, "calls %llu, syncs %llu",
              (unsigned long long)c.calls, (unsigned long long)c.syncs);
    OK(sl_device_copy(d, s, r, src, 0, SL_COPY_H2D, &err)); /* zero bytes: a no-op */
    free(src);
    free(dst);
    close_checked(d, s, r);
}

/* sl_device_copy_batch: items run in order (each reads what the one before wrote), zero-byte
 * items are no-ops, counters count items and one batch; a bad item or an injected fault stops
 * the batch with exactly the items before it enqueued. */
static void check_copy_batch(const sl_device_options *base)
{
    enum { N = 64 << 10 };
    for (int faulted = 0; faulted < 2; faulted++) {
        sl_error err;
        /* copy #1 is the H2D setup, #2 the batch's first item; the fault hits #3, its third
         * item (the zero-byte second one is no copy), so items 0 and 1 count as issued */
        sl_device *d = open_dev(base, (sl_fault_options){.copy_at = faulted ? 3 : 0});
        if (!d)
            return;
        void *r = NULL;
        sl_stream *s = NULL;
        uint8_t *src = malloc(N), *out = malloc(N);
        OK(sl_device_region_alloc(d, 4 * N, &r, &err));
        OK(sl_device_stream_create(d, &s, &err));
        if (r && s && src && out) {
            uint8_t *rr = r;
            fill(src, N, 0xBA7C);
            memset(out, 0, N);
            OK(sl_device_copy(d, s, rr, src, N, SL_COPY_H2D, &err));
            sl_copy_item chain[] = {{rr + N, rr, N},
                                    {rr + 2 * N, rr + N, 0},
                                    {rr + 2 * N, rr + N, N},
                                    {rr + 3 * N, rr + 2 * N, N}};
            sl_device_counters c0, c1;
            sl_device_counters_get(d, &c0);
            size_t issued = 99;
            sl_status st = sl_device_copy_batch(d, s, chain, 4, SL_COPY_D2D, &issued, &err);
            sl_device_counters_get(d, &c1);
            if (!faulted) {
                CHECK_MSG(st == SL_OK && issued == 4, "%s (issued %zu)", err.msg, issued);
                CHECK(c1.copies - c0.copies == 3 && c1.copy_batches - c0.copy_batches == 1);
                CHECK(c1.copy_bytes[SL_COPY_D2D] - c0.copy_bytes[SL_COPY_D2D] == 3 * N);
                OK(sl_device_copy(d, s, out, rr + 3 * N, N, SL_COPY_D2H, &err));
                OK(sl_device_stream_sync(d, s, &err));
                CHECK_MSG(memcmp(src, out, N) == 0, "the chained batch did not carry the data");
                /* an overlapping D2D item stops the batch after the first */
                sl_copy_item bad[] = {{rr + N, rr, N}, {rr + 8, rr, 16}, {rr + 2 * N, rr, N}};
                CHECK(sl_device_copy_batch(d, s, bad, 3, SL_COPY_D2D, &issued, &err) ==
                      SL_ERR_INVALID);
                CHECK_CONTAINS(err.msg, "overlap");
                CHECK(issued == 1);
                OK(sl_device_copy_batch(d, s, NULL, 0, SL_COPY_D2D, &issued, &err));
                CHECK(issued == 0);
                sl_device_counters c2;
                sl_device_counters_get(d, &c2);
                /* the D2H read-back and the bad batch's first item */
                CHECK(c2.copies - c1.copies == 2 && c2.copy_batches - c1.copy_batches == 1);
            } else {
                CHECK_MSG(st == SL_ERR_DEVICE && issued == 2, "status %d, issued %zu", (int)st,
                          issued);
                CHECK_CONTAINS(err.msg, "injected fault");
                CHECK(c1.copies - c0.copies == 1 && c1.copy_batches - c0.copy_batches == 1);
                OK(sl_device_copy(d, s, out, rr + N, N, SL_COPY_D2H, &err));
                OK(sl_device_stream_sync(d, s, &err));
                CHECK_MSG(memcmp(out, src, N) == 0, "the item before the fault did not run");
            }
        }
        free(src);
        free(out);
        close_checked(d, s, r);
    }
}

/* The device calls a D2D batch of items[0 .. n) costs: one op on sim; on cuda two a gather
 * phase of gather_plan.h's rule and one a plain copy (the bounce is its full size). */
static uint64_t batch_calls(sl_device *d, const sl_copy_item *items, size_t n)
{
    if (sl_device_kind_get(d) != SL_DEVICE_CUDA) return 1;
    static sl__gather g;
    uint64_t calls = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = sl__gather_phase(items + i, n - i, SL__GATHER_BOUNCE_MAX, &g);
        calls += k <= 1 ? 1 : 2;
        i += k <= 1 ? 1 : k;
    }
    return calls;
}

/* A D2D batch of many items that read and write each other's bytes equals the same copies
 * done one by one (memcpy on a host mirror): items reading what an earlier one wrote, two
 * writing the same bytes, writes over what an earlier one read, odd sizes and addresses,
 * items over 4 MiB (a cudaMemcpyAsync each, between phases); then long runs of disjoint items
 * that fill a phase (96) and the bounce (16 MiB), with a rewrite deep in a phase - so every
 * cut of gather_plan.h's rule is crossed on the GPU; on sim the same property of its one
 * worker op. */
static void check_copy_batch_order(const sl_device_options *base)
{
    enum { R = 48 << 20, N_ITEMS = 400 };
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    void *r = NULL;
    sl_stream *s = NULL;
    uint8_t *mirror = malloc(R), *out = malloc(R);
    sl_copy_item *items = malloc(N_ITEMS * sizeof *items);
    OK(sl_device_region_alloc(d, R, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    if (r && s && mirror && out && items) {
        uint8_t *rr = r;
        fill(mirror, R, 0x6A7E);
        OK(sl_device_copy(d, s, rr, mirror, R, SL_COPY_H2D, &err));
        OK(sl_device_stream_sync(d, s, &err)); /* the mirror changes below */
        uint64_t seed = 0x5EED0F17, big = 0, small = 0;
        for (int i = 0; i < N_ITEMS; i++) {
            const uint64_t kind = rng_next(&seed) % 20, x = rng_next(&seed);
            uint64_t n = kind < 12   ? 1 + x % 8192                    /* small, odd sizes */
                         : kind < 17 ? 8192 + x % (256 << 10)          /* medium */
                         : kind < 19 ? (3 << 20) + x % (1 << 20)       /* near the 4 MiB cut */
                                     : (4 << 20) + 1 + x % (1 << 20); /* over it */
            if (kind % 3 == 0) n = (n + 255) / 256 * 256; /* BFC-like blocks */
            uint64_t so, dof;
            do {
                so = rng_next(&seed) % (R - n);
                dof = rng_next(&seed) % (R - n);
                if (kind % 3 == 0) so &= ~(uint64_t)255, dof &= ~(uint64_t)255;
            } while (so < dof + n && dof < so + n);
            if (i % 7 == 1) { /* read what the previous item wrote */
                so = (uint64_t)((uint8_t *)items[i - 1].dst - rr);
                n = items[i - 1].bytes;
                do dof = rng_next(&seed) % (R - n);
                while (so < dof + n && dof < so + n);
            } else if (i % 11 == 2) { /* write where the previous item wrote */
                dof = (uint64_t)((uint8_t *)items[i - 1].dst - rr);
                n = items[i - 1].bytes;
                do so = rng_next(&seed) % (R - n);
                while (so < dof + n && dof < so + n);
            } else if (i % 13 == 3) { /* write over what the previous item read */
                dof = (uint64_t)((const uint8_t *)items[i - 1].src - rr);
                n = items[i - 1].bytes;
                do so = rng_next(&seed) % (R - n);
                while (so < dof + n && dof < so + n);
            }
            items[i] = (sl_copy_item){rr + dof, rr + so, n};
            memcpy(mirror + dof, mirror + so, n);
            if (n > (4 << 20)) big += n;
            else small += n;
        }
        CHECK_MSG(big > 0 && small > (16 << 20), "the batch must cross every cut: %" PRIu64
                  " bytes in big items, %" PRIu64 " in small ones", big, small);
        size_t issued = 0;
        sl_device_counters c0, c1;
        sl_device_counters_get(d, &c0);
        OK(sl_device_copy_batch(d, s, items, N_ITEMS, SL_COPY_D2D, &issued, &err));
        sl_device_counters_get(d, &c1);
        CHECK(issued == N_ITEMS);
        const uint64_t want0 = batch_calls(d, items, N_ITEMS);
        CHECK_MSG(c1.calls - c0.calls == want0, "the random batch took %" PRIu64 " device calls, "
                  "want %" PRIu64, c1.calls - c0.calls, want0);
        /* then phases cut by size, not by conflicts: 250 small disjoint items (96 a phase on
         * cuda), one rewriting bytes an earlier item of its phase wrote (item 150 over item
         * 100's destination), and 6 disjoint items of 3 MiB (5 fill the 16 MiB bounce) */
        enum { N_LONG = 256 };
        for (int i = 0; i < N_LONG; i++) {
            uint64_t so = 8192 * (uint64_t)i, dof = (2 << 20) + 8192 * (uint64_t)i,
                     n = 1 + (uint64_t)(i * 37) % 4096;
            if (i == 150) dof = (2 << 20) + 8192 * 100, n = items[100].bytes;
            if (i >= 250) so = (4u << 20) + (3u << 20) * (uint64_t)(i - 250),
                          dof = (22u << 20) + (3u << 20) * (uint64_t)(i - 250), n = 3u << 20;
            items[i] = (sl_copy_item){rr + dof, rr + so, n};
            memcpy(mirror + dof, mirror + so, n);
        }
        sl_device_counters_get(d, &c0);
        OK(sl_device_copy_batch(d, s, items, N_LONG, SL_COPY_D2D, &issued, &err));
        sl_device_counters_get(d, &c1);
        CHECK(issued == N_LONG);
        /* on cuda: phases [0, 96), [96, 150) cut by the rewrite, [150, 246), [246, 255) cut by
         * the full bounce (5 x 3 MiB) and the last 3 MiB item alone: 9 calls */
        const uint64_t want1 = batch_calls(d, items, N_LONG);
        CHECK_MSG(c1.calls - c0.calls == want1 &&
                      (sl_device_kind_get(d) != SL_DEVICE_CUDA || want1 == 9),
                  "the long batch took %" PRIu64 " device calls, want %" PRIu64,
                  c1.calls - c0.calls, want1);
        OK(sl_device_copy(d, s, out, rr, R, SL_COPY_D2H, &err));
        OK(sl_device_stream_sync(d, s, &err));
        size_t first = R;
        for (size_t i = 0; i < R && first == R; i++)
            if (out[i] != mirror[i]) first = i;
        CHECK_MSG(first == R, "the batch differs from the copies one by one at byte %zu", first);
    }
    free(mirror);
    free(out);
    free(items);
    close_checked(d, s, r);
}

/* Many copies into the same device buffer on one stream: they land in order, last wins. */
static void check_stream_order(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { N = 32, BYTES = 64 << 10 };
    void *r = NULL;
    sl_stream *s = NULL;
    uint8_t *h = malloc((size_t)N * BYTES), *out = malloc(BYTES);
    OK(sl_device_region_alloc(d, BYTES, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    if (r && s && h && out) {
        for (int i = 0; i < N; i++) {
            memset(h + (size_t)i * BYTES, i + 1, BYTES);
            OK(sl_device_copy(d, s, r, h + (size_t)i * BYTES, BYTES, SL_COPY_H2D, &err));
        }
        OK(sl_device_copy(d, s, out, r, BYTES, SL_COPY_D2H, &err));
        OK(sl_device_stream_sync(d, s, &err));
        bool all_last = true;
        for (int i = 0; i < BYTES; i++)
            all_last &= out[i] == N;
        CHECK_MSG(all_last, "last copy did not win (out[0]=%d)", out[0]);
    }
    free(h);
    free(out);
    close_checked(d, s, r);
}

typedef struct order_log {
    atomic_int n;
    int seen[64];
    const uint8_t *watch; /* host buffer a D2H fills before the checking host function */
    int watch_ok;
} order_log;

typedef struct order_item {
    order_log *log;
    int index;
} order_item;

static void log_fn(void *user)
{
    order_item *it = user;
    int k = atomic_fetch_add(&it->log->n, 1);
    if (k < 64)
        it->log->seen[k] = it->index;
}

static void watch_fn(void *user)
{
    order_log *log = user;
    log->watch_ok = log->watch[0] == 0x5A && log->watch[4095] == 0x5A;
}

/* Host functions run in stream order, after the work enqueued before them. */
static void check_host_fn(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    sl_stream *s = NULL;
    void *r = NULL;
    uint8_t src[4096], dst[4096];
    memset(src, 0x5A, sizeof src);
    memset(dst, 0, sizeof dst);
    order_log log = {.watch = dst};
    order_item items[16];
    OK(sl_device_stream_create(d, &s, &err));
    OK(sl_device_region_alloc(d, sizeof src, &r, &err));
    if (s && r) {
        for (int i = 0; i < 16; i++) {
            items[i] = (order_item){&log, i};
            OK(sl_device_launch_host(d, s, log_fn, &items[i], &err));
        }
        OK(sl_device_copy(d, s, r, src, sizeof src, SL_COPY_H2D, &err));
        OK(sl_device_copy(d, s, dst, r, sizeof dst, SL_COPY_D2H, &err));
        OK(sl_device_launch_host(d, s, watch_fn, &log, &err));
        OK(sl_device_stream_sync(d, s, &err));
        CHECK(atomic_load(&log.n) == 16);
        for (int i = 0; i < 16; i++)
            CHECK_MSG(log.seen[i] == i, "host fn %d ran at position %d", log.seen[i], i);
        CHECK_MSG(log.watch_ok, "host fn ran before the D2H enqueued ahead of it finished");
        CHECK(sl_device_launch_host(d, s, NULL, NULL, &err) == SL_ERR_INVALID);
    }
    close_checked(d, s, r);
}

/* Events: never-recorded = done; recorded behind a closed gate = not done until released;
 * stream B waiting on A's event does not run ahead of A; elapsed_ms rules. */
static void check_events(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { BYTES = 1 << 20 };
    sl_stream *a = NULL, *b = NULL;
    sl_event *ea = NULL, *eb = NULL, *e0 = NULL;
    void *x = NULL, *y = NULL;
    /* Page-locked: on CUDA an async copy from or to pageable memory runs synchronously with the
     * caller, so a copy queued behind the closed gate would block this thread, which alone can
     * open the gate (a deadlock). */
    uint8_t *src = NULL, *out = NULL;
    if (posix_memalign((void **)&src, 4096, BYTES) || posix_memalign((void **)&out, 4096, BYTES)) {
        CHECK_MSG(false, "out of host memory");
        free(src);
        sl_device_close(d);
        return;
    }
    OK(sl_device_host_register(d, src, BYTES, &err));
    OK(sl_device_host_register(d, out, BYTES, &err));
    OK(sl_device_stream_create(d, &a, &err));
    OK(sl_device_stream_create(d, &b, &err));
    OK(sl_device_event_create(d, &ea, &err));
    OK(sl_device_event_create(d, &eb, &err));
    OK(sl_device_event_create(d, &e0, &err));
    OK(sl_device_region_alloc(d, BYTES, &x, &err));
    OK(sl_device_region_alloc(d, BYTES, &y, &err));
    if (a && b && ea && eb && e0 && x && y && src && out) {
        bool done = false;
        OK(sl_device_event_query(d, ea, &done, &err));
        CHECK_MSG(done, "a never-recorded event must read as done");
        OK(sl_device_event_sync(d, ea, &err));
        float ms = -1;
        CHECK(sl_device_event_elapsed_ms(d, ea, eb, &ms, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "never recorded");
        OK(sl_device_stream_wait(d, b, e0, &err)); /* never recorded: no-op */

        fill(src, BYTES, 7);
        memset(out, 0, BYTES);
        gate g = {0};
        OK(sl_device_launch_host(d, a, gate_fn, &g, &err));
        OK(sl_device_event_record(d, e0, a, &err)); /* start mark, behind the gate */
        OK(sl_device_copy(d, a, x, src, BYTES, SL_COPY_H2D, &err));
        OK(sl_device_event_record(d, ea, a, &err));
        OK(sl_device_stream_wait(d, b, ea, &err));
        OK(sl_device_copy(d, b, y, x, BYTES, SL_COPY_D2D, &err));
        OK(sl_device_copy(d, b, out, y, BYTES, SL_COPY_D2H, &err));
        OK(sl_device_event_record(d, eb, b, &err));

        OK(sl_device_event_query(d, ea, &done, &err));
        CHECK_MSG(!done, "event behind a closed gate reads as done");
        OK(sl_device_event_query(d, eb, &done, &err));
        CHECK_MSG(!done, "stream B ran past its wait on A's event");
        CHECK(sl_device_event_elapsed_ms(d, e0, ea, &ms, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "not completed");

        atomic_store(&g.open, 1);
        OK(sl_device_event_sync(d, eb, &err));
        OK(sl_device_event_query(d, eb, &done, &err));
        CHECK(done);
        OK(sl_device_event_query(d, ea, &done, &err));
        CHECK_MSG(done, "B finished its wait, so A's event must be done");
        CHECK_MSG(memcmp(src, out, BYTES) == 0, "B's copy did not see A's data");
        OK(sl_device_event_elapsed_ms(d, e0, ea, &ms, &err));
        CHECK_MSG(ms >= 0.0f, "elapsed %f ms", (double)ms);

        /* Re-recording re-arms: behind a new gate it reads as not done again. */
        gate g2 = {0};
        OK(sl_device_launch_host(d, a, gate_fn, &g2, &err));
        OK(sl_device_event_record(d, ea, a, &err));
        OK(sl_device_event_query(d, ea, &done, &err));
        CHECK_MSG(!done, "re-recorded event did not re-arm");
        atomic_store(&g2.open, 1);
        OK(sl_device_event_sync(d, ea, &err));
        OK(sl_device_event_query(d, ea, &done, &err));
        CHECK(done);

        /* Destroying an event whose record is still pending is allowed (as in CUDA). */
        gate g3 = {0};
        sl_event *tmp = NULL;
        OK(sl_device_event_create(d, &tmp, &err));
        OK(sl_device_launch_host(d, a, gate_fn, &g3, &err));
        OK(sl_device_event_record(d, tmp, a, &err));
        OK(sl_device_stream_wait(d, b, tmp, &err));
        sl_device_event_destroy(d, tmp);
        atomic_store(&g3.open, 1);
        OK(sl_device_stream_sync(d, b, &err));
        OK(sl_device_stream_sync(d, a, &err));
    }
    sl_device_event_destroy(d, ea);
    sl_device_event_destroy(d, eb);
    sl_device_event_destroy(d, e0);
    sl_device_stream_destroy(d, a);
    sl_device_stream_destroy(d, b);
    OK(sl_device_region_free(d, x, &err));
    OK(sl_device_region_free(d, y, &err));
    sl_device_counters pc;
    sl_device_counters_get(d, &pc);
    CHECK_MSG(pc.copies_pageable == 0, "page-locked copies counted as pageable: %llu",
              (unsigned long long)pc.copies_pageable);
    OK(sl_device_host_unregister(d, src, &err));
    OK(sl_device_host_unregister(d, out, &err));
    free(src);
    free(out);
    check_counters_zero(d);
    sl_device_close(d);
}

static void check_host_register(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { BYTES = 64 << 10 };
    uint8_t *h = NULL;
    if (posix_memalign((void **)&h, 4096, 2 * BYTES))
        h = NULL;
    CHECK(h != NULL);
    if (h) {
        OK(sl_device_host_register(d, h, BYTES, &err));
        CHECK(sl_device_host_register(d, h + 100, 10, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "overlaps");
        OK(sl_device_host_register(d, h + BYTES, BYTES, &err));
        sl_device_counters c;
        sl_device_counters_get(d, &c);
        CHECK(c.registrations_live == 2 && c.host_registers == 3);
        CHECK(sl_device_host_unregister(d, h + 1, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "not a registered host pointer");
        OK(sl_device_host_unregister(d, h, &err));
        OK(sl_device_host_unregister(d, h + BYTES, &err));
        CHECK(sl_device_host_unregister(d, h, &err) == SL_ERR_INVALID);
    }
    check_counters_zero(d);
    sl_device_close(d);
    free(h);
}

static void count_fn(void *user)
{
    atomic_fetch_add((atomic_int *)user, 1);
}

/* Graphs (cuda): a capture records and runs nothing; each launch replays the work on the same
 * addresses, so what changed in memory between launches shows; a wait inside a capture spoils
 * it (capture_end: SL_ERR_DEVICE, no graph) and the stream runs work again after. sim has no
 * graphs: SL_ERR_UNSUPPORTED naming it. Either: a NULL out or graph is SL_ERR_INVALID. */
static void check_graphs(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { BYTES = 4096 };
    sl_stream *s = NULL;
    void *r = NULL;
    uint8_t *h = NULL;
    atomic_int ran = 0;
    if (posix_memalign((void **)&h, 4096, 2 * BYTES))
        h = NULL;
    CHECK(h != NULL);
    OK(sl_device_stream_create(d, &s, &err));
    OK(sl_device_region_alloc(d, BYTES, &r, &err));
    sl_graph *g = (sl_graph *)&ran; /* capture_end must clear it */
    CHECK(sl_device_capture_end(d, s, NULL, &err) == SL_ERR_INVALID);
    sl_device_graph_destroy(d, NULL);
    if (h && s && r && sl_device_kind_get(d) == SL_DEVICE_SIM) {
        CHECK(sl_device_capture_begin(d, s, &err) == SL_ERR_UNSUPPORTED);
        CHECK_CONTAINS(err.msg, "sim device has no graphs");
        CHECK(sl_device_capture_end(d, s, &g, &err) == SL_ERR_UNSUPPORTED && !g);
        CHECK(sl_device_graph_launch(d, g, s, &err) == SL_ERR_UNSUPPORTED);
    } else if (h && s && r) {
        uint8_t *src = h, *dst = h + BYTES;
        OK(sl_device_host_register(d, h, 2 * BYTES, &err));
        memset(dst, 0, BYTES);
        OK(sl_device_capture_begin(d, s, &err));
        OK(sl_device_copy(d, s, r, src, BYTES, SL_COPY_H2D, &err));
        OK(sl_device_copy(d, s, dst, r, BYTES, SL_COPY_D2H, &err));
        OK(sl_device_launch_host(d, s, count_fn, &ran, &err));
        OK(sl_device_capture_end(d, s, &g, &err));
        CHECK(g != NULL);
        OK(sl_device_stream_sync(d, s, &err));
        CHECK_MSG(atomic_load(&ran) == 0 && dst[0] == 0 && dst[BYTES - 1] == 0,
                  "the capture ran its work (host fn %d times)", atomic_load(&ran));
        CHECK(sl_device_graph_launch(d, NULL, s, &err) == SL_ERR_INVALID);
        sl_device_counters c0, c1;
        for (int rep = 1; g && rep <= 3; rep++) {
            memset(src, 0x10 + rep, BYTES);
            sl_device_counters_get(d, &c0);
            OK(sl_device_graph_launch(d, g, s, &err));
            sl_device_counters_get(d, &c1);
            CHECK(c1.calls - c0.calls == 1); /* one operation, whatever it replays */
            OK(sl_device_stream_sync(d, s, &err));
            CHECK_MSG(dst[0] == 0x10 + rep && dst[BYTES - 1] == 0x10 + rep,
                      "launch %d: dst holds %#x", rep, dst[0]);
            CHECK_MSG(atomic_load(&ran) == rep, "launch %d: host fn ran %d times", rep,
                      atomic_load(&ran));
        }
        sl_device_graph_destroy(d, g);
        g = NULL;
        /* a wait inside a capture spoils it; the stream works after */
        OK(sl_device_capture_begin(d, s, &err));
        OK(sl_device_copy(d, s, r, src, BYTES, SL_COPY_H2D, &err));
        CHECK(sl_device_stream_sync(d, s, &err) != SL_OK);
        CHECK(sl_device_capture_end(d, s, &g, &err) == SL_ERR_DEVICE && !g);
        memset(src, 0x77, BYTES);
        OK(sl_device_copy(d, s, r, src, BYTES, SL_COPY_H2D, &err));
        OK(sl_device_copy(d, s, dst, r, BYTES, SL_COPY_D2H, &err));
        OK(sl_device_stream_sync(d, s, &err));
        CHECK(dst[0] == 0x77 && dst[BYTES - 1] == 0x77);
        OK(sl_device_host_unregister(d, h, &err));
    }
    close_checked(d, s, r);
    free(h);
}

/* Copies whose device side is outside a live region, host side inside one, or D2D overlap. */
static void check_invalid_pointers(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    enum { BYTES = 8192 };
    void *r = NULL, *gone = NULL;
    sl_stream *s = NULL;
    uint8_t h[BYTES];
    memset(h, 0, sizeof h);
    OK(sl_device_region_alloc(d, BYTES, &r, &err));
    OK(sl_device_region_alloc(d, BYTES, &gone, &err));
    OK(sl_device_stream_create(d, &s, &err));
    if (r && s && gone) {
        uint8_t *rr = r;
        char ptr[32];
        snprintf(ptr, sizeof ptr, "%p", (void *)(rr + BYTES - 8));
        CHECK(sl_device_copy(d, s, rr + BYTES - 8, h, 16, SL_COPY_H2D, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, ptr);
        CHECK_CONTAINS(err.msg, "not inside a live device region");
        CHECK(sl_device_copy(d, s, h, h + 16, 16, SL_COPY_H2D, &err) == SL_ERR_INVALID);
        CHECK(sl_device_copy(d, s, h, rr - 16, 16, SL_COPY_D2H, &err) == SL_ERR_INVALID);
        /* swapped arguments: host side pointing into a device region */
        CHECK(sl_device_copy(d, s, rr, rr + 4096, 16, SL_COPY_H2D, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "lies in a device region");
        CHECK(sl_device_copy(d, s, rr + 8, rr, 16, SL_COPY_D2D, &err) == SL_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "overlap");
        OK(sl_device_copy(d, s, rr + 16, rr, 16, SL_COPY_D2D, &err)); /* adjacent is fine */
        CHECK(sl_device_copy(d, s, rr, h, 16, (sl_copy_kind)7, &err) == SL_ERR_INVALID);
        CHECK(sl_device_copy(d, s, NULL, h, 16, SL_COPY_H2D, &err) == SL_ERR_INVALID);
        OK(sl_device_region_free(d, gone, &err));
        CHECK(sl_device_copy(d, s, gone, h, 16, SL_COPY_H2D, &err) == SL_ERR_INVALID);
        gone = NULL;
        OK(sl_device_stream_sync(d, s, &err));
        sl_device_counters c;
        sl_device_counters_get(d, &c);
        CHECK_MSG(c.copies == 1, "rejected copies were counted (%" PRIu64 ")", c.copies);
    }
    OK(sl_device_region_free(d, gone, &err));
    close_checked(d, s, r);
}

/* The Nth call of each kind fails with SL_ERR_DEVICE "injected fault"; the others succeed,
 * and nothing leaks. */
static void check_faults(const sl_device_options *base)
{
    sl_error err;
    {
        sl_device *d = open_dev(base, (sl_fault_options){.region_alloc_at = 2});
        if (d) {
            void *r[4] = {0};
            for (int i = 0; i < 4; i++) {
                sl_status st = sl_device_region_alloc(d, 4096, &r[i], &err);
                if (i == 1) {
                    CHECK(st == SL_ERR_DEVICE && r[i] == NULL);
                    CHECK_CONTAINS(err.msg, "injected fault");
                } else {
                    CHECK_MSG(st == SL_OK, "alloc %d: %s", i + 1, err.msg);
                }
            }
            sl_device_counters c;
            sl_device_counters_get(d, &c);
            CHECK(c.region_allocs == 4 && c.regions_live == 3);
            for (int i = 0; i < 4; i++)
                OK(sl_device_region_free(d, r[i], &err));
            check_counters_zero(d);
            sl_device_close(d);
        }
    }
    {
        sl_device *d = open_dev(base, (sl_fault_options){.host_register_at = 3});
        uint8_t *h = NULL;
        if (posix_memalign((void **)&h, 4096, 4 * 4096))
            h = NULL;
        if (d && h) {
            for (int i = 0; i < 4; i++) {
                sl_status st = sl_device_host_register(d, h + i * 4096, 4096, &err);
                if (i == 2) {
                    CHECK(st == SL_ERR_DEVICE);
                    CHECK_CONTAINS(err.msg, "injected fault");
                } else {
                    CHECK_MSG(st == SL_OK, "register %d: %s", i + 1, err.msg);
                }
            }
            sl_device_counters c;
            sl_device_counters_get(d, &c);
            CHECK(c.host_registers == 4 && c.registrations_live == 3);
            CHECK(sl_device_host_unregister(d, h + 2 * 4096, &err) == SL_ERR_INVALID);
            for (int i = 0; i < 4; i++)
                if (i != 2)
                    OK(sl_device_host_unregister(d, h + i * 4096, &err));
            check_counters_zero(d);
        }
        sl_device_close(d);
        free(h);
    }
    {
        sl_device *d = open_dev(base, (sl_fault_options){.copy_at = 3});
        if (d) {
            void *r = NULL;
            sl_stream *s = NULL;
            uint8_t h[5][256], out[256];
            OK(sl_device_region_alloc(d, 256, &r, &err));
            OK(sl_device_stream_create(d, &s, &err));
            for (int i = 0; i < 5 && r && s; i++) {
                memset(h[i], i + 1, sizeof h[i]);
                sl_status st = sl_device_copy(d, s, r, h[i], 256, SL_COPY_H2D, &err);
                if (i == 2) {
                    CHECK(st == SL_ERR_DEVICE);
                    CHECK_CONTAINS(err.msg, "injected fault");
                    CHECK_CONTAINS(err.msg, "copy #3");
                } else {
                    CHECK_MSG(st == SL_OK, "copy %d: %s", i + 1, err.msg);
                }
            }
            if (r && s) {
                OK(sl_device_copy(d, s, out, r, 256, SL_COPY_D2H, &err));
                OK(sl_device_stream_sync(d, s, &err));
                CHECK(out[0] == 5 && out[255] == 5);
            }
            sl_device_counters c;
            sl_device_counters_get(d, &c);
            CHECK_MSG(c.copies == 5 && c.copy_bytes[SL_COPY_H2D] == 4 * 256,
                      "copies %" PRIu64 " h2d bytes %" PRIu64, c.copies,
                      c.copy_bytes[SL_COPY_H2D]);
            close_checked(d, s, r);
        }
    }
}

/* close() releases whatever the caller left behind (ASan's leak check sees the rest). */
static void check_close_releases(const sl_device_options *base)
{
    sl_error err;
    sl_device *d = open_dev(base, (sl_fault_options){0});
    if (!d)
        return;
    void *r = NULL;
    sl_stream *s = NULL;
    sl_event *e = NULL;
    static uint8_t h[4096];
    OK(sl_device_region_alloc(d, 4096, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    OK(sl_device_event_create(d, &e, &err));
    OK(sl_device_host_register(d, h, sizeof h, &err));
    if (r && s && e) {
        OK(sl_device_copy(d, s, r, h, sizeof h, SL_COPY_H2D, &err));
        OK(sl_device_event_record(d, e, s, &err));
    }
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    CHECK(c.regions_live == 1 && c.streams_live == 1 && c.events_live == 1 &&
          c.registrations_live == 1);
    sl_device_close(d);
}

int sl_device_checks_run(const sl_device_options *base, const char *label)
{
    int before = sl_test_g.failures;
    check_props(base);
    check_regions(base);
    check_copies(base);
    check_copy_batch(base);
    check_copy_batch_order(base);
    check_stream_order(base);
    check_host_fn(base);
    check_events(base);
    check_host_register(base);
    check_graphs(base);
    check_invalid_pointers(base);
    check_faults(base);
    check_close_releases(base);
    char name[128];
    snprintf(name, sizeof name, "device checks (%s)", label);
    sl_test_finish(name);
    return sl_test_g.failures - before;
}
