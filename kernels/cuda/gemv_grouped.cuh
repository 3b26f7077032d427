/* kernels/cuda/gemv_grouped.cuh: gemv_grouped.cu's two kernels (gemv_grouped.h: the counting
 * sort of slots by expert, the grouped GEMV), in a header so that
 * tests/kernels_cuda:gemv_grouped_host_test runs them on the CPU (host_shim/launch.h: every
 * thread of a block a host thread), the sort's order feeding the GEMV as on the device. Whole
 * kernels, as gemm_grouped.cuh's (neither has dynamic shared memory to pass in): moved
 * unchanged they compile to the same PTX as in gemv_grouped.cu, where the GEMV's body called
 * from a __global__ wrapper did not (nvcc reached its staging array through generic addresses).
 *
 * Why the GEMV: a prefill's routed experts through the per-slot expert GEMV read one expert
 * matrix per slot (512 reads of ~1 MB per projection and chunk of 64 tokens on Qwen3-30B-A3B,
 * where at most 128 distinct matrices are used): the H200 prefilled at 284 tok/s against
 * llama.cpp's 6452 (2026-11-30). Here block (x, e) owns GG_ROWS rows of expert e (GG_R per
 * warp) and walks e's slots one after another: its rows come from HBM once and from L1 / L2
 * for the other slots; blocks of experts without slots return at once.
 * Order of a sum: lane l takes units l, l + 32, ... in turn, each sl_qt<T>::dot on the unit's
 * x (and its sum), then sl_warp_sum: k_gemv's order for one batch column (gemv.cuh). */
#ifndef SL_KERNELS_CUDA_GEMV_GROUPED_CUH
#define SL_KERNELS_CUDA_GEMV_GROUPED_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv_grouped.h"
#include "kernels/cuda/grouped_args.cuh"

enum { GG_WARPS = 4, GG_R = 4, GG_ROWS = GG_WARPS * GG_R, GG_THREADS = 32 * GG_WARPS,
       GO_THREADS = 1024 };

/* ---- the counting sort ------------------------------------------------------------------ */

/* One block: counts in shared memory, starts by a serial scan (n_expert <= 4096), then each
 * slot placed at its expert's start plus a shared cursor. */
static __global__ void __launch_bounds__(GO_THREADS)
    k_expert_order(const int32_t *ids, int32_t n_sel, int32_t n_expert, int32_t *order)
{
    sl_pdl_enter();
    __shared__ int32_t cnt[SL_CUDA_GROUPED_MAX_EXPERTS + 1];
    int32_t *start = order, *slots = order + n_expert + 2;
    for (int e = threadIdx.x; e <= n_expert; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int s = threadIdx.x; s < n_sel; s += blockDim.x) {
        const int32_t e = ids[s];
        atomicAdd(&cnt[e >= 0 && e < n_expert ? e : n_expert], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t at = 0;
        for (int e = 0; e <= n_expert; e++) {
            const int32_t k = cnt[e];
            start[e] = at;
            cnt[e] = at; /* now the cursor */
            at += k;
        }
        start[n_expert + 1] = at;
    }
    __syncthreads();
    for (int s = threadIdx.x; s < n_sel; s += blockDim.x) {
        const int32_t e = ids[s];
        slots[atomicAdd(&cnt[e >= 0 && e < n_expert ? e : n_expert], 1)] = s;
    }
}

/* ---- the grouped GEMV ------------------------------------------------------------------- */

struct gg_args : sl_grouped_args {
    const float *x;
};

template <uint32_t T>
static __global__ void __launch_bounds__(GG_THREADS) k_gemv_grouped(gg_args a)
{
    sl_pdl_enter();
    typedef sl_qt<T> Q;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int e = (int)blockIdx.y;
    const int64_t r0 = (int64_t)blockIdx.x * GG_ROWS + warp * GG_R;
    const int32_t s0 = a.start[e], s1 = a.start[e + 1];
    if (e == a.n_expert) { /* ids outside [0, n_expert): zeros, as the per-slot GEMV gives */
        for (int32_t i = s0; i < s1; i++)
            if (lane < GG_R && r0 + lane < a.rows)
                a.y[(int64_t)a.slots[i] * a.rows + r0 + lane] = 0.0f;
        return;
    }
    if (s0 >= s1) return;
    const uint8_t *W = (const uint8_t *)a.wptrs[e];
    const int64_t n_units = a.cols / Q::UNIT;
    /* one slot at a time: the warp's rows are fetched from HBM for the first, from L1 / L2 for
     * the rest (16 rows of 2048 Q4_K columns are 18 KiB); unrolled over the rows only, so
     * each type's kernel stays small */
    for (int32_t i = s0; i < s1; i++) {
        const int32_t slot = a.slots[i];
        const float *X = a.x + (int64_t)(slot / a.x_group) * a.cols;
        float acc[GG_R];
#pragma unroll
        for (int r = 0; r < GG_R; r++) acc[r] = 0.0f;
        for (int64_t u = lane; u < n_units; u += 32) {
            const int64_t blk = u / Q::SUBS;
            const int sub = (int)(u % Q::SUBS);
            const float *xp = X + u * Q::UNIT;
            float xr[Q::UNIT];
            if (((uintptr_t)xp & 15) == 0) {
#pragma unroll
                for (int k = 0; k < Q::UNIT / 4; k++) {
                    const float4 v = __ldg((const float4 *)(const void *)xp + k);
                    xr[4 * k] = v.x;
                    xr[4 * k + 1] = v.y;
                    xr[4 * k + 2] = v.z;
                    xr[4 * k + 3] = v.w;
                }
            } else {
#pragma unroll
                for (int k = 0; k < Q::UNIT; k++) xr[k] = __ldg(xp + k);
            }
            float sx = 0.0f;
            if (Q::NEED_SX) {
#pragma unroll
                for (int k = 0; k < Q::UNIT; k++) sx += xr[k];
            }
#pragma unroll
            for (int r = 0; r < GG_R; r++) {
                if (r0 + r >= a.rows) continue;
                const uint8_t *row = W + (r0 + r) * a.row_bytes, *bp = row + blk * Q::BB;
                /* both arms `acc += dot` inline, as k_gemv's, so that nvcc contracts the add
                 * into dot's last multiply alike (a select of two dots would not) */
                /* (tested per row: hoisting it per expert made the Q8_0 kernel spill) */
                if (((uintptr_t)row & 15) == 0) {
                    acc[r] += Q::dot(bp, sub, xr, sx);
                } else {
                    /* a row start not 16-byte aligned (odd row sizes, offset expert
                     * pointers), where dot's word reads could fault: the block staged
                     * bytewise to aligned local memory first, as k_gemv stages such rows */
                    __align__(16) uint8_t st[(Q::BB + 15) / 16 * 16];
#pragma unroll 1
                    for (int k = 0; k < Q::BB; k++) st[k] = bp[k];
                    acc[r] += Q::dot(st, sub, xr, sx);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < GG_R; r++) {
            const float v = sl_warp_sum(acc[r]);
            if (lane == 0 && r0 + r < a.rows) a.y[(int64_t)slot * a.rows + r0 + r] = v;
        }
    }
}

#endif
