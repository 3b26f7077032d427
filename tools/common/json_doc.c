/* Strict JSON parser: recursive descent over (text, len) into the node array of json_doc.h.
 *
 * Recursion depth is bounded by max_depth, so hostile nesting cannot exhaust the stack. Every
 * size that grows (nodes, string bytes) is checked before it grows. Numbers keep their literal
 * text next to the decoded double so that integers up to 2^64-1 read back exactly. */
#include "tools/common/json_doc.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/json.h"

typedef struct jnode {
    uint8_t kind;       /* sl_jkind */
    bool b;
    sl_jref first, last, next;
    uint32_t count;     /* children */
    size_t key;         /* offset of the member's key in strs, or SIZE_MAX */
    size_t str, len;    /* a string's bytes, or a number's literal, in strs */
    double num;
} jnode;

struct sl_jdoc {
    jnode *nodes;
    size_t n, cap;
    char *strs;         /* NUL-terminated pieces */
    size_t n_strs, cap_strs;
};

typedef struct parser {
    const unsigned char *p, *end, *start;
    int depth, max_depth;
    sl_jdoc *d;
    sl_error *err;
} parser;

static sl_status fail(parser *ps, const char *what)
{
    return sl_error_set(ps->err, SL_ERR_FORMAT, "invalid JSON at byte %zu: %s",
                        (size_t)(ps->p - ps->start), what);
}

static sl_status oom(parser *ps) { return sl_error_set(ps->err, SL_ERR_NOMEM, "out of memory"); }

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static sl_status new_node(parser *ps, sl_jkind kind, sl_jref *out)
{
    sl_jdoc *d = ps->d;
    if (d->n == d->cap) {
        if (d->cap >= (size_t)UINT32_MAX / 2) return oom(ps);
        const size_t cap = d->cap ? d->cap * 2 : 32;
        jnode *nn = realloc(d->nodes, cap * sizeof *nn);
        if (!nn) return oom(ps);
        d->nodes = nn;
        d->cap = cap;
    }
    d->nodes[d->n] = (jnode){.kind = (uint8_t)kind, .first = SL_JNONE, .last = SL_JNONE,
                             .next = SL_JNONE, .key = SIZE_MAX};
    *out = (sl_jref)d->n++;
    return SL_OK;
}

static sl_status put_bytes(parser *ps, const void *s, size_t n)
{
    sl_jdoc *d = ps->d;
    if (!n) return SL_OK; /* strs may still be NULL: no pointer arithmetic on it */
    if (n > SIZE_MAX / 4 - d->n_strs) return oom(ps);
    if (d->n_strs + n > d->cap_strs) {
        size_t cap = d->cap_strs ? d->cap_strs : 256;
        while (cap < d->n_strs + n) cap *= 2;
        char *ns = realloc(d->strs, cap);
        if (!ns) return oom(ps);
        d->strs = ns;
        d->cap_strs = cap;
    }
    memcpy(d->strs + d->n_strs, s, n);
    d->n_strs += n;
    return SL_OK;
}

