/* kernels/cuda/gemm_grouped.cuh: the kernel of sl_cuda_gemm_grouped (gemm_grouped.h), in a
 * header so that tests/kernels_cuda:gemm_grouped_host_test runs it on the CPU (every thread of
 * a block a host thread, the WMMA calls by host stand-ins that also check their alignment).
 *
 * Block (x, e) owns GM_BM rows of expert e and walks e's slots GM_BN at a time (one tile when
 * an expert has <= 32 slots, as a prefill of 512 tokens over 128 experts x top-8 gives). Per
 * step of GM_BK columns: each thread decodes one 32-value unit of the W tile (sl_qt<T>::deq,
 * the dequant kernel's exact values, rounded to F16) into shared memory, the X tile (the slots'
 * F16 rows) is copied in 16-byte pieces, and 4 warps (2 row halves x 2 slot halves) multiply
 * 16 x 16 x 16 fragments on the tensor cores with F32 accumulation. The tile leaves through
 * shared memory so that Y's rows are written contiguously, times the slot's X scale. */
#ifndef SL_KERNELS_CUDA_GEMM_GROUPED_CUH
#define SL_KERNELS_CUDA_GEMM_GROUPED_CUH

#include <mma.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/grouped_args.cuh"

/* GM_LD / GM_LDO: the shared rows' strides (8 halves / 4 floats of padding against bank
 * conflicts; WMMA takes multiples of 8 / 4 and fragments at 32-byte aligned addresses, which
 * rows 16 apart and columns 16 apart keep) */
enum { GM_BM = 64, GM_BN = 32, GM_BK = 64, GM_THREADS = 128, GM_LD = GM_BK + 8,
       GM_LDO = GM_BM + 4 };

struct gm_args : sl_grouped_args {
    const __half *xh;    /* [n_x][cols]: X / xscale in F16 */
    const float *xscale; /* [n_x] */
};

template <uint32_t T>
static __global__ void __launch_bounds__(GM_THREADS) k_gemm_grouped(gm_args a)
{
    sl_pdl_enter();
    using namespace nvcuda;
    typedef sl_qt<T> Q;
    static_assert(Q::UNIT == 32 && GM_BK % 32 == 0 && GM_BM * GM_BK / 32 == GM_THREADS,
                  "one unit of the W tile a thread");
    __shared__ __align__(128) __half sw[GM_BM * GM_LD];
    __shared__ __align__(128) __half sx[GM_BN * GM_LD];
    __shared__ __align__(128) float so[GM_BN * GM_LDO];
    __shared__ int32_t sslot[GM_BN];
    const int tid = (int)threadIdx.x, warp = tid >> 5;
    const int e = (int)blockIdx.y;
    const int64_t r0 = (int64_t)blockIdx.x * GM_BM;
    const int32_t s0 = a.start[e], s1 = a.start[e + 1];
    if (e == a.n_expert) { /* ids outside [0, n_expert): zeros, as the GEMVs give */
        for (int32_t i = s0; i < s1; i++)
            for (int m = tid; m < GM_BM; m += GM_THREADS)
                if (r0 + m < a.rows) a.y[(int64_t)a.slots[i] * a.rows + r0 + m] = 0.0f;
        return;
    }
    if (s0 >= s1) return;
    const uint8_t *W = (const uint8_t *)a.wptrs[e];
    const int64_t n_units = a.cols / 32;
    const int wm = warp & 1, wn = warp >> 1;
    /* this thread's unit of each W tile: row wr, unit wu of the step */
    const int wr = tid / (GM_BK / 32), wu = tid % (GM_BK / 32);
    const uint8_t *wrow = r0 + wr < a.rows ? W + (r0 + wr) * a.row_bytes : NULL;
    for (int32_t i0 = s0; i0 < s1; i0 += GM_BN) {
        const int nb = s1 - i0 < GM_BN ? s1 - i0 : GM_BN;
        if (tid < GM_BN) sslot[tid] = tid < nb ? a.slots[i0 + tid] : -1;
        __syncthreads();
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
        wmma::fill_fragment(acc[0], 0.0f);
        wmma::fill_fragment(acc[1], 0.0f);
        for (int64_t k0 = 0; k0 < a.cols; k0 += GM_BK) {
            {
                const int64_t u = k0 / 32 + wu;
                uint32_t h[16];
                if (wrow && u < n_units) {
                    float v[32];
                    Q::deq(wrow + (u / Q::SUBS) * Q::BB, (int)(u % Q::SUBS), v);
#pragma unroll
                    for (int k = 0; k < 16; k++)
                        h[k] = (uint32_t)__half_as_ushort(__float2half_rn(v[2 * k])) |
                               (uint32_t)__half_as_ushort(__float2half_rn(v[2 * k + 1])) << 16;
                } else {
#pragma unroll
                    for (int k = 0; k < 16; k++) h[k] = 0;
                }
                uint4 *dst = (uint4 *)(sw + wr * GM_LD + wu * 32);
#pragma unroll
                for (int k = 0; k < 4; k++)
                    dst[k] = make_uint4(h[4 * k], h[4 * k + 1], h[4 * k + 2], h[4 * k + 3]);
            }
            for (int p = tid; p < GM_BN * (GM_BK / 8); p += GM_THREADS) {
                const int n = p / (GM_BK / 8), q = p % (GM_BK / 8);
                const int64_t col = k0 + q * 8;
                const int32_t s = sslot[n];
                uint4 v = make_uint4(0, 0, 0, 0);
                if (s >= 0 && col < a.cols)
                    v = *(const uint4 *)(a.xh + (int64_t)(s / a.x_group) * a.cols + col);
                *(uint4 *)(sx + n * GM_LD + q * 8) = v;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < GM_BK; kk += 16) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bf;
                wmma::load_matrix_sync(bf, sx + wn * 16 * GM_LD + kk, GM_LD);
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> af;
                    wmma::load_matrix_sync(af, sw + (wm * 32 + i * 16) * GM_LD + kk, GM_LD);
                    wmma::mma_sync(acc[i], af, bf, acc[i]);
                }
            }
            __syncthreads();
        }
        /* so[n][m]: element (row m, slot n) of the tile */
#pragma unroll
        for (int i = 0; i < 2; i++)
            wmma::store_matrix_sync(so + wn * 16 * GM_LDO + wm * 32 + i * 16, acc[i], GM_LDO,
                                    wmma::mem_col_major);
        __syncthreads();
        for (int p = tid; p < GM_BN * GM_BM; p += GM_THREADS) {
            const int n = p / GM_BM, m = p % GM_BM;
            if (n < nb && r0 + m < a.rows) {
                const int32_t s = sslot[n];
                a.y[(int64_t)s * a.rows + r0 + m] = so[n * GM_LDO + m] * a.xscale[s / a.x_group];
            }
        }
        __syncthreads(); /* sslot and so are rewritten by the next tile */
    }
}

#endif
