/* runtime/engine/cpu_threads.c: see cpu_threads.h. */
#include "runtime/engine/cpu_threads.h"

#include "kernels/cpu/pool.h"

static int clamp_threads(long n)
{
    return n < 1 ? 1 : n > SL_CPU_POOL_MAX_THREADS ? SL_CPU_POOL_MAX_THREADS : (int)n;
}

sl__cpu_plan sl__cpu_threads(const sl__cpu_facts *f)
{
    sl__cpu_plan p = {.n_threads = 1, .numa_node = f->cpus_listed ? -1 : f->numa_node};
    if (p.numa_node < 0) p.numa_node = -1;
    if (f->n_threads > 0 || f->cpus_listed) {
        p.n_threads = clamp_threads(f->n_threads > 0 ? f->n_threads : f->cpus_listed);
        return p;
    }
    const int n = clamp_threads(p.numa_node >= 0 && f->node_cpus > 0 ? f->node_cpus : f->online);
    p.n_threads = f->both_sides && n >= SL__THREADS_LEAVE_MIN ? n - 1 : n;
    return p;
}
