/* matvec_groups_test: sl_cpu_matvec_groups_q (one pool call over several expert groups, each
 * its own weights, activations and token count) against the reference, bit for bit, for the
 * types with a K-quant batch kernel (Q4_K, Q5_K, Q6_K, IQ4_XS), every ISA this CPU has x
 * threads 0-3.
 *
 * The shapes reach what the grouped path splits differently: matvec.c's row chunks (at most
 * 64 rows, merged into calls of up to 256 rows for a group past 8 tokens), rows that are not
 * a multiple of a chunk, and groups of 1-3 tokens (the decode row kernel), 4-8 (the 8-token
 * panels), 9-16 (one 16-token panel), 40 and 70 (two 16-token panels, a short last group),
 * and the call's tail, whose groups keep unmerged chunks from 2 threads on (matvec.c's
 * groups_tail; 300 rows: the groups of 40, 8 and 17 tokens at 2 threads, from the 70 on at 3),
 * so a group's bits are checked merged and unmerged.
 * Random weights from kernels/ref/quant's quantizers, random activations. */
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

static uint64_t rng_state = 0x6a09e667f3bcc908ULL;

static float rndf(void) { return sl_test_unit_float(&rng_state); }

static void *quant_weights(uint32_t type, int64_t rows, int64_t cols)
{
    const size_t rb = sl_ref_matvec_row_bytes(type, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) row[c] = rndf() * (1.0f + (float)(r % 3));
        sl_error e;
        CHECK_MSG(!sl_quant_row(type, row, w + (size_t)r * rb, cols, &e), "sl_quant_row: %s",
                  e.msg);
    }
    free(row);
    return w;
}

enum { N_GROUPS = 9 };

/* One (type, rows, cols): N_GROUPS groups of the token counts below, each checked against
 * sl_ref_matvec of its own weights and activations. */
static void check_groups(const sl_cpu_matvec_ctx *mvs, int n_mv, sl_cpu_pool *const pools[4],
                         uint32_t type, int64_t rows, int64_t cols)
{
    static const int64_t n_tok[N_GROUPS] = {12, 1, 70, 3, 5, 9, 40, 8, 17};
    void *w[N_GROUPS], *xq[N_GROUPS];
    float *x[N_GROUPS], *yr[N_GROUPS], *yf[N_GROUPS];
    size_t wb[N_GROUPS];
    for (int g = 0; g < N_GROUPS; g++) {
        const int64_t n = n_tok[g];
        w[g] = quant_weights(type, rows, cols);
        x[g] = malloc((size_t)(cols * n) * sizeof(float));
        for (int64_t i = 0; i < cols * n; i++) x[g][i] = rndf() * (i % 7 == 0 ? 3.0f : 1.0f);
        yr[g] = malloc((size_t)(rows * n) * sizeof(float));
        yf[g] = malloc((size_t)(rows * n) * sizeof(float));
        wb[g] = sl_cpu_matvec_work_bytes(type, cols, n);
        xq[g] = malloc(wb[g]);
        sl_error e;
        CHECK_MSG(!sl_ref_matvec(type, w[g], rows, cols, x[g], n, yr[g], &e), "%s", e.msg);
    }
    for (int m = 0; m < n_mv; m++) {
        if (mvs[m].isa == SL_CPU_ISA_SCALAR) continue;
        sl_cpu_matvec_group grp[N_GROUPS];
        for (int g = 0; g < N_GROUPS; g++) {
            sl_error e;
            CHECK_MSG(!sl_cpu_matvec_quant_act(&mvs[m], type, x[g], cols, n_tok[g], xq[g], wb[g],
                                               &e), "%s", e.msg);
            grp[g] = (sl_cpu_matvec_group){.w = w[g], .xq = xq[g], .n_batch = n_tok[g],
                                           .y = yf[g]};
        }
        for (int p = 0; p < 4; p++) {
            for (int g = 0; g < N_GROUPS; g++)
                memset(yf[g], 0xff, (size_t)(rows * n_tok[g]) * sizeof(float));
            sl_error e;
            CHECK_MSG(!sl_cpu_matvec_groups_q(&mvs[m], pools[p], type, rows, cols, grp, N_GROUPS,
                                              &e), "%s", e.msg);
            for (int g = 0; g < N_GROUPS; g++)
                CHECK_MSG(!memcmp(yf[g], yr[g], (size_t)(rows * n_tok[g]) * sizeof(float)),
                          "%s %s threads %d: rows %lld cols %lld group %d (%lld tokens) differs "
                          "from the reference", sl_gguf_type_get(type)->name,
                          sl_cpu_matvec_name(&mvs[m]), sl_cpu_pool_threads(pools[p]),
                          (long long)rows, (long long)cols, g, (long long)n_tok[g]);
        }
    }
    for (int g = 0; g < N_GROUPS; g++) {
        free(w[g]);
        free(x[g]);
        free(xq[g]);
        free(yr[g]);
        free(yf[g]);
    }
}

int main(void)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    sl_cpu_matvec_ctx mv[4]; /* scalar, avx2, avx512 (VNNI), and with AMX tiles */
    int n_mv = 0;
    const sl_cpu_isa isas[] = {SL_CPU_ISA_SCALAR, SL_CPU_ISA_AVX2, SL_CPU_ISA_AVX512};
    for (int i = 0; i < 3; i++) {
        sl_error e;
        if (sl_cpu_matvec_init(&mv[n_mv], isas[i], f, &e) == SL_OK) {
            printf("matvec_groups_test: testing %s\n", sl_cpu_matvec_name(&mv[n_mv]));
            n_mv++;
        } else {
            printf("matvec_groups_test: notice: %s not available on this CPU (%s)\n",
                   sl_cpu_isa_name(isas[i]), e.msg);
        }
    }
    sl_test_amx_split(mv, &n_mv, "matvec_groups_test");
    sl_cpu_pool *pools[4] = {NULL};
    for (int nt = 1; nt <= 3; nt++) {
        sl_error e;
        sl_cpu_pool_options o = {.n_threads = nt, .numa_node = -1};
        CHECK(!sl_cpu_pool_create(&o, &pools[nt], &e));
    }
    static const uint32_t types[] = {SL_GGML_Q4_K, SL_GGML_Q5_K, SL_GGML_Q6_K, SL_GGML_IQ4_XS};
    /* 300 rows: chunks of 60, merged calls of 240 and 60; 520: chunks of 58 (a multiple of
     * nothing), merged calls of 232, 232, 56; 1 and 4 super-blocks a row; 96 rows of 10
     * super-blocks: the groups' panels built once (matvec.c's panels_wanted) */
    static const int64_t shapes[][2] = {{300, 256}, {520, 1024}, {64, 512}, {96, 2560}};
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 4; s++)
            check_groups(mv, n_mv, pools, types[t], shapes[s][0], shapes[s][1]);
    for (int nt = 1; nt <= 3; nt++) sl_cpu_pool_destroy(pools[nt]);
    return sl_test_finish("matvec_groups_test");
}
