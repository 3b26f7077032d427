/* alloc/bfc through sl_bfc_create_device on the sim device: data written with H2D copies
 * survives fragmentation and compaction (read back with D2H), overlapping slides are cut into
 * pieces of at most (src − dst) bytes (counted through the device's copy counters), compaction
 * issues about one copy per moved block, and injected device faults (every copy of both
 * compaction phases, a region allocation) give a clean error status, a valid arena, intact or
 * cleanly-reported contents and no leaked regions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"
#include "base/device/device.h"
#include "tests/testing.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static void valid(const sl_bfc *a, int line)
{
    sl_error e;
    sl_status s = sl__bfc_validate(a, &e);
    CHECK_MSG(s == SL_OK, "line %d: %s", line, e.msg);
}
#define VALID(a) valid((a), __LINE__)

typedef struct rig {
    sl_device *dev;
    sl_stream *st;
    sl_bfc *a;
} rig;

static int rig_open(rig *r, sl_fault_options faults, uint64_t region_bytes)
{
    memset(r, 0, sizeof *r);
    sl_device_options o = {.kind = "sim", .faults = faults};
    sl_error e;
    sl_status s = sl_device_open(&o, &r->dev, &e);
    CHECK_MSG(s == SL_OK, "open: %s", e.msg);
    if (s) return 0;
    s = sl_device_stream_create(r->dev, &r->st, &e);
    CHECK_MSG(s == SL_OK, "stream: %s", e.msg);
    if (s) return 0;
    sl_bfc_options bo = {.region_bytes = region_bytes};
    s = sl_bfc_create_device(r->dev, r->st, &bo, &r->a, &e);
    CHECK_MSG(s == SL_OK, "create_device: %s", e.msg);
    return s == SL_OK;
}

/* Destroys the arena and checks the device holds no region any more. */
static void rig_close(rig *r)
{
    sl_bfc_destroy(r->a);
    if (r->dev) {
        sl_device_counters c;
        sl_device_counters_get(r->dev, &c);
        CHECK_MSG(c.regions_live == 0, "%" PRIu64 " regions leaked", c.regions_live);
        sl_device_stream_destroy(r->dev, r->st);
        sl_device_close(r->dev);
    }
}

static sl_block alloc_ok(rig *r, uint64_t n)
{
    sl_block b = SL_BLOCK_NONE;
    sl_error e;
    CHECK_MSG(sl_bfc_alloc(r->a, n, 0, &b, &e) == SL_OK, "alloc %" PRIu64 ": %s", n, e.msg);
    VALID(r->a);
    return b;
}

static uint8_t pattern(uint32_t id, uint64_t i) { return (uint8_t)(id * 131u + i * 7u + (i >> 8)); }

/* Writes block id's pattern with an H2D copy. */
static void put(rig *r, sl_block b, uint32_t id)
{
    uint64_t n = sl_bfc_size(r->a, b);
    uint8_t *h = malloc(n);
    for (uint64_t i = 0; i < n; i++) h[i] = pattern(id, i);
    sl_error e;
    CHECK_MSG(sl_device_copy(r->dev, r->st, sl_bfc_ptr(r->a, b), h, n, SL_COPY_H2D, &e) == SL_OK,
              "H2D: %s", e.msg);
    CHECK(sl_device_stream_sync(r->dev, r->st, &e) == SL_OK);
    free(h);
}

/* Reads the block back (D2H when `by_copy`, else straight from sim memory) and compares. */
static int same(rig *r, sl_block b, uint32_t id, int by_copy)
{
    uint64_t n = sl_bfc_size(r->a, b);
    const uint8_t *d = sl_bfc_ptr(r->a, b);
    uint8_t *h = NULL;
    sl_error e;
    if (by_copy) {
        h = malloc(n);
        if (sl_device_copy(r->dev, r->st, h, d, n, SL_COPY_D2H, &e) ||
            sl_device_stream_sync(r->dev, r->st, &e)) {
            CHECK_MSG(0, "D2H: %s", e.msg);
            free(h);
            return 0;
        }
        d = h;
    } else {
        sl_device_stream_sync(r->dev, r->st, &e);
    }
    uint64_t i = 0;
    while (i < n && d[i] == pattern(id, i)) i++;
    free(h);
    return i == n;
}

