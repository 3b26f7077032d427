/* kernels/cuda/moe_combine.cuh: the bodies of sl_cuda_moe_combine and sl_cuda_moe_mask_ids
 * (fwd.h), in a header so that tests/kernels_cuda:moe_combine_host_test runs them on the CPU
 * (host_shim/launch.h) against the CPU scheduler's join (scheduler/moe/moe.h
 * sl_moe_rows_join), bit for bit.
 *
 * Combine: a block row per token (blockIdx.y), its threads striding over the columns; one
 * thread a block sorts the token's k slots by expert (insertion sort, stable: equal ids keep
 * slot order) into shared memory, and each sums w * y (or w * (y + y2)) in that order from
 * +0, each product and sum rounded (__fmul_rn / __fadd_rn: never an FMA), as the CPU's join;
 * with res, res + that sum (the layer's residual add in the same launch: the bits of adding
 * it after). */
#ifndef SL_KERNELS_CUDA_MOE_COMBINE_CUH
#define SL_KERNELS_CUDA_MOE_COMBINE_CUH

#include "kernels/cuda/common.cuh"

enum { MC_MAX_K = 64 };

/* Token t's k slots in the order they are summed (by expert, stable) into order[k] */
static __device__ __forceinline__ void mc_order(const int32_t *idx, int k, int64_t t, int *order)
{
    for (int i = 0; i < k; i++) {
        int j = i;
        const int32_t e = idx[t * k + i];
        while (j > 0 && idx[t * k + order[j - 1]] > e) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* Token t's column j, its slots summed in mc_order's order (y read past L1: rows other blocks
 * of a fused launch wrote, gemv.cuh qx_combine_last) */
static __device__ __forceinline__ void mc_combine_col(const float *y, const float *y2,
                                                      const float *w, int k, int64_t dim,
                                                      const float *res, float *out, int64_t t,
                                                      int64_t j, const int *order)
{
    float acc = 0.0f;
    for (int i = 0; i < k; i++) {
        const int64_t at = (t * k + order[i]) * dim + j;
        const float v = y2 ? __fadd_rn(sl_ldcg(y + at), y2[at]) : sl_ldcg(y + at);
        acc = __fadd_rn(acc, __fmul_rn(w[t * k + order[i]], v));
    }
    out[t * dim + j] = res ? __fadd_rn(res[t * dim + j], acc) : acc;
}

/* k_moe_combine's: block row blockIdx.y is the token, the grid's x threads its columns; the
 * token's order sorted once a block into shared memory (every thread of the block calls it) */
static __device__ __forceinline__ void mc_combine(const float *y, const float *y2,
                                                  const int32_t *idx, const float *w, int k,
                                                  int64_t dim, const float *res, float *out)
{
    const int64_t t = blockIdx.y;
    __shared__ int order[MC_MAX_K];
    if (threadIdx.x == 0) mc_order(idx, k, t, order);
    __syncthreads();
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < dim;
         j += (int64_t)gridDim.x * blockDim.x)
        mc_combine_col(y, y2, w, k, dim, res, out, t, j, order);
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
