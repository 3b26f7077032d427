/* The step between a slot's logits and the sampler, in llama.cpp's chain order:
 *
 *   logit_bias (additive; -INFINITY bans)  ->  penalties  ->  sl_sampler_sample
 *
 * Penalties are llama_sampler_penalties': each token seen c > 0 times in the window (the last
 * repeat_last_n tokens of prompt + generated text, as llama-server feeds the prompt to its
 * sampler) has its logit divided by repeat_penalty (multiplied when <= 0), then lowered by
 * c * frequency_penalty + presence_penalty. Temperature 0 picks the argmax of the result.
 * Log-probabilities (n_probs, logprobs) are those of the raw logits, as llama-server's
 * default (post_sampling_probs false): log-softmax in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/serve/serve_impl.h"

struct sl_serve_sampling {
    int32_t n_vocab;
    float *work;                /* the logits after bias and penalties */
    int32_t *count;             /* per token, occurrences in the window (zero between calls) */
};

sl_status sl__serve_sampling_create(int32_t n_vocab, sl_serve_sampling **out, sl_error *err)
{
    *out = NULL;
    sl_serve_sampling *ss = calloc(1, sizeof *ss);
    if (ss && n_vocab > 0) {
        ss->n_vocab = n_vocab;
        ss->work = malloc((size_t)n_vocab * sizeof *ss->work);
        ss->count = calloc((size_t)n_vocab, sizeof *ss->count);
    }
    if (!ss || !ss->work || !ss->count) {
        sl__serve_sampling_destroy(ss);
        return sl_error_set(err, SL_ERR_NOMEM, "sampling: out of memory for %d tokens", n_vocab);
    }
    *out = ss;
    return SL_OK;
}

void sl__serve_sampling_destroy(sl_serve_sampling *ss)
{
    if (!ss) return;
    free(ss->work);
    free(ss->count);
    free(ss);
}

static bool penalties_on(const sl_serve_params *p)
{
    return p->repeat_last_n != 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                     p->presence_penalty != 0.0f);
}

bool sl__serve_params_need_logits(const sl_serve_params *p)
{
    return p->n_bias || penalties_on(p) || p->probs;
}

/* alt[0, k): the k largest raw logits as log-probabilities (desc, lowest id first on ties). */
static void top_probs(const float *l, int32_t n, double lse, int32_t k, sl_serve_alt *alt)
{
    int32_t have = 0;
    for (int32_t i = 0; i < n; i++) {
        if (have == k && !(l[i] > alt[k - 1].logprob)) continue;
        int32_t j = have < k ? have++ : k - 1;
        while (j > 0 && l[i] > alt[j - 1].logprob) {
            alt[j] = alt[j - 1];
            j--;
        }
        alt[j] = (sl_serve_alt){.id = i, .logprob = l[i]};
    }
    for (int32_t j = 0; j < have; j++) alt[j].logprob = (float)((double)alt[j].logprob - lse);
    for (int32_t j = have; j < k; j++) alt[j] = (sl_serve_alt){.id = -1, .logprob = -INFINITY};
}

sl_status sl__serve_sample(sl_serve_sampling *ss, sl_sampler *smp, const sl_serve_params *p,
                           const float *logits, const int32_t *hist, size_t n_hist,
                           int32_t *tok, float *logprob, sl_serve_alt *alt, sl_error *err)
{
    const int32_t n = ss->n_vocab;
    float *w = ss->work;
    memcpy(w, logits, (size_t)n * sizeof *w);
    for (size_t i = 0; i < p->n_bias; i++) w[p->bias[i].id] += p->bias[i].bias;
    if (penalties_on(p)) {
        const size_t win = p->repeat_last_n < 0 || (size_t)p->repeat_last_n > n_hist
                               ? n_hist : (size_t)p->repeat_last_n;
        const int32_t *h = hist + (n_hist - win);
        for (size_t i = 0; i < win; i++) ss->count[h[i]]++;
        for (size_t i = 0; i < win; i++) {
            const int32_t c = ss->count[h[i]];
            if (!c) continue; /* already penalised */
            float *x = &w[h[i]];
            *x = *x <= 0 ? *x * p->repeat_penalty : *x / p->repeat_penalty;
            *x -= (float)c * p->frequency_penalty + p->presence_penalty;
            ss->count[h[i]] = 0;
        }
    }
    const sl_status st = sl_sampler_sample(smp, w, n, tok, err);
    if (st || !p->probs) return st;
    double max = -INFINITY, sum = 0;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > max) max = logits[i];
    for (int32_t i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    const double lse = max + log(sum);
    *logprob = (float)((double)logits[*tok] - lse);
    if (p->n_probs > 0) top_probs(logits, n, lse, p->n_probs, alt);
    return SL_OK;
}
