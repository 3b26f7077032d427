/* Private to alloc/: the invariant checker, for tests and debug builds, and the constructor
 * that backends built inside alloc/ (bfc_device.c) use to hand their context to the arena. */
#ifndef SL_BFC_IMPL_H
#define SL_BFC_IMPL_H

#include "alloc/bfc.h"

/* Checks every invariant listed in bfc.h; SL_OK or a message naming the broken one. */
sl_status sl__bfc_validate(const sl_bfc *a, sl_error *err);

/* Checks what a successful compaction guarantees (see bfc.c): every free chunk that is not the
 * last of its region lies before a pinned block or — unless `full` (compaction on out-of-memory,
 * which slides every run) — before a run of movable blocks more than SLIDE_RATIO (8) times its
 * size. SL_OK or a message naming the first gap that breaks it. */
sl_status sl__bfc_check_compacted(const sl_bfc *a, bool full, sl_error *err);

/* sl_bfc_create, but the arena owns backend->ctx: sl_bfc_destroy (and a failed create) calls
 * ctx_free(backend->ctx) after the last region is freed. ctx_free may be NULL (not owned). */
sl_status sl__bfc_create_owned(const sl_bfc_backend *backend, const sl_bfc_options *opt,
                               void (*ctx_free)(void *ctx), sl_bfc **out, sl_error *err);

#endif
