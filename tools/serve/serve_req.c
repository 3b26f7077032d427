/* Reading a request of `sluice serve`: its fields, its generation parameters and its prompt.
 *
 * Requests are parsed strictly (json_doc.h) and null counts as absent. Every member must be a
 * field the endpoint honours, or one of llama-server's known fields at the value that changes
 * nothing (mirostat 0, grammar "", typical_p 1, ...): anything else is a 400 naming it, so that
 * no parameter is silently ignored. Ranges are the CLI's (generate.c): temperature 0..1e6,
 * top_k 0..2^31-1, top_p and min_p 0..1, n_predict -1..2^31-1, seed 0..2^64-1 (or -1: a random
 * seed, as llama-server).
 *
 * logit_bias takes OpenAI's map {"id" or "text": bias} and llama-server's [[id, bias]] and
 * [["text", bias]] (a text biases each of its tokens); false or a bias <= -100 bans the token
 * (OpenAI's "-100 should result in a ban"). logprobs: chat's bool with top_logprobs (0..20;
 * absent: 20, as llama-server), /v1/completions' integer, /completion's n_probs. grammar,
 * json_schema and response_format constrain the output to a GBNF grammar (get_grammar). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common/cli.h"
#include "tools/common/json_doc.h"
#include "tools/common/json_schema.h"
#include "tools/common/model_flags.h"
#include "tools/serve/serve_impl.h"

sl_jref sl__serve_field(const sl_serve_req *q, const char *key)
{
    const sl_jref v = sl_jdoc_get(q->d, q->root, key);
    return v != SL_JNONE && sl_jdoc_kind(q->d, v) == SL_JNULL ? SL_JNONE : v;
}

bool sl__serve_get_int(const sl_serve_req *q, const char *key, int64_t lo, int64_t hi,
                       int64_t *out)
{
    const sl_jref v = sl__serve_field(q, key);
    if (v == SL_JNONE) return true;
    if (sl_jdoc_kind(q->d, v) == SL_JNUM && sl_jdoc_int(q->d, v, lo, hi, out)) return true;
    sl__serve_error(q->r, 400, "'%s' must be an integer in [%" PRId64 ", %" PRId64 "]", key, lo,
                    hi);
    return false;
}

static bool get_i32(const sl_serve_req *q, const char *key, int64_t lo, int64_t hi,
                    int32_t *out)
{
    int64_t v = *out;
    if (!sl__serve_get_int(q, key, lo, hi, &v)) return false;
    *out = (int32_t)v;
    return true;
}

static bool get_num(const sl_serve_req *q, const char *key, double lo, double hi, float *out)
{
    const sl_jref v = sl__serve_field(q, key);
    if (v == SL_JNONE) return true;
    const double x = sl_jdoc_num(q->d, v);
    if (sl_jdoc_kind(q->d, v) == SL_JNUM && x >= lo && x <= hi) {
        *out = (float)x;
        return true;
    }
    sl__serve_error(q->r, 400, "'%s' must be a number in [%g, %g]", key, lo, hi);
    return false;
}

bool sl__serve_get_bool(const sl_serve_req *q, const char *key, bool *out)
{
    const sl_jref v = sl__serve_field(q, key);
    if (v == SL_JNONE) return true;
    if (sl_jdoc_kind(q->d, v) == SL_JBOOL) {
        *out = sl_jdoc_bool(q->d, v);
        return true;
    }
    sl__serve_error(q->r, 400, "'%s' must be a boolean", key);
    return false;
}

/* ---- the fields an endpoint knows ------------------------------------------------------ */

/* llama-server's fields this server does not implement, each accepted only at the value that
 * leaves the output unchanged. */
typedef enum neutral { N_NUM, N_FALSE, N_EMPTY, N_ANY_NUM, N_TOOL_CHOICE } neutral;
typedef struct known {
    const char *name;
    neutral kind;
    double value;               /* N_NUM: the only accepted number */
    const char *why;
} known;

