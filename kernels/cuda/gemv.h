/* kernels/cuda/gemv: dequantising matrix x vector (decode) on the GPU, straight from GGUF blocks.
 *
 * Semantics: W [rows][cols] in ggml layout (row r at byte r * row_bytes(type, cols), blocks end
 * to end; cols a multiple of the block size, any cols >= 1 for F32/F16/BF16), X [n_batch][cols]
 * F32, Y[b][r] = sum_c W[r][c] * X[b][c]. Types: the list SL_QT_TYPES of kernels/cuda/common.cuh
 * (the float types, Q4_0..Q8_0, the K-quants, MXFP4, IQ4_NL/XS and the codebook types IQ1_S..
 * IQ3_S; not TQ1_0, TQ2_0, NVFP4).
 *
 * Numerics (differs from kernels/ref/matvec on purpose): X stays F32 (no Q8 activation
 * quantisation; the GPU has the FLOPs, the activation error goes away), each block's term is
 * computed as ggml factors it (scale x integer-weighted sum, minus min x sum of x), accumulated
 * in float per lane and reduced by warp shuffles. Against the float64 dot of the dequantised
 * weights (sl_quant_dequant_row) with X the error is a few float ulps of
 * sum_c (|W[r][c]| + max_c|W[r][c]|) |X[b][c]|; tests/kernels_cuda states the bound it checks.
 *
 * Kernel design (gemv.cu): a block of 4 warps owns 16 output rows (4 per warp, so each x value
 * loaded from shared memory serves 4 rows) and walks the columns in chunks of 1024 elements
 * (2048 for Q6_K); each chunk of the 16 weight rows and of x is copied global -> shared with
 * 16-byte cp.async (coalesced, no registers), three stages deep so two chunks are in flight
 * while one is computed. Rows whose start is not 16-byte aligned (odd row_bytes, offset
 * pointers) take a byte-wise copy path: correct, slower.
 *
 * Pointers are device memory (including the index and pointer arrays); enqueued on the context's
 * stream; nothing synchronises; no allocation. Errors: SL_ERR_INVALID naming the argument (NULL,
 * counts < 1, cols not a multiple of the block, grid limits), SL_ERR_UNSUPPORTED naming the
 * type, SL_ERR_DEVICE with CUDA's message. Arguments are checked before the context. Indices in
 * device memory cannot be checked on the host: an out-of-range row index or expert id gives 0
 * in its outputs (compact / expert modes) or is skipped (scatter). */
#ifndef SL_KERNELS_CUDA_GEMV_H
#define SL_KERNELS_CUDA_GEMV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/ctx.h"
#include "base/status.h"

enum { SL_CUDA_GEMV_MAX_BATCH = 65535 * 4 };

/* True for the types above. */
bool sl_cuda_gemv_supported(uint32_t type);
/* Whether a launch of `type` over `cols` columns and n_batch vectors takes the Q8-activation
 * kernel (x quantised per 32 values as ggml's Q8_1, dp4a: Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS at
 * n_batch 1) when the context does not ask for F32 activations (sl_cuda_ctx_set_f32_act).
 * aligned: the matrix pointer has the kernel's alignment for the type (16 bytes for Q4_K /
 * Q5_K, 8 for IQ4_XS, 4 for Q8_0 / Q6_K); an experts launch passes true (its pointers are
 * checked in-kernel). down_part: a sl_cuda_gemv_expert_parts down' launch (cols its widest).
 * The numerics differ from the F32 kernel's (see tests/kernels_cuda). */
bool sl_cuda_gemv_q8_act(uint32_t type, int64_t cols, int64_t n_batch, bool aligned,
                         bool down_part);
/* Elements of a row the GEMV stages per chunk for `type` (its sl_qt's 32 * UPL units); 0 for a
 * type it does not take. For tests that cross chunk boundaries. */
int64_t sl_cuda_gemv_chunk_elems(uint32_t type);
/* Bytes of one weight row; 0 for an unsupported type, cols < 1 or cols not a multiple of the
 * block size. */
size_t sl_cuda_gemv_row_bytes(uint32_t type, int64_t cols);

/* x quantised once (ggml's Q8_1 per 32 values, as every block of the Q8-activation GEMV
 * quantises it for itself) into d_xq, sl_cuda_q8x_bytes(cols) bytes of device memory, 16-byte
 * aligned (0: cols not a multiple of 32 in [32, 32768]); one small launch */
size_t sl_cuda_q8x_bytes(int64_t cols);
sl_status sl_cuda_quant_q8x(sl_cuda_ctx *c, const float *d_x, int64_t cols, void *d_xq,
                            sl_error *err);
/* sl_cuda_gemv of one vector on that d_xq, where sl_cuda_gemv_q8_act takes the matrix (else
 * SL_ERR_UNSUPPORTED): the Q8-activation kernel without its per-block quantisation of x (the
 * bits sl_cuda_gemv gives in the default mode; it takes Q8 activations whatever
 * sl_cuda_ctx_set_f32_act says), y [rows]. Issue 32's "x quantised once a launch": bench
 * kernels' "q8-pre" rows measure what that prologue costs; the decode does not use it yet. */
sl_status sl_cuda_gemv_q8x(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                           int64_t cols, const void *d_xq, float *d_y, sl_error *err);

/* Dense: Y [n_batch][rows]. n_batch 1 is the decode matvec; up to 4 columns share each weight
 * read (larger batches re-read W once per 4 columns: use sl_cuda_gemm from ~8 on). */
sl_status sl_cuda_gemv(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                       int64_t cols, const float *d_x, int64_t n_batch, float *d_y,
                       sl_error *err);

