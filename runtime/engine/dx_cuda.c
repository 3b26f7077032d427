/* runtime/engine/dx_cuda.c: the cuda executor (dx.h) — kernels/cuda on the model's stream.
 *
 * Matmuls: GEMV (F32 activations) for batches below SL__DX_GEMM_MIN_BATCH and for F32 weights
 * (whose 1e-4 agreement with the reference an F16 GEMM would lose); the cuBLAS GEMM after
 * dequantisation to F16 otherwise, when the caller's workspace holds the matrix, else GEMV in
 * batches. Attention: one launch for up to 65535 tokens, each at its position read on the
 * device (so a captured decode pass replays at any context length); a prefill's tokens in
 * tiles that read K/V once per tile (kernels/cuda/attn_prefill.cuh, ops.h). Routed
 * experts: over a chunk of up to MOE_CHUNK tokens' selections at once (a prefill of 512 tokens
 * was 4 launches per token and layer: launch-bound at 284 tok/s on the H200, 2026-11-30) —
 * gate and up (each token's X shared by its k slots), the activation, down (each slot's own
 * X) — then one combine for all tokens (a decode's slots: down and the combine one launch,
 * sl_cuda_gemv_experts_combine); a chunk with at least as many selections as experts
 * grouped by expert (kernels/cuda/gemv_grouped.h: one sort per chunk) and multiplied on the
 * tensor cores (gemm_grouped.h: each W tile decoded once per 32 slots; the grouped GEMV when
 * F32 activations were asked for), else one batched-expert GEMV per projection; expert
 * biases (gpt-oss) after each GEMV and the clamped SwiGLU, as the CPU's expert FFN; the hot
 * part of experts split by neurons (ffn_split.h) the same way through per-expert widths and
 * its own bias entries, a token at a time. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/fwd.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_grouped.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_grouped.h"
#include "kernels/cuda/gemv_multi.h"
#include "kernels/cuda/ops.h"
#include "runtime/engine/dx.h"

/* tokens whose experts are one launch per projection: a prefill of 512 tokens at once, so
 * that the tensor-core GEMM sees ~32 slots an expert on 128 experts x top-8; bounds the gate/up
 * scratch (512 x k 8 x 2048 x 4 B = 32 MiB each for DeepSeek-V3) and keeps n_sel = chunk * k
 * within a grid dimension (k <= 127) */
enum { MOE_CHUNK = 512 };

/* the tokens of a chunk of an n_tok-token context: the scratch's and c_moe's one rule */
static int64_t moe_chunk(int64_t n_tok)
{
    return n_tok < MOE_CHUNK ? n_tok : MOE_CHUNK;
}

typedef struct dx_cuda {
    sl__dx base; /* must be first */
    sl_cuda_ctx *cu;
    void *work;
    size_t work_bytes;
    float *eg, *eu, *ey; /* [chunk * k_max][f_max] twice (chunk = min(n_tok, MOE_CHUNK)),
                          * [n_tok * k_max][e_max] */
    int32_t *order;      /* a chunk's slots by expert (sl_cuda_expert_order), up to
                          * SL_CUDA_GROUPED_MAX_EXPERTS experts */
    int32_t *hot_ids;    /* [n_tok * k_max]: moe_rows' masked ids */
    /* moe_rows runs on a second stream forked from the model's (so the host function that
     * follows it on the model's stream, the CPU's part, overlaps it) and moe_join waits for
     * it: ev_fork / ev_join; joined false between the two. NULL side: one stream. */
    sl_device *dev;
    sl_stream *stream, *side;
    sl_event *ev_fork, *ev_join;
    bool joined;
    void *gwork;         /* the grouped GEMM's F16 X (sl_cuda_gemm_grouped) */
    size_t gwork_bytes;
    int64_t n_tok, f_max, e_max;
    int32_t k_max;
    bool f32_act; /* F32 activations asked for: the grouped GEMV, not the F16 GEMM */
    /* the fused launches taken (sl_ctx_options.no_fusion off): the norm in Q/K/V's prologue,
     * gate/up + SwiGLU (dense, shared and routed); without, no counters are set, so the
     * last-block launches are not taken either */
    bool fused;
} dx_cuda;

static sl_status c_mm(sl__dx *x, const sl_weight *w, const float *in, int64_t n, float *y,
                      sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    const int64_t cols = w->ne[0], rows = w->ne[1];
    sl_status st;
    if (n >= SL__DX_GEMM_MIN_BATCH && w->type != SL_GGML_F32 &&
        sl_cuda_gemm_work_bytes(rows, cols, n) <= c->work_bytes) {
        st = sl_cuda_gemm(c->cu, w->type, w->data, rows, cols, in, n, y, SL_CUDA_GEMM_F16,
                          c->work, c->work_bytes, err);
    } else {
        st = SL_OK;
        for (int64_t b = 0; b < n && !st; b += SL_CUDA_GEMV_MAX_BATCH) {
            const int64_t nb = n - b < SL_CUDA_GEMV_MAX_BATCH ? n - b : SL_CUDA_GEMV_MAX_BATCH;
            st = sl_cuda_gemv(c->cu, w->type, w->data, rows, cols, in + b * cols, nb,
                              y + b * rows, err);
        }
    }
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "matmul with '%s' (cuda): %s", w->name, why);
    }
    return SL_OK;
}

