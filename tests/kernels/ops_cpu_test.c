/* Tests of kernels/cpu/ops, the fast kernels (the references themselves: ops_test.c; shared
 * helpers: ops_testlib.h).
 *
 * 2. Every fast op against the reference on fresh random data, for every ISA path this CPU has
 *    (the others are skipped with a notice), at lengths that hit every vector remainder
 *    (1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 4099), buffers allocated at their exact size so
 *    ASan sees any tail overrun. Tolerances (|fast - ref| <= atol + rtol |ref| per element):
 *      rms_norm          rtol 1e-5
 *      softmax           rtol 2e-5, atol 1e-30 (exp of the shifted logits; float x*scale)
 *      silu, swiglu      rtol 1e-5, atol 1e-30
 *      gelu, geglu       rtol 1e-5, atol 1e-16 |x| |up| + 1e-30, both kinds (tanh, erf): the
 *                        atol is the reference's own granularity: it evaluates 0.5 x (1 + tanh)
 *                        and 0.5 x (1 + erf) in double, which cancel to 0 below x ~ -9 (tanh)
 *                        and x ~ -6 (erf) where the fast forms stay relative-accurate (measured
 *                        worst: 0.37 of this bound on a 4M-point sweep of [-30, 30])
 *      rope              atol 1e-6 * max|x| (float angle table, float rotation)
 *      attention         atol 2e-6 * max|v| (<= 129 positions), 2e-5 * max|v| (4099 positions;
 *                        float dot products and online softmax; measured ~5e-8 relative)
 *      add, mul, scale   exact (one rounding in both)
 *      to_f16            bit-exact to sl_quant_fp32_to_fp16, with NaNs, infinities, the
 *                        overflow edge, subnormal halves and ties among the inputs
 * 3. ISA selection (names, env override, refusal of missing ISAs) and argument validation.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/ref/half.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quant.h"
#include "tests/kernels/ops_testlib.h"
#include "tests/testing.h"

/* lengths that hit every vector remainder */
static const int64_t k_lengths[] = {1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 4096 + 3};
enum { N_LENGTHS = sizeof k_lengths / sizeof k_lengths[0] };

/* ---- fast kernels vs the reference --------------------------------------------------------- */

