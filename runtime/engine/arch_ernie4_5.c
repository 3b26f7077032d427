/* runtime/engine/arch_ernie4_5.c: ERNIE 4.5 (llama.cpp LLM_ARCH_ERNIE4_5 and
 * LLM_ARCH_ERNIE4_5_MOE: llama_model_ernie4_5 / _ernie4_5_moe), their keys and tensors over
 * the common ones.
 *
 * llama's block (NORMAL rope over whole heads: traits.rot_whole; ffn_norm, SwiGLU); an
 * attn_output.bias is accepted and not applied, as llama.cpp does. The MoE model: layers
 * below leading_dense_block_count dense, the others
 * routed by softmax over expert_count, selection by probability + exp_probs_b (optional), the
 * top-k weights renormalised and never scaled (llama.cpp reads no scale for it); experts of
 * expert_feed_forward_length (required); where expert_shared_feed_forward_length > 0, one
 * shared SwiGLU of that width added ungated (arch_ds_moe.c binds it). llama.cpp makes a layer
 * MoE when il >= the dense lead and (il + 1) % interleave_moe_layer_step == 0, but creates
 * the experts (and no dense FFN) for every layer past the lead, so only a step of 1 gives a
 * file it can run: another step is refused. */
#include "runtime/engine/arch_impl.h"

sl_status sl__ernie4_5_bind_layer(sl_model *m, int il, sl_error *err)
{
    /* llama.cpp loads it and never applies it (both ERNIE graphs pass no output bias to
     * build_attn): bound, so that such a file loads as there, and not applied, so that it
     * gives llama.cpp's logits */
    sl_weight *loaded_unused;
    return VEC(&loaded_unused, false, "blk.%d.attn_output.bias", il, (int64_t)m->hp.n_embd);
}

sl_status sl__ernie4_5_moe_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    int32_t step;
    sl_status st;
    if ((st = sl__arch_get_i32(m, "interleave_moe_layer_step", true, 0, 1, 1 << 16, &step,
                               err)) ||
        (st = sl__arch_get_i32(m, "leading_dense_block_count", false, 0, 0, hp->n_layer,
                               &hp->n_dense_lead, err)))
        return st;
    if (step != 1)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "metadata key "
                            "'ernie4_5-moe.interleave_moe_layer_step': %d, only 1 is supported "
                            "(llama.cpp gives the layers between no FFN)", step);
    hp->n_expert_shared = hp->n_ff_shexp > 0; /* one, of its own width */
    hp->gating = SL_GATING_SOFTMAX_TOPK;
    hp->norm_topk = true;
    hp->expert_weights_scale = 1.0f;
    return SL_OK;
}
