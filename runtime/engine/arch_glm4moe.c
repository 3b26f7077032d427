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
 * 1 in every released file) is not run (arch.c). Refused: M-RoPE files (GLM-4.5V / 4.6V:
 * rope.dimension_sections), whose text positions llama.cpp ropes another way. */
#include "runtime/engine/arch_impl.h"

sl_status sl__glm4moe_hparams(sl_model *m, sl_error *err)
{
    char k[128];
    const sl_gguf_value *v =
        sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "rope.dimension_sections"));
    if (v) { /* llama.cpp's use_mrope(): sections 0 and 1 both > 0 */
        sl_gguf_value e[2];
        if (v->type != SL_GGUF_ARR)
            return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected an array "
                                "of integers", k, sl_gguf_vtype_name(v->type));
        bool mrope = v->v.arr.n >= 2;
        for (uint64_t i = 0; i < 2 && mrope; i++) {
            sl_status st = sl_gguf_arr_get(v, i, &e[i], err);
            if (st) return st;
            const bool is_int = e[i].type == SL_GGUF_I32 || e[i].type == SL_GGUF_I64 ||
                                e[i].type == SL_GGUF_U32 || e[i].type == SL_GGUF_U64;
            if (!is_int)
                return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': array of %s, "
                                    "expected integers", k, sl_gguf_vtype_name(e[i].type));
            const bool u = e[i].type == SL_GGUF_U32 || e[i].type == SL_GGUF_U64;
            mrope = u ? e[i].v.u64 > 0 : e[i].v.i64 > 0;
        }
        if (mrope)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "metadata key '%s': multimodal rope "
                                "sections (M-RoPE, the GLM-4.xV files) are not supported", k);
    }
    const sl_gating absent = SL_GATING_SIGMOID;
    return sl__ds_moe_hparams(m, true, &absent, err);
}
