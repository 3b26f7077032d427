/* Tests of sl_cpu_attn_prefill (kernels/cpu/attn_prefill_tmpl.h), the tiled prompt attention,
 * against the double reference sl_ref_attn_decode run per query token (n_pos = its position
 * + 1), on every ISA path this CPU has:
 *  - head_dim over the vector remainders (1, 7, 16, 17, 64, 80, 128, 256) and one above
 *    SL_CPU_ATTN_TILE_MAX_D (the per-token fallback);
 *  - GQA groups 1 (MHA), 3, 8, 32 (a tile's whole width) and 40 (wider than a tile: head
 *    chunks); prompts of 1, 5, 33 and 40 tokens at the end of a longer cache, and positions
 *    that are not consecutive;
 *  - causal only, a sliding window, sinks, soft-capping with a custom scale; F32 and F16
 *    caches;
 *  - the tiles computed in two disjoint ranges (as two threads would), each once;
 *  - a token alone (decode) gets its row's bits in the prompt, bit for bit (the engine's
 *    prefill == decode invariance rests on it).
 * Tolerance |got - want| <= 2e-6 max|v| (caches <= 300 positions) and 2e-5 max|v| (1,100
 * positions), the bounds of ops_cpu_test.c's decode attention; the measured worst ratio per
 * ISA is printed. Also: argument validation (positions out of the cache, tile ranges).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/ref/ops.h"
#include "tests/kernels/ops_testlib.h"
#include "tests/testing.h"

typedef struct shape {
    int32_t n_head, n_kv_head, head_dim, n_pos, n_tok;
    float temp; /* sl_attn_params temp_scale, over temp_len 8 (0: none) */
} shape;

/* worst |got - want| / max|v| seen on this ISA */
static double g_worst;

static void prefill_case(const sl_cpu_ops *ops, uint64_t *rng, shape s, sl_kv_type kt,
                         int32_t window, bool sinks, float cap, float scale, bool gaps,
                         double tol)
{
    sl_error err;
    sl_attn_params p = {.n_head = s.n_head, .n_kv_head = s.n_kv_head, .head_dim = s.head_dim,
                        .n_pos = s.n_pos, .scale = scale, .window = window, .softcap = cap,
                        .kv_type = kt, .temp_scale = s.temp, .temp_len = 8};
    const int64_t qd = (int64_t)s.n_head * s.head_dim, nq = qd * s.n_tok;
    float *q = fvec(nq, rng, 1.0f);
    void *k = make_cache(s.n_pos, s.n_kv_head, s.head_dim, kt, rng, 1.0f);
    void *v = make_cache(s.n_pos, s.n_kv_head, s.head_dim, kt, rng, 1.0f);
    float *sk = sinks ? fvec(s.n_head, rng, 2.0f) : NULL;
    p.sinks = sk;
    int32_t *pos = malloc((size_t)s.n_tok * sizeof *pos);
    for (int32_t t = 0; t < s.n_tok; t++) /* the prompt at the cache's end, or spread out */
        pos[t] = gaps ? (int32_t)((int64_t)(t + 1) * (s.n_pos - 1) / s.n_tok)
                      : s.n_pos - s.n_tok + t;
    float *want = fvec(nq, rng, 0.0f), *got = malloc((size_t)nq * sizeof *got);
    for (int64_t i = 0; i < nq; i++) got[i] = NAN; /* every element must be written */
    for (int32_t t = 0; t < s.n_tok; t++) {
        sl_attn_params pt = p;
        pt.n_pos = pos[t] + 1;
        CHECK(sl_ref_attn_decode(q + t * qd, k, v, &pt, want + t * qd, &err) == SL_OK);
    }
    const int64_t n_tiles = sl_cpu_attn_prefill_tiles(ops, &p, s.n_tok);
    CHECK(n_tiles >= 1);
    const int64_t half = n_tiles / 2;
    CHECK_MSG(sl_cpu_attn_prefill(ops, q, k, v, &p, pos, s.n_tok, half, n_tiles, got, &err) ==
                  SL_OK, "%s", err.msg);
    CHECK_MSG(sl_cpu_attn_prefill(ops, q, k, v, &p, pos, s.n_tok, 0, half, got, &err) == SL_OK,
              "%s", err.msg);
    /* each token alone (decode) gets the bits of its row in the prompt */
    float *one = malloc((size_t)qd * sizeof *one);
    for (int32_t t = 0; t < s.n_tok; t += 1 + s.n_tok / 4) {
        const int64_t nt = sl_cpu_attn_prefill_tiles(ops, &p, 1);
        CHECK(sl_cpu_attn_prefill(ops, q + t * qd, k, v, &p, pos + t, 1, 0, nt, one, &err) ==
              SL_OK);
        CHECK_MSG(!memcmp(one, got + t * qd, (size_t)qd * sizeof *one),
                  "%s: token %d alone differs from its row in the prompt (hd=%d heads=%d/%d "
                  "window=%d)", sl_cpu_isa_name(ops->isa), t, s.head_dim, s.n_head,
                  s.n_kv_head, window);
    }
    free(one);
    const double vmax =
        cache_max_abs(v, (size_t)s.n_pos * (size_t)s.n_kv_head * (size_t)s.head_dim, kt);
    double worst = 0.0;
    for (int64_t i = 0; i < nq; i++) {
        const double d = fabs((double)got[i] - (double)want[i]) / vmax;
        worst = d > worst || isnan(d) ? d : worst;
    }
    g_worst = worst > g_worst || isnan(worst) ? worst : g_worst;
    char what[224];
    snprintf(what, sizeof what,
             "%s prefill hd=%d heads=%d/%d n_pos=%d n_tok=%d %s window=%d sinks=%d cap=%g "
             "gaps=%d temp=%g",
             sl_cpu_isa_name(ops->isa), s.head_dim, s.n_head, s.n_kv_head, s.n_pos, s.n_tok,
             kt == SL_KV_F16 ? "f16" : "f32", window, sinks, (double)cap, gaps, (double)s.temp);
    close_arr(what, got, want, nq, 0.0, tol * vmax);
    free(q);
    free(k);
    free(v);
    free(sk);
    free(pos);
    free(want);
    free(got);
}

