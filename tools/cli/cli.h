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

#endif
