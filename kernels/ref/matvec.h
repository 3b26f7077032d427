/* kernels/ref/matvec: scalar reference of matrix x vector (and x small batch) for the weight
 * types Sluice computes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4,
 * IQ4_NL, IQ4_XS.
 *
 * Layout (ggml's): a weight W is [rows][cols], each row `cols` elements stored as consecutive
 * blocks of its type (ne[0] = cols is the contiguous dimension), rows packed end to end, row r
 * at byte r * sl_ref_matvec_row_bytes(type, cols). cols must be a multiple of the block size.
 * SL_TYPE_Q4_K_R8 (kernels/ref/repack.h) is Q4_K with eight rows interleaved (rows % 8 == 0):
 * every function here computes it as Q4_K of its rows, the same bits.
 *
 * Activations, as ggml's CPU backend (vec_dot_type; IQ1_M's carries more, the same integers):
 * x is quantized once per call into
 *   Q8_0 for Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL weights;
 *   Q8_1 for Q4_1, Q5_1 (the block also carries s = d * sum(qs), which pays for the min);
 *   Q8_K for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and the other codebook types (float d, bsums
 *   of 16 for the mins);
 *   Q8_K8 (SL_ACT_Q8_K8: a Q8_K block, then its 32 sums of 8, int16) for IQ1_M, whose delta
 *   changes every 8 values: the fast kernels take it as one product with those sums (so an xq
 *   handed to them must come from these quantizers: the reference reads only the Q8_K part);
 *   F32 (unchanged) for F32, F16, BF16 weights. ggml converts x to F16 (F16 weights) or BF16
 *   (BF16 weights); we keep x in F32 because these kernels are memory bound (x is read from
 *   cache, W from DRAM), so the narrower x buys no bandwidth and would cost 11 (F16) or 16 (BF16)
 *   bits of x. Accuracy is then that of an F32 dot product of exactly-widened weights.
 * The quantizers are ggml's *_ref ones (roundf, ties away from zero; Q8_K: nearest_int, ties to
 * even, scale -127/max; a block too small for a finite scale gives zeros, where ggml's would
 * cast an infinity), so every q in an activation block lies in [-127, 127]; ggml's AVX2
 * quantize_row_q8_0 rounds ties to even instead and can differ from its own reference in the
 * last quant — we are bit-exact to the reference on every path.
 *
 * Summation order (the contract that makes fast kernels bit-exact, kernels/cpu/matvec.h):
 * - quantized types: each block (32 elements, or a 256-element super-block for K-quants and
 *   IQ4_XS) gives an exact integer sum and a float term t_b (formulas in matvec_blocks.c, as
 *   ggml's vec_dot_*: integer sums times scales); t_b is added to lane b % 8 of 8 float
 *   partial sums, in block order, with separate multiplies and adds (no FMA);
 * - F32/F16/BF16: element i updates lane i % 32 with fmaf(w_i, x_i, lane);  the 32 lanes are
 *   folded to 8 as s[k] = (l[k] + l[k+8]) + (l[k+16] + l[k+24]);
 * - 8 lanes reduce as ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)) (an AVX 256->128->64 hsum).
 *
 * Accuracy against the float64 product of the dequantized weights and the unquantized x (what
 * tests/kernels/matvec_test.c checks, with S = sum_j |W_rj| |x_j| in float64):
 * - F32, F16, BF16: |y - y64| <= 1e-5 * S (float rounding of the sum only; observed far below);
 * - 32-blocks with Q8_0/Q8_1 activations: the activation quant error is at most half a step,
 *   d_x / 2 = amax_block / 254 per element, so |y - y64| <= sum_b ||W_b||_1 * amax_b(x) / 254
 *   (+ 1e-5 S rounding); the test checks that bound (Q8_1's s = d * sum(qs) is stored as half:
 *   one more relative 2^-11 of |m * s| per block);
 * - K-quants with Q8_K: the same bound with steps amax_superblock(x) / 127 and super-blocks of
 *   256 (the activation scale is 1/iscale in float, no half rounding).
 *
 * Sparse variants (PowerInfer-style hot/cold neuron split):
 * - rows: only listed rows of W (gate/up projections: listed neurons are rows), output either
 *   compact (y[i] for idx[i]) or scattered (y[idx[i]], other entries untouched);
 * - cols: y[o] += sum_{j in list} W[o][j] x_j for W in ggml order [n_out][n_in] (down
 *   projection as stored in GGUF). Defined as a dense matvec of the masked x (x_j zeroed off
 *   the list), with blocks that hold no listed column skipped. Every row still
 *   reads every block that holds one listed column: with lists denser than 1/32 (1/256 for
 *   K-quants) almost nothing is saved, so this layout is for the few hot columns on the GPU
 *   side or for unsplit weights;
 * - t_rows: the transposed down layout, Wt [n_ff][n_embd] (what PowerInfer stores), where a
 *   neuron is a contiguous row: y[c] += sum_{j in list} x_j * Wt[j][c], list order, each row
 *   dequantized (as ggml's dequantize_row_*) and accumulated with fmaf(x_j, w, y[c]). Reads
 *   only the listed rows' bytes, so its cost is proportional to the list: the efficient layout
 *   for the CPU's cold neurons. No activation quantization (x_j stays F32).
 *
 * Conventions: pointers are host memory; W, x, idx are read only and must not overlap y; no
 * alignment is needed (blocks are copied out). Every function validates its arguments and
 * returns SL_ERR_INVALID naming the argument (NULL pointer, bad count, cols not a multiple of
 * the block size, index out of range), SL_ERR_UNSUPPORTED naming a type outside the set,
 * SL_ERR_NOMEM if a scratch allocation fails. Pure; thread-safe; no global state. */
