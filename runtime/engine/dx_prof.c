/* runtime/engine/dx_prof.c: the step profiler (sl_ctx_options.profile_steps) — an executor that
 * runs every step through the one it wraps and times it, so that a GPU run says which steps a
 * token's time goes to (issue 32: the whole-GPU decode ran at 3% of HBM with 8 steps a layer,
 * and only a per-step time tells a slow kernel from launch gaps).
 *
 * cuda: an event pair on the stream around each step (its device time: from the first of its
 * kernels being reached to the last finishing) and the idle stream time since the previous
 * step's end event (the gap: the host enqueueing later than the GPU needed the work); events
 * are settled at the end of each pass, when the pass's final sync has completed them, or when
 * the ring fills (a blocking sync mid-pass). sim and host: the host clock around each step (sim
 * steps run on the calling thread after draining the stream), no gap. On cuda moe_rows forks
 * its kernels onto a second stream beside the host part (dx.h), so its pair times the fork
 * (~0) and their time shows in moe_join's, which waits for them (the wrapper sees only the
 * model's stream; read the two steps' sum as the resident experts' part).
 * Totals accumulate into the context's table (sl__dx_prof_totals), which outlives executors
 * re-created on a rebind. The wrapped executor's counters are mirrored after each step. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/engine/dx.h"

#define PROF_RING 1024 /* steps between settles: ~2.5 decode tokens of a 48-layer MoE */

typedef struct prof {
    sl__dx base;
    sl__dx_vt vt;               /* the wrapper's table: NULL where the inner one is NULL */
    sl__dx *in;
    sl__dx_prof_totals *tot;
    sl_device *dev;             /* cuda: events on stream; NULL: the host clock */
    sl_stream *stream;
    sl_event *ev0[PROF_RING], *ev1[PROF_RING];
    uint8_t op[PROF_RING];
    int k;                      /* recorded pairs not settled yet */
    double t0;                  /* host clock: the running step's start */
} prof;

const char *const sl__dx_prof_op_names[SL__DX_PROF_N_OPS] = {
#define PROF_NAME_(name) #name,
    SL__DX_PROF_OPS(PROF_NAME_)
#undef PROF_NAME_
};