static sl_device_counters counters(rig *r)
{
    sl_device_counters c;
    sl_device_counters_get(r->dev, &c);
    return c;
}

/* [A 16K][B 64K][C 36K][tail]; free A. C (the block above the packed line) fits no hole, so
 * phase 2 slides the run B+C (100K) down over the 16K gap: within 8× the gap, in 7 pieces of
 * at most 16K, none overlapping (the sim refuses overlapping D2D copies, so success says so),
 * all in one batch. */
static void test_overlapping_slide(void)
{
    rig r;
    if (!rig_open(&r, (sl_fault_options){0}, MiB)) {
        rig_close(&r);
        return;
    }
    sl_block a = alloc_ok(&r, 16 * KiB), b = alloc_ok(&r, 64 * KiB), c = alloc_ok(&r, 36 * KiB);
    put(&r, b, 2);
    put(&r, c, 3);
    char *base = sl_bfc_ptr(r.a, a);
    sl_error e;
    CHECK(sl_bfc_free(r.a, a, &e) == SL_OK);
    sl_device_counters before = counters(&r);
    sl_bfc_compact_result cr;
    CHECK_MSG(sl_bfc_compact(r.a, &cr, &e) == SL_OK, "%s", e.msg);
    VALID(r.a);
    sl_device_counters after = counters(&r);
    CHECK(cr.blocks_moved == 2 && cr.bytes_moved == 100 * KiB);
    CHECK((char *)sl_bfc_ptr(r.a, b) == base && (char *)sl_bfc_ptr(r.a, c) == base + 64 * KiB);
    CHECK_MSG(after.copies - before.copies == 7, "%" PRIu64 " copies", after.copies - before.copies);
    CHECK(after.copy_batches - before.copy_batches == 1);
    CHECK(after.copy_bytes[SL_COPY_D2D] - before.copy_bytes[SL_COPY_D2D] == 100 * KiB);
    CHECK(same(&r, b, 2, 1) && same(&r, c, 3, 1));
    CHECK(sl_bfc_epoch(r.a) == 1);
    rig_close(&r);
}

/* The same shape with a 256-byte gap: an explicit compaction leaves it (sliding 200K over it
 * would take 800 copies); compaction on out-of-memory is full and does slide, in pieces of 256
 * bytes. Region 256K = max: [A 256][B 64K][C 36K][D 100K][tail 56K − 256]; free A, ask 56K. */
