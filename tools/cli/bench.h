/* Benchmarks behind `tools/run bench <name>`: each takes argv after "bench" (argv[0] is the
 * benchmark's name) and returns the exit status. Numbers come from these, never from tests. */
#ifndef SL_CLI_BENCH_H
#define SL_CLI_BENCH_H

#include <stdbool.h>

int sl_bench_gguf(int argc, char **argv);
int sl_bench_alloc(int argc, char **argv);
int sl_bench_copy(int argc, char **argv);
int sl_bench_kernels(int argc, char **argv);
int sl_bench_decode(int argc, char **argv);

/* Strict decimal parse of flag `flag` into [lo, hi]; prints the error and returns non-zero. */
int sl_bench_parse_long(const char *s, const char *flag, long lo, long hi, long *out);

#endif
