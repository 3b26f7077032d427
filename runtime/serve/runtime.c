/* runtime/serve/runtime.c: serving residency — one device arena and one host pool shared by the
 * models of a process (sl_runtime of sluice.h), and the moves between residency states.
 * The policy (budget, which model to evict) is scheduler/policy/residency.h's; here the bytes move.
 * The structures are in runtime_impl.h; a live reload's part is runtime_reload.c's.
 *
 * A model opened into a runtime keeps a host copy of every weight (its host floor) for as
 * long as it is open below DISK: a device weight's host copy is parked in its sl__floor while
 * the weight record points at the device block, so
 *   eviction = free the device blocks and point the records back at their floors;
 *   reload   = a host->device copy of each device weight (sl__weight_to_device), no file I/O.
 * Every weight block of every model is allocated with SL_BFC_PINNED and the arena is never
 * slid by sl_bfc_compact: "compaction" frees all unpinned models at once (the BFC coalesces
 * their chunks) and reloads the chosen ones, so a pinned model's device pointers never change.
 * Pinned models go first, at the base of the arena (pinning a model not yet on the device
 * frees the unpinned ones, loads it, reloads them).
 *
 * Invariants (sl_runtime_validate; the tests run it after every operation):
 *   state >= DEVICE  <=>  every want_device weight is SL_RES_DEVICE with its floor kept;
 *   state == HOST    <=>  every weight is SL_RES_HOST (floors empty);
 *   state == DISK    <=>  every weight's residency is 0;
 *   want_device  <=>  the plan put the weight on the device and it is not a host fallback
 *   (fallback: a live reload found no room for its new bytes, or a sibling expert tensor's;
 *   it stays on the host, floor and all, until a later reload returns it with its group);
 *   device_bytes == sum of granted arena bytes (sl__runtime_granted) over want_device weights;
 *   pinned_bytes == sum of device_bytes over PINNED models; busy + holds > 0 => state >=
 *   DEVICE or the model has no device weights;
 *   epoch changes whenever any weight's data pointer may have changed; layout_epoch whenever
 *   its type, size or bytes may have (a read of its files, a live reload): a move between
 *   the floor and the device changes pointers alone, so contexts rebind rather than refresh.
 * Locking: one mutex per runtime serialises every state change and the evaluation brackets;
 * a model that is busy or held (sl_runtime_hold) is never evicted or moved.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/shm_floor.h"
#include "runtime/engine/ctx.h"
#include "runtime/engine/env.h"
#include "runtime/engine/model.h"
#include "runtime/serve/runtime_impl.h"
#include "runtime/struct_size.h"
#include "scheduler/policy/residency.h"

_Static_assert((int)SL_RESIDENCY_DISK == (int)SL_RS_DISK &&
               (int)SL_RESIDENCY_HOST == (int)SL_RS_HOST &&
               (int)SL_RESIDENCY_DEVICE == (int)SL_RS_DEVICE &&
               (int)SL_RESIDENCY_PINNED == (int)SL_RS_PINNED,
               "sluice.h's sl_residency and residency.h's sl_res_state must agree");

sl_runtime_options sl_runtime_options_default(void)
{
    return (sl_runtime_options){.struct_size = sizeof(sl_runtime_options),
                                .weight_fraction = 0.9, .wiggle_fraction = 0.05,
                                .mode = SL_RESIDENCY_SELF, .numa_node = -1};
}

static void notice(const sl_runtime *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void notice(const sl_runtime *rt, const char *fmt, ...)
{
    if (!rt->opt.notice) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rt->opt.notice(rt->opt.notice_user, msg);
}

/* Recomputes the budget from the models' scratch estimates and the pinned bytes. */
void sl__runtime_update_budget(sl_runtime *rt)
{
    uint64_t scratch = rt->opt.max_scratch_bytes, pinned = 0;
    for (size_t i = 0; i < rt->n_models; i++) {
        const struct sl__resident *r = rt->models[i]->res;
        if (!rt->opt.max_scratch_bytes && r->scratch_bytes > scratch) scratch = r->scratch_bytes;
        if (r->state == SL_RS_PINNED) pinned += r->device_bytes;
    }
    const sl_res_budget_in in = {rt->arena_bytes, rt->opt.weight_fraction,
                                 rt->opt.wiggle_fraction, scratch, pinned};
    rt->pinned_bytes = pinned;
    /* the fractions were checked at creation, so this cannot fail */
    sl_res_budget_solve(&in, &rt->budget, NULL);
}

