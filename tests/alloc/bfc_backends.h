/* Test backends for the BFC arena (after TSL's FakeSubAllocator):
 * - fake: hands out non-dereferenceable addresses from 1 << 40 upward, each region at the next
 *   1 GiB boundary, so tests check exact offsets; moves are recorded, not performed. A fuse
 *   makes region allocations fail once `region_fuse` of them have succeeded (0 = never), and
 *   `fail_move_at` fails the Nth move (always-failing backend: region_fuse = -1).
 * - host: real malloc'd (256-aligned) regions and memmove, for contents-survive checks; the
 *   same fuse and move fault.
 * Counters let tests check that every region handed out came back (no leak). */
#ifndef SL_TESTS_BFC_BACKENDS_H
#define SL_TESTS_BFC_BACKENDS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/bfc.h"

typedef struct test_backend {
    int real;                       /* host memory instead of fake addresses */
    uint64_t next_fake;             /* next fake region base */
    int64_t region_fuse;            /* successful region allocs allowed; 0 = unlimited, < 0 none */
    uint64_t fail_move_at;          /* 1-based move that fails; 0 = never */
    uint64_t region_allocs, regions_live, region_bytes_live, moves, move_bytes;
} test_backend;

static sl_status tb_region_alloc(void *ctx, uint64_t bytes, void **base, sl_error *err)
{
    test_backend *t = ctx;
    if (t->region_fuse < 0 || (t->region_fuse > 0 && t->region_allocs >= (uint64_t)t->region_fuse))
        return sl_error_set(err, SL_ERR_DEVICE, "test backend: region fuse blown at alloc #%llu "
                            "(%llu bytes)", (unsigned long long)t->region_allocs + 1,
                            (unsigned long long)bytes);
    if (t->real) {
        *base = aligned_alloc(SL_BFC_ALIGN, (size_t)bytes);
        if (!*base) return sl_error_set(err, SL_ERR_NOMEM, "test backend: malloc failed");
    } else {
        if (!t->next_fake) t->next_fake = 1ull << 40;
        *base = (void *)(uintptr_t)t->next_fake;
        t->next_fake += (bytes + (1ull << 30) - 1) / (1ull << 30) * (1ull << 30);
    }
    t->region_allocs++;
    t->regions_live++;
    t->region_bytes_live += bytes;
    return SL_OK;
}

static void tb_region_free(void *ctx, void *base)
{
    test_backend *t = ctx;
    if (t->real) free(base);
    t->regions_live--;
    /* bytes are not known here; tests compare regions_live */
}

static sl_status tb_move(void *ctx, void *dst, const void *src, uint64_t bytes, sl_error *err)
{
    test_backend *t = ctx;
    if (t->fail_move_at && t->moves + 1 == t->fail_move_at) {
        t->fail_move_at = 0; /* one-shot */
        return sl_error_set(err, SL_ERR_DEVICE, "test backend: injected move fault (%llu bytes)",
                            (unsigned long long)bytes);
    }
    if (t->real) memmove(dst, src, (size_t)bytes);
    t->moves++;
    t->move_bytes += bytes;
    return SL_OK;
}

static sl_status tb_sync(void *ctx, sl_error *err)
{
    (void)ctx;
    (void)err;
    return SL_OK;
}

static sl_bfc_backend tb_backend(test_backend *t)
{
    return (sl_bfc_backend){.ctx = t,
                            .region_alloc = tb_region_alloc,
                            .region_free = tb_region_free,
                            .move = tb_move,
                            .sync = tb_sync,
                            .kind = t->real ? "host" : "fake"};
}

/* Deterministic pattern for a block: 8-byte words derived from (handle, size, word index). */
static inline uint64_t tb_pattern_seed(sl_block b, uint64_t size)
{
    uint64_t x = ((uint64_t)b << 32 ^ size) * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static inline void tb_fill(void *p, uint64_t size, uint64_t seed)
{
    uint64_t *w = p;
    for (uint64_t i = 0; i < size / 8; i++) w[i] = seed + i * 0xD1B54A32D192ED03ull;
}

/* Index of the first wrong word, or UINT64_MAX when the whole block is intact. */
static inline uint64_t tb_check(const void *p, uint64_t size, uint64_t seed)
{
    const uint64_t *w = p;
    for (uint64_t i = 0; i < size / 8; i++)
        if (w[i] != seed + i * 0xD1B54A32D192ED03ull) return i;
    return UINT64_MAX;
}

#endif
