/* runtime/engine/arch_gemma3.c: Gemma 3's keys over the common ones (dense).
 *
 * Gemma norms: HF Gemma computes x * (1 + w); llama.cpp's converter (Gemma3Model.norm_shift =
 * 1.0 for every "*norm.weight", q/k norms included) stores 1 + w in the GGUF, and
 * llm_build_gemma3 multiplies by the stored weight. So the engine uses plain w for gemma3.
 * Gemma3: embeddings scaled by sqrt(n_embd); layer il is sliding-window unless il % 6 == 5
 * (set_swa_pattern(6)), local layers rope with base 10000 and no scaling, global layers with
 * rope.freq_base and rope.scaling.factor; q is scaled by 1/sqrt(key_length), except the
 * 27B model (62 layers) which uses 1/sqrt(n_embd / n_head) (query_pre_attn_scalar = 168);
 * GeGLU with the tanh GELU; no final logit softcapping (that was gemma2).
 * The post-norms, q/k norms, embedding scale, sliding period and GeGLU are the traits row's
 * (arch.c). */
#include <math.h>

#include "runtime/engine/arch_impl.h"

sl_status sl__gemma3_hparams(sl_model *m, sl_error *err)
{
    (void)err;
    sl__hparams *hp = &m->hp;
    hp->rope_base_swa = 10000.0f; /* llama.cpp: rope_freq_base_train_swa for gemma3 */
    hp->rope_scale_swa = 1.0f;
    hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    return SL_OK;
}
