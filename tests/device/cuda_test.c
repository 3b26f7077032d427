/* tests/device/cuda_test.c: the shared device checks on the cuda backend. On a machine without
 * a usable GPU (CI) it prints why and passes: device_test runs the same checks on sim. */
#include <stdio.h>

#include "base/device/device.h"
#include "tests/device/device_checks.h"

int main(void)
{
    sl_device_options o = {0};
    o.kind = "cuda";
    sl_device *d = NULL;
    sl_error err;
    sl_status st = sl_device_open(&o, &d, &err);
    if (st != SL_OK) {
        printf("cuda_test: SKIPPED, no usable GPU (%s: %s)\n", sl_status_name(st), err.msg);
        return 0;
    }
    sl_device_props p;
    if (sl_device_props_get(d, &p, &err) == SL_OK)
        printf("cuda_test: %s, pci %s, cc %d.%d, %llu MiB (%llu free)\n", p.name, p.pci_bus_id,
               p.cc_major, p.cc_minor, (unsigned long long)(p.total_mem_bytes >> 20),
               (unsigned long long)(p.free_mem_bytes >> 20));
    sl_device_close(d);
    return sl_device_checks_run(&o, "cuda") ? 1 : 0;
}