sl_status sl_runtime_create(const sl_runtime_options *opt, sl_runtime **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_create: NULL out");
    *out = NULL;
    sl_status st;
    if (opt && (st = sl__struct_size_check("sl_runtime_options", opt->struct_size, sizeof *opt,
                                           err)))
        return st;
    sl_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (runtime)");
    rt->opt = opt ? *opt : sl_runtime_options_default();
    /* floors are attached long after this call: the prefix must outlive the caller's string */
    if (rt->opt.shm_prefix &&
        !(rt->opt.shm_prefix = rt->shm_prefix = strdup(rt->opt.shm_prefix))) {
        free(rt);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (runtime)");
    }
    const sl_res_budget_in probe = {1, rt->opt.weight_fraction, rt->opt.wiggle_fraction, 0, 0};
    if ((st = sl_res_budget_solve(&probe, &rt->budget, err)) ||
        (st = sl_check_i64("numa_node", rt->opt.numa_node, SL_RANGE_NUMA_NODE, err)) ||
        (st = sl_shm_floor_check_names(rt->opt.shm_prefix, rt->opt.shm_mode, err)) ||
        (unsigned)rt->opt.mode > SL_RESIDENCY_EXTERNAL) {
        if (!st) st = sl_error_set(err, SL_ERR_INVALID, "residency mode %d: unknown (self, "
                                   "external)", (int)rt->opt.mode);
        free(rt->shm_prefix);
        free(rt);
        return st;
    }
    pthread_mutex_init(&rt->mu, NULL);
    sl_device_options dopt = {.kind = rt->opt.device};
    if ((st = sl_env_device_options(&dopt, err)) ||
        (st = sl_device_open(&dopt, &rt->dev, err)))
        goto fail;
    rt->arena_bytes = rt->opt.arena_bytes;
    if (!rt->arena_bytes) {
        sl_device_props props;
        if ((st = sl_device_props_get(rt->dev, &props, err))) goto fail;
        rt->arena_bytes = props.free_mem_bytes / 10 * 9;
    }
    rt->arena_bytes &= ~(uint64_t)(SL_BFC_ALIGN - 1);
    if (!rt->arena_bytes) {
        st = sl_error_set(err, SL_ERR_INVALID, "runtime: arena of 0 bytes");
        goto fail;
    }
    /* one region: compaction by reload coalesces into one free chunk only inside a region */
    const sl_bfc_options bo = {.region_bytes = rt->arena_bytes, .max_bytes = rt->arena_bytes};
    if ((st = sl_device_stream_create(rt->dev, &rt->stream, err)) ||
        (st = sl_bfc_create_device(rt->dev, rt->stream, &bo, &rt->arena, err)))
        goto fail;
    /* the region is taken now, so that a too-large arena fails here and not at a load */
    sl_block probe_block;
    if ((st = sl_bfc_alloc(rt->arena, SL_BFC_ALIGN, 0, &probe_block, err))) goto fail;
    sl_bfc_free(rt->arena, probe_block, NULL);
    sl_hostpool_options ho = sl_hostpool_options_default();
    ho.numa_node = rt->opt.numa_node < 0 ? SL_HOSTPOOL_NODE_AUTO : rt->opt.numa_node;
    ho.slab_bytes = rt->opt.host_slab_bytes;
    if ((st = sl_env_topo_options(&ho.topology, err)) ||
        (st = sl_hostpool_create(rt->dev, NULL, &ho, &rt->hostpool, err)))
        goto fail;
    sl__runtime_update_budget(rt);
    *out = rt;
    return SL_OK;
fail:
    sl_runtime_destroy(rt, NULL);
    return st;
}

sl_status sl_runtime_destroy(sl_runtime *rt, sl_error *err)
{
    if (!rt) return SL_OK;
    if (rt->n_models)
        return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_destroy: %zu models are still "
                            "open in it (close them first)", rt->n_models);
    sl_hostpool_destroy(rt->hostpool);
    sl_bfc_destroy(rt->arena);
    if (rt->stream) sl_device_stream_destroy(rt->dev, rt->stream);
    if (rt->dev) sl_device_close(rt->dev);
    pthread_mutex_destroy(&rt->mu);
    free(rt->models);
    free(rt->shm_prefix);
    free(rt);
    return SL_OK;
}

/* ---- the engine's hooks ----------------------------------------------------------------- */

sl_status sl__runtime_lend(sl_model *m, uint64_t *device_free, sl_error *err)
{
    sl_runtime *rt = m->rt;
    if (m->opt.plan_only)
        return sl_error_set(err, SL_ERR_INVALID, "%s: plan_only has no meaning in a runtime "
                            "(use sl_model_footprint)", m->path);
    m->dev = rt->dev;
    m->arena = rt->arena;
    m->hostpool = rt->hostpool;
    *device_free = rt->arena_bytes;
    /* the arena is the limit of a placement: a model larger than the on-demand budget still
     * opens, and loads alone (sl_runtime_acquire) */
    /* the prefill's staging buffer (from this arena too) is the placement's to charge, to
     * a plan that streams (stream_bytes) */
    if (!m->opt.vram_budget)
        m->opt.vram_budget = rt->arena_bytes + sl__model_reserve_bytes(m) -
                             sl__model_stream_reserve_bytes(m);
    return SL_OK;
}

