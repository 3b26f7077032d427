/* base/device/cuda_gather.cu: see cuda_gather.h.
 *
 * Each block owns a TILE of the bounce buffer's byte range and walks the items that overlap it
 * (found by a binary search of off[], copied to shared memory first so that dynamic indexing
 * does not spill the argument block to local memory); threads move 16 bytes each where the
 * global side is 16-byte aligned (the bounce side always is), bytes elsewhere (every byte of
 * an item whose global address is misaligned - BFC blocks are 256-aligned - and an item's
 * tail). The two directions are one template. */
#include <cuda_runtime.h>

#include "base/device/cuda_gather.h"

enum { GK_THREADS = 256, GK_TILE = 8 * 1024 }; /* 2 x 16 B a thread: many blocks for small phases */

template <bool OUT> static __global__ void __launch_bounds__(GK_THREADS) k_gather(sl__gather g,
                                                                               uint8_t *bounce)
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
