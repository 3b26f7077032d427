/* base/device/cuda_gather.cu: see cuda_gather.h; the kernel's body is cuda_gather.cuh's. */
#include <cuda_runtime.h>

#include "base/device/cuda_gather.cuh"
#include "base/device/cuda_gather.h"

template <bool OUT> static __global__ void __launch_bounds__(GK_THREADS) k_gather(sl__gather g,
                                                                               uint8_t *bounce)
{
    gk_tile<OUT>(g, bounce);
}

extern "C" int sl__gather_validate(const sl__gather *g)
{
    if (!g || g->n < 1 || g->n > SL__GATHER_MAX_ITEMS || g->off[0] != 0) return -1;
    for (int i = 0; i < g->n; i++) {
        const uint64_t b = g->bytes[i];
        if (b == 0 || g->off[i + 1] != g->off[i] + (b + 15) / 16 * 16 || !g->src[i] || !g->dst[i])
            return i + 1;
        const uintptr_t s = (uintptr_t)g->src[i], d = (uintptr_t)g->dst[i];
        if (s < d + b && d < s + b) return i + 1;
    }
    return 0;
}

extern "C" int sl__cuda_gather(void *stream, const sl__gather *g, void *bounce)
{
    if (sl__gather_validate(g) || !bounce || ((uintptr_t)bounce & 15))
        return (int)cudaErrorInvalidValue;
    const cudaStream_t s = (cudaStream_t)stream;
    /* the checks below read the thread's last error: drop one an earlier call left (a failed
     * allocation is not sticky; a sticky error fails the launch again) */
    (void)cudaGetLastError();
    const uint64_t tiles = (g->off[g->n] + GK_TILE - 1) / GK_TILE;
    if (tiles > 0x7fffffffu) return (int)cudaErrorInvalidValue;
    k_gather<false><<<(unsigned)tiles, GK_THREADS, 0, s>>>(*g, (uint8_t *)bounce);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return (int)rc;
    k_gather<true><<<(unsigned)tiles, GK_THREADS, 0, s>>>(*g, (uint8_t *)bounce);
    return (int)cudaGetLastError();
}
