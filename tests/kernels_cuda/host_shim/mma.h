/* tests/kernels_cuda/host_shim: nvcuda::wmma on the host for the 16 x 16 x 16 half -> float
 * shapes the kernels use. A fragment here holds its whole tile in every lane (the device spreads
 * it over the warp; kernels never index fragments, so only the collective calls matter):
 * load_matrix_sync reads the tile in the given layout, mma_sync sums in float (the tensor cores'
 * products of halves are exact; the order of their sums is not specified, hence tolerances),
 * store_matrix_sync writes it. Lane 0 of each warp does the work for the warp (every lane would
 * compute and write the same values); the other lanes' fragments are left as they are.
 * Each call checks WMMA's documented requirements — a 256-bit aligned pointer, ldm a multiple
 * of 8 halves / 4 floats — and counts violations in sl_shim_wmma_faults, which would be
 * undefined behaviour on the device. */
#ifndef SL_TESTS_HOST_SHIM_MMA_H
#define SL_TESTS_HOST_SHIM_MMA_H

#include <atomic>
#include <type_traits>

#include "cuda_fp16.h"

static std::atomic<long> sl_shim_wmma_faults{0};

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* v[i * 16 + j]: element (i, j) of the tile (a: m x k, b: k x n, accumulator: m x n) */
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the 16 x 16 x 16 shape only");
    float v[256];
};

static inline void sl_shim_wmma_check(const void *p, unsigned ldm, unsigned mult)
{
    if ((uintptr_t)p % 32 || ldm % mult) sl_shim_wmma_faults++;
}

template <typename Use, typename T>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, void> &f, float x)
{
    for (float &e : f.v) e = x;
}

/* matrix_a (m, k) / matrix_b (k, n) from p: row-major (i, j) at p[i * ldm + j], column-major at
 * p[j * ldm + i] */
template <typename Use, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, __half, Layout> &f, const __half *p,
                                    unsigned ldm)
{
    sl_shim_wmma_check(p, ldm, 8);
    if (threadIdx.x % 32) return;
    const bool row = std::is_same<Layout, row_major>::value;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.v[i * 16 + j] = __half2float(row ? p[i * ldm + j] : p[j * ldm + i]);
}

/* an accumulator from p: layout as store_matrix_sync's */
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                    unsigned ldm, layout_t layout)
{
    sl_shim_wmma_check(p, ldm, 4);
    if (threadIdx.x % 32) return;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.v[i * 16 + j] = layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i];
}

template <typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, __half, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, __half, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    if (threadIdx.x % 32) return;
    float r[256];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float s = c.v[m * 16 + n];
            for (int k = 0; k < 16; k++) s += a.v[m * 16 + k] * b.v[k * 16 + n];
            r[m * 16 + n] = s;
        }
    memcpy(d.v, r, sizeof r);
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t layout)
{
    sl_shim_wmma_check(p, ldm, 4);
    if (threadIdx.x % 32) return;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            (layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i]) = f.v[i * 16 + j];
}
} // namespace wmma
} // namespace nvcuda

#endif
