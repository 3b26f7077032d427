/* runtime/engine/hot: static hot residency of a context's host experts (issue 33) — each
 * device layer's most routed experts copied into device memory and computed there, beside the
 * CPU computing the rest, with nothing on the host thread that waits for the device.
 *
 * Why: at batch 1 a copied expert serves one token, so PCIe loses to the CPU; what wins is a
 * VRAM share spent on the experts the router picks most, resident for good. Before this the
 * fetching scheduler kept them (fetch.h hot_bytes), but it calls the device, so its layers
 * waited on the stream twice each; here the layer stays in stream order (forward_ffn.c):
 *   device: moe_rows over the resident experts' slots (the others' rows +0)
 *   D2H rows / routing -> host function: the CPU scheduler's rows of the other slots
 *   (sl_moe_exec_slots), the resident ones' rows +0 -> H2D -> moe_join of the two
 * and the join sums each token's slots in ascending expert order (sl_moe_rows_join), so on
 * sim the logits are the CPU placement's bit for bit.
 *
 * Choice (`--sched "mode=cpu hot_kb=N hot_warm=W"`): N KiB over the device layers whose
 * experts are on the host, split evenly, as whole experts (gate, up and down in the device's
 * type: Q4_K_R8 copies are turned back into Q4_K there). The static set is the model's,
 * shared by every context that asks for the same N (sl__hot_shared below: a server's slots
 * keep one copy); the run-time cache is each context's own. Layers count their routed
 * assignments (in the host function, or, for a streamed prefill, its routing brought down for
 * the count) until one has seen W; at the end of that pass each takes its most routed experts
 * (ties: lower index; never-routed ones are not taken) and uploads them in stream order — a
 * prefill is the profile (all layers at once: the last one routes only the rows with
 * logits). A pass of more than max_tok tokens runs the layer on the host alone as before; so
 * does a layer whose experts a live reload gave another type (it leaves the set).
 *
 * A run-time cache beside it (`cache_kb=M uploads=U [policy=lfu|lru decay=D]`): M KiB more
 * a layer for experts that follow the recent routing, for routers whose popular experts drift
 * (topics) more than they skew. After each pass, each layer's experts' scores decay (score =
 * score * D + the pass's assignments) and at most U of the experts the CPU computed in it go
 * up, highest score first: into a free cache slot, else in place of the cache's coldest (lfu:
 * lowest score, and only when the new one's is higher; lru: least recently routed) — never
 * the static set's. The uploads are copies in stream order ahead of the next pass's work
 * (no wait; its final sync covers them), which reads the new set (masks and pointer arrays
 * on the device; a captured pass stays valid). The static set's first upload, once, waits
 * for its copies at the end of its pass.
 *
 * Invariants (sl__hot_validate): !on, or L [n_layer] with, per layer, n_static <= n_cap <=
 * n_expert, slot_of and slot_expert inverse of each other over the n_hot resident experts
 * (the mask's set bytes, the view's set pointers, each at its slot's place: the shared
 * block's below n_static, the context's region above); d_rows / h_rows hold max_tok *
 * n_expert_used rows of n_embd. */
#ifndef SL_RUNTIME_ENGINE_HOT_H
#define SL_RUNTIME_ENGINE_HOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/cuda/ctx.h"
#include "runtime/engine/dx.h"
#include "runtime/engine/stream.h"
#include "scheduler/moe/moe.h"

struct sl_ctx;
struct sl_model;

/* The static sets every context of a model shares (model.h hot_shared, under hot_mu): made by
 * the first context that asks for hot_kb, freed with the last one holding it, so that a
 * server's slots keep one copy of the profile's experts, not one each. Per taking layer its
 * n_static slots (gate | up | down, in the device's type) in one device block; the choice is
 * the first context's to finish its warm-up (every other adopts it; slots its profile left
 * free stay free: they are not any context's cache), and the copies are
 * queued once per weights' version (epoch, layout), all on the model's one stream, so any
 * context's later work reads them after they land.
 * Invariants: refs >= 1 while held; per layer 0 <= n_chosen <= n_static (-1: not chosen),
 * experts[0 .. n_chosen) distinct ids of the layer; loaded only once chosen. */
typedef struct sl__hot_shared_layer {
    int32_t n_static;     /* slots (0: the layer takes no part) */
    int32_t n_chosen;     /* the chosen experts, in slots [0, n_chosen); -1: not chosen yet */
    int32_t *experts;     /* [n_static] */
    bool gone;            /* a reload changed the layer's types or biases: it left the set */
    bool loaded;          /* its copies are queued, of the weights at (epoch, layout) */
    uint64_t epoch, layout;
    uint8_t *part[3];     /* its gate, up, down slots in the block */
    uint64_t pb[3];       /* one expert's bytes of each */
} sl__hot_shared_layer;

typedef struct sl__hot_shared {
    uint64_t bytes;       /* the hot_kb it was made for (a context asking another is refused) */
    int refs;
    sl_block block;       /* the model's arena */
    sl__hot_shared_layer *L; /* [n_layer] */
} sl__hot_shared;