#ifndef SL_KERNELS_REF_MATVEC_H
#define SL_KERNELS_REF_MATVEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* True for the fourteen weight types above. */
bool sl_ref_matvec_supported(uint32_t type);
/* Not a GGUF type: IQ1_M's activation layout (above), 356 bytes a block. */
enum { SL_ACT_Q8_K8 = 0x100 + 13 }; /* beside repack.h's SL_TYPE_Q4_K_R8, 0x100 + 12 */
/* Activation type for a weight type (SL_GGML_Q8_0, Q8_1, Q8_K, SL_ACT_Q8_K8 or F32);
 * UINT32_MAX if the weight type is unsupported. */
uint32_t sl_ref_matvec_act_type(uint32_t type);
/* Bytes of one weight row of `cols` elements; 0 for an unsupported type, cols <= 0, cols not
 * a multiple of the block size, or overflow. */
size_t sl_ref_matvec_row_bytes(uint32_t type, int64_t cols);
/* Bytes of one quantized activation row (the act type's row of `cols` elements); 0 as above. */
size_t sl_ref_matvec_act_bytes(uint32_t type, int64_t cols);

/* Quantizes x[cols] into the activation format of weight type `type` (act_bytes(type, cols)
 * bytes at xq; for F32 activations a plain copy). */
sl_status sl_ref_matvec_quant_act(uint32_t type, const float *x, int64_t cols, void *xq,
                                  sl_error *err);
/* *out = dot(one weight row, one quantized activation row), in the order defined above. */
sl_status sl_ref_matvec_dot(uint32_t type, const void *w_row, const void *xq, int64_t cols,
                            float *out, sl_error *err);
/* Dequantizes one weight row into y[cols] (ggml's dequantize_row_* formulas). */
sl_status sl_ref_matvec_dequant_row(uint32_t type, const void *w_row, int64_t cols, float *y,
                                    sl_error *err);

/* Y[b][r] = dot(W row r, X[b]) for b < n_batch (1..64 is the intended range, any n_batch >= 1
 * works), X [n_batch][cols] floats, Y [n_batch][rows]. n_batch == 1 is the matvec. Each
 * column's result is bit-identical to a separate call with n_batch = 1. */
sl_status sl_ref_matvec(uint32_t type, const void *w, int64_t rows, int64_t cols,
                        const float *x, int64_t n_batch, float *y, sl_error *err);

/* Row-gathered: for i < n_idx, r = idx[i] (0 <= r < rows, repeats allowed): compact
 * (scatter == false): Y[b][i] = dot(W row r, X[b]), Y is [n_batch][n_idx]; scattered:
 * Y[b][r] = dot(...), Y is [n_batch][rows] and unlisted entries keep their values. */
sl_status sl_ref_matvec_rows(uint32_t type, const void *w, int64_t rows, int64_t cols,
                             const int32_t *idx, int64_t n_idx, bool scatter, const float *x,
                             int64_t n_batch, float *y, sl_error *err);

/* Column-listed, ggml order: W [rows = n_out][cols = n_in], x [n_batch][cols],
 * y [n_batch][rows] accumulated: y[b][o] += dot(W row o, quant(x[b] masked to idx)).
 * idx entries in [0, cols); repeats are harmless (the mask is a set). */
sl_status sl_ref_matvec_cols(uint32_t type, const void *w, int64_t rows, int64_t cols,
                             const int32_t *idx, int64_t n_idx, const float *x,
                             int64_t n_batch, float *y, sl_error *err);

/* Transposed layout: Wt [rows = n_ff][cols = n_embd], x [n_batch][rows], y [n_batch][cols]
 * accumulated: y[b][c] = fmaf(x[b][j], Wt[j][c], y[b][c]) for j = idx[0], idx[1], ... in
 * list order (a repeated j is added twice). */
sl_status sl_ref_matvec_t_rows(uint32_t type, const void *wt, int64_t rows, int64_t cols,
                               const int32_t *idx, int64_t n_idx, const float *x,
                               int64_t n_batch, float *y, sl_error *err);

#endif
