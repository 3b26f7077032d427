/* tests/kernels_cuda/moe_combine_host_test: the device's MoE combine and id mask
 * (kernels/cuda/moe_combine.cuh) run on the CPU (host_shim/launch.h) against the CPU
 * scheduler's join (scheduler/moe/moe.h sl_moe_rows_join), bit for bit: one buffer of rows,
 * and the same rows split over two buffers by a mask of experts (the resident experts' rows
 * and the host's, zeros in the other: runtime/engine/hot.h), tokens routing one expert twice
 * (the lower slot first), a width that is not a multiple of the block, k 1 .. 8, 16 and 64
 * (SL_MOE_JOIN_MAX_K: many repeated experts); the host join of the two buffers too. With a
 * residual: the bits of the join, then the residual added (res + join), into another buffer
 * and in place. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launch.h"                             /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/moe_combine_cuh.h" /* kernels/cuda/moe_combine.cuh (BUILD) */
#include "tests/kernels_cuda/rng.h"

extern "C" {
#include "scheduler/moe/moe.h"
#include "tests/testing.h"
}

int main(void)
{
    enum { N = 5, DIM = 300, X = 16, THREADS = 64 };
    static const int ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, SL_MOE_JOIN_MAX_K};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int k = ks[ki];
        const int64_t S = (int64_t)N * k;
        float *y = (float *)malloc((size_t)(S * DIM) * sizeof(float));
        float *ya = (float *)malloc((size_t)(S * DIM) * sizeof(float));
        float *yb = (float *)malloc((size_t)(S * DIM) * sizeof(float));
        float *w = (float *)malloc((size_t)S * sizeof(float));
        float *ref = (float *)malloc((size_t)(N * DIM) * sizeof(float));
        float *got = (float *)malloc((size_t)(N * DIM) * sizeof(float));
        int32_t *idx = (int32_t *)malloc((size_t)S * sizeof(int32_t));
        int32_t *ids = (int32_t *)malloc((size_t)S * sizeof(int32_t));
        if (!y || !ya || !yb || !w || !ref || !got || !idx || !ids) {
            CHECK_MSG(0, "out of memory");
            return sl_test_finish("moe_combine_host_test");
        }
        uint8_t mask[X];
        for (int e = 0; e < X; e++) mask[e] = (uint8_t)(rnd_u32() & 1);
        for (int64_t s = 0; s < S; s++) {
            /* token 1 routes its first expert twice where k > 1 */
            idx[s] = s % k == 1 && s / k == 1 ? idx[s - 1] : (int32_t)(rnd_u32() % X);
            w[s] = rnd_f(0.0f, 1.0f);
            for (int64_t j = 0; j < DIM; j++) {
                const float v = rnd_f(-3.0f, 3.0f);
                y[s * DIM + j] = v;
                ya[s * DIM + j] = mask[idx[s]] ? v : 0.0f;
                yb[s * DIM + j] = mask[idx[s]] ? 0.0f : v;
            }
        }
        sl_moe_rows_join(y, NULL, idx, w, N, k, DIM, ref);
        sl_moe_rows_join(ya, yb, idx, w, N, k, DIM, got);
        CHECK_MSG(!memcmp(ref, got, (size_t)(N * DIM) * sizeof(float)), "k %d: the CPU's join "
                  "of the two buffers differs from one buffer's", k);
        const float *pairs[2][2] = {{y, NULL}, {ya, yb}};
        for (int p = 0; p < 2; p++) {
            memset(got, 0xA5, (size_t)(N * DIM) * sizeof(float));
            CHECK(sl_shim_launch(sl_shim_dim3{2, N, 1}, THREADS, [&] {
                mc_combine(pairs[p][0], pairs[p][1], idx, w, k, DIM, NULL, got);
            }));
            CHECK_MSG(!memcmp(ref, got, (size_t)(N * DIM) * sizeof(float)), "k %d, %s: the "
                      "device's combine differs from the CPU's join", k,
                      p ? "two buffers" : "one buffer");
            /* the residual: res + join, into got and in place (res itself) */
            float res[N * DIM], want[N * DIM];
            for (int64_t i = 0; i < N * DIM; i++) {
                res[i] = rnd_f(-50.0f, 50.0f);
                want[i] = res[i] + ref[i];
            }
            CHECK(sl_shim_launch(sl_shim_dim3{2, N, 1}, THREADS, [&] {
                mc_combine(pairs[p][0], pairs[p][1], idx, w, k, DIM, res, got);
            }));
            CHECK_MSG(!memcmp(want, got, sizeof want), "k %d, %s: combine + residual differs "
                      "from the join then the add", k, p ? "two buffers" : "one buffer");
            CHECK(sl_shim_launch(sl_shim_dim3{2, N, 1}, THREADS, [&] {
                mc_combine(pairs[p][0], pairs[p][1], idx, w, k, DIM, res, res);
            }));
            CHECK_MSG(!memcmp(want, res, sizeof want), "k %d, %s: combine + residual in place "
                      "differs", k, p ? "two buffers" : "one buffer");
        }
        CHECK(sl_shim_launch(sl_shim_dim3{1, 1, 1}, THREADS,
                             [&] { mc_mask_ids(idx, mask, S, X, ids); }));
        int bad = 0;
        for (int64_t s = 0; s < S; s++) bad += ids[s] != (mask[idx[s]] ? idx[s] : -1);
        CHECK_MSG(bad == 0, "k %d: %d masked ids wrong", k, bad);
        free(y);
        free(ya);
        free(yb);
        free(w);
        free(ref);
        free(got);
        free(idx);
        free(ids);
    }
    return sl_test_finish("moe_combine_host_test");
}
