/* tests/kernels_cuda/host_shim: binary16 on the host (see cuda_runtime.h here). */
#ifndef SL_TESTS_HOST_SHIM_CUDA_FP16_H
#define SL_TESTS_HOST_SHIM_CUDA_FP16_H

#include "cuda_runtime.h"

struct __half {
    uint16_t x;
};
struct __half2 {
    __half x, y;
};
static inline __half __ushort_as_half(uint16_t v) { return __half{v}; }

/* exact binary16 -> binary32 */
static inline float __half2float(__half h)
{
    const uint32_t sign = (uint32_t)(h.x & 0x8000u) << 16, e = (h.x >> 10) & 0x1Fu,
                   m = h.x & 0x3FFu;
    if (e == 0x1F) return __uint_as_float(sign | 0x7F800000u | (m << 13));
    if (e) return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
    const float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
}
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }

#endif
