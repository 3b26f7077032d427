/* runtime/engine/forward_impl.h: what the forward pass's files share (forward.c: the layers,
 * the output; forward_graph.c: the decode graph) — private to them.
 *
 * The predicates say where a layer's parts run, as the pass decides it; the two steps are the
 * pass's layer loop and its move of the residual stream between the sides. */
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

/* Whether a MoE layer's routed experts are on the device (whole; a split: moe_split). */
static inline bool sl__experts_on_device(const sl__layer *L)
{
    return L->moe_on_device && L->moe_on_device[0];
}

/* Whether a device layer's host experts run in stream order (forward.c host_experts_fn): a
 * host function may not call into the device, so only the CPU scheduler's work can, and not
 * with sched order=sync (a blocking sync, the experts on this thread). */
static inline bool sl__experts_in_stream_order(const sl_ctx *c, const sl__side *s)
{
    return s == &c->dev && !c->experts_sync && (sl_moe_caps(c->moe) & SL_MOE_CAP_HOST_ONLY);
}

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
