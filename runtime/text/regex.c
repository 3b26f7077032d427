/* regex: parser, compiler and BitState search; contract in regex.h.
 *
 * The pattern is parsed into a tree, then compiled into a program of instructions (a
 * Thompson-style NFA: SPLIT tries its first branch before its second, which is what makes the
 * search leftmost-first). Counted repeats are unrolled, so {1,3} is three copies. */
#include "runtime/text/regex.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/unicode.h"

enum { MAX_NODES = 4096, MAX_PROG = 8192, MAX_CLASSES = 256, MAX_ITEMS = 160, INF = -1 };

/* One member of a class: a code point range, or code points having (CAT) or lacking (NCAT)
 * any of a set of class bits. */
typedef struct item {
    enum { IT_RANGE, IT_CAT, IT_NCAT } kind;
    uint32_t lo, hi;
    uint16_t mask;
} item;

/* Invariant: and < 0 or and indexes a class parsed before this one's end; a folding class
 * has no \p{} member (Oniguruma folds those inconsistently, so they are refused). */
typedef struct cls {
    item items[MAX_ITEMS];
    int n_items;
    bool negate;
    bool fold; /* inside (?i:): a code point is in when a case variant of it is in a range */
    int and;   /* the class this one is intersected with, or -1 */
} cls;

typedef enum nkind {
    N_EMPTY, N_CHAR, N_CLASS, N_ANY, N_BOL, N_EOL, N_CAT, N_ALT, N_REP, N_LOOK
} nkind;

typedef struct node {
    nkind kind;
    uint32_t cp;   /* N_CHAR */
    bool fold;     /* N_CHAR: case-insensitive; N_LOOK: negative */
    int cls;       /* N_CLASS */
    int a, b;      /* children (N_CAT, N_ALT: a then b; N_REP, N_LOOK: a) */
    int min, max;  /* N_REP; max INF for no bound */
} node;

typedef enum op {
    OP_CHAR, OP_CLASS, OP_ANY, OP_BOL, OP_EOL, OP_SPLIT, OP_JMP, OP_LOOK, OP_MATCH
} op;

typedef struct inst {
    op op;
    bool flag;   /* OP_CHAR: fold; OP_LOOK: negative */
    uint32_t cp; /* OP_CHAR */
    int x, y;    /* OP_CLASS: class; OP_SPLIT: first, second; OP_JMP: x; OP_LOOK: body, next */
} inst;

/* Invariant: memo[pc] >= 0 exactly for the join points, numbered 0 .. n_memo - 1. */
struct sl__regex {
    inst *prog;
    int n_prog;
    cls *classes;
    int n_classes;
    int *memo;  /* n_prog: the join point's memo column, or -1 */
    int n_memo;
};

typedef struct parser {
    const char *pat;
    size_t at;
    node *nodes;
    int n_nodes;
    cls *classes;
    int n_classes;
    bool fold;
    const char *why; /* first error */
    size_t why_at;
} parser;

static int fail(parser *p, const char *why)
{
    if (!p->why) {
        p->why = why;
        p->why_at = p->at;
    }
    return -1;
}

static int new_node(parser *p, nkind kind)
{
    if (p->n_nodes == MAX_NODES) return fail(p, "pattern too large");
    node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->a = n->b = n->cls = -1;
    return p->n_nodes++;
}

static int pair(parser *p, nkind kind, int a, int b)
{
    if (a < 0 || b < 0) return -1;
    const int n = new_node(p, kind);
    if (n >= 0) {
        p->nodes[n].a = a;
        p->nodes[n].b = b;
    }
    return n;
}

static bool at_end(const parser *p) { return p->pat[p->at] == '\0'; }
static char peek(const parser *p) { return p->pat[p->at]; }

static uint32_t next_cp(parser *p)
{
    const size_t n = strlen(p->pat);
    return sl__utf8_decode(p->pat, n, &p->at);
}

