/* tools/lib/requant: rewrites chosen tensors of one GGUF file in another type with Sluice's own
 * quantizers (kernels/ref/quant.h), keeping everything else: every KV pair (values and order),
 * every other tensor's bytes, names, shapes and order, and the alignment. The research loop of
 * live swap (scheduler/policy/swap.h) needs nothing else: requant a tensor, let the model reload it.
 *
 * The output is written to "OUT.partial" and renamed over `out` (base/file.h's rule), so a model
 * reading `out` (in == out is allowed) sees the old file or the new one, never half of one; a
 * stale OUT.partial of an interrupted run is replaced by the next run.
 * A file of a shard set is rewritten alone (its split.* keys kept).
 */
#ifndef SL_TOOLS_LIB_REQUANT_H
#define SL_TOOLS_LIB_REQUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* Tensors whose name matches `pattern` (a POSIX extended regex matched against the whole name,
 * so a plain name matches itself) become `type`: dequantized to F32 and quantized again (an
 * F32 source is quantized directly). *n_changed: how many matched. SL_ERR_NOT_FOUND when none
 * matches; SL_ERR_INVALID for a bad pattern or a type the quantizers cannot write or whose
 * block does not divide a matched row; I/O and format errors name the file. progress (may be
 * NULL) follows the bytes written, as sl_gguf_writer_options.progress; cancelled (may be NULL)
 * stops the writing as sl_gguf_writer_options.cancelled (SL_ERR_INVALID, nothing left). */
sl_status sl_requant_file(const char *in, const char *out, const char *pattern, uint32_t type,
                          uint32_t *n_changed,
                          void (*progress)(void *user, uint64_t done, uint64_t total),
                          void *progress_user, bool (*cancelled)(void *user),
                          void *cancelled_user, sl_error *err);

#endif
