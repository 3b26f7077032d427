/* kernels/cuda/gemv_multi: several matrices in one GEMV launch (issue 32: fewer launches per
 * layer) — per-head matrices of one 3-D weight, each head with its own strided input
 * (deepseek2's absorbed k_b and v_b), and up to SL_CUDA_GEMV_MULTI_MAX matrices of one input
 * (attention Q, K, V; FFN gate and up; the router).
 *
 * Semantics: as kernels/cuda/gemv.h (ggml row layout, F32 X and Y, its types, its activation
 * precision). Where every matrix of a launch is one that sl_cuda_gemv would run with Q8
 * activations (sl_cuda_gemv_multi_q8 / _heads_q8: the types of gemv.h's Q8-activation kernel,
 * aligned, the context not in the F32-activation mode), the launch runs that kernel's pieces
 * for every token: x quantised per 32 values, dp4a, a token's row sums bit for bit what
 * sl_cuda_gemv gives one token; the bandwidth path, for the largest matrices of a decode
 * (Q/K/V, a dense FFN's gate/up).
 * Otherwise X stays F32: one warp per output row (a block's 4 warps where a launch has few
 * rows) sums the row's units dequantised exactly (sl_qt<T>::deq / elem; float types 16 bytes a
 * load where aligned) times X in float, then a warp reduction.
 * Pointers are device memory; enqueued on the context's stream; nothing synchronises; no
 * allocation. Errors as gemv.h (SL_ERR_INVALID naming the argument, SL_ERR_UNSUPPORTED naming
 * the type, SL_ERR_DEVICE with CUDA's message); arguments are checked before the context. */
#ifndef SL_KERNELS_CUDA_GEMV_MULTI_H
#define SL_KERNELS_CUDA_GEMV_MULTI_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "kernels/ref/ops.h" /* sl_router_params */
#include "base/status.h"

enum { SL_CUDA_GEMV_MULTI_MAX = 4, SL_CUDA_GEMV_MULTI_MAX_N = 65535 };

/* For h < n_head, t < n: Y + t * y_ts + h * y_hs [rows] = W_h (X + t * x_ts + h * x_hs
 * [cols]), W_h at d_w + h * head_bytes ([rows][cols] of `type`); strides in floats.
 * n in [1, SL_CUDA_GEMV_MULTI_MAX_N], n_head in [1, 65535]. One launch. */
sl_status sl_cuda_gemv_heads(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t head_bytes,
                             int32_t n_head, int64_t rows, int64_t cols, const float *d_x,
                             int64_t x_ts, int64_t x_hs, int64_t n, float *d_y, int64_t y_ts,
                             int64_t y_hs, sl_error *err);

/* One matrix of sl_cuda_gemv_multi: y [n][rows] = W [rows][cols] x (+ bias [rows] per row;
 * NULL: none). Types may differ between the matrices. */
typedef struct sl_cuda_gemv_mat {
    uint32_t type;
    const void *w;
    int64_t rows;
    const float *bias;
    float *y;
} sl_cuda_gemv_mat;

/* For i < count (1 .. SL_CUDA_GEMV_MULTI_MAX), t < n: ms[i].y + t * rows_i = W_i (d_x + t *
 * cols) (+ bias). silu_glu: count 2 of equal rows (gate, up): then ms[0].y = silu(gate) * up
 * as sl_cuda_swiglu computes it (g / (1 + expf(-g)) * u) and ms[1].y = up, in the same launch.
 * One launch. */
sl_status sl_cuda_gemv_multi(sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms, int count,
                             int64_t cols, const float *d_x, int64_t n, bool silu_glu,
                             sl_error *err);

/* The attention norm and Q, K, V in one launch: for t < n, xn + t * cols = rms_norm(d_in + t *
 * cols) * d_norm_w (d_norm_w NULL: no weight), as sl_cuda_rms_norm computes it (one_plus_w
 * false; the same bits), and the matrices' y as sl_cuda_gemv_multi on xn (silu_glu false).
 * Every block normalises its token's row itself, before quantising it (Q8 activations only):
 * SL_ERR_UNSUPPORTED where sl_cuda_gemv_multi_norm_q8 is false (the caller runs the norm, then
 * sl_cuda_gemv_multi). eps finite and >= 0; d_xn not overlapping d_in. */
