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
static inline uint16_t __half_as_ushort(__half h) { return h.x; }

/* binary32 -> binary16, round to nearest even (overflow to inf, subnormals; a NaN becomes
 * CUDA's canonical 0x7FFF) */
static inline __half __float2half_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return __half{0x7FFF};
    if (a == 0x7F800000u) return __half{(uint16_t)(sign | 0x7C00u)};
    if (a >= 0x477FF000u) return __half{(uint16_t)(sign | 0x7C00u)}; /* rounds past 65504 */
    if (a < 0x38800000u) { /* below 2^-14: a multiple of 2^-24, rounded to nearest even */
        const float v = std::fabs(f) * 0x1p24f; /* exact: a power-of-two scale */
        return __half{(uint16_t)(sign | (uint16_t)std::nearbyint(v))};
    }
    /* normal: drop 13 mantissa bits with round to nearest even; a carry moves the exponent */
    const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
    return __half{(uint16_t)(sign | (((r >> 13) - (112u << 10)) & 0x7FFFu))};
}

static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }

#endif
