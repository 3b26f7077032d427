/* runtime/engine/arch.c: per-architecture tables — traits, hyperparameter keys, tensor names and
 * shapes — following llama.cpp (llama-arch.cpp names, llama-model.cpp load_hparams /
 * load_tensors / llm_build_*). Notes on choices that are easy to get wrong:
 *
 * - Rope pairing is llama.cpp's llama_model_rope_type: llama NORMAL (its converter permutes
 *   q/k so adjacent pairs rotate); qwen2moe, qwen3moe, olmoe, gemma3 NEOX (HF rotate_half,
 *   unpermuted). OLMoE is NEOX in llama.cpp, like OLMo2.
 * - Top-k renormalisation: mixtral (llama) and qwen3moe yes; qwen2moe and olmoe no.
 * - OLMoE's q/k norms run over the whole projection before the head split; llama.cpp sizes
 *   both by n_embd, which equals n_head * head_dim and n_head_kv * head_dim in every OLMoE (it
 *   has n_head_kv == n_head). We expect [n_head*head_dim] and [n_head_kv*head_dim], the same
 *   shapes for every file llama.cpp accepts.
 * - Optional tensors are llama.cpp's TENSOR_NOT_REQUIRED ones that its graphs apply: every
 *   q/k/v architecture's fused attn_qkv and q/k/v biases (arch_attn.c), llama's and granite's
 *   attn_output.bias and dense FFN biases, qwen2's output.bias, rope_freqs or LongRoPE's
 *   factors (llama, granite; phi3); any other tensor in the file is refused by name, as
 *   llama.cpp refuses it ("wrong number of tensors"). rope.scaling.attn_factor scales every
 *   rope, whatever the scaling type (llama.cpp: cparams.yarn_attn_factor *= it).
 * - Expert widths: mixtral and olmoe experts are feed_forward_length wide (minimax-m2's too,
 *   by llama.cpp's tensor shapes); the others' rules are their files' (expert_widths,
 *   hparams_moe).
 *
 * What is one architecture's own (keys, checks, tensors) is in arch_<name>.c through the
 * traits' hooks (arch_impl.h); this file is the table, the common keys and the common binding.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/arch_impl.h"

/* The Gated DeltaNet archs' row (qwen3next, qwen35, qwen35moe: arch_qwen3next.c), and the
 * MoE ones' experts: the Qwen MoE widths, renormalised top-k, a sigmoid-gated shared expert */
#define GDN_ROW                                                                               \
    .rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD, .act = SL_MOE_SILU,                     \
    .post_attn_ffn_norm = true, .own_attn = true, .recurrent = true,                          \
    .hparams = sl__qwen3next_hparams, .bind_layer = sl__qwen3next_bind_layer, .mtp = true
#define GDN_MOE                                                                               \
    .moe_capable = true, .moe_required = true, .norm_topk = true, .shared_expert = true,      \
    .expert_widths = sl__qwen_moe_expert_widths