typedef struct sl__hot_layer {
    int32_t n_cap;        /* experts this layer's share holds; 0: the layer takes no part */
    int32_t n_static;     /* of those, the profile's, in slots [0, n_static) (hot_kb: the
                           * model's shared set, S; the rest: the context's run-time cache,
                           * which evicts from slot n_static on) */
    int32_t n_hot;        /* resident (0 until chosen) */
    bool chosen;          /* the static set is decided (after warm assignments) */
    bool loaded;          /* and the residents uploaded */
    uint64_t routed;      /* assignments counted so far (host functions write, passes read) */
    uint64_t *count;      /* [n_expert] warm-up counts */
    uint32_t *recent;     /* [n_expert] the last pass's assignments (host functions write) */
    float *score;         /* [n_expert] decayed frequency (cache) */
    uint64_t *last;       /* [n_expert] the last pass that routed it (lru) */
    int32_t *slot_of;     /* [n_expert]: its slot in the region, -1: not resident */
    int32_t *slot_expert; /* [n_cap]: the expert in a slot, -1: free */
    uint8_t *h_mask;      /* [n_expert] host (page-locked, the pinned block): resident */
    uint8_t *d_mask;      /* [n_expert] in executor memory (the block) */
    sl__hot_shared_layer *S; /* the shared static slots (n_static > 0), else NULL */
    uint8_t *base;        /* the context's block: the cache slots' gate | up | down, biases */
    uint64_t off[6], pb[3]; /* where each part starts in base; one expert's bytes a part */
    sl_moe_layer view;    /* the resident experts as the device reads them */
    const void **hp;      /* [3][n_expert] host (pinned block): the view's pointers, NULL for
                           * the others */
    bool has_b[3];        /* the region holds gate, up, down biases (as the layer had them) */
    const void **dp;      /* cuda: their device copy (the block), else NULL */
    sl__dx_moe dx;        /* {&view, dp..., the sim's rows scheduler} */
    sl__r8_undo *undo;    /* [n_cap][3] sim: the undo's host-function records, by slot */
} sl__hot_layer;

typedef struct sl__hot {
    uint64_t bytes;       /* hot_kb (the static set's bytes) */
    uint64_t cache_bytes; /* cache_kb (with uploads: the run-time cache's) */
    int uploads;          /* experts that may go up per layer and pass (0: no cache) */
    float decay;          /* the scores' factor per pass, (0, 1] */
    bool lru;             /* evict the least recently routed (else the lowest score) */
    int64_t warm;         /* assignments that decide a layer's set */
    uint64_t pass;        /* passes seen (lru's clock) */
    bool on;              /* some layer takes part (setup) */
    int64_t max_tok;      /* a pass's tokens the rows buffers hold */
    sl__hot_layer *L;     /* [n_layer] */
    sl__hot_shared *shared; /* the model's static sets, held (hot_kb), else NULL */
    float *d_rows[2];     /* [max_tok * k][n_embd] executor memory: the device's rows, the
                           * host's uploaded */
    float *h_rows;        /* the same host, page-locked: the host function's rows */
    sl_moe_assign *assign;/* [max_tok * k]: the host function's scratch */
    void *pinned;         /* page-locked: every layer's h_mask and hp (their copies up are
                           * asynchronous; the next write comes after the pass's sync) */
    sl_moe_sched *sim_rows; /* sim: the CPU scheduler the executor computes the rows with */
    sl_cuda_ctx *cu;      /* cuda: the Q4_K_R8 undo's context */
    atomic_uint_fast64_t calls_dev; /* (token, expert) evaluations by resident experts (host
                                     * functions add, stats read) */
} sl__hot;

/* After the device side exists: sizes each eligible layer's share and takes the block (the
 * model's arena; no room: SL_ERR_NOMEM naming the bytes — the user asked for them). Off
 * (nothing taken) without hot bytes, a device, or a layer that qualifies. */
sl_status sl__hot_setup(struct sl_ctx *c, sl_error *err);
void sl__hot_free(struct sl_ctx *c);
sl_status sl__hot_validate(const struct sl_ctx *c, sl_error *err);

/* After a pass (host thread, the stream idle): chooses the static sets of the layers that have
 * seen their warm assignments and uploads them, waiting for the copies (once: nothing may be
 * in flight when an eval returns — a runtime may evict the model or a reload rewrite the
 * weights next); drops the decode graph when a layer's path changed. */
sl_status sl__hot_update(struct sl_ctx *c, sl_error *err);
/* Before a pass (host thread, inside its gate): the run-time cache's promotions of the last
 * pass's routing and the reloads of invalidated sets, in stream order ahead of the pass's
 * work, which its final sync covers (no wait here). */
sl_status sl__hot_prepare(struct sl_ctx *c, sl_error *err);
/* Whether layer il's resident experts take part in a pass of n tokens. */
bool sl__hot_ready(const struct sl_ctx *c, int32_t il, int64_t n);
/* Whether layer il still counts its routing for the static set (a streamed prefill's routing
 * then goes down for it). */
bool sl__hot_warming(const struct sl_ctx *c, int32_t il);
/* Counts n_sel routed ids of layer il (host memory; a host function, in stream order): the
 * warm-up's counts and the pass's for the cache. */
void sl__hot_count(struct sl_ctx *c, int32_t il, const int32_t *idx, int64_t n_sel);
/* The host function's part of a ready layer: the rows of the slots whose experts are not
 * resident into h_rows (the CPU scheduler, in its sum order's bits), the others +0. */
sl_status sl__hot_host_rows(struct sl_ctx *c, int32_t il, const int32_t *idx, int64_t n,
                            const float *x, sl_error *err);
/* Expert e of layer il's part p (0 gate, 1 up, 2 down) in device memory, in the device's
 * type, when the layer's resident set is loaded and holds it; else NULL (host thread, between
 * a pass's start and end: a streamed prefill reads it instead of copying it, stream.h). */
const void *sl__hot_device_expert(const struct sl_ctx *c, int32_t il, int32_t e, int p);
/* The experts resident now over every layer, and their device bytes (sl_ctx_stats). */
void sl__hot_resident(const struct sl_ctx *c, uint64_t *experts, uint64_t *bytes);
/* Drops every resident set so that the next pass uploads it again from the weights (a live
 * reload changed them); counts and choices stay. */
void sl__hot_invalidate(struct sl_ctx *c);

#endif
