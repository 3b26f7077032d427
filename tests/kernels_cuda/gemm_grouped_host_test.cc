/* tests/kernels_cuda/gemm_grouped_host_test: the tensor-core grouped expert GEMM's kernel
 * (kernels/cuda/gemm_grouped.cuh k_gemm_grouped) run on the CPU for every quantized type: each
 * thread of a block a host thread meeting at __syncthreads, the WMMA calls by host stand-ins
 * that check their alignment rules (host_shim/launch.h, mma.h). Why: CI has no GPU, and the
 * kernel's tiling (row tiles past the last row, slot tiles past 32 slots, experts without slots,
 * ids out of range, columns that end half-way through a K step, X rows shared by x_group slots,
 * each X row's scale, expert matrices at odd addresses) is what a GPU run would otherwise find
 * first. Each output against the float64 sum of the F16-rounded operands (the kernel's inputs
 * exactly; only the F32 summation differs) within 1e-5 of sum |w||x|, and against the unrounded
 * product within F16's 2e-3 as cuda_kernels_matmul_test bounds sl_cuda_gemm. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launch.h"                              /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/gemm_grouped_cuh.h" /* kernels/cuda/gemm_grouped.cuh (BUILD) */
#include "tests/kernels_cuda/rand_weights.h"

extern "C" {
#include "tests/testing.h"
}

enum { NE = 4, NS = 61 };

/* the order sl_cuda_expert_order writes: [NE + 2] starts (out-of-range ids last), the slots */
static void order_of(const int32_t *ids, int32_t *order)
{
    int32_t *start = order, *slots = order + NE + 2, at = 0;
    for (int e = 0; e <= NE; e++) {
        start[e] = at;
        for (int s = 0; s < NS; s++)
            if ((ids[s] >= 0 && ids[s] < NE ? ids[s] : NE) == e) slots[at++] = s;
    }
    start[NE + 1] = at;
}

static int n_checked = 0;

struct check_type {
    template <uint32_t T> void operator()()
    {
        if constexpr (!sl_qt_block<T>::FLOAT) run<T>();
    }