static const sl__arch_traits k_traits[SL_ARCH_COUNT] = {
    [SL_ARCH_LLAMA] = {.rope = SL_ROPE_NORMAL, .moe_capable = true,
                        .norm_topk = true, .act = SL_MOE_SILU, .rope_freqs = true,
                        .llama_biases = true},
    [SL_ARCH_QWEN2MOE] = {.q_embd = true, .rope = SL_ROPE_NEOX, .moe_capable = true,
                           .moe_required = true, .norm_topk = false,
                           .shared_expert = true, .act = SL_MOE_SILU,
                           .expert_widths = sl__qwen_moe_expert_widths,
                           .hparams = sl__qwen2moe_hparams},
    [SL_ARCH_QWEN3MOE] = {.rope = SL_ROPE_NEOX,
                           .qk_norm = SL__QK_NORM_HEAD, .moe_capable = true,
                           .moe_required = true, .norm_topk = true, .act = SL_MOE_SILU,
                           .expert_widths = sl__qwen_moe_expert_widths},
    [SL_ARCH_OLMOE] = {.q_embd = true, .rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_FULL,
                        .moe_capable = true, .moe_required = true, .norm_topk = false,
                        .act = SL_MOE_SILU},
    [SL_ARCH_GEMMA3] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                         .post_norms = true, .embd_scale = true, .swa_period = 6,
                         .act = SL_MOE_GELU_TANH, .hparams = sl__gemma3_hparams},
    [SL_ARCH_GPT_OSS] = {.rope = SL_ROPE_NEOX, .moe_capable = true, .moe_required = true, .swa_period = 2,
                          .attn_out_bias = true, .attn_sinks = true, .moe_biases = true,
                          .post_attn_ffn_norm = true, .gating = SL_GATING_TOPK_SOFTMAX,
                          .act = SL_MOE_SWIGLU_OAI, .expert_widths = sl__gpt_oss_expert_widths,
                          .hparams = sl__gpt_oss_hparams},
    [SL_ARCH_DEEPSEEK2] = {.rope = SL_ROPE_NORMAL, .moe_capable = true,
                            .moe_required = true, .mla = true, .act = SL_MOE_SILU,
                            .hparams_moe = sl__deepseek2_hparams,
                            .bind_attn = sl__deepseek2_bind_attn,
                            .bind_moe = sl__ds_moe_bind_bias_opt, .mtp = true},
    [SL_ARCH_QWEN2] = {.q_embd = true, .rope = SL_ROPE_NEOX, .output_bias = true,
                        .act = SL_MOE_SILU},
    [SL_ARCH_QWEN3] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD, .act = SL_MOE_SILU},
    [SL_ARCH_GEMMA2] = {.rope = SL_ROPE_NEOX, .post_norms = true, .embd_scale = true,
                         .swa_period = 2, .swa_default = 4096, .act = SL_MOE_GELU_TANH,
                         .hparams = sl__gemma2_hparams},
    [SL_ARCH_GRANITE] = {.rope = SL_ROPE_NORMAL, .act = SL_MOE_SILU, .rope_freqs = true,
                          .llama_biases = true, .hparams = sl__granite_hparams},
    [SL_ARCH_PHI3] = {.q_embd = true, .rope = SL_ROPE_NEOX, .act = SL_MOE_SILU, .fused = true,
                       .longrope = true, .hparams = sl__phi3_hparams,
                       .bind_layer = sl__phi3_bind_layer},
    [SL_ARCH_QWEN3NEXT] = {GDN_ROW, GDN_MOE},
    [SL_ARCH_GLM4MOE] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD_OPT,
                          .moe_capable = true, .moe_required = true, .act = SL_MOE_SILU,
                          .post_attn_ffn_norm = true, .hparams_moe = sl__glm4moe_hparams,
                          .bind_moe = sl__ds_moe_bind_bias_req, .mtp = true},
    /* Qwen3.5: Qwen3-Next's rows, dense or MoE (arch_qwen3next.c says what differs) */
    [SL_ARCH_QWEN35] = {GDN_ROW},
    [SL_ARCH_QWEN35MOE] = {GDN_ROW, GDN_MOE},
    [SL_ARCH_MINIMAX_M2] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_FULL,
                             .moe_capable = true, .moe_required = true, .act = SL_MOE_SILU,
                             .hparams_moe = sl__minimax_m2_hparams,
                             .bind_moe = sl__ds_moe_bind_bias_req},
    [SL_ARCH_DOTS1] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD, .moe_capable = true,
                        .moe_required = true, .act = SL_MOE_SILU, .rot_whole = true,
                        .hparams_moe = sl__dots1_hparams, .bind_moe = sl__ds_moe_bind_bias_opt},
    [SL_ARCH_BAILINGMOE2] = {.q_embd = true, .rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                              .moe_capable = true, .moe_required = true, .act = SL_MOE_SILU,
                              .hparams_moe = sl__bailingmoe2_hparams,
                              .bind_moe = sl__ds_moe_bind_bias_opt, .mtp = true},
    /* Qwen3-VL's language models: qwen3's and qwen3moe's rows with their M-RoPE (text only:
     * arch_qwen3vl.c) */
    [SL_ARCH_QWEN3VL] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD, .act = SL_MOE_SILU,
                          .rot_whole = true, .hparams = sl__qwen3vl_hparams},
    [SL_ARCH_QWEN3VLMOE] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                             .moe_capable = true, .moe_required = true, .norm_topk = true,
                             .act = SL_MOE_SILU, .expert_widths = sl__qwen_moe_expert_widths,
                             .rot_whole = true, .hparams = sl__qwen3vl_hparams},
    [SL_ARCH_ERNIE4_5] = {.rope = SL_ROPE_NORMAL, .act = SL_MOE_SILU, .rot_whole = true,
                           .bind_layer = sl__ernie4_5_bind_layer},
    [SL_ARCH_ERNIE4_5_MOE] = {.rope = SL_ROPE_NORMAL, .moe_capable = true, .moe_required = true,
                               .norm_topk = true, .act = SL_MOE_SILU, .rot_whole = true,
                               .hparams_moe = sl__ernie4_5_moe_hparams,
                               .bind_layer = sl__ernie4_5_bind_layer,
                               .bind_moe = sl__ds_moe_bind_bias_opt},
    [SL_ARCH_HUNYUAN_MOE] = {.rope = SL_ROPE_NEOX, .qk_norm = SL__QK_NORM_HEAD,
                              .qk_norm_after_rope = true, .moe_capable = true,
                              .moe_required = true, .norm_topk = true, .act = SL_MOE_SILU,
                              .rot_whole = true, .hparams_moe = sl__hunyuan_moe_hparams,
                              .bind_moe = sl__ds_moe_bind_shared},
};

