/* scheduler/policy/swap: live tensor swap — when a reload may happen, which source files changed, and
 * what to do with each changed tensor (seed: ik_llama.cpp's hot-swap). The engine's driver
 * (runtime/engine/reload.c, sl_reload_changed of sluice.h) moves the bytes; this module holds the
 * policy and the synchronisation, independent of any model.
 *
 * Safe points (sl_swap_gate). Evaluation steps and reloads exclude each other: a step (one
 * sl_ctx_eval, or a context's creation/destruction, which take arena blocks) holds the gate
 * shared; a reload's commit holds it exclusively, waits for running steps to end, and keeps
 * new ones out (a waiting reload goes first, so a busy context cannot starve it). Whatever a
 * context caches about a weight's location (expert pointer arrays, the expert cache, rope
 * factors, workspace sizes) is keyed by the gate's epoch, which every commit that changed
 * something bumps; a step that sees a new epoch refreshes before it reads a weight. Reading
 * the changed files (the slow part) happens before the commit, while steps still run.
 *
 * Sources (sl_swap_sources): one record per file of the model (every shard), with the size,
 * mtime (ns) and inode of the version whose bytes are loaded. A file where one differs is
 * re-parsed; a file that changes while it is read (size or mtime differ before and after),
 * whose header does not parse, or whose tensors point past its end is skipped with a message
 * and stays "changed", so the next call retries it; its tensors keep their old bytes.
 *
 * Per changed tensor (sl_swap_classify), with "loaded" meaning after any F32 conversion:
 *   logical shape differs                      -> REFUSED (untouched, reported);
 *   loaded type and bytes equal the original's -> REATTACH (the original storage gets the new
 *                                                 bytes and is used again, the private block
 *                                                 is freed) — or IN_PLACE when not swapped;
 *   loaded type and bytes equal the current    -> IN_PLACE (same storage, new bytes);
 *   otherwise                                  -> PRIVATE (a new block where it lived: device
 *                                                 arena or host pool; device short of memory
 *                                                 -> host, counted as a fallback).
 * REATTACH is applied before the others, so memory it frees can serve them. Sibling expert
 * tensors (every routed-expert tensor of a layer) share one side: if one falls back to the
 * host, the layer's other expert tensors follow it, and they return together.
 *
 * Thread safety: the gate's functions from any thread; sources and classification belong to
 * the one reload that holds the gate's reload lock.
 */
#ifndef SL_SCHEDULER_SWAP_H
#define SL_SCHEDULER_SWAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "base/status.h"
#include "scheduler/weights.h"

/* Invariants (under mu): steps >= 0; writing => steps == 0; epoch only grows. */
typedef struct sl_swap_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t steps;          /* steps holding the gate shared */
    int32_t waiting;        /* reloads waiting for the exclusive hold */
    bool writing;           /* a reload holds it exclusively */
    uint64_t epoch;         /* commits that changed something */
    pthread_mutex_t reload; /* one reload at a time (held across its read and commit) */
} sl_swap_gate;

sl_status sl_swap_gate_init(sl_swap_gate *g, sl_error *err);
void sl_swap_gate_destroy(sl_swap_gate *g);
/* Holds the gate shared (waits while a reload commits or waits to); returns the epoch. */
uint64_t sl_swap_step_begin(sl_swap_gate *g);
void sl_swap_step_end(sl_swap_gate *g);
/* Holds the gate exclusively once running steps end. */
void sl_swap_exclusive_begin(sl_swap_gate *g);
/* Releases it; changed: bump the epoch first. */
void sl_swap_exclusive_end(sl_swap_gate *g, bool changed);
uint64_t sl_swap_epoch(sl_swap_gate *g);
/* Validates the invariants above; SL_ERR_INVALID. */
sl_status sl_swap_gate_validate(sl_swap_gate *g, sl_error *err);

/* One source file: the size and mtime of the version its weights were read from. */
typedef struct sl_swap_source {
    char *path;
    uint64_t size;
    int64_t mtime_ns;
    uint64_t ino;           /* a file replaced by rename within one mtime tick still differs */
} sl_swap_source;

typedef struct sl_swap_sources {
    sl_swap_source *v;      /* [n], shard order of the model's gguf handle */
    uint32_t n;
} sl_swap_sources;

/* One record per shard of g, stamped with the mtime its tensors were parsed with (so a file
 * that changed between parsing and this call is seen as changed). */
sl_status sl_swap_sources_init(sl_swap_sources *s, const sl_gguf *g, sl_error *err);
void sl_swap_sources_free(sl_swap_sources *s);
/* stat(2) of path into a record's size, mtime_ns and ino (path untouched): SL_ERR_IO naming
 * it. */
sl_status sl_swap_stat(const char *path, sl_swap_source *out, sl_error *err);
/* Whether a and b describe different versions of a file. */
bool sl_swap_source_differs(const sl_swap_source *a, const sl_swap_source *b);

typedef enum sl_swap_action {
    SL_SWAP_NONE = 0,       /* bytes, type and size unchanged */
    SL_SWAP_REFUSED,
    SL_SWAP_REATTACH,
    SL_SWAP_IN_PLACE,
    SL_SWAP_PRIVATE,
} sl_swap_action;

/* "none", "refused", "reattach", "in place", "private". */
const char *sl_swap_action_name(sl_swap_action a);

/* What to do with w given the tensor's new record nt, whose bytes once loaded have type
 * new_type and new_bytes bytes. Shape: n_dims and ne compared with trailing 1s ignored. */
sl_swap_action sl_swap_classify(const sl_weight *w, const sl_gguf_tensor *nt, uint32_t new_type,
                                uint64_t new_bytes);

#endif
