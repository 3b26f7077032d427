/* runtime/engine/arch_qwen3next.c: Qwen3-Next (llama.cpp LLM_ARCH_QWEN3NEXT,
 * src/models/qwen3next.cpp) and Qwen3.5 (qwen35moe, and qwen35 with a dense FFN: its
 * src/models/qwen35*.cpp), their keys, tensors, layers and recurrent state.
 *
 * A block: x += mixer(rms(x, attn_norm)); x += moe(rms(x, post_attention_norm)) where the MoE
 * is qwen2moe's (softmax top-k, renormalised, plus the shared expert times sigmoid(w . xn)),
 * run by forward_ffn.c's MoE path (so the experts take every placement the other MoEs take).
 * The mixer of layer il is a Gated DeltaNet layer iff attention.recurrent_layers[il] (a bool
 * per block, or one bool for all), else iff (il + 1) % full_attention_interval (default 4), as
 * llama.cpp's load_arch_hparams; otherwise gated full attention:
 * - gated attention: attn_q [E, 2 H D] gives per head q | gate; q/k RMS-normed per head,
 *   NEOX rope over rope.dimension_count (partial rotary, Qwen3-Next: a quarter of a head),
 *   softmax attention scaled 1/sqrt(D), then out * sigmoid(gate) before attn_output;
 * - Gated DeltaNet (llama.cpp's "optimized" layout, as its converter writes it): attn_qkv
 *   [E, C] (q | k | v, C = 2 Hk S + Hv S), attn_gate z [E, Hv S], ssm_ba [E, 2 Hv] (per key
 *   head r betas then r alphas, r = Hv / Hk), a causal conv (ssm_conv1d [d_conv, C], F32)
 *   then SiLU, gates g = softplus(alpha + ssm_dt.bias) * ssm_a, beta = sigmoid(b), the delta
 *   rule over l2-normed q, k per value head, the gated RMS norm (ssm_norm [S], times
 *   silu(z)), ssm_out [Hv S, E]. The math is kernels/ref/delta_net.h's (pool: kernels/cpu).
 * Qwen3.5 differs in three places, as its converter writes it: separate ssm_beta and ssm_alpha
 * [E, Hv] for ssm_ba; value head h reads key head h % Hk (the converter reorders the value
 * heads so that llama.cpp tiles the key heads); interleaved M-RoPE over
 * rope.dimension_sections, which for text is NEOX's rotation (sl__arch_mrope_text).
 * Refused naming the key or tensor: recurrent_layers of another type or length, the legacy
 * fused ssm_in layout, ssm.inner_size != state_size * time_step_rank (llama.cpp's
 * tensor shapes assume it), group_count not dividing time_step_rank.
 *
 * Recurrent state (sl__rs, in the context, host memory): per recurrent layer the conv's last
 * d_conv - 1 input rows and Hv S x S delta-rule matrices. It holds the history [0, pos): a pass
 * must start at pos (n_past 0 resets it). A state cannot drop tokens, so besides 0 and n_past a
 * rewind goes exactly to one checkpoint: every pass of n > 1 tokens keeps the state after its
 * first n - 1 (a prompt's last token is where serve's prompt cache rewinds a repeated prompt
 * to), and single-token passes (decode) leave it. Any other rewind is refused with
 * SL_ERR_UNSUPPORTED (the caller re-evaluates from 0, as serve's prompt cache does). A failed
 * pass leaves the state and the checkpoint invalid until a rewind to 0.
 *
 * Where it runs: host, and sim (its memory is host-addressable: the CPU steps run on the
 * device side's buffers after draining the stream); cuda has no kernels for the conv and the
 * delta rule, so ctx_dev.c refuses a device layer of this architecture on cuda. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/delta_net.h"
#include "runtime/engine/arch_impl.h"
#include "runtime/engine/ctx.h"

static sl_gdn_dims dims_of(const sl__hparams *hp)
{
    return (sl_gdn_dims){.n_k_heads = hp->ssm_n_group, .n_v_heads = hp->ssm_dt_rank,
                         .head_dim = hp->ssm_d_state, .d_conv = hp->ssm_d_conv,
                         .eps = hp->rms_eps, .tiled = hp->ssm_qwen35,
                         .ba_split = hp->ssm_qwen35};
}

static bool qwen35(const sl_model *m)
{
    return m->arch == SL_ARCH_QWEN35 || m->arch == SL_ARCH_QWEN35MOE;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

#define RECR_SUFFIX "attention.recurrent_layers"

/* Checks the file's recurrent_layers, when present (llama.cpp get_key_or_arr: one bool, or a
 * bool per block of block_count, MTP blocks included). */
