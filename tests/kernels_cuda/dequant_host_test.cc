/* tests/kernels_cuda/dequant_host_test: the dequantisation kernels (kernels/cuda/dequant.cuh:
 * dq_units for the quantized types, dq_elems for the float ones; what sl_cuda_gemm converts
 * weights with) on the CPU with dequant.cu's grids (dq_blocks), for every type sl_qt lists:
 * F32 output bit for bit kernels/ref's sl_quant_dequant_row, F16 and BF16 its round-to-nearest-
 * even of those values (sl_quant_fp32_to_fp16 / _bf16), as cuda_kernels_matmul_test checks on
 * the GPU. A source at an odd address (the decoders read any alignment), a count that leaves
 * the last thread block partial, and the floats past n untouched. */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "launch.h"                         /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/dequant_cuh.h" /* kernels/cuda/dequant.cuh (BUILD) */
#include "tests/kernels_cuda/rand_weights.h"

extern "C" {
#include "tests/testing.h"
}

static int n_types = 0;

template <uint32_t T, typename OUT> static bool run(const uint8_t *src, int64_t n, OUT *dst)
{
    const unsigned g = dq_blocks<T>(n);
    if constexpr (sl_qt_block<T>::FLOAT)
        return sl_shim_launch(sl_shim_dim3{g, 1, 1}, DQ_THREADS,
                              [&] { dq_elems<T, OUT>(src, n, dst); });
    else
        return sl_shim_launch(sl_shim_dim3{g, 1, 1}, DQ_THREADS,
                              [&] { dq_units<T, OUT>(src, n / sl_qt<T>::UNIT, dst); });
}

struct check_type {
    template <uint32_t T> void operator()()
    {
        const int64_t B = sl_qt_block<T>::ELEMS;
        /* more units than a thread block (256): 9 blocks of 256, 300 blocks of 32; floats 1029 */
        const int64_t n = B == 1 ? 1029 : B == 256 ? 9 * 256 : 300 * 32;
        rand_mat m;
        CHECK(m.make(T, 1, n, 1, (int)n)); /* at an odd address */
        const float FS = -12345.0f;
        const uint16_t HS = 0xBEEF;
        std::vector<float> f((size_t)n + 3, FS);
        std::vector<__half> h((size_t)n + 3, __half{HS});
        std::vector<__nv_bfloat16> b((size_t)n + 3, __nv_bfloat16{HS});
        CHECK((run<T, float>(m.w, n, f.data())));
        CHECK((run<T, __half>(m.w, n, h.data())));
        CHECK((run<T, __nv_bfloat16>(m.w, n, b.data())));
        long bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float r = m.f[(size_t)i];
            const bool ok = !memcmp(&f[(size_t)i], &r, 4) &&
                            h[(size_t)i].x == sl_quant_fp32_to_fp16(r) &&
                            b[(size_t)i].x == sl_quant_fp32_to_bf16(r);
            if (!ok && bad++ < 5)
                fprintf(stderr, "%s [%lld]: f32 %a vs %a, f16 %04x vs %04x, bf16 %04x vs %04x\n",
                        sl_gguf_type_get(T)->name, (long long)i, (double)f[(size_t)i],
                        (double)r, h[(size_t)i].x, sl_quant_fp32_to_fp16(r), b[(size_t)i].x,
                        sl_quant_fp32_to_bf16(r));
        }
        for (size_t i = (size_t)n; i < f.size(); i++)
            bad += f[i] != FS || h[i].x != HS || b[i].x != HS;
        CHECK_MSG(bad == 0, "%s: %ld values wrong or written past n", sl_gguf_type_get(T)->name,
                  bad);
        n_types++;
    }
};

int main(void)
{
    sl_qt_for_each(check_type{});
    CHECK(n_types == 23);
    return sl_test_finish("dequant_host_test");
}
