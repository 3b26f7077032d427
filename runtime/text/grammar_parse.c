/* GBNF text -> sl_grammar (grammar.h), following llama.cpp's llama_grammar_parser step by step
 * (parse_space, parse_name, parse_char, parse_sequence with handle_repetitions, parse_rule),
 * with errors that name the line and column instead of printing the rest of the text. The
 * text is copied NUL-terminated so that the one-character look-aheads stay in bounds. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"

typedef struct rule {
    sl_gelem *e;
    size_t n, cap;
} rule;

/* A symbol: a named rule (name != NULL) or one the parser made for a group or repetition.
 * ref: where the name was first used (for "undefined rule"); def: where it was defined. */
typedef struct sym {
    char *name;
    const char *ref, *def;
    uint32_t owner;             /* the named rule whose text made it (itself when named) */
} sym;

typedef struct parser {
    const char *src;            /* the NUL-terminated copy */
    rule *rules;                /* [n_syms]; n == 0: not defined (yet) */
    sym *syms;
    size_t n_syms, cap_syms;
    size_t n_elems;             /* over all rules, for the size limit */
    int depth;                  /* groups open */
    uint32_t cur;               /* the rule being parsed */
    sl_status st;               /* the first failure; later steps return at once */
    sl_error *err;
} parser;

static void fail_at(parser *p, sl_status st, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records the first failure, "line L, column C: why" when at is inside the text. */
static void fail_at(parser *p, sl_status st, const char *at, const char *fmt, ...)
{
    if (p->st) return;
    p->st = st;
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!at) {
        sl_error_set(p->err, st, "grammar: %s", why);
        return;
    }
    int line = 1, col = 1;
    for (const char *c = p->src; c < at; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)*c & 0xC0) != 0x80) {
            col++; /* columns count characters, not UTF-8 continuation bytes */
        }
    }
    sl_error_set(p->err, st, "grammar: line %d, column %d: %s", line, col, why);
}

static bool push(parser *p, rule *r, uint32_t type, uint32_t value)
{
    if (p->st) return false;
    if (p->n_elems >= SL_GRAMMAR_MAX_ELEMS) {
        fail_at(p, SL_ERR_RANGE, NULL, "more than %d elements after expanding repetitions",
                SL_GRAMMAR_MAX_ELEMS);
        return false;
    }
    if (r->n == r->cap) {
        const size_t cap = r->cap ? 2 * r->cap : 16;
        sl_gelem *e = realloc(r->e, cap * sizeof *e);
        if (!e) {
            fail_at(p, SL_ERR_NOMEM, NULL, "out of memory");
            return false;
        }
        r->e = e;
        r->cap = cap;
    }
    r->e[r->n++] = (sl_gelem){type, value};
    p->n_elems++;
    return true;
}

/* A new symbol (name may be NULL: made by the parser). Returns its id, or UINT32_MAX. */
static uint32_t add_sym(parser *p, const char *name, size_t len)
{
    if (p->n_syms == p->cap_syms) {
        const size_t cap = p->cap_syms ? 2 * p->cap_syms : 32;
        sym *s = realloc(p->syms, cap * sizeof *s);
        if (s) p->syms = s;
        rule *r = realloc(p->rules, cap * sizeof *r);
        if (r) p->rules = r;
        if (!s || !r) {
            fail_at(p, SL_ERR_NOMEM, NULL, "out of memory");
            return UINT32_MAX;
        }
        p->cap_syms = cap;
    }
    char *copy = NULL;
    if (name && !(copy = strndup(name, len))) {
        fail_at(p, SL_ERR_NOMEM, NULL, "out of memory");
        return UINT32_MAX;
    }
    p->syms[p->n_syms] = (sym){.name = copy, .owner = name ? (uint32_t)p->n_syms : p->cur};
    p->rules[p->n_syms] = (rule){0};
    return (uint32_t)p->n_syms++;
}

/* llama.cpp's get_symbol_id: the id of a name, made on first use. */
static uint32_t symbol_id(parser *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n_syms; i++)
        if (p->syms[i].name && strlen(p->syms[i].name) == len &&
            !memcmp(p->syms[i].name, name, len))
            return (uint32_t)i;
    return add_sym(p, name, len);
}

