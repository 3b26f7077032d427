/* Matching text against an sl_grammar (grammar.h) with llama.cpp's pushdown stacks:
 * llama_grammar_advance_stack, llama_grammar_accept, llama_grammar_match_char,
 * llama_grammar_match_partial_char and llama_grammar_reject_candidates(_for_stack), in C.
 * A stack is a run of element indices into g->elems, its top last; a set of stacks is one
 * array of indices with offsets (stacks below). */
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"

/* Stacks i = data[off[i], off[i + 1]); off[0] = 0, n stacks. A hashed set also indexes its
 * stacks by content (slot: open addressing, index + 1, 0 empty; n_slot a power of two >= 2n),
 * so that membership stays O(1) when an ambiguous grammar makes thousands of stacks. */
typedef struct stacks {
    uint32_t *data;
    size_t n_data, cap_data;
    size_t *off;
    size_t n, cap_off;
    bool hashed;
    uint32_t *slot;
    size_t n_slot;
} stacks;

#define HASHED ((stacks){.hashed = true})

struct sl_gmatch {
    const sl_grammar *g;
    stacks cur;                 /* the state: every top is a terminal, or the stack is empty */
    sl_gpartial partial;
    stacks todo, seen;          /* advance()'s scratch */
    uint32_t *tmp;              /* one stack being expanded */
    size_t cap_tmp;
    size_t work;                /* expansions in this call (SL_GRAMMAR_MAX_WORK) */
};

static void st_free(stacks *s)
{
    free(s->data);
    free(s->off);
    free(s->slot);
    *s = (stacks){.hashed = s->hashed};
}

static void st_clear(stacks *s)
{
    if (s->n_slot > 64 && s->n_slot > 8 * s->n) { /* a big table left by a big set: drop it */
        free(s->slot);
        s->slot = NULL;
        s->n_slot = 0;
    } else if (s->n_slot) {
        memset(s->slot, 0, s->n_slot * sizeof *s->slot);
    }
    s->n = 0;
    s->n_data = 0;
}

static size_t st_len(const stacks *s, size_t i)
{
    return s->off[i + 1] - s->off[i];
}

static const uint32_t *st_at(const stacks *s, size_t i)
{
    return s->data + s->off[i];
}

static uint32_t hash(const uint32_t *e, size_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)len;
    for (size_t i = 0; i < len; i++) h = (h ^ e[i]) * 16777619u;
    return h;
}

static void slot_put(stacks *s, size_t i)
{
    size_t k = hash(st_at(s, i), st_len(s, i)) & (s->n_slot - 1);
    while (s->slot[k]) k = (k + 1) & (s->n_slot - 1);
    s->slot[k] = (uint32_t)i + 1;
}

static sl_status st_push(stacks *s, const uint32_t *e, size_t len, sl_error *err)
{
    if (s->n + 2 > s->cap_off) {
        const size_t cap = s->cap_off ? 2 * s->cap_off : 16;
        size_t *o = realloc(s->off, cap * sizeof *o);
        if (!o) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        s->off = o;
        s->cap_off = cap;
    }
    if (s->n_data + len > s->cap_data || !s->data) { /* data never NULL: st_at adds to it */
        size_t cap = s->cap_data ? 2 * s->cap_data : 64;
        while (cap < s->n_data + len) cap *= 2;
        uint32_t *d = realloc(s->data, cap * sizeof *d);
        if (!d) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        s->data = d;
        s->cap_data = cap;
    }
    if (!s->n) s->off[0] = 0;
    if (len) memcpy(s->data + s->n_data, e, len * sizeof *e);
    s->n_data += len;
    s->off[++s->n] = s->n_data;
    if (!s->hashed) return SL_OK;
    if (2 * s->n > s->n_slot) { /* grow and re-index */
        const size_t n_slot = s->n_slot ? 2 * s->n_slot : 32;
        uint32_t *t = calloc(n_slot, sizeof *t);
        if (!t) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        free(s->slot);
        s->slot = t;
        s->n_slot = n_slot;
        for (size_t i = 0; i < s->n; i++) slot_put(s, i);
    } else {
        slot_put(s, s->n - 1);
    }
    return SL_OK;
}

