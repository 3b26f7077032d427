/* kernels/cuda/moe_combine.cuh: the bodies of sl_cuda_moe_combine and sl_cuda_moe_mask_ids
 * (fwd.h), in a header so that tests/kernels_cuda:moe_combine_host_test runs them on the CPU
 * (host_shim/launch.h) against the CPU scheduler's join (scheduler/moe/moe.h
 * sl_moe_rows_join), bit for bit.
 *
 * Combine: a block row per token (blockIdx.y), its threads striding over the columns; each
 * thread sorts the token's k slots by expert (insertion sort, stable: equal ids keep slot
 * order) and sums w * y (or w * (y + y2)) in that order from +0, each product and sum rounded
 * (__fmul_rn / __fadd_rn: never an FMA), as the CPU's join; with res, res + that sum (the
 * layer's residual add in the same launch: the bits of adding it after). */
#ifndef SL_KERNELS_CUDA_MOE_COMBINE_CUH
#define SL_KERNELS_CUDA_MOE_COMBINE_CUH

#include "kernels/cuda/common.cuh"

enum { MC_MAX_K = 64 };

/* Token t's columns j0, j0 + js, ... (y read past L1: rows other blocks of a fused launch
 * wrote, gemv.cuh qx_combine_last) */
static __device__ __forceinline__ void mc_combine_tok(const float *y, const float *y2,
                                                      const int32_t *idx, const float *w, int k,
                                                      int64_t dim, const float *res, float *out,
                                                      int64_t t, int64_t j0, int64_t js)
{
    int order[MC_MAX_K];
    for (int i = 0; i < k; i++) {
        int j = i;
        const int32_t e = idx[t * k + i];
        while (j > 0 && idx[t * k + order[j - 1]] > e) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int64_t j = j0; j < dim; j += js) {
        float acc = 0.0f;
        for (int i = 0; i < k; i++) {
            const int64_t at = (t * k + order[i]) * dim + j;
            const float v = y2 ? __fadd_rn(sl_ldcg(y + at), y2[at]) : sl_ldcg(y + at);
            acc = __fadd_rn(acc, __fmul_rn(w[t * k + order[i]], v));
        }
        out[t * dim + j] = res ? __fadd_rn(res[t * dim + j], acc) : acc;
    }
}

/* k_moe_combine's: block row blockIdx.y is the token, the grid's x threads its columns */
static __device__ __forceinline__ void mc_combine(const float *y, const float *y2,
                                                  const int32_t *idx, const float *w, int k,
                                                  int64_t dim, const float *res, float *out)
{
    mc_combine_tok(y, y2, idx, w, k, dim, res, out, blockIdx.y,
                   (int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                   (int64_t)gridDim.x * blockDim.x);
}

/* out[s] = idx[s] where it is in [0, n_expert) and mask[idx[s]] != 0, else -1 (a grid-stride
 * loop over s < n_sel) */
static __device__ __forceinline__ void mc_mask_ids(const int32_t *idx, const uint8_t *mask,
                                                   int64_t n_sel, int32_t n_expert,
                                                   int32_t *out)
{
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < n_sel;
         s += (int64_t)gridDim.x * blockDim.x) {
        const int32_t e = idx[s];
        out[s] = e >= 0 && e < n_expert && mask[e] ? e : -1;
    }
}

#endif
