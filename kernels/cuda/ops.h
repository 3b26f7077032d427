/* kernels/cuda/ops: the non-matmul layer ops on the GPU, with the definitions, parameter
 * structs and edge-case behaviour of kernels/ref/ops.h (the oracle they are tested against).
 *
 * Differences in form, not meaning:
 * - Batched: the row ops take n_rows rows of n elements (one block per row).
 * - Pointers inside parameter structs are DEVICE pointers here: sl_rope_params.freq_factors,
 *   sl_router_params.bias, sl_attn_params.sinks (their values cannot be validated on the host;
 *   the other fields are, with the reference's validators and messages).
 * - Arithmetic is float (the references use double): reductions in float partial sums, expf /
 *   tanhf / erff from CUDA's libdevice (<= 2 ulp). Two exceptions where float is not enough:
 *   rope angles (pos * base^(-2i/n_rot) up to ~1e5 rad) and the router's gate probabilities
 *   (top-k selection must agree with the reference's order) are computed in double.
 *   tests/kernels_cuda states each op's tolerance.
 *
 * Limits: attention head_dim <= SL_CUDA_ATTN_MAX_HEAD_DIM, router n_expert <=
 * SL_CUDA_ROUTER_MAX_EXPERT (SL_ERR_UNSUPPORTED beyond).
 * Common contract: enqueued on the context's stream; nothing synchronises; no allocation;
 * SL_ERR_INVALID naming the argument (checked before the context), SL_ERR_DEVICE with CUDA's
 * message. Aliasing as the references allow (y may be x, out may be gate or up, ...). */
#ifndef SL_KERNELS_CUDA_OPS_H
#define SL_KERNELS_CUDA_OPS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "kernels/ref/ops.h"
#include "base/status.h"

enum { SL_CUDA_ATTN_MAX_HEAD_DIM = 576, SL_CUDA_ROUTER_MAX_EXPERT = 1024 };

/* Each of n_rows rows of x [n_rows][n]: sl_ref_rms_norm (d_w [n] or NULL, shared by rows). */
sl_status sl_cuda_rms_norm(sl_cuda_ctx *c, const float *d_x, const float *d_w, float *d_y,
                           int64_t n_rows, int64_t n, float eps, bool one_plus_w, sl_error *err);

/* sl_ref_rope in place over d_x [n_tokens][n_head][head_dim], d_pos [n_tokens]. */
sl_status sl_cuda_rope(sl_cuda_ctx *c, float *d_x, int64_t n_tokens, int32_t n_head,
                       int32_t head_dim, const int32_t *d_pos, const sl_rope_params *p,
                       sl_error *err);

/* Fused (issue 32: fewer launches per layer), each one launch:
 * q/k norm + rope + KV store: q [n_tokens][n_head][head_dim] and k [n_tokens][n_head_kv]
 * [head_dim], each head rms-normalised with d_q_norm / d_k_norm ([head_dim]; NULL: no norm)
 * and roped at d_pos (sl_cuda_rope's definition), then k's and v's rows stored into the
 * caches at rows d_pos (sl_cuda_kv_store's); n_tokens <= 65535. */
sl_status sl_cuda_qk_rope_store(sl_cuda_ctx *c, float *d_q, float *d_k, const float *d_v,
                                int64_t n_tokens, int32_t n_head, int32_t n_head_kv,
                                int32_t head_dim, const float *d_q_norm, const float *d_k_norm,
                                float eps, const int32_t *d_pos, const sl_rope_params *p,
                                bool f16, void *d_kc, void *d_vc, sl_error *err);
/* Residual add + norm: d_x += d_t (sl_cuda_add's rounding), then d_y = sl_cuda_rms_norm(d_x,
 * d_w) over n_rows rows of n. */
sl_status sl_cuda_add_rms_norm(sl_cuda_ctx *c, float *d_x, const float *d_t, const float *d_w,
                               float *d_y, int64_t n_rows, int64_t n, float eps, sl_error *err);

