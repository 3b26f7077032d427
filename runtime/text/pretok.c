/* BPE pre-tokenizers: the regexes of llama.cpp's llm_tokenizer_bpe, implemented by hand over
 * code points (no regex library).
 *
 * Each pre-tokenizer is a list of stages; a stage refines a list of fragments (lengths in code
 * points) into words, like llama.cpp's unicode_regex_split: every match of the stage's regex
 * becomes a word and so does every gap between matches. Stages:
 *   gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
 *           \p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *           D = 3 for llama3, D = 1 for qwen2 (its \p{N})
 *   o200k   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}|
 *           ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+   ("gpt-4o": gpt-oss, GPT-4o)
 *           U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
 *           C = (?i:'s|'t|'re|'ve|'m|'ll|'d)
 *   default [\p{P}\$\+<=>\^~\|]+  then gpt2  then \p{N}+  then [0-9][0-9][0-9]
 * gpt2 and llama3 follow llama.cpp's unicode_regex_split_custom_gpt2/_llama3 step by step
 * (they are its hand-written equivalents of those regexes; qwen2 runs through std::regex there,
 * with the same semantics), but for one thing: llama.cpp rewrites the tokenizer.json
 * contractions (?i:'s|...) as '[sS]|..., which misses U+017F (long s, which folds to s); Sluice
 * keeps the (?i:), as Hugging Face does ("'\u017fx" is "'\u017f" "x" there, one word in
 * llama.cpp). \s is Unicode White_Space, \p{L}/\p{N}/\p{P} general categories.
 * o200k follows the regex itself as Hugging Face tokenizers (Oniguruma) and tiktoken run it,
 * backtracking included. llama.cpp runs a rewrite of it instead ([^a-z] / [^A-Z] for the case
 * classes, ASCII-only contractions) that differs on non-ASCII case, marks and U+017F; the
 * tokenizer.json of these models is the definition, so Sluice matches it.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/text/regex.h"
#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"

enum { OUT_OF_RANGE = 0xFFFFFFFFu };

typedef struct lens {
    size_t *v;
    size_t n, cap;
    bool oom;
} lens;

static void push_len(lens *l, size_t len)
{
    if (len == 0 || l->oom) return;
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *p = realloc(l->v, cap * sizeof *p);
        if (!p) {
            l->oom = true;
            return;
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = len;
}

/* One fragment [ini, end) of the code points being split; out-of-fragment reads give
 * OUT_OF_RANGE and "no category", as llama.cpp's _get_cpt/_get_flags lambdas. */
typedef struct frag {
    const uint32_t *cps;
    size_t ini, end, prev_end;
    lens *out;
} frag;

static uint32_t cpt(const frag *f, size_t pos)
{
    return pos >= f->ini && pos < f->end ? f->cps[pos] : OUT_OF_RANGE;
}
static bool is_l(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    return c != OUT_OF_RANGE && sl__unicode_is_letter(c);
}
static bool is_n(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    return c != OUT_OF_RANGE && sl__unicode_is_number(c);
}
static bool is_ws(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    return c != OUT_OF_RANGE && sl__unicode_is_whitespace(c);
}
/* [^\s\p{L}\p{N}] inside the fragment */
static bool is_other(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    return c != OUT_OF_RANGE && !sl__unicode_is_whitespace(c) && !sl__unicode_is_letter(c) &&
           !sl__unicode_is_number(c);
}

/* Ends the current word at `end`; returns its length. */
static size_t add_word(frag *f, size_t end)
{
    const size_t len = end - f->prev_end;
    push_len(f->out, len);
    f->prev_end = end;
    return len;
}

/* 's 't 're 've 'm 'll 'd at pos: the match length (0 if none). fold: the tokenizer.json
 * regexes' (?i:'s|...) (llama3, qwen2, o200k); else case-sensitive (gpt2). */
