/* tests/kernels_cuda/gemv_multi_host_test: the multi-matrix GEMV (kernels/cuda/gemv_multi.cuh:
 * k_gemv_multi's body, gemv_multi.h) run on the CPU, each thread of a block a host thread
 * (host_shim/launch.h), with the arguments and grid gemv_multi.cu launches it with
 * (gm_heads_args / gm_multi_args, gm_grid_x). Why: CI has no GPU, and the kernel is in every
 * decode layer (deepseek2's per-head k_b / v_b, Q/K/V, gate/up + SwiGLU, the router + bias).
 * For every type sl_qt lists:
 * - per head: 3 heads of 5 rows (a row block past the matrix's end) at odd addresses 3 bytes
 *   apart, 2 tokens, x and y strided per head and token with gaps (odd float strides);
 * - several matrices: 4 matrices of mixed types (this one, Q8_0, this one, F16) at odd
 *   addresses, rows 5, 3, 9, 2 (row blocks straddling matrices), bias on two, 2 tokens;
 * - SwiGLU: gate of this type, up Q4_K, 6 rows: y0 = silu(gate) * up, y1 = up;
 * columns past 32 units a row (lanes loop; float types a count not a multiple of 32).
 * Outputs against gemv_ref.h's float64 dot and cuda_fused_test's bound (GEMV_MULTI_TOL_S, _ABS,
 * gemv_ref_glu_tol); every float of an output buffer no case checks still the sentinel
 * (ybuf.h); buffers of exactly their size (the ASan build flags an access past one). No
 * faulting access: (these bodies make no __ldg / cp.async the shim counts; the UBSan build checks their plain
 * accesses' alignment) */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"                            /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/gemv_multi_cuh.h" /* kernels/cuda/gemv_multi.cuh (BUILD) */
#include "tests/kernels_cuda/gemv_ref.h"
#include "tests/kernels_cuda/rand_weights.h"
#include "tests/kernels_cuda/ybuf.h"

extern "C" {
#include "tests/testing.h"
}

static int n_reports = 0;
static long n_checked = 0;

static const char *tname(uint32_t T) { return sl_gguf_type_get(T)->name; }

/* |got - want| <= tol, the first 20 failures reported */
static void check_val(const char *what, uint32_t T, float got, double want, double tol,
                      long t, long h, long r)
{
    n_checked++;
    const bool ok = std::fabs((double)got - want) <= tol;
    CHECK(ok || n_reports > 20);
    if (!ok && n_reports++ < 20)
        fprintf(stderr, "%s %s token %ld head/matrix %ld row %ld: %.9g, float64 %.9g (tol "
                "%.3g)\n", what, tname(T), t, h, r, (double)got, want, tol);
}

static void untouched(const ybuf &Y, const char *what, uint32_t T)
{
    long bad = 0;
    Y.each_unseen([&](size_t i, float v) {
        n_checked++;
        if (v != YBUF_SENTINEL && bad++ < 5)
            fprintf(stderr, "%s %s: float %zu written (%.9g)\n", what, tname(T), i, (double)v);
    });
    CHECK_MSG(bad == 0, "%s %s: %ld floats written outside the outputs", what, tname(T), bad);
}

/* k_gemv_multi's launch (gm_run): n_head x n tokens, no fault-prone loads */
static void launch(const gm_args &a, unsigned n_head, unsigned n, uint32_t T, const char *what)
{
    const long faults0 = sl_shim_align_faults.load();
    const sl_shim_dim3 grid{(unsigned)gm_grid_x(a.row0[a.count]), n_head, n};
    CHECK(sl_shim_launch(grid, GM_THREADS, [&] { gm_block(a); }));
    const long faults = sl_shim_align_faults.load() - faults0;
    CHECK_MSG(faults == 0, "%s %s: %ld loads at addresses that fault on the device", what,
              tname(T), faults);
}

/* n floats, random in [-1, 1), in an allocation of exactly n (x: reads past it are ASan's) */
static std::vector<float> rand_x(size_t n)
{
    std::vector<float> x(n);
    for (float &v : x) v = rnd_f(-1.0f, 1.0f);
    return x;
}

/* sl_cuda_gemv_heads: NH heads of ROWS rows, heads HPAD bytes apart past their matrices, the
 * first at an odd address; x and y of token t, head h at t * ts + h * hs, with gaps */
template <uint32_t T> static void heads(int64_t cols)
{
    enum { NH = 3, ROWS = 5, NT = 2, HPAD = 3, WOFF = 1 };
    rand_mat m; /* the heads' values, head after head */
    CHECK(m.make(T, NH * ROWS, cols, 0, (int)cols));
    const int64_t head_bytes = ROWS * (int64_t)m.rb + HPAD;
    const size_t wbytes = WOFF + (size_t)((NH - 1) * head_bytes) + ROWS * m.rb;
    uint8_t *wmem = (uint8_t *)malloc(wbytes);
    if (!wmem) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    memset(wmem, 0xA5, wbytes);
    for (int h = 0; h < NH; h++)
        memcpy(wmem + WOFF + h * head_bytes, m.w + (size_t)h * ROWS * m.rb, ROWS * m.rb);
    const int64_t x_hs = cols + 1, x_ts = NH * x_hs + 2, y_hs = ROWS + 1, y_ts = NH * y_hs + 3;
    const std::vector<float> x = rand_x((size_t)(NT * x_ts));
    ybuf Y((size_t)(NT * y_ts));
    const gm_args a = gm_heads_args(T, wmem + WOFF, head_bytes, ROWS, (int64_t)m.rb, cols,
                                    x.data(), x_ts, x_hs, Y.y.data(), y_ts, y_hs);
    launch(a, NH, NT, T, "heads");
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < ROWS; r++) {
                double want, tol;
                gemv_ref_dot(m.f.data() + (h * ROWS + r) * cols, x.data() + t * x_ts + h * x_hs,
                             cols, GEMV_MULTI_TOL_S, GEMV_MULTI_TOL_ABS, &want, &tol);
                check_val("heads", T, Y.at((size_t)(t * y_ts + h * y_hs + r)), want, tol, t, h,
                          r);
            }
    untouched(Y, "heads", T);
    free(wmem);
}

