/* runtime/engine/ctx_dev.c: the device side of a context (contract in ctx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"
#include "runtime/engine/ctx.h"

enum {
    GEMM_WORK_CAP = 256 << 20,   /* larger matrices use GEMV batches instead of the GEMM */
    LOGITS_BUF_CAP = 64 << 20,   /* device logits buffer; more rows are done in groups */
};

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static size_t up256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

static bool on_dev(const sl_weight *w)
{
    return w && (w->residency & SL_RES_DEVICE);
}

/* The layer's core weights (attention, norms, router, shared expert): they run where the
 * layer runs (scheduler/policy/placement.h's CORE group). */
static size_t core_weights(const sl__layer *L, const sl_weight **out)
{
    const sl_weight *all[] = {L->attn_norm, L->wqkv, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk,
                              L->bv, L->q_norm, L->k_norm, L->attn_post_norm, L->ffn_norm,
                              L->ffn_post_norm, L->gate_inp, L->gate_shexp, L->up_shexp,
                              L->down_shexp, L->gate_inp_shexp, L->bo, L->sinks,
                              L->gate_inp_b, L->wq_a, L->q_a_norm, L->wq_b, L->wkv_a,
                              L->kv_a_norm, L->wk_b, L->wv_b, L->exp_probs_b, L->ssm_qkv,
                              L->ssm_z, L->ssm_conv1d, L->ssm_dt, L->ssm_a, L->ssm_ba,
                              L->ssm_beta, L->ssm_alpha, L->ssm_norm};
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) out[n++] = all[i];
    return n;
}

static sl_status check_weight(const sl_ctx *c, const sl_weight *w, bool dev, const char *where,
                              sl_error *err)
{
    /* a live reload's host fallback on a host-addressable (sim) device: read in place */
    const bool sim = sl_device_kind_get(c->m->dev) == SL_DEVICE_SIM;
    if (on_dev(w) != dev && !(w->fallback && sim))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: weight '%s' is on the %s while its %s runs on the %s (a "
                            "placement keeps each group of a layer on one side)", c->m->path,
                            w->name,
                            dev ? "host" : "device", where, dev ? "device" : "host");
    if (dev && w->need_matvec &&
        !sl__dx_supports(sl_device_kind_get(c->m->dev), w->type, SL__DX_OP_MATVEC)) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(w->type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: weight '%s': type %s has no CUDA GEMV",
                            c->m->path, w->name, ti ? ti->name : "?");
    }
    return SL_OK;
}

static sl_status take(sl_ctx *c, uint64_t bytes, void **p, sl_error *err)
{
    if (c->n_dev_blocks == SL__CTX_MAX_DEV_BLOCKS)
        return sl_error_set(err, SL_ERR_INVALID, "context: more than %d device blocks",
                            SL__CTX_MAX_DEV_BLOCKS);
    sl_block b;
    sl_status st = sl_bfc_alloc(c->m->arena, bytes ? bytes : 1, SL_BFC_PINNED, &b, err);
    if (st) return st;
    c->dev_blocks[c->n_dev_blocks++] = b;
    *p = sl_bfc_ptr(c->m->arena, b);
    return SL_OK;
}

sl_status sl__ctx_dev_take(sl_ctx *c, uint64_t bytes, void **p, sl_error *err)
{
    return take(c, bytes, p, err);
}

size_t sl__side_carve(const sl_ctx *c, sl__side *s, void *base)
{
    const sl__hparams *hp = &c->m->hp;
    const int64_t B = c->cap, E = hp->n_embd, D = hp->head_dim;
    /* MLA: q holds n_head heads of key_length_mla, the attention n_head latent rows, its
     * expansion n_head value heads; g and u the per-head gathers and q_lora's projection */
    const int64_t HD = max64(D, max64(hp->n_embd_head_k_mla, hp->n_embd_head_v_mla));
    const int64_t Q = max64((int64_t)hp->n_head * HD, hp->scratch_tok),
                  KV = max64((int64_t)hp->n_head_kv * D, hp->scratch_tok);
    const int64_t F = max64(max64(max64(hp->n_ff, hp->n_ff_shexp), max64(HD, hp->n_lora_q)),
                            max64(hp->scratch_tok, 1));
    const int64_t K = max64(hp->n_expert_used, 1);
    float **fp[] = {&s->x, &s->xn, &s->tmp, &s->q, &s->att, &s->k, &s->v, &s->g, &s->u,
                    &s->router, &s->sh, &s->topk_w};
    const int64_t fn[] = {B * E, B * E, B * E, B * max64(Q, E), B * max64(Q, E), B * KV, B * KV,
                          B * F, B * F, B * max64(hp->n_expert, 1), B, B * K};
    int32_t **ip[] = {&s->pos, &s->topk_idx};
    const int64_t in[] = {B, B * K};
    uint8_t *at = base;
    size_t total = 0;
    for (size_t i = 0; i < sizeof fn / sizeof *fn; i++) {
        if (at) *fp[i] = (float *)(at + total);
        total += up256((size_t)fn[i] * sizeof(float));
    }
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        if (at) *ip[i] = (int32_t *)(at + total);
        total += up256((size_t)in[i] * sizeof(int32_t));
    }
    if (at) s->pick = (sl_argmax_result *)(at + total);
    total += up256(sizeof(sl_argmax_result));
    return total;
}

