/* GBNF fragments for JSON Schema conversion (gbnf_build.h), ported from llama.cpp's
 * json-schema-to-grammar.cpp: _not_strings over a trie of the names, build_min_max_int with
 * its uniform_range. Both write to a memory stream. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/gbnf_build.h"

/* A trie of names over code points (llama.cpp's common_trie). Invariants: node 0 is the root;
 * a node's kids are sorted by code point. */
typedef struct tnode {
    uint32_t *cp;               /* [n_kids] code points */
    size_t *kid;                /* [n_kids] node indices */
    size_t n_kids;
    bool end;                   /* a name ends here */
} tnode;

typedef struct trie {
    tnode *node;
    size_t n, cap;
} trie;

static bool trie_node(trie *t, size_t *out)
{
    if (t->n == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 16;
        tnode *n = realloc(t->node, cap * sizeof *n);
        if (!n) return false;
        t->node = n;
        t->cap = cap;
    }
    t->node[t->n] = (tnode){0};
    *out = t->n++;
    return true;
}

static bool trie_add(trie *t, const char *name)
{
    size_t at = 0;
    const unsigned char *p = (const unsigned char *)name;
    while (*p) {
        const int len = *p < 0x80 ? 1 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? *p : *p & (0x7Fu >> len);
        for (int i = 1; i < len && p[i]; i++) cp = (cp << 6) | (p[i] & 0x3Fu);
        for (int i = 0; i < len && *p; i++) p++;
        size_t k = 0;
        while (k < t->node[at].n_kids && t->node[at].cp[k] < cp) k++;
        if (k < t->node[at].n_kids && t->node[at].cp[k] == cp) {
            at = t->node[at].kid[k];
            continue;
        }
        size_t child;
        if (!trie_node(t, &child)) return false;
        tnode *n = &t->node[at];
        uint32_t *cps = realloc(n->cp, (n->n_kids + 1) * sizeof *cps);
        if (cps) n->cp = cps;
        size_t *kids = realloc(n->kid, (n->n_kids + 1) * sizeof *kids);
        if (kids) n->kid = kids;
        if (!cps || !kids) return false;
        memmove(n->cp + k + 1, n->cp + k, (n->n_kids - k) * sizeof *n->cp);
        memmove(n->kid + k + 1, n->kid + k, (n->n_kids - k) * sizeof *n->kid);
        n->cp[k] = cp;
        n->kid[k] = child;
        n->n_kids++;
        at = child;
    }
    t->node[at].end = true;
    return true;
}

/* A code point inside a GBNF character class, escaped unless a letter or digit. */
static void class_char(FILE *f, uint32_t cp)
{
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
        fputc((int)cp, f);
    else if (cp < 0x100)
        fprintf(f, "\\x%02X", (unsigned)cp);
    else if (cp < 0x10000)
        fprintf(f, "\\u%04X", (unsigned)cp);
    else
        fprintf(f, "\\U%08X", (unsigned)cp);
}

static void not_strings_node(const trie *t, size_t at, const char *ch, FILE *f)
{
    const tnode *n = &t->node[at];
    for (size_t k = 0; k < n->n_kids; k++) {
        fputs(k ? " | [" : "[", f);
        class_char(f, n->cp[k]);
        fputs("]", f);
        if (t->node[n->kid[k]].n_kids) {
            fputs(" (", f);
            not_strings_node(t, n->kid[k], ch, f);
            fputs(")", f);
        } else {
            fprintf(f, " %s+", ch);
        }
    }
    if (n->n_kids) {
        fputs(" | [^\"", f);
        for (size_t k = 0; k < n->n_kids; k++) class_char(f, n->cp[k]);
        fprintf(f, "] %s*", ch);
    }
}

/* A memory stream's text (*buf is set by fclose), or NULL when it failed. */
static char *finish(FILE *f, char **buf, bool ok)
{
    if (fclose(f) || !ok) {
        free(*buf);
        return NULL;
    }
    return *buf;
}