/* sl_cuda_gemv_multi: 4 matrices of mixed types on one x, bias on matrices 1 and 2 */
template <uint32_t T> static void multi(int64_t cols)
{
    enum { NM = SL_CUDA_GEMV_MULTI_MAX, NT = 2 };
    const uint32_t types[NM] = {T, SL_GGML_Q8_0, T, SL_GGML_F16};
    const int64_t rows[NM] = {5, 3, 9, 2};
    const size_t woff[NM] = {1, 3, 0, 2};
    rand_mat m[NM];
    std::vector<float> bias[NM];
    std::vector<ybuf> Y;
    sl_cuda_gemv_mat ms[NM];
    int64_t rb[NM];
    for (int i = 0; i < NM; i++) Y.emplace_back((size_t)(NT * rows[i]));
    for (int i = 0; i < NM; i++) {
        CHECK(m[i].make(types[i], rows[i], cols, woff[i], 7 + i));
        if (i == 1 || i == 2) bias[i] = rand_x((size_t)rows[i]);
        rb[i] = (int64_t)m[i].rb;
        ms[i] = sl_cuda_gemv_mat{types[i], m[i].w, rows[i], bias[i].empty() ? nullptr
                                                                            : bias[i].data(),
                                 Y[i].y.data()};
    }
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ms, rb, NM, cols, x.data(), false);
    launch(a, 1, NT, T, "multi");
    for (int i = 0; i < NM; i++)
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < rows[i]; r++) {
                double want, tol;
                gemv_ref_dot(m[i].f.data() + r * cols, x.data() + t * cols, cols,
                             GEMV_MULTI_TOL_S, GEMV_MULTI_TOL_ABS, &want, &tol);
                if (!bias[i].empty()) want += bias[i][(size_t)r];
                check_val("multi", types[i], Y[i].at((size_t)(t * rows[i] + r)), want, tol, t, i,
                          r);
            }
}

/* sl_cuda_gemv_multi with silu_glu: gate (this type), up (Q4_K) */
template <uint32_t T> static void glu(int64_t cols)
{
    enum { ROWS = 6, NT = 2 };
    const uint32_t types[2] = {T, SL_GGML_Q4_K};
    rand_mat m[2];
    ybuf Y[2] = {ybuf(NT * ROWS), ybuf(NT * ROWS)};
    sl_cuda_gemv_mat ms[2];
    int64_t rb[2];
    for (int i = 0; i < 2; i++) {
        CHECK(m[i].make(types[i], ROWS, cols, (size_t)i, 11 + i));
        rb[i] = (int64_t)m[i].rb;
        ms[i] = sl_cuda_gemv_mat{types[i], m[i].w, ROWS, nullptr, Y[i].y.data()};
    }
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ms, rb, 2, cols, x.data(), true);
    launch(a, 1, NT, T, "glu");
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < ROWS; r++) {
            double g, tg, u, tu;
            gemv_ref_dot(m[0].f.data() + r * cols, x.data() + t * cols, cols, GEMV_MULTI_TOL_S,
                         GEMV_MULTI_TOL_ABS, &g, &tg);
            gemv_ref_dot(m[1].f.data() + r * cols, x.data() + t * cols, cols, GEMV_MULTI_TOL_S,
                         GEMV_MULTI_TOL_ABS, &u, &tu);
            const double silu = g / (1.0 + std::exp(-g)), h = silu * u;
            check_val("glu up", types[1], Y[1].at((size_t)(t * ROWS + r)), u, tu, t, 1, r);
            check_val("glu", T, Y[0].at((size_t)(t * ROWS + r)), h,
                      gemv_ref_glu_tol(tg, tu, u, silu, h), t, 0, r);
        }
}

static int n_types = 0;

struct check_type {
    template <uint32_t T> void operator()()
    {
        /* 40 units of 32 for every block type (256 divides it: mixed types share it); float
         * types a length no multiple of 32 */
        const int64_t cols = sl_qt_block<T>::FLOAT ? 1100 : 1280;
        heads<T>(cols);
        multi<T>(1280);
        glu<T>(1280);
        n_types++;
        printf("gemv_multi_host_test: %-7s ok so far (%ld values checked)\n", tname(T),
               n_checked);
        fflush(stdout);
    }
};

int main(void)
{
    sl_qt_for_each(check_type{});
    CHECK_MSG(n_types == 23, "%d types checked (23 expected)", n_types);
    printf("gemv_multi_host_test: %d types, %ld values\n", n_types, n_checked);
    return sl_test_finish("gemv_multi_host_test");
}
