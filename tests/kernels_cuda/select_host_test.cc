/* tests/kernels_cuda/select_host_test: the selection kernels' bodies (kernels/cuda/select.cuh:
 * router_body, what k_router runs for sl_cuda_router_topk; argmax_body, k_argmax's for
 * sl_cuda_argmax) on the CPU, each thread of a block a host thread (shuffles and barriers:
 * host_shim/launch.h), their shared memory poisoned before each block, launched as ops.cu
 * launches them (a warp a token, router_smem's shared memory; one block of ARGMAX_THREADS),
 * against kernels/ref (sl_ref_router_topk, sl_ref_argmax). Why: CI has no GPU, and the router
 * decides which experts every MoE layer runs: an index off is a wrong model, not a rounding.
 * Router: the architectures' modes — softmax top-k normalised or not (mixtral, qwen3moe,
 * qwen2moe), sigmoid + expert score bias + group-limited top-k (deepseek2: top 1, 3, 4 of 8
 * groups, 60 groups of one with k past the groups' experts), softmax over the selected k
 * (gpt-oss, also with a bias that reorders it) — over 8 to SL_CUDA_ROUTER_MAX_EXPERT experts,
 * k up to n_expert, and logits on a coarse grid so scores and group scores tie (the reference
 * takes the lower index): indices exact, weights within ops_tol.h's rule (the GPU test's).
 * Argmax: ties (the lowest index wins), rows longer than the block, -inf masks, NaN and +inf
 * reported at their lowest index, all -inf, empty. Neither writes past its outputs (a token
 * row past the launch's, the result's neighbours). No faulting access: (these bodies make no __ldg / cp.async the shim counts; the UBSan build checks their plain
 * accesses' alignment) */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "launch.h"                        /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/ops_tol.h"
#include "tests/kernels_cuda/rng.h"
#include "tests/kernels_cuda/select_cuh.h" /* kernels/cuda/select.cuh (BUILD) */

extern "C" {
#include "kernels/ref/ops.h"
#include "tests/testing.h"
}

static const float SENTINEL = -12345.0f; /* an output a launch must not write */
static const int32_t ISENTINEL = -77;

struct rvariant {
    const char *what;
    sl_gating gating;
    int32_t E, k, T;
    bool norm, bias;
    float scale;
    int32_t n_group, top_group;
    bool ties; /* logits (and bias) on a coarse grid: equal scores, equal group scores */
};