static size_t contraction(const frag *f, size_t pos, bool fold)
{
    if (cpt(f, pos) != '\'' || pos + 1 >= f->end) return 0;
    uint32_t a = cpt(f, pos + 1);
    if (fold) a = sl__unicode_fold(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= f->end) return 0;
    uint32_t b = cpt(f, pos + 2);
    if (fold) b = sl__unicode_fold(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static void split_gpt2(frag *f)
{
    for (size_t pos = f->ini; pos < f->end;) {
        const uint32_t c = cpt(f, pos);
        const size_t cl = contraction(f, pos, false);
        if (cl) {
            pos += add_word(f, pos + cl);
            continue;
        }
        /* " ?" prefixes: look at the next code point when this one is a space */
        const size_t q = c == ' ' ? pos + 1 : pos;
        if (is_l(f, q)) { /* <space>?\p{L}+ */
            pos = q;
            while (is_l(f, pos)) pos++;
            add_word(f, pos);
            continue;
        }
        if (is_n(f, q)) { /* <space>?\p{N}+ */
            pos = q;
            while (is_n(f, pos)) pos++;
            add_word(f, pos);
            continue;
        }
        if (is_other(f, q)) { /* <space>?[^\s\p{L}\p{N}]+ */
            pos = q;
            while (is_other(f, pos)) pos++;
            add_word(f, pos);
            continue;
        }
        size_t nws = 0;
        while (is_ws(f, pos + nws)) nws++;
        if (nws > 1 && cpt(f, pos + nws) != OUT_OF_RANGE) { /* \s+(?!\S) */
            pos += nws - 1;
            add_word(f, pos);
            continue;
        }
        if (nws > 0) { /* \s+ */
            pos += nws;
            add_word(f, pos);
            continue;
        }
        add_word(f, ++pos); /* no match: one code point on its own */
    }
}

/* The tail shared by llama3 and o200k, tried in this order at pos:
 *   <space>?[^\s\p{L}\p{N}]+[\r\n]*  ([\r\n/]* with slash: o200k) | \s*[\r\n]+ | \s+(?!\S) | \s+
 * Returns the end of the match; pos + 1 when none matches (the code point is a word alone). */
static size_t punct_or_space(const frag *f, size_t pos, bool slash)
{
    const size_t q = cpt(f, pos) == ' ' ? pos + 1 : pos;
    if (is_other(f, q)) {
        pos = q;
        while (is_other(f, pos)) pos++;
        for (uint32_t c; (c = cpt(f, pos)) == '\r' || c == '\n' || (slash && c == '/');) pos++;
        return pos;
    }
    size_t nws = 0, last_rn_end = 0;
    while (is_ws(f, pos + nws)) {
        const uint32_t w = cpt(f, pos + nws);
        if (w == '\r' || w == '\n') last_rn_end = pos + nws + 1;
        nws++;
    }
    if (last_rn_end > 0) return last_rn_end;                             /* \s*[\r\n]+ */
    if (nws > 1 && cpt(f, pos + nws) != OUT_OF_RANGE) return pos + nws - 1; /* \s+(?!\S) */
    return pos + (nws ? nws : 1);                                        /* \s+ */
}

static void split_llama3(frag *f, size_t max_digits)
{
    for (size_t pos = f->ini; pos < f->end;) {
        const uint32_t c = cpt(f, pos);
        const size_t cl = contraction(f, pos, true);
        if (cl) {
            pos += add_word(f, pos + cl);
            continue;
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(c == '\r' || c == '\n' || is_n(f, pos)) && (is_l(f, pos) || is_l(f, pos + 1))) {
            pos++;
            while (is_l(f, pos)) pos++;
            add_word(f, pos);
            continue;
        }
        /* \p{N}{1,D} */
        if (is_n(f, pos)) {
            size_t ini = pos;
            while (is_n(f, pos)) {
                if (++pos - ini >= max_digits) {
                    add_word(f, pos);
                    ini = pos;
                }
            }
            add_word(f, pos);
            continue;
        }
        pos = punct_or_space(f, pos, false);
        add_word(f, pos);
    }
}

/* o200k's U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and W = [\p{Ll}\p{Lm}\p{Lo}\p{M}]: a letter is one
 * of Lu Ll Lt Lm Lo, so U is "a letter but not Ll, or a mark" and W "not Lu/Lt". */
static bool is_upperish(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    if (c == OUT_OF_RANGE) return false;
    return (sl__unicode_is_letter(c) && !sl__unicode_is_lower(c)) || sl__unicode_is_mark(c);
}
static bool is_lowerish(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    if (c == OUT_OF_RANGE) return false;
    return (sl__unicode_is_letter(c) && !sl__unicode_is_upper(c)) || sl__unicode_is_mark(c);
}
/* [^\r\n\p{L}\p{N}]: whitespace other than CR/LF counts, marks too */
static bool is_o200k_lead(const frag *f, size_t pos)
{
    const uint32_t c = cpt(f, pos);
    return c != OUT_OF_RANGE && c != '\r' && c != '\n' && !sl__unicode_is_letter(c) &&
           !sl__unicode_is_number(c);
}

/* The two letter alternatives at pos, in the regex's backtracking order: the optional lead is
 * tried taken first; then U*W+ (U* gives back code points until W+ can start, W+ greedy) or,
 * failing that, U+W*. Returns the end of the match, or pos if neither matches. */
static size_t o200k_letters(const frag *f, size_t pos)
{
    for (int alt = 0; alt < 2; alt++) {
        for (size_t lead = is_o200k_lead(f, pos) ? 1 : 0;; lead--) {
            const size_t b = pos + lead;
            size_t k = 0; /* U* / U+ greedy */
            while (is_upperish(f, b + k)) k++;
            size_t e = b + k; /* where W+ / W* starts */
            bool ok = alt == 1 && k > 0;
            if (alt == 0) {
                for (size_t j = k + 1; !ok && j-- > 0;) {
                    ok = is_lowerish(f, b + j);
                    e = b + j;
                }
            }
            if (ok) {
                while (is_lowerish(f, e)) e++;
                return e + contraction(f, e, true);
            }
            if (lead == 0) break;
        }
    }
    return pos;
}

static void split_o200k(frag *f)
{
    for (size_t pos = f->ini; pos < f->end;) {
        const size_t le = o200k_letters(f, pos);
        if (le > pos) {
            pos = le;
            add_word(f, pos);
            continue;
        }
        if (is_n(f, pos)) { /* \p{N}{1,3} */
            const size_t ini = pos;
            while (is_n(f, pos) && pos - ini < 3) pos++;
            add_word(f, pos);
            continue;
        }
        pos = punct_or_space(f, pos, true);
        add_word(f, pos);
    }
}

/* [\p{P}\$\+<=>\^~\|] as llama.cpp evaluates it: on its "collapsed" text, where a non-ASCII
 * code point that is whitespace never counts as punctuation. */
static bool default_punct(uint32_t c)
{
    if (c < 0x80) return sl__unicode_is_punct(c) || (c && strchr("$+<=>^~|", (int)c));
    return sl__unicode_is_punct(c) && !sl__unicode_is_whitespace(c);
}

/* A [class]+ stage: runs of class members are words, and so are the gaps between them. */
static void split_runs(frag *f, bool (*member)(uint32_t))
{
    size_t pos = f->ini;
    while (pos < f->end) {
        if (!member(f->cps[pos])) {
            pos++;
            continue;
        }
        add_word(f, pos); /* the gap before the run */
        while (pos < f->end && member(f->cps[pos])) pos++;
        add_word(f, pos);
    }
    add_word(f, f->end);
}

static bool number_cp(uint32_t c)
{
    return sl__unicode_is_number(c);
}

/* [0-9][0-9][0-9]: leftmost non-overlapping triples of ASCII digits. */
static void split_digit_triples(frag *f)
{
    size_t pos = f->ini;
    while (pos + 3 <= f->end) {
        const uint32_t *c = f->cps + pos;
        if (c[0] - '0' < 10 && c[1] - '0' < 10 && c[2] - '0' < 10) {
            add_word(f, pos);
            add_word(f, pos + 3);
            pos += 3;
        } else {
            pos++;
        }
    }
    add_word(f, f->end);
}

typedef enum stage {
    ST_GPT2,
    ST_LLAMA3,
    ST_QWEN2,
    ST_O200K,
    ST_PUNCT,
    ST_NUMBERS,
    ST_TRIPLES
} stage;

static void run_stage(stage st, frag *f)
{
    switch (st) {
    case ST_GPT2: split_gpt2(f); break;
    case ST_LLAMA3: split_llama3(f, 3); break;
    case ST_QWEN2: split_llama3(f, 1); break;
    case ST_O200K: split_o200k(f); break;
    case ST_PUNCT: split_runs(f, default_punct); break;
    case ST_NUMBERS: split_runs(f, number_cp); break;
    case ST_TRIPLES: split_digit_triples(f); break;
    }
}

/* A table pre-tokenizer's stage: every match and every gap between matches is a word (Hugging
 * Face's Split with "isolated" behaviour). Returns false when out of memory. */
static bool split_regex(const sl__regex *re, const uint16_t *flags, sl__regex_scratch *sc,
                        frag *f)
{
    size_t ms, me;
    for (size_t pos = f->ini; pos < f->end;) {
        const int r = sl__regex_find(re, f->cps, flags, f->ini, f->end, pos, &ms, &me, sc);
        if (r < 0) return false;
        if (r == 0) break;
        add_word(f, ms);
        add_word(f, me);
        pos = me;
    }
    add_word(f, f->end);
    return true;
}

sl_status sl__pretok_split(const sl__pretok *pt, const uint32_t *cps, size_t n,
                           size_t **out_lens, size_t *n_words, sl_error *err)
{
    static const stage k_default[] = {ST_PUNCT, ST_GPT2, ST_NUMBERS, ST_TRIPLES};
    static const stage k_gpt2[] = {ST_GPT2};
    static const stage k_llama3[] = {ST_LLAMA3};
    static const stage k_qwen2[] = {ST_QWEN2};
    static const stage k_o200k[] = {ST_O200K};
    const stage *stages = NULL;
    size_t n_stages;
    switch (pt->kind) {
    case SL_PRETOK_DEFAULT: stages = k_default; n_stages = 4; break;
    case SL_PRETOK_GPT2: stages = k_gpt2; n_stages = 1; break;
    case SL_PRETOK_LLAMA3: stages = k_llama3; n_stages = 1; break;
    case SL_PRETOK_QWEN2: stages = k_qwen2; n_stages = 1; break;
    case SL_PRETOK_O200K: stages = k_o200k; n_stages = 1; break;
    case SL_PRETOK_REGEX:
        n_stages = pt->n_re;
        if (n_stages == 0 || n_stages > SL__PRETOK_MAX_RE)
            return sl_error_set(err, SL_ERR_INVALID, "pre-tokenizer: %zu regex stages",
                                n_stages);
        break;
    default:
        return sl_error_set(err, SL_ERR_INVALID, "pre-tokenizer %d: not a BPE pre-tokenizer",
                            (int)pt->kind);
    }
    uint16_t *flags = NULL;
    sl__regex_scratch sc = {0};
    lens cur = {0};
    if (!stages) {
        flags = malloc((n ? n : 1) * sizeof *flags);
        if (!flags) cur.oom = true;
        for (size_t i = 0; flags && i < n; i++) flags[i] = sl__unicode_flags(cps[i]);
    }
    push_len(&cur, n);
    for (size_t s = 0; s < n_stages && !cur.oom; s++) {
        lens next = {0};
        size_t start = 0;
        for (size_t i = 0; i < cur.n && !next.oom; i++) {
            frag f = {cps, start, start + cur.v[i], start, &next};
            if (stages) run_stage(stages[s], &f);
            else if (!split_regex(pt->re[s], flags, &sc, &f)) next.oom = true;
            start += cur.v[i];
        }
        free(cur.v);
        cur = next;
    }
    free(flags);
    sl__regex_scratch_free(&sc);
    if (cur.oom) {
        free(cur.v);
        return sl_error_set(err, SL_ERR_NOMEM, "pre-tokenizer: out of memory splitting %zu "
                            "code points", n);
    }
    *out_lens = cur.v;
    *n_words = cur.n;
    return SL_OK;
}
