/* runtime/engine/forward_ffn.c: a layer's FFN in the forward pass (forward.c runs the layers).
 *
 * A dense FFN on the layer's side; one split by neurons, hot part on the device and cold part
 * on the host (ffn_split.h); one that lives on the other side, its rows copied over and the sum
 * back. A MoE layer's router and top-k, then its routed experts on their path (one rule,
 * sl__forward_experts_path: host, device, split, the other side, streamed through the device,
 * resident hot ones, or the host's part in stream order), then the shared experts. */
#include "runtime/engine/ctx.h"
#include "runtime/engine/forward_impl.h"

/* ys[i] = ws[i] x for count matrices of the same x: one executor call where the executor
 * groups them (the host: one pool call and one activation quantization per token). */
static sl_status mm_many(const sl__side *s, const sl_weight *const *ws, int count,
                         const float *x, int64_t n, float *const *ys, sl_error *err)
{
    const sl__dx_vt *vt = s->dx->vt;
    if (vt->mm_many) return vt->mm_many(s->dx, ws, count, x, n, ys, err);
    for (int i = 0; i < count; i++) {
        sl_status st = vt->mm(s->dx, ws[i], x, n, ys[i], err);
        if (st) return st;
    }
    return SL_OK;
}

/* A dense FFN (or one part of a split one) on side o from o->xn: out = Wd (act(Wg xn) * Wu xn);
 * wg NULL: wu is the fused gate | up (phi3); res not NULL: then res += out (the residual add,
 * fused with down where the executor can).
 * The one dense-FFN sequence of the forward pass, whichever side or part runs it. */
sl_status sl__forward_ffn_dense(sl_ctx *c, const sl__side *o, const sl_weight *wg,
                                const sl_weight *wu, const sl_weight *wd, int32_t il, int64_t n,
                                float *out, float *res, sl_error *err)
{
    const sl__dx_vt *vt = o->dx->vt;
    const int64_t F = wd->ne[0];
    const sl_moe_act act = c->m->hp.act;
    /* llama's and granite's optional biases (a whole FFN only: hot-cold refuses them) */
    const sl__layer *L = il >= 0 ? &c->m->layers[il] : NULL;
    const bool biases = L && (L->ffn_gate_b || L->ffn_up_b || L->ffn_down_b);
    sl_weight fused[2];
    if (!wg) {
        fused[0] = rows_view(wu, 0, F);
        fused[1] = rows_view(wu, F, F);
        wg = &fused[0];
        wu = &fused[1];
    }
    sl_status st;
    /* ReLU: the neurons no token activates are skipped, exactly (dx.h relu_ffn) */
    if (act == SL_MOE_RELU && o->dx->sparse_ffn && !c->opt.relu_dense && !biases) {
        uint64_t cnt[3] = {0, 0, 0};
        st = vt->relu_ffn(o->dx, wg, wu, wd, o->xn, n, o->g, o->u, out, cnt, err);
        c->stats.ffn_neurons += cnt[0];
        c->stats.ffn_neurons_zero += cnt[1];
        c->stats.ffn_neurons_skipped += cnt[2];
        if (!st && c->nstats && il >= 0 && o == &c->host)
            sl_neuron_stats_add(&c->nstats[il], o->g, n);
        if (!st && res) st = vt->add(o->dx, res, out, res, n * wd->ne[1], err);
        return st;
    }
    if (biases) { /* llama's and granite's optional biases between the matmuls */
        const sl_weight *gu[2] = {wg, wu};
        float *const gu_y[2] = {o->g, o->u};
        if ((st = mm_many(o, gu, 2, o->xn, n, gu_y, err)) ||
            (L->ffn_gate_b && (st = vt->add_rows(o->dx, o->g, L->ffn_gate_b->data, n, F, err))) ||
            (L->ffn_up_b && (st = vt->add_rows(o->dx, o->u, L->ffn_up_b->data, n, F, err))) ||
            (st = vt->glu(o->dx, act, o->g, o->u, F * n, err)))
            return st;
    } else if ((st = vt->mm_glu(o->dx, wg, wu, act, o->xn, n, o->g, o->u, err))) {
        return st;
    }
    /* the profile of hot/cold placement: whole FFNs computed on the host (il < 0: a part) */
    if (c->nstats && il >= 0 && o == &c->host) sl_neuron_stats_add(&c->nstats[il], o->g, n);
    if (biases && L->ffn_down_b) {
        if ((st = vt->mm(o->dx, wd, o->g, n, out, err)) ||
            (st = vt->add_rows(o->dx, out, L->ffn_down_b->data, n, wd->ne[1], err)))
            return st;
        return res ? vt->add(o->dx, res, out, res, n * wd->ne[1], err) : SL_OK;
    }
    if (res) return vt->mm_add_norm(o->dx, wd, o->g, n, out, res, NULL, 0.0f, NULL, err);
    return vt->mm(o->dx, wd, o->g, n, out, err);
}