static sl_status recr_check(const sl_model *m, int64_t n_all, sl_error *err)
{
    char k[96];
    const sl_gguf_value *v = sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, RECR_SUFFIX));
    if (!v || v->type == SL_GGUF_BOOL) return SL_OK;
    if (v->type != SL_GGUF_ARR || v->v.arr.elem != SL_GGUF_BOOL)
        return sl_error_set(err, SL_ERR_TYPE, "%s: metadata key '%s': %s, expected bool or an "
                            "array of bool", m->path, k, sl_gguf_vtype_name(v->type));
    if ((int64_t)v->v.arr.n != n_all)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: metadata key '%s': %llu entries, expected "
                            "block_count %lld", m->path, k, (unsigned long long)v->v.arr.n,
                            (long long)n_all);
    return SL_OK;
}

static bool is_recurrent(const sl_model *m, int il)
{
    char k[96];
    const sl_gguf_value *v = sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, RECR_SUFFIX)),
                        *e = v;
    sl_gguf_value item;
    if (v && v->type == SL_GGUF_ARR)
        e = sl_gguf_arr_get(v, (uint64_t)il, &item, NULL) == SL_OK ? &item : NULL;
    if (e) return e->type == SL_GGUF_BOOL && e->v.b;
    return (il + 1) % m->hp.full_attn_interval != 0;
}

sl_status sl__qwen3next_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const int64_t BIG = 1 << 20;
    sl_status st;
    if ((st = recr_check(m, hp->n_layer + hp->n_layer_nextn, err)) ||
        (qwen35(m) && (st = sl__arch_mrope_text(m, true, true, err))))
        return st;
    hp->ssm_qwen35 = qwen35(m);
    if ((st = sl__arch_get_i32(m, "ssm.conv_kernel", true, 0, 1, 64, &hp->ssm_d_conv, err)) ||
        (st = sl__arch_get_i32(m, "ssm.inner_size", true, 0, 1, BIG, &hp->ssm_d_inner, err)) ||
        (st = sl__arch_get_i32(m, "ssm.state_size", true, 0, 1, SL_GDN_MAX_HEAD,
                               &hp->ssm_d_state, err)) ||
        (st = sl__arch_get_i32(m, "ssm.time_step_rank", true, 0, 1, 4096, &hp->ssm_dt_rank,
                               err)) ||
        (st = sl__arch_get_i32(m, "ssm.group_count", true, 0, 1, 4096, &hp->ssm_n_group,
                               err)) ||
        (st = sl__arch_get_i32(m, "full_attention_interval", false, 4, 1, 1 << 16,
                               &hp->full_attn_interval, err)))
        return st;
    const char *a = sl_arch_name(m->arch);
    if (hp->ssm_dt_rank % hp->ssm_n_group)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.ssm.time_step_rank': %d "
                            "value heads, not a multiple of ssm.group_count %d key heads", a,
                            hp->ssm_dt_rank, hp->ssm_n_group);
    if ((int64_t)hp->ssm_d_state * hp->ssm_dt_rank != hp->ssm_d_inner)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.ssm.inner_size': %d, "
                            "expected state_size %d x time_step_rank %d", a, hp->ssm_d_inner,
                            hp->ssm_d_state, hp->ssm_dt_rank);
    const sl_gdn_dims d = dims_of(hp);
    if ((st = sl_gdn_dims_check(&d, err))) return st;
    const int64_t Q = (int64_t)hp->n_head * hp->head_dim;
    hp->scratch_tok = max64(max64(sl_gdn_channels(&d), 2 * Q), 2 * (int64_t)hp->ssm_dt_rank);
    return SL_OK;
}

