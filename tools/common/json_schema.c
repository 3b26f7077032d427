/* JSON Schema -> GBNF (json_schema.h), after llama.cpp's common_chat_schema_converter: rules
 * are added by name (a name taken by another body gets a number appended), primitives pull
 * in the rules they use, and the grammar is written sorted by name. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/gbnf_build.h"
#include "tools/common/json.h"
#include "tools/common/json_schema.h"

typedef struct prim {
    const char *name, *body;
    const char *deps[7];
} prim;

/* llama.cpp's PRIMITIVE_RULES and STRING_FORMAT_RULES: one table. */
static const prim k_prims[] = {
    {"boolean", "(\"true\" | \"false\")", {NULL}},
    {"decimal-part", "[0-9]{1,16}", {NULL}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {NULL}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?",
     {"integral-part", "decimal-part", NULL}},
    {"integer", "(\"-\"? integral-part)", {"integral-part", NULL}},
    {"value", "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null", NULL}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? "
     "space \"}\"", {"string", "value", NULL}},
    {"array", "\"[\" space ( value (\",\" space value)* )? space \"]\"", {"value", NULL}},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
     "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"", {NULL}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {NULL}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char", NULL}},
    {"null", "\"null\"", {NULL}},
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | "
     "\"3\" [0-1] )", {NULL}},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? "
     "( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", {NULL}},
    {"date-time", "date \"T\" time", {"date", "time", NULL}},
    {"date-string", "\"\\\"\" date \"\\\"\"", {"date", NULL}},
    {"time-string", "\"\\\"\" time \"\\\"\"", {"time", NULL}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\"", {"date-time", NULL}},
};

static const char k_space_rule[] = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

/* The bounds of numbers: honoured on integers (llama.cpp's build_min_max_int). */
static const char *const k_bounds[] = {"minimum", "exclusiveMinimum", "maximum",
                                       "exclusiveMaximum"};

/* Keywords that constrain values in ways the grammar does not express: refused (the bounds
 * but on integers). */
static const struct {
    const char *key, *why;
} k_refused[] = {
    {"pattern", "regular expressions are not converted"},
    {"patternProperties", "regular expressions are not converted"},
    {"minimum", "only integers are bounded"},
    {"maximum", "only integers are bounded"},
    {"exclusiveMinimum", "only integers are bounded"},
    {"exclusiveMaximum", "only integers are bounded"},
    {"multipleOf", "numbers are not bounded"},
    {"not", "negation is not converted"},
    {"if", "conditionals are not converted"},
    {"then", "conditionals are not converted"},
    {"else", "conditionals are not converted"},
    {"propertyNames", "key constraints are not converted"},
    {"minProperties", "key counts are not converted"},
    {"maxProperties", "key counts are not converted"},
    {"dependentRequired", "dependencies are not converted"},
    {"dependentSchemas", "dependencies are not converted"},
    {"uniqueItems", "uniqueness is not converted"},
    {"contains", "'contains' is not converted"},
    {"unevaluatedProperties", "'unevaluated*' is not converted"},
    {"unevaluatedItems", "'unevaluated*' is not converted"},
};

typedef struct str {
    char *s;
    size_t n, cap;
} str;

typedef struct grule {
    char *name, *body;
} grule;

/* Invariants: rule names are distinct; path is the JSON pointer of the schema being read. */
typedef struct conv {
    const sl_jdoc *d;
    sl_jref root;
    grule *r;
    size_t n, cap;
    const char *resolving[64];  /* $refs being resolved (recursion ends at them) */
    size_t n_res;
    char path[512];
    sl_status st;
    sl_error *err;
} conv;

static void fail(conv *c, sl_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(conv *c, sl_status st, const char *fmt, ...)
{
    if (c->st) return;
    c->st = st;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sl_error_set(c->err, st, "at %s: %s", c->path[0] ? c->path : "/", why);
}

static void add(conv *c, str *s, const char *t, size_t len)
{
    if (c->st) return;
    if (s->n + len + 1 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        while (cap < s->n + len + 1) cap *= 2;
        char *p = realloc(s->s, cap);
        if (!p) {
            fail(c, SL_ERR_NOMEM, "out of memory");
            return;
        }
        s->s = p;
        s->cap = cap;
    }
    memcpy(s->s + s->n, t, len);
    s->n += len;
    s->s[s->n] = 0;
}

static void adds(conv *c, str *s, const char *t)
{
    add(c, s, t, strlen(t));
}

static void addf(conv *c, str *s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void addf(conv *c, str *s, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fail(c, SL_ERR_INVALID, "a rule could not be formatted");
    } else if ((size_t)n < sizeof buf) {
        add(c, s, buf, (size_t)n);
    } else { /* long names and bodies: format again into a buffer of the right size */
        char *big = malloc((size_t)n + 1);
        if (!big) {
            fail(c, SL_ERR_NOMEM, "out of memory");
            return;
        }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        add(c, s, big, (size_t)n);
        free(big);
    }
}

/* s's text (never NULL: "" after a failure), handed to the caller. */
static char *take(str *s)
{
    char *t = s->s ? s->s : strdup("");
    *s = (str){0};
    return t;
}

/* llama.cpp's INVALID_RULE_CHARS_RE: runs of other characters become one '-'. */
static char *esc_name(conv *c, const char *name)
{
    str s = {0};
    for (const char *p = name; *p;) {
        const char ch = *p;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-') {
            add(c, &s, p++, 1);
            continue;
        }
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9') || *p == '-'))
            p++;
        adds(c, &s, "-");
    }
    return take(&s);
}