/* Part `part` (0 hot, 1 cold) of layer L's split FFN on side o, from o->xn (and for experts
 * the routing in o->topk_*) into o->tmp. */
static sl_status split_part(sl_ctx *c, const sl__side *o, const sl__layer *L, int part,
                            int64_t n, bool experts, sl_error *err)
{
    if (!experts) {
        const sl_weight *w = part ? L->split_cold : L->split_hot;
        return sl__forward_ffn_dense(c, o, &w[0], &w[1], &w[2], -1, n, o->tmp, NULL, err);
    }
    /* the hot part's view (cuda: its device arrays) is the context's; the cold one the host's */
    const sl__dx_moe cold = {.L = &L->moe_split->part[1]};
    const sl__dx_moe *M = part ? &cold : &c->dmoe[L - c->m->layers];
    return o->dx->vt->moe(o->dx, M, o->topk_idx, o->topk_w, n, (int32_t)c->m->hp.n_expert_used,
                          o->xn, o->tmp, NULL, err);
}

/* A layer's FFN split by neurons (HOT_COLD, scheduler/moe/ffn_split.h) — a dense FFN, or the
 * routed experts (`experts`: each side an sl_moe_layer of the experts' parts, run by that
 * side's executor from the routing in s->topk_*): the hot part runs on the device while the
 * host runs the cold part; the layer's side s gets hot + cold, in that order. The rows (and
 * the routing) go to the other side first and the host waits only for that copy (an event),
 * so on a GPU the hot kernels run while the CPU computes. */
sl_status sl__forward_ffn_hot_cold(sl_ctx *c, const sl__side *s, const sl__layer *L, int64_t n,
                                   bool experts, sl_error *err)
{
    sl__side *d = &c->dev, *h = &c->host;
    const sl_model *m = c->m;
    const int64_t K = m->hp.n_expert_used;
    const uint64_t xb = (uint64_t)(n * m->hp.n_embd) * sizeof(float);
    const uint64_t ib = (uint64_t)(n * K) * sizeof(int32_t);
    const uint64_t wb = (uint64_t)(n * K) * sizeof(float);
    const sl_copy_kind to_o = s == d ? SL_COPY_D2H : SL_COPY_H2D;
    sl__side *o = s == d ? h : d;
    sl_status st;
    if ((st = copy(c, o->xn, s->xn, xb, to_o, err)) ||
        (experts && ((st = copy(c, o->topk_idx, s->topk_idx, ib, to_o, err)) ||
                     (st = copy(c, o->topk_w, s->topk_w, wb, to_o, err)))) ||
        (s == d && (st = sl_device_event_record(m->dev, c->ev_xn, m->stream, err))))
        return st;
    if ((st = split_part(c, d, L, 0, n, experts, err))) return st;
    if (s == d && (st = sl_device_event_sync(m->dev, c->ev_xn, err))) return st;
    if ((st = split_part(c, h, L, 1, n, experts, err))) return st;
    if (s == d)
        return (st = copy(c, d->att, h->tmp, xb, SL_COPY_H2D, err)) ? st
               : d->dx->vt->add(d->dx, d->tmp, d->att, d->tmp, n * m->hp.n_embd, err);
    if ((st = copy(c, h->att, d->tmp, xb, SL_COPY_D2H, err)) || (st = sync_dev(c, err)))
        return st;
    return h->dx->vt->add(h->dx, h->att, h->tmp, h->tmp, n * m->hp.n_embd, err);
}

/* The side a layer's FFN part lives on, when it is not the layer's own. */
static sl__side *other(sl_ctx *c, const sl__side *s)
{
    return s == &c->host ? &c->dev : &c->host;
}

/* Copies bytes from side `from` to the other side. */
static sl_status cross(sl_ctx *c, const sl__side *from, void *dst, const void *src,
                       uint64_t bytes, sl_error *err)
{
    return copy(c, dst, src, bytes, from == &c->host ? SL_COPY_H2D : SL_COPY_D2H, err);
}

