/* Private to alloc/: the host pool's invariant checker and slab view, for tests. */
#ifndef SL_HOSTPOOL_IMPL_H
#define SL_HOSTPOOL_IMPL_H

#include "alloc/hostpool.h"

/* Checks the invariants listed in hostpool.c, including that the first, middle and last page
 * of every slab lie on the placement's node when the pool binds memory (or is TRIVIAL);
 * SL_OK or a message naming the slab and page at fault. When the kernel refuses the page
 * query (no NUMA support), page placement is skipped and *pages_checked stays 0. */
sl_status sl__hostpool_validate(const sl_hostpool *p, uint64_t *pages_checked, sl_error *err);

/* Slab i (0 <= i < stats.slabs): its base and mapped bytes; false when out of range. */
bool sl__hostpool_slab(const sl_hostpool *p, size_t i, void **base, uint64_t *bytes);

#endif
