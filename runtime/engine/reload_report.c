/* runtime/engine/reload_report.c: the small parts of sluice.h's live reload around reload.c —
 * the context's entry point, freeing and printing the report. */
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "runtime/engine/ctx.h"
#include "runtime/sluice.h"

static const char *type_name(uint32_t t)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(t);
    return ti ? ti->name : "?";
}

sl_status sl_ctx_reload_changed(sl_ctx *c, sl_reload_report *rep, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_reload_changed: NULL context");
    return sl_reload_changed(c->m, rep, err);
}

void sl_reload_report_free(sl_reload_report *rep)
{
    if (!rep) return;
    for (size_t i = 0; i < rep->n; i++) free(rep->entries[i].file);
    free(rep->entries);
    rep->entries = NULL;
    rep->n = 0;
}

void sl_reload_report_print(const sl_reload_report *rep, void *fp)
{
    FILE *f = fp;
    if (!f) return; /* nowhere to print */
    static const char *const kinds[] = {"reattached", "in place", "private block",
                                        "moved with its siblings", "refused", "skipped",
                                        "file refused"};
    for (size_t i = 0; rep && i < rep->n; i++) {
        const sl_reload_entry *e = &rep->entries[i];
        if (e->kind == SL_RELOAD_SKIPPED_FILE || e->kind == SL_RELOAD_REFUSED ||
            e->kind == SL_RELOAD_REFUSED_FILE) {
            fprintf(f, "  %s: %s: %s\n", e->file ? e->file : e->name, kinds[e->kind], e->msg);
            continue;
        }
        fprintf(f, "  %s: %s -> %s, %.3f MiB -> %.3f MiB, %s, %s, %.2f ms\n", e->name,
                type_name(e->old_type), type_name(e->new_type), (double)e->old_bytes / 1048576.0,
                (double)e->new_bytes / 1048576.0, e->where, kinds[e->kind], e->seconds * 1e3);
    }
}
