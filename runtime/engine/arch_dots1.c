/* runtime/engine/arch_dots1.c: dots.llm1 (llama.cpp LLM_ARCH_DOTS1, llama_model_dots1), its
 * keys over the common ones.
 *
 * The block (its graph): RMSNorm; q/k/v (arch_attn.c; as many k/v heads as q heads: llama.cpp
 * sizes them by head_count, so a file with fewer is refused); per-head q/k RMSNorm; NEOX rope
 * over the whole head (traits.rot_whole: llama.cpp asserts it); scale 1/sqrt(head);
 * ffn_norm; dense SwiGLU below leading_dense_block_count, else the DeepSeek-MoE FFN (arch_ds_moe.c): expert_gating_func
 * and expert_shared_count required, exp_probs_b optional, weights' norm and scale from the
 * file. */
#include "runtime/engine/arch_impl.h"

sl_status sl__dots1_hparams(sl_model *m, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    if (hp->n_head_kv != hp->n_head)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'dots1.attention.head_count_kv': "
                            "%d, expected head_count %d (llama.cpp sizes dots1's k and v by "
                            "head_count)", hp->n_head_kv, hp->n_head);
    return sl__ds_moe_hparams(m, NULL, err);
}
