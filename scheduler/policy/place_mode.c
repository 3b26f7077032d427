/* scheduler/policy/place_mode: the placement modes' table (place_mode.h). */
#include "scheduler/policy/place_mode.h"

#include <stdio.h>
#include <string.h>

static const sl_place_mode_info modes[SL_PLACE_COUNT] = {
    [SL_PLACE_AUTO] = {"auto", "auto", "all on the GPU if it fits, else the --n-cpu-moe, else the "
                       "-ngl that fits", false},
    [SL_PLACE_GPU] = {"gpu", "gpu", "everything on the GPU", false},
    [SL_PLACE_LAYERS] = {"layers", "layers", "the last -ngl layers on the GPU", false},
    [SL_PLACE_EXPERTS_CPU] = {"experts-cpu", "experts-cpu",
                              "routed experts on the CPU, the rest on the GPU", false},
    [SL_PLACE_CPU] = {"cpu", "cpu", "everything on the CPU", false},
    [SL_PLACE_HOT_COLD] = {"hot-cold", "hot-cold: dense FFNs split by the neuron index",
                           "FFNs split by --gpu-index: hot neurons on the GPU, cold ones on "
                           "the CPU, at the same time", true},
};

const sl_place_mode_info *sl_place_mode_info_get(sl_placement m)
{
    return (unsigned)m < SL_PLACE_COUNT ? &modes[m] : NULL;
}

const char *sl_place_mode_name(sl_placement m)
{
    const sl_place_mode_info *i = sl_place_mode_info_get(m);
    return i ? i->name : NULL;
}

const char *sl_place_mode_names(char *buf, size_t cap, const char *sep)
{
    if (!buf || !cap) return buf;
    size_t len = 0;
    buf[0] = '\0';
    for (int m = 0; m < SL_PLACE_COUNT && len < cap; m++) {
        const int k = snprintf(buf + len, cap - len, "%s%s", m ? sep : "", modes[m].name);
        if (k < 0) break;
        len += (size_t)k;
    }
    return buf;
}

sl_status sl_place_mode_parse(const char *text, sl_placement *out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "sl_place_mode_parse: NULL argument");
    for (int m = 0; text && m < SL_PLACE_COUNT; m++)
        if (!strcmp(text, modes[m].name)) {
            *out = (sl_placement)m;
            return SL_OK;
        }
    char names[128];
    return sl_error_set(err, SL_ERR_INVALID, "placement '%s': unknown (%s)", text ? text : "(null)",
                        sl_place_mode_names(names, sizeof names, ", "));
}
