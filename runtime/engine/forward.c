/* runtime/engine/forward.c: the forward pass over a chunk of tokens (prefill) or one (decode).
 *
 * Per layer, for the n tokens of the chunk (rows of x [n][n_embd], the residual stream):
 *   xn = rms_norm(x, attn_norm)
 *   q, k, v = W{q,k,v} xn (+ the optional biases; a fused attn_qkv: row views of one W)
 *   q/k norm: per head [head_dim] (qwen3moe, gemma3) or whole row (olmoe)
 *   rope(q, k) at the tokens' positions (per-layer base/scale: gemma3's local layers)
 *   store k, v in the cache, then each token attends to positions [0, its own] (causal inside
 *   the chunk: token t sees n_pos = pos_t + 1 entries; sliding-window layers only the last
 *   n_swa), GQA by the kernel; gemma3 scales by its own attention scale; gpt-oss's per-head
 *   sinks join each softmax denominator
 *   x += [post_norm](Wo att [+ bo: gpt-oss, llama, granite])
 *   (deepseek2: multi-head latent attention instead, attn_mla below: the cache holds one
 *   latent row per token, k_b absorbed into the query, v_b per head after the attention)
 *   xn = rms_norm(x, ffn_norm)
 *   dense: act(Wg xn [+ bg]) * (Wu xn [+ bu]) -> Wd [+ bd] (biases: llama, granite);
 *   MoE: router (+ bias: gpt-oss) -> top-k -> experts (with biases: gpt-oss)
 *   (+ qwen2moe's shared expert times sigmoid(w_shexp_gate . xn))
 *   (deepseek2: dense below leading_dense_block_count; sigmoid router whose selection adds
 *   exp_probs_b within the best groups; weights normalised and scaled; + shared experts)
 *   x += [post_norm](ffn)
 *   (granite: both block outputs times residual_scale before their add)
 *   (qwen3next, arch_qwen3next.c: a Gated DeltaNet mixer instead of attention on most layers,
 *   its recurrent state in the context; on the others q carries a gate, att * sigmoid(gate))
 * then logits = Wout rms_norm(x, output_norm) [+ b: qwen2] for the rows asked for (granite:
 * / logit_scale; gemma2: final soft-capping). Embeddings are scaled by hp.embd_scale (gemma,
 * granite); gemma2's attention logits are soft-capped inside the attention kernel.
 *
 * Output rows (llama.cpp's inp_out_ids): past the last layer's attention (its K/V stored, its
 * recurrent state advanced) a row matters only for its logits, so there that layer keeps the
 * rows asked for (out_rows: a prompt's last row, a tail's rows, none for a chunk before them)
 * and runs Wo, the FFN and the residual on them alone; the output reads them from row 0 on.
 * Each kept row's bits are unchanged (batch invariance, below). Not with the embeddings or
 * neuron_stats options, which read every row.
 *
 * Where each step runs: a layer runs on the side its attention weights live on (ctx.h's
 * sl__side: the host, or the device through its executor, runtime/engine/dx.h); the residual stream
 * is copied across when consecutive layers sit on different sides (layer split). A layer's
 * FFN part (dense FFN or routed experts: forward_ffn.c) that lives on the other side
 * (experts-on-CPU, --n-cpu-moe, -ot) is reached by copying the normalised rows (and the
 * routing) over, running the part there (the context's MoE scheduler on the host, the device
 * executor on the device), and copying the sum back. Logits are computed where the output
 * matrix is.
 *
 * Sequences: a pass carries one or more (ctx.h sl__seq, sl__forward_batch: the server's slots
 * decoding together): every step is per row or a matmul over all rows, but for the positions,
 * the KV store and the attention, which each sequence does in its own context's cache, and the
 * logits, which go to each sequence's context.
 *
 * Batch invariance: matvec columns are bit-identical to single-token calls, norms/rope/
 * attention are per token, and the MoE scheduler is batch-invariant (moe.h), so on the CPU
 * kernels a token's logits do not depend on how a prompt is chunked, nor on the other
 * sequences of its pass — prefill equals a run of decodes bit for bit (the engine test
 * checks it with a tolerance anyway, to allow kernels that block, like the GPU GEMM).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/ref/quant.h"
#include "runtime/engine/ctx.h"
#include "runtime/engine/forward_impl.h"

/* Layer il's K or V cache of context c on the host or its device side ([n_ctx][n_kv *
 * head_dim] entries). */
static void *kv_base(const sl_ctx *c, bool host, int32_t il, bool v)
{
    if (host) return sl__kv_layer(&c->kv, v, il);
    const size_t per = (size_t)c->kv.n_ctx * (size_t)c->kv.n_kv * (size_t)c->kv.head_dim *
                       c->kv.elt;
    return (uint8_t *)(v && !c->kv.k_only ? c->dev.kv_v : c->dev.kv_k) +
           (size_t)c->kv_slot[il] * per;
}