static sl_status c_rms_norm(sl__dx *x, const float *in, const float *w, float *y, int64_t rows,
                            int64_t dim, float eps, sl_error *err)
{
    x->steps++;
    return sl_cuda_rms_norm(((dx_cuda *)x)->cu, in, w, y, rows, dim, eps, false, err);
}

static sl_status c_add(sl__dx *x, const float *a, const float *b, float *y, int64_t n,
                       sl_error *err)
{
    x->steps++;
    return sl_cuda_add(((dx_cuda *)x)->cu, a, b, y, n, err);
}

static sl_status c_add_rows(sl__dx *x, float *y, const float *b, int64_t rows, int64_t dim,
                            sl_error *err)
{
    x->steps++;
    return sl_cuda_add_rows(((dx_cuda *)x)->cu, y, b, rows, dim, err);
}

static sl_status c_scale(sl__dx *x, float *v, int64_t n, float s, sl_error *err)
{
    x->steps++;
    return sl_cuda_scale(((dx_cuda *)x)->cu, v, n, s, err);
}

static sl_status c_glu(sl__dx *x, sl_moe_act act, float *g, const float *u, int64_t n,
                       sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    if (act == SL_MOE_SILU) return sl_cuda_swiglu(c->cu, g, u, g, n, err);
    if (act == SL_MOE_SWIGLU_OAI)
        return sl_cuda_swiglu_oai(c->cu, g, u, g, n, SL_OAI_ALPHA, SL_OAI_LIMIT, err);
    if (act == SL_MOE_RELU) /* no CUDA kernel yet: a ReLU model's FFNs stay on the host */
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "cuda: no ReLU FFN (ReLU llama)");
    return sl_cuda_geglu(c->cu, g, u, g, n, SL_GELU_TANH, err);
}

static sl_status c_rope(sl__dx *x, float *v, int64_t n_tok, int32_t n_head, int32_t head_dim,
                        const int32_t *pos, const sl_rope_params *p, sl_error *err)
{
    x->steps++;
    return sl_cuda_rope(((dx_cuda *)x)->cu, v, n_tok, n_head, head_dim, pos, p, err);
}

static sl_status c_kv_store(sl__dx *x, void *cache, bool f16, int64_t row, const int32_t *pos,
                            int64_t n, const float *src, sl_error *err)
{
    x->steps++;
    return sl_cuda_kv_store(((dx_cuda *)x)->cu, src, pos, n, row, f16, cache, err);
}

/* Up to 65535 tokens a launch, each at its position read on the device (pos), so that a
 * captured decode pass replays right at any context length. */
static sl_status c_attn(sl__dx *x, const float *q, const void *kc, const void *vc,
                        const sl_attn_params *p, const int32_t *pos, int64_t n, float *out,
                        sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    const int64_t qd = (int64_t)p->n_head * p->head_dim;
    for (int64_t t = 0; t < n;) {
        const int64_t r = n - t < 65535 ? n - t : 65535;
        sl_status st = sl_cuda_attn_at(c->cu, q + t * qd, kc, vc, p, pos + t, r, out + t * qd,
                                       err);
        if (st) return st;
        t += r;
    }
    return SL_OK;
}

static sl_status c_router(sl__dx *x, const float *logits, int64_t n, const sl_router_params *p,
                          int32_t *idx, float *w, sl_error *err)
{
    x->steps++;
    return sl_cuda_router_topk(((dx_cuda *)x)->cu, logits, n, p, idx, w, err);
}

/* One batched-expert GEMV of part p (0 gate, 1 up, 2 down) of M for the k experts in ids,
 * then that part's expert bias (gpt-oss) as the CPU's expert FFN adds it: gate/up Y [k][F]
 * from one x [E], down Y [k][E] from x [k][F]; a hot/cold part (ff_at) through its
 * per-expert widths and its own gate/up bias entries (ffn_split.h; its down bias is the cold
 * side's). */
