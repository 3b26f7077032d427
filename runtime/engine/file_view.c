/* runtime/engine/file_view.c: which parsed file a model's weights are read from.
 *
 * A model reads its weights through the handle it was opened with (m->gguf) until a live
 * reload changes them: from then on, each weight's provenance (file_offset, file_nbytes,
 * file_type, mtime) describes the new file version, while m->gguf (whose descriptors may even
 * name a replaced inode) still describes the old one. Only a model that loads its weights again
 * from its files needs more — a runtime's model going back to DISK and loaded later — and for
 * it sl__model_files_parse parses the files again, checking that they still hold what the
 * weights hold (no change since the last reload, no tensor whose change was refused), and
 * sl__model_files_bind makes that m->file_view and binds every weight's tensor record there.
 * m->gguf stays for what points into it (names, metadata, vocabulary).
 * Invariant: file_view == NULL, or every weight's t lies in it and matches its provenance.
 */
#include <string.h>

#include "runtime/engine/model.h"

const sl_gguf *sl__model_file(const sl_model *m)
{
    return m->file_view ? m->file_view : m->gguf;
}

/* Whether tensor nt of the fresh parse holds what w holds (w's provenance, w's shape). */
static bool matches(const sl_weight *w, const sl_gguf_tensor *nt)
{
    if (!nt || nt->type != w->file_type || nt->file_offset != w->file_offset ||
        nt->nbytes != w->file_nbytes || nt->shard != w->shard ||
        nt->mtime_sec != w->mtime_sec || nt->mtime_nsec != w->mtime_nsec ||
        nt->n_dims != w->t->n_dims)
        return false;
    return !memcmp(nt->ne, w->t->ne, sizeof nt->ne);
}

sl_status sl__model_files_parse(const sl_model *m, sl_gguf **fresh, sl_error *err)
{
    *fresh = NULL;
    sl_gguf *g;
    sl_error e;
    const sl_gguf_options go = {.no_shards = false};
    if (sl_gguf_open(m->path, &go, &g, &e))
        return sl_error_set(err, SL_ERR_IO, "%s: reading its files again after a live reload: "
                            "%s", m->path, e.msg);
    sl_swap_sources now = {0};
    sl_status st = sl_swap_sources_init(&now, g, &e);
    if (st) {
        st = sl_error_set(err, st, "%s: %s", m->path, e.msg);
    } else if (now.n != m->sources.n) {
        st = sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: now %u files, %u when last loaded or "
                          "reloaded: reload it first (sl_reload_changed)", m->path, now.n,
                          m->sources.n);
    }
    for (uint32_t i = 0; i < now.n && !st; i++)
        if (sl_swap_source_differs(&now.v[i], &m->sources.v[i]))
            st = sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: changed since its last reload: "
                              "reload it first (sl_reload_changed)", now.v[i].path);
    for (size_t i = 0; i < m->n_w && !st; i++) {
        const sl_weight *w = &m->w[i];
        if (!matches(w, sl_gguf_tensor_find(g, w->t->name)))
            st = sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: tensor '%s' in its file is not the "
                              "one the model holds (a refused reload): its bytes cannot be read "
                              "back; reopen the model", m->path, w->name);
    }
    sl_swap_sources_free(&now);
    if (st) {
        sl_gguf_close(g);
        return st;
    }
    *fresh = g;
    return SL_OK;
}

void sl__model_files_bind(sl_model *m, sl_gguf *fresh, sl_gguf **old)
{
    for (size_t i = 0; i < m->n_w; i++)
        m->w[i].t = sl_gguf_tensor_find(fresh, m->w[i].t->name);
    *old = m->file_view; /* host weights of io = mmap may still point into its mapping */
    m->file_view = fresh;
}