sl_status sl__qwen3next_bind_layer(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim, Q = (int64_t)hp->n_head * D,
                  KV = (int64_t)hp->n_head_kv * D;
    sl_status st;
    if (!is_recurrent(m, il)) {
        L->attn_gated = true;
        if ((st = sl__arch_bind(m, &L->wq, true, false, NE(E, 2 * Q), "blk.%d.attn_q.weight",
                                il, err)) ||
            (st = sl__arch_bind(m, &L->wk, true, false, NE(E, KV), "blk.%d.attn_k.weight", il,
                                err)) ||
            (st = sl__arch_bind(m, &L->wv, true, false, NE(E, KV), "blk.%d.attn_v.weight", il,
                                err)) ||
            (st = sl__arch_bind(m, &L->wo, true, false, NE(Q, E), "blk.%d.attn_output.weight",
                                il, err)) ||
            (st = sl__arch_bind(m, &L->q_norm, true, true, NE(D), "blk.%d.attn_q_norm.weight",
                                il, err)) ||
            (st = sl__arch_bind(m, &L->k_norm, true, true, NE(D), "blk.%d.attn_k_norm.weight",
                                il, err)))
            return st;
        return SL_OK;
    }
    const sl_gdn_dims d = dims_of(hp);
    const int64_t C = sl_gdn_channels(&d), S = d.head_dim, Hv = d.n_v_heads, VD = Hv * S;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ssm_in.weight", il);
    if (sl_gguf_tensor_find(m->gguf, name))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: tensor '%s': the legacy fused "
                            "in-projection is not supported (reconvert: attn_qkv and "
                            "attn_gate)", m->path, name);
    if ((st = sl__arch_bind(m, &L->ssm_qkv, true, false, NE(E, C), "blk.%d.attn_qkv.weight",
                            il, err)) ||
        (st = sl__arch_bind(m, &L->ssm_z, true, false, NE(E, VD), "blk.%d.attn_gate.weight",
                            il, err)) ||
        (!hp->ssm_qwen35 && (st = sl__arch_bind(m, &L->ssm_ba, true, false, NE(E, 2 * Hv),
                                                "blk.%d.ssm_ba.weight", il, err))) ||
        (hp->ssm_qwen35 && (st = sl__arch_bind(m, &L->ssm_beta, true, false, NE(E, Hv),
                                               "blk.%d.ssm_beta.weight", il, err))) ||
        (hp->ssm_qwen35 && (st = sl__arch_bind(m, &L->ssm_alpha, true, false, NE(E, Hv),
                                               "blk.%d.ssm_alpha.weight", il, err))) ||
        (st = sl__arch_bind(m, &L->ssm_conv1d, true, true, NE(d.d_conv, C),
                            "blk.%d.ssm_conv1d.weight", il, err)) ||
        (st = sl__arch_bind(m, &L->ssm_dt, true, true, NE(Hv), "blk.%d.ssm_dt.bias", il,
                            err)) ||
        (st = sl__arch_bind(m, &L->ssm_a, true, true, NE(Hv), "blk.%d.ssm_a", il, err)) ||
        (st = sl__arch_bind(m, &L->ssm_norm, true, true, NE(S), "blk.%d.ssm_norm.weight", il,
                            err)) ||
        (st = sl__arch_bind(m, &L->ssm_out, true, false, NE(VD, E), "blk.%d.ssm_out.weight",
                            il, err)))
        return st;
    L->wo = L->ssm_out; /* the mixer's output: where the layer runs (ctx_dev.c) */
    return SL_OK;
}

/* ---- recurrent state ----------------------------------------------------------------- */

/* Invariants: slot[il] >= 0 exactly for the recurrent layers, conv + slot * conv_per and
 * ssm + slot * ssm_per their state; pos is the number of tokens the state has seen (-1: it
 * is invalid: a pass failed part-way). */
struct sl__rs {
    int32_t pos;
    int32_t *slot;
    float *conv, *ssm;
    size_t conv_per, ssm_per;
    int32_t n_slots;
    /* the checkpoint: the state after snap_pos tokens (-1: none), same layout as conv, ssm */
    int32_t snap_pos;
    float *snap_conv, *snap_ssm;
};