static bool st_has(const stacks *s, const uint32_t *e, size_t len)
{
    if (s->hashed) {
        if (!s->n_slot) return false;
        for (size_t k = hash(e, len) & (s->n_slot - 1); s->slot[k]; k = (k + 1) & (s->n_slot - 1)) {
            const size_t i = s->slot[k] - 1;
            if (st_len(s, i) == len && (!len || !memcmp(st_at(s, i), e, len * sizeof *e)))
                return true;
        }
        return false;
    }
    for (size_t i = 0; i < s->n; i++)
        if (st_len(s, i) == len && (!len || !memcmp(st_at(s, i), e, len * sizeof *e)))
            return true;
    return false;
}

static bool is_end_of_seq(const sl_gelem *e)
{
    return e->type == SL_G_END || e->type == SL_G_ALT;
}

/* llama_grammar_advance_stack: expands the rule references on top of stack[0, len) until every
 * resulting stack has a terminal on top (or is empty), adding the new ones to out. */
static sl_status advance(sl_gmatch *m, const uint32_t *stack, size_t len, stacks *out,
                         sl_error *err)
{
    const sl_gelem *el = m->g->elems;
    st_clear(&m->todo);
    st_clear(&m->seen);
    sl_status st = st_push(&m->todo, stack, len, err);
    while (!st && m->todo.n) {
        const size_t n = st_len(&m->todo, m->todo.n - 1);
        if (n + 2 > m->cap_tmp) {
            uint32_t *t = realloc(m->tmp, (n + 2) * 2 * sizeof *t);
            if (!t) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
            m->tmp = t;
            m->cap_tmp = (n + 2) * 2;
        }
        uint32_t *cur = m->tmp;
        memcpy(cur, st_at(&m->todo, m->todo.n - 1), n * sizeof *cur);
        m->todo.n--;
        m->todo.n_data = m->todo.off[m->todo.n];
        if (st_has(&m->seen, cur, n)) continue;
        if (m->seen.n >= SL_GRAMMAR_MAX_STACKS || out->n >= SL_GRAMMAR_MAX_STACKS ||
            ++m->work > SL_GRAMMAR_MAX_WORK)
            return sl_error_set(err, SL_ERR_RANGE, "grammar: more than %d parse stacks or %d "
                                "expansions for one piece (the grammar is too ambiguous)",
                                SL_GRAMMAR_MAX_STACKS, SL_GRAMMAR_MAX_WORK);
        if ((st = st_push(&m->seen, cur, n, err))) break;
        if (!n) {
            if (!st_has(out, cur, 0)) st = st_push(out, cur, 0, err);
            continue;
        }
        const uint32_t pos = cur[n - 1];
        switch (el[pos].type) {
        case SL_G_RULE_REF: {
            uint32_t sub = m->g->start[el[pos].value];
            for (;;) {
                size_t k = n - 1;
                if (!is_end_of_seq(&el[pos + 1])) cur[k++] = pos + 1;
                if (!is_end_of_seq(&el[sub])) cur[k++] = sub;
                if ((st = st_push(&m->todo, cur, k, err))) break;
                cur[n - 1] = pos; /* restore what the pushes overwrote */
                while (!is_end_of_seq(&el[sub])) sub++;
                if (el[sub].type != SL_G_ALT) break;
                sub++;
            }
            break;
        }
        case SL_G_CHAR:
        case SL_G_CHAR_NOT:
        case SL_G_CHAR_ANY:
            if (!st_has(out, cur, n)) st = st_push(out, cur, n, err);
            break;
        default:
            return sl_error_set(err, SL_ERR_INVALID, "grammar: a stack stopped on element %u "
                                "of type %u", pos, el[pos].type);
        }
    }
    return st;
}

/* llama_grammar_match_char: whether chr satisfies the character set at pos; *next: the
 * element after the set. */
