/* A grammar over a vocabulary (sampler_grammar.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"
#include "runtime/text/sampler_grammar.h"

enum { TOK_TEXT = 0, TOK_EOG = 1, TOK_NEVER = 2 };

/* Invariants: table built <=> bytes != NULL; then token t's piece is bytes[boff[t],
 * boff[t + 1]) and its code points from a clean UTF-8 state cps[coff[t] ..] (0-terminated)
 * ending in cpart[t]. */
struct sl_sgram {
    const sl_vocab *v;
    int32_t n_vocab;
    sl_grammar *g;
    sl_gmatch *m;
    bool ended;                 /* an end-of-generation token was accepted */
    char *piece;                /* one token's piece */
    size_t cap_piece;
    uint32_t *one;              /* its code points */
    size_t cap_one;
    /* the table */
    char *bytes;
    uint32_t *boff, *cps, *coff;
    sl_gpartial *cpart;
    uint8_t *kind;
    uint32_t *dec;              /* scratch: code points decoded from a partial state */
    sl_gcand *cand;
    bool *rejected;
};

sl_status sl__sgram_create(const sl_vocab *v, const char *text, size_t len, sl_sgram **out,
                           sl_error *err)
{
    *out = NULL;
    sl_sgram *g = calloc(1, sizeof *g);
    if (!g) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    g->v = v;
    g->n_vocab = sl_vocab_n_tokens(v);
    sl_status st = sl_grammar_parse(text, len, &g->g, err);
    if (!st) st = sl_gmatch_create(g->g, &g->m, err);
    if (st) {
        sl__sgram_free(g);
        return st;
    }
    *out = g;
    return SL_OK;
}

void sl__sgram_free(sl_sgram *g)
{
    if (!g) return;
    sl_gmatch_free(g->m);
    sl_grammar_free(g->g);
    free(g->piece);
    free(g->one);
    free(g->bytes);
    free(g->boff);
    free(g->cps);
    free(g->coff);
    free(g->cpart);
    free(g->kind);
    free(g->dec);
    free(g->cand);
    free(g->rejected);
    free(g);
}

/* Token t's piece into g->piece; *kind TOK_EOG / TOK_NEVER / TOK_TEXT. */
static sl_status piece_of(sl_sgram *g, int32_t t, size_t *n, int *kind, sl_error *err)
{
    *n = 0;
    if (t < 0 || t >= g->n_vocab)
        return sl_error_set(err, SL_ERR_RANGE, "grammar: token %d is not in [0, %d)", t,
                            g->n_vocab);
    if (sl_vocab_is_eog(g->v, t)) {
        *kind = TOK_EOG;
        return SL_OK;
    }
    for (;;) {
        sl_status st = sl_vocab_token_to_piece(g->v, t, false, g->piece, g->cap_piece, n, err);
        if (!st) break;
        if (st != SL_ERR_RANGE || *n < g->cap_piece) return st;
        char *p = realloc(g->piece, *n + 1);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        g->piece = p;
        g->cap_piece = *n + 1;
    }
    *kind = !*n || memchr(g->piece, 0, *n) ? TOK_NEVER : TOK_TEXT;
    return SL_OK;
}

sl_status sl__sgram_allows(sl_sgram *g, int32_t token, bool *ok, sl_error *err)
{
    *ok = false;
    size_t n;
    int kind;
    sl_status st = piece_of(g, token, &n, &kind, err);
    if (st || kind == TOK_NEVER) return st;
    if (kind == TOK_EOG) {
        *ok = sl_gmatch_can_end(g->m);
        return SL_OK;
    }
    if (n + 1 > g->cap_one) {
        uint32_t *c = realloc(g->one, (n + 1) * sizeof *c);
        if (!c) return sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
        g->one = c;
        g->cap_one = n + 1;
    }
    sl_gcand c = {.index = 0, .cp = g->one, .partial = sl_gmatch_partial(g->m)};
    sl_grammar_decode(g->piece, n, &c.partial, g->one);
    bool rejected = false;
    st = sl_gmatch_reject(g->m, &c, 1, &rejected, err);
    *ok = !st && !rejected;
    return st;
}

