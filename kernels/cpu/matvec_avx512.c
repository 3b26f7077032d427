/* AVX-512 (F/BW/VL) + VNNI matvec range kernels (matvec_x86_tmpl.h): 512-bit float lanes and
 * vpdpbusd for the byte dots. Dispatch uses them only on CPUs with VNNI (Cascade Lake and
 * later); an AVX-512 CPU without VNNI runs the AVX2 kernels, which give the same bits. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/cpu/q32_offset.h"

#if defined(__x86_64__)
#include <immintrin.h> /* before the target region: the intrinsics carry their own targets */
#endif

#if defined(__x86_64__) && defined(__clang__)
#pragma clang attribute push(                                                                  \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))),             \
    apply_to = function)

#define SL_MV_SUFFIX(name) name##_avx512
#define SL_MV_AVX512 1
#include "kernels/cpu/matvec_x86_tmpl.h"
#include "kernels/cpu/gemm_x86_tmpl.h"
#include "kernels/cpu/gemm_k_x86_tmpl.h"
#include "kernels/cpu/gemm_k_vnni_tmpl.h"
#include "kernels/cpu/gemm_few32_vnni_tmpl.h"
#include "kernels/cpu/gemm_few_vnni_tmpl.h"

#pragma clang attribute pop
#else
sl__mv_range_fn sl__mv_range_avx512(uint32_t type)
{
    (void)type;
    return NULL;
}
sl__mv_rows_fn sl__mv_rows_avx512(uint32_t type)
{
    (void)type;
    return NULL;
}
sl__gemm_fn sl__gemm_avx512(uint32_t type)
{
    (void)type;
    return NULL;
}
sl__gemm_fn sl__gemm_few_avx512(uint32_t type)
{
    (void)type;
    return NULL;
}
void sl__mv_axpy_avx512(float a, const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}
size_t sl__gemm_k_panel_bytes(void) { return 0; }
bool sl__gemm_k_panels_form(uint32_t type, bool tiles, bool *plus128)
{
    (void)type, (void)tiles, (void)plus128;
    return false;
}
void sl__gemm_k_panels_avx512(const sl__gemm_rows *a, bool plus128, void *pan, int64_t k0,
                              int64_t k1)
{
    (void)a, (void)plus128, (void)pan, (void)k0, (void)k1;
}
#endif
