/* The residency endpoints of `sluice serve` (POST, JSON bodies; in the spirit of llama-server's
 * POST /slots/{id}?action=...), each answering the model's new state as /v1/models lists it:
 *
 *   POST /models/pin     {"model": NAME}   to the device for good (never evicted)
 *   POST /models/unpin   {"model": NAME}   evictable again (stays resident)
 *   POST /models/load    {"model": NAME}   to the device: self-managed, evicting the least
 *                                          recently used unpinned models; externally managed,
 *                                          only if the arena holds it beside the others
 *   POST /models/unload  {"model": NAME}   device weights freed (the host floor stays)
 *   POST /models/compact {"reload": [NAME, ...]}   every unpinned model off the device at once
 *                                          (the arena's free space coalesces), then the listed
 *                                          ones back in that order -> {"data": [every model]}
 *
 * A body that is not an object, a field missing or of the wrong type is a 400 naming the field;
 * a name that is not served is a 404 listing the served ones. A change the runtime refuses
 * because a request is running on the model it would move (or the arena cannot hold it) is a
 * 409 with the runtime's reason: the server never moves a model under a running request. They
 * need the runtime (several models, NAME=PATH, --pin or --residency): without it, 400. After
 * each change the server's and the runtime's invariants are checked (a 500 if broken). */
#include <stdlib.h>
#include <string.h>

#include "tools/serve/serve_impl.h"


/* The model a string value names; NULL after a 400 / 404 reply. */
static sl_serve_model *named(sl_serve *s, const sl_jdoc *d, sl_jref v, const char *field,
                             sl_serve_reply *r)
{
    size_t len = 0;
    const char *name = v == SL_JNONE ? NULL : sl_jdoc_str(d, v, &len);
    if (!name) {
        sl__serve_error(r, 400, "'%s' must be a string naming a served model", field);
        return NULL;
    }
    sl_serve_model *sm = sl__serve_model_find(s, name, len);
    if (!sm) sl__serve_model_unknown(s, r, name, len);
    return sm;
}

/* A runtime refusal as a reply. */
static void refused(sl_serve_reply *r, const char *what, sl_status st, const sl_error *err)
{
    sl__serve_error(r, st == SL_ERR_NOMEM ? 507 : st == SL_ERR_IO ? 500 : 409, "%s: %s", what,
                    err->msg);
}

static void reply_model(sl_serve *s, const sl_serve_model *sm, sl_serve_reply *r)
{
    FILE *f = sl__serve_body_open(r);
    if (f && sm) sl__serve_model_json(f, s, sm);
    else if (f) sl__serve_models_json(f, s);
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
}

static void compact(sl_serve *s, const sl_jdoc *d, sl_jref root, sl_serve_reply *r)
{
    const sl_jref list = sl_jdoc_get(d, root, "reload");
    const bool absent = list == SL_JNONE || sl_jdoc_kind(d, list) == SL_JNULL;
    if (!absent && sl_jdoc_kind(d, list) != SL_JARR) {
        sl__serve_error(r, 400, "'reload' must be an array of served model names");
        return;
    }
    const size_t n = absent ? 0 : sl_jdoc_count(d, list);
    sl_model **ms = calloc(n ? n : 1, sizeof *ms);
    if (!ms) {
        sl__serve_error(r, 500, "out of memory");
        return;
    }
    size_t k = 0;
    for (sl_jref v = absent ? SL_JNONE : sl_jdoc_first(d, list); v != SL_JNONE;
         v = sl_jdoc_next(d, v), k++) {
        char field[32];
        snprintf(field, sizeof field, "reload[%zu]", k);
        const sl_serve_model *sm = named(s, d, v, field, r);
        if (!sm) goto out;
        uint64_t dev;
        if (!strcmp(sl__serve_model_state(s, sm, &dev), "pinned")) {
            sl__serve_error(r, 400, "'%s': model '%s' is pinned: it never moves, so it is not "
                            "reloaded", field, sm->name);
            goto out;
        }
        for (size_t j = 0; j < k; j++)
            if (ms[j] == sm->model) {
                sl__serve_error(r, 400, "'%s': model '%s' is listed twice", field, sm->name);
                goto out;
            }
        ms[k] = sm->model;
    }
    sl_error err = {0};
    const sl_status st = sl_runtime_compact(s->rt, ms, n, &err);
    if (st == SL_ERR_RANGE) sl__serve_error(r, 400, "'reload': %s", err.msg);
    else if (st) refused(r, "compact", st, &err);
    else if (sl__serve_validate(s, &err)) sl__serve_error(r, 500, "compact: %s", err.msg);
    else reply_model(s, NULL, r);
out:
    free(ms);
}

void sl__serve_admin(sl_serve *s, sl_serve_route route, const sl_jdoc *d, sl_jref root,
                     sl_serve_reply *r)
{
    if (!s->rt) {
        sl__serve_error(r, 400, "residency endpoints need the server's runtime: serve the "
                        "models as --model NAME=PATH (or with --pin or --residency)");
        return;
    }
    if (route == SL_ROUTE_ADMIN_COMPACT) {
        compact(s, d, root, r);
        return;
    }
    sl_serve_model *sm = named(s, d, sl_jdoc_get(d, root, "model"), "model", r);
    if (!sm) return;
    uint64_t dev;
    const char *state = sl__serve_model_state(s, sm, &dev);
    const bool pinned = !strcmp(state, "pinned"), on_device = pinned || !strcmp(state, "device");
    sl_error err = {0};
    sl_status st = SL_OK;
    const char *what = "";
    switch (route) {
    case SL_ROUTE_ADMIN_PIN:
        what = "pin";
        if (!pinned) st = sl_runtime_set_residency(s->rt, sm->model, SL_RESIDENCY_PINNED, &err);
        break;
    case SL_ROUTE_ADMIN_UNPIN:
        what = "unpin";
        if (pinned) st = sl_runtime_set_residency(s->rt, sm->model, SL_RESIDENCY_DEVICE, &err);
        break;
    case SL_ROUTE_ADMIN_LOAD:
        what = "load";
        if (!on_device)
            st = s->external ? sl_runtime_set_residency(s->rt, sm->model, SL_RESIDENCY_DEVICE,
                                                        &err)
                             : sl_runtime_acquire(s->rt, sm->model, &err);
        break;
    case SL_ROUTE_ADMIN_UNLOAD:
        what = "unload";
        if (pinned) {
            sl__serve_error(r, 409, "unload: model '%s' is pinned: unpin it first "
                            "(POST /models/unpin)", sm->name);
            return;
        }
        if (on_device)
            st = sl_runtime_set_residency(s->rt, sm->model, SL_RESIDENCY_HOST, &err);
        break;
    default:
        sl__serve_error(r, 500, "admin route %d: unknown", (int)route);
        return;
    }
    if (st) refused(r, what, st, &err);
    else if (sl__serve_validate(s, &err)) sl__serve_error(r, 500, "%s: %s", what, err.msg);
    else reply_model(s, sm, r);
}
