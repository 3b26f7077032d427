/* tests/device/device_test.c: the device interface on the sim backend (CI), plus option and
 * environment handling, backend selection on a GPU-less machine, and what only sim can show:
 * capacity, throttling and latency (lower bounds only: timing-robust on loaded machines). */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/device/gather_plan.h"
#include "base/prng.h"
#include "base/device/device.h"
#include "base/device/device_impl.h"
#include "base/fault.h"
#include "tests/device/device_checks.h"
#include "tests/testing.h"

#define OK(call)                                                                           \
    do {                                                                                   \
        sl_status ok_st_ = (call);                                                         \
        CHECK_MSG(ok_st_ == SL_OK, "%s -> %s: %s", #call, sl_status_name(ok_st_), err.msg);  \
    } while (0)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static sl_device_options sim_opts(void)
{
    sl_device_options o = {0};
    o.kind = "sim";
    return o;
}

static void check_valid(sl_device *d)
{
    sl_error err;
    sl_status st = sl__device_validate(d, &err);
    CHECK_MSG(st == SL_OK, "validate: %s", err.msg);
}

typedef struct notices {
    int n;
    char last[1200];
} notices;

static void on_notice(void *user, const char *msg)
{
    notices *nt = user;
    nt->n++;
    snprintf(nt->last, sizeof nt->last, "%s", msg);
}

static void test_env_and_kind(void)
{
    sl_error err;
    sl_device *d = NULL;

    /* the device reads no environment (runtime/engine/env.c fills its options) */
    setenv("SLUICE_DEVICE", "gpu0", 1);
    sl_device_options o = sim_opts();
    OK(sl_device_open(&o, &d, &err));
    sl_device_close(d);
    unsetenv("SLUICE_DEVICE");

    o.kind = "SIM";
    CHECK(sl_device_open(&o, &d, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "options.kind");
    CHECK_CONTAINS(err.msg, "SIM");

    o = sim_opts();
    o.sim.h2d_gbs = -1;
    CHECK(sl_device_open(&o, &d, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "h2d_gbs");

    /* The installed hook (base/fault.h) fails the call it picks, saying it was injected; the
     * variables the library once read change nothing. */
    setenv("SLUICE_FAULT_REGION_ALLOC", "1", 1);
    sl_fault_plan plan = {.at = {[SL_FAULT_REGION_ALLOC] = 2, [SL_FAULT_COPY] = 1}};
    const sl_fault_hook hook = {sl_fault_plan_fn, &plan};
    CHECK(sl_fault_install(&hook) == NULL);
    o = sim_opts();
    OK(sl_device_open(&o, &d, &err));
    void *r1 = NULL, *r2 = NULL;
    OK(sl_device_region_alloc(d, 256, &r1, &err));
    CHECK(sl_device_region_alloc(d, 256, &r2, &err) == SL_ERR_DEVICE);
    CHECK_CONTAINS(err.msg, "injected fault: region alloc #2");
    sl_stream *s = NULL;
    OK(sl_device_stream_create(d, &s, &err));
    char h[64] = {0};
    CHECK(sl_device_copy(d, s, r1, h, sizeof h, SL_COPY_H2D, &err) == SL_ERR_DEVICE);
    CHECK_CONTAINS(err.msg, "injected fault: copy #1");
    OK(sl_device_copy(d, s, r1, h, sizeof h, SL_COPY_H2D, &err));
    OK(sl_device_stream_sync(d, s, &err));
    sl_device_stream_destroy(d, s);
    OK(sl_device_region_free(d, r1, &err));
    sl_device_close(d);
    /* the device's own option fails its call as well, hook or not */
    o.faults.region_alloc_at = 1;
    OK(sl_device_open(&o, &d, &err));
    CHECK(sl_device_region_alloc(d, 256, &r1, &err) == SL_ERR_DEVICE); /* the option's #1 */
    CHECK(sl_device_region_alloc(d, 256, &r2, &err) == SL_ERR_DEVICE); /* the hook's #2 */
    CHECK(sl_fault_install(NULL) == &hook);
    OK(sl_device_region_alloc(d, 256, &r1, &err)); /* none installed */
    OK(sl_device_region_free(d, r1, &err));
    sl_device_close(d);
    unsetenv("SLUICE_FAULT_REGION_ALLOC");

    /* cuda on this machine: a clean error, never a crash; auto falls back with a notice. */
    o = sim_opts();
    o.kind = "cuda";
    sl_status st = sl_device_open(&o, &d, &err);
    if (st == SL_OK) {
        printf("device_test: a GPU is usable here; GPU-less checks skipped\n");
        sl_device_close(d);
        return;
    }
    CHECK_MSG(st == SL_ERR_DEVICE, "cuda open -> %s: %s", sl_status_name(st), err.msg);
    CHECK_CONTAINS(err.msg, "cudaGetDeviceCount");
    CHECK_CONTAINS(err.msg, "cuda.c:");
    CHECK(d == NULL);

    notices nt = {0};
    o.kind = "auto";
    o.notice = on_notice;
    o.notice_user = &nt;
    OK(sl_device_open(&o, &d, &err));
    CHECK(d && sl_device_kind_get(d) == SL_DEVICE_SIM);
    CHECK(nt.n == 1);
    CHECK_CONTAINS(nt.last, "using sim");
    sl_device_close(d);
    nt.n = 0;
    o.kind = NULL; /* neither option nor environment: auto */
    OK(sl_device_open(&o, &d, &err));
    CHECK(d && sl_device_kind_get(d) == SL_DEVICE_SIM && nt.n == 1);
    sl_device_close(d);
}

static void test_props_and_capacity(void)
{
    sl_error err;
    sl_device *d = NULL;
    sl_device_options o = sim_opts();
    OK(sl_device_open(&o, &d, &err));
    sl_device_props p;
    OK(sl_device_props_get(d, &p, &err));
    CHECK(p.kind == SL_DEVICE_SIM && !strcmp(p.name, "sluice-sim") && p.pci_bus_id[0] == 0);
    CHECK(p.total_mem_bytes == (uint64_t)4 << 30 && p.free_mem_bytes == p.total_mem_bytes);
    CHECK(p.cc_major == 0 && p.cc_minor == 0);
    CHECK(!strcmp(sl_device_kind_name(SL_DEVICE_SIM), "sim"));
    CHECK(!strcmp(sl_device_kind_name(SL_DEVICE_CUDA), "cuda"));
    sl_device_close(d);

    o.sim.mem_bytes = 1 << 20;
    o.sim.name = "tiny";
    o.sim.pci_bus_id = "0000:65:00.0";
    OK(sl_device_open(&o, &d, &err));
    OK(sl_device_props_get(d, &p, &err));
    CHECK(!strcmp(p.name, "tiny") && !strcmp(p.pci_bus_id, "0000:65:00.0"));
    CHECK(p.total_mem_bytes == 1 << 20);
    void *a = NULL, *b = NULL, *c = NULL;
    OK(sl_device_region_alloc(d, 768 << 10, &a, &err));
    OK(sl_device_props_get(d, &p, &err));
    CHECK(p.free_mem_bytes == 256 << 10);
    CHECK(sl_device_region_alloc(d, 512 << 10, &b, &err) == SL_ERR_NOMEM && b == NULL);
    CHECK_CONTAINS(err.msg, "out of device memory");
    OK(sl_device_region_alloc(d, 256 << 10, &c, &err)); /* exactly full */
    CHECK(sl_device_region_alloc(d, 1, &b, &err) == SL_ERR_NOMEM);
    check_valid(d);
    OK(sl_device_region_free(d, a, &err));
    OK(sl_device_region_alloc(d, 512 << 10, &b, &err));
    OK(sl_device_region_free(d, b, &err));
    OK(sl_device_region_free(d, c, &err));
    check_valid(d);
    sl_device_close(d);
}

/* A 64 MiB copy at 2 GB/s takes >= 33.5 ms; latency adds per op; elapsed_ms sees it. */
static void test_throttle(void)
{
    sl_error err;
    sl_device *d = NULL;
    sl_device_options o = sim_opts();
    o.sim.h2d_gbs = 2.0;
    o.sim.d2h_gbs = 1.0;
    OK(sl_device_open(&o, &d, &err));
    enum { BIG = 64 << 20 };
    void *r = NULL;
    sl_stream *s = NULL;
    sl_event *e0 = NULL, *e1 = NULL;
    uint8_t *h = malloc(BIG);
    OK(sl_device_region_alloc(d, BIG, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    OK(sl_device_event_create(d, &e0, &err));
    OK(sl_device_event_create(d, &e1, &err));
    if (h && r && s && e0 && e1) {
        memset(h, 0x3C, BIG);
        uint64_t t0 = now_ns();
        OK(sl_device_event_record(d, e0, s, &err));
        OK(sl_device_copy(d, s, r, h, BIG, SL_COPY_H2D, &err));
        OK(sl_device_event_record(d, e1, s, &err));
        OK(sl_device_stream_sync(d, s, &err));
        double ms = (double)(now_ns() - t0) / 1e6;
        CHECK_MSG(ms >= 30.0, "64 MiB at 2 GB/s took %.1f ms (< 30)", ms);
        CHECK(((uint8_t *)r)[0] == 0x3C && ((uint8_t *)r)[BIG - 1] == 0x3C);
        float el = 0;
        OK(sl_device_event_elapsed_ms(d, e0, e1, &el, &err));
        CHECK_MSG(el >= 30.0f, "event elapsed %.2f ms (< 30)", (double)el);

        /* D2H at 1 GB/s: 16 MiB >= 16.7 ms. */
        t0 = now_ns();
        OK(sl_device_copy(d, s, h, r, 16 << 20, SL_COPY_D2H, &err));
        OK(sl_device_stream_sync(d, s, &err));
        ms = (double)(now_ns() - t0) / 1e6;
        CHECK_MSG(ms >= 15.0, "16 MiB at 1 GB/s took %.1f ms", ms);
    }
    sl_device_event_destroy(d, e0);
    sl_device_event_destroy(d, e1);
    sl_device_stream_destroy(d, s);
    OK(sl_device_region_free(d, r, &err));
    check_valid(d);
    sl_device_close(d);
    free(h);

    /* Latency alone: 5 one-byte copies at 10 ms each, in order on one stream: >= 50 ms. */
    o = sim_opts();
    o.sim.latency_ns = 10 * 1000000;
    OK(sl_device_open(&o, &d, &err));
    r = NULL;
    s = NULL;
    uint8_t b[5] = {1, 2, 3, 4, 5};
    OK(sl_device_region_alloc(d, 256, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    if (r && s) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < 5; i++)
            OK(sl_device_copy(d, s, (uint8_t *)r + i, &b[i], 1, SL_COPY_H2D, &err));
        OK(sl_device_stream_sync(d, s, &err));
        double ms = (double)(now_ns() - t0) / 1e6;
        CHECK_MSG(ms >= 48.0, "5 copies at 10 ms latency took %.1f ms", ms);
        CHECK(memcmp(r, b, 5) == 0);
    }
    sl_device_stream_destroy(d, s);
    OK(sl_device_region_free(d, r, &err));
    sl_device_close(d);
}

typedef struct stamp {
    uint64_t t_ns;
} stamp;

static void stamp_fn(void *user)
{
    ((stamp *)user)->t_ns = now_ns();
}

/* Producer on A is slow (throttled H2D); consumer on B waits on A's event: B's copy sees A's
 * data and finishes after A's. */
static void test_cross_stream_throttled(void)
{
    sl_error err;
    sl_device *d = NULL;
    sl_device_options o = sim_opts();
    o.sim.h2d_gbs = 1.0;
    OK(sl_device_open(&o, &d, &err));
    enum { BYTES = 16 << 20 };
    void *x = NULL, *y = NULL;
    sl_stream *a = NULL, *b = NULL;
    sl_event *ea = NULL;
    uint8_t *h = malloc(BYTES), *out = malloc(BYTES);
    stamp ta = {0}, tb = {0};
    OK(sl_device_region_alloc(d, BYTES, &x, &err));
    OK(sl_device_region_alloc(d, BYTES, &y, &err));
    OK(sl_device_stream_create(d, &a, &err));
    OK(sl_device_stream_create(d, &b, &err));
    OK(sl_device_event_create(d, &ea, &err));
    if (x && y && a && b && ea && h && out) {
        for (size_t i = 0; i < BYTES; i++)
            h[i] = (uint8_t)(i * 31 + 7);
        OK(sl_device_copy(d, a, x, h, BYTES, SL_COPY_H2D, &err));
        OK(sl_device_launch_host(d, a, stamp_fn, &ta, &err));
        OK(sl_device_event_record(d, ea, a, &err));
        OK(sl_device_stream_wait(d, b, ea, &err));
        OK(sl_device_copy(d, b, y, x, BYTES, SL_COPY_D2D, &err));
        OK(sl_device_launch_host(d, b, stamp_fn, &tb, &err));
        OK(sl_device_copy(d, b, out, y, BYTES, SL_COPY_D2H, &err));
        OK(sl_device_stream_sync(d, b, &err));
        CHECK(memcmp(h, out, BYTES) == 0);
        CHECK_MSG(ta.t_ns && tb.t_ns >= ta.t_ns, "B finished at %" PRIu64 " before A at %" PRIu64,
                  tb.t_ns, ta.t_ns);
        OK(sl_device_stream_sync(d, a, &err));
    }
    sl_device_event_destroy(d, ea);
    sl_device_stream_destroy(d, a);
    sl_device_stream_destroy(d, b);
    OK(sl_device_region_free(d, x, &err));
    OK(sl_device_region_free(d, y, &err));
    check_valid(d);
    sl_device_close(d);
    free(h);
    free(out);
}

/* Region free waits for copies still in flight (sim; cudaFree synchronises likewise). */
static void test_free_waits(void)
{
    sl_error err;
    sl_device *d = NULL;
    sl_device_options o = sim_opts();
    o.sim.h2d_gbs = 1.0;
    OK(sl_device_open(&o, &d, &err));
    enum { BYTES = 8 << 20 };
    void *r = NULL;
    sl_stream *s = NULL;
    uint8_t *h = calloc(1, BYTES);
    stamp t = {0};
    OK(sl_device_region_alloc(d, BYTES, &r, &err));
    OK(sl_device_stream_create(d, &s, &err));
    if (r && s && h) {
        OK(sl_device_copy(d, s, r, h, BYTES, SL_COPY_H2D, &err));
        OK(sl_device_launch_host(d, s, stamp_fn, &t, &err));
        OK(sl_device_region_free(d, r, &err));
        CHECK_MSG(t.t_ns != 0, "region freed while a copy into it was in flight");
        r = NULL;
    }
    sl_device_stream_destroy(d, s);
    OK(sl_device_region_free(d, r, &err));
    sl_device_close(d);
    free(h);
}

/* Several threads share one device handle (the header allows it), each feeding its own
 * stream, while another allocates and frees regions: a free waits only for work enqueued
 * before it, so it cannot be starved by busy streams. Data must survive; counters balance. */
enum { MT_THREADS = 4, MT_ROUNDS = 40, MT_BYTES = 256 << 10 };

typedef struct mt_arg {
    sl_device *d;
    int id, failures;
} mt_arg;

static void *mt_copier(void *p)
{
    mt_arg *a = p;
    sl_error err;
    void *r = NULL;
    sl_stream *s = NULL;
    sl_event *e = NULL;
    uint8_t *h = malloc(MT_BYTES), *out = malloc(MT_BYTES);
    if (!h || !out || sl_device_region_alloc(a->d, MT_BYTES, &r, &err) ||
        sl_device_stream_create(a->d, &s, &err) || sl_device_event_create(a->d, &e, &err)) {
        a->failures++;
    } else {
        for (int k = 0; k < MT_ROUNDS; k++) {
            size_t n = 1 + (size_t)((k * 7919 + a->id * 104729) % (MT_BYTES / 2 - 1));
            memset(h, (a->id * 16 + k) & 0xFF, n);
            if (sl_device_copy(a->d, s, r, h, n, SL_COPY_H2D, &err) ||
                sl_device_copy(a->d, s, (uint8_t *)r + MT_BYTES / 2, r, n, SL_COPY_D2D, &err) ||
                sl_device_copy(a->d, s, out, (uint8_t *)r + MT_BYTES / 2, n, SL_COPY_D2H,
                               &err) ||
                sl_device_event_record(a->d, e, s, &err) || sl_device_event_sync(a->d, e, &err) ||
                memcmp(h, out, n) != 0)
                a->failures++;
        }
    }
    sl_device_event_destroy(a->d, e);
    sl_device_stream_destroy(a->d, s);
    if (r && sl_device_region_free(a->d, r, &err))
        a->failures++;
    free(h);
    free(out);
    return NULL;
}

static void *mt_allocator(void *p)
{
    mt_arg *a = p;
    sl_error err;
    for (int k = 0; k < 50; k++) {
        void *r = NULL;
        if (sl_device_region_alloc(a->d, 4096 * (uint64_t)(k + 1), &r, &err) ||
            sl_device_region_free(a->d, r, &err))
            a->failures++;
    }
    return NULL;
}

static void test_threads(void)
{
    sl_error err;
    sl_device *d = NULL;
    sl_device_options o = sim_opts();
    o.sim.h2d_gbs = 20.0; /* slow enough that frees overlap copies in flight */
    OK(sl_device_open(&o, &d, &err));
    if (!d)
        return;
    pthread_t t[MT_THREADS + 1];
    mt_arg args[MT_THREADS + 1];
    for (int i = 0; i <= MT_THREADS; i++) {
        args[i] = (mt_arg){d, i, 0};
        CHECK(pthread_create(&t[i], NULL, i < MT_THREADS ? mt_copier : mt_allocator,
                             &args[i]) == 0);
    }
    for (int i = 0; i <= MT_THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_MSG(args[i].failures == 0, "thread %d: %d failures", i, args[i].failures);
    }
    check_valid(d);
    sl_device_counters c;
    sl_device_counters_get(d, &c);
    CHECK(c.regions_live == 0 && c.streams_live == 0 && c.events_live == 0);
    CHECK(c.copies == (uint64_t)MT_THREADS * MT_ROUNDS * 3);
    sl_device_close(d);
}

/* The cuda gather phase's invariants (cuda_gather.h), host code that needs no GPU: a phase the
 * planner builds passes, each broken invariant names its item, and the launcher refuses a bad
 * phase or bounce before enqueuing anything (cudaErrorInvalidValue, 1). */
static void test_gather_validate(void)
{
    static sl__gather g; /* 3.3 KB */
    static uint8_t buf[4096];
    CHECK(sl__gather_validate(NULL) == -1);
    memset(&g, 0, sizeof g);
    CHECK(sl__gather_validate(&g) == -1); /* n = 0 */
    g.n = 3;
    const uint32_t sizes[3] = {1, 17, 32};
    for (int i = 0; i < 3; i++) {
        g.src[i] = buf + 1024 * i;
        g.dst[i] = buf + 1024 * i + 512;
        g.bytes[i] = sizes[i];
        g.off[i + 1] = g.off[i] + (sizes[i] + 15) / 16 * 16;
    }
    CHECK(sl__gather_validate(&g) == 0);
    CHECK(g.off[3] == 16 + 32 + 32);
    g.off[2] += 16; /* offsets not the padded sizes */
    CHECK(sl__gather_validate(&g) == 2);
    g.off[2] -= 16;
    g.dst[2] = (uint8_t *)g.src[2] + 31; /* overlaps its own source */
    CHECK(sl__gather_validate(&g) == 3);
    g.dst[2] = buf + 2048 + 512;
    g.bytes[0] = 0;
    CHECK(sl__gather_validate(&g) == 1);
    g.bytes[0] = 1;
    g.n = SL__GATHER_MAX_ITEMS + 1;
    CHECK(sl__gather_validate(&g) == -1);
    g.n = 3;
    CHECK(sl__cuda_gather(NULL, &g, NULL) == 1);      /* no bounce */
    CHECK(sl__cuda_gather(NULL, &g, buf + 1) == 1);   /* misaligned bounce */
    g.off[0] = 16;
    CHECK(sl__cuda_gather(NULL, &g, buf) == 1);       /* a broken phase */
}

/* A random item of `bytes` in buf[0, R) whose source and destination do not overlap. */
static sl_copy_item rand_item(uint8_t *buf, uint64_t R, uint64_t bytes, uint64_t *seed)
{
    uint64_t so, dof;
    do {
        so = sl_prng_splitmix64(seed) % (R - bytes);
        dof = sl_prng_splitmix64(seed) % (R - bytes);
    } while (so < dof + bytes && dof < so + bytes);
    return (sl_copy_item){buf + dof, buf + so, bytes};
}

/* The cuda backend's phase rule (gather_plan.h) on the host, with the kernels' order at its
 * worst - a phase reads every source, then writes the destinations last item first - against
 * the items copied in order, over batches that read, rewrite and overwrite each other's bytes,
 * with items over the size cut, and bounces of 16 MiB and 64 KiB; every kind of cut (96 items,
 * a full bounce, a conflict, an item alone) must occur. A rule that missed a read or a
 * rewrite of an earlier item's bytes fails here, without a GPU. */
static void test_gather_plan(void)
{
    const uint64_t R = 12u << 20;
    uint8_t *ref = malloc(R), *got = malloc(R), *bounce = malloc(SL__GATHER_BOUNCE_MAX);
    sl_copy_item *items = malloc(400 * sizeof *items);
    sl__gather *g = malloc(sizeof *g);
    if (!ref || !got || !bounce || !items || !g) {
        CHECK(false);
        goto out;
    }
    uint64_t seed = 0xC0FFEE11, cut_max = 0, cut_bounce = 0, cut_conflict = 0, alone = 0;
    for (int trial = 0; trial < 60; trial++) {
        for (uint64_t i = 0; i < R; i++) ref[i] = (uint8_t)(i * 131 + (i >> 9));
        memcpy(got, ref, R);
        const size_t n = trial == 0 ? 300 : 1 + sl_prng_splitmix64(&seed) % 400;
        for (size_t i = 0; i < n; i++) {
            const uint64_t r = sl_prng_splitmix64(&seed) % 100;
            uint64_t bytes = r < 2 ? SL__GATHER_ITEM_MAX + 1 + sl_prng_splitmix64(&seed) % 4096
                             : r < 8 ? (1u << 20) + sl_prng_splitmix64(&seed) % (3u << 20)
                                     : 1 + sl_prng_splitmix64(&seed) % 4096;
            if (trial == 0) { /* 300 disjoint small items: 96-item phases */
                items[i] = (sl_copy_item){got + (6u << 20) + 8192 * i, got + 8192 * i,
                                          1 + i % 4096};
                continue;
            }
            if (trial == 2 && i < 20) { /* disjoint 8-12 KiB items: the 64 KiB bounce fills */
                items[i] = (sl_copy_item){got + (6u << 20) + 16384 * i, got + 16384 * i,
                                          8192 + sl_prng_splitmix64(&seed) % 4096};
                continue;
            }
            items[i] = rand_item(got, R, bytes, &seed);
            if (i > 0 && r % 5 == 1) { /* read what the previous item wrote */
                const uint64_t b = items[i - 1].bytes;
                do items[i] = rand_item(got, R, b, &seed);
                while ((uint8_t *)items[i - 1].dst < (uint8_t *)items[i].dst + b &&
                       (uint8_t *)items[i].dst < (uint8_t *)items[i - 1].dst + b);
                items[i].src = items[i - 1].dst;
            } else if (i > 0 && r % 5 == 2) { /* rewrite what the previous item wrote */
                const uint64_t b = items[i].bytes = items[i - 1].bytes;
                const uint8_t *pd = items[i - 1].dst, *ps;
                do ps = got + sl_prng_splitmix64(&seed) % (R - b);
                while (ps < pd + b && pd < ps + b);
                items[i] = (sl_copy_item){items[i - 1].dst, ps, b};
            }
        }
        for (size_t i = 0; i < n; i++) /* in order, on ref's bytes */
            memcpy(ref + ((uint8_t *)items[i].dst - got),
                   ref + ((const uint8_t *)items[i].src - got), items[i].bytes);
        const uint64_t bb = trial % 2 ? SL__GATHER_BOUNCE_MAX : 64u << 10;
        for (size_t i = 0; i < n;) {
            const size_t k = sl__gather_phase(items + i, n - i, bb, g);
            if (k <= 1) {
                alone++;
                memcpy(items[i].dst, items[i].src, items[i].bytes);
                i++;
                continue;
            }
            CHECK(sl__gather_validate(g) == 0 && g->n == (int)k && g->off[k] <= bb);
            if (i + k < n) {
                const sl_copy_item *nx = &items[i + k];
                const uint64_t pn = (nx->bytes + 15) / 16 * 16;
                if (k == SL__GATHER_MAX_ITEMS) cut_max++;
                else if (nx->bytes <= SL__GATHER_ITEM_MAX && pn <= bb && g->off[k] + pn > bb)
                    cut_bounce++; /* (an item over the bounce goes alone: not this cut) */
                else if (nx->bytes <= SL__GATHER_ITEM_MAX && pn <= bb) cut_conflict++;
            }
            for (size_t j = 0; j < k; j++) memcpy(bounce + g->off[j], g->src[j], g->bytes[j]);
            for (size_t j = k; j-- > 0;) memcpy(g->dst[j], bounce + g->off[j], g->bytes[j]);
            i += k;
        }
        size_t first = R;
        for (size_t i = 0; i < R && first == R; i++)
            if (got[i] != ref[i]) first = i;
        CHECK_MSG(first == R, "trial %d (%zu items): phases differ from the copies in order at "
                  "byte %zu", trial, n, first);
    }
    CHECK_MSG(cut_max && cut_bounce && cut_conflict && alone, "cuts: %" PRIu64 " at 96 items, %"
              PRIu64 " by the bounce, %" PRIu64 " by a conflict, %" PRIu64 " items alone",
              cut_max, cut_bounce, cut_conflict, alone);
out:
    free(ref);
    free(got);
    free(bounce);
    free(items);
    free(g);
}

int main(void)
{
    test_gather_validate();
    test_gather_plan();
    test_env_and_kind();
    test_props_and_capacity();
    test_throttle();
    test_cross_stream_throttled();
    test_free_waits();
    test_threads();
    sl_device_options o = sim_opts();
    int shared_failures = sl_device_checks_run(&o, "sim");
    int rc = sl_test_finish("device_test");
    return rc || shared_failures ? 1 : 0;
}
