/* runtime/engine/arch_minimax_m2.c: MiniMax-M2 (llama.cpp LLM_ARCH_MINIMAX_M2,
 * llama_model_minimax_m2), its keys and tensors over the common ones.
 *
 * The block (its graph): RMSNorm; q/k/v (create_tensor_qkv: arch_attn.c); RMSNorm of the whole
 * q projection and of the whole k projection (attn_q_norm [H D], attn_k_norm [Hkv D]: the
 * traits' SL__QK_NORM_FULL, before the head split); NEOX rope on the first
 * rope.dimension_count entries of each head (MiniMax-M2: 64 of 128); scale 1/sqrt(head);
 * ffn_norm; the router: probabilities by expert_gating_func (its converter writes 2, sigmoid;
 * llama.cpp has no router without it, so a file without it is refused here), selection by
 * probability + exp_probs_b (required) within the groups (arch.c), the top-k weights always
 * renormalised and never scaled (llama.cpp reads neither expert_weights_norm nor
 * expert_weights_scale for it); experts as wide as feed_forward_length (llama.cpp's tensor
 * shapes; expert_feed_forward_length is a required key it does not size them by, and the
 * converter writes both from intermediate_size); no shared expert, no dense layer. */
#include "runtime/engine/arch_impl.h"

sl_status sl__minimax_m2_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    int32_t gf;
    sl_status st;
    if ((st = sl__arch_experts_ff(m, err)) ||
        (st = sl__arch_get_i32(m, "expert_gating_func", true, 0, 1, 2, &gf, err)))
        return st;
    hp->gating = gf == 2 ? SL_GATING_SIGMOID : SL_GATING_SOFTMAX_TOPK;
    hp->norm_topk = true;
    hp->expert_weights_scale = 1.0f;
    return SL_OK;
}
