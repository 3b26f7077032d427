/* runtime/text/sampler.c: greedy, per-seed determinism, top-k/top-p/min-p exclusion, temperature
 * against softmax(logits / T) over many draws, option and logit validation. */
#include <math.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/testing.h"

static sl_sampler *make(float temp, int32_t top_k, float top_p, float min_p, uint64_t seed)
{
    const sl_sampler_options o = {sizeof o, temp, top_k, top_p, min_p, seed};
    sl_sampler *s = NULL;
    sl_error err = {0};
    CHECK_MSG(sl_sampler_create(&o, &s, &err) == SL_OK, "%s", err.msg);
    return s;
}

static int32_t draw(sl_sampler *s, const float *logits, int32_t n)
{
    int32_t t = -1;
    sl_error err = {0};
    CHECK_MSG(sl_sampler_sample(s, logits, n, &t, &err) == SL_OK, "%s", err.msg);
    return t;
}

static void test_defaults_and_greedy(void)
{
    const sl_sampler_options d = sl_sampler_options_default();
    CHECK(d.temp == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f);
    const float logits[] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
    sl_sampler *g = make(0.0f, 0, 1.0f, 0.0f, 1);
    CHECK(draw(g, logits, 5) == 1); /* max, lowest id on ties */
    sl_sampler_destroy(g);
    g = make(-1.0f, 40, 0.5f, 0.1f, 1); /* temp < 0 is greedy whatever the filters */
    CHECK(draw(g, logits, 5) == 1);
    const float masked[] = {-INFINITY, -INFINITY, 1.0f};
    CHECK(draw(g, masked, 3) == 2);
    sl_sampler_destroy(g);
    /* top_k = 1 is greedy at any temperature, for any seed */
    for (uint64_t seed = 0; seed < 20; seed++) {
        sl_sampler *s = make(1.5f, 1, 1.0f, 0.0f, seed);
        CHECK(draw(s, logits, 5) == 1);
        sl_sampler_destroy(s);
    }
}

static void test_determinism(void)
{
    float logits[100];
    for (int i = 0; i < 100; i++) logits[i] = (float)sin(i * 0.37) * 2.0f;
    sl_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 42), *b = make(1.0f, 0, 1.0f, 0.0f, 42);
    sl_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 43);
    int same = 1, differs = 0;
    for (int i = 0; i < 200; i++) {
        const int32_t x = draw(a, logits, 100), y = draw(b, logits, 100), z = draw(c, logits, 100);
        same &= x == y;
        differs |= x != z;
    }
    CHECK(same);
    CHECK(differs);
    sl_sampler_destroy(a);
    sl_sampler_destroy(b);
    sl_sampler_destroy(c);
}

static void test_filters(void)
{
    /* probabilities at T = 1: 0.5, 0.25, 0.125, 0.0625, 0.0625 */
    const float l[] = {logf(0.5f), logf(0.25f), logf(0.125f), logf(0.0625f), logf(0.0625f)};
    int seen[5];
    /* top-k 2: only ids 0, 1 */
    sl_sampler *s = make(1.0f, 2, 1.0f, 0.0f, 7);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2000; i++) seen[draw(s, l, 5)]++;
    CHECK(seen[0] && seen[1] && !seen[2] && !seen[3] && !seen[4]);
    sl_sampler_destroy(s);
    /* top-p 0.8: 0.5 + 0.25 < 0.8 <= 0.875, so ids 0, 1, 2 */
    s = make(1.0f, 0, 0.8f, 0.0f, 7);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 4000; i++) seen[draw(s, l, 5)]++;
    CHECK(seen[0] && seen[1] && seen[2] && !seen[3] && !seen[4]);
    sl_sampler_destroy(s);
    /* min-p 0.2: p >= 0.1, so ids 0, 1, 2 */
    s = make(1.0f, 0, 1.0f, 0.2f, 7);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 4000; i++) seen[draw(s, l, 5)]++;
    CHECK(seen[0] && seen[1] && seen[2] && !seen[3] && !seen[4]);
    sl_sampler_destroy(s);
    /* min-p 0.6: only the top token survives */
    s = make(5.0f, 0, 1.0f, 0.6f, 7);
    for (int i = 0; i < 100; i++) CHECK(draw(s, l, 5) == 0);
    sl_sampler_destroy(s);
    /* top-p and min-p see the T = 1 distribution even when T is large (llama.cpp's order) */
    s = make(100.0f, 0, 0.7f, 0.0f, 7);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2000; i++) seen[draw(s, l, 5)]++;
    CHECK(seen[0] && seen[1] && !seen[2] && !seen[3] && !seen[4]);
    sl_sampler_destroy(s);
}

