/* Randomized property test of alloc/bfc on real host memory (malloc'd regions, memmove).
 *
 * ≥ 1,000,000 operations by default (fixed seed): allocations from an expert-sized mix (norms
 * and biases of a few bytes up to Q4_K expert slices of 768×2048 = 884,736 bytes and a few
 * larger tensors), frees, double frees of stale handles, pin/unpin, and occasional explicit
 * compactions; compaction on OOM and region release are on, so both happen along the way.
 * After every operation: sl__bfc_validate (tiling, no free neighbours, bins, stats), the
 * test's own model of live blocks (count, requested bytes), pointer stability while the epoch
 * is unchanged, pinned blocks never moving, and a sampled contents check of one live block.
 * After every compaction (explicit or on OOM): every live block's full contents.
 *
 * Usage: bfc_property_test [ops]  (or SL_BFC_PROPERTY_OPS); under ASan the default is 200,000
 * operations so the sanitizer run stays short. Live blocks stay ≤ MAX_LIVE so validate
 * (O(chunks)) after each step stays cheap. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/bfc.h"
#include "alloc/bfc_impl.h"
#include "tests/alloc/bfc_backends.h"
#include "tests/testing.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SL_ASAN 1
#endif
#ifdef SL_ASAN
enum { DEFAULT_OPS = 200000 };
#else
enum { DEFAULT_OPS = 1000000 };
#endif

enum { MAX_LIVE = 320 };

typedef struct live_block {
    sl_block h;
    uint64_t size, requested, seed;
    uintptr_t ptr;       /* address seen at cache_epoch */
    uint64_t cache_epoch;
    int pinned;
} live_block;

typedef struct rng {
    uint64_t s;
} rng;

/* fixed seed, identical sequence everywhere */
static uint64_t next_u64(rng *r) { return sl_test_splitmix64(&r->s); }
static uint64_t below(rng *r, uint64_t n) { return next_u64(r) % n; }

/* Expert-sized mix, scaled so a run stays within the time budget. */
static uint64_t draw_size(rng *r)
{
    uint64_t p = below(r, 1000);
    if (p < 450) return 1 + below(r, 2048);                /* norms, biases, router rows */
    if (p < 750) return 2048 + below(r, 14 * 1024);         /* small matrices */
    if (p < 900) return 16384 + below(r, 48 * 1024);        /* attention slices */
    if (p < 970) return 65536 + below(r, 192 * 1024);       /* narrow experts */
    if (p < 995) return 884736;                             /* Q4_K 768×2048 expert slice */
    return (1u << 20) + below(r, 2u << 20);                 /* big shared tensors */
}

typedef struct world {
    sl_bfc *a;
    test_backend t;
    live_block live[MAX_LIVE];
    int n;
    uint64_t requested_total;
    sl_block stale[16];
    int stale_n;
    uint64_t ops, allocs, frees, failed, compactions_seen, verified_all, stale_frees, pins;
} world;

static int verify_block(world *w, live_block *b, int full, rng *r, uint64_t op)
{
    const uint64_t *p = sl_bfc_ptr(w->a, b->h);
    if (!p) {
        CHECK_MSG(0, "op %" PRIu64 ": live handle 0x%08" PRIx32 " gives NULL", op, b->h);
        return 0;
    }
    uint64_t words = b->size / 8;
    if (full) {
        uint64_t bad = tb_check(p, b->size, b->seed);
        CHECK_MSG(bad == UINT64_MAX, "op %" PRIu64 ": block 0x%08" PRIx32 " (%" PRIu64
                  " bytes) differs at word %" PRIu64, op, b->h, b->size, bad);
        return bad == UINT64_MAX;
    }
    int ok = 1;
    for (int k = 0; k < 18 && ok; k++) {
        uint64_t i = k == 0 ? 0 : k == 1 ? words - 1 : below(r, words);
        ok = p[i] == b->seed + i * 0xD1B54A32D192ED03ull;
        if (!ok) CHECK_MSG(0, "op %" PRIu64 ": block 0x%08" PRIx32 " word %" PRIu64 " wrong", op, b->h, i);
    }
    return ok;
}

