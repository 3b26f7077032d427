/* Scalar reference ops. See ops.h for the contracts.
 *
 * Why double everywhere: these functions are the oracle. A float reduction over 4096+ terms
 * carries ~1e-6 relative error of its own, the same order as the tolerance we want to hold the
 * SIMD kernels to; in double the oracle's error is ~1e-15 and rounding the result to float once
 * is the only float rounding left. The one place we deliberately follow ggml's float arithmetic
 * is the YaRN correction range (integers from floor/ceil, see sl_ref_rope_corr_dims).
 */
#include "kernels/ref/ops.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/half.h"

#define CHECK_PTR(p, name, n)                                                                 \
    do {                                                                                      \
        if ((n) > 0 && !(p))                                                                  \
            return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__, name);        \
    } while (0)

static sl_status check_n(int64_t n, const char *fn, sl_error *err)
{
    if (n < 0) return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld < 0", fn, (long long)n);
    return SL_OK;
}

/* ---- norms ------------------------------------------------------------------------------ */

sl_status sl_ref_rms_norm(const float *x, const float *w, float *y, int64_t n, float eps,
                          bool one_plus_w, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    CHECK_PTR(y, "y", n);
    if (!(eps >= 0.0f) || !isfinite(eps))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0",
                            __func__, (double)eps);
    if (n == 0) return SL_OK;
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const double r = 1.0 / sqrt(ss / (double)n + (double)eps);
    for (int64_t i = 0; i < n; i++) {
        double g = 1.0;
        if (w) g = one_plus_w ? 1.0 + (double)w[i] : (double)w[i];
        y[i] = (float)((double)x[i] * r * g);
    }
    return SL_OK;
}

sl_status sl_ref_layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n,
                            float eps, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    CHECK_PTR(y, "y", n);
    if (!(eps >= 0.0f) || !isfinite(eps))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0",
                            __func__, (double)eps);
    if (n == 0) return SL_OK;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    const double mean = sum / (double)n;
    double var = 0.0;
    for (int64_t i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= (double)n;
    const double r = 1.0 / sqrt(var + (double)eps);
    for (int64_t i = 0; i < n; i++) {
        double v = ((double)x[i] - mean) * r;
        if (w) v *= (double)w[i];
        if (b) v += (double)b[i];
        y[i] = (float)v;
    }
    return SL_OK;
}

/* ---- rope ------------------------------------------------------------------------------- */

sl_rope_params sl_rope_params_make(sl_rope_mode mode, int32_t n_rot, float freq_base)
{
    return (sl_rope_params){
        .mode = mode,
        .n_rot = n_rot,
        .freq_base = freq_base,
        .freq_scale = 1.0f,
        .ext_factor = 0.0f,
        .attn_factor = 1.0f,
        .beta_fast = 32.0f,
        .beta_slow = 1.0f,
        .n_ctx_orig = 0,
        .freq_factors = NULL,
    };
}

sl_status sl_ref_rope_validate(const sl_rope_params *p, int32_t head_dim, sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "rope: params is NULL");
    if (p->mode != SL_ROPE_NORMAL && p->mode != SL_ROPE_NEOX)
        return sl_error_set(err, SL_ERR_INVALID, "rope: mode = %d is not NORMAL (0) or NEOX (2)",
                            (int)p->mode);
    if (head_dim < 2)
        return sl_error_set(err, SL_ERR_INVALID, "rope: head_dim = %d < 2", head_dim);
    if (p->n_rot < 2 || p->n_rot % 2 || p->n_rot > head_dim)
        return sl_error_set(err, SL_ERR_INVALID,
                            "rope: n_rot = %d must be even, >= 2 and <= head_dim = %d", p->n_rot,
                            head_dim);
    if (!(p->freq_base > 0.0f) || !isfinite(p->freq_base) || p->freq_base == 1.0f)
        return sl_error_set(err, SL_ERR_INVALID, "rope: freq_base = %g must be finite, > 0, != 1",
                            (double)p->freq_base);
    if (!(p->freq_scale > 0.0f) || !isfinite(p->freq_scale))
        return sl_error_set(err, SL_ERR_INVALID, "rope: freq_scale = %g must be finite and > 0",
                            (double)p->freq_scale);
    if (!(p->ext_factor >= 0.0f) || !isfinite(p->ext_factor))
        return sl_error_set(err, SL_ERR_INVALID, "rope: ext_factor = %g must be finite and >= 0",
                            (double)p->ext_factor);
    if (!(p->attn_factor > 0.0f) || !isfinite(p->attn_factor))
        return sl_error_set(err, SL_ERR_INVALID, "rope: attn_factor = %g must be finite and > 0",
                            (double)p->attn_factor);
    if (p->ext_factor != 0.0f) {
        if (p->n_ctx_orig <= 0)
            return sl_error_set(err, SL_ERR_INVALID,
                                "rope: n_ctx_orig = %d must be > 0 when ext_factor = %g (YaRN)",
                                p->n_ctx_orig, (double)p->ext_factor);
        if (!(p->beta_fast > 0.0f) || !(p->beta_slow > 0.0f) || !isfinite(p->beta_fast) ||
            !isfinite(p->beta_slow))
            return sl_error_set(err, SL_ERR_INVALID,
                                "rope: beta_fast = %g, beta_slow = %g must be finite and > 0",
                                (double)p->beta_fast, (double)p->beta_slow);
    }
    if (p->freq_factors) {
        for (int32_t i = 0; i < p->n_rot / 2; i++)
            if (!(p->freq_factors[i] > 0.0f) || !isfinite(p->freq_factors[i]))
                return sl_error_set(err, SL_ERR_INVALID,
                                    "rope: freq_factors[%d] = %g must be finite and > 0", i,
                                    (double)p->freq_factors[i]);
    }
    return SL_OK;
}