static const known k_neutral[] = {
    {"tools", N_EMPTY, 0, "tool calls are not implemented"},
    {"tool_choice", N_TOOL_CHOICE, 0, "tool calls are not implemented"},
    {"functions", N_EMPTY, 0, "function calls are not implemented"},
    {"suffix", N_EMPTY, 0, "infilling is served by POST /infill"},
    {"samplers", N_EMPTY, 0, "the sampler order is fixed"},
    {"lora", N_EMPTY, 0, "LoRA adapters are not implemented"},
    {"mirostat", N_NUM, 0, "mirostat is not implemented"},
    {"typical_p", N_NUM, 1, "locally typical sampling is not implemented"},
    {"typ_p", N_NUM, 1, "locally typical sampling is not implemented"},
    {"dynatemp_range", N_NUM, 0, "dynamic temperature is not implemented"},
    {"xtc_probability", N_NUM, 0, "XTC is not implemented"},
    {"dry_multiplier", N_NUM, 0, "DRY is not implemented"},
    {"top_n_sigma", N_NUM, -1, "top-n-sigma is not implemented"},
    {"min_keep", N_NUM, 0, "min_keep is not implemented"},
    {"n_indent", N_NUM, 0, "n_indent is not implemented"},
    {"t_max_predict_ms", N_NUM, 0, "a prediction time limit is not implemented"},
    {"n_cache_reuse", N_NUM, 0, "KV shifting is not implemented"},
    {"n_discard", N_NUM, 0, "context shift is not implemented"},
    {"n_cmpl", N_NUM, 1, "one completion per request"},
    {"best_of", N_NUM, 1, "one completion per request"},
    {"post_sampling_probs", N_FALSE, 0, "probabilities are those of the raw logits"},
    {"timings_per_token", N_FALSE, 0, "timings come with the last chunk"},
    {"return_progress", N_FALSE, 0, "prompt progress is not reported"},
    {"parallel_tool_calls", N_FALSE, 0, "tool calls are not implemented"},
    {"mirostat_tau", N_ANY_NUM, 0, NULL},       /* no effect while mirostat is 0 */
    {"mirostat_eta", N_ANY_NUM, 0, NULL},
    {"dynatemp_exponent", N_ANY_NUM, 0, NULL},  /* ... while dynatemp_range is 0 */
    {"xtc_threshold", N_ANY_NUM, 0, NULL},
    {"dry_base", N_ANY_NUM, 0, NULL},           /* ... while dry_multiplier is 0 */
    {"dry_allowed_length", N_ANY_NUM, 0, NULL},
    {"dry_penalty_last_n", N_ANY_NUM, 0, NULL},
};

static bool is_neutral(const sl_serve_req *q, const known *k, sl_jref v)
{
    const sl_jdoc *d = q->d;
    const sl_jkind kind = sl_jdoc_kind(d, v);
    if (kind == SL_JNULL) return true;
    switch (k->kind) {
    case N_NUM: return kind == SL_JNUM && sl_jdoc_num(d, v) == k->value;
    case N_ANY_NUM: return kind == SL_JNUM;
    case N_FALSE: return kind == SL_JBOOL && !sl_jdoc_bool(d, v);
    case N_EMPTY: {
        size_t len = 0;
        if (kind == SL_JSTR) return sl_jdoc_str(d, v, &len) && !len;
        return (kind == SL_JARR || kind == SL_JOBJ) && !sl_jdoc_count(d, v);
    }
    case N_TOOL_CHOICE: {
        const char *t = sl_jdoc_str(d, v, NULL);
        return t && (!strcmp(t, "none") || !strcmp(t, "auto"));
    }
    }
    return false;
}

bool sl__serve_check_fields(const sl_serve_req *q, const char *const *names)
{
    for (sl_jref m = sl_jdoc_first(q->d, q->root); m != SL_JNONE; m = sl_jdoc_next(q->d, m)) {
        const char *key = sl_jdoc_key(q->d, m);
        bool found = false;
        for (size_t i = 0; names[i] && !found; i++) found = !strcmp(key, names[i]);
        if (found) continue;
        const known *k = NULL;
        for (size_t i = 0; i < sizeof k_neutral / sizeof *k_neutral && !k; i++)
            if (!strcmp(key, k_neutral[i].name)) k = &k_neutral[i];
        if (k && k->kind == N_ANY_NUM && !is_neutral(q, k, m)) {
            sl__serve_error(q->r, 400, "'%s' must be a number", key);
            return false;
        }
        if (k && !is_neutral(q, k, m)) {
            sl__serve_error(q->r, 400, "'%s' is not supported by this server (%s); leave it out",
                            key, k->why);
            return false;
        }
        if (!k) {
            sl__serve_error(q->r, 400, "unknown field '%.64s': not a parameter of this endpoint",
                            key);
            return false;
        }
    }
    return true;
}

/* ---- generation parameters ------------------------------------------------------------- */

