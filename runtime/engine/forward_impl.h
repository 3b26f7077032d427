/* runtime/engine/forward_impl.h: what the forward pass's files share (forward.c: the layers,
 * the output; forward_ffn.c: a layer's FFN and routed experts; forward_graph.c: the decode
 * graph) — private to them.
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

/* A copy between host and device memory, and a wait for what is queued: on the model's
 * stream. */
static inline sl_status copy(sl_ctx *c, void *dst, const void *src, uint64_t bytes,
                             sl_copy_kind kind, sl_error *err)
{
    return sl_device_copy(c->m->dev, c->m->stream, dst, src, bytes, kind, err);
}

static inline sl_status sync_dev(sl_ctx *c, sl_error *err)
{
    return sl_device_stream_sync(c->m->dev, c->m->stream, err);
}

/* Rows [r0, r0 + rows) of a 2-D weight: a view, no copy (phi3's fused projections; r0 and
 * rows multiples of 8, so a Q4_K_R8 repacked weight's groups of eight stay whole). */
static inline sl_weight rows_view(const sl_weight *w, int64_t r0, int64_t rows)
{
    sl_weight v = *w;
    const size_t rb = (size_t)(sl__weight_slice_bytes(w) / (uint64_t)w->ne[1]);
    v.data = (const uint8_t *)w->data + (size_t)r0 * rb;
    v.ne[1] = rows;
    v.nbytes = (uint64_t)rows * rb;
    return v;
}

/* Where a MoE layer's routed experts run in a pass (sl__forward_moe_ffn dispatches on it;
 * Expert Deferral's plan and the decode graph read it: one rule). */
typedef enum sl__experts_path {
    SL__EXPERTS_SPLIT,     /* hot/cold neurons, both sides (sl__forward_ffn_hot_cold) */
    SL__EXPERTS_HOST,      /* a host layer's, on the host */
    SL__EXPERTS_DEVICE,    /* a device layer's, on the device */
    SL__EXPERTS_TO_DEVICE, /* a host layer's, on the device (sl__forward_ffn_elsewhere) */
    SL__EXPERTS_STREAM,    /* a device layer's host experts copied through it (a prefill) */
    SL__EXPERTS_HOT,       /* ... the resident hot ones there, the rest on the CPU (hot.h) */
    SL__EXPERTS_ORDERED,   /* ... on the CPU in a host function, in stream order */
    SL__EXPERTS_SYNC,      /* ... on the CPU after a blocking sync (order=sync, fetching) */
} sl__experts_path;

/* forward_ffn.c: layer il's path in a pass of n tokens (a MoE layer's; a streamed one takes
 * the model's staging buffer the first time, as the pass would). */
sl__experts_path sl__forward_experts_path(const sl_ctx *c, int32_t il, int64_t n);

/* forward_ffn.c: a dense FFN (or one part of a split one: il < 0) on side o from o->xn into
 * out; wg NULL: wu is phi3's fused gate | up; res not NULL: res += out too. */
sl_status sl__forward_ffn_dense(sl_ctx *c, const sl__side *o, const sl_weight *wg,
                                const sl_weight *wu, const sl_weight *wd, int32_t il, int64_t n,
                                float *out, float *res, sl_error *err);
/* forward_ffn.c: layer L's FFN (experts: its routed experts) split by neurons, the hot part on
 * the device, the cold one on the host; hot + cold into s->tmp of the layer's side s. */
sl_status sl__forward_ffn_hot_cold(sl_ctx *c, const sl__side *s, const sl__layer *L, int64_t n,
                                   bool experts, sl_error *err);
/* forward_ffn.c: layer L's FFN part (experts: its routed experts) that lives on the other side
 * of s, run there from s->xn (and the routing); the result back in s->tmp. */
sl_status sl__forward_ffn_elsewhere(sl_ctx *c, const sl__side *s, const sl__layer *L,
                                    int32_t il, int64_t n, bool experts, sl_error *err);
/* forward_ffn.c: MoE layer il's FFN from s->xn: router and top-k, the routed experts on their
 * path, the shared experts; the sum in s->tmp. res (NULL: none): the residual stream, which
 * the experts' last step may add the sum to itself (routed experts on the device, whole or
 * with hot ones, and no shared expert): then *added is true and s->tmp is scratch. */
sl_status sl__forward_moe_ffn(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, float *res,
                              bool *added, sl_error *err);

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