/* ggml_rope_yarn_corr_dim, in float on purpose (see ops.h). */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

void sl_ref_rope_corr_dims(const sl_rope_params *p, float dims[2])
{
    if (p->ext_factor == 0.0f) { /* unused without YaRN; keep them defined */
        dims[0] = 0.0f;
        dims[1] = 0.0f;
        return;
    }
    const float start = floorf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_fast, p->freq_base));
    const float end = ceilf(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_slow, p->freq_base));
    dims[0] = fmaxf(0.0f, start);
    dims[1] = fminf((float)(p->n_rot - 1), end);
}

double sl_ref_rope_pow(const sl_rope_params *p, int32_t i)
{
    return pow((double)p->freq_base, -2.0 * i / (double)p->n_rot);
}

void sl_ref_rope_cos_sin(const sl_rope_params *p, const float corr[2], int32_t pos, int32_t i,
                         double *cos_out, double *sin_out)
{
    sl_ref_rope_cos_sin_pow(p, corr, pos, i, sl_ref_rope_pow(p, i), cos_out, sin_out);
}

void sl_ref_rope_cos_sin_pow(const sl_rope_params *p, const float corr[2], int32_t pos,
                             int32_t i, double pw, double *cos_out, double *sin_out)
{
    double theta_extrap = (double)pos * pw;
    if (p->freq_factors) theta_extrap /= (double)p->freq_factors[i];
    const double theta_interp = (double)p->freq_scale * theta_extrap;
    double theta = theta_interp;
    double mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) {
        /* rope_yarn_ramp(low, high, i0) with i0 / 2 == i */
        const double y = ((double)i - corr[0]) / fmax(0.001, (double)corr[1] - corr[0]);
        const double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
        const double mix = ramp * (double)p->ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / (double)p->freq_scale);
    }
    *cos_out = cos(theta) * mscale;
    *sin_out = sin(theta) * mscale;
}

sl_status sl_ref_rope(float *x, int64_t n_tokens, int32_t n_head, int32_t head_dim,
                      const int32_t *pos, const sl_rope_params *p, sl_error *err)
{
    if (n_tokens < 0 || n_head < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tokens = %lld, n_head = %d must be >= 0",
                            __func__, (long long)n_tokens, n_head);
    sl_status st = sl_ref_rope_validate(p, head_dim, err);
    if (st) return st;
    if (n_tokens == 0 || n_head == 0) return SL_OK;
    CHECK_PTR(x, "x", 1);
    CHECK_PTR(pos, "pos", 1);
    float corr[2];
    sl_ref_rope_corr_dims(p, corr);
    const int32_t half = p->n_rot / 2;
    for (int64_t t = 0; t < n_tokens; t++) {
        for (int32_t i = 0; i < half; i++) {
            double c, s;
            sl_ref_rope_cos_sin(p, corr, pos[t], i, &c, &s);
            /* NORMAL pairs adjacent elements; NEOX pairs the two halves of the rotated part */
            const int32_t a = p->mode == SL_ROPE_NEOX ? i : 2 * i;
            const int32_t b = p->mode == SL_ROPE_NEOX ? i + half : 2 * i + 1;
            for (int32_t h = 0; h < n_head; h++) {
                float *row = x + ((size_t)t * (size_t)n_head + (size_t)h) * (size_t)head_dim;
                const double x0 = row[a], x1 = row[b];
                row[a] = (float)(x0 * c - x1 * s);
                row[b] = (float)(x0 * s + x1 * c);
            }
        }
    }
    return SL_OK;
}