sl_status sl__rs_create(sl_ctx *c, sl_error *err)
{
    const sl_model *m = c->m;
    if (!m->tr->recurrent) return SL_OK;
    const sl__hparams *hp = &m->hp;
    const sl_gdn_dims d = dims_of(hp);
    sl__rs *rs = calloc(1, sizeof *rs);
    if (!rs) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (recurrent state)");
    c->rs = rs;
    rs->slot = malloc((size_t)hp->n_layer * sizeof *rs->slot);
    if (!rs->slot) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (recurrent state)");
    for (int32_t il = 0; il < hp->n_layer; il++)
        rs->slot[il] = m->layers[il].ssm_out ? rs->n_slots++ : -1;
    rs->conv_per = (size_t)(d.d_conv - 1) * (size_t)sl_gdn_channels(&d);
    rs->ssm_per = (size_t)d.n_v_heads * (size_t)d.head_dim * (size_t)d.head_dim;
    rs->snap_pos = -1;
    rs->conv = calloc(rs->conv_per * (size_t)rs->n_slots + 1, sizeof *rs->conv);
    rs->ssm = calloc(rs->ssm_per * (size_t)rs->n_slots + 1, sizeof *rs->ssm);
    rs->snap_conv = calloc(rs->conv_per * (size_t)rs->n_slots + 1, sizeof *rs->conv);
    rs->snap_ssm = calloc(rs->ssm_per * (size_t)rs->n_slots + 1, sizeof *rs->ssm);
    if (!rs->conv || !rs->ssm || !rs->snap_conv || !rs->snap_ssm)
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (recurrent state: %d layers)",
                            rs->n_slots);
    return SL_OK;
}

void sl__rs_free(sl_ctx *c)
{
    if (!c->rs) return;
    free(c->rs->slot);
    free(c->rs->conv);
    free(c->rs->ssm);
    free(c->rs->snap_conv);
    free(c->rs->snap_ssm);
    free(c->rs);
    c->rs = NULL;
}

sl_status sl__rs_begin(sl_ctx *c, sl_error *err)
{
    sl__rs *rs = c->rs;
    if (!rs) return SL_OK;
    if (c->n_past == 0) {
        memset(rs->conv, 0, rs->conv_per * (size_t)rs->n_slots * sizeof *rs->conv);
        memset(rs->ssm, 0, rs->ssm_per * (size_t)rs->n_slots * sizeof *rs->ssm);
        rs->pos = 0;
        rs->snap_pos = -1; /* another history: passes only append, rewinds go to 0, n_past or
                            * the checkpoint, so only a reset makes it stale */
    }
    if (rs->pos != c->n_past)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: the recurrent state holds %d tokens, "
                            "the context %d (a pass failed part-way): rewind to 0",
                            sl_arch_name(c->m->arch), rs->pos, c->n_past);
    return SL_OK;
}

void sl__rs_end(sl_ctx *c, int64_t n, bool ok)
{
    sl__rs *rs = c->rs;
    if (!rs) return;
    rs->pos = ok ? c->n_past + (int32_t)n : -1;
    if (!ok) rs->snap_pos = -1;
    else if (n > 1) rs->snap_pos = c->n_past + (int32_t)n - 1; /* sl__qwen3next_linear */
}

sl_status sl__rs_rewind(sl_ctx *c, int32_t n_past, sl_error *err)
{
    sl__rs *rs = c->rs;
    if (!rs || n_past == 0 || n_past == c->n_past) return SL_OK;
    if (n_past == rs->snap_pos && rs->pos == c->n_past) {
        memcpy(rs->conv, rs->snap_conv, rs->conv_per * (size_t)rs->n_slots * sizeof *rs->conv);
        memcpy(rs->ssm, rs->snap_ssm, rs->ssm_per * (size_t)rs->n_slots * sizeof *rs->ssm);
        rs->pos = n_past;
        return SL_OK;
    }
    return sl_error_set(err, SL_ERR_UNSUPPORTED, "sl_ctx_rewind: n_past %d of %d: %s's "
                        "Gated DeltaNet layers keep a recurrent state that cannot drop tokens "
                        "(rewind to 0, to %d or to the checkpoint %d)", n_past, c->n_past,
                        sl_arch_name(c->m->arch), c->n_past, rs->snap_pos);
}

/* ---- layers ---------------------------------------------------------------------------- */

/* The CPU steps below read and write the side's buffers directly: on the device side (sim;
 * cuda is refused) once the stream has drained. */
static sl_status host_ready(sl_ctx *c, const sl__side *s, sl_error *err)
{
    return s == &c->host ? SL_OK : sl_device_stream_sync(c->m->dev, c->m->stream, err);
}