static grule *find(conv *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->r[i].name, name)) return &c->r[i];
    return NULL;
}

/* llama.cpp's _add_rule: returns the name the body got (malloc'd). */
static char *add_rule(conv *c, const char *name, const char *body)
{
    char *esc = esc_name(c, name);
    if (c->st) return esc;
    grule *g = find(c, esc);
    char *key = esc;
    if (g && strcmp(g->body, body)) {
        for (int i = 0;; i++) {
            str k = {0};
            addf(c, &k, "%s%d", esc, i);
            key = take(&k);
            g = find(c, key);
            if (c->st || !g || !strcmp(g->body, body)) break;
            free(key);
        }
        free(esc);
    }
    if (c->st) return key;
    if (g) return key; /* the same body under that name */
    if (c->n == c->cap) {
        const size_t cap = c->cap ? 2 * c->cap : 32;
        grule *r = realloc(c->r, cap * sizeof *r);
        if (!r) {
            fail(c, SL_ERR_NOMEM, "out of memory");
            return key;
        }
        c->r = r;
        c->cap = cap;
    }
    char *n = strdup(key), *b = strdup(body);
    if (!n || !b) {
        free(n);
        free(b);
        fail(c, SL_ERR_NOMEM, "out of memory");
        return key;
    }
    c->r[c->n++] = (grule){n, b};
    return key;
}

static const prim *prim_of(const char *name)
{
    for (size_t i = 0; i < sizeof k_prims / sizeof *k_prims; i++)
        if (!strcmp(k_prims[i].name, name)) return &k_prims[i];
    return NULL;
}

/* llama.cpp's _add_primitive: the rule under name, and the rules it uses. */
static char *add_prim(conv *c, const char *name, const char *prim_name)
{
    const prim *p = prim_of(prim_name);
    char *n = add_rule(c, name, p->body);
    for (size_t i = 0; p->deps[i] && !c->st; i++)
        if (!find(c, p->deps[i])) free(add_prim(c, p->deps[i], p->deps[i]));
    return n;
}

static bool is_reserved(const char *name)
{
    return !strcmp(name, "root") || prim_of(name);
}

/* llama.cpp's format_literal: a GBNF string literal of text (\r \n " \ escaped). */
static void literal(conv *c, str *s, const char *t, size_t len)
{
    adds(c, s, "\"");
    for (size_t i = 0; i < len; i++) {
        const char ch = t[i];
        if (ch == '\r') adds(c, s, "\\r");
        else if (ch == '\n') adds(c, s, "\\n");
        else if (ch == '"') adds(c, s, "\\\"");
        else if (ch == '\\') adds(c, s, "\\\\");
        else add(c, s, &t[i], 1);
    }
    adds(c, s, "\"");
}

/* The literal of the JSON text of v (nlohmann's dump(): const, enum values), or with v
 * SL_JNONE of the string key (a property name). */
static void value_literal(conv *c, str *s, sl_jref v, const char *key)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f && v != SL_JNONE) sl_jdoc_write(f, c->d, v);
    else if (f) sl_json_cstr(f, key);
    if (!f || fclose(f)) fail(c, SL_ERR_NOMEM, "out of memory");
    else literal(c, s, buf, len);
    free(buf);
}

/* llama.cpp's build_repetition; max < 0: no maximum. */
static char *repetition(conv *c, const char *item, int64_t min, int64_t max, const char *sep)
{
    str s = {0};
    if (max == 0) return take(&s);
    if (min == 0 && max == 1) {
        addf(c, &s, "%s?", item);
        return take(&s);
    }
    if (!sep) {
        if (min == 1 && max < 0) addf(c, &s, "%s+", item);
        else if (min == 0 && max < 0) addf(c, &s, "%s*", item);
        else if (max < 0) addf(c, &s, "%s{%" PRId64 ",}", item, min);
        else addf(c, &s, "%s{%" PRId64 ",%" PRId64 "}", item, min, max);
        return take(&s);
    }
    str sub = {0};
    adds(c, &sub, "(");
    adds(c, &sub, sep);
    adds(c, &sub, " ");
    adds(c, &sub, item);
    adds(c, &sub, ")");
    char *rest = repetition(c, sub.s ? sub.s : "", min == 0 ? 0 : min - 1, max < 0 ? max : max - 1,
                            NULL);
    free(sub.s);
    if (min == 0) adds(c, &s, "(");
    adds(c, &s, item);
    adds(c, &s, " ");
    adds(c, &s, rest);
    if (min == 0) adds(c, &s, ")?");
    free(rest);
    return take(&s);
}

static size_t path_push(conv *c, const char *seg, const char *key)
{
    const size_t len = strlen(c->path);
    snprintf(c->path + len, sizeof c->path - len, "/%s%s%s", seg, key ? "/" : "", key ? key : "");
    return len;
}

