/* Unit tests of alloc/bfc on test backends: exact placement on fake addresses (split, coalesce,
 * best fit, growth, limits), contents across compaction on real host memory (pinned blocks,
 * handles, epoch, released regions, compaction on OOM and by threshold, move faults), handle
 * misuse, dumps, and a multi-threaded smoke test. sl__bfc_validate runs after every step. */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"
#include "tests/alloc/bfc_backends.h"
#include "tests/testing.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BASE (1ull << 40)

static void valid(const sl_bfc *a, int line)
{
    sl_error e;
    sl_status s = sl__bfc_validate(a, &e);
    CHECK_MSG(s == SL_OK, "line %d: %s", line, e.msg);
}
#define VALID(a) valid((a), __LINE__)

static sl_bfc *mk(test_backend *t, sl_bfc_options o)
{
    sl_bfc_backend be = tb_backend(t);
    sl_bfc *a = NULL;
    sl_error e;
    sl_status s = sl_bfc_create(&be, &o, &a, &e);
    CHECK_MSG(s == SL_OK, "%s", e.msg);
    return a;
}

static sl_block alloc_ok(sl_bfc *a, uint64_t n, uint32_t flags, int line)
{
    sl_block b = SL_BLOCK_NONE;
    sl_error e;
    sl_status s = sl_bfc_alloc(a, n, flags, &b, &e);
    CHECK_MSG(s == SL_OK, "line %d: alloc %" PRIu64 ": %s", line, n, e.msg);
    valid(a, line);
    return b;
}
#define ALLOC(a, n) alloc_ok((a), (n), 0, __LINE__)

static void free_ok(sl_bfc *a, sl_block b, int line)
{
    sl_error e;
    sl_status s = sl_bfc_free(a, b, &e);
    CHECK_MSG(s == SL_OK, "line %d: %s", line, e.msg);
    valid(a, line);
}
#define FREE(a, b) free_ok((a), (b), __LINE__)

static uint64_t addr(const sl_bfc *a, sl_block b) { return (uint64_t)(uintptr_t)sl_bfc_ptr(a, b); }

static sl_bfc_stats stats(const sl_bfc *a)
{
    sl_bfc_stats s;
    sl_bfc_stats_get(a, &s);
    return s;
}

