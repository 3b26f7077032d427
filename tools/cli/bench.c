#include <stdio.h>
#include "tools/cli/cli.h"
int sl_cli_bench(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "sluice bench: placeholder during parallel development\n");
    return 2;
}
