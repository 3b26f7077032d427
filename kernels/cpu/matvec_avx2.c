/* AVX2 + FMA + F16C matvec range kernels (matvec_x86_tmpl.h). The target attribute applies to
 * every function below, so this file builds with the default flags and its code runs only
 * after dispatch (kernels/cpu/matvec.c) has checked the CPU. */
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

#if defined(__x86_64__)
#include <immintrin.h> /* before the target region: the intrinsics carry their own targets */
#endif

#if defined(__x86_64__) && defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)

#define SL_MV_SUFFIX(name) name##_avx2
#define SL_MV_AVX512 0
#include "kernels/cpu/matvec_x86_tmpl.h"
#include "kernels/cpu/gemm_x86_tmpl.h"
#include "kernels/cpu/gemm_k_x86_tmpl.h"

sl__gemm_fn sl__gemm_avx2(uint32_t type) { return sl__gemm_panel8_avx2(type); }

#pragma clang attribute pop
#else
sl__mv_range_fn sl__mv_range_avx2(uint32_t type)
{
    (void)type;
    return NULL;
}
sl__mv_rows_fn sl__mv_rows_avx2(uint32_t type)
{
    (void)type;
    return NULL;
}
sl__gemm_fn sl__gemm_avx2(uint32_t type)
{
    (void)type;
    return NULL;
}
void sl__mv_axpy_avx2(float a, const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}
#endif