#undef GDN_ROW
#undef GDN_MOE

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
const char *sl__arch_key(char *buf, size_t n, const sl_model *m, const char *suffix)
{
    snprintf(buf, n, "%s.%s", sl_arch_name(m->arch), suffix);
    return buf;
}

static sl_status get_i32(const sl_model *m, const char *suffix, bool required, int64_t def,
                         int64_t lo, int64_t hi, int32_t *out, sl_error *err)
{
    char k[128];
    int64_t v;
    sl_status st = get_int(m->gguf, sl__arch_key(k, sizeof k, m, suffix), required, def, &v, err);
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
    return get_float(m->gguf, sl__arch_key(k, sizeof k, m, suffix), required, def, out, err);
}

sl_status sl__arch_get_i32(const sl_model *m, const char *suffix, bool required, int64_t def,
                           int64_t lo, int64_t hi, int32_t *out, sl_error *err)
{
    return get_i32(m, suffix, required, def, lo, hi, out, err);
}

sl_status sl__arch_experts_ff(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    int32_t unused;
    sl_status st = get_i32(m, "expert_feed_forward_length", true, 0, 1, 1 << 30, &unused, err);
    if (st) return st;
    if (hp->n_ff < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.feed_forward_length' missing "
                            "or 0 (the experts' width)", sl_arch_name(m->arch));
    hp->n_ff_exp = hp->n_ff;
    return SL_OK;
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
    const sl_gguf_value *v = sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, suffix));
    *out = def;
    if (!v) return SL_OK;
    if (v->type != SL_GGUF_BOOL)
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': %s, expected bool", k,
                            sl_gguf_vtype_name(v->type));
    *out = v->v.b;
    return SL_OK;
}

/* The group-limited selection's keys (expert_group_count / _used_count: llama.cpp's common
 * loader reads them for every arch and build_moe_ffn applies them whatever the gating),
 * checked against the experts. */