/* \p{NAME} / \P{NAME} after the backslash and letter: the class bits of NAME. */
static int prop(parser *p, uint16_t *mask)
{
    static const struct {
        const char *name;
        uint16_t mask;
    } k_props[] = {
        {"L", SL__UC_L},   {"Lu", SL__UC_LU}, {"Ll", SL__UC_LL}, {"Lt", SL__UC_LT},
        {"Lm", SL__UC_LM}, {"Lo", SL__UC_LO}, {"M", SL__UC_M},   {"N", SL__UC_N},
        {"P", SL__UC_P},   {"S", SL__UC_S},   {"Han", SL__UC_HAN},
    };
    if (peek(p) != '{') return fail(p, "\\p needs {NAME}");
    const char *name = p->pat + p->at + 1, *close = strchr(name, '}');
    if (!close) return fail(p, "\\p{ without }");
    for (size_t i = 0; i < sizeof k_props / sizeof *k_props; i++)
        if (strlen(k_props[i].name) == (size_t)(close - name) &&
            !strncmp(name, k_props[i].name, (size_t)(close - name))) {
            *mask = k_props[i].mask;
            p->at = (size_t)(close + 1 - p->pat);
            return 0;
        }
    return fail(p, "unknown \\p{} class");
}

/* An escape after the backslash: a literal code point (*cp, returns 0) or a class member
 * (*it, returns 1). */
static int escape(parser *p, uint32_t *cp, item *it)
{
    if (at_end(p)) return fail(p, "pattern ends in a backslash");
    const char c = peek(p);
    p->at++;
    switch (c) {
    case 'r': *cp = '\r'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 's':
    case 'S':
        *it = (item){c == 's' ? IT_CAT : IT_NCAT, 0, 0, SL__UC_WS};
        return 1;
    case 'p':
    case 'P': {
        uint16_t m = 0;
        if (prop(p, &m)) return -1;
        *it = (item){c == 'p' ? IT_CAT : IT_NCAT, 0, 0, m};
        return 1;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            p->at--;
            return fail(p, "unsupported escape");
        }
        if ((unsigned char)c >= 0x80) {
            p->at--;
            *cp = next_cp(p);
            return 0;
        }
        *cp = (uint32_t)(unsigned char)c;
        return 0;
    }
}

static int class_body(parser *p);

static int add_item(parser *p, cls *c, item it)
{
    if (c->n_items == MAX_ITEMS) return fail(p, "class has too many members");
    c->items[c->n_items++] = it;
    return 0;
}

/* After '[': the class up to its ']'; returns its index. */
static int class_body(parser *p)
{
    if (p->n_classes == MAX_CLASSES) return fail(p, "too many classes");
    const int id = p->n_classes++;
    cls *c = &p->classes[id];
    memset(c, 0, sizeof *c);
    c->and = -1;
    c->fold = p->fold;
    if (peek(p) == '^') {
        c->negate = true;
        p->at++;
    }
    for (bool first = true;; first = false) {
        if (at_end(p)) return fail(p, "class without ]");
        if (peek(p) == ']' && !first) {
            p->at++;
            return id;
        }
        if (peek(p) == '&' && p->pat[p->at + 1] == '&') {
            p->at += 2;
            if (peek(p) != '[' || c->and >= 0) return fail(p, "&& takes one [class]");
            p->at++;
            const int sub = class_body(p);
            if (sub < 0) return -1;
            c->and = sub;
            if (peek(p) != ']') return fail(p, "&&[class] must end its class");
            continue;
        }
        if (peek(p) == '[') return fail(p, "nested class outside &&");
        uint32_t lo;
        item it;
        if (peek(p) == '\\') {
            p->at++;
            const int r = escape(p, &lo, &it);
            if (r < 0) return -1;
            if (r == 1) {
                if (c->fold && it.mask != SL__UC_WS) return fail(p, "\\p{} in a (?i:) class");
                if (add_item(p, c, it)) return -1;
                continue;
            }
        } else {
            lo = next_cp(p);
        }
        uint32_t hi = lo;
        if (peek(p) == '-' && p->pat[p->at + 1] != ']' && p->pat[p->at + 1] != '\0') {
            p->at++;
            if (peek(p) == '\\') {
                p->at++;
                if (escape(p, &hi, &it) != 0) return fail(p, "range ends in a class");
            } else {
                hi = next_cp(p);
            }
            if (hi < lo) return fail(p, "range out of order");
        }
        if (add_item(p, c, (item){IT_RANGE, lo, hi, 0})) return -1;
    }
}

