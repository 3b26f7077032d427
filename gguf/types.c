/* The ggml type table, as llama.cpp's ggml.h / ggml.c define it (checked against gguf-py's
 * GGML_QUANT_SIZES, which agrees except for Q8_1: ggml's block_q8_1 is {half d, half s,
 * int8 qs[32]} = 36 bytes today, gguf-py still lists the older 40). */
#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <strings.h>

#include "gguf/gguf.h"

static const sl_gguf_type_info k_types[SL_GGML_TYPE_LIMIT] = {
    [SL_GGML_F32] = {SL_GGML_F32, "F32", 1, 4},
    [SL_GGML_F16] = {SL_GGML_F16, "F16", 1, 2},
    [SL_GGML_Q4_0] = {SL_GGML_Q4_0, "Q4_0", 32, 18},
    [SL_GGML_Q4_1] = {SL_GGML_Q4_1, "Q4_1", 32, 20},
    [SL_GGML_Q5_0] = {SL_GGML_Q5_0, "Q5_0", 32, 22},
    [SL_GGML_Q5_1] = {SL_GGML_Q5_1, "Q5_1", 32, 24},
    [SL_GGML_Q8_0] = {SL_GGML_Q8_0, "Q8_0", 32, 34},
    [SL_GGML_Q8_1] = {SL_GGML_Q8_1, "Q8_1", 32, 36},
    [SL_GGML_Q2_K] = {SL_GGML_Q2_K, "Q2_K", 256, 84},
    [SL_GGML_Q3_K] = {SL_GGML_Q3_K, "Q3_K", 256, 110},
    [SL_GGML_Q4_K] = {SL_GGML_Q4_K, "Q4_K", 256, 144},
    [SL_GGML_Q5_K] = {SL_GGML_Q5_K, "Q5_K", 256, 176},
    [SL_GGML_Q6_K] = {SL_GGML_Q6_K, "Q6_K", 256, 210},
    [SL_GGML_Q8_K] = {SL_GGML_Q8_K, "Q8_K", 256, 292},
    [SL_GGML_IQ2_XXS] = {SL_GGML_IQ2_XXS, "IQ2_XXS", 256, 66},
    [SL_GGML_IQ2_XS] = {SL_GGML_IQ2_XS, "IQ2_XS", 256, 74},
    [SL_GGML_IQ3_XXS] = {SL_GGML_IQ3_XXS, "IQ3_XXS", 256, 98},
    [SL_GGML_IQ1_S] = {SL_GGML_IQ1_S, "IQ1_S", 256, 50},
    [SL_GGML_IQ4_NL] = {SL_GGML_IQ4_NL, "IQ4_NL", 32, 18},
    [SL_GGML_IQ3_S] = {SL_GGML_IQ3_S, "IQ3_S", 256, 110},
    [SL_GGML_IQ2_S] = {SL_GGML_IQ2_S, "IQ2_S", 256, 82},
    [SL_GGML_IQ4_XS] = {SL_GGML_IQ4_XS, "IQ4_XS", 256, 136},
    [SL_GGML_I8] = {SL_GGML_I8, "I8", 1, 1},
    [SL_GGML_I16] = {SL_GGML_I16, "I16", 1, 2},
    [SL_GGML_I32] = {SL_GGML_I32, "I32", 1, 4},
    [SL_GGML_I64] = {SL_GGML_I64, "I64", 1, 8},
    [SL_GGML_F64] = {SL_GGML_F64, "F64", 1, 8},
    [SL_GGML_IQ1_M] = {SL_GGML_IQ1_M, "IQ1_M", 256, 56},
    [SL_GGML_BF16] = {SL_GGML_BF16, "BF16", 1, 2},
    [SL_GGML_TQ1_0] = {SL_GGML_TQ1_0, "TQ1_0", 256, 54},
    [SL_GGML_TQ2_0] = {SL_GGML_TQ2_0, "TQ2_0", 256, 66},
    [SL_GGML_MXFP4] = {SL_GGML_MXFP4, "MXFP4", 32, 17},
    [SL_GGML_NVFP4] = {SL_GGML_NVFP4, "NVFP4", 64, 36},
    [SL_GGML_Q1_0] = {SL_GGML_Q1_0, "Q1_0", 128, 18},
};

const sl_gguf_type_info *sl_gguf_type_get(uint32_t code)
{
    if (code >= SL_GGML_TYPE_LIMIT || k_types[code].name == NULL) return NULL;
    return &k_types[code];
}

bool sl_gguf_type_is_retired(uint32_t code)
{
    /* Q4_2, Q4_3; the Q4_0_x_y and IQ4_NL_x_y repacked layouts, removed from files. */
    return code == 4 || code == 5 || (code >= 31 && code <= 33) || (code >= 36 && code <= 38);
}

const sl_gguf_type_info *sl_gguf_type_by_name(const char *name)
{
    if (!name) return NULL;
    for (uint32_t c = 0; c < SL_GGML_TYPE_LIMIT; c++)
        if (k_types[c].name && strcasecmp(k_types[c].name, name) == 0) return &k_types[c];
    return NULL;
}

sl_status sl_gguf_type_nbytes(uint32_t type, uint32_t n_dims, const int64_t *ne,
                              uint64_t *nbytes, const char *what, sl_error *err)
{
    if (!what) what = "tensor";
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    if (!ti)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: %s ggml type code %" PRIu32, what,
                            sl_gguf_type_is_retired(type) ? "retired" : "unknown", type);
    if (n_dims == 0 || n_dims > SL_GGUF_MAX_DIMS)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: n_dims %" PRIu32 " not in 1..%d", what,
                            n_dims, SL_GGUF_MAX_DIMS);
    uint64_t elems = 1;
    bool zero = false;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return sl_error_set(err, SL_ERR_FORMAT, "%s: ne[%" PRIu32 "] = %" PRId64 " is negative",
                                what, d, ne[d]);
        if (ne[d] == 0) zero = true;
    }
    if (ne[0] % ti->block_size != 0)
        return sl_error_set(err, SL_ERR_FORMAT,
                            "%s: ne[0] = %" PRId64 " is not a multiple of %s block size %" PRIu32,
                            what, ne[0], ti->name, ti->block_size);
    /* Element count must fit in int64 (ggml's int64 ne arithmetic), checked even when another
     * dimension is 0 so that no product anywhere can wrap. */
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t n = (uint64_t)ne[d];
        if (n != 0 && elems > (uint64_t)INT64_MAX / n)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "%s: element count overflows int64 at ne[%" PRIu32 "] = %" PRId64,
                                what, d, ne[d]);
        elems = n == 0 ? elems : elems * n;
    }
    uint64_t row_blocks = (uint64_t)ne[0] / ti->block_size;
    if (row_blocks > (uint64_t)INT64_MAX / ti->type_size)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: byte size (elements x %s size) overflows",
                            what, ti->name);
    uint64_t row_bytes = row_blocks * ti->type_size;
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= (uint64_t)(ne[d] ? ne[d] : 1);
    if (row_bytes != 0 && rows > (uint64_t)INT64_MAX / row_bytes)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: byte size (elements x %s size) overflows",
                            what, ti->name);
    *nbytes = zero ? 0 : row_bytes * rows;
    return SL_OK;
}