static void fast_elementwise(const sl_cpu_ops *ops, uint64_t *rng)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[96];
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = k_lengths[li];
        float *x = fvec(n, rng, 3.0f), *w = fvec(n, rng, 1.0f), *b = fvec(n, rng, 4.0f);
        float *want = fvec(n, rng, 0.0f), *got = fvec(n, rng, 0.0f);

        for (int variant = 0; variant < 3; variant++) { /* no weight, w, 1 + w */
            const float *wp = variant ? w : NULL;
            const bool opw = variant == 2;
            CHECK(sl_ref_rms_norm(x, wp, want, n, 1e-6f, opw, &err) == SL_OK);
            CHECK(sl_cpu_rms_norm(ops, x, wp, got, n, 1e-6f, opw, &err) == SL_OK);
            snprintf(what, sizeof what, "%s rms_norm n=%lld variant %d", isa, (long long)n,
                     variant);
            close_arr(what, got, want, n, 1e-5, 0.0);
        }
        /* in place */
        float *xi = fcopy(x, n);
        CHECK(sl_cpu_rms_norm(ops, xi, w, xi, n, 1e-6f, false, &err) == SL_OK);
        CHECK(sl_ref_rms_norm(x, w, want, n, 1e-6f, false, &err) == SL_OK);
        snprintf(what, sizeof what, "%s rms_norm in place n=%lld", isa, (long long)n);
        close_arr(what, xi, want, n, 1e-5, 0.0);
        free(xi);

        for (int variant = 0; variant < 3; variant++) { /* plain, scale + mask, mask with -inf */
            float *mask = NULL;
            float sc = 1.0f;
            if (variant) {
                mask = fvec(n, rng, 1.0f);
                sc = 0.37f;
                if (variant == 2)
                    for (int64_t i = 0; i < n; i += 3) mask[i] = -INFINITY;
            }
            memcpy(want, x, (size_t)n * 4);
            memcpy(got, x, (size_t)n * 4);
            CHECK(sl_ref_softmax(want, n, sc, mask, &err) == SL_OK);
            CHECK(sl_cpu_softmax(ops, got, n, sc, mask, &err) == SL_OK);
            snprintf(what, sizeof what, "%s softmax n=%lld variant %d", isa, (long long)n, variant);
            close_arr(what, got, want, n, 2e-5, 1e-30);
            free(mask);
        }
        /* fully masked row -> zeros */
        {
            float *mask = fvec(n, rng, 0.0f);
            for (int64_t i = 0; i < n; i++) mask[i] = -INFINITY;
            memcpy(got, x, (size_t)n * 4);
            CHECK(sl_cpu_softmax(ops, got, n, 1.0f, mask, &err) == SL_OK);
            CHECK(max_abs(got, n) == 0.0);
            free(mask);
        }

        CHECK(sl_ref_silu(x, want, n, &err) == SL_OK);
        CHECK(sl_cpu_silu(ops, x, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s silu n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 1e-5, 1e-30);

        CHECK(sl_ref_swiglu(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_swiglu(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s swiglu n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 1e-5, 1e-30);
        xi = fcopy(x, n); /* out aliases gate */
        CHECK(sl_cpu_swiglu(ops, xi, b, xi, n, &err) == SL_OK);
        close_arr(what, xi, want, n, 1e-5, 1e-30);
        free(xi);

        for (int kind = SL_GELU_TANH; kind <= SL_GELU_ERF; kind++) {
            const char *kn = kind == SL_GELU_ERF ? "erf" : "tanh";
            CHECK(sl_ref_gelu(x, want, n, (sl_gelu_kind)kind, &err) == SL_OK);
            CHECK(sl_cpu_gelu(ops, x, got, n, (sl_gelu_kind)kind, &err) == SL_OK);
            snprintf(what, sizeof what, "%s gelu %s n=%lld", isa, kn, (long long)n);
            close_gelu(what, got, want, x, NULL, n);
            CHECK(sl_ref_geglu(x, b, want, n, (sl_gelu_kind)kind, &err) == SL_OK);
            CHECK(sl_cpu_geglu(ops, x, b, got, n, (sl_gelu_kind)kind, &err) == SL_OK);
            snprintf(what, sizeof what, "%s geglu %s n=%lld", isa, kn, (long long)n);
            close_gelu(what, got, want, x, b, n);
            xi = fcopy(x, n); /* out aliases gate */
            CHECK(sl_cpu_geglu(ops, xi, b, xi, n, (sl_gelu_kind)kind, &err) == SL_OK);
            close_gelu(what, xi, want, x, b, n);
            free(xi);
        }

        CHECK(sl_ref_add(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_add(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s add n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);
        CHECK(sl_ref_mul(x, b, want, n, &err) == SL_OK);
        CHECK(sl_cpu_mul(ops, x, b, got, n, &err) == SL_OK);
        snprintf(what, sizeof what, "%s mul n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);
        memcpy(want, x, (size_t)n * 4);
        memcpy(got, x, (size_t)n * 4);
        CHECK(sl_ref_scale(want, n, -0.3f, &err) == SL_OK);
        CHECK(sl_cpu_scale(ops, got, n, -0.3f, &err) == SL_OK);
        snprintf(what, sizeof what, "%s scale n=%lld", isa, (long long)n);
        close_arr(what, got, want, n, 0.0, 0.0);

        /* binary16: scaled so some land in the subnormal and overflow ranges, then specials */
        static const float special[] = {NAN, -INFINITY, INFINITY, 65519.0f, 65520.0f, -65536.0f,
                                        0x1p-25f, 0x1.8p-24f, -0x1p-14f, 1.0f + 0x1p-11f,
                                        -0.0f, 0x1.00002p-25f};
        float *xf = fcopy(x, n);
        for (int64_t i = 0; i < n; i++) xf[i] *= i % 3 == 0 ? 1e-6f : i % 3 == 1 ? 3e4f : 1.0f;
        for (int64_t i = 0; i < n && i < (int64_t)(sizeof special / sizeof special[0]); i++)
            xf[n - 1 - i] = special[i];
        uint16_t *hw = malloc((size_t)n * sizeof *hw), *hg = malloc((size_t)n * sizeof *hg);
        for (int64_t i = 0; i < n; i++) hw[i] = sl_quant_fp32_to_fp16(xf[i]);
        CHECK(sl_cpu_to_f16(ops, xf, hg, n, &err) == SL_OK);
        CHECK_MSG(!memcmp(hw, hg, (size_t)n * sizeof *hw), "%s to_f16 n=%lld differs", isa,
                  (long long)n);
        free(hw);
        free(hg);
        free(xf);

        free(x);
        free(w);
        free(b);
        free(want);
        free(got);
    }
    /* silu at the exp clamps: large |x| stay finite and right */
    const float ext[9] = {-200.0f, -100.0f, -88.5f, -87.0f, -30.0f, 30.0f, 87.0f, 88.5f, 200.0f};
    float want[9], got[9];
    CHECK(sl_ref_silu(ext, want, 9, &err) == SL_OK);
    CHECK(sl_cpu_silu(ops, ext, got, 9, &err) == SL_OK);
    snprintf(what, sizeof what, "%s silu extremes", isa);
    close_arr(what, got, want, 9, 1e-5, 1e-30);
    /* gelu on a fine grid over [-30, 30] (both tails, the exp clamps, the erfc branch switch
     * at 0) plus far values; odd length, so the vector tail runs too */
    enum { NG = 6001 + 7 };
    float *gx = malloc(NG * sizeof *gx), *gw = malloc(NG * sizeof *gw);
    float *gg = malloc(NG * sizeof *gg);
    for (int i = 0; i < 6001; i++) gx[i] = -30.0f + 0.01f * (float)i;
    const float far[7] = {-1e4f, -100.0f, -0.0f, 0.0f, 1e-30f, 100.0f, 1e4f};
    memcpy(gx + 6001, far, sizeof far);
    for (int kind = SL_GELU_TANH; kind <= SL_GELU_ERF; kind++) {
        CHECK(sl_ref_gelu(gx, gw, NG, (sl_gelu_kind)kind, &err) == SL_OK);
        CHECK(sl_cpu_gelu(ops, gx, gg, NG, (sl_gelu_kind)kind, &err) == SL_OK);
        snprintf(what, sizeof what, "%s gelu %s grid", isa, kind == SL_GELU_ERF ? "erf" : "tanh");
        close_gelu(what, gg, gw, gx, NULL, NG);
    }
    free(gx);
    free(gw);
    free(gg);
}

static void fast_rope(const sl_cpu_ops *ops, uint64_t *rng)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[128];
    /* n_rot / 2 hits every remainder of 8 and 16; head_dim > n_rot checks partial rotary */
    const int32_t rots[] = {2, 14, 16, 30, 32, 34, 62, 66, 128, 200};
    enum { T = 3, H = 5 };
    const int32_t pos[T] = {0, 77, 131071};
    for (size_t ri = 0; ri < sizeof rots / sizeof rots[0]; ri++) {
        for (int extra = 0; extra <= 6; extra += 6) {
            const int32_t n_rot = rots[ri], hd = n_rot + extra;
            for (int mode = 0; mode <= 2; mode += 2) {
                for (int yarn = 0; yarn < 2; yarn++) {
                    sl_rope_params p = sl_rope_params_make((sl_rope_mode)mode, n_rot, 1e6f);
                    if (yarn) {
                        p.freq_scale = 0.25f;
                        p.ext_factor = 1.0f;
                        p.attn_factor = 0.9f;
                        p.n_ctx_orig = 8192;
                    }
                    const int64_t n = (int64_t)T * H * hd;
                    float *x = fvec(n, rng, 2.0f), *a = fcopy(x, n), *b = fcopy(x, n);
                    CHECK(sl_ref_rope(a, T, H, hd, pos, &p, &err) == SL_OK);
                    CHECK(sl_cpu_rope(ops, b, T, H, hd, pos, &p, &err) == SL_OK);
                    snprintf(what, sizeof what, "%s rope n_rot=%d hd=%d mode=%d yarn=%d", isa,
                             n_rot, hd, mode, yarn);
                    close_arr(what, b, a, n, 0.0, 1e-6 * max_abs(x, n));
                    /* the two-step form (tables, then the rotation) is the same bits */
                    float *c = fcopy(x, n), *cs = malloc((size_t)T * 2 * (size_t)n_rot * 4);
                    CHECK(sl_cpu_rope_table(&p, T, pos, cs, &err) == SL_OK);
                    CHECK(sl_cpu_rope_apply(ops, c, T, H, hd, &p, cs, &err) == SL_OK);
                    CHECK_MSG(!memcmp(b, c, (size_t)n * sizeof *c), "%s: table + apply", what);
                    free(c);
                    free(cs);
                    free(x);
                    free(a);
                    free(b);
                }
            }
        }
    }
}

static void fast_attention_case(const sl_cpu_ops *ops, uint64_t *rng, sl_attn_params p,
                                double tol)
{
    const char *isa = sl_cpu_isa_name(ops->isa);
    sl_error err;
    char what[192];
    float *q = fvec((int64_t)p.n_head * p.head_dim, rng, 1.0f);
    void *k = make_cache(p.n_pos, p.n_kv_head, p.head_dim, p.kv_type, rng, 1.0f);
    void *v = make_cache(p.n_pos, p.n_kv_head, p.head_dim, p.kv_type, rng, 1.0f);
    float *sinks = NULL;
    if (p.sinks) {
        sinks = fvec(p.n_head, rng, 2.0f);
        p.sinks = sinks;
    }
    const int64_t no = (int64_t)p.n_head * p.head_dim;
    float *want = fvec(no, rng, 0.0f), *got = fvec(no, rng, 0.0f);
    CHECK(sl_ref_attn_decode(q, k, v, &p, want, &err) == SL_OK);
    CHECK_MSG(sl_cpu_attn_decode(ops, q, k, v, &p, got, &err) == SL_OK, "%s", err.msg);
    const double vmax =
        cache_max_abs(v, (size_t)p.n_pos * (size_t)p.n_kv_head * (size_t)p.head_dim, p.kv_type);
    snprintf(what, sizeof what,
             "%s attn hd=%d heads=%d/%d n_pos=%d %s window=%d sinks=%d cap=%g", isa, p.head_dim,
             p.n_head, p.n_kv_head, p.n_pos, p.kv_type == SL_KV_F16 ? "f16" : "f32", p.window,
             sinks != NULL, (double)p.softcap);
    close_arr(what, got, want, no, 0.0, tol * vmax);
    free(q);
    free(k);
    free(v);
    free(sinks);
    free(want);
    free(got);
}

static void fast_attention(const sl_cpu_ops *ops, uint64_t *rng)
{
    static const float dummy_sinks[1] = {0.0f}; /* non-NULL marks "make sinks" */
    /* head_dim over every remainder; a few positions; f32 and f16 */
    for (int li = 0; li < N_LENGTHS - 1; li++) {
        for (int t = 0; t < 2; t++) {
            sl_attn_params p = {.n_head = 4, .n_kv_head = 2, .head_dim = (int32_t)k_lengths[li],
                                .n_pos = 37, .kv_type = (sl_kv_type)t};
            fast_attention_case(ops, rng, p, 2e-6);
        }
    }
    /* positions around the block size, GQA groups above the head chunk, features */
    const int32_t nps[] = {1, 7, 63, 64, 65, 129};
    for (size_t i = 0; i < sizeof nps / sizeof nps[0]; i++) {
        for (int t = 0; t < 2; t++) {
            sl_attn_params p = {.n_head = 24, .n_kv_head = 2, .head_dim = 64, .n_pos = nps[i],
                                .kv_type = (sl_kv_type)t};
            fast_attention_case(ops, rng, p, 2e-6);
            p.window = 5;
            p.sinks = dummy_sinks;
            fast_attention_case(ops, rng, p, 2e-6);
            p.window = 0;
            p.sinks = NULL;
            p.softcap = 5.0f;
            p.scale = 0.3f;
            fast_attention_case(ops, rng, p, 2e-6);
            p.softcap = 0.0f; /* Mistral Large 3's temperature at the query's position */
            p.temp_scale = 0.5f;
            p.temp_len = 8;
            fast_attention_case(ops, rng, p, 2e-6);
        }
    }
    /* a long cache: 4099 positions, llama-like heads; then gpt-oss-like (sinks + window) and
     * gemma-like (head_dim 256, window) */
    for (int t = 0; t < 2; t++) {
        sl_attn_params p = {.n_head = 8, .n_kv_head = 2, .head_dim = 128, .n_pos = 4096 + 3,
                            .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, p, 2e-5);
        sl_attn_params g = {.n_head = 8, .n_kv_head = 8, .head_dim = 64, .n_pos = 4096 + 3,
                            .window = 128, .sinks = dummy_sinks, .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, g, 2e-5);
        sl_attn_params m = {.n_head = 4, .n_kv_head = 1, .head_dim = 256, .n_pos = 4096 + 3,
                            .window = 1024, .kv_type = (sl_kv_type)t};
        fast_attention_case(ops, rng, m, 2e-5);
    }
}

static void test_fast_paths(void)
{
    const sl_cpu_features f = sl_cpu_features_detect();
    printf("cpu features: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d "
           "avx512bf16=%d avx512vnni=%d\n",
           f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512vl, f.avx512bf16,
           f.avx512vnni);
    /* SLUICE_TEST_REQUIRE_ISA=avx512 (or avx2) turns that path's skip into a failure: for runs
     * on a machine known to have it (the GPU hosts), where a skip would hide a regression */
    const char *req = getenv("SLUICE_TEST_REQUIRE_ISA");
    sl_cpu_isa required = SL_CPU_ISA_AUTO;
    if (req && *req) {
        sl_error e;
        CHECK_MSG(sl_cpu_isa_parse(req, &required, &e) == SL_OK, "SLUICE_TEST_REQUIRE_ISA: %s",
                  e.msg);
    }
    for (int isa = SL_CPU_ISA_SCALAR; isa < SL_CPU_ISA_COUNT; isa++) {
        if (!sl_cpu_isa_available(f, (sl_cpu_isa)isa)) {
            CHECK_MSG(isa != (int)required, "SLUICE_TEST_REQUIRE_ISA=%s but the CPU lacks it", req);
            printf("NOTICE: skipping the %s path: this CPU lacks it\n",
                   sl_cpu_isa_name((sl_cpu_isa)isa));
            continue;
        }
        sl_cpu_ops ops;
        sl_error err;
        CHECK(sl_cpu_ops_init(&ops, (sl_cpu_isa)isa, f, &err) == SL_OK);
        CHECK(ops.isa == (sl_cpu_isa)isa);
        uint64_t rng = 100 + (uint64_t)isa;
        const int before = sl_test_g.failures;
        fast_elementwise(&ops, &rng);
        fast_rope(&ops, &rng);
        fast_attention(&ops, &rng);
        printf("%s path: %s\n", sl_cpu_isa_name(ops.isa),
               sl_test_g.failures == before ? "ok" : "FAILED");
    }
}

/* ---- dispatch and validation of the fast entry points ---------------------------------------- */

static void test_dispatch(void)
{
    sl_error err;
    sl_cpu_isa isa;
    CHECK(sl_cpu_isa_parse("avx2", &isa, &err) == SL_OK && isa == SL_CPU_ISA_AVX2);
    CHECK(sl_cpu_isa_parse("scalar", &isa, &err) == SL_OK && isa == SL_CPU_ISA_SCALAR);
    CHECK(sl_cpu_isa_parse("AVX2", &isa, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "'AVX2'");
    CHECK(sl_cpu_isa_parse("", &isa, &err) == SL_ERR_INVALID);

    sl_cpu_ops ops;
    const sl_cpu_features none = {0};
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, none, &err) == SL_OK &&
          ops.isa == SL_CPU_ISA_SCALAR);
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AVX2, none, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "avx2");
    sl_cpu_features only2 = {.avx2 = true, .fma = true, .f16c = true};
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AVX512, only2, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "avx512f");
#if defined(__x86_64__)
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, only2, &err) == SL_OK &&
          ops.isa == SL_CPU_ISA_AVX2);
