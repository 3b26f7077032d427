/* Token sampler (sluice.h sl_sampler_*): llama.cpp's default chain without penalties:
 *
 *   temp <= 0: greedy (argmax, lowest id on ties, as llama_sampler_greedy).
 *   else:      top-k -> top-p -> min-p -> temperature -> softmax -> draw
 *
 * top-p and min-p therefore see the untempered distribution (temperature comes after them in
 * llama.cpp's chain, so it only reshapes the survivors). Candidates are sorted by
 * (logit desc, id asc), which makes every cut deterministic where llama.cpp's partial sorts
 * leave ties in unspecified order. Draws use xoshiro256** seeded through splitmix64 from
 * opt.seed: the same seed and the same logits give the same tokens on every machine.
 * Invariant: after each filter, cand[0, n) is sorted as above and n >= 1.
 *
 * With a grammar (sl_sampler_set_grammar) the pick is llama.cpp's common_sampler_sample: the
 * chain above picks from the raw logits; when the grammar allows that token it is taken,
 * otherwise the chain picks again from the logits masked by the grammar. A greedy pick is thus
 * the argmax of the masked logits. Masking is lazy twice over: greedy and top-k need only the k
 * best allowed tokens, found by checking the best-ranked ones one by one (pick_top); only
 * top-k off, or no allowed token among the 8k best, masks the whole vocabulary. The grammar
 * then advances by the token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ops.h"
#include "base/prng.h"
#include "runtime/sluice.h"
#include "runtime/struct_size.h"
#include "runtime/text/sampler_grammar.h"

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct sl_sampler {
    sl_sampler_options opt;
    uint64_t rng[4]; /* xoshiro256** state, never all zero */
    cand *cand;      /* scratch, cap entries */
    double *p;       /* scratch, cap entries */
    size_t cap;
    sl_sgram *gram;  /* NULL: no grammar */
    float *masked;   /* n_masked logits: the row with the grammar's mask */
    size_t n_masked;
    cand *top;       /* cap_top entries: the best-ranked tokens of a row (grammar fast path) */
    size_t cap_top;
};

sl_sampler_options sl_sampler_options_default(void)
{
    /* llama.cpp's common defaults; a fixed seed so that runs repeat unless asked otherwise */
    return (sl_sampler_options){.struct_size = sizeof(sl_sampler_options), .temp = 0.8f,
                                .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 0};
}

/* uniform in [0, 1) with 53 random bits */
static double uniform01(uint64_t s[4])
{
    return (double)(sl_prng_next(s) >> 11) * 0x1.0p-53;
}

/* sluice.h's SL_RANGE_* are the rule; front ends check their flags against the same. */
static sl_status validate(const sl_sampler_options *o, sl_error *err)
{
    sl_status st = sl_check_f64("sampler: temp", o->temp, SL_RANGE_TEMP, err);
    if (!st) st = sl_check_i64("sampler: top_k", o->top_k, SL_RANGE_TOP_K, err);
    if (!st) st = sl_check_f64("sampler: top_p", o->top_p, SL_RANGE_TOP_P, err);
    if (!st) st = sl_check_f64("sampler: min_p", o->min_p, SL_RANGE_MIN_P, err);
    return st;
}

sl_status sl_sampler_create(const sl_sampler_options *opt, sl_sampler **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_sampler_create: out is NULL");
    *out = NULL;
    sl_status st;
    if (opt && (st = sl__struct_size_check("sl_sampler_options", opt->struct_size, sizeof *opt,
                                           err)))
        return st;
    const sl_sampler_options o = opt ? *opt : sl_sampler_options_default();
    st = validate(&o, err);
    if (st != SL_OK) return st;
    sl_sampler *s = calloc(1, sizeof *s);
    if (!s) return sl_error_set(err, SL_ERR_NOMEM, "sampler: out of memory");
    s->opt = o;
    sl_prng_seed(s->rng, o.seed);
    *out = s;
    return SL_OK;
}

void sl_sampler_destroy(sl_sampler *s)
{
    if (!s) return;
    sl__sgram_free(s->gram);
    free(s->masked);
    free(s->top);
    free(s->cand);
    free(s->p);
    free(s);
}

