/* runtime/engine/threads.c: the CPU threads a model computes with (sluice.h) — the one rule for how
 * many (sl_model_options_threads: what the options ask for, which every tool that sizes threads
 * of its own matches; sl__model_threads: the engine's pool, one fewer where a device computes
 * beside it) and the loan of a context's pool to its caller between evaluations
 * (sl_ctx_parallel_for), so that a front end's per-row work runs on the same threads instead of
 * a second set. */
#include <unistd.h>

#include "runtime/engine/ctx.h"

_Static_assert(SL_N_THREADS_MAX == SL_CPU_POOL_MAX_THREADS, "sluice.h's thread limit");

int sl_model_options_threads(const sl_model_options *opt)
{
    /* a struct of another layout is not read (sl_model_open refuses it with a message) */
    long nt = opt && opt->struct_size == sizeof *opt ? opt->n_threads : 0;
    if (nt <= 0) nt = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1) return 1;                                     /* unknown */
    return nt > SL_N_THREADS_MAX ? SL_N_THREADS_MAX : (int)nt; /* all cores of a big node */
}

/* Fewer CPUs than this keep every one computing: leaving one of 2 or 3 costs a third or half
 * of the host's part, more than the contention it avoids. */
enum { LEAVE_ONE_MIN = 4 };

/* Whether m's layers compute on both sides: matrices of some layer on the host while a
 * device computes others (-ngl, --n-cpu-moe, experts-cpu, hot-cold splits, overrides). */
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

int sl__model_threads(const sl_model *m)
{
    const int nt = sl_model_options_threads(&m->opt);
    /* The host threads of a device beside the pool: on cuda the thread that queued the token
     * waits for its logits spinning (CUDA's default on a machine with more cores than
     * contexts) and the driver's callback thread runs the host parts; the H100 run of
     * 2026-11-24 measured gate+up 2.7x slower while 16 workers shared 16 cores with them
     * (../shared/GPU-REVIEW.md). An explicit n_threads or CPU list is taken as given. */
    if (m->opt.n_threads > 0 || m->opt.cpus || nt < LEAVE_ONE_MIN || !layers_on_both_sides(m))
        return nt;
    return nt - 1;
}

sl_status sl_ctx_parallel_for(sl_ctx *c, int64_t n, int64_t grain, sl_ctx_work_fn fn,
                              void *user, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_parallel_for: NULL context");
    /* the pool's own checks (n, grain, fn, a call already running) name what is wrong */
    return sl_cpu_pool_parallel_for(c->pool, n, grain, fn, user, err);
}