sl_status sl__qwen3next_linear(sl_ctx *c, const sl__side *s, int32_t il, int64_t n,
                               sl_error *err)
{
    const sl_model *m = c->m;
    const sl__layer *L = &m->layers[il];
    const sl__dx_vt *vt = s->dx->vt;
    const sl_gdn_dims d = dims_of(&m->hp);
    const int64_t C = sl_gdn_channels(&d), Hv = d.n_v_heads;
    sl__rs *rs = c->rs;
    const int32_t slot = rs ? rs->slot[il] : -1;
    if (slot < 0)
        return sl_error_set(err, SL_ERR_INVALID, "layer %d: no recurrent state", il);
    /* g: q | k | v rows, u: z, k: b | a (Qwen3.5: the betas' rows, then the alphas'); then q:
     * the conv's output, v: g | beta, att: out */
    sl_status st;
    if ((st = vt->mm(s->dx, L->ssm_qkv, s->xn, n, s->g, err)) ||
        (st = vt->mm(s->dx, L->ssm_z, s->xn, n, s->u, err)) ||
        (!d.ba_split && (st = vt->mm(s->dx, L->ssm_ba, s->xn, n, s->k, err))) ||
        (d.ba_split && (st = vt->mm(s->dx, L->ssm_beta, s->xn, n, s->k, err))) ||
        (d.ba_split && (st = vt->mm(s->dx, L->ssm_alpha, s->xn, n, s->k + n * Hv, err))) ||
        (st = host_ready(c, s, err)))
        return st;
    float *gate = s->v, *beta = s->v + n * Hv;
    sl_ref_gdn_gates(&d, s->k, n, L->ssm_dt->data, L->ssm_a->data, gate, beta);
    float *conv = rs->conv + (size_t)slot * rs->conv_per, *ssm = rs->ssm + (size_t)slot *
                                                                          rs->ssm_per;
    /* tokens [0, n - 1), the checkpoint (n > 1: sl__rs_end records it), then the last; the
     * steps are per token, so the split changes no bit */
    const int64_t VD = (int64_t)Hv * d.head_dim, cut[3] = {0, n > 1 ? n - 1 : 0, n};
    for (int p = 0; p < 2; p++) {
        const int64_t t0 = cut[p], k = cut[p + 1] - t0;
        if (p == 1 && n > 1) {
            memcpy(rs->snap_conv + (size_t)slot * rs->conv_per, conv,
                   rs->conv_per * sizeof *conv);
            memcpy(rs->snap_ssm + (size_t)slot * rs->ssm_per, ssm, rs->ssm_per * sizeof *ssm);
        }
        if (!k) continue;
        sl_ref_gdn_conv(s->g + t0 * C, k, C, d.d_conv, L->ssm_conv1d->data, conv,
                        s->q + t0 * C);
        if ((st = sl_cpu_gdn_heads(c->pool, &d, s->q + t0 * C, s->u + t0 * VD,
                                   gate + t0 * Hv, beta + t0 * Hv, L->ssm_norm->data, k, ssm,
                                   s->att + t0 * VD, err)))
            return st;
    }
    return SL_OK; /* ssm_out (L->wo) of s->att: layer() in forward.c */
}

sl_status sl__qwen3next_q_split(sl_ctx *c, const sl__side *s, int64_t n, sl_error *err)
{
    const sl__hparams *hp = &c->m->hp;
    const int64_t D = hp->head_dim, HT = n * hp->n_head;
    sl_status st = host_ready(c, s, err);
    if (st) return st;
    for (int64_t r = 0; r < HT; r++) { /* s->g [n][H][q | gate] -> s->q, s->u */
        memcpy(s->q + r * D, s->g + r * 2 * D, (size_t)D * sizeof(float));
        memcpy(s->u + r * D, s->g + r * 2 * D + D, (size_t)D * sizeof(float));
    }
    return SL_OK;
}

sl_status sl__qwen3next_att_gate(sl_ctx *c, const sl__side *s, int64_t n, sl_error *err)
{
    const sl__hparams *hp = &c->m->hp;
    const int64_t count = n * hp->n_head * hp->head_dim;
    sl_status st = host_ready(c, s, err);
    if (st) return st;
    for (int64_t i = 0; i < count; i++) s->att[i] *= 1.0f / (1.0f + expf(-s->u[i]));
    return SL_OK;
}
