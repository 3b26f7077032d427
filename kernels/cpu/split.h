/* kernels/cpu/split: byte-balanced chunks of rows over several matrices, for one pool call
 * that computes all of them (kernels/cpu/matvec.h's sl_cpu_matvec_multi).
 *
 * Model: part p has rows[p] rows of row_bytes[p] bytes. The plan gives part p
 * n_chunks(p) = ceil(rows[p] * row_bytes[p] / target) chunks (at most rows[p]), whose row
 * counts differ by at most one, so a chunk's cost follows its bytes whatever the part's type;
 * chunks are numbered part by part. target = total bytes / (4 chunks per thread), clamped to
 * [SL_CPU_SPLIT_MIN_BYTES, SL_CPU_SPLIT_MAX_BYTES] (small enough to balance two threads on
 * the 262k-row output matrix, large enough that a handoff is cheap next to its work).
 * Every row of every part is in exactly one chunk (tests/kernels: split_test). */
#ifndef SL_KERNELS_CPU_SPLIT_H
#define SL_KERNELS_CPU_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

enum { SL_CPU_SPLIT_MAX_PARTS = 8 };
#define SL_CPU_SPLIT_MIN_BYTES ((uint64_t)16 << 10)
#define SL_CPU_SPLIT_MAX_BYTES ((uint64_t)64 << 10)

/* Invariants (sl_cpu_split_validate): 1 <= n_parts <= MAX_PARTS; part p's chunks are
 * first[p] .. first[p + 1] - 1 with first[0] == 0, first[n_parts] == n_chunks;
 * 1 <= first[p + 1] - first[p] <= rows[p]. */
typedef struct sl_cpu_split {
    int n_parts;
    int64_t rows[SL_CPU_SPLIT_MAX_PARTS];
    int64_t first[SL_CPU_SPLIT_MAX_PARTS + 1];
    int64_t n_chunks;
} sl_cpu_split;

/* Plans the chunks of n_parts parts for n_threads (>= 1) threads. SL_ERR_INVALID naming the
 * field for n_parts outside [1, MAX_PARTS], rows[p] outside [1, 2^31), row_bytes[p] == 0,
 * n_threads < 1 or a byte total that overflows. */
sl_status sl_cpu_split_plan(const int64_t *rows, const size_t *row_bytes, int n_parts,
                            int n_threads, sl_cpu_split *out, sl_error *err);

/* Chunk c (0 <= c < n_chunks) as part *part, rows [*r0, *r1). */
void sl_cpu_split_chunk(const sl_cpu_split *s, int64_t c, int *part, int64_t *r0, int64_t *r1);

/* SL_OK when s keeps its invariants, else SL_ERR_INVALID naming the first broken one. */
sl_status sl_cpu_split_validate(const sl_cpu_split *s, sl_error *err);

#endif