static sl_status moe_groups(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    const char *a = sl_arch_name(m->arch);
    sl_status st;
    if ((st = get_i32(m, "expert_group_count", false, 0, 0, hp->n_expert, &hp->n_group, err)) ||
        (st = get_i32(m, "expert_group_used_count", false, 0, 0, 1 << 30, &hp->n_group_used,
                      err)))
        return st;
    if (hp->n_group <= 1) return SL_OK;
    /* llama.cpp asserts n_group < n_expert and n_group_used < n_group */
    if (hp->n_group >= hp->n_expert)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_count': %d, "
                            "expected below expert_count %d", a, hp->n_group, hp->n_expert);
    if (hp->n_expert % hp->n_group)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_count': %d does "
                            "not divide expert_count %d", a, hp->n_group, hp->n_expert);
    if (hp->n_group_used < 1 || hp->n_group_used >= hp->n_group)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_used_count': %d, "
                            "expected in [1, expert_group_count %d)", a, hp->n_group_used,
                            hp->n_group);
    if ((int64_t)hp->n_group_used * (hp->n_expert / hp->n_group) < hp->n_expert_used)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_group_used_count': %d "
                            "groups of %d experts cannot hold expert_used_count %d", a,
                            hp->n_group_used, hp->n_expert / hp->n_group, hp->n_expert_used);
    return SL_OK;
}

sl_status sl__arch_mrope_text(sl_model *m, bool interleaved, bool always, sl_error *err)
{
    free(m->mrope_ff);
    m->mrope_ff = NULL;
    char k[96];
    const sl_gguf_value *v =
        sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "rope.dimension_sections"));
    if (!v) {
        if (!always) return SL_OK;
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s' missing (required)", k);
    }
    if (v->type != SL_GGUF_ARR || v->v.arr.n < 1 || v->v.arr.n > 4)
        return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': expected an array of 1 to 4 "
                            "integers", k);
    const int64_t half = m->hp.n_rot / 2, head = m->hp.head_dim;
    int64_t sec[4] = {0, 0, 0, 0}, sum = 0;
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        sl_gguf_value e;
        sl_status st = sl_gguf_arr_get(v, i, &e, err);
        if (st) return st;
        const bool u = e.type == SL_GGUF_U8 || e.type == SL_GGUF_U16 || e.type == SL_GGUF_U32 ||
                       e.type == SL_GGUF_U64;
        if (!u && e.type != SL_GGUF_I8 && e.type != SL_GGUF_I16 && e.type != SL_GGUF_I32 &&
            e.type != SL_GGUF_I64)
            return sl_error_set(err, SL_ERR_TYPE, "metadata key '%s': array of %s, expected "
                                "integers", k, sl_gguf_vtype_name(e.type));
        if (!u && e.v.i64 < 0)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s': entry %llu is %lld, "
                                "expected >= 0", k, (unsigned long long)i, (long long)e.v.i64);
        /* one past the head size is already too many (the total is checked below) */
        const uint64_t x = u ? e.v.u64 : (uint64_t)e.v.i64;
        sec[i] = x > (uint64_t)head ? head + 1 : (int64_t)x;
        sum += sec[i];
    }
    if (!always && !(sec[0] > 0 && sec[1] > 0)) return SL_OK; /* llama.cpp's use_mrope() */
    if (sum == 0 || sum > head)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s': sections total %lld%s, "
                            "expected 1 to the head size %lld", k, (long long)sum,
                            sum > head ? " or more" : "", (long long)head);
    float *ff = NULL;
    for (int64_t j = 0; j < half; j++) {
        const int64_t s = j % sum; /* ggml_mrope_cache_init's sector of pair j */
        const bool text = interleaved ? s < 3 * sec[s % 3]
                                      : s < sec[0] + sec[1] + sec[2];
        if (text) continue;
        if (!ff) { /* the first such pair: every other rotates as NEOX's */
            if (!(ff = malloc((size_t)half * sizeof *ff)))
                return sl_error_set(err, SL_ERR_NOMEM, "out of memory (M-RoPE factors)");
            for (int64_t i = 0; i < half; i++) ff[i] = 1.0f;
            m->mrope_ff = ff;
        }
        ff[j] = FLT_MAX; /* theta / FLT_MAX: angle 0 to float precision */
    }
    if (m->mrope_ff) {
        sl_weight *w = &m->mrope_w;
        memset(w, 0, sizeof *w);
        w->name = "rope.dimension_sections (M-RoPE on text)";
        w->type = w->file_type = SL_GGML_F32;
        w->n_dims = 1;
        for (int d = 0; d < SL_GGUF_MAX_DIMS; d++) w->ne[d] = d ? 1 : half;
        w->nbytes = (uint64_t)half * sizeof(float);
        w->residency = SL_RES_HOST;
        w->data = m->mrope_ff;
        w->h_block = w->d_block = SL_BLOCK_NONE;
    }
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

