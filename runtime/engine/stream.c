/* runtime/engine/stream.c: see stream.h. */
#include "runtime/engine/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/repack.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "runtime/engine/ctx.h"

static void undo_fn(void *user)
{
    const sl__r8_undo *u = user;
    /* checked by the callers: rows of whole groups, cols of whole blocks */
    (void)sl_repack_q4_K_r8_undo(u->data, u->data, u->rows, u->cols, NULL);
}

sl_status sl__r8_undo_enqueue(const sl_ctx *c, sl_cuda_ctx *cu, sl__r8_undo *rec, void *data,
                              int64_t rows, int64_t cols, sl_error *err)
{
    if (cu) return sl_cuda_q4_K_r8_undo(cu, data, rows, cols, err);
    *rec = (sl__r8_undo){.data = data, .rows = rows, .cols = cols};
    return sl_device_launch_host(c->m->dev, c->m->stream, undo_fn, rec, err);
}


/* The staging layout of one layer: where gate, up, down and the three biases start, and one
 * expert's bytes of each projection (the device's type: a repacked Q4_K_R8 has Q4_K's). */
typedef struct layout {
    uint64_t off[6], pb[3], total;
    int64_t rows[3], cols[3]; /* a projection's (sl__expert_shape) */
} layout;

uint64_t sl__stream_bytes_of(const uint64_t bytes[6])
{
    return sl__dx_regions(bytes, 6, NULL);
}

bool sl__expert_shape(const sl_moe_layer *H, int64_t rows[3], int64_t cols[3], uint64_t pb[3])
{
    const uint32_t t[3] = {H->type_gate, H->type_up, H->type_down};
    for (int p = 0; p < 3; p++) {
        rows[p] = p == 2 ? H->n_embd : H->n_ff;
        cols[p] = p == 2 ? H->n_ff : H->n_embd;
        const uint64_t rb = sl_quant_row_bytes(sl_repack_base_type(t[p]), cols[p]);
        if (!rb) return false;
        pb[p] = rb * (uint64_t)rows[p];
    }
    return true;
}

static bool layout_of(const sl__layer *L, layout *o)
{
    if (!sl__layer_moe(L) || L->moe_split) return false;
    const sl_moe_layer *H = &L->moe;
    const uint64_t X = (uint64_t)H->n_expert;
    const float *b[3] = {H->gate_b, H->up_b, H->down_b};
    if (!sl__expert_shape(H, o->rows, o->cols, o->pb)) return false;
    uint64_t bytes[6];
    for (int p = 0; p < 3; p++) {
        bytes[p] = X * o->pb[p];
        bytes[3 + p] = b[p] ? X * (uint64_t)o->rows[p] * sizeof(float) : 0;
    }
    o->total = sl__dx_regions(bytes, 6, o->off);
    return true;
}

uint64_t sl__stream_layer_bytes(const sl_model *m, int32_t il)
{
    layout l;
    return il >= 0 && il < m->hp.n_layer && layout_of(&m->layers[il], &l) ? l.total : 0;
}

bool sl__experts_streamable(const sl_ctx *c, int32_t il)
{
    const sl__layer *L = &c->m->layers[il];
    if (!c->layer_dev || !c->layer_dev[il] || !sl__layer_moe(L) || L->moe_split ||
        L->moe_on_device[0])
        return false;
    const sl_device_kind k = sl_device_kind_get(c->m->dev);
    const sl_moe_layer *H = &L->moe;
    const uint32_t t[3] = {H->type_gate, H->type_up, H->type_down};
    const int64_t cols[3] = {H->n_embd, H->n_embd, H->n_ff};
    for (int p = 0; p < 3; p++) {
        if (!sl__dx_supports(k, sl_repack_base_type(t[p]), SL__DX_OP_MATVEC)) return false;
        if (k == SL_DEVICE_CUDA && t[p] == SL_TYPE_Q4_K_R8 && !sl_cuda_q4_K_r8_undo_takes(cols[p]))
            return false;
    }
    return true;
}