static sl_status experts_gemv(dx_cuda *c, const sl__dx_moe *M, int p, const int32_t *ids,
                              int32_t k, int32_t x_group, const float *in, float *y,
                              const int32_t *order, sl_error *err)
{
    const sl_moe_layer *L = M->L;
    const int64_t E = L->n_embd, F = L->n_ff;
    const uint32_t type = p == 0 ? L->type_gate : p == 1 ? L->type_up : L->type_down;
    const void *const *w = p == 0 ? M->d_gate : p == 1 ? M->d_up : M->d_down;
    const float *bias = p == 0 ? L->gate_b : p == 1 ? L->up_b : L->down_b;
    const int64_t rows = p == 2 ? E : F, cols = p == 2 ? F : E;
    sl_status st;
    if (M->d_ff_at)
        st = sl_cuda_gemv_expert_parts(c->cu, type, w, L->n_expert, M->d_ff_at, p == 2, ids, k,
                                       rows, cols, in, y, err);
    else if (order && !c->f32_act)
        st = sl_cuda_gemm_grouped(c->cu, type, w, L->n_expert, order, k, rows, cols, in,
                                  p == 2 ? 1 : x_group, y, c->gwork, c->gwork_bytes, err);
    else if (order)
        st = sl_cuda_gemv_grouped(c->cu, type, w, L->n_expert, order, k, rows, cols, in,
                                  p == 2 ? 1 : x_group, y, err);
    else
        st = sl_cuda_gemv_experts(c->cu, type, w, L->n_expert, ids, k, rows, cols, in,
                                  p == 2 ? 1 : x_group, y, err);
    if (st || !bias) return st;
    return sl_cuda_expert_bias(c->cu, y, bias, p == 2 ? NULL : M->d_ff_at, L->n_expert, ids,
                               k, rows, err);
}

/* The S slots' act(gate) * up into c->eg (c->eu: up's scratch). Past a part's width gate' and
 * up' give 0 (no bias there), act(0, 0) = 0 for every activation (the clamped SwiGLU's too),
 * and down' never reads it. Where the slots go one by one (no order: a decode) and nothing
 * comes between the GEMVs and the SwiGLU (no biases, no parts), one launch with the unfused
 * bits (sl_cuda_gemv_experts_glu), if the types take Q8 activations. */
static sl_status experts_gate_up(dx_cuda *c, const sl__dx_moe *M, const int32_t *ids,
                                 int32_t S, int32_t k, const float *in, const int32_t *order,
                                 sl_error *err)
{
    const sl_moe_layer *L = M->L;
    if (c->fused && !order && !M->d_ff_at && L->act == SL_MOE_SILU && !L->gate_b && !L->up_b &&
        sl_cuda_gemv_experts_glu_q8(c->cu, L->type_gate, L->type_up, L->n_embd))
        return sl_cuda_gemv_experts_glu(c->cu, L->type_gate, M->d_gate, L->type_up, M->d_up,
                                        L->n_expert, ids, S, L->n_ff, L->n_embd, in, k, c->eg,
                                        err);
    sl_status st;
    if ((st = experts_gemv(c, M, 0, ids, S, k, in, c->eg, order, err)) ||
        (st = experts_gemv(c, M, 1, ids, S, k, in, c->eu, order, err)))
        return st;
    const uint64_t s0 = c->base.steps; /* a part of the moe step, not one of its own */
    st = c_glu(&c->base, L->act, c->eg, c->eu, (int64_t)S * L->n_ff, err);
    c->base.steps = s0;
    return st;
}

/* Every slot's unweighted expert output of the n tokens' [n][k] ids into y [n * k][n_embd]
 * (a slot whose id is outside [0, n_expert) gets zeros: the GEMVs' rule). */
/* The layer's experts on the device and n tokens' k slots within the scratch */
static sl_status moe_check(const dx_cuda *c, const sl__dx_moe *M, int64_t n, int32_t k,
                           sl_error *err)
{
    const sl_moe_layer *L = M->L;
    if (!M->d_gate || !M->d_up || !M->d_down || (L->ff_at && !M->d_ff_at))
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d (cuda): experts%s not on the "
                            "device", L->layer, L->ff_at ? "' widths (ff_at)" : "");
    if (n > c->n_tok || k > c->k_max || L->n_ff > c->f_max || L->n_embd > c->e_max)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d (cuda): %lld tokens x k %d, n_ff "
                            "%lld, n_embd %lld exceed the scratch's sizes", L->layer,
                            (long long)n, k, (long long)L->n_ff, (long long)L->n_embd);
    return SL_OK;
}

static sl_status moe_slots(dx_cuda *c, const sl__dx_moe *M, const int32_t *idx, int64_t n,
                           int32_t k, const float *in, float *y, sl_error *err)
{
    const sl_moe_layer *L = M->L;
    sl_status cst = moe_check(c, M, n, k, err);
    if (cst) return cst;
    const int64_t E = L->n_embd;
    /* a chunk of T tokens, T * k slots in each launch; a split layer's parts (their GEMV has no
     * token grouping) one token at a time */
    int64_t chunk = M->d_ff_at ? 1 : moe_chunk(c->n_tok);
    if (k > 0 && chunk * k > 65535) chunk = 65535 / k; /* n_sel: one grid dimension */
    if (chunk < 1)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d (cuda): k = %d experts a token "
                            "exceed a launch's 65535 slots", L->layer, k);
    /* grouped by expert where a chunk's slots outnumber the experts (a prefill) */
    const bool can_group = !M->d_ff_at && c->order && (c->gwork || c->f32_act) &&
                           L->n_expert <= SL_CUDA_GROUPED_MAX_EXPERTS &&
                           sl_cuda_gemv_grouped_supported(L->type_gate) &&
                           sl_cuda_gemv_grouped_supported(L->type_up) &&
                           sl_cuda_gemv_grouped_supported(L->type_down);
    for (int64_t t = 0; t < n; t += chunk) {
        const int64_t T = n - t < chunk ? n - t : chunk;
        const int32_t S = (int32_t)(T * k), *ids = idx + t * k;
        const int32_t *order = can_group && S >= L->n_expert ? c->order : NULL;
        sl_status st = order ? sl_cuda_expert_order(c->cu, ids, S, L->n_expert, c->order, err)
                             : SL_OK;
        if (!st) st = experts_gate_up(c, M, ids, S, k, in + t * E, order, err);
        if (st || (st = experts_gemv(c, M, 2, ids, S, 1, c->eg, y + t * k * E, order, err))) {
            char why[SL_ERROR_MSG_BYTES]; /* err->msg is the message being written */
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sl_error_set(err, st, "moe layer %d (cuda), tokens %lld..%lld: %s", L->layer,
                                (long long)t, (long long)(t + T - 1), why);
        }
    }
    return SL_OK;
}