static bool add_stop(const sl_serve_req *q, sl_serve_params *p, sl_jref v)
{
    size_t len;
    const char *s = sl_jdoc_str(q->d, v, &len);
    if (!s || !len || len > SL_SERVE_MAX_STOP_BYTES || memchr(s, 0, len)) {
        sl__serve_error(q->r, 400, "'stop' must be a string or an array of at most %d strings "
                        "of 1 to %d bytes", SL_SERVE_MAX_STOP, SL_SERVE_MAX_STOP_BYTES);
        return false;
    }
    if (p->n_stop == SL_SERVE_MAX_STOP) {
        sl__serve_error(q->r, 400, "'stop' has more than %d strings", SL_SERVE_MAX_STOP);
        return false;
    }
    if (!(p->stop[p->n_stop] = strdup(s))) {
        sl__serve_error(q->r, 500, "out of memory");
        return false;
    }
    p->n_stop++;
    return true;
}

static bool add_bias(const sl_serve_req *q, sl_serve_params *p, int32_t id, float bias)
{
    sl_serve_bias *b = realloc(p->bias, (p->n_bias + 1) * sizeof *b);
    if (!b) {
        sl__serve_error(q->r, 500, "out of memory");
        return false;
    }
    p->bias = b;
    b[p->n_bias++] = (sl_serve_bias){.id = id, .bias = bias};
    return true;
}

/* One logit_bias entry: key a token id (number, or a string of digits in the map form) or a
 * text; val a number or false. */
static bool bias_entry(const sl_serve_req *q, sl_serve_params *p, sl_jref key,
                       const char *key_str, sl_jref val)
{
    const int32_t n_vocab = q->sm->info.n_vocab;
    float bias;
    if (sl_jdoc_kind(q->d, val) == SL_JBOOL && !sl_jdoc_bool(q->d, val)) {
        bias = -INFINITY;
    } else if (sl_jdoc_kind(q->d, val) == SL_JNUM && fabs(sl_jdoc_num(q->d, val)) <= 1e6) {
        bias = sl_jdoc_num(q->d, val) <= -100 ? -INFINITY : (float)sl_jdoc_num(q->d, val);
    } else {
        sl__serve_error(q->r, 400, "'logit_bias': a bias must be a number in [-1e6, 1e6] or "
                        "false");
        return false;
    }
    int64_t id = -1;
    size_t len = 0;
    const char *text = key_str ? key_str : sl_jdoc_str(q->d, key, &len);
    if (key_str) len = strlen(key_str);
    if (text && len && strspn(text, "0123456789") == len) {
        char *end;
        id = len <= 10 ? strtoll(text, &end, 10) : INT64_MAX;
    } else if (!text && !(sl_jdoc_kind(q->d, key) == SL_JNUM &&
                          sl_jdoc_int(q->d, key, INT64_MIN, INT64_MAX, &id))) {
        sl__serve_error(q->r, 400, "'logit_bias': a key must be a token id or a string");
        return false;
    }
    if (text && id < 0) { /* a text: each of its tokens */
        int32_t *tok = NULL;
        size_t n = 0;
        if (!sl__serve_tokenize(q, text, len, false, false, &tok, &n)) return false;
        bool ok = true;
        for (size_t i = 0; i < n && ok; i++) ok = add_bias(q, p, tok[i], bias);
        free(tok);
        return ok;
    }
    if (id < 0 || id >= n_vocab) {
        sl__serve_error(q->r, 400, "'logit_bias': token id %" PRId64 " is not in [0, %" PRId32
                        "]", id, n_vocab - 1);
        return false;
    }
    return add_bias(q, p, (int32_t)id, bias);
}

/* A bias that bans every token leaves nothing to sample: the client's error (400), not the
 * sampler's failure at the first token (500). */
static bool bans_some(const sl_serve_req *q, const sl_serve_params *p)
{
    const int32_t n_vocab = q->sm->info.n_vocab;
    size_t n_ban = 0;
    for (size_t i = 0; i < p->n_bias; i++) n_ban += p->bias[i].bias == -INFINITY;
    if (n_ban < (size_t)n_vocab) return true;
    uint8_t *banned = calloc((size_t)n_vocab, 1);
    if (!banned) {
        sl__serve_error(q->r, 500, "out of memory");
        return false;
    }
    int32_t left = n_vocab;
    for (size_t i = 0; i < p->n_bias; i++)
        if (p->bias[i].bias == -INFINITY && !banned[p->bias[i].id]) {
            banned[p->bias[i].id] = 1;
            left--;
        }
    free(banned);
    if (left > 0) return true;
    sl__serve_error(q->r, 400, "'logit_bias' bans all %" PRId32 " tokens: nothing can be "
                    "sampled", n_vocab);
    return false;
}

