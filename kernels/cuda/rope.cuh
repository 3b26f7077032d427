/* kernels/cuda/rope.cuh: the bodies of ops.cu's rotary kernels (sl_cuda_rope: one thread a
 * pair; sl_cuda_qk_rope_store: q/k norm + rope + KV store, one block a head and token), in a
 * header so that tests/kernels_cuda:rope_host_test runs them on the CPU (host_shim/launch.h)
 * against kernels/ref's rope and rms_norm. ops.cu's __global__ wrappers declare the shared
 * memory and call these; its launch code takes the grids from the helpers here. */
#ifndef SL_KERNELS_CUDA_ROPE_CUH
#define SL_KERNELS_CUDA_ROPE_CUH

#include "kernels/cuda/rows.cuh" /* ROW_THREADS, EW_THREADS (and common.cuh) */
extern "C" {
#include "kernels/ref/ops.h" /* sl_rope_params, sl_ref_rope_corr_dims */
}

struct rope_k {
    int32_t n_rot, half, head_dim, n_head;
    bool neox;
    double freq_base, freq_scale, ext_factor, attn_factor;
    float corr0, corr1;
    const float *ff;
};

/* The kernels' rope arguments from p (validated for head_dim; p->freq_factors a device pointer,
 * not read here) */
static inline rope_k rope_k_make(const sl_rope_params *p, int32_t head_dim, int32_t n_head)
{
    sl_rope_params hp = *p;
    hp.freq_factors = NULL;
    float corr[2];
    sl_ref_rope_corr_dims(&hp, corr);
    return rope_k{p->n_rot, p->n_rot / 2, head_dim, n_head, p->mode == SL_ROPE_NEOX,
                  (double)p->freq_base, (double)p->freq_scale, (double)p->ext_factor,
                  (double)p->attn_factor, corr[0], corr[1], p->freq_factors};
}

/* Pair i of one head's row at position pos: the angle as sl_ref_rope_cos_sin, in double. */
static __device__ void rope_pair(float *row, int32_t i, int32_t pos, const rope_k &p)
{
    double theta_extrap = (double)pos * pow(p.freq_base, -2.0 * i / (double)p.n_rot);
    if (p.ff) theta_extrap /= (double)p.ff[i];
    const double theta_interp = p.freq_scale * theta_extrap;
    double theta = theta_interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0) {
        const double y = ((double)i - p.corr0) / fmax(0.001, (double)p.corr1 - p.corr0);
        const double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
        const double mix = ramp * p.ext_factor;
        theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
    }
    double s, co;
    sincos(theta, &s, &co);
    co *= mscale;
    s *= mscale;
    const int32_t a = p.neox ? i : 2 * i, b = p.neox ? i + p.half : 2 * i + 1;
    const double x0 = row[a], x1 = row[b];
    row[a] = (float)(x0 * co - x1 * s);
    row[b] = (float)(x0 * s + x1 * co);
}

/* One thread per (token, head, pair) of n_pairs: ew_blocks(n_pairs) blocks of EW_THREADS. */
static __device__ __forceinline__ void rope_body(float *x, int64_t n_pairs, const int32_t *pos,
                                                 const rope_k &p)
{
    const int64_t g = (int64_t)blockIdx.x * EW_THREADS + threadIdx.x;
    if (g >= n_pairs) return;
    const int32_t i = (int32_t)(g % p.half);
    const int64_t th = g / p.half; /* token * n_head + head */
    rope_pair(x + th * p.head_dim, i, pos[th / p.n_head], p);
}

/* the fused kernel's grid.x: a block for each q, k and v head (qk_rope_store_body) */
static __host__ __device__ inline int64_t qk_rope_store_slots(int32_t H, int32_t Hk)
{
    return (int64_t)H + 2 * (int64_t)Hk;
}

/* Block (slot, token): slots [0, H) are q heads, [H, H + Hk) k heads, [H + Hk, H + 2 Hk) v
 * heads. A q or k head is normalised (its weight given: k_rms_norm's arithmetic), roped in
 * place (rope_pair), and a k head then stored; a v head is only stored (k_kv_store's rounding
 * for F16). The head's threads stride over it; the block syncs between the phases. red: 32
 * floats of shared memory. */
static __device__ __forceinline__ void qk_rope_store_body(float *q, float *k, const float *v,
                                                          const float *qw, const float *kw,
                                                          float eps, const int32_t *pos,
                                                          const rope_k &p, int32_t H, int32_t Hk,
                                                          bool f16, void *kc, void *vc,
                                                          float *red)
{
    const int32_t slot = blockIdx.x, D = p.head_dim;
    const int64_t t = blockIdx.y, row_kv = (int64_t)Hk * D;
    const bool is_q = slot < H, is_k = !is_q && slot < H + Hk;
    if (!is_q && !is_k) {
        const int32_t hv = slot - H - Hk;
        const float *src = v + (t * Hk + hv) * D;
        const int64_t base = (int64_t)pos[t] * row_kv + (int64_t)hv * D;
        for (int32_t d = threadIdx.x; d < D; d += ROW_THREADS) {
            if (f16) ((__half *)vc)[base + d] = __float2half_rn(src[d]);
            else ((float *)vc)[base + d] = src[d];
        }
        return;
    }
    const int32_t h = is_q ? slot : slot - H;
    float *row = is_q ? q + (t * H + h) * D : k + (t * Hk + h) * D;
    const float *w = is_q ? qw : kw;
    if (w) { /* uniform over the block: every thread takes part in the sum */
        float ss = 0.0f;
        for (int32_t d = threadIdx.x; d < D; d += ROW_THREADS) ss = fmaf(row[d], row[d], ss);
        ss = sl_block_sum(ss, red);
        const float r = 1.0f / sqrtf(ss / (float)D + eps);
        for (int32_t d = threadIdx.x; d < D; d += ROW_THREADS) row[d] = row[d] * r * w[d];
        __syncthreads();
    }
    for (int32_t i = threadIdx.x; i < p.half; i += ROW_THREADS) rope_pair(row, i, pos[t], p);
    if (!is_k) return;
    __syncthreads();
    const int64_t base = (int64_t)pos[t] * row_kv + (int64_t)h * D;
    for (int32_t d = threadIdx.x; d < D; d += ROW_THREADS) {
        if (f16) ((__half *)kc)[base + d] = __float2half_rn(row[d]);
        else ((float *)kc)[base + d] = row[d];
    }
}

#endif