/* Stores r as rule id (llama.cpp's add_rule: a later definition replaces an earlier one). */
static void set_rule(parser *p, uint32_t id, rule *r)
{
    if (p->rules[id].e) p->n_elems -= p->rules[id].n;
    free(p->rules[id].e);
    p->rules[id] = *r;
    *r = (rule){0};
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || (c >= '0' && c <= '9');
}

static const char *parse_space(const char *pos, bool newline_ok)
{
    while (*pos == ' ' || *pos == '\t' || *pos == '#' ||
           (newline_ok && (*pos == '\r' || *pos == '\n'))) {
        if (*pos == '#')
            while (*pos && *pos != '\r' && *pos != '\n') pos++;
        else
            pos++;
    }
    return pos;
}

static const char *parse_name(parser *p, const char *src)
{
    const char *pos = src;
    while (is_word_char(*pos)) pos++;
    if (pos == src) fail_at(p, SL_ERR_FORMAT, src, "expecting a rule name");
    return pos;
}

/* One UTF-8 character of the grammar text (the failure set when invalid). */
static const char *decode_char(parser *p, const char *src, uint32_t *out)
{
    const unsigned char *s = (const unsigned char *)src;
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
            : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    uint32_t v = len == 1 ? s[0] : len == 2 ? s[0] & 0x1Fu : len == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            len = 0;
            break;
        }
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (!len || (len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000) ||
        v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        fail_at(p, SL_ERR_FORMAT, src, "invalid UTF-8");
        return src;
    }
    *out = v;
    return src + len;
}

/* The hex digits of an escape starting at esc (the backslash). */
static const char *parse_hex(parser *p, const char *esc, int size, uint32_t *out)
{
    const char *src = esc + 2;
    uint32_t v = 0;
    for (int i = 0; i < size; i++) {
        const char c = src[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            fail_at(p, SL_ERR_FORMAT, esc, "expecting %d hex digits after '\\%c'", size,
                    esc[1]);
            return src;
        }
        v = (v << 4) | (uint32_t)d;
    }
    *out = v;
    return src + size;
}

/* llama.cpp's parse_char: an escape or one UTF-8 character. */
static const char *parse_char(parser *p, const char *src, uint32_t *out)
{
    *out = 0;
    if (*src == '\\') {
        switch (src[1]) {
        case 'x': return parse_hex(p, src, 2, out);
        case 'u': return parse_hex(p, src, 4, out);
        case 'U': return parse_hex(p, src, 8, out);
        case 't': *out = '\t'; return src + 2;
        case 'r': *out = '\r'; return src + 2;
        case 'n': *out = '\n'; return src + 2;
        case '\\': case '"': case '[': case ']': case '-':
            *out = (unsigned char)src[1];
            return src + 2;
        default:
            fail_at(p, SL_ERR_FORMAT, src, "unknown escape '\\%c'", src[1] ? src[1] : ' ');
            return src;
        }
    }
    if (!*src) {
        fail_at(p, SL_ERR_FORMAT, src, "unexpected end of input");
        return src;
    }
    return decode_char(p, src, out);
}

static const char *parse_alternates(parser *p, const char *src, uint32_t id, bool nested);

/* handle_repetitions of llama.cpp's parse_sequence: S{m,n} -> S...S (m times) then n - m
 * nested optional rules (S{m,}: one recursive rule). max UINT64_MAX: no maximum. */