enum {
#define PROF_ENUM_(name) OP_##name,
    SL__DX_PROF_OPS(PROF_ENUM_)
#undef PROF_ENUM_
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Moves the recorded pairs into the totals (their events complete: synced first). */
static sl_status settle(prof *p, sl_error *err)
{
    if (!p->dev || p->k == 0) return SL_OK;
    sl_status st = sl_device_event_sync(p->dev, p->ev1[p->k - 1], err);
    for (int i = 0; !st && i < p->k; i++) {
        float ms = 0, gap = 0;
        st = sl_device_event_elapsed_ms(p->dev, p->ev0[i], p->ev1[i], &ms, err);
        if (!st && i > 0) st = sl_device_event_elapsed_ms(p->dev, p->ev1[i - 1], p->ev0[i], &gap, err);
        if (st) break;
        p->tot->seconds[p->op[i]] += 1e-3 * ms;
        p->tot->gap_seconds[p->op[i]] += gap > 0 ? 1e-3 * gap : 0.0;
    }
    p->k = 0;
    return st;
}

static sl_status begin(prof *p, sl_error *err)
{
    if (!p->dev) {
        p->t0 = now_s();
        return SL_OK;
    }
    if (p->k == PROF_RING) {
        sl_status st = settle(p, err);
        if (st) return st;
    }
    return sl_device_event_record(p->dev, p->ev0[p->k], p->stream, err);
}

static sl_status end(prof *p, int op, sl_status st, sl_error *err)
{
    p->base.steps = p->in->steps;
    p->base.drains = p->in->drains;
    p->tot->calls[op]++;
    if (!p->dev) {
        p->tot->seconds[op] += now_s() - p->t0;
        return st;
    }
    /* the pair is kept even after a failed step: its start event is recorded */
    sl_error e2;
    sl_status rs = sl_device_event_record(p->dev, p->ev1[p->k], p->stream, st ? &e2 : err);
    if (rs) {
        /* a lost end event: the pass fails anyway (or fails now); its start is dropped */
        return st ? st : rs;
    }
    p->op[p->k++] = (uint8_t)op;
    return st;
}

/* One forwarding function per step: the inner step between begin and end. */
#define FWD(name, params, ...)                                                               \
    static sl_status p_##name params                                                         \
    {                                                                                        \
        prof *p = (prof *)x;                                                                 \
        sl_status st = begin(p, err);                                                        \
        if (st) return st;                                                                   \
        return end(p, OP_##name, p->in->vt->name(p->in, __VA_ARGS__), err);                 \
    }

FWD(mm, (sl__dx *x, const sl_weight *w, const float *in, int64_t n, float *y, sl_error *err),
    w, in, n, y, err)
FWD(mm_many, (sl__dx *x, const sl_weight *const *ws, int count, const float *in, int64_t n,
              float *const *ys, sl_error *err),
    ws, count, in, n, ys, err)
FWD(rms_norm, (sl__dx *x, const float *in, const float *w, float *y, int64_t rows, int64_t dim,
               float eps, sl_error *err),
    in, w, y, rows, dim, eps, err)
FWD(add, (sl__dx *x, const float *a, const float *b, float *y, int64_t n, sl_error *err), a, b,
    y, n, err)
FWD(add_rows, (sl__dx *x, float *y, const float *b, int64_t rows, int64_t dim, sl_error *err), y,
    b, rows, dim, err)
FWD(scale, (sl__dx *x, float *v, int64_t n, float s, sl_error *err), v, n, s, err)
FWD(glu, (sl__dx *x, sl_moe_act act, float *g, const float *u, int64_t n, sl_error *err), act, g,
    u, n, err)
FWD(rope, (sl__dx *x, float *v, int64_t n_tok, int32_t n_head, int32_t head_dim,
           const int32_t *pos, const sl_rope_params *rp, sl_error *err),
    v, n_tok, n_head, head_dim, pos, rp, err)
FWD(kv_store, (sl__dx *x, void *cache, bool f16, int64_t row, const int32_t *pos, int64_t n,
               const float *src, sl_error *err),
    cache, f16, row, pos, n, src, err)
FWD(attn, (sl__dx *x, const float *q, const void *kc, const void *vc, const sl_attn_params *ap,
           const int32_t *pos, int64_t n, float *out, sl_error *err),
    q, kc, vc, ap, pos, n, out, err)
FWD(router, (sl__dx *x, const float *logits, int64_t n, const sl_router_params *rp,
             int32_t *idx, float *w, sl_error *err),
    logits, n, rp, idx, w, err)
FWD(moe, (sl__dx *x, const sl__dx_moe *L, const int32_t *idx, const float *w, int64_t n,
          int32_t k, const float *in, float *out, float *res, sl_error *err),
    L, idx, w, n, k, in, out, res, err)
FWD(moe_rows, (sl__dx *x, const sl__dx_moe *L, const uint8_t *mask, const int32_t *idx,
               int64_t n, int32_t k, const float *in, float *rows, sl_error *err),
    L, mask, idx, n, k, in, rows, err)
FWD(moe_join, (sl__dx *x, const float *ra, const float *rb, const int32_t *idx, const float *w,
               int64_t n, int32_t k, int64_t dim, float *out, float *res, sl_error *err),
    ra, rb, idx, w, n, k, dim, out, res, err)
FWD(mm_heads, (sl__dx *x, const sl_weight *w, const float *src, int64_t src_ts, int64_t src_hs,
               float *dst, int64_t dst_ts, int64_t dst_hs, int64_t n, sl_error *err),
    w, src, src_ts, src_hs, dst, dst_ts, dst_hs, n, err)
FWD(copy2d, (sl__dx *x, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
             int64_t rows, int64_t width, sl_error *err),
    dst, dst_stride, src, src_stride, rows, width, err)
FWD(argmax, (sl__dx *x, const float *in, int64_t n, sl_argmax_result *r, sl_error *err), in, n,
    r, err)
FWD(relu_ffn, (sl__dx *x, const sl_weight *wg, const sl_weight *wu, const sl_weight *wd,
               const float *in, int64_t n, float *g, float *u, float *y, uint64_t cnt[3],
               sl_error *err),
    wg, wu, wd, in, n, g, u, y, cnt, err)
FWD(gated_add, (sl__dx *x, float *out, const float *y, const float *logit, int64_t n,
                int64_t dim, sl_error *err),
    out, y, logit, n, dim, err)
FWD(norm_mm, (sl__dx *x, const float *in, const float *w, int64_t n, int64_t dim, float eps,
              float *xn, const sl_weight *const *ws, int count, float *const *ys, sl_error *err),
    in, w, n, dim, eps, xn, ws, count, ys, err)
FWD(qk_rope_store, (sl__dx *x, const sl__dx_qkv *a, sl_error *err), a, err)
FWD(mm_add_norm, (sl__dx *x, const sl_weight *w, const float *in, int64_t n, float *tmp,
                  float *res, const float *norm_w, float eps, float *xn, sl_error *err),
    w, in, n, tmp, res, norm_w, eps, xn, err)
FWD(mm_router, (sl__dx *x, const sl_weight *w, const float *bias, const float *xn, int64_t n,
                float *logits, const sl_router_params *rp, int32_t *idx, float *wts,
                sl_error *err),
    w, bias, xn, n, logits, rp, idx, wts, err)
FWD(mm_glu, (sl__dx *x, const sl_weight *wg, const sl_weight *wu, sl_moe_act act,
             const float *xn, int64_t n, float *g, float *u, sl_error *err),
    wg, wu, act, xn, n, g, u, err)
#undef FWD

static void p_destroy(sl__dx *x)
{
    prof *p = (prof *)x;
    if (p->dev)
        for (int i = 0; i < PROF_RING; i++) {
            if (p->ev0[i]) sl_device_event_destroy(p->dev, p->ev0[i]);
            if (p->ev1[i]) sl_device_event_destroy(p->dev, p->ev1[i]);
        }
    sl__dx_destroy(p->in);
    free(p);
}

sl_status sl__dx_prof_create(sl_device *dev, sl_stream *stream, sl__dx *inner,
                             sl__dx_prof_totals *tot, sl__dx **out, sl_error *err)
{
    *out = NULL;
    if (!inner || !tot || (dev && !stream))
        return sl_error_set(err, SL_ERR_INVALID, "sl__dx_prof_create: %s is NULL",
                            !inner ? "inner" : !tot ? "tot" : "stream");
    prof *p = calloc(1, sizeof *p);
    if (!p) return sl_error_set(err, SL_ERR_NOMEM, "step profiler: out of memory");
    p->in = inner;
    p->tot = tot;
    p->dev = dev && sl_device_kind_get(dev) == SL_DEVICE_CUDA ? dev : NULL;
    p->stream = stream;
    sl_status st = SL_OK;
    for (int i = 0; p->dev && !st && i < PROF_RING; i++) {
        st = sl_device_event_create(p->dev, &p->ev0[i], err);
        if (!st) st = sl_device_event_create(p->dev, &p->ev1[i], err);
    }
    if (st) {
        p->in = NULL; /* the caller keeps inner on failure */
        p_destroy(&p->base);
        return st;
    }
    const sl__dx_vt *v = inner->vt;
#define PROF_VT_(name) p->vt.name = v->name ? p_##name : NULL;
    SL__DX_PROF_OPS(PROF_VT_)
#undef PROF_VT_
    p->vt.destroy = p_destroy;
    p->base.vt = &p->vt;
    p->base.sparse_ffn = inner->sparse_ffn;
    p->base.steps = inner->steps;
    p->base.drains = inner->drains;
    *out = &p->base;
    return SL_OK;
}

sl_status sl__dx_prof_settle(sl__dx *x, sl_error *err)
{
    if (!x || x->vt->destroy != p_destroy) return SL_OK;
    return settle((prof *)x, err);
}