/* ---- softmax and activations ---------------------------------------------------------- */

sl_status sl_ref_softmax(float *x, int64_t n, float scale, const float *mask, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    if (!isfinite(scale))
        return sl_error_set(err, SL_ERR_INVALID, "%s: scale = %g is not finite", __func__,
                            (double)scale);
    if (n == 0) return SL_OK;
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const double v = (double)x[i] * scale + (mask ? (double)mask[i] : 0.0);
        if (v > mx) mx = v;
    }
    if (mx == -INFINITY) { /* fully masked row: defined as zeros (see ops.h) */
        for (int64_t i = 0; i < n; i++) x[i] = 0.0f;
        return SL_OK;
    }
    /* two passes recomputing v, so no scratch and the float input is read, not overwritten,
     * until the sum is known */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += exp((double)x[i] * scale + (mask ? (double)mask[i] : 0.0) - mx);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(exp((double)x[i] * scale + (mask ? (double)mask[i] : 0.0) - mx) / sum);
    return SL_OK;
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

static double gelu_d(double x, sl_gelu_kind kind)
{
    if (kind == SL_GELU_ERF) return 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
    /* ggml: SQRT_2_OVER_PI = 0.7978845608..., GELU_COEF_A = 0.044715 */
    const double sqrt_2_over_pi = 0.79788456080286535587989211986876;
    return 0.5 * x * (1.0 + tanh(sqrt_2_over_pi * x * (1.0 + 0.044715 * x * x)));
}

static sl_status check_gelu_kind(sl_gelu_kind kind, const char *fn, sl_error *err)
{
    if (kind != SL_GELU_TANH && kind != SL_GELU_ERF)
        return sl_error_set(err, SL_ERR_INVALID, "%s: kind = %d is not TANH (0) or ERF (1)", fn,
                            (int)kind);
    return SL_OK;
}

sl_status sl_ref_silu(const float *x, float *y, int64_t n, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    CHECK_PTR(y, "y", n);
    for (int64_t i = 0; i < n; i++) y[i] = (float)silu_d(x[i]);
    return SL_OK;
}