static void repeat(parser *p, const char *at, rule *r, size_t last_sym_start,
                   uint64_t min_times, uint64_t max_times, uint64_t *n_prev_rules)
{
    const bool no_max = max_times == UINT64_MAX;
    if (last_sym_start == r->n) {
        fail_at(p, SL_ERR_FORMAT, at, "expecting an item before */+/?/{");
        return;
    }
    uint64_t total = 1;
    if (!no_max && max_times > 0) total = max_times;
    else if (min_times > 0) total = min_times;
    if (*n_prev_rules * total > SL_GRAMMAR_MAX_REPETITION) {
        fail_at(p, SL_ERR_RANGE, at, "the repetition makes more than %d copies of rules; use "
                "fewer repetitions or simpler items", SL_GRAMMAR_MAX_REPETITION);
        return;
    }
    const size_t n_prev = r->n - last_sym_start;
    sl_gelem *prev = malloc(n_prev * sizeof *prev);
    if (!prev) {
        fail_at(p, SL_ERR_NOMEM, NULL, "out of memory");
        return;
    }
    memcpy(prev, r->e + last_sym_start, n_prev * sizeof *prev);
    if (min_times == 0) {
        p->n_elems -= n_prev;
        r->n = last_sym_start;
    } else {
        for (uint64_t i = 1; i < min_times; i++)
            for (size_t k = 0; k < n_prev; k++) push(p, r, prev[k].type, prev[k].value);
    }
    uint32_t last_rec = 0;
    const uint64_t n_opt = no_max ? 1 : max_times - min_times;
    for (uint64_t i = 0; i < n_opt && !p->st; i++) {
        rule rec = {0};
        for (size_t k = 0; k < n_prev; k++) push(p, &rec, prev[k].type, prev[k].value);
        const uint32_t rec_id = add_sym(p, NULL, 0);
        if (rec_id == UINT32_MAX) break;
        p->syms[rec_id].def = at;
        if (i > 0 || no_max) push(p, &rec, SL_G_RULE_REF, no_max ? rec_id : last_rec);
        push(p, &rec, SL_G_ALT, 0);
        push(p, &rec, SL_G_END, 0);
        if (!p->st) set_rule(p, rec_id, &rec);
        free(rec.e);
        last_rec = rec_id;
    }
    if (n_opt > 0) push(p, r, SL_G_RULE_REF, last_rec);
    *n_prev_rules *= total;
    free(prev);
}

/* An unsigned decimal (at most 10 digits: repetition counts are checked against the limit). */
static const char *parse_int(parser *p, const char *src, uint64_t *out)
{
    const char *pos = src;
    uint64_t v = 0;
    while (*pos >= '0' && *pos <= '9') {
        if (pos - src < 19) v = v * 10 + (uint64_t)(*pos - '0');
        else v = UINT64_MAX - 1;
        pos++;
    }
    if (pos == src) fail_at(p, SL_ERR_FORMAT, src, "expecting an integer");
    *out = v;
    return pos;
}