static void test_split(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    sl_block b = ALLOC(a, 1000);
    CHECK(addr(a, b) == BASE);
    CHECK(sl_bfc_size(a, b) == 1024);
    sl_bfc_stats st = stats(a);
    CHECK(st.chunks == 2 && st.free_chunks == 1 && st.regions == 1);
    CHECK(st.in_use_bytes == 1024 && st.requested_bytes == 1000);
    CHECK(st.free_bytes == MiB - 1024 && st.largest_free_bytes == MiB - 1024);
    CHECK(st.fragmentation == 0.0);
    sl_block c = ALLOC(a, 256);
    CHECK(addr(a, c) == BASE + 1024);
    FREE(a, b);
    FREE(a, c);
    CHECK(stats(a).chunks == 1);
    /* Remainder 256 B < request / 16: no split, the block keeps the slack. */
    sl_block d = ALLOC(a, MiB - 256);
    CHECK(sl_bfc_size(a, d) == MiB);
    CHECK(stats(a).chunks == 1 && stats(a).requested_bytes == MiB - 256);
    FREE(a, d);
    /* Remainder 64 KiB ≥ request / 16: split. */
    d = ALLOC(a, MiB - 64 * KiB);
    CHECK(sl_bfc_size(a, d) == MiB - 64 * KiB);
    CHECK(stats(a).chunks == 2 && stats(a).free_bytes == 64 * KiB);
    FREE(a, d);
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

static void test_coalesce(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    sl_block b[5];
    for (int i = 0; i < 5; i++) b[i] = ALLOC(a, 4 * KiB);
    for (int i = 0; i < 5; i++) CHECK(addr(a, b[i]) == BASE + (uint64_t)i * 4 * KiB);
    /* Left: free b0 then b1 — b1's left neighbour is free. */
    FREE(a, b[0]);
    FREE(a, b[1]);
    sl_bfc_stats st = stats(a);
    CHECK(st.free_chunks == 2 && st.chunks == 5); /* [8K free][b2][b3][b4][tail] */
    /* Right: free b3 — its right neighbour b4 is live; then free b4's ... use b3 then b2:
     * b2's right neighbour b3 is free and its left one [8K] too: both sides. */
    FREE(a, b[3]);
    CHECK(stats(a).free_chunks == 3);
    FREE(a, b[2]);
    st = stats(a);
    CHECK(st.free_chunks == 2 && st.chunks == 3); /* [16K free][b4][tail] */
    CHECK(st.largest_free_bytes == MiB - 20 * KiB);
    sl_block x = ALLOC(a, 16 * KiB); /* exactly fills the merged hole at the base */
    CHECK(addr(a, x) == BASE);
    /* Right only: free b4; its right neighbour is the tail. */
    FREE(a, b[4]);
    st = stats(a);
    CHECK(st.free_chunks == 1 && st.chunks == 2 && st.free_bytes == MiB - 16 * KiB);
    FREE(a, x);
    CHECK(stats(a).chunks == 1);
    sl_bfc_destroy(a);
}

static void test_best_fit(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    /* Holes (free) of 8K, 4K, 16K, 4K separated by 256-byte live guards, then the tail. */
    const uint64_t hole[4] = {8 * KiB, 4 * KiB, 16 * KiB, 4 * KiB};
    sl_block h[4], g[4];
    uint64_t hole_at[4], off = 0;
    for (int i = 0; i < 4; i++) {
        h[i] = ALLOC(a, hole[i]);
        g[i] = ALLOC(a, 256);
        hole_at[i] = BASE + off;
        off += hole[i] + 256;
    }
    for (int i = 0; i < 4; i++) FREE(a, h[i]);
    CHECK(stats(a).free_chunks == 5);
    sl_block x = ALLOC(a, 3000);            /* 4K holes tie: lowest address wins */
    CHECK(addr(a, x) == hole_at[1]);
    sl_block y = ALLOC(a, 5 * KiB);         /* smallest adequate: the 8K hole */
    CHECK(addr(a, y) == hole_at[0]);
    sl_block z = ALLOC(a, 10 * KiB);        /* 16K hole, not the big tail */
    CHECK(addr(a, z) == hole_at[2]);
    sl_block w = ALLOC(a, 4 * KiB);         /* remaining 4K hole, exact */
    CHECK(addr(a, w) == hole_at[3]);
    sl_block v = ALLOC(a, 3 * KiB);         /* 3K left of the 8K hole after y */
    CHECK(addr(a, v) == hole_at[0] + 5 * KiB);
    for (int i = 0; i < 4; i++) FREE(a, g[i]);
    FREE(a, x), FREE(a, y), FREE(a, z), FREE(a, w), FREE(a, v);
    CHECK(stats(a).chunks == 1);
    sl_bfc_destroy(a);
}

static void test_alignment(void)
{
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = 4 * MiB});
    sl_block b[200];
    uint64_t n = 1;
    for (int i = 0; i < 200; i++) {
        n = n * 7 % 20011 + 1; /* odd and even sizes, 1 .. 20011 */
        b[i] = ALLOC(a, n);
        CHECK(addr(a, b[i]) % SL_BFC_ALIGN == 0);
        CHECK(sl_bfc_size(a, b[i]) >= n && sl_bfc_size(a, b[i]) % SL_BFC_ALIGN == 0);
        memset(sl_bfc_ptr(a, b[i]), 0xAB, (size_t)n); /* real memory: ASan sees overruns */
    }
    for (int i = 0; i < 200; i += 2) FREE(a, b[i]);
    for (int i = 0; i < 100; i++) {
        sl_block c = ALLOC(a, (uint64_t)i * 37 + 1);
        CHECK(addr(a, c) % SL_BFC_ALIGN == 0);
        FREE(a, c);
    }
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

