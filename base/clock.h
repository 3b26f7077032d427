/* base/clock.h: the process's one monotonic clock reading (CLOCK_MONOTONIC), in nanoseconds and
 * in seconds, for every module's timestamps, deadlines and timings. Header-only, libc only;
 * thread-safe (no state). */
#ifndef SL_BASE_CLOCK_H
#define SL_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sl_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double sl_clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