static void test_isa(const sl_cpu_ops *ops, uint64_t *rng)
{
    g_worst = 0.0;
    static const int32_t dims[] = {1, 7, 16, 17, 64, 80, 128, 256, 544, SL_CPU_ATTN_TILE_MAX_D, SL_CPU_ATTN_TILE_MAX_D + 8};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (int t = 0; t < 2; t++)
            prefill_case(ops, rng, (shape){4, 2, dims[i], 45, 33, 0.0f}, (sl_kv_type)t, 0,
                         false, 0.0f, 0.0f, false, 2e-6);
    static const shape groups[] = {
        {8, 8, 64, 80, 40, 0.0f},   {6, 2, 128, 90, 40, 0.0f}, {16, 2, 64, 70, 33, 0.0f},
        {32, 1, 32, 40, 5, 0.0f},   {40, 1, 16, 50, 33, 0.0f},   {4, 1, 64, 1, 1, 0.0f},
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        for (int t = 0; t < 2; t++) {
            const sl_kv_type kt = (sl_kv_type)t;
            const shape s = groups[i];
            prefill_case(ops, rng, s, kt, 0, false, 0.0f, 0.0f, false, 2e-6);
            prefill_case(ops, rng, s, kt, 0, false, 0.0f, 0.0f, true, 2e-6);
            prefill_case(ops, rng, s, kt, 7, true, 0.0f, 0.0f, false, 2e-6);
            prefill_case(ops, rng, s, kt, 40, false, 0.0f, 0.0f, true, 2e-6);
            prefill_case(ops, rng, s, kt, 0, false, 5.0f, 0.3f, false, 2e-6);
            shape st = s; /* Mistral Large 3's temperature: each row at its own position */
            st.temp = 0.5f;
            prefill_case(ops, rng, st, kt, 0, false, 0.0f, 0.0f, true, 2e-6);
        }
    }
    /* a long cache: a 40-token prompt after 1,060 cached positions (llama-like heads), and
     * gpt-oss-like (sinks, window 128) and gemma-like (head_dim 256, window 512) prompts */
    for (int t = 0; t < 2; t++) {
        const sl_kv_type kt = (sl_kv_type)t;
        prefill_case(ops, rng, (shape){8, 2, 128, 1100, 40, 0.0f}, kt, 0, false, 0.0f, 0.0f,
                     false, 2e-5);
        prefill_case(ops, rng, (shape){8, 8, 64, 1100, 40, 0.0f}, kt, 128, true, 0.0f, 0.0f,
                     false, 2e-5);
        prefill_case(ops, rng, (shape){4, 1, 256, 1100, 40, 0.0f}, kt, 512, false, 0.0f, 0.0f,
                     false, 2e-5);
    }
    printf("%s path: worst |prefill - reference| = %.3g max|v|\n", sl_cpu_isa_name(ops->isa),
           g_worst);
}

static void test_validation(const sl_cpu_ops *ops)
{
    sl_error err;
    float x[64] = {0};
    int32_t pos[2] = {0, 1};
    sl_attn_params p = {.n_head = 2, .n_kv_head = 1, .head_dim = 4, .n_pos = 2};
    const int64_t n = sl_cpu_attn_prefill_tiles(ops, &p, 2);
    CHECK(n >= 1);
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, pos, 2, 0, n, x + 32, &err) == SL_OK);
    pos[1] = 2; /* outside the cache */
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, pos, 2, 0, n, x + 32, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "pos[1] = 2");
    pos[1] = 1;
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, pos, 2, 0, n + 1, x + 32, &err) ==
          SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "tiles");
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, NULL, 2, 0, n, x + 32, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "pos is NULL");
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, pos, 0, 0, 0, x + 32, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_tok = 0");
    p.n_head = 3;
    p.n_kv_head = 2;
    CHECK(sl_cpu_attn_prefill_tiles(ops, &p, 2) == 0);
    CHECK(sl_cpu_attn_prefill(ops, x, x, x, &p, pos, 2, 0, 1, x + 32, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_head = 3");
}

int main(void)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    for (int isa = SL_CPU_ISA_SCALAR; isa < SL_CPU_ISA_COUNT; isa++) {
        if (!sl_cpu_isa_available(f, (sl_cpu_isa)isa)) {
            printf("NOTICE: skipping the %s path: this CPU lacks it\n",
                   sl_cpu_isa_name((sl_cpu_isa)isa));
            continue;
        }
        sl_cpu_ops ops;
        sl_error err;
        CHECK(sl_cpu_ops_init(&ops, (sl_cpu_isa)isa, f, &err) == SL_OK);
        uint64_t rng = 7 + (uint64_t)isa;
        test_isa(&ops, &rng);
        test_validation(&ops);
    }
    return sl_test_finish("attn_prefill_test");
}