uint64_t sl__runtime_granted(uint64_t bytes)
{
    return ((bytes ? bytes : 1) + SL_BFC_ALIGN - 1) & ~(uint64_t)(SL_BFC_ALIGN - 1);
}

sl_status sl__runtime_attach(sl_model *m, sl_error *err)
{
    for (size_t i = 0; i < m->n_w; i++)
        if (m->plan.split[i])
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: placement hot-cold is not "
                                "supported in a runtime (its split parts have no host floor)",
                                m->path);
    struct sl__resident *r = calloc(1, sizeof *r);
    if (!r) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (residency)");
    r->floor = calloc(m->n_w ? m->n_w : 1, sizeof *r->floor);
    if (!r->floor) {
        free(r);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (host floor records)");
    }
    for (size_t i = 0; i < m->n_w; i++) {
        r->floor[i].h_block = SL_BLOCK_NONE;
        if (m->plan.on_device[i]) r->device_bytes += sl__runtime_granted(m->place_t[i].bytes);
    }
    r->scratch_bytes = sl__model_reserve_bytes(m);
    r->state = SL_RS_DISK;
    m->res = r;
    return SL_OK;
}

sl_status sl__runtime_register(sl_model *m, sl_error *err)
{
    sl_runtime *rt = m->rt;
    pthread_mutex_lock(&rt->mu);
    if (rt->n_models == rt->cap_models) {
        const size_t cap = rt->cap_models ? 2 * rt->cap_models : 8;
        sl_model **p = realloc(rt->models, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&rt->mu);
            return sl_error_set(err, SL_ERR_NOMEM, "out of memory (runtime models)");
        }
        rt->models = p;
        rt->cap_models = cap;
    }
    rt->models[rt->n_models++] = m;
    m->res->registered = true;
    m->res->state = SL_RS_HOST;
    m->res->epoch++;
    sl__runtime_update_budget(rt);
    pthread_mutex_unlock(&rt->mu);
    return SL_OK;
}

bool sl__runtime_floor_keep(sl_model *m, sl_weight *w)
{
    if (!m->res || w < m->w || w >= m->w + m->n_w) return false;
    sl__floor *f = &m->res->floor[w - m->w];
    f->data = w->data;
    f->h_block = w->h_block;
    f->h_owned = w->h_owned;
    return true;
}

/* ---- the shared host floor ------------------------------------------------------------- */

static void floor_release(sl_runtime *rt, struct sl__resident *r)
{
    if (r->shm_registered)
        sl_device_host_unregister(rt->dev, (void *)sl_shm_floor_payload(r->shm), NULL);
    sl_shm_floor_detach(r->shm);
    r->shm = NULL;
    r->shm_registered = r->shm_made = r->shm_checked = false;
}

sl_status sl__runtime_load_floor(sl_model *m, sl_error *err)
{
    sl_runtime *rt = m->rt;
    struct sl__resident *r = m->res;
    if (rt->opt.shared_floor && !r->shm) {
        sl_status st = sl__runtime_floor_attach(m, err);
        if (st) return st;
        const uint64_t bytes = sl_shm_floor_bytes(r->shm);
        /* page-locked per process for DMA; a refusal (e.g. a read-only mapping the driver
         * will not register) leaves copies from pageable memory, slower but correct */
        sl_error re;
        r->shm_registered = !sl_device_host_register(rt->dev, (void *)sl_shm_floor_payload(r->shm),
                                                     bytes, &re);
        if (!r->shm_registered)
            notice(rt, "%s: shared floor %s not page-locked: %s", m->path,
                   sl_shm_floor_name(r->shm), re.msg);
    }
    /* the files may have moved on (a refreshed view, a rewrite): types and bytes may differ */
    r->layout_epoch++;
    sl_status st = sl__model_load_weights(m, err);
    if (st && r->shm) floor_release(rt, r);
    return st;
}

const void *sl__runtime_floor_shared_data(const sl_model *m, const sl_weight *w)
{
    const struct sl__resident *r = m->res;
    if (!r || !r->shm || w < m->w || w >= m->w + m->n_w) return NULL;
    return sl_shm_floor_payload(r->shm) + r->shm_off[w - m->w];
}

/* The arena bytes m's device weights take (validate_model). */
static uint64_t want_bytes(const sl_model *m)
{
    uint64_t b = 0;
    for (size_t i = 0; i < m->n_w; i++)
        if (m->w[i].want_device) b += sl__runtime_granted(m->w[i].nbytes);
    return b;
}