static void run_router(int vi, const rvariant &V)
{
    const int32_t E = V.E, k = V.k, T = V.T;
    /* logits exactly T rows (the ASan build flags a read past them); outputs a row more */
    std::vector<float> lg((size_t)T * E), bias((size_t)E);
    std::vector<float> w((size_t)(T + 1) * k, SENTINEL), rw((size_t)k);
    std::vector<int32_t> idx((size_t)(T + 1) * k, ISENTINEL), ri((size_t)k);
    for (float &x : lg)
        x = V.ties ? (float)((int)(rnd_u32() % 5) - 2) : rnd_f(-4.0f, 4.0f);
    for (float &x : bias)
        x = V.ties ? 0.25f * (float)((int)(rnd_u32() % 3) - 1) : rnd_f(-0.1f, 0.1f);
    const sl_router_params p = {.gating = V.gating, .n_expert = E, .k = k, .norm_topk = V.norm,
                                .bias = V.bias ? bias.data() : nullptr,
                                .weight_scale = V.scale, .n_group = V.n_group,
                                .top_group = V.top_group};
    const int32_t G = router_groups(p.n_group); /* as sl__cuda_router_check */
    const router_args ra = {E, k, (int32_t)p.gating, G, p.top_group, p.norm_topk, p.bias,
                            p.weight_scale, idx.data(), w.data()};
    std::vector<double> rs(router_smem(E, G) / sizeof(double));
    std::vector<int32_t> sel(SL_CUDA_ROUTER_MAX_EXPERT);
    const long faults0 = sl_shim_align_faults.load();
    CHECK(sl_shim_launch(
        sl_shim_dim3{(unsigned)T, 1, 1}, 32,
        [&] {
            router_body(lg.data(), blockIdx.x, ra, rs.data(), sel.data());
        },
        [&] {
            for (double &x : rs) x = NAN;
            for (int32_t &x : sel) x = ISENTINEL;
        }));
    CHECK_MSG(sl_shim_align_faults.load() == faults0, "router variant %d: misaligned accesses",
              vi);
    int bad_i = 0, bad_w = 0, ties = 0;
    for (int32_t t = 0; t < T; t++) {
        sl_error e;
        CHECK_MSG(sl_ref_router_topk(&lg[(size_t)t * E], &p, ri.data(), rw.data(), &e) == SL_OK,
                  "%s", e.msg);
        for (int32_t j = 0; j < k; j++) {
            const size_t o = (size_t)t * k + (size_t)j;
            if (idx[o] != ri[(size_t)j] && !bad_i++)
                fprintf(stderr, "router variant %d token %d [%d]: expert %d, reference %d\n", vi,
                        t, j, idx[o], ri[(size_t)j]);
            if (!router_w_close(w[o], rw[(size_t)j]) && !bad_w++)
                fprintf(stderr, "router variant %d token %d [%d]: weight %.9g, reference %.9g\n",
                        vi, t, j, (double)w[o], (double)rw[(size_t)j]);
            /* equal logits (and biases) next to each other in the pick: a tie ordered */
            if (j && lg[(size_t)t * E + (size_t)ri[(size_t)j]] ==
                         lg[(size_t)t * E + (size_t)ri[(size_t)j - 1]] &&
                (!V.bias || bias[(size_t)ri[(size_t)j]] == bias[(size_t)ri[(size_t)j - 1]]))
                ties++;
        }
    }
    int past = 0;
    for (size_t o = (size_t)T * k; o < idx.size(); o++)
        past += idx[o] != ISENTINEL || w[o] != SENTINEL;
    CHECK_MSG(bad_i == 0, "router variant %d (%s): %d indices off", vi, V.what, bad_i);
    CHECK_MSG(bad_w == 0, "router variant %d (%s): %d weights off", vi, V.what, bad_w);
    CHECK_MSG(past == 0, "router variant %d (%s): %d outputs past the tokens written", vi,
              V.what, past);
    CHECK_MSG(!V.ties || ties > 0, "router variant %d (%s): no tie among the picks", vi, V.what);
    printf("select_host_test: router %d (%s): %d tied picks\n", vi, V.what, ties);
}

/* argmax over n values made by fill; r the middle of three results, its neighbours must stay */
template <typename F> static void run_argmax(int vi, const char *what, int32_t n, F fill)
{
    std::vector<float> x((size_t)n); /* exactly n: the ASan build flags a read past them */
    for (int32_t i = 0; i < n; i++) x[(size_t)i] = rnd_f(-30.0f, 30.0f);
    fill(x);
    sl_argmax_result r[3], want;
    memset(r, 0x5A, sizeof r);
    std::vector<float> sv(ARGMAX_THREADS);
    std::vector<int32_t> si(ARGMAX_THREADS), sb(ARGMAX_THREADS);
    const long faults0 = sl_shim_align_faults.load();
    CHECK(sl_shim_launch(
        sl_shim_dim3{1, 1, 1}, ARGMAX_THREADS,
        [&] { argmax_body(x.data(), n, &r[1], sv.data(), si.data(), sb.data()); },
        [&] {
            for (float &v : sv) v = NAN;
            for (int32_t &v : si) v = ISENTINEL;
            for (int32_t &v : sb) v = ISENTINEL;
        }));
    CHECK(sl_shim_align_faults.load() == faults0);
    sl_error e;
    CHECK(sl_ref_argmax(x.data(), n, &want, &e) == SL_OK);
    CHECK_MSG(r[1].best == want.best && r[1].bad == want.bad && r[1].bad_bits == want.bad_bits,
              "argmax %d (%s): (%d, %d, %08x), the reference (%d, %d, %08x)", vi, what,
              r[1].best, r[1].bad, r[1].bad_bits, want.best, want.bad, want.bad_bits);
    sl_argmax_result untouched;
    memset(&untouched, 0x5A, sizeof untouched);
    CHECK_MSG(!memcmp(&r[0], &untouched, sizeof untouched) &&
                  !memcmp(&r[2], &untouched, sizeof untouched),
              "argmax %d (%s): a neighbour of the result written", vi, what);
}

