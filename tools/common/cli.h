/* Subcommands of tools/run (the `sluice` binary). Each takes argv after the command name
 * (argv[0] is the command) and returns the process exit status; they print their own errors. */
#ifndef SL_CLI_H
#define SL_CLI_H

int sl_cli_inspect(int argc, char **argv);
int sl_cli_mkmodel(int argc, char **argv);
int sl_cli_bench(int argc, char **argv);
int sl_cli_demo(int argc, char **argv);
int sl_cli_generate(int argc, char **argv);
int sl_cli_perplexity(int argc, char **argv);
int sl_cli_eval(int argc, char **argv);
int sl_cli_place(int argc, char **argv);
int sl_cli_serve(int argc, char **argv);
int sl_cli_requant(int argc, char **argv);

/* Shared by the commands (tools/common/cli_util.c). */
#include <stddef.h>
double sl_cli_now_s(void);                          /* CLOCK_MONOTONIC seconds */
int sl_cli_cmp_f64(const void *a, const void *b);  /* qsort comparator, ascending doubles */
double sl_cli_median(double *v, size_t n);          /* sorts v in place; 0 for n == 0 */
/* Per-step times of a timed loop (seconds in v, sorted in place): median (v[n / 2]), mean
 * (sum / n: tok/s = n / sum = 1 / mean, llama-bench's tg) and p90 (nearest rank,
 * v[ceil(0.9 n) - 1]), in milliseconds; all 0 for n == 0. */
typedef struct sl_cli_steps {
    double median_ms, mean_ms, p90_ms;
    size_t n;
} sl_cli_steps;
sl_cli_steps sl_cli_steps_of(double *v, size_t n);
/* Appends n bytes to the malloc'd buffer *buf (*len used of *cap, doubled as needed) and keeps
 * it NUL-terminated; 1 when out of memory (the buffer is then unchanged). */
int sl_cli_append(char **buf, size_t *len, size_t *cap, const void *s, size_t n);
/* The path of this program (/proc/self/exe) into buf; 1 after "sluice CMD: ..." on failure. */
int sl_cli_self_exe(const char *cmd, char *buf, size_t cap);

/* The test switches SLUICE_FAULT_REGION_ALLOC / _HOST_REGISTER / _COPY / _SWAP_ALLOC /
 * _SWAP_TOUCH (the Nth such call fails) installed as the library's fault hook (base/fault.h);
 * plan and hook must outlive the run. 1 after "sluice: VAR: ..." for a bad value. */
#include "base/fault.h"
int sl_cli_fault_env_install(sl_fault_plan *plan, sl_fault_hook *hook);

#endif
