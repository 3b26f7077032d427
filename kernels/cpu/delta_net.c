/* kernels/cpu/delta_net: see delta_net.h. */
#include "kernels/cpu/delta_net.h"

typedef struct gdn_job {
    const sl_gdn_dims *d;
    const float *y, *z, *g, *beta, *norm_w;
    int64_t n;
    float *state, *out;
} gdn_job;

static void gdn_chunk(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const gdn_job *j = ctx;
    sl_ref_gdn_heads(j->d, j->y, j->z, j->g, j->beta, j->norm_w, j->n, j->state, j->out,
                     (int32_t)begin, (int32_t)end);
}

sl_status sl_cpu_gdn_heads(sl_cpu_pool *pool, const sl_gdn_dims *d, const float *y,
                           const float *z, const float *g, const float *beta,
                           const float *norm_w, int64_t n, float *state, float *out,
                           sl_error *err)
{
    sl_status st = sl_gdn_dims_check(d, err);
    if (st) return st;
    gdn_job j = {d, y, z, g, beta, norm_w, n, state, out};
    return sl_cpu_pool_parallel_for(pool, d->n_v_heads, 1, gdn_chunk, &j, err);
}
