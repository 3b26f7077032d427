/* runtime/rope_cache: see rope_cache.h. */
#include "runtime/engine/rope_cache.h"

#include <stdlib.h>
#include <string.h>

static bool same_f(float a, float b)
{
    return !memcmp(&a, &b, sizeof a); /* the same bits: the same angles */
}

static bool same_params(const sl_rope_params *a, const sl_rope_params *b)
{
    if (a->mode != b->mode || a->n_rot != b->n_rot || a->n_ctx_orig != b->n_ctx_orig ||
        !same_f(a->freq_base, b->freq_base) || !same_f(a->freq_scale, b->freq_scale) ||
        !same_f(a->ext_factor, b->ext_factor) || !same_f(a->attn_factor, b->attn_factor) ||
        !same_f(a->beta_fast, b->beta_fast) || !same_f(a->beta_slow, b->beta_slow) ||
        !a->freq_factors != !b->freq_factors)
        return false;
    return !a->freq_factors ||
           !memcmp(a->freq_factors, b->freq_factors, (size_t)(a->n_rot / 2) * sizeof(float));
}

static bool slot_hit(const sl__rope_slot *s, const sl_rope_params *p, const int32_t *pos,
                     int64_t n_tok)
{
    return s->n_tok == n_tok && same_params(&s->p, p) &&
           !memcmp(s->pos, pos, (size_t)n_tok * sizeof *pos);
}

/* Grows *a (*cap entries of size bytes) to at least n entries; its contents are dropped. */
static sl_status grow(void **a, int64_t *cap, int64_t n, size_t size, sl_error *err)
{
    if (n <= *cap) return SL_OK;
    free(*a);
    *cap = 0;
    if (!(*a = malloc((size_t)n * size)))
        return sl_error_set(err, SL_ERR_NOMEM, "rope tables: no memory for %lld entries",
                            (long long)n);
    *cap = n;
    return SL_OK;
}

sl_status sl__rope_cache_get(sl__rope_cache *c, const sl_rope_params *p, const int32_t *pos,
                             int64_t n_tok, const float **cs, sl_error *err)
{
    *cs = NULL;
    if (!pos || n_tok < 1)
        return sl_error_set(err, SL_ERR_INVALID, "rope tables: pos %s, n_tok = %lld (>= 1)",
                            pos ? "set" : "NULL", (long long)n_tok);
    sl_status st = sl_cpu_rope_table(p, 0, pos, NULL, err); /* no tokens: p's checks only */
    if (st) return st;
    sl__rope_slot *s = &c->slot[0];
    for (int i = 0; i < SL__ROPE_CACHE_SLOTS; i++) {
        sl__rope_slot *t = &c->slot[i];
        if (t->n_tok && slot_hit(t, p, pos, n_tok)) {
            t->used = ++c->clock;
            *cs = t->cs;
            return SL_OK;
        }
        if (t->used < s->used) s = t;
    }
    s->n_tok = 0; /* empty until it holds the new table */
    if ((st = grow((void **)&s->pos, &s->pos_cap, n_tok, sizeof *s->pos, err)) ||
        (st = grow((void **)&s->cs, &s->cs_cap, n_tok * 2 * p->n_rot, sizeof *s->cs, err)) ||
        (st = sl_cpu_rope_table(p, n_tok, pos, s->cs, err)))
        return st;
    s->p = *p;
    if (p->freq_factors) {
        memcpy(s->ff, p->freq_factors, (size_t)(p->n_rot / 2) * sizeof *s->ff);
        s->p.freq_factors = s->ff;
    }
    memcpy(s->pos, pos, (size_t)n_tok * sizeof *pos);
    s->n_tok = n_tok;
    s->used = ++c->clock;
    *cs = s->cs;
    return SL_OK;
}

void sl__rope_cache_free(sl__rope_cache *c)
{
    for (int i = 0; i < SL__ROPE_CACHE_SLOTS; i++) {
        free(c->slot[i].pos);
        free(c->slot[i].cs);
    }
    memset(c, 0, sizeof *c);
}

sl_status sl__rope_cache_validate(const sl__rope_cache *c, sl_error *err)
{
    for (int i = 0; i < SL__ROPE_CACHE_SLOTS; i++) {
        const sl__rope_slot *s = &c->slot[i];
        if (s->used > c->clock)
            return sl_error_set(err, SL_ERR_INVALID, "rope tables: slot %d used at %llu, after "
                                "the clock %llu", i, (unsigned long long)s->used,
                                (unsigned long long)c->clock);
        if (!s->n_tok) continue;
        sl_status st = sl_cpu_rope_table(&s->p, 0, s->pos, NULL, err);
        if (st) return st;
        if (s->n_tok > s->pos_cap || s->n_tok * 2 * s->p.n_rot > s->cs_cap || !s->pos || !s->cs)
            return sl_error_set(err, SL_ERR_INVALID, "rope tables: slot %d holds %lld positions "
                                "of n_rot %d in %lld positions, %lld floats", i,
                                (long long)s->n_tok, s->p.n_rot, (long long)s->pos_cap,
                                (long long)s->cs_cap);
        if (s->p.freq_factors && s->p.freq_factors != s->ff)
            return sl_error_set(err, SL_ERR_INVALID, "rope tables: slot %d's freq_factors are "
                                "not its own copy", i);
    }
    return SL_OK;
}