static void path_pop(conv *c, size_t len)
{
    c->path[len] = 0;
}

static char *visit(conv *c, sl_jref v, const char *name);

/* name + "-" + suffix (or suffix alone when name is empty), malloc'd. */
static char *sub_name(conv *c, const char *name, const char *suffix)
{
    str s = {0};
    addf(c, &s, "%s%s", name, *name ? "-" : "");
    adds(c, &s, suffix);
    return take(&s);
}

/* A count keyword (minItems ...): *out, or def when absent. */
static bool get_count(conv *c, sl_jref v, const char *key, int64_t def, int64_t *out)
{
    const sl_jref x = sl_jdoc_get(c->d, v, key);
    *out = def;
    if (x == SL_JNONE) return true;
    if (sl_jdoc_kind(c->d, x) == SL_JNUM && sl_jdoc_int(c->d, x, 0, 1000000, out)) return true;
    fail(c, SL_ERR_FORMAT, "'%s' must be an integer in [0, 1000000]", key);
    return false;
}

/* A pair of count keywords (minItems / maxItems ...): *min (0 when absent) <= *max (-1: none). */
static bool get_counts(conv *c, sl_jref v, const char *kmin, const char *kmax, int64_t *min,
                       int64_t *max)
{
    if (!get_count(c, v, kmin, 0, min) || !get_count(c, v, kmax, -1, max)) return false;
    if (*max >= 0 && *max < *min) {
        fail(c, SL_ERR_FORMAT, "%s %" PRId64 " < %s %" PRId64, kmax, *max, kmin, *min);
        return false;
    }
    return true;
}

/* The rule named rule_name with the body built in *s (taken). */
static char *add_taken(conv *c, const char *rule_name, str *s)
{
    char *body = take(s);
    char *r = add_rule(c, rule_name, body);
    free(body);
    return r;
}

/* One property of an object rule: its key, its kv rule, whether required; key NULL: the
 * additional properties ("*" in llama.cpp). */
typedef struct prop {
    const char *key;
    char *kv;
    bool required;
} prop;

/* The head of llama.cpp's get_recursive_refs at ks[i]: its kv rule, optional after a comma
 * (first_optional), "*": repeated. */
static char *refs_head(conv *c, const prop *ks, size_t i, bool first_optional)
{
    str s = {0};
    const bool star = !ks[i].key;
    str comma = {0};
    addf(c, &comma, "( \",\" space %s )", ks[i].kv);
    if (first_optional) {
        addf(c, &s, "%s%s", comma.s ? comma.s : "", star ? "*" : "?");
    } else {
        adds(c, &s, ks[i].kv);
        if (star) addf(c, &s, " %s*", comma.s ? comma.s : "");
    }
    free(comma.s);
    return take(&s);
}

/* llama.cpp's get_recursive_refs(ks[i:]) for every i of n: its "-rest" rule after ks[j] is the
 * same whichever i reached it, so rest[j] is built once, from the last back (llama.cpp's order
 * of adding them), and refs[i] = head(i) + rest[i]. Built again for every i (and by recursion
 * n deep) they cost O(n^2) rules of O(rules) lookups: an 8 KB schema of 800 optional
 * properties held an HTTP thread for seconds. rest and refs: [n], filled (NULL: none). */
static void recursive_refs(conv *c, const prop *ks, size_t n, const char *name, char **rest,
                           char **refs)
{
    for (size_t j = n - 1; j-- > 0 && !c->st;) {
        char *body = refs_head(c, ks, j + 1, true);
        str full = {0}, rn = {0};
        addf(c, &full, "%s%s%s", body ? body : "", rest[j + 1] ? " " : "",
             rest[j + 1] ? rest[j + 1] : "");
        addf(c, &rn, "%s%s%s-rest", name, *name ? "-" : "", ks[j].key ? ks[j].key : "*");
        rest[j] = add_rule(c, rn.s ? rn.s : "", full.s ? full.s : "");
        free(body);
        free(full.s);
        free(rn.s);
    }
    for (size_t i = 0; i < n && !c->st; i++) {
        char *head = refs_head(c, ks, i, false);
        str r = {0};
        addf(c, &r, "%s%s%s", head ? head : "", rest[i] ? " " : "", rest[i] ? rest[i] : "");
        refs[i] = take(&r);
        free(head);
    }
}

/* llama.cpp's _build_object_rule over props[0, n) (kv rules made here); addl: the
 * additionalProperties schema, or SL_JNONE. */