static int alternation(parser *p);

static int atom(parser *p)
{
    const char c = peek(p);
    if (c == '(') {
        p->at++;
        bool look = false, neg = false, fold = p->fold;
        if (peek(p) == '?') {
            const char k = p->pat[p->at + 1];
            if (k == ':') {
                p->at += 2;
            } else if (k == '=' || k == '!') {
                look = true;
                neg = k == '!';
                p->at += 2;
            } else if (k == 'i' && p->pat[p->at + 2] == ':') {
                p->fold = true;
                p->at += 3;
            } else {
                return fail(p, "unsupported group");
            }
        }
        const int body = alternation(p);
        p->fold = fold;
        if (body < 0) return -1;
        if (peek(p) != ')') return fail(p, "group without )");
        p->at++;
        if (!look) return body;
        const int n = new_node(p, N_LOOK);
        if (n >= 0) {
            p->nodes[n].a = body;
            p->nodes[n].fold = neg;
        }
        return n;
    }
    if (c == '[') {
        p->at++;
        const int k = class_body(p);
        if (k < 0) return -1;
        const int n = new_node(p, N_CLASS);
        if (n >= 0) p->nodes[n].cls = k;
        return n;
    }
    if (c == '.' || c == '^' || c == '$') {
        p->at++;
        return new_node(p, c == '.' ? N_ANY : c == '^' ? N_BOL : N_EOL);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail(p, "quantifier without atom");
    uint32_t cp;
    item it;
    if (c == '\\') {
        p->at++;
        const int r = escape(p, &cp, &it);
        if (r < 0) return -1;
        if (r == 1) {
            if (p->n_classes == MAX_CLASSES) return fail(p, "too many classes");
            cls *k = &p->classes[p->n_classes];
            memset(k, 0, sizeof *k);
            k->and = -1;
            k->items[k->n_items++] = it;
            const int n = new_node(p, N_CLASS);
            if (n >= 0) p->nodes[n].cls = p->n_classes++;
            return n;
        }
    } else {
        cp = next_cp(p);
    }
    const int n = new_node(p, N_CHAR);
    if (n >= 0) {
        p->nodes[n].cp = cp;
        p->nodes[n].fold = p->fold;
    }
    return n;
}

static int number(parser *p, int *out)
{
    if (peek(p) < '0' || peek(p) > '9') return fail(p, "{} needs a number");
    long v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        v = v * 10 + (peek(p) - '0');
        if (v > 1000) return fail(p, "repeat count over 1000");
        p->at++;
    }
    *out = (int)v;
    return 0;
}

static int repeat(parser *p)
{
    int a = atom(p);
    while (a >= 0) {
        int min, max;
        const char c = peek(p);
        if (c == '*') min = 0, max = INF;
        else if (c == '+') min = 1, max = INF;
        else if (c == '?') min = 0, max = 1;
        else if (c == '{') {
            p->at++;
            if (number(p, &min)) return -1;
            max = min;
            if (peek(p) == ',') {
                p->at++;
                max = INF;
                if (peek(p) != '}' && number(p, &max)) return -1;
            }
            if (peek(p) != '}') return fail(p, "{ without }");
            if (max != INF && max < min) return fail(p, "{n,m} with m < n");
        } else {
            return a;
        }
        p->at++;
        if (peek(p) == '?' || peek(p) == '+') return fail(p, "lazy or possessive quantifier");
        const nkind k = p->nodes[a].kind;
        if (k == N_BOL || k == N_EOL || k == N_LOOK) return fail(p, "quantified assertion");
        const int n = new_node(p, N_REP);
        if (n < 0) return -1;
        p->nodes[n].a = a;
        p->nodes[n].min = min;
        p->nodes[n].max = max;
        a = n;
    }
    return a;
}