/* A decode token's wo (or dense down) + residual add (+ FFN norm) in one launch: y [rows] = W x
 * as sl_cuda_gemv computes it (one token), res [rows] = res + y as sl_cuda_add rounds it, then
 * with d_xn: xn [rows] = rms_norm(res) * d_norm_w (NULL: no weight) by the launch's last block
 * to finish, the bits of sl_cuda_add_rms_norm. Q8 activations only: SL_ERR_UNSUPPORTED where
 * sl_cuda_gemv_add_norm_q8 is false (the caller runs the GEMV, then the add / add + norm).
 * d_x, d_y, d_res and d_xn must not overlap; eps finite and >= 0 with d_xn. The context's
 * fused launches run one at a time on its stream (ctx_impl.h's counters). */
sl_status sl_cuda_gemv_add_norm(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                                int64_t cols, const float *d_x, float *d_y, float *d_res,
                                const float *d_norm_w, float eps, float *d_xn, sl_error *err);
/* Whether sl_cuda_gemv_add_norm runs for this matrix in context c (not in the F32-activation
 * mode; the type, columns and alignment sl_cuda_gemv_q8_act takes for one token) */
bool sl_cuda_gemv_add_norm_q8(const sl_cuda_ctx *c, uint32_t type, const void *d_w,
                              int64_t cols);

/* A MoE decode's routed down projection and its combine (+ the residual) in one launch: y
 * [n_sel][rows] as sl_cuda_gemv_experts gives it (x [n_sel][cols], one a slot), then for the
 * n_sel / k tokens out [t][rows] as sl_cuda_moe_combine(y, NULL, d_ids, d_w, n_sel / k, k,
 * rows, d_res, d_out) gives it (the same bits), each block of 32 rows by the last of
 * its n_sel slot blocks to finish. Q8 activations only: SL_ERR_UNSUPPORTED where
 * sl_cuda_gemv_experts_combine_q8 is false (the caller runs the two launches). k in [1, 64]
 * dividing n_sel; d_x, d_y, d_out apart; d_res NULL, d_out, or apart from it. The
 * context's fused launches run one at a time on its stream. */
sl_status sl_cuda_gemv_experts_combine(sl_cuda_ctx *c, uint32_t type,
                                       const void *const *d_wptrs, int32_t n_expert,
                                       const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                       int64_t cols, const float *d_x, float *d_y, int32_t k,
                                       const float *d_w, const float *d_res, float *d_out,
                                       sl_error *err);
/* (and k: the combine's slots a token, 1 .. 64; rows: each block of 32 rows has a counter,
 * up to 32768 rows) */
bool sl_cuda_gemv_experts_combine_q8(const sl_cuda_ctx *c, uint32_t type, int64_t rows,
                                     int64_t cols, int32_t k);

/* Row-gathered (hot neurons of gate/up): for i < n_idx, r = d_idx[i]: compact
 * (scatter == false) Y[b][i] = dot(W row r, X[b]), Y [n_batch][n_idx]; scattered
 * Y[b][r] = ..., Y [n_batch][rows], unlisted entries untouched (repeats write the same value).
 * Only the listed rows' bytes are read. */
sl_status sl_cuda_gemv_rows(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                            int64_t cols, const int32_t *d_idx, int64_t n_idx, bool scatter,
                            const float *d_x, int64_t n_batch, float *d_y, sl_error *err);

/* Batched experts, one launch for the experts of one or more tokens (MoE decode, and a
 * prefill chunk's [n][k] selections at once): d_wptrs [n_expert] device array of device
 * pointers to each expert's W [rows][cols] (all of one type and shape; merged 3-D
 * ffn_*_exps tensors give wptrs[e] = base + e * rows*row_bytes, separately placed experts any
 * addresses), d_ids [n_sel] expert ids, for s < n_sel:
 *   Y[s][r] = dot(W_{ids[s]} row r, X_s), X_s = d_x + (s / x_group) * cols,
 * x_group >= 1 slots sharing one X: n_sel (or more) one X for all (a token's gate/up), k the
 * tokens of a [n][k] id list (a chunk's gate/up), 1 each slot its own (down). Y [n_sel][rows].
 * n_sel <= 65535 (one grid dimension). */
sl_status sl_cuda_gemv_experts(sl_cuda_ctx *c, uint32_t type, const void *const *d_wptrs,
                               int32_t n_expert, const int32_t *d_ids, int32_t n_sel,
                               int64_t rows, int64_t cols, const float *d_x, int32_t x_group,
                               float *d_y, sl_error *err);

/* The same over one side of experts split by neurons (scheduler/moe/ffn_split.h; the experts of
 * an sl_moe_layer with ff_at): expert e has w_e = d_ff_at[e + 1] - d_ff_at[e] neurons
 * (d_ff_at: [n_expert + 1], device; each w_e a whole number of blocks of a down' type).
 *   down == false (gate', up'): W_e [w_e][cols], rows >= every w_e; Y[s][r] as above for
 *     r < w_{ids[s]}, 0 for the rest of its [rows]; one X for all.
 *   down == true (down'): W_e [rows][w_e] (row bytes of w_e columns), cols >= every w_e is
 *     the stride of X_s = d_x + s * cols, whose first w_e entries are used; a width of 0
 *     gives Y[s] = 0 (the expert's bias alone is the caller's).
 * Errors as sl_cuda_gemv_experts, and SL_ERR_INVALID for a NULL d_ff_at. */
sl_status sl_cuda_gemv_expert_parts(sl_cuda_ctx *c, uint32_t type, const void *const *d_wptrs,
                                    int32_t n_expert, const int64_t *d_ff_at, bool down,
                                    const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                    int64_t cols, const float *d_x, float *d_y, sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
