/* tests/kernels_cuda/rng.h: the CUDA kernel tests' random source (C and C++): xorshift, one
 * fixed sequence per test program, so a failure reproduces. */
#ifndef SL_TESTS_KERNELS_CUDA_RNG_H
#define SL_TESTS_KERNELS_CUDA_RNG_H

#include <stdint.h>

static uint64_t rng = 0x243F6A8885A308D3ull;
static inline uint32_t rnd_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static inline float rnd_f(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd_u32() & 0xFFFFFF) / 16777216.0f;
}

#endif
