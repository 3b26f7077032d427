/* `tools/run requant`: one tensor (or a regex of tensors) of a GGUF file in another type, with
 * Sluice's quantizers, every other byte kept (tools/lib/requant.h). The step a live-swap sweep
 * script runs between rounds (tools/examples/hotswap_sweep.sh). */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tools/cli/cli.h"
#include "tools/lib/requant.h"

static void usage(FILE *f)
{
    fputs("usage: tools/run requant -m FILE --tensor NAME|REGEX --type T -o OUT\n"
          "\n"
          "Rewrites the matching tensors (a POSIX extended regex matched against the whole\n"
          "name, so a plain name matches itself) in type T (F32, F16, BF16, Q4_0, Q4_1, Q5_0,\n"
          "Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, ...), keeping every other tensor's bytes and every\n"
          "key. OUT may be FILE: it is replaced atomically (rename), so a model that has FILE\n"
          "open reloads it with sl_reload_changed / --hotswap. A shard of a set is rewritten\n"
          "alone.\n",
          f);
}

int sl_cli_requant(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *pat = NULL, *type = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &in
                           : !strcmp(a, "-o") || !strcmp(a, "--output") ? &out
                           : !strcmp(a, "--tensor") ? &pat
                           : !strcmp(a, "--type") ? &type : NULL;
        if (!dst) {
            fprintf(stderr, "sluice requant: unknown argument '%s' (see --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc || !*argv[i + 1]) {
            fprintf(stderr, "sluice requant: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!in || !out || !pat || !type) {
        fprintf(stderr, "sluice requant: -m, --tensor, --type and -o are required\n");
        usage(stderr);
        return 2;
    }
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(type);
    if (!ti) {
        fprintf(stderr, "sluice requant: --type '%s': unknown type\n", type);
        return 2;
    }
    uint32_t n = 0;
    sl_error err;
    const double t0 = sl_cli_now_s();
    if (sl_requant_file(in, out, pat, ti->code, &n, &err)) {
        fprintf(stderr, "sluice requant: %s: %s\n", in, err.msg);
        return 1;
    }
    printf("requant: %u tensor%s -> %s, written to %s in %.2f s\n", n, n == 1 ? "" : "s",
           ti->name, out, sl_cli_now_s() - t0);
    return 0;
}
