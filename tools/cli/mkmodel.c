#include <stdio.h>
#include "tools/cli/cli.h"
int sl_cli_mkmodel(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "sluice mkmodel: placeholder during parallel development\n");
    return 2;
}
