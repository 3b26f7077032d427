/* kernels/ref/ops: scalar references of the non-matmul transformer-layer ops (F32 unless said),
 * as llama.cpp/ggml define them for llama, mixtral, qwen2moe, qwen3moe, olmoe, gemma3, gpt-oss.
 *
 * These are the oracles that the fast CPU kernels (kernels/cpu/ops.h) and later the CUDA kernels
 * are tested against, so they favour exactness over speed: every reduction (sums of squares,
 * means, softmax denominators, dot products, weighted sums over the KV cache) and every
 * transcendental is evaluated in double and rounded to float once at the end. Their error is
 * therefore below one float ulp of the result in practice, and any difference a fast kernel shows
 * against them is that kernel's error.
 *
 * Common contract: pointers are host memory; n / counts >= 0 (0 is a no-op that succeeds); a NULL
 * pointer for a required array with a non-zero count is SL_ERR_INVALID naming the argument. An
 * output may be the same array as an input (exact aliasing, computed element-wise) where the
 * function says so; partial overlap is never allowed. All functions are pure apart from writing
 * their outputs: thread-safe, no global state. Some (attention, router) allocate scratch with
 * malloc and return SL_ERR_NOMEM if that fails.
 */
#ifndef SL_KERNELS_REF_OPS_H
#define SL_KERNELS_REF_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* ---- norms ------------------------------------------------------------------------------ */

/* y = x / sqrt(mean(x^2) + eps) * w (w NULL: no weight; one_plus_w: times (1 + w), gemma's
 * convention in HF checkpoints). eps >= 0 and finite. y may be x. */
sl_status sl_ref_rms_norm(const float *x, const float *w, float *y, int64_t n, float eps,
                          bool one_plus_w, sl_error *err);

/* y = (x - mean) / sqrt(var + eps) * w + b, var = mean((x - mean)^2) (biased, as ggml_norm);
 * w and b may each be NULL (1 and 0). y may be x. */
sl_status sl_ref_layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n,
                            float eps, sl_error *err);

/* ---- rotary position embedding --------------------------------------------------------- */

/* Pairing of the rotated dimensions; values are ggml's rope `mode` bits. */
typedef enum sl_rope_mode {
    SL_ROPE_NORMAL = 0, /* pairs (x[2i], x[2i+1]): llama.cpp "normal" (llama, mixtral) */
    SL_ROPE_NEOX = 2,   /* pairs (x[i], x[i + n_rot/2]): HF rotate_half (qwen, gemma, gpt-oss) */
} sl_rope_mode;

/* ggml_rope_ext's parameters. Pair i (0 <= i < n_rot/2) at position pos rotates by
 *   theta_extrap = pos * freq_base^(-2i/n_rot) / freq_factors[i]
 * mixed by YaRN (ggml's rope_yarn):
 *   theta_interp = freq_scale * theta_extrap
 *   ext_factor == 0: theta = theta_interp, mscale = attn_factor
 *   else: ramp = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1),  mix = ramp * ext_factor,
 *         theta = theta_interp * (1 - mix) + theta_extrap * mix,
 *         mscale = attn_factor * (1 + 0.1 * ln(1 / freq_scale)),
 *   with [lo, hi] = ggml_rope_yarn_corr_dims(n_rot, n_ctx_orig, freq_base, beta_fast, beta_slow)
 *   and the rotated pair is scaled by mscale: (x0 c - x1 s, x0 s + x1 c) * mscale.
 * Dimensions n_rot .. head_dim-1 pass through unchanged (partial rotary). */
typedef struct sl_rope_params {
    sl_rope_mode mode;
    int32_t n_rot;      /* rotated dims: even, 2 <= n_rot <= head_dim */
    float freq_base;    /* > 0, e.g. 10000 or 1e6 */
    float freq_scale;   /* > 0: 1 / linear scaling factor (1 = none) */
    float ext_factor;   /* >= 0; 0 disables YaRN (then beta_* and n_ctx_orig are unused) */
    float attn_factor;  /* > 0; magnitude scale of the rotated dims (1 = none) */
    float beta_fast;    /* YaRN ramp ends, in rotations; ggml defaults 32 and 1 */
    float beta_slow;
    int32_t n_ctx_orig; /* YaRN: the training context length; > 0 when ext_factor != 0 */
    const float *freq_factors; /* NULL or n_rot/2 positive divisors of theta (llama3 rope_freqs) */
} sl_rope_params;