/* Stores each sequence's rows [n][row] of src (k or v) in its own context's cache of layer il
 * (K, or V with v) on side s. */
static sl_status kv_store_seqs(const sl_ctx *c, const sl__side *s, int32_t il, bool v,
                               int64_t row, const float *src, sl_error *err)
{
    for (int32_t i = 0; i < c->n_seqs; i++) {
        const sl__seq *q = &c->seqs[i];
        void *cache = kv_base(q->c, s == &c->host, il, v);
        const sl_status st = s->dx->vt->kv_store(s->dx, cache, q->c->kv.type == SL_KV_F16, row,
                                                 s->pos + q->off, q->n, src + q->off * row,
                                                 err);
        if (st) return st;
    }
    return SL_OK;
}

/* Each sequence's queries [n][n_head * head_dim] attend to its own context's cache of layer
 * il (values in V, or in K with k_only) on side s, into out (same layout). */
static sl_status attn_seqs(const sl_ctx *c, const sl__side *s, int32_t il, const float *q,
                           sl_attn_params ap, float *out, sl_error *err)
{
    const int64_t row = (int64_t)ap.n_head * ap.head_dim;
    for (int32_t i = 0; i < c->n_seqs; i++) {
        const sl__seq *sq = &c->seqs[i];
        const bool host = s == &c->host;
        ap.kv_type = sq->c->kv.type;
        const sl_status st = s->dx->vt->attn(s->dx, q + sq->off * row,
                                             kv_base(sq->c, host, il, false),
                                             kv_base(sq->c, host, il, true), &ap,
                                             s->pos + sq->off, sq->n, out + sq->off * row,
                                             err);
        if (st) return sl_error_set(err, st, "layer %d: %s", il, err ? err->msg : "");
    }
    return SL_OK;
}

/* Expert Deferral's kind of layer il (defer.h): its path's, where the CPU scheduler runs it. */
static sl__defer_kind defer_kind(const sl_ctx *c, int32_t il, int64_t n)
{
    if (!sl__layer_moe(&c->m->layers[il])) return SL__DEFER_NONE;
    switch (sl__forward_experts_path(c, il, n)) {
    case SL__EXPERTS_HOST:
    case SL__EXPERTS_SYNC: return SL__DEFER_HOST;
    case SL__EXPERTS_ORDERED: return SL__DEFER_STREAM;
    default: return SL__DEFER_NONE;
    }
}

/* q/k/v attention from the residual stream s->x: attention norm into s->xn and Q, K, V (one
 * step), then the heads' result, Wo's input, in s->att. */