static const char *parse_sequence(parser *p, const char *src, rule *r, bool nested)
{
    size_t last_sym_start = r->n;
    const char *pos = src;
    uint64_t n_prev_rules = 1;
    while (*pos && !p->st) {
        const char *at = pos;
        if (*pos == '"') { /* literal string */
            pos++;
            last_sym_start = r->n;
            n_prev_rules = 1;
            while (*pos != '"' && !p->st) {
                if (!*pos) {
                    fail_at(p, SL_ERR_FORMAT, at, "unterminated string (no closing '\"')");
                    break;
                }
                uint32_t c;
                pos = parse_char(p, pos, &c);
                push(p, r, SL_G_CHAR, c);
            }
            if (p->st) break;
            pos = parse_space(pos + 1, nested);
        } else if (*pos == '[') { /* character class */
            pos++;
            uint32_t start_type = SL_G_CHAR;
            if (*pos == '^') {
                pos++;
                start_type = SL_G_CHAR_NOT;
            }
            last_sym_start = r->n;
            n_prev_rules = 1;
            while (*pos != ']' && !p->st) {
                if (!*pos) {
                    fail_at(p, SL_ERR_FORMAT, at, "unterminated character class (no closing "
                            "']')");
                    break;
                }
                uint32_t c;
                pos = parse_char(p, pos, &c);
                push(p, r, last_sym_start < r->n ? SL_G_CHAR_ALT : start_type, c);
                if (pos[0] == '-' && pos[1] != ']' && !p->st) {
                    if (!pos[1]) {
                        fail_at(p, SL_ERR_FORMAT, pos, "unexpected end of input in a range");
                        break;
                    }
                    uint32_t hi;
                    pos = parse_char(p, pos + 1, &hi);
                    push(p, r, SL_G_CHAR_RNG_UPPER, hi);
                }
            }
            if (p->st) break;
            pos = parse_space(pos + 1, nested);
        } else if (*pos == '<' || *pos == '!') {
            fail_at(p, SL_ERR_FORMAT, pos, "token references (<[id]>, <token>, !<token>) are "
                    "not supported");
        } else if (is_word_char(*pos)) { /* rule reference */
            const char *end = parse_name(p, pos);
            const uint32_t id = symbol_id(p, pos, (size_t)(end - pos));
            if (id == UINT32_MAX) break;
            if (!p->syms[id].ref) p->syms[id].ref = pos;
            pos = parse_space(end, nested);
            last_sym_start = r->n;
            n_prev_rules = 1;
            push(p, r, SL_G_RULE_REF, id);
        } else if (*pos == '(') { /* group: a synthesized rule */
            if (p->depth >= SL_GRAMMAR_MAX_NESTING) {
                fail_at(p, SL_ERR_RANGE, pos, "groups nested more than %d deep",
                        SL_GRAMMAR_MAX_NESTING);
                break;
            }
            pos = parse_space(pos + 1, true);
            const size_t n_before = p->n_syms;
            const uint32_t sub = add_sym(p, NULL, 0);
            if (sub == UINT32_MAX) break;
            p->syms[sub].def = at;
            p->depth++;
            pos = parse_alternates(p, pos, sub, true);
            p->depth--;
            if (p->st) break;
            n_prev_rules = p->n_syms - n_before > 1 ? p->n_syms - n_before : 1;
            last_sym_start = r->n;
            push(p, r, SL_G_RULE_REF, sub);
            if (*pos != ')') {
                fail_at(p, SL_ERR_FORMAT, pos, "expecting ')' to close the group");
                break;
            }
            pos = parse_space(pos + 1, nested);
        } else if (*pos == '.') {
            last_sym_start = r->n;
            n_prev_rules = 1;
            push(p, r, SL_G_CHAR_ANY, 0);
            pos = parse_space(pos + 1, nested);
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            const char op = *pos;
            pos = parse_space(pos + 1, nested);
            repeat(p, at, r, last_sym_start, op == '+', op == '?' ? 1 : UINT64_MAX,
                   &n_prev_rules);
        } else if (*pos == '{') {
            pos = parse_space(pos + 1, nested);
            uint64_t min_times, max_times = UINT64_MAX;
            if (!(*pos >= '0' && *pos <= '9')) {
                fail_at(p, SL_ERR_FORMAT, pos, "expecting an integer after '{'");
                break;
            }
            pos = parse_space(parse_int(p, pos, &min_times), nested);
            if (*pos == '}') {
                max_times = min_times;
                pos = parse_space(pos + 1, nested);
            } else if (*pos == ',') {
                pos = parse_space(pos + 1, nested);
                if (*pos >= '0' && *pos <= '9')
                    pos = parse_space(parse_int(p, pos, &max_times), nested);
                if (*pos != '}') {
                    fail_at(p, SL_ERR_FORMAT, pos, "expecting '}'");
                    break;
                }
                pos = parse_space(pos + 1, nested);
            } else {
                fail_at(p, SL_ERR_FORMAT, pos, "expecting ',' or '}'");
                break;
            }
            if (min_times > SL_GRAMMAR_MAX_REPETITION) {
                fail_at(p, SL_ERR_RANGE, at, "more than %d repetitions",
                        SL_GRAMMAR_MAX_REPETITION);
                break;
            }
            if (max_times != UINT64_MAX && max_times < min_times) {
                fail_at(p, SL_ERR_FORMAT, at, "a repetition {m,n} needs m <= n");
                break;
            }
            if (max_times != UINT64_MAX && max_times > SL_GRAMMAR_MAX_REPETITION)
                max_times = UINT64_MAX; /* llama.cpp: beyond the threshold, unbounded */
            repeat(p, at, r, last_sym_start, min_times, max_times, &n_prev_rules);
        } else {
            break;
        }
    }
    return pos;
}

static const char *parse_alternates(parser *p, const char *src, uint32_t id, bool nested)
{
    rule r = {0};
    const char *pos = parse_sequence(p, src, &r, nested);
    while (*pos == '|' && !p->st) {
        push(p, &r, SL_G_ALT, 0);
        pos = parse_space(pos + 1, true);
        pos = parse_sequence(p, pos, &r, nested);
    }
    push(p, &r, SL_G_END, 0);
    if (!p->st) set_rule(p, id, &r);
    free(r.e);
    return pos;
}

