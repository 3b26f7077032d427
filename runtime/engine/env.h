/* runtime/engine/env.h: the SLUICE_* environment the library honours, read here and nowhere
 * else in it (STYLE.md: faults through one hook, the environment in the options' defaults).
 *
 * Each function fills the defaults of one option struct from its variables, at the moment the
 * engine (or a tool) builds that struct, so a variable is read when it always was (a bad
 * SLUICE_CPU_ISA fails a context, not a model's open) and an invalid value is SL_ERR_INVALID
 * naming the variable and the value. The modules below (base/device, alloc/topo, kernels/cpu,
 * scheduler/moe) take the values through their options only.
 *
 *   SLUICE_DEVICE=cuda|sim|auto           device kind where the options leave it NULL
 *   SLUICE_SIM_H2D_GBS=GB/s               sim throttle where the options leave it 0
 *   SLUICE_SIM_LATENCY_NS=ns              sim latency per copy where the options leave it 0
 *   SLUICE_TOPOLOGY=xml:PATH|synthetic:D  the topology instead of this machine's
 *   SLUICE_CPU_ISA=auto|scalar|avx2|avx512  the CPU kernels' dispatch (unset or empty: auto)
 *   SLUICE_ACT_F32=bool                   quantized matmuls on unquantized activations
 *   SLUICE_POSTFETCH_*                    the MoE scheduler's aliases (scheduler/moe/fetch.h)
 * Test faults are not variables of the library: base/fault.h. */
#ifndef SL_RUNTIME_ENV_H
#define SL_RUNTIME_ENV_H

#include <stdbool.h>

#include "alloc/topo.h"
#include "base/device/device.h"
#include "base/status.h"
#include "kernels/cpu/ops.h"
#include "scheduler/moe/fetch.h"

/* SLUICE_DEVICE as set (NULL: unset), unchecked: the engine's test of a device named "sim". */
const char *sl_env_device_kind(void);
/* o->kind from SLUICE_DEVICE when NULL; o->sim.h2d_gbs and o->sim.latency_ns from
 * SLUICE_SIM_H2D_GBS ([0, 1e6]) and SLUICE_SIM_LATENCY_NS when 0. */
sl_status sl_env_device_options(sl_device_options *o, sl_error *err);
/* *o = SLUICE_TOPOLOGY's source (named_by the variable), or this machine when it is unset or
 * empty. */
sl_status sl_env_topo_options(sl_topo_options *o, sl_error *err);
/* SLUICE_CPU_ISA; AUTO when unset or empty. */
sl_status sl_env_cpu_isa(sl_cpu_isa *isa, sl_error *err);
/* SLUICE_ACT_F32; false when unset. */
sl_status sl_env_act_f32(bool *on, sl_error *err);
/* SLUICE_AMX (a bool): 0 keeps the batch kernels off the AMX tiles where the CPU has them (the
 * same bits; for comparisons); *on is left as it is when unset. */
sl_status sl_env_amx(bool *on, sl_error *err);
/* The SLUICE_POSTFETCH_* aliases that are set, over o (sl_fetch_options_vars). */
sl_status sl_env_fetch_options(sl_fetch_options *o, sl_error *err);

#endif
