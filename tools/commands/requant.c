/* `tools/run requant`: one tensor (or a regex of tensors) of a GGUF file in another type, with
 * Sluice's quantizers, every other byte kept (tools/lib/requant.h). The step a live-swap sweep
 * script runs between rounds (tools/examples/hotswap_sweep.sh). SIGINT / SIGTERM while writing
 * leave no temporary behind and exit 130 / 143. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/interrupt.h"
#include "tools/common/model_flags.h"
#include "tools/common/progress.h"
#include "tools/lib/requant.h"

static void usage(FILE *f)
{
    fputs("usage: tools/run requant -m FILE --tensor NAME|REGEX --type T -o OUT [--in-place]\n"
          "\n"
          "Rewrites the matching tensors (a POSIX extended regex matched against the whole\n"
          "name, so a plain name matches itself) in type T (F32, F16, BF16, Q4_0, Q4_1, Q5_0,\n"
          "Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, ...), keeping every other tensor's\n"
          "bytes and every key. OUT is checked like every output (never an input of the run);\n"
          "with --in-place OUT must be FILE itself, replaced atomically (written beside it,\n"
          "then renamed), so a model that has FILE open reloads it with sl_reload_changed /\n"
          "--hotswap. A shard of a set is rewritten alone.\n",
          f);
}

int sl_cli_requant(int argc, char **argv)
{
    const char *cmd = "requant";
    const char *in = NULL, *out = NULL, *pat = NULL, *type = NULL;
    bool in_place = false;
    sl_cli_args a;
    sl_cli_args_init(&a, cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        }
        if (sl_cli_is(&a, "--in-place", NULL)) {
            in_place = true;
            continue;
        }
        const char **dst = sl_cli_is(&a, "-m", "--model")    ? &in
                           : sl_cli_is(&a, "-o", "--output") ? &out
                           : sl_cli_is(&a, "--tensor", NULL) ? &pat
                           : sl_cli_is(&a, "--type", NULL)   ? &type
                                                             : NULL;
        if (!dst) return sl_cli_unknown(&a);
        const char *v = sl_cli_value(&a);
        if (!v) return 2;
        if (!*v) return sl_cli_usage_error(cmd, "%s: empty value", a.flag);
        *dst = v;
    }
    if (a.status) return a.status;
    if (!in || !out || !pat || !type)
        return sl_cli_usage_error(cmd, "-m, --tensor, --type and -o are required");
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(type);
    if (!ti) return sl_cli_usage_error(cmd, "--type '%s': unknown type", type);
    sl_cli_io io;
    sl_cli_io_init(&io, cmd);
    sl_cli_out o = {0};
    int rc = 1;
    if (in_place) {
        /* the one output allowed to be the input: the same file, by identity */
        struct stat si, so;
        if (stat(in, &si) || stat(out, &so) || si.st_dev != so.st_dev || si.st_ino != so.st_ino) {
            fprintf(stderr, "sluice %s: --in-place: -o %s is not -m %s\n", cmd, out, in);
            goto done;
        }
    } else if (sl_cli_io_add_model(&io, in, NULL) ||
               (rc = sl_cli_out_prepare(&io, &o, "-o", out, SL_CLI_OUT_BY_NAME))) {
        goto done;
    }
    rc = 1;
    uint32_t n = 0;
    sl_error err = {0};
    const double t0 = sl_cli_now_s();
    sl_cli_progress bar;
    sl_cli_progress_start(&bar, "requant: writing");
    sl_cli_interrupt_catch();
    const sl_status st = sl_requant_file(in, in_place ? out : sl_cli_out_name(&o), pat, ti->code,
                                         &n, sl_cli_progress_update, &bar, sl_cli_interrupted,
                                         NULL, &err);
    sl_cli_progress_end(&bar);
    if (st && sl_cli_interrupt_status()) {
        /* the writer removed its file; done: discards the command's own temporary */
        fprintf(stderr, "sluice %s: %s: stopped, nothing written to %s (%s)\n", cmd,
                sl_cli_interrupt_name(), out, err.msg);
        rc = sl_cli_interrupt_status();
        goto done;
    }
    if (st == SL_ERR_NOT_FOUND) {
        fprintf(stderr, "sluice %s: %s: --tensor '%s': %s\n", cmd, in, pat, err.msg);
        goto done;
    }
    if (st) {
        fprintf(stderr, "sluice %s: %s: %s\n", cmd, in, err.msg);
        goto done;
    }
    if (!in_place && sl_cli_out_commit(&io, &o)) goto done;
    printf("requant: %u tensor%s -> %s, written to %s in %.2f s\n", n, n == 1 ? "" : "s",
           ti->name, out, sl_cli_now_s() - t0);
    rc = sl_cli_stdout_check(cmd);
done:
    sl_cli_out_discard(&o);
    sl_cli_io_free(&io);
    return rc;
}
