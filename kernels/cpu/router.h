/* kernels/cpu/router: top-k expert routing of a batch of tokens (kernels/ref/ops.h's
 * sl_ref_router_topk per token), over a thread pool.
 *
 * Same results as the reference, bit for bit: the common gatings (softmax then top-k: Mixtral,
 * Qwen2/3-MoE, OLMoE; top-k then softmax: gpt-oss) without a selection bias or groups take a
 * path that does the reference's arithmetic (double softmax, the same ranking: larger score
 * first, ties to the lower expert) without its allocation, its O(k^2 E) selection and its
 * per-call checks; any other configuration (sigmoid, a bias, group-limited routing, more than
 * SL_CPU_ROUTER_MAX_EXPERTS experts) and any token holding a non-finite logit run the reference
 * itself. Tokens are split over the pool. Errors are the reference's (the first failing
 * token's). */
#ifndef SL_KERNELS_CPU_ROUTER_H
#define SL_KERNELS_CPU_ROUTER_H

#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "kernels/ref/ops.h"
#include "base/status.h"

enum { SL_CPU_ROUTER_MAX_EXPERTS = 1024 };

/* logits [n][p->n_expert] -> idx [n][p->k], w [n][p->k]; pool NULL: the calling thread. */
sl_status sl_cpu_router_topk(sl_cpu_pool *pool, const float *logits, int64_t n,
                             const sl_router_params *p, int32_t *idx, float *w, sl_error *err);

#endif
