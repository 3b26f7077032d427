/* runtime/engine/forward_graph.c: the decode graph of the forward pass (forward_impl.h).
 *
 * A one-token pass of one context whose layers all run on a cuda device, with nothing on the
 * host but routed experts in stream order (host_experts_fn: copies and a host function, no
 * wait), is captured once (base/device graphs) and replayed for the next tokens: one launch
 * instead of ~10 a layer, and none of forward.c's host work. What changes between tokens
 * lives in device memory the capture reads, not in arguments it froze: x (uploaded before
 * the launch), the positions (rope, the KV store and attention read them on the device).
 * What it froze - weight, cache and scratch addresses, the output rows - is kept by dropping
 * the graph where addresses may move (engine.c's refresh or rebind: a reload, a runtime's move)
 * and by re-capturing for other output rows; the host parts' records (async_parts, which the
 * host functions read) are reset to the one row before each launch. A capture is taken only
 * while the model has one context (model.h ctx_mu). A capture that fails (sim has no graphs;
 * anything that waits on the stream) runs that pass launched and ends the context's tries;
 * one that fails with programmatic dependent launch on is taken again with it off. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "runtime/engine/forward_impl.h"

bool sl__forward_graph_fits(const sl_ctx *c, int64_t n)
{
    const sl_model *m = c->m;
    if (!c->dev.dx || n != 1 || c->n_seqs != 1 || c->seqs[0].c != c || c->opt.no_graphs ||
        c->opt.profile_steps || c->graph_failed || c->rs || c->nstats ||
        !sl__model_cuda(m))
        return false;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        if (!c->layer_dev[il]) return false;
        /* a host part other than stream-ordered experts waits on the stream */
        if (sl__layer_moe(L)) {
            const sl__experts_path p = sl__forward_experts_path(c, il, n);
            if (p != SL__EXPERTS_DEVICE && p != SL__EXPERTS_ORDERED && p != SL__EXPERTS_HOT)
                return false;
        } else if (L->ffn_up->residency == SL_RES_PARTS || !sl__weight_on_device(L->ffn_up)) {
            return false;
        }
    }
    return true;
}

void sl__forward_graph_drop(sl_ctx *c)
{
    if (c->graph) sl_device_graph_destroy(c->m->dev, c->graph);
    c->graph = NULL;
}

/* Captures the pass's layers: SL_OK with c->graph set, or an error (nothing ran, counts as
 * before: the caller runs the pass launched). */
static sl_status graph_capture(sl_ctx *c, const sl__side **at, int64_t n, int64_t n_out,
                               sl_error *err)
{
    const sl_model *m = c->m;
    const uint64_t ls0 = c->stats.dev_layer_steps, nl0 = c->stats.dev_layers,
                   la0 = c->stats.dev_layer_launches;
    const uint64_t steps0 = c->dev.dx->steps;
    sl_status st = sl_device_capture_begin(m->dev, m->stream, err);
    if (st) return st;
    st = sl__forward_layers(c, at, n, n_out, err);
    sl_error e2;
    sl_graph *g = NULL;
    const sl_status end = sl_device_capture_end(m->dev, m->stream, &g, st ? &e2 : err);
    if (!st) st = end;
    c->graph_steps = c->stats.dev_layer_steps - ls0;
    c->graph_launches = c->stats.dev_layer_launches - la0;
    /* recorded, not run: the launch counts the steps (and a failed capture's launched rerun) */
    c->stats.dev_layer_steps = ls0;
    c->stats.dev_layer_launches = la0;
    c->stats.dev_layers = nl0;
    c->dev.dx->steps = steps0;
    if (st) {
        sl_device_graph_destroy(m->dev, g);
        return st;
    }
    c->graph = g;
    c->graph_out = n_out;
    c->stats.graph_captures++;
    return SL_OK;
}

sl_status sl__forward_graph_run(sl_ctx *c, const sl__side **at, int64_t n, int64_t n_out,
                                sl_error *err)
{
    const sl_model *m = c->m;
    /* x goes up before: its source is host memory the pass rewrites */
    sl_status st = sl__forward_move_x(c, at, &c->dev, n, err);
    if (st) return st;
    if (c->graph && c->graph_out != n_out) sl__forward_graph_drop(c);
    if (!c->graph) {
        /* only as the model's one context: another's work on the stream would be captured
         * (checked without the lock first: beside other contexts every pass comes here) */
        if (atomic_load(&c->m->n_ctx_live) != 1) return sl__forward_layers(c, at, n, n_out, err);
        pthread_mutex_lock(&c->m->ctx_mu);
        const bool alone = atomic_load(&c->m->n_ctx_live) == 1;
        sl_error ce;
        /* read before: a launch the attribute failed inside the capture may turn it off */
        const bool pdl = sl__dx_cuda_pdl(c->dev.raw);
        sl_status cst = alone ? graph_capture(c, at, n, n_out, &ce) : SL_OK;
        if (cst && pdl) {
            /* a driver that takes programmatic dependent launch in plain launches but not in
             * a capture (beside host functions, copies): captured again with it off; where
             * that succeeds PDL was the cause and stays off for this context (counted and
             * said as a failure, graphs run), else it was not, and PDL is back on for the
             * launched passes */
            char first[sizeof ce.msg];
            snprintf(first, sizeof first, "%s", ce.msg);
            sl__ctx_set_pdl(c, false);
            cst = graph_capture(c, at, n, n_out, &ce);
            if (!cst) {
                c->pdl_capture_refused = true;
                c->stats.graph_failures++;
                snprintf(c->graph_error, sizeof c->graph_error, "with programmatic dependent "
                         "launch (turned off): %.900s", first);
                c->stats.graph_error = c->graph_error;
            } else {
                sl__ctx_set_pdl(c, true);
                char both[sizeof ce.msg];
                snprintf(both, sizeof both, "%.480s (and without programmatic dependent "
                         "launch: %.480s)", first, ce.msg);
                snprintf(ce.msg, sizeof ce.msg, "%s", both);
            }
        }
        pthread_mutex_unlock(&c->m->ctx_mu);
        if (!alone) return sl__forward_layers(c, at, n, n_out, err);
        if (cst) {
            c->graph_failed = true;
            c->stats.graph_failures++;
            snprintf(c->graph_error, sizeof c->graph_error, "%s", ce.msg);
            c->stats.graph_error = c->graph_error;
            return sl__forward_layers(c, at, n, n_out, err);
        }
    }
    /* the host parts' records as captured: a pass between (a prefill) rewrote their rows */
    if (c->async_parts)
        for (int32_t il = 0; il < m->hp.n_layer; il++)
            c->async_parts[il] = (sl__async_part){.c = c, .layer = il, .n = n};
    if ((st = sl_device_graph_launch(m->dev, c->graph, m->stream, err))) return st;
    c->stats.graph_passes++;
    c->stats.dev_layer_steps += c->graph_steps;
    c->stats.dev_layer_launches += c->graph_launches;
    c->stats.dev_layers += (uint64_t)m->hp.n_layer;
    return SL_OK;
}
