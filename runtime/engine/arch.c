/* runtime/engine/arch.c: per-architecture tables — traits, hyperparameter keys, tensor names and
 * shapes — following llama.cpp (llama-arch.cpp names, llama-model.cpp load_hparams /
 * load_tensors / llm_build_*). Notes on choices that are easy to get wrong:
 *
 * - Rope pairing is llama.cpp's llama_model_rope_type: llama NORMAL (its converter permutes
 *   q/k so adjacent pairs rotate); qwen2moe, qwen3moe, olmoe, gemma3 NEOX (HF rotate_half,
 *   unpermuted). OLMoE is NEOX in llama.cpp, like OLMo2.
 * - Gemma norms: HF Gemma computes x * (1 + w); llama.cpp's converter (Gemma3Model.norm_shift =
 *   1.0 for every "*norm.weight", q/k norms included) stores 1 + w in the GGUF, and
 *   llm_build_gemma3 multiplies by the stored weight. So the engine uses plain w for gemma3.
 * - Gemma3: embeddings scaled by sqrt(n_embd); layer il is sliding-window unless il % 6 == 5
 *   (set_swa_pattern(6)), local layers rope with base 10000 and no scaling, global layers with
 *   rope.freq_base and rope.scaling.factor; q is scaled by 1/sqrt(key_length), except the
 *   27B model (62 layers) which uses 1/sqrt(n_embd / n_head) (query_pre_attn_scalar = 168);
 *   GeGLU with the tanh GELU; no final logit softcapping (that was gemma2).
 * - Expert widths: mixtral and olmoe experts are feed_forward_length wide; qwen2moe/qwen3moe
 *   use expert_feed_forward_length, else n_ff / n_expert_used (llama.cpp's fallback); the
 *   qwen2moe shared expert uses expert_shared_feed_forward_length, else n_ff.
 * - Top-k renormalisation: mixtral (llama) and qwen3moe yes; qwen2moe and olmoe no.
 * - OLMoE's q/k norms run over the whole projection before the head split; llama.cpp sizes
 *   both by n_embd, which equals n_head * head_dim and n_head_kv * head_dim in every OLMoE (it
 *   has n_head_kv == n_head). We expect [n_head*head_dim] and [n_head_kv*head_dim], the same
 *   shapes for every file llama.cpp accepts.
 * - gpt-oss (llama.cpp llama_model_openai_moe, graph llm_build_openai_moe_iswa): q/k/v/o
 *   biases; attn_sinks [n_head]; NEOX rope with YaRN from the file's rope.scaling keys, the
 *   same rope on every layer (rope.freq_base_swa may set the sliding layers' base); sliding
 *   window on layer il iff il % P < P - 1 with P = attention.sliding_window_pattern, default 2
 *   (even layers slide); attention scale 1/sqrt(n_rot), and head sizes are n_rot (llama.cpp
 *   sizes q/k/v by n_head * n_rot), so a file whose key_length differs from
 *   rope.dimension_count is refused; the FFN's input norm is post_attention_norm; router
 *   logits = W x + b, the top k of them, weights = softmax over those k; experts as wide as
 *   expert_feed_forward_length (required) with gate/up/down biases and the clamped SwiGLU
 *   (ggml_swiglu_oai: alpha 1.702, limit 7, (up + 1)).
 * - Optional tensors are llama.cpp's TENSOR_NOT_REQUIRED ones that its graphs apply: every
 *   q/k/v architecture's fused attn_qkv and q/k/v biases (arch_attn.c), llama's and granite's
 *   attn_output.bias and dense FFN biases, qwen2's output.bias, rope_freqs or LongRoPE's
 *   factors (llama, granite; phi3); any other tensor in the file is refused by name, as
 *   llama.cpp refuses it ("wrong number of tensors"). rope.scaling.attn_factor scales every
 *   rope, whatever the scaling type (llama.cpp: cparams.yarn_attn_factor *= it).
 * - deepseek2 (llama_model_deepseek2, run as MLA: hparams_mla says why and what is checked;
 *   the legacy attn_kv_b layout gets attn_k_b / attn_v_b derived at load): NORMAL rope on the rope part of each head; head_dim is the latent row
 *   (kv_lora_rank + n_rot) and n_head_kv 1, so the KV cache holds the compressed latent;
 *   layers below leading_dense_block_count are dense; the router is the file's
 *   (expert_gating_func, expert_weights_norm / _scale, expert groups, exp_probs_b used for
 *   selection only); shared experts are n_ff_exp * expert_shared_count wide and ungated;
 *   the last nextn_predict_layers blocks (MTP) are not run, their tensors not bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/arch_impl.h"

static const sl__arch_traits k_traits[SL_ARCH_COUNT] = {
    [SL_ARCH_LLAMA] = {.rope = SL_ROPE_NORMAL, .moe_capable = true,
                        .norm_topk = true, .act = SL_MOE_SILU, .rope_freqs = true,
                        .llama_biases = true},
    [SL_ARCH_QWEN2MOE] = {.rope = SL_ROPE_NEOX, .moe_capable = true, .moe_required = true, .norm_topk = false,
                           .shared_expert = true, .act = SL_MOE_SILU},
    [SL_ARCH_QWEN3MOE] = {.rope = SL_ROPE_NEOX,
                           .qk_norm = SL__QK_NORM_HEAD, .moe_capable = true,
                           .moe_required = true, .norm_topk = true, .act = SL_MOE_SILU},
    [SL_ARCH_OLMOE] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_FULL,
                        .moe_capable = true, .moe_required = true, .norm_topk = false,
                        .act = SL_MOE_SILU},
    [SL_ARCH_GEMMA3] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                         .post_norms = true, .embd_scale = true, .swa_period = 6,
                         .act = SL_MOE_GELU_TANH},
    [SL_ARCH_GPT_OSS] = {.rope = SL_ROPE_NEOX, .moe_capable = true, .moe_required = true, .swa_period = 2,
                          .attn_out_bias = true, .attn_sinks = true, .moe_biases = true,
                          .post_attn_ffn_norm = true, .gating = SL_GATING_TOPK_SOFTMAX,
                          .act = SL_MOE_SWIGLU_OAI},
    [SL_ARCH_DEEPSEEK2] = {.rope = SL_ROPE_NORMAL, .moe_capable = true,
                            .moe_required = true, .mla = true, .act = SL_MOE_SILU},
    [SL_ARCH_QWEN2] = {.rope = SL_ROPE_NEOX, .output_bias = true, .act = SL_MOE_SILU},
    [SL_ARCH_QWEN3] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD, .act = SL_MOE_SILU},
    [SL_ARCH_GEMMA2] = {.rope = SL_ROPE_NEOX, .post_norms = true, .embd_scale = true,
                         .swa_period = 2, .swa_default = 4096, .act = SL_MOE_GELU_TANH,
                         .hparams = sl__gemma2_hparams},
    [SL_ARCH_GRANITE] = {.rope = SL_ROPE_NORMAL, .act = SL_MOE_SILU, .rope_freqs = true,
                          .llama_biases = true, .hparams = sl__granite_hparams},
    [SL_ARCH_PHI3] = {.rope = SL_ROPE_NEOX, .act = SL_MOE_SILU, .fused = true, .longrope = true,
                       .hparams = sl__phi3_hparams, .bind_layer = sl__phi3_bind_layer},
    [SL_ARCH_QWEN3NEXT] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                            .moe_capable = true, .moe_required = true, .norm_topk = true,
                            .shared_expert = true, .act = SL_MOE_SILU,
                            .post_attn_ffn_norm = true, .own_attn = true, .recurrent = true,
                            .hparams = sl__qwen3next_hparams,
                            .bind_layer = sl__qwen3next_bind_layer},
};

const sl__arch_traits *sl__arch_traits_get(sl_arch a)
{
    return (unsigned)a < SL_ARCH_COUNT ? &k_traits[a] : NULL;
}


/* ---- metadata helpers ------------------------------------------------------------------ */