static void test_oom_full_slide(void)
{
    rig r;
    memset(&r, 0, sizeof r);
    sl_device_options o = {.kind = "sim"};
    sl_error e;
    CHECK(sl_device_open(&o, &r.dev, &e) == SL_OK && sl_device_stream_create(r.dev, &r.st, &e) == SL_OK);
    sl_bfc_options bo = {.region_bytes = 256 * KiB, .max_bytes = 256 * KiB, .compact_on_oom = true};
    CHECK_MSG(sl_bfc_create_device(r.dev, r.st, &bo, &r.a, &e) == SL_OK, "%s", e.msg);
    if (!r.a) {
        rig_close(&r);
        return;
    }
    sl_block a = alloc_ok(&r, 256), b = alloc_ok(&r, 64 * KiB), c = alloc_ok(&r, 36 * KiB),
             d = alloc_ok(&r, 100 * KiB);
    put(&r, b, 2);
    put(&r, c, 3);
    put(&r, d, 4);
    char *base = sl_bfc_ptr(r.a, a);
    CHECK(sl_bfc_free(r.a, a, &e) == SL_OK);
    sl_bfc_compact_result cr;
    CHECK_MSG(sl_bfc_compact(r.a, &cr, &e) == SL_OK, "%s", e.msg);
    CHECK(cr.blocks_moved == 0 && sl_bfc_epoch(r.a) == 0);
    CHECK_MSG(sl__bfc_check_compacted(r.a, false, &e) == SL_OK, "%s", e.msg);
    CHECK(sl__bfc_check_compacted(r.a, true, &e) == SL_ERR_RANGE);
    CHECK_CONTAINS(e.msg, "256 free bytes at offset 0");
    sl_device_counters before = counters(&r);
    sl_block y = alloc_ok(&r, 56 * KiB); /* 56K free, but in two pieces: compaction on OOM */
    sl_device_counters after = counters(&r);
    CHECK(sl_bfc_epoch(r.a) == 1);
    CHECK((char *)sl_bfc_ptr(r.a, b) == base && (char *)sl_bfc_ptr(r.a, y) == base + 200 * KiB);
    CHECK_MSG(after.copies - before.copies == 800, "%" PRIu64 " copies", after.copies - before.copies);
    CHECK(after.copy_batches - before.copy_batches == 1); /* 800 copies, one device operation */
    CHECK(same(&r, b, 2, 1) && same(&r, c, 3, 1) && same(&r, d, 4, 1));
    CHECK(sl_bfc_free(r.a, y, &e) == SL_OK);
    CHECK_MSG(sl__bfc_check_compacted(r.a, true, &e) == SL_OK, "%s", e.msg);
    rig_close(&r);
}

/* Many blocks, fragmented, compacted; every block read back by D2H. */
static void test_fragment_compact(void)
{
    rig r;
    if (!rig_open(&r, (sl_fault_options){0}, 2 * MiB)) {
        rig_close(&r);
        return;
    }
    enum { N = 120 };
    sl_block b[N];
    for (uint32_t i = 0; i < N; i++) {
        b[i] = alloc_ok(&r, 256 + (uint64_t)(i * 2654435761u % 40000));
        put(&r, b[i], i);
    }
    sl_error e;
    CHECK(sl_bfc_set_pinned(r.a, b[50], true, &e) == SL_OK);
    void *pinned_at = sl_bfc_ptr(r.a, b[50]);
    for (uint32_t i = 0; i < N; i++)
        if (i % 3 == 1 || (i > 60 && i < 110)) {
            CHECK(sl_bfc_free(r.a, b[i], &e) == SL_OK);
            b[i] = SL_BLOCK_NONE;
        }
    sl_bfc_stats st0;
    sl_bfc_stats_get(r.a, &st0);
    CHECK_MSG(st0.fragmentation > 0.3, "fragmentation %g", st0.fragmentation);
    sl_bfc_compact_result cr;
    sl_device_counters c0 = counters(&r);
    CHECK_MSG(sl_bfc_compact(r.a, &cr, &e) == SL_OK, "%s", e.msg);
    uint64_t copies = counters(&r).copies - c0.copies;
    /* Phase 1 fills and phase 2 slides of every region: planned first, issued as one batch. */
    CHECK(counters(&r).copy_batches - c0.copy_batches == 1);
    VALID(r.a);
    CHECK_MSG(sl__bfc_check_compacted(r.a, false, &e) == SL_OK, "%s", e.msg);
    sl_bfc_stats st1;
    sl_bfc_stats_get(r.a, &st1);
    printf("fragment_compact: %" PRIu64 " blocks, %" PRIu64 " bytes in %" PRIu64 " copies; "
           "fragmentation %.4f -> %.4f\n", cr.blocks_moved, cr.bytes_moved, copies,
           st0.fragmentation, st1.fragmentation);
    CHECK(st1.fragmentation < st0.fragmentation && cr.blocks_moved > 0);
    /* About one copy per moved block: single copies (a run sharing one) plus short slides. */
    CHECK_MSG(copies <= cr.blocks_moved, "%" PRIu64 " copies for %" PRIu64 " blocks", copies,
              cr.blocks_moved);
    CHECK(sl_bfc_ptr(r.a, b[50]) == pinned_at);
    for (uint32_t i = 0; i < N; i++)
        if (b[i] != SL_BLOCK_NONE) CHECK_MSG(same(&r, b[i], i, 1), "block %u", i);
    rig_close(&r);
}

