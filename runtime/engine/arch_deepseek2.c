/* runtime/engine/arch_deepseek2.c: DeepSeek-V2/V3 (llama.cpp LLM_ARCH_DEEPSEEK2), its keys and
 * tensors over the common ones: the MLA attention, the router, the ungated shared experts.
 *
 * deepseek2 (llama_model_deepseek2, run as MLA: sl__deepseek2_hparams says why and what is
 * checked; the legacy attn_kv_b layout gets attn_k_b / attn_v_b derived at load): NORMAL rope on
 * the rope part of each head; head_dim is the latent row (kv_lora_rank + n_rot) and n_head_kv 1,
 * so the KV cache holds the compressed latent;
 * layers below leading_dense_block_count are dense; the router is the file's
 * (expert_gating_func, expert_weights_norm / _scale, expert groups, exp_probs_b used for
 * selection only); shared experts are n_ff_exp * expert_shared_count wide and ungated;
 * the last nextn_predict_layers blocks (MTP) are not run, their tensors not bound. */
#include <math.h>
#include <stdio.h>

#include "runtime/engine/arch_impl.h"

/* deepseek2 (llama.cpp llama_model_deepseek2::load_arch_hparams and the MLA layout its
 * converter writes): the attention is MQA over the latent, so key_length = kv_lora_rank +
 * rope.dimension_count, value_length = kv_lora_rank, head_count_kv = 1, and the per-head sizes
 * are key_length_mla (nope + rope) and value_length_mla. Files without the *_mla keys (the
 * legacy attn_kv_b layout) state the per-head sizes as key_length / value_length with
 * head_count_kv = head_count: legacy_mla turns them into the MLA values, and the binding
 * derives attn_k_b / attn_v_b from attn_kv_b, so the same latent-cache path runs them. */
static sl_status legacy_mla(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const char *a = sl_arch_name(m->arch);
    int32_t vl;
    sl_status st;
    if ((st = sl__arch_get_i32(m, "attention.value_length", false, hp->head_dim, 1, 1 << 16, &vl,
                               err)))
        return st;
    if (hp->n_head_kv != hp->n_head)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.head_count_kv': %d, "
                            "expected head_count %d (legacy attn_kv_b layout: no "
                            "key_length_mla)", a, hp->n_head_kv, hp->n_head);
    hp->mla_kv_b = true;
    hp->n_embd_head_k_mla = hp->head_dim;
    hp->n_embd_head_v_mla = vl;
    hp->head_dim = hp->n_lora_kv + hp->n_rot;
    hp->n_head_kv = 1;
    return SL_OK;
}

/* The vocabulary size llama.cpp's loader sees before the tensors: {arch}.vocab_size, else the
 * tokenizer's token count (0: neither) — what its deepseek2 file rules key on. */
static int64_t file_vocab(const sl_model *m)
{
    char k[96];
    const sl_gguf_value *v = sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "vocab_size"));
    if (v && (v->type == SL_GGUF_U32 || v->type == SL_GGUF_U64)) return (int64_t)v->v.u64;
    if (v && (v->type == SL_GGUF_I32 || v->type == SL_GGUF_I64)) return v->v.i64;
    v = sl_gguf_find(m->gguf, "tokenizer.ggml.tokens");
    return v && v->type == SL_GGUF_ARR ? (int64_t)v->v.arr.n : 0;
}

