/* runtime/engine/arch_gemma2.c: Gemma 2's keys, as llama.cpp's load_hparams reads them.
 *
 * Gemma 2 is gemma3's block without q/k norms (the traits row: NEOX rope, post-norms, GeGLU,
 * embeddings * sqrt(n_embd), stored norm weights already 1 + w), plus:
 * - soft-capping: attention logits c tanh(l / c) with c = attn_logit_softcapping (default 50),
 *   after the scale; output logits likewise with final_logit_softcapping (default 30);
 * - layer il slides iff il % P < P - 1 (load_swa_pattern(ml, 2): P =
 *   attention.sliding_window_pattern, default 2, so even layers slide; a per-layer bool array
 *   there is refused naming the key, as is 0 (llama.cpp: every layer slides)), window
 *   attention.sliding_window (default 4096); sliding layers rope with rope.freq_base_swa
 *   (default rope.freq_base), every layer with the same rope scaling;
 * - the output is always token_embd (llama.cpp creates no output tensor for gemma2, so a file
 *   holding output.weight is refused, as llama.cpp refuses it: "wrong number of tensors");
 * - q scaled by 1/sqrt(key_length), except the 27B model (46 layers): 1/sqrt(n_embd / n_head)
 *   (gemma_pytorch's query_pre_attn_scalar = 144). */
#include <math.h>
#include <stdint.h>

#include "runtime/engine/arch_impl.h"

sl_status sl__gemma2_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    sl_status st;
    if ((st = sl__arch_get_f32(m, "attn_logit_softcapping", false, 50.0f, &hp->attn_softcap,
                               err)) ||
        (st = sl__arch_get_f32(m, "final_logit_softcapping", false, 30.0f, &hp->final_softcap,
                               err)) ||
        (st = sl__arch_get_i32(m, "attention.sliding_window_pattern", false, hp->swa_period, 1,
                               INT32_MAX, &hp->swa_period, err)) ||
        (st = sl__arch_get_f32(m, "rope.freq_base_swa", false, hp->rope_base,
                               &hp->rope_base_swa, err)))
        return st;
    if (hp->rope_base_swa <= 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'gemma2.rope.freq_base_swa': %g, "
                            "expected > 0", (double)hp->rope_base_swa);
    if (sl_gguf_tensor_find(m->gguf, "output.weight"))
        return sl_error_set(err, SL_ERR_FORMAT, "%s: tensor 'output.weight': gemma2 ties the "
                            "output to token_embd.weight (llama.cpp refuses such a file: wrong "
                            "number of tensors)", m->path);
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