/* Defaults: freq_scale 1, ext_factor 0, attn_factor 1, beta_fast 32, beta_slow 1,
 * n_ctx_orig 0, no freq_factors. */
sl_rope_params sl_rope_params_make(sl_rope_mode mode, int32_t n_rot, float freq_base);

/* SL_OK if p is usable for rows of head_dim elements; else SL_ERR_INVALID naming the field. */
sl_status sl_ref_rope_validate(const sl_rope_params *p, int32_t head_dim, sl_error *err);

/* The YaRN correction range [lo, hi] in pair indices, computed in float exactly as
 * ggml_rope_yarn_corr_dims (floor/ceil of a float expression, clamped to [0, n_rot - 1]) so
 * that the integer ramp ends agree with llama.cpp's. p must have passed sl_ref_rope_validate. */
void sl_ref_rope_corr_dims(const sl_rope_params *p, float dims[2]);

/* cos and sin of pair i at position pos, already multiplied by mscale, in double (theta is
 * computed as pos * base^(-2i/n_rot) directly, not ggml's running float product, so it is
 * exact to double rounding even at large positions). corr from sl_ref_rope_corr_dims.
 * p must have passed sl_ref_rope_validate; 0 <= i < n_rot/2. The fast kernels build their
 * per-token tables from this function so that the angle definition lives in one place. */
void sl_ref_rope_cos_sin(const sl_rope_params *p, const float corr[2], int32_t pos, int32_t i,
                         double *cos_out, double *sin_out);
/* The same with base^(-2i/n_rot) given (sl_ref_rope_pow(p, i)): a table of many positions
 * computes the pow once per pair, not once per position; the same bits. */
double sl_ref_rope_pow(const sl_rope_params *p, int32_t i);
void sl_ref_rope_cos_sin_pow(const sl_rope_params *p, const float corr[2], int32_t pos,
                             int32_t i, double pw, double *cos_out, double *sin_out);

/* In place over x [n_tokens][n_head][head_dim]; token t is at position pos[t] (any int32,
 * negative allowed as in ggml). */
sl_status sl_ref_rope(float *x, int64_t n_tokens, int32_t n_head, int32_t head_dim,
                      const int32_t *pos, const sl_rope_params *p, sl_error *err);

/* ---- softmax and activations ---------------------------------------------------------- */

/* In place over one row: x = softmax(x * scale + mask) (mask NULL: none; entries may be
 * -INFINITY). The maximum is subtracted first. A row whose every entry is -inf becomes all
 * zeros (ggml would produce NaN; we choose a defined value). scale finite. */
sl_status sl_ref_softmax(float *x, int64_t n, float scale, const float *mask, sl_error *err);

/* GELU flavours: ggml_gelu's tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
 * (HF "gelu_pytorch_tanh", gemma) and the exact 0.5x(1 + erf(x / sqrt 2)) (ggml_gelu_erf). */
typedef enum sl_gelu_kind { SL_GELU_TANH = 0, SL_GELU_ERF = 1 } sl_gelu_kind;

/* y = silu(x) = x / (1 + e^-x). y may be x. */
sl_status sl_ref_silu(const float *x, float *y, int64_t n, sl_error *err);
/* y = gelu(x) of the given kind. y may be x. */
sl_status sl_ref_gelu(const float *x, float *y, int64_t n, sl_gelu_kind kind, sl_error *err);
/* out = silu(gate) * up. out may be gate or up. */
sl_status sl_ref_swiglu(const float *gate, const float *up, float *out, int64_t n,
                        sl_error *err);
/* gpt-oss's clamped SwiGLU (ggml_swiglu_oai; HF GptOssExperts): with g' = min(gate, limit)
 * and u' = clamp(up, -limit, limit), out = g' * sigmoid(alpha * g') * (u' + 1). gpt-oss uses
 * alpha 1.702 and limit 7 (SL_OAI_ALPHA, SL_OAI_LIMIT). out may be gate or up. */
