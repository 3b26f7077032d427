/* kernels/ref/half.h: IEEE binary16 -> binary32, exact, as a static inline for the op kernels.
 *
 * Why a copy and not kernels/ref/quant's sl_quant_fp16_to_fp32: the ops (attention over an F16
 * KV cache) must not depend on the quantizer module, which evolves separately; this conversion
 * is pure bit manipulation with one right answer, so two copies cannot disagree in value
 * (tests/kernels/ops_test.c checks all 65536 halves against a double-arithmetic decoding).
 */
#ifndef SL_KERNELS_REF_HALF_H
#define SL_KERNELS_REF_HALF_H

#include <stdint.h>
#include <string.h>

/* binary16 bits -> float: exact for every input (subnormals normalised, inf kept, NaN payload
 * kept in the top mantissa bits). Pure; thread-safe. */
static inline float sl_half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t bits;
    if (e == 0x1fu) { /* inf or NaN */
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) { /* normal: rebias 15 -> 127 */
        bits = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) { /* signed zero */
        bits = sign;
    } else { /* subnormal m * 2^-24: shift the leading one into the implicit position */
        uint32_t ex = 113u; /* exponent of 2^-14, the first normal, in float bias */
        while (!(m & 0x400u)) {
            m <<= 1;
            ex--;
        }
        bits = sign | (ex << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
