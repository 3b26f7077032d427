/* scheduler/expert_ffn: the one CPU routine for an expert's (or any SwiGLU/GeGLU FFN part's)
 * feed-forward, used by every scheduler (moe_cpu.c, fetch.c) so their results cannot drift.
 *
 * Why split in two stages: the fetching scheduler runs gate+up+act on the CPU while the down
 * matrix is still in flight, then down on either side; the CPU scheduler runs both stages
 * back to back. For m rows x [m][n_embd]:
 *   sl__expert_gate_up: g [m][n_ff] = act(Wg x + bg, Wu x + bu)   (u [m][n_ff] is scratch)
 *   sl__expert_down:    d [m][n_embd] = Wd g + bd
 * with expert e's biases of L (moe.h; none when L has none). n_ff is expert e's width
 * (sl_moe_expert_ff: one part of a hot/cold split has its own per expert; rows of g and u in
 * sl__expert_gate_up_token stay at stride L->n_ff).
 * Kernel sequence (the bits of a result depend on it): when gate and up share a type and
 * activations are quantized (mv->f32_act false), x is quantized once into `work` and both
 * matvecs read it (the _q kernels); otherwise each matvec quantizes (or not) on its own.
 * `work` holds sl__expert_work_bytes bytes; `pool` may be NULL (calling thread only).
 */
#ifndef SL_SCHEDULER_EXPERT_FFN_H
#define SL_SCHEDULER_EXPERT_FFN_H

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "scheduler/moe/moe.h"

/* Workspace bytes for up to m rows of layer L's experts (0: a type has no CPU matvec). */
size_t sl__expert_work_bytes(const sl_moe_layer *L, int64_t m);

sl_status sl__expert_gate_up(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                             sl_cpu_pool *pool, const sl_moe_layer *L, int32_t e,
                             const void *wg, const void *wu, const float *x, int64_t m,
                             float *g, float *u, void *work, size_t work_cap, sl_error *err);

/* One token x [n_embd] through the gate/up stage of k experts (1 <= k <=
 * SL_CPU_SPLIT_MAX_PARTS / 2; experts[i] may repeat) in one pool call (sl_cpu_matvec_multi):
 * g, u [k][n_ff], row i expert experts[i]'s, with the bits k sl__expert_gate_up calls with
 * m = 1 give (the multi call's rows equal single calls'; f32_act runs them one by one).
 * work: at least sl_cpu_matvec_multi_work_bytes of the 2k matrices (sl__expert_work_bytes
 * for m >= 2 is enough). */
sl_status sl__expert_gate_up_token(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                                   sl_cpu_pool *pool, const sl_moe_layer *L,
                                   const int32_t *experts, int k, const float *x, float *g,
                                   float *u, void *work, size_t work_cap, sl_error *err);

sl_status sl__expert_down(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                          const sl_moe_layer *L, int32_t e, const void *wd, const float *g,
                          int64_t m, float *d, void *work, size_t work_cap, sl_error *err);

/* One token's down stage of k experts (as sl__expert_gate_up_token: 1 <= k <=
 * SL_CPU_SPLIT_MAX_PARTS / 2) in one pool call: d [k][n_embd], row i = expert experts[i]'s
 * down projection of g [i][n_ff] plus its bias, the bits of k sl__expert_down calls with
 * m = 1 (g's rows at stride L->n_ff; experts of other widths, as in a hot/cold part, run
 * one call each). work: as for sl__expert_gate_up_token. */
sl_status sl__expert_down_token(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                const sl_moe_layer *L, const int32_t *experts, int k,
                                const float *g, float *d, void *work, size_t work_cap,
                                sl_error *err);

/* Many groups at once (the CPU scheduler's prefill): group i is expert experts[i] over m[i]
 * (>= 1) rows, the groups' rows back to back (M = sum m rows in all). xq: the M rows of x
 * quantized for type_gate (sl_cpu_matvec_quant_act, rows act_bytes apart), which must equal
 * type_up, every expert n_ff wide (no ff_at), and not in f32_act mode (SL_ERR_INVALID
 * otherwise: use sl__expert_gate_up). One pool call for every gate and up: g, u [M][n_ff]
 * the products, before the biases and activation (sl__expert_down_groups applies them).
 * grp: 2 * n_groups entries. */
sl_status sl__expert_gate_up_groups(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                    const sl_moe_layer *L, const int32_t *experts,
                                    const int64_t *m, int64_t n_groups, const void *xq, float *g,
                                    float *u, sl_cpu_matvec_group *grp, sl_error *err);
/* The rest of those groups: g = act(g + bg, u + bu) in place and quantized into gq in one pool
 * call (row by row: no thread waits on a serial activation), then d [M][n_embd] = each
 * group's down of its rows of g (+ bias) in another; g, d and the bits are
 * sl__expert_gate_up's and sl__expert_down's per group. gq: sl_cpu_matvec_work_bytes(type_down,
 * n_ff, M) bytes; grp: n_groups entries. */
sl_status sl__expert_down_groups(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                                 sl_cpu_pool *pool, const sl_moe_layer *L, const int32_t *experts,
                                 const int64_t *m, int64_t n_groups, float *g, float *u,
                                 void *gq, size_t gq_bytes, float *d, sl_cpu_matvec_group *grp,
                                 sl_error *err);

#endif