static const char *parse_rule(parser *p, const char *src)
{
    const char *name_end = parse_name(p, src);
    if (p->st) return src;
    const char *pos = parse_space(name_end, false);
    const uint32_t id = symbol_id(p, src, (size_t)(name_end - src));
    if (id == UINT32_MAX) return pos;
    if (!(pos[0] == ':' && pos[1] == ':' && pos[2] == '=')) {
        fail_at(p, SL_ERR_FORMAT, pos, "expecting '::=' after the rule name");
        return pos;
    }
    p->syms[id].def = src;
    p->cur = id;
    pos = parse_space(pos + 3, true);
    pos = parse_alternates(p, pos, id, false);
    if (p->st) return pos;
    if (*pos == '\r') {
        pos += pos[1] == '\n' ? 2 : 1;
    } else if (*pos == '\n') {
        pos++;
    } else if (*pos) {
        fail_at(p, SL_ERR_FORMAT, pos, "unexpected '%c': expecting a newline or the end",
                *pos);
        return pos;
    }
    return parse_space(pos, true);
}

static bool is_end_of_seq(const sl_gelem *e)
{
    return e->type == SL_G_END || e->type == SL_G_ALT;
}

/* llama.cpp's llama_grammar_detect_left_recursion over the finished rules; *cycle: the rule
 * found again while in progress. A rule already finished is not walked again (a depth-first
 * search's finished node reaches no cycle, and its may_be_empty is set): walking it again made
 * r_i ::= r_{i+1} "a" | r_{i+1} "b" cost 2^depth, a 1 KB grammar minutes of a thread. */
static bool left_recursive(const sl_grammar *g, uint32_t r, uint8_t *visited, uint8_t *in_progress,
                           uint8_t *may_be_empty, uint32_t *cycle)
{
    if (in_progress[r]) {
        *cycle = r;
        return true;
    }
    if (visited[r]) return false;
    in_progress[r] = 1;
    const sl_gelem *e = g->elems + g->start[r];
    size_t n = 0;
    while (e[n].type != SL_G_END) n++;
    n++; /* with the END */
    bool at_start = true;
    for (size_t i = 0; i < n; i++) {
        if (is_end_of_seq(&e[i])) {
            if (at_start) {
                may_be_empty[r] = 1;
                break;
            }
            at_start = true;
        } else {
            at_start = false;
        }
    }
    bool recurse = true;
    for (size_t i = 0; i < n; i++) {
        if (e[i].type == SL_G_RULE_REF && recurse) {
            if (left_recursive(g, e[i].value, visited, in_progress, may_be_empty, cycle))
                return true;
            if (!may_be_empty[e[i].value]) recurse = false;
        } else {
            recurse = is_end_of_seq(&e[i]);
        }
    }
    in_progress[r] = 0;
    visited[r] = 1;
    return false;
}

void sl_grammar_free(sl_grammar *g)
{
    if (!g) return;
    free(g->elems);
    free(g->start);
    free(g);
}