static int concat(parser *p)
{
    int seq = new_node(p, N_EMPTY);
    while (seq >= 0 && !at_end(p) && peek(p) != '|' && peek(p) != ')')
        seq = pair(p, N_CAT, seq, repeat(p));
    return seq;
}

static int alternation(parser *p)
{
    int alt = concat(p);
    while (alt >= 0 && peek(p) == '|') {
        p->at++;
        alt = pair(p, N_ALT, alt, concat(p));
    }
    return alt;
}

/* ---- compiler ---- */

typedef struct comp {
    const node *nodes;
    inst *prog;
    int n;
    bool full;
} comp;

static int emit(comp *c, inst in)
{
    if (c->n == MAX_PROG) {
        c->full = true;
        return MAX_PROG - 1;
    }
    c->prog[c->n] = in;
    return c->n++;
}

/* Whether node i may repeat without bound, or holds a lookahead. */
static bool unbounded(const node *nodes, int i)
{
    if (i < 0) return false;
    const node *n = &nodes[i];
    if (n->kind == N_LOOK || (n->kind == N_REP && n->max == INF)) return true;
    return unbounded(nodes, n->a) || unbounded(nodes, n->b);
}

/* Whether node i can match the empty string. */
static bool nullable(const node *nodes, int i)
{
    const node *n = &nodes[i];
    switch (n->kind) {
    case N_CHAR:
    case N_CLASS:
    case N_ANY: return false;
    case N_CAT: return nullable(nodes, n->a) && nullable(nodes, n->b);
    case N_ALT: return nullable(nodes, n->a) || nullable(nodes, n->b);
    case N_REP: return n->min == 0 || nullable(nodes, n->a);
    default: return true; /* empty, anchors, lookahead */
    }
}

static void gen(comp *c, int i)
{
    const node *n = &c->nodes[i];
    switch (n->kind) {
    case N_EMPTY: break;
    case N_CHAR: emit(c, (inst){OP_CHAR, n->fold, n->cp, 0, 0}); break;
    case N_CLASS: emit(c, (inst){OP_CLASS, false, 0, n->cls, 0}); break;
    case N_ANY: emit(c, (inst){OP_ANY, false, 0, 0, 0}); break;
    case N_BOL: emit(c, (inst){OP_BOL, false, 0, 0, 0}); break;
    case N_EOL: emit(c, (inst){OP_EOL, false, 0, 0, 0}); break;
    case N_CAT:
        gen(c, n->a);
        gen(c, n->b);
        break;
    case N_ALT: {
        const int split = emit(c, (inst){OP_SPLIT, false, 0, 0, 0});
        c->prog[split].x = c->n;
        gen(c, n->a);
        const int jmp = emit(c, (inst){OP_JMP, false, 0, 0, 0});
        c->prog[split].y = c->n;
        gen(c, n->b);
        c->prog[jmp].x = c->n;
        break;
    }
    case N_REP: {
        for (int k = 0; k < n->min && !c->full; k++) gen(c, n->a);
        if (n->max == INF) {
            const int split = emit(c, (inst){OP_SPLIT, false, 0, 0, 0});
            c->prog[split].x = c->n;
            gen(c, n->a);
            emit(c, (inst){OP_JMP, false, 0, split, 0});
            c->prog[split].y = c->n;
            break;
        }
        int splits[1001], ns = 0;
        for (int k = n->min; k < n->max && !c->full; k++) {
            splits[ns] = emit(c, (inst){OP_SPLIT, false, 0, 0, 0});
            c->prog[splits[ns++]].x = c->n;
            gen(c, n->a);
        }
        for (int k = 0; k < ns; k++) c->prog[splits[k]].y = c->n;
        break;
    }
    case N_LOOK: {
        const int look = emit(c, (inst){OP_LOOK, n->fold, 0, 0, 0});
        c->prog[look].x = c->n;
        gen(c, n->a);
        emit(c, (inst){OP_MATCH, false, 0, 0, 0});
        c->prog[look].y = c->n;
        break;
    }
    }
}