sl_status sl_ref_gelu(const float *x, float *y, int64_t n, sl_gelu_kind kind, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    if (check_gelu_kind(kind, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    CHECK_PTR(y, "y", n);
    for (int64_t i = 0; i < n; i++) y[i] = (float)gelu_d(x[i], kind);
    return SL_OK;
}

sl_status sl_ref_swiglu(const float *gate, const float *up, float *out, int64_t n,
                        sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(gate, "gate", n);
    CHECK_PTR(up, "up", n);
    CHECK_PTR(out, "out", n);
    for (int64_t i = 0; i < n; i++) out[i] = (float)(silu_d(gate[i]) * (double)up[i]);
    return SL_OK;
}

sl_status sl_ref_swiglu_oai(const float *gate, const float *up, float *out, int64_t n,
                            float alpha, float limit, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(gate, "gate", n);
    CHECK_PTR(up, "up", n);
    CHECK_PTR(out, "out", n);
    for (int64_t i = 0; i < n; i++) {
        const double g = fmin((double)gate[i], (double)limit);
        const double u = fmax(fmin((double)up[i], (double)limit), -(double)limit);
        out[i] = (float)(g / (1.0 + exp(-(double)alpha * g)) * (u + 1.0));
    }
    return SL_OK;
}

sl_status sl_ref_geglu(const float *gate, const float *up, float *out, int64_t n,
                       sl_gelu_kind kind, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    if (check_gelu_kind(kind, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(gate, "gate", n);
    CHECK_PTR(up, "up", n);
    CHECK_PTR(out, "out", n);
    for (int64_t i = 0; i < n; i++) out[i] = (float)(gelu_d(gate[i], kind) * (double)up[i]);
    return SL_OK;
}

/* ---- elementwise ------------------------------------------------------------------------ */

sl_status sl_ref_add(const float *a, const float *b, float *y, int64_t n, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(a, "a", n);
    CHECK_PTR(b, "b", n);
    CHECK_PTR(y, "y", n);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i]; /* one rounding: already exact */
    return SL_OK;
}

sl_status sl_ref_mul(const float *a, const float *b, float *y, int64_t n, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(a, "a", n);
    CHECK_PTR(b, "b", n);
    CHECK_PTR(y, "y", n);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
    return SL_OK;
}

sl_status sl_ref_scale(float *x, int64_t n, float s, sl_error *err)
{
    if (check_n(n, __func__, err)) return SL_ERR_INVALID;
    CHECK_PTR(x, "x", n);
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return SL_OK;
}

/* ---- greedy pick ------------------------------------------------------------------------ */

sl_status sl_ref_argmax(const float *x, int64_t n, sl_argmax_result *r, sl_error *err)
{
    if (!r) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL result", __func__);
    if (n < 0 || n > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n %lld outside [0, 2^31)", __func__,
                            (long long)n);
    CHECK_PTR(x, "x", n);
    *r = (sl_argmax_result){.best = -1, .bad = -1};
    for (int32_t i = 0; i < (int32_t)n; i++) {
        const float v = x[i];
        if (isnan(v) || v == INFINITY) {
            if (r->bad < 0) {
                r->bad = i;
                memcpy(&r->bad_bits, &v, sizeof v);
            }
        } else if (v > -INFINITY && (r->best < 0 || v > x[r->best])) {
            r->best = i;
        }
    }
    return SL_OK;
}

sl_status sl_ref_argmax_token(const sl_argmax_result *r, int64_t n, int32_t *token,
                              sl_error *err)
{
    if (!r || !token) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL argument", __func__);
    if (r->bad >= 0) {
        float v;
        memcpy(&v, &r->bad_bits, sizeof v);
        return sl_error_set(err, SL_ERR_INVALID, "logits[%d] = %g (NaN and +inf are refused; "
                            "-inf masks a token)", r->bad, (double)v);
    }
    if (r->best < 0 || r->best >= n)
        return sl_error_set(err, SL_ERR_INVALID, "all %lld logits are -inf", (long long)n);
    *token = r->best;
    return SL_OK;
}

/* ---- router ----------------------------------------------------------------------------- */

/* Selection order: higher score first, equal scores by lower index. A strict weak order, so
 * the k selected are a deterministic function of the scores. */
static bool ranks_before(const double *score, int32_t a, int32_t b)
{
    return score[a] > score[b] || (score[a] == score[b] && a < b);
}

void sl__router_probs(const float *logits, const sl_router_params *p, double *prob)
{
    const int32_t E = p->n_expert;
    if (p->gating == SL_GATING_SOFTMAX_TOPK) {
        double mx = -INFINITY, sum = 0.0;
        for (int32_t e = 0; e < E; e++) mx = fmax(mx, (double)logits[e]);
        for (int32_t e = 0; e < E; e++) sum += (prob[e] = exp((double)logits[e] - mx));
        for (int32_t e = 0; e < E; e++) prob[e] /= sum;
    } else if (p->gating == SL_GATING_SIGMOID) {
        for (int32_t e = 0; e < E; e++) prob[e] = 1.0 / (1.0 + exp(-(double)logits[e]));
    } else {
        for (int32_t e = 0; e < E; e++) prob[e] = logits[e];
    }
}

void sl__router_weights(const double *prob, const int32_t *idx, const sl_router_params *p,
                        float *w)
{
    const int32_t k = p->k;
    double wsum = 0.0;
    if (p->gating == SL_GATING_TOPK_SOFTMAX) {
        /* softmax over the k selected logits; their maximum is not idx[0]'s when a bias
         * reordered the selection */
        double mx = -INFINITY;
        for (int32_t j = 0; j < k; j++) mx = fmax(mx, prob[idx[j]]);
        for (int32_t j = 0; j < k; j++) wsum += exp(prob[idx[j]] - mx);
        for (int32_t j = 0; j < k; j++)
            w[j] = (float)(exp(prob[idx[j]] - mx) / wsum * (double)p->weight_scale);
    } else {
        for (int32_t j = 0; j < k; j++) wsum += prob[idx[j]];
        const double div = p->norm_topk && wsum > 0.0 ? wsum : 1.0;
        for (int32_t j = 0; j < k; j++)
            w[j] = (float)(prob[idx[j]] / div * (double)p->weight_scale);
    }
}

sl_status sl_ref_router_topk(const float *logits, const sl_router_params *p, int32_t *idx,
                             float *w, sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "%s: params is NULL", __func__);
    const int32_t E = p->n_expert, k = p->k;
    if (E < 1) return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d < 1", __func__, E);
    if (k < 1 || k > E)
        return sl_error_set(err, SL_ERR_INVALID, "%s: k = %d not in [1, n_expert = %d]",
                            __func__, k, E);
    if (p->gating != SL_GATING_SOFTMAX_TOPK && p->gating != SL_GATING_SIGMOID &&
        p->gating != SL_GATING_TOPK_SOFTMAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: gating = %d unknown", __func__,
                            (int)p->gating);
    if (!isfinite(p->weight_scale))
        return sl_error_set(err, SL_ERR_INVALID, "%s: weight_scale = %g is not finite", __func__,
                            (double)p->weight_scale);
    const bool grouped = p->n_group > 1;
    if (p->n_group < 0 || (grouped && (E % p->n_group || p->top_group < 1 ||
                                       p->top_group > p->n_group)))
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_group = %d, top_group = %d invalid for "
                            "n_expert = %d", __func__, p->n_group, p->top_group, E);
    CHECK_PTR(logits, "logits", 1);
    CHECK_PTR(idx, "idx", 1);
    CHECK_PTR(w, "w", 1);
    for (int32_t e = 0; e < E; e++) {
        if (!isfinite(logits[e]))
            return sl_error_set(err, SL_ERR_INVALID, "%s: logits[%d] = %g is not finite",
                                __func__, e, (double)logits[e]);
        if (p->bias && !isfinite(p->bias[e]))
            return sl_error_set(err, SL_ERR_INVALID, "%s: bias[%d] = %g is not finite",
                                __func__, e, (double)p->bias[e]);
    }

    double *prob = malloc(3 * (size_t)E * sizeof *prob);
    if (!prob) return sl_error_set(err, SL_ERR_NOMEM, "%s: %d experts of scratch", __func__, E);
    double *score = prob + E, *gscore = prob + 2 * E;

    sl__router_probs(logits, p, prob);
    for (int32_t e = 0; e < E; e++) score[e] = prob[e] + (p->bias ? (double)p->bias[e] : 0.0);
    if (grouped) {
        /* groups outside the top_group best (by the sum of their two best scores) are masked
         * to -inf, as llama.cpp does, so they are never selected while k unmasked remain */
        const int32_t G = p->n_group, per = E / G;
        for (int32_t g = 0; g < G; g++) {
            double b1 = -INFINITY, b2 = -INFINITY;
            for (int32_t e = g * per; e < (g + 1) * per; e++) {
                if (score[e] > b1) {
                    b2 = b1;
                    b1 = score[e];
                } else if (score[e] > b2) {
                    b2 = score[e];
                }
            }
            gscore[g] = per > 1 ? b1 + b2 : b1;
        }
        for (int32_t g = 0; g < G; g++) {
            int32_t better = 0; /* groups ranking before g */
            for (int32_t o = 0; o < G; o++) better += o != g && ranks_before(gscore, o, g);
            if (better >= p->top_group)
                for (int32_t e = g * per; e < (g + 1) * per; e++) score[e] = -INFINITY;
        }
    }

    /* partial selection sort: k passes over E, O(kE); k and E are small (<= 8 of <= 256) */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < E; e++) {
            bool taken = false;
            for (int32_t t = 0; t < j && !taken; t++) taken = idx[t] == e;
            if (!taken && (best < 0 || ranks_before(score, e, best))) best = e;
        }
        idx[j] = best;
    }

    sl__router_weights(prob, idx, p, w);
    free(prob);
    return SL_OK;
}

