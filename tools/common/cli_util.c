/* Small helpers shared by the CLI commands: timing and medians for the figures they print. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/cli.h"

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

sl_cli_steps sl_cli_steps_of(double *v, size_t n)
{
    sl_cli_steps s = {0, 0, 0, n};
    if (n == 0) return s;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.median_ms = 1e3 * sl_cli_median(v, n); /* sorts v */
    s.mean_ms = 1e3 * sum / (double)n;
    s.p90_ms = 1e3 * v[(9 * n + 9) / 10 - 1]; /* ceil(0.9 n) - 1, in [0, n) for n >= 1 */
    return s;
}

int sl_cli_append(char **buf, size_t *len, size_t *cap, const void *s, size_t n)
{
    if (n > SIZE_MAX / 4 - *len) return 1;
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return 1;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

int sl_cli_self_exe(const char *cmd, char *buf, size_t cap)
{
    ssize_t n = cap > 1 ? readlink("/proc/self/exe", buf, cap - 1) : -1;
    if (n <= 0 || (size_t)n >= cap - 1) {
        fprintf(stderr, "sluice %s: cannot find this program's path (/proc/self/exe)\n", cmd);
        return 1;
    }
    buf[n] = '\0';
    return 0;
}