void sl__regex_free(sl__regex *re)
{
    if (!re) return;
    free(re->prog);
    free(re->classes);
    free(re->memo);
    free(re);
}

/* The memo columns: only join points, the instructions the search can enter by two or more
 * edges (pc 0 counts its entry at each start), need one. Any other instruction has one
 * predecessor, so a state (pc, position) of it has one predecessor state; going back, it is
 * reached only from one state of a join point, which the memo lets through once (or from the
 * entry at one start): it is visited at most once without a bit of its own, as before. The
 * lookahead bodies run apart (look_run) and get none. Unrolled counted repeats (jais-2's
 * \s{512}) are long chains without joins: 28 columns there instead of 1,136 instructions.
 * Returns false when out of memory. */
static bool number_joins(sl__regex *re)
{
    const int n = re->n_prog;
    int *in = calloc((size_t)n, sizeof *in), *todo = malloc((size_t)n * sizeof *todo);
    re->memo = malloc((size_t)n * sizeof *re->memo);
    if (!in || !todo || !re->memo) {
        free(in);
        free(todo);
        return false;
    }
    int nt = 0;
    in[0] = 1; /* the entry at each start */
    todo[nt++] = 0;
    while (nt) {
        const int pc = todo[--nt];
        const inst *i = &re->prog[pc];
        const int next[2] = {i->op == OP_SPLIT || i->op == OP_JMP ? i->x
                             : i->op == OP_LOOK                  ? i->y
                                                                 : pc + 1,
                             i->op == OP_SPLIT ? i->y : -1};
        for (int k = 0; k < 2 && i->op != OP_MATCH; k++)
            if (next[k] >= 0 && in[next[k]]++ == 0) todo[nt++] = next[k]; /* first arrival */
    }
    re->n_memo = 0;
    for (int pc = 0; pc < n; pc++) re->memo[pc] = in[pc] >= 2 ? re->n_memo++ : -1;
    free(in);
    free(todo);
    return true;
}

sl_status sl__regex_compile(const char *pattern, sl__regex **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl__regex_compile: out is NULL");
    *out = NULL;
    if (!pattern) return sl_error_set(err, SL_ERR_INVALID, "sl__regex_compile: pattern is NULL");
    parser p = {.pat = pattern};
    p.nodes = malloc(MAX_NODES * sizeof *p.nodes);
    p.classes = malloc(MAX_CLASSES * sizeof *p.classes);
    sl__regex *re = calloc(1, sizeof *re);
    inst *prog = malloc(MAX_PROG * sizeof *prog);
    sl_status st = SL_OK;
    if (!p.nodes || !p.classes || !re || !prog) {
        st = sl_error_set(err, SL_ERR_NOMEM, "regex: out of memory");
        goto done;
    }
    const int root = alternation(&p);
    if (root >= 0 && !at_end(&p)) fail(&p, "unbalanced )");
    for (int i = 0; i < p.n_nodes && !p.why; i++)
        if (p.nodes[i].kind == N_LOOK && unbounded(p.nodes, p.nodes[i].a))
            fail(&p, "lookahead body with an unbounded repeat or a lookahead");
    /* Perl and Oniguruma leave such a loop after an empty pass; the memo would fail the pass
     * and backtrack into the body for a longer match instead, so these are refused */
    for (int i = 0; i < p.n_nodes && !p.why; i++)
        if (p.nodes[i].kind == N_REP && p.nodes[i].max == INF && nullable(p.nodes, p.nodes[i].a))
            fail(&p, "unbounded repeat of what can match empty");
    if (p.why) {
        st = sl_error_set(err, SL_ERR_INVALID, "regex '%s': %s at offset %zu", pattern, p.why,
                          p.why_at);
        goto done;
    }
    comp c = {p.nodes, prog, 0, false};
    gen(&c, root);
    emit(&c, (inst){OP_MATCH, false, 0, 0, 0});
    if (c.full) {
        st = sl_error_set(err, SL_ERR_INVALID, "regex '%s': program over %d instructions",
                          pattern, MAX_PROG);
        goto done;
    }
    re->prog = realloc(prog, (size_t)c.n * sizeof *prog);
    if (!re->prog) re->prog = prog;
    prog = NULL;
    re->n_prog = c.n;
    re->classes = realloc(p.classes, (size_t)(p.n_classes ? p.n_classes : 1) * sizeof *p.classes);
    if (!re->classes) re->classes = p.classes;
    re->n_classes = p.n_classes;
    p.classes = NULL;
    if (!number_joins(re)) {
        st = sl_error_set(err, SL_ERR_NOMEM, "regex: out of memory");
        goto done;
    }
    *out = re;
    re = NULL;
done:
    free(p.nodes);
    free(p.classes);
    free(prog);
    sl__regex_free(re);
    return st;
}

