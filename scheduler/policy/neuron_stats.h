/* scheduler/policy/neuron_stats: how often and how strongly each FFN neuron activates — the input of
 * hot/cold placement (PowerInfer's profile; `tools/run place profile`).
 *
 * A neuron j of a token's FFN is active when its activation a_j = act(gate_j x) * (up_j x)
 * satisfies |a_j| > SL_NEURON_ACTIVE_FRAC * rms(a) over the token's neurons: for ReLU FFNs that
 * is essentially a_j != 0; for SwiGLU/GeGLU, whose activations are never exactly zero, it
 * separates the neurons that matter for that token from the long tail of small ones. The mean
 * magnitude is sum |a_j| / tokens.
 * Invariant: active[j] <= n_tokens for every j; mag_sum[j] >= 0.
 */
#ifndef SL_SCHEDULER_NEURON_STATS_H
#define SL_SCHEDULER_NEURON_STATS_H

#include <stdint.h>

#include "base/status.h"

#define SL_NEURON_ACTIVE_FRAC 0.1

typedef struct sl_neuron_stats {
    int64_t n_neuron;
    uint64_t n_tokens;
    uint64_t *active;   /* [n_neuron] */
    double *mag_sum;    /* [n_neuron] */
} sl_neuron_stats;

sl_status sl_neuron_stats_init(sl_neuron_stats *s, int64_t n_neuron, sl_error *err);
/* Adds n tokens' activations a [n][n_neuron] (host memory). */
void sl_neuron_stats_add(sl_neuron_stats *s, const float *a, int64_t n);
sl_status sl_neuron_stats_validate(const sl_neuron_stats *s, sl_error *err);
void sl_neuron_stats_free(sl_neuron_stats *s);

#endif