static char *object_rule(conv *c, prop *props, size_t n, const char *name, sl_jref addl)
{
    str s = {0};
    prop *opt = calloc(n + 1, sizeof *opt), *req = calloc(n + 1, sizeof *req);
    size_t n_opt = 0, n_req = 0;
    if (!opt || !req) fail(c, SL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !c->st; i++) {
        if (props[i].required) req[n_req++] = props[i];
        else opt[n_opt++] = props[i];
    }
    char *addl_kv = NULL;
    if (addl != SL_JNONE && !c->st) {
        char *sub = sub_name(c, name, "additional");
        char *value;
        const size_t mark = path_push(c, "additionalProperties", NULL);
        if (sl_jdoc_kind(c->d, addl) == SL_JBOOL ||
            (sl_jdoc_kind(c->d, addl) == SL_JOBJ && !sl_jdoc_count(c->d, addl))) {
            value = add_prim(c, "value", "value");
        } else {
            char *vn = sub_name(c, sub, "value");
            value = visit(c, addl, vn);
            free(vn);
        }
        path_pop(c, mark);
        char *key;
        if (n) { /* not one of the properties' names */
            const char **names = malloc(n * sizeof *names);
            char *ch = add_prim(c, "char", "char"), *body = NULL, *kn = sub_name(c, sub, "k");
            for (size_t i = 0; names && i < n; i++) names[i] = props[i].key;
            if (!names || !(body = sl_gbnf_not_strings(names, n, ch)))
                fail(c, SL_ERR_NOMEM, "out of memory");
            key = add_rule(c, kn, body ? body : "");
            free(names);
            free(ch);
            free(kn);
            free(body);
        } else {
            key = add_prim(c, "string", "string");
        }
        str body = {0}, kvn = {0};
        addf(c, &body, "%s \":\" space %s", key, value);
        addf(c, &kvn, "%s-kv", sub);
        addl_kv = add_rule(c, kvn.s ? kvn.s : "", body.s ? body.s : "");
        free(body.s);
        free(kvn.s);
        free(key);
        free(value);
        free(sub);
        if (!c->st) opt[n_opt++] = (prop){.key = NULL, .kv = addl_kv};
    }
    if (!c->st && !n_req && !n_opt) {
        adds(c, &s, "\"{\" space \"}\"");
    } else if (!c->st) {
        adds(c, &s, "\"{\" space ");
        for (size_t i = 0; i < n_req; i++) addf(c, &s, "%s%s", i ? " \",\" space " : "", req[i].kv);
        if (n_opt) {
            adds(c, &s, " (");
            if (n_req) adds(c, &s, " \",\" space ( ");
            char **rest = calloc(2 * n_opt, sizeof *rest), **refs = rest + n_opt;
            if (!rest) fail(c, SL_ERR_NOMEM, "out of memory");
            else recursive_refs(c, opt, n_opt, name, rest, refs);
            for (size_t i = 0; rest && i < n_opt && !c->st; i++)
                addf(c, &s, "%s%s", i ? " | " : "", refs[i] ? refs[i] : "");
            for (size_t i = 0; rest && i < 2 * n_opt; i++) free(rest[i]);
            free(rest);
            if (n_req) adds(c, &s, " )");
            adds(c, &s, " )?");
        }
        adds(c, &s, " space \"}\"");
    }
    free(addl_kv);
    free(opt);
    free(req);
    return take(&s);
}

/* Whether the string array req holds key. */
static bool in_list(const sl_jdoc *d, sl_jref req, const char *key)
{
    for (sl_jref e = sl_jdoc_first(d, req); e != SL_JNONE; e = sl_jdoc_next(d, e)) {
        const char *s = sl_jdoc_str(d, e, NULL);
        if (s && !strcmp(s, key)) return true;
    }
    return false;
}

/* Appends the properties of the object schema o to *props (kv rules made), required when
 * all_required or listed in o's "required". */
static void collect_props(conv *c, sl_jref o, const char *name, bool all_required,
                          bool own_required, prop **props, size_t *n)
{
    const sl_jdoc *d = c->d;
    const sl_jref ps = sl_jdoc_get(d, o, "properties"), req = sl_jdoc_get(d, o, "required");
    if (ps != SL_JNONE && sl_jdoc_kind(d, ps) != SL_JOBJ) {
        fail(c, SL_ERR_FORMAT, "'properties' must be an object");
        return;
    }
    if (req != SL_JNONE) {
        bool ok = sl_jdoc_kind(d, req) == SL_JARR;
        for (sl_jref e = sl_jdoc_first(d, req); ok && e != SL_JNONE; e = sl_jdoc_next(d, e))
            ok = sl_jdoc_kind(d, e) == SL_JSTR;
        if (!ok) {
            fail(c, SL_ERR_FORMAT, "'required' must be an array of strings");
            return;
        }
    }
    const size_t count = ps == SL_JNONE ? 0 : sl_jdoc_count(d, ps);
    prop *p = realloc(*props, (*n + count + 1) * sizeof *p);
    if (!p) {
        fail(c, SL_ERR_NOMEM, "out of memory");
        return;
    }
    *props = p;
    for (sl_jref e = sl_jdoc_first(d, ps); e != SL_JNONE && !c->st; e = sl_jdoc_next(d, e)) {
        const char *key = sl_jdoc_key(d, e);
        char *pn = sub_name(c, name, key);
        const size_t mark = path_push(c, "properties", key);
        char *rule = visit(c, e, pn);
        path_pop(c, mark);
        str body = {0}, kvn = {0};
        str kj = {0};
        value_literal(c, &kj, SL_JNONE, key);
        addf(c, &body, "%s space \":\" space %s", kj.s ? kj.s : "", rule);
        addf(c, &kvn, "%s-kv", pn);
        char *kv = add_rule(c, kvn.s ? kvn.s : "", body.s ? body.s : "");
        free(kj.s);
        free(body.s);
        free(kvn.s);
        free(rule);
        free(pn);
        p[(*n)++] = (prop){.key = key, .kv = kv,
                           .required = all_required || (own_required && in_list(d, req, key))};
    }
}