static int cmp_cand(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* p[i] = softmax(cand[i].logit / temp) over cand[0, n), in double. */
static void softmax(const cand *c, size_t n, double temp, double *p)
{
    const double max = c[0].logit / temp; /* sorted: the first is the largest */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += p[i] = exp(c[i].logit / temp - max);
    for (size_t i = 0; i < n; i++) p[i] /= sum;
}

/* The chain over one row (no grammar). */
static sl_status sample_row(sl_sampler *s, const float *logits, int32_t n_vocab, int32_t *token,
                            sl_error *err)
{
    /* the greedy pick also validates the row for the other modes */
    sl_argmax_result am;
    int32_t best;
    sl_status st = sl_ref_argmax(logits, n_vocab, &am, err);
    if (!st) st = sl_ref_argmax_token(&am, n_vocab, &best, err);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "sampler: %s", why);
    }
    const sl_sampler_options *o = &s->opt;
    if (o->temp <= 0.0f) {
        *token = best;
        return SL_OK;
    }
    const size_t n_all = (size_t)n_vocab;
    if (s->cap < n_all) {
        cand *c = realloc(s->cand, n_all * sizeof *c);
        if (c) s->cand = c;
        double *p = realloc(s->p, n_all * sizeof *p);
        if (p) s->p = p;
        if (!c || !p) return sl_error_set(err, SL_ERR_NOMEM, "sampler: out of memory for %d "
                                          "candidates", n_vocab);
        s->cap = n_all;
    }
    cand *c = s->cand;
    double *p = s->p;
    size_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > -INFINITY) c[n++] = (cand){logits[i], i};
    qsort(c, n, sizeof *c, cmp_cand);

    if (o->top_k > 0 && (size_t)o->top_k < n) n = (size_t)o->top_k;
    if (o->top_p < 1.0f) { /* smallest prefix with cumulative probability >= top_p */
        softmax(c, n, 1.0, p);
        double cum = 0.0;
        for (size_t i = 0; i < n; i++) {
            cum += p[i];
            if (cum >= o->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (o->min_p > 0.0f) { /* p_i >= min_p * p_max, i.e. logit_i >= logit_max + ln(min_p) */
        const float min_logit = c[0].logit + logf(o->min_p);
        size_t keep = 1;
        while (keep < n && c[keep].logit >= min_logit) keep++;
        n = keep;
    }
    softmax(c, n, (double)o->temp, p);
    const double u = uniform01(s->rng);
    double cum = 0.0;
    size_t pick = n - 1; /* rounding may leave cum a hair below 1: the last one takes it */
    for (size_t i = 0; i < n; i++) {
        cum += p[i];
        if (u < cum) {
            pick = i;
            break;
        }
    }
    *token = c[pick].id;
    return SL_OK;
}

/* Whether a ranks before b in cmp_cand's order. */
static bool before(cand a, cand b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

/* The m best-ranked finite logits of the row, in cmp_cand's order, into out; the count. A heap
 * whose root ranks last keeps the best m seen: O(n log m). */
static size_t top_m(const float *l, int32_t n, cand *out, size_t m)
{
    size_t h = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!(l[i] > -INFINITY)) continue;
        const cand c = {l[i], i};
        size_t j;
        if (h < m) {
            out[j = h++] = c;
            while (j && before(out[(j - 1) / 2], out[j])) {
                const cand t = out[j];
                out[j] = out[(j - 1) / 2];
                out[j = (j - 1) / 2] = t;
            }
        } else if (before(c, out[0])) {
            out[j = 0] = c;
            for (;;) {
                size_t w = j;
                const size_t a = 2 * j + 1, b = a + 1;
                if (a < h && before(out[w], out[a])) w = a;
                if (b < h && before(out[w], out[b])) w = b;
                if (w == j) break;
                const cand t = out[j];
                out[j] = out[w];
                out[j = w] = t;
            }
        }
    }
    qsort(out, h, sizeof *out, cmp_cand);
    return h;
}

static sl_status ensure_masked(sl_sampler *s, int32_t n_vocab, sl_error *err)
{
    if (s->n_masked >= (size_t)n_vocab) return SL_OK;
    float *m = realloc(s->masked, (size_t)n_vocab * sizeof *m);
    if (!m) return sl_error_set(err, SL_ERR_NOMEM, "sampler: out of memory");
    s->masked = m;
    s->n_masked = (size_t)n_vocab;
    return SL_OK;
}

/* The grammar's pick when the chain's first pick was rejected, without masking the whole
 * vocabulary when the chain keeps only the k best tokens (greedy: 1; top-k): the first k
 * allowed tokens among the best-ranked are exactly the k best of the masked row, so the chain
 * runs on them alone. *done false: the caller masks the whole row. */
static sl_status pick_top(sl_sampler *s, const float *logits, int32_t n_vocab, int32_t *tok,
                          bool *done, sl_error *err)
{
    *done = false;
    const bool greedy = s->opt.temp <= 0.0f;
    const size_t k = greedy ? 1 : s->opt.top_k > 0 ? (size_t)s->opt.top_k : 0;
    if (!k || k > 256) return SL_OK;
    const size_t m = (size_t)n_vocab < (k * 8 > 64 ? k * 8 : 64) ? (size_t)n_vocab
                     : (k * 8 > 64 ? k * 8 : 64);
    if (s->cap_top < m) {
        cand *t = realloc(s->top, m * sizeof *t);
        if (!t) return sl_error_set(err, SL_ERR_NOMEM, "sampler: out of memory");
        s->top = t;
        s->cap_top = m;
    }
    const size_t h = top_m(logits, n_vocab, s->top, m);
    size_t found = 0;
    sl_status st = SL_OK;
    for (size_t i = 0; i < h && found < k && !st; i++) {
        bool ok = false;
        st = sl__sgram_allows(s->gram, s->top[i].id, &ok, err);
        if (ok) s->top[found++] = s->top[i];
    }
    /* h < m: every finite logit was looked at, so what was found is all there is */
    if (st || !(found == k || (h < m && found))) return st;
    *done = true;
    if (greedy) {
        *tok = s->top[0].id;
        return SL_OK;
    }
    if ((st = ensure_masked(s, n_vocab, err))) return st;
    for (int32_t i = 0; i < n_vocab; i++) s->masked[i] = -INFINITY;
    for (size_t i = 0; i < found; i++) s->masked[s->top[i].id] = s->top[i].logit;
    return sample_row(s, s->masked, n_vocab, tok, err);
}

sl_status sl_sampler_sample(sl_sampler *s, const float *logits, int32_t n_vocab, int32_t *token,
                            sl_error *err)
{
    if (!s || !logits || !token)
        return sl_error_set(err, SL_ERR_INVALID, "sl_sampler_sample: NULL %s",
                            !s ? "sampler" : !logits ? "logits" : "token");
    if (n_vocab <= 0)
        return sl_error_set(err, SL_ERR_INVALID, "sampler: n_vocab %d must be positive", n_vocab);
    if (!s->gram) return sample_row(s, logits, n_vocab, token, err);
    int32_t tok;
    bool ok = false;
    sl_status st = sample_row(s, logits, n_vocab, &tok, err);
    if (!st) st = sl__sgram_allows(s->gram, tok, &ok, err);
    if (!st && !ok) st = pick_top(s, logits, n_vocab, &tok, &ok, err);
    if (!st && !ok) { /* the lazy checks failed: mask the whole row and pick again */
        st = ensure_masked(s, n_vocab, err);
        if (!st) memcpy(s->masked, logits, (size_t)n_vocab * sizeof *logits);
        if (!st) st = sl__sgram_mask(s->gram, s->masked, n_vocab, err);
        bool any = false;
        for (int32_t i = 0; !st && i < n_vocab && !any; i++) any = s->masked[i] > -INFINITY;
        if (!st && !any)
            return sl_error_set(err, SL_ERR_INVALID, "sampler: no token can continue the grammar "
                                "here (all allowed tokens have -inf logits or none exists)");
        if (!st) st = sample_row(s, s->masked, n_vocab, &tok, err);
    }
    if (!st) st = sl__sgram_accept(s->gram, tok, err);
    if (!st) *token = tok;
    return st;
}

sl_status sl__sampler_grammar_set(sl_sampler *s, const sl_vocab *v, const char *text,
                                  sl_error *err)
{
    sl_sgram *g = NULL;
    if (text && *text) {
        const sl_status st = sl__sgram_create(v, text, strlen(text), &g, err);
        if (st) return st;
    }
    sl__sgram_free(s->gram);
    s->gram = g;
    return SL_OK;
}

bool sl_sampler_grammar_done(const sl_sampler *s)
{
    return s && s->gram && sl__sgram_done(s->gram);
}

sl_status sl_logits_argmax(const float *logits, int32_t n_vocab, int32_t *token, sl_error *err)
{
    if (!logits || !token)
        return sl_error_set(err, SL_ERR_INVALID, "sl_logits_argmax: NULL %s",
                            !logits ? "logits" : "token");
    if (n_vocab <= 0)
        return sl_error_set(err, SL_ERR_INVALID, "sl_logits_argmax: n_vocab %d must be positive",
                            n_vocab);
    sl_argmax_result am;
    sl_status st = sl_ref_argmax(logits, n_vocab, &am, err);
    return st ? st : sl_ref_argmax_token(&am, n_vocab, token, err);
}

bool sl_sampler_is_greedy(const sl_sampler *s)
{
    return s && s->opt.temp <= 0.0f && !s->gram; /* a grammar needs the whole row */
}