/* Whether c_moe's down projection and combine are one launch (sl_cuda_gemv_experts_combine):
 * one token's slots (each column's last block combines the launch's tokens in turn: a
 * decode's, not a batch's), one launch a projection in slot order (fewer slots than experts: never grouped; one chunk), whole
 * experts without a down bias, and the Q8-activation kernel */
static bool moe_fused_down(const dx_cuda *c, const sl__dx_moe *M, int64_t n, int32_t k)
{
    const sl_moe_layer *L = M->L;
    return n == 1 && k < L->n_expert && !M->d_ff_at && !L->down_b &&
           sl_cuda_gemv_experts_combine_q8(c->cu, L->type_down, L->n_embd, L->n_ff, k);
}

static sl_status c_moe(sl__dx *x, const sl__dx_moe *M, const int32_t *idx, const float *w,
                       int64_t n, int32_t k, const float *in, float *out, float *res,
                       sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    const sl_moe_layer *L = M->L;
    if (moe_fused_down(c, M, n, k)) { /* gate/up (+ GLU), then down + combine (+ res) */
        sl_status st = moe_check(c, M, n, k, err);
        if (st) return st; /* its message names the layer */
        const int32_t S = (int32_t)(n * k);
        st = experts_gate_up(c, M, idx, S, k, in, NULL, err);
        if (!st)
            st = sl_cuda_gemv_experts_combine(c->cu, L->type_down, M->d_down, L->n_expert, idx,
                                              S, L->n_embd, L->n_ff, c->eg, c->ey, k, w, res,
                                              res ? res : out, err);
        if (!st) return SL_OK;
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "moe layer %d (cuda), %lld tokens: %s", L->layer,
                            (long long)n, why);
    }
    const sl_status st = moe_slots(c, M, idx, n, k, in, c->ey, err);
    if (st) return st;
    /* with res: the residual added in the combine's launch, in place */
    return sl_cuda_moe_combine(c->cu, c->ey, NULL, idx, w, n, k, M->L->n_embd, res,
                               res ? res : out, err);
}

/* The slots of the mask's experts: their ids kept, the others -1 (zeros from the GEMVs). */
static sl_status c_moe_rows(sl__dx *x, const sl__dx_moe *M, const uint8_t *mask,
                            const int32_t *idx, int64_t n, int32_t k, const float *in,
                            float *rows, sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    if (!c->hot_ids || n > c->n_tok || k > c->k_max)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d (cuda): %lld tokens x k %d "
                            "exceed the scratch's sizes", M->L->layer, (long long)n, k);
    sl_status st = SL_OK;
    if (c->side) { /* fork: the side stream starts after everything before on the model's */
        if ((st = sl_device_event_record(c->dev, c->ev_fork, c->stream, err)) ||
            (st = sl_device_stream_wait(c->dev, c->side, c->ev_fork, err)) ||
            (st = sl_cuda_ctx_set_stream(c->cu, sl_device_stream_native(c->dev, c->side), err)))
            return st;
        c->joined = false;
    }
    st = sl_cuda_moe_mask_ids(c->cu, idx, mask, n * k, M->L->n_expert, c->hot_ids, err);
    if (!st) st = moe_slots(c, M, c->hot_ids, n, k, in, rows, err);
    if (!c->side) return st;
    sl_error e2;
    sl_status back = sl_cuda_ctx_set_stream(c->cu, sl_device_stream_native(c->dev, c->stream),
                                            st ? &e2 : err);
    const sl_status rec = sl_device_event_record(c->dev, c->ev_join, c->side,
                                                 st || back ? &e2 : err);
    if (!back) back = rec;
    /* failed: no moe_join follows (forward_ffn.c), so the model's stream joins the side here; its
     * kernels use the scratch the next pass reuses, and a capture must not end unjoined */
    if ((st || back) && !rec && !sl_device_stream_wait(c->dev, c->stream, c->ev_join, &e2))
        c->joined = true;
    return st ? st : back;
}

