/* base/device/cuda_gather.cuh: the body of cuda_gather.cu's k_gather (both directions of
 * sl__cuda_gather, cuda_gather.h), in a header so that tests/kernels_cuda:gather_host_test runs
 * it on the CPU (tests/kernels_cuda/host_shim/launch.h: every thread of a block a host thread)
 * over items of every size and alignment, where nothing else in CI runs it.
 *
 * Each block owns a TILE of the bounce buffer's byte range and walks the items that overlap it
 * (found by a binary search of off[], copied to shared memory first so that dynamic indexing
 * does not spill the argument block to local memory); threads move 16 bytes each where the
 * global side is 16-byte aligned (the bounce side always is), bytes elsewhere (every byte of
 * an item whose global address is misaligned - BFC blocks are 256-aligned - and an item's
 * tail). The two directions are one template. */
#ifndef SL_BASE_DEVICE_CUDA_GATHER_CUH
#define SL_BASE_DEVICE_CUDA_GATHER_CUH

#include <cuda_runtime.h>

#include "base/device/cuda_gather.h"

enum { GK_THREADS = 256, GK_TILE = 8 * 1024 }; /* 2 x 16 B a thread: many blocks for small phases */

/* block blockIdx.x of k_gather<OUT>: OUT, bounce -> destinations; else sources -> bounce */
template <bool OUT>
static __device__ __forceinline__ void gk_tile(sl__gather g, uint8_t *bounce)
{
    __shared__ uint64_t off[SL__GATHER_MAX_ITEMS + 1];
    __shared__ uint8_t *gp[SL__GATHER_MAX_ITEMS];
    __shared__ uint32_t bytes[SL__GATHER_MAX_ITEMS];
    const int n = g.n;
    for (int i = threadIdx.x; i <= n; i += GK_THREADS) {
        off[i] = g.off[i];
        if (i < n) {
            gp[i] = OUT ? g.dst[i] : (uint8_t *)g.src[i];
            bytes[i] = g.bytes[i];
        }
    }
    __syncthreads();
    const uint64_t t0 = (uint64_t)blockIdx.x * GK_TILE;
    const uint64_t t1 = min(off[n], t0 + GK_TILE);
    int lo = 0, hi = n - 1; /* the first item whose padded range ends past t0 */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (off[mid + 1] <= t0) lo = mid + 1;
        else hi = mid;
    }
    for (int i = lo; i < n && off[i] < t1; i++) {
        const uint64_t a = max(off[i], t0), b = min(off[i] + bytes[i], t1);
        uint8_t *const base = gp[i] - off[i]; /* global address of bounce offset p: base + p */
        const bool al = ((uintptr_t)gp[i] & 15) == 0;
#pragma unroll 4
        for (uint64_t p = a + 16 * (uint64_t)threadIdx.x; p < b; p += 16 * GK_THREADS) {
            uint8_t *const q = base + p;
            if (al && p + 16 <= b) {
                if (OUT) *(uint4 *)(void *)q = *(const uint4 *)(const void *)(bounce + p);
                else *(uint4 *)(void *)(bounce + p) = __ldg((const uint4 *)(const void *)q);
            } else {
                const int m = (int)min((uint64_t)16, b - p);
                for (int k = 0; k < m; k++) {
                    if (OUT) q[k] = bounce[p + k];
                    else bounce[p + k] = q[k];
                }
            }
        }
    }
}

#endif
