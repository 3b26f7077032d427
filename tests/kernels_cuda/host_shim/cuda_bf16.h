/* tests/kernels_cuda/host_shim: bfloat16 on the host (see cuda_runtime.h here): the type and
 * the device's round-to-nearest-even conversion; a NaN becomes CUDA's canonical 0x7FFF. */
#ifndef SL_TESTS_HOST_SHIM_CUDA_BF16_H
#define SL_TESTS_HOST_SHIM_CUDA_BF16_H

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    uint16_t x;
};

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return __nv_bfloat16{0x7FFF};
    return __nv_bfloat16{(uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

#endif
