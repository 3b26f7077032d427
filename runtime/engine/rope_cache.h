/* runtime/rope_cache: the rope angle tables (kernels/cpu/ops.h sl_cpu_rope_table) of the
 * positions a forward pass evaluates, built once per distinct rope configuration and reused by
 * q and k of every layer that has it (the host executor, runtime/engine/dx_host.c): the angles depend
 * on the positions and the configuration only, and their pow/cos/sin cost more per token than
 * the rotation (gemma3's local and global layers are two configurations; deepseek2's MLA ropes
 * keys and queries of different head sizes with one).
 *
 * Contract: sl__rope_cache_get returns the table of exactly p (every field, the values its
 * freq_factors point at, not the pointer: a live reload may rewrite them in place) and the
 * positions pos[0 .. n_tok), so the rope is sl_cpu_rope's bit for bit; a miss builds it into
 * the least recently used of SL__ROPE_CACHE_SLOTS slots. Not thread-safe: one per executor,
 * which runs one pass at a time. The table stays valid until the next get. */
#ifndef SL_RUNTIME_ROPE_CACHE_H
#define SL_RUNTIME_ROPE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"
#include "base/status.h"

enum { SL__ROPE_CACHE_SLOTS = 4 };

/* Invariants (sl__rope_cache_validate): used <= the cache's clock; a slot with n_tok == 0 is
 * empty; else pos and cs hold pos_cap >= n_tok and cs_cap >= n_tok * 2 * p.n_rot entries, p
 * passes sl_cpu_rope_table's checks and p.freq_factors is NULL or ff (n_rot / 2 values). */
typedef struct sl__rope_slot {
    sl_rope_params p;
    float ff[SL_CPU_ROPE_MAX_ROT / 2];
    int32_t *pos;
    float *cs;
    int64_t n_tok, pos_cap, cs_cap;
    uint64_t used; /* the clock at its last get; 0: never */
} sl__rope_slot;

typedef struct sl__rope_cache {
    sl__rope_slot slot[SL__ROPE_CACHE_SLOTS];
    uint64_t clock;
} sl__rope_cache;

/* *cs = the table [n_tok][2 * p->n_rot] of p at pos (n_tok >= 1). SL_ERR_INVALID /
 * SL_ERR_UNSUPPORTED for p as sl_cpu_rope_table says; SL_ERR_NOMEM. A zeroed cache is empty. */
sl_status sl__rope_cache_get(sl__rope_cache *c, const sl_rope_params *p, const int32_t *pos,
                             int64_t n_tok, const float **cs, sl_error *err);
/* Frees the slots' arrays; c is empty afterwards. */
void sl__rope_cache_free(sl__rope_cache *c);
/* SL_OK when c keeps the invariants above, else SL_ERR_INVALID naming the slot and field. */
sl_status sl__rope_cache_validate(const sl__rope_cache *c, sl_error *err);

#endif