static bool get_logit_bias(const sl_serve_req *q, sl_serve_params *p)
{
    const sl_jref v = sl__serve_field(q, "logit_bias");
    if (v == SL_JNONE) return true;
    const sl_jkind kind = sl_jdoc_kind(q->d, v);
    for (sl_jref e = sl_jdoc_first(q->d, v); e != SL_JNONE; e = sl_jdoc_next(q->d, e)) {
        if (kind == SL_JOBJ) {
            if (!bias_entry(q, p, SL_JNONE, sl_jdoc_key(q->d, e), e)) return false;
        } else if (sl_jdoc_kind(q->d, e) == SL_JARR && sl_jdoc_count(q->d, e) == 2) {
            const sl_jref k = sl_jdoc_first(q->d, e);
            if (!bias_entry(q, p, k, NULL, sl_jdoc_next(q->d, k))) return false;
        } else {
            break; /* the 400 below */
        }
    }
    if (kind == SL_JOBJ || kind == SL_JARR) {
        bool pairs = true;
        if (kind == SL_JARR)
            for (sl_jref e = sl_jdoc_first(q->d, v); e != SL_JNONE; e = sl_jdoc_next(q->d, e))
                pairs &= sl_jdoc_kind(q->d, e) == SL_JARR && sl_jdoc_count(q->d, e) == 2;
        if (pairs) return bans_some(q, p);
    }
    sl__serve_error(q->r, 400, "'logit_bias' must be an object {\"token id or text\": bias} or "
                    "an array of [token id or text, bias] pairs");
    return false;
}

/* The fields each endpoint honours (sl__serve_check_fields). */
#define COMMON "model", "stream", "n_predict", "max_tokens", "temperature", "top_k", "top_p", \
    "min_p", "seed", "stop", "ignore_eos", "logit_bias", "frequency_penalty",               \
    "presence_penalty", "repeat_penalty", "repeat_last_n", "cache_prompt", "n_keep",         \
    "return_tokens", "stream_options", "user", "id_slot", "grammar", "json_schema",        \
    "response_format"
static const char *const k_native[] = {COMMON, "prompt", "n_probs", NULL};
static const char *const k_infill[] = {COMMON, "prompt", "n_probs", "input_prefix",
                                       "input_suffix", "input_extra", NULL};
static const char *const k_text[] = {COMMON, "prompt", "n", "logprobs", "echo", NULL};
static const char *const k_chat[] = {COMMON, "messages", "n", "max_completion_tokens", "logprobs",
                                     "top_logprobs", NULL};

static bool get_probs(const sl_serve_req *q, sl_serve_api kind, sl_serve_params *p)
{
    const int32_t max = SL_SERVE_MAX_PROBS;
    if (kind == SL_API_NATIVE || kind == SL_API_INFILL) {
        if (!get_i32(q, "n_probs", 0, max, &p->n_probs)) return false;
        p->probs = p->n_probs > 0;
        return true;
    }
    if (kind == SL_API_OAI_TEXT) {
        p->probs = sl__serve_field(q, "logprobs") != SL_JNONE;
        return get_i32(q, "logprobs", 0, max, &p->n_probs);
    }
    if (!sl__serve_get_bool(q, "logprobs", &p->probs)) return false;
    if (!p->probs && sl__serve_field(q, "top_logprobs") != SL_JNONE) {
        sl__serve_error(q->r, 400, "'top_logprobs' requires 'logprobs' to be true");
        return false;
    }
    p->n_probs = p->probs ? 20 : 0;
    return get_i32(q, "top_logprobs", 0, 20, &p->n_probs);
}

/* The grammar a request constrains its output to, as llama-server reads it: "grammar" (GBNF),
 * "json_schema", or "response_format" {"type": "text" | "json_object" (with an optional
 * "schema") | "json_schema" ({"json_schema": {"schema": ...}})}; an absent or empty schema is
 * any object. A grammar with a schema is llama-server's 400 "Cannot use both json_schema and
 * grammar" (on every endpoint here). The GBNF is checked against the model's vocabulary now,
 * so that a malformed grammar or schema is a 400 naming its field. */