/* Fault at the k-th compaction copy for every k (one past the end too: no fault then). Setup
 * makes one H2D copy per block first. */
typedef struct fault_case {
    const char *name;
    uint64_t sizes[8];  /* KiB, allocated in order from offset 0 */
    int freed[8];       /* 1: freed before compacting */
    uint64_t copies;    /* compaction copies without a fault */
    /* per moving group, in order: its first and last copy (1-based; more than one = a
     * piecewise slide) and its blocks (1-based indices into sizes) */
    struct {
        uint64_t first_copy, last_copy;
        int blocks[4];
    } groups[3];
    int ngroups;
} fault_case;

static void run_fault_case(const fault_case *fc)
{
    int n = 0, puts_n = 0;
    while (n < 8 && fc->sizes[n]) n++;
    for (int i = 0; i < n; i++) puts_n += !fc->freed[i];
    for (uint64_t k = 1; k <= fc->copies + 1; k++) {
        rig r;
        if (!rig_open(&r, (sl_fault_options){.copy_at = (uint64_t)puts_n + k}, MiB)) {
            rig_close(&r);
            return;
        }
        sl_block b[8];
        void *at0[8];
        for (int i = 0; i < n; i++) b[i] = alloc_ok(&r, fc->sizes[i] * KiB);
        for (int i = 0; i < n; i++)
            if (!fc->freed[i]) put(&r, b[i], (uint32_t)i + 1);
        for (int i = 0; i < n; i++) at0[i] = sl_bfc_ptr(r.a, b[i]);
        sl_error e;
        for (int i = 0; i < n; i++)
            if (fc->freed[i]) CHECK(sl_bfc_free(r.a, b[i], &e) == SL_OK);
        sl_bfc_compact_result cr;
        sl_status s = sl_bfc_compact(r.a, &cr, &e);
        VALID(r.a);
        /* Which group failed (ngroups: none), and whether its rollback lost the contents. */
        int failed = fc->ngroups;
        for (int g = 0; g < fc->ngroups; g++)
            if (k >= fc->groups[g].first_copy && k <= fc->groups[g].last_copy) failed = g;
        int lost = 0;
        if (failed == fc->ngroups) {
            CHECK_MSG(s == SL_OK, "%s k=%" PRIu64 ": %s", fc->name, k, e.msg);
            CHECK(counters(&r).copies == (uint64_t)puts_n + fc->copies);
        } else {
            CHECK_MSG(s == SL_ERR_DEVICE, "%s k=%" PRIu64 ": status %d", fc->name, k, (int)s);
            CHECK_CONTAINS(e.msg, "injected fault");
            CHECK_CONTAINS(e.msg, "stay in place");
            lost = strstr(e.msg, "contents lost") != NULL;
        }
        uint64_t moved = 0;
        for (int g = 0; g < fc->ngroups; g++)
            for (int j = 0; j < 4 && fc->groups[g].blocks[j]; j++) {
                int i = fc->groups[g].blocks[j] - 1;
                CHECK_MSG((sl_bfc_ptr(r.a, b[i]) != at0[i]) == (g < failed),
                          "%s k=%" PRIu64 ": block %d %s", fc->name, k, i,
                          g < failed ? "did not move" : "moved");
                moved += g < failed;
            }
        CHECK(cr.blocks_moved == moved && sl_bfc_epoch(r.a) == (moved ? 1u : 0u));
        /* Contents read straight from sim memory: the fault may persist for later copies. */
        for (int i = 0; i < n; i++) {
            if (fc->freed[i]) continue;
            int in_failed = 0;
            for (int j = 0; failed < fc->ngroups && j < 4; j++)
                in_failed |= fc->groups[failed].blocks[j] == i + 1;
            if (lost && in_failed) continue; /* reported as lost, checked below */
            CHECK_MSG(same(&r, b[i], (uint32_t)i + 1, 0), "%s k=%" PRIu64 ": block %d torn",
                      fc->name, k, i);
        }
        if (lost) {
            /* Rollback refused: allowed only when the device fails every later copy too. */
            uint8_t x = 0;
            sl_error e2;
            CHECK_MSG(sl_device_copy(r.dev, r.st, &x, sl_bfc_ptr(r.a, b[0]), 1, SL_COPY_D2H, &e2) != SL_OK,
                      "%s k=%" PRIu64 ": rollback failed although the device copies again", fc->name, k);
        } else if (failed < fc->ngroups && fc->groups[failed].last_copy > fc->groups[failed].first_copy) {
            /* A piecewise slide: its first piece failing wrote nothing, a later one is undone. */
            CHECK_CONTAINS(e.msg, k == fc->groups[failed].first_copy ? "nothing moved" : "source restored");
        }
        rig_close(&r);
    }
}

