/* `tools/run demo`: the README's main job. For now: write the built-in default model (a small
 * synthetic qwen3moe from mkmodel's defaults) and inspect it; once models run, this runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"

int sl_cli_demo(int argc, char **argv)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: tools/run demo [--dir DIR]\n"
                   "  writes the default synthetic model (mkmodel's defaults) to DIR (default $TMPDIR\n"
                   "  or /tmp) as sluice-default.gguf, then inspects it\n");
            return 0;
        } else {
            fprintf(stderr, "sluice demo: unknown or incomplete flag '%s'\n", argv[i]);
            return 2;
        }
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/sluice-default.gguf", dir) >= sizeof path) {
        fprintf(stderr, "sluice demo: --dir '%s' is too long\n", dir);
        return 2;
    }
    printf("== 1. mkmodel: the default synthetic model -> %s\n", path);
    fflush(stdout);
    char *mk[] = {"mkmodel", "-o", path, NULL};
    int rc = sl_cli_mkmodel(3, mk);
    if (rc) return rc;
    printf("\n== 2. inspect %s\n", path);
    fflush(stdout);
    char *in[] = {"inspect", path, NULL};
    return sl_cli_inspect(2, in);
}