static bool match_char(const sl_gelem *el, uint32_t pos, uint32_t chr, uint32_t *next)
{
    const bool positive = el[pos].type == SL_G_CHAR || el[pos].type == SL_G_CHAR_ANY;
    bool found = false;
    do {
        if (el[pos + 1].type == SL_G_CHAR_RNG_UPPER) {
            found = found || (el[pos].value <= chr && chr <= el[pos + 1].value);
            pos += 2;
        } else if (el[pos].type == SL_G_CHAR_ANY) {
            found = true;
            pos += 1;
        } else {
            found = found || el[pos].value == chr;
            pos += 1;
        }
    } while (el[pos].type == SL_G_CHAR_ALT);
    if (next) *next = pos;
    return found == positive;
}

/* llama_grammar_match_partial_char: whether some completion of the partial sequence could
 * satisfy the character set at pos. */
static bool match_partial(const sl_gelem *el, uint32_t pos, sl_gpartial p)
{
    const bool positive = el[pos].type == SL_G_CHAR || el[pos].type == SL_G_CHAR_ANY;
    if (p.n_remain < 0 || (p.n_remain == 1 && p.value < 2)) return false;
    uint32_t low = p.value << (p.n_remain * 6);
    const uint32_t high = low | ((1u << (p.n_remain * 6)) - 1);
    if (low == 0) {
        if (p.n_remain == 2) low = 1u << 11;
        else if (p.n_remain == 3) low = 1u << 16;
    }
    do {
        if (el[pos + 1].type == SL_G_CHAR_RNG_UPPER) {
            if (el[pos].value <= high && low <= el[pos + 1].value) return positive;
            pos += 2;
        } else if (el[pos].type == SL_G_CHAR_ANY) {
            return true;
        } else {
            if (low <= el[pos].value && el[pos].value <= high) return positive;
            pos += 1;
        }
    } while (el[pos].type == SL_G_CHAR_ALT);
    return !positive;
}

/* Whether a finished sequence of len bytes holding v is a valid scalar value. */
static bool valid_cp(uint32_t v, int len)
{
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    return v >= min[len] && v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF);
}

size_t sl_grammar_decode(const char *src, size_t n, sl_gpartial *partial, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0, k = 0;
    uint32_t value = partial->value;
    int n_remain = partial->n_remain, len = partial->len;
    if (n_remain < 0) { /* an invalid sequence stays invalid */
        cp[0] = 0;
        return 0;
    }
    while (i < n && n_remain > 0) {
        if ((s[i] >> 6) != 2) break;
        value = (value << 6) + (s[i++] & 0x3Fu);
        n_remain--;
    }
    if (partial->n_remain > 0 && (n_remain ? i < n : !valid_cp(value, len))) goto invalid;
    if (partial->n_remain > 0 && n_remain == 0) cp[k++] = value;
    while (i < n) {
        const unsigned char b = s[i++];
        len = b < 0x80 ? 1 : b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3
            : b >= 0xF0 && b < 0xF5 ? 4 : 0;
        if (!len) goto invalid;
        n_remain = len - 1;
        value = b & (0xFFu >> (len == 1 ? 1 : len + 1));
        while (i < n && n_remain > 0) {
            if ((s[i] >> 6) != 2) goto invalid;
            value = (value << 6) + (s[i++] & 0x3Fu);
            n_remain--;
        }
        if (n_remain == 0) {
            if (!valid_cp(value, len)) goto invalid;
            cp[k++] = value;
        }
    }
    cp[k] = 0;
    *partial = n_remain ? (sl_gpartial){value, n_remain, len} : (sl_gpartial){0, 0, 0};
    return k;
invalid:
    cp[0] = 0;
    *partial = (sl_gpartial){0, -1, 0};
    return 0;
}

sl_status sl_gmatch_create(const sl_grammar *g, sl_gmatch **out, sl_error *err)
{
    *out = NULL;
    sl_gmatch *m = calloc(1, sizeof *m);
    if (!m) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    m->g = g;
    m->cur = m->seen = HASHED;
    /* one stack per alternative of root (llama_grammar_init_impl) */
    uint32_t pos = g->start[g->root];
    sl_status st = SL_OK;
    for (;;) {
        const uint32_t one = pos;
        st = advance(m, &one, is_end_of_seq(&g->elems[pos]) ? 0 : 1, &m->cur, err);
        if (st) break;
        while (!is_end_of_seq(&g->elems[pos])) pos++;
        if (g->elems[pos].type != SL_G_ALT) break;
        pos++;
    }
    if (st) {
        sl_gmatch_free(m);
        return st;
    }
    *out = m;
    return SL_OK;
}

