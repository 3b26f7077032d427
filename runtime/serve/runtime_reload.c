/* runtime/serve/runtime_reload.c: live reload of a model in a runtime (model.h's sl__runtime_lock,
 * sl__runtime_swap_weight, sl__runtime_weight_to_host / _to_device; reload.c drives them).
 *
 * A runtime's model has no original storage to reattach to: a changed tensor's new bytes become
 * its host floor and, when the plan put it on the device and the model is there, its device
 * copy. No room on the device for a new size: the weight stays on the host (a fallback) and
 * stops counting in the model's device bytes (want_device false), so eviction, load and
 * compaction (runtime.c) leave it there until a later reload returns it with its group. The
 * runtime's invariants (runtime.c, runtime_impl.h) hold after every call.
 */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/ref/repack.h"
#include "runtime/engine/model.h"
#include "runtime/serve/runtime_impl.h"
#include "scheduler/policy/residency.h"

void sl__runtime_lock(sl_model *m)
{
    pthread_mutex_lock(&m->rt->mu);
}

void sl__runtime_unlock(sl_model *m)
{
    sl_runtime *rt = m->rt;
    sl__runtime_update_budget(rt); /* a reload may have changed a pinned model's device bytes */
    pthread_mutex_unlock(&rt->mu);
}

/* Frees a host copy the model owns (a pool block or a converted copy); one in a shared floor's
 * region has neither and stays for the other processes. */
static void release_host(sl_model *m, sl_block h_block, void *h_owned)
{
    if (h_block != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, h_block, NULL);
    free(h_owned);
}

/* A host weight of a model on the device into a new arena block (its host copy becomes its
 * floor). false: no block (the arena is full, or the injected fault): w is unchanged. */
static sl_status host_to_device(sl_model *m, sl_weight *w, sl__swap_fault *fault, bool *ok,
                                sl_error *err)
{
    *ok = false;
    if (sl__swap_fault_hit(fault)) return SL_OK;
    sl_error e;
    const sl_status st = sl__weight_to_device(m, w, &e);
    if (st && w->d_block != SL_BLOCK_NONE && !(w->residency & SL_RES_DEVICE)) {
        sl_bfc_free(m->arena, w->d_block, NULL); /* a block whose copy failed */
        w->d_block = SL_BLOCK_NONE;
    }
    if (st && st != SL_ERR_NOMEM) return sl_error_set(err, st, "'%s': %s", w->name, e.msg);
    *ok = !st;
    return SL_OK;
}

/* Records where a weight the placement put on the device now is: the device (fallback
 * cleared) or the host by a fallback, with the model's device bytes following. */
static void set_fallback(sl_model *m, sl_weight *w, bool fallback)
{
    struct sl__resident *r = m->res;
    if (w->want_device == !fallback) return;
    if (fallback) r->device_bytes -= sl__runtime_granted(w->nbytes);
    else r->device_bytes += sl__runtime_granted(w->nbytes);
    w->want_device = !fallback;
    w->fallback = fallback;
    r->epoch++;
    r->layout_epoch++;
}

const void *sl__runtime_host_copy(sl_model *m, const sl_weight *w)
{
    pthread_mutex_lock(&m->rt->mu);
    const void *p = w->d_block != SL_BLOCK_NONE ? m->res->floor[w - m->w].data : w->data;
    pthread_mutex_unlock(&m->rt->mu);
    return p;
}

void sl__runtime_provenance_moved(sl_model *m)
{
    m->res->reloaded = true;
}