sl_status sl_cuda_gemv_multi_norm(sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms, int count,
                                  int64_t cols, const float *d_in, const float *d_norm_w,
                                  float eps, float *d_xn, int64_t n, sl_error *err);
/* Whether sl_cuda_gemv_multi_norm runs for these matrices in context c (not in the
 * F32-activation mode, and sl_cuda_gemv_multi_q8) */
bool sl_cuda_gemv_multi_norm_q8(const sl_cuda_ctx *c, const sl_cuda_gemv_mat *ms, int count,
                                int64_t cols);

/* A MoE layer's router GEMV and top-k in one launch: logits m->y [n][E] = W x (+ m->bias) as
 * sl_cuda_gemv_multi gives them (m: one matrix of E = p->n_expert rows), then d_idx / d_w [n][k]
 * as sl_cuda_router_topk gives them from those logits (the same bodies and bits), by the
 * launch's last block to finish. Where sl_cuda_gemv_router_fused is false (a router matrix the
 * Q8-activation GEMV takes) SL_ERR_UNSUPPORTED: the caller runs the two launches. p checked as
 * sl_cuda_router_topk checks it; n in [1, SL_CUDA_GEMV_MULTI_MAX_N]. The context's fused
 * launches run one at a time on its stream. */
sl_status sl_cuda_gemv_router(sl_cuda_ctx *c, const sl_cuda_gemv_mat *m, int64_t cols,
                              const float *d_x, int64_t n, const sl_router_params *p,
                              int32_t *d_idx, float *d_w, sl_error *err);
bool sl_cuda_gemv_router_fused(const sl_cuda_ctx *c, const sl_cuda_gemv_mat *m, int64_t cols);

/* Routed experts' gate and up with the SwiGLU between them, one launch (a MoE decode's): for
 * slot s < n_sel and e = d_ids[s], y [s][rows] = silu(G_e x_s) * (U_e x_s) with G_e = d_gate[e],
 * U_e = d_up[e] ([rows][cols] of type_gate / type_up, device pointer arrays of n_expert) and
 * x_s = d_x + (s / x_group) * cols; an id outside [0, n_expert) gives zeros. Q8 activations
 * only: the sums of sl_cuda_gemv_experts of the gate and of the up, then sl_cuda_swiglu's
 * formula (one function), so the values are those three launches' (equal bits on the host
 * emulation; the GPU test allows 2 ulps); SL_ERR_UNSUPPORTED where
 * sl_cuda_gemv_experts_glu_q8 is false (the caller runs those three). n_sel in [1, 65535]. */
sl_status sl_cuda_gemv_experts_glu(sl_cuda_ctx *c, uint32_t type_gate,
                                   const void *const *d_gate, uint32_t type_up,
                                   const void *const *d_up, int32_t n_expert,
                                   const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                   int64_t cols, const float *d_x, int32_t x_group, float *d_y,
                                   sl_error *err);
/* Whether sl_cuda_gemv_experts_glu runs for these types and columns in context c (not in the
 * F32-activation mode; both types the Q8-activation GEMV's, as sl_cuda_gemv_q8_act says). */
bool sl_cuda_gemv_experts_glu_q8(const sl_cuda_ctx *c, uint32_t type_gate, uint32_t type_up,
                                 int64_t cols);

/* Whether sl_cuda_gemv_multi / sl_cuda_gemv_heads with these arguments, in a context not in
 * the F32-activation mode (sl_cuda_ctx_set_f32_act), runs with Q8 activations: every matrix
 * (each head at d_w + h * head_bytes) is one sl_cuda_gemv_q8_act admits (n_batch 1, aligned).
 * The one rule the launches take; false for arguments they refuse. */
bool sl_cuda_gemv_multi_q8(const sl_cuda_gemv_mat *ms, int count, int64_t cols);
bool sl_cuda_gemv_heads_q8(uint32_t type, const void *d_w, int64_t head_bytes, int32_t n_head,
                           int64_t cols);

#ifdef __cplusplus
}
#endif

#endif
