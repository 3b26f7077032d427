/* kernels/cuda/fwd: the forward pass's glue on the GPU — the few element-wise steps between
 * the big kernels that have no reference op of their own (the cuda executor,
 * runtime/engine/dx_cuda.c, uses them).
 *
 * Each one has a CPU twin with the same definition in the sim executor (runtime/engine/dx_host.c,
 * sl__dx_sim_create), which CI runs; tests/kernels_cuda checks these against plain C loops on the GPU.
 * Common contract (as ops.h): enqueued on the context's stream; nothing synchronises; no
 * allocation; pointers are device memory; SL_ERR_INVALID naming the argument is checked before
 * the context; SL_ERR_DEVICE with CUDA's message for a failed launch. */
#ifndef SL_KERNELS_CUDA_FWD_H
#define SL_KERNELS_CUDA_FWD_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "base/status.h"

/* y[r][j] += b[j] for r < n_rows, j < dim (projection biases). */
sl_status sl_cuda_add_rows(sl_cuda_ctx *c, float *d_y, const float *d_b, int64_t n_rows,
                           int64_t dim, sl_error *err);

/* Expert biases of a batched-expert GEMV's output d_y [k][stride] (kernels/cuda/gemv.h): row
 * i belongs to expert e = d_ids[i] and gets d_b[at + j] added for j < w, where at = e * stride
 * and w = stride (whole experts; down's bias: stride n_embd), or, for a hot/cold part's
 * per-expert widths (scheduler/moe/moe.h ff_at), at = d_ff_at[e] and w = d_ff_at[e + 1] - at; the
 * entries past w stay as they are. The CPU's expert FFN adds the same (scheduler/moe/expert_ffn.c).
 * On the device an id outside [0, n_expert) adds nothing and w is clamped to [0, stride] (the
 * expert GEMVs' rule for bad ids), so a bad id never reads or writes out of bounds. */
sl_status sl_cuda_expert_bias(sl_cuda_ctx *c, float *d_y, const float *d_b,
                              const int64_t *d_ff_at, int32_t n_expert, const int32_t *d_ids,
                              int32_t k, int64_t stride, sl_error *err);

/* KV cache store: for t < n, row t of d_src [n][row] (F32) goes to cache row d_pos[t] of
 * d_cache ([n_ctx][row] of F32, or of IEEE half bits rounded to nearest even when f16).
 * Positions are not checked on the device: the caller guarantees 0 <= pos < n_ctx. */
sl_status sl_cuda_kv_store(sl_cuda_ctx *c, const float *d_src, const int32_t *d_pos, int64_t n,
                           int64_t row, bool f16, void *d_cache, sl_error *err);

/* MoE combine: d_out[t][j] = sum_{i<k} d_w[t*k + i] * y_{t*k + i}[j], summed in ascending
 * expert id (d_idx [n_tok][k]; equal ids: the lower slot first) so the order matches the CPU
 * scheduler's (scheduler/moe/moe.h), each product and sum rounded: y_s = d_y[s] or, with d_y2
 * (NULL: none), d_y[s] + d_y2[s] — a layer's device-resident experts' rows and the host's
 * others (one of the two +0 per slot), the bits of sl_moe_rows_join. With d_res (NULL:
 * none), d_out[t][j] = d_res[t][j] + that sum (rounded; d_out may be d_res): a layer's
 * residual add in the same launch, the bits of adding after. */
sl_status sl_cuda_moe_combine(sl_cuda_ctx *c, const float *d_y, const float *d_y2,
                              const int32_t *d_idx, const float *d_w, int64_t n_tok, int32_t k,
                              int64_t dim, const float *d_res, float *d_out, sl_error *err);

/* d_out[s] = d_idx[s] where it is in [0, n_expert) and d_mask[d_idx[s]] != 0, else -1, for
 * s < n_sel: the slots of a layer's resident experts for the expert GEMVs, which give the
 * others (ids out of range) zeros. */
sl_status sl_cuda_moe_mask_ids(sl_cuda_ctx *c, const int32_t *d_idx, const uint8_t *d_mask,
                               int64_t n_sel, int32_t n_expert, int32_t *d_out, sl_error *err);

/* Strided 2-D copy: d_dst[r * dst_stride + j] = d_src[r * src_stride + j] for r < rows,
 * j < width (floats; strides >= width): deepseek2's per-head gathers and scatters. The two
 * ranges must not overlap. One grid-stride launch over rows * width, so any row count. */
sl_status sl_cuda_copy2d(sl_cuda_ctx *c, float *d_dst, int64_t dst_stride, const float *d_src,
                         int64_t src_stride, int64_t rows, int64_t width, sl_error *err);

/* Shared-expert gate: d_out[t][j] += sigmoid(d_logit[t]) * d_y[t][j] (qwen2moe). */
sl_status sl_cuda_gated_add(sl_cuda_ctx *c, float *d_out, const float *d_y,
                            const float *d_logit, int64_t n_tok, int64_t dim, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
