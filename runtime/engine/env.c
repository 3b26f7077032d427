/* runtime/engine/env.c: the library's one reader of the environment (env.h). */
#include "runtime/engine/env.h"

#include <stdlib.h>
#include <string.h>

#include "base/parse.h"

const char *sl_env_device_kind(void)
{
    return getenv("SLUICE_DEVICE");
}

sl_status sl_env_device_options(sl_device_options *o, sl_error *err)
{
    sl_status st;
    const char *v;
    if (!o->kind && (v = getenv("SLUICE_DEVICE")) &&
        (st = sl_device_kind_check("SLUICE_DEVICE", v, err)))
        return st;
    if (!o->kind) o->kind = getenv("SLUICE_DEVICE");
    /* engine tests open their device through sl_model_open: the throttle makes copies slow
     * enough to miss */
    if (o->sim.h2d_gbs == 0.0 && (v = getenv("SLUICE_SIM_H2D_GBS")) &&
        (st = sl_parse_f64("SLUICE_SIM_H2D_GBS", v, (sl_frange){0.0, 1e6, false, false},
                           &o->sim.h2d_gbs, err)))
        return st;
    if (o->sim.latency_ns == 0 && (v = getenv("SLUICE_SIM_LATENCY_NS")) &&
        (st = sl_parse_u64("SLUICE_SIM_LATENCY_NS", v, (sl_urange){0, UINT64_MAX},
                           &o->sim.latency_ns, err)))
        return st;
    return SL_OK;
}

sl_status sl_env_topo_options(sl_topo_options *o, sl_error *err)
{
    *o = (sl_topo_options){.source = SL_TOPO_THIS_MACHINE};
    const char *v = getenv("SLUICE_TOPOLOGY");
    if (!v || !*v) return SL_OK;
    if (!strncmp(v, "xml:", 4) && v[4])
        *o = (sl_topo_options){SL_TOPO_XML, v + 4, "SLUICE_TOPOLOGY"};
    else if (!strncmp(v, "synthetic:", 10) && v[10])
        *o = (sl_topo_options){SL_TOPO_SYNTHETIC, v + 10, "SLUICE_TOPOLOGY"};
    else
        return sl_error_set(err, SL_ERR_INVALID,
                            "SLUICE_TOPOLOGY='%s' is not xml:PATH or synthetic:DESC", v);
    return SL_OK;
}

sl_status sl_env_cpu_isa(sl_cpu_isa *isa, sl_error *err)
{
    *isa = SL_CPU_ISA_AUTO;
    const char *v = getenv("SLUICE_CPU_ISA");
    sl_error e;
    if (v && *v && sl_cpu_isa_parse(v, isa, &e))
        return sl_error_set(err, SL_ERR_INVALID, "SLUICE_CPU_ISA: %s", e.msg);
    return SL_OK;
}

sl_status sl_env_act_f32(bool *on, sl_error *err)
{
    *on = false;
    const char *v = getenv("SLUICE_ACT_F32");
    return v ? sl_parse_bool("SLUICE_ACT_F32", v, on, err) : SL_OK;
}

sl_status sl_env_amx(bool *on, sl_error *err)
{
    const char *v = getenv("SLUICE_AMX");
    bool want = true;
    if (v && sl_parse_bool("SLUICE_AMX", v, &want, err)) return SL_ERR_INVALID;
    *on = *on && want; /* never on where the CPU or the OS has no AMX */
    return SL_OK;
}

static const char *lookup(void *user, const char *name)
{
    (void)user;
    return getenv(name); /* the string stays owned by the environment (o->pinned may keep it) */
}

sl_status sl_env_fetch_options(sl_fetch_options *o, sl_error *err)
{
    return sl_fetch_options_vars(o, lookup, NULL, err);
}
