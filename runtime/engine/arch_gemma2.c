/* runtime/engine/arch_gemma2.c: Gemma 2's keys, as llama.cpp's load_hparams reads them.
 *
 * Gemma 2 is gemma3's block without q/k norms (the traits row: NEOX rope, post-norms, GeGLU,
 * embeddings * sqrt(n_embd), stored norm weights already 1 + w), plus:
 * - soft-capping: attention logits c tanh(l / c) with c = attn_logit_softcapping (default 50),
 *   after the scale; output logits likewise with final_logit_softcapping (default 30);
 * - layer il slides iff il % 2 == 0 (set_swa_pattern(2)), window attention.sliding_window
 *   (default 4096), every layer with the same rope;
 * - q scaled by 1/sqrt(key_length), except the 27B model (46 layers): 1/sqrt(n_embd / n_head)
 *   (gemma_pytorch's query_pre_attn_scalar = 144). */
#include <math.h>

#include "runtime/engine/arch_impl.h"

sl_status sl__gemma2_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st;
    if ((st = sl__arch_get_f32(m, "attn_logit_softcapping", false, 50.0f, &hp->attn_softcap,
                               err)) ||
        (st = sl__arch_get_f32(m, "final_logit_softcapping", false, 30.0f, &hp->final_softcap,
                               err)))
        return st;
    if (hp->attn_softcap < 0 || hp->final_softcap < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'gemma2.%s': %g, expected >= 0 "
                            "(0: no capping)", hp->attn_softcap < 0 ? "attn_logit_softcapping"
                            : "final_logit_softcapping",
                            (double)(hp->attn_softcap < 0 ? hp->attn_softcap
                                                          : hp->final_softcap));
    hp->attn_scale = hp->n_layer == 46 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    return SL_OK;
}
