/* POST /infill (llama-server's fill-in-the-middle) and what it needs of the model: its FIM
 * tokens (sl_token_fim: the vocabulary finds them as llama.cpp's does) and, from the file, its
 * <arch>.pooling_type (serve_embd.c).
 *
 * The prompt is format_prompt_infill's (llama.cpp 0c1e570) with the repo-level pattern:
 *   [extra context] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
 * where the extra context is FIM_REP "myproject\n", then per input_extra chunk FIM_SEP
 * "filename\n" text (without FIM_SEP: "\n\n--- snippet ---\n\n" text), then FIM_SEP
 * "filename\n"; the prefix keeps its last 3/4 of -b tokens, the suffix its first n_batch/4 -
 * (2 + prompt) tokens, the extra context its last n_ctx - n_batch - 2 n_predict. A model without
 * FIM_PRE, FIM_SUF or FIM_MID answers 501 naming the missing ones. The completion then runs
 * with /completion's fields and answer. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/serve/serve_impl.h"

/* ---- the model's FIM tokens and pooling ----------------------------------------------------- */

sl_status sl__serve_model_vocab_meta(sl_serve_model *sm, sl_error *err)
{
    for (int k = 0; k < SL_FIM_N; k++) sm->fim[k] = sl_token_fim(sm->model, (sl_fim)k);
    sl_gguf *g = NULL;
    sl_status st = sl_gguf_open(sm->path, NULL, &g, err);
    if (st) return st;
    /* the file's pooling (llama.cpp: LLAMA_POOLING_TYPE_NONE when absent), unless --pooling */
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", sm->info.arch);
    uint32_t pt = 0;
    if (sm->pooling == (sl_serve_pooling)-1) {
        const bool has = sl_gguf_find(g, key) != NULL;
        if (has && (st = sl_gguf_get_u32(g, key, &pt, err))) goto out;
        if (pt > SL_POOL_LAST) {
            st = sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: %s = %u: %s pooling is not "
                              "implemented (none, mean, cls, last; --pooling to choose)",
                              sm->path, key, pt, pt == 4 ? "rank" : "this");
            goto out;
        }
        sm->pooling = (sl_serve_pooling)pt;
    }
out:
    sl_gguf_close(g);
    return st;
}

/* ---- the endpoint --------------------------------------------------------------------------- */

typedef struct toks {
    int32_t *t;
    size_t n, cap;
} toks;

static bool push(toks *a, const int32_t *t, size_t n)
{
    if (a->n + n > a->cap) {
        const size_t cap = (a->n + n) * 2 + 16;
        int32_t *p = realloc(a->t, cap * sizeof *p);
        if (!p) return false;
        a->t = p;
        a->cap = cap;
    }
    if (n) memcpy(a->t + a->n, t, n * sizeof *t);
    a->n += n;
    return true;
}

/* Appends text's tokens (no BOS, special tokens not parsed: llama.cpp's common_tokenize(...,
 * false, false)). */
static bool push_text(sl_serve_req *q, toks *a, const char *text, size_t len)
{
    int32_t *t = NULL;
    size_t n = 0;
    if (!sl__serve_tokenize(q, text, len, false, false, &t, &n)) return false;
    const bool ok = push(a, t, n);
    free(t);
    if (!ok) sl__serve_error(q->r, 500, "out of memory");
    return ok;
}

/* input_prefix / input_suffix: a string, or an array of token ids and strings (tokenize_mixed). */
static bool get_mixed(sl_serve_req *q, const char *key, toks *out)
{
    const sl_jref v = sl__serve_field(q, key);
    if (v == SL_JNONE) {
        sl__serve_error(q->r, 400, "\"%s\" is required", key);
        return false;
    }
    size_t len;
    const char *s = sl_jdoc_str(q->d, v, &len);
    if (s) return push_text(q, out, s, len);
    int32_t *t = NULL;
    size_t n = 0;
    if (!sl__serve_prompt_of(q, v, key, false, &t, &n)) return false;
    const bool ok = push(out, t, n);
    free(t);
    if (!ok) sl__serve_error(q->r, 500, "out of memory");
    return ok;
}

