/* tests/kernels_cuda/host_shim: host stand-ins for the CUDA names kernels/cuda's .cuh files use,
 * so that their device code compiles as plain C++ and runs on the CPU in the host tests
 * (host_test.bzl; only they put this folder on their include path; launch.h runs a grid).
 * The intrinsics are the exact operations the device does: __fmul_rn etc. are single float
 * operations (the tests compile with -ffp-contract=off), __byte_perm the PRMT byte select.
 * What a passing host test cannot show: timing; a missing __syncwarp (each shuffle here is a
 * barrier of the warp's lanes and a fence); races between blocks (they run one at a time);
 * static __shared__ arrays start with the previous block's values, not garbage; nvcc's FMA
 * contraction (the tests' sums are compared within bounds, not bits); a lane that skips a
 * shuffle or barrier hangs the test instead of failing it. */
#ifndef SL_TESTS_HOST_SHIM_CUDA_RUNTIME_H
#define SL_TESTS_HOST_SHIM_CUDA_RUNTIME_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <pthread.h>

#include <atomic>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline

typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 } cudaError_t;
static inline const char *cudaGetErrorString(cudaError_t) { return "host shim"; }
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }

struct sl_shim_dim3 {
    unsigned x, y, z;
};
/* Per host thread: one lane of a 32-thread block for the decoders' tests; sl_shim_launch
 * (launch.h) sets them for each thread of each block it runs. */
static thread_local sl_shim_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0},
                                 blockDim = {32, 1, 1}, gridDim = {1, 1, 1};
#define __shared__ static /* one block runs at a time (launch.h) */
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

/* aligned as CUDA's vector_types.h declares them, so that the UBSan build (-fsanitize=alignment)
 * flags a plain vector access at an address the device would fault on */
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) int4 {
    int x, y, z, w;
};

static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

/* PRMT in its default mode: result byte k = byte (s >> 4k) & 7 of the 8 bytes y:x (the
 * sign-replicate bit 3 of a selector is not used by the decoders) */
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
    const uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++)
        r |= (uint32_t)((v >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
    return r;
}

/* Device accesses that break an alignment rule (a vector read through __ldg not at its size's
 * multiple; a cp.async of 16 bytes not at 16-byte addresses), which fault on the device: counted
 * here, tests assert none. */
static std::atomic<long> sl_shim_align_faults{0};

/* a read through the read-only cache: a plain read (memcpy: any object type); a read of 2, 4,
 * 8 or 16 bytes is one access that must be aligned to its size */
template <typename T> static inline T __ldg(const T *p)
{
    static_assert(sizeof(T) <= 16, "no wider device loads");
    if ((sizeof(T) & (sizeof(T) - 1)) == 0 && (uintptr_t)p % sizeof(T)) sl_shim_align_faults++;
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}
/* CUDA's math functions are global names (libm's, as <cmath> puts them in std) */
using std::isfinite;
using std::isnan;

/* round to nearest, ties to even (the default rounding mode) */
static inline int __float2int_rn(float f) { return (int)std::nearbyint(f); }
/* the integer min / max overloads device code calls unqualified */
template <typename T> static inline T min(T a, T b) { return b < a ? b : a; }
template <typename T> static inline T max(T a, T b) { return a < b ? b : a; }
/* a shared-memory atomic: the old value */
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
/* global-memory atomics and fence (common.cuh sl_last_block): the old value */
static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned atomicExch(unsigned *p, unsigned v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* a kernel's fault (common.cuh sl_last_of's miscount): the test process ends loudly */
[[noreturn]] static inline void __trap(void) { abort(); }
/* ld.global.cg: a plain load here (one cache) */
template <typename T> static inline T __ldcg(const T *p)
{
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* DP4A: c + the dot of a's and b's four signed bytes */
static inline int __dp4a(int a, int b, int c)
{
    for (int k = 0; k < 4; k++) c += (int8_t)(a >> (8 * k)) * (int8_t)(b >> (8 * k));
    return c;
}
/* VSUB4: per-byte a - b, each byte modulo 256 */
static inline uint32_t __vsub4(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) r |= (((a >> (8 * k)) - (b >> (8 * k))) & 0xFFu) << (8 * k);
    return r;
}
/* SHF.R: the 64 bits hi:lo shifted right by sh & 31, low word */
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}

