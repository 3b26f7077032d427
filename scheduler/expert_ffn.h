/* scheduler/expert_ffn: the one CPU routine for an expert's (or any SwiGLU/GeGLU FFN part's)
 * feed-forward, used by every scheduler (moe_cpu.c, fetch.c) so their results cannot drift.
 *
 * Why split in two stages: the fetching scheduler runs gate+up+act on the CPU while the down
 * matrix is still in flight, then down on either side; the CPU scheduler runs both stages
 * back to back. For m rows x [m][n_embd]:
 *   sl__expert_gate_up: g [m][n_ff] = act(Wg x + bg, Wu x + bu)   (u [m][n_ff] is scratch)
 *   sl__expert_down:    d [m][n_embd] = Wd g + bd
 * with expert e's biases of L (moe.h; none when L has none).
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
#include "scheduler/moe.h"

/* Workspace bytes for up to m rows of layer L's experts (0: a type has no CPU matvec). */
size_t sl__expert_work_bytes(const sl_moe_layer *L, int64_t m);

sl_status sl__expert_gate_up(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                             sl_cpu_pool *pool, const sl_moe_layer *L, int32_t e,
                             const void *wg, const void *wu, const float *x, int64_t m,
                             float *g, float *u, void *work, size_t work_cap, sl_error *err);

sl_status sl__expert_down(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                          const sl_moe_layer *L, int32_t e, const void *wd, const float *g,
                          int64_t m, float *d, void *work, size_t work_cap, sl_error *err);

#endif
