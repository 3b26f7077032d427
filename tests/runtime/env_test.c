/* runtime/engine/env.c, the library's one reader of SLUICE_*: each option struct's defaults
 * from its variables (values the options already hold win), invalid values refused naming the
 * variable and the value, and nothing below the engine reading the environment any more. */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/env.h"
#include "tests/testing.h"

static void test_device(void)
{
    sl_error e;
    setenv("SLUICE_DEVICE", "sim", 1);
    setenv("SLUICE_SIM_H2D_GBS", "2.5", 1);
    setenv("SLUICE_SIM_LATENCY_NS", "300", 1);
    sl_device_options o = {0};
    CHECK_MSG(sl_env_device_options(&o, &e) == SL_OK, "%s", e.msg);
    CHECK(o.kind && !strcmp(o.kind, "sim") && o.sim.h2d_gbs == 2.5 && o.sim.latency_ns == 300);
    CHECK(sl_env_device_kind() && !strcmp(sl_env_device_kind(), "sim"));
    sl_device *d = NULL;
    CHECK_MSG(sl_device_open(&o, &d, &e) == SL_OK, "%s", e.msg);
    CHECK(d && sl_device_kind_get(d) == SL_DEVICE_SIM);
    sl_device_close(d);
    /* what the options hold wins */
    o = (sl_device_options){.kind = "auto", .sim = {.h2d_gbs = 7, .latency_ns = 9}};
    CHECK(sl_env_device_options(&o, &e) == SL_OK && !strcmp(o.kind, "auto") &&
          o.sim.h2d_gbs == 7 && o.sim.latency_ns == 9);

    static const struct {
        const char *var, *val;
    } bad[] = {{"SLUICE_DEVICE", "gpu0"},        {"SLUICE_DEVICE", ""},
               {"SLUICE_SIM_H2D_GBS", "nan"},    {"SLUICE_SIM_H2D_GBS", "2e6"},
               {"SLUICE_SIM_H2D_GBS", " 1"},     {"SLUICE_SIM_LATENCY_NS", "-1"},
               {"SLUICE_SIM_LATENCY_NS", "1x"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("SLUICE_DEVICE", "sim", 1);
        setenv("SLUICE_SIM_H2D_GBS", "1", 1);
        setenv("SLUICE_SIM_LATENCY_NS", "1", 1);
        setenv(bad[i].var, bad[i].val, 1);
        o = (sl_device_options){0};
        CHECK_MSG(sl_env_device_options(&o, &e) == SL_ERR_INVALID, "%s='%s' accepted",
                  bad[i].var, bad[i].val);
        CHECK_CONTAINS(e.msg, bad[i].var);
        if (bad[i].val[0]) CHECK_CONTAINS(e.msg, bad[i].val);
    }
    unsetenv("SLUICE_DEVICE");
    unsetenv("SLUICE_SIM_H2D_GBS");
    unsetenv("SLUICE_SIM_LATENCY_NS");
    o = (sl_device_options){0};
    CHECK(sl_env_device_options(&o, &e) == SL_OK && !o.kind && o.sim.h2d_gbs == 0 &&
          o.sim.latency_ns == 0 && !sl_env_device_kind());
}

static void test_topology(void)
{
    sl_error e;
    sl_topo_options o;
    sl_topo *t = NULL;
    unsetenv("SLUICE_TOPOLOGY");
    CHECK(sl_env_topo_options(&o, &e) == SL_OK && o.source == SL_TOPO_THIS_MACHINE);
    setenv("SLUICE_TOPOLOGY", "", 1);
    CHECK(sl_env_topo_options(&o, &e) == SL_OK && o.source == SL_TOPO_THIS_MACHINE);
    setenv("SLUICE_TOPOLOGY", "synthetic:pack:3 [numa] core:1 pu:1", 1);
    CHECK_MSG(sl_env_topo_options(&o, &e) == SL_OK, "%s", e.msg);
    CHECK(o.source == SL_TOPO_SYNTHETIC && !strcmp(o.named_by, "SLUICE_TOPOLOGY"));
    CHECK_MSG(sl_topo_load(&o, &t, &e) == SL_OK, "%s", e.msg);
    CHECK(sl_topo_node_count(t) == 3);
    sl_topo_destroy(t);
    /* named by the variable: a source that does not load names it */
    setenv("SLUICE_TOPOLOGY", "xml:/no/such.xml", 1);
    CHECK(sl_env_topo_options(&o, &e) == SL_OK && o.source == SL_TOPO_XML);
    CHECK(sl_topo_load(&o, &t, &e) == SL_ERR_INVALID && t == NULL);
    CHECK_CONTAINS(e.msg, "SLUICE_TOPOLOGY='xml:/no/such.xml'");
    static const char *const bad[] = {"json:foo", "xml:", "synthetic:", "bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("SLUICE_TOPOLOGY", bad[i], 1);
        CHECK_MSG(sl_env_topo_options(&o, &e) == SL_ERR_INVALID, "'%s' accepted", bad[i]);
        CHECK_CONTAINS(e.msg, "SLUICE_TOPOLOGY='");
        CHECK_CONTAINS(e.msg, bad[i]);
    }
    unsetenv("SLUICE_TOPOLOGY");
}

static void test_isa_act_fetch(void)
{
    sl_error e;
    sl_cpu_isa isa;
    setenv("SLUICE_CPU_ISA", "scalar", 1);
    CHECK(sl_env_cpu_isa(&isa, &e) == SL_OK && isa == SL_CPU_ISA_SCALAR);
    setenv("SLUICE_CPU_ISA", "sse9", 1);
    CHECK(sl_env_cpu_isa(&isa, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "SLUICE_CPU_ISA");
    CHECK_CONTAINS(e.msg, "sse9");
    setenv("SLUICE_CPU_ISA", "", 1);
    CHECK(sl_env_cpu_isa(&isa, &e) == SL_OK && isa == SL_CPU_ISA_AUTO);
    unsetenv("SLUICE_CPU_ISA");
    CHECK(sl_env_cpu_isa(&isa, &e) == SL_OK && isa == SL_CPU_ISA_AUTO);

    bool on = true;
    CHECK(sl_env_act_f32(&on, &e) == SL_OK && !on);
    setenv("SLUICE_ACT_F32", "1", 1);
    CHECK(sl_env_act_f32(&on, &e) == SL_OK && on);
    setenv("SLUICE_ACT_F32", "yes", 1);
    CHECK(sl_env_act_f32(&on, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "SLUICE_ACT_F32");
    unsetenv("SLUICE_ACT_F32");

    /* SLUICE_AMX only turns the tiles off: unset or 1 keeps what the CPU allows */
    on = true;
    CHECK(sl_env_amx(&on, &e) == SL_OK && on);
    on = false;
    setenv("SLUICE_AMX", "1", 1);
    CHECK(sl_env_amx(&on, &e) == SL_OK && !on);
    on = true;
    setenv("SLUICE_AMX", "0", 1);
    CHECK(sl_env_amx(&on, &e) == SL_OK && !on);
    setenv("SLUICE_AMX", "maybe", 1);
    on = true;
    CHECK(sl_env_amx(&on, &e) == SL_ERR_INVALID && on);
    CHECK_CONTAINS(e.msg, "SLUICE_AMX");
    setenv("SLUICE_AMX", "", 1); /* set but empty: refused, as SLUICE_ACT_F32 */
    CHECK(sl_env_amx(&on, &e) == SL_ERR_INVALID && on);
    CHECK_CONTAINS(e.msg, "SLUICE_AMX");
    unsetenv("SLUICE_AMX");

    sl_fetch_options fo = sl_fetch_options_default();
    setenv("SLUICE_POSTFETCH_MAX_TRANSFERS", "5", 1);
    CHECK_MSG(sl_env_fetch_options(&fo, &e) == SL_OK && fo.max_transfers == 5, "%s", e.msg);
    setenv("SLUICE_POSTFETCH_MAX_TRANSFERS", "5x", 1);
    CHECK(sl_env_fetch_options(&fo, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "SLUICE_POSTFETCH_MAX_TRANSFERS");
    unsetenv("SLUICE_POSTFETCH_MAX_TRANSFERS");
}

int main(void)
{
    test_device();
    test_topology();
    test_isa_act_fetch();
    return sl_test_finish("env_test");
}
