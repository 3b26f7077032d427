/* base/device/gather_plan.h: how the cuda backend cuts a D2D copy batch into gather phases
 * (cuda_gather.h: all of a phase's reads happen before any of its writes). Private to
 * base/device; its tests run the rule on the host (no GPU needed).
 *
 * A phase ends before an item that would read or rewrite bytes that an earlier item of the
 * phase writes - the cases where reading first would differ from copying in order (writing
 * over bytes an earlier item read is fine: that item has its copy) - at SL__GATHER_MAX_ITEMS,
 * or when the bounce is full. */
#ifndef SL_BASE_DEVICE_GATHER_PLAN_H
#define SL_BASE_DEVICE_GATHER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/device/cuda_gather.h"
#include "base/device/device.h"

/* Items up to this size take the kernels; a larger one is one cudaMemcpyAsync, whose ~5 us a
 * call is small beside its bytes' time (an expert's 0.9-1.3 MB slices, the usual compaction
 * move, take the kernels). */
#define SL__GATHER_ITEM_MAX ((uint64_t)4 << 20)
/* The bounce's largest size: well inside the 50 MB L2 of an H100 / H200, so the second kernel
 * reads it from cache and HBM moves each byte once each way, as a copy does. */
#define SL__GATHER_BOUNCE_MAX ((uint64_t)16 << 20)

/* The next phase of items[0 .. n) (n >= 1, every bytes >= 1, no item's source and destination
 * overlapping) through a bounce of bounce_bytes: fills g with the longest prefix one phase may
 * take and returns its length, or returns 0 (g->n = 0) when items[0] goes alone as a plain copy
 * (over SL__GATHER_ITEM_MAX or the bounce). */
size_t sl__gather_phase(const sl_copy_item *items, size_t n, uint64_t bounce_bytes,
                        sl__gather *g);

#endif