static sl_status c_moe_join(sl__dx *x, const float *ra, const float *rb, const int32_t *idx,
                            const float *w, int64_t n, int32_t k, int64_t dim, float *out,
                            float *res, sl_error *err)
{
    x->steps++;
    dx_cuda *c = (dx_cuda *)x;
    if (c->side && !c->joined) { /* the model's stream waits for moe_rows' side */
        const sl_status st = sl_device_stream_wait(c->dev, c->stream, c->ev_join, err);
        if (st) return st;
        c->joined = true;
    }
    return sl_cuda_moe_combine(c->cu, ra, rb, idx, w, n, k, dim, res, res ? res : out, err);
}

static sl_status c_gated_add(sl__dx *x, float *out, const float *y, const float *logit,
                             int64_t n, int64_t dim, sl_error *err)
{
    x->steps++;
    return sl_cuda_gated_add(((dx_cuda *)x)->cu, out, y, logit, n, dim, err);
}

static sl_status c_copy2d(sl__dx *x, float *dst, int64_t dst_stride, const float *src,
                          int64_t src_stride, int64_t rows, int64_t width, sl_error *err)
{
    x->steps++;
    return sl_cuda_copy2d(((dx_cuda *)x)->cu, dst, dst_stride, src, src_stride, rows, width,
                          err);
}

/* All heads in one launch (sl_cuda_gemv_heads). */
static sl_status c_mm_heads(sl__dx *x, const sl_weight *w, const float *src, int64_t src_ts,
                            int64_t src_hs, float *dst, int64_t dst_ts, int64_t dst_hs,
                            int64_t n, sl_error *err)
{
    x->steps++;
    const int64_t H = w->ne[2] > 0 ? w->ne[2] : 1;
    if (n < 1) return SL_OK;
    if (H > 65535 || n > SL_CUDA_GEMV_MULTI_MAX_N)
        return sl_error_set(err, SL_ERR_INVALID, "per-head matmul '%s' (cuda): %lld heads x %lld "
                            "tokens exceed the launch", w->name, (long long)H, (long long)n);
    sl_status st = sl_cuda_gemv_heads(((dx_cuda *)x)->cu, w->type, w->data,
                                      (int64_t)sl__weight_slice_bytes(w), (int32_t)H, w->ne[1],
                                      w->ne[0], src, src_ts, src_hs, n, dst, dst_ts, dst_hs, err);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "per-head matmul with '%s' (cuda): %s", w->name, why);
    }
    return SL_OK;
}

/* ys[i] = ws[i] xn as one multi-matrix GEMV launch (sl_cuda_gemv_multi) for decode-sized
 * batches (below SL__DX_GEMM_MIN_BATCH; Q8 activations per token where every matrix is of
 * the Q8-activation GEMV's types, as c_mm's GEMV takes them for one token only, else F32);
 * larger batches, or more than SL_CUDA_GEMV_MULTI_MAX matrices: c_mm per matrix. */
static bool multi_gemv(int count, int64_t n)
{
    return n < SL__DX_GEMM_MIN_BATCH && count <= SL_CUDA_GEMV_MULTI_MAX;
}

/* A group's matrices (count <= SL_CUDA_GEMV_MULTI_MAX, equal columns) as sl_cuda_gemv_mat;
 * bias: the first one's (the router's), NULL: none */
static sl_status group_mats(const sl_weight *const *ws, int count, float *const *ys,
                            const float *bias, sl_cuda_gemv_mat *ms, sl_error *err)
{
    for (int i = 0; i < count; i++) {
        if (ws[i]->ne[0] != ws[0]->ne[0])
            return sl_error_set(err, SL_ERR_INVALID, "matmul group (cuda): '%s' has %lld "
                                "columns, '%s' %lld", ws[0]->name, (long long)ws[0]->ne[0],
                                ws[i]->name, (long long)ws[i]->ne[0]);
        ms[i] = (sl_cuda_gemv_mat){.type = ws[i]->type, .w = ws[i]->data, .rows = ws[i]->ne[1],
                                   .bias = i ? NULL : bias, .y = ys[i]};
    }
    return SL_OK;
}

/* st of a group's launch, its message naming the group's first matrix */
static sl_status group_fail(const sl_weight *const *ws, int count, sl_status st, sl_error *err)
{
    if (!st) return SL_OK;
    char why[SL_ERROR_MSG_BYTES];
    snprintf(why, sizeof why, "%s", err ? err->msg : "");
    return sl_error_set(err, st, "matmul with '%s'%s (cuda): %s", ws[0]->name,
                        count > 1 ? " and the rest of its group" : "", why);
}

