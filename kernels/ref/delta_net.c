/* kernels/ref/delta_net: see delta_net.h. */
#include "kernels/ref/delta_net.h"

#include <math.h>
#include <string.h>

sl_status sl_gdn_dims_check(const sl_gdn_dims *d, sl_error *err)
{
    if (!d) return sl_error_set(err, SL_ERR_INVALID, "delta net: NULL dims");
    if (d->n_k_heads < 1 || d->n_v_heads < 1 || d->head_dim < 1 || d->d_conv < 1)
        return sl_error_set(err, SL_ERR_INVALID, "delta net: key heads %d, value heads %d, "
                            "head size %d and conv taps %d must be >= 1", d->n_k_heads,
                            d->n_v_heads, d->head_dim, d->d_conv);
    if (d->head_dim > SL_GDN_MAX_HEAD)
        return sl_error_set(err, SL_ERR_INVALID, "delta net: head size %d above %d",
                            d->head_dim, SL_GDN_MAX_HEAD);
    if (d->n_v_heads % d->n_k_heads)
        return sl_error_set(err, SL_ERR_INVALID, "delta net: value heads %d not a multiple of "
                            "key heads %d", d->n_v_heads, d->n_k_heads);
    if (!(d->eps >= 0.0f))
        return sl_error_set(err, SL_ERR_INVALID, "delta net: eps %g < 0", (double)d->eps);
    return SL_OK;
}

int64_t sl_gdn_channels(const sl_gdn_dims *d)
{
    return (2 * (int64_t)d->n_k_heads + d->n_v_heads) * d->head_dim;
}

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

void sl_ref_gdn_conv(const float *x, int64_t n, int64_t C, int32_t d_conv, const float *w,
                     float *state, float *y)
{
    const int32_t K = d_conv - 1;
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < C; c++) {
            float sum = 0.0f; /* float, as ggml_compute_forward_ssm_conv_f32 */
            for (int32_t k = 0; k < d_conv; k++) {
                const int64_t r = t + k; /* row of in = state | x */
                const float v = r < K ? state[r * C + c] : x[(r - K) * C + c];
                sum += v * w[c * d_conv + k];
            }
            y[t * C + c] = silu(sum);
        }
    /* the new state: in's last K rows */
    for (int32_t k = 0; k < K; k++) {
        const int64_t r = n + k; /* row of in */
        float *dst = state + (int64_t)k * C;
        if (r < K) memmove(dst, state + r * C, (size_t)C * sizeof *dst);
        else memcpy(dst, x + (r - K) * C, (size_t)C * sizeof *dst);
    }
}

void sl_ref_gdn_gates(const sl_gdn_dims *d, const float *ba, int64_t n, const float *dt_bias,
                      const float *ssm_a, float *g, float *beta)
{
    const int32_t Hk = d->n_k_heads, Hv = d->n_v_heads, r = Hv / Hk;
    for (int64_t t = 0; t < n; t++)
        for (int32_t kh = 0; kh < Hk; kh++)
            for (int32_t j = 0; j < r; j++) {
                const int32_t h = kh * r + j;
                const float *row = ba + (t * Hk + kh) * 2 * r;
                const float b = d->ba_split ? ba[t * Hv + h] : row[j];
                beta[t * Hv + h] = 1.0f / (1.0f + expf(-b));
                const float a = (d->ba_split ? ba[(n + t) * Hv + h] : row[r + j]) + dt_bias[h];
                const float sp = a > 20.0f ? a : log1pf(expf(a)); /* ggml_softplus */
                g[t * Hv + h] = sp * ssm_a[h];
            }
}

/* x / sqrt(sum x^2 + eps) into out (build_gdn_l2_norm: rms_norm(eps / n) / sqrt(n)) */
static void l2_norm(const float *x, int32_t n, float eps, float *out)
{
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps / (float)n) / sqrtf((float)n);
    for (int32_t i = 0; i < n; i++) out[i] = x[i] * scale;
}

void sl_ref_gdn_heads(const sl_gdn_dims *d, const float *y, const float *z, const float *g,
                      const float *beta, const float *norm_w, int64_t n, float *state,
                      float *out, int32_t h0, int32_t h1)
{
    const int32_t S = d->head_dim, Hk = d->n_k_heads, Hv = d->n_v_heads, r = Hv / Hk;
    const int64_t C = sl_gdn_channels(d), KD = (int64_t)Hk * S;
    const float scale = 1.0f / sqrtf((float)S);
    float q[SL_GDN_MAX_HEAD], k[SL_GDN_MAX_HEAD], delta[SL_GDN_MAX_HEAD];
    for (int32_t h = h0; h < h1; h++) {
        float *M = state + (int64_t)h * S * S;
        const int32_t kh = d->tiled ? h % Hk : h / r;
        for (int64_t t = 0; t < n; t++) {
            const float *yt = y + t * C;
            l2_norm(yt + (int64_t)kh * S, S, d->eps, q);
            l2_norm(yt + KD + (int64_t)kh * S, S, d->eps, k);
            const float *v = yt + 2 * KD + (int64_t)h * S;
            const float decay = expf(g[t * Hv + h]), b = beta[t * Hv + h];
            for (int64_t i = 0; i < (int64_t)S * S; i++) M[i] *= decay;
            for (int32_t j = 0; j < S; j++) {
                float sum = 0.0f;
                for (int32_t i = 0; i < S; i++) sum += M[j * S + i] * k[i];
                delta[j] = (v[j] - sum) * b;
            }
            for (int32_t j = 0; j < S; j++)
                for (int32_t i = 0; i < S; i++) M[j * S + i] += k[i] * delta[j];
            float *o = out + (t * Hv + h) * S;
            double ss = 0.0;
            for (int32_t j = 0; j < S; j++) {
                float sum = 0.0f;
                for (int32_t i = 0; i < S; i++) sum += M[j * S + i] * q[i];
                o[j] = sum * scale;
                ss += (double)(o[j] * o[j]);
            }
            /* the gated RMS norm: rms_norm(o) * w * silu(z) */
            const float rs = 1.0f / sqrtf((float)(ss / S) + d->eps);
            const float *zt = z + (t * Hv + h) * S;
            for (int32_t j = 0; j < S; j++) o[j] = o[j] * rs * norm_w[j] * silu(zt[j]);
        }
    }
}