/* ---- moves ------------------------------------------------------------------------------ */

/* Weight i of m leaves the device: its block is freed and it reads its floor again. */
void sl__runtime_to_floor(sl_model *m, size_t i)
{
    sl_weight *w = &m->w[i];
    sl__floor *f = &m->res->floor[i];
    sl_bfc_free(m->arena, w->d_block, NULL);
    w->d_block = SL_BLOCK_NONE;
    w->data = f->data;
    w->h_block = f->h_block;
    w->h_owned = f->h_owned;
    w->residency = f->data || !w->nbytes ? SL_RES_HOST : 0;
    *f = (sl__floor){.h_block = SL_BLOCK_NONE};
}

/* Device weights back to their floors (HOST). Nothing of m may be in flight. */
static void evict(sl_runtime *rt, sl_model *m)
{
    struct sl__resident *r = m->res;
    bool any = false;
    /* its prefill streaming buffer too (taken again by its next streamed prefill): not in
     * device_bytes, it would otherwise stay pinned in the shared arena */
    sl__stream_release(m);
    for (size_t i = 0; i < m->n_w; i++) {
        if (m->w[i].d_block == SL_BLOCK_NONE) continue;
        sl__runtime_to_floor(m, i);
        any = true;
    }
    /* the views are recomputed from data the load already checked: it cannot fail (a model
     * on disk has no data to point at: its views are rebuilt by its next load) */
    if (r->state != SL_RS_DISK) sl__model_refresh_pointers(m, NULL);
    if (r->state >= SL_RS_DEVICE) {
        r->state = SL_RS_HOST;
        rt->evictions += any;
    }
    r->epoch++;
}

/* From DISK or HOST to DEVICE (state set by the caller); on failure m is back at HOST (or
 * DISK if it was there and its file could not be read). */
static sl_status load(sl_runtime *rt, sl_model *m, sl_error *err)
{
    struct sl__resident *r = m->res;
    sl_status st;
    if (r->state == SL_RS_DISK) {
        r->epoch++;
        if ((st = sl__runtime_load_floor(m, err))) {
            sl__model_free_weights(m);
            return st;
        }
        r->state = SL_RS_HOST;
    }
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        if (!w->want_device || (w->residency & SL_RES_DEVICE)) continue;
        if ((st = sl__weight_to_device(m, w, err))) {
            char why[SL_ERROR_MSG_BYTES];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            evict(rt, m);
            return sl_error_set(err, st, "%s: loading to the device: %s", m->path, why);
        }
    }
    if ((st = sl__model_refresh_pointers(m, err))) {
        evict(rt, m);
        return st;
    }
    r->epoch++;
    r->state = SL_RS_DEVICE;
    rt->loads++;
    rt->bytes_loaded += r->device_bytes;
    return SL_OK;
}

/* From any state to DISK: the host floor goes too. */
static void to_disk(sl_runtime *rt, sl_model *m)
{
    evict(rt, m);
    sl__model_free_weights(m);
    if (m->res->shm) floor_release(rt, m->res);
    m->res->state = SL_RS_DISK;
}

/* Evaluated now or held for a request: not to be evicted or moved. */
static bool in_use(const struct sl__resident *r)
{
    return r->busy > 0 || r->holds > 0;
}

static bool resident(const sl_model *m)
{
    return m->res->state >= SL_RS_DEVICE;
}

static uint64_t on_demand_bytes(const sl_runtime *rt)
{
    uint64_t b = 0;
    for (size_t i = 0; i < rt->n_models; i++)
        if (rt->models[i]->res->state == SL_RS_DEVICE) b += rt->models[i]->res->device_bytes;
    return b;
}

static sl_status check_model(const sl_runtime *rt, const sl_model *m, const char *fn,
                             sl_error *err)
{
    if (!rt || !m) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL runtime or model", fn);
    if (m->rt != rt || !m->res || !m->res->registered)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is not a model of this runtime", fn,
                            m->path);
    return SL_OK;
}

static sl_status busy_error(const sl_model *m, const char *what, sl_error *err)
{
    return sl_error_set(err, SL_ERR_INVALID, "%s: %s: a context is evaluating it", m->path,
                        what);
}

