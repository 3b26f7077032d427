/* runtime/engine/arch_qwen3vl.c: Qwen3-VL's language models (llama.cpp LLM_ARCH_QWEN3VL,
 * LLM_ARCH_QWEN3VLMOE: llama_model_qwen3vl / _qwen3vlmoe) on text.
 *
 * qwen3's and qwen3moe's blocks (per-head q/k norms, softmax top-k renormalised, no shared
 * expert) with interleaved M-RoPE over rope.dimension_sections (a required key): for a text
 * token it is NEOX's rotation but for the pairs the sections leave to the fourth position
 * component, which turn by angle 0 (sl__arch_mrope_text). The deepstack layers
 * (n_deepstack_layers) add the image encoder's features to the first layers' outputs; a text
 * token's are zeros (llama.cpp pads its embedding with them), so text runs without them. Whole heads rotate
 * (traits.rot_whole). */
#include "runtime/engine/arch_impl.h"

sl_status sl__qwen3vl_hparams(sl_model *m, sl_error *err)
{
    return sl__arch_mrope_text(m, true, true, err);
}