/* After a device layer's host experts, the pool's workers spin this long rather than sleep:
 * the next such layer comes after the device's part of the layers between (~0.25 ms a layer
 * on the H200 run of 2026-11-30, launch-bound), longer than the pool's own spin, and a futex
 * wake-up of every worker per layer is what the CPU expert path would pay instead. */
#define HOST_EXPERTS_AWAKE_NS 2000000u

/* The first failure of a pass's host functions, kept for its end (sl__forward). */
static void async_fail(sl_ctx *c, sl_status st, const sl_error *e)
{
    if (st && !c->async_st) {
        c->async_err = *e;
        c->async_st = st;
    }
}

/* Layer il's routed experts computed on the host side o, from o->xn and its routing into
 * o->tmp: through Expert Deferral where it takes the layer this pass (defer.h; async: in a
 * host function, the deferred part then on its worker), else the host executor's moe step. */
static sl_status host_moe(sl_ctx *c, const sl__side *o, int32_t il, int64_t n, bool async,
                          sl_error *err)
{
    if (sl__defer_takes(c, il))
        return sl__defer_moe(c, il, n, o->xn, o->topk_idx, o->topk_w, o->tmp, async, err);
    const sl__dx_moe hm = {.L = &c->m->layers[il].moe};
    return o->dx->vt->moe(o->dx, &hm, o->topk_idx, o->topk_w, n, c->m->hp.n_expert_used, o->xn,
                          o->tmp, NULL, err);
}

/* The host part of a device layer whose routed experts live on the host, ordered on the
 * stream (a host function: the stream's worker on sim, CUDA's callback thread on cuda): it
 * runs when the rows and the routing have come down, and what the device does next waits for
 * it, so the host thread never blocks here and goes on queuing the next layers. */
static void host_experts_fn(void *user)
{
    const sl__async_part *p = user;
    sl_ctx *c = p->c;
    const sl__side *h = &c->host;
    sl_error e;
    sl__hot_count(c, p->layer, h->topk_idx, p->n * c->m->hp.n_expert_used);
    const sl_status st = host_moe(c, h, p->layer, p->n, true, &e);
    sl_cpu_pool_keep_awake(c->pool, HOST_EXPERTS_AWAKE_NS);
    async_fail(c, st, &e);
}

/* The host's part of a layer with resident hot experts (hot.h): the other slots' rows. */
static void host_cold_fn(void *user)
{
    const sl__async_part *p = user;
    sl_ctx *c = p->c;
    sl_error e;
    sl__hot_count(c, p->layer, c->host.topk_idx, p->n * c->m->hp.n_expert_used);
    const sl_status st = sl__hot_host_rows(c, p->layer, c->host.topk_idx, p->n, c->host.xn, &e);
    sl_cpu_pool_keep_awake(c->pool, HOST_EXPERTS_AWAKE_NS);
    async_fail(c, st, &e);
}

/* A streamed prefill's routing counted for the hot experts' choice. */
static void host_count_fn(void *user)
{
    const sl__async_part *p = user;
    sl__hot_count(p->c, p->layer, p->c->host.topk_idx, p->n * p->c->m->hp.n_expert_used);
}

/* A device layer's routed experts with resident hot ones (hot.h), in stream order: the
 * device's slots first (cuda: on a side stream, overlapping what follows), the rows and
 * routing down, the host function's rows of the other slots, those up, the join on the
 * device into s->tmp (res: added to res instead, vt->moe_join). */
static sl_status hot_experts(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, float *res,
                             sl_error *err)
{
    const sl_model *m = c->m;
    const int64_t E = m->hp.n_embd, K = m->hp.n_expert_used;
    const sl__hot *h = &c->hot;
    const sl__hot_layer *HL = &h->L[il];
    sl__side *o = &c->host;
    sl__async_part *p = &c->async_parts[il];
    *p = (sl__async_part){.c = c, .layer = il, .n = n};
    sl_status st = s->dx->vt->moe_rows(s->dx, &HL->dx, HL->d_mask, s->topk_idx, n,
                                       (int32_t)K, s->xn, h->d_rows[0], err);
    if (st) return st;
    if ((st = cross(c, s, o->xn, s->xn, (uint64_t)(n * E) * sizeof(float), err)) ||
        (st = cross(c, s, o->topk_idx, s->topk_idx, (uint64_t)(n * K) * sizeof(int32_t),
                    err)) ||
        (st = sl_device_launch_host(m->dev, m->stream, host_cold_fn, p, err)) ||
        (st = cross(c, o, h->d_rows[1], h->h_rows, (uint64_t)(n * K * E) * sizeof(float),
                    err))) {
        /* the join still runs: the device's side work is then behind the model's stream,
         * which the failed pass syncs (s->tmp is scratch) */
        sl_error e2;
        (void)s->dx->vt->moe_join(s->dx, h->d_rows[0], h->d_rows[1], s->topk_idx, s->topk_w, n,
                                  (int32_t)K, E, s->tmp, NULL, &e2);
        return st;
    }
    return s->dx->vt->moe_join(s->dx, h->d_rows[0], h->d_rows[1], s->topk_idx, s->topk_w, n,
                               (int32_t)K, E, s->tmp, res, err);
}