#define SL_OAI_ALPHA 1.702f
#define SL_OAI_LIMIT 7.0f
sl_status sl_ref_swiglu_oai(const float *gate, const float *up, float *out, int64_t n,
                            float alpha, float limit, sl_error *err);
/* out = gelu(gate) * up. out may be gate or up. */
sl_status sl_ref_geglu(const float *gate, const float *up, float *out, int64_t n,
                       sl_gelu_kind kind, sl_error *err);

/* ---- elementwise ------------------------------------------------------------------------ */

/* y = a + b. y may be a or b. */
sl_status sl_ref_add(const float *a, const float *b, float *y, int64_t n, sl_error *err);
/* y = a * b. y may be a or b. */
sl_status sl_ref_mul(const float *a, const float *b, float *y, int64_t n, sl_error *err);
/* x *= s in place. */
sl_status sl_ref_scale(float *x, int64_t n, float s, sl_error *err);

/* ---- greedy pick ------------------------------------------------------------------------ */

/* The greedy token over one row of logits — llama_sampler_greedy's rule, the only copy of it:
 * the lowest index of the largest value, -inf masking a token. A NaN or +inf means the model
 * produced garbage; it is reported, never picked. Device kernels return the same three values
 * (kernels/cuda/ops.h sl_cuda_argmax), so the pick can happen where the logits are and only
 * these 12 bytes cross to the host. */
typedef struct sl_argmax_result {
    int32_t best;     /* the pick; -1 when every value is -inf (or n == 0) */
    int32_t bad;      /* lowest index holding NaN or +inf; -1 when none */
    uint32_t bad_bits; /* that value's bits (0 when bad < 0) */
} sl_argmax_result;
/* Fills *r over x[0..n), n < 2^31. SL_ERR_INVALID for NULL r, x NULL with n > 0, or n out of
 * range. */
sl_status sl_ref_argmax(const float *x, int64_t n, sl_argmax_result *r, sl_error *err);
/* *token = r->best when r names a token; else SL_ERR_INVALID naming the NaN/+inf index and value
 * or saying all n values are -inf. */
sl_status sl_ref_argmax_token(const sl_argmax_result *r, int64_t n, int32_t *token,
                              sl_error *err);

/* ---- MoE router ------------------------------------------------------------------------- */

typedef enum sl_gating {
    /* p = softmax(logits over all E); select top k of p (+ bias); weight p (Mixtral, Qwen2/3
     * MoE, OLMoE). norm_topk: divide the k weights by their sum (Mixtral: always; Qwen3:
     * norm_topk_prob; Qwen2-MoE/OLMoE: no). */
    SL_GATING_SOFTMAX_TOPK = 0,
    /* p = sigmoid(logits); select top k of p + bias; weight p without bias; norm_topk: divide
     * by their sum (DeepSeek V3 style, bias = e_score_correction_bias). */
    SL_GATING_SIGMOID = 1,
    /* select top k of logits (+ bias); weights = softmax over the k selected logits (gpt-oss);
     * they already sum to 1, so norm_topk changes nothing. */
    SL_GATING_TOPK_SOFTMAX = 2,
} sl_gating;

typedef struct sl_router_params {
    sl_gating gating;
    int32_t n_expert;   /* E >= 1 */
    int32_t k;          /* 1 <= k <= E */
    bool norm_topk;     /* renormalise the k weights to sum 1 */
    const float *bias;  /* NULL or [E] selection bias, added to the selection score only */
    float weight_scale; /* final weights are multiplied by this (DeepSeek routed_scaling_factor;
                           1 = none); finite */
    int32_t n_group;    /* group-limited selection (DeepSeek-V3, llama.cpp build_moe_ffn): 0 or
                           1 = none; else E % n_group == 0, the experts are n_group consecutive
                           groups, a group scores the sum of its top two selection scores (its
                           one score if the group has one expert), and only the top_group best
                           groups' experts may be selected */
    int32_t top_group;  /* 1 <= top_group <= n_group when n_group > 1 */
} sl_router_params;