/* ---- attention -------------------------------------------------------------------------- */

sl_status sl_ref_attn_validate(const sl_attn_params *p, sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "attn: params is NULL");
    if (p->n_head < 1 || p->n_kv_head < 1 || p->n_head % p->n_kv_head)
        return sl_error_set(err, SL_ERR_INVALID,
                            "attn: n_head = %d must be a positive multiple of n_kv_head = %d",
                            p->n_head, p->n_kv_head);
    if (p->head_dim < 1)
        return sl_error_set(err, SL_ERR_INVALID, "attn: head_dim = %d < 1", p->head_dim);
    if (p->n_pos < 1) return sl_error_set(err, SL_ERR_INVALID, "attn: n_pos = %d < 1", p->n_pos);
    if (!isfinite(p->scale) || p->scale < 0.0f)
        return sl_error_set(err, SL_ERR_INVALID, "attn: scale = %g must be finite and >= 0",
                            (double)p->scale);
    if (p->window < 0)
        return sl_error_set(err, SL_ERR_INVALID, "attn: window = %d < 0", p->window);
    if (!isfinite(p->softcap) || p->softcap < 0.0f)
        return sl_error_set(err, SL_ERR_INVALID, "attn: softcap = %g must be finite and >= 0",
                            (double)p->softcap);
    if (!isfinite(p->temp_scale) || (p->temp_scale != 0.0f && p->temp_len < 1))
        return sl_error_set(err, SL_ERR_INVALID, "attn: temp_scale = %g needs a finite value "
                            "and temp_len >= 1 (%d)", (double)p->temp_scale, p->temp_len);
    if (p->kv_type != SL_KV_F32 && p->kv_type != SL_KV_F16)
        return sl_error_set(err, SL_ERR_INVALID, "attn: kv_type = %d is not F32 (0) or F16 (1)",
                            (int)p->kv_type);
    if (p->sinks)
        for (int32_t h = 0; h < p->n_head; h++)
            if (!isfinite(p->sinks[h]))
                return sl_error_set(err, SL_ERR_INVALID, "attn: sinks[%d] = %g is not finite",
                                    h, (double)p->sinks[h]);
    return SL_OK;
}