static sl_status kv_slots(sl_ctx *c, int32_t n_slots, sl_error *err)
{
    const sl__kv *kv = &c->kv;
    const uint64_t per = (uint64_t)kv->n_ctx * (uint64_t)kv->n_kv * (uint64_t)kv->head_dim *
                         kv->elt;
    sl_status st = take(c, per * (uint64_t)n_slots, &c->dev.kv_k, err);
    if (!st && !kv->k_only) st = take(c, per * (uint64_t)n_slots, &c->dev.kv_v, err);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "device KV cache (%d layers x n_ctx %d, %d x %llu bytes): "
                            "%s", n_slots, kv->n_ctx, kv->k_only ? 1 : 2,
                            (unsigned long long)(per * (uint64_t)n_slots), why);
    }
    return SL_OK;
}

/* cuda: GEMM workspace for the largest device matrix whose 16-bit copy fits GEMM_WORK_CAP. */
static size_t gemm_work_bytes(const sl_ctx *c)
{
    size_t best = 0;
    for (size_t i = 0; i < c->m->n_w; i++) {
        const sl_weight *w = &c->m->w[i];
        if (!on_dev(w) || !w->need_matvec || w->type == SL_GGML_F32) continue;
        const size_t b = sl_cuda_gemm_work_bytes(w->ne[1], w->ne[0], c->cap);
        if (b <= GEMM_WORK_CAP && b > best) best = b;
    }
    for (int32_t il = 0; il < c->m->hp.n_layer; il++)
        /* hot parts of split dense FFNs (split experts run through the expert GEMV) */
        for (int p = 0; p < 3 && c->m->layers[il].n_hot && !c->m->layers[il].moe_split; p++) {
            const sl_weight *w = &c->m->layers[il].split_hot[p];
            if (!on_dev(w) || w->type == SL_GGML_F32) continue;
            const size_t b = sl_cuda_gemm_work_bytes(w->ne[1], w->ne[0], c->cap);
            if (b <= GEMM_WORK_CAP && b > best) best = b;
        }
    return c->cap >= SL__DX_GEMM_MIN_BATCH ? best : 0;
}

/* cuda: layer L's experts run on the device: all of them, or their hot parts (a split). */
static bool dev_experts(const sl__layer *L)
{
    return sl__layer_moe(L) && (L->moe_on_device[0] || L->moe_split);
}

/* Copies the model's expert pointers of layer il (of a split layer: its hot parts', and
 * their widths) into the context's device arrays. */
static sl_status upload_ptrs(sl_ctx *c, int32_t il, sl_error *err)
{
    const sl_model *m = c->m;
    const sl__layer *L = &m->layers[il];
    const sl__moe_split *ms = L->moe_split;
    const void *const *dst[3] = {c->dmoe[il].d_gate, c->dmoe[il].d_up, c->dmoe[il].d_down};
    const void **src[3] = {L->moe_gate, L->moe_up, L->moe_down};
    for (int p = 0; p < 3; p++) {
        /* the host arrays are the model's and live as long as it: the caller syncs once */
        sl_status st = sl_device_copy(m->dev, m->stream, (void *)dst[p],
                                      ms ? ms->ptr[0][p] : src[p],
                                      (uint64_t)m->hp.n_expert * sizeof(void *), SL_COPY_H2D,
                                      err);
        if (st) return st;
    }
    if (!ms) return SL_OK;
    return sl_device_copy(m->dev, m->stream, (void *)c->dmoe[il].d_ff_at, ms->ff_at[0],
                          ((uint64_t)m->hp.n_expert + 1) * sizeof(int64_t), SL_COPY_H2D, err);
}