/* The two halves of sl_ref_router_topk's arithmetic, shared with the batch router
 * (kernels/cpu/router.c) so both give the same bits; p valid, logits finite. prob [E]: the
 * gate probabilities of p->gating (softmax and sigmoid in double; TOPK_SOFTMAX: the logits).
 * w [k]: the weights of the selected idx [k] from prob. */
void sl__router_probs(const float *logits, const sl_router_params *p, double *prob);
void sl__router_weights(const double *prob, const int32_t *idx, const sl_router_params *p,
                        float *w);

/* Top-k routing of one token: idx[k] expert indices in order of decreasing selection score
 * (ties: lower expert index first) and w[k] their weights. Deterministic. Allocates E doubles. */
sl_status sl_ref_router_topk(const float *logits, const sl_router_params *p, int32_t *idx,
                             float *w, sl_error *err);

/* ---- decode attention ------------------------------------------------------------------- */

typedef enum sl_kv_type { SL_KV_F32 = 0, SL_KV_F16 = 1 /* IEEE half bits, uint16_t */ } sl_kv_type;

typedef struct sl_attn_params {
    int32_t n_head;     /* query heads, a multiple of n_kv_head */
    int32_t n_kv_head;  /* head h reads kv head h / (n_head / n_kv_head) (GQA; equal = MHA) */
    int32_t head_dim;   /* >= 1, same for q, k and v */
    int32_t n_pos;      /* valid cache positions 0 .. n_pos-1, >= 1; the query is at n_pos-1 */
    float scale;        /* logits = scale * q.k; 0 means 1/sqrt(head_dim); finite */
    int32_t window;     /* 0: all positions; W > 0: only the last W (positions >= n_pos - W),
                           llama.cpp's standard SWA */
    float softcap;      /* 0: off; c > 0: logits = c * tanh(logits / c) (gemma2), after scale */
    const float *sinks; /* NULL or [n_head] logits that join the softmax denominator only
                           (gpt-oss attention sinks) */
    sl_kv_type kv_type; /* element type of both caches */
    /* 0: off; else the logits of the query at position p also times sl_attn_temp(temp_scale,
     * temp_len, p) (llama.cpp's attention temperature, deepseek2 attention.temperature_scale /
     * _length: Mistral Large 3; it scales Q, the same up to rounding); finite */
    float temp_scale;
    int32_t temp_len; /* >= 1 where temp_scale != 0 */
} sl_attn_params;

#ifdef __CUDACC__
#define SL_ATTN_TEMP_FN static inline __host__ __device__
#else
#define SL_ATTN_TEMP_FN static inline
#endif
/* The temperature of a query at position pos: 1 + s * ln(floor(pos / len) + 1), in
 * llm_graph_input_attn_temp's float / double steps (1 where s == 0); every backend's one rule. */
SL_ATTN_TEMP_FN float sl_attn_temp(float s, int32_t len, int32_t pos)
{
    if (s == 0.0f || len < 1) return 1.0f;
    return (float)(log((double)floorf((float)pos / (float)len) + 1.0) * (double)s + 1.0);
}

/* SL_OK if p describes a computable attention; else SL_ERR_INVALID naming the field. */
sl_status sl_ref_attn_validate(const sl_attn_params *p, sl_error *err);
/* The logits' scale: p->scale, or 1 / sqrt(head_dim) where it is 0 (every backend's one rule).
 * p as sl_ref_attn_validate accepts it (non-NULL, head_dim >= 1). */
double sl_ref_attn_scale(const sl_attn_params *p);

/* One query token against a KV cache: q [n_head][head_dim] F32; k, v [n_pos][n_kv_head]
 * [head_dim] of kv_type; out [n_head][head_dim] F32 = softmax(logits) . V per head. out must
 * not overlap q, k or v. Allocates n_pos + head_dim doubles. */
sl_status sl_ref_attn_decode(const float *q, const void *k, const void *v,
                             const sl_attn_params *p, float *out, sl_error *err);

#endif
