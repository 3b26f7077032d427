/* kernels/ref/delta_net: the Gated DeltaNet's non-matmul steps (Qwen3-Next's linear attention),
 * exactly as ggml's CPU ops compute them (ggml_ssm_conv, build_gdn_l2_norm, ggml_softplus,
 * ggml_gated_delta_net, the gated RMS norm of llama.cpp's qwen3next graph): the definitions
 * kernels/cpu/delta_net runs on its pool. Pure, reentrant; floats accumulated in float except
 * the norms' sums (double, as ggml).
 *
 * Shapes (token-major rows): a token's conv channels are C = 2 Hk S + Hv S, q | k | v (q, k:
 * Hk heads of S, v: Hv heads of S); value head h reads key head h / (Hv / Hk) (Qwen3-Next:
 * llama.cpp's repeat of each key head, HF's repeat_interleave), or h % Hk when tiled (Qwen3.5:
 * its converter reorders the value heads so that llama.cpp tiles the key heads, ggml_repeat).
 * A head's state is an S x S matrix M
 * stored row-major with M[j][i] = S[i][j] (i over the key, j over the value), as ggml's. */
#ifndef SL_KERNELS_REF_DELTA_NET_H
#define SL_KERNELS_REF_DELTA_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

enum { SL_GDN_MAX_HEAD = 1024 }; /* the largest head size (Qwen3-Next: 128) */

typedef struct sl_gdn_dims {
    int32_t n_k_heads, n_v_heads, head_dim; /* Hk, Hv (a multiple of Hk), S */
    int32_t d_conv;                         /* conv taps (>= 1) */
    float eps;                              /* the l2 norms' and the gated norm's epsilon */
    bool tiled;                             /* value head h reads key head h % Hk */
    bool ba_split;                          /* the gates' input: separate beta and alpha
                                               rows (sl_ref_gdn_gates) */
} sl_gdn_dims;

/* Checks d (positive sizes, S <= SL_GDN_MAX_HEAD, Hv % Hk == 0); SL_ERR_INVALID naming the field. */
sl_status sl_gdn_dims_check(const sl_gdn_dims *d, sl_error *err);
/* Conv channels C = 2 Hk S + Hv S. */
int64_t sl_gdn_channels(const sl_gdn_dims *d);

/* Causal depthwise conv then SiLU: y[t][c] = silu(sum_k in[t + k][c] w[c][k]) over the rows
 * in = state (d_conv - 1 rows, oldest first) | x[0 .. n); state becomes in's last d_conv - 1
 * rows. x, y [n][C] (may not alias), w [C][d_conv]. */
void sl_ref_gdn_conv(const float *x, int64_t n, int64_t C, int32_t d_conv, const float *w,
                     float *state, float *y);
/* Per token t and value head h from the projection ba [n][Hk][2 r] (r = Hv / Hk: per key head
 * r betas then r alphas; with d->ba_split: the betas [n][Hv] then the alphas [n][Hv], Qwen3.5's
 * ssm_beta and ssm_alpha): beta[t][h] = sigmoid(b), g[t][h] = softplus(a + dt_bias[h]) *
 * ssm_a[h] (ssm_a = -exp(A_log): g is the log of the state's decay). */
void sl_ref_gdn_gates(const sl_gdn_dims *d, const float *ba, int64_t n, const float *dt_bias,
                      const float *ssm_a, float *g, float *beta);
/* Value heads [h0, h1) over tokens 0 .. n-1 in order: q, k l2-normalised (x / sqrt(sum x^2 +
 * eps)) from the conv output y [n][C]; M *= exp(g); delta = (v - M k) beta; M += delta k^T;
 * o = M q / sqrt(S); out[t][h S ..] = rms_norm(o) * norm_w * silu(z[t][h S ..]).
 * state [Hv][S][S] (updated), z and out [n][Hv S], g and beta [n][Hv], norm_w [S]. */
void sl_ref_gdn_heads(const sl_gdn_dims *d, const float *y, const float *z, const float *g,
                      const float *beta, const float *norm_w, int64_t n, float *state,
                      float *out, int32_t h0, int32_t h1);

#endif
