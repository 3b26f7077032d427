/* The GET endpoints that describe the server (serve_api.c routes them): /health, where the
 * tensor hot-swap runs; /v1/models, what is served; /props, with which defaults. */
#include <inttypes.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tools/common/json.h"
#include "tools/serve/serve_impl.h"

/* /health is where ik_llama.cpp's server runs its tensor hot-swap (LLAMA_HOTSWAP_ENABLED):
 * with --hotswap or SLUICE_HOTSWAP_ENABLED=1 every /health reloads the tensors whose files
 * changed, in every model (sl_reload_changed waits for the slots' running evaluation steps
 * and commits between them, so no slot sees a torn tensor; a runtime's model gets the new
 * bytes in its host floor too), and reports what it did, each tensor with its model. A refused
 * file (sl_reload_changed's SL_ERR_UNSUPPORTED: the model keeps its old weights) is a report,
 * not a failure: "files_refused" and "errors" [{model, message}], status 200; a file entry
 * has null types, its "file" and the reason in "message". */
static void json_type(FILE *f, uint32_t t)
{
    const sl_gguf_type_info *ti = t == SL_RELOAD_NO_TYPE ? NULL : sl_gguf_type_get(t);
    if (t == SL_RELOAD_NO_TYPE) fputs("null", f);
    else fprintf(f, "\"%s\"", ti ? ti->name : "?");
}

void sl__serve_health(sl_serve *s, sl_serve_reply *r)
{
    static const char *const kinds[] = {"reattached", "in_place", "private", "sibling",
                                        "refused", "skipped_file", "refused_file"};
    const size_t n = s->hotswap ? s->n_models : 0;
    sl_reload_report *rep = calloc(n ? n : 1, sizeof *rep);
    sl_error *why = calloc(n ? n : 1, sizeof *why); /* a refused file's message, per model */
    if (!rep || !why) {
        free(rep);
        free(why);
        sl__serve_error(r, 500, "out of memory");
        return;
    }
    sl_reload_report all = {0};
    for (size_t k = 0; k < n; k++) {
        sl_error err = {0};
        const sl_status rs = sl_reload_changed(s->models[k].model, &rep[k], &err);
        if (rs == SL_ERR_UNSUPPORTED && rep[k].files_refused) {
            why[k] = err;
        } else if (rs) {
            sl__serve_error(r, 500, "reload of model '%s': %s", s->models[k].name, err.msg);
            goto out;
        }
        all.files_refused += rep[k].files_refused;
        all.changed |= rep[k].changed;
        all.files_changed += rep[k].files_changed;
        all.files_skipped += rep[k].files_skipped;
        all.n_reloaded += rep[k].n_reloaded;
        all.n_refused += rep[k].n_refused;
        all.n_fallback += rep[k].n_fallback;
        all.seconds += rep[k].seconds;
    }
    FILE *f = sl__serve_body_open(r);
    if (f && !s->hotswap) fputs("{\"status\":\"ok\"}", f);
    if (f && s->hotswap) {
        fprintf(f, "{\"status\":\"ok\",\"reload\":{\"changed\":%s,\"files_changed\":%u,"
                "\"files_skipped\":%u,\"files_refused\":%u,\"reloaded\":%u,\"refused\":%u,"
                "\"fallback\":%u,\"seconds\":%.6f,\"errors\":[", all.changed ? "true" : "false",
                all.files_changed, all.files_skipped, all.files_refused, all.n_reloaded,
                all.n_refused, all.n_fallback, all.seconds);
        bool first_err = true;
        for (size_t k = 0; k < n; k++) {
            if (!why[k].code) continue;
            fputs(first_err ? "{\"model\":" : ",{\"model\":", f);
            first_err = false;
            sl_json_cstr(f, s->models[k].name);
            fputs(",\"message\":", f);
            sl_json_cstr(f, why[k].msg);
            fputs("}", f);
        }
        fputs("],\"tensors\":[", f);
        bool first = true;
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; i < rep[k].n; i++, first = false) {
                const sl_reload_entry *e = &rep[k].entries[i];
                fputs(first ? "{\"model\":" : ",{\"model\":", f);
                sl_json_cstr(f, s->models[k].name);
                fputs(",\"name\":", f);
                sl_json_cstr(f, e->file ? e->file : e->name);
                fprintf(f, ",\"kind\":\"%s\",\"old_type\":",
                        (unsigned)e->kind < 7 ? kinds[e->kind] : "?");
                json_type(f, e->old_type);
                fputs(",\"new_type\":", f);
                json_type(f, e->new_type);
                fprintf(f, ",\"old_bytes\":%" PRIu64 ",\"new_bytes\":%" PRIu64 ",\"where\":",
                        e->old_bytes, e->new_bytes);
                sl_json_cstr(f, e->where ? e->where : "");
                fputs(",\"message\":", f);
                sl_json_cstr(f, e->msg);
                fputs("}", f);
            }
        fputs("]}}", f);
        pthread_mutex_lock(&s->mu);
        s->reloads += all.changed;
        s->reloaded_tensors += all.n_reloaded;
        pthread_mutex_unlock(&s->mu);
    }
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
out:
    for (size_t k = 0; rep && k < n; k++) sl_reload_report_free(&rep[k]);
    free(rep);
    free(why);
}

void sl__serve_models(sl_serve *s, sl_serve_reply *r)
{
    FILE *f = sl__serve_body_open(r);
    if (f) sl__serve_models_json(f, s);
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
}

/* The defaults, and the model a request without "model" runs on (the first one). */
void sl__serve_props(sl_serve *s, sl_serve_reply *r)
{
    const sl_serve_model *sm = &s->models[0];
    FILE *f = sl__serve_body_open(r);
    if (f) {
        const sl_serve_params def = sl__serve_params_default(s);
        fprintf(f, "{\"default_generation_settings\":{\"id\":0,\"id_task\":-1,\"n_ctx\":%" PRId32
                ",\"speculative\":false,\"is_processing\":false,\"params\":",
                sl__serve_pool_n_ctx(sm->pool));
        sl__serve_params_json(f, &def);
        fprintf(f, ",\"prompt\":\"\",\"next_token\":{\"has_next_token\":true,\"has_new_line\":"
                "false,\"n_remain\":%" PRId32 ",\"n_decoded\":0,\"stopping_word\":\"\"}}",
                def.n_predict);
        fprintf(f, ",\"total_slots\":%d,\"model_path\":", sl__serve_pool_n_slots(sm->pool));
        sl_json_cstr(f, sm->path);
        fputs(",\"model_alias\":", f);
        sl_json_cstr(f, sm->name);
        fputs(",\"chat_template\":", f);
        sl_json_cstr(f, sm->chat_source ? sm->chat_source : "");
        fprintf(f, ",\"chat_template_family\":\"%s\",\"arch\":", sl_chat_name(sm->chat));
        sl_json_cstr(f, sm->info.arch);
        fputs(",\"models\":[", f);
        for (size_t i = 0; i < s->n_models; i++) {
            if (i) fputc(',', f);
            sl_json_cstr(f, s->models[i].name);
        }
        fputc(']', f);
        fprintf(f, ",\"build_info\":\"%s\",\"modalities\":{\"vision\":false,\"audio\":false}}",
                SL__SERVE_BUILD);
    }
    sl__serve_body_close(r, f, 200, SL__SERVE_JSON);
}
