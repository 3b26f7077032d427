/* tests/kernels_cuda/gemv_grouped_host_test: the MoE prefill's grouped expert GEMV
 * (kernels/cuda/gemv_grouped.cuh: k_expert_order's counting sort, then k_gemv_grouped over the
 * order it wrote) run on the CPU, each thread of a block a host thread (host_shim/launch.h).
 * Why: CI has no GPU, and the two kernels are the default prefill path of every MoE model's
 * routed experts.
 * The sort, one block of its threads, over slot counts from 1 to past the block and expert
 * counts to SL_CUDA_GROUPED_MAX_EXPERTS, ids repeated and out of range (-1, n_expert, INT32_MIN
 * / MAX): the starts are the exclusive scan of the experts' counts with the out-of-range ids
 * last, and each expert's slots are exactly the slots of that id (as a set: atomics order them).
 * The GEMV, for every type sl_cuda_gemv_grouped_supported takes: experts without slots and ids
 * out of range (their rows exactly 0), rows past the last GG_ROWS tile, lanes looping over more
 * than 32 units, expert matrices at odd addresses (the bytewise staging), X rows shared by
 * x_group slots and at an address off 16 bytes (the scalar loads); against gemv_ref.h's float64
 * dot and bound (the kernel's sums are k_gemv's: gemv_grouped.h). Buffers are allocated to
 * their size (the ASan build flags a read or write past one); no vector load at an address
 * that faults on the device. */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "launch.h"                              /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/gemv_grouped_cuh.h" /* kernels/cuda/gemv_grouped.cuh (BUILD) */
#include "tests/kernels_cuda/gemv_ref.h"
#include "tests/kernels_cuda/rand_weights.h"

extern "C" {
#include "tests/testing.h"
}

static const float SENTINEL = -12345.0f; /* an output the launch did not write */

/* the expert a slot's id counts under: out-of-range ids under n_expert */
static int32_t bucket(int32_t id, int32_t n_expert)
{
    return id >= 0 && id < n_expert ? id : n_expert;
}

/* k_expert_order's launch (sl_cuda_expert_order: one block of GO_THREADS) into an order buffer
 * of exactly sl_cuda_expert_order_bytes, poisoned first. */
static std::vector<int32_t> expert_order(const std::vector<int32_t> &ids, int32_t n_expert)
{
    const int32_t n_sel = (int32_t)ids.size();
    const size_t bytes = sl_cuda_expert_order_bytes(n_expert, n_sel);
    CHECK(bytes == ((size_t)n_expert + 2 + (size_t)n_sel) * sizeof(int32_t));
    int32_t *order = (int32_t *)malloc(bytes);
    if (!order) {
        CHECK_MSG(0, "out of memory");
        return {};
    }
    memset(order, 0xA5, bytes);
    CHECK(sl_shim_launch(sl_shim_dim3{1, 1, 1}, GO_THREADS,
                         [&] { k_expert_order(ids.data(), n_sel, n_expert, order); }));
    std::vector<int32_t> r(order, order + bytes / sizeof(int32_t));
    free(order);
    return r;
}

/* The order of ids against its definition (gemv_grouped.h). */
static void check_order(const char *what, const std::vector<int32_t> &ids, int32_t n_expert,
                        const std::vector<int32_t> &order)
{
    const int32_t n_sel = (int32_t)ids.size();
    if (order.size() != (size_t)n_expert + 2 + (size_t)n_sel) return; /* (reported) */
    std::vector<std::vector<int32_t>> want((size_t)n_expert + 1);
    for (int32_t s = 0; s < n_sel; s++) want[(size_t)bucket(ids[s], n_expert)].push_back(s);
    const int32_t *start = order.data(), *slots = start + n_expert + 2;
    int32_t at = 0, bad_start = -1, bad_set = -1;
    for (int32_t e = 0; e <= n_expert; e++) {
        const int32_t k = (int32_t)want[(size_t)e].size();
        if (start[e] != at || start[e + 1] != at + k) {
            if (bad_start < 0) bad_start = e;
            at += k;
            continue;
        }
        std::vector<int32_t> got(slots + at, slots + at + k);
        std::sort(got.begin(), got.end());
        if (got != want[(size_t)e] && bad_set < 0) bad_set = e;
        at += k;
    }
    CHECK_MSG(bad_start < 0, "%s (n_sel %d, n_expert %d): start[%d] = %d, start[%d] = %d: not "
              "the exclusive scan of the counts", what, n_sel, n_expert, bad_start,
              bad_start < 0 ? 0 : start[bad_start], bad_start + 1,
              bad_start < 0 ? 0 : start[bad_start + 1]);
    CHECK_MSG(bad_set < 0, "%s (n_sel %d, n_expert %d): expert %d's slots are not its ids'",
              what, n_sel, n_expert, bad_set);
}

static void sort_case(const char *what, int32_t n_sel, int32_t n_expert)
{
    std::vector<int32_t> ids((size_t)n_sel);
    const int32_t odd[5] = {-1, n_expert, INT32_MIN, INT32_MAX, n_expert + 1};
    for (int32_t s = 0; s < n_sel; s++) {
        const uint32_t r = rnd_u32();
        /* a few hot experts (repeats past a warp's worth), the rest spread, 1 in 8 out of range */
        ids[(size_t)s] = r % 8 == 0   ? odd[(r >> 3) % 5]
                         : r % 8 < 4 ? (int32_t)((r >> 3) % (uint32_t)std::min(n_expert, 3))
                                      : (int32_t)((r >> 3) % (uint32_t)n_expert);
    }
    check_order(what, ids, n_expert, expert_order(ids, n_expert));
}