/* The device side's executor just made at *dx (c->dev.raw), wrapped by the step profiler under
 * opt.profile_steps (its times go to c->prof, which outlives re-created executors); on failure
 * *dx is destroyed */
static sl_status profiled(sl_ctx *c, sl__dx **dx, sl_error *err)
{
    c->dev.raw = *dx;
    if (!c->opt.profile_steps) return SL_OK;
    sl__dx *w = NULL;
    sl_status st = sl__dx_prof_create(c->m->dev, c->m->stream, *dx, &c->prof, &w, err);
    if (st) {
        sl__dx_destroy(*dx);
        *dx = NULL;
        c->dev.raw = NULL;
        return st;
    }
    *dx = w;
    return SL_OK;
}

sl_status sl__ctx_dev_refresh(sl_ctx *c, size_t work_bytes, sl_error *err)
{
    sl_model *m = c->m;
    if (!c->dev.dx) return SL_OK;
    const bool cuda = sl__model_cuda(m);
    sl_status st;
    const sl_weight *rf = sl__model_rope_factors(m, c->kv.n_ctx);
    if (rf && !on_dev(rf) && c->dev_rope_bytes) {
        if (rf->nbytes != c->dev_rope_bytes)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: %s changed size after this "
                                "context was created: recreate the context", m->path, rf->name);
        if ((st = sl_device_copy(m->dev, m->stream, (void *)c->dev.rope_freqs, rf->data,
                                 rf->nbytes, SL_COPY_H2D, err)))
            return st;
    }
    if (!cuda && work_bytes > c->work_bytes) {
        sl__dx_destroy(c->dev.dx);
        c->dev.dx = c->dev.raw = NULL;
        if ((st = sl__dx_sim_create(m->dev, m->stream, &c->ops, &c->mv, c->pool, c->moe,
                                    work_bytes, &c->dev.dx, err)) ||
            (st = profiled(c, &c->dev.dx, err)))
            return st;
    }
    return sl__ctx_dev_rebind(c, err);
}

sl_status sl__ctx_dev_rebind(sl_ctx *c, sl_error *err)
{
    sl_model *m = c->m;
    if (!c->dev.dx) return SL_OK;
    const bool cuda = sl__model_cuda(m);
    sl_status st;
    const sl_weight *rf = sl__model_rope_factors(m, c->kv.n_ctx);
    if (rf && on_dev(rf)) c->dev.rope_freqs = rf->data;
    for (int32_t il = 0; cuda && il < m->hp.n_layer && m->hp.n_expert; il++) {
        if (!dev_experts(&m->layers[il])) continue;
        if (!c->dmoe[il].d_gate)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: layer %d: a reload moved its "
                                "experts to the device after this context was created: "
                                "recreate the context", m->path, il);
        if ((st = upload_ptrs(c, il, err))) return st;
    }
    return sl_device_stream_sync(m->dev, m->stream, err);
}

/* cuda: device arrays of each device MoE layer's expert pointers, [gate | up | down], and
 * of a split layer's hot widths after them. */
static sl_status expert_ptrs(sl_ctx *c, sl_error *err)
{
    const sl_model *m = c->m;
    const int32_t X = m->hp.n_expert;
    int32_t n_layers = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) n_layers += dev_experts(&m->layers[il]);
    if (!n_layers) return SL_OK;
    const uint64_t per = 3 * (uint64_t)X * sizeof(void *) + ((uint64_t)X + 1) * sizeof(int64_t);
    uint8_t *base;
    sl_status st = take(c, per * (uint64_t)n_layers, (void **)&base, err);
    if (st) return st;
    int32_t slot = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        if (!dev_experts(L)) continue;
        const void *const **dst[3] = {&c->dmoe[il].d_gate, &c->dmoe[il].d_up, &c->dmoe[il].d_down};
        uint8_t *at = base + (uint64_t)slot * per;
        for (int p = 0; p < 3; p++)
            *dst[p] = (const void *const *)(at + (uint64_t)p * X * sizeof(void *));
        if (L->moe_split)
            c->dmoe[il].d_ff_at = (const int64_t *)(at + 3 * (uint64_t)X * sizeof(void *));
        if ((st = upload_ptrs(c, il, err))) return st;
        slot++;
    }
    return SL_OK;
}

