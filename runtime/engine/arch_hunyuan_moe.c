/* runtime/engine/arch_hunyuan_moe.c: Hunyuan-A13B (llama.cpp LLM_ARCH_HUNYUAN_MOE,
 * llama_model_hunyuan_moe), its keys over the common ones.
 *
 * The block (its graph): RMSNorm; q/k/v (arch_attn.c); NEOX rope over whole heads
 * (traits.rot_whole), then the per-head q/k RMSNorm (traits.qk_norm_after_rope: the other
 * order than qwen3's); scale 1/sqrt(head); ffn_norm; the routed experts (softmax over
 * expert_count, top-k renormalised, never scaled, no selection bias) plus one shared SwiGLU
 * added ungated, as wide as expert_shared_feed_forward_length, else feed_forward_length.
 * llama.cpp sizes the routed experts by feed_forward_length (expert_feed_forward_length is a
 * required key it does not size them by; the converter writes both from intermediate_size). */
#include "runtime/engine/arch_impl.h"

sl_status sl__hunyuan_moe_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st = sl__arch_experts_ff(m, err);
    if (st) return st;
    if (hp->n_ff_shexp < 1) hp->n_ff_shexp = hp->n_ff; /* expert_shared_feed_forward_length */
    hp->n_expert_shared = 1;
    hp->gating = SL_GATING_SOFTMAX_TOPK;
    hp->norm_topk = true;
    hp->expert_weights_scale = 1.0f;
    return SL_OK;
}
