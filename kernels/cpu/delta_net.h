/* kernels/cpu/delta_net: the Gated DeltaNet's per-head recurrence (kernels/ref/delta_net.h)
 * over a thread pool: value heads are independent, so each pool chunk runs the reference on
 * its heads and the result is the reference's, bit for bit, for any thread count. */
#ifndef SL_KERNELS_CPU_DELTA_NET_H
#define SL_KERNELS_CPU_DELTA_NET_H

#include "kernels/cpu/pool.h"
#include "kernels/ref/delta_net.h"

/* sl_ref_gdn_heads over heads [0, Hv) on pool (NULL: the calling thread). */
sl_status sl_cpu_gdn_heads(sl_cpu_pool *pool, const sl_gdn_dims *d, const float *y,
                           const float *z, const float *g, const float *beta,
                           const float *norm_w, int64_t n, float *state, float *out,
                           sl_error *err);

#endif