static bool get_grammar(const sl_serve_req *q, sl_serve_params *p)
{
    const sl_jdoc *d = q->d;
    const sl_jref g = sl__serve_field(q, "grammar"), js = sl__serve_field(q, "json_schema"),
                  rf = sl__serve_field(q, "response_format");
    size_t glen = 0;
    const char *gs = NULL;
    if (g != SL_JNONE && !(gs = sl_jdoc_str(d, g, &glen))) {
        sl__serve_error(q->r, 400, "'grammar' must be a string (a GBNF grammar)");
        return false;
    }
    sl_jref schema = SL_JNONE;
    const char *field = "json_schema";
    bool want_json = false;
    if (js != SL_JNONE) {
        if (sl_jdoc_kind(d, js) != SL_JOBJ && sl_jdoc_kind(d, js) != SL_JBOOL) {
            sl__serve_error(q->r, 400, "'json_schema' must be a JSON schema (an object)");
            return false;
        }
        schema = js;
        want_json = true;
    }
    if (rf != SL_JNONE) {
        const sl_jref t = sl_jdoc_get(d, rf, "type");
        const char *type = sl_jdoc_str(d, t, NULL);
        if (sl_jdoc_kind(d, rf) != SL_JOBJ || (t != SL_JNONE && !type)) {
            sl__serve_error(q->r, 400, "'response_format' must be an object {\"type\": \"text\" | "
                            "\"json_object\" | \"json_schema\", ...}");
            return false;
        }
        if (type && !strcmp(type, "json_object")) {
            const sl_jref sc = sl_jdoc_get(d, rf, "schema");
            if (sc != SL_JNONE || schema == SL_JNONE) {
                schema = sc;
                field = "response_format.schema";
            }
            want_json = true;
        } else if (type && !strcmp(type, "json_schema")) {
            schema = sl_jdoc_get(d, sl_jdoc_get(d, rf, "json_schema"), "schema");
            field = "response_format.json_schema.schema";
            want_json = true;
        } else if (type && *type && strcmp(type, "text")) {
            sl__serve_error(q->r, 400, "'response_format': type must be one of \"text\", "
                            "\"json_object\" or \"json_schema\", but got: %.64s", type);
            return false;
        }
    }
    if (want_json && gs && glen) {
        sl__serve_error(q->r, 400, "Cannot use both json_schema and grammar ('grammar' with "
                        "'%s')", js != SL_JNONE ? "json_schema" : "response_format");
        return false;
    }
    char *gbnf = NULL;
    sl_error err = {0};
    if (want_json) {
        /* absent or {}: any object (llama-server's {"type": "object"}) */
        sl_jdoc *obj = NULL;
        const bool any = schema == SL_JNONE || sl_jdoc_kind(d, schema) == SL_JNULL ||
                         (sl_jdoc_kind(d, schema) == SL_JOBJ && !sl_jdoc_count(d, schema));
        static const char k_object[] = "{\"type\":\"object\"}";
        sl_status st = any ? sl_jdoc_parse(k_object, sizeof k_object - 1, 0, &obj, &err) : SL_OK;
        if (!st) st = sl_json_schema_to_gbnf(any ? obj : d, any ? 0 : schema, &gbnf, &err);
        sl_jdoc_free(obj);
        if (st) {
            sl__serve_error(q->r, st == SL_ERR_NOMEM ? 500 : 400, "'%s': %s", field, err.msg);
            return false;
        }
    } else if (gs && glen) {
        if (memchr(gs, 0, glen)) {
            sl__serve_error(q->r, 400, "'grammar': a NUL character in the grammar");
            return false;
        }
        if (!(gbnf = strdup(gs))) {
            sl__serve_error(q->r, 500, "'grammar': out of memory");
            return false;
        }
        field = "grammar";
    }
    if (!gbnf) return true;
    sl_sampler *smp = NULL;
    const sl_sampler_options so = sl_sampler_options_default();
    sl_status st = sl_sampler_create(&so, &smp, &err);
    if (!st) st = sl_sampler_set_grammar(smp, q->sm->model, gbnf, &err);
    sl_sampler_destroy(smp);
    if (st) {
        free(gbnf);
        sl__serve_error(q->r, st == SL_ERR_NOMEM ? 500 : 400, "'%s': %s", field, err.msg);
        return false;
    }
    p->grammar = gbnf;
    return true;
}

sl_serve_params sl__serve_params_default(const sl_serve *s)
{
    return (sl_serve_params){.so = s->so_default, .n_predict = s->n_predict_default,
                             .repeat_penalty = 1, .repeat_last_n = 64, .cache_prompt = true,
                             .id_slot = -1};
}

