/* The models of `sluice serve`: which one a request names, and holding it for the request.
 *
 * With a runtime (sl_runtime, sluice.h "serving residency") every model shares one device
 * arena; a request's model is held (sl_runtime_hold) by the slot that runs it from its first
 * evaluation to its last, so another slot's acquire never evicts it between two steps, and the
 * runtime's mutex keeps every residency change on one thread at a time. A slot whose model
 * does not fit because the models of other running requests fill the arena waits for one of
 * them to end (res_cv) rather than failing: a request then fails only when nothing else is
 * held (the model alone does not fit), or when the runtime is externally managed and the model
 * is not resident (409: the operator loads it with POST /models/load). */
#include <inttypes.h>
#include <string.h>

#include "tools/common/json.h"
#include "tools/serve/serve_impl.h"

sl_serve_model *sl__serve_model_find(sl_serve *s, const char *name, size_t len)
{
    if (!name) return s->n_models == 1 ? &s->models[0] : NULL;
    for (size_t i = 0; i < s->n_models; i++)
        if (strlen(s->models[i].name) == len && !memcmp(s->models[i].name, name, len))
            return &s->models[i];
    return NULL;
}

void sl__serve_model_names(const sl_serve *s, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n_models && used < cap; i++) {
        const int n = snprintf(buf + used, cap - used, "%s'%s'", i ? ", " : "", s->models[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

void sl__serve_model_unknown(const sl_serve *s, sl_serve_reply *r, const char *name, size_t len)
{
    char names[512];
    sl__serve_model_names(s, names, sizeof names);
    sl__serve_error(r, 404, "model '%.*s' is not served (%s: %s)", (int)(len > 96 ? 96 : len),
                    name, s->n_models > 1 ? "the models are" : "the model is", names);
}

int sl__serve_model_hold(sl_serve *s, sl_serve_model *sm, sl_error *err)
{
    if (!s->rt) return 0;
    pthread_mutex_lock(&s->res_mu);
    int status = 0;
    for (;;) {
        const sl_status st = sl_runtime_hold(s->rt, sm->model, err);
        if (!st) {
            s->held++;
            break;
        }
        if (st == SL_ERR_NOT_RESIDENT) {
            sl_error_set(err, st, "model '%s' is not loaded and the server's residency is "
                         "external: load it with POST /models/load {\"model\":\"%s\"}",
                         sm->name, sm->name);
            status = 409;
            break;
        }
        if (!s->held) {
            status = 503;
            break;
        }
        pthread_cond_wait(&s->res_cv, &s->res_mu); /* another request's model is in the way */
    }
    pthread_mutex_unlock(&s->res_mu);
    return status;
}

void sl__serve_model_unhold(sl_serve *s, sl_serve_model *sm)
{
    if (!s->rt) return;
    pthread_mutex_lock(&s->res_mu);
    sl_runtime_unhold(s->rt, sm->model);
    s->held--;
    pthread_cond_broadcast(&s->res_cv);
    pthread_mutex_unlock(&s->res_mu);
}

const char *sl__serve_model_state(const sl_serve *s, const sl_serve_model *sm,
                                  uint64_t *device_bytes)
{
    static const char *const k_names[] = {"disk", "host", "device", "pinned"};
    sl_runtime_model_info mi = {.state = SL_RESIDENCY_DEVICE,
                                .device_bytes = sm->info.gpu_bytes};
    if (s->rt) sl_runtime_model_info_get(s->rt, sm->model, &mi, NULL);
    *device_bytes = mi.device_bytes;
    return (unsigned)mi.state <= SL_RESIDENCY_PINNED ? k_names[mi.state] : "?";
}

void sl__serve_model_json(FILE *f, const sl_serve *s, const sl_serve_model *sm)
{
    uint64_t dev = 0;
    const char *state = sl__serve_model_state(s, sm, &dev);
    /* in a runtime every weight has a host copy (its floor) unless the model is on disk */
    const uint64_t host = !s->rt ? sm->info.host_bytes
                          : strcmp(state, "disk") ? sm->info.weight_bytes : 0;
    fputs("{\"id\":", f);
    sl_json_cstr(f, sm->name);
    fprintf(f, ",\"object\":\"model\",\"created\":%" PRId64 ",\"owned_by\":\"sluice\","
            "\"meta\":{\"n_vocab\":%" PRId32 ",\"n_ctx_train\":%" PRId32 ",\"n_embd\":%" PRId32
            ",\"n_params\":%" PRIu64 ",\"size\":%" PRIu64 "},\"residency\":{\"state\":\"%s\","
            "\"device_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64 "}}", s->started,
            sm->info.n_vocab, sm->info.n_ctx_train, sm->info.n_embd, sm->info.n_params,
            sm->info.weight_bytes, state, dev, host);
}

void sl__serve_models_json(FILE *f, const sl_serve *s)
{
    fputs("{\"object\":\"list\",\"data\":[", f);
    for (size_t i = 0; i < s->n_models; i++) {
        if (i) fputc(',', f);
        sl__serve_model_json(f, s, &s->models[i]);
    }
    fputs("]}", f);
}

sl_status sl__serve_validate(sl_serve *s, sl_error *err)
{
    if (!s->n_models || !s->models)
        return sl_error_set(err, SL_ERR_INVALID, "serve invariant: no model");
    for (size_t i = 0; i < s->n_models; i++) {
        const sl_serve_model *a = &s->models[i];
        if (!a->name || !*a->name || !a->model)
            return sl_error_set(err, SL_ERR_INVALID, "serve invariant: model %zu has no name "
                                "or is not open", i);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(a->name, s->models[j].name))
                return sl_error_set(err, SL_ERR_INVALID, "serve invariant: two models named "
                                    "'%s'", a->name);
        sl_runtime_model_info mi;
        if (s->rt && sl_runtime_model_info_get(s->rt, a->model, &mi, err))
            return SL_ERR_INVALID; /* not a model of the server's runtime */
    }
    if (s->external && !s->rt)
        return sl_error_set(err, SL_ERR_INVALID, "serve invariant: external residency without "
                            "a runtime");
    pthread_mutex_lock(&s->res_mu);
    const int held = s->held;
    pthread_mutex_unlock(&s->res_mu);
    if (held < 0 || (!s->rt && held))
        return sl_error_set(err, SL_ERR_INVALID, "serve invariant: %d holds%s", held,
                            s->rt ? "" : " without a runtime");
    return s->rt ? sl_runtime_validate(s->rt, err) : SL_OK;
}