static void test_exhaustion(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .max_bytes = MiB});
    sl_block b = SL_BLOCK_NONE;
    sl_error e;
    CHECK(sl_bfc_alloc(a, 0, 0, &b, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "0 bytes");
    CHECK(sl_bfc_alloc(a, 10, 0x80, &b, &e) == SL_ERR_INVALID);
    sl_block x = ALLOC(a, 700 * KiB);
    CHECK(sl_bfc_alloc(a, 2 * MiB, 0, &b, &e) == SL_ERR_NOMEM);
    CHECK(b == SL_BLOCK_NONE);
    CHECK_CONTAINS(e.msg, "2097152 bytes");                 /* the request */
    CHECK_CONTAINS(e.msg, "free 331776 bytes");             /* free total */
    CHECK_CONTAINS(e.msg, "largest free chunk 331776");     /* largest free */
    CHECK_CONTAINS(e.msg, "max_bytes 1048576");
    CHECK(sl_bfc_alloc(a, UINT64_MAX, 0, &b, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "64 bits");
    CHECK(stats(a).failed_allocs == 2);
    VALID(a);
    FREE(a, x);
    sl_bfc_destroy(a);

    /* Always-failing backend: the backend's own message is passed on. */
    test_backend f = {.region_fuse = -1};
    a = mk(&f, (sl_bfc_options){.region_bytes = MiB});
    CHECK(sl_bfc_alloc(a, 1000, 0, &b, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "region fuse blown");
    CHECK_CONTAINS(e.msg, "1000 bytes");
    VALID(a);
    sl_bfc_destroy(a);
    CHECK(f.regions_live == 0);
}

static void test_growth(void)
{
    test_backend t = {.region_fuse = 3};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .max_bytes = 5 * MiB + 512 * KiB});
    sl_block x = ALLOC(a, 768 * KiB);
    sl_block y = ALLOC(a, 768 * KiB);            /* does not fit the 256K left: second region */
    CHECK(addr(a, x) == BASE);
    CHECK(addr(a, y) == BASE + (1ull << 30));
    CHECK(stats(a).regions == 2 && stats(a).total_bytes == 2 * MiB);
    sl_block z = ALLOC(a, 3 * MiB);              /* larger than region_bytes: own region */
    CHECK(addr(a, z) == BASE + (2ull << 30));
    CHECK(stats(a).total_bytes == 5 * MiB);
    sl_block s = ALLOC(a, 200 * KiB);            /* fits the 256K left in region 0 */
    CHECK(addr(a, s) == BASE + 768 * KiB);
    /* The last region takes what max_bytes leaves (512K) ... but the fuse allows 3 regions. */
    sl_block b;
    sl_error e;
    CHECK(sl_bfc_alloc(a, 400 * KiB, 0, &b, &e) == SL_ERR_NOMEM);
    CHECK_CONTAINS(e.msg, "region fuse blown");
    t.region_fuse = 0;
    sl_block w = ALLOC(a, 400 * KiB);
    CHECK(addr(a, w) == BASE + (3ull << 30)); /* fake bases advance only on success */
    CHECK(stats(a).total_bytes == 5 * MiB + 512 * KiB && stats(a).regions == 4);
    CHECK(sl_bfc_alloc(a, 300 * KiB, 0, &b, &e) == SL_ERR_NOMEM); /* free: 56K, 256K, 112K */
    CHECK_CONTAINS(e.msg, "max_bytes");
    CHECK_CONTAINS(e.msg, "largest free chunk 262144");
    FREE(a, x), FREE(a, y), FREE(a, z), FREE(a, s), FREE(a, w);
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

/* Real memory: fill blocks, compact, check. */
static void fill(sl_bfc *a, sl_block b) { tb_fill(sl_bfc_ptr(a, b), sl_bfc_size(a, b), tb_pattern_seed(b, sl_bfc_size(a, b))); }
static int intact(const sl_bfc *a, sl_block b)
{
    return tb_check(sl_bfc_ptr(a, b), sl_bfc_size(a, b), tb_pattern_seed(b, sl_bfc_size(a, b))) == UINT64_MAX;
}

static void test_compact_pinned(void)
{
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    sl_block b[6];
    for (int i = 0; i < 6; i++) {
        b[i] = ALLOC(a, 16 * KiB * (uint64_t)(i + 1));
        fill(a, b[i]);
    }
    uint64_t base = addr(a, b[0]);
    /* [b0 16K][b1 32K][b2 48K][b3 64K][b4 80K][b5 96K][tail] */
    sl_error e;
    CHECK(sl_bfc_set_pinned(a, b[3], true, &e) == SL_OK);
    uint64_t pinned_at = addr(a, b[3]);
    FREE(a, b[0]);
    FREE(a, b[2]);
    FREE(a, b[4]);
    uint64_t epoch = sl_bfc_epoch(a);
    sl_bfc_compact_result r;
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    VALID(a);
    /* b1 slides to the base; the 16K+48K of free space before pinned b3 stays before it;
     * b5 slides down over b4's 80K. */
    CHECK(addr(a, b[1]) == base);
    CHECK(addr(a, b[3]) == pinned_at);
    CHECK(addr(a, b[5]) == pinned_at + 64 * KiB);
    CHECK(r.blocks_moved == 2 && r.bytes_moved == (32 + 96) * KiB);
    CHECK(sl_bfc_epoch(a) == epoch + 1);
    CHECK(intact(a, b[1]) && intact(a, b[3]) && intact(a, b[5]));
    sl_bfc_stats st = stats(a);
    CHECK(st.free_chunks == 2 && st.compactions == 1 && st.bytes_moved == r.bytes_moved);
    /* Nothing left to move: the epoch stays. */
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    CHECK(r.blocks_moved == 0 && r.bytes_moved == 0 && sl_bfc_epoch(a) == epoch + 1);
    /* Unpinned, b3 moves down too. */
    CHECK(sl_bfc_set_pinned(a, b[3], false, &e) == SL_OK);
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    CHECK(addr(a, b[3]) == base + 32 * KiB && addr(a, b[5]) == base + 96 * KiB);
    CHECK(intact(a, b[1]) && intact(a, b[3]) && intact(a, b[5]));
    CHECK(stats(a).free_chunks == 1 && stats(a).fragmentation == 0.0);
    CHECK(sl_bfc_epoch(a) == epoch + 2);
    VALID(a);
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

static void test_compact_many(void)
{
    /* Both phases (holes filled from the top, slides) over many regions; every block checked. */
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = 512 * KiB, .release_empty_regions = true});
    enum { N = 400 };
    sl_block b[N];
    for (int i = 0; i < N; i++) {
        b[i] = ALLOC(a, 256 + (uint64_t)(i * 2654435761u % 9000));
        fill(a, b[i]);
    }
    uint64_t regions = stats(a).regions;
    for (int i = 0; i < N; i++)
        if (i % 3 == 0 || (i > N / 2 && i < N / 2 + 60)) {
            FREE(a, b[i]);
            b[i] = SL_BLOCK_NONE;
        }
    sl_bfc_stats before = stats(a);
    sl_bfc_compact_result r;
    sl_error e;
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    VALID(a);
    for (int i = 0; i < N; i++)
        if (b[i] != SL_BLOCK_NONE) CHECK_MSG(intact(a, b[i]), "block %d", i);
    sl_bfc_stats st = stats(a);
    CHECK(st.regions <= regions);
    /* Every gap left lies before a run of more than 8× its size (the policy's line; a full
     * compaction would move the whole run through ≥ 9 copies to close it). */
    CHECK_MSG(sl__bfc_check_compacted(a, false, &e) == SL_OK, "%s", e.msg);
    CHECK(st.fragmentation < before.fragmentation && st.largest_free_bytes > before.largest_free_bytes);
    for (int i = 0; i < N; i++) FREE(a, b[i]);
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    CHECK(r.regions_released == stats(a).regions + r.regions_released && stats(a).regions == 0);
    CHECK(t.regions_live == 0);
    VALID(a);
    sl_bfc_destroy(a);
}