/* Empirical frequencies vs softmax(logits / T): Pearson chi-square with generous bounds. */
static void test_temperature(void)
{
    const float l[] = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f};
    enum { N = 6, DRAWS = 60000 };
    const float temps[] = {0.5f, 1.0f, 2.0f};
    for (int t = 0; t < 3; t++) {
        double p[N], sum = 0;
        for (int i = 0; i < N; i++) sum += p[i] = exp(l[i] / temps[t]);
        for (int i = 0; i < N; i++) p[i] /= sum;
        sl_sampler *s = make(temps[t], 0, 1.0f, 0.0f, 1234 + (uint64_t)t);
        int count[N] = {0};
        for (int i = 0; i < DRAWS; i++) count[draw(s, l, N)]++;
        double chi2 = 0;
        for (int i = 0; i < N; i++) {
            const double e = p[i] * DRAWS;
            chi2 += (count[i] - e) * (count[i] - e) / e;
        }
        /* 5 degrees of freedom: P(chi2 > 30) ~ 1.5e-5 */
        CHECK_MSG(chi2 < 30.0, "T=%g: chi-square %.2f", (double)temps[t], chi2);
        sl_sampler_destroy(s);
    }
}

static void test_validation(void)
{
    sl_sampler *s = NULL;
    sl_error err = {0};
    sl_sampler_options o = sl_sampler_options_default();
    o.temp = NAN;
    CHECK(sl_sampler_create(&o, &s, &err) == SL_ERR_INVALID && s == NULL);
    CHECK_CONTAINS(err.msg, "temp");
    o = sl_sampler_options_default();
    o.top_p = 0.0f;
    CHECK(sl_sampler_create(&o, &s, &err) == SL_ERR_INVALID);
    /* the range the CLI checks --top-p against (SL_RANGE_TOP_P), named once */
    CHECK(!strcmp(err.msg, "sampler: top_p: 0 is outside (0, 1]"));
    o.top_p = 1.5f;
    CHECK(sl_sampler_create(&o, &s, &err) == SL_ERR_INVALID);
    o = sl_sampler_options_default();
    o.min_p = -0.1f;
    CHECK(sl_sampler_create(&o, &s, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "min_p");
    CHECK(sl_sampler_create(NULL, &s, &err) == SL_OK && s); /* NULL options: defaults */
    const float ok[] = {1.0f, 2.0f};
    int32_t t;
    CHECK(sl_sampler_sample(s, ok, 0, &t, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_vocab");
    const float bad[] = {1.0f, NAN, 0.0f};
    CHECK(sl_sampler_sample(s, bad, 3, &t, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "logits[1]");
    const float inf[] = {INFINITY, 0.0f};
    CHECK(sl_sampler_sample(s, inf, 2, &t, &err) == SL_ERR_INVALID);
    const float all_masked[] = {-INFINITY, -INFINITY};
    CHECK(sl_sampler_sample(s, all_masked, 2, &t, &err) == SL_ERR_INVALID);
    CHECK(sl_sampler_sample(s, ok, 2, NULL, &err) == SL_ERR_INVALID);
    sl_sampler_destroy(s);
    sl_sampler_destroy(NULL);
}

int main(void)
{
    test_defaults_and_greedy();
    test_determinism();
    test_filters();
    test_temperature();
    test_validation();
    return sl_test_finish("sampler_test");
}
