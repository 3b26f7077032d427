/* sluice.h's option structs open with struct_size (runtime/struct_size.h): *_default() sets it,
 * and every call that reads one refuses another value (0, one field short, garbage) with
 * SL_ERR_INVALID naming the struct and both sizes, before reading any other field; NULL
 * options still mean the defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

static const size_t k_bad[] = {0, 8, 4096, (size_t)0xdeadbeefcafe};

/* err says "WHAT: struct_size is BAD, this library's is WANT" */
static void check_refused(const char *what, size_t bad, size_t want, sl_status st,
                          const sl_error *e)
{
    char expect[160];
    snprintf(expect, sizeof expect, "%s: struct_size is %zu, this library's is %zu", what, bad,
             want);
    CHECK_MSG(st == SL_ERR_INVALID && strstr(e->msg, expect), "%s size %zu: %d %s", what, bad,
              (int)st, e->msg);
}

static void test_defaults(void)
{
    CHECK(sl_model_options_default().struct_size == sizeof(sl_model_options));
    CHECK(sl_ctx_options_default().struct_size == sizeof(sl_ctx_options));
    CHECK(sl_runtime_options_default().struct_size == sizeof(sl_runtime_options));
    CHECK(sl_sampler_options_default().struct_size == sizeof(sl_sampler_options));
}

static void test_model(const char *path)
{
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        sl_model_options o = sl_model_options_default();
        o.struct_size = k_bad[i];
        sl_model *m = (sl_model *)1;
        sl_error e = {0};
        check_refused("sl_model_options", k_bad[i], sizeof o, sl_model_open(path, &o, &m, &e), &e);
        CHECK(m == NULL);
        sl_footprint fp;
        check_refused("sl_model_options", k_bad[i], sizeof o,
                      sl_model_footprint(path, &o, &fp, &e), &e);
        /* the thread rule reads no field of a struct of another layout */
        o.n_threads = 3;
        CHECK(sl_model_options_threads(&o) == sl_model_options_threads(NULL));
    }
    sl_model_options o = sl_model_options_default();
    o.n_threads = 3;
    CHECK(sl_model_options_threads(&o) == 3);
}

static void test_ctx(const char *path)
{
    sl_model_options mo = sl_model_options_default();
    mo.placement = SL_PLACE_CPU;
    mo.progress = false;
    sl_model *m = NULL;
    sl_error e = {0};
    CHECK_MSG(sl_model_open(path, &mo, &m, &e) == SL_OK, "%s", e.msg);
    if (!m) return;
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        sl_ctx_options o = sl_ctx_options_default();
        o.struct_size = k_bad[i];
        sl_ctx *c = NULL;
        check_refused("sl_ctx_options", k_bad[i], sizeof o, sl_ctx_create(m, &o, &c, &e), &e);
        CHECK(c == NULL);
    }
    sl_ctx *c = NULL;
    CHECK_MSG(sl_ctx_create(m, NULL, &c, &e) == SL_OK, "NULL options: %s", e.msg);
    sl_ctx_destroy(c);
    sl_model_close(m);
}

static void test_runtime_and_sampler(void)
{
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        sl_runtime_options ro = sl_runtime_options_default();
        ro.struct_size = k_bad[i];
        sl_runtime *rt = NULL;
        sl_error e = {0};
        check_refused("sl_runtime_options", k_bad[i], sizeof ro,
                      sl_runtime_create(&ro, &rt, &e), &e);
        CHECK(rt == NULL);
        sl_sampler_options so = sl_sampler_options_default();
        so.struct_size = k_bad[i];
        sl_sampler *s = NULL;
        check_refused("sl_sampler_options", k_bad[i], sizeof so,
                      sl_sampler_create(&so, &s, &e), &e);
        CHECK(s == NULL);
    }
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/struct_size_test.gguf", tmp ? tmp : "/tmp");
    tm_params p;
    tm_defaults("llama", &p);
    sl_error e = {0};
    CHECK_MSG(tm_write(&p, path, &e) == SL_OK, "%s", e.msg);
    test_defaults();
    test_model(path);
    test_ctx(path);
    test_runtime_and_sampler();
    return sl_test_finish("struct_size_test");
}
