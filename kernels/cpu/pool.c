/* Thread pool for data-parallel kernels (see pool.h).
 *
 * Invariants:
 * - `generation` counts calls; a worker that sees a new generation g tries to join g once.
 * - gate = (g mod 2^32) << 32 | CLOSED? | joined: a worker joins call g by one CAS while g's
 *   gate is open, and only a joined worker reads the job (fn, ctx, n, grain). The caller
 *   closes the gate once every chunk is claimed and waits only for the workers that joined
 *   (finished == joined), so a worker still asleep or descheduled costs the call nothing;
 *   fn and ctx outlive every use.
 * - next_chunk only grows within a call; chunk c covers [c * grain, min(n, (c + 1) * grain)).
 * - busy is 1 exactly while a parallel_for runs (it guards against concurrent calls).
 */
#include "kernels/cpu/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SL_CPU_RELAX() _mm_pause()
#else
#define SL_CPU_RELAX() ((void)0)
#endif

/* Pauses before sleeping on the condition variable, so the workers stay awake across the short
 * gaps between one layer's calls (in a prefill eval now all under 25 us): measured 31 us on the
 * development VM (a Sapphire Rapids-class Xeon: 2000 PAUSEs); ~100 us at the ~140-cycle PAUSE
 * Intel documents for Skylake-SP and later, a few us on cores with the older ~10-cycle PAUSE.
 * A longer clock-based spin with sched_yield ran 15-38% slower on a loaded box. */
enum { SPIN_ITERS = 2000 };

#define GATE_CLOSED ((uint64_t)1 << 31)
#define GATE_JOINED (GATE_CLOSED - 1)

typedef struct worker {
    struct sl_cpu_pool *pool;
    pthread_t tid;
    int index;
    bool started; /* the thread was created (joined on destroy) */
} worker;

struct sl_cpu_pool {
    int n_threads;
    worker *workers; /* n_threads - 1 */

    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait here for a new generation or quit */
    pthread_cond_t done; /* the caller waits here for joined workers / start-up */
    atomic_uint_fast64_t generation;
    atomic_uint_fast64_t gate; /* the call's generation, closed flag, workers joined */
    atomic_int finished;       /* joined workers done with the call */
    atomic_int quit;
    atomic_int busy;
    atomic_uint_fast64_t awake_until; /* CLOCK_MONOTONIC ns: workers spin, not sleep, before it */
    atomic_uint_fast64_t sleeps;      /* workers' waits on `wake` (sl_cpu_pool_sleeps) */

    /* the current job (written by the caller before generation is bumped) */
    sl_cpu_pool_fn fn;
    void *ctx;
    int64_t n, grain, n_chunks;
    atomic_int_fast64_t next_chunk;

    /* start-up: binding results */
    const sl_topo *topo;
    int numa_node;
    const char *cpus;
    int n_ready;
    sl_status bind_status;
    sl_error bind_err;

    /* sl_cpu_pool_scratch's buffer (64-byte aligned, scratch_bytes; NULL: none yet), held by
     * one caller at a time (scratch_held) */
    void *scratch;
    size_t scratch_bytes;
    atomic_int scratch_held;
};