sl_status sl__runtime_swap_weight(sl_model *m, sl_weight *w, const sl__floor *ns, uint32_t type,
                                  uint64_t nbytes, bool may_fall, sl__swap_fault *fault,
                                  bool *fell, sl_error *err)
{
    sl_runtime *rt = m->rt;
    struct sl__resident *r = m->res;
    const size_t i = (size_t)(w - m->w);
    *fell = false;
    if (r->state == SL_RS_DISK)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "the model is on disk in its runtime "
                            "(nothing loaded to replace)");
    if (w->d_block != SL_BLOCK_NONE && (nbytes == w->nbytes || !may_fall)) {
        /* on the device, staying there: the new bytes go to its block (or to a new one, taken
         * before the old one goes, when the size changed) and ns becomes its floor, so
         * eviction and compaction bring them back */
        sl_block nb = w->d_block;
        sl_status st = SL_OK;
        if (nbytes != w->nbytes)
            st = sl__swap_fault_hit(fault)
                     ? sl_error_set(err, SL_ERR_NOMEM, "no device block for its new size "
                                    "(injected fault)")
                     : sl_bfc_alloc(rt->arena, nbytes ? nbytes : 1, SL_BFC_PINNED, &nb, err);
        if (st) return st;
        void *d = sl_bfc_ptr(rt->arena, nb);
        if (nbytes &&
            !(st = sl_device_copy(rt->dev, m->stream, d, ns->data, nbytes, SL_COPY_H2D, err)))
            st = sl_device_stream_sync(rt->dev, m->stream, err);
        if (st) {
            if (nb != w->d_block) sl_bfc_free(rt->arena, nb, NULL);
            return st;
        }
        if (nb != w->d_block) {
            sl_bfc_free(rt->arena, w->d_block, NULL);
            w->d_block = nb;
            w->data = d;
        }
        const sl__floor old = r->floor[i];
        release_host(m, old.h_block, old.h_owned);
        r->floor[i] = *ns;
    } else {
        /* the host copy takes the new bytes (a device block of the old size goes first, which
         * frees room for the new one); a shared floor's region is left alone (copy-on-write) */
        if (w->d_block != SL_BLOCK_NONE) sl__runtime_to_floor(m, i);
        release_host(m, w->h_block, w->h_owned);
        w->data = ns->data;
        w->h_block = ns->h_block;
        w->h_owned = ns->h_owned;
        w->residency = SL_RES_HOST;
    }
    if (w->want_device)
        r->device_bytes = r->device_bytes - sl__runtime_granted(w->nbytes) +
                          sl__runtime_granted(nbytes);
    w->type = type; /* Q4_K_R8 when reload.c repacked ns for a host-only weight */
    w->nbytes = nbytes;
    r->reloaded = true;
    r->epoch++;
    r->layout_epoch++;
    /* placed on the device and the model is there: a new block, else the host fallback (a
     * fallen-back weight of an evicted model stays on the host: its group returns together, at
     * a reload while the model is on the device) */
    if (m->plan.on_device[i] && r->state >= SL_RS_DEVICE && !(w->residency & SL_RES_DEVICE) &&
        (w->want_device || may_fall)) {
        bool ok;
        sl_status st = host_to_device(m, w, fault, &ok, err);
        set_fallback(m, w, !ok); /* on an error too: it is on the host, with the new bytes */
        *fell = !ok && !st;
        if (st) return st;
    }
    return SL_OK;
}

sl_status sl__runtime_weight_to_host(sl_model *m, sl_weight *w, sl_error *err)
{
    const size_t i = (size_t)(w - m->w);
    if (w->d_block == SL_BLOCK_NONE || !m->plan.on_device[i])
        return sl_error_set(err, SL_ERR_INVALID, "'%s': not a device weight", w->name);
    sl__runtime_to_floor(m, i);
    set_fallback(m, w, true);
    return SL_OK;
}

sl_status sl__runtime_weight_to_device(sl_model *m, sl_weight *w, bool *ok, sl_error *err)
{
    *ok = false;
    if (!w->fallback || m->res->state < SL_RS_DEVICE) return SL_OK;
    sl_status st = host_to_device(m, w, NULL, ok, err);
    if (!st && *ok) set_fallback(m, w, false);
    return st;
}