/* Integer scalar of any integer type, or an array of them whose entries are all equal
 * (llama.cpp's per-layer arrays); absent: *out = def, or SL_ERR_FORMAT if required. */
static sl_status get_int(const sl_gguf *g, const char *key, bool required, int64_t def,
                         int64_t *out, sl_error *err)
{
    const sl_gguf_value *v = sl_gguf_find(g, key);
    if (!v) {
        if (required)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s' missing (required)", key);
        *out = def;
        return SL_OK;
    }
    sl_gguf_value e = *v;
    if (v->type == SL_GGUF_ARR) {
        if (!v->v.arr.n)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s': empty array", key);
        int64_t first = 0;
        for (uint64_t i = 0; i < v->v.arr.n; i++) {
            sl_status st = sl_gguf_arr_get(v, i, &e, err);
            if (st) return st;
            int64_t x;
            if (e.type == SL_GGUF_U8 || e.type == SL_GGUF_U16 || e.type == SL_GGUF_U32 ||
                e.type == SL_GGUF_U64)
                x = (int64_t)e.v.u64;
            else if (e.type == SL_GGUF_I8 || e.type == SL_GGUF_I16 || e.type == SL_GGUF_I32 ||
                     e.type == SL_GGUF_I64)
                x = e.v.i64;
            else
                return sl_error_set(err, SL_ERR_TYPE,
                                    "metadata key '%s': array of %s, expected integers", key,
                                    sl_gguf_vtype_name(e.type));
            if (i == 0) first = x;
            else if (x != first)
                return sl_error_set(err, SL_ERR_UNSUPPORTED,
                                    "metadata key '%s': per-layer values differ (entry %llu = "
                                    "%lld, entry 0 = %lld); only uniform layers are supported",
                                    key, (unsigned long long)i, (long long)x, (long long)first);
        }
        *out = first;
        return SL_OK;
    }
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        if (v->v.u64 > (uint64_t)INT64_MAX)
            return sl_error_set(err, SL_ERR_RANGE, "metadata key '%s': value %llu too large",
                                key, (unsigned long long)v->v.u64);
        *out = (int64_t)v->v.u64;
        return SL_OK;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        *out = v->v.i64;
        return SL_OK;
    default:
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected an integer", key,
                            sl_gguf_vtype_name(v->type));
    }
}

static sl_status get_float(const sl_gguf *g, const char *key, bool required, float def,
                           float *out, sl_error *err)
{
    const sl_gguf_value *v = sl_gguf_find(g, key);
    if (!v) {
        if (required)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s' missing (required)", key);
        *out = def;
        return SL_OK;
    }
    if (v->type == SL_GGUF_F32) *out = v->v.f32;
    else if (v->type == SL_GGUF_F64) *out = (float)v->v.f64;
    else
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected f32", key,
                            sl_gguf_vtype_name(v->type));
    if (!isfinite(*out))
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s': value %g is not finite", key,
                            (double)*out);
    return SL_OK;
}

/* "{arch}.{suffix}" */
static const char *akey(char *buf, size_t n, const sl_model *m, const char *suffix)
{
    snprintf(buf, n, "%s.%s", sl_arch_name(m->arch), suffix);
    return buf;
}