sl_status sl__deepseek2_hparams(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const int64_t BIG = 1 << 30;
    const char *a = sl_arch_name(m->arch);
    char k[128];
    sl_status st;
    const bool legacy =
        !sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "attention.key_length_mla"));
    if ((st = sl__arch_get_i32(m, "attention.kv_lora_rank", true, 0, 1, BIG, &hp->n_lora_kv,
                               err)) ||
        (st = sl__arch_get_i32(m, "attention.q_lora_rank", false, 0, 0, BIG, &hp->n_lora_q, err)) ||
        (legacy && (st = legacy_mla(m, err))) ||
        (!legacy && (st = sl__arch_get_i32(m, "attention.key_length_mla", true, 0, 1, BIG,
                                           &hp->n_embd_head_k_mla, err))) ||
        (!legacy && (st = sl__arch_get_i32(m, "attention.value_length_mla", true, 0, 1, BIG,
                                           &hp->n_embd_head_v_mla, err))) ||
        (st = sl__arch_get_f32(m, "rope.scaling.yarn_log_multiplier", false, 0.0f,
                               &hp->yarn_log_mul, err)) ||
        /* Mistral Large 3's temperature (llama.cpp: Q times 1 + s ln(floor(pos / L) + 1)) */
        (st = sl__arch_get_f32(m, "attention.temperature_scale", false, 0.0f,
                               &hp->attn_temp_scale, err)) ||
        (st = sl__arch_get_i32(m, "attention.temperature_length", hp->attn_temp_scale != 0.0f,
                               0, 0, BIG, &hp->attn_temp_len, err)))
        return st;
    if (hp->attn_temp_scale != 0.0f && hp->attn_temp_len < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.temperature_length': "
                            "0, expected >= 1 with temperature_scale %g", a,
                            (double)hp->attn_temp_scale);
    if (!sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "rope.dimension_count")))
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s' missing (required: the "
                            "rope part of each head)", k);
    const int32_t Dl = hp->n_lora_kv + hp->n_rot;
    if (hp->head_dim != Dl)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.key_length': %d, "
                            "expected kv_lora_rank + rope.dimension_count = %d + %d = %d", a,
                            hp->head_dim, hp->n_lora_kv, hp->n_rot, Dl);
    int32_t vl = hp->n_lora_kv;
    if (!legacy && (st = sl__arch_get_i32(m, "attention.value_length", false, hp->n_lora_kv, 1, BIG,
                                          &vl, err)))
        return st;
    if (vl != hp->n_lora_kv)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.value_length': %d, "
                            "expected kv_lora_rank = %d", a, vl, hp->n_lora_kv);
    if (hp->n_head_kv != 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.head_count_kv': %d, "
                            "expected 1 (MLA attends over one latent head)", a, hp->n_head_kv);
    if (hp->n_embd_head_k_mla <= hp->n_rot)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.key_length_mla': "
                            "%d, expected > rope.dimension_count %d (nope + rope, nope >= 1)",
                            a, hp->n_embd_head_k_mla, hp->n_rot);
    /* the router and experts (arch_ds_moe.c); expert_gating_func absent or 0: llama.cpp's
     * rule, sigmoid for GLM-4.7-Flash (47 or 48 trunk layers, 154880 tokens: its files leave
     * the key out), else softmax (V2, V2.5) */
    const bool flash = (hp->n_layer == 47 || hp->n_layer == 48) && file_vocab(m) == 154880;
    const sl_gating absent = flash ? SL_GATING_SIGMOID : SL_GATING_SOFTMAX_TOPK;
    if ((st = sl__ds_moe_hparams(m, &absent, err))) return st;
    /* YaRN as llama.cpp's deepseek2 graph: the rope's own magnitude correction is cancelled
     * (the rotated dims keep attn_factor), and the attention scale carries
     * mscale^2 / sqrt(key_length_mla), mscale = attn_factor * (1 + yarn_log_multiplier *
     * ln(1 / freq_scale)) — HF's softmax_scale with yarn_get_mscale(factor, mscale_all_dim),
     * the file holding 0.1 * mscale_all_dim */
    const float lnf = logf(1.0f / hp->rope_scale);
    const float mscale = hp->yarn_attn_factor * (1.0f + hp->yarn_log_mul * lnf);
    hp->attn_scale = mscale * mscale / sqrtf((float)hp->n_embd_head_k_mla);
    if (hp->yarn_ext_factor != 0.0f) hp->yarn_attn_factor /= 1.0f + 0.1f * lnf;
    return SL_OK;
}

/* A legacy file's attn_kv_b [kv_lora, H * (nope + v)] as the F32 attn_k_b [nope, kv_lora, H]
 * and attn_v_b [kv_lora, v, H] the MLA path reads (weight.c derives them at load). */
static sl_status bind_kv_b(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    sl__layer *L = &m->layers[il];
    const int64_t H = hp->n_head, C = hp->n_lora_kv, Dv = hp->n_embd_head_v_mla,
                  nope = hp->n_embd_head_k_mla - hp->n_rot;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.attn_kv_b.weight", il);
    const sl_gguf_tensor *t;
    const int64_t ne[] = {C, H * (nope + Dv)};
    sl_status st = sl__arch_find_shaped(m, name, 2, ne, true, &t, err);
    if (st) return st;
    L->wk_b = sl__arch_new_weight(m, t);
    L->wv_b = sl__arch_new_weight(m, t);
    const int64_t kb[] = {nope, C, H}, vb[] = {C, Dv, H};
    sl_weight *w[2] = {L->wk_b, L->wv_b};
    for (int i = 0; i < 2; i++) {
        w[i]->derive = i ? SL_DERIVE_V_B : SL_DERIVE_K_B;
        w[i]->n_dims = 3;
        for (int d = 0; d < SL_GGUF_MAX_DIMS; d++) w[i]->ne[d] = d < 3 ? (i ? vb : kb)[d] : 1;
        w[i]->need_matvec = true;
    }
    return SL_OK;
}

/* deepseek2's MLA weights (llama_model_deepseek2::load_arch_tensors, MLA layout). */
sl_status sl__deepseek2_bind_attn(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, H = hp->n_head, Dk = hp->n_embd_head_k_mla,
                  Dv = hp->n_embd_head_v_mla, R = hp->n_rot, C = hp->n_lora_kv,
                  QL = hp->n_lora_q;
    sl_status st;
    if (QL > 0) {
        if ((st = MAT(&L->wq_a, true, "blk.%d.attn_q_a.weight", il, E, QL)) ||
            (st = VEC(&L->q_a_norm, true, "blk.%d.attn_q_a_norm.weight", il, QL)) ||
            (st = MAT(&L->wq_b, true, "blk.%d.attn_q_b.weight", il, QL, H * Dk)))
            return st;
    } else if ((st = MAT(&L->wq, true, "blk.%d.attn_q.weight", il, E, H * Dk))) {
        return st;
    }
    if ((st = MAT(&L->wkv_a, true, "blk.%d.attn_kv_a_mqa.weight", il, E, C + R)) ||
        (st = VEC(&L->kv_a_norm, true, "blk.%d.attn_kv_a_norm.weight", il, C)) ||
        (hp->mla_kv_b && (st = bind_kv_b(m, il, err))) ||
        (!hp->mla_kv_b &&
         (st = MAT(&L->wk_b, true, "blk.%d.attn_k_b.weight", il, Dk - R, C, H))) ||
        (!hp->mla_kv_b && (st = MAT(&L->wv_b, true, "blk.%d.attn_v_b.weight", il, C, Dv, H))) ||
        (st = MAT(&L->wo, true, "blk.%d.attn_output.weight", il, H * Dv, E)))
        return st;
    return SL_OK;
}