static void free_props(prop *p, size_t n)
{
    for (size_t i = 0; i < n; i++) free(p[i].kv);
    free(p);
}

/* The target of a $ref (#/definitions/NAME or #/$defs/NAME), or SL_JNONE after a failure. */
static sl_jref ref_target(conv *c, const char *ref)
{
    const char *kinds[] = {"#/definitions/", "#/$defs/"};
    for (int i = 0; i < 2; i++) {
        const size_t k = strlen(kinds[i]);
        if (strncmp(ref, kinds[i], k) || strchr(ref + k, '/')) continue;
        str key = {0}; /* JSON pointer unescaping: ~1 -> /, ~0 -> ~ */
        for (const char *p = ref + k; *p; p++) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                adds(c, &key, p[1] == '1' ? "/" : "~");
                p++;
            } else {
                add(c, &key, p, 1);
            }
        }
        const sl_jref defs = sl_jdoc_get(c->d, c->root, i ? "$defs" : "definitions");
        const sl_jref t = sl_jdoc_get(c->d, defs, key.s ? key.s : "");
        free(key.s);
        if (t == SL_JNONE) fail(c, SL_ERR_FORMAT, "unresolved $ref '%.200s'", ref);
        return t;
    }
    fail(c, SL_ERR_UNSUPPORTED, "$ref '%.200s': only #/definitions/NAME and #/$defs/NAME are "
         "supported", ref);
    return SL_JNONE;
}

/* llama.cpp's _resolve_ref: the rule name of the referenced schema. */
static char *resolve_ref(conv *c, const char *ref)
{
    const char *frag = strchr(ref, '#');
    str rn = {0};
    adds(c, &rn, "ref");
    char *e = esc_name(c, frag ? frag + 1 : ref);
    adds(c, &rn, e);
    free(e);
    char *name = take(&rn);
    bool busy = false;
    for (size_t i = 0; i < c->n_res; i++) busy |= !strcmp(c->resolving[i], ref);
    if (find(c, name) || busy || c->st) return name;
    const sl_jref t = ref_target(c, ref);
    if (t == SL_JNONE) return name;
    if (c->n_res == sizeof c->resolving / sizeof *c->resolving) {
        fail(c, SL_ERR_RANGE, "$refs nested more than %zu deep", c->n_res);
        return name;
    }
    c->resolving[c->n_res++] = ref;
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref + 1);
    char *got = visit(c, t, name);
    memcpy(c->path, saved, sizeof saved);
    c->n_res--;
    free(name);
    return got;
}

static bool is_bound(const char *key)
{
    for (size_t i = 0; i < sizeof k_bounds / sizeof *k_bounds; i++)
        if (!strcmp(key, k_bounds[i])) return true;
    return false;
}

static bool has_bounds(const sl_jdoc *d, sl_jref v)
{
    for (size_t i = 0; i < sizeof k_bounds / sizeof *k_bounds; i++)
        if (sl_jdoc_get(d, v, k_bounds[i]) != SL_JNONE) return true;
    return false;
}

/* An integer schema's lower (lo) or upper bound from key (inclusive) or xkey (exclusive):
 * INT64_MIN / INT64_MAX when neither is there. */
static bool int_bound(conv *c, sl_jref v, const char *key, const char *xkey, bool lo, int64_t *out)
{
    *out = lo ? INT64_MIN : INT64_MAX;
    const bool excl = sl_jdoc_get(c->d, v, key) == SL_JNONE;
    const sl_jref x = sl_jdoc_get(c->d, v, excl ? xkey : key);
    if (x == SL_JNONE) return true;
    const double b = sl_jdoc_num(c->d, x);
    if (sl_jdoc_kind(c->d, x) != SL_JNUM || !(b >= -1e15 && b <= 1e15)) {
        fail(c, SL_ERR_UNSUPPORTED, "'%s' must be a number in [-1e15, 1e15]", excl ? xkey : key);
        return false;
    }
    /* the nearest integer inside the bound */
    const double r = lo ? (excl ? floor(b) + 1 : ceil(b)) : (excl ? ceil(b) - 1 : floor(b));
    *out = (int64_t)r;
    return true;
}