static sl_status get_i32(const sl_model *m, const char *suffix, bool required, int64_t def,
                         int64_t lo, int64_t hi, int32_t *out, sl_error *err)
{
    char k[128];
    int64_t v;
    sl_status st = get_int(m->gguf, akey(k, sizeof k, m, suffix), required, def, &v, err);
    if (st) return st;
    if (v < lo || v > hi)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s': value %lld outside [%lld, %lld]",
                            k, (long long)v, (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return SL_OK;
}

static sl_status get_f32(const sl_model *m, const char *suffix, bool required, float def,
                         float *out, sl_error *err)
{
    char k[128];
    return get_float(m->gguf, akey(k, sizeof k, m, suffix), required, def, out, err);
}

sl_status sl__arch_get_i32(const sl_model *m, const char *suffix, bool required, int64_t def,
                           int64_t lo, int64_t hi, int32_t *out, sl_error *err)
{
    return get_i32(m, suffix, required, def, lo, hi, out, err);
}

sl_status sl__arch_get_f32(const sl_model *m, const char *suffix, bool required, float def,
                           float *out, sl_error *err)
{
    return get_f32(m, suffix, required, def, out, err);
}

sl_status sl__arch_get_bool(const sl_model *m, const char *suffix, bool def, bool *out,
                            sl_error *err)
{
    char k[128];
    const sl_gguf_value *v = sl_gguf_find(m->gguf, akey(k, sizeof k, m, suffix));
    *out = def;
    if (!v) return SL_OK;
    if (v->type != SL_GGUF_BOOL)
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected bool", k,
                            sl_gguf_vtype_name(v->type));
    *out = v->v.b;
    return SL_OK;
}

/* The dense FFN's activation: the arch's, or ReLU where the file says so. llama.cpp has no
 * key for it (its llama graph is always SwiGLU; PowerInfer's ReLU-fied llamas, ReluLLaMA and
 * ProSparse, are arch "llama" and its fork runs them with ReLU on its sparse path without a
 * metadata key), so Sluice reads its own SL_FFN_ACT_KEY, named after HF's hidden_act: "relu"
 * (dense llama only: routed experts have no ReLU kernels) or "silu" (the arch's own). A file
 * with the key still loads in llama.cpp, which would run it as SwiGLU. */
static sl_status ffn_activation(sl_model *m, sl_error *err)
{
    m->hp.act = m->tr->act;
    const sl_gguf_value *v = sl_gguf_find(m->gguf, SL_FFN_ACT_KEY);
    if (!v) return SL_OK;
    if (v->type != SL_GGUF_STR)
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected a string",
                            SL_FFN_ACT_KEY, sl_gguf_vtype_name(v->type));
    char val[32];
    snprintf(val, sizeof val, "%.*s", (int)(v->v.str.len < 31 ? v->v.str.len : 31),
             v->v.str.ptr);
    if (!strcmp(val, "silu") && m->tr->act == SL_MOE_SILU) return SL_OK;
    if (!strcmp(val, "relu") && m->arch == SL_ARCH_LLAMA && m->hp.n_expert == 0) {
        m->hp.act = SL_MOE_RELU;
        return SL_OK;
    }
    return sl_error_set(err, SL_ERR_UNSUPPORTED, "metadata key '%s': '%s' not supported for "
                        "%s%s (\"relu\": dense llama; \"silu\": archs whose FFN is SwiGLU)",
                        SL_FFN_ACT_KEY, val, sl_arch_name(m->arch), m->hp.n_expert ? " with experts" : "");
}

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
    if ((st = get_i32(m, "attention.value_length", false, hp->head_dim, 1, 1 << 16, &vl, err)))
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