/* bias: of the first matrix (the router's), NULL: none; silu_glu: sl_cuda_gemv_multi's */
static sl_status mm_group(sl__dx *x, const sl_weight *const *ws, int count, const float *xn,
                          int64_t n, float *const *ys, const float *bias, bool silu_glu,
                          sl_error *err)
{
    if (!multi_gemv(count, n)) {
        if (bias || silu_glu)
            return sl_error_set(err, SL_ERR_INVALID, "matmul group (cuda): a bias or GLU "
                                "epilogue on the multi-matrix GEMV only");
        for (int i = 0; i < count; i++) {
            sl_status st = c_mm(x, ws[i], xn, n, ys[i], err);
            if (st) return st;
        }
        return SL_OK;
    }
    sl_cuda_gemv_mat ms[SL_CUDA_GEMV_MULTI_MAX];
    sl_status st = group_mats(ws, count, ys, bias, ms, err);
    if (!st)
        st = sl_cuda_gemv_multi(((dx_cuda *)x)->cu, ms, count, ws[0]->ne[0], xn, n, silu_glu,
                                err);
    return group_fail(ws, count, st, err);
}

/* Fused steps: q/k norm + rope + KV store is one kernel (sl_cuda_qk_rope_store); wo / down +
 * residual add + norm one Q8-activation GEMV for a token, the add in its epilogue and the norm
 * in its last block (sl_cuda_gemv_add_norm), else a GEMV then one add + norm kernel
 * (sl_cuda_add_rms_norm); norm + QKV one multi-matrix GEMV with the norm in its prologue where
 * it takes Q8 activations (sl_cuda_gemv_multi_norm), else the norm then the GEMV (mm_group);
 * gate/up + GLU one multi-matrix GEMV with the SwiGLU in its epilogue (other activations: then
 * the GLU kernel); router GEMV (+ bias in the GEMV's epilogue) and the top-k one launch where
 * the router takes the F32 body (sl_cuda_gemv_router: its last block routes), else the GEMV
 * then the top-k kernel. Batches of SL__DX_GEMM_MIN_BATCH tokens and more run the plain
 * kernels. One step each. */
static sl_status c_norm_mm(sl__dx *x, const float *in, const float *w, int64_t n, int64_t dim,
                           float eps, float *xn, const sl_weight *const *ws, int count,
                           float *const *ys, sl_error *err)
{
    const uint64_t s0 = x->steps;
    dx_cuda *c = (dx_cuda *)x;
    sl_cuda_gemv_mat ms[SL_CUDA_GEMV_MULTI_MAX];
    sl_status st;
    /* one launch: the GEMV's blocks norm x themselves before quantising it */
    if (c->fused && count && multi_gemv(count, n) && ws[0]->ne[0] == dim &&
        !group_mats(ws, count, ys, NULL, ms, err) &&
        sl_cuda_gemv_multi_norm_q8(c->cu, ms, count, dim)) {
        st = sl_cuda_gemv_multi_norm(c->cu, ms, count, dim, in, w, eps, xn, n, err);
        x->steps = s0 + 1;
        return group_fail(ws, count, st, err);
    }
    st = c_rms_norm(x, in, w, xn, n, dim, eps, err);
    if (!st && count) st = mm_group(x, ws, count, xn, n, ys, NULL, false, err);
    x->steps = s0 + 1;
    return st;
}

static sl_status c_mm_glu(sl__dx *x, const sl_weight *wg, const sl_weight *wu, sl_moe_act act,
                          const float *xn, int64_t n, float *g, float *u, sl_error *err)
{
    const uint64_t s0 = x->steps;
    const sl_weight *gu[2] = {wg, wu};
    float *const ys[2] = {g, u};
    const bool epi =
        ((dx_cuda *)x)->fused && act == SL_MOE_SILU && multi_gemv(2, n) && wg->ne[1] == wu->ne[1];
    sl_status st = mm_group(x, gu, 2, xn, n, ys, NULL, epi, err);
    if (!st && !epi) st = c_glu(x, act, g, u, wg->ne[1] * n, err);
    x->steps = s0 + 1;
    return st;
}

static sl_status c_mm_router(sl__dx *x, const sl_weight *w, const float *bias, const float *xn,
                             int64_t n, float *logits, const sl_router_params *p, int32_t *idx,
                             float *wts, sl_error *err)
{
    if (!multi_gemv(1, n))
        return sl__dx_fused_mm_router(x, w, bias, xn, n, logits, p, idx, wts, err);
    const uint64_t s0 = x->steps;
    dx_cuda *c = (dx_cuda *)x;
    sl_cuda_gemv_mat m;
    if (n == 1 && !group_mats(&w, 1, &logits, bias, &m, err) &&
        sl_cuda_gemv_router_fused(c->cu, &m, w->ne[0])) {
        /* one launch for a decode token: the top-k in the GEMV's last block (one warp routes
         * the launch's tokens in turn: a batch keeps the parallel top-k kernel) */
        sl_status st = sl_cuda_gemv_router(c->cu, &m, w->ne[0], xn, n, p, idx, wts, err);
        x->steps = s0 + 1;
        return group_fail(&w, 1, st, err);
    }
    sl_status st = mm_group(x, &w, 1, xn, n, &logits, bias, false, err);
    if (!st) st = c_router(x, logits, n, p, idx, wts, err);
    x->steps = s0 + 1;
    return st;
}
static sl_status c_qk_rope_store(sl__dx *x, const sl__dx_qkv *a, sl_error *err)
{
    /* the kernel normalises before the rope: the other order as the plain steps */
    if (a->norm_after_rope) return sl__dx_fused_qk_rope_store(x, a, err);
    x->steps++;
    return sl_cuda_qk_rope_store(((dx_cuda *)x)->cu, a->q, a->k, a->v, a->n, a->n_head,
                                 a->n_head_kv, a->head_dim, a->q_norm, a->k_norm, a->eps, a->pos,
                                 a->rope, a->f16, a->kc, a->vc, err);
}

