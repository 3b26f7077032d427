/* base/device/gather_plan.c: see gather_plan.h. */
#include "base/device/gather_plan.h"

#include <stdbool.h>

static bool overlap(const void *a, uint64_t an, const void *b, uint64_t bn)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bn && y < x + an;
}

static uint64_t padded(uint64_t bytes)
{
    return (bytes + 15) / 16 * 16;
}

size_t sl__gather_phase(const sl_copy_item *items, size_t n, uint64_t bounce_bytes,
                        sl__gather *g)
{
    g->n = 0;
    g->off[0] = 0;
    for (size_t i = 0; i < n && g->n < SL__GATHER_MAX_ITEMS; i++) {
        const sl_copy_item *it = &items[i];
        if (it->bytes > SL__GATHER_ITEM_MAX || g->off[g->n] + padded(it->bytes) > bounce_bytes)
            break;
        for (int j = 0; j < g->n; j++)
            if (overlap(it->src, it->bytes, g->dst[j], g->bytes[j]) ||
                overlap(it->dst, it->bytes, g->dst[j], g->bytes[j]))
                return (size_t)g->n;
        const int k = g->n++;
        g->src[k] = it->src;
        g->dst[k] = it->dst;
        g->bytes[k] = (uint32_t)it->bytes;
        g->off[k + 1] = g->off[k] + padded(it->bytes);
    }
    return (size_t)g->n;
}