static int n_types = 0;
static long n_checked = 0;

struct check_type {
    template <uint32_t T> void operator()()
    {
        const bool takes = sl_cuda_gemv_grouped_supported(T);
        CHECK_MSG(takes == !sl_qt_block<T>::FLOAT, "%s: grouped GEMV support %d",
                  sl_gguf_type_get(T)->name, (int)takes);
        if constexpr (!sl_qt_block<T>::FLOAT) run<T>();
    }

    template <uint32_t T> void run()
    {
        enum { NE = 5, NS = 14 };
        /* 2 row tiles, the second partial; 2304 columns: 72 or more units, lanes loop */
        const int64_t rows = GG_ROWS + 5, cols = 2304;
        /* expert 2 has no slot; -1, NE and INT32_MAX are out of range; expert 0 repeats */
        const int32_t ids[NS] = {0, 3, -1, 1, 0, NE, 4, 0, 1, INT32_MAX, 3, 0, 4, 1};
        const size_t woff[NE] = {0, 1, 0, 2, 0}; /* experts 1 and 3 at odd addresses */
        rand_mat m[NE];
        const void *wp[NE];
        for (int e = 0; e < NE; e++) {
            CHECK(m[e].make(T, rows, cols, woff[e], 40 + e));
            wp[e] = m[e].w;
        }
        const std::vector<int32_t> order = expert_order(std::vector<int32_t>(ids, ids + NS), NE);
        if (order.empty()) return;
        const int32_t groups[2] = {1, 3};
        for (int gi = 0; gi < 2; gi++) {
            const int32_t xg = groups[gi];
            const int64_t n_x = (NS + xg - 1) / xg, xoff = gi; /* x_group 3: X off by a float */
            const size_t xn = (size_t)(n_x * cols + 7) / 4 * 4; /* whole 16 bytes, a float more */
            float *xb = (float *)aligned_alloc(16, xn * sizeof(float));
            std::vector<float> y((size_t)(NS * rows), SENTINEL);
            if (!xb) {
                CHECK_MSG(0, "out of memory");
                return;
            }
            float *x = xb + xoff;
            for (int64_t i = 0; i < n_x * cols; i++) x[i] = rnd_f(-1.0f, 1.0f);
            gg_args a;
            sl_grouped_args_fill(&a, wp, NE, order.data(), rows, cols, (int64_t)m[0].rb, xg,
                                 y.data());
            a.x = x;
            const long faults0 = sl_shim_align_faults.load();
            /* sl_grouped_grid: row tiles x (the experts and the out-of-range slots) */
            const sl_shim_dim3 grid{(unsigned)((rows + GG_ROWS - 1) / GG_ROWS), NE + 1, 1};
            CHECK(sl_shim_launch(grid, GG_THREADS, [&] { k_gemv_grouped<T>(a); }));
            const long faults = sl_shim_align_faults.load() - faults0;
            CHECK_MSG(faults == 0, "%s: %ld loads at addresses that fault on the device",
                      sl_gguf_type_get(T)->name, faults);
            int bad = 0;
            for (int s = 0; s < NS; s++)
                for (int64_t r = 0; r < rows; r++) {
                    const float got = y[(size_t)(s * rows + r)];
                    double want = 0, tol = 0;
                    if (ids[s] >= 0 && ids[s] < NE)
                        gemv_ref_dot(m[ids[s]].f.data() + r * cols, x + (s / xg) * cols, cols,
                                     GEMV_REF_TOL_S, GEMV_REF_TOL_ABS, &want, &tol);
                    n_checked++;
                    if (std::fabs((double)got - want) <= tol) continue; /* (0: exactly) */
                    if (bad++ < 5)
                        fprintf(stderr, "%s x_group %d slot %d (id %d) row %lld: %.9g, "
                                "float64 %.9g (tol %.3g)\n", sl_gguf_type_get(T)->name, xg, s,
                                ids[s], (long long)r, (double)got, want, tol);
                }
            CHECK_MSG(bad == 0, "%s x_group %d: %d of %d outputs wrong",
                      sl_gguf_type_get(T)->name, xg, bad, NS * (int)rows);
            free(xb);
        }
        n_types++;
        printf("gemv_grouped_host_test: %-7s ok so far (%ld outputs checked)\n",
               sl_gguf_type_get(T)->name, n_checked);
        fflush(stdout);
    }
};

int main(void)
{
    /* slots: one, a few, a block's worth and one over, several rounds of the block; experts:
     * one, a few, the most */
    const int32_t sels[6] = {1, 7, GO_THREADS, GO_THREADS + 1, 3 * GO_THREADS + 17, 4000};
    const int32_t experts[4] = {1, 3, 129, SL_CUDA_GROUPED_MAX_EXPERTS};
    for (int32_t ns : sels)
        for (int32_t ne : experts) sort_case("k_expert_order", ns, ne);
    sl_qt_for_each(check_type{});
    CHECK_MSG(n_types == 20, "%d quantized types checked (20 expected)", n_types);
    printf("gemv_grouped_host_test: %d types, %ld outputs\n", n_types, n_checked);
    return sl_test_finish("gemv_grouped_host_test");
}