/* Whether a device layer's host experts run in stream order (host_experts_fn): a host
 * function may not call into the device, so only the CPU scheduler's work can, and not with
 * sched order=sync (a blocking sync, the experts on this thread). */
static bool experts_in_stream_order(const sl_ctx *c, const sl__side *s)
{
    return s == &c->dev && !c->experts_sync && (sl_moe_caps(c->moe) & SL_MOE_CAP_HOST_ONLY);
}

/* Runs a layer's FFN part that lives on the other side o of the layer's side s: the
 * normalised rows (and the routing, for experts) go over, the part runs there through o's
 * executor into o->tmp, and the sum comes back into s->tmp. The host reads what came down only
 * after a sync; what goes up is ordered on the stream before the device steps that read it. */
sl_status sl__forward_ffn_elsewhere(sl_ctx *c, const sl__side *s, const sl__layer *L,
                                    int32_t il, int64_t n, bool experts, sl_error *err)
{
    const sl_model *m = c->m;
    const int64_t E = m->hp.n_embd, K = m->hp.n_expert_used;
    sl__side *o = other(c, s);
    sl_status st;
    const bool ordered = experts && experts_in_stream_order(c, s);
    if ((st = cross(c, s, o->xn, s->xn, (uint64_t)(n * E) * sizeof(float), err)))
        return st;
    if (experts &&
        ((st = cross(c, s, o->topk_idx, s->topk_idx, (uint64_t)(n * K) * sizeof(int32_t),
                     err)) ||
         (st = cross(c, s, o->topk_w, s->topk_w, (uint64_t)(n * K) * sizeof(float), err))))
        return st;
    if (ordered) {
        sl__async_part *p = &c->async_parts[il]; /* the host thread may run layers ahead */
        *p = (sl__async_part){.c = c, .layer = il, .n = n};
        if ((st = sl_device_launch_host(m->dev, m->stream, host_experts_fn, p, err))) return st;
        return cross(c, o, s->tmp, o->tmp, (uint64_t)(n * E) * sizeof(float), err);
    }
    if (o == &c->host && (st = sync_dev(c, err))) return st;
    const sl__dx_vt *vt = o->dx->vt;
    if (experts && o == &c->host) {
        st = host_moe(c, o, il, n, false, err);
        sl_cpu_pool_keep_awake(c->pool, HOST_EXPERTS_AWAKE_NS);
    } else if (experts) {
        st = vt->moe(o->dx, &c->dmoe[il], o->topk_idx, o->topk_w, n, (int32_t)K, o->xn, o->tmp,
                     NULL, err);
    } else {
        st = sl__forward_ffn_dense(c, o, L->ffn_gate, L->ffn_up, L->ffn_down, il, n, o->tmp,
                                   NULL, err);
    }
    if (st) return st;
    if ((st = cross(c, o, s->tmp, o->tmp, (uint64_t)(n * E) * sizeof(float), err)))
        return st;
    return s == &c->host ? sync_dev(c, err) : SL_OK;
}

/* Whether a MoE layer's routed experts are on the device (whole; a split: moe_split). */
static bool experts_on_device(const sl__layer *L)
{
    return L->moe_on_device && L->moe_on_device[0];
}

sl__experts_path sl__forward_experts_path(const sl_ctx *c, int32_t il, int64_t n)
{
    const sl__layer *L = &c->m->layers[il];
    const bool dev_layer = c->layer_dev && c->layer_dev[il], dev = experts_on_device(L);
    if (L->moe_split) return SL__EXPERTS_SPLIT;
    if (!dev_layer) return dev ? SL__EXPERTS_TO_DEVICE : SL__EXPERTS_HOST;
    if (dev) return SL__EXPERTS_DEVICE;
    if (sl__stream_wanted(c, il, n)) return SL__EXPERTS_STREAM;
    if (!experts_in_stream_order(c, &c->dev)) return SL__EXPERTS_SYNC;
    return sl__hot_ready(c, il, n) ? SL__EXPERTS_HOT : SL__EXPERTS_ORDERED;
}

