/* tests/runtime/testidx: neuron indexes (.gpuidx, scheduler/policy/gpuidx.h) for the hot/cold tests,
 * written with the project's writer. An index has n_layer layers of X experts (0: a dense
 * index) of n_ff neurons, hot in whole granules of g neurons chosen by a pick function from a
 * seeded coin per granule; the same arguments write the same file. Thread-compatible. */
#ifndef SL_TESTS_RUNTIME_TESTIDX_H
#define SL_TESTS_RUNTIME_TESTIDX_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* pick(mode, layer, n_layer, expert, coin): granule hot. */
typedef bool (*tidx_pick_fn)(int mode, int il, int n_layer, int x, bool coin);

/* MoE picks: each granule by the coin (RANDOM), none or all (COLD, HOT), or per expert all
 * hot, all cold or by the coin by x % 3 (EDGES: parts of width 0 on either side). */
enum { TIDX_MOE_RANDOM, TIDX_MOE_COLD, TIDX_MOE_HOT, TIDX_MOE_EDGES };
bool tidx_pick_moe(int mode, int il, int n_layer, int x, bool coin);

/* Writes the index to path; SL_ERR_INVALID for counts < 1 or n_ff not a multiple of g, else
 * the writer's errors. */
sl_status tidx_write(const char *path, int n_layer, int X, int n_ff, int g, tidx_pick_fn pick,
                     int mode, uint64_t seed, sl_error *err);

#endif
