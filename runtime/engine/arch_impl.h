/* runtime/engine/arch_impl.h: what arch.c lends the per-architecture files arch_<name>.c
 * (private to runtime/engine). Keys are "{arch}.{suffix}"; errors name the key or the tensor
 * with its expected shape (ggml ne order), as arch.c's own. */
#ifndef SL_RUNTIME_ARCH_IMPL_H
#define SL_RUNTIME_ARCH_IMPL_H

#include "runtime/engine/model.h"

/* An integer key in [lo, hi]; absent: def, or SL_ERR_FORMAT when required. */
sl_status sl__arch_get_i32(const sl_model *m, const char *suffix, bool required, int64_t def,
                           int64_t lo, int64_t hi, int32_t *out, sl_error *err);
/* Experts sized by feed_forward_length, as llama.cpp's minimax-m2 and hunyuan-moe tensors are
 * (expert_feed_forward_length a required key it does not size them by; their converters write
 * both alike); SL_ERR_FORMAT naming a missing key or a width of 0. */
sl_status sl__arch_experts_ff(sl_model *m, sl_error *err);
/* A finite f32 (or f64) key; absent: def, or SL_ERR_FORMAT when required. */
sl_status sl__arch_get_f32(const sl_model *m, const char *suffix, bool required, float def,
                           float *out, sl_error *err);
/* A bool key; absent: def. SL_ERR_TYPE naming it when it is not a bool. */
sl_status sl__arch_get_bool(const sl_model *m, const char *suffix, bool def, bool *out,
                            sl_error *err);
/* M-RoPE's rope.dimension_sections for text (llama.cpp's rope_sections; ggml_mrope_cache_init):
 * a text token's position components are [p, p, p, 0]. Pair j's sector s = j % total takes
 * component s % 3 while s < 3 sections[s % 3] (interleaved: Qwen3.5's and Qwen3-VL's IMROPE),
 * else the component whose section holds s (GLM-4.xV's MROPE); past the first three, the
 * fourth. So the rotation is NEOX's over the same pairs, but for the pairs on the fourth
 * component, which turn by angle 0: m->mrope_ff marks them (sl__model_rope_factors; NULL when
 * there are none, e.g. Qwen3.5's [11, 11, 10]; Qwen3-VL's [24, 20, 20] leaves pairs 61 and 62
 * of 64). Absent: SL_OK unless always (then a required key); not always, M-RoPE is used only
 * when sections 0 and 1 are both > 0 (llama.cpp's use_mrope). Refused naming the key: not 1
 * to 4 integers, a negative one, a total of 0 or past the head size. */
sl_status sl__arch_mrope_text(sl_model *m, bool interleaved, bool always, sl_error *err);
/* "{arch}.{suffix}" into buf. */
const char *sl__arch_key(char *buf, size_t n, const sl_model *m, const char *suffix);
/* Binds tensor printf(fmt, il) of shape ne[0..nd) into *out (NULL when absent and not
 * required); vec: read as F32 (norms, biases), else a matmul weight. */
sl_status sl__arch_bind(sl_model *m, sl_weight **out, bool required, bool vec, const int64_t *ne,
                        uint32_t nd, const char *fmt, int il, sl_error *err);
/* Tensor `name` of shape ne[0..nd) (ggml order; trailing 1s match); missing: NULL when not
 * required, else SL_ERR_FORMAT naming it and the shape. */
sl_status sl__arch_find_shaped(const sl_model *m, const char *name, uint32_t nd,
                               const int64_t *ne, bool required, const sl_gguf_tensor **out,
                               sl_error *err);
/* A new weight of m over tensor t (a derived one shares t: weight.c fills it at load). */
sl_weight *sl__arch_new_weight(sl_model *m, const sl_gguf_tensor *t);

/* ne and nd of a shape written out; MAT / VEC bind a matmul weight / an F32 vector of layer il
 * (m, err in scope). */
#define NE(...) ((const int64_t[]){__VA_ARGS__}), \
    (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define MAT(out, req, fmt, il, ...) sl__arch_bind(m, out, req, false, NE(__VA_ARGS__), fmt, il, err)
#define VEC(out, req, fmt, il, ...) sl__arch_bind(m, out, req, true, NE(__VA_ARGS__), fmt, il, err)

/* arch_attn.c: layer il's attention tensors (fused or separate q/k/v with their optional
 * biases, attn_output and its bias, q/k norms, post-norms) by the traits. */
sl_status sl__arch_bind_attn(sl_model *m, int il, sl_error *err);

/* arch_ds_moe.c: the DeepSeek-MoE keys (deepseek2, glm4moe, dots1, bailingmoe2) into hp —
 * dense lead, shared experts (expert_shared_count, a required key), expert width, gating
 * (*absent when expert_gating_func is absent or 0; absent NULL: the key is required, 1 or
 * 2), weights' norm and scale — and, as traits.bind_moe, a MoE layer's
 * shared experts and exp_probs_b (optional: deepseek2, dots1, bailingmoe2, ernie4_5-moe;
 * required: glm4moe, minimax-m2). */
sl_status sl__ds_moe_hparams(sl_model *m, const sl_gating *absent, sl_error *err);
sl_status sl__ds_moe_bind_bias_opt(sl_model *m, int il, sl_error *err);
sl_status sl__ds_moe_bind_bias_req(sl_model *m, int il, sl_error *err);
/* the shared experts alone, no exp_probs_b (hunyuan-moe) */
sl_status sl__ds_moe_bind_shared(sl_model *m, int il, sl_error *err);

/* the arch files' hooks (sl__arch_traits: expert_widths, hparams_moe, hparams, bind_attn,
 * bind_layer, bind_moe) */
sl_status sl__bailingmoe2_hparams(sl_model *m, sl_error *err);
sl_status sl__deepseek2_hparams(sl_model *m, sl_error *err);
sl_status sl__deepseek2_bind_attn(sl_model *m, int il, sl_error *err);
sl_status sl__dots1_hparams(sl_model *m, sl_error *err);
sl_status sl__ernie4_5_bind_layer(sl_model *m, int il, sl_error *err);
sl_status sl__ernie4_5_moe_hparams(sl_model *m, sl_error *err);
sl_status sl__gemma3_hparams(sl_model *m, sl_error *err);
sl_status sl__hunyuan_moe_hparams(sl_model *m, sl_error *err);
sl_status sl__gemma2_hparams(sl_model *m, sl_error *err);
sl_status sl__glm4moe_hparams(sl_model *m, sl_error *err);
sl_status sl__gpt_oss_expert_widths(sl_model *m, sl_error *err);
sl_status sl__gpt_oss_hparams(sl_model *m, sl_error *err);
sl_status sl__granite_hparams(sl_model *m, sl_error *err);
sl_status sl__minimax_m2_hparams(sl_model *m, sl_error *err);
sl_status sl__phi3_hparams(sl_model *m, sl_error *err);
sl_status sl__phi3_bind_layer(sl_model *m, int il, sl_error *err);
sl_status sl__qwen_moe_expert_widths(sl_model *m, sl_error *err);
sl_status sl__qwen2moe_hparams(sl_model *m, sl_error *err);
sl_status sl__qwen3next_hparams(sl_model *m, sl_error *err);
sl_status sl__qwen3vl_hparams(sl_model *m, sl_error *err);
sl_status sl__qwen3next_bind_layer(sl_model *m, int il, sl_error *err);

#endif