/* ---- search ---- */

/* c's case variants under sl__unicode_fold(): itself alone, or a letter's two cases (and
 * U+017F, U+212A for s, k). Returns how many (1 to 3). */
static int case_variants(uint32_t c, uint32_t v[3])
{
    const uint32_t l = sl__unicode_fold(c);
    if (l < 'a' || l > 'z') {
        v[0] = c;
        return 1;
    }
    int n = 0;
    v[n++] = l;
    v[n++] = l - 32;
    if (l == 's' || l == 'k') v[n++] = l == 's' ? 0x17F : 0x212A;
    return n;
}

static bool class_has(const cls *all, int id, uint32_t cp, uint16_t f)
{
    const cls *c = &all[id];
    uint32_t v[3] = {cp};
    const int nv = c->fold ? case_variants(cp, v) : 1;
    bool in = false;
    for (int i = 0; i < c->n_items && !in; i++) {
        const item *it = &c->items[i];
        if (it->kind != IT_RANGE) {
            in = it->kind == IT_CAT ? (f & it->mask) != 0 : (f & it->mask) == 0;
            continue;
        }
        for (int k = 0; k < nv && !in; k++) in = v[k] >= it->lo && v[k] <= it->hi;
    }
    if (in == c->negate) return false; /* negation after folding, as Oniguruma's [^s] */
    return c->and < 0 || class_has(all, c->and, cp, f);
}

/* Whether instruction pc consumes the code point at pos (pos < end). */
static bool step_ok(const sl__regex *re, const inst *in, uint32_t cp, uint16_t f)
{
    switch (in->op) {
    case OP_CHAR: return in->flag ? sl__unicode_fold(cp) == sl__unicode_fold(in->cp) : cp == in->cp;
    case OP_CLASS: return class_has(re->classes, in->x, cp, f);
    case OP_ANY: return cp != '\n';
    default: return false;
    }
}

/* A lookahead body from pc at pos: plain backtracking, bounded because the body has no
 * unbounded repeat (checked when compiling). */
static bool look_run(const sl__regex *re, int pc, const uint32_t *cps, const uint16_t *flags,
                     size_t ini, size_t end, size_t pos)
{
    for (;;) {
        const inst *in = &re->prog[pc];
        switch (in->op) {
        case OP_MATCH: return true;
        case OP_JMP: pc = in->x; continue;
        case OP_SPLIT:
            if (look_run(re, in->x, cps, flags, ini, end, pos)) return true;
            pc = in->y;
            continue;
        case OP_BOL:
            if (pos != ini) return false;
            pc++;
            continue;
        case OP_EOL:
            if (pos != end) return false;
            pc++;
            continue;
        case OP_LOOK: return false; /* refused when compiling */
        default:
            if (pos >= end || !step_ok(re, in, cps[pos], flags[pos])) return false;
            pos++;
            pc++;
        }
    }
}

