/* kernels/cuda/select.cuh: the bodies of ops.cu's selection kernels — the MoE router's top-k
 * (sl_cuda_router_topk: one warp a token) and the greedy pick (sl_cuda_argmax: one block) — in
 * a header so that tests/kernels_cuda:select_host_test runs them on the CPU
 * (host_shim/launch.h) against kernels/ref's sl_ref_router_topk and sl_ref_argmax, whose
 * orders (higher value, then lower index) they must reproduce exactly. ops.cu's __global__
 * wrappers declare the shared memory and call these; its launch code sizes the router's
 * dynamic shared memory with the helpers here. */
#ifndef SL_KERNELS_CUDA_SELECT_CUH
#define SL_KERNELS_CUDA_SELECT_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h" /* SL_CUDA_ROUTER_MAX_EXPERT */
extern "C" {
#include "kernels/ref/ops.h" /* sl_gating, sl_argmax_result */
}

/* ---- router ---------------------------------------------------------------------------- */

/* the router's group count as the kernel takes it: 0 without group limit */
static __host__ __device__ inline int32_t router_groups(int32_t n_group)
{
    return n_group > 1 ? n_group : 0;
}

/* the router's dynamic shared memory: prob[E], score[E], group score[G] (G: router_groups) */
static __host__ __device__ inline size_t router_smem(int32_t E, int32_t G)
{
    return (2 * (size_t)E + (size_t)G) * sizeof(double);
}

/* The router's arguments after sl__cuda_router_check (n_group as router_groups gives it) */
struct router_args {
    int32_t E, k, gating, n_group, top_group;
    bool norm_topk;
    const float *bias; /* the selection bias (NULL: none) */
    float weight_scale;
    int32_t *idx;      /* [n_tok][k] */
    float *w;          /* [n_tok][k] */
};

/* The checks of sl_cuda_router_topk's parameters (ops.cu), which every launch that routes
 * makes (gemv_multi.cu's fused router too); fills *r but its outputs */
sl_status sl__cuda_router_check(const char *fn, const sl_router_params *p, router_args *r,
                                sl_error *err);

/* Lane `threadIdx.x` of one warp for token tok: logits [tok][E] read past L1 (sl_ldcg: written
 * by other blocks of a fused launch); prob and score in double (rs: router_smem bytes of
 * shared memory), k argmax passes with the reference's order (higher score, then lower
 * index), the picks in sel (SL_CUDA_ROUTER_MAX_EXPERT ints of shared memory). Lanes 1..31
 * return before lane 0 has written the outputs: a caller looping over tokens meets at a
 * __syncwarp before the next. */
