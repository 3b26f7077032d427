/* runtime/engine/arch_gpt_oss.c: gpt-oss's keys over the common ones.
 *
 * gpt-oss (llama.cpp llama_model_openai_moe, graph llm_build_openai_moe_iswa): q/k/v/o
 * biases; attn_sinks [n_head]; NEOX rope with YaRN from the file's rope.scaling keys, the
 * same rope on every layer (rope.freq_base_swa may set the sliding layers' base); sliding
 * window on layer il iff il % P < P - 1 with P = attention.sliding_window_pattern, default 2
 * (even layers slide); attention scale 1/sqrt(n_rot), and head sizes are n_rot (llama.cpp
 * sizes q/k/v by n_head * n_rot), so a file whose key_length differs from
 * rope.dimension_count is refused; the FFN's input norm is post_attention_norm; router
 * logits = W x + b, the top k of them, weights = softmax over those k; experts as wide as
 * expert_feed_forward_length (required) with gate/up/down biases and the clamped SwiGLU
 * (ggml_swiglu_oai: alpha 1.702, limit 7, (up + 1)).
 * The sinks, biases, gating and activation are the traits row's (arch.c). */
#include <math.h>

#include "runtime/engine/arch_impl.h"

/* Its expert width is required, and its heads are n_rot wide. */
sl_status sl__gpt_oss_expert_widths(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st;
    if ((st = sl__arch_get_i32(m, "expert_feed_forward_length", true, 0, 1, 1 << 30,
                               &hp->n_ff_exp, err)))
        return st;
    if (hp->n_rot != hp->head_dim)
        return sl_error_set(err, SL_ERR_FORMAT,
                            "metadata key 'gpt-oss.rope.dimension_count': %d, expected %d "
                            "(attention.key_length: gpt-oss heads are n_rot wide)",
                            hp->n_rot, hp->head_dim);
    return SL_OK;
}

/* The sliding pattern and the sliding layers' rope base; the attention scale 1/sqrt(n_rot). */
sl_status sl__gpt_oss_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st;
    if ((st = sl__arch_get_i32(m, "attention.sliding_window_pattern", false, hp->swa_period, 1,
                               1 << 30, &hp->swa_period, err)) ||
        (st = sl__arch_get_f32(m, "rope.freq_base_swa", false, hp->rope_base,
                               &hp->rope_base_swa, err)))
        return st;
    if (hp->rope_base_swa <= 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'gpt-oss.rope.freq_base_swa': "
                            "%g, expected > 0", (double)hp->rope_base_swa);
    hp->attn_scale = 1.0f / sqrtf((float)hp->n_rot);
    return SL_OK;
}