/* The rule of a schema of one type (t); rule_name as visit() chose it. */
static char *visit_type(conv *c, sl_jref v, const char *t, const char *name, const char *rule_name)
{
    const sl_jdoc *d = c->d;
    str s = {0};
    if (!strcmp(t, "object")) {
        const sl_jref ps = sl_jdoc_get(d, v, "properties"), addl = sl_jdoc_get(d, v, "additionalProperties");
        const bool addl_true = addl != SL_JNONE && sl_jdoc_kind(d, addl) == SL_JBOOL && sl_jdoc_bool(d, addl);
        if (ps == SL_JNONE && (addl == SL_JNONE || addl_true)) {
            char *p = add_prim(c, "object", "object");
            char *r = add_rule(c, rule_name, p);
            free(p);
            return r;
        }
        prop *props = NULL;
        size_t n = 0;
        collect_props(c, v, name, false, true, &props, &n);
        const bool addl_false = addl != SL_JNONE && sl_jdoc_kind(d, addl) == SL_JBOOL && !addl_true;
        if (addl != SL_JNONE && !addl_false && sl_jdoc_kind(d, addl) != SL_JBOOL &&
            sl_jdoc_kind(d, addl) != SL_JOBJ)
            fail(c, SL_ERR_FORMAT, "'additionalProperties' must be a schema or a boolean");
        char *body = c->st ? NULL : object_rule(c, props, n, name, addl_false ? SL_JNONE : addl);
        free_props(props, n);
        char *r = add_rule(c, rule_name, body ? body : "");
        free(body);
        return r;
    }
    if (!strcmp(t, "array")) {
        const sl_jref items = sl_jdoc_get(d, v, "items"), prefix = sl_jdoc_get(d, v, "prefixItems");
        const sl_jref tuple = prefix != SL_JNONE ? prefix
                              : sl_jdoc_kind(d, items) == SL_JARR ? items : SL_JNONE;
        if (tuple != SL_JNONE) {
            if (sl_jdoc_kind(d, tuple) != SL_JARR) {
                fail(c, SL_ERR_FORMAT, "'prefixItems' must be an array of schemas");
                return strdup("");
            }
            adds(c, &s, "\"[\" space ");
            size_t i = 0;
            for (sl_jref e = sl_jdoc_first(d, tuple); e != SL_JNONE && !c->st;
                 e = sl_jdoc_next(d, e), i++) {
                char idx[32], suffix[48];
                snprintf(idx, sizeof idx, "%zu", i);
                snprintf(suffix, sizeof suffix, "tuple-%zu", i);
                char *in = sub_name(c, name, suffix);
                const size_t mark = path_push(c, prefix != SL_JNONE ? "prefixItems" : "items", idx);
                char *r = visit(c, e, in);
                path_pop(c, mark);
                addf(c, &s, "%s", i ? " \",\" space " : "");
                adds(c, &s, r);
                free(r);
                free(in);
            }
            adds(c, &s, " space \"]\"");
            return add_taken(c, rule_name, &s);
        }
        int64_t min, max;
        if (!get_counts(c, v, "minItems", "maxItems", &min, &max)) return strdup("");
        const bool any = items == SL_JNONE || (sl_jdoc_kind(d, items) == SL_JBOOL &&
                                               sl_jdoc_bool(d, items));
        if (any && min == 0 && max < 0)
            return add_prim(c, !strcmp(rule_name, "root") ? "root" : "array", "array");
        char *item;
        if (any) {
            item = add_prim(c, "value", "value");
        } else {
            char *in = sub_name(c, name, "item");
            const size_t mark = path_push(c, "items", NULL);
            item = visit(c, items, in);
            path_pop(c, mark);
            free(in);
        }
        char *rep = repetition(c, item, min, max, "\",\" space");
        addf(c, &s, "\"[\" space ");
        adds(c, &s, rep);
        adds(c, &s, " space \"]\"");
        free(rep);
        free(item);
        return add_taken(c, rule_name, &s);
    }
    if (!strcmp(t, "string")) {
        const char *fmt = sl_jdoc_str(d, sl_jdoc_get(d, v, "format"), NULL);
        if (fmt && !strcmp(fmt, "uuid"))
            return add_prim(c, !strcmp(rule_name, "root") ? "root" : "uuid", "uuid");
        if (fmt && (!strcmp(fmt, "date") || !strcmp(fmt, "time") || !strcmp(fmt, "date-time"))) {
            char pn[32];
            snprintf(pn, sizeof pn, "%s-string", fmt);
            char *p = add_prim(c, pn, pn);
            char *r = add_rule(c, rule_name, p);
            free(p);
            return r;
        }
        int64_t min, max;
        if (!get_counts(c, v, "minLength", "maxLength", &min, &max)) return strdup("");
        if (min > 0 || max >= 0) {
            char *ch = add_prim(c, "char", "char");
            char *rep = repetition(c, ch, min, max, NULL);
            addf(c, &s, "\"\\\"\" %s \"\\\"\"", rep);
            free(rep);
            free(ch);
            return add_taken(c, rule_name, &s);
        }
        return add_prim(c, !strcmp(rule_name, "root") ? "root" : "string", "string");
    }
    if (!strcmp(t, "integer") && has_bounds(d, v)) { /* llama.cpp's build_min_max_int */
        int64_t min, max;
        if (!int_bound(c, v, "minimum", "exclusiveMinimum", true, &min) ||
            !int_bound(c, v, "maximum", "exclusiveMaximum", false, &max))
            return strdup("");
        if (min != INT64_MIN && max != INT64_MAX && min > max) {
            fail(c, SL_ERR_FORMAT, "no integer lies in [%" PRId64 ", %" PRId64 "]", min, max);
            return strdup("");
        }
        char *range = sl_gbnf_int_range(min, max);
        if (!range) fail(c, SL_ERR_NOMEM, "out of memory");
        addf(c, &s, "(%s)", range ? range : "");
        free(range);
        return add_taken(c, rule_name, &s);
    }
    if (!strcmp(t, "number") || !strcmp(t, "integer") || !strcmp(t, "boolean") ||
        !strcmp(t, "null"))
        return add_prim(c, !strcmp(rule_name, "root") ? "root" : t, t);
    fail(c, SL_ERR_FORMAT, "unknown type '%.64s'", t);
    return strdup("");
}

