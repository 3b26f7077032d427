/* runtime/engine/threads.c: sl_model_options_threads is what the options ask for, sl_model_info's
 * n_threads what the engine sizes its pool by (one fewer beside a device that computes part of
 * the layers, on >= 4 CPUs, when the options leave the count open), and sl_ctx_parallel_for runs
 * on that pool: every index once, thread ids below the count, the caller alone without a
 * pool. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N = 4096 };

typedef struct cover {
    atomic_int hits[N];
    atomic_int max_thread, bad_thread;
    atomic_int used[SL_N_THREADS_MAX];
} cover;

static void mark(void *user, int64_t begin, int64_t end, int thread)
{
    cover *c = user;
    if (thread < 0 || thread >= SL_N_THREADS_MAX) {
        atomic_fetch_add(&c->bad_thread, 1);
        return;
    }
    atomic_fetch_add(&c->used[thread], 1);
    int m = atomic_load(&c->max_thread);
    while (thread > m && !atomic_compare_exchange_weak(&c->max_thread, &m, thread)) {
    }
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void check_rule(void)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int cores = online < 1 ? 1 : online > SL_N_THREADS_MAX ? SL_N_THREADS_MAX : (int)online;
    sl_model_options o = sl_model_options_default();
    CHECK(sl_model_options_threads(&o) == cores); /* the default: 0, the CPUs online */
    CHECK(sl_model_options_threads(NULL) == cores);
    o.n_threads = 3;
    CHECK(sl_model_options_threads(&o) == 3);
    o.n_threads = -5;
    CHECK(sl_model_options_threads(&o) == cores);
    o.n_threads = SL_N_THREADS_MAX + 7;
    CHECK(sl_model_options_threads(&o) == SL_N_THREADS_MAX);
}

/* The context of a model opened with n_threads covers [0, N) once per index on
 * sl_model_options_threads threads. */
static void check_ctx(const char *path, int n_threads)
{
    sl_model_options mo = sl_model_options_default();
    mo.placement = SL_PLACE_CPU;
    mo.io = SL_LOAD_PREAD;
    mo.n_threads = n_threads;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error e = {0};
    CHECK_MSG(sl_model_open(path, &mo, &m, &e) == SL_OK, "open: %s", e.msg);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = 16;
    CHECK_MSG(m && sl_ctx_create(m, &co, &c, &e) == SL_OK, "ctx: %s", e.msg);
    cover *cv = calloc(1, sizeof *cv);
    if (!c || !cv) goto out;
    sl_model_info mi;
    sl_model_info_get(m, &mi);
    const int want = mi.n_threads;
    CHECK(want == sl_model_options_threads(&mo)); /* CPU placement: what the options ask */
    CHECK_MSG(sl_ctx_parallel_for(c, N, 16, mark, cv, &e) == SL_OK, "parallel_for: %s", e.msg);
    int once = 0, busy = 0;
    for (int i = 0; i < N; i++) once += atomic_load(&cv->hits[i]) == 1;
    for (int t = 0; t < SL_N_THREADS_MAX; t++) busy += atomic_load(&cv->used[t]) > 0;
    CHECK_MSG(once == N, "%d threads: %d of %d indices run exactly once", n_threads, once, N);
    CHECK(atomic_load(&cv->bad_thread) == 0);
    CHECK_MSG(atomic_load(&cv->max_thread) < want, "%d threads: thread id %d", n_threads,
              atomic_load(&cv->max_thread));
    /* chunks are handed out dynamically (a busy machine may leave a worker without one), so
     * only the bounds: no more threads than the rule gives, the caller alone for 1 */
    CHECK_MSG(busy >= 1 && busy <= want, "%d threads: %d took part", n_threads, busy);
    /* the pool's argument checks reach the caller */
    CHECK(sl_ctx_parallel_for(c, -1, 1, mark, cv, &e) == SL_ERR_INVALID);
    CHECK(sl_ctx_parallel_for(c, 4, 0, mark, cv, &e) == SL_ERR_INVALID);
    CHECK(sl_ctx_parallel_for(c, 4, 1, NULL, cv, &e) == SL_ERR_INVALID);
    CHECK(sl_ctx_parallel_for(NULL, 4, 1, mark, cv, &e) == SL_ERR_INVALID);
out:
    free(cv);
    sl_ctx_destroy(c);
    sl_model_close(m);
}

/* The pool's count by placement on the sim device: one fewer only where layers compute on
 * both sides (here -ngl of half the layers), the options leave it open and there are >= 4
 * CPUs (the GPU machine's 16; a 2-core machine keeps both); an explicit count is kept. */
static void check_beside_device(const char *path, int n_layer)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int all = sl_model_options_threads(NULL);
    const struct {
        sl_placement pl;
        int ngl, n_threads, want;
    } cases[] = {
        {SL_PLACE_CPU, 0, 0, all},
        {SL_PLACE_GPU, 0, 0, all},
        {SL_PLACE_LAYERS, n_layer / 2, 0, online >= 4 ? all - 1 : all},
        {SL_PLACE_LAYERS, n_layer / 2, 3, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_model_options mo = sl_model_options_default();
        mo.placement = cases[i].pl;
        mo.gpu_layers = cases[i].ngl;
        mo.n_threads = cases[i].n_threads;
        mo.device = "sim";
        mo.io = SL_LOAD_PREAD;
        sl_model *m = NULL;
        sl_error e = {0};
        CHECK_MSG(sl_model_open(path, &mo, &m, &e) == SL_OK, "open: %s", e.msg);
        if (!m) continue;
        sl_model_info mi;
        sl_model_info_get(m, &mi);
        CHECK_MSG(mi.n_threads == cases[i].want, "case %zu (placement %d, ngl %d, n_threads %d):"
                  " %d threads, want %d of %ld CPUs", i, (int)cases[i].pl, cases[i].ngl,
                  cases[i].n_threads, mi.n_threads, cases[i].want, online);
        sl_model_close(m);
    }
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char path[600];
    snprintf(path, sizeof path, "%s/threads_test_%d.gguf", tmp ? tmp : "/tmp", (int)getpid());
    tm_params p;
    tm_defaults("llama", &p);
    sl_error e = {0};
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "write: %s", e.msg);
    check_rule();
    check_ctx(path, 1);
    check_ctx(path, 3);
    check_beside_device(path, p.n_layer);
    unlink(path);
    return sl_test_finish("threads_test");
}
