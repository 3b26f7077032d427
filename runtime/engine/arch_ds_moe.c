/* runtime/engine/arch_ds_moe.c: the DeepSeek-MoE feed-forward of deepseek2, glm4moe, dots1,
 * bailingmoe2 and (its router) minimax-m2 (llama.cpp's loaders of those and build_moe_ffn):
 *
 * - layers below leading_dense_block_count have a dense SwiGLU FFN of feed_forward_length;
 * - the others route to expert_used_count of expert_count experts of
 *   expert_feed_forward_length: probabilities by expert_gating_func (1 softmax, 2 sigmoid;
 *   absent or 0: the arch's default, or, where llama.cpp has none, refused), selection by
 *   probability + exp_probs_b within the groups (arch.c reads them, for every arch, as
 *   llama.cpp: a group scores its two best), weights the probabilities, divided by their sum
 *   when expert_weights_norm, times expert_weights_scale (absent or 0: 1);
 * - plus expert_shared_count shared experts, one SwiGLU n_ff_exp * count wide, added ungated
 *   (forward_ffn.c: a shared expert without ffn_gate_inp_shexp). */
#include "runtime/engine/arch_impl.h"

sl_status sl__ds_moe_hparams(sl_model *m, const sl_gating *absent, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const int64_t BIG = 1 << 30;
    const char *a = sl_arch_name(m->arch);
    int32_t gf;
    sl_status st;
    if ((st = sl__arch_get_i32(m, "leading_dense_block_count", false, 0, 0, hp->n_layer,
                               &hp->n_dense_lead, err)) ||
        (st = sl__arch_get_i32(m, "expert_shared_count", true, 0, 0, 64,
                               &hp->n_expert_shared, err)) ||
        (st = sl__arch_get_i32(m, "expert_feed_forward_length", true, 0, 1, BIG, &hp->n_ff_exp,
                               err)) ||
        (st = sl__arch_get_i32(m, "expert_gating_func", !absent, 0, absent ? 0 : 1, 2, &gf,
                               err)) ||
        (st = sl__arch_get_bool(m, "expert_weights_norm", false, &hp->norm_topk, err)) ||
        /* absent: the converter leaves it out when there is no scaling (llama.cpp then skips
         * it, as it does for 0) */
        (st = sl__arch_get_f32(m, "expert_weights_scale", false, 1.0f,
                               &hp->expert_weights_scale, err)))
        return st;
    hp->gating = gf == 2 ? SL_GATING_SIGMOID : gf == 1 ? SL_GATING_SOFTMAX_TOPK : *absent;
    if (hp->expert_weights_scale == 0.0f) hp->expert_weights_scale = 1.0f;
    if (hp->expert_weights_scale < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_weights_scale': %g, "
                            "expected > 0", a, (double)hp->expert_weights_scale);
    if ((int64_t)hp->n_ff_exp * hp->n_expert_shared > INT32_MAX)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_shared_count': %d "
                            "shared experts of %d overflow", a, hp->n_expert_shared,
                            hp->n_ff_exp);
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
    return SL_OK;
}

/* bias: 0 none, 1 optional, 2 required */
static sl_status bind(sl_model *m, int il, int bias, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert;
    sl_status st;
    if (hp->n_expert_shared > 0) { /* added ungated */
        const int64_t S = hp->n_ff_shexp;
        if ((st = MAT(&L->gate_shexp, true, "blk.%d.ffn_gate_shexp.weight", il, E, S)) ||
            (st = MAT(&L->up_shexp, true, "blk.%d.ffn_up_shexp.weight", il, E, S)) ||
            (st = MAT(&L->down_shexp, true, "blk.%d.ffn_down_shexp.weight", il, S, E)))
            return st;
    }
    return bias ? VEC(&L->exp_probs_b, bias == 2, "blk.%d.exp_probs_b.bias", il, X) : SL_OK;
}

sl_status sl__ds_moe_bind_bias_opt(sl_model *m, int il, sl_error *err)
{
    return bind(m, il, 1, err);
}

sl_status sl__ds_moe_bind_bias_req(sl_model *m, int il, sl_error *err)
{
    return bind(m, il, 2, err);
}

sl_status sl__ds_moe_bind_shared(sl_model *m, int il, sl_error *err)
{
    return bind(m, il, 0, err);
}
