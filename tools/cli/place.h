/* The subcommands of `sluice place` (tools/cli/place*.c): argv after "place" (argv[0] is the
 * subcommand); each returns the exit status and prints its own errors. */
#ifndef SL_CLI_PLACE_H
#define SL_CLI_PLACE_H

int sl_cli_place_profile(int argc, char **argv);
int sl_cli_place_solve(int argc, char **argv);

#endif