/* Flattens the rules into g and checks the whole: defined rules, root, no left recursion. */
static sl_grammar *finish(parser *p)
{
    for (size_t i = 0; i < p->n_syms; i++)
        if (!p->rules[i].n) {
            fail_at(p, SL_ERR_FORMAT, p->syms[i].ref, "undefined rule '%s'",
                    p->syms[i].name ? p->syms[i].name : "?");
            return NULL;
        }
    uint32_t root = UINT32_MAX;
    for (size_t i = 0; i < p->n_syms && root == UINT32_MAX; i++)
        if (p->syms[i].name && !strcmp(p->syms[i].name, "root")) root = (uint32_t)i;
    if (root == UINT32_MAX) {
        fail_at(p, SL_ERR_FORMAT, NULL, "the grammar has no 'root' rule");
        return NULL;
    }
    sl_grammar *g = calloc(1, sizeof *g);
    if (g) {
        g->elems = malloc((p->n_elems ? p->n_elems : 1) * sizeof *g->elems);
        g->start = malloc(p->n_syms * sizeof *g->start);
    }
    uint8_t *flags = calloc(3 * p->n_syms, 1);
    if (!g || !g->elems || !g->start || !flags) {
        free(flags);
        sl_grammar_free(g);
        fail_at(p, SL_ERR_NOMEM, NULL, "out of memory");
        return NULL;
    }
    g->n_rules = (uint32_t)p->n_syms;
    g->root = root;
    size_t n = 0;
    for (size_t i = 0; i < p->n_syms; i++) {
        g->start[i] = (uint32_t)n;
        memcpy(g->elems + n, p->rules[i].e, p->rules[i].n * sizeof *g->elems);
        n += p->rules[i].n;
    }
    g->n_elems = (uint32_t)n;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (flags[r]) continue;
        uint32_t cycle = r;
        if (left_recursive(g, r, flags, flags + p->n_syms, flags + 2 * p->n_syms, &cycle)) {
            const sym *named = &p->syms[p->syms[cycle].owner];
            fail_at(p, SL_ERR_FORMAT, named->def,
                    "left recursion in rule '%s' (it can start with itself)",
                    named->name ? named->name : "?");
            free(flags);
            sl_grammar_free(g);
            return NULL;
        }
    }
    free(flags);
    return g;
}

sl_status sl_grammar_validate(const sl_grammar *g, sl_error *err)
{
    if (!g || !g->n_rules || g->root >= g->n_rules)
        return sl_error_set(err, SL_ERR_FORMAT, "grammar: no rules or root %u out of range",
                            g ? g->root : 0);
    for (uint32_t r = 0; r < g->n_rules; r++) {
        uint32_t i = g->start[r];
        if (i >= g->n_elems || (r && i <= g->start[r - 1]))
            return sl_error_set(err, SL_ERR_FORMAT, "grammar: rule %u starts at %u", r, i);
        const uint32_t end = r + 1 < g->n_rules ? g->start[r + 1] : g->n_elems;
        for (; i < end && g->elems[i].type != SL_G_END; i++) {
            const sl_gelem *e = &g->elems[i];
            if (e->type > SL_G_CHAR_ANY ||
                (e->type == SL_G_RULE_REF && e->value >= g->n_rules))
                return sl_error_set(err, SL_ERR_FORMAT, "grammar: element %u of rule %u: type "
                                    "%u value %u", i, r, e->type, e->value);
            const bool set_part = e->type == SL_G_CHAR_RNG_UPPER || e->type == SL_G_CHAR_ALT;
            const uint32_t prev = i > g->start[r] ? g->elems[i - 1].type : SL_G_END;
            if (set_part && prev != SL_G_CHAR && prev != SL_G_CHAR_NOT && prev != SL_G_CHAR_ALT &&
                prev != SL_G_CHAR_RNG_UPPER)
                return sl_error_set(err, SL_ERR_FORMAT, "grammar: element %u of rule %u "
                                    "continues no character set", i, r);
        }
        if (i != end - 1)
            return sl_error_set(err, SL_ERR_FORMAT, "grammar: rule %u does not end in END "
                                "at its last element", r);
    }
    return SL_OK;
}

sl_status sl_grammar_parse(const char *text, size_t len, sl_grammar **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_grammar_parse: out is NULL");
    *out = NULL;
    if (!text) return sl_error_set(err, SL_ERR_INVALID, "sl_grammar_parse: text is NULL");
    if (memchr(text, 0, len))
        return sl_error_set(err, SL_ERR_FORMAT, "grammar: a NUL byte at offset %zu",
                            (size_t)((const char *)memchr(text, 0, len) - text));
    char *src = malloc(len + 1);
    if (!src) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    memcpy(src, text, len);
    src[len] = 0;
    parser p = {.src = src, .err = err};
    const char *pos = parse_space(src, true);
    while (*pos && !p.st) pos = parse_rule(&p, pos);
    sl_grammar *g = p.st ? NULL : finish(&p);
    for (size_t i = 0; i < p.n_syms; i++) {
        free(p.syms[i].name);
        free(p.rules[i].e);
    }
    free(p.syms);
    free(p.rules);
    free(src);
    if (!g) return p.st;
    *out = g;
    return SL_OK;
}