static sl_status hparams_mla(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const int64_t BIG = 1 << 30;
    const char *a = sl_arch_name(m->arch);
    char k[128];
    sl_status st;
    const bool legacy = !sl_gguf_find(m->gguf, akey(k, sizeof k, m, "attention.key_length_mla"));
    /* MTP blocks (DeepSeek-V3/R1 num_nextn_predict_layers): llama.cpp's deepseek2 loader
     * treats the last N of block_count blocks as MTP blocks, skips their tensors unless it
     * drafts with them, and builds the next-token graph over the first block_count - N; so
     * does Sluice (it never drafts). A file of MTP blocks only has nothing to run. */
    if ((st = get_i32(m, "nextn_predict_layers", false, 0, 0, hp->n_layer - 1,
                      &hp->n_layer_nextn, err)))
        return st;
    hp->n_layer -= hp->n_layer_nextn;
    if (hp->n_layer_nextn && !m->notice[0])
        snprintf(m->notice, sizeof m->notice, "%s.nextn_predict_layers = %d: the last %d "
                 "block(s) are multi-token prediction, not run (as llama.cpp)", a,
                 hp->n_layer_nextn, hp->n_layer_nextn);
    if ((st = get_i32(m, "attention.kv_lora_rank", true, 0, 1, BIG, &hp->n_lora_kv, err)) ||
        (st = get_i32(m, "attention.q_lora_rank", false, 0, 0, BIG, &hp->n_lora_q, err)) ||
        (legacy && (st = legacy_mla(m, err))) ||
        (!legacy && (st = get_i32(m, "attention.key_length_mla", true, 0, 1, BIG,
                                  &hp->n_embd_head_k_mla, err))) ||
        (!legacy && (st = get_i32(m, "attention.value_length_mla", true, 0, 1, BIG,
                                  &hp->n_embd_head_v_mla, err))) ||
        (st = get_i32(m, "leading_dense_block_count", false, 0, 0, hp->n_layer,
                      &hp->n_dense_lead, err)) ||
        (st = get_i32(m, "expert_shared_count", false, 0, 0, 64, &hp->n_expert_shared, err)) ||
        (st = get_i32(m, "expert_feed_forward_length", true, 0, 1, BIG, &hp->n_ff_exp, err)) ||
        (st = get_i32(m, "expert_group_count", false, 0, 0, hp->n_expert, &hp->n_group, err)) ||
        (st = get_i32(m, "expert_group_used_count", false, 0, 0, BIG, &hp->n_group_used, err)) ||
        (st = get_f32(m, "rope.scaling.yarn_log_multiplier", false, 0.0f, &hp->yarn_log_mul,
                      err)))
        return st;
    if (!sl_gguf_find(m->gguf, akey(k, sizeof k, m, "rope.dimension_count")))
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s' missing (required: the "
                            "rope part of each head)", k);
    const int32_t Dl = hp->n_lora_kv + hp->n_rot;
    if (hp->head_dim != Dl)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.key_length': %d, "
                            "expected kv_lora_rank + rope.dimension_count = %d + %d = %d", a,
                            hp->head_dim, hp->n_lora_kv, hp->n_rot, Dl);
    int32_t vl = hp->n_lora_kv;
    if (!legacy &&
        (st = get_i32(m, "attention.value_length", false, hp->n_lora_kv, 1, BIG, &vl, err)))
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
    if (hp->n_group > 1) {
        if (hp->n_expert % hp->n_group)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_count': %d "
                                "does not divide expert_count %d", a, hp->n_group,
                                hp->n_expert);
        if (hp->n_group_used < 1 || hp->n_group_used > hp->n_group)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_used_count': "
                                "%d, expected in [1, expert_group_count %d]", a,
                                hp->n_group_used, hp->n_group);
        if ((int64_t)hp->n_group_used * (hp->n_expert / hp->n_group) < hp->n_expert_used)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_used_count': "
                                "%d groups of %d experts cannot hold expert_used_count %d", a,
                                hp->n_group_used, hp->n_expert / hp->n_group,
                                hp->n_expert_used);
    }
    int32_t gf;
    if ((st = get_i32(m, "expert_gating_func", false, 1, 1, 2, &gf, err))) return st;
    /* llama.cpp: absent (V2, V2.5 files) means softmax; 1 softmax, 2 sigmoid */
    hp->gating = gf == 2 ? SL_GATING_SIGMOID : SL_GATING_SOFTMAX_TOPK;
    const sl_gguf_value *nv = sl_gguf_find(m->gguf, akey(k, sizeof k, m, "expert_weights_norm"));
    if (nv && nv->type != SL_GGUF_BOOL)
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected bool", k,
                            sl_gguf_vtype_name(nv->type));
    hp->norm_topk = nv && nv->v.b;
    /* absent: the converter leaves it out when there is no scaling (llama.cpp then skips it) */
    if ((st = get_f32(m, "expert_weights_scale", false, 1.0f, &hp->expert_weights_scale, err)))
        return st;
    if (hp->expert_weights_scale == 0.0f) hp->expert_weights_scale = 1.0f;
    if (hp->expert_weights_scale < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_weights_scale': %g, "
                            "expected > 0", a, (double)hp->expert_weights_scale);
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
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

