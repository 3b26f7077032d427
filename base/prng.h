/* base/prng: the project's deterministic pseudo-random numbers, shared by the sampler's
 * draws and the synthetic-model writer (tools/synth/synth_rows.c).
 *
 * Contract: header-only, no state beyond the caller's; the same sequence on every machine.
 * splitmix64 seeds and hashes (sl_prng_mix64 is its bijective finalizer); xoshiro256** makes
 * the streams. A state seeded by sl_prng_seed is never all zero, as xoshiro requires. */
#ifndef SL_RUNTIME_PRNG_H
#define SL_RUNTIME_PRNG_H

#include <stdint.h>

static inline uint64_t sl_prng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t sl_prng_splitmix64(uint64_t *x)
{
    return sl_prng_mix64(*x += 0x9e3779b97f4a7c15ull);
}

/* Four splitmix64 draws from x: a xoshiro256** state. */
static inline void sl_prng_seed(uint64_t s[4], uint64_t x)
{
    for (int i = 0; i < 4; i++) s[i] = sl_prng_splitmix64(&x);
}

static inline uint64_t sl_prng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t sl_prng_next(uint64_t s[4]) /* xoshiro256** */
{
    const uint64_t out = sl_prng_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sl_prng_rotl(s[3], 45);
    return out;
}

#endif
