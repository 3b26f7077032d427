/* kernels/cuda/gemv_grouped: routed experts of many tokens grouped by expert (MoE prefill).
 *
 * The result of sl_cuda_gemv_experts (gemv.h) for the same slots, computed so that each
 * expert's weights are read from HBM once for all its slots (then from L1 / L2) instead of once
 * per slot: a prefill chunk of 64 tokens x top-8 is 512 slots over at most n_expert distinct
 * matrices. Two steps, the first shared by the projections of one selection:
 *   sl_cuda_expert_order: d_ids [n_sel] -> d_order, the slots sorted by expert (a counting sort
 *     in one block): [n_expert + 2] starts (expert e's slots are order[start[e] ..
 *     start[e + 1]); ids outside [0, n_expert) last, from start[n_expert] to start[n_expert +
 *     1] = n_sel), then the [n_sel] slots. Within an expert the order is arbitrary (atomics),
 *     which changes no result: every slot's sums are its own.
 *   sl_cuda_gemv_grouped: Y[s][r] = dot(W_{ids[s]} row r, X_s), X_s = d_x + (s / x_group) *
 *     cols, as sl_cuda_gemv_experts; a slot with an id outside [0, n_expert) gets 0.
 * Numerics: per slot and row the sum of sl_cuda_gemv_experts' F32-activation kernel (lane l
 * takes units l, l + 32, ... with the same block dot, then the same warp reduction): the same
 * bits as it in the context's F32-activation mode (sl_cuda_ctx_set_f32_act; without it, that
 * GEMV quantizes x to Q8 for sl_cuda_gemv_q8_act's decode: within its error). A row whose
 * start is not 16-byte aligned is read bytewise (slower; the same bits).
 * Types: the quantized types of the GEMV (not F32 / F16 / BF16: SL_ERR_UNSUPPORTED).
 * Pointers are device memory; enqueued on the context's stream; nothing synchronises; no
 * allocation. Errors as gemv.h: SL_ERR_INVALID naming the argument (NULL, counts, n_expert >
 * SL_CUDA_GROUPED_MAX_EXPERTS, n_sel > SL_CUDA_GROUPED_MAX_SLOTS), checked before the context. */
#ifndef SL_KERNELS_CUDA_GEMV_GROUPED_H
#define SL_KERNELS_CUDA_GEMV_GROUPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/status.h"
#include "kernels/cuda/ctx.h"

enum { SL_CUDA_GROUPED_MAX_EXPERTS = 4096, SL_CUDA_GROUPED_MAX_SLOTS = 1 << 20 };

/* Whether sl_cuda_gemv_grouped takes this type. */
bool sl_cuda_gemv_grouped_supported(uint32_t type);
/* Bytes of d_order for n_expert experts and n_sel slots (int32 entries); 0 for counts the
 * calls below refuse. */
size_t sl_cuda_expert_order_bytes(int32_t n_expert, int32_t n_sel);

sl_status sl_cuda_expert_order(sl_cuda_ctx *c, const int32_t *d_ids, int32_t n_sel,
                               int32_t n_expert, int32_t *d_order, sl_error *err);
/* d_order: what sl_cuda_expert_order wrote for the same n_expert and n_sel (other counts make
 * the kernel read past it: nothing on the device can check). */
/* Shared with gemm_grouped.cu: the arguments both grouped products check, in this order (the
 * type, the counts, rows and x_group, cols against the type's blocks, rows within tile_rows
 * tiles of the grid), with fn's name; *row_bytes a row's bytes. */
sl_status sl__cuda_grouped_check(const char *fn, uint32_t type, int32_t n_expert, int32_t n_sel,
                                 int64_t rows, int64_t cols, int32_t x_group, int64_t tile_rows,
                                 size_t *row_bytes, sl_error *err);

sl_status sl_cuda_gemv_grouped(sl_cuda_ctx *c, uint32_t type, const void *const *d_wptrs,
                               int32_t n_expert, const int32_t *d_order, int32_t n_sel,
                               int64_t rows, int64_t cols, const float *d_x, int32_t x_group,
                               float *d_y, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