/* Self-managed load: evict least recently used models until m fits, then load it. */
static sl_status acquire_locked(sl_runtime *rt, sl_model *m, sl_error *err)
{
    const size_t n = rt->n_models;
    sl_res_entry *e = malloc(n * sizeof *e);
    size_t *victims = malloc(n * sizeof *victims), target = n;
    if (!e || !victims) {
        free(e);
        free(victims);
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (acquire)");
    }
    for (size_t i = 0; i < n; i++) {
        const struct sl__resident *r = rt->models[i]->res;
        e[i] = (sl_res_entry){r->state, r->device_bytes, r->last_use, in_use(r)};
        if (rt->models[i] == m) target = i;
    }
    sl_res_choice ch;
    sl_status st = sl_res_choose_evictions(e, n, target, rt->budget.on_demand_budget, victims,
                                           &ch, err);
    if (!st) {
        if (ch.too_big)
            notice(rt, "%s: %llu device bytes exceed the on-demand budget of %llu: loaded after "
                   "evicting every unpinned model", m->path,
                   (unsigned long long)m->res->device_bytes,
                   (unsigned long long)rt->budget.on_demand_budget);
        for (size_t k = 0; k < ch.n_evict; k++) evict(rt, rt->models[victims[k]]);
        st = load(rt, m, err);
    }
    free(e);
    free(victims);
    return st;
}

/* sl_runtime_acquire, and with hold a busy count taken under the same lock, so that no other
 * thread's acquire, compaction or pin can move the model between its load and its use. */
static sl_status acquire(sl_runtime *rt, sl_model *m, bool hold, const char *fn, sl_error *err)
{
    sl_status st = check_model(rt, m, fn, err);
    if (st) return st;
    pthread_mutex_lock(&rt->mu);
    if (!resident(m) && m->res->device_bytes) {
        if (rt->opt.mode == SL_RESIDENCY_EXTERNAL)
            st = sl_error_set(err, SL_ERR_NOT_RESIDENT, "%s is not resident (%s) and the "
                              "runtime is externally managed: move it with "
                              "sl_runtime_set_residency", m->path,
                              sl_res_state_name(m->res->state));
        else
            st = acquire_locked(rt, m, err);
    }
    if (!st) m->res->last_use = ++rt->tick;
    if (!st && hold) m->res->holds++;
    pthread_mutex_unlock(&rt->mu);
    return st;
}

sl_status sl_runtime_acquire(sl_runtime *rt, sl_model *m, sl_error *err)
{
    return acquire(rt, m, false, "sl_runtime_acquire", err);
}

sl_status sl_runtime_hold(sl_runtime *rt, sl_model *m, sl_error *err)
{
    return acquire(rt, m, true, "sl_runtime_hold", err);
}

void sl_runtime_unhold(sl_runtime *rt, sl_model *m)
{
    if (check_model(rt, m, "sl_runtime_unhold", NULL)) return;
    pthread_mutex_lock(&rt->mu);
    if (m->res->holds > 0) m->res->holds--;
    pthread_mutex_unlock(&rt->mu);
}

/* Frees the unpinned resident models (every one must be idle), then loads first (if not
 * NULL) and reload[0..n) in order. A failed load leaves that model at HOST and the others
 * still load; the first error is returned. */
static sl_status rebuild(sl_runtime *rt, sl_model *first, sl_model *const *reload, size_t n,
                         sl_error *err)
{
    for (size_t i = 0; i < rt->n_models; i++)
        if (rt->models[i]->res->state == SL_RS_DEVICE) evict(rt, rt->models[i]);
    sl_status st = first ? load(rt, first, err) : SL_OK;
    for (size_t k = 0; k < n; k++) {
        if (resident(reload[k])) continue;
        sl_error e2;
        const sl_status s2 = load(rt, reload[k], &e2);
        if (s2 && !st) st = sl_error_set(err, s2, "%s", e2.msg);
    }
    return st;
}

static sl_status busy_unpinned(const sl_runtime *rt, const char *what, sl_error *err)
{
    for (size_t i = 0; i < rt->n_models; i++) {
        const sl_model *o = rt->models[i];
        if (o->res->state == SL_RS_DEVICE && in_use(o->res)) return busy_error(o, what, err);
    }
    return SL_OK;
}

/* PINNED for a model not on the device: to the base of the arena, above the pinned ones. */
static sl_status pin_fresh(sl_runtime *rt, sl_model *m, sl_error *err)
{
    sl_status st = busy_unpinned(rt, "pinning another model moves it", err);
    if (st) return st;
    /* the unpinned resident models, most recently used first, come back after m */
    size_t n = 0;
    sl_model **back = malloc((rt->n_models + 1) * sizeof *back);
    if (!back) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (pin)");
    for (size_t i = 0; i < rt->n_models; i++)
        if (rt->models[i]->res->state == SL_RS_DEVICE) back[n++] = rt->models[i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && back[j]->res->last_use > back[j - 1]->res->last_use; j--) {
            sl_model *t = back[j];
            back[j] = back[j - 1];
            back[j - 1] = t;
        }
    const uint64_t pinned_after = rt->pinned_bytes + m->res->device_bytes;
    const uint64_t pool = rt->budget.weight_pool;
    const uint64_t room = pool > pinned_after ? pool - pinned_after : 0;
    size_t keep = 0;
    for (uint64_t used = 0; keep < n && used + back[keep]->res->device_bytes <= room; keep++)
        used += back[keep]->res->device_bytes;
    st = rebuild(rt, m, back, keep, err);
    free(back);
    return st;
}

