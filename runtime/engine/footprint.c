/* runtime/engine/footprint.c: sl_model_footprint (sluice.h) — a model's device and host bytes from
 * its metadata, through the same placement the open would resolve (plan_only: the header,
 * the binding and the plan; no tensor read, no device memory taken). */
#include <stdio.h>

#include "runtime/engine/model.h"
#include "runtime/struct_size.h"

sl_status sl_model_footprint(const char *path, const sl_model_options *opt, sl_footprint *out,
                             sl_error *err)
{
    if (!path || !out)
        return sl_error_set(err, SL_ERR_INVALID, "sl_model_footprint: NULL path or out");
    sl_status st;
    if (opt && (st = sl__struct_size_check("sl_model_options", opt->struct_size, sizeof *opt,
                                           err)))
        return st;
    sl_model_options o = opt ? *opt : sl_model_options_default();
    o.plan_only = true;
    o.progress = false;
    sl_model *m = NULL;
    st = sl_model_open(path, &o, &m, err);
    if (st) return st;
    const sl_place_plan *p = &m->plan;
    *out = (sl_footprint){.device_bytes = p->device_bytes, .host_bytes = p->host_bytes,
                          .weight_bytes = p->device_bytes + p->host_bytes,
                          .scratch_bytes = sl__model_reserve_bytes(m),
                          .placement = (sl_placement)p->mode, .n_gpu_layers = p->n_gpu_layers,
                          .n_cpu_moe = p->n_cpu_moe};
    sl_model_close(m);
    return SL_OK;
}