static __device__ __forceinline__ void router_body(const float *logits, int64_t tok,
                                                   const router_args &ra, double *rs,
                                                   int32_t *sel)
{
    const int32_t E = ra.E, k = ra.k, n_group = ra.n_group, top_group = ra.top_group;
    const int gating = ra.gating;
    const float *bias = ra.bias;
    double *prob = rs, *score = rs + E, *gscore = rs + 2 * E;
    const int lane = threadIdx.x;
    const float *lg = logits + tok * E;
    int32_t *oi = ra.idx + tok * k;
    float *ow = ra.w + tok * k;

    if (gating == SL_GATING_SOFTMAX_TOPK) {
        double mx = -INFINITY, sum = 0.0;
        for (int e = lane; e < E; e += 32) mx = fmax(mx, (double)sl_ldcg(lg + e));
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        for (int e = lane; e < E; e += 32) sum += (prob[e] = exp((double)sl_ldcg(lg + e) - mx));
        sum = sl_warp_sum_d(sum);
        for (int e = lane; e < E; e += 32) prob[e] /= sum;
    } else if (gating == SL_GATING_SIGMOID) {
        for (int e = lane; e < E; e += 32) prob[e] = 1.0 / (1.0 + exp(-(double)sl_ldcg(lg + e)));
    } else {
        for (int e = lane; e < E; e += 32) prob[e] = sl_ldcg(lg + e);
    }
    for (int e = lane; e < E; e += 32) score[e] = prob[e] + (bias ? (double)bias[e] : 0.0);
    __syncwarp();
    if (n_group > 1) {
        /* the reference's group limit: a group scores the sum of its two best scores (its one
         * score if it has one expert); the experts of groups with top_group or more groups
         * ranking before them (higher score, then lower index) are masked to -inf */
        const int32_t per = E / n_group;
        for (int g = lane; g < n_group; g += 32) {
            double b1 = -INFINITY, b2 = -INFINITY;
            for (int32_t e = g * per; e < (g + 1) * per; e++) {
                if (score[e] > b1) b2 = b1, b1 = score[e];
                else if (score[e] > b2) b2 = score[e];
            }
            gscore[g] = per > 1 ? b1 + b2 : b1;
        }
        __syncwarp();
        for (int g = lane; g < n_group; g += 32) {
            int32_t better = 0;
            for (int o = 0; o < n_group; o++)
                better += o != g && (gscore[o] > gscore[g] || (gscore[o] == gscore[g] && o < g));
            if (better >= top_group)
                for (int32_t e = g * per; e < (g + 1) * per; e++) score[e] = -INFINITY;
        }
        __syncwarp();
    }

    for (int j = 0; j < k; j++) {
        double bs = -INFINITY;
        int bi = -1;
        for (int e = lane; e < E; e += 32) {
            bool taken = false;
            for (int t = 0; t < j && !taken; t++) taken = sel[t] == e;
            if (taken) continue;
            if (bi < 0 || score[e] > bs || (score[e] == bs && e < bi)) bs = score[e], bi = e;
        }
        for (int o = 16; o > 0; o >>= 1) {
            const double os = __shfl_xor_sync(0xffffffffu, bs, o);
            const int oi2 = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi2 >= 0 && (bi < 0 || os > bs || (os == bs && oi2 < bi))) bs = os, bi = oi2;
        }
        if (lane == 0) sel[j] = bi;
        __syncwarp();
    }
    if (lane != 0) return;
    double wsum = 0.0;
    if (gating == SL_GATING_TOPK_SOFTMAX) {
        double mx = -INFINITY;
        for (int j = 0; j < k; j++) mx = fmax(mx, prob[sel[j]]);
        for (int j = 0; j < k; j++) wsum += exp(prob[sel[j]] - mx);
        for (int j = 0; j < k; j++) {
            oi[j] = sel[j];
            ow[j] = (float)(exp(prob[sel[j]] - mx) / wsum * (double)ra.weight_scale);
        }
    } else {
        for (int j = 0; j < k; j++) wsum += prob[sel[j]];
        const double div = ra.norm_topk && wsum > 0.0 ? wsum : 1.0;
        for (int j = 0; j < k; j++) {
            oi[j] = sel[j];
            ow[j] = (float)(prob[sel[j]] / div * (double)ra.weight_scale);
        }
    }
}

/* ---- greedy pick ------------------------------------------------------------------------- */

enum { ARGMAX_THREADS = 1024 };

/* (value, index) "a is the better pick than b": larger value, equal values by lower index; -1
 * (nothing found) loses to anything. */
static __device__ __forceinline__ bool am_better(float va, int32_t ia, float vb, int32_t ib)
{
    return ia >= 0 && (ib < 0 || va > vb || (va == vb && ia < ib));
}

/* One block of ARGMAX_THREADS: each thread scans a strided slice, then a tree reduction in
 * shared memory (sv, si, sb: ARGMAX_THREADS each). The result does not depend on the order of
 * the reduction (both rules are total orders), so it equals sl_ref_argmax's. */
static __device__ __forceinline__ void argmax_body(const float *x, int32_t n, sl_argmax_result *r,
                                                   float *sv, int32_t *si, int32_t *sb)
{
    const int t = threadIdx.x;
    float bv = 0.0f;
    int32_t bi = -1, bad = -1;
    for (int32_t i = t; i < n; i += ARGMAX_THREADS) {
        const float v = x[i];
        if (isnan(v) || v == INFINITY) {
            if (bad < 0) bad = i; /* the first in this thread's slice is its lowest */
        } else if (v > -INFINITY && (bi < 0 || v > bv)) {
            bv = v, bi = i;
        }
    }
    sv[t] = bv, si[t] = bi, sb[t] = bad;
    __syncthreads();
    for (int h = ARGMAX_THREADS / 2; h > 0; h >>= 1) {
        if (t < h) {
            if (am_better(sv[t + h], si[t + h], sv[t], si[t])) sv[t] = sv[t + h], si[t] = si[t + h];
            if (sb[t + h] >= 0 && (sb[t] < 0 || sb[t + h] < sb[t])) sb[t] = sb[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        r->best = si[0];
        r->bad = sb[0];
        r->bad_bits = sb[0] >= 0 ? __float_as_uint(x[sb[0]]) : 0u;
    }
}

#endif