/* Every token's piece and code points (the invariants of sl_sgram). */
static sl_status build_table(sl_sgram *g, sl_error *err)
{
    const size_t nv = (size_t)g->n_vocab;
    size_t cap = 16 * nv + 16, used = 0;
    g->bytes = malloc(cap);
    g->boff = malloc((nv + 1) * sizeof *g->boff);
    g->coff = malloc(nv * sizeof *g->coff);
    g->cpart = malloc(nv * sizeof *g->cpart);
    g->kind = malloc(nv);
    g->cand = malloc(nv * sizeof *g->cand);
    g->rejected = malloc(nv * sizeof *g->rejected);
    sl_status st = SL_OK;
    if (!g->bytes || !g->boff || !g->coff || !g->cpart || !g->kind || !g->cand || !g->rejected)
        st = sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory for %zu tokens", nv);
    for (size_t t = 0; t < nv && !st; t++) {
        size_t n;
        int kind;
        if ((st = piece_of(g, (int32_t)t, &n, &kind, err))) break;
        g->kind[t] = (uint8_t)kind;
        if (used + n > cap) {
            while (used + n > cap) cap *= 2;
            char *b = realloc(g->bytes, cap);
            if (!b) {
                st = sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
                break;
            }
            g->bytes = b;
        }
        g->boff[t] = (uint32_t)used;
        if (kind == TOK_TEXT) memcpy(g->bytes + used, g->piece, n);
        used += kind == TOK_TEXT ? n : 0;
    }
    if (!st) {
        g->boff[nv] = (uint32_t)used;
        /* code points: at most one per byte, plus each token's terminator */
        g->cps = malloc((used + nv) * sizeof *g->cps);
        g->dec = malloc((used + nv) * sizeof *g->dec);
        if (!g->cps || !g->dec) st = sl_error_set(err, SL_ERR_NOMEM, "grammar: out of memory");
    }
    size_t k = 0;
    for (size_t t = 0; t < nv && !st; t++) {
        g->coff[t] = (uint32_t)k;
        g->cpart[t] = (sl_gpartial){0, 0, 0};
        k += sl_grammar_decode(g->bytes + g->boff[t], g->boff[t + 1] - g->boff[t], &g->cpart[t],
                               g->cps + k) + 1;
    }
    if (st) {
        free(g->bytes);
        g->bytes = NULL; /* not built */
    }
    return st;
}

sl_status sl__sgram_mask(sl_sgram *g, float *logits, int32_t n_vocab, sl_error *err)
{
    if (n_vocab != g->n_vocab)
        return sl_error_set(err, SL_ERR_INVALID, "grammar: %d logits for a vocabulary of %d "
                            "tokens", n_vocab, g->n_vocab);
    sl_status st = g->bytes ? SL_OK : build_table(g, err);
    if (st) return st;
    const bool can_end = sl_gmatch_can_end(g->m);
    const sl_gpartial partial = sl_gmatch_partial(g->m);
    size_t n = 0, k = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        g->rejected[t] = false;
        if (!(logits[t] > -INFINITY)) continue;
        if (g->kind[t] != TOK_TEXT) {
            if (g->kind[t] == TOK_NEVER || !can_end) logits[t] = -INFINITY;
            continue;
        }
        sl_gcand *c = &g->cand[n++];
        c->index = (uint32_t)t;
        if (!partial.n_remain) {
            c->cp = g->cps + g->coff[t];
            c->partial = g->cpart[t];
        } else { /* the pieces continue a cut sequence: decode them from it */
            c->partial = partial;
            c->cp = g->dec + k;
            k += sl_grammar_decode(g->bytes + g->boff[t], g->boff[t + 1] - g->boff[t],
                                   &c->partial, g->dec + k) + 1;
        }
    }
    st = sl_gmatch_reject(g->m, g->cand, n, g->rejected, err);
    for (size_t i = 0; i < n && !st; i++)
        if (g->rejected[g->cand[i].index]) logits[g->cand[i].index] = -INFINITY;
    return st;
}

sl_status sl__sgram_accept(sl_sgram *g, int32_t token, sl_error *err)
{
    size_t n;
    int kind;
    sl_status st = piece_of(g, token, &n, &kind, err);
    if (st) return st;
    if (kind == TOK_EOG) {
        if (!sl_gmatch_can_end(g->m))
            return sl_error_set(err, SL_ERR_INVALID, "grammar: end of generation (token %d) "
                                "before the grammar is complete", token);
        g->ended = true;
        return SL_OK;
    }
    if (kind == TOK_NEVER)
        return sl_error_set(err, SL_ERR_INVALID, "grammar: token %d has no text", token);
    return sl_gmatch_accept(g->m, g->piece, n, err);
}

bool sl__sgram_done(const sl_sgram *g)
{
    return g->ended || sl_gmatch_done(g->m);
}