sl_status sl__ctx_dev_create(sl_ctx *c, size_t work_bytes, sl_error *err)
{
    sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    c->layer_dev = calloc((size_t)hp->n_layer, sizeof *c->layer_dev);
    c->kv_slot = malloc((size_t)hp->n_layer * sizeof *c->kv_slot);
    c->dmoe = calloc((size_t)hp->n_layer, sizeof *c->dmoe);
    if (!c->layer_dev || !c->kv_slot || !c->dmoe)
        return sl_error_set(err, SL_ERR_NOMEM, "context: out of memory");
    int32_t n_dev = 0;
    bool any_dev = false;
    sl_status st;
    const bool cuda = sl__model_cuda(m);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        sl__layer *L = &m->layers[il];
        /* a split layer's: its hot part, which the device side runs (forward_ffn.c) */
        c->dmoe[il].L = L->moe_split ? &L->moe_split->part[0] : &L->moe;
        c->kv_slot[il] = -1;
        const bool dev = m->arena && on_dev(L->wo); /* every architecture's attention has wo */
        /* the attention's head: MLA attends over latent rows (n_lora_kv + n_rot) */
        const int32_t attn_hd = m->tr->mla ? hp->n_lora_kv + hp->n_rot : hp->head_dim;
        if (cuda && dev && !sl__dx_supports(SL_DEVICE_CUDA, (uint32_t)attn_hd, SL__DX_OP_ATTN))
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: layer %d: %s's attention head of "
                                "%d has no CUDA kernel (run it on the CPU or with -ngl 0)",
                                m->path, il, sl_arch_name(m->arch), attn_hd);
        if (cuda && dev && m->tr->recurrent)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: layer %d: %s's Gated DeltaNet "
                                "(ssm_conv, gated delta rule) and gated attention have no CUDA "
                                "kernels yet (run it on the CPU: --placement cpu or -ngl 0)",
                                m->path, il, sl_arch_name(m->arch));
        const sl_weight *ws[48]; /* core_weights' list has 37 entries */
        const size_t nw = core_weights(L, ws);
        char where[48];
        snprintf(where, sizeof where, "layer %d", il);
        for (size_t i = 0; i < nw; i++)
            if ((st = check_weight(c, ws[i], dev, where, err))) return st;
        if (L->ffn_up && L->ffn_up->residency == SL_RES_PARTS) {
            any_dev = true; /* hot part on the device, cold on the host (weight.c checks) */
        } else if (L->ffn_up) {
            const bool fdev = m->arena && on_dev(L->ffn_up);
            snprintf(where, sizeof where, "layer %d FFN", il);
            const sl_weight *fw[] = {L->ffn_gate, L->ffn_up, L->ffn_down};
            for (int i = 0; i < 3; i++) /* no ffn_gate: gate | up fused (phi3) */
                if (fw[i] && (st = check_weight(c, fw[i], fdev, where, err))) return st;
            any_dev |= fdev;
        }
        if (sl__layer_moe(L)) {
            for (int32_t x = 1; x < hp->n_expert; x++)
                if (L->moe_on_device[x] != L->moe_on_device[0])
                    return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: layer %d: routed experts "
                                        "split between host and device (a placement keeps "
                                        "them on one side)", m->path, il);
            const sl_device_kind kind = sl_device_kind_get(m->dev);
            if (dev_experts(L) &&
                (!sl__dx_supports(kind, L->moe.type_gate, SL__DX_OP_MATVEC) ||
                 !sl__dx_supports(kind, L->moe.type_up, SL__DX_OP_MATVEC) ||
                 !sl__dx_supports(kind, L->moe.type_down, SL__DX_OP_MATVEC)))
                return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: layer %d: expert types have no "
                                    "CUDA GEMV", m->path, il);
            snprintf(where, sizeof where, "layer %d experts", il);
            const sl_weight *eb[] = {L->gate_exps_b, L->up_exps_b, L->down_exps_b};
            for (int i = 0; i < 3; i++)
                if (eb[i] && (st = check_weight(c, eb[i], m->arena && L->moe_on_device[0], where,
                                                err)))
                    return st;
            any_dev |= L->moe_on_device[0] || L->moe_split; /* a split's hot parts too */
        }
        c->layer_dev[il] = dev;
        if (dev) c->kv_slot[il] = n_dev++;
    }
    const bool out_dev = m->arena && on_dev(m->output);
    if ((st = check_weight(c, m->output_norm, out_dev, "output", err))) return st;
    /* nothing on the device: resident experts asked for are refused (hot.c), else nothing */
    if (!n_dev && !out_dev && !any_dev) return sl__hot_setup(c, err);

    sl__side *d = &c->dev;
    void *base;
    if ((st = sl_device_event_create(m->dev, &c->ev_xn, err))) return st;
    if ((st = take(c, sl__side_carve(c, d, NULL), &base, err))) return st;
    sl__side_carve(c, d, base);
    if (n_dev && (st = kv_slots(c, n_dev, err))) return st;
    const sl_weight *rf = sl__model_rope_factors(m, c->kv.n_ctx);
    if (rf && on_dev(rf)) {
        d->rope_freqs = rf->data;
    } else if (rf && n_dev) {
        void *p;
        if ((st = take(c, rf->nbytes, &p, err)) ||
            (st = sl_device_copy(m->dev, m->stream, p, rf->data, rf->nbytes, SL_COPY_H2D, err)))
            return st;
        d->rope_freqs = p;
        c->dev_rope_bytes = rf->nbytes;
    }
    if (out_dev) {
        const int64_t row = (int64_t)hp->n_vocab * (int64_t)sizeof(float);
        int64_t rows = LOGITS_BUF_CAP / row;
        if (rows < 1) rows = 1;
        if (rows > c->cap) rows = c->cap;
        c->dev_logits_rows = rows;
        if ((st = take(c, (uint64_t)(rows * row), (void **)&c->dev_logits, err))) return st;
    }
    if (cuda) {
        const size_t gw = gemm_work_bytes(c);
        void *work = NULL, *scratch = NULL;
        if (gw && (st = take(c, gw, &work, err))) return st;
        const int32_t K = hp->n_expert_used;
        /* the experts' scratch (none without experts) and the fused launches' counters */
        const size_t sb = sl__dx_cuda_scratch_bytes(c->cap, hp->n_expert ? K : 0, hp->n_ff_exp,
                                                    hp->n_embd);
        if ((st = take(c, sb, &scratch, err))) return st;
        if (hp->n_expert && (st = expert_ptrs(c, err))) return st;
        if ((st = sl__dx_cuda_create(m->dev, m->stream, work, gw, scratch, c->cap, K,
                                     hp->n_ff_exp, hp->n_embd, c->mv.f32_act, sl__ctx_pdl(c),
                                     !c->opt.no_fusion, c->hot.bytes || c->hot.uploads,
                                     &d->dx, err)))
            return st;
    } else {
        if ((st = sl__dx_sim_create(m->dev, m->stream, &c->ops, &c->mv, c->pool, c->moe,
                                    work_bytes, &d->dx, err)))
            return st;
    }
    if ((st = profiled(c, &d->dx, err))) return st;
    if ((st = sl__stream_setup(c, err)) || (st = sl__hot_setup(c, err))) return st;
    /* the uploads above read model-lifetime host memory; they complete before the first use */
    return sl_device_stream_sync(m->dev, m->stream, err);
}