/* After anything that may have compacted: epoch → recheck every block fully. */
static void after_op(world *w, rng *r, uint64_t op)
{
    sl_error e;
    if (sl__bfc_validate(w->a, &e) != SL_OK) {
        CHECK_MSG(0, "op %" PRIu64 ": %s", op, e.msg);
        sl_bfc_dump(w->a, stderr, false, &e);
        exit(1); /* test program: later checks would only repeat the break */
    }
    sl_bfc_stats st;
    sl_bfc_stats_get(w->a, &st);
    CHECK_MSG(st.live_blocks == (uint64_t)w->n && st.requested_bytes == w->requested_total,
              "op %" PRIu64 ": stats live %" PRIu64 " requested %" PRIu64 ", model %d %" PRIu64,
              op, st.live_blocks, st.requested_bytes, w->n, w->requested_total);
    uint64_t epoch = sl_bfc_epoch(w->a);
    if (st.compactions != w->compactions_seen) {
        w->compactions_seen = st.compactions;
        w->verified_all++;
        for (int i = 0; i < w->n; i++) {
            live_block *b = &w->live[i];
            uintptr_t p = (uintptr_t)sl_bfc_ptr(w->a, b->h);
            if (b->pinned) CHECK_MSG(p == b->ptr, "op %" PRIu64 ": pinned block moved", op);
            if (b->cache_epoch == epoch) CHECK_MSG(p == b->ptr, "op %" PRIu64 ": moved without an epoch change", op);
            verify_block(w, b, 1, r, op);
            b->ptr = p;
            b->cache_epoch = epoch;
        }
    } else if (w->n) {
        live_block *b = &w->live[below(r, (uint64_t)w->n)];
        uintptr_t p = (uintptr_t)sl_bfc_ptr(w->a, b->h);
        CHECK_MSG(p == b->ptr && b->cache_epoch == epoch,
                  "op %" PRIu64 ": address changed without a compaction", op);
        verify_block(w, b, 0, r, op);
    }
}