sl_status sl__hparams_load(sl_model *m, sl_error *err)
{
    sl__hparams *hp = &m->hp;
    memset(hp, 0, sizeof *hp);
    const int64_t BIG = 1 << 30;
    sl_status st;
    if ((st = get_i32(m, "context_length", false, 4096, 1, BIG, &hp->n_ctx_train, err))) return st;
    if ((st = get_i32(m, "embedding_length", true, 0, 1, BIG, &hp->n_embd, err))) return st;
    if ((st = get_i32(m, "block_count", true, 0, 1, 1 << 16, &hp->n_layer, err))) return st;
    /* MTP blocks (nextn_predict_layers, any arch: llama.cpp's common loader): the last N of
     * block_count are multi-token-prediction blocks, loaded only to draft with, and the
     * next-token graph runs the first block_count - N; so does Sluice (it never drafts),
     * leaving their tensors unbound (unused_tensors). A file of MTP blocks only has nothing
     * to run. */
    if ((st = get_i32(m, "nextn_predict_layers", false, 0, 0, hp->n_layer - 1,
                      &hp->n_layer_nextn, err)))
        return st;
    hp->n_layer -= hp->n_layer_nextn;
    if (hp->n_layer_nextn && !m->notice[0])
        snprintf(m->notice, sizeof m->notice, "%s.nextn_predict_layers = %d: the last %d "
                 "block(s) are multi-token prediction, not run (as llama.cpp)",
                 sl_arch_name(m->arch), hp->n_layer_nextn, hp->n_layer_nextn);
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
    const sl_gguf_value *sv = sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "rope.scaling.type"));
    if (sv && sv->type == SL_GGUF_STR) stype = sv->v.str.ptr;
    float factor = 0.0f;
    if ((st = get_f32(m, "rope.scaling.factor", false, 0.0f, &factor, err))) return st;
    if (!sl_gguf_find(m->gguf, sl__arch_key(k, sizeof k, m, "rope.scaling.factor")))
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
        /* the file's betas, as HF applies its config's: llama.cpp 0c1e570 reads them only for
         * a few archs (none of these) and keeps 32 / 1, which every file here with the keys
         * also holds (DeepSeek-V3, gpt-oss, Mistral); a file with other betas (Kimi-K2's 1 / 1)
         * follows HF, not llama.cpp */
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
        if (hp->n_expert > 0 && (st = moe_groups(m, err))) return st;
        if (m->tr->moe_required && hp->n_expert < 1)
            return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.expert_count': %d (a %s "
                                "model needs experts)", sl_arch_name(m->arch), hp->n_expert, sl_arch_name(m->arch));
        if ((st = get_i32(m, "expert_feed_forward_length", false, 0, 0, BIG, &hp->n_ff_exp, err)))
            return st;
        if ((st = get_i32(m, "expert_shared_feed_forward_length", false, 0, 0, BIG,
                          &hp->n_ff_shexp, err)))
            return st;
    }
    /* the expert widths: the arch's rule, else the dense width (an arch with its own MoE keys
     * reads its width with them, in hparams_moe) */
    if (m->tr->expert_widths) {
        if ((st = m->tr->expert_widths(m, err))) return st;
    } else if (!m->tr->hparams_moe) {
        hp->n_ff_exp = hp->n_ff;
    }
    if (hp->n_expert > 0 && hp->n_ff_exp < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata: expert FFN width is 0 (%s."
                            "expert_feed_forward_length / feed_forward_length missing)",
                            sl_arch_name(m->arch));
    hp->gating = m->tr->gating;
    hp->norm_topk = m->tr->norm_topk;
    hp->expert_weights_scale = 1.0f;
    if (m->tr->hparams_moe && (st = m->tr->hparams_moe(m, err))) return st;
    if ((hp->n_expert == 0 || hp->n_dense_lead > 0) && hp->n_ff < 1)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.feed_forward_length' missing "
                            "or 0 (dense FFN width)", sl_arch_name(m->arch));

    if (m->tr->swa_period) {
        if ((st = get_i32(m, "attention.sliding_window", !m->tr->swa_default,
                          m->tr->swa_default, 1, BIG, &hp->n_swa, err)))
            return st;
        hp->swa_period = m->tr->swa_period;
    }
    if (m->tr->embd_scale) hp->embd_scale = sqrtf((float)hp->n_embd);
    if (m->tr->q_embd && (int64_t)hp->n_head * hp->head_dim != hp->n_embd)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.attention.key_length': %d, "
                            "expected embedding_length / head_count = %d (llama.cpp sizes q by "
                            "the embedding)", sl_arch_name(m->arch), hp->head_dim,
                            hp->n_embd / hp->n_head);
    if (m->tr->rot_whole && hp->n_rot != hp->head_dim)
        return sl_error_set(err, SL_ERR_FORMAT, "metadata key '%s.rope.dimension_count': %d, "
                            "expected the head size %d (whole heads rotate)",
                            sl_arch_name(m->arch), hp->n_rot, hp->head_dim);
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
sl_status sl__arch_find_shaped(const sl_model *m, const char *name, uint32_t nd, const int64_t *ne,
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
sl_weight *sl__arch_new_weight(sl_model *m, const sl_gguf_tensor *t)
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
    sl_status st = sl__arch_find_shaped(m, name, nd, ne, required, &t, err);
    if (st || !t) return st;
    for (size_t i = 0; i < m->n_w; i++)
        if (m->w[i].t == t && m->w[i].derive == SL_DERIVE_NONE) {
            *out = &m->w[i];
            return SL_OK;
        }
    *out = sl__arch_new_weight(m, t);
    return SL_OK;
}

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


