/* tests/runtime/testidx.c: see testidx.h. */
#include "tests/runtime/testidx.h"

#include <stdlib.h>

#include "base/prng.h"
#include "scheduler/policy/gpuidx.h"

bool tidx_pick_moe(int mode, int il, int n_layer, int x, bool coin)
{
    (void)il;
    (void)n_layer;
    return mode == TIDX_MOE_HOT || (mode == TIDX_MOE_RANDOM && coin) ||
           (mode == TIDX_MOE_EDGES && (x % 3 == 0 || (x % 3 == 2 && coin)));
}

sl_status tidx_write(const char *path, int n_layer, int X, int n_ff, int g, tidx_pick_fn pick,
                     int mode, uint64_t seed, sl_error *err)
{
    if (n_layer < 1 || X < 0 || n_ff < 1 || g < 1 || n_ff % g)
        return sl_error_set(err, SL_ERR_INVALID, "test index: n_layer %d, X %d, n_ff %d, "
                            "granule %d", n_layer, X, n_ff, g);
    const int N = (X ? X : 1) * n_ff;
    uint32_t *nn = malloc((size_t)n_layer * sizeof *nn), *hot = malloc((size_t)N * 4);
    sl_gpuidx idx = {0};
    sl_status st = nn && hot ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    for (int il = 0; !st && il < n_layer; il++) nn[il] = (uint32_t)N;
    if (!st) st = sl_gpuidx_init(&idx, (uint32_t)n_layer, nn, err);
    if (!st) idx.n_expert = (uint32_t)X;
    uint64_t r[4];
    sl_prng_seed(r, seed);
    for (int il = 0; !st && il < n_layer; il++) {
        uint32_t n = 0;
        for (int k = 0; k < N / g; k++) {
            const bool h = pick(mode, il, n_layer, k * g / n_ff, (sl_prng_next(r) >> 63) != 0);
            for (int j = 0; j < g && h; j++) hot[n++] = (uint32_t)(k * g + j);
        }
        st = sl_gpuidx_set_layer(&idx, (uint32_t)il, hot, n, err);
    }
    if (!st) st = sl_gpuidx_write(path, &idx, NULL, err);
    sl_gpuidx_free(&idx);
    free(nn);
    free(hot);
    return st;
}