char *sl_gbnf_not_strings(const char *const *names, size_t n, const char *char_rule)
{
    trie t = {0};
    size_t root;
    bool ok = trie_node(&t, &root);
    for (size_t i = 0; i < n && ok; i++) ok = trie_add(&t, names[i]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = ok ? open_memstream(&buf, &len) : NULL;
    if (f) {
        fputs("[\"] ( ", f);
        not_strings_node(&t, 0, char_rule, f);
        fprintf(f, " )%s [\"]", t.node[0].end ? "" : "?");
    }
    for (size_t i = 0; i < t.n; i++) {
        free(t.node[i].cp);
        free(t.node[i].kid);
    }
    free(t.node);
    return f ? finish(f, &buf, ok) : NULL;
}

/* ---- integer ranges ------------------------------------------------------------------------ */

static void digit_range(FILE *f, char from, char to)
{
    if (from == to) fprintf(f, "[%c]", from);
    else fprintf(f, "[%c-%c]", from, to);
}

/* max_d < 0: no maximum. */
static void more_digits(FILE *f, int min_d, int max_d)
{
    fputs("[0-9]", f);
    if (min_d == max_d && min_d == 1) return;
    fprintf(f, "{%d", min_d);
    if (max_d != min_d) {
        fputc(',', f);
        if (max_d >= 0) fprintf(f, "%d", max_d);
    }
    fputc('}', f);
}

/* llama.cpp's uniform_range: the numbers from..to of one length, as digit strings. */
static void uniform_range(FILE *f, const char *from, const char *to)
{
    size_t i = 0;
    while (from[i] && to[i] && from[i] == to[i]) i++;
    if (i > 0) fprintf(f, "\"%.*s\"", (int)i, from);
    if (!from[i] || !to[i]) return;
    if (i > 0) fputc(' ', f);
    const size_t sub_len = strlen(from) - i - 1;
    if (!sub_len) {
        fprintf(f, "[%c-%c]", from[i], to[i]);
        return;
    }
    char zeros[24], nines[24];
    memset(zeros, '0', sub_len);
    memset(nines, '9', sub_len);
    zeros[sub_len] = nines[sub_len] = 0;
    const char *from_sub = from + i + 1, *to_sub = to + i + 1;
    bool to_reached = false;
    fputc('(', f);
    if (!strcmp(from_sub, zeros)) {
        digit_range(f, from[i], (char)(to[i] - 1));
        fputc(' ', f);
        more_digits(f, (int)sub_len, (int)sub_len);
    } else {
        fprintf(f, "[%c] (", from[i]);
        uniform_range(f, from_sub, nines);
        fputc(')', f);
        if (from[i] < to[i] - 1) {
            fputs(" | ", f);
            if (!strcmp(to_sub, nines)) {
                digit_range(f, (char)(from[i] + 1), to[i]);
                to_reached = true;
            } else {
                digit_range(f, (char)(from[i] + 1), (char)(to[i] - 1));
            }
            fputc(' ', f);
            more_digits(f, (int)sub_len, (int)sub_len);
        }
    }
    if (!to_reached) {
        fputs(" | ", f);
        digit_range(f, to[i], to[i]);
        fputc(' ', f);
        uniform_range(f, zeros, to_sub);
    }
    fputc(')', f);
}

/* llama.cpp's build_min_max_int. */
static void min_max(FILE *f, int64_t min, int64_t max, int decimals_left, bool top)
{
    const bool has_min = min != INT64_MIN, has_max = max != INT64_MAX;
    if (has_min && has_max) {
        if (min < 0 && max < 0) {
            fputs("\"-\" (", f);
            min_max(f, -max, -min, decimals_left, true);
            fputc(')', f);
            return;
        }
        if (min < 0) {
            fputs("\"-\" (", f);
            min_max(f, 0, -min, decimals_left, true);
            fputs(") | ", f);
            min = 0;
        }
        char min_s[24], max_s[24];
        snprintf(min_s, sizeof min_s, "%" PRId64, min);
        snprintf(max_s, sizeof max_s, "%" PRId64, max);
        for (size_t digits = strlen(min_s); digits < strlen(max_s); digits++) {
            char nines[24];
            memset(nines, '9', digits);
            nines[digits] = 0;
            uniform_range(f, min_s, nines);
            min_s[0] = '1';
            memset(min_s + 1, '0', digits);
            min_s[digits + 1] = 0;
            fputs(" | ", f);
        }
        uniform_range(f, min_s, max_s);
        return;
    }
    const int less = decimals_left - 1 > 1 ? decimals_left - 1 : 1;
    if (has_min) {
        if (min < 0) {
            fputs("\"-\" (", f);
            min_max(f, INT64_MIN, -min, decimals_left, false);
            fputs(") | [0] | [1-9] ", f);
            more_digits(f, 0, decimals_left - 1);
        } else if (min == 0) {
            if (top) {
                fputs("[0] | [1-9] ", f);
                more_digits(f, 0, less);
            } else {
                more_digits(f, 1, decimals_left);
            }
        } else if (min <= 9) {
            const char c = (char)('0' + min), start = top ? '1' : '0';
            if (c > start) {
                digit_range(f, start, (char)(c - 1));
                fputc(' ', f);
                more_digits(f, 1, less);
                fputs(" | ", f);
            }
            digit_range(f, c, '9');
            fputc(' ', f);
            more_digits(f, 0, less);
        } else {
            char min_s[24];
            snprintf(min_s, sizeof min_s, "%" PRId64, min);
            const int len = (int)strlen(min_s);
            const char c = min_s[0];
            if (c > '1') {
                digit_range(f, top ? '1' : '0', (char)(c - 1));
                fputc(' ', f);
                more_digits(f, len, less);
                fputs(" | ", f);
            }
            digit_range(f, c, c);
            fputs(" (", f);
            min_max(f, strtoll(min_s + 1, NULL, 10), INT64_MAX, less, false);
            fputc(')', f);
            if (c < '9') {
                fputs(" | ", f);
                digit_range(f, (char)(c + 1), '9');
                fputc(' ', f);
                more_digits(f, len - 1, less);
            }
        }
        return;
    }
    if (max >= 0) {
        if (top) {
            fputs("\"-\" [1-9] ", f);
            more_digits(f, 0, less);
            fputs(" | ", f);
        }
        min_max(f, 0, max, decimals_left, true);
    } else {
        fputs("\"-\" (", f);
        min_max(f, -max, INT64_MAX, decimals_left, false);
        fputc(')', f);
    }
}

char *sl_gbnf_int_range(int64_t min, int64_t max)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    min_max(f, min, max, 16, true);
    return finish(f, &buf, true);
}