static void test_handles(void)
{
    test_backend t = {0}, u = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    sl_bfc *o = mk(&u, (sl_bfc_options){.region_bytes = MiB});
    sl_error e;
    CHECK(sl_bfc_free(a, SL_BLOCK_NONE, &e) == SL_OK);
    sl_block b = ALLOC(a, 4096);
    FREE(a, b);
    CHECK(sl_bfc_free(a, b, &e) == SL_ERR_INVALID); /* double free */
    CHECK_CONTAINS(e.msg, "stale");
    CHECK(sl_bfc_ptr(a, b) == NULL && sl_bfc_size(a, b) == 0);
    CHECK(sl_bfc_set_pinned(a, b, true, &e) == SL_ERR_INVALID);
    /* Reusing the slot (after HANDLE_REUSE_MIN frees) gives a new generation: b stays stale. */
    sl_block keep[100];
    for (int i = 0; i < 100; i++) keep[i] = ALLOC(a, 256);
    for (int i = 0; i < 100; i++) FREE(a, keep[i]);
    for (int i = 0; i < 100; i++) {
        keep[i] = ALLOC(a, 256);
        CHECK(keep[i] != b);
    }
    CHECK(sl_bfc_free(a, b, &e) == SL_ERR_INVALID);
    CHECK(sl_bfc_ptr(a, b) == NULL);
    /* Foreign: a handle of another arena whose slot this arena never handed out. */
    sl_block many[150];
    for (int i = 0; i < 150; i++) many[i] = ALLOC(o, 256);
    CHECK(sl_bfc_free(a, many[149], &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "foreign");
    CHECK(sl_bfc_ptr(a, many[149]) == NULL);
    CHECK(sl_bfc_free(a, 0xFFFFFFFEu, &e) == SL_ERR_INVALID);
    VALID(a);
    VALID(o);
    CHECK(stats(a).live_blocks == 100 && stats(o).live_blocks == 150);
    sl_bfc_destroy(a);
    sl_bfc_destroy(o);
    CHECK(t.regions_live == 0 && u.regions_live == 0);
}

static void test_release_empty(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .release_empty_regions = true});
    sl_block x = ALLOC(a, 768 * KiB), y = ALLOC(a, 768 * KiB), z = ALLOC(a, 768 * KiB);
    CHECK(stats(a).regions == 3 && t.regions_live == 3);
    FREE(a, y);
    sl_bfc_compact_result r;
    sl_error e;
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
    CHECK(r.regions_released == 1 && r.blocks_moved == 0);
    CHECK(t.regions_live == 2 && stats(a).regions == 2 && stats(a).total_bytes == 2 * MiB);
    CHECK(addr(a, x) == BASE && addr(a, z) == BASE + (2ull << 30));
    VALID(a);
    sl_block w = ALLOC(a, 768 * KiB);            /* grows again */
    CHECK(stats(a).regions == 3);
    FREE(a, x), FREE(a, z), FREE(a, w);
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
    /* Without the option nothing is released. */
    test_backend u = {0};
    a = mk(&u, (sl_bfc_options){.region_bytes = MiB});
    x = ALLOC(a, 768 * KiB);
    FREE(a, x);
    CHECK(sl_bfc_compact(a, &r, &e) == SL_OK && r.regions_released == 0 && u.regions_live == 1);
    sl_bfc_destroy(a);
    CHECK(u.regions_live == 0);
}