static int hex4(const unsigned char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        const int c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

/* A string starting at the opening quote: its decoded bytes go to strs; *off and *len say
 * where. */
static sl_status parse_string(parser *ps, size_t *off, size_t *len)
{
    sl_status st;
    ps->p++; /* '"' */
    *off = ps->d->n_strs;
    for (;;) {
        const unsigned char *run = ps->p;
        while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && *ps->p >= 0x20) {
            if (*ps->p < 0x80) {
                ps->p++;
                continue;
            }
            const size_t k = sl_json_utf8_len(ps->p, (size_t)(ps->end - ps->p));
            if (!k) return fail(ps, "invalid UTF-8 in a string");
            ps->p += k;
        }
        if ((st = put_bytes(ps, run, (size_t)(ps->p - run)))) return st;
        if (ps->p == ps->end) return fail(ps, "unterminated string");
        if (*ps->p == '"') break;
        if (*ps->p < 0x20) return fail(ps, "control character in a string");
        /* escape */
        if (ps->end - ps->p < 2) return fail(ps, "unterminated string");
        const unsigned char e = ps->p[1];
        static const char k_from[] = "\"\\/bfnrt", k_to[] = "\"\\/\b\f\n\r\t";
        const char *hit = e ? strchr(k_from, e) : NULL;
        if (hit) {
            if ((st = put_bytes(ps, &k_to[hit - k_from], 1))) return st;
            ps->p += 2;
            continue;
        }
        if (e != 'u') return fail(ps, "invalid escape");
        if (ps->end - ps->p < 6 || hex4(ps->p + 2) < 0) return fail(ps, "invalid \\u escape");
        uint32_t cp = (uint32_t)hex4(ps->p + 2);
        ps->p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, "unpaired low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2) < 0)
                return fail(ps, "unpaired high surrogate");
            const uint32_t lo = (uint32_t)hex4(ps->p + 2);
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, "unpaired high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            ps->p += 6;
        }
        unsigned char u[4];
        size_t n;
        if (cp < 0x80) {
            u[0] = (unsigned char)cp;
            n = 1;
        } else if (cp < 0x800) {
            u[0] = (unsigned char)(0xC0 | cp >> 6);
            u[1] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            u[0] = (unsigned char)(0xE0 | cp >> 12);
            u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            u[2] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            u[0] = (unsigned char)(0xF0 | cp >> 18);
            u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            u[3] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 4;
        }
        if ((st = put_bytes(ps, u, n))) return st;
    }
    ps->p++; /* closing '"' */
    *len = ps->d->n_strs - *off;
    return put_bytes(ps, "", 1);
}

static bool is_digit(const parser *ps) { return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; }

static sl_status parse_number(parser *ps, sl_jref v)
{
    const unsigned char *s = ps->p;
    if (*ps->p == '-') ps->p++;
    if (!is_digit(ps)) return fail(ps, "invalid number");
    if (*ps->p == '0') {
        ps->p++;
        if (is_digit(ps)) return fail(ps, "leading zero in a number");
    } else {
        while (is_digit(ps)) ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (!is_digit(ps)) return fail(ps, "digit expected after '.'");
        while (is_digit(ps)) ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (!is_digit(ps)) return fail(ps, "digit expected in an exponent");
        while (is_digit(ps)) ps->p++;
    }
    jnode *n = &ps->d->nodes[v];
    n->str = ps->d->n_strs;
    n->len = (size_t)(ps->p - s);
    sl_status st = put_bytes(ps, s, n->len);
    if (!st) st = put_bytes(ps, "", 1);
    if (st) return st;
    n = &ps->d->nodes[v];
    errno = 0;
    n->num = strtod(ps->d->strs + n->str, NULL);
    if (!isfinite(n->num)) {
        ps->p = s;
        return fail(ps, "number out of range");
    }
    return SL_OK;
}

static sl_status parse_value(parser *ps, sl_jref *out);

static void append_child(sl_jdoc *d, sl_jref parent, sl_jref child)
{
    jnode *p = &d->nodes[parent];
    if (p->last == SL_JNONE) p->first = child;
    else d->nodes[p->last].next = child;
    p->last = child;
    p->count++;
}

static sl_status parse_container(parser *ps, sl_jref v, bool obj)
{
    const unsigned char close = obj ? '}' : ']';
    if (++ps->depth > ps->max_depth)
        return sl_error_set(ps->err, SL_ERR_RANGE, "invalid JSON at byte %zu: nested deeper "
                            "than %d", (size_t)(ps->p - ps->start), ps->max_depth);
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return SL_OK;
    }
    for (;;) {
        sl_status st;
        size_t key = SIZE_MAX, key_len;
        if (obj) {
            skip_ws(ps);
            if (ps->p == ps->end || *ps->p != '"') return fail(ps, "object key expected");
            if ((st = parse_string(ps, &key, &key_len))) return st;
            skip_ws(ps);
            if (ps->p == ps->end || *ps->p != ':') return fail(ps, "':' expected");
            ps->p++;
        }
        sl_jref child;
        if ((st = parse_value(ps, &child))) return st;
        ps->d->nodes[child].key = key;
        append_child(ps->d, v, child);
        skip_ws(ps);
        if (ps->p == ps->end) return fail(ps, obj ? "'}' expected" : "']' expected");
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p != close) return fail(ps, obj ? "',' or '}' expected" : "',' or ']' expected");
        ps->p++;
        ps->depth--;
        return SL_OK;
    }
}