bool sl__serve_get_params(const sl_serve_req *q, sl_serve_api kind, sl_serve_params *p)
{
    sl_serve *s = q->s;
    *p = sl__serve_params_default(s);
    if (!sl__serve_check_fields(q, kind == SL_API_NATIVE ? k_native
                                   : kind == SL_API_INFILL ? k_infill
                                   : kind == SL_API_OAI_TEXT ? k_text : k_chat))
        return false;
    if (!get_i32(q, "n_predict", -1, INT32_MAX, &p->n_predict) ||
        !get_i32(q, "max_tokens", -1, INT32_MAX, &p->n_predict) ||
        (kind == SL_API_OAI_CHAT &&
         !get_i32(q, "max_completion_tokens", -1, INT32_MAX, &p->n_predict)))
        return false;
    int64_t n = 1, n_keep = 0;
    if (!get_num(q, "temperature", 0, 1e6, &p->so.temp) ||
        !get_i32(q, "top_k", 0, INT32_MAX, &p->so.top_k) ||
        !get_num(q, "top_p", 0, 1, &p->so.top_p) || !get_num(q, "min_p", 0, 1, &p->so.min_p) ||
        !sl__serve_get_bool(q, "ignore_eos", &p->ignore_eos) ||
        !get_num(q, "repeat_penalty", 1e-6, 1e6, &p->repeat_penalty) ||
        !get_num(q, "frequency_penalty", -1e6, 1e6, &p->frequency_penalty) ||
        !get_num(q, "presence_penalty", -1e6, 1e6, &p->presence_penalty) ||
        !get_i32(q, "repeat_last_n", -1, INT32_MAX, &p->repeat_last_n) ||
        !sl__serve_get_bool(q, "return_tokens", &p->return_tokens) ||
        !sl__serve_get_bool(q, "cache_prompt", &p->cache_prompt) ||
        !get_i32(q, "id_slot", -1, INT32_MAX, &p->id_slot) ||
        /* llama-server's tokens kept by a context shift, which this server does not do (as
         * llama-server without --context-shift, its default): no effect, any valid value */
        !sl__serve_get_int(q, "n_keep", -1, INT32_MAX, &n_keep) ||
        (kind != SL_API_NATIVE && kind != SL_API_INFILL &&
         !sl__serve_get_int(q, "n", 1, 1, &n)) ||
        !get_probs(q, kind, p) || !get_logit_bias(q, p) || !get_grammar(q, p))
        return false;
    const sl_jref user = sl__serve_field(q, "user"), so = sl__serve_field(q, "stream_options");
    if (user != SL_JNONE && sl_jdoc_kind(q->d, user) != SL_JSTR) {
        sl__serve_error(q->r, 400, "'user' must be a string");
        return false;
    }
    if (so != SL_JNONE) {
        const sl_jref iu = sl_jdoc_get(q->d, so, "include_usage");
        if (sl_jdoc_kind(q->d, so) != SL_JOBJ || sl_jdoc_count(q->d, so) > 1 ||
            (sl_jdoc_count(q->d, so) == 1 && sl_jdoc_kind(q->d, iu) != SL_JBOOL)) {
            sl__serve_error(q->r, 400, "'stream_options' must be {\"include_usage\": bool}");
            return false;
        }
        p->include_usage = iu != SL_JNONE && sl_jdoc_bool(q->d, iu);
    }
    const sl_jref seed = sl__serve_field(q, "seed");
    if (seed != SL_JNONE) {
        int64_t minus1;
        if (sl_jdoc_int(q->d, seed, -1, -1, &minus1)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            pthread_mutex_lock(&s->mu);
            const uint64_t id = s->next_id++;
            pthread_mutex_unlock(&s->mu);
            p->so.seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                         (id * 0x9E3779B97F4A7C15u);
        } else if (sl_jdoc_kind(q->d, seed) != SL_JNUM || !sl_jdoc_u64(q->d, seed, &p->so.seed)) {
            sl__serve_error(q->r, 400, "'seed' must be an integer in [0, 2^64-1], or -1 (random)");
            return false;
        }
    }
    const sl_jref stop = sl__serve_field(q, "stop");
    if (stop == SL_JNONE) return true;
    if (sl_jdoc_kind(q->d, stop) != SL_JARR) return add_stop(q, p, stop); /* or the 400 */
    for (sl_jref v = sl_jdoc_first(q->d, stop); v != SL_JNONE; v = sl_jdoc_next(q->d, v))
        if (!add_stop(q, p, v)) return false;
    return true;
}

/* ---- prompts -------------------------------------------------------------------------------- */

bool sl__serve_tokenize(const sl_serve_req *q, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **tok, size_t *n)
{
    if (sl_cli_tokenize(q->sm->model, "serve", q->sm->path, text, len, add_special,
                        parse_special, tok, n)) {
        sl__serve_error(q->r, 500, "the text could not be tokenized");
        return false;
    }
    return true;
}