static void test_compact_on_oom(void)
{
    for (int on = 0; on < 2; on++) {
        test_backend t = {.real = 1};
        sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .max_bytes = MiB,
                                             .compact_on_oom = on});
        sl_block b[4];
        for (int i = 0; i < 4; i++) {
            b[i] = ALLOC(a, 256 * KiB);
            fill(a, b[i]);
        }
        FREE(a, b[0]);
        FREE(a, b[2]);
        CHECK(stats(a).free_bytes == 512 * KiB && stats(a).largest_free_bytes == 256 * KiB);
        sl_block x = SL_BLOCK_NONE;
        sl_error e;
        sl_status s = sl_bfc_alloc(a, 512 * KiB, 0, &x, &e);
        VALID(a);
        if (!on) {
            CHECK(s == SL_ERR_NOMEM);
            CHECK_CONTAINS(e.msg, "fragmented");
            CHECK(stats(a).compactions == 0);
        } else {
            CHECK_MSG(s == SL_OK, "%s", e.msg);
            CHECK(stats(a).compactions == 1 && sl_bfc_epoch(a) == 1);
            CHECK(intact(a, b[1]) && intact(a, b[3]));
            CHECK(addr(a, b[1]) % SL_BFC_ALIGN == 0);
            FREE(a, x);
            /* Too big even in one piece: no compaction is tried. */
            CHECK(sl_bfc_alloc(a, 768 * KiB, 0, &x, &e) == SL_ERR_NOMEM);
            CHECK(stats(a).compactions == 1);
        }
        FREE(a, b[1]);
        FREE(a, b[3]);
        sl_bfc_destroy(a);
        CHECK(t.regions_live == 0);
    }
}