#endif
    CHECK(sl_cpu_ops_init(&ops, (sl_cpu_isa)9, none, &err) == SL_ERR_INVALID);

    /* (SLUICE_CPU_ISA is read by runtime/engine/env.c: tests/runtime/env_test) */

    /* wrappers validate like the references */
    CHECK(sl_cpu_ops_init(&ops, SL_CPU_ISA_SCALAR, none, &err) == SL_OK);
    float x[4] = {1, 2, 3, 4};
    CHECK(sl_cpu_rms_norm(NULL, x, NULL, x, 4, 0.0f, false, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "ops");
    CHECK(sl_cpu_softmax(&ops, x, -2, 1.0f, NULL, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n = -2");
    CHECK(sl_cpu_swiglu(&ops, x, NULL, x, 4, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "up is NULL");
    CHECK(sl_cpu_add(&ops, NULL, NULL, NULL, 0, &err) == SL_OK);
    CHECK(sl_cpu_geglu(&ops, x, x, x, 4, (sl_gelu_kind)7, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "kind = 7");
    CHECK(sl_cpu_geglu(&ops, x, NULL, x, 4, SL_GELU_TANH, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "up is NULL");
    CHECK(sl_cpu_gelu(&ops, NULL, x, 4, SL_GELU_ERF, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "x is NULL");
    CHECK(sl_cpu_gelu(&ops, NULL, NULL, 0, SL_GELU_ERF, &err) == SL_OK);
    sl_rope_params big = sl_rope_params_make(SL_ROPE_NEOX, 2048, 10000.0f);
    int32_t pos = 0;
    float *row = calloc(2048, sizeof *row);
    CHECK(sl_cpu_rope(&ops, row, 1, 1, 2048, &pos, &big, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "n_rot = 2048");
    free(row);
    sl_attn_params ap = {.n_head = 3, .n_kv_head = 2, .head_dim = 4, .n_pos = 1};
    CHECK(sl_cpu_attn_decode(&ops, x, x, x, &ap, x, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_head = 3");
}

int main(void)
{
    test_dispatch();
    test_fast_paths();
    return sl_test_finish("ops_cpu_test");
}