static sl_status attn_qkv(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const sl__dx_vt *vt = s->dx->vt;
    sl__dx *dx = s->dx;
    const int64_t E = hp->n_embd, D = hp->head_dim, Q = (int64_t)hp->n_head * D,
                  KV = (int64_t)hp->n_head_kv * D;
    const float eps = hp->rms_eps;
    sl_status st;
    const sl_weight *qkv[3] = {L->wq, L->wk, L->wv};
    sl_weight fused[3];
    if (L->wqkv) { /* phi3: rows q | k | v */
        fused[0] = rows_view(L->wqkv, 0, Q);
        fused[1] = rows_view(L->wqkv, Q, KV);
        fused[2] = rows_view(L->wqkv, Q + KV, KV);
        for (int i = 0; i < 3; i++) qkv[i] = &fused[i];
    }
    /* qwen3next: q rows per head are q | gate (arch_qwen3next.c) */
    float *const qkv_y[3] = {L->attn_gated ? s->g : s->q, s->k, s->v};
    if ((st = vt->norm_mm(dx, s->x, L->attn_norm->data, n, E, eps, s->xn, qkv, 3, qkv_y, err)) ||
        (L->attn_gated && (st = sl__qwen3next_q_split(c, s, n, err))))
        return st;
    /* the optional biases: separate, or the fused attn_qkv.bias's q | k | v parts */
    const float *fb = L->bqkv ? (const float *)L->bqkv->data : NULL;
    const float *bias[3] = {fb ? fb : L->bq ? L->bq->data : NULL,
                            fb ? fb + Q : L->bk ? L->bk->data : NULL,
                            fb ? fb + Q + KV : L->bv ? L->bv->data : NULL};
    float *const biased[3] = {s->q, s->k, s->v}; /* after qwen3next's q | gate split */
    for (int i = 0; i < 3; i++)
        if (bias[i] && (st = vt->add_rows(dx, biased[i], bias[i], n, i ? KV : Q, err)))
            return st;
    if (m->tr->qk_norm == SL__QK_NORM_FULL &&
        ((st = vt->rms_norm(dx, s->q, L->q_norm->data, s->q, n, Q, eps, err)) ||
         (st = vt->rms_norm(dx, s->k, L->k_norm->data, s->k, n, KV, eps, err))))
        return st;
    /* per-head q/k norm, rope and the KV store: one step */
    sl_rope_params rope = L->rope;
    rope.freq_factors = s->rope_freqs;
    /* per head: the norms bound (qwen3moe, gemma3: both; glm4moe: those the file has) */
    const bool head_norm = m->tr->qk_norm != SL__QK_NORM_FULL, host = s == &c->host;
    for (int32_t i = 0; i < c->n_seqs; i++) { /* each sequence into its own context's cache */
        const sl__seq *sq = &c->seqs[i];
        const sl__dx_qkv qa = {.q = s->q + sq->off * Q, .k = s->k + sq->off * KV,
                               .v = s->v + sq->off * KV, .n = sq->n, .n_head = hp->n_head,
                               .n_head_kv = hp->n_head_kv, .head_dim = (int32_t)D,
                               .q_norm = head_norm && L->q_norm ? L->q_norm->data : NULL,
                               .k_norm = head_norm && L->k_norm ? L->k_norm->data : NULL,
                               .eps = eps,
                               .pos = s->pos + sq->off, .rope = &rope,
                               .kc = kv_base(sq->c, host, il, false),
                               .vc = kv_base(sq->c, host, il, true),
                               .f16 = sq->c->kv.type == SL_KV_F16,
                               .norm_after_rope = m->tr->qk_norm_after_rope};
        if ((st = vt->qk_rope_store(dx, &qa, err))) return st;
    }
    const sl_attn_params ap = {.n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
                               .head_dim = hp->head_dim, .n_pos = 1, .scale = hp->attn_scale,
                               .window = L->swa ? hp->n_swa : 0, .kv_type = c->kv.type,
                               .softcap = hp->attn_softcap,
                               .sinks = L->sinks ? L->sinks->data : NULL,
                               .temp_scale = hp->attn_temp_scale, .temp_len = hp->attn_temp_len};
    if ((st = attn_seqs(c, s, il, s->q, ap, s->att, err))) return st;
    return L->attn_gated ? sl__qwen3next_att_gate(c, s, n, err) : SL_OK;
}

/* deepseek2's multi-head latent attention from s->xn, Wo's input left in s->q, with k_b
 * absorbed into the query (one mm_heads step for all heads) as llama.cpp does: the cache row
 * of a token is [rms(c_kv) | rope(k_pe)] (n_lora_kv + n_rot wide), each head's query
 * [k_b_h^T q_nope_h | rope(q_pe_h)] attends to it as one MQA head, the values being the rows'
 * first n_lora_kv entries; v_b_h expands head h's result (one mm_heads step too). */
static sl_status attn_mla(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const sl__dx_vt *vt = s->dx->vt;
    sl__dx *dx = s->dx;
    const int64_t H = hp->n_head, Dk = hp->n_embd_head_k_mla, Dv = hp->n_embd_head_v_mla,
                  R = hp->n_rot, C = hp->n_lora_kv, Dl = C + R, nope = Dk - R;
    const float eps = hp->rms_eps;
    sl_status st;
    if (!vt->copy2d || !vt->mm_heads)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "layer %d: MLA attention (%s) is not "
                            "implemented on this device", il, sl_arch_name(m->arch));
    /* q [n][H][Dk] in att */
    if (L->wq_a) {
        if ((st = vt->mm(dx, L->wq_a, s->xn, n, s->g, err)) ||
            (st = vt->rms_norm(dx, s->g, L->q_a_norm->data, s->g, n, hp->n_lora_q, eps, err)) ||
            (st = vt->mm(dx, L->wq_b, s->g, n, s->att, err)))
            return st;
    } else if ((st = vt->mm(dx, L->wq, s->xn, n, s->att, err))) {
        return st;
    }
    /* the latent rows [n][Dl] in k */
    if ((st = vt->mm(dx, L->wkv_a, s->xn, n, s->k, err))) return st;
    for (int64_t t = 0; t < n; t++)
        if ((st = vt->rms_norm(dx, s->k + t * Dl, L->kv_a_norm->data, s->k + t * Dl, 1, C, eps,
                               err)))
            return st;
    /* the rope parts sit after the nope parts: rope the heads from that offset on */
    sl_rope_params rope = L->rope;
    rope.freq_factors = s->rope_freqs;
    if ((st = vt->rope(dx, s->k + C, n, 1, (int32_t)Dl, s->pos, &rope, err)) ||
        (st = vt->rope(dx, s->att + nope, n, (int32_t)H, (int32_t)Dk, s->pos, &rope, err)))
        return st;
    if ((st = kv_store_seqs(c, s, il, false, Dl, s->k, err))) return st;
    /* the attention query [n][H][Dl] in q: absorbed nope part, then the roped part */
    if ((st = vt->mm_heads(dx, L->wk_b, s->att, H * Dk, Dk, s->q, H * Dl, Dl, n, err)) ||
        (st = vt->copy2d(dx, s->q + C, Dl, s->att + nope, Dk, n * H, R, err)))
        return st;
    const sl_attn_params ap = {.n_head = (int32_t)H, .n_kv_head = 1, .head_dim = (int32_t)Dl,
                               .n_pos = 1, .scale = hp->attn_scale, .kv_type = c->kv.type,
                               .temp_scale = hp->attn_temp_scale, .temp_len = hp->attn_temp_len};
    if ((st = attn_seqs(c, s, il, s->q, ap, s->att, err))) return st; /* k_only: V reads K */
    /* each head's latent result [C] -> its value head [Dv]: [n][H][Dv] in q */
    return vt->mm_heads(dx, L->wv_b, s->att, H * Dl, Dl, s->q, H * Dv, Dv, n, err);
}