static void test_compact_threshold(void)
{
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .compact_threshold = 0.5});
    sl_block b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = ALLOC(a, 64 * KiB);
        fill(a, b[i]);
    }
    /* Free: 512K tail. Free b0 → fragmentation 1 - 512/576 = 0.11 (no compaction). */
    FREE(a, b[0]);
    CHECK(stats(a).compactions == 0);
    FREE(a, b[2]);
    FREE(a, b[4]);
    CHECK(stats(a).compactions == 0); /* 1 - 512/704 = 0.27 */
    FREE(a, b[6]);                     /* 1 - 512/768 = 0.33 */
    CHECK(stats(a).compactions == 0);
    sl_bfc_destroy(a);

    /* Full region of 16 blocks; freeing 1 and 3 gives fragmentation 1 - 64/128 = 0.5 (not
     * above the threshold), freeing 5 too gives 2/3 > 0.5: compaction runs inside that free. */
    t = (test_backend){.real = 1};
    a = mk(&t, (sl_bfc_options){.region_bytes = MiB, .compact_threshold = 0.5});
    sl_block c[16];
    for (int i = 0; i < 16; i++) {
        c[i] = ALLOC(a, 64 * KiB);
        fill(a, c[i]);
    }
    CHECK(stats(a).free_bytes == 0);
    FREE(a, c[1]);
    FREE(a, c[3]);
    CHECK(stats(a).compactions == 0 && stats(a).fragmentation == 0.5);
    FREE(a, c[5]);
    CHECK(stats(a).compactions == 1);
    CHECK(stats(a).fragmentation == 0.0 && stats(a).free_chunks == 1);
    CHECK(sl_bfc_epoch(a) == 1);
    for (int i = 0; i < 16; i++)
        if (i != 1 && i != 3 && i != 5) CHECK(intact(a, c[i]));
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

static void test_move_fault(void)
{
    /* [free][b1][free][b3][free][b5][free][b7][tail], 32K each: the blocks that end above the
     * packed line (128K) are b5 and b7; phase 1 moves b7 into the lowest 32K hole (offset 0),
     * then b5 into the next (64K) — two copies, and the region is packed. A failed move stops
     * compaction: moves before it stay, the failing one and later stay in place, nothing torn,
     * the arena valid; a second compaction finishes the job. */
    for (uint64_t at = 1; at <= 3; at++) {
        test_backend t = {.real = 1};
        sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
        sl_block b[8];
        for (int i = 0; i < 8; i++) {
            b[i] = ALLOC(a, 32 * KiB);
            fill(a, b[i]);
        }
        uint64_t base = addr(a, b[0]);
        for (int i = 0; i < 8; i += 2) FREE(a, b[i]);
        t.fail_move_at = at;
        sl_bfc_compact_result r;
        sl_error e;
        sl_status s = sl_bfc_compact(a, &r, &e);
        VALID(a);
        if (at == 3) {
            CHECK_MSG(s == SL_OK, "%s", e.msg);
        } else {
            CHECK(s == SL_ERR_DEVICE);
            CHECK_CONTAINS(e.msg, "injected move fault");
            CHECK_CONTAINS(e.msg, "stay in place");
        }
        CHECK(r.blocks_moved == at - 1 && r.bytes_moved == (at - 1) * 32 * KiB);
        CHECK(sl_bfc_epoch(a) == (at > 1 ? 1u : 0u));
        CHECK(addr(a, b[7]) == (at > 1 ? base : base + 224 * KiB));
        CHECK(addr(a, b[5]) == (at > 2 ? base + 64 * KiB : base + 160 * KiB));
        CHECK(addr(a, b[1]) == base + 32 * KiB && addr(a, b[3]) == base + 96 * KiB);
        for (int i = 1; i < 8; i += 2) CHECK(intact(a, b[i]));
        CHECK(sl_bfc_compact(a, &r, &e) == SL_OK);
        CHECK(r.blocks_moved == 3 - at);
        CHECK(addr(a, b[7]) == base && addr(a, b[5]) == base + 64 * KiB);
        for (int i = 1; i < 8; i += 2) CHECK(intact(a, b[i]));
        CHECK(stats(a).free_chunks == 1);
        VALID(a);
        sl_bfc_destroy(a);
        CHECK(t.regions_live == 0);
    }
}

