/* tests/kernels_cuda/x_f16_host_test: the F16 GEMMs' activation scaling (kernels/cuda/x_f16.cuh:
 * xs_row, what sl__cuda_x_f16_scaled runs for the tensor-core grouped GEMM of every prefill's
 * routed experts, and xs_rows_scale, sl_cuda_gemm's scale back) on the CPU, each thread of a
 * block a host thread (host_shim/launch.h), with gemm.cu's grids. Why: CI has no GPU, and an
 * activation past F16's range (65504) would otherwise become inf in every prefill.
 * - xs_row: rows within XS_LIMIT (scale 1, each value exactly kernels/ref's round-to-nearest-
 *   even F16), past it (the least power of two bringing max |x| to XS_LIMIT or under, each
 *   value x / scale rounded, so nothing is inf), holding inf (scale 1, it propagates), a NaN
 *   beside values within range (scale 1) and beside one past it (the max ignores the NaN: the
 *   scale of the others; the NaN propagates), all zeros; widths not a multiple of the block; rows past the launched ones untouched.
 * - xs_rows_scale: rows of scale 1 bit for bit unchanged, the others times their scale
 *   (exact: a power of two), with fewer block rows than Y rows (the grid-y stride). */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "launch.h"                       /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/rng.h"
#include "tests/kernels_cuda/x_f16_cuh.h" /* kernels/cuda/x_f16.cuh (BUILD) */

extern "C" {
#include "kernels/ref/quant.h"
#include "tests/testing.h"
}

enum { NB = 7 };

static void x_rows(int64_t cols)
{
    std::vector<float> x((size_t)(NB * cols));
    for (float &v : x) v = rnd_f(-3.0f, 3.0f);
    /* row 1 past XS_LIMIT (max 1e5), row 2 exactly at it, row 3 holding inf, row 4 a NaN,
     * row 5 zeros, row 6 a NaN beside 5e4; row 0 ordinary */
    x[(size_t)(1 * cols + cols / 2)] = -1e5f;
    x[(size_t)(2 * cols + 0)] = XS_LIMIT;
    x[(size_t)(3 * cols + cols - 1)] = INFINITY;
    x[(size_t)(4 * cols + 1 % cols)] = NAN;
    for (int64_t j = 0; j < cols; j++) x[(size_t)(5 * cols + j)] = 0.0f;
    x[(size_t)(6 * cols)] = NAN, x[(size_t)(6 * cols + cols - 1)] = 5e4f; /* row 6 */
    const uint16_t HS = 0xBEEF;
    const float SS = -7.0f;
    /* one row more than launched in each output: untouched */
    std::vector<uint16_t> xh((size_t)((NB + 1) * cols), HS);
    std::vector<float> scale(NB + 1, SS);
    static float red[XS_THREADS / 32]; /* the kernel's __shared__ */
    CHECK(sl_shim_launch(sl_shim_dim3{NB, 1, 1}, XS_THREADS,
                         [&] { xs_row(x.data(), cols, xh.data(), scale.data(), red); },
                         [&] { for (float &r : red) r = 1e30f; })); /* read early: a scale */
    /* 1e5 / 2^3 and 5e4 / 2^2 come under 16384 */
    const float want_s[NB] = {1.0f, 8.0f, 1.0f, 1.0f, 1.0f, 1.0f, 4.0f};
    long bad = 0;
    for (int b = 0; b < NB; b++) {
        bad += scale[(size_t)b] != want_s[b];
        for (int64_t j = 0; j < cols; j++) {
            const size_t i = (size_t)(b * cols + j);
            const uint16_t want = sl_quant_fp32_to_fp16(x[i] / want_s[b]);
            const bool nan = std::isnan(x[i]);
            /* a NaN's payload is the device's choice: any NaN */
            const bool ok = nan ? (xh[i] & 0x7C00) == 0x7C00 && (xh[i] & 0x3FF) : xh[i] == want;
            if (!ok && bad++ < 5)
                fprintf(stderr, "x_f16 cols %lld row %d [%lld]: %04x, want %04x\n",
                        (long long)cols, b, (long long)j, xh[i], want);
        }
    }
    for (int64_t j = 0; j < cols; j++) bad += xh[(size_t)(NB * cols + j)] != HS;
    bad += scale[NB] != SS;
    CHECK_MSG(bad == 0, "x_f16 cols %lld: %ld values wrong or written past the rows",
              (long long)cols, bad);
}

static void rows_scale(int64_t rows, int64_t n_batch, unsigned grid_y)
{
    std::vector<float> y((size_t)(n_batch * rows)), scale((size_t)n_batch);
    for (float &v : y) v = rnd_f(-3.0f, 3.0f);
    for (int64_t b = 0; b < n_batch; b++) scale[(size_t)b] = b % 3 ? 1.0f : (float)(2 << b % 5);
    const std::vector<float> y0(y);
    xs_grid g = xs_rows_scale_grid(rows, n_batch);
    if (grid_y) g.y = grid_y; /* fewer block rows than Y rows: the stride gridDim.y passes */
    CHECK(sl_shim_launch(sl_shim_dim3{g.x, g.y, 1}, XS_SCALE_THREADS,
                         [&] { xs_rows_scale(y.data(), rows, n_batch, scale.data()); }));
    long bad = 0;
    for (int64_t b = 0; b < n_batch; b++)
        for (int64_t j = 0; j < rows; j++) {
            const size_t i = (size_t)(b * rows + j);
            bad += memcmp(&y[i], &y0[i], 4) && scale[(size_t)b] == 1.0f;
            bad += y[i] != y0[i] * scale[(size_t)b];
        }
    CHECK_MSG(bad == 0, "rows_scale %lld x %lld (grid y %u): %ld values wrong", (long long)rows,
              (long long)n_batch, g.y, bad);
}

int main(void)
{
    x_rows(300);  /* a partial second stride of the block */
    x_rows(1029);
    x_rows(5);    /* fewer columns than warps: most threads see none */
    rows_scale(300, 7, 0);
    rows_scale(700, 9, 2);
    return sl_test_finish("x_f16_host_test");
}
