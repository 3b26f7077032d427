/* runtime/engine/threads.c: the CPU threads a model computes with (sluice.h): what the options
 * ask for (sl_model_options_threads, which tools that size threads of their own match), what
 * the engine's pool gets (sl__model_cpu_plan: cpu_threads.h's rule on the model's facts - the
 * named node's CPUs, the layers' sides), and the loan of a context's pool to its caller between evaluations
 * (sl_ctx_parallel_for), so that a front end's per-row work runs on the same threads instead of
 * a second set. */
#include <unistd.h>

#include "runtime/engine/cpu_threads.h"
#include "runtime/engine/ctx.h"

_Static_assert(SL_N_THREADS_MAX == SL_CPU_POOL_MAX_THREADS, "sluice.h's thread limit");

int sl_model_options_threads(const sl_model_options *opt)
{
    /* cpu_threads.h's rule with nothing known but the count asked (a struct of another
     * layout is not read: sl_model_open refuses it with a message) */
    const sl__cpu_facts f = {
        .n_threads = opt && opt->struct_size == sizeof *opt ? opt->n_threads : 0,
        .numa_node = -1, .online = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    return sl__cpu_threads(&f).n_threads;
}

/* Whether m's layers compute on both sides: matrices of some layer on the host while a
 * device computes others (-ngl, --n-cpu-moe, experts-cpu, hot-cold splits, overrides). The
 * output matrix alone on the host (-ngl n_layer) is one matvec a token, after the device's
 * work: it keeps every thread. */
static bool layers_on_both_sides(const sl_model *m)
{
    if (!m->dev || m->plan.mode == SL_PLACE_CPU || !m->place_t || !m->plan.on_device) return false;
    bool host = false, dev = false;
    for (size_t i = 0; i < m->plan.n && !(host && dev); i++) {
        const sl_place_tensor *t = &m->place_t[i];
        if (t->layer < 0 || t->vector) continue;
        if (m->plan.split && m->plan.split[i]) host = dev = true;
        else if (m->plan.on_device[i]) dev = true;
        else host = true;
    }
    return host && dev;
}

sl__cpu_plan sl__model_cpu_plan(const sl_model *m)
{
    sl__cpu_facts f = {.n_threads = m->opt.n_threads, .numa_node = m->opt.numa_node,
                       .online = (int)sysconf(_SC_NPROCESSORS_ONLN),
                       .both_sides = layers_on_both_sides(m)};
    if (m->opt.cpus) {
        sl_cpu_set set;
        sl_error e;
        /* a bad list fails the pool's creation, naming it; here it counts as the CPUs online */
        f.cpus_listed = sl_topo_parse_cpu_list(m->opt.cpus, &set, &e) == SL_OK && set.count > 0
                            ? set.count : (f.online > 0 ? f.online : 1);
    }
    if (m->hostpool && f.numa_node >= 0) {
        /* the host pool is bound to the options' node (or, a runtime's, to another one) */
        sl_hostpool_placement hp;
        sl_hostpool_placement_get(m->hostpool, &hp);
        if (hp.node == f.numa_node) f.node_cpus = hp.node_cpus;
    }
    return sl__cpu_threads(&f);
}


sl_status sl_ctx_parallel_for(sl_ctx *c, int64_t n, int64_t grain, sl_ctx_work_fn fn,
                              void *user, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_parallel_for: NULL context");
    /* the pool's own checks (n, grain, fn, a call already running) name what is wrong */
    return sl_cpu_pool_parallel_for(c->pool, n, grain, fn, user, err);
}
