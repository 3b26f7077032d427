/* kernels/cpu/matvec: fast CPU matrix x vector / small batch, with the definitions, layouts
 * and argument rules of kernels/ref/matvec.h, split over a thread pool (kernels/cpu/pool.h).
 *
 * Dispatch: sl_cpu_matvec_init() resolves an ISA (sl_cpu_isa of kernels/cpu/ops.h: scalar,
 * AVX2+FMA+F16C, AVX-512 F/BW/VL) once; AVX-512 additionally uses VNNI (vpdpbusd) for the
 * integer dots when the CPU has it. Every ISA's code is compiled in with per-function target
 * attributes (default compile flags), chosen at run time. A type without a SIMD kernel on the
 * chosen ISA runs the scalar code (sl_cpu_matvec_simd_types says which have one).
 * AVX512-BF16 (vdpbf16ps) is deliberately not used: it needs BF16 activations (x would lose
 * 16 bits) and the BF16 GEMV is memory bound, so widening W with a shift costs nothing.
 *
 * Exactness: every path (scalar, AVX2, AVX-512, any thread count, any batch) returns the same
 * bits as the reference, for every type: integer block sums are exact (activation quants lie in
 * [-127, 127], so vpmaddubsw never saturates: |w| <= 128 times |x| <= 127, twice, < 2^15; the
 * narrow types' AVX2 kernels feed unsigned u = w + c <= 31 and subtract c * sum x, adding up to
 * 8 such products in int16, 8 * 31 * 127 < 2^15), and
 * the float work follows the reference's lane order (8 block lanes / 32 element lanes, no FMA
 * in block terms, fmaf for float weights). Rows are split between threads, never a row's sum.
 * Batches (n_batch > 1) of the 32-element block types, K-quants and IQ4_XS run a GEMM (gemm.h:
 * weight blocks unpacked once for many tokens, 8 tokens' block terms per vector) under the same
 * rule.
 * SL_TYPE_Q4_K_R8 (kernels/ref/repack.h, Q4_K with eight rows interleaved, rows % 8 == 0) is
 * taken by every function here with Q4_K's bits: whole groups of eight rows per vector in
 * decode (r8_x86_tmpl.h), a group's rows unpacked together for the GEMM, rows copied out for
 * the row-wise paths and ISAs without its kernel.
 *
 * Activations: the quantized activations need a workspace of sl_cpu_matvec_work_bytes() bytes
 * (caller-owned, any alignment; reuse it across calls: the kernels never allocate). The _q
 * variants take activations already quantized (sl_cpu_matvec_quant_act), so gate and up
 * projections of the same x share one quantization.
 *
 * Threads: pool may be NULL (the calling thread does everything). A call is synchronous; one
 * pool runs one call at a time (see pool.h). sl_cpu_matvec_ctx values are immutable and shareable.
 */
#ifndef SL_KERNELS_CPU_MATVEC_H
#define SL_KERNELS_CPU_MATVEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/ops.h" /* sl_cpu_isa, sl_cpu_features */
#include "kernels/cpu/pool.h"
#include "kernels/cpu/split.h"
#include "base/status.h"

/* A resolved dispatch: isa is never AUTO; vnni only with AVX512. Copyable value. */
typedef struct sl_cpu_matvec_ctx {
    sl_cpu_isa isa;
    bool vnni;
    /* the batch kernels' AMX tile path (gemm_k_amx.c; same bits): set by init where
     * vnni and sl_cpu_features.amx_int8 hold; a caller may clear it (SLUICE_AMX=0, tests) */
    bool amx;
    /* Verification mode: sl_cpu_matvec dequantizes weight rows and dots them with the F32
     * activations in double (no Q8 activation quantization, as the float64 model references
     * compute). Slow; off by default (sl_cpu_matvec_init). */
    bool f32_act;
} sl_cpu_matvec_ctx;

/* Fills *mv for isa given features f (AUTO picks the best). SL_ERR_UNSUPPORTED naming the
 * missing feature; SL_ERR_INVALID for an out-of-range isa or NULL mv. */
sl_status sl_cpu_matvec_init(sl_cpu_matvec_ctx *mv, sl_cpu_isa isa, sl_cpu_features f,
                             sl_error *err);
/* "scalar", "avx2", "avx512", "avx512-vnni", "avx512-amx". Never NULL. */
const char *sl_cpu_matvec_name(const sl_cpu_matvec_ctx *mv);
/* True when `type` has a SIMD kernel on mv's ISA (false: the scalar code runs). */
bool sl_cpu_matvec_has_simd(const sl_cpu_matvec_ctx *mv, uint32_t type);

/* Workspace bytes for n_batch quantized activation rows of `cols` (0 if type/cols invalid). */
size_t sl_cpu_matvec_work_bytes(uint32_t type, int64_t cols, int64_t n_batch);

/* Quantizes X [n_batch][cols] into xq (work_bytes(type, cols, n_batch) bytes), bit-exact to
 * sl_ref_matvec_quant_act row by row. */