/* The point of the two-phase compaction: in an arena of expert-sized tensors (Q4_K gate/up
 * slices, Q6_K down slices, small scale tensors) with a third freed at random, every moved block
 * costs at most one backend move (fewer where a hole takes a whole run), and the bytes moved are
 * about the free space consolidated, not everything above the first hole. */
static void test_compact_copies(void)
{
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = 128 * MiB});
    enum { N = 150 };
    sl_block b[N];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t k = (x >> 33) % 10;
        uint64_t n = k < 4 ? 884736 : k < 6 ? 1290240 : 4 * KiB + (x >> 20) % (60 * KiB);
        b[i] = ALLOC(a, n);
        fill(a, b[i]);
    }
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        if ((x >> 33) % 3 == 0) {
            FREE(a, b[i]);
            b[i] = SL_BLOCK_NONE;
        }
    }
    sl_bfc_stats st0 = stats(a);
    uint64_t moves0 = t.moves, bytes0 = t.move_bytes;
    sl_bfc_compact_result r;
    sl_error e;
    CHECK_MSG(sl_bfc_compact(a, &r, &e) == SL_OK, "%s", e.msg);
    VALID(a);
    CHECK_MSG(sl__bfc_check_compacted(a, false, &e) == SL_OK, "%s", e.msg);
    for (int i = 0; i < N; i++)
        if (b[i] != SL_BLOCK_NONE) CHECK_MSG(intact(a, b[i]), "block %d", i);
    sl_bfc_stats st1 = stats(a);
    uint64_t moves = t.moves - moves0;
    printf("compact_copies: %" PRIu64 " blocks, %" PRIu64 " bytes in %" PRIu64 " moves; free %"
           PRIu64 " bytes in %" PRIu64 " chunks (largest %" PRIu64 ") -> %" PRIu64 " chunks "
           "(largest %" PRIu64 "); in use %" PRIu64 "\n", r.blocks_moved, r.bytes_moved, moves,
           st0.free_bytes, st0.free_chunks, st0.largest_free_bytes, st1.free_chunks,
           st1.largest_free_bytes, st0.in_use_bytes);
    CHECK(r.blocks_moved > 10);
    CHECK_MSG(moves <= r.blocks_moved, "%" PRIu64 " moves for %" PRIu64 " blocks", moves, r.blocks_moved);
    CHECK(t.move_bytes - bytes0 == r.bytes_moved);
    CHECK(r.bytes_moved <= st0.free_bytes + 1290240); /* the zone: free space + one straddler */
    /* One region: what the policy leaves besides the tail is remainders of filled holes and
     * gaps below long runs — under 1 % of the free space here (the tail was 57 % of it before). */
    CHECK_MSG(st1.fragmentation < 0.01, "fragmentation %g", st1.fragmentation);
    CHECK(st1.free_chunks < st0.free_chunks);
    for (int i = 0; i < N; i++) FREE(a, b[i]);
    sl_bfc_destroy(a);
    CHECK(t.regions_live == 0);
}

/* ---- dump ---------------------------------------------------------------------------------- */

