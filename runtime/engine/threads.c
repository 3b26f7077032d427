/* runtime/engine/threads.c: the CPU threads a model computes with (sluice.h) — the one rule for how
 * many (sl_model_options_threads: the engine's pool, and every tool that sizes threads of its
 * own to match it) and the loan of a context's pool to its caller between evaluations
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

sl_status sl_ctx_parallel_for(sl_ctx *c, int64_t n, int64_t grain, sl_ctx_work_fn fn,
                              void *user, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_parallel_for: NULL context");
    /* the pool's own checks (n, grain, fn, a call already running) name what is wrong */
    return sl_cpu_pool_parallel_for(c->pool, n, grain, fn, user, err);
}