sl_status sl_cpu_matvec_quant_act(const sl_cpu_matvec_ctx *mv, uint32_t type, const float *x,
                                  int64_t cols, int64_t n_batch, void *xq, size_t xq_bytes,
                                  sl_error *err);
/* The same, the rows split over pool (NULL: the calling thread); the same bytes. */
sl_status sl_cpu_matvec_quant_act_pool(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                       uint32_t type, const float *x, int64_t cols,
                                       int64_t n_batch, void *xq, size_t xq_bytes, sl_error *err);

/* Y [n_batch][rows] = W [rows][cols] · X [n_batch][cols] (sl_ref_matvec). work: work_bytes. */
sl_status sl_cpu_matvec(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                        const void *w, int64_t rows, int64_t cols, const float *x,
                        int64_t n_batch, float *y, void *work, size_t work_bytes, sl_error *err);
/* The same with activations already quantized by sl_cpu_matvec_quant_act. */
sl_status sl_cpu_matvec_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                          const void *w, int64_t rows, int64_t cols, const void *xq,
                          int64_t n_batch, float *y, sl_error *err);

/* One group of a grouped batch call: Y [n_batch][rows] = W [rows][cols] · Xq, Xq n_batch rows
 * quantized by sl_cpu_matvec_quant_act (x itself for float weights). Groups may share xq. */
typedef struct sl_cpu_matvec_group {
    const void *w, *xq;
    int64_t n_batch;
    float *y;
} sl_cpu_matvec_group;

/* Prefill of many matrices of one type and shape (a MoE layer's used experts: their gate and
 * up, or their down) in one pool call: the row chunks of every group are handed out together,
 * so threads stay busy across groups of very different sizes and pay one handoff, not one
 * per group. Each group's y has the bits sl_cpu_matvec_q gives it. n_groups >= 0; n_batch of a
 * group >= 1. The type and shape are checked even with no groups; SL_ERR_INVALID naming the
 * group for a bad group; not in f32_act mode. */
sl_status sl_cpu_matvec_groups_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                                 int64_t rows, int64_t cols, const sl_cpu_matvec_group *groups,
                                 int64_t n_groups, sl_error *err);

/* One matrix of a multi-matrix call: y [rows] = W [rows][cols] x (cols: the call's; x: the
 * part's own input [cols] when set, e.g. each expert's down projection, else the call's). */
typedef struct sl_cpu_matvec_part {
    uint32_t type;
    const void *w;
    int64_t rows;
    float *y;
    const float *x; /* NULL: the call's x */
} sl_cpu_matvec_part;

/* Single-token decode: several matrices (1 .. SL_CPU_SPLIT_MAX_PARTS, any mix of types) of
 * the same x [cols], e.g. q/k/v or gate/up, in one pool call: x is quantized once per
 * activation type (and input: parts may bring their own x, quantized once each; x may then be
 * NULL when every part has one) and the rows of all parts are split between threads by weight
 * bytes
 * (kernels/cpu/split.h). Each part's y has the bits sl_cpu_matvec gives it (f32_act included).
 * work: sl_cpu_matvec_multi_work_bytes() bytes, any alignment; 0 when an argument is invalid. */
size_t sl_cpu_matvec_multi_work_bytes(const sl_cpu_matvec_part *parts, int n_parts,
                                      int64_t cols);
sl_status sl_cpu_matvec_multi(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                              const sl_cpu_matvec_part *parts, int n_parts, int64_t cols,
                              const float *x, void *work, size_t work_bytes, sl_error *err);

/* Row-gathered (sl_ref_matvec_rows): compact Y [n_batch][n_idx] or scattered Y [n_batch][rows].
 * xq: quantized activations as for sl_cpu_matvec_q. */
sl_status sl_cpu_matvec_rows_q(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                               const void *w, int64_t rows, int64_t cols, const int32_t *idx,
                               int64_t n_idx, bool scatter, const void *xq, int64_t n_batch,
                               float *y, sl_error *err);

/* Column-listed, ggml order (sl_ref_matvec_cols): y[b][o] += ...; work (any alignment):
 * sl_cpu_matvec_cols_work_bytes() = work_bytes + the masked x + block flags + 64 slack. */
size_t sl_cpu_matvec_cols_work_bytes(uint32_t type, int64_t cols, int64_t n_batch);
sl_status sl_cpu_matvec_cols(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                             const void *w, int64_t rows, int64_t cols, const int32_t *idx,
                             int64_t n_idx, const float *x, int64_t n_batch, float *y,
                             void *work, size_t work_bytes, sl_error *err);

/* Transposed down layout (sl_ref_matvec_t_rows): Wt [rows][cols], x [n_batch][rows],
 * y [n_batch][cols] += ... Threads split the output columns (block-aligned), each walking the
 * whole list, so the list order per element is the reference's. No workspace. */
sl_status sl_cpu_matvec_t_rows(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, uint32_t type,
                               const void *wt, int64_t rows, int64_t cols, const int32_t *idx,
                               int64_t n_idx, const float *x, int64_t n_batch, float *y,
                               sl_error *err);

#endif