sl_status sl_runtime_set_residency(sl_runtime *rt, sl_model *m, sl_residency state,
                                   sl_error *err)
{
    sl_status st = check_model(rt, m, "sl_runtime_set_residency", err);
    if (st) return st;
    if ((unsigned)state > SL_RESIDENCY_PINNED)
        return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_set_residency: state %d: unknown",
                            (int)state);
    /* going to DISK frees the weights and may refresh the file view from the reload sources:
     * not while a live reload of m reads them (its lock comes first, as in sl_reload_changed) */
    const bool gate = state == SL_RESIDENCY_DISK && m->gate_ready;
    if (gate) pthread_mutex_lock(&m->gate.reload);
    struct sl__resident *r = m->res;
    const sl_res_state to = (sl_res_state)state;
    /* after a live reload its next load must read the new file versions: their parse (file
     * I/O) runs before the mutex, as what it reads only a reload writes and the reload lock
     * held here excludes that (reloaded too; without the gate no reload ever set it) */
    pthread_mutex_lock(&rt->mu);
    const bool reparse = to == SL_RS_DISK && r->reloaded;
    pthread_mutex_unlock(&rt->mu);
    sl_gguf *fresh = NULL, *old = NULL;
    const sl_status pst = reparse ? sl__model_files_parse(m, &fresh, err) : SL_OK;
    pthread_mutex_lock(&rt->mu);
    if (to < SL_RS_DEVICE && in_use(r)) {
        st = busy_error(m, "cannot leave the device", err);
    } else if (to == SL_RS_DISK) {
        if (pst) {
            st = pst; /* its message is in err */
        } else if (fresh) {
            sl__model_files_bind(m, fresh, &old);
            fresh = NULL;
            r->reloaded = false;
        }
        if (!st) to_disk(rt, m);
    } else if (to == SL_RS_HOST) {
        if (r->state == SL_RS_DISK && (st = sl__runtime_load_floor(m, err))) {
            sl__model_free_weights(m);
        } else {
            evict(rt, m);
            r->state = SL_RS_HOST;
        }
    } else if (resident(m)) {
        r->state = to; /* pin or unpin in place: pinned blocks stay where they are */
    } else if (to == SL_RS_PINNED) {
        st = pin_fresh(rt, m, err); /* an error may name a model reloaded after it */
        if (resident(m)) r->state = SL_RS_PINNED;
    } else {
        st = load(rt, m, err);
    }
    if (!st && to >= SL_RS_DEVICE) r->last_use = ++rt->tick;
    sl__runtime_update_budget(rt);
    pthread_mutex_unlock(&rt->mu);
    if (gate) pthread_mutex_unlock(&m->gate.reload);
    sl_gguf_close(old); /* no weight points into it after to_disk */
    sl_gguf_close(fresh); /* parsed but not bound: the model was busy */
    return st;
}

sl_status sl_runtime_release_all(sl_runtime *rt, sl_model *m, sl_error *err)
{
    return sl_runtime_set_residency(rt, m, SL_RESIDENCY_DISK, err);
}

sl_status sl_runtime_compact(sl_runtime *rt, sl_model *const *reload, size_t n, sl_error *err)
{
    if (!rt || (n && !reload))
        return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_compact: NULL argument");
    sl_status st;
    uint64_t bytes = 0;
    for (size_t k = 0; k < n; k++) {
        if ((st = check_model(rt, reload[k], "sl_runtime_compact", err))) return st;
        if (reload[k]->res->state == SL_RS_PINNED)
            return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_compact: %s is pinned: it "
                                "never moves, so it is not reloaded", reload[k]->path);
        bytes += reload[k]->res->device_bytes;
    }
    pthread_mutex_lock(&rt->mu);
    if (bytes > rt->budget.on_demand_budget)
        st = sl_error_set(err, SL_ERR_RANGE, "sl_runtime_compact: the models to reload take "
                          "%llu device bytes, more than the on-demand budget of %llu",
                          (unsigned long long)bytes,
                          (unsigned long long)rt->budget.on_demand_budget);
    else if (!(st = busy_unpinned(rt, "compaction moves it", err))) {
        st = rebuild(rt, NULL, reload, n, err);
        for (size_t k = 0; k < n; k++)
            if (resident(reload[k])) reload[k]->res->last_use = ++rt->tick;
        rt->compactions++;
    }
    pthread_mutex_unlock(&rt->mu);
    return st;
}