void sl__ctx_dev_destroy(sl_ctx *c)
{
    /* copies into the blocks may still be in flight after a failed create */
    if (c->n_dev_blocks) sl_device_stream_sync(c->m->dev, c->m->stream, NULL);
    sl__forward_graph_drop(c);
    sl__stream_free(c);
    sl__dx_destroy(c->dev.dx); /* (joins its side stream, which may read the hot experts) */
    c->dev.dx = c->dev.raw = NULL;
    sl__hot_free(c);
    if (c->ev_xn) sl_device_event_destroy(c->m->dev, c->ev_xn);
    c->ev_xn = NULL;
    for (int i = 0; i < c->n_dev_blocks; i++) sl_bfc_free(c->m->arena, c->dev_blocks[i], NULL);
    c->n_dev_blocks = 0;
    free(c->layer_dev);
    free(c->kv_slot);
    free(c->dmoe);
    c->layer_dev = NULL;
    c->kv_slot = NULL;
    c->dmoe = NULL;
}

bool sl__ctx_pdl(const sl_ctx *c)
{
    return !c->opt.no_pdl && !c->pdl_capture_refused;
}

void sl__ctx_set_pdl(sl_ctx *c, bool on)
{
    on = on && sl__ctx_pdl(c);
    sl__dx_cuda_set_pdl(c->dev.raw, on);
    if (c->hot.cu) sl_cuda_ctx_set_pdl(c->hot.cu, on);
    if (c->stream.cu) sl_cuda_ctx_set_pdl(c->stream.cu, on);
}