/* A union of the schemas in the array alts (anyOf, oneOf). */
static char *union_rule(conv *c, sl_jref alts, const char *key, const char *name)
{
    str s = {0};
    size_t i = 0;
    for (sl_jref e = sl_jdoc_first(c->d, alts); e != SL_JNONE && !c->st;
         e = sl_jdoc_next(c->d, e), i++) {
        char idx[32], an[48];
        snprintf(idx, sizeof idx, "%zu", i);
        snprintf(an, sizeof an, "%s%zu", *name ? "" : "alternative-", i);
        char *alt_name = sub_name(c, name, an);
        const size_t mark = path_push(c, key, idx);
        char *r = visit(c, e, alt_name);
        path_pop(c, mark);
        addf(c, &s, "%s", i ? " | " : "");
        adds(c, &s, r);
        free(r);
        free(alt_name);
    }
    return take(&s);
}

/* allOf: the properties of its object components (and of anyOf alternatives, optional). */
static char *all_of(conv *c, sl_jref list, const char *name, const char *rule_name)
{
    const sl_jdoc *d = c->d;
    prop *props = NULL;
    size_t n = 0, i = 0;
    for (sl_jref e = sl_jdoc_first(d, list); e != SL_JNONE && !c->st; e = sl_jdoc_next(d, e), i++) {
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        const size_t mark = path_push(c, "allOf", idx);
        const sl_jref alts = sl_jdoc_get(d, e, "anyOf");
        sl_jref comps[64];
        size_t n_comp = 0;
        if (alts != SL_JNONE && sl_jdoc_kind(d, alts) == SL_JARR)
            for (sl_jref a = sl_jdoc_first(d, alts); a != SL_JNONE && n_comp < 64; a = sl_jdoc_next(d, a))
                comps[n_comp++] = a;
        else
            comps[n_comp++] = e;
        for (size_t k = 0; k < n_comp && !c->st; k++) {
            sl_jref comp = comps[k];
            const char *ref = sl_jdoc_str(d, sl_jdoc_get(d, comp, "$ref"), NULL);
            if (ref) comp = ref_target(c, ref);
            if (c->st) break;
            if (sl_jdoc_get(d, comp, "properties") == SL_JNONE) {
                fail(c, SL_ERR_UNSUPPORTED, "allOf: only object schemas with 'properties' are "
                     "supported");
                break;
            }
            collect_props(c, comp, name, alts == SL_JNONE, false, &props, &n);
        }
        path_pop(c, mark);
    }
    char *body = c->st ? NULL : object_rule(c, props, n, name, SL_JNONE);
    free_props(props, n);
    char *r = add_rule(c, rule_name, body ? body : "");
    free(body);
    return r;
}

