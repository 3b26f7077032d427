/* Serving residency through the engine on the sim device: sl_model_footprint against the
 * loaded model's bytes per side, for several placements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

static char g_dir[1024];

static void model_path(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.gguf", g_dir, name);
}

static sl_model_options sim_opts(sl_placement pl)
{
    sl_model_options o = sl_model_options_default();
    o.device = "sim";
    o.placement = pl;
    o.progress = false;
    o.io = SL_LOAD_PREAD;
    return o;
}

/* The footprint equals what an open with the same options puts on each side. */
static void test_footprint(const char *path)
{
    const struct { sl_placement pl; int ngl; } cases[] = {
        {SL_PLACE_GPU, 0}, {SL_PLACE_CPU, 0}, {SL_PLACE_LAYERS, 1}, {SL_PLACE_EXPERTS_CPU, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_model_options o = sim_opts(cases[i].pl);
        o.gpu_layers = cases[i].ngl;
        sl_footprint fp;
        sl_error err;
        CHECK_MSG(sl_model_footprint(path, &o, &fp, &err) == SL_OK, "%s", err.msg);
        sl_model *m = NULL;
        CHECK_MSG(sl_model_open(path, &o, &m, &err) == SL_OK, "%s", err.msg);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        CHECK_MSG(fp.device_bytes == info.gpu_bytes && fp.host_bytes == info.host_bytes,
                  "case %zu: footprint %llu/%llu, loaded %llu/%llu", i,
                  (unsigned long long)fp.device_bytes, (unsigned long long)fp.host_bytes,
                  (unsigned long long)info.gpu_bytes, (unsigned long long)info.host_bytes);
        CHECK(fp.weight_bytes == fp.device_bytes + fp.host_bytes && fp.scratch_bytes > 0);
        CHECK(fp.placement == cases[i].pl);
        if (cases[i].pl == SL_PLACE_CPU) CHECK(fp.device_bytes == 0);
        if (cases[i].pl == SL_PLACE_GPU) CHECK(fp.host_bytes < fp.device_bytes);
        sl_model_close(m);
    }
    sl_footprint fp;
    sl_error err;
    char missing[1100];
    model_path("missing", missing, sizeof missing);
    CHECK(sl_model_footprint(missing, NULL, &fp, &err) != SL_OK);
    CHECK(sl_model_footprint(NULL, NULL, &fp, &err) == SL_ERR_INVALID);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s", tmp ? tmp : "/tmp");
    char moe[1100];
    model_path("moe", moe, sizeof moe);
    tm_params p;
    tm_defaults("qwen3moe", &p);
    sl_error err;
    CHECK_MSG(tm_write(&p, moe, &err) == SL_OK, "%s", err.msg);
    test_footprint(moe);
    return sl_test_finish("residency_test");
}