sl_residency sl_model_residency(const sl_model *m)
{
    return m && m->res ? (sl_residency)m->res->state : SL_RESIDENCY_DEVICE;
}

void sl_runtime_stats_get(const sl_runtime *rt, sl_runtime_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!rt) return;
    sl_runtime *w = (sl_runtime *)rt; /* the mutex only */
    pthread_mutex_lock(&w->mu);
    *out = (sl_runtime_stats){
        .arena_bytes = rt->arena_bytes, .scratch_ceiling = rt->budget.scratch_ceiling,
        .weight_pool = rt->budget.weight_pool, .on_demand_budget = rt->budget.on_demand_budget,
        .pinned_bytes = rt->pinned_bytes, .over_commit = rt->budget.over_commit,
        .resident_bytes = on_demand_bytes(rt), .loads = rt->loads,
        .evictions = rt->evictions, .compactions = rt->compactions,
        .bytes_loaded = rt->bytes_loaded, .n_models = (uint32_t)rt->n_models};
    sl_bfc_stats bs;
    sl_bfc_stats_get(rt->arena, &bs);
    out->arena_in_use = bs.in_use_bytes;
    out->arena_free = bs.free_bytes;
    out->arena_largest_free = bs.largest_free_bytes;
    out->arena_free_chunks = bs.free_chunks;
    pthread_mutex_unlock(&w->mu);
}

sl_status sl_runtime_model_info_get(const sl_runtime *rt, const sl_model *m,
                                    sl_runtime_model_info *out, sl_error *err)
{
    sl_status st = check_model(rt, m, "sl_runtime_model_info_get", err);
    if (st || !out) return st ? st : sl_error_set(err, SL_ERR_INVALID, "NULL out");
    sl_runtime *w = (sl_runtime *)rt; /* the mutex only */
    pthread_mutex_lock(&w->mu);
    const struct sl__resident *r = m->res;
    *out = (sl_runtime_model_info){.state = (sl_residency)r->state,
                                   .device_bytes = r->device_bytes, .last_use = r->last_use,
                                   .busy = r->busy + r->holds, .d_digest = 1469598103934665603ull};
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *x = &m->w[i];
        if (x->d_block == SL_BLOCK_NONE) continue;
        const uint64_t lo = (uint64_t)(uintptr_t)sl_bfc_ptr(rt->arena, x->d_block);
        const uint64_t hi = lo + sl_bfc_size(rt->arena, x->d_block);
        if (!out->d_lo || lo < out->d_lo) out->d_lo = lo;
        if (hi > out->d_hi) out->d_hi = hi;
        out->d_digest = (out->d_digest ^ lo) * 1099511628211ull; /* FNV-1a over addresses */
    }
    if (r->shm) snprintf(out->floor_name, sizeof out->floor_name, "%s", sl_shm_floor_name(r->shm));
    out->floor_materialized = r->shm_made;
    out->floor_digest_checked = r->shm_checked;
    pthread_mutex_unlock(&w->mu);
    return SL_OK;
}

/* One model's share of the invariants in the file comment. */
static sl_status validate_model(const sl_runtime *rt, const sl_model *m, sl_error *err)
{
    const struct sl__resident *r = m->res;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        const bool on_dev = w->residency & SL_RES_DEVICE, kept = r->floor[i].data != NULL;
        bool ok;
        if (r->state == SL_RS_DISK) ok = !w->residency && !kept;
        else if (r->state == SL_RS_HOST) ok = w->residency == SL_RES_HOST && !kept;
        else ok = on_dev == w->want_device && (on_dev ? kept || !w->nbytes : !kept);
        sl_status st = ok ? r->state == SL_RS_DISK ? SL_OK
                                                   : sl_weight_validate(w, rt->hostpool, err)
                          : sl_error_set(err, SL_ERR_INVALID, "runtime invariant: %s: weight "
                                         "'%s' has residency %u (floor %s) in state %s",
                                         m->path, w->name, w->residency, kept ? "kept" : "none",
                                         sl_res_state_name(r->state));
        if (st) return st;
    }
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (w->fallback != (m->plan.on_device[i] && !w->want_device) ||
            (w->want_device && !m->plan.on_device[i]))
            return sl_error_set(err, SL_ERR_INVALID, "runtime invariant: %s: weight '%s': "
                                "fallback %d, wanted on the device %d, placed there %d",
                                m->path, w->name, w->fallback, w->want_device,
                                m->plan.on_device[i]);
    }
    if (r->device_bytes != want_bytes(m))
        return sl_error_set(err, SL_ERR_INVALID, "runtime invariant: %s: device bytes %llu, its "
                            "device weights take %llu", m->path,
                            (unsigned long long)r->device_bytes,
                            (unsigned long long)want_bytes(m));
    if (r->busy < 0 || r->holds < 0 ||
        (in_use(r) && r->state < SL_RS_DEVICE && r->device_bytes))
        return sl_error_set(err, SL_ERR_INVALID, "runtime invariant: %s: busy %d, holds %d in "
                            "state %s", m->path, r->busy, r->holds, sl_res_state_name(r->state));
    return SL_OK;
}

