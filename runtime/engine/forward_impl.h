/* runtime/engine/forward_impl.h: what the forward pass's files share (forward.c: the layers,
 * the output; forward_graph.c: the decode graph) — private to them.
 *
 * Where a layer's parts run, as the pass decides it (one rule for the experts: their path); the
 * two steps are the pass's layer loop and its move of the residual stream between the sides. */
#ifndef SL_RUNTIME_ENGINE_FORWARD_IMPL_H
#define SL_RUNTIME_ENGINE_FORWARD_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/engine/ctx.h"

/* Whether weight w lives on the device. */
static inline bool sl__weight_on_device(const sl_weight *w)
{
    return w->residency & SL_RES_DEVICE;
}

/* Where a MoE layer's routed experts run in a pass (forward.c moe_ffn dispatches on it;
 * Expert Deferral's plan and the decode graph read it: one rule). */
typedef enum sl__experts_path {
    SL__EXPERTS_SPLIT,     /* hot/cold neurons, both sides (ffn_hot_cold) */
    SL__EXPERTS_HOST,      /* a host layer's, on the host */
    SL__EXPERTS_DEVICE,    /* a device layer's, on the device */
    SL__EXPERTS_TO_DEVICE, /* a host layer's, on the device (ffn_elsewhere) */
    SL__EXPERTS_STREAM,    /* a device layer's host experts copied through it (a prefill) */
    SL__EXPERTS_HOT,       /* ... the resident hot ones there, the rest on the CPU (hot.h) */
    SL__EXPERTS_ORDERED,   /* ... on the CPU in a host function, in stream order */
    SL__EXPERTS_SYNC,      /* ... on the CPU after a blocking sync (order=sync, fetching) */
} sl__experts_path;

/* forward.c: layer il's path in a pass of n tokens (a MoE layer's; a streamed one takes the
 * model's staging buffer the first time, as the pass would). */
sl__experts_path sl__forward_experts_path(const sl_ctx *c, int32_t il, int64_t n);

/* forward.c: the residual stream [n][n_embd] moved to side `to` if it is elsewhere (*at:
 * where it is; to the host: a sync follows the copy). */
sl_status sl__forward_move_x(sl_ctx *c, const sl__side **at, const sl__side *to, int64_t n,
                             sl_error *err);
/* forward.c: the layers over the pass's n rows, x moved to each layer's side first; the last
 * keeps n_out rows past its attention. */
sl_status sl__forward_layers(sl_ctx *c, const sl__side **at, int64_t n, int64_t n_out,
                             sl_error *err);

/* forward_graph.c: whether the pass of n tokens runs as the decode graph, and running it
 * (captured the first time; a failed capture runs sl__forward_layers and ends the tries). */
bool sl__forward_graph_fits(const sl_ctx *c, int64_t n);
sl_status sl__forward_graph_run(sl_ctx *c, const sl__side **at, int64_t n, int64_t n_out,
                                sl_error *err);

#endif
