/* rope_cache_test: runtime/rope_cache.h. Every get, hit or miss, returns exactly the table
 * sl_cpu_rope_table builds for its params and positions: across layers of two configurations
 * (gemma3's local and global bases), YaRN, rope_freqs factors rewritten in place under the same
 * pointer (a live reload), new positions, more configurations than slots (eviction), a batch
 * after single tokens. A repeated key is served from its slot (the same table, not rebuilt);
 * bad params and counts are refused by name; the invariants hold after every step. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "runtime/engine/rope_cache.h"
#include "tests/testing.h"

static int64_t n_gets;

/* c's table of p at pos against a fresh one; returns the cache's pointer. */
static const float *get_checked(sl__rope_cache *c, const sl_rope_params *p, const int32_t *pos,
                                int64_t n, const char *what)
{
    sl_error e;
    const float *cs = NULL;
    CHECK_MSG(sl__rope_cache_get(c, p, pos, n, &cs, &e) == SL_OK, "%s: %s", what, e.msg);
    const size_t floats = (size_t)n * 2 * (size_t)p->n_rot;
    float *want = malloc(floats * sizeof *want);
    CHECK(sl_cpu_rope_table(p, n, pos, want, &e) == SL_OK);
    CHECK_MSG(cs && !memcmp(cs, want, floats * sizeof *want), "%s: the cached table differs "
              "from sl_cpu_rope_table's", what);
    CHECK_MSG(sl__rope_cache_validate(c, &e) == SL_OK, "%s: %s", what, e.msg);
    free(want);
    n_gets++;
    return cs;
}

int main(void)
{
    sl__rope_cache c = {0};
    sl_error e;
    const sl_rope_params global = sl_rope_params_make(SL_ROPE_NEOX, 128, 1e6f);
    sl_rope_params local = global;
    local.freq_base = 1e4f;
    int32_t pos[4] = {17, 18, 19, 20};

    /* one decode token through six layers, five local and one global, twice (q and k) */
    const float *first_local = NULL, *first_global = NULL;
    for (int il = 0; il < 6; il++)
        for (int qk = 0; qk < 2; qk++) {
            const bool g = il % 6 == 5;
            const float *t = get_checked(&c, g ? &global : &local, pos, 1, "layer");
            const float **first = g ? &first_global : &first_local;
            if (!*first) *first = t;
            CHECK_MSG(t == *first, "layer %d: the table was rebuilt for a key it holds", il);
        }
    CHECK_MSG(first_local != first_global, "two configurations share one table");
    /* the next position: new tables, right ones */
    get_checked(&c, &local, pos + 1, 1, "next position");
    /* a batch of four, then one of its prefixes: a different key */
    get_checked(&c, &global, pos, 4, "batch");
    get_checked(&c, &global, pos, 3, "shorter batch");

    /* YaRN and llama3 factors; the factors rewritten in place must not serve the old table */
    sl_rope_params yarn = sl_rope_params_make(SL_ROPE_NORMAL, 64, 1e4f);
    yarn.freq_scale = 0.25f;
    yarn.ext_factor = 1.0f;
    yarn.n_ctx_orig = 4096;
    get_checked(&c, &yarn, pos, 2, "yarn");
    float ff[32];
    for (int i = 0; i < 32; i++) ff[i] = 1.0f + (float)i / 8.0f;
    sl_rope_params fp = sl_rope_params_make(SL_ROPE_NORMAL, 64, 5e5f);
    fp.freq_factors = ff;
    const float *t0 = get_checked(&c, &fp, pos, 2, "factors");
    CHECK(get_checked(&c, &fp, pos, 2, "factors again") == t0);
    ff[7] *= 2.0f;
    get_checked(&c, &fp, pos, 2, "factors rewritten in place");
    /* more configurations than slots: every one still right, the evicted ones rebuilt */
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < SL__ROPE_CACHE_SLOTS + 2; k++) {
            sl_rope_params p = global;
            p.freq_base = 1e4f * (float)(k + 2);
            get_checked(&c, &p, pos + k % 2, 2, "eviction");
        }

    /* refusals */
    const float *cs = NULL;
    sl_rope_params bad = global;
    bad.freq_base = 1.0f;
    CHECK(sl__rope_cache_get(&c, &bad, pos, 1, &cs, &e) == SL_ERR_INVALID && !cs);
    CHECK_CONTAINS(e.msg, "freq_base");
    sl_rope_params big = sl_rope_params_make(SL_ROPE_NEOX, 2048, 1e4f);
    CHECK(sl__rope_cache_get(&c, &big, pos, 1, &cs, &e) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "n_rot = 2048");
    CHECK(sl__rope_cache_get(&c, &global, pos, 0, &cs, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_tok = 0");
    CHECK(sl__rope_cache_validate(&c, &e) == SL_OK);
    /* a broken invariant is named */
    c.slot[0].used = c.clock + 1;
    CHECK(sl__rope_cache_validate(&c, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "slot 0");
    c.slot[0].used = 0;
    sl__rope_cache_free(&c);
    CHECK(sl__rope_cache_validate(&c, &e) == SL_OK && c.clock == 0);
    printf("rope_cache_test: %lld gets checked\n", (long long)n_gets);
    return sl_test_finish("rope_cache_test");
}
