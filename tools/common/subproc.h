/* Running another program and capturing what it prints (bench compare runs llama.cpp's tools and
 * the sluice binary itself this way).
 *
 * Contract: sl_subproc_run starts argv[0] (a path, or a name looked up in PATH) with posix_spawn
 * — no shell, so arguments are never re-parsed — with standard input /dev/null, waits for it and
 * returns its standard output and standard error as two NUL-terminated malloc'd buffers, each
 * cut at opt->max_bytes (the child keeps running and the rest is read and dropped, so it never
 * blocks on a full pipe). With opt->stderr_inherit the child writes to the caller's standard
 * error instead (its progress bars stay visible) and out->err is "". opt->tick, when set, is
 * called about every 250 ms while the child runs (a progress display). On return *exit_code is
 * the exit status (0..255), or 128 + N when signal N ended it. Fails (SL_ERR_IO naming the
 * program) only when the program cannot be started or read; a non-zero exit is not a failure.
 * The caller frees out->out and out->err (sl_subproc_result_free). Thread-safe: no shared
 * state, but SIGCHLD must not be ignored by the process. */
#ifndef SL_CLI_SUBPROC_H
#define SL_CLI_SUBPROC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct sl_subproc_result {
    char *out, *err;        /* NUL-terminated; malloc'd */
    size_t out_len, err_len;
    int exit_code;          /* status, or 128 + signal */
    double seconds;         /* wall time from start to exit */
} sl_subproc_result;

typedef struct sl_subproc_opts {
    size_t max_bytes;              /* per stream; 0: 64 MiB */
    bool stderr_inherit;
    void (*tick)(void *user, double elapsed_s);
    void *user;
} sl_subproc_opts;

/* opt NULL: the defaults (64 MiB, both streams captured, no tick). The caller's environment is
 * passed on. */
sl_status sl_subproc_run(char *const argv[], const sl_subproc_opts *opt, sl_subproc_result *out,
                         sl_error *err);
void sl_subproc_result_free(sl_subproc_result *r);

#endif
