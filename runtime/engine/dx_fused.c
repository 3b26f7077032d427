/* runtime/engine/dx_fused.c: the fused steps of dx.h as their plain steps, in order, through
 * the executor's own vt — the definition every executor's fused op matches. The host and sim
 * executors use these as they are (the same kernels in the same order: the same bits); cuda
 * replaces the parts it has fused kernels for (dx_cuda.c). Each call counts one step: the
 * plain steps' counts are folded into it (their sim drains stay, and after the first find the
 * stream idle). */
#include "runtime/engine/dx.h"

static sl_status one_step(sl__dx *x, uint64_t steps0, sl_status st)
{
    x->steps = steps0 + 1;
    return st;
}

/* ys[i] = ws[i] xn: one mm_many where the executor groups them, else mm calls */
static sl_status mm_group(sl__dx *x, const sl_weight *const *ws, int count, const float *in,
                          int64_t n, float *const *ys, sl_error *err)
{
    if (x->vt->mm_many) return x->vt->mm_many(x, ws, count, in, n, ys, err);
    for (int i = 0; i < count; i++) {
        sl_status st = x->vt->mm(x, ws[i], in, n, ys[i], err);
        if (st) return st;
    }
    return SL_OK;
}

sl_status sl__dx_fused_norm_mm(sl__dx *x, const float *in, const float *w, int64_t n,
                               int64_t dim, float eps, float *xn, const sl_weight *const *ws,
                               int count, float *const *ys, sl_error *err)
{
    const uint64_t s0 = x->steps;
    sl_status st = x->vt->rms_norm(x, in, w, xn, n, dim, eps, err);
    if (!st && count) st = mm_group(x, ws, count, xn, n, ys, err);
    return one_step(x, s0, st);
}

sl_status sl__dx_fused_qk_rope_store(sl__dx *x, const sl__dx_qkv *a, sl_error *err)
{
    const uint64_t s0 = x->steps;
    const sl__dx_vt *vt = x->vt;
    const int64_t D = a->head_dim, KV = (int64_t)a->n_head_kv * D;
    sl_status st = SL_OK;
    for (int pass = 0; pass < 2 && !st; pass++) { /* norms, rope; or rope, norms */
        if (pass == (int)a->norm_after_rope) {
            if (a->q_norm)
                st = vt->rms_norm(x, a->q, a->q_norm, a->q, a->n * a->n_head, D, a->eps, err);
            if (!st && a->k_norm)
                st = vt->rms_norm(x, a->k, a->k_norm, a->k, a->n * a->n_head_kv, D, a->eps,
                                  err);
        } else {
            st = vt->rope(x, a->q, a->n, a->n_head, a->head_dim, a->pos, a->rope, err);
            if (!st) st = vt->rope(x, a->k, a->n, a->n_head_kv, a->head_dim, a->pos, a->rope, err);
        }
    }
    if (!st) st = vt->kv_store(x, a->kc, a->f16, KV, a->pos, a->n, a->k, err);
    if (!st) st = vt->kv_store(x, a->vc, a->f16, KV, a->pos, a->n, a->v, err);
    return one_step(x, s0, st);
}

sl_status sl__dx_fused_mm_add_norm(sl__dx *x, const sl_weight *w, const float *in, int64_t n,
                                   float *tmp, float *res, const float *norm_w, float eps,
                                   float *xn, sl_error *err)
{
    const uint64_t s0 = x->steps;
    const int64_t rows = w->ne[1];
    sl_status st = x->vt->mm(x, w, in, n, tmp, err);
    if (!st) st = x->vt->add(x, res, tmp, res, n * rows, err);
    if (!st && norm_w) st = x->vt->rms_norm(x, res, norm_w, xn, n, rows, eps, err);
    return one_step(x, s0, st);
}

sl_status sl__dx_fused_mm_router(sl__dx *x, const sl_weight *w, const float *bias,
                                 const float *xn, int64_t n, float *logits,
                                 const sl_router_params *p, int32_t *idx, float *wts,
                                 sl_error *err)
{
    const uint64_t s0 = x->steps;
    sl_status st = x->vt->mm(x, w, xn, n, logits, err);
    if (!st && bias) st = x->vt->add_rows(x, logits, bias, n, w->ne[1], err);
    if (!st) st = x->vt->router(x, logits, n, p, idx, wts, err);
    return one_step(x, s0, st);
}

sl_status sl__dx_fused_mm_glu(sl__dx *x, const sl_weight *wg, const sl_weight *wu,
                              sl_moe_act act, const float *xn, int64_t n, float *g, float *u,
                              sl_error *err)
{
    const uint64_t s0 = x->steps;
    const sl_weight *gu[2] = {wg, wu};
    float *const ys[2] = {g, u};
    sl_status st = mm_group(x, gu, 2, xn, n, ys, err);
    if (!st) st = x->vt->glu(x, act, g, u, wg->ne[1] * n, err);
    return one_step(x, s0, st);
}