sl_status sl__stream_setup(sl_ctx *c, sl_error *err)
{
    sl__stream *s = &c->stream;
    sl_model *m = c->m;
    if (!s->min_tokens || c->cap < s->min_tokens || !c->dev.dx || !m->hp.n_expert) return SL_OK;
    bool any = false;
    for (int32_t il = 0; il < m->hp.n_layer && !any; il++)
        any = sl__experts_streamable(c, il) && sl__stream_layer_bytes(m, il);
    if (!any) return SL_OK;
    pthread_mutex_lock(&m->stream_mu); /* a new context may find room an earlier one did not */
    m->stream_failed = false;
    pthread_mutex_unlock(&m->stream_mu);
    const size_t n_ptr = (size_t)m->hp.n_layer * 3 * (size_t)m->hp.n_expert;
    void *dp = NULL;
    sl_error e;
    /* no room on the device: the layers' experts stay on the CPU, as without streaming */
    if (sl__model_cuda(m) && sl__ctx_dev_take(c, n_ptr * sizeof(void *), &dp, &e)) return SL_OK;
    s->view = calloc((size_t)m->hp.n_layer, sizeof *s->view);
    s->hp = calloc(n_ptr, sizeof *s->hp);
    s->on_dev = malloc((size_t)m->hp.n_expert * sizeof *s->on_dev);
    s->skip = malloc((size_t)m->hp.n_expert * sizeof *s->skip);
    s->undo = calloc((size_t)m->hp.n_layer * 3, sizeof *s->undo);
    if (!s->view || !s->hp || !s->on_dev || !s->skip || !s->undo) {
        sl__stream_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "context: out of memory (expert streaming)");
    }
    for (int32_t x = 0; x < m->hp.n_expert; x++) s->on_dev[x] = true;
    if (sl__model_cuda(m)) {
        sl_status st = sl_cuda_ctx_create(sl_device_ordinal_get(m->dev),
                                          sl_device_stream_native(m->dev, m->stream), &s->cu,
                                          err);
        if (st) {
            sl__stream_free(c);
            return st;
        }
        sl_cuda_ctx_set_pdl(s->cu, sl__ctx_pdl(c));
        s->dp = dp;
    }
    s->on = true;
    return sl__stream_validate(c, err);
}

void sl__stream_free(sl_ctx *c)
{
    sl__stream *s = &c->stream;
    if (s->cu) sl_cuda_ctx_destroy(s->cu);
    free(s->view);
    free(s->hp);
    free(s->on_dev);
    free(s->skip);
    free(s->undo);
    /* dp is a device block of the context (freed with them); the buffer is the model's */
    *s = (sl__stream){.min_tokens = s->min_tokens};
}

sl_status sl__stream_validate(const sl_ctx *c, sl_error *err)
{
    const sl__stream *s = &c->stream;
    if (s->on && (!s->view || !s->hp || !s->on_dev || !s->skip ||
                  (sl__model_cuda(c->m) && (!s->dp || !s->cu))))
        return sl_error_set(err, SL_ERR_INVALID, "expert streaming: a buffer without its "
                            "layer views or pointer arrays");
    if (s->min_tokens < 0)
        return sl_error_set(err, SL_ERR_INVALID, "expert streaming: min_tokens %lld",
                            (long long)s->min_tokens);
    return SL_OK;
}

/* The model's buffer, taken by the first context that streams: the largest layer's bytes over
 * every MoE layer (whichever side its experts are on now), so that it never grows. */
static bool model_buffer(sl_model *m)
{
    if (atomic_load_explicit(&m->stream_ready, memory_order_acquire)) return true;
    pthread_mutex_lock(&m->stream_mu);
    if (!m->stream_buf && !m->stream_failed) {
        uint64_t bytes = 0;
        for (int32_t il = 0; il < m->hp.n_layer; il++) {
            const uint64_t b = sl__stream_layer_bytes(m, il);
            if (b > bytes) bytes = b;
        }
        sl_block b;
        if (bytes && sl_bfc_alloc(m->arena, bytes, SL_BFC_PINNED, &b, NULL) == SL_OK) {
            m->stream_block = b;
            m->stream_buf = sl_bfc_ptr(m->arena, b);
            m->stream_bytes = bytes;
            atomic_store_explicit(&m->stream_ready, true, memory_order_release);
        } else {
            m->stream_failed = true;
        }
    }
    const bool ok = m->stream_buf != NULL;
    pthread_mutex_unlock(&m->stream_mu);
    return ok;
}

void sl__stream_release(sl_model *m)
{
    if (!m->stream_mu_ready) return; /* a model whose open failed before it: no buffer */
    pthread_mutex_lock(&m->stream_mu);
    if (m->stream_buf) {
        sl_device_stream_sync(m->dev, m->stream, NULL);
        sl_bfc_free(m->arena, m->stream_block, NULL);
        m->stream_buf = NULL;
        m->stream_bytes = 0;
        atomic_store_explicit(&m->stream_ready, false, memory_order_release);
    }
    m->stream_failed = false;
    pthread_mutex_unlock(&m->stream_mu);
}

bool sl__stream_wanted(const sl_ctx *c, int32_t il, int64_t n)
{
    const sl__stream *s = &c->stream;
    if (!s->on || !s->min_tokens || n < s->min_tokens || n < 2 || !sl__experts_streamable(c, il))
        return false;
    /* the model's buffer holds every MoE layer as it was sized (a reload may have grown one) */
    const uint64_t b = sl__stream_layer_bytes(c->m, il);
    return b && model_buffer(c->m) && b <= c->m->stream_bytes;
}

/* The copies of one projection's experts: runs of experts adjacent in host memory as one copy
 * each (a merged GGUF tensor: one), leaving out those resident on the device (skip[e]: the
 * context's hot experts, read where they are). */