sl_status sl_runtime_validate(const sl_runtime *rt, sl_error *err)
{
    if (!rt) return sl_error_set(err, SL_ERR_INVALID, "sl_runtime_validate: NULL runtime");
    sl_runtime *w = (sl_runtime *)rt; /* the mutex only */
    pthread_mutex_lock(&w->mu);
    sl_status st = SL_OK;
    uint64_t pinned = 0;
    for (size_t i = 0; i < rt->n_models && !st; i++) {
        st = validate_model(rt, rt->models[i], err);
        if (rt->models[i]->res->state == SL_RS_PINNED) pinned += rt->models[i]->res->device_bytes;
    }
    if (!st && pinned != rt->pinned_bytes)
        st = sl_error_set(err, SL_ERR_INVALID, "runtime invariant: pinned bytes %llu, models "
                          "say %llu", (unsigned long long)rt->pinned_bytes,
                          (unsigned long long)pinned);
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* ---- the serving table, opening, evaluation brackets and detaching ------------------------ */

const sl__serving sl__runtime_serving = {
    .floor_keep = sl__runtime_floor_keep,
    .floor_shared_data = sl__runtime_floor_shared_data,
    .load_floor = sl__runtime_load_floor,
    .lend = sl__runtime_lend,
    .attach = sl__runtime_attach,
    .register_model = sl__runtime_register,
    .lock = sl__runtime_lock,
    .unlock = sl__runtime_unlock,
    .swap_weight = sl__runtime_swap_weight,
    .weight_to_host = sl__runtime_weight_to_host,
    .weight_to_device = sl__runtime_weight_to_device,
    .provenance_moved = sl__runtime_provenance_moved,
    .host_copy = sl__runtime_host_copy,
    .eval_begin = sl__runtime_eval_begin,
    .eval_end = sl__runtime_eval_end,
    .detach = sl__runtime_detach,
};

sl_status sl_model_open_in(sl_runtime *rt, const char *path, const sl_model_options *opt,
                           sl_model **out, sl_error *err)
{
    if (!rt) return sl_error_set(err, SL_ERR_INVALID, "sl_model_open_in: NULL runtime");
    return sl__model_open(rt, &sl__runtime_serving, path, opt, out, err);
}

sl_status sl__runtime_eval_begin(sl_ctx *c, uint64_t *res_epoch, uint64_t *layout_epoch,
                                 sl_error *err)
{
    sl_model *m = c->m;
    *res_epoch = c->res_epoch;
    *layout_epoch = c->res_layout_epoch;
    if (!m->res) return SL_OK;
    sl_runtime *rt = m->rt;
    pthread_mutex_lock(&rt->mu);
    struct sl__resident *r = m->res;
    sl_status st = SL_OK;
    if (r->state < SL_RS_DEVICE && (r->device_bytes || r->state == SL_RS_DISK))
        st = sl_error_set(err, SL_ERR_NOT_RESIDENT, "%s is not resident (%s): acquire it "
                          "before it runs", m->path, sl_res_state_name(r->state));
    if (!st) {
        *res_epoch = r->epoch;
        *layout_epoch = r->layout_epoch;
        r->busy++;
    }
    pthread_mutex_unlock(&rt->mu);
    return st;
}

void sl__runtime_eval_end(sl_ctx *c)
{
    sl_model *m = c->m;
    if (!m->res) return;
    pthread_mutex_lock(&m->rt->mu);
    m->res->busy--;
    pthread_mutex_unlock(&m->rt->mu);
}

void sl__runtime_detach(sl_model *m)
{
    struct sl__resident *r = m->res;
    if (!r) return;
    sl_runtime *rt = m->rt;
    pthread_mutex_lock(&rt->mu);
    evict(rt, m);
    if (r->registered) {
        for (size_t i = 0; i < rt->n_models; i++)
            if (rt->models[i] == m) {
                rt->models[i] = rt->models[--rt->n_models];
                break;
            }
    }
    sl__runtime_update_budget(rt);
    /* the weights point into the region: the engine's free after this only drops records */
    if (r->shm) floor_release(rt, r);
    pthread_mutex_unlock(&rt->mu);
    free(r->floor);
    free(r->shm_off);
    free(r);
    m->res = NULL;
}
