/* runtime/engine/arch_phi3.c: Phi-3 / Phi-4 (llama.cpp LLM_ARCH_PHI3, dense).
 *
 * A llama-like block with NEOX rope over the first rope.dimension_count entries of each head
 * (partial rotary: Phi-4-mini rotates 3/4), the attention as every q/k/v architecture's
 * (arch_attn.c: fused attn_qkv [n_embd, n_embd + 2 n_embd_gqa] as the converter writes it, or
 * separate q/k/v), attn_output [n_embd, n_embd], so the heads must span n_embd, and a fused
 * FFN: ffn_up [n_embd, 2 n_ff] = rows gate | up (ggml_swiglu: silu of the first half times the
 * second), no ffn_gate. forward_ffn.c runs it as row views starting at multiples of 8 (so n_ff
 * must be one; every Phi model's is).
 * LongRoPE (Phi-3-128k, Phi-3.5, Phi-4-mini): the optional rope_factors_long / _short
 * [n_rot / 2] divide each pair's frequency; a context longer than
 * rope.scaling.original_context_length uses the long ones, else the short ones
 * (sl__model_rope_factors, as llama.cpp's get_rope_factors), and every rotation is scaled by
 * rope.scaling.attn_factor (arch.c reads it for any architecture, as llama.cpp does).
 * attention.sliding_window is ignored, as llama.cpp does ("Phi SWA is currently disabled"). */
#include <stdio.h>

#include "runtime/engine/arch_impl.h"

sl_status sl__phi3_hparams(sl_model *m, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    const int64_t Q = (int64_t)hp->n_head * hp->head_dim;
    if (Q != hp->n_embd)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'phi3.attention.head_count': %d "
                            "heads of %d span %lld, expected embedding_length %d", hp->n_head,
                            hp->head_dim, (long long)Q, hp->n_embd);
    if (hp->n_ff % 8)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "metadata key 'phi3.feed_forward_length': "
                            "%d, must be a multiple of 8 (the fused gate | up rows are run as "
                            "views in whole groups of 8)", hp->n_ff);
    return SL_OK;
}

sl_status sl__phi3_bind_layer(sl_model *m, int il, sl_error *err)
{
    sl__layer *L = &m->layers[il];
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff;
    sl_status st;
    if ((st = sl__arch_bind(m, &L->ffn_up, true, false, NE(E, 2 * F), "blk.%d.ffn_up.weight",
                            il, err)) ||
        (st = sl__arch_bind(m, &L->ffn_down, true, false, NE(F, E), "blk.%d.ffn_down.weight",
                            il, err)))
        return st;
    return SL_OK;
}
