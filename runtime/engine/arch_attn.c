/* runtime/engine/arch_attn.c: the attention tensors of every q/k/v architecture, as llama.cpp's
 * create_tensor_qkv loads them for all of them (llama_model_base::create_tensor_qkv):
 *
 * - attn_qkv.weight [n_embd, Q + 2 KV] (rows q | k | v) when the file has it, with an optional
 *   attn_qkv.bias [Q + 2 KV], or instead the three separate attn_q/k/v.bias (llama.cpp adds them
 *   only when all three are there; a file with some of them is refused here, naming the first);
 * - else attn_q [n_embd, Q], attn_k, attn_v [n_embd, KV], each bias optional and applied alone.
 *
 * forward.c runs a fused matrix as row views starting at multiples of 8 (a Q4_K_R8 repacked
 * weight's groups of eight stay whole), so a fused file needs Q and KV multiples of 8 (every
 * real model's are). Then attn_output [Q, n_embd]; the attn_output.bias the traits ask for
 * (gpt-oss: required; llama, granite: optional); q/k norms (glm4moe: each optional) and
 * post-norms by the traits. */
#include <stdio.h>

#include "runtime/engine/arch_impl.h"

static bool has(const sl_model *m, const char *fmt, int il)
{
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    return sl_gguf_tensor_find(m->gguf, name) != NULL;
}

/* The separate biases, optional each; all or none beside a fused matrix. */
static sl_status qkv_biases(sl_model *m, int il, int64_t Q, int64_t KV, bool fused,
                            sl_error *err)
{
    sl__layer *L = &m->layers[il];
    static const char *const k_name[3] = {"blk.%d.attn_q.bias", "blk.%d.attn_k.bias",
                                          "blk.%d.attn_v.bias"};
    sl_weight **b[3] = {&L->bq, &L->bk, &L->bv};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        sl_status st = sl__arch_bind(m, b[i], false, true, NE(i ? KV : Q), k_name[i], il, err);
        if (st) return st;
        n += *b[i] != NULL;
    }
    if (!fused || n == 0 || n == 3) return SL_OK;
    for (int i = 0; i < 3; i++)
        if (!*b[i]) {
            char name[96];
            snprintf(name, sizeof name, k_name[i], il);
            return sl_error_set(err, SL_ERR_FORMAT, "%s: tensor '%s' missing: beside a fused "
                                "blk.%d.attn_qkv.weight the separate q/k/v biases come as all "
                                "three or none (llama.cpp ignores a partial set)", m->path,
                                name, il);
        }
    return SL_OK;
}

sl_status sl__arch_bind_attn(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    const sl__arch_traits *tr = m->tr;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim, Q = (int64_t)hp->n_head * D,
                  KV = (int64_t)hp->n_head_kv * D;
    sl_status st;
    const bool fused = has(m, "blk.%d.attn_qkv.weight", il);
    if (fused) {
        if (Q % 8 || KV % 8)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: tensor 'blk.%d.attn_qkv.weight': "
                                "q %lld and k/v %lld rows must be multiples of 8 (fused rows "
                                "are run as views in whole groups of 8)", m->path, il,
                                (long long)Q, (long long)KV);
        if ((st = sl__arch_bind(m, &L->wqkv, true, false, NE(E, Q + 2 * KV),
                                "blk.%d.attn_qkv.weight", il, err)) ||
            (st = sl__arch_bind(m, &L->bqkv, false, true, NE(Q + 2 * KV),
                                "blk.%d.attn_qkv.bias", il, err)))
            return st;
        if (!L->bqkv && (st = qkv_biases(m, il, Q, KV, true, err))) return st;
    } else if ((st = sl__arch_bind(m, &L->wq, true, false, NE(E, Q), "blk.%d.attn_q.weight", il,
                                   err)) ||
               (st = sl__arch_bind(m, &L->wk, true, false, NE(E, KV), "blk.%d.attn_k.weight",
                                   il, err)) ||
               (st = sl__arch_bind(m, &L->wv, true, false, NE(E, KV), "blk.%d.attn_v.weight",
                                   il, err)) ||
               (st = qkv_biases(m, il, Q, KV, false, err))) {
        return st;
    }
    if ((st = sl__arch_bind(m, &L->wo, true, false, NE(Q, E), "blk.%d.attn_output.weight", il,
                            err)))
        return st;
    if ((tr->attn_out_bias || tr->llama_biases) &&
        (st = sl__arch_bind(m, &L->bo, tr->attn_out_bias, true, NE(E),
                            "blk.%d.attn_output.bias", il, err)))
        return st;
    if (tr->qk_norm != SL__QK_NORM_NONE) {
        const bool head = tr->qk_norm != SL__QK_NORM_FULL,
                   req = tr->qk_norm != SL__QK_NORM_HEAD_OPT;
        if ((st = sl__arch_bind(m, &L->q_norm, req, true, NE(head ? D : Q),
                                "blk.%d.attn_q_norm.weight", il, err)) ||
            (st = sl__arch_bind(m, &L->k_norm, req, true, NE(head ? D : KV),
                                "blk.%d.attn_k_norm.weight", il, err)))
            return st;
    }
    if (tr->post_norms &&
        ((st = sl__arch_bind(m, &L->attn_post_norm, true, true, NE(E),
                             "blk.%d.post_attention_norm.weight", il, err)) ||
         (st = sl__arch_bind(m, &L->ffn_post_norm, true, true, NE(E),
                             "blk.%d.post_ffw_norm.weight", il, err))))
        return st;
    return SL_OK;
}
