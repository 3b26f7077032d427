/* alloc/bfc through sl_bfc_create_device on the sim device: data written with H2D copies
 * survives fragmentation and compaction (read back with D2H), overlapping slides are cut into
 * pieces of at most (src − dst) bytes (counted through the device's copy counters), and
 * injected device faults (a copy during compaction, a region allocation) give a clean error
 * status, a valid arena, intact or cleanly-reported contents and no leaked regions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"
#include "runtime/device/device.h"
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

/* [A 256][B 64K][tail]: freeing A and compacting slides B down by 256 bytes in 256 pieces. */
static void test_overlapping_slide(void)
{
    rig r;
    if (!rig_open(&r, (sl_fault_options){0}, MiB)) {
        rig_close(&r);
        return;
    }
    sl_block a = alloc_ok(&r, 256), b = alloc_ok(&r, 64 * KiB), c = alloc_ok(&r, 100 * KiB);
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
    CHECK(cr.blocks_moved == 2 && cr.bytes_moved == 164 * KiB);
    CHECK((char *)sl_bfc_ptr(r.a, b) == base && (char *)sl_bfc_ptr(r.a, c) == base + 64 * KiB);
    /* One run of 164K moved by 256: 656 copies of 256 bytes, none overlapping (the sim
     * refuses overlapping D2D copies, so success already says so). */
    CHECK_MSG(after.copies - before.copies == 656, "%" PRIu64 " copies",
              after.copies - before.copies);
    CHECK(after.copy_bytes[SL_COPY_D2D] - before.copy_bytes[SL_COPY_D2D] == 164 * KiB);
    CHECK(same(&r, b, 2, 1) && same(&r, c, 3, 1));
    CHECK(sl_bfc_epoch(r.a) == 1);
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
    CHECK_MSG(sl_bfc_compact(r.a, &cr, &e) == SL_OK, "%s", e.msg);
    VALID(r.a);
    sl_bfc_stats st1;
    sl_bfc_stats_get(r.a, &st1);
    CHECK(st1.fragmentation < st0.fragmentation && cr.blocks_moved > 0);
    CHECK(sl_bfc_ptr(r.a, b[50]) == pinned_at);
    for (uint32_t i = 0; i < N; i++)
        if (b[i] != SL_BLOCK_NONE) CHECK_MSG(same(&r, b[i], i, 1), "block %u", i);
    rig_close(&r);
}

/* Layout for the fault runs: [A 256][B 8K][C 768][D 4K][tail]; free A and C. Compaction moves
 * run B by 256 (32 pieces), then run D by 1024 (4 pieces). The injected copy fault hits the
 * k-th compaction copy for every k, including one past the end (no fault then). */
static void test_copy_fault(void)
{
    for (uint64_t k = 1; k <= 37; k++) {
        /* Setup makes 2 H2D copies first (B and D). */
        rig r;
        if (!rig_open(&r, (sl_fault_options){.copy_at = 2 + k}, MiB)) {
            rig_close(&r);
            return;
        }
        sl_block a = alloc_ok(&r, 256), b = alloc_ok(&r, 8 * KiB), c = alloc_ok(&r, 768),
                 d = alloc_ok(&r, 4 * KiB);
        put(&r, b, 2);
        put(&r, d, 4);
        void *b0 = sl_bfc_ptr(r.a, b), *d0 = sl_bfc_ptr(r.a, d);
        sl_error e;
        CHECK(sl_bfc_free(r.a, a, &e) == SL_OK && sl_bfc_free(r.a, c, &e) == SL_OK);
        sl_bfc_compact_result cr;
        sl_status s = sl_bfc_compact(r.a, &cr, &e);
        VALID(r.a);
        if (k == 37) {
            CHECK_MSG(s == SL_OK, "%s", e.msg);
            CHECK(same(&r, b, 2, 0) && same(&r, d, 4, 0)); /* copy #39 would fault */
            CHECK(cr.blocks_moved == 2 && sl_bfc_epoch(r.a) == 1);
            CHECK(counters(&r).copies == 2 + 36);
            rig_close(&r);
            continue;
        }
        CHECK_MSG(s == SL_ERR_DEVICE, "k=%" PRIu64 ": status %d", k, (int)s);
        CHECK_CONTAINS(e.msg, "injected fault");
        CHECK_CONTAINS(e.msg, "stay in place");
        /* B failed (k ≤ 32): nothing moved. D failed: B moved, D did not. */
        int b_moved = k > 32;
        CHECK(cr.blocks_moved == (uint64_t)b_moved);
        CHECK(sl_bfc_epoch(r.a) == (uint64_t)b_moved);
        CHECK((sl_bfc_ptr(r.a, b) == b0) == !b_moved);
        CHECK(sl_bfc_ptr(r.a, d) == d0);
        /* Contents read straight from sim memory: the fault may persist for later copies. */
        int lost = strstr(e.msg, "contents lost") != NULL;
        if (!lost) {
            CHECK(strstr(e.msg, "nothing moved") || strstr(e.msg, "source restored"));
            CHECK_MSG(same(&r, b, 2, 0), "k=%" PRIu64 ": B torn", k);
            CHECK_MSG(same(&r, d, 4, 0), "k=%" PRIu64 ": D torn", k);
        } else {
            /* Rollback refused: allowed only when the device fails every later copy too. */
            uint8_t x = 0;
            sl_error e2;
            CHECK_MSG(sl_device_copy(r.dev, r.st, &x, sl_bfc_ptr(r.a, d), 1, SL_COPY_D2H, &e2) != SL_OK,
                      "k=%" PRIu64 ": rollback failed although the device copies again", k);
            CHECK(b_moved ? same(&r, b, 2, 0) : same(&r, d, 4, 0)); /* the other block */
        }
        rig_close(&r);
    }
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
    test_fragment_compact();
    test_copy_fault();
    test_region_fault();
    test_bad_args();
    return sl_test_finish("bfc_device_test");
}
