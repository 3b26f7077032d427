/* SIGINT and SIGTERM while a command writes a file (mkmodel, requant): the handler only sets a
 * flag, which the writer asks before each write (sl_gguf_writer_options.cancelled); the writer
 * then fails, removes its ".partial" file, and the command exits 128 + the signal (130, 143).
 * The handler is installed once (SA_RESETHAND): a second Ctrl-C kills at once. */
#ifndef SL_CLI_INTERRUPT_H
#define SL_CLI_INTERRUPT_H

#include <stdbool.h>

/* Installs the handler for SIGINT and SIGTERM. */
void sl_cli_interrupt_catch(void);
/* Whether one arrived (user ignored): the shape of a cancelled hook. */
bool sl_cli_interrupted(void *user);
/* 128 + the signal that arrived, or 0. */
int sl_cli_interrupt_status(void);
/* The signal's name ("SIGINT", "SIGTERM"), or "" when none arrived. */
const char *sl_cli_interrupt_name(void);

#endif