static void test_copy_fault(void)
{
    /* Phase 1: [A 4K free][B 2K][C 3K free][D 1K][E 2K][F 1K][G 2K free][H 3K][tail]. The
     * packed line is at 9K; the run D+E+F (4K) goes into A in one copy, then H into C. */
    static const fault_case fill = {
        .name = "fill",
        .sizes = {4, 2, 3, 1, 2, 1, 2, 3},
        .freed = {1, 0, 1, 0, 0, 0, 1, 0},
        .copies = 2,
        .groups = {{1, 1, {4, 5, 6}}, {2, 2, {8}}},
        .ngroups = 2,
    };
    /* Phase 2: [A 1K free][B 4K][C 1K free][D 3K][tail]. D fits no hole; B slides down by 1K
     * (4 pieces: a fault at piece 3 or 4 exercises the rollback), then D by 2K (2 pieces). */
    static const fault_case slide = {
        .name = "slide",
        .sizes = {1, 4, 1, 3},
        .freed = {1, 0, 1, 0},
        .copies = 6,
        .groups = {{1, 4, {2}}, {5, 6, {4}}},
        .ngroups = 2,
    };
    run_fault_case(&fill);
    run_fault_case(&slide);
}

static void test_region_fault(void)
{
    rig r;
    if (!rig_open(&r, (sl_fault_options){.region_alloc_at = 2}, MiB)) {
        rig_close(&r);
        return;
    }
    sl_block x = alloc_ok(&r, 768 * KiB);
    sl_block y = SL_BLOCK_NONE;
    sl_error e;
    CHECK(sl_bfc_alloc(r.a, 768 * KiB, 0, &y, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "injected fault");
    CHECK_CONTAINS(e.msg, "786432 bytes");
    CHECK(y == SL_BLOCK_NONE);
    VALID(r.a);
    CHECK(counters(&r).regions_live == 1);
    y = alloc_ok(&r, 768 * KiB); /* the next region allocation succeeds */
    CHECK(counters(&r).regions_live == 2);
    put(&r, y, 9);
    CHECK(same(&r, y, 9, 1));
    CHECK(sl_bfc_free(r.a, x, &e) == SL_OK);
    rig_close(&r); /* y is dropped with the arena; no region may stay behind */
}

static void test_bad_args(void)
{
    sl_bfc *a = (sl_bfc *)1;
    sl_error e;
    CHECK(sl_bfc_create_device(NULL, NULL, NULL, &a, &e) == SL_ERR_INVALID);
    CHECK(a == NULL);
    CHECK_CONTAINS(e.msg, "needs a device");
}

int main(void)
{
    test_overlapping_slide();
    test_oom_full_slide();
    test_fragment_compact();
    test_copy_fault();
    test_region_fault();
    test_bad_args();
    return sl_test_finish("bfc_device_test");
}