/* The number of rows the output reads: the sequences' rows with logits (out_rows above), or
 * every row where an option reads them all. */
static int64_t out_rows(const sl_ctx *c, int64_t n)
{
    if (c->hidden_out || c->nstats) return n;
    int64_t rows = 0;
    for (int32_t i = 0; i < c->n_seqs; i++)
        if (c->seqs[i].logits) rows += c->seqs[i].n - c->seqs[i].out_from;
    return rows;
}

/* The rows with logits, as runs in order: the next run from sequence *i on (advanced past
 * the run's sequence and those without logits) starts at row *from of the pass and has *cnt
 * rows, kept at the sum of the earlier runs' counts (<= from). false past the last run. */
static bool out_run(const sl_ctx *c, int32_t *i, int64_t *from, int64_t *cnt)
{
    while (*i < c->n_seqs && !c->seqs[*i].logits) ++*i;
    if (*i >= c->n_seqs) return false;
    const sl__seq *q = &c->seqs[(*i)++];
    *from = q->off + q->out_from;
    *cnt = q->n - q->out_from;
    return true;
}

/* Moves the sequences' rows with logits of buf [n][width] (s's memory) to rows 0.. in order.
 * A row only moves up, in pieces no longer than the distance, so no copy overlaps itself and
 * none overwrites a row still to be read. */
static sl_status keep_out_rows(const sl_ctx *c, const sl__side *s, float *buf, int64_t width,
                               sl_error *err)
{
    int64_t at = 0, from, cnt;
    for (int32_t i = 0; out_run(c, &i, &from, &cnt); at += cnt) {
        const int64_t d = from - at;
        for (int64_t k = 0; d > 0 && k < cnt;) {
            const int64_t piece = cnt - k < d ? cnt - k : d;
            sl_status st = s->dx->vt->copy2d(s->dx, buf + (at + k) * width, width,
                                             buf + (from + k) * width, width, piece, width, err);
            if (st) return st;
            k += piece;
        }
    }
    return SL_OK;
}

int64_t sl__forward_keep_rows(const sl_ctx *c, float *buf, int64_t width)
{
    int64_t at = 0, from, cnt;
    for (int32_t i = 0; out_run(c, &i, &from, &cnt); at += cnt)
        memmove(buf + at * width, buf + from * width, (size_t)(cnt * width) * sizeof *buf);
    return at;
}

/* Layer il over the n rows of s->x; n_keep < n (the last layer only): past the attention only
 * the out_rows rows, moved to the front (the header's output rows). */