/* One prompt from v: a string, or an array of token ids and strings (llama-server's mixed form:
 * the strings tokenized in place, BOS only when the first element is a string). */
bool sl__serve_prompt_of(const sl_serve_req *q, sl_jref v, const char *what, bool add_special,
                         int32_t **tok, size_t *n)
{
    size_t len;
    const char *s = sl_jdoc_str(q->d, v, &len);
    if (s) return sl__serve_tokenize(q, s, len, add_special, true, tok, n);
    if (v == SL_JNONE || sl_jdoc_kind(q->d, v) != SL_JARR) {
        sl__serve_error(q->r, 400, "'%s' must be a string or an array of token ids "
                        "(and strings)", what);
        return false;
    }
    char *out = NULL; /* int32_t ids, appended as bytes */
    int32_t *part = NULL;
    size_t n_out = 0, cap = 0, i = 0;
    bool ok = true;
    for (sl_jref e = sl_jdoc_first(q->d, v); ok && e != SL_JNONE; e = sl_jdoc_next(q->d, e), i++) {
        size_t n_part = 0;
        int64_t id;
        const char *str = sl_jdoc_str(q->d, e, &len);
        if (str) {
            ok = sl__serve_tokenize(q, str, len, add_special && i == 0, true, &part, &n_part);
        } else if (sl_jdoc_kind(q->d, e) == SL_JNUM &&
                   sl_jdoc_int(q->d, e, 0, q->sm->info.n_vocab - 1, &id)) {
            const int32_t t = (int32_t)id;
            if (sl_cli_append(&out, &n_out, &cap, &t, sizeof t)) ok = false;
            if (!ok) sl__serve_error(q->r, 500, "out of memory");
            continue;
        } else {
            sl__serve_error(q->r, 400, "'%s'[%zu] must be a token id in [0, %" PRId32 "] or "
                            "a string", what, i, q->sm->info.n_vocab - 1);
            ok = false;
        }
        if (ok && sl_cli_append(&out, &n_out, &cap, part, n_part * sizeof *part)) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
        }
        free(part);
        part = NULL;
    }
    if (!ok) {
        free(out);
        return false;
    }
    *tok = out ? (int32_t *)(void *)out : malloc(sizeof **tok);
    *n = n_out / sizeof **tok;
    if (!*tok) sl__serve_error(q->r, 500, "out of memory");
    return *tok != NULL;
}

bool sl__serve_get_prompt(const sl_serve_req *q, int32_t **tok, size_t *n)
{
    return sl__serve_prompt_of(q, sl__serve_field(q, "prompt"), "prompt", true, tok, n);
}

void sl__serve_prompts_free(sl_serve_prompts *p)
{
    for (size_t i = 0; p->tok && i < p->count; i++) free(p->tok[i]);
    free(p->tok);
    free(p->n);
    *p = (sl_serve_prompts){0};
}

/* Whether array v holds a number (llama-server's json_is_array_and_contains_numbers). */
static bool has_number(const sl_serve_req *q, sl_jref v)
{
    for (sl_jref e = sl_jdoc_first(q->d, v); e != SL_JNONE; e = sl_jdoc_next(q->d, e))
        if (sl_jdoc_kind(q->d, e) == SL_JNUM) return true;
    return false;
}

bool sl__serve_get_prompts(const sl_serve_req *q, const char *key, bool add_special,
                           sl_serve_prompts *out)
{
    *out = (sl_serve_prompts){0};
    const sl_jref v = sl__serve_field(q, key);
    const bool many = v != SL_JNONE && sl_jdoc_kind(q->d, v) == SL_JARR && !has_number(q, v);
    const size_t count = many ? sl_jdoc_count(q->d, v) : 1;
    if (!count) {
        sl__serve_error(q->r, 400, "'%s' must not be empty", key);
        return false;
    }
    out->tok = calloc(count, sizeof *out->tok);
    out->n = calloc(count, sizeof *out->n);
    if (!out->tok || !out->n) {
        sl__serve_prompts_free(out);
        sl__serve_error(q->r, 500, "out of memory");
        return false;
    }
    sl_jref e = many ? sl_jdoc_first(q->d, v) : v;
    for (size_t i = 0; i < count; i++, e = many ? sl_jdoc_next(q->d, e) : e) {
        char what[64];
        if (many) snprintf(what, sizeof what, "%s[%zu]", key, i);
        else snprintf(what, sizeof what, "%s", key);
        if (!sl__serve_prompt_of(q, e, what, add_special, &out->tok[i], &out->n[i])) {
            sl__serve_prompts_free(out);
            return false;
        }
        out->count = i + 1;
    }
    return true;
}

