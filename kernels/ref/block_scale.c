/* kernels/ref/block_scale.c: sl_quant_block_set_scale (quant.h) - a block's scale fields in
 * the type's place and encoding.
 *
 * Why here: tests and benchmarks that fill blocks with random codes (types without a quantizer,
 * the full range of every code) need finite, sane scales in the right bytes; where each type
 * keeps them is the block layout's (blocks.h), so it is written down once, beside it, rather
 * than in every filler (three had their own copies, two of them wrong for Q2_K, Q3_K and
 * IQ1_M). */
#include <stddef.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"

static void put(uint8_t *p, size_t off, float f)
{
    const uint16_t h = sl_quant_fp32_to_fp16(f);
    memcpy(p + off, &h, 2);
}

bool sl_quant_block_set_scale(uint32_t type, void *block, float d, float dmin)
{
    uint8_t *p = block;
    switch (type) {
    case SL_GGML_Q4_0: put(p, offsetof(sl_block_q4_0, d), d); return true;
    case SL_GGML_Q5_0: put(p, offsetof(sl_block_q5_0, d), d); return true;
    case SL_GGML_Q8_0: put(p, offsetof(sl_block_q8_0, d), d); return true;
    case SL_GGML_IQ4_NL: put(p, offsetof(sl_block_iq4_nl, d), d); return true;
    case SL_GGML_IQ4_XS: put(p, offsetof(sl_block_iq4_xs, d), d); return true;
    case SL_GGML_IQ2_XXS: put(p, offsetof(sl_block_iq2_xxs, d), d); return true;
    case SL_GGML_IQ2_XS: put(p, offsetof(sl_block_iq2_xs, d), d); return true;
    case SL_GGML_IQ2_S: put(p, offsetof(sl_block_iq2_s, d), d); return true;
    case SL_GGML_IQ3_XXS: put(p, offsetof(sl_block_iq3_xxs, d), d); return true;
    case SL_GGML_IQ3_S: put(p, offsetof(sl_block_iq3_s, d), d); return true;
    case SL_GGML_IQ1_S: put(p, offsetof(sl_block_iq1_s, d), d); return true;
    case SL_GGML_Q3_K: put(p, offsetof(sl_block_q3_K, d), d); return true;
    case SL_GGML_Q6_K: put(p, offsetof(sl_block_q6_K, d), d); return true;
    case SL_GGML_Q4_1:
        put(p, offsetof(sl_block_q4_1, d), d);
        put(p, offsetof(sl_block_q4_1, m), dmin);
        return true;
    case SL_GGML_Q5_1:
        put(p, offsetof(sl_block_q5_1, d), d);
        put(p, offsetof(sl_block_q5_1, m), dmin);
        return true;
    case SL_GGML_Q2_K:
        put(p, offsetof(sl_block_q2_K, d), d);
        put(p, offsetof(sl_block_q2_K, dmin), dmin);
        return true;
    case SL_GGML_Q4_K:
        put(p, offsetof(sl_block_q4_K, d), d);
        put(p, offsetof(sl_block_q4_K, dmin), dmin);
        return true;
    case SL_GGML_Q5_K:
        put(p, offsetof(sl_block_q5_K, d), d);
        put(p, offsetof(sl_block_q5_K, dmin), dmin);
        return true;
    case SL_GGML_IQ1_M: {
        sl_block_iq1_m b;
        memcpy(&b, p, sizeof b);
        sl_block_iq1_m_set_d(&b, sl_quant_fp32_to_fp16(d));
        memcpy(p, &b, sizeof b);
        return true;
    }
    default: return false;
    }
}
