/* runtime/engine/arch_phi3.c: Phi-3 / Phi-4 (llama.cpp LLM_ARCH_PHI3, dense).
 *
 * A llama-like block with NEOX rope over the first rope.dimension_count entries of each head
 * (partial rotary: Phi-4-mini rotates 3/4), and two fused projections:
 *   attn_qkv [n_embd, n_embd + 2 n_embd_gqa]: rows q | k | v (or separate attn_q/k/v, as
 *     llama.cpp's create_tensor_qkv also accepts); attn_output [n_embd, n_embd], so the heads
 *     must span n_embd;
 *   ffn_up [n_embd, 2 n_ff]: rows gate | up (ggml_swiglu: silu of the first half times the
 *     second), no ffn_gate.
 * forward.c runs the fused ones as row views (no copy): a view starts at a row that is a
 * multiple of 8, which keeps the CPU's Q4_K_R8 repacking (rows in groups of eight) valid, so
 * q, k, v and n_ff widths must be multiples of 8 (every Phi model's are).
 * Not yet: LongRoPE (rope_factors_long / rope_factors_short, Phi-3-128k and Phi-3.5): llama.cpp
 * picks one by the context size and scales the rotation by rope.scaling.attn_factor; such a
 * file is refused naming the tensor. attention.sliding_window is ignored, as llama.cpp does
 * ("Phi SWA is currently disabled"). */
#include <stdio.h>

#include "runtime/engine/arch_impl.h"

sl_status sl__phi3_hparams(sl_model *m, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    const int64_t Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv *
                                                                hp->head_dim;
    if (Q != hp->n_embd)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'phi3.attention.head_count': %d "
                            "heads of %d span %lld, expected embedding_length %d", hp->n_head,
                            hp->head_dim, (long long)Q, hp->n_embd);
    if (Q % 8 || KV % 8 || hp->n_ff % 8)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "phi3: q %lld, k/v %lld and "
                            "feed_forward_length %d must be multiples of 8 (fused rows are run "
                            "as views in whole groups of 8)", (long long)Q, (long long)KV,
                            hp->n_ff);
    static const char *const k_longrope[] = {"rope_factors_long.weight",
                                             "rope_factors_short.weight"};
    for (int i = 0; i < 2; i++)
        if (sl_gguf_tensor_find(m->gguf, k_longrope[i]))
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: tensor '%s': phi3 LongRoPE "
                                "(Phi-3-128k, Phi-3.5) is not supported yet", m->path,
                                k_longrope[i]);
    return SL_OK;
}

#define NE(...) ((const int64_t[]){__VA_ARGS__}), \
    (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

sl_status sl__phi3_bind_layer(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    sl_status st;
    if (sl_gguf_tensor_find(m->gguf, name)) {
        if ((st = sl__arch_bind(m, &L->wqkv, true, false, NE(E, E + 2 * KV),
                                "blk.%d.attn_qkv.weight", il, err)))
            return st;
    } else if ((st = sl__arch_bind(m, &L->wq, true, false, NE(E, E), "blk.%d.attn_q.weight", il,
                                   err)) ||
               (st = sl__arch_bind(m, &L->wk, true, false, NE(E, KV), "blk.%d.attn_k.weight",
                                   il, err)) ||
               (st = sl__arch_bind(m, &L->wv, true, false, NE(E, KV), "blk.%d.attn_v.weight",
                                   il, err))) {
        return st;
    }
    if ((st = sl__arch_bind(m, &L->wo, true, false, NE(E, E), "blk.%d.attn_output.weight", il,
                            err)) ||
        (st = sl__arch_bind(m, &L->ffn_up, true, false, NE(E, 2 * F), "blk.%d.ffn_up.weight",
                            il, err)) ||
        (st = sl__arch_bind(m, &L->ffn_down, true, false, NE(F, E), "blk.%d.ffn_down.weight",
                            il, err)))
        return st;
    return SL_OK;
}
