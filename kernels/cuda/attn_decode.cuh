/* kernels/cuda/attn_decode.cuh: the per-token attention of sl_cuda_attn_decode and
 * sl_cuda_attn_at (ops.h; ops.cu's k_attn_decode runs ad_body and chooses the instantiation),
 * in a header so that tests/kernels_cuda:attn_decode_host_test runs it on the CPU
 * (host_shim/launch.h) against kernels/ref. Exact F32 arithmetic: the decode path, and the
 * F32-activation mode's prefill. */
#ifndef SL_KERNELS_CUDA_ATTN_DECODE_CUH
#define SL_KERNELS_CUDA_ATTN_DECODE_CUH

#include "kernels/cuda/attn_prefill.cuh" /* ap_kv (and common.cuh) */
#include "kernels/cuda/ops.h"            /* SL_CUDA_ATTN_MAX_HEAD_DIM */

/* ATTN_WARPS: warps of an attention block, each over every ATTN_WARPS-th position; a block is
 * one head and token, so a decode has only n_head blocks (32 on Qwen3-30B-A3B for 132 SMs) and
 * a warp's positions run one after another (a shuffle reduction each): 16, not 4, cuts that
 * chain 4x (the merge's shared memory, 16 x 576 floats for MLA, stays under 48 KiB).
 * Head dims per lane (DPL): 8 up to head_dim 256 (every architecture but MLA), 18 up to 576
 * (deepseek2's latent rows, n_lora_kv 512 + n_rot 64): two instantiations, so the common one
 * keeps its registers. */
enum { ATTN_WARPS = 16, ATTN_DPL_SMALL = 256 / 32, ATTN_DPL = SL_CUDA_ATTN_MAX_HEAD_DIM / 32 };

/* whether head dim D takes the ATTN_DPL_SMALL instantiation */
static inline bool attn_dpl_small(int32_t D)
{
    return D <= 32 * ATTN_DPL_SMALL;
}

struct attn_k {
    int32_t D, group, n_kv_head, n_pos, window; /* n_pos: the one token's (pos NULL) */
    const int32_t *pos;                         /* or, not NULL: token t's n_pos is pos[t] + 1 */
    int64_t q_ts;                               /* floats between tokens of q and out */
    float scale, softcap;
    float temp_scale;                           /* sl_attn_params' temperature */
    int32_t temp_len;
    const float *sinks;
};

/* One block per query head (x) and token (y: token t at position pos[t], or the one token at
 * n_pos - 1), ATTN_WARPS warps over the positions (warp w: p0 + w, + ATTN_WARPS, ...), lanes
 * over the head dims; online softmax per warp, merged at the end through the block's shared
 * wm, wsum [ATTN_WARPS] and wacc [ATTN_WARPS][32 * DPL]. */
template <typename KV, int DPL>
static __device__ __forceinline__ void ad_body(const float *q, const KV *k, const KV *v,
                                               attn_k a, float *out, float *wm, float *wsum,
                                               float (*wacc)[32 * DPL])
{
    const int h = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int kvh = h / a.group;
    const int32_t n_pos = a.pos ? a.pos[blockIdx.y] + 1 : a.n_pos;
    const int32_t p0 = a.window > 0 && a.window < n_pos ? n_pos - a.window : 0;
    const float sc = a.scale * sl_attn_temp(a.temp_scale, a.temp_len, n_pos - 1);
    q += (int64_t)blockIdx.y * a.q_ts;
    out += (int64_t)blockIdx.y * a.q_ts;
    const int64_t row = (int64_t)a.n_kv_head * a.D;
    float qr[DPL], acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + 32 * i;
        qr[i] = d < a.D ? q[(int64_t)h * a.D + d] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, s = 0.0f;
    for (int j = p0 + warp; j < n_pos; j += ATTN_WARPS) {
        const int64_t base = (int64_t)j * row + (int64_t)kvh * a.D;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < a.D) dot = fmaf(qr[i], ap_kv<KV>(k, base + d), dot);
        }
        float l = sl_warp_sum(dot) * sc;
        if (a.softcap > 0.0f) l = a.softcap * tanhf(l / a.softcap);
        const float mn = fmaxf(m, l);
        const float corr = expf(m - mn), e = expf(l - mn);
        s = s * corr + e;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            acc[i] = acc[i] * corr + (d < a.D ? e * ap_kv<KV>(v, base + d) : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) {
        wm[warp] = m;
        wsum[warp] = s;
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + 32 * i;
        if (d < a.D) wacc[warp][d] = acc[i];
    }
    __syncthreads();
    float M = a.sinks ? a.sinks[h] : -INFINITY;
    for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, wm[w]);
    float S = a.sinks ? expf(a.sinks[h] - M) : 0.0f, f[ATTN_WARPS];
    for (int w = 0; w < ATTN_WARPS; w++) {
        f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
        S += wsum[w] * f[w];
    }
    for (int d = threadIdx.x; d < a.D; d += 32 * ATTN_WARPS) {
        float o = 0.0f;
        for (int w = 0; w < ATTN_WARPS; w++) o += wacc[w][d] * f[w];
        out[(int64_t)h * a.D + d] = o / S;
    }
}

#endif
