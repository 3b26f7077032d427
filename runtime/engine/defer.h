/* runtime/engine/defer: Expert Deferral (KTransformers, SOSP'25; issue 33), opt-in with
 * `--sched "mode=cpu defer=D"` because it changes the numerics.
 *
 * Why: a device layer whose routed experts run on the host leaves the GPU idle while the CPU
 * computes them, and the CPU idle while the GPU runs the next layer's attention. Deferring
 * some of a layer's experts to the next layer lets the CPU compute them while the GPU goes on.
 *
 * What it computes (KTransformers' Expert Deferral): in layer l each token's D lowest-weighted
 * of its top-k routed experts are deferred (its top k - D by weight are immediate, ties to the
 * lower slot). The layer's routed output is the sum of its immediate assignments only, and
 * layer l + 1's routed output is its own immediate sum plus layer l's deferred sum (each as
 * sl_moe_exec sums: ascending expert index, weighted by the router's weights; the two added
 * once, immediate first). Shared experts and everything else stay where they were. Per token,
 * not per pass: kt-kernel marks an expert immediate for the whole batch when any token ranks
 * it high (an artifact of its batched buffers, which makes a prefill defer almost nothing and
 * a token's logits depend on the other tokens of its pass); here a token's logits depend on
 * itself alone, so a prefill equals its run of decodes and a batch's sequences do not mix
 * (forward.c's batch invariance).
 *
 * Where: a layer defers only into the next layer of the same kind (sl__defer_plan): both
 * compute their routed experts on the host, both either in stream order on a device's stream
 * (kind STREAM: host functions; the deferred part on this module's worker thread, so that it
 * overlaps the device's next layer) or on the host thread (kind HOST: host layers, order=sync;
 * the deferred part computed at once, the same bits). The last layer, where it keeps only the
 * rows with logits, takes those rows of the deferred part (sl__forward_keep_rows), so a row's
 * logits do not depend on which others are asked for. Everywhere else a layer computes all of
 * its experts at once.
 * So the same placement kind gives the same bits (a device layer chain equals the CPU
 * placement's for the same passes).
 *
 * Invariants (sl__defer_validate): d == 0 (off: nothing allocated), or 1 <= d <= n_expert_used
 * with every buffer sized for the context's cap, and a worker (with x) exactly where the
 * context has a device side; layer is -1 (nothing pending) or the layer whose deferred part
 * waits for layer + 1; outside a pass nothing is pending and the worker holds no job. */
#ifndef SL_RUNTIME_ENGINE_DEFER_H
#define SL_RUNTIME_ENGINE_DEFER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "scheduler/moe/moe.h"

struct sl_ctx;

/* How a layer's routed experts run in a pass, as far as deferral goes. */
typedef enum sl__defer_kind {
    SL__DEFER_NONE = 0,   /* on the device, streamed, hot, split, or no routed experts */
    SL__DEFER_HOST = 1,   /* the CPU scheduler on the host thread */
    SL__DEFER_STREAM = 2, /* the CPU scheduler in a host function on the device's stream */
} sl__defer_kind;

typedef struct sl__defer {
    int32_t d;                /* experts a token defers (0: off) */
    bool *on;                 /* [n_layer] this pass: layer il's deferred part goes to il + 1 */
    int32_t layer;            /* the layer whose deferred part is pending, -1: none */
    int64_t n;                /* its tokens */
    float *x;                 /* [cap][n_embd] its rows (the worker's copy; NULL without
                               * a worker) */
    float *out;               /* [cap][n_embd] its deferred sum */
    sl_moe_assign *a_def;     /* [cap * k] its deferred assignments */
    int64_t n_def;
    sl_moe_assign *a_imm;     /* [cap * k] scratch: a layer's immediate assignments */
    sl_moe_sched *moe;        /* the worker's CPU scheduler (cuda: the context's pool; sim:
                               * none, the sim's kernels use the pool on the host thread) */
    /* the worker thread (a device model only) */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, stop, job, busy;
    sl_status st;             /* the worker's first failure since the last absorb */
    sl_error err;
} sl__defer;

/* After the context's scheduler and device side: d deferred experts a token (the sched
 * option, 0 .. n_expert_used: engine.c refused the rest; 0: nothing). */
sl_status sl__defer_setup(struct sl_ctx *c, int32_t d, sl_error *err);
void sl__defer_free(struct sl_ctx *c);
sl_status sl__defer_validate(const struct sl_ctx *c, sl_error *err);

/* Before a pass's layers of n tokens (host thread): on[il] from each layer's kind, which
 * kind(c, il, n) says as the forward pass will decide it; n_out: the rows the last layer keeps
 * (0: it stops after its attention, so nothing defers into it). */
typedef sl__defer_kind (*sl__defer_kind_fn)(const struct sl_ctx *c, int32_t il, int64_t n);
void sl__defer_plan(struct sl_ctx *c, sl__defer_kind_fn kind, int64_t n, int64_t n_out);
/* Whether layer il's routed experts go through sl__defer_moe this pass (it defers, or a
 * deferred part waits for it). */
bool sl__defer_takes(const struct sl_ctx *c, int32_t il);
/* Layer il's routed output into out [n][n_embd] (host memory) from its rows x, ids and
 * weights [n][k]: its immediate experts' sum, plus the deferred sum of layer il - 1 when one
 * waits (waiting for the worker); then its own deferred part, handed to the worker (async) or
 * computed now. A worker's failure is returned here. */
sl_status sl__defer_moe(struct sl_ctx *c, int32_t il, int64_t n, const float *x,
                        const int32_t *idx, const float *w, float *out, bool async,
                        sl_error *err);
/* After a pass (host thread, the stream idle): waits for the worker; a pending part left
 * behind is dropped, and is an error (SL_ERR_INVALID) when the pass succeeded. */
sl_status sl__defer_end(struct sl_ctx *c, bool ok, sl_error *err);
/* The worker's scheduler's counters added into *s (sl_ctx_stats). */
void sl__defer_stats_add(const struct sl_ctx *c, sl_moe_stats *s);

#endif
