/* A one-line progress display on stderr for the CLI's long steps (writing a model, re-
 * quantizing), drawn only when stderr is a terminal so that logs and pipes stay clean.
 * Redrawn at most ten times a second and once at 100%; end() clears the line. The update has
 * the shape of sl_gguf_writer_options.progress, so a writer can drive it directly. */
#ifndef SL_CLI_PROGRESS_H
#define SL_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

/* Invariant: drawn implies tty; last_s <= now. */
typedef struct sl_cli_progress {
    const char *what; /* shown before the figures; not owned */
    bool tty, drawn;
    double t0_s, last_s;
} sl_cli_progress;

void sl_cli_progress_start(sl_cli_progress *p, const char *what);
/* user: an sl_cli_progress. done <= total bytes. */
void sl_cli_progress_update(void *user, uint64_t done, uint64_t total);
void sl_cli_progress_end(sl_cli_progress *p);

#endif
