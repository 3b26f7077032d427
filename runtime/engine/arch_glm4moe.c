/* runtime/engine/arch_glm4moe.c: GLM-4.5 / 4.6 / 4.7 and Solar Open (llama.cpp LLM_ARCH_GLM4_MOE,
 * llama_model_glm4_moe), its keys and tensors over the common ones.
 *
 * The block (its graph): RMSNorm; q/k/v with the biases its converter writes (arch_attn.c:
 * optional, as llama.cpp's create_tensor_qkv); per-head q/k RMSNorm where the file has the
 * weights (GLM-4.5 355B: use_qk_norm; Air: none); NEOX rope on the first
 * rope.dimension_count entries of each head (partial_rotary_factor 0.5); scale 1/sqrt(head);
 * attn_output without bias; the FFN's input norm is post_attention_norm; then the
 * DeepSeek-MoE FFN (arch_ds_moe.c) with its defaults here: sigmoid gating, expert_shared_count
 * required, exp_probs_b required on every MoE layer. The MTP block (nextn_predict_layers,
 * 1 in every released file) is not run (arch.c). The vision files (GLM-4.5V / 4.6V) carry
 * M-RoPE sections; for text that is NEOX's rotation, any pair the sections leave to the
 * fourth position component turning by angle 0 (sl__arch_mrope_text). */
#include "runtime/engine/arch_impl.h"

sl_status sl__glm4moe_hparams(sl_model *m, sl_error *err)
{
    sl_status st = sl__arch_mrope_text(m, false, false, err);
    if (st) return st;
    const sl_gating absent = SL_GATING_SIGMOID;
    return sl__ds_moe_hparams(m, &absent, err);
}
