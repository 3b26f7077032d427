/* base/device/cuda_gather.h: many small D2D copies as two kernels (private to base/device/cuda.c).
 *
 * A phase's items are read into a bounce buffer by one kernel (every source, each item at a
 * 16-byte aligned offset), then written out by a second (every destination). On one stream
 * that equals copying the items one by one exactly when no item reads bytes that an earlier
 * item of the phase writes and no two items write the same bytes; cuda.c's planner starts a
 * new phase where that would not hold. The bounce stays small enough for L2 (cuda.c), so the
 * second kernel reads it from cache and HBM moves each byte once each way, as a copy does.
 * Why: compaction hands over dozens of 0.05-1 MB moves; one cudaMemcpyAsync each ran at 3% of
 * a D2D copy on the H100 (bench/results/2026-11-24-h100-run1, ../shared/GPU-REVIEW.md). */
#ifndef SL_BASE_DEVICE_CUDA_GATHER_H
#define SL_BASE_DEVICE_CUDA_GATHER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 96 items keep the launch's argument block (passed by value) under the 4 KiB every CUDA
 * version takes. */
enum { SL__GATHER_MAX_ITEMS = 96 };

/* Invariants (sl__gather_validate): 1 <= n <= SL__GATHER_MAX_ITEMS; off[0] = 0, off[i + 1] =
 * off[i] + bytes[i] rounded up to 16; every bytes[i] >= 1; no item's source and destination
 * overlap. */
typedef struct sl__gather {
    const uint8_t *src[SL__GATHER_MAX_ITEMS];
    uint8_t *dst[SL__GATHER_MAX_ITEMS];
    uint64_t off[SL__GATHER_MAX_ITEMS + 1];
    uint32_t bytes[SL__GATHER_MAX_ITEMS];
    int32_t n;
} sl__gather;

/* 0 when g keeps its invariants, else the index + 1 of the first item that does not (n itself
 * out of range: -1). */
int sl__gather_validate(const sl__gather *g);

/* Enqueues both kernels of g on `stream` (a cudaStream_t) with `bounce` (device memory of at
 * least g->off[g->n] bytes, 16-byte aligned). Returns the cudaError_t of the launches (as an
 * int: C callers need not see the type); nothing is enqueued past a failed launch. */
int sl__cuda_gather(void *stream, const sl__gather *g, void *bounce);

#ifdef __cplusplus
}
#endif

#endif