sl_status sl__hparams_load(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    memset(hp, 0, sizeof *hp);
    const int64_t BIG = 1 << 30;
    sl_status st;
    if ((st = get_i32(m, "context_length", false, 4096, 1, BIG, &hp->n_ctx_train, err))) return st;
    if ((st = get_i32(m, "embedding_length", true, 0, 1, BIG, &hp->n_embd, err))) return st;
    if ((st = get_i32(m, "block_count", true, 0, 1, 1 << 16, &hp->n_layer, err))) return st;
    if ((st = get_i32(m, "feed_forward_length", false, 0, 0, BIG, &hp->n_ff, err))) return st;
    if ((st = get_i32(m, "attention.head_count", true, 0, 1, 1 << 16, &hp->n_head, err)))
        return st;
    if ((st = get_i32(m, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head,
                      &hp->n_head_kv, err)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return sl_error_set(err, SL_ERR_FORMAT,
                            "metadata: %s.attention.head_count %d is not a multiple of "
                            "head_count_kv %d",
                            sl_arch_name(m->arch), hp->n_head, hp->n_head_kv);
    const int32_t dflt_hd = hp->n_embd / hp->n_head;
    int32_t kl, vl;
    if ((st = get_i32(m, "attention.key_length", false, dflt_hd, 1, 1 << 16, &kl, err))) return st;
    if ((st = get_i32(m, "attention.value_length", false, dflt_hd, 1, 1 << 16, &vl, err)))
        return st;
    if (kl != vl && !m->tr->mla)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "metadata: %s.attention.key_length %d != value_length %d "
                            "(different K and V head sizes are not supported)",
                            sl_arch_name(m->arch), kl, vl);
    hp->head_dim = kl;
    if (hp->head_dim % 2)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata: head dimension %d is odd (RoPE "
                            "rotates pairs)", hp->head_dim);
    if ((st = get_i32(m, "rope.dimension_count", false, hp->head_dim, 2, hp->head_dim,
                      &hp->n_rot, err)))
        return st;
    if (hp->n_rot % 2)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.rope.dimension_count': %d is odd",
                            sl_arch_name(m->arch), hp->n_rot);
    if ((st = get_f32(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err)))
        return st;
    if (hp->rms_eps < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.layer_norm_rms_epsilon'"
                            ": %g is negative", sl_arch_name(m->arch), (double)hp->rms_eps);
    if ((st = get_f32(m, "rope.freq_base", false, 10000.0f, &hp->rope_base, err))) return st;
    if (hp->rope_base <= 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.rope.freq_base': %g <= 0",
                            sl_arch_name(m->arch), (double)hp->rope_base);

    /* rope scaling (llama.cpp: type none/linear/yarn; factor 0 means 1) */
    char k[128];
    const char *stype = NULL;
    const sl_gguf_value *sv = sl_gguf_find(m->gguf, akey(k, sizeof k, m, "rope.scaling.type"));
    if (sv && sv->type == SL_GGUF_STR) stype = sv->v.str.ptr;
    float factor = 0.0f;
    if ((st = get_f32(m, "rope.scaling.factor", false, 0.0f, &factor, err))) return st;
    if (!sl_gguf_find(m->gguf, akey(k, sizeof k, m, "rope.scaling.factor")))
        if ((st = get_f32(m, "rope.scale_linear", false, 0.0f, &factor, err))) return st;
    hp->rope_scale = 1.0f;
    if (stype && !strcmp(stype, "none")) factor = 0.0f;
    if (factor < 0)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.rope.scaling.factor': %g < 0",
                            sl_arch_name(m->arch), (double)factor);
    if (factor > 0) hp->rope_scale = 1.0f / factor;
    if (stype && strcmp(stype, "none") && strcmp(stype, "linear") && strcmp(stype, "yarn") &&
        strcmp(stype, "longrope"))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "metadata key '%s.rope.scaling.type': '%s' not supported (none, "
                            "linear, yarn, longrope)", sl_arch_name(m->arch), stype);
    hp->longrope = stype && !strcmp(stype, "longrope");
    hp->yarn_attn_factor = 1.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    if ((st = get_i32(m, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, BIG,
                      &hp->n_ctx_orig, err)))
        return st;
    /* llama.cpp multiplies every rope's magnitude by this (cparams.yarn_attn_factor *=
     * rope_attn_factor), YaRN or not: LongRoPE's attention factor (phi3) */
    if ((st = get_f32(m, "rope.scaling.attn_factor", false, 1.0f, &hp->yarn_attn_factor, err)))
        return st;
    if (!(hp->yarn_attn_factor > 0.0f))
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.rope.scaling.attn_factor': %g, "
                            "expected > 0", sl_arch_name(m->arch), (double)hp->yarn_attn_factor);
    if (stype && !strcmp(stype, "yarn")) {
        hp->yarn_ext_factor = 1.0f; /* llama.cpp's default for yarn scaling */
        if ((st = get_f32(m, "rope.scaling.yarn_beta_fast", false, 32.0f, &hp->yarn_beta_fast, err)))
            return st;
        if ((st = get_f32(m, "rope.scaling.yarn_beta_slow", false, 1.0f, &hp->yarn_beta_slow, err)))
            return st;
    }
    hp->rope_base_swa = hp->rope_base;
    hp->rope_scale_swa = hp->rope_scale;

    /* experts */
    if (m->tr->moe_capable) {
        if ((st = get_i32(m, "expert_count", m->tr->moe_required, 0, 0, 4096, &hp->n_expert, err)))
            return st;
        if ((st = get_i32(m, "expert_used_count", hp->n_expert > 0, 0, 0, 4096,
                          &hp->n_expert_used, err)))
            return st;
        if (hp->n_expert > 0 && (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert))
            return sl_error_set(err, SL_ERR_FORMAT,
                                "metadata key '%s.expert_used_count': %d outside [1, "
                                "expert_count %d]",
                                sl_arch_name(m->arch), hp->n_expert_used, hp->n_expert);
        if (m->tr->moe_required && hp->n_expert < 1)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_count': %d (a %s "
                                "model needs experts)", sl_arch_name(m->arch), hp->n_expert, sl_arch_name(m->arch));
        if ((st = get_i32(m, "expert_feed_forward_length", false, 0, 0, BIG, &hp->n_ff_exp, err)))
            return st;
        if ((st = get_i32(m, "expert_shared_feed_forward_length", false, 0, 0, BIG,
                          &hp->n_ff_shexp, err)))
            return st;
    }
    if (m->arch == SL_ARCH_QWEN2MOE || m->arch == SL_ARCH_QWEN3MOE ||
        m->arch == SL_ARCH_QWEN3NEXT) {
        if (!hp->n_ff_exp && hp->n_expert_used) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
        if (!hp->n_ff_shexp) hp->n_ff_shexp = hp->n_ff;
    } else if (m->arch == SL_ARCH_GPT_OSS) {
        if ((st = get_i32(m, "expert_feed_forward_length", true, 0, 1, BIG, &hp->n_ff_exp, err)))
            return st;
        if (hp->n_rot != hp->head_dim)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "metadata key 'gpt-oss.rope.dimension_count': %d, expected %d "
                                "(attention.key_length: gpt-oss heads are n_rot wide)",
                                hp->n_rot, hp->head_dim);
    } else if (!m->tr->mla) {
        hp->n_ff_exp = hp->n_ff;
    }
    if (hp->n_expert > 0 && hp->n_ff_exp < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata: expert FFN width is 0 (%s."
                            "expert_feed_forward_length / feed_forward_length missing)",
                            sl_arch_name(m->arch));
    hp->gating = m->tr->gating;
    hp->norm_topk = m->tr->norm_topk;
    hp->expert_weights_scale = 1.0f;
    if (m->tr->mla && (st = hparams_mla(m, err))) return st;
    if ((hp->n_expert == 0 || hp->n_dense_lead > 0) && hp->n_ff < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.feed_forward_length' missing "
                            "or 0 (dense FFN width)", sl_arch_name(m->arch));
    if (m->arch == SL_ARCH_QWEN2MOE && hp->n_ff_shexp < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata: shared expert width is 0 (%s."
                            "expert_shared_feed_forward_length)", sl_arch_name(m->arch));

    if (m->tr->swa_period) {
        if ((st = get_i32(m, "attention.sliding_window", !m->tr->swa_default,
                          m->tr->swa_default, 1, BIG, &hp->n_swa, err)))
            return st;
        hp->swa_period = m->tr->swa_period;
    }
    if (m->arch == SL_ARCH_GEMMA3) {
        hp->rope_base_swa = 10000.0f; /* llama.cpp: rope_freq_base_train_swa for gemma3 */
        hp->rope_scale_swa = 1.0f;
    }
    if (m->arch == SL_ARCH_GPT_OSS) {
        if ((st = get_i32(m, "attention.sliding_window_pattern", false, hp->swa_period, 1, BIG,
                          &hp->swa_period, err)) ||
            (st = get_f32(m, "rope.freq_base_swa", false, hp->rope_base, &hp->rope_base_swa,
                          err)))
            return st;
        if (hp->rope_base_swa <= 0)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key 'gpt-oss.rope.freq_base_swa': "
                                "%g, expected > 0", (double)hp->rope_base_swa);
        hp->attn_scale = 1.0f / sqrtf((float)hp->n_rot);
    }
    if (m->arch == SL_ARCH_GEMMA3)
        hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                           : 1.0f / sqrtf((float)hp->head_dim);
    if (m->tr->embd_scale) hp->embd_scale = sqrtf((float)hp->n_embd);
    if (m->tr->hparams && (st = m->tr->hparams(m, err))) return st;
    return ffn_activation(m, err);
}