static bool seen_set(sl__regex_scratch *s, size_t bit)
{
    uint64_t *w = &s->seen[bit >> 6];
    const uint64_t m = (uint64_t)1 << (bit & 63);
    if (*w & m) return true;
    *w |= m;
    return false;
}

static void seen_clear_row(sl__regex_scratch *s, size_t row, size_t n_memo)
{
    for (size_t b = row * n_memo; b < (row + 1) * n_memo; b++)
        s->seen[b >> 6] &= ~((uint64_t)1 << (b & 63));
}

static bool push(sl__regex_scratch *s, size_t *sp, size_t pc, size_t pos)
{
    if (*sp + 2 > s->stack_cap) {
        const size_t cap = s->stack_cap ? 2 * s->stack_cap : 256;
        size_t *p = realloc(s->stack, cap * sizeof *p);
        if (!p) return false;
        s->stack = p;
        s->stack_cap = cap;
    }
    s->stack[(*sp)++] = pc;
    s->stack[(*sp)++] = pos;
    return true;
}

/* The first match starting exactly at start: 1 with *me, 0, or -1 (out of memory). */
static int run_at(const sl__regex *re, const uint32_t *cps, const uint16_t *flags, size_t ini,
                  size_t end, size_t start, size_t *me, sl__regex_scratch *s)
{
    const size_t nm = (size_t)re->n_memo;
    size_t sp = 0;
    if (!push(s, &sp, 0, start)) return -1;
    while (sp) {
        size_t pos = s->stack[--sp];
        size_t pc = s->stack[--sp];
        for (;;) {
            const int col = re->memo[pc];
            if (col >= 0 && seen_set(s, (pos - ini) * nm + (size_t)col)) break;
            const inst *in = &re->prog[pc];
            if (in->op == OP_MATCH) {
                if (pos == start) break; /* empty: not a match (see regex.h) */
                *me = pos;
                return 1;
            }
            if (in->op == OP_JMP) {
                pc = (size_t)in->x;
            } else if (in->op == OP_SPLIT) {
                if (!push(s, &sp, (size_t)in->y, pos)) return -1;
                pc = (size_t)in->x;
            } else if (in->op == OP_BOL || in->op == OP_EOL) {
                if (pos != (in->op == OP_BOL ? ini : end)) break;
                pc++;
            } else if (in->op == OP_LOOK) {
                if (look_run(re, in->x, cps, flags, ini, end, pos) == in->flag) break;
                pc = (size_t)in->y;
            } else {
                if (pos >= end || !step_ok(re, in, cps[pos], flags[pos])) break;
                pos++;
                pc++;
            }
        }
    }
    return 0;
}

int sl__regex_find(const sl__regex *re, const uint32_t *cps, const uint16_t *flags, size_t ini,
                   size_t end, size_t from, size_t *ms, size_t *me, sl__regex_scratch *s)
{
    const size_t nm = (size_t)re->n_memo;
    if (from == ini) {
        const size_t words = (nm * (end - ini + 1) + 63) / 64;
        if (words > s->seen_words) {
            free(s->seen);
            s->seen = malloc(words * sizeof *s->seen);
            s->seen_words = s->seen ? words : 0;
            if (!s->seen) return -1;
        }
        if (words) memset(s->seen, 0, words * sizeof *s->seen);
    }
    for (size_t start = from; start < end; start++) {
        const int r = run_at(re, cps, flags, ini, end, start, me, s);
        if (r < 0) return -1;
        if (r) {
            *ms = start;
            /* the path that matched marked states at *me it did not fail from */
            seen_clear_row(s, *me - ini, nm);
            return 1;
        }
    }
    return 0;
}

void sl__regex_scratch_free(sl__regex_scratch *s)
{
    if (!s) return;
    free(s->seen);
    free(s->stack);
    *s = (sl__regex_scratch){0};
}
