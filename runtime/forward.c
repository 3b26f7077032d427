/* runtime/forward.c: the CPU forward pass over a chunk of tokens (prefill) or one (decode).
 *
 * Per layer, for the n tokens of the chunk (rows of x [n][n_embd], the residual stream):
 *   xn = rms_norm(x, attn_norm)
 *   q, k, v = W{q,k,v} xn (+ bias: qwen2moe)
 *   q/k norm: per head [head_dim] (qwen3moe, gemma3) or whole row (olmoe)
 *   rope(q, k) at the tokens' positions (per-layer base/scale: gemma3's local layers)
 *   store k, v in the cache, then each token attends to positions [0, its own] (causal inside
 *   the chunk: token t sees n_pos = pos_t + 1 entries; sliding-window layers only the last
 *   n_swa), GQA by the kernel; gemma3 scales by its own attention scale
 *   x += [post_norm](Wo att)
 *   xn = rms_norm(x, ffn_norm)
 *   dense: act(Wg xn) * (Wu xn) -> Wd;  MoE: router -> top-k -> scheduler/moe (+ qwen2moe's
 *   shared expert times sigmoid(w_shexp_gate . xn))
 *   x += [post_norm](ffn)
 * then logits = Wout rms_norm(x, output_norm) for the rows asked for.
 *
 * Batch invariance: matvec columns are bit-identical to single-token calls, norms/rope/
 * attention are per token, and the MoE scheduler is batch-invariant (moe.h), so a token's
 * logits do not depend on how a prompt is chunked — prefill equals a run of decodes bit for
 * bit (the engine test checks it with a tolerance anyway, to allow future kernels that block).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/ref/matvec.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quant.h"
#include "runtime/ctx.h"

enum { SL__MM_BATCH = 64 }; /* the small-batch matvec's intended upper batch */

/* y [n][rows] = W x, x [n][cols]; in calls of at most SL__MM_BATCH columns. */
static sl_status mm(sl_ctx *c, const sl_weight *w, const float *x, int64_t n, float *y,
                    sl_error *err)
{
    const int64_t cols = w->ne[0], rows = w->ne[1];
    for (int64_t b = 0; b < n; b += SL__MM_BATCH) {
        const int64_t nb = n - b < SL__MM_BATCH ? n - b : SL__MM_BATCH;
        sl_status st = sl_cpu_matvec(&c->mv, c->pool, w->type, w->data, rows, cols,
                                     x + b * cols, nb, y + b * rows, c->work, c->work_bytes, err);
        if (st) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "matmul with '%s': %s", w->name, why);
        }
    }
    return SL_OK;
}

static sl_status norm_rows(sl_ctx *c, const float *x, const sl_weight *w, float *y, int64_t n,
                           int64_t dim, sl_error *err)
{
    for (int64_t t = 0; t < n; t++) {
        sl_status st = sl_cpu_rms_norm(&c->ops, x + t * dim, w->data, y + t * dim, dim,
                                       c->m->hp.rms_eps, false, err);
        if (st) return st;
    }
    return SL_OK;
}

static void add_bias(float *y, const sl_weight *b, int64_t n, int64_t dim)
{
    const float *bb = b->data;
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < dim; j++) y[t * dim + j] += bb[j];
}

/* ---- attention over the cache, one token per pool chunk -------------------------------- */

typedef struct attn_job {
    sl_ctx *c;
    int32_t layer;
    sl_attn_params p;
    sl_status st;
} attn_job;

static void attn_token(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    attn_job *j = ctx;
    sl_ctx *c = j->c;
    const sl__hparams *hp = &c->m->hp;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim;
    for (int64_t t = begin; t < end; t++) {
        sl_attn_params p = j->p;
        p.n_pos = c->pos[t] + 1;
        sl_error e;
        sl_status st = sl_cpu_attn_decode(&c->ops, c->q + t * qd,
                                          sl__kv_layer(&c->kv, false, j->layer),
                                          sl__kv_layer(&c->kv, true, j->layer), &p,
                                          c->att + t * qd, &e);
        if (st) j->st = st; /* kernels cannot fail on validated params; recorded anyway */
    }
}

