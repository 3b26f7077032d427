/* tools/commands/perplexity_swap.c: see perplexity_swap.h. */
#include "tools/commands/perplexity_swap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "base/parse.h"
#include "tools/common/json.h"

static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    return v ? v : getenv(b);
}

int sl_cli_hotswap_env(const char *cmd, bool *on)
{
    const char *name = getenv("SLUICE_HOTSWAP_ENABLED") ? "SLUICE_HOTSWAP_ENABLED"
                                                        : "LLAMA_HOTSWAP_ENABLED";
    const char *v = getenv(name);
    *on = false;
    sl_error e = {0};
    if (v && sl_parse_bool(name, v, on, &e)) {
        fprintf(stderr, "sluice %s: %s\n", cmd, e.msg);
        return 2;
    }
    return 0;
}

int sl_cli_hotswap_init(sl_cli_hotswap *h, bool flag, const char *script, bool json)
{
    memset(h, 0, sizeof *h);
    bool env_on = false;
    if (sl_cli_hotswap_env("perplexity", &env_on)) return 2;
    h->on = flag || env_on;
    h->script = script ? script
                       : env2("SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT",
                              "LLAMA_PERPLEXITY_PRE_RELOAD_SCRIPT");
    if (h->script && !*h->script) h->script = NULL;
    h->json = json;
    return 0;
}

static int reload(sl_cli_hotswap *h, sl_model *m)
{
    sl_reload_report_free(&h->pending);
    sl_error e;
    if (sl_reload_changed(m, &h->pending, &e)) {
        fprintf(stderr, "sluice perplexity: reload: %s\n", e.msg);
        sl_reload_report_print(&h->pending, stderr);
        return 1;
    }
    /* a file the script left unreadable or half-written is not "nothing changed": the
     * rounds it was meant for would be dropped without a word */
    for (size_t i = 0; i < h->pending.n; i++)
        if (h->pending.entries[i].kind == SL_RELOAD_SKIPPED_FILE)
            fprintf(stderr, "sluice perplexity: reload: %s: skipped: %s\n",
                    h->pending.entries[i].file ? h->pending.entries[i].file
                                               : h->pending.entries[i].name,
                    h->pending.entries[i].msg);
    if (h->pending.files_skipped) {
        fprintf(stderr, "sluice perplexity: %u file(s) could not be reloaded: the hot-swap loop "
                "stops\n", h->pending.files_skipped);
        return 1;
    }
    return 0;
}

int sl_cli_hotswap_begin(sl_cli_hotswap *h, sl_model *m)
{
    return reload(h, m);
}

static const char *tname(uint32_t t)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(t);
    return ti ? ti->name : "?";
}

/* A type's name in quotes, or null where the entry has none (a file, a missing tensor). */
static void json_type(uint32_t t)
{
    if (t == SL_RELOAD_NO_TYPE) fputs("null", stdout);
    else printf("\"%s\"", tname(t));
}

static void print_json(const sl_cli_hotswap *h, double ppl, double ppl_err, double secs)
{
    static const char *const kinds[] = {"reattached", "in_place", "private", "sibling",
                                        "refused", "skipped_file", "refused_file"};
    const sl_reload_report *r = &h->pending;
    printf("{\"round\":%d,\"tensors\":[", h->round);
    for (size_t i = 0; i < r->n; i++) {
        const sl_reload_entry *e = &r->entries[i];
        printf("%s{\"name\":", i ? "," : "");
        sl_json_cstr(stdout, e->name);
        printf(",\"kind\":\"%s\",\"old_type\":", kinds[e->kind]);
        json_type(e->old_type);
        printf(",\"new_type\":");
        json_type(e->new_type);
        printf(",\"old_bytes\":%llu,\"new_bytes\":%llu,\"where\":",
               (unsigned long long)e->old_bytes, (unsigned long long)e->new_bytes);
        sl_json_cstr(stdout, e->where);
        printf(",\"seconds\":");
        sl_json_f64(stdout, e->seconds);
        if (e->msg[0]) {
            printf(",\"msg\":");
            sl_json_cstr(stdout, e->msg);
        }
        putchar('}');
    }
    printf("],\"ppl\":");
    sl_json_f64(stdout, ppl);
    printf(",\"ppl_stderr\":");
    sl_json_f64(stdout, ppl_err);
    printf(",\"delta_ppl\":");
    sl_json_f64(stdout, ppl - h->first_ppl);
    printf(",\"seconds\":");
    sl_json_f64(stdout, secs);
    printf(",\"reload_seconds\":");
    sl_json_f64(stdout, r->seconds);
    printf("}\n");
}

int sl_cli_hotswap_end(sl_cli_hotswap *h, sl_model *m, double ppl, double ppl_err, double secs,
                       bool *again)
{
    *again = false;
    if (!h->round) h->first_ppl = ppl;
    if (h->json) {
        print_json(h, ppl, ppl_err, secs);
    } else {
        printf("hotswap round %d: %u tensors reloaded before it, PPL = %.4f (delta vs round 0: "
               "%+.6f)\n", h->round, h->pending.n_reloaded, ppl, ppl - h->first_ppl);
        sl_reload_report_print(&h->pending, stdout);
    }
    fflush(stdout);
    h->round++;
    if (h->script) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "SLUICE_HOTSWAP_ROUND=%d %s", h->round - 1, h->script);
        const int st = system(cmd);
        const int code = st == -1 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code) {
            fprintf(stderr, "sluice perplexity: pre-reload script %s failed with status %d: "
                            "the hot-swap loop stops\n", h->script, code);
            return code;
        }
    }
    if (reload(h, m)) return 1;
    *again = h->pending.changed;
    if (!*again && !h->json)
        printf("hotswap: nothing changed after round %d: done\n", h->round - 1);
    return 0;
}

void sl_cli_hotswap_free(sl_cli_hotswap *h)
{
    sl_reload_report_free(&h->pending);
}