/* The extra context tokens (before the FIM prefix). */
static bool extra_context(sl_serve_req *q, const int32_t *fim, toks *ex)
{
    const sl_jref arr = sl__serve_field(q, "input_extra");
    if (arr != SL_JNONE && sl_jdoc_kind(q->d, arr) != SL_JARR) {
        sl__serve_error(q->r, 400, "\"input_extra\" must be an array of {\"filename\": string, "
                        "\"text\": string}");
        return false;
    }
    if (fim[SL_FIM_REP] >= 0 &&
        (!push(ex, &fim[SL_FIM_REP], 1) || !push_text(q, ex, "myproject\n", 10)))
        return false;
    size_t i = 0;
    for (sl_jref c = arr == SL_JNONE ? SL_JNONE : sl_jdoc_first(q->d, arr); c != SL_JNONE;
         c = sl_jdoc_next(q->d, c), i++) {
        size_t tl = 0, fl = 3;
        const sl_jref tv = sl_jdoc_kind(q->d, c) == SL_JOBJ ? sl_jdoc_get(q->d, c, "text")
                                                            : SL_JNONE;
        const sl_jref fv = sl_jdoc_kind(q->d, c) == SL_JOBJ ? sl_jdoc_get(q->d, c, "filename")
                                                            : SL_JNONE;
        const char *text = sl_jdoc_str(q->d, tv, &tl), *name = "tmp";
        if (!text) {
            sl__serve_error(q->r, 400, "input_extra[%zu]: extra_context chunk must contain a "
                            "\"text\" field with a string value", i);
            return false;
        }
        if (fv != SL_JNONE && !(name = sl_jdoc_str(q->d, fv, &fl))) {
            sl__serve_error(q->r, 400, "input_extra[%zu]: extra_context chunk's \"filename\" "
                            "field must be a string", i);
            return false;
        }
        if (fim[SL_FIM_SEP] >= 0) {
            char *line = malloc(fl + 2);
            if (!line) {
                sl__serve_error(q->r, 500, "out of memory");
                return false;
            }
            memcpy(line, name, fl);
            line[fl] = '\n';
            const bool ok = push(ex, &fim[SL_FIM_SEP], 1) && push_text(q, ex, line, fl + 1);
            free(line);
            if (!ok) return false;
        } else if (!push_text(q, ex, "\n\n--- snippet ---\n\n", 19)) {
            return false;
        }
        if (!push_text(q, ex, text, tl)) return false;
    }
    if (fim[SL_FIM_SEP] >= 0 &&
        (!push(ex, &fim[SL_FIM_SEP], 1) || !push_text(q, ex, "filename\n", 9)))
        return false;
    return true;
}

void sl__serve_infill(sl_serve_req *q, sl_serve_gone_fn gone, void *user)
{
    if (!(q->sm = sl__serve_req_model(q))) return;
    const int32_t *fim = q->sm->fim;
    if (fim[SL_FIM_PRE] < 0 || fim[SL_FIM_SUF] < 0 || fim[SL_FIM_MID] < 0) {
        sl__serve_error_typed(q->r, 501, "not_supported_error", "Infill is not supported by "
                              "this model: %s%s%s", fim[SL_FIM_PRE] < 0 ? "prefix token is "
                              "missing. " : "", fim[SL_FIM_SUF] < 0 ? "suffix token is missing. "
                              : "", fim[SL_FIM_MID] < 0 ? "middle token is missing. " : "");
        return;
    }
    const sl_jref pv = sl__serve_field(q, "prompt");
    size_t plen = 0;
    const char *ptext = pv == SL_JNONE ? "" : sl_jdoc_str(q->d, pv, &plen);
    if (!ptext) {
        sl__serve_error(q->r, 400, "\"prompt\" must be a string");
        return;
    }
    toks pre = {0}, suf = {0}, ex = {0}, out = {0};
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    sl_serve_prompts pr = {0};
    /* BOS as the vocabulary adds it (llama_vocab_get_add_bos): what an empty text gets */
    int32_t *bos = NULL;
    size_t n_bos = 0;
    bool ok = sl__serve_tokenize(q, "", 0, true, false, &bos, &n_bos);
    const bool add_bos = ok && n_bos && bos[0] == q->sm->info.bos && q->sm->info.bos >= 0;
    free(bos);
    ok = ok && get_mixed(q, "input_prefix", &pre) && get_mixed(q, "input_suffix", &suf) &&
              extra_context(q, fim, &ex) &&
              (!plen || sl__serve_tokenize(q, ptext, plen, false, true, &prompt, &n_prompt));
    if (ok) {
        const int64_t nb = q->s->n_batch > 0 ? q->s->n_batch : 512;
        const int64_t n_ctx = sl__serve_pool_n_ctx(q->sm->pool);
        const int64_t n_predict = q->s->n_predict_default;
        const int64_t pre_take = (int64_t)pre.n < 3 * (nb / 4) ? (int64_t)pre.n : 3 * (nb / 4);
        int64_t suf_room = nb / 4 - (2 + (int64_t)n_prompt);
        if (suf_room < 0) suf_room = 0;
        const int64_t suf_take = (int64_t)suf.n < suf_room ? (int64_t)suf.n : suf_room;
        int64_t ex_room = n_ctx - nb - 2 * n_predict;
        if (ex_room < 0) ex_room = 0;
        const int64_t ex_take = (int64_t)ex.n < ex_room ? (int64_t)ex.n : ex_room;
        ok = push(&out, ex_take ? ex.t + ex.n - ex_take : NULL, (size_t)ex_take) &&
             (!add_bos || push(&out, &q->sm->info.bos, 1)) &&
             push(&out, &fim[SL_FIM_PRE], 1) &&
             push(&out, pre_take ? pre.t + pre.n - pre_take : NULL, (size_t)pre_take) &&
             push(&out, prompt, n_prompt) && push(&out, &fim[SL_FIM_SUF], 1) &&
             push(&out, suf.t, (size_t)suf_take) && push(&out, &fim[SL_FIM_MID], 1);
        pr.tok = calloc(1, sizeof *pr.tok);
        pr.n = calloc(1, sizeof *pr.n);
        if (!ok || !pr.tok || !pr.n) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
        } else {
            pr.tok[0] = out.t;
            pr.n[0] = out.n;
            pr.count = 1;
            out.t = NULL;
        }
    }
    free(pre.t);
    free(suf.t);
    free(ex.t);
    free(out.t);
    free(prompt);
    if (ok) sl__serve_completion(q, SL_API_INFILL, &pr, gone, user);
    sl__serve_prompts_free(&pr);
}
