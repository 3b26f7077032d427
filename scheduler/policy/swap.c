/* scheduler/policy/swap.c: see swap.h. */
#include "scheduler/policy/swap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

sl_status sl_swap_gate_init(sl_swap_gate *g, sl_error *err)
{
    memset(g, 0, sizeof *g);
    if (pthread_mutex_init(&g->mu, NULL)) goto fail0;
    if (pthread_cond_init(&g->cv, NULL)) goto fail1;
    if (pthread_mutex_init(&g->reload, NULL)) goto fail2;
    return SL_OK;
fail2:
    pthread_cond_destroy(&g->cv);
fail1:
    pthread_mutex_destroy(&g->mu);
fail0:
    return sl_error_set(err, SL_ERR_NOMEM, "swap gate: cannot create its mutex");
}

void sl_swap_gate_destroy(sl_swap_gate *g)
{
    pthread_mutex_destroy(&g->reload);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

uint64_t sl_swap_step_begin(sl_swap_gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->writing || g->waiting) pthread_cond_wait(&g->cv, &g->mu);
    g->steps++;
    const uint64_t e = g->epoch;
    pthread_mutex_unlock(&g->mu);
    return e;
}

void sl_swap_step_end(sl_swap_gate *g)
{
    pthread_mutex_lock(&g->mu);
    if (--g->steps == 0) pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void sl_swap_exclusive_begin(sl_swap_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->waiting++;
    while (g->writing || g->steps) pthread_cond_wait(&g->cv, &g->mu);
    g->waiting--;
    g->writing = true;
    pthread_mutex_unlock(&g->mu);
}

void sl_swap_exclusive_end(sl_swap_gate *g, bool changed)
{
    pthread_mutex_lock(&g->mu);
    if (changed) g->epoch++;
    g->writing = false;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

uint64_t sl_swap_epoch(sl_swap_gate *g)
{
    pthread_mutex_lock(&g->mu);
    const uint64_t e = g->epoch;
    pthread_mutex_unlock(&g->mu);
    return e;
}

sl_status sl_swap_gate_validate(sl_swap_gate *g, sl_error *err)
{
    pthread_mutex_lock(&g->mu);
    const bool ok = g->steps >= 0 && g->waiting >= 0 && !(g->writing && g->steps);
    const int32_t steps = g->steps, waiting = g->waiting;
    const bool writing = g->writing;
    pthread_mutex_unlock(&g->mu);
    return ok ? SL_OK
              : sl_error_set(err, SL_ERR_INVALID, "swap gate invariant: steps %d, waiting %d, "
                             "writing %d", steps, waiting, (int)writing);
}

sl_status sl_swap_stat(const char *path, sl_swap_source *out, sl_error *err)
{
    struct stat st;
    if (stat(path, &st))
        return sl_error_set(err, SL_ERR_IO, "%s: cannot stat it", path);
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + (int64_t)st.st_mtim.tv_nsec;
    out->ino = (uint64_t)st.st_ino;
    return SL_OK;
}

bool sl_swap_source_differs(const sl_swap_source *a, const sl_swap_source *b)
{
    return a->size != b->size || a->mtime_ns != b->mtime_ns || a->ino != b->ino;
}

sl_status sl_swap_sources_init(sl_swap_sources *s, const sl_gguf *g, sl_error *err)
{
    const uint32_t n = sl_gguf_shard_count(g);
    s->v = calloc(n ? n : 1, sizeof *s->v);
    s->n = 0;
    if (!s->v) return sl_error_set(err, SL_ERR_NOMEM, "swap: out of memory (sources)");
    for (; s->n < n; s->n++) {
        sl_swap_source *src = &s->v[s->n];
        src->path = strdup(sl_gguf_shard_path(g, s->n));
        if (!src->path) return sl_error_set(err, SL_ERR_NOMEM, "swap: out of memory (sources)");
        sl_status st = sl_swap_stat(src->path, src, err);
        if (st) return st;
    }
    /* the parse saw each shard's mtime: if the file changed since, its bytes are not the ones
     * stat just saw, and the first reload must look at it */
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(g, i);
        const int64_t ns = t->mtime_sec * 1000000000 + t->mtime_nsec;
        if (t->shard < s->n && ns != s->v[t->shard].mtime_ns) s->v[t->shard].mtime_ns = ns;
    }
    return SL_OK;
}

void sl_swap_sources_free(sl_swap_sources *s)
{
    for (uint32_t i = 0; s->v && i < s->n; i++) free(s->v[i].path);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

const char *sl_swap_action_name(sl_swap_action a)
{
    static const char *const names[] = {"none", "refused", "reattach", "in place", "private"};
    return (unsigned)a < sizeof names / sizeof *names ? names[a] : "?";
}

static bool same_shape(const sl_weight *w, const sl_gguf_tensor *t)
{
    for (int d = 0; d < SL_GGUF_MAX_DIMS; d++) {
        const int64_t a = d < (int)w->n_dims ? w->ne[d] : 1;
        const int64_t b = d < (int)t->n_dims ? t->ne[d] : 1;
        if (a != b) return false;
    }
    return true;
}

sl_swap_action sl_swap_classify(const sl_weight *w, const sl_gguf_tensor *nt, uint32_t new_type,
                                uint64_t new_bytes)
{
    if (!same_shape(w, nt)) return SL_SWAP_REFUSED;
    const bool like_orig = w->orig_set && new_type == w->orig.type && new_bytes == w->orig.nbytes;
    if (like_orig) return w->swapped ? SL_SWAP_REATTACH : SL_SWAP_IN_PLACE;
    if (new_type == w->type && new_bytes == w->nbytes) return SL_SWAP_IN_PLACE;
    return SL_SWAP_PRIVATE;
}