static void run_chunks(sl_cpu_pool *p, int thread)
{
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&p->next_chunk, 1, memory_order_relaxed);
        if (c >= p->n_chunks) return;
        const int64_t b = c * p->grain, e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->ctx, b, e, thread);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sl_cpu_pool *p = w->pool;
    sl_error e;
    sl_error_clear(&e);
    sl_status s = SL_OK;
    if (p->numa_node >= 0) s = sl_topo_bind_thread_to_node(p->topo, p->numa_node, &e);
    else if (p->cpus) s = sl_topo_bind_thread_to_cpus(p->topo, p->cpus, &e);
    pthread_mutex_lock(&p->mu);
    if (s && !p->bind_status) {
        p->bind_status = s;
        sl_error_set(&p->bind_err, s, "worker %d: %s", w->index, e.msg);
    }
    p->n_ready++;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);

    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
        for (int i = 0; g == seen && !atomic_load(&p->quit); i++) {
            /* past the spin, on while sl_cpu_pool_keep_awake's deadline holds (the clock read
             * every 256 pauses) */
            if (i >= SPIN_ITERS) {
                if (sl_clock_ns() >= atomic_load_explicit(&p->awake_until, memory_order_relaxed))
                    break;
                i -= 256;
            }
            SL_CPU_RELAX();
            g = atomic_load_explicit(&p->generation, memory_order_acquire);
        }
        if (g == seen) {
            atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        /* join call g unless its caller has already claimed every chunk (or moved on) */
        uint64_t v = atomic_load_explicit(&p->gate, memory_order_acquire);
        bool joined = false;
        while ((v >> 32) == (g & 0xffffffffu) && !(v & GATE_CLOSED) && !joined)
            joined = atomic_compare_exchange_weak_explicit(&p->gate, &v, v + 1,
                                                           memory_order_acq_rel,
                                                           memory_order_acquire);
        if (!joined) continue;
        run_chunks(p, w->index);
        atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel);
        if (atomic_load_explicit(&p->gate, memory_order_acquire) & GATE_CLOSED) {
            pthread_mutex_lock(&p->mu); /* the caller may be waiting for this one */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void stop_workers(sl_cpu_pool *p)
{
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads - 1; i++)
        if (p->workers[i].started) pthread_join(p->workers[i].tid, NULL);
}

static void free_pool(sl_cpu_pool *p)
{
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p->scratch);
    free(p);
}

sl_status sl_cpu_pool_create(const sl_cpu_pool_options *opt, sl_cpu_pool **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_pool_create: out is NULL");
    *out = NULL;
    if (!opt) return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_pool_create: options are NULL");
    if (opt->n_threads < 1 || opt->n_threads > SL_CPU_POOL_MAX_THREADS)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_pool_create: n_threads = %d is not in [1, %d]",
                            opt->n_threads, SL_CPU_POOL_MAX_THREADS);
    if (opt->numa_node >= 0 && opt->cpus)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_cpu_pool_create: numa_node = %d and cpus = \"%s\" both given",
                            opt->numa_node, opt->cpus);
    const bool bind = opt->numa_node >= 0 || opt->cpus;
    sl_topo *own_topo = NULL;
    if (bind && !opt->topo) {
        sl_status s = sl_topo_load(&opt->topology, &own_topo, err);
        if (s) return s;
    }
    sl_cpu_pool *p = calloc(1, sizeof *p);
    if (p && opt->n_threads > 1) p->workers = calloc((size_t)opt->n_threads - 1, sizeof *p->workers);
    if (!p || (opt->n_threads > 1 && !p->workers)) {
        if (p) free(p);
        sl_topo_destroy(own_topo);
        return sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_pool_create: no memory for %d threads",
                            opt->n_threads);
    }
    p->n_threads = opt->n_threads;
    p->topo = opt->topo ? opt->topo : own_topo;
    p->numa_node = opt->numa_node;
    p->cpus = opt->cpus;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);

    sl_status s = SL_OK;
    int created = 0;
    for (int i = 0; i < p->n_threads - 1; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->index = i + 1;
        const int rc = pthread_create(&w->tid, NULL, worker_main, w);
        if (rc) {
            s = sl_error_set(err, rc == EAGAIN ? SL_ERR_NOMEM : SL_ERR_IO,
                             "sl_cpu_pool_create: pthread_create of worker %d: %s", i + 1,
                             strerror(rc));
            break;
        }
        w->started = true;
        created++;
    }
    /* Wait until every created worker has tried its bind (the topology and cpus string are
     * only borrowed until then). */
    pthread_mutex_lock(&p->mu);
    while (p->n_ready < created) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    p->topo = NULL;
    p->cpus = NULL;
    sl_topo_destroy(own_topo);
    if (!s && p->bind_status) s = sl_error_set(err, p->bind_status, "sl_cpu_pool_create: %s",
                                               p->bind_err.msg);
    if (s) {
        stop_workers(p);
        free_pool(p);
        return s;
    }
    *out = p;
    return SL_OK;
}

