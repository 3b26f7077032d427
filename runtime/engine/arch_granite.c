/* runtime/engine/arch_granite.c: IBM Granite (3.x dense; llama.cpp LLM_ARCH_GRANITE).
 *
 * A llama block (NORMAL rope: the converter permutes q/k as for llama) with four multipliers
 * from the file: embeddings * embedding_scale, each block's attention and FFN output *
 * residual_scale before its residual add, attention logits * attention.scale (instead of
 * 1/sqrt(head_dim)), output logits / logit_scale. logit_scale is required, as in llama.cpp;
 * the others are optional (0 or absent: no multiplier). Optional tensors, as llama's (the
 * traits' llama_biases and rope_freqs): attn_output.bias, ffn_{gate,up,down}.bias, and
 * rope_freqs.weight or, with rope.scaling.type "longrope", rope_factors_long / _short.
 * rope.scaling.finetuned = false (llama.cpp: a model without rope) is refused, naming the key. */

#include "runtime/engine/arch_impl.h"

sl_status sl__granite_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st;
    float attn_scale = 0.0f;
    bool rope = true;
    if ((st = sl__arch_get_f32(m, "logit_scale", true, 0.0f, &hp->logit_scale, err)) ||
        (st = sl__arch_get_f32(m, "residual_scale", false, 0.0f, &hp->residual_scale, err)) ||
        (st = sl__arch_get_f32(m, "embedding_scale", false, 0.0f, &hp->embd_scale, err)) ||
        (st = sl__arch_get_f32(m, "attention.scale", false, 0.0f, &attn_scale, err)) ||
        (st = sl__arch_get_bool(m, "rope.scaling.finetuned", true, &rope, err)))
        return st;
    if (hp->logit_scale == 0.0f)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'granite.logit_scale': 0 (the "
                            "logits are divided by it)");
    if (attn_scale < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'granite.attention.scale': %g, "
                            "expected >= 0 (0: 1/sqrt(head_dim))", (double)attn_scale);
    if (!rope)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "metadata key "
                            "'granite.rope.scaling.finetuned': false (a model without rope) is "
                            "not supported");
    if (hp->n_rot != hp->head_dim)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'granite.rope.dimension_count': "
                            "%d, expected the head size %d (llama.cpp asserts n_rot == "
                            "head_dim for granite)", hp->n_rot, hp->head_dim);
    hp->attn_scale = attn_scale;
    return SL_OK;
}
