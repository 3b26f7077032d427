/* runtime/engine/arch_bailingmoe2.c: Ling / Ring 2.0 (llama.cpp LLM_ARCH_BAILINGMOE2,
 * llama_model_bailingmoe2), its keys over the common ones.
 *
 * The block (its graph): RMSNorm; the fused attn_qkv (arch_attn.c); per-head q/k RMSNorm; NEOX
 * rope on the first rope.dimension_count entries of each head; scale 1/sqrt(head); ffn_norm;
 * dense SwiGLU below leading_dense_block_count, else the DeepSeek-MoE FFN (arch_ds_moe.c):
 * expert_gating_func and expert_shared_count required, group-limited selection, exp_probs_b
 * optional, weights' norm and scale from the file; its shared experts are
 * expert_shared_feed_forward_length (else expert_feed_forward_length) times
 * expert_shared_count wide. The MTP blocks (nextn_predict_layers) are not run (arch.c). */
#include "runtime/engine/arch_impl.h"

sl_status sl__bailingmoe2_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const int32_t shexp = hp->n_ff_shexp; /* expert_shared_feed_forward_length */
    sl_status st = sl__ds_moe_hparams(m, NULL, err);
    if (st) return st;
    if (shexp > 0) {
        if ((int64_t)shexp * hp->n_expert_shared > INT32_MAX)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key "
                                "'bailingmoe2.expert_shared_feed_forward_length': %d x "
                                "expert_shared_count %d overflows", shexp,
                                hp->n_expert_shared);
        hp->n_ff_shexp = shexp * hp->n_expert_shared;
    }
    return SL_OK;
}