    template <uint32_t T> void run()
    {
        const sl_gguf_type_info *ti = sl_gguf_type_get(T);
        /* 32-value blocks: 3 units (a K step and a half); K-quants: 2 blocks (8 steps) */
        const int64_t cols = ti->block_size == 32 ? 96 : 512, rows = 70; /* 2 row tiles */
        const size_t mbytes = sl_quant_row_bytes(T, cols) * rows;
        uint8_t *base[NE];
        const uint8_t *wp[NE];
        float *wf[NE];
        float *scratch = (float *)malloc((size_t)(rows * cols) * sizeof(float));
        sl_error err;
        bool ok = scratch != NULL;
        for (int e = 0; e < NE; e++) {
            /* experts 1 and 3 at odd addresses: the kernel reads any alignment */
            const int off = e == 1 ? 2 : e == 3 ? 1 : 0;
            base[e] = (uint8_t *)malloc(mbytes + 16);
            wf[e] = (float *)malloc((size_t)(rows * cols) * sizeof(float));
            ok = ok && base[e] && wf[e];
            if (!ok) break;
            wp[e] = base[e] + off;
            ok = rand_weights(T, rows * cols, base[e] + off, scratch, e) &&
                 sl_quant_dequant_row(T, base[e] + off, wf[e], rows * cols, &err) == SL_OK;
        }
        CHECK_MSG(ok, "%s: weights", ti->name);
        if (!ok) return; /* (a test of a broken build: leaks what it had) */
        /* ids: expert 0 takes 42 slots (two slot tiles), expert 2 none, two ids out of range */
        int32_t ids[NS], order[NE + 2 + NS];
        for (int s = 0; s < NS; s++)
            ids[s] = s == 7 ? NE : s == 30 ? -1 : s % 5 == 4 ? 1 : s % 9 == 8 ? 3 : 0;
        order_of(ids, order);
        const int32_t groups[2] = {1, 3};
        for (int gi = 0; gi < 2; gi++) {
            const int32_t xg = groups[gi], n_x = (NS + xg - 1) / xg;
            float *x = (float *)malloc((size_t)(n_x * cols) * sizeof(float));
            __half *xh = (__half *)aligned_alloc(16, (size_t)(n_x * cols) * 2);
            float *xs = (float *)malloc((size_t)n_x * sizeof(float));
            float *y = (float *)malloc((size_t)(NS * rows) * sizeof(float));
            if (!x || !xh || !xs || !y) {
                CHECK_MSG(0, "out of memory");
                return;
            }
            /* X rows at different powers of two (X / scale in F16, as gemm.cu converts) */
            for (int32_t r = 0; r < n_x; r++) {
                xs[r] = r % 3 == 1 ? 128.0f : r % 3 == 2 ? 0.25f : 1.0f;
                for (int64_t c = 0; c < cols; c++) {
                    x[r * cols + c] = rnd_f(-1.0f, 1.0f) * xs[r];
                    xh[r * cols + c] = __float2half_rn(x[r * cols + c] / xs[r]);
                }
            }
            for (int i = 0; i < NS * rows; i++) y[i] = 12345.0f;
            gm_args a;
            sl_grouped_args_fill(&a, (const void *const *)wp, NE, order, rows, cols,
                                 (int64_t)sl_quant_row_bytes(T, cols), xg, y);
            a.xh = xh;
            a.xscale = xs;
            const long faults0 = sl_shim_wmma_faults.load();
            CHECK(sl_shim_launch(sl_shim_dim3{(unsigned)((rows + GM_BM - 1) / GM_BM), NE + 1, 1},
                                 GM_THREADS, [&] { k_gemm_grouped<T>(a); }));
            CHECK_MSG(sl_shim_wmma_faults.load() == faults0, "%s: %ld WMMA calls broke an "
                      "alignment rule", ti->name, sl_shim_wmma_faults.load() - faults0);
            int bad = 0, bad16 = 0;
            for (int s = 0; s < NS; s++)
                for (int64_t r = 0; r < rows; r++) {
                    const float got = y[s * rows + r];
                    if (ids[s] < 0 || ids[s] >= NE) {
                        bad += got != 0.0f;
                        continue;
                    }
                    const float *w = wf[ids[s]] + r * cols;
                    const float *xr = x + (s / xg) * cols;
                    const __half *hr = xh + (s / xg) * cols;
                    double want = 0, want16 = 0, mag = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        const double wh = __half2float(__float2half_rn(w[c]));
                        want16 += wh * __half2float(hr[c]);
                        want += (double)w[c] * xr[c];
                        mag += fabs((double)w[c] * xr[c]);
                    }
                    want16 *= xs[s / xg];
                    if (!(fabs(got - want16) <= 1e-5 * mag + 1e-30)) {
                        if (!bad)
                            fprintf(stderr, "%s x_group %d slot %d row %lld: %.9g, float64 of "
                                    "the F16 operands %.9g\n", ti->name, xg, s, (long long)r,
                                    got, want16);
                        bad++;
                    }
                    bad16 += !(fabs(got - want) <= 2e-3 * mag + 1e-6);
                }
            CHECK_MSG(bad == 0, "%s x_group %d: %d of %d outputs wrong", ti->name, xg, bad,
                      NS * (int)rows);
            CHECK_MSG(bad16 == 0, "%s x_group %d: %d outputs beyond F16's bound", ti->name, xg,
                      bad16);
            free(x), free(xh), free(xs), free(y);
        }
        for (int e = 0; e < NE; e++) free(base[e]), free(wf[e]);
        free(scratch);
        n_checked++;
        printf("gemm_grouped_host_test: %-7s ok\n", ti->name);
    }
};

int main(void)
{
    check_type c;
    sl_qt_for_each(c);
    CHECK_MSG(n_checked == 20, "%d quantized types checked (20 expected)", n_checked);
    return sl_test_finish("gemm_grouped_host_test");
}