sl_status sl__arch_bind(sl_model *m, sl_weight **out, bool required, bool vec, const int64_t *ne,
                        uint32_t nd, const char *fmt, int il, sl_error *err)
{
    return bindf(m, out, required, vec, !vec, ne, nd, fmt, il, 0, err);
}

static sl_status bind_layer(sl_model *m, int il, sl_error *err)
{
    const sl__hparams *hp = &m->hp;
    const sl__arch_traits *tr = m->tr;
    sl__layer *L = &m->layers[il];
    const int64_t E = hp->n_embd;
    sl_status st;
    if ((st = VEC(&L->attn_norm, true, "blk.%d.attn_norm.weight", il, E))) return st;
    if (tr->bind_attn) {
        if ((st = tr->bind_attn(m, il, err))) return st;
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
        if (tr->bind_moe && (st = tr->bind_moe(m, il, err))) return st;
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

/* The block index of a "blk.N." tensor name (N decimal, below 1 << 16), else -1. */
static int block_of(const char *name)
{
    if (strncmp(name, "blk.", 4)) return -1;
    int n = 0, digits = 0;
    for (const char *c = name + 4; *c >= '0' && *c <= '9'; c++, digits++) {
        n = n * 10 + (*c - '0');
        if (n >= 1 << 16) return -1;
    }
    return digits && name[4 + digits] == '.' ? n : -1;
}

/* A tensor of the file that no weight binds is refused, naming it: llama.cpp's loader counts
 * the tensors it created against the file's ("wrong number of tensors"). The multi-token
 * prediction blocks past the trunk (nextn_predict_layers) of the archs whose llama.cpp loaders
 * know them (traits.mtp) are the exception: llama.cpp loads or skips them for drafting, and
 * neither runs them for next-token logits. */
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
        if (used[i] || (m->tr->mtp && m->hp.n_layer_nextn && (il = block_of(t->name)) >= 0 &&
                        il >= m->hp.n_layer && il < m->hp.n_layer + m->hp.n_layer_nextn))
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
    if (m->mrope_ff) return &m->mrope_w;
    return n_ctx > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
}
