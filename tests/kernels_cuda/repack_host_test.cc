/* tests/kernels_cuda/repack_host_test: the device's Q4_K_R8 -> Q4_K kernel (kernels/cuda/
 * repack.cuh, in place, one block a group) run on the CPU (host_shim/launch.h) on matrices
 * the CPU repacked (kernels/ref/repack.h), for 1, 3 and 8 super-blocks a row: the bytes of the
 * original Q4_K matrix, every one. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launch.h"                          /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/rand_weights.h"
#include "tests/kernels_cuda/repack_cuh.h" /* kernels/cuda/repack.cuh (BUILD) */

extern "C" {
#include "kernels/ref/repack.h"
#include "tests/testing.h"
}

int main(void)
{
    const int64_t colsv[3] = {256, 768, 2048}, rows = 24;
    for (int ci = 0; ci < 3; ci++) {
        const int64_t cols = colsv[ci], nb = cols / 256;
        const size_t bytes = sl_quant_row_bytes(SL_GGML_Q4_K, cols) * (size_t)rows;
        uint8_t *orig = (uint8_t *)malloc(bytes), *r8 = (uint8_t *)malloc(bytes);
        uint8_t *sm = (uint8_t *)malloc((size_t)nb * RP_R8);
        float *f = (float *)malloc((size_t)(rows * cols) * sizeof(float));
        if (!orig || !r8 || !sm || !f) {
            CHECK_MSG(0, "out of memory");
            return sl_test_finish("repack_host_test");
        }
        CHECK(rand_weights(SL_GGML_Q4_K, rows * cols, orig, f, ci));
        sl_error e;
        CHECK_MSG(sl_repack_q4_K_r8(orig, r8, rows, cols, &e) == SL_OK, "%s", e.msg);
        CHECK_MSG(memcmp(orig, r8, bytes) != 0, "cols %lld: the repack changed nothing",
                  (long long)cols);
        CHECK(sl_shim_launch(
            sl_shim_dim3{(unsigned)(rows / 8), 1, 1}, RP_THREADS,
            [&] { rp_group(r8 + (int64_t)blockIdx.x * nb * RP_R8, nb, sm); },
            [&] { memset(sm, 0xA5, (size_t)nb * RP_R8); })); /* shared memory poisoned */
        size_t diff = 0;
        for (size_t i = 0; i < bytes; i++) diff += orig[i] != r8[i];
        CHECK_MSG(diff == 0, "cols %lld: %zu of %zu bytes differ from the original Q4_K",
                  (long long)cols, diff, bytes);
        free(orig), free(r8), free(sm), free(f);
    }
    return sl_test_finish("repack_host_test");
}
