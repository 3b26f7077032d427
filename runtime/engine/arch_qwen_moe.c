/* runtime/engine/arch_qwen_moe.c: the Qwen MoE family's expert widths (qwen2moe, qwen3moe,
 * qwen3next, qwen35moe) and qwen2moe's shared expert.
 *
 * Their experts are expert_feed_forward_length wide, else n_ff / n_expert_used (llama.cpp's
 * fallback); the shared expert is expert_shared_feed_forward_length wide, else n_ff.
 * The shared expert's tensors (ffn_*_shexp and its sigmoid gate) are bound with the common
 * experts (arch.c, traits.shared_expert: qwen2moe, qwen3next, qwen35moe). */
#include "runtime/engine/arch_impl.h"

/* llama.cpp's fallbacks when the file has no expert widths. */
sl_status sl__qwen_moe_expert_widths(sl_model *m, sl_error *err)
{
    (void)err;
    sl__hparams *hp = &m->hp;
    if (!hp->n_ff_exp && hp->n_expert_used) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (!hp->n_ff_shexp) hp->n_ff_shexp = hp->n_ff;
    return SL_OK;
}

sl_status sl__qwen2moe_hparams(sl_model *m, sl_error *err)
{
    if (m->hp.n_ff_shexp < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata: shared expert width is 0 (%s."
                            "expert_shared_feed_forward_length)", sl_arch_name(m->arch));
    return SL_OK;
}