/* A warp's lanes exchange values through this while sl_shim_launch runs a block (launch.h):
 * each writes its own, all meet, each reads its partner's, all meet again. Outside a launch a
 * "warp" is the one calling thread and a shuffle returns its own value. */
struct sl_shim_warp {
    pthread_barrier_t bar;
    double x[32];
};
static thread_local sl_shim_warp *sl_shim_warp_of = nullptr;
static inline double sl_shim_xor(double v, int lane_mask)
{
    sl_shim_warp *w = sl_shim_warp_of;
    if (!w) return v;
    const unsigned lane = threadIdx.x & 31;
    w->x[lane] = v;
    pthread_barrier_wait(&w->bar);
    const double r = w->x[(lane ^ (unsigned)lane_mask) & 31];
    pthread_barrier_wait(&w->bar);
    return r;
}
static inline float __shfl_xor_sync(unsigned, float v, int m) { return (float)sl_shim_xor(v, m); }
static inline double __shfl_xor_sync(unsigned, double v, int m) { return sl_shim_xor(v, m); }
static inline int __shfl_xor_sync(unsigned, int v, int m) { return (int)sl_shim_xor(v, m); }
/* the warp's barrier while sl_shim_launch runs a block (launch.h), else nothing (one lane) */
static inline void __syncwarp(unsigned = 0xffffffffu)
{
    if (sl_shim_warp_of) pthread_barrier_wait(&sl_shim_warp_of->bar);
}
/* cp.async (common.cuh defines these only under nvcc): a copy is queued, not done; commit
 * closes the thread's open group; wait<N> does every committed group but the newest N. So a
 * stage read before its wait reads what was there before (stale or poisoned), as on the
 * device, where the copy lands at some time before the wait. */
struct sl_shim_cp {
    void *dst;
    const void *src;
};
static thread_local std::vector<std::vector<sl_shim_cp>> sl_shim_cp_groups;
static thread_local std::vector<sl_shim_cp> sl_shim_cp_open;
/* Set by a test: copies land at issue instead, the device's other extreme, where a copy into a
 * stage that other threads still read (a barrier missing before the refill) shows. */
static std::atomic<bool> sl_shim_cp_eager{false};
static inline void sl_cp_async16(void *smem, const void *gmem)
{
    if ((uintptr_t)smem % 16 || (uintptr_t)gmem % 16) sl_shim_align_faults++;
    if (sl_shim_cp_eager) memcpy(smem, gmem, 16);
    else sl_shim_cp_open.push_back(sl_shim_cp{smem, gmem});
}
static inline void sl_cp_async_commit(void)
{
    sl_shim_cp_groups.push_back(sl_shim_cp_open);
    sl_shim_cp_open.clear();
}
template <int N> static inline void sl_cp_async_wait(void)
{
    auto &g = sl_shim_cp_groups;
    const size_t done = g.size() > (size_t)N ? g.size() - (size_t)N : 0;
    for (size_t i = 0; i < done; i++)
        for (const sl_shim_cp &c : g[i]) memcpy(c.dst, c.src, 16);
    g.erase(g.begin(), g.begin() + (std::ptrdiff_t)done);
}

/* the block's barrier while sl_shim_launch runs it (launch.h), else nothing (one lane) */
static thread_local pthread_barrier_t *sl_shim_barrier = nullptr;
static inline void __syncthreads(void)
{
    if (sl_shim_barrier) pthread_barrier_wait(sl_shim_barrier);
}

#endif