/* ---- tensor binding -------------------------------------------------------------------- */

static void fmt_shape(char *buf, size_t n, uint32_t nd, const int64_t *ne)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (uint32_t i = 0; i < nd && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Finds tensor `name` with expected shape ne[0..nd) (ggml order). Missing: NULL if optional,
 * else SL_ERR_FORMAT. A 1-D tensor may be stored with trailing 1s (and vice versa). */
static sl_status find_shaped(const sl_model *m, const char *name, uint32_t nd, const int64_t *ne,
                             bool required, const sl_gguf_tensor **out, sl_error *err)
{
    *out = NULL;
    char want[96], have[96];
    fmt_shape(want, sizeof want, nd, ne);
    const sl_gguf_tensor *t = sl_gguf_tensor_find(m->gguf, name);
    if (!t) {
        if (!required) return SL_OK;
        return sl_error_set(err, SL_ERR_FORMAT,
                            "%s: tensor '%s' missing: expected shape %s (ggml ne order) for "
                            "architecture %s",
                            m->path, name, want, sl_arch_name(m->arch));
    }
    bool ok = true;
    for (uint32_t i = 0; i < SL_GGUF_MAX_DIMS; i++) {
        const int64_t a = i < t->n_dims ? t->ne[i] : 1, b = i < nd ? ne[i] : 1;
        if (a != b) ok = false;
    }
    if (!ok) {
        fmt_shape(have, sizeof have, t->n_dims, t->ne);
        return sl_error_set(err, SL_ERR_FORMAT,
                            "%s: tensor '%s' has shape %s, expected %s (ggml ne order)", m->path,
                            name, have, want);
    }
    *out = t;
    return SL_OK;
}

/* A new weight of m bound to tensor t (m->w has room: sl__model_bind sizes it). */
static sl_weight *new_weight(sl_model *m, const sl_gguf_tensor *t)
{
    sl_weight *w = &m->w[m->n_w++];
    memset(w, 0, sizeof *w);
    w->name = t->name;
    w->t = t;
    w->type = t->type;
    w->n_dims = t->n_dims;
    for (int i = 0; i < SL_GGUF_MAX_DIMS; i++) w->ne[i] = i < (int)t->n_dims ? t->ne[i] : 1;
    w->nbytes = t->nbytes;
    w->path = t->path;
    w->shard = t->shard;
    sl__weight_provenance_set(w, t, 0); /* the file's size: once the sources are stat'ed */
    w->h_block = SL_BLOCK_NONE;
    w->d_block = SL_BLOCK_NONE;
    return w;
}

/* Binds tensor `name` as find_shaped finds it; a tensor bound twice (e.g. tied output) is one
 * shared weight. */
static sl_status bind(sl_model *m, const char *name, uint32_t nd, const int64_t *ne,
                      bool required, sl_weight **out, sl_error *err)
{
    *out = NULL;
    const sl_gguf_tensor *t;
    sl_status st = find_shaped(m, name, nd, ne, required, &t, err);
    if (st || !t) return st;
    for (size_t i = 0; i < m->n_w; i++)
        if (m->w[i].t == t && m->w[i].derive == SL_DERIVE_NONE) {
            *out = &m->w[i];
            return SL_OK;
        }
    *out = new_weight(m, t);
    return SL_OK;
}

#define NE(...) ((const int64_t[]){__VA_ARGS__}), (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* bind with a printf name for layer il (and expert x) */
static sl_status bindf(sl_model *m, sl_weight **out, bool required, bool vec, bool mat,
                       const int64_t *ne, uint32_t nd, const char *fmt, int il, int x,
                       sl_error *err)
{
    char name[96];
    snprintf(name, sizeof name, fmt, il, x);
    sl_status st = bind(m, name, nd, ne, required, out, err);
    if (!st && *out) {
        if (vec) (*out)->need_f32 = true;
        if (mat) (*out)->need_matvec = true;
    }
    return st;
}

#define VEC(out, req, fmt, il, ...) bindf(m, out, req, true, false, NE(__VA_ARGS__), fmt, il, 0, err)
#define MAT(out, req, fmt, il, ...) bindf(m, out, req, false, true, NE(__VA_ARGS__), fmt, il, 0, err)

sl_status sl__arch_bind(sl_model *m, sl_weight **out, bool required, bool vec, const int64_t *ne,
                        uint32_t nd, const char *fmt, int il, sl_error *err)
{
    return bindf(m, out, required, vec, !vec, ne, nd, fmt, il, 0, err);
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
    sl_status st = find_shaped(m, name, 2, ne, true, &t, err);
    if (st) return st;
    L->wk_b = new_weight(m, t);
    L->wv_b = new_weight(m, t);
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
static sl_status bind_mla(sl_model *m, int il, sl_error *err)
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

static sl_status bind_layer(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    const sl__arch_traits *tr = m->tr;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd;
    sl_status st;
    if ((st = VEC(&L->attn_norm, true, "blk.%d.attn_norm.weight", il, E))) return st;
    if (tr->mla) {
        if ((st = bind_mla(m, il, err))) return st;
    } else if (!tr->own_attn && (st = sl__arch_bind_attn(m, il, err))) {
        return st;
    }
    const char *ffn_norm = tr->post_attn_ffn_norm ? "blk.%d.post_attention_norm.weight"
                                                  : "blk.%d.ffn_norm.weight";
    if ((st = VEC(&L->ffn_norm, true, ffn_norm, il, E))) return st;
    if (tr->attn_sinks &&
        (st = VEC(&L->sinks, true, "blk.%d.attn_sinks.weight", il, (int64_t)hp->n_head)))
        return st;
    if (tr->bind_layer && (st = tr->bind_layer(m, il, err))) return st;

    if (tr->fused) {
        /* bind_layer bound the FFN */
    } else if (hp->n_expert == 0 || il < hp->n_dense_lead) {
        const int64_t F = hp->n_ff;
        if ((st = MAT(&L->ffn_gate, true, "blk.%d.ffn_gate.weight", il, E, F))) return st;
        if ((st = MAT(&L->ffn_up, true, "blk.%d.ffn_up.weight", il, E, F))) return st;
        if ((st = MAT(&L->ffn_down, true, "blk.%d.ffn_down.weight", il, F, E))) return st;
        if (tr->llama_biases &&
            ((st = VEC(&L->ffn_gate_b, false, "blk.%d.ffn_gate.bias", il, F)) ||
             (st = VEC(&L->ffn_up_b, false, "blk.%d.ffn_up.bias", il, F)) ||
             (st = VEC(&L->ffn_down_b, false, "blk.%d.ffn_down.bias", il, E))))
            return st;
    } else {
        const int64_t X = hp->n_expert, F = hp->n_ff_exp;
        if ((st = MAT(&L->gate_inp, true, "blk.%d.ffn_gate_inp.weight", il, E, X))) return st;
        /* merged 3-D experts, or (older Mixtral files) one tensor per expert */
        const bool merged = sl_gguf_tensor_find(m->gguf, "blk.0.ffn_gate_exps.weight") ||
                            !sl_gguf_tensor_find(m->gguf, "blk.0.ffn_gate.0.weight");
        if (merged || tr != &k_traits[SL_ARCH_LLAMA]) {
            if ((st = MAT(&L->gate_exps, true, "blk.%d.ffn_gate_exps.weight", il, E, F, X)))
                return st;
            if ((st = MAT(&L->up_exps, true, "blk.%d.ffn_up_exps.weight", il, E, F, X))) return st;
            if ((st = MAT(&L->down_exps, true, "blk.%d.ffn_down_exps.weight", il, F, E, X)))
                return st;
        } else {
            L->gate_e = calloc((size_t)X, sizeof *L->gate_e);
            L->up_e = calloc((size_t)X, sizeof *L->up_e);
            L->down_e = calloc((size_t)X, sizeof *L->down_e);
            if (!L->gate_e || !L->up_e || !L->down_e)
                return sl_error_set(err, SL_ERR_NOMEM, "out of memory (expert table)");
            for (int x = 0; x < X; x++) {
                if ((st = bindf(m, &L->gate_e[x], true, false, true, NE(E, F),
                                "blk.%d.ffn_gate.%d.weight", il, x, err)))
                    return st;
                if ((st = bindf(m, &L->up_e[x], true, false, true, NE(E, F),
                                "blk.%d.ffn_up.%d.weight", il, x, err)))
                    return st;
                if ((st = bindf(m, &L->down_e[x], true, false, true, NE(F, E),
                                "blk.%d.ffn_down.%d.weight", il, x, err)))
                    return st;
            }
        }
        if (tr->moe_biases &&
            ((st = VEC(&L->gate_inp_b, true, "blk.%d.ffn_gate_inp.bias", il, X)) ||
             (st = VEC(&L->gate_exps_b, true, "blk.%d.ffn_gate_exps.bias", il, F, X)) ||
             (st = VEC(&L->up_exps_b, true, "blk.%d.ffn_up_exps.bias", il, F, X)) ||
             (st = VEC(&L->down_exps_b, true, "blk.%d.ffn_down_exps.bias", il, E, X))))
            return st;
        L->moe_gate = calloc((size_t)X, sizeof *L->moe_gate);
        L->moe_up = calloc((size_t)X, sizeof *L->moe_up);
        L->moe_down = calloc((size_t)X, sizeof *L->moe_down);
        L->moe_on_device = calloc((size_t)X, sizeof *L->moe_on_device);
        if (!L->moe_gate || !L->moe_up || !L->moe_down || !L->moe_on_device)
            return sl_error_set(err, SL_ERR_NOMEM, "out of memory (expert table)");
        if (tr->shared_expert) {
            const int64_t S = hp->n_ff_shexp;
            if ((st = MAT(&L->gate_inp_shexp, true, "blk.%d.ffn_gate_inp_shexp.weight", il, E)))
                return st;
            if ((st = MAT(&L->gate_shexp, true, "blk.%d.ffn_gate_shexp.weight", il, E, S)))
                return st;
            if ((st = MAT(&L->up_shexp, true, "blk.%d.ffn_up_shexp.weight", il, E, S))) return st;
            if ((st = MAT(&L->down_shexp, true, "blk.%d.ffn_down_shexp.weight", il, S, E)))
                return st;
        }
        if (tr->mla && hp->n_expert_shared > 0) { /* added ungated */
            const int64_t S = hp->n_ff_shexp;
            if ((st = MAT(&L->gate_shexp, true, "blk.%d.ffn_gate_shexp.weight", il, E, S)) ||
                (st = MAT(&L->up_shexp, true, "blk.%d.ffn_up_shexp.weight", il, E, S)) ||
                (st = MAT(&L->down_shexp, true, "blk.%d.ffn_down_shexp.weight", il, S, E)))
                return st;
        }
        if (tr->mla && (st = VEC(&L->exp_probs_b, false, "blk.%d.exp_probs_b.bias", il, X)))
            return st;
    }

    /* per-layer rope */
    L->swa = hp->swa_period && il % hp->swa_period < hp->swa_period - 1;
    L->rope = sl_rope_params_make(tr->rope, hp->n_rot, L->swa ? hp->rope_base_swa : hp->rope_base);
    L->rope.freq_scale = L->swa ? hp->rope_scale_swa : hp->rope_scale;
    L->rope.ext_factor = hp->yarn_ext_factor;
    L->rope.attn_factor = hp->yarn_attn_factor;
    L->rope.beta_fast = hp->yarn_beta_fast;
    L->rope.beta_slow = hp->yarn_beta_slow;
    L->rope.n_ctx_orig = hp->n_ctx_orig;
    return sl_ref_rope_validate(&L->rope, hp->head_dim, err);
}

/* A tensor of the file that no weight binds is refused, naming it: llama.cpp's loader counts
 * the tensors it created against the file's ("wrong number of tensors"). The multi-token
 * prediction blocks past the trunk (deepseek2's nextn_predict_layers) are the exception: llama.cpp
 * loads them for drafting, and neither runs them for next-token logits. */
static sl_status unused_tensors(const sl_model *m, sl_error *err)
{
    const size_t n = sl_gguf_tensor_count(m->gguf);
    if (!n) return SL_OK;
    bool *used = calloc(n, sizeof *used);
    if (!used) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (tensor table)");
    /* the weights point into the file's one tensor array (find_shaped) */
    const sl_gguf_tensor *t0 = sl_gguf_tensor_at(m->gguf, 0);
    for (size_t j = 0; j < m->n_w; j++) used[m->w[j].t - t0] = true;
    sl_status st = SL_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(m->gguf, i);
        int il;
        if (used[i] || (m->hp.n_layer_nextn && sscanf(t->name, "blk.%d.", &il) == 1 &&
                        il >= m->hp.n_layer))
            continue;
        st = sl_error_set(err, SL_ERR_FORMAT, "%s: tensor '%s' is not used by architecture %s "
                          "as loaded (llama.cpp refuses such a file: wrong number of tensors)",
                          m->path, t->name, sl_arch_name(m->arch));
    }
    free(used);
    return st;
}

sl_status sl__model_bind(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    /* a legacy deepseek2 file derives two weights from each layer's attn_kv_b */
    const size_t cap =
        sl_gguf_tensor_count(m->gguf) + (hp->mla_kv_b ? (size_t)hp->n_layer : 0);
    m->w = calloc(cap ? cap : 1, sizeof *m->w);
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->w || !m->layers) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (weights)");
    m->n_w = 0;
    const int64_t E = hp->n_embd;
    /* the vocabulary size is token_embd's second dimension */
    const sl_gguf_tensor *te = sl_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!te)
        return sl_error_set(err, SL_ERR_FORMAT,
                            "%s: tensor 'token_embd.weight' missing: expected shape [%lld, "
                            "n_vocab] (ggml ne order)",
                            m->path, (long long)E);
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > INT32_MAX)
        return sl_error_set(err, SL_ERR_FORMAT,
                            "%s: tensor 'token_embd.weight' has %u dims, expected shape [%lld, "
                            "n_vocab] (ggml ne order)",
                            m->path, te->n_dims, (long long)E);
    hp->n_vocab = (int32_t)te->ne[1];
    const int64_t V = hp->n_vocab;
    sl_status st;
    if ((st = bindf(m, &m->tok_embd, true, false, false, NE(E, V), "token_embd.weight", 0, 0, err)))
        return st;
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(m, il, err))) return st;
    if ((st = VEC(&m->output_norm, true, "output_norm.weight", 0, E))) return st;
    /* output is optional everywhere: llama.cpp ties it to token_embd when absent */
    if ((st = MAT(&m->output, false, "output.weight", 0, E, V))) return st;
    if (!m->output) {
        m->output = m->tok_embd;
        m->output->need_matvec = true;
    }
    if (m->tr->output_bias && (st = VEC(&m->output_b, false, "output.bias", 0, V))) return st;
    if (m->tr->longrope || (m->tr->rope_freqs && hp->longrope)) {
        if ((st = VEC(&m->rope_long, false, "rope_factors_long.weight", 0, hp->n_rot / 2)) ||
            (st = VEC(&m->rope_short, false, "rope_factors_short.weight", 0, hp->n_rot / 2)))
            return st;
    } else if (m->tr->rope_freqs &&
               (st = VEC(&m->rope_freqs, false, "rope_freqs.weight", 0, hp->n_rot / 2))) {
        return st;
    }
    return unused_tensors(m, err);
}

const sl_weight *sl__model_rope_factors(const sl_model *m, int32_t n_ctx)
{
    if (m->rope_freqs) return m->rope_freqs;
    return n_ctx > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
}