int main(int argc, char **argv)
{
    uint64_t ops = DEFAULT_OPS;
    const char *env = getenv("SL_BFC_PROPERTY_OPS");
    if (argc > 1) env = argv[1];
    if (env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || v == 0) {
            fprintf(stderr, "bfc_property_test: ops '%s' is not a positive integer\n", env);
            return 2;
        }
        ops = v;
    }
    static world w; /* ~40 KB of records; static keeps main's frame small */
    w.t = (test_backend){.real = 1};
    sl_bfc_backend be = tb_backend(&w.t);
    sl_bfc_options o = {.region_bytes = 4u << 20,
                        .max_bytes = 24u << 20,
                        .compact_on_oom = true,
                        .release_empty_regions = true};
    sl_error e;
    if (sl_bfc_create(&be, &o, &w.a, &e)) {
        fprintf(stderr, "create: %s\n", e.msg);
        return 1;
    }
    rng r = {.s = 20261122};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t target = 300;
    for (uint64_t op = 0; op < ops; op++) {
        if (op % 20000 == 0) target = 20 + below(&r, MAX_LIVE - 20); /* phases of fill/drain */
        uint64_t p = below(&r, 10000);
        if (p < 3) { /* explicit compaction */
            sl_bfc_compact_result cr;
            uint64_t epoch = sl_bfc_epoch(w.a);
            sl_status s = sl_bfc_compact(w.a, &cr, &e);
            CHECK_MSG(s == SL_OK, "op %" PRIu64 ": compact: %s", op, e.msg);
            CHECK(sl_bfc_epoch(w.a) == epoch + (cr.blocks_moved ? 1 : 0));
        } else if (p < 60 && w.n) { /* pin / unpin */
            live_block *b = &w.live[below(&r, (uint64_t)w.n)];
            b->pinned = !b->pinned;
            CHECK(sl_bfc_set_pinned(w.a, b->h, b->pinned, &e) == SL_OK);
            w.pins++;
        } else if (p < 70 && w.stale_n) { /* a stale handle must be refused, not crash */
            sl_block h = w.stale[below(&r, (uint64_t)w.stale_n)];
            CHECK(sl_bfc_free(w.a, h, &e) == SL_ERR_INVALID);
            CHECK(sl_bfc_ptr(w.a, h) == NULL);
            w.stale_frees++;
        } else if (w.n < MAX_LIVE && (w.n == 0 || below(&r, 2 * target) >= (uint64_t)w.n)) {
            uint64_t req = draw_size(&r);
            sl_block h;
            sl_status s = sl_bfc_alloc(w.a, req, 0, &h, &e);
            if (s == SL_ERR_NOMEM) {
                w.failed++;
            } else {
                CHECK_MSG(s == SL_OK, "op %" PRIu64 ": alloc %" PRIu64 ": %s", op, req, e.msg);
                if (s == SL_OK) {
                    live_block *b = &w.live[w.n++];
                    b->h = h;
                    b->requested = req;
                    b->size = sl_bfc_size(w.a, h);
                    b->seed = tb_pattern_seed(h, b->size);
                    b->ptr = (uintptr_t)sl_bfc_ptr(w.a, h);
                    b->cache_epoch = sl_bfc_epoch(w.a);
                    b->pinned = 0;
                    CHECK(b->size >= req && b->size - req < req / 16 + 544); /* split rule bound */
                    CHECK(b->ptr % SL_BFC_ALIGN == 0);
                    tb_fill((void *)b->ptr, b->size, b->seed);
                    w.requested_total += req;
                    w.allocs++;
                }
            }
        } else if (w.n) {
            int k = (int)below(&r, (uint64_t)w.n);
            live_block *b = &w.live[k];
            verify_block(&w, b, 0, &r, op);
            sl_status s = sl_bfc_free(w.a, b->h, &e);
            CHECK_MSG(s == SL_OK, "op %" PRIu64 ": free: %s", op, e.msg);
            w.stale[w.stale_n < 16 ? w.stale_n++ : (int)below(&r, 16)] = b->h;
            w.requested_total -= b->requested;
            w.live[k] = w.live[--w.n];
            w.frees++;
        }
        after_op(&w, &r, op);
        if (sl_test_g.failures > 20) break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sl_bfc_stats st;
    sl_bfc_stats_get(w.a, &st);
    printf("bfc_property_test: %" PRIu64 " ops in %.2f s: %" PRIu64 " allocs (%" PRIu64
           " refused), %" PRIu64 " frees, %" PRIu64 " stale frees refused, %" PRIu64
           " pin toggles, %" PRIu64 " compactions (full verifies %" PRIu64 "), %" PRIu64
           " bytes moved, peak %" PRIu64 " bytes, epoch %" PRIu64 ", %" PRIu64 " regions now\n",
           ops, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           w.allocs, w.failed, w.frees, w.stale_frees, w.pins, st.compactions, w.verified_all,
           st.bytes_moved, st.peak_in_use_bytes, sl_bfc_epoch(w.a), st.regions);
    CHECK(w.allocs > ops / 4 && st.compactions > ops / 10000 && st.bytes_moved > 0);
    for (int i = 0; i < w.n; i++) CHECK(sl_bfc_free(w.a, w.live[i].h, &e) == SL_OK);
    CHECK(sl__bfc_validate(w.a, &e) == SL_OK);
    sl_bfc_destroy(w.a);
    CHECK(w.t.regions_live == 0);
    return sl_test_finish("bfc_property_test");
}
