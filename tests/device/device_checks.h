/* tests/device/device_checks.h: backend-independent property checks of the device interface.
 *
 * Written once and run on sim by device_test (CI) and on cuda by cuda_test (GPU machine), so
 * the sim is the CPU twin of the real device. Every check that depends on timing uses a gate
 * (a host function that blocks its stream until released) instead of sleeps, so the outcome
 * does not depend on machine speed.
 */
#ifndef SL_TESTS_DEVICE_CHECKS_H
#define SL_TESTS_DEVICE_CHECKS_H

#include "base/device/device.h"

/* Opens devices with *base (its kind set by the caller; faults are overridden per check),
 * runs every check, prints a summary line naming `label`; returns the number of failed checks
 * (each failure is reported on stderr with file and line). */
int sl_device_checks_run(const sl_device_options *base, const char *label);

#endif