static bool literal(parser *ps, const char *word)
{
    const size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return false;
    ps->p += n;
    return true;
}

static sl_status parse_value(parser *ps, sl_jref *out)
{
    skip_ws(ps);
    if (ps->p == ps->end) return fail(ps, "value expected");
    const unsigned char c = *ps->p;
    sl_jkind kind = c == '{' ? SL_JOBJ : c == '[' ? SL_JARR : c == '"' ? SL_JSTR
                  : c == 't' || c == 'f' ? SL_JBOOL : c == 'n' ? SL_JNULL : SL_JNUM;
    sl_status st = new_node(ps, kind, out);
    if (st) return st;
    switch (kind) {
    case SL_JOBJ: return parse_container(ps, *out, true);
    case SL_JARR: return parse_container(ps, *out, false);
    case SL_JSTR: return parse_string(ps, &ps->d->nodes[*out].str, &ps->d->nodes[*out].len);
    case SL_JNUM:
        if (c != '-' && (c < '0' || c > '9')) return fail(ps, "value expected");
        return parse_number(ps, *out);
    case SL_JBOOL:
        ps->d->nodes[*out].b = c == 't';
        return literal(ps, c == 't' ? "true" : "false") ? SL_OK : fail(ps, "value expected");
    case SL_JNULL: return literal(ps, "null") ? SL_OK : fail(ps, "value expected");
    }
    return fail(ps, "value expected");
}

sl_status sl_jdoc_parse(const char *text, size_t len, int max_depth, sl_jdoc **out,
                        sl_error *err)
{
    *out = NULL;
    sl_jdoc *d = calloc(1, sizeof *d);
    if (!d) return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    parser ps = {.p = p, .start = p, .end = p + len, .max_depth = max_depth > 0 ? max_depth : 64,
                 .d = d, .err = err};
    sl_jref root;
    sl_status st = parse_value(&ps, &root);
    if (!st) {
        skip_ws(&ps);
        if (ps.p != ps.end) st = fail(&ps, "trailing characters after the value");
    }
    if (st) {
        sl_jdoc_free(d);
        return st;
    }
    *out = d;
    return SL_OK;
}

void sl_jdoc_free(sl_jdoc *d)
{
    if (!d) return;
    free(d->nodes);
    free(d->strs);
    free(d);
}

sl_status sl_jdoc_validate(const sl_jdoc *d, sl_error *err)
{
    if (!d->n) return sl_error_set(err, SL_ERR_FORMAT, "jdoc: no root");
    /* every node but the root is the child of exactly one container, after its parent */
    for (size_t i = 0; i < d->n; i++) {
        const jnode *n = &d->nodes[i];
        if (n->kind > SL_JOBJ) return sl_error_set(err, SL_ERR_FORMAT, "jdoc: node %zu kind", i);
        uint32_t count = 0;
        for (sl_jref c = n->first; c != SL_JNONE; c = d->nodes[c].next) {
            if (c <= i || c >= d->n || ++count > n->count)
                return sl_error_set(err, SL_ERR_FORMAT, "jdoc: node %zu children chain", i);
            if ((n->kind == SL_JOBJ) != (d->nodes[c].key != SIZE_MAX))
                return sl_error_set(err, SL_ERR_FORMAT, "jdoc: node %u key", c);
        }
        if (count != n->count)
            return sl_error_set(err, SL_ERR_FORMAT, "jdoc: node %zu count", i);
        if ((n->kind == SL_JSTR || n->kind == SL_JNUM) &&
            (n->str + n->len >= d->n_strs || d->strs[n->str + n->len]))
            return sl_error_set(err, SL_ERR_FORMAT, "jdoc: node %zu string bounds", i);
    }
    return SL_OK;
}

static const jnode *node(const sl_jdoc *d, sl_jref v) { return v < d->n ? &d->nodes[v] : NULL; }

sl_jkind sl_jdoc_kind(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n ? (sl_jkind)n->kind : SL_JNULL;
}

