/* kernels/cuda/repack.cuh: the kernel of sl_cuda_q4_K_r8_undo (repack.h), in a header so that
 * tests/kernels_cuda:repack_host_test runs it on the CPU (host_shim/launch.h) against
 * kernels/ref/repack.h's undo.
 *
 * One block per group of eight rows (kernels/ref/repack.h: a group's bytes are the same range
 * in both layouts), so the conversion is in place: the group's nb Q4_K_R8 blocks are read into
 * shared memory, the block waits, then thread t writes Q4_K block t (row t / nb, super-block
 * t % nb) — d and dmin, the 12 scale bytes repacked from the six-bit scales and mins, and the
 * 128 quant bytes gathered four at a time — the exact inverse of the CPU's repack. */
#ifndef SL_KERNELS_CUDA_REPACK_CUH
#define SL_KERNELS_CUDA_REPACK_CUH

#include "kernels/cuda/common.cuh"

enum { RP_THREADS = 256, RP_R8 = 1152, RP_Q4K = 144 };

static __device__ void rp_group(uint8_t *group, int64_t nb, uint8_t *sm)
{
    for (int64_t i = threadIdx.x; i < nb * RP_R8; i += blockDim.x) sm[i] = group[i];
    __syncthreads();
    for (int64_t t = threadIdx.x; t < 8 * nb; t += blockDim.x) {
        const int r = (int)(t / nb);
        const int64_t b = t % nb;
        const uint8_t *in = sm + b * RP_R8; /* d[8] dmin[8] sc[64] mn[32] qs[1024] */
        uint8_t *out = group + ((int64_t)r * nb + b) * RP_Q4K; /* d dmin scales[12] qs[128] */
        out[0] = in[2 * r], out[1] = in[2 * r + 1];
        out[2] = in[16 + 2 * r], out[3] = in[16 + 2 * r + 1];
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            const int k = 16 * (j / 2) + 2 * r + j % 2;
            const uint8_t n = in[96 + k % 32], s = in[32 + k];
            sc[j] = s & 63;
            m[j] = (uint8_t)(((k < 32 ? n : n >> 4) & 15) | ((s >> 6) << 4));
        }
        for (int j = 0; j < 4; j++) {
            out[4 + j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            out[8 + j] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
            out[12 + j] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
        }
        for (int p = 0; p < 4; p++)
            for (int c = 0; c < 8; c++)
                for (int i = 0; i < 4; i++)
                    out[16 + 32 * p + 4 * c + i] = in[128 + 256 * p + 32 * c + 4 * r + i];
    }
}

#ifdef __CUDACC__
static __global__ void __launch_bounds__(RP_THREADS) k_q4_K_r8_undo(uint8_t *data, int64_t nb)
{
    sl_pdl_enter();
    extern __shared__ __align__(16) uint8_t rp_sm[];
    rp_group(data + (int64_t)blockIdx.x * nb * RP_R8, nb, rp_sm);
}
#endif

#endif