void sl_gmatch_free(sl_gmatch *m)
{
    if (!m) return;
    st_free(&m->cur);
    st_free(&m->todo);
    st_free(&m->seen);
    free(m->tmp);
    free(m);
}

sl_gpartial sl_gmatch_partial(const sl_gmatch *m)
{
    return m->partial;
}

bool sl_gmatch_can_end(const sl_gmatch *m)
{
    if (m->partial.n_remain) return false;
    for (size_t i = 0; i < m->cur.n; i++)
        if (!st_len(&m->cur, i)) return true;
    return false;
}

bool sl_gmatch_done(const sl_gmatch *m)
{
    if (m->partial.n_remain || !m->cur.n) return false;
    for (size_t i = 0; i < m->cur.n; i++)
        if (st_len(&m->cur, i)) return false;
    return true;
}

/* llama_grammar_accept: every stack whose top matches chr, advanced past it, into out. */
static sl_status accept_chr(sl_gmatch *m, const stacks *in, uint32_t chr, stacks *out,
                            sl_error *err)
{
    st_clear(out);
    uint32_t *buf = NULL;
    size_t cap = 0;
    sl_status st = SL_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const size_t n = st_len(in, i);
        if (!n) continue;
        const uint32_t *s = st_at(in, i);
        uint32_t next;
        if (!match_char(m->g->elems, s[n - 1], chr, &next)) continue;
        if (n + 1 > cap) {
            uint32_t *b = realloc(buf, (n + 1) * sizeof *b);
            if (!b) {
                st = sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
                break;
            }
            buf = b;
            cap = n + 1;
        }
        memcpy(buf, s, (n - 1) * sizeof *buf);
        size_t k = n - 1;
        if (!is_end_of_seq(&m->g->elems[next])) buf[k++] = next;
        st = advance(m, buf, k, out, err);
    }
    free(buf);
    return st;
}

sl_status sl_gmatch_accept(sl_gmatch *m, const char *s, size_t n, sl_error *err)
{
    uint32_t *cp = malloc((n + 1) * sizeof *cp);
    stacks a = HASHED, b = HASHED;
    m->work = 0;
    sl_status st = cp ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    sl_gpartial partial = m->partial;
    const size_t k = st ? 0 : sl_grammar_decode(s, n, &partial, cp);
    if (!st && partial.n_remain < 0)
        st = sl_error_set(err, SL_ERR_INVALID, "grammar: the text is not valid UTF-8");
    for (size_t i = 0; i < m->cur.n && !st; i++)
        st = st_push(&a, st_at(&m->cur, i), st_len(&m->cur, i), err);
    for (size_t i = 0; i < k && !st; i++) {
        if ((st = accept_chr(m, &a, cp[i], &b, err))) break;
        const stacks t = a;
        a = b;
        b = t;
        if (!a.n)
            st = sl_error_set(err, SL_ERR_INVALID, "grammar: the text does not match the "
                              "grammar at character %zu", i);
    }
    if (!st && partial.n_remain > 0) { /* a cut sequence must still be able to match */
        bool any = false;
        for (size_t i = 0; i < a.n && !any; i++)
            any = st_len(&a, i) && match_partial(m->g->elems, st_at(&a, i)[st_len(&a, i) - 1],
                                                 partial);
        if (!any)
            st = sl_error_set(err, SL_ERR_INVALID, "grammar: the text ends in a UTF-8 "
                              "sequence the grammar cannot continue");
    }
    if (!st) {
        st_free(&m->cur);
        m->cur = a;
        a = HASHED;
        m->partial = partial;
    }
    st_free(&a);
    st_free(&b);
    free(cp);
    return st;
}

/* A candidate list (llama_grammar_candidates). */
typedef struct cands {
    sl_gcand *c;
    size_t n;
} cands;

static sl_status reject_all(sl_gmatch *m, const stacks *s, const cands *in, cands *rej,
                            sl_error *err);