/* A prefill's layer through the device (stream.h); its routing counted on the host for the
 * hot experts' choice while the layer warms (hot.h). */
static sl_status stream_moe(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, sl_error *err)
{
    sl_status st = sl__stream_moe(c, s, il, n, err);
    if (st || !sl__hot_warming(c, il)) return st;
    const int64_t K = c->m->hp.n_expert_used;
    sl__async_part *p = &c->async_parts[il];
    *p = (sl__async_part){.c = c, .layer = il, .n = n};
    if ((st = cross(c, s, c->host.topk_idx, s->topk_idx, (uint64_t)(n * K) * sizeof(int32_t),
                    err)))
        return st;
    return sl_device_launch_host(c->m->dev, c->m->stream, host_count_fn, p, err);
}

sl_status sl__forward_moe_ffn(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, float *res,
                              bool *added, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const sl__dx_vt *vt = s->dx->vt;
    const int32_t X = hp->n_expert, K = hp->n_expert_used;
    const int64_t E = hp->n_embd;
    sl_status st;
    const sl_router_params rp = {.gating = hp->gating, .n_expert = X, .k = K,
                                 .norm_topk = hp->norm_topk,
                                 .weight_scale = hp->expert_weights_scale,
                                 .bias = L->exp_probs_b ? L->exp_probs_b->data : NULL,
                                 .n_group = hp->n_group, .top_group = hp->n_group_used};
    /* the router GEMV (+ bias) and top-k: one step */
    if ((st = vt->mm_router(s->dx, L->gate_inp, L->gate_inp_b ? L->gate_inp_b->data : NULL,
                            s->xn, n, s->router, &rp, s->topk_idx, s->topk_w, err)))
        return st;
    /* the residual add in the experts' last step where no shared expert follows them */
    float *r = res && !L->gate_shexp ? res : NULL;
    *added = false;
    switch (sl__forward_experts_path(c, il, n)) {
    case SL__EXPERTS_SPLIT: st = sl__forward_ffn_hot_cold(c, s, L, n, true, err); break;
    case SL__EXPERTS_HOST: st = host_moe(c, s, il, n, false, err); break;
    case SL__EXPERTS_DEVICE:
        st = vt->moe(s->dx, &c->dmoe[il], s->topk_idx, s->topk_w, n, K, s->xn, s->tmp, r, err);
        *added = r != NULL;
        break;
    case SL__EXPERTS_STREAM: st = stream_moe(c, s, il, n, err); break; /* one copy, all rows */
    case SL__EXPERTS_HOT:
        st = hot_experts(c, s, il, n, r, err);
        *added = r != NULL;
        break;
    default: /* to the device, ordered, sync */
        st = sl__forward_ffn_elsewhere(c, s, L, il, n, true, err);
    }
    if (st) return st;
    if (L->gate_shexp && !L->gate_inp_shexp) { /* DeepSeek-MoE: shared experts, ungated */
        if ((st = vt->mm_glu(s->dx, L->gate_shexp, L->up_shexp, m->tr->act, s->xn, n, s->g,
                             s->u, err)) ||
            (st = vt->mm(s->dx, L->down_shexp, s->g, n, s->att, err)))
            return st;
        return vt->add(s->dx, s->tmp, s->att, s->tmp, n * E, err);
    }
    if (!m->tr->shared_expert) return SL_OK;
    /* shared expert, gated per token by sigmoid(w . xn) (llm_build_qwen2moe) */
    const int64_t S = L->gate_shexp->ne[1];
    const sl_weight *sh[3] = {L->gate_shexp, L->up_shexp, L->gate_inp_shexp};
    float *const sh_y[3] = {s->g, s->u, s->sh};
    if ((st = mm_many(s, sh, 3, s->xn, n, sh_y, err)) ||
        (st = vt->glu(s->dx, m->tr->act, s->g, s->u, S * n, err)) ||
        (st = vt->mm(s->dx, L->down_shexp, s->g, n, s->att, err))) /* att is free here */
        return st;
    return vt->gated_add(s->dx, s->tmp, s->att, s->sh, n, E, err);
}