static sl_status copy_experts(sl_ctx *c, uint8_t *dst, const void *const *src, int32_t X,
                              uint64_t pb, const bool *skip, sl_error *err)
{
    for (int32_t e = 0; e < X;) {
        if (skip[e]) {
            e++;
            continue;
        }
        int32_t run = 1;
        while (e + run < X && !skip[e + run] &&
               (const uint8_t *)src[e + run] == (const uint8_t *)src[e] + run * pb)
            run++;
        sl_status st = sl_device_copy(c->m->dev, c->m->stream, dst + (uint64_t)e * pb, src[e],
                                      (uint64_t)run * pb, SL_COPY_H2D, err);
        if (st) return st;
        c->stats.copies++;
        c->stats.copy_bytes += (uint64_t)run * pb;
        c->stats.stream_bytes += (uint64_t)run * pb;
        e += run;
    }
    return SL_OK;
}

/* Enqueues layer il's copies into buf and the executor's moe step over them (the caller holds
 * the model's stream_mu). */
static sl_status stream_layer(sl_ctx *c, const sl__side *sd, int32_t il, int64_t n,
                              uint8_t *buf, sl_error *err)
{
    sl__stream *s = &c->stream;
    const sl_model *m = c->m;
    const sl_moe_layer *H = &m->layers[il].moe;
    const int32_t X = H->n_expert;
    const bool cuda = sl__model_cuda(m);
    layout l;
    if (!layout_of(&m->layers[il], &l) || l.total > m->stream_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "layer %d: experts do not fit the streaming "
                            "buffer", il);
    sl_moe_layer *V = &s->view[il];
    *V = *H;
    /* on the device: a scheduler that caches or fetches (sim's executor runs the MoE through
     * it) computes them where they are and never copies from the buffer, which the next
     * streamed layer overwrites once this one's step has run */
    V->on_device = s->on_dev;
    const void **hp = s->hp + (size_t)il * 3 * (size_t)X;
    const void *const *src[3] = {H->gate, H->up, H->down};
    const uint32_t t[3] = {H->type_gate, H->type_up, H->type_down};
    const int64_t *rows = l.rows, *cols = l.cols;
    sl_status st;
    /* the context's resident hot experts (hot.h) are read where they are, not copied again */
    bool *skip = s->skip;
    for (int32_t e = 0; e < X; e++) skip[e] = sl__hot_device_expert(c, il, e, 0) != NULL;
    for (int p = 0; p < 3; p++) {
        uint8_t *base = buf + l.off[p];
        for (int32_t e = 0; e < X; e++)
            hp[p * X + e] = skip[e] ? sl__hot_device_expert(c, il, e, p)
                                    : base + (uint64_t)e * l.pb[p];
        if ((st = copy_experts(c, base, src[p], X, l.pb[p], skip, err))) return st;
        /* the device reads Q4_K: the CPU's repacked rows turned back there, in place */
        if (t[p] == SL_TYPE_Q4_K_R8 &&
            (st = sl__r8_undo_enqueue(c, s->cu, &s->undo[(size_t)il * 3 + (size_t)p], base,
                                      (int64_t)X * rows[p], cols[p], err)))
            return st;
    }
    V->gate = hp, V->up = hp + X, V->down = hp + 2 * X;
    V->type_gate = sl_repack_base_type(t[0]);
    V->type_up = sl_repack_base_type(t[1]);
    V->type_down = sl_repack_base_type(t[2]);
    const float *hb[3] = {H->gate_b, H->up_b, H->down_b};
    const float **vb[3] = {&V->gate_b, &V->up_b, &V->down_b};
    for (int p = 0; p < 3; p++) {
        if (!hb[p]) continue;
        const uint64_t b = (uint64_t)X * (uint64_t)rows[p] * sizeof(float);
        if ((st = sl_device_copy(m->dev, m->stream, buf + l.off[3 + p], hb[p], b,
                                 SL_COPY_H2D, err)))
            return st;
        *vb[p] = (const float *)(buf + l.off[3 + p]);
    }
    sl__dx_moe M = {.L = V};
    if (cuda) {
        const void **dp = s->dp + (size_t)il * 3 * (size_t)X;
        /* hp lives as long as the context, and its entries for il change only when this layer
         * streams again, behind this copy on the same stream */
        if ((st = sl_device_copy(m->dev, m->stream, (void *)dp, hp,
                                 3 * (uint64_t)X * sizeof(void *), SL_COPY_H2D, err)))
            return st;
        M.d_gate = dp, M.d_up = dp + X, M.d_down = dp + 2 * X;
    }
    if ((st = sd->dx->vt->moe(sd->dx, &M, sd->topk_idx, sd->topk_w, n,
                              (int32_t)m->hp.n_expert_used, sd->xn, sd->tmp, NULL, err)))
        return st;
    c->stats.stream_layers++;
    return SL_OK;
}

sl_status sl__stream_moe(sl_ctx *c, const sl__side *sd, int32_t il, int64_t n, sl_error *err)
{
    sl_model *m = c->m;
    pthread_mutex_lock(&m->stream_mu);
    const sl_status st = stream_layer(c, sd, il, n, m->stream_buf, err);
    pthread_mutex_unlock(&m->stream_mu);
    return st;
}