void sl_cpu_pool_destroy(sl_cpu_pool *p)
{
    if (!p) return;
    stop_workers(p);
    free_pool(p);
}

int sl_cpu_pool_threads(const sl_cpu_pool *p) { return p ? p->n_threads : 1; }

void *sl_cpu_pool_scratch(sl_cpu_pool *p, size_t bytes)
{
    int expect = 0;
    if (!p || !atomic_compare_exchange_strong(&p->scratch_held, &expect, 1)) return NULL;
    if (!p->scratch || p->scratch_bytes < bytes) { /* none yet (even for 0 bytes) or short */
        /* grown to the largest request (rounded to 64-byte lines), never shrunk */
        free(p->scratch);
        p->scratch_bytes = 0;
        const size_t n = bytes > SIZE_MAX - 63 ? 0 : bytes ? (bytes + 63) / 64 * 64 : 64;
        p->scratch = n ? aligned_alloc(64, n) : NULL;
        if (!p->scratch) {
            atomic_store(&p->scratch_held, 0);
            return NULL;
        }
        p->scratch_bytes = n;
    }
    return p->scratch;
}

void sl_cpu_pool_scratch_release(sl_cpu_pool *p)
{
    if (p) atomic_store(&p->scratch_held, 0);
}

sl_status sl_cpu_pool_parallel_for(sl_cpu_pool *p, int64_t n, int64_t grain, sl_cpu_pool_fn fn,
                                   void *ctx, sl_error *err)
{
    if (n < 0 || grain < 1 || !fn)
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_cpu_pool_parallel_for: n = %lld, grain = %lld, fn %s: need n >= 0, "
                            "grain >= 1 and a function",
                            (long long)n, (long long)grain, fn ? "set" : "NULL");
    if (n == 0) return SL_OK;
    const int64_t n_chunks = (n - 1) / grain + 1;
    if (!p || p->n_threads == 1 || n_chunks == 1) {
        /* Inline: no handoff for a single chunk (small matvecs stay on the caller). */
        for (int64_t b = 0; b < n; b += grain) fn(ctx, b, b + grain < n ? b + grain : n, 0);
        return SL_OK;
    }
    int expect = 0;
    if (!atomic_compare_exchange_strong(&p->busy, &expect, 1))
        return sl_error_set(err, SL_ERR_INVALID,
                            "sl_cpu_pool_parallel_for: the pool is already running a call");
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    p->n_chunks = n_chunks;
    atomic_store_explicit(&p->next_chunk, 0, memory_order_relaxed);
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    const uint64_t g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->gate, (g & 0xffffffffu) << 32, memory_order_release);
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->generation, g, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_chunks(p, 0);

    /* every chunk is claimed: no worker joins from here; wait for those that did */
    const int joined = (int)(atomic_fetch_or_explicit(&p->gate, GATE_CLOSED,
                                                      memory_order_acq_rel) & GATE_JOINED);
    for (int i = 0;
         i < SPIN_ITERS && atomic_load_explicit(&p->finished, memory_order_acquire) < joined; i++)
        SL_CPU_RELAX();
    if (atomic_load_explicit(&p->finished, memory_order_acquire) < joined) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->finished, memory_order_acquire) < joined)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_store(&p->busy, 0);
    return SL_OK;
}

void sl_cpu_pool_keep_awake(sl_cpu_pool *p, uint64_t ns)
{
    if (!p) return;
    if (ns > SL_CPU_POOL_AWAKE_MAX_NS) ns = SL_CPU_POOL_AWAKE_MAX_NS;
    const uint64_t until = sl_clock_ns() + ns;
    uint64_t cur = atomic_load_explicit(&p->awake_until, memory_order_relaxed);
    while (cur < until && !atomic_compare_exchange_weak_explicit(&p->awake_until, &cur, until,
                                                                 memory_order_relaxed,
                                                                 memory_order_relaxed)) {
    }
}

uint64_t sl_cpu_pool_sleeps(const sl_cpu_pool *p)
{
    return p ? atomic_load_explicit(&p->sleeps, memory_order_relaxed) : 0;
}