static sl_status layer(sl_ctx *c, const sl__side *s, int32_t il, int64_t n, int64_t n_keep,
                       sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const sl__layer *L = &m->layers[il];
    const sl__dx_vt *vt = s->dx->vt;
    sl__dx *dx = s->dx;
    const int64_t E = hp->n_embd;
    const float eps = hp->rms_eps;
    sl_status st;
    if (m->tr->mla || L->ssm_out) {
        if ((st = vt->rms_norm(dx, s->x, L->attn_norm->data, s->xn, n, E, eps, err)) ||
            (st = L->ssm_out ? sl__qwen3next_linear(c, s, il, n, err)
                             : attn_mla(c, s, il, n, err)))
            return st;
    } else if ((st = attn_qkv(c, s, il, n, err))) {
        return st;
    }
    float *wo_in = m->tr->mla ? s->q : s->att;
    if (n_keep < n) { /* forward_run asks only of an executor with copy2d */
        if (n_keep == 0) return SL_OK; /* no row of this pass is read past here */
        if ((st = keep_out_rows(c, s, wo_in, L->wo->ne[0], err)) ||
            (st = keep_out_rows(c, s, s->x, E, err)))
            return st;
        n = n_keep;
    }
    /* nothing between Wo, the residual add and the FFN norm: one step */
    const bool plain_add = hp->residual_scale == 0.0f;
    if (!L->bo && !L->attn_post_norm && plain_add) {
        if ((st = vt->mm_add_norm(dx, L->wo, wo_in, n, s->tmp, s->x, L->ffn_norm->data, eps,
                                  s->xn, err)))
            return st;
    } else if ((st = vt->mm(dx, L->wo, wo_in, n, s->tmp, err)) ||
               (L->bo && (st = vt->add_rows(dx, s->tmp, L->bo->data, n, E, err))) ||
               (L->attn_post_norm && (st = vt->rms_norm(dx, s->tmp, L->attn_post_norm->data,
                                                        s->tmp, n, E, eps, err))) ||
               (!plain_add && (st = vt->scale(dx, s->tmp, n * E, hp->residual_scale, err))) ||
               (st = vt->add(dx, s->x, s->tmp, s->x, n * E, err)) ||
               (st = vt->rms_norm(dx, s->x, L->ffn_norm->data, s->xn, n, E, eps, err))) {
        return st;
    }
    if (sl__layer_moe(L)) {
        /* the residual add in the experts' last step where nothing comes between them */
        bool added = false;
        st = sl__forward_moe_ffn(c, s, il, n, !L->ffn_post_norm && plain_add ? s->x : NULL,
                                 &added, err);
        if (st || added) return st;
    } else if (L->ffn_up->residency == SL_RES_PARTS) {
        st = sl__forward_ffn_hot_cold(c, s, L, n, false, err);
    } else if (sl__weight_on_device(L->ffn_up) != (s == &c->dev)) {
        st = sl__forward_ffn_elsewhere(c, s, L, il, n, false, err);
    } else {
        /* down and the residual add in one step where nothing comes between them */
        const bool add = !L->ffn_post_norm && plain_add;
        st = sl__forward_ffn_dense(c, s, L->ffn_gate, L->ffn_up, L->ffn_down, il, n, s->tmp,
                                   add ? s->x : NULL, err);
        if (st || add) return st;
    }
    if (st) return st;
    if (L->ffn_post_norm &&
        (st = vt->rms_norm(dx, s->tmp, L->ffn_post_norm->data, s->tmp, n, E, eps, err)))
        return st;
    if (hp->residual_scale != 0.0f &&
        (st = vt->scale(dx, s->tmp, n * E, hp->residual_scale, err)))
        return st;
    return vt->add(dx, s->x, s->tmp, s->x, n * E, err);
}

/* Moves the residual stream [n][E] to side `to` if it is elsewhere. */
sl_status sl__forward_move_x(sl_ctx *c, const sl__side **at, const sl__side *to, int64_t n,
                             sl_error *err)
{
    if (*at == to) return SL_OK;
    const uint64_t bytes = (uint64_t)(n * c->m->hp.n_embd) * sizeof(float);
    sl_status st;
    if (to == &c->host) {
        if ((st = copy(c, c->host.x, (*at)->x, bytes, SL_COPY_D2H, err))) return st;
        if ((st = sync_dev(c, err))) return st;
    } else if ((st = copy(c, to->x, c->host.x, bytes, SL_COPY_H2D, err))) {
        return st;
    }
    *at = to;
    return SL_OK;
}

/* The layers over the pass's n rows, x moved to each layer's side first (*at: where x is);
 * the last keeps n_out rows past its attention. */
sl_status sl__forward_layers(sl_ctx *c, const sl__side **at, int64_t n, int64_t n_out,
                             sl_error *err)
{
    const int32_t n_layer = c->m->hp.n_layer;
    for (int32_t il = 0; il < n_layer; il++) {
        const sl__side *s = c->layer_dev[il] ? &c->dev : &c->host;
        const uint64_t steps0 = c->dev.dx ? c->dev.dx->steps : 0;
        const uint64_t launches0 = sl__dx_cuda_launches(c->dev.raw);
        const int64_t keep = il == n_layer - 1 ? n_out : n;
        sl_status st;
        if ((st = sl__forward_move_x(c, at, s, n, err)) || (st = layer(c, s, il, n, keep, err)))
            return st;
        if (s == &c->dev) { /* sluice.h dev_layer_steps */
            c->stats.dev_layer_steps += c->dev.dx->steps - steps0;
            c->stats.dev_layer_launches += sl__dx_cuda_launches(c->dev.raw) - launches0;
            c->stats.dev_layers++;
        }
    }
    return SL_OK;
}

/* The greedy pick of logits row `row` (in s's memory): on a device only the result comes
 * back. */