/* A minimal JSON syntax checker: returns the position after one value, or NULL. */
static const char *json_value(const char *p);
static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}
static const char *json_string(const char *p)
{
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') p += *p == '\\' ? 2 : 1;
    return *p == '"' ? p + 1 : NULL;
}
static const char *json_value(const char *p)
{
    p = json_ws(p);
    if (*p == '"') return json_string(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = json_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = json_string(json_ws(p));
                if (!p) return NULL;
                p = json_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = json_value(p);
            if (!p) return NULL;
            p = json_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    const char *s = p;
    if (*p == '-') p++;
    while (isdigit((unsigned char)*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
    return p > s ? p : NULL;
}

static char *dump_to_string(sl_bfc *a, bool json)
{
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return NULL;
    sl_error e;
    CHECK_MSG(sl_bfc_dump(a, f, json, &e) == SL_OK, "%s", e.msg);
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static void test_dump(void)
{
    test_backend t = {0};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = MiB});
    sl_block x = ALLOC(a, 1000), y = ALLOC(a, 5000), z = ALLOC(a, 2 * MiB);
    sl_error e;
    CHECK(sl_bfc_set_pinned(a, y, true, &e) == SL_OK);
    FREE(a, x);
    char *txt = dump_to_string(a, false);
    if (txt) {
        CHECK_CONTAINS(txt, "bfc fake: 2 regions");
        CHECK_CONTAINS(txt, "region 1 base");
        CHECK_CONTAINS(txt, "pinned");
        CHECK_CONTAINS(txt, "requested 5000");
    }
    free(txt);
    char *js = dump_to_string(a, true);
    if (js) {
        const char *end = json_value(js);
        CHECK_MSG(end && *json_ws(end) == 0, "dump is not one JSON value: %s", js);
        CHECK_CONTAINS(js, "\"regions\":[{\"base\":");
        CHECK_CONTAINS(js, "\"chunks\":[{\"offset\":0,\"size\":1024,\"state\":\"free\"}");
        CHECK_CONTAINS(js, "\"state\":\"pinned\"");
        CHECK_CONTAINS(js, "\"requested\":5000");
        CHECK_CONTAINS(js, "\"fragmentation\":");
        CHECK_CONTAINS(js, "\"live_blocks\":2");
    }
    free(js);
    FREE(a, y), FREE(a, z);
    sl_bfc_destroy(a);
}

/* ---- threads ------------------------------------------------------------------------------- */

typedef struct thread_arg {
    sl_bfc *a;
    unsigned seed;
    int bad;
} thread_arg;

static void *thread_main(void *p)
{
    thread_arg *ta = p;
    sl_block mine[64];
    int n = 0;
    for (int i = 0; i < 20000; i++) {
        ta->seed = ta->seed * 1103515245u + 12345u;
        unsigned r = ta->seed >> 8;
        sl_error e;
        if (n < 64 && (n == 0 || r % 3)) {
            sl_block b;
            if (sl_bfc_alloc(ta->a, 1 + r % 30000, 0, &b, &e)) {
                ta->bad++;
                continue;
            }
            memset(sl_bfc_ptr(ta->a, b), (int)(r & 0xFF), 1 + r % 30000);
            mine[n++] = b;
        } else {
            int k = (int)(r % (unsigned)n);
            if (sl_bfc_free(ta->a, mine[k], &e)) ta->bad++;
            mine[k] = mine[--n];
        }
    }
    for (int i = 0; i < n; i++) {
        sl_error e;
        if (sl_bfc_free(ta->a, mine[i], &e)) ta->bad++;
    }
    return NULL;
}

static void test_threads(void)
{
    test_backend t = {.real = 1};
    sl_bfc *a = mk(&t, (sl_bfc_options){.region_bytes = 4 * MiB});
    pthread_t th[4];
    thread_arg ta[4];
    for (int i = 0; i < 4; i++) {
        ta[i] = (thread_arg){.a = a, .seed = 77u + (unsigned)i};
        CHECK(pthread_create(&th[i], NULL, thread_main, &ta[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(ta[i].bad == 0);
    }
    VALID(a);
    sl_bfc_stats st = stats(a);
    CHECK(st.live_blocks == 0 && st.in_use_bytes == 0 && st.allocs == st.frees);
    CHECK(st.free_chunks == st.regions);
    sl_bfc_destroy(a);
}

static void test_create_errors(void)
{
    test_backend t = {0};
    sl_bfc_backend be = tb_backend(&t);
    sl_bfc *a = NULL;
    sl_error e;
    CHECK(sl_bfc_create(&be, &(sl_bfc_options){.compact_threshold = 1.5}, &a, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "compact_threshold 1.5");
    be.move = NULL;
    CHECK(sl_bfc_create(&be, NULL, &a, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "fake");
    CHECK(a == NULL);
    be = tb_backend(&t);
    CHECK(sl_bfc_create(&be, NULL, &a, &e) == SL_OK); /* defaults: 256 MiB regions */
    sl_block b = ALLOC(a, 10);
    CHECK(stats(a).total_bytes == 256 * MiB);
    FREE(a, b);
    sl_bfc_destroy(a);
}

int main(void)
{
    test_split();
    test_coalesce();
    test_best_fit();
    test_alignment();
    test_exhaustion();
    test_growth();
    test_compact_pinned();
    test_compact_many();
    test_handles();
    test_release_empty();
    test_compact_copies();
    test_compact_on_oom();
    test_compact_threshold();
    test_move_fault();
    test_dump();
    test_threads();
    test_create_errors();
    return sl_test_finish("bfc_test");
}
