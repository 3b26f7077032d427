/* runtime/engine/cpu_threads.c: see cpu_threads.h. */
#include "runtime/engine/cpu_threads.h"

#include "kernels/cpu/pool.h"

static int clamp_threads(long n)
{
    return n < 1 ? 1 : n > SL_CPU_POOL_MAX_THREADS ? SL_CPU_POOL_MAX_THREADS : (int)n;
}

sl__cpu_plan sl__cpu_threads(const sl__cpu_facts *f)
{
    sl__cpu_plan p = {.n_threads = 1, .numa_node = -1, .auto_node = false};
    if (!f->cpus_listed) {
        if (f->numa_node >= 0) {
            p.numa_node = f->numa_node;
        } else if (f->pool_node >= 0 && f->pool_cpus > 0 && f->n_threads <= f->pool_cpus) {
            /* (an explicit count past the node's CPUs is not packed onto them) */
            p.numa_node = f->pool_node;
            p.auto_node = true;
        }
    }
    if (f->n_threads > 0 || f->cpus_listed) {
        p.n_threads = clamp_threads(f->n_threads > 0 ? f->n_threads : f->cpus_listed);
        return p;
    }
    /* the node's CPUs where the pool's node is the one bound to; else the CPUs online */
    const bool node_known = p.numa_node >= 0 && p.numa_node == f->pool_node && f->pool_cpus > 0;
    const int n = clamp_threads(node_known ? f->pool_cpus : f->online);
    p.n_threads = f->both_sides && n >= SL__THREADS_LEAVE_MIN ? n - 1 : n;
    return p;
}