static sl_status c_mm_add_norm(sl__dx *x, const sl_weight *w, const float *in, int64_t n,
                               float *tmp, float *res, const float *norm_w, float eps, float *xn,
                               sl_error *err)
{
    const uint64_t s0 = x->steps;
    dx_cuda *c = (dx_cuda *)x;
    const int64_t rows = w->ne[1];
    if (n == 1 && sl_cuda_gemv_add_norm_q8(c->cu, w->type, w->data, w->ne[0])) {
        /* one launch: the add in the GEMV's epilogue, the norm in its last block */
        sl_status st = sl_cuda_gemv_add_norm(c->cu, w->type, w->data, rows, w->ne[0], in, tmp,
                                             res, norm_w, eps, norm_w ? xn : NULL, err);
        x->steps = s0 + 1;
        if (!st) return SL_OK;
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "matmul with '%s' + residual add (cuda): %s", w->name,
                            why);
    }
    sl_status st = c_mm(x, w, in, n, tmp, err);
    if (!st)
        st = norm_w ? sl_cuda_add_rms_norm(c->cu, res, tmp, norm_w, xn, n, rows, eps, err)
                    : sl_cuda_add(c->cu, res, tmp, res, n * rows, err);
    x->steps = s0 + 1;
    return st;
}

static sl_status c_argmax(sl__dx *x, const float *in, int64_t n, sl_argmax_result *r,
                          sl_error *err)
{
    x->steps++;
    return sl_cuda_argmax(((dx_cuda *)x)->cu, in, n, r, err);
}

static void c_destroy(sl__dx *x)
{
    dx_cuda *c = (dx_cuda *)x;
    sl_cuda_ctx_destroy(c->cu);
    if (c->ev_fork) sl_device_event_destroy(c->dev, c->ev_fork);
    if (c->ev_join) sl_device_event_destroy(c->dev, c->ev_join);
    if (c->side) {
        sl_device_stream_sync(c->dev, c->side, NULL);
        sl_device_stream_destroy(c->dev, c->side);
    }
    free(c);
}

static const sl__dx_vt cuda_vt = {
    .mm = c_mm, .rms_norm = c_rms_norm, .add = c_add, .add_rows = c_add_rows,
    .scale = c_scale, .glu = c_glu, .rope = c_rope, .kv_store = c_kv_store, .attn = c_attn,
    .router = c_router, .moe = c_moe, .moe_rows = c_moe_rows, .moe_join = c_moe_join,
    .gated_add = c_gated_add, .copy2d = c_copy2d,
    .argmax = c_argmax, .mm_heads = c_mm_heads, .norm_mm = c_norm_mm,
    .qk_rope_store = c_qk_rope_store, .mm_add_norm = c_mm_add_norm,
    .mm_router = c_mm_router, .mm_glu = c_mm_glu,
    .destroy = c_destroy};

/* The expert scratch's parts: eg, eu, ey, order, gwork, hot_ids (sl__dx_cuda_scratch_bytes
 * and create's one rule); 0 for order and gwork where a chunk's slots exceed what one sort
 * takes. gwork: the grouped GEMM's X, a chunk's tokens (gate / up) or its slots (down). */
enum { N_PARTS = 6 };
static void scratch_parts(int64_t n_tok, int32_t k_max, int64_t f_max, int64_t e_max,
                          size_t part[N_PARTS])
{
    const size_t chunk = (size_t)moe_chunk(n_tok), slots = chunk * (size_t)k_max;
    part[0] = part[1] = sl__dx_up256(slots * (size_t)f_max * sizeof(float));
    part[2] = sl__dx_up256((size_t)n_tok * (size_t)k_max * (size_t)e_max * sizeof(float));
    part[3] = slots <= SL_CUDA_GROUPED_MAX_SLOTS
                  ? sl__dx_up256(sl_cuda_expert_order_bytes(SL_CUDA_GROUPED_MAX_EXPERTS,
                                                            (int32_t)slots))
                  : 0;
    const size_t gu = sl_cuda_gemm_grouped_work_bytes((int64_t)chunk, e_max),
                 dn = sl_cuda_gemm_grouped_work_bytes((int64_t)slots, f_max);
    part[4] = part[3] && gu && dn ? sl__dx_up256(gu > dn ? gu : dn) : 0;
    part[5] = sl__dx_up256((size_t)n_tok * (size_t)k_max * sizeof(int32_t));
}