/* sl_ref_softmax on each row of d_x [n_rows][n] in place; d_mask NULL or rows of n entries,
 * row r using d_mask + r * mask_row_stride (0: one mask for all rows). */
sl_status sl_cuda_softmax(sl_cuda_ctx *c, float *d_x, int64_t n_rows, int64_t n, float scale,
                          const float *d_mask, int64_t mask_row_stride, sl_error *err);

sl_status sl_cuda_swiglu(sl_cuda_ctx *c, const float *d_gate, const float *d_up, float *d_out,
                         int64_t n, sl_error *err);
sl_status sl_cuda_geglu(sl_cuda_ctx *c, const float *d_gate, const float *d_up, float *d_out,
                        int64_t n, sl_gelu_kind kind, sl_error *err);
/* sl_ref_swiglu_oai (gpt-oss's clamped SwiGLU; SL_OAI_ALPHA, SL_OAI_LIMIT); SL_ERR_INVALID for
 * a non-finite alpha or limit, or limit < 0. */
sl_status sl_cuda_swiglu_oai(sl_cuda_ctx *c, const float *d_gate, const float *d_up,
                             float *d_out, int64_t n, float alpha, float limit, sl_error *err);
sl_status sl_cuda_add(sl_cuda_ctx *c, const float *d_a, const float *d_b, float *d_y, int64_t n,
                      sl_error *err);
sl_status sl_cuda_mul(sl_cuda_ctx *c, const float *d_a, const float *d_b, float *d_y, int64_t n,
                      sl_error *err);
sl_status sl_cuda_scale(sl_cuda_ctx *c, float *d_x, int64_t n, float s, sl_error *err);

/* sl_ref_router_topk for each of n_tokens rows of d_logits [n_tokens][n_expert]:
 * d_idx [n_tokens][k], d_w [n_tokens][k]. All three gatings, the selection bias and the
 * group limit (n_group > 1: deepseek2). */
sl_status sl_cuda_router_topk(sl_cuda_ctx *c, const float *d_logits, int64_t n_tokens,
                              const sl_router_params *p, int32_t *d_idx, float *d_w,
                              sl_error *err);

/* sl_ref_argmax over d_x [n] into d_r (device memory; one block, so it costs one pass over
 * the logits: ~1 MB for a 262k vocabulary). */
sl_status sl_cuda_argmax(sl_cuda_ctx *c, const float *d_x, int64_t n, sl_argmax_result *d_r,
                         sl_error *err);

/* sl_ref_attn_decode: one query token, GQA, sliding window, softcap, sinks; K/V F32 or F16.
 * The engine launches sl_cuda_attn_at (positions on the device); this one-token form, at
 * p->n_pos from the host, is what the ops test holds attn_at's bits against. */
sl_status sl_cuda_attn_decode(sl_cuda_ctx *c, const float *d_q, const void *d_k,
                              const void *d_v, const sl_attn_params *p, float *d_out,
                              sl_error *err);
/* n_tok query tokens at any positions (a prefill chunk, a decode token), one launch: q, out
 * [n_tok][n_head][head_dim]; n_tok in [1, 65535]; token t attends to cache positions [0,
 * d_pos[t]] (window and sinks as sl_cuda_attn_decode with n_pos = d_pos[t] + 1), d_pos
 * [n_tok] read on the device, so a launch captured in a graph stays right as the context
 * grows. One token, every token in the F32-activation mode (sl_cuda_ctx_set_f32_act), and head
 * dims past 256 (MLA): the decode kernel per token, its bits. Otherwise two or more tokens go
 * through the tiled prefill kernel on the tensor cores (attn_prefill.cuh: K/V once per tile of
 * 32 query rows; F16 operands, F32 sums: ~1e-3 of |V|). p->n_pos is unused (d_pos[t] + 1 <=
 * the cache's positions is the caller's to keep). */
sl_status sl_cuda_attn_at(sl_cuda_ctx *c, const float *d_q, const void *d_k, const void *d_v,
                          const sl_attn_params *p, const int32_t *d_pos, int64_t n_tok,
                          float *d_out, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