/* llama_grammar_reject_candidates_for_stack: the candidates of in that stack[0, len) rejects,
 * into rej (room for in->n). */
static sl_status reject_stack(sl_gmatch *m, const uint32_t *stack, size_t len, const cands *in,
                              cands *rej, sl_error *err)
{
    const sl_gelem *el = m->g->elems;
    rej->n = 0;
    if (!len) {
        for (size_t i = 0; i < in->n; i++)
            if (*in->c[i].cp || in->c[i].partial.n_remain) rej->c[rej->n++] = in->c[i];
        return SL_OK;
    }
    const uint32_t top = stack[len - 1];
    cands next = {malloc((in->n ? in->n : 1) * sizeof *next.c), 0};
    if (!next.c) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    for (size_t i = 0; i < in->n; i++) {
        const sl_gcand *c = &in->c[i];
        if (!*c->cp) {
            if (c->partial.n_remain && !match_partial(el, top, c->partial)) rej->c[rej->n++] = *c;
        } else if (match_char(el, top, *c->cp, NULL)) {
            next.c[next.n] = *c;
            next.c[next.n++].cp++;
        } else {
            rej->c[rej->n++] = *c;
        }
    }
    sl_status st = SL_OK;
    if (next.n) {
        uint32_t after;
        match_char(el, top, 0, &after);
        uint32_t *s = malloc((len + 1) * sizeof *s);
        stacks ns = HASHED;
        cands nr = {malloc(next.n * sizeof *nr.c), 0};
        if (!s || !nr.c) st = sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        if (!st) {
            memcpy(s, stack, (len - 1) * sizeof *s);
            size_t k = len - 1;
            if (!is_end_of_seq(&el[after])) s[k++] = after;
            st = advance(m, s, k, &ns, err);
        }
        if (!st) st = reject_all(m, &ns, &next, &nr, err);
        for (size_t i = 0; !st && i < nr.n; i++) {
            rej->c[rej->n] = nr.c[i];
            rej->c[rej->n++].cp--;
        }
        free(s);
        free(nr.c);
        st_free(&ns);
    }
    free(next.c);
    return st;
}

/* llama_grammar_reject_candidates: a candidate is rejected when every stack rejects it. */
static sl_status reject_all(sl_gmatch *m, const stacks *s, const cands *in, cands *rej,
                            sl_error *err)
{
    if (!s->n || !in->n) { /* no stack: nothing can follow */
        memcpy(rej->c, in->c, in->n * sizeof *rej->c);
        rej->n = s->n ? 0 : in->n;
        return SL_OK;
    }
    sl_status st = reject_stack(m, st_at(s, 0), st_len(s, 0), in, rej, err);
    if (st || s->n == 1) return st;
    cands tmp = {malloc((rej->n ? rej->n : 1) * sizeof *tmp.c), 0};
    if (!tmp.c) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    for (size_t i = 1; i < s->n && !st && rej->n; i++) {
        memcpy(tmp.c, rej->c, rej->n * sizeof *tmp.c);
        tmp.n = rej->n;
        st = reject_stack(m, st_at(s, i), st_len(s, i), &tmp, rej, err);
    }
    free(tmp.c);
    return st;
}

sl_status sl_gmatch_reject(sl_gmatch *m, const sl_gcand *cand, size_t n, bool *rejected,
                           sl_error *err)
{
    if (!n) return SL_OK;
    cands in = {(sl_gcand *)cand, n}, rej = {malloc(n * sizeof *rej.c), 0};
    if (!rej.c) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    /* the stacks are read while advance() reuses its scratch: copy them first */
    stacks cur = {0};
    sl_status st = SL_OK;
    m->work = 0;
    for (size_t i = 0; i < m->cur.n && !st; i++)
        st = st_push(&cur, st_at(&m->cur, i), st_len(&m->cur, i), err);
    if (!st) st = reject_all(m, &cur, &in, &rej, err);
    for (size_t i = 0; !st && i < rej.n; i++) rejected[rej.c[i].index] = true;
    st_free(&cur);
    free(rej.c);
    return st;
}
