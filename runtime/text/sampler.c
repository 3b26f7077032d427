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
 * Invariant: after each filter, cand[0, n) is sorted as above and n >= 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ops.h"
#include "base/prng.h"
#include "runtime/sluice.h"
#include "runtime/struct_size.h"

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

sl_status sl_sampler_sample(sl_sampler *s, const float *logits, int32_t n_vocab, int32_t *token,
                            sl_error *err)
{
    if (!s || !logits || !token)
        return sl_error_set(err, SL_ERR_INVALID, "sl_sampler_sample: NULL %s",
                            !s ? "sampler" : !logits ? "logits" : "token");
    if (n_vocab <= 0)
        return sl_error_set(err, SL_ERR_INVALID, "sampler: n_vocab %d must be positive", n_vocab);
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
    return s && s->opt.temp <= 0.0f;
}
