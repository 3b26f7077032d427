/* sluice place: the placement policy from the command line (scheduler/placement.h).
 *
 *   place show -m M [model and placement flags] [--json] [--summary]
 *   place profile -m M -f TEXT -o STATS.gguf      (place_profile.c)
 *   place solve -m M --stats STATS.gguf --vram-budget SIZE -o M.gpuidx   (place_solve.c)
 *
 * `show` resolves the plan exactly as a model command with the same flags would (the model is
 * opened with plan_only: header, binding and placement, no weight read, no device memory
 * taken) and prints it: the summary (how it was decided, bytes per side, the budget) and one
 * line per tensor (name, type, bytes, CPU or CUDA0, the rule that decided it). */
#include <stdio.h>
#include <string.h>

#include "scheduler/placement.h"
#include "tools/cli/cli.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/place.h"

static void usage(FILE *f)
{
    fputs("usage: sluice place show|profile|solve ... (sluice place SUBCOMMAND --help)\n"
          "usage: sluice place show -m MODEL [model and placement flags] [--json] [--summary]\n"
          "  Prints where every tensor of MODEL lives under the given flags (-ngl, -ot,\n"
          "  --cpu-moe, --n-cpu-moe, --vram-budget, --placement, --device): how the plan was\n"
          "  decided, bytes per side, then one line per tensor with the rule that decided it.\n"
          "  No weight is read.\n"
          "  --json      one JSON object (with a \"tensors\" array unless --summary)\n"
          "  --summary   the summary only\n",
          f);
    sl_cli_model_flags_help(f);
}

static int show(int argc, char **argv)
{
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    bool json = false, summary = false;
    sl_cli_args a;
    sl_cli_args_init(&a, "place show", argc, argv);
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", NULL)) {
            json = true;
        } else if (sl_cli_is(&a, "--summary", NULL)) {
            summary = true;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error("place show", "-m MODEL is required");
    mf.opt.plan_only = true;
    sl_model *m = NULL;
    int rc = sl_cli_model_open(&mf, "place show", &m);
    if (rc) return rc;
    const sl_place_plan *p;
    const sl_place_tensor *t;
    size_t n;
    sl_error err = {0};
    if (sl_model_plan_get(m, &p, &t, &n, &err)) {
        fprintf(stderr, "sluice place show: %s\n", err.msg);
        sl_model_close(m);
        return 1;
    }
    sl_place_plan_write(stdout, p, t, n, !summary, json);
    sl_model_close(m);
    if (fflush(stdout) || ferror(stdout)) {
        perror("sluice place show: standard output");
        return 1;
    }
    return 0;
}

int sl_cli_place(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "show")) return show(argc - 1, argv + 1);
    if (!strcmp(argv[1], "profile")) return sl_cli_place_profile(argc - 1, argv + 1);
    if (!strcmp(argv[1], "solve")) return sl_cli_place_solve(argc - 1, argv + 1);
    fprintf(stderr, "sluice place: unknown subcommand '%s' (show, profile, solve)\n", argv[1]);
    return 2;
}
