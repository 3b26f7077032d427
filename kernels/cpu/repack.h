/* kernels/cpu/repack: Q4_K -> Q4_K_R8 (kernels/ref/repack.h) of many matrices in place, split
 * over a thread pool (kernels/cpu/pool.h) — the load's repack pass (runtime/engine/repack.h).
 *
 * Contract: every part is a writable Q4_K matrix [rows][cols] (rows % 8 == 0, cols % 256 ==
 * 0), parts pairwise disjoint. The parts are cut into chunks of whole groups of eight rows
 * (about SL_CPU_REPACK_CHUNK_BYTES each); a group's R8 bytes depend on that group's Q4_K bytes
 * only, so the result is sl_repack_q4_K_r8's on each part, bit for bit, for any pool and any
 * order of the chunks (tests/kernels: repack_test). On a failure (SL_ERR_NOMEM for a chunk's
 * scratch) parts may be partly repacked: the caller drops them. The inverse of one matrix is
 * here too (sl_cpu_repack_q4_K_r8_undo). */
#ifndef SL_KERNELS_CPU_REPACK_H
#define SL_KERNELS_CPU_REPACK_H

#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "base/status.h"

/* Small enough to balance the threads over few large tensors (a layer's experts are one),
 * large enough that a handout and its one group of scratch are cheap next to the copy. */
#define SL_CPU_REPACK_CHUNK_BYTES ((uint64_t)1 << 20)

typedef struct sl_cpu_repack_part {
    void *data;         /* Q4_K bytes, repacked in place */
    int64_t rows, cols; /* rows % 8 == 0, cols % 256 == 0 */
    const char *name;   /* for errors; may be NULL */
} sl_cpu_repack_part;

/* Repacks parts[0 .. n_parts) in place on pool (NULL: the calling thread). SL_ERR_INVALID
 * naming the part for a NULL data or a bad shape (checked before anything is written);
 * SL_ERR_NOMEM. */
sl_status sl_cpu_repack_q4_K_r8(sl_cpu_pool *pool, const sl_cpu_repack_part *parts,
                                int64_t n_parts, sl_error *err);

/* The inverse of one matrix, out of place: Q4_K_R8 rows x cols at src back to row-major Q4_K at
 * dst (disjoint), bit for bit sl_repack_q4_K_r8_undo's at about twice its speed (the fetching
 * scheduler unpacks every expert it uploads: scheduler/moe/fetch_stage.c). SL_ERR_INVALID
 * naming the values for NULL pointers, a bad shape or overlapping buffers. */
sl_status sl_cpu_repack_q4_K_r8_undo(const void *src, void *dst, int64_t rows, int64_t cols,
                                     sl_error *err);

#endif
