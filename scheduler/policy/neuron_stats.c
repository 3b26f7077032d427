/* scheduler/policy/neuron_stats.c: see neuron_stats.h. */
#include "scheduler/policy/neuron_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sl_status sl_neuron_stats_init(sl_neuron_stats *s, int64_t n_neuron, sl_error *err)
{
    memset(s, 0, sizeof *s);
    if (n_neuron <= 0)
        return sl_error_set(err, SL_ERR_INVALID, "neuron stats: %lld neurons",
                            (long long)n_neuron);
    s->active = calloc((size_t)n_neuron, sizeof *s->active);
    s->mag_sum = calloc((size_t)n_neuron, sizeof *s->mag_sum);
    if (!s->active || !s->mag_sum) {
        sl_neuron_stats_free(s);
        return sl_error_set(err, SL_ERR_NOMEM, "neuron stats: out of memory");
    }
    s->n_neuron = n_neuron;
    return SL_OK;
}

void sl_neuron_stats_add(sl_neuron_stats *s, const float *a, int64_t n)
{
    const int64_t F = s->n_neuron;
    for (int64_t t = 0; t < n; t++) {
        const float *row = a + t * F;
        double ss = 0;
        for (int64_t j = 0; j < F; j++) ss += (double)row[j] * row[j];
        const double thr = SL_NEURON_ACTIVE_FRAC * sqrt(ss / (double)F);
        for (int64_t j = 0; j < F; j++) {
            const double v = fabs((double)row[j]);
            s->active[j] += v > thr;
            s->mag_sum[j] += v;
        }
    }
    s->n_tokens += (uint64_t)n;
}

sl_status sl_neuron_stats_validate(const sl_neuron_stats *s, sl_error *err)
{
    for (int64_t j = 0; j < s->n_neuron; j++)
        if (s->active[j] > s->n_tokens || !(s->mag_sum[j] >= 0))
            return sl_error_set(err, SL_ERR_INVALID, "neuron stats: neuron %lld: %llu active of "
                                "%llu tokens, magnitude %g", (long long)j,
                                (unsigned long long)s->active[j],
                                (unsigned long long)s->n_tokens, s->mag_sum[j]);
    return SL_OK;
}

void sl_neuron_stats_free(sl_neuron_stats *s)
{
    free(s->active);
    free(s->mag_sum);
    memset(s, 0, sizeof *s);
}
