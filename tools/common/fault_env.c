/* tools/common/fault_env.c: the CLI's test switches SLUICE_FAULT_* (tests/tools' hostile table
 * fails runs through them), read here and installed as the library's one fault hook
 * (base/fault.h): the library itself reads no fault variable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fault.h"
#include "base/parse.h"
#include "tools/common/cli.h"

int sl_cli_fault_env_install(sl_fault_plan *plan, sl_fault_hook *hook)
{
    /* device calls count from 1 (0: never); a reload's sites need a count from 1 */
    static const struct {
        const char *var;
        sl_fault_site site;
        uint64_t lo;
    } k_vars[] = {
        {"SLUICE_FAULT_REGION_ALLOC", SL_FAULT_REGION_ALLOC, 0},
        {"SLUICE_FAULT_HOST_REGISTER", SL_FAULT_HOST_REGISTER, 0},
        {"SLUICE_FAULT_COPY", SL_FAULT_COPY, 0},
        {"SLUICE_FAULT_SWAP_ALLOC", SL_FAULT_SWAP_ALLOC, 1},
        {"SLUICE_FAULT_SWAP_TOUCH", SL_FAULT_SWAP_TOUCH, 1},
    };
    *plan = (sl_fault_plan){0};
    bool any = false;
    for (size_t i = 0; i < sizeof k_vars / sizeof *k_vars; i++) {
        const char *v = getenv(k_vars[i].var);
        if (!v) continue;
        sl_error e;
        if (sl_parse_u64(k_vars[i].var, v, (sl_urange){k_vars[i].lo, UINT64_MAX},
                         &plan->at[k_vars[i].site], &e)) {
            fprintf(stderr, "sluice: %s\n", e.msg);
            return 1;
        }
        any = true;
    }
    if (any) {
        *hook = (sl_fault_hook){sl_fault_plan_fn, plan};
        sl_fault_install(hook);
    }
    return 0;
}