/* the MoE parts' bytes (0 without experts); the fused launches' counters follow them */
static size_t moe_parts_bytes(int64_t n_tok, int32_t k_max, int64_t f_max, int64_t e_max)
{
    if (n_tok < 1 || k_max < 1 || f_max < 1 || e_max < 1) return 0;
    size_t part[N_PARTS], sum = 0;
    scratch_parts(n_tok, k_max, f_max, e_max, part);
    for (int i = 0; i < N_PARTS; i++) sum += part[i];
    return sum;
}

size_t sl__dx_cuda_scratch_bytes(int64_t n_tok, int32_t k_max, int64_t f_max, int64_t e_max)
{
    return moe_parts_bytes(n_tok, k_max, f_max, e_max) +
           sl__dx_up256(SL_CUDA_CTX_COUNTER_BYTES);
}

sl_status sl__dx_cuda_create(sl_device *dev, sl_stream *stream, void *d_work, size_t work_bytes,
                             void *d_scratch, int64_t n_tok, int32_t k_max, int64_t f_max,
                             int64_t e_max, bool f32_act, bool pdl, bool fused, bool side,
                             sl__dx **out, sl_error *err)
{
    *out = NULL;
    if (!dev || !stream || sl_device_kind_get(dev) != SL_DEVICE_CUDA)
        return sl_error_set(err, SL_ERR_INVALID, "cuda executor: needs a cuda device and stream");
    dx_cuda *c = calloc(1, sizeof *c);
    if (!c) return sl_error_set(err, SL_ERR_NOMEM, "executor: out of memory");
    c->base.vt = &cuda_vt;
    c->work = d_work;
    c->work_bytes = d_work ? work_bytes : 0;
    c->n_tok = n_tok;
    c->k_max = k_max;
    c->f_max = f_max;
    c->e_max = e_max;
    if (d_scratch && n_tok > 0 && k_max > 0 && f_max > 0 && e_max > 0) {
        uint8_t *s = d_scratch, *at[N_PARTS];
        size_t part[N_PARTS];
        scratch_parts(n_tok, k_max, f_max, e_max, part);
        for (int i = 0; i < N_PARTS; i++) at[i] = i ? at[i - 1] + part[i - 1] : s;
        c->eg = (float *)at[0];
        c->eu = (float *)at[1];
        c->ey = (float *)at[2];
        c->order = part[3] ? (int32_t *)at[3] : NULL;
        c->gwork = part[4] ? at[4] : NULL;
        c->gwork_bytes = part[4];
        c->hot_ids = (int32_t *)at[5];
    }
    sl_status st = sl_cuda_ctx_create(sl_device_ordinal_get(dev),
                                      sl_device_stream_native(dev, stream), &c->cu, err);
    if (st) {
        free(c);
        return st;
    }
    sl_cuda_ctx_set_f32_act(c->cu, f32_act);
    sl_cuda_ctx_set_pdl(c->cu, pdl);
    /* the last-block launches' counters, after the MoE parts (zeroed on the stream) */
    c->fused = fused;
    if (fused && d_scratch &&
        (st = sl_cuda_ctx_set_counters(c->cu, (uint8_t *)d_scratch +
                                                  moe_parts_bytes(n_tok, k_max, f_max, e_max),
                                       err))) {
        c_destroy(&c->base);
        return st;
    }
    c->f32_act = f32_act;
    c->dev = dev;
    c->stream = stream;
    c->joined = true;
    /* moe_rows' side stream (the experts' scratch is its alone between fork and join) */
    if (side && n_tok > 0 && k_max > 0 &&
        ((st = sl_device_stream_create(dev, &c->side, err)) ||
         (st = sl_device_event_create(dev, &c->ev_fork, err)) ||
         (st = sl_device_event_create(dev, &c->ev_join, err)))) {
        c_destroy(&c->base);
        return st;
    }
    *out = &c->base;
    return SL_OK;
}

bool sl__dx_supports(sl_device_kind kind, uint32_t type, sl__dx_op op)
{
    if (kind != SL_DEVICE_CUDA) return true; /* sim: the CPU kernels the host executor runs */
    switch (op) {
    case SL__DX_OP_MATVEC: return sl_cuda_gemv_supported(type);
    case SL__DX_OP_ATTN: return type >= 1 && type <= SL_CUDA_ATTN_MAX_HEAD_DIM;
    }
    return false;
}

uint64_t sl__dx_cuda_launches(const sl__dx *x)
{
    return x && x->vt == &cuda_vt ? sl_cuda_ctx_launches(((const dx_cuda *)x)->cu) : 0;
}

bool sl__dx_cuda_pdl(const sl__dx *x)
{
    return x && x->vt == &cuda_vt && sl_cuda_ctx_pdl(((const dx_cuda *)x)->cu);
}

void sl__dx_cuda_set_pdl(sl__dx *x, bool on)
{
    if (x && x->vt == &cuda_vt) sl_cuda_ctx_set_pdl(((dx_cuda *)x)->cu, on);
}