/* A message's content: a string, null, or an array of {"type":"text","text":...} parts
 * (concatenated). Appends it to f. */
static bool put_message_content(const sl_serve_req *q, size_t i, sl_jref c, FILE *f)
{
    size_t len;
    const char *s = sl_jdoc_str(q->d, c, &len);
    if (s || c == SL_JNONE || sl_jdoc_kind(q->d, c) == SL_JNULL) {
        if (s) fwrite(s, 1, len, f);
        return true;
    }
    if (sl_jdoc_kind(q->d, c) == SL_JARR) {
        for (sl_jref p = sl_jdoc_first(q->d, c); p != SL_JNONE; p = sl_jdoc_next(q->d, p)) {
            const char *type = sl_jdoc_str(q->d, sl_jdoc_get(q->d, p, "type"), NULL);
            const char *text = sl_jdoc_str(q->d, sl_jdoc_get(q->d, p, "text"), &len);
            if (!type || strcmp(type, "text") || !text) {
                sl__serve_error(q->r, 400, "'messages'[%zu].content: only parts "
                                "{\"type\":\"text\",\"text\":...} are supported", i);
                return false;
            }
            fwrite(text, 1, len, f);
        }
        return true;
    }
    sl__serve_error(q->r, 400, "'messages'[%zu].content must be a string or an array of parts", i);
    return false;
}

bool sl__serve_chat_text(const sl_serve_req *q, char **out, size_t *out_len)
{
    const sl_jref msgs = sl__serve_field(q, "messages");
    const size_t n_msg = sl_jdoc_count(q->d, msgs);
    if (msgs == SL_JNONE || sl_jdoc_kind(q->d, msgs) != SL_JARR || !n_msg) {
        sl__serve_error(q->r, 400, "'messages' must be a non-empty array of messages");
        return false;
    }
    sl_chat_msg *cm = calloc(n_msg, sizeof *cm);
    char **content = calloc(n_msg, sizeof *content);
    size_t *clen = calloc(n_msg, sizeof *clen);
    char *text = NULL;
    size_t text_len = 0;
    bool ok = cm && content && clen;
    if (!ok) sl__serve_error(q->r, 500, "out of memory");
    size_t i = 0;
    for (sl_jref m = sl_jdoc_first(q->d, msgs); ok && m != SL_JNONE; m = sl_jdoc_next(q->d, m)) {
        const char *role = sl_jdoc_str(q->d, sl_jdoc_get(q->d, m, "role"), NULL);
        if (sl_jdoc_kind(q->d, m) != SL_JOBJ || !role || !*role || strlen(role) > 64) {
            sl__serve_error(q->r, 400, "'messages'[%zu] must be an object with a \"role\" string "
                            "of 1 to 64 bytes", i);
            ok = false;
            break;
        }
        FILE *f = open_memstream(&content[i], &clen[i]);
        if (!f) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
            break;
        }
        ok = put_message_content(q, i, sl_jdoc_get(q->d, m, "content"), f);
        if (fclose(f) && ok) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
        }
        cm[i] = (sl_chat_msg){.role = role, .content = content[i], .len = clen[i]};
        i++;
    }
    if (ok) {
        FILE *f = open_memstream(&text, &text_len);
        if (!f || sl_chat_apply(q->sm->chat, cm, n_msg, true, f)) {
            sl__serve_error(q->r, 500, "out of memory");
            ok = false;
        }
        if (f) fclose(f);
    }
    for (size_t k = 0; content && k < n_msg; k++) free(content[k]);
    free(content);
    free(clen);
    free(cm);
    if (ok) {
        *out = text;
        *out_len = text_len;
    } else {
        free(text);
    }
    return ok;
}


char *sl__serve_detokenize(const sl_serve_model *sm, const int32_t *tok, size_t n, size_t *len)
{
    size_t need = 0, cap = 256;
    char *buf = NULL;
    for (int tries = 0; tries < 2; tries++, cap = need + 1) {
        sl_error err = {0};
        free(buf);
        if (!(buf = malloc(cap))) return NULL;
        const sl_status st = sl_detokenize(sm->model, tok, n, buf, cap, &need, &err);
        if (!st && need < cap) {
            *len = need;
            return buf;
        }
        if (st && st != SL_ERR_RANGE) break;
    }
    free(buf);
    return NULL;
}
