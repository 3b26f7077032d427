/* Small helpers shared by the CLI commands: timing and medians for the figures they print. */
#include <stdlib.h>
#include <time.h>

#include "tools/cli/cli.h"

double sl_cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int sl_cli_cmp_f64(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sl_cli_median(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, sl_cli_cmp_f64);
    return v[n / 2];
}
