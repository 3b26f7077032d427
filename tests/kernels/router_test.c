/* kernels/cpu/router: sl_cpu_router_topk against sl_ref_router_topk token by token, bit for bit
 * (indices and weights): expert counts 8 .. 512, k 1 .. 10, every gating with and without
 * norm_topk and a weight scale, a selection bias and group-limited routing (the reference
 * path), logits with ties (the lower expert first) and with spreads so wide that softmax
 * probabilities underflow to equal zeros; batches of 1 .. 300 tokens on a 2-thread pool and on
 * the calling thread. Errors: a non-finite logit names its token's logit as the reference
 * does; bad parameters are refused before any token is routed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/pool.h"
#include "kernels/cpu/router.h"
#include "kernels/ref/ops.h"
#include "tests/testing.h"

static uint64_t g_rng = 12345;

static double uni(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) * 0x1p-53;
}

/* kind 0: gaussian-ish; 1: few distinct values (ties); 2: spread of +-2000 (underflow) */
static void fill(float *l, int64_t n, int kind)
{
    for (int64_t i = 0; i < n; i++) {
        const double u = uni() + uni() + uni() - 1.5;
        l[i] = kind == 0 ? (float)(3.0 * u) : kind == 1 ? (float)(int)(4.0 * uni()) * 0.5f
                                                        : (float)(2000.0 * u);
    }
}

static void check_case(sl_cpu_pool *pool, sl_router_params p, int64_t n, int kind)
{
    const int32_t E = p.n_expert, k = p.k;
    float *l = malloc((size_t)(n * E) * sizeof *l);
    fill(l, n * E, kind);
    int32_t *ia = malloc((size_t)(n * k) * sizeof *ia), *ib = malloc((size_t)(n * k) * sizeof *ib);
    float *wa = malloc((size_t)(n * k) * sizeof *wa), *wb = malloc((size_t)(n * k) * sizeof *wb);
    sl_error err;
    for (int64_t t = 0; t < n; t++)
        CHECK(sl_ref_router_topk(l + t * E, &p, ia + t * k, wa + t * k, &err) == SL_OK);
    memset(ib, 0xff, (size_t)(n * k) * sizeof *ib);
    CHECK_MSG(sl_cpu_router_topk(pool, l, n, &p, ib, wb, &err) == SL_OK, "%s", err.msg);
    CHECK_MSG(!memcmp(ia, ib, (size_t)(n * k) * sizeof *ia) &&
                  !memcmp(wa, wb, (size_t)(n * k) * sizeof *wa),
              "router E=%d k=%d gating=%d norm=%d bias=%d groups=%d n=%lld kind=%d differs", E,
              k, (int)p.gating, p.norm_topk, p.bias != NULL, p.n_group, (long long)n, kind);
    free(l);
    free(ia);
    free(ib);
    free(wa);
    free(wb);
}

static void test_matches_reference(sl_cpu_pool *pool)
{
    static const int32_t es[] = {8, 32, 128, 512};
    static const int32_t ks[] = {1, 2, 6, 8, 10};
    float bias[512];
    for (int i = 0; i < 512; i++) bias[i] = (float)(0.01 * (uni() - 0.5));
    for (size_t ei = 0; ei < sizeof es / sizeof es[0]; ei++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (ks[ki] > es[ei]) continue;
            for (int g = 0; g < 3; g++) {
                for (int variant = 0; variant < 3; variant++) {
                    sl_router_params p = {.gating = (sl_gating)g, .n_expert = es[ei],
                                          .k = ks[ki], .norm_topk = variant == 1,
                                          .weight_scale = variant == 2 ? 2.5f : 1.0f};
                    for (int kind = 0; kind < 3; kind++) check_case(pool, p, 37, kind);
                    if (variant == 2) { /* the reference's own path: bias, groups */
                        p.bias = bias;
                        check_case(pool, p, 21, 0);
                        p.bias = NULL;
                        p.n_group = 4;
                        p.top_group = 2;
                        check_case(pool, p, 21, 0);
                    }
                }
            }
        }
    }
    sl_router_params q = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 128, .k = 8,
                          .weight_scale = 1.0f};
    check_case(pool, q, 1, 0);
    check_case(pool, q, 300, 0);
}

static void test_errors(sl_cpu_pool *pool)
{
    sl_router_params p = {.gating = SL_GATING_SOFTMAX_TOPK, .n_expert = 16, .k = 4,
                          .weight_scale = 1.0f};
    float l[16 * 40];
    fill(l, 16 * 40, 0);
    int32_t idx[4 * 40];
    float w[4 * 40];
    sl_error err;
    l[16 * 33 + 5] = NAN; /* token 33 */
    l[16 * 35 + 2] = INFINITY;
    CHECK(sl_cpu_router_topk(pool, l, 40, &p, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "logits[5]");
    l[16 * 33 + 5] = 0.0f;
    l[16 * 35 + 2] = 0.0f;
    p.k = 17;
    CHECK(sl_cpu_router_topk(pool, l, 40, &p, idx, w, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "k = 17");
    p.k = 4;
    CHECK(sl_cpu_router_topk(pool, l, -1, &p, idx, w, &err) == SL_ERR_INVALID);
    CHECK(sl_cpu_router_topk(pool, l, 0, &p, idx, w, &err) == SL_OK);
    CHECK(sl_cpu_router_topk(pool, NULL, 3, &p, idx, w, &err) == SL_ERR_INVALID);
}

int main(void)
{
    sl_cpu_pool *pool = NULL;
    sl_error err;
    const sl_cpu_pool_options o = {.n_threads = 2, .numa_node = -1};
    CHECK_MSG(sl_cpu_pool_create(&o, &pool, &err) == SL_OK, "%s", err.msg);
    test_matches_reference(NULL);
    test_matches_reference(pool);
    test_errors(pool);
    test_errors(NULL);
    sl_cpu_pool_destroy(pool);
    return sl_test_finish("router_test");
}