static sl_status attention(sl_ctx *c, int32_t il, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    attn_job j = {.c = c, .layer = il};
    j.p = (sl_attn_params){.n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
                           .head_dim = hp->head_dim, .n_pos = c->pos[n - 1] + 1,
                           .scale = hp->attn_scale, .window = L->swa ? hp->n_swa : 0,
                           .kv_type = c->kv.type};
    sl_status st = sl_ref_attn_validate(&j.p, err);
    if (st) return st;
    st = sl_cpu_pool_parallel_for(n > 1 ? c->pool : NULL, n, 1, attn_token, &j, err);
    if (st) return st;
    if (j.st) return sl_error_set(err, j.st, "layer %d: attention kernel failed", il);
    return SL_OK;
}

/* ---- FFN ----------------------------------------------------------------------------- */

static sl_status glu(sl_ctx *c, float *g, const float *u, int64_t n, sl_error *err)
{
    if (c->m->tr->act == SL_MOE_SILU) return sl_cpu_swiglu(&c->ops, g, u, g, n, err);
    return sl_cpu_geglu(&c->ops, g, u, g, n, SL_GELU_TANH, err);
}

static sl_status dense_ffn(sl_ctx *c, const sl_weight *wg, const sl_weight *wu,
                           const sl_weight *wd, int64_t n, float *out, sl_error *err)
{
    const int64_t F = wg->ne[1];
    sl_status st;
    if ((st = mm(c, wg, c->xn, n, c->g, err))) return st;
    if ((st = mm(c, wu, c->xn, n, c->u, err))) return st;
    if ((st = glu(c, c->g, c->u, F * n, err))) return st;
    return mm(c, wd, c->g, n, out, err);
}

static sl_status moe_ffn(sl_ctx *c, int32_t il, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const int32_t X = hp->n_expert, K = hp->n_expert_used;
    const int64_t E = hp->n_embd;
    sl_status st = mm(c, L->gate_inp, c->xn, n, c->router, err);
    if (st) return st;
    const sl_router_params rp = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = X, .k = K,
                                 .norm_topk = m->tr->norm_topk, .weight_scale = 1.0f};
    for (int64_t t = 0; t < n; t++) {
        st = sl_ref_router_topk(c->router + t * X, &rp, c->topk_idx, c->topk_w, err);
        if (st) return st;
        for (int32_t i = 0; i < K; i++)
            c->assign[t * K + i] = (sl_moe_assign){(int32_t)t, c->topk_idx[i], c->topk_w[i]};
    }
    st = sl_moe_exec(c->moe, &L->moe, c->assign, n * K, c->xn, n, c->tmp, err);
    if (st) return st;
    if (!m->tr->shared_expert) return SL_OK;
    /* shared expert, gated per token by sigmoid(w . xn) (llm_build_qwen2moe) */
    const int64_t S = L->gate_shexp->ne[1];
    if ((st = mm(c, L->gate_shexp, c->xn, n, c->g, err))) return st;
    if ((st = mm(c, L->up_shexp, c->xn, n, c->u, err))) return st;
    if ((st = glu(c, c->g, c->u, S * n, err))) return st;
    if ((st = mm(c, L->down_shexp, c->g, n, c->att, err))) return st; /* att is free here */
    if ((st = mm(c, L->gate_inp_shexp, c->xn, n, c->sh, err))) return st;
    for (int64_t t = 0; t < n; t++) {
        const float gate = 1.0f / (1.0f + expf(-c->sh[t]));
        for (int64_t j = 0; j < E; j++) c->tmp[t * E + j] += gate * c->att[t * E + j];
    }
    return SL_OK;
}

/* ---- the pass ---------------------------------------------------------------------- */