static char *visit(conv *c, sl_jref v, const char *name)
{
    const sl_jdoc *d = c->d;
    str rn = {0};
    adds(c, &rn, *name ? name : "root");
    if (is_reserved(name)) adds(c, &rn, "-");
    char *rule_name = take(&rn), *r = NULL;
    const sl_jkind kind = sl_jdoc_kind(d, v);
    if (c->st) return rule_name;
    if (kind == SL_JBOOL) {
        if (!sl_jdoc_bool(d, v)) {
            fail(c, SL_ERR_UNSUPPORTED, "the false schema (nothing is valid) cannot be generated");
        } else {
            char *p = add_prim(c, "value", "value");
            r = add_rule(c, rule_name, p);
            free(p);
        }
        free(rule_name);
        return r ? r : strdup("");
    }
    if (kind != SL_JOBJ) {
        fail(c, SL_ERR_FORMAT, "a schema must be an object or a boolean, got: %s",
             sl_jdoc_kind_name(kind));
        return rule_name;
    }
    const char *type_name = sl_jdoc_str(d, sl_jdoc_get(d, v, "type"), NULL);
    const bool integer = type_name && !strcmp(type_name, "integer"); /* bounds honoured */
    for (size_t i = 0; i < sizeof k_refused / sizeof *k_refused; i++)
        if (sl_jdoc_get(d, v, k_refused[i].key) != SL_JNONE &&
            !(integer && is_bound(k_refused[i].key))) {
            fail(c, SL_ERR_UNSUPPORTED, "'%s' is not supported (%s)", k_refused[i].key,
                 k_refused[i].why);
            return rule_name;
        }
    const sl_jref ref = sl_jdoc_get(d, v, "$ref"), any = sl_jdoc_get(d, v, "anyOf"),
                  one = sl_jdoc_get(d, v, "oneOf"), all = sl_jdoc_get(d, v, "allOf"),
                  cnst = sl_jdoc_get(d, v, "const"), en = sl_jdoc_get(d, v, "enum"),
                  type = sl_jdoc_get(d, v, "type");
    str s = {0};
    if (ref != SL_JNONE) {
        const char *rs = sl_jdoc_str(d, ref, NULL);
        if (!rs) {
            fail(c, SL_ERR_FORMAT, "'$ref' must be a string");
        } else {
            char *target = resolve_ref(c, rs);
            r = add_rule(c, rule_name, target);
            free(target);
        }
    } else if (any != SL_JNONE || one != SL_JNONE) {
        const sl_jref alts = any != SL_JNONE ? any : one;
        if (sl_jdoc_kind(d, alts) != SL_JARR || !sl_jdoc_count(d, alts)) {
            fail(c, SL_ERR_FORMAT, "'%s' must be a non-empty array of schemas",
                 any != SL_JNONE ? "anyOf" : "oneOf");
        } else {
            char *body = union_rule(c, alts, any != SL_JNONE ? "anyOf" : "oneOf", name);
            r = add_rule(c, rule_name, body);
            free(body);
        }
    } else if (all != SL_JNONE) {
        if (sl_jdoc_kind(d, all) != SL_JARR || !sl_jdoc_count(d, all))
            fail(c, SL_ERR_FORMAT, "'allOf' must be a non-empty array of schemas");
        else
            r = all_of(c, all, name, rule_name);
    } else if (cnst != SL_JNONE) {
        value_literal(c, &s, cnst, NULL);
        r = add_taken(c, rule_name, &s);
    } else if (en != SL_JNONE) {
        if (sl_jdoc_kind(d, en) != SL_JARR || !sl_jdoc_count(d, en)) {
            fail(c, SL_ERR_FORMAT, "'enum' must be a non-empty array");
        } else {
            adds(c, &s, "(");
            for (sl_jref e = sl_jdoc_first(d, en); e != SL_JNONE; e = sl_jdoc_next(d, e)) {
                if (e != sl_jdoc_first(d, en)) adds(c, &s, " | ");
                value_literal(c, &s, e, NULL);
            }
            adds(c, &s, ")");
            r = add_taken(c, rule_name, &s);
        }
    } else if (type != SL_JNONE && sl_jdoc_kind(d, type) == SL_JARR) {
        /* a list of types: a union of the schema with each (names NAME-0, NAME-1, ...) */
        size_t i = 0;
        for (sl_jref e = sl_jdoc_first(d, type); e != SL_JNONE && !c->st; e = sl_jdoc_next(d, e), i++) {
            const char *t = sl_jdoc_str(d, e, NULL);
            char an[48];
            snprintf(an, sizeof an, "%s%zu", *name ? "" : "alternative-", i);
            char *alt = sub_name(c, name, an);
            str arn = {0};
            adds(c, &arn, alt);
            if (is_reserved(alt)) adds(c, &arn, "-");
            char *alt_rule = take(&arn);
            char *x = t ? visit_type(c, v, t, alt, alt_rule) : NULL;
            if (!t) fail(c, SL_ERR_FORMAT, "'type' must be a string or an array of strings");
            addf(c, &s, "%s", i ? " | " : "");
            if (x) adds(c, &s, x);
            free(x);
            free(alt_rule);
            free(alt);
        }
        if (!i) fail(c, SL_ERR_FORMAT, "'type' must not be an empty array");
        r = add_taken(c, rule_name, &s);
    } else if (type != SL_JNONE) {
        const char *t = sl_jdoc_str(d, type, NULL);
        if (!t) fail(c, SL_ERR_FORMAT, "'type' must be a string or an array of strings");
        else r = visit_type(c, v, t, name, rule_name);
    } else if (sl_jdoc_get(d, v, "properties") != SL_JNONE ||
               sl_jdoc_get(d, v, "additionalProperties") != SL_JNONE) {
        r = visit_type(c, v, "object", name, rule_name);
    } else if (sl_jdoc_get(d, v, "items") != SL_JNONE ||
               sl_jdoc_get(d, v, "prefixItems") != SL_JNONE) {
        r = visit_type(c, v, "array", name, rule_name);
    } else { /* no constraint: any JSON value */
        char *p = add_prim(c, "value", "value");
        r = add_rule(c, rule_name, p);
        free(p);
    }
    free(s.s);
    free(rule_name);
    return r ? r : strdup("");
}

static int cmp_rule(const void *a, const void *b)
{
    return strcmp(((const grule *)a)->name, ((const grule *)b)->name);
}

sl_status sl_json_schema_to_gbnf(const sl_jdoc *d, sl_jref v, char **out, sl_error *err)
{
    *out = NULL;
    conv c = {.d = d, .root = v, .err = err};
    free(add_rule(&c, "space", k_space_rule));
    free(visit(&c, v, ""));
    str s = {0};
    if (!c.st) {
        qsort(c.r, c.n, sizeof *c.r, cmp_rule);
        for (size_t i = 0; i < c.n; i++) {
            adds(&c, &s, c.r[i].name);
            adds(&c, &s, " ::= ");
            adds(&c, &s, c.r[i].body);
            adds(&c, &s, "\n");
        }
    }
    for (size_t i = 0; i < c.n; i++) {
        free(c.r[i].name);
        free(c.r[i].body);
    }
    free(c.r);
    if (c.st) {
        free(s.s);
        return c.st;
    }
    *out = take(&s);
    return *out ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "out of memory");
}
