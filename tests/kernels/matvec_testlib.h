/* tests/kernels/matvec_testlib.h: what matvec_test.c (the kernels per weight type) and
 * matvec_multi_test.c (several matrices, the activation quantizers, the errors, the pool)
 * share: the PRNG, random weights and activations, type names, and the ISA contexts and pools
 * under test (header-only, as tests/testing.h counts CHECKs per translation unit). */
#ifndef SL_TESTS_KERNELS_MATVEC_TESTLIB_H
#define SL_TESTS_KERNELS_MATVEC_TESTLIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "tests/kernels/matvec_ctxs.h"
#include "tests/testing.h"

static uint64_t rng_state = 0x5eed1234abcdULL;

static inline uint64_t rnd(void) { return sl_test_splitmix64(&rng_state); }

static inline float rndf(void) { return sl_test_unit_float(&rng_state); }

static inline const char *tname(uint32_t type)
{
    return type == SL_ACT_Q8_K8 ? "Q8_K8" : sl_gguf_type_get(type)->name;
}

static inline void put_half(uint8_t *p, float f)
{
    const uint16_t h = sl_quant_fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* rows x cols weights of `type`: quantized from random floats when kernels/ref/quant supports
 * the type, else random bytes with finite scales. */
/* Row r of `type` as random bytes with sane scales (the full range of every quant and
 * sub-block scale, which a quantizer of smooth data rarely reaches). */
static inline void random_row(uint32_t type, uint8_t *wr, size_t rb, int64_t cols, int64_t r)
{
    for (size_t i = 0; i < rb; i++) wr[i] = (uint8_t)rnd();
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    const int64_t nb = cols / ti->block_size;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = wr + b * ti->type_size;
        const float d = 0.001f + 0.01f * (float)(rnd() % 100) / 100.0f;
        switch (type) {
        case SL_GGML_F32: {
            const float f = rndf();
            memcpy(p, &f, 4);
            break;
        }
        case SL_GGML_F16: put_half(p, rndf()); break;
        case SL_GGML_BF16: {
            const uint16_t h = sl_quant_fp32_to_bf16(rndf());
            memcpy(p, &h, 2);
            break;
        }
        case SL_GGML_MXFP4: {
            /* Edges of the E8M0 decode: every row r % 3 == 2 has only the subnormal halves
             * (e = 0, 1) and the first normal (2), so their terms decide its sum; other
             * rows have ordinary exponents and, every 7th block, a large one (200). */
            if (r % 3 == 2) p[0] = (uint8_t)(rnd() % 3);
            else p[0] = b % 7 == 3 ? 200 : (uint8_t)(118 + rnd() % 8);
            break;
        }
        default: /* the block's scale fields (and dmin / m where it has one) */
            CHECK_MSG(sl_quant_block_set_scale(type, p, d, d * rndf()), "%s: no block scale",
                      tname(type));
            break;
        }
    }
}

static inline void *make_weights(uint32_t type, int64_t rows, int64_t cols, bool *quantized)
{
    const size_t rb = sl_ref_matvec_row_bytes(type, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc((size_t)cols * sizeof *row);
    /* sl_quant_supported covers dequantizers too: a type without a quantizer says so with
     * SL_ERR_UNSUPPORTED and gets random bytes. */
    *quantized = sl_quant_supported(type);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *wr = w + (size_t)r * rb;
        if (*quantized) {
            for (int64_t c = 0; c < cols; c++) row[c] = rndf() * (1.0f + (float)(r % 3));
            sl_error e;
            const sl_status s = sl_quant_row(type, row, wr, cols, &e);
            if (!s) continue;
            CHECK_MSG(s == SL_ERR_UNSUPPORTED && r == 0, "sl_quant_row: %s", e.msg);
            *quantized = false;
        }
        random_row(type, wr, rb, cols, r);
    }
    free(row);
    return w;
}

static inline float *make_x(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = rndf() * (i % 5 == 0 ? 3.0f : 1.0f);
    return x;
}

typedef struct ctx_set {
    /* scalar, avx2, avx512 (VNNI), with AMX tiles, and avx512 without VNNI (Skylake-SP: the
     * AVX2 kernels but the float types' batch kernel, gemm_float.c) */
    sl_cpu_matvec_ctx mv[5];
    int n_mv;
    sl_cpu_pool *pools[4]; /* NULL, 1, 2, 3 threads */
} ctx_set;

static int64_t n_exact_checks;

/* The contexts under test (who: the messages' prefix): every ISA this CPU has, the AMX
 * context split in two (matvec_ctxs.h), AVX-512 without VNNI where it has VNNI, and pools of
 * 1-3 threads (pools[0]: none). */
static inline void ctx_set_init(ctx_set *cs, const char *who)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    *cs = (ctx_set){0};
    const sl_cpu_isa isas[] = {SL_CPU_ISA_SCALAR, SL_CPU_ISA_AVX2, SL_CPU_ISA_AVX512};
    for (int i = 0; i < 3; i++) {
        sl_error e;
        if (sl_cpu_matvec_init(&cs->mv[cs->n_mv], isas[i], f, &e) == SL_OK) {
            printf("%s: testing %s\n", who, sl_cpu_matvec_name(&cs->mv[cs->n_mv]));
            cs->n_mv++;
        } else {
            printf("%s: notice: %s not available on this CPU, its kernels are not "
                   "tested here (%s)\n", who, sl_cpu_isa_name(isas[i]), e.msg);
        }
    }
    sl_test_amx_split(cs->mv, &cs->n_mv, who);
    for (int i = 0, n = cs->n_mv; i < n; i++)
        if (cs->mv[i].isa == SL_CPU_ISA_AVX512 && cs->mv[i].vnni && !cs->mv[i].amx) {
            cs->mv[cs->n_mv] = cs->mv[i];
            cs->mv[cs->n_mv++].vnni = false;
            printf("%s: testing avx512 without VNNI too\n", who);
            break;
        }
    for (int nt = 1; nt <= 3; nt++) {
        sl_error e;
        sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1};
        CHECK(!sl_cpu_pool_create(&o, &cs->pools[nt], &e));
    }
}

static inline void ctx_set_free(ctx_set *cs)
{
    for (int nt = 1; nt <= 3; nt++) sl_cpu_pool_destroy(cs->pools[nt]);
}

#endif
