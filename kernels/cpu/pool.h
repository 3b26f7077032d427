/* kernels/cpu/pool: a fixed set of worker threads for data-parallel CPU kernels (matvec rows,
 * output column ranges), optionally bound to a NUMA node's CPUs or an explicit CPU list.
 *
 * Model: sl_cpu_pool_parallel_for(pool, n, grain, fn, ctx) splits [0, n) into chunks of `grain`
 * indices (the last one shorter) and calls fn(ctx, begin, end, thread) once per chunk; every
 * index is covered exactly once. Chunks are handed out dynamically (one atomic counter), so a
 * slow or preempted thread does not hold up the rest. The calling thread takes part as thread 0
 * and returns when every chunk has finished; workers are threads 1 .. n_threads-1.
 *
 * Binding: with a NUMA node or CPU list each worker binds itself (alloc/topo.h) before it is
 * counted as started, so sl_cpu_pool_create reports a failed bind. The calling thread is not
 * bound by the pool: bind it with sl_topo_bind_thread_* if it must stay on the node too.
 *
 * Handoff: a call wakes idle workers through one mutex + condition variable; workers and the
 * caller spin (pool.c SPIN_ITERS: 31-100 us, by the CPU's PAUSE) before sleeping, so back-to-back
 * calls (one layer's matvecs) do not pay a futex wake-up each; sl_cpu_pool_keep_awake extends
 * the workers' spin across a known longer gap. The caller waits only for
 * workers that joined the call before every chunk was claimed: one still asleep or
 * descheduled (a loaded machine, a caller other than the pool's usual thread) does not hold
 * the call up.
 *
 * Thread safety: one parallel_for at a time per pool (a second concurrent call gets
 * SL_ERR_INVALID, it never blocks or corrupts); fn must not call back into the same pool.
 * No global state: everything lives in the pool. */
#ifndef SL_KERNELS_CPU_POOL_H
#define SL_KERNELS_CPU_POOL_H

#include <stdint.h>

#include "alloc/topo.h"
#include "base/status.h"

typedef struct sl_cpu_pool sl_cpu_pool;

typedef struct sl_cpu_pool_options {
    int n_threads;        /* total, caller included: 1 .. SL_CPU_POOL_MAX_THREADS */
    int numa_node;        /* OS index to bind workers to; -1: do not bind by node */
    const char *cpus;     /* CPU list ("0-3,8") to bind workers to; NULL: none */
    const sl_topo *topo;  /* topology for binding; NULL: `topology`'s is loaded for it */
    sl_topo_options topology; /* zero: this machine (the engine: SLUICE_TOPOLOGY's, env.c) */
} sl_cpu_pool_options;

enum { SL_CPU_POOL_MAX_THREADS = 1024 };

/* fn's view of one chunk: indices [begin, end), thread in [0, n_threads). */
typedef void (*sl_cpu_pool_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Starts n_threads - 1 workers. SL_ERR_INVALID for a bad count or both numa_node >= 0 and
 * cpus set; binding errors (unknown node, bad list, OS refusal) as alloc/topo.h reports them,
 * prefixed by the worker's number; SL_ERR_NOMEM / SL_ERR_IO when threads cannot be created.
 * *out is NULL on failure (and nothing is left running). */
sl_status sl_cpu_pool_create(const sl_cpu_pool_options *opt, sl_cpu_pool **out, sl_error *err);
/* Stops and joins the workers, frees the pool. NULL allowed. Not during a parallel_for. */
void sl_cpu_pool_destroy(sl_cpu_pool *p);

/* Threads including the caller; 1 for a NULL pool. */
int sl_cpu_pool_threads(const sl_cpu_pool *p);

/* Runs fn over [0, n) in chunks of grain (>= 1); n == 0 calls nothing. A NULL pool runs every
 * chunk on the calling thread (thread 0). SL_ERR_INVALID for n < 0, grain < 1, NULL fn, or a
 * pool already inside a parallel_for. */
sl_status sl_cpu_pool_parallel_for(sl_cpu_pool *p, int64_t n, int64_t grain, sl_cpu_pool_fn fn,
                                   void *ctx, sl_error *err);

/* Workers that find no call spin (PAUSE) instead of sleeping until ns from now (the later of
 * this and any earlier request; at most SL_CPU_POOL_AWAKE_MAX_NS): for a gap the caller knows
 * is short but longer than the spin, such as a GPU layer between two layers of host experts,
 * so the next call does not wait for futex wake-ups. Workers already asleep stay asleep until
 * the next call. NULL: nothing. Thread-safe. */
enum { SL_CPU_POOL_AWAKE_MAX_NS = 100000000 };
void sl_cpu_pool_keep_awake(sl_cpu_pool *p, uint64_t ns);
/* How many times workers have gone to sleep on the condition variable (0 for NULL). */
uint64_t sl_cpu_pool_sleeps(const sl_cpu_pool *p);

/* A buffer of at least `bytes` (64-byte aligned) that the pool keeps across calls for one
 * holder at a time (matvec.c's activation panels): grown to the largest request and freed
 * with the pool, so that a call does not map and fault in fresh pages each time (a buffer
 * malloc'd per call cost a Q6_K MoE file's prompt 10%). NULL for a NULL pool, while another
 * caller holds it, or when memory is short: the caller then allocates its own. Hand it back
 * with sl_cpu_pool_scratch_release before the next sl_cpu_pool_scratch. */
void *sl_cpu_pool_scratch(sl_cpu_pool *p, size_t bytes);
void sl_cpu_pool_scratch_release(sl_cpu_pool *p);

#endif