static sl_status pick(sl_ctx *c, const sl__side *s, const float *row, int32_t *greedy,
                      sl_error *err)
{
    const int64_t V = c->m->hp.n_vocab;
    sl_status st = s->dx->vt->argmax(s->dx, row, V, s->pick, err);
    if (!st && s != &c->host &&
        !(st = copy(c, c->host.pick, s->pick, sizeof *s->pick, SL_COPY_D2H, err)))
        st = sync_dev(c, err);
    return st ? st : sl_ref_argmax_token(c->host.pick, V, greedy, err);
}

/* The embeddings option: rows [0, n) normed with output_norm on the output's side s (where
 * that weight lives) into c->hidden_out on the host. */
static sl_status keep_hidden(sl_ctx *c, const sl__side *s, int64_t n, sl_error *err)
{
    const sl_model *m = c->m;
    const int64_t E = m->hp.n_embd;
    const uint64_t bytes = (uint64_t)(n * E) * sizeof(float);
    sl_status st = s->dx->vt->rms_norm(s->dx, s->x, m->output_norm->data, s->xn, n, E,
                                       m->hp.rms_eps, err);
    if (st) return st;
    if (s == &c->host) {
        memcpy(c->hidden_out, s->xn, bytes);
        return SL_OK;
    }
    return (st = copy(c, c->hidden_out, s->xn, bytes, SL_COPY_D2H, err)) ? st : sync_dev(c, err);
}

/* Copies logits rows [r, r + nr) of the pass's output rows (the sequences' rows with logits,
 * in order) from src (side s's memory) into their sequences' logits. */
static sl_status logits_scatter(sl_ctx *c, const sl__side *s, const float *src, int64_t r,
                                int64_t nr, sl_error *err)
{
    const int64_t V = c->m->hp.n_vocab;
    int64_t at = 0; /* the output row of the sequence's first row with logits */
    for (int32_t i = 0; i < c->n_seqs; i++) {
        const sl__seq *q = &c->seqs[i];
        if (!q->logits) continue;
        const int64_t cnt = q->n - q->out_from;
        const int64_t lo = at > r ? at : r, hi = at + cnt < r + nr ? at + cnt : r + nr;
        if (lo < hi) {
            const uint64_t bytes = (uint64_t)((hi - lo) * V) * sizeof(float);
            float *dst = q->logits + (lo - at) * V;
            const float *from = src + (lo - r) * V;
            if (s != &c->host) {
                sl_status st = copy(c, dst, from, bytes, SL_COPY_D2H, err);
                if (st) return st;
            } else if (dst != from) {
                memcpy(dst, from, (size_t)bytes);
            }
        }
        at += cnt;
    }
    return SL_OK;
}

/* The logits of the sequences' rows out_from..n-1: those rows of x normalised into xn, in
 * order, then the output matrix over them (on the host into the one sequence's logits, or
 * into batch_logits first when there are several). x has n rows: kept (the last layer kept
 * only those rows, in that order from row 0) or the pass's. */
static sl_status output(sl_ctx *c, const sl__side *at, int64_t n, bool kept, bool logits,
                        int32_t *greedy, sl_error *err)
{
    const sl_model *m = c->m;
    const int64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    const sl__side *s = (m->output->residency & SL_RES_DEVICE) && c->dev.dx ? &c->dev : &c->host;
    sl_status st = sl__forward_move_x(c, &at, s, n, err);
    if (st) return st;
    if (c->hidden_out && (st = keep_hidden(c, s, n, err))) return st;
    if (!logits) return s == &c->host ? SL_OK : sync_dev(c, err);
    const sl__dx_vt *vt = s->dx->vt;
    int64_t rows = 0;
    for (int32_t i = 0; i < c->n_seqs; i++) {
        const sl__seq *q = &c->seqs[i];
        if (!q->logits) continue;
        const int64_t cnt = q->n - q->out_from;
        const int64_t r0 = kept ? rows : q->off + q->out_from;
        if ((st = vt->rms_norm(s->dx, s->x + r0 * E, m->output_norm->data,
                               s->xn + rows * E, cnt, E, m->hp.rms_eps, err)))
            return st;
        rows += cnt;
    }
    if (s == &c->host) {
        float *y = c->n_seqs == 1 ? c->seqs[0].logits : c->batch_logits;
        if ((st = vt->mm(s->dx, m->output, s->xn, rows, y, err)) ||
            (m->output_b && (st = vt->add_rows(s->dx, y, m->output_b->data, rows, V, err))))
            return st;
        if (greedy) return pick(c, s, y, greedy, err);
        return logits_scatter(c, s, y, 0, rows, err);
    }
    /* device: in groups of logits_rows rows through the device logits buffer */
    for (int64_t r = 0; r < rows; r += c->dev_logits_rows) {
        const int64_t nr = rows - r < c->dev_logits_rows ? rows - r : c->dev_logits_rows;
        if ((st = vt->mm(s->dx, m->output, s->xn + r * E, nr, c->dev_logits, err)) ||
            (m->output_b &&
             (st = vt->add_rows(s->dx, c->dev_logits, m->output_b->data, nr, V, err))))
            return st;
        if (greedy) return pick(c, s, c->dev_logits + (nr - 1) * V, greedy, err);
        if ((st = logits_scatter(c, s, c->dev_logits, r, nr, err))) return st;
    }
    return sync_dev(c, err);
}