static double kv_at(const void *base, sl_kv_type t, size_t i)
{
    return t == SL_KV_F16 ? (double)sl_half_to_float(((const uint16_t *)base)[i])
                          : (double)((const float *)base)[i];
}

double sl_ref_attn_scale(const sl_attn_params *p)
{
    return p->scale != 0.0f ? (double)p->scale : 1.0 / sqrt((double)p->head_dim);
}

sl_status sl_ref_attn_decode(const float *q, const void *k, const void *v,
                             const sl_attn_params *p, float *out, sl_error *err)
{
    sl_status st = sl_ref_attn_validate(p, err);
    if (st) return st;
    CHECK_PTR(q, "q", 1);
    CHECK_PTR(k, "k", 1);
    CHECK_PTR(v, "v", 1);
    CHECK_PTR(out, "out", 1);
    const int32_t D = p->head_dim, group = p->n_head / p->n_kv_head;
    const int32_t p0 = p->window > 0 && p->window < p->n_pos ? p->n_pos - p->window : 0;
    const int32_t np = p->n_pos - p0;
    const double scale =
        sl_ref_attn_scale(p) * (double)sl_attn_temp(p->temp_scale, p->temp_len, p->n_pos - 1);
    const size_t row = (size_t)p->n_kv_head * (size_t)D; /* elements per cache position */

    double *logit = malloc(((size_t)np + (size_t)D) * sizeof *logit);
    if (!logit)
        return sl_error_set(err, SL_ERR_NOMEM, "%s: scratch for n_pos = %d", __func__, p->n_pos);
    double *acc = logit + np;

    for (int32_t h = 0; h < p->n_head; h++) {
        const int32_t kvh = h / group;
        const float *qh = q + (size_t)h * (size_t)D;
        double mx = p->sinks ? (double)p->sinks[h] : -INFINITY;
        for (int32_t j = 0; j < np; j++) {
            const size_t base = (size_t)(p0 + j) * row + (size_t)kvh * (size_t)D;
            double dot = 0.0;
            for (int32_t d = 0; d < D; d++) dot += (double)qh[d] * kv_at(k, p->kv_type, base + d);
            double l = dot * scale;
            if (p->softcap > 0.0f) l = (double)p->softcap * tanh(l / (double)p->softcap);
            logit[j] = l;
            if (l > mx) mx = l;
        }
        double sum = p->sinks ? exp((double)p->sinks[h] - mx) : 0.0;
        for (int32_t d = 0; d < D; d++) acc[d] = 0.0;
        for (int32_t j = 0; j < np; j++) {
            const double e = exp(logit[j] - mx);
            sum += e;
            const size_t base = (size_t)(p0 + j) * row + (size_t)kvh * (size_t)D;
            for (int32_t d = 0; d < D; d++) acc[d] += e * kv_at(v, p->kv_type, base + d);
        }
        for (int32_t d = 0; d < D; d++) out[(size_t)h * (size_t)D + d] = (float)(acc[d] / sum);
    }
    free(logit);
    return SL_OK;
}