static sl_status layer(sl_ctx *c, int32_t il, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim, Q = (int64_t)hp->n_head * D,
                  KV = (int64_t)hp->n_head_kv * D;
    sl_status st;
    if ((st = norm_rows(c, c->x, L->attn_norm, c->xn, n, E, err))) return st;
    if ((st = mm(c, L->wq, c->xn, n, c->q, err))) return st;
    if ((st = mm(c, L->wk, c->xn, n, c->k, err))) return st;
    if ((st = mm(c, L->wv, c->xn, n, c->v, err))) return st;
    if (L->bq) {
        add_bias(c->q, L->bq, n, Q);
        add_bias(c->k, L->bk, n, KV);
        add_bias(c->v, L->bv, n, KV);
    }
    if (m->tr->qk_norm == SL__QK_NORM_HEAD) {
        if ((st = norm_rows(c, c->q, L->q_norm, c->q, n * hp->n_head, D, err))) return st;
        if ((st = norm_rows(c, c->k, L->k_norm, c->k, n * hp->n_head_kv, D, err))) return st;
    } else if (m->tr->qk_norm == SL__QK_NORM_FULL) {
        if ((st = norm_rows(c, c->q, L->q_norm, c->q, n, Q, err))) return st;
        if ((st = norm_rows(c, c->k, L->k_norm, c->k, n, KV, err))) return st;
    }
    if ((st = sl_cpu_rope(&c->ops, c->q, n, hp->n_head, (int32_t)D, c->pos, &L->rope, err)))
        return st;
    if ((st = sl_cpu_rope(&c->ops, c->k, n, hp->n_head_kv, (int32_t)D, c->pos, &L->rope, err)))
        return st;
    sl__kv_store(&c->kv, il, c->pos, n, c->k, c->v);
    if ((st = attention(c, il, n, err))) return st;
    if ((st = mm(c, L->wo, c->att, n, c->tmp, err))) return st;
    if (L->attn_post_norm && (st = norm_rows(c, c->tmp, L->attn_post_norm, c->tmp, n, E, err)))
        return st;
    if ((st = sl_cpu_add(&c->ops, c->x, c->tmp, c->x, n * E, err))) return st;

    if ((st = norm_rows(c, c->x, L->ffn_norm, c->xn, n, E, err))) return st;
    if (hp->n_expert) st = moe_ffn(c, il, n, err);
    else st = dense_ffn(c, L->ffn_gate, L->ffn_up, L->ffn_down, n, c->tmp, err);
    if (st) return st;
    if (L->ffn_post_norm && (st = norm_rows(c, c->tmp, L->ffn_post_norm, c->tmp, n, E, err)))
        return st;
    return sl_cpu_add(&c->ops, c->x, c->tmp, c->x, n * E, err);
}

sl_status sl__forward(sl_ctx *c, const int32_t *tokens, int64_t n, float *logits_out, bool all,
                      sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    sl_status st;
    /* embeddings: token_embd rows dequantized (any stored type) */
    const sl_weight *te = m->tok_embd;
    const size_t rb = sl_quant_row_bytes(te->type, E);
    for (int64_t t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return sl_error_set(err, SL_ERR_RANGE, "token %lld of the batch: id %d outside "
                                "[0, n_vocab %d)", (long long)t, tokens[t], hp->n_vocab);
        c->pos[t] = c->n_past + (int32_t)t;
        st = sl_quant_dequant_row(te->type, (const uint8_t *)te->data + (size_t)tokens[t] * rb,
                                  c->x + t * E, E, err);
        if (st) return st;
    }
    if (m->tr->embd_scale)
        if ((st = sl_cpu_scale(&c->ops, c->x, n * E, sqrtf((float)E), err))) return st;
    for (int32_t il = 0; il < hp->n_layer; il++)
        if ((st = layer(c, il, n, err))) return st;
    if (!logits_out) return SL_OK;
    const int64_t first = all ? 0 : n - 1, rows = n - first;
    if ((st = norm_rows(c, c->x + first * E, m->output_norm, c->xn, rows, E, err))) return st;
    return mm(c, m->output, c->xn, rows, logits_out, err);
}