const char *sl_jdoc_kind_name(sl_jkind k)
{
    static const char *const k_names[] = {"null", "boolean", "number", "string", "array",
                                          "object"};
    return (unsigned)k <= SL_JOBJ ? k_names[k] : "?";
}

sl_jref sl_jdoc_get(const sl_jdoc *d, sl_jref v, const char *key)
{
    const jnode *n = node(d, v);
    if (!n || n->kind != SL_JOBJ) return SL_JNONE;
    sl_jref hit = SL_JNONE;
    for (sl_jref c = n->first; c != SL_JNONE; c = d->nodes[c].next)
        if (!strcmp(d->strs + d->nodes[c].key, key)) hit = c;
    return hit;
}

sl_jref sl_jdoc_first(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n ? n->first : SL_JNONE;
}

sl_jref sl_jdoc_next(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n ? n->next : SL_JNONE;
}

size_t sl_jdoc_count(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n ? n->count : 0;
}

const char *sl_jdoc_key(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n && n->key != SIZE_MAX ? d->strs + n->key : NULL;
}

const char *sl_jdoc_str(const sl_jdoc *d, sl_jref v, size_t *len)
{
    const jnode *n = node(d, v);
    if (!n || n->kind != SL_JSTR) return NULL;
    if (len) *len = n->len;
    return d->strs + n->str;
}

bool sl_jdoc_bool(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n && n->kind == SL_JBOOL && n->b;
}

double sl_jdoc_num(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    return n && n->kind == SL_JNUM ? n->num : 0;
}

/* The literal of an integer number (no fraction or exponent), else NULL. */
static const char *int_literal(const sl_jdoc *d, sl_jref v)
{
    const jnode *n = node(d, v);
    if (!n || n->kind != SL_JNUM) return NULL;
    const char *s = d->strs + n->str;
    return strpbrk(s, ".eE") ? NULL : s;
}

bool sl_jdoc_int(const sl_jdoc *d, sl_jref v, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = int_literal(d, v);
    if (!s) return false;
    errno = 0;
    const long long x = strtoll(s, NULL, 10);
    if (errno || x < lo || x > hi) return false;
    *out = (int64_t)x;
    return true;
}

bool sl_jdoc_u64(const sl_jdoc *d, sl_jref v, uint64_t *out)
{
    const char *s = int_literal(d, v);
    if (!s || *s == '-') return false;
    errno = 0;
    const unsigned long long x = strtoull(s, NULL, 10);
    if (errno) return false;
    *out = (uint64_t)x;
    return true;
}

void sl_jdoc_write(FILE *f, const sl_jdoc *d, sl_jref v)
{
    switch (sl_jdoc_kind(d, v)) {
    case SL_JNULL: fputs("null", f); return;
    case SL_JBOOL: fputs(sl_jdoc_bool(d, v) ? "true" : "false", f); return;
    case SL_JNUM: {
        int64_t i;
        if (sl_jdoc_int(d, v, INT64_MIN, INT64_MAX, &i)) {
            fprintf(f, "%" PRId64, i);
            return;
        }
        const double x = sl_jdoc_num(d, v);
        char buf[40];
        for (int prec = 1; prec <= 17; prec++) { /* the shortest that reads back the same */
            snprintf(buf, sizeof buf, "%.*g", prec, x);
            if (strtod(buf, NULL) == x) break;
        }
        fputs(buf, f);
        return;
    }
    case SL_JSTR: {
        size_t len;
        const char *t = sl_jdoc_str(d, v, &len);
        sl_json_str(f, t, len);
        return;
    }
    case SL_JARR:
    case SL_JOBJ: {
        const bool obj = sl_jdoc_kind(d, v) == SL_JOBJ;
        fputc(obj ? '{' : '[', f);
        for (sl_jref e = sl_jdoc_first(d, v); e != SL_JNONE; e = sl_jdoc_next(d, e)) {
            if (e != sl_jdoc_first(d, v)) fputc(',', f);
            if (obj) {
                sl_json_cstr(f, sl_jdoc_key(d, e));
                fputc(':', f);
            }
            sl_jdoc_write(f, d, e);
        }
        fputc(obj ? '}' : ']', f);
        return;
    }
    }
}