/* The output logits' last step, on the host rows: granite's / logit_scale, gemma2's final
 * soft-capping c tanh(l / c). Both are monotone: an argmax taken before is unchanged. */
static void logits_finish(const sl__hparams *hp, float *logits, int64_t count)
{
    if (hp->logit_scale != 0.0f) {
        const float inv = 1.0f / hp->logit_scale;
        for (int64_t i = 0; i < count; i++) logits[i] *= inv;
    }
    if (hp->final_softcap > 0.0f) {
        const float c = hp->final_softcap;
        for (int64_t i = 0; i < count; i++) logits[i] = c * tanhf(logits[i] / c);
    }
}

/* The batch's embedding rows dequantized into x over the pool, rows [1, n) in runs of
 * EMBD_GRAIN (row 0 on the caller first, so a bad type comes back with its message; the others
 * cannot fail differently): each row is its own, so the bits are the serial loop's. */
typedef struct embd_job {
    uint32_t type;
    const uint8_t *base; /* rows by token id (tokens set), else in batch order */
    const int32_t *tokens;
    size_t rb;
    int64_t E;
    float *x;
    atomic_int st; /* a worker's failure, 0: none */
} embd_job;

enum { EMBD_GRAIN = 16 };

static void embd_rows(void *ctx, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    embd_job *j = ctx;
    sl_error e;
    for (int64_t t = 1 + t0; t < 1 + t1; t++) {
        const size_t r = j->tokens ? (size_t)j->tokens[t] : (size_t)t;
        const sl_status st = sl_quant_dequant_row(j->type, j->base + r * j->rb, j->x + t * j->E,
                                                  j->E, &e);
        if (st) atomic_store(&j->st, (int)st);
    }
}

static sl_status embd_dequant(sl_ctx *c, uint32_t type, const uint8_t *base,
                              const int32_t *tokens, size_t rb, int64_t E, int64_t n, float *x,
                              sl_error *err)
{
    embd_job j = {.type = type, .base = base, .tokens = tokens, .rb = rb, .E = E, .x = x};
    atomic_init(&j.st, 0);
    sl_status st = sl_quant_dequant_row(type, base + (tokens ? (size_t)tokens[0] : 0) * rb, x, E,
                                        err);
    if (st || n == 1) return st;
    if ((st = sl_cpu_pool_parallel_for(n - 1 >= 2 * EMBD_GRAIN ? c->pool : NULL, n - 1,
                                       EMBD_GRAIN, embd_rows, &j, err)))
        return st;
    st = (sl_status)atomic_load(&j.st);
    return st ? sl_error_set(err, st, "embedding rows: dequantization failed on a worker thread")
              : SL_OK;
}

static sl_status forward_run(sl_ctx *c, const int32_t *tokens, int64_t n, int32_t *greedy,
                             sl_error *err)
{
    const sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    sl__side *h = &c->host;
    sl_status st;
    /* embeddings: token_embd rows dequantized on the host (any stored type); rows of a
     * device-resident token_embd are copied down first */
    const sl_weight *te = m->tok_embd;
    const size_t rb = sl_quant_row_bytes(te->type, E);
    const bool te_dev = te->residency & SL_RES_DEVICE;
    for (int32_t i = 0; i < c->n_seqs; i++) /* each row at its own context's position */
        for (int64_t t = 0; t < c->seqs[i].n; t++)
            h->pos[c->seqs[i].off + t] = c->seqs[i].c->n_past + (int32_t)t;
    for (int64_t t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= hp->n_vocab)
            return sl_error_set(err, SL_ERR_RANGE, "token %lld of the batch: id %d outside "
                                "[0, n_vocab %d)", (long long)t, tokens[t], hp->n_vocab);
        if (te_dev &&
            (st = copy(c, c->embd_rows + (size_t)t * rb,
                       (const uint8_t *)te->data + (size_t)tokens[t] * rb, rb, SL_COPY_D2H, err)))
            return st;
    }
    if (te_dev && (st = sync_dev(c, err))) return st;
    if (n > 0 && (st = embd_dequant(c, te->type, te_dev ? c->embd_rows : te->data,
                                    te_dev ? NULL : tokens, rb, E, n, h->x, err)))
        return st;
    if (hp->embd_scale != 0.0f &&
        (st = h->dx->vt->scale(h->dx, h->x, n * E, hp->embd_scale, err)))
        return st;
    if (c->dev.dx &&
        (st = copy(c, c->dev.pos, h->pos, (uint64_t)n * sizeof(int32_t), SL_COPY_H2D, err)))
        return st;
    const sl__side *at = h;
    /* the rows x holds past the last layer's attention (all where its executor cannot move
     * rows) */
    const sl__side *last = c->layer_dev[hp->n_layer - 1] ? &c->dev : h;
    const int64_t n_out = last->dx->vt->copy2d ? out_rows(c, n) : n;
    sl__defer_plan(c, defer_kind, n, n_out);
    st = sl__forward_graph_fits(c, n) ? sl__forward_graph_run(c, &at, n, n_out, err)
                                      : sl__forward_layers(c, &at, n, n_out, err);
    if (st) {
        if (c->dev.dx) sync_dev(c, NULL); /* nothing in flight may outlive the call */
        return st;
    }
    bool any = false;
    for (int32_t i = 0; i < c->n_seqs; i++) any |= c->seqs[i].logits != NULL;
    if (any || c->hidden_out) {
        st = output(c, at, n_out, n_out < n, any, greedy, err);
        /* monotone, so a greedy pick made before it stands */
        for (int32_t i = 0; !st && !greedy && i < c->n_seqs; i++)
            if (c->seqs[i].logits)
                logits_finish(hp, c->seqs[i].logits,
                              (c->seqs[i].n - c->seqs[i].out_from) * hp->n_vocab);
    } else if (c->dev.dx) {
        st = sync_dev(c, err);
    }
    if (st && c->dev.dx) sync_dev(c, NULL);
    return st;
}