int main(void)
{
    const sl_gating SM = SL_GATING_SOFTMAX_TOPK, SG = SL_GATING_SIGMOID,
                    TS = SL_GATING_TOPK_SOFTMAX;
    const rvariant rv[] = {
        {"mixtral: softmax, 8 experts, k 2, normalised", SM, 8, 2, 3, true, false, 1, 0, 0,
         false},
        {"qwen3moe: softmax, 128 experts, k 8, normalised", SM, 128, 8, 3, true, false, 1, 0, 0,
         false},
        {"qwen2moe: softmax, 64 experts, k 6, not normalised", SM, 64, 6, 3, false, false, 1, 0,
         0, false},
        {"gpt-oss: softmax of the k, 32 experts, k 4", TS, 32, 4, 3, false, false, 1, 0, 0,
         false},
        {"gpt-oss: softmax of the k, 128 experts, k 4, bias, scale 2", TS, 128, 4, 3, true, true,
         2.0f, 0, 0, false},
        {"deepseek2: sigmoid, bias, 256 experts, 8 groups top 4, k 8, scale 2.5", SG, 256, 8, 3,
         true, true, 2.5f, 8, 4, false},
        {"sigmoid, bias, 64 experts, 8 groups top 3, k 8", SG, 64, 8, 3, true, true, 2.5f, 8, 3,
         false},
        {"sigmoid, bias, 64 experts, 8 groups top 1, k 8 (one whole group)", SG, 64, 8, 2, true,
         true, 1.0f, 8, 1, false},
        {"sigmoid, bias, 60 groups of one top 4, k 8 (masked experts picked)", SG, 60, 8, 2,
         true, true, 1.0f, 60, 4, false},
        {"sigmoid, no bias, not normalised, 64 experts", SG, 64, 4, 2, false, false, 1.0f, 0, 0,
         false},
        {"ties: softmax, 64 experts, k 8", SM, 64, 8, 3, true, false, 1.0f, 0, 0, true},
        {"ties: sigmoid, bias, 256 experts, 8 groups top 4, k 8", SG, 256, 8, 3, true, true,
         2.5f, 8, 4, true},
        {"ties: sigmoid, bias, 64 experts, 16 groups top 3, k 6", SG, 64, 6, 3, true, true,
         1.0f, 16, 3, true},
        {"ties: softmax of the k, 32 experts, k 4, bias", TS, 32, 4, 3, false, true, 1.0f, 0, 0,
         true},
        {"k = n_expert = 8", SM, 8, 8, 2, true, false, 1.0f, 0, 0, false},
        {"ties: k = n_expert = 256", SM, 256, 256, 1, false, false, 1.0f, 0, 0, true},
        {"SL_CUDA_ROUTER_MAX_EXPERT experts, sigmoid, bias, k 16", SG, SL_CUDA_ROUTER_MAX_EXPERT,
         16, 2, true, true, 1.0f, 0, 0, false},
    };
    for (int i = 0; i < (int)(sizeof rv / sizeof rv[0]); i++) run_router(i, rv[i]);

    const int32_t N = 5000; /* past four slices of the block */
    run_argmax(0, "random", N, [](std::vector<float> &) {});
    run_argmax(1, "ties 7, n/3, n-1", N, [](std::vector<float> &x) {
        x[7] = x[N / 3] = x[N - 1] = 31.0f;
    });
    run_argmax(2, "ties in other threads' slices, lowest 1030", N, [](std::vector<float> &x) {
        x[4000] = x[1500] = x[1030] = x[2054] = 31.0f;
    });
    run_argmax(3, "NaN at n-2 and +inf at 5", N, [](std::vector<float> &x) {
        x[5] = INFINITY, x[N - 2] = NAN;
    });
    run_argmax(4, "+inf at 2000, NaN at 3000 and 2001", N, [](std::vector<float> &x) {
        x[3000] = NAN, x[2000] = INFINITY, x[2001] = -NAN;
    });
    run_argmax(9, "-NaN at 5, +inf at 3000", N, [](std::vector<float> &x) {
        x[3000] = INFINITY, x[5] = -NAN;
    });
    run_argmax(5, "-inf but one", 1000, [](std::vector<float> &x) {
        for (size_t i = 0; i < x.size(); i++) x[i] = i == 999 ? -1.0f : -INFINITY;
    });
    run_argmax(6, "all -inf", 1500, [](std::vector<float> &x) {
        for (float &v : x) v = -INFINITY;
    });
    run_argmax(7, "100 values, ties", 100, [](std::vector<float> &x) { x[90] = x[60] = 40.0f; });
    run_argmax(8, "one value", 1, [](std::vector<float> &) {});
    run_argmax(9, "empty", 0, [](std::vector<float> &) {});
    return sl_test_finish("select_host_test");
}