/* The pass, and what it cost the host in device operations (sluice.h dev_syncs, dev_calls):
 * the device's counters around it, less the sim executor's drains (a GPU kernel waits on its
 * stream, not the host), plus the device executor's steps (kernels enqueued past the device
 * interface). */
static sl_status forward_seqs(sl_ctx *c, const sl__seq *seqs, int32_t n_seqs,
                              const int32_t *tokens, int64_t n, int32_t *greedy, sl_error *err)
{
    sl_device_counters d0 = {0}, d1 = {0};
    const sl__dx *dx = c->dev.dx;
    const uint64_t steps0 = dx ? dx->steps : 0, drains0 = dx ? dx->drains : 0;
    if (c->m->dev) sl_device_counters_get(c->m->dev, &d0);
    c->async_st = SL_OK;
    c->seqs = seqs;
    c->n_seqs = n_seqs;
    /* the hot experts' cache follows the last pass's routing, ahead of this pass's work */
    sl_status st = sl__hot_prepare(c, err);
    if (!st) st = sl__rs_begin(c, err);
    if (!st) st = forward_run(c, tokens, n, greedy, err);
    else if (c->dev.dx) sync_dev(c, NULL); /* the cache's copies queued: none may outlive it */
    sl_error e2; /* Expert Deferral's worker idle; what a failed pass deferred dropped */
    const sl_status ds = sl__defer_end(c, !st && !c->async_st, st ? &e2 : err);
    if (!st) st = ds;
    /* the hot experts of layers whose warm-up this pass completed go up behind it */
    if (!st && !c->async_st) st = sl__hot_update(c, err);
    c->seqs = NULL;
    c->n_seqs = 0;
    /* a stream-ordered host part failed (the pass has synchronised: it ends with a sync) */
    if (!st && c->async_st) st = sl_error_set(err, c->async_st, "%s", c->async_err.msg);
    sl__rs_end(c, n, !st);
    if (c->m->dev) {
        sl_device_counters_get(c->m->dev, &d1);
        const uint64_t drains = dx ? dx->drains - drains0 : 0;
        c->stats.dev_syncs += d1.syncs - d0.syncs - drains;
        c->stats.dev_calls += d1.calls - d0.calls - drains + (dx ? dx->steps - steps0 : 0);
    }
    /* the step profiler's events, complete after the pass's final sync (outside the counts) */
    if (!st && c->opt.profile_steps && c->dev.dx) st = sl__dx_prof_settle(c->dev.dx, err);
    return st;
}

sl_status sl__forward(sl_ctx *c, const int32_t *tokens, int64_t n, float *logits_out,
                      int64_t out_from, int32_t *greedy, sl_error *err)
{
    const sl__seq one = {.c = c, .off = 0, .n = n, .logits = logits_out, .out_from = out_from};
    return forward_seqs(c, &one, 1, tokens, n, greedy, err);
}

sl_status sl__forward_batch(sl_ctx *lead, const sl__seq *seqs, int32_t n_seqs,
                            const int32_t *tokens, int64_t n, sl_error *err)
{
    return forward_seqs(lead, seqs, n_seqs, tokens, n, NULL, err);
}
